#!/usr/bin/env python3
"""Tabu search alone from the rounding of the engagement gradient, by time horizon: how much a tight
budget's search is short of iterations.

For each held-out pool (``mgmatch bench quality``'s pools) the rounding that MGMatch's repair first
starts from is walked by :func:`~mgmatch.solvers.tabu.tabu_search` for each horizon; printed per
horizon: mean and median gap to the exact optimum (an unrepaired start counts 100%) and mean iterations.

Usage: ``python scripts/tabu-horizon.py --preset 12v12 --count 40 --seed 1000003 --horizons-ms 16,40,100``.
"""

from __future__ import annotations

import argparse
import time

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.mgmatch import rounding
from mgmatch.solvers.surrogate import GradientPredictor
from mgmatch.solvers.tabu import tabu_search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12")
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--horizons-ms", default="16,40,100")
    ap.add_argument("--exact-time-limit-s", type=float, default=10.0)
    args = ap.parse_args()
    horizons = [float(h) for h in args.horizons_ms.split(",")]
    problems = problems_for(args.preset, args.count, args.seed)
    exact = get_solver("exact")
    refs = [exact.solve(p, Budget.of(args.exact_time_limit_s * 1e3)).objective for p in problems]
    gradient = GradientPredictor()
    starts = [rounding(p, gradient.predict([p])[0]) for p in problems]
    tabu_search(problems[0], starts[0], time.perf_counter() + 0.05)  # compile and warm the scorer
    for h in horizons:
        gaps, its = [], []
        for p, start, ref in zip(problems, starts, refs, strict=True):
            res = tabu_search(p, start, time.perf_counter() + h / 1e3, seed=1)
            gaps.append(1.0 if res.objective is None else (ref - res.objective) / abs(ref))
            its.append(res.iterations)
        print(f"{h:g} ms: mean gap {100 * np.mean(gaps):.3f}%, median {100 * np.median(gaps):.3f}%, "
              f"{np.mean(its):.0f} iterations")


if __name__ == "__main__":
    main()
