"""A small seeded game that is not a preset: its hidden engagement, match logs and pools.

Players have ``feature_dim`` numbers drawn once per player (a world of recurring players). The
hidden engagement of a match is a smooth function of team sums of per-player values:

    v_i = tanh(a · x_i) + 0.5 · relu(b · x_i)        (how much player i enjoys a match)
    s_i = c · x_i                                      (player i's strength; skill = 1500 + 200 s_i)
    engagement = 1 + Σ_j Σ_{i∈j} v_i / n − 0.6 · std_j(mean_{i∈j} s_i) + noise

so the spec §3 network (player MLP, sum per team, head MLP) can learn it. Used by the tests and,
as a script, to measure the fit on larger logs::

    python tests/pipeline/own_game.py log --matches 20000 --seed 1 --out /tmp/own.jsonl
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Game:
    teams: int = 3
    sizes: tuple[int, ...] = (2, 2, 2)
    feature_dim: int = 5
    noise: float = 0.05
    seed: int = 0

    def weights(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = np.random.default_rng(np.random.SeedSequence([self.seed, 77]))
        F = self.feature_dim
        return r.normal(0, 1 / np.sqrt(F), F), r.normal(0, 1 / np.sqrt(F), F), r.normal(0, 1 / np.sqrt(F), F)

    def world(self, n_players: int, rng: np.random.Generator) -> np.ndarray:
        """Features [n, F] of a world's players."""
        return rng.normal(0, 1, (n_players, self.feature_dim)) * np.linspace(0.5, 2.0, self.feature_dim)

    def skill(self, X: np.ndarray) -> np.ndarray:
        return 1500 + 200 * (X @ self.weights()[2])

    def engagement(self, X: np.ndarray, team_of: np.ndarray) -> float:
        """Hidden engagement (no noise) of one match: X [n, F] of its players, team_of [n]."""
        a, b, c = self.weights()
        v = np.tanh(X @ a) + 0.5 * np.maximum(X @ b, 0)
        s = X @ c
        means = np.array([s[team_of == j].mean() for j in range(self.teams)])
        return float(1 + v.sum() / len(v) - 0.6 * means.std())


def match_lines(game: Game, matches: int, seed: int, n_players: int = 4000):
    """Spec §5 lines (dicts) of ``matches`` random matches over one world."""
    rng = np.random.default_rng(np.random.SeedSequence([game.seed, seed, 1]))
    X = game.world(n_players, rng)
    need = sum(game.sizes)
    team_of = np.repeat(np.arange(game.teams), game.sizes)
    for m in range(matches):
        idx = rng.choice(n_players, need, replace=False)
        y = game.engagement(X[idx], team_of) + rng.normal(0, game.noise)
        teams, s = [], 0
        for k in game.sizes:
            teams.append([{"id": f"u{i}", "features": [round(float(v), 5) for v in X[i]]} for i in idx[s:s + k]])
            s += k
        line = {"format": "mgmatch-matchlog/v1"} if m == 0 else {}
        line.update({"match_id": f"m{m}", "teams": teams, "engagement": round(y, 6)})
        yield line


def write_log(path: str | Path, game: Game, matches: int, seed: int) -> Path:
    path = Path(path)
    with open(path, "w") as f:
        for line in match_lines(game, matches, seed):
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    return path


def pool(game: Game, n: int, seed: int) -> dict:
    """One spec §1 instance of ``n`` players with a skill balance and an avoid rule."""
    rng = np.random.default_rng(np.random.SeedSequence([game.seed, seed, 2]))
    X = game.world(n, rng)
    skill = game.skill(X)
    players = [{"id": f"q{k}", "features": [round(float(v), 5) for v in X[k]], "skill": round(float(skill[k]), 2)}
               for k in range(n)]
    inst = {"format": "mgmatch-instance/v1", "teams": game.teams, "players": players,
            "rules": [{"kind": "skill_balance", "max_diff": 400.0},
                      {"kind": "avoid", "players": ["q0", "q1"], "scope": "team"}]}
    if len(set(game.sizes)) == 1:
        inst["team_size"] = game.sizes[0]
    else:
        inst["team_sizes"] = list(game.sizes)
    return inst


def write_pools(out: str | Path, game: Game, count: int, n: int, seed: int) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        (out / f"pool-{k:04d}.json").write_text(json.dumps(pool(game, n, seed * 100_003 + k)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    lg = sub.add_parser("log")
    lg.add_argument("--matches", type=int, required=True)
    lg.add_argument("--seed", type=int, default=0)
    lg.add_argument("--teams", type=int, default=3)
    lg.add_argument("--size", type=int, default=2)
    lg.add_argument("--features", type=int, default=5)
    lg.add_argument("--out", required=True)
    a = ap.parse_args()
    game = Game(teams=a.teams, sizes=(a.size,) * a.teams, feature_dim=a.features)
    write_log(a.out, game, a.matches, a.seed)


if __name__ == "__main__":
    main()
