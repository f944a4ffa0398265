#!/usr/bin/env python3
"""Tabu search's pace: microseconds per iteration on a preset's held-out pools.

Each pool's rounding of the engagement gradient (the start MGMatch's repair first walks from) is
walked for exactly ``--iterations`` iterations with no deadline in reach, three times over all pools;
printed: the mean time per iteration of each pass. The neighbourhood, the compiled scorer, the head
and the walk's own bookkeeping are all inside.

Usage: ``python scripts/tabu-pace.py --preset 12v12 --count 10 --seed 1000003``.
"""

from __future__ import annotations

import argparse
import time

import mgmatch  # noqa: F401  (one BLAS thread, set before numpy loads)
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.mgmatch import rounding
from mgmatch.solvers.surrogate import GradientPredictor
from mgmatch.solvers.tabu import tabu_search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    problems = problems_for(args.preset, args.count, args.seed)
    gradient = GradientPredictor()
    starts = [rounding(p, gradient.predict([p])[0]) for p in problems]
    for p, s in zip(problems, starts, strict=True):  # compile the kernels, build each pool's scorer
        tabu_search(p, s, time.perf_counter() + 1.0, max_iterations=2)
    paces = []
    for _ in range(args.passes):
        t0, iterations = time.perf_counter(), 0
        for p, s in zip(problems, starts, strict=True):
            iterations += tabu_search(p, s, time.perf_counter() + 60.0, seed=1,
                                      max_iterations=args.iterations).iterations
        paces.append(1e6 * (time.perf_counter() - t0) / max(iterations, 1))
    print(f"{args.preset}: " + ", ".join(f"{x:.0f}" for x in paces) + " µs per iteration")


if __name__ == "__main__":
    main()
