#!/usr/bin/env python3
"""Interleaved A/B of a module constant: MGMatch solves of the same pools with each value in turn.

One solver, one process: before each solve the constant (e.g. ``mgmatch.solvers.tabu.ROTATIONS_MAX``)
is set to the value under test, and the values' order alternates per pool and pass, so the machine's
moments fall on all of them alike. Two passes over the held-out pools per budget; printed per budget:
each value's mean gap to the exact optimum (an unanswered solve counts 100%) and its mean difference
to the first value with the standard error of that mean.

Usage: ``python scripts/ab-constant.py mgmatch.solvers.tabu ROTATIONS_MAX 300,150,600 --preset 12v12
--count 120 --budgets 10,20``.
"""

from __future__ import annotations

import argparse
import gc
import importlib

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

from mgmatch.app.resolve import make_solver
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget, get_solver


def _value(text: str):
    try:
        return int(text)
    except ValueError:
        return float(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("constant")
    ap.add_argument("values", help="comma-separated; the first is the baseline")
    ap.add_argument("--preset", default="12v12")
    ap.add_argument("--count", type=int, default=120)
    ap.add_argument("--pool-size", default=None, help="LO,HI: pools of LO-HI candidates in the preset's world")
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--budgets", default="10,20")
    ap.add_argument("--method", default="mgmatch")
    ap.add_argument("--exact-time-limit-s", type=float, default=2.0)
    args = ap.parse_args()
    mod = importlib.import_module(args.module)
    if not hasattr(mod, args.constant):
        ap.error(f"{args.module} has no {args.constant}")
    values = [_value(v) for v in args.values.split(",")]  # 0/1 for a flag
    budgets = [float(b) for b in args.budgets.split(",")]
    pool_size = None if args.pool_size is None else tuple(int(x) for x in args.pool_size.split(","))
    problems = problems_for(args.preset, args.count, args.seed, pool_size=pool_size)
    exact = get_solver("exact")
    refs = [exact.solve(p, Budget.of(args.exact_time_limit_s * 1e3)).objective for p in problems]
    solver = make_solver(args.method, problems[0], seed=args.seed)
    for b in budgets:  # warm-up: first-call caches out of the comparison
        for v in values:
            setattr(mod, args.constant, v)
            solver.solve(problems[0], Budget.of(b))
    gc.collect()
    gc.freeze()
    for b in budgets:
        gaps: dict = {v: [] for v in values}
        for rep in range(2):
            for k, p in enumerate(problems):
                for v in (values if (k + rep) % 2 == 0 else values[::-1]):
                    setattr(mod, args.constant, v)
                    sol = solver.solve(p, Budget.of(b))
                    gap = 1.0 if sol.objective is None or refs[k] is None else max(0.0, (refs[k] - sol.objective) / abs(refs[k]))
                    gaps[v].append(gap)
        base = np.asarray(gaps[values[0]])
        cells = []
        for v in values:
            g = np.asarray(gaps[v])
            d = g - base
            se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else 0.0
            cells.append(f"{args.constant}={v}: {100 * g.mean():.3f}% ({100 * d.mean():+.3f} ± {100 * se:.3f} points)")
        print(f"{args.preset} at {b:g} ms: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
