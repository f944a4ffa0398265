#!/usr/bin/env python3
"""The hidden world of a made-up 5v5 role shooter ("Bastion"): match log, candidate pools, true scores.

A stand-in for a studio's own data, standalone (numpy only, seeded): nothing here is known to
mgmatch, which sees only the files this script writes.

World. A population of players, each with six observable features (what a studio logs):

====  ============  ===============================================
 #    feature       meaning
====  ============  ===============================================
 0    skill_z       rating as a z-score (the ``skill`` field is 1500 + 300·skill_z)
 1    aggression    0…1, how often the player pushes
 2    teamwork      0…1, assists and objective time share
 3    tilt          0…1, recent rage-quit / report rate
 4    experience    log hours played, standardized
 5    voice         1 when the player uses voice chat
====  ============  ===============================================

and the roles they accept (tank, healer, dps) and sometimes a premade party of two.

Hidden engagement of a match (what players' retention will say, before noise): with S_j the sum
of a feature over team j's five players,

    E = 1.0 − 0.5·|S0_skill − S1_skill| − 0.15·|S0_exp − S1_exp| + 0.25·min(S0_tw, S1_tw)
        − 0.3·|S0_agg + S1_agg − 5| − 0.4·max(0, S0_tilt + S1_tilt − 3) + 0.1·min(S0_voice, S1_voice)

(close games, a cooperative weaker side, a moderate amount of aggression, not too many tilted
players, voice on both sides). A logged match's ``engagement`` is E plus Gaussian noise (σ 0.15).
E is piecewise linear in the team sums, so :func:`truth_model` writes it *exactly* as an
``mgmatch-engagement/v1`` network: the measuring script proves the true best assignment of a
pool with the exact solver. The studio never sees it; it fits its own model from the log.

Commands (all seeded)::

    python simulate.py log   --matches 20000 --seed 1 --out log.jsonl     # spec §5 match log
    python simulate.py pools --count 400 --seed 2 --out pools/             # spec §1 instances, 20–40 players
    python simulate.py truth --out truth.json                             # the hidden E as a model file
    python simulate.py score --instance pools/pool-00000.json --solution sol.json   # true E of teams
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

FEATURES = ("skill_z", "aggression", "teamwork", "tilt", "experience", "voice")
F = len(FEATURES)
TEAM = 5
NOISE = 0.15
ROLES = ("tank", "healer", "dps")
SLOTS = {"tank": 1, "healer": 1, "dps": 3}
RULES = [{"kind": "roles", "slots": SLOTS}, {"kind": "skill_balance", "max_diff": 60.0}, {"kind": "party_together"}]


# --------------------------------------------------------------------------- the hidden objective


def true_engagement(s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    """Hidden E of matches from the team feature sums ``s0``, ``s1`` [..., F] (no noise)."""
    d = s0 - s1
    return (1.0 - 0.5 * np.abs(d[..., 0]) - 0.15 * np.abs(d[..., 4])
            + 0.25 * np.minimum(s0[..., 2], s1[..., 2])
            - 0.3 * np.abs(s0[..., 1] + s1[..., 1] - 5.0)
            - 0.4 * np.maximum(0.0, s0[..., 3] + s1[..., 3] - 3.0)
            + 0.1 * np.minimum(s0[..., 5], s1[..., 5]))


def truth_model() -> dict:
    """E as an ``mgmatch-engagement/v1`` network: identity player layer, sums per team, one ReLU layer.

    Uses |x| = relu(x) + relu(−x) and min(a, b) = relu(a) − relu(a − b) for a ≥ 0 (teamwork and voice
    sums are never negative).
    """
    eye = np.eye(F).tolist()

    def unit(c0: dict[int, float], c1: dict[int, float], bias: float = 0.0) -> tuple[list[float], float]:
        w = [0.0] * (2 * F)
        for k, v in c0.items():
            w[k] = v
        for k, v in c1.items():
            w[F + k] = v
        return w, bias

    units = [  # (weights over concat(S0, S1), bias), output coefficient
        (unit({0: 1}, {0: -1}), -0.5), (unit({0: -1}, {0: 1}), -0.5),
        (unit({4: 1}, {4: -1}), -0.15), (unit({4: -1}, {4: 1}), -0.15),
        (unit({2: 1}, {}), 0.25), (unit({2: 1}, {2: -1}), -0.25),
        (unit({1: 1}, {1: 1}, -5.0), -0.3), (unit({1: -1}, {1: -1}, 5.0), -0.3),
        (unit({3: 1}, {3: 1}, -3.0), -0.4),
        (unit({5: 1}, {}), 0.1), (unit({5: 1}, {5: -1}), -0.1),
    ]
    return {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F, "name": "5v5-truth",
            "player_layers": [{"weight": eye, "bias": [0.0] * F}],
            "head_layers": [{"weight": [u[0][0] for u in units], "bias": [u[0][1] for u in units]},
                            {"weight": [[u[1] for u in units]], "bias": [1.0]}],
            "training": {"source": "examples/5v5/simulate.py truth: the hidden world's exact objective"}}


# --------------------------------------------------------------------------- players


def population(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` players: features [n, F], accepted roles [n, 3] (bool)."""
    feats = np.empty((n, F))
    feats[:, 0] = rng.normal(size=n)
    feats[:, 1] = rng.beta(2.0, 2.0, size=n)
    feats[:, 2] = np.clip(rng.beta(2.5, 2.5, size=n) + 0.1 * feats[:, 0], 0.0, 1.0)
    feats[:, 3] = rng.beta(1.5, 4.0, size=n)
    feats[:, 4] = 0.5 * feats[:, 0] + np.sqrt(0.75) * rng.normal(size=n)
    feats[:, 5] = (rng.random(n) < 0.45).astype(float)
    roles = np.stack([rng.random(n) < 0.35, rng.random(n) < 0.35, rng.random(n) < 0.8], axis=1)
    roles[~roles.any(axis=1), 2] = True
    return {"features": np.round(feats, 4), "roles": roles}


def player_json(pid: str, feats: np.ndarray, roles: np.ndarray) -> dict:
    return {"id": pid, "features": [float(v) for v in feats], "skill": round(1500.0 + 300.0 * float(feats[0]), 1),
            "roles": [r for r, ok in zip(ROLES, roles, strict=True) if ok]}


# --------------------------------------------------------------------------- match log (spec §5)


def write_log(matches: int, seed: int, out: Path, players: int = 20000) -> dict:
    """``matches`` played matches of a population of ``players``: half formed at random, half by a noisy
    skill sort (the studio's old matchmaker), each with its noisy observed engagement."""
    rng = np.random.default_rng([seed, 1])
    pop = population(players, rng)
    feats, roles = pop["features"], pop["roles"]
    t0 = 1_795_000_000.0
    values = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        for m in range(matches):
            ids = rng.choice(players, size=2 * TEAM, replace=False)
            if rng.random() < 0.5:  # the old matchmaker: sort by noisy skill, snake draft
                key = feats[ids, 0] + rng.normal(scale=0.5, size=ids.size)
                ids = ids[np.argsort(key)]
                order = np.array([0, 1, 1, 0, 0, 1, 1, 0, 0, 1])
                teams = [ids[order == 0], ids[order == 1]]
            else:
                teams = [ids[:TEAM], ids[TEAM:]]
            e = float(true_engagement(feats[teams[0]].sum(0), feats[teams[1]].sum(0)) + rng.normal(scale=NOISE))
            values.append(e)
            line = {"match_id": f"m-{m:07d}", "time": t0 + 30.0 * m,
                    "teams": [[player_json(f"u{i}", feats[i], roles[i]) for i in t] for t in teams],
                    "engagement": round(e, 5)}
            if m == 0:
                line = {"format": "mgmatch-matchlog/v1", **line}
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    v = np.asarray(values)
    return {"matches": matches, "players": players, "seed": seed, "engagement_mean": float(v.mean()),
            "engagement_std": float(v.std()), "noise_std": NOISE,
            "best_possible_r2": float(1.0 - NOISE ** 2 / v.var())}


# --------------------------------------------------------------------------- candidate pools (spec §1)


def make_pool(rng: np.random.Generator, n: int) -> dict:
    """One feasible candidate pool of ``n`` players (2 teams × 5, roles, skill balance, parties of two)."""
    while True:
        pop = population(n, rng)
        roles = pop["roles"]
        if roles[:, 0].sum() >= 3 and roles[:, 1].sum() >= 3 and roles[:, 2].sum() >= 8:
            break
    players = [player_json(f"q{k:02d}", pop["features"][k], roles[k]) for k in range(n)]
    # a few premade parties of two among consecutive players
    k = 0
    while k + 1 < n:
        if rng.random() < 0.12:
            players[k]["party"] = players[k + 1]["party"] = f"g{k:02d}"
            k += 2
        else:
            k += 1
    for p in players:
        p["waited_s"] = round(float(rng.exponential(40.0)), 1)
    return {"format": "mgmatch-instance/v1", "teams": 2, "team_size": TEAM, "players": players,
            "rules": RULES, "engagement_model": "5v5"}


def write_pools(count: int, seed: int, out: Path, low: int = 20, high: int = 40) -> dict:
    """``count`` pools of ``low``…``high`` players as ``out/pool-NNNNN.json``; pool i depends on (seed, i) only."""
    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    for i in range(count):
        rng = np.random.default_rng([seed, 2, i])
        n = int(rng.integers(low, high + 1))
        (out / f"pool-{i:05d}.json").write_text(json.dumps(make_pool(rng, n), separators=(",", ":")))
        sizes.append(n)
    return {"pools": count, "seed": seed, "players_min": min(sizes), "players_max": max(sizes)}


# --------------------------------------------------------------------------- ground truth


def score(instance: dict, teams: list[list[str]]) -> float:
    """True (noise-free) engagement of ``teams`` (lists of player ids) in ``instance``."""
    feats = {p["id"]: np.asarray(p["features"], dtype=float) for p in instance["players"]}
    if len(teams) != 2 or any(len(t) != TEAM for t in teams):
        raise ValueError(f"expected 2 teams of {TEAM}")
    sums = [np.sum([feats[i] for i in t], axis=0) for t in teams]
    return float(true_engagement(sums[0], sums[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("log", help="Write a match log (spec §5).")
    a.add_argument("--matches", type=int, default=20000)
    a.add_argument("--players", type=int, default=20000)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("pools", help="Write candidate pools (spec §1 instance files).")
    a.add_argument("--count", type=int, default=400)
    a.add_argument("--seed", type=int, default=2)
    a.add_argument("--min-players", type=int, default=20)
    a.add_argument("--max-players", type=int, default=40)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("truth", help="Write the hidden objective as an mgmatch-engagement/v1 file.")
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("score", help="True engagement of a solution's teams.")
    a.add_argument("--instance", type=Path, required=True)
    a.add_argument("--solution", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "log":
            if args.matches < 1 or args.players < 2 * TEAM:
                ap.error("--matches must be ≥ 1 and --players ≥ 10")
            info = write_log(args.matches, args.seed, args.out, args.players)
        elif args.cmd == "pools":
            if args.count < 1 or not 2 * TEAM <= args.min_players <= args.max_players <= 100:
                ap.error("--count ≥ 1 and 10 ≤ --min-players ≤ --max-players ≤ 100")
            info = write_pools(args.count, args.seed, args.out, args.min_players, args.max_players)
        elif args.cmd == "truth":
            args.out.write_text(json.dumps(truth_model()))
            info = {"out": str(args.out)}
        else:
            inst = json.loads(args.instance.read_text())
            sol = json.loads(args.solution.read_text())
            info = {"true_engagement": score(inst, sol["teams"])}
    except (OSError, ValueError, KeyError) as err:
        sys.stderr.write(f"simulate.py: {err}\n")
        return 2
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
