#!/usr/bin/env python3
"""Paired differences of two methods in a budgets run: ``mgmatch bench quality`` JSON per world and budget.

For each ``<dir>/<world>/<budget>ms/quality-*.json`` under the run's folder: the first method's gap minus
the second's, in points, over the pools both answered, with its standard error, and how many pools the
two answered identically, the first did better and the first did worse. The budgets benchmark page
(docs/benchmarks/budgets.md) cites it for the rows where two methods differ by a few hundredths of a point.

Usage: ``python scripts/paired-budgets.py results/budgets [--methods mgmatch,surrogate]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def paired(path: Path, first: str, second: str) -> str:
    data = json.loads(path.read_text())
    diffs, identical = [], 0
    for inst in data["instances"]:
        a, b = inst["runs"].get(first), inst["runs"].get(second)
        if a is None or b is None or a["objective"] is None or b["objective"] is None:
            continue
        diffs.append(100 * (a["gap"] - b["gap"]))
        identical += abs(a["objective"] - b["objective"]) < 1e-9
    if not diffs:
        return "no pool answered by both"
    mean = sum(diffs) / len(diffs)
    se = (math.sqrt(sum((x - mean) ** 2 for x in diffs) / (len(diffs) - 1) / len(diffs))
          if len(diffs) > 1 else float("nan"))
    ahead = sum(x < -1e-9 for x in diffs)
    behind = sum(x > 1e-9 for x in diffs)
    return (f"{mean:+.3f} ± {se:.3f} points over {len(diffs)} pools; identical {identical}, "
            f"{first} ahead {ahead}, behind {behind}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a budgets run's folder (its <world>/<budget>ms/quality-*.json)")
    ap.add_argument("--methods", default="mgmatch,surrogate", help="FIRST,SECOND: FIRST minus SECOND")
    args = ap.parse_args()
    methods = args.methods.split(",")
    if len(methods) != 2:
        ap.error("--methods takes two methods")
    files = sorted(args.run.glob("*/*ms/quality-*.json"),
                   key=lambda p: (p.parent.parent.name, float(p.parent.name[:-2])))
    if not files:
        print(f"paired-budgets: no <world>/<budget>ms/quality-*.json under {args.run}", file=sys.stderr)
        sys.exit(2)
    for f in files:
        print(f"{f.parent.parent.name:>8} {f.parent.name:>6}: {paired(f, *methods)}")


if __name__ == "__main__":
    main()
