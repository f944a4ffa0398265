#!/usr/bin/env python3
"""A one-shot process's first solve, with and without :meth:`MGMatchSolver.prepare`, then two warm ones.

Prints the process start-up, ``prepare``'s own time (before the budget) and, per solve, its status,
time and the stage times of its ``stats`` (predict, surrogate stage, tabu iterations). Run it in a
fresh process each time: the point is the first solve.

Usage: ``python scripts/cold-solve.py INSTANCE METHOD BUDGET_MS [prepare]``
(e.g. ``mgmatch generate --preset 12v12-deep --count 1 --seed 42 --out /tmp/deep`` then
``python scripts/cold-solve.py /tmp/deep/instance-00000.json mgmatch 50 prepare``).
"""

import time

T0 = time.perf_counter()

import sys  # noqa: E402

import mgmatch  # noqa: E402,F401  (before numpy: the package sets the thread limits)
from mgmatch.app.resolve import build_problem, make_solver  # noqa: E402
from mgmatch.core.instance import read_json  # noqa: E402
from mgmatch.solvers.base import Budget  # noqa: E402

KEYS = ["predict_ms", "predictor_used", "surrogate_ms", "surrogate_status", "tabu_ms", "tabu_iterations",
        "repair_first", "repair_skipped", "search_skipped", "polish_ms"]


def main() -> None:
    path, method, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
    prepared = len(sys.argv) > 4 and sys.argv[4] == "prepare"
    problem = build_problem(read_json(path), None)
    solver = make_solver(method, problem)
    t = time.perf_counter()
    if prepared:
        solver.prepare(problem)
    prep_ms = (time.perf_counter() - t) * 1e3
    print(f"start-up {1e3 * (t - T0):.0f} ms, prepare {prep_ms:.1f} ms")
    for k in range(3):
        problem.forget_solves()
        sol = solver.solve(problem, Budget.of(budget))
        st = getattr(sol, "stats", None) or {}
        print(f"{'first' if k == 0 else 'again'}: {sol.status} {sol.time_ms:.1f} ms objective {sol.objective}",
              {key: st[key] for key in KEYS if key in st})


if __name__ == "__main__":
    main()
