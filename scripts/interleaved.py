#!/usr/bin/env python3
"""Two methods compared with interleaved solves: on each held-out pool and budget, one solve of each,
in turns (the order alternates per pool), in one process, so both meet the same machine load.

Back-to-back ``mgmatch bench quality`` runs of one method differ by 0.2–0.3 points on 40 pools of a
busy 2-core machine; interleaving cancels most of that. The paired difference (first method minus
second, over pools both answered) is printed with its standard error, with the share answered and
how often repair first ran, was skipped and why (``stats.repair_first``, ``stats.repair_skipped``).

Usage: ``python scripts/interleaved.py --preset 12v12-deep --budgets 20,50,100 [--count 40]
[--repeat 2] [--methods mgmatch,surrogate] [--seed 1000003] [--exact-time-limit-s 10]
[--pool-size 90,100] [--gate models/shipped/12v12-deep.json]``.

``--gate SIDECAR`` (methods ``mgmatch,surrogate``) measures the trained predictor as a gate of
``network`` at every budget would run it (when it fits half the time left, see
:func:`mgmatch.solvers.policy.gate_verdict`) and writes a verdict per budget into that sidecar as
``gate``: ``network`` at a budget where the network ran in at least half of MGMatch's solves, MGMatch
answered as many pools as ``surrogate`` (the same solver with the engagement gradient as P), and its
mean gap minus ``surrogate``'s over the pools both answered is below 0 by more than
:data:`SIGNIFICANT_SE` standard errors; else ``gradient``. The gate records this machine's tabu pace
on the model during the run (``pace_us``, the median over pools of what solves read). MGMatch then
follows the verdict at the measured budget nearest each solve's, scaled by that pace over its own
process's (:func:`mgmatch.solvers.policy.gate_budget_ms`): a 20 ms solve on a machine twice as fast
reads the verdict measured at 40 ms.
The reference per pool is the ``exact`` solver's answer within the time limit, or the best answer
any solve found when that is better (12v12-deep's exact solves do not finish in 10 s).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections import Counter
from pathlib import Path

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

from mgmatch.app.resolve import make_solver
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.mgmatch import tabu_pace_s

#: the network gates in where it is ahead by more than this many standard errors: elsewhere the two
#: are one algorithm in all but noise, and MGMatch runs `surrogate`'s (12v12 at 20 ms, 2026-11-28:
#: −0.017 ± 0.016 points; the rule without it put the network in there)
SIGNIFICANT_SE = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12")
    ap.add_argument("--budgets", default="20,50,100")
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--methods", default="mgmatch,surrogate")
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--exact-time-limit-s", type=float, default=10.0)
    ap.add_argument("--pool-size", default=None, help="LO,HI: pools of LO–HI candidates in the preset's world")
    ap.add_argument("--gate", type=Path, default=None, help="a predictor's sidecar JSON: write the measured gate into it")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    methods = args.methods.split(",")
    if len(methods) != 2:
        ap.error("--methods takes two methods")
    if args.gate is not None and methods != ["mgmatch", "surrogate"]:
        ap.error("--gate compares mgmatch with surrogate (--methods mgmatch,surrogate)")
    pool = None if args.pool_size is None else tuple(int(v) for v in args.pool_size.split(","))
    problems = problems_for(args.preset, args.count, args.seed, pool_size=pool)
    exact = get_solver("exact")
    refs = [exact.solve(p, Budget.of(args.exact_time_limit_s * 1e3)).objective for p in problems]
    solvers = {m: make_solver(m, problems[0], seed=args.seed) for m in methods}
    if args.gate is not None:  # measure the network as a `network` verdict would run it, whatever the sidecar says now
        solvers["mgmatch"].predictor.gate = {"use": "network",
                                             "by_budget_ms": {f"{b:g}": {"use": "network"} for b in budgets}}
    for p in problems[:4]:  # warm-up: the first calls stay out of the numbers
        for b in budgets:
            for s in solvers.values():
                s.solve(p, Budget.of(b))
    gc.collect()
    gc.freeze()
    objs = {(m, b): [] for m in methods for b in budgets}
    stats = {(m, b): [] for m in methods for b in budgets}
    paces = []  # this machine's tabu pace on the model, after each pool's solves
    for r in range(args.repeat):
        for i, p in enumerate(problems):
            for b in budgets:
                for m in (methods if (i + r) % 2 == 0 else methods[::-1]):
                    p.forget_solves()  # each solve from the state the service meets a pool in
                    sol = solvers[m].solve(p, Budget.of(b))
                    objs[(m, b)].append(sol.objective)
                    stats[(m, b)].append(sol.stats)
            pace = tabu_pace_s(p)
            if pace is not None:
                paces.append(pace)
    # the reference: the exact answer, or the best any solve found
    best = list(refs)
    for vals in objs.values():
        for k, v in enumerate(vals):
            i = k % len(problems)
            if v is not None and (best[i] is None or v > best[i]):
                best[i] = v
    verdict: dict = {}
    for b in budgets:
        gaps = {}
        for m in methods:
            ref = np.array([best[k % len(problems)] for k in range(len(objs[(m, b)]))], dtype=float)
            got = np.array([np.nan if v is None else v for v in objs[(m, b)]], dtype=float)
            gaps[m] = np.where(np.isnan(got), 1.0, (ref - got) / np.abs(ref))
        both = np.logical_and.reduce([gaps[m] < 1.0 for m in methods])
        d = gaps[methods[0]][both] - gaps[methods[1]][both]
        se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
        line = " | ".join(f"{m} {100 * gaps[m].mean():.3f}% answered {100 * np.mean(gaps[m] < 1.0):.1f}%"
                          for m in methods)
        print(f"{args.preset} at {b:g} ms ({len(gaps[methods[0]])} solves each): {line} | "
              f"{methods[0]} − {methods[1]} where both answered: {100 * d.mean():+.3f} ± {100 * se:.3f} points")
        if args.gate is not None:
            version = getattr(solvers["mgmatch"].predictor, "version", None)
            ran = float(np.mean([s.get("predictor_used") == version for s in stats[("mgmatch", b)]]))
            answered = {m: float(np.mean(gaps[m] < 1.0)) for m in methods}
            ahead = (ran >= 0.5 and d.size > 1 and float(d.mean()) + SIGNIFICANT_SE * float(se) < 0
                     and answered["mgmatch"] >= answered["surrogate"])
            verdict[f"{b:g}"] = {"use": "network" if ahead else "gradient",
                                 "diff_points": _points(d.mean()) if d.size else None,
                                 "se_points": _points(se), "pairs": int(d.size),
                                 "network_ran": round(ran, 3),
                                 "answered": {m: round(v, 4) for m, v in answered.items()},
                                 "mean_gap_pct": {m: round(100 * float(gaps[m].mean()), 4) for m in methods}}
        for m in methods:
            first = Counter(s.get("repair_first", "-") for s in stats[(m, b)])
            skipped = Counter(s.get("repair_skipped", "-") for s in stats[(m, b)])
            predict = np.mean([s.get("predict_ms") or 0.0 for s in stats[(m, b)]])
            print(f"    {m}: repair first {dict(first)}, repair skipped {dict(skipped)}, mean predict {predict:.2f} ms")
    pace_us = round(1e6 * float(np.median(paces)), 1) if paces else None
    print(f"tabu pace on {args.preset} during the run: median {pace_us} µs per iteration")
    if args.gate is not None:
        write_gate(args.gate, verdict, args, pace_us)


def _points(x: float) -> float | None:
    """A share as points, rounded; None where it is not a number (strict JSON has no NaN)."""
    x = float(x)
    return round(100 * x, 4) if np.isfinite(x) else None


def write_gate(sidecar: Path, verdict: dict, args: argparse.Namespace, pace_us: float | None) -> None:
    """The gate into the sidecar: a verdict per budget, and ``use`` for readers of one verdict
    (``network`` where it is ahead at some budget)."""
    ahead = [b for b, v in verdict.items() if v["use"] == "network"]
    gate = {"use": "network" if ahead else "gradient",
            "rule": "per budget: network when it ran in >= half of MGMatch's solves (it runs when its expected "
                    "time fits half the time left), MGMatch answered as many pools as surrogate, and MGMatch "
                    "(network) minus surrogate (gradient), mean gap in points over interleaved pairs both "
                    f"answered, plus {SIGNIFICANT_SE:g} standard errors, is < 0; else gradient. A solve follows "
                    "the verdict at the measured budget nearest its own (log scale), its budget first scaled "
                    "by pace_us (this machine's tabu pace on the model) over its process's",
            "pace_us": pace_us,
            "by_budget_ms": verdict, "preset": args.preset, "count": args.count, "repeat": args.repeat,
            "seed": args.seed, "pool_size": args.pool_size,
            "command": "python " + " ".join(sys.argv), "measured": time.strftime("%Y-%m-%d", time.gmtime())}
    meta = json.loads(sidecar.read_text())
    meta["gate"] = gate
    sidecar.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"gate of {sidecar}: " + ", ".join(f"{b} ms {v['use']}" for b, v in verdict.items()))


if __name__ == "__main__":
    main()
