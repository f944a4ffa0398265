#!/usr/bin/env python3
"""MGMatch with its trained predictor forced on, then forced off (the engagement gradient), on the
same held-out preset instances at one budget: does the network pay for its time at this budget?

Usage: ``python scripts/predictor-vs-gradient.py --preset 12v12 --budget-ms 20 [--count 40] [--repeat 2]``.
Prints the mean gap to the exact optimum (SCIP, 10 s limit) and the mean prediction time of each.
"""

from __future__ import annotations

import argparse
import gc

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

from mgmatch.app.resolve import make_solver
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.mgmatch import solver as mg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12")
    ap.add_argument("--budget-ms", type=float, default=20.0)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1000003)
    args = ap.parse_args()
    problems = problems_for(args.preset, args.count, args.seed)
    exact = get_solver("exact")
    refs = [exact.solve(p, Budget.of(10_000)).objective for p in problems]
    solver = make_solver("mgmatch", problems[0], seed=args.seed)
    for p in problems[:4]:  # warm-up: the first calls stay out of the numbers
        solver.solve(p, Budget.of(args.budget_ms))
    gc.collect()
    gc.freeze()
    for mode in ("network", "gradient"):
        use = mode == "network"
        mg.use_trained_predictor = lambda expected_s, left_s, small_pool=False, use=use: use
        gaps, predict_ms = [], []
        for _ in range(args.repeat):
            for ref, p in zip(refs, problems, strict=True):
                sol = solver.solve(p, Budget.of(args.budget_ms))
                gaps.append((ref - sol.objective) / abs(ref) if sol.objective is not None and ref else 1.0)
                predict_ms.append(sol.stats.get("predict_ms", 0.0))
        print(f"{args.preset} at {args.budget_ms:g} ms, {mode}: mean gap {100 * np.mean(gaps):.3f}%, "
              f"mean predict {np.mean(predict_ms):.2f} ms ({len(gaps)} solves)")


if __name__ == "__main__":
    main()
