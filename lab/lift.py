"""``mgmatch bench lift``: does a pool that learns from its results beat skill-based matchmaking?

For each world (:mod:`mgmatch.lab.lift_worlds`), with one seed:

1. **The studio's history.** The old skill-based matchmaker's log (:func:`skill_log`): from a group
   of waiting players, the anchor and its nearest in skill, split by a snake draft on skill; each
   match's engagement is the truth plus noise. Nothing else is in it.
2. **The starting model**: ``fit-engagement``'s fit of that log (:func:`mgmatch.pipeline.fit_engagement.fit_log`).
3. **One ticket stream** (seeded arrivals of the world's players) replayed on a simulated clock
   (:func:`mgmatch.lab.replay.simulate`) through four configs of the same pool, every match scored
   by the truth and its result (truth + noise) posted through the results path:

   - ``skill``: method ``skill`` (the baseline);
   - ``fitted``: MGMatch's predictor-free path (method ``surrogate``) on the starting model, never updated;
   - ``learning``: the same, with ``learning: {seed_log: the history}`` and every other key at its default;
   - ``truth``: the same method with the truth model pinned (the ceiling).

Reported over the last half of the stream's matches: mean true engagement per arm, **lift capture**
= (learning − skill) / (truth − skill), and the fitted-once arm's capture; per window of matches
the arms' means and the **safety check** (after the first window no learning window below the
skill window by more than 2 standard errors of their difference).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.app.config import parse_config
from mgmatch.core.engagement import EngagementModel, parse_engagement

from .lift_worlds import World
from .replay import Arrival, Truth, simulate

ARMS = ("skill", "fitted", "learning", "truth")
POOL = "lift"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def truth_values(model: EngagementModel, feats: np.ndarray) -> np.ndarray:
    """The model's engagement of matches given as features [m, D, K, F] (numpy)."""
    m, D, K, F = feats.shape
    emb = model.embed(feats.reshape(-1, F)).reshape(m, D, K, -1).sum(axis=2)
    return model.head(emb.reshape(m, -1))


def snake(k: int, teams: int) -> np.ndarray:
    """Team of the k-th pick of a snake draft (0, 1, 1, 0, 0, 1, … for two teams)."""
    rnd, pos = divmod(k, teams)
    return np.asarray(pos if rnd % 2 == 0 else teams - 1 - pos)


def skill_log(world: World, matches: int, seed: int, out: Path, group: int = 3) -> dict[str, Any]:
    """The old skill-based matchmaker's match log (spec §5): from ``group`` × match-size waiting players, a random
    anchor and its nearest in skill, split by a snake draft on skill; engagement = truth + Normal(0, noise²)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6C6F67]))
    M, D, K = world.match_size, world.teams, world.team_size
    players = world.population(rng, max(5000, 2 * matches))
    feats = np.asarray([p["features"] for p in players])
    skill = np.asarray([p.get("skill", 0.0) for p in players])
    truth = parse_engagement(world.truth())
    order = np.asarray([int(snake(k, D)) for k in range(M)])
    picks = np.empty((matches, D, K), dtype=np.int64)
    for m in range(matches):
        g = rng.choice(len(players), size=min(len(players), group * M), replace=False)
        near = g[np.argsort(np.abs(skill[g] - skill[g[0]]), kind="stable")[:M]]
        near = near[np.argsort(-skill[near], kind="stable")]
        for j in range(D):
            picks[m, j] = near[order == j]
    y = truth_values(truth, feats[picks]) + rng.normal(0.0, world.noise, size=matches)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w") as f:
        for m in range(matches):
            line = {"match_id": f"h-{m:06d}", "teams": [[{"id": f"h{i}", "features": players[i]["features"],
                                                           "skill": players[i].get("skill")} for i in picks[m, j]]
                                                         for j in range(D)], "engagement": round(float(y[m]), 5)}
            if m == 0:
                line = {"format": "mgmatch-matchlog/v1", **line}
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    tmp.replace(out)
    return {"matches": matches, "engagement_mean": float(y.mean()), "noise": world.noise}


def stream(world: World, tickets: int, rate: float, seed: int) -> list[Arrival]:
    """``tickets`` solo tickets of fresh players, Poisson arrivals at ``rate`` per second."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x746978]))
    players = world.population(rng, tickets)
    t = np.cumsum(rng.exponential(1.0 / rate, size=tickets))
    return [Arrival(float(round(t[k], 4)), POOL, [{"id": f"p{k}", **players[k]}], f"t{k}", None, k + 1)
            for k in range(tickets)]


def arm_config(world: World, arm: str, model: Path, truth: Path, seed_log: Path, budget_ms: float,
               interval_s: float, max_candidates: int) -> Any:
    """The service config of one arm (see the module doc)."""
    eng = truth if arm == "truth" else model
    pool: dict[str, Any] = {
        "name": POOL, "teams": world.teams, "team_size": world.team_size, "rules": world.rules,
        "engagement_model": {"path": str(eng), "sha256": _sha(eng)},
        "method": "skill" if arm == "skill" else "surrogate", "fallback_method": "surrogate",
        # the baseline gets at least 200 ms: solve time does not advance the replay's clock, and a skill
        # solve that runs out of time would leave players unmatched and shift its stream
        "time_budget_ms": max(budget_ms, 200.0) if arm == "skill" else budget_ms,
        "max_candidates": max_candidates, "partition": "sequential",
        "ticket_ttl_s": 3600, "dispatch": {"policy": "batch", "params": {"interval_s": interval_s}},
    }
    if arm == "learning":
        pool["learning"] = {"seed_log": str(seed_log)}
    return parse_config({"pools": [pool]}, f"bench lift arm {arm}")


def window_stats(values: np.ndarray, size: int) -> list[dict[str, float]]:
    out = []
    for s in range(0, len(values), size):
        w = values[s:s + size]
        out.append({"matches": int(len(w)), "mean": float(w.mean()),
                    "se": float(w.std(ddof=1) / math.sqrt(len(w))) if len(w) > 1 else 0.0})
    return out


def run_world(world: World, *, matches: int, seed: int, out: Path, budget_ms: float, window: int,
              history: int, rate: float, interval_s: float, max_candidates: int, arms: tuple[str, ...] = ARMS,
              progress: Callable[[str, int], Any] | None = None) -> dict[str, Any]:
    """One world: history → starting model → the arms on one stream (see the module doc)."""
    from mgmatch.pipeline.fit_engagement import LogFitConfig, fit_log, write

    t0 = time.perf_counter()
    wdir = out / world.name
    wdir.mkdir(parents=True, exist_ok=True)
    log_path = wdir / "history.jsonl"
    hist = skill_log(world, history, seed, log_path)
    truth_path = wdir / "truth.json"
    truth_path.write_text(json.dumps(world.truth()) + "\n")
    truth_model = parse_engagement(world.truth())
    fit = fit_log([log_path], LogFitConfig(epochs=30, seed=seed, name=world.name),
                  command=f"mgmatch bench lift (world {world.name}, seed {seed})")
    model_path = wdir / "eng0.json"
    write(fit, model_path)
    arrivals = stream(world, int(math.ceil(matches * world.match_size * 1.15)), rate, seed)
    runs: dict[str, dict[str, Any]] = {}
    for arm in arms:
        shutil.rmtree(wdir / "learned" / arm, ignore_errors=True)  # every run learns from scratch
        cfg = arm_config(world, arm, model_path, truth_path, log_path, budget_ms, interval_s, max_candidates)
        bar = progress(f"{world.name} {arm}", matches) if progress is not None else None
        t_arm = time.perf_counter()
        res = simulate(cfg, arrivals, tick_s=1.0, truth=Truth(truth_model, world.noise, seed),
                       learn_dir=wdir / "learned" / arm, on_match=(lambda _m, b=bar: b.update(1)) if bar else None,
                       reason_after_ticks=0)
        if bar is not None:
            bar.close()
        ms = [m for m in res.matches if m.true_engagement is not None]
        runs[arm] = {"values": np.asarray([m.true_engagement for m in ms]),
                     "versions": [m.model_version for m in ms], "policies": [m.policy for m in ms],
                     "seconds": round(time.perf_counter() - t_arm, 1),
                     "learning": res.details.get("learning", {}).get(POOL)}
    n = min(len(r["values"]) for r in runs.values())
    half = n // 2
    last = {arm: float(r["values"][half:n].mean()) for arm, r in runs.items()}
    result: dict[str, Any] = {
        "world": world.name, "seed": seed, "matches": n, "history": hist, "window_matches": window,
        "starting_model": {"holdout_r2": fit.record["holdout"]["r2"], "file": str(model_path)},
        "last_half_true_engagement": last,
        "seconds": round(time.perf_counter() - t0, 1),
        "arms": {arm: {"true_engagement_mean": float(r["values"][:n].mean()), "seconds": r["seconds"],
                       "windows": window_stats(r["values"][:n], window)} for arm, r in runs.items()},
    }
    if "learning" in runs:
        lr = runs["learning"]
        result["arms"]["learning"]["explore_share"] = float(np.mean([p == "explore" for p in lr["policies"][:n]]))
        pol = np.asarray([str(p) for p in lr["policies"][:n]])
        result["arms"]["learning"]["policies_last_half"] = {
            str(k): {"share": float(np.mean(pol[half:] == k)), "true_engagement_mean": float(lr["values"][half:n][pol[half:] == k].mean())}
            for k in sorted(set(pol[half:].tolist()))}
        result["arms"]["learning"]["model_versions"] = list(dict.fromkeys(v for v in lr["versions"][:n] if v))
        result["arms"]["learning"]["refits"] = (lr["learning"] or {}).get("refits", [])
    if {"skill", "truth"} <= set(last):
        span = last["truth"] - last["skill"]
        for arm in ("learning", "fitted"):
            if arm in last:
                result[f"lift_capture_{arm}"] = (last[arm] - last["skill"]) / span if span > 0 else None
    if {"skill", "learning"} <= set(runs):
        ws, wl = result["arms"]["skill"]["windows"], result["arms"]["learning"]["windows"]
        worst = []
        for k, (a, b) in enumerate(zip(wl, ws, strict=False)):
            se = math.sqrt(a["se"] ** 2 + b["se"] ** 2)
            worst.append({"window": k, "learning_minus_skill": a["mean"] - b["mean"], "se": se,
                          "safe": k == 0 or a["mean"] >= b["mean"] - 2 * se})
        result["safety"] = {"windows": worst, "safe": all(w["safe"] for w in worst)}
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    """True engagement per window, one line per arm (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2), dpi=110)
    ax = fig.add_subplot()
    W = result["window_matches"]
    for arm, r in result["arms"].items():
        ws = r["windows"]
        x = [W * k + w["matches"] / 2 for k, w in enumerate(ws)]
        y = [w["mean"] for w in ws]
        e = [2 * w["se"] for w in ws]
        ax.errorbar(x, y, yerr=e, label=arm, marker="o", markersize=3, capsize=2, linewidth=1.2)
    ax.set_xlabel("matches formed")
    ax.set_ylabel(f"true engagement (mean per window of {W}, ±2 SE)")
    cap = result.get("lift_capture_learning")
    name = f"world {result['world']}, seed {result['seed']}"
    ax.set_title(f"{name}: lift capture {cap:.2f}" if cap is not None else name)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")


def page(results: list[dict[str, Any]], command: str) -> str:
    """The Markdown of docs/benchmarks/lift.md from the results."""
    lines = ["# Lift: a learning pool against skill-based matchmaking", "",
             "Generated from `results/lift/*.json` by the command below; the plots are beside the JSON.", "",
             "```sh", command, "```", "",
             "Each world: a skill-based history (the only data the starting model is fitted on), then one "
             "ticket stream replayed through four arms — `skill` (the baseline), `fitted` (MGMatch's "
             "predictor-free path on the starting model, never updated), `learning` (the same with "
             "`learning: {seed_log: …}` and every default), `truth` (the truth model pinned: the ceiling). "
             "Lift capture = (learning − skill) / (truth − skill) over the last half of the stream. Safe: "
             "after the first window, no learning window below the skill window by more than 2 standard "
             "errors. Timings come from a shared 2-core machine and are noisy.", "",
             "| world | seed | matches | skill | fitted | learning | truth | lift capture (learning) | capture (fitted once) | safe | explore share | refits live / run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        last = r["last_half_true_engagement"]
        refits = r["arms"].get("learning", {}).get("refits", [])

        def fmt(v: Any, spec: str = "{:.3f}") -> str:
            return "—" if v is None else spec.format(v)

        lines.append(f"| {r['world']} | {r['seed']} | {r['matches']} | {fmt(last.get('skill'))} | {fmt(last.get('fitted'))} | "
                     f"{fmt(last.get('learning'))} | {fmt(last.get('truth'))} | "
                     f"{fmt(r.get('lift_capture_learning'), '{:.2f}')} | {fmt(r.get('lift_capture_fitted'), '{:.2f}')} | "
                     f"{'yes' if r.get('safety', {}).get('safe') else 'no'} | "
                     f"{fmt(r['arms'].get('learning', {}).get('explore_share'), '{:.1%}')} | "
                     f"{sum(1 for f in refits if f.get('outcome') == 'live')} / {len(refits)} |")
    worlds = list(dict.fromkeys(r["world"] for r in results))
    if len(results) > len(worlds):  # several seeds: each world's mean over its runs
        lines += ["", "| world | runs | mean lift capture (learning) | min | max | runs safe |", "|---|---|---|---|---|---|"]
        for w in worlds:
            caps = [r.get("lift_capture_learning") for r in results if r["world"] == w]
            caps = [c for c in caps if c is not None]
            safe = sum(1 for r in results if r["world"] == w and r.get("safety", {}).get("safe"))
            n = sum(1 for r in results if r["world"] == w)
            if caps:
                lines.append(f"| {w} | {n} | **{np.mean(caps):.2f}** | {min(caps):.2f} | {max(caps):.2f} | {safe} / {n} |")
    lines.append("")
    for r in results:
        stem = r.get("stem", r["world"])
        title = f"{r['world']}, seed {r['seed']}" if stem != r["world"] else r["world"]
        lines += [f"## {title}", "", f"![true engagement per window, {title}](lift-{stem}.png)", "",
                  f"Starting model: held-out R² {r['starting_model']['holdout_r2']} on the skill-based history "
                  f"({r['history']['matches']} matches). Wall time {r['seconds']} s.", ""]
    return "\n".join(lines) + "\n"
