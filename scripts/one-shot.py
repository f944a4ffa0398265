#!/usr/bin/env python3
"""One-shot solves, as `mgmatch solve --time-limit-ms` makes them: each in a fresh process, with and without
:meth:`MGMatchSolver.prepare` before the budget, against the proven optimum.

For each preset, ``--count`` pools of ``mgmatch generate --seed SEED``; per pool and budget, one fresh process
solves without ``prepare`` and one with it. Prints, per preset, budget and arm, the mean gap (an unanswered
pool counts 100%), the pools answered and the slowest answer.

Usage: ``python scripts/one-shot.py [--presets 3v3,12v12,12v12-deep] [--budgets 10,20,50] [--count 5]
[--seed 77] [--method mgmatch]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


def one(path: str, budget: float, prepare: bool, method: str) -> None:
    import mgmatch  # noqa: F401  (before numpy: the package sets the thread limits)
    from mgmatch.app.resolve import build_problem, make_solver
    from mgmatch.core.instance import read_json
    from mgmatch.solvers.base import Budget

    pr = build_problem(read_json(path), None)
    solver = make_solver(method, pr)
    if prepare:
        solver.prepare(pr)
    sol = solver.solve(pr, Budget.of(budget))
    print(json.dumps({"objective": sol.objective, "time_ms": sol.time_ms}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="3v3,12v12,12v12-deep")
    ap.add_argument("--budgets", default="10,20,50")
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--seed", type=int, default=77)
    ap.add_argument("--method", default="mgmatch")
    ap.add_argument("--one", nargs=3, metavar=("INSTANCE", "BUDGET_MS", "PREPARE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one[0], float(args.one[1]), args.one[2] == "1", args.method)
        return
    me = [sys.executable, __file__, "--method", args.method, "--one"]
    rows: dict[tuple, list] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets.split(","):
            out = Path(tmp) / preset
            subprocess.run([sys.executable, "-m", "mgmatch", "generate", "--preset", preset, "--count",
                            str(args.count), "--seed", str(args.seed), "--out", str(out)], check=True,
                           capture_output=True)
            for k in range(args.count):
                f = str(out / f"instance-{k:05d}.json")
                opt = json.loads(subprocess.run([sys.executable, "-m", "mgmatch", "solve", f, "--method", "exact"],
                                                check=True, capture_output=True, text=True).stdout)["objective"]
                for b in args.budgets.split(","):
                    for arm in ("0", "1"):
                        r = json.loads(subprocess.run([*me, f, b, arm], check=True, capture_output=True,
                                                      text=True).stdout)
                        gap = 1.0 if r["objective"] is None else (opt - r["objective"]) / abs(opt)
                        rows[(preset, float(b), arm)].append((gap, r["time_ms"], r["objective"] is not None))
    for (preset, b, arm), v in rows.items():
        print(f"{preset} {b:g} ms {'prepare' if arm == '1' else 'cold   '}: gap {100 * sum(g for g, _, _ in v) / len(v):.2f}%"
              f", answered {sum(a for *_, a in v)}/{len(v)}, slowest {max(t for _, t, _ in v):.1f} ms")


if __name__ == "__main__":
    main()
