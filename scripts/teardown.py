#!/usr/bin/env python3
"""What a solve spends after its answer is built: freeing the SCIP models it built, in milliseconds.

Each held-out pool is solved by MGMatch's inner solve (``MGMatchSolver._solve``, without the teardown
reserve of :meth:`~mgmatch.solvers.mgmatch.MGMatchSolver.solve`) at the budget, three times; printed:
the median and largest gap between the answer's ``time_ms`` and the return, and the largest return.

Usage: ``python scripts/teardown.py --preset 12v12-deep --budget-ms 100``.
"""

from __future__ import annotations

import argparse
import gc

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

from mgmatch.app.resolve import make_solver
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12-deep")
    ap.add_argument("--budget-ms", type=float, default=100.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--method", default="mgmatch")
    args = ap.parse_args()
    problems = problems_for(args.preset, args.count, args.seed)
    solver = make_solver(args.method, problems[0], seed=args.seed)
    for p in problems:  # each pool's first-layer bounds and scorer, built outside the measurement
        solver.solve(p, Budget.of(args.budget_ms))
    gc.collect()
    gc.freeze()  # as the service does after start-up: no full collection inside a solve
    after, total = [], []
    for _ in range(3):
        for p in problems:
            budget = Budget.of(args.budget_ms)
            sol = solver._solve(p, budget)
            done = budget.elapsed_ms()
            after.append(done - sol.time_ms)
            total.append(done)
    print(f"{args.preset} at {args.budget_ms:g} ms: after the answer median {np.median(after):.2f} ms, "
          f"max {max(after):.2f} ms; returned at most {max(total):.1f} ms")


if __name__ == "__main__":
    main()
