#!/usr/bin/env python3
"""The empty handover (``mgmatch.solvers.mgmatch.EMPTY_HANDOVER``) off and on, interleaved in one MGMatch solver.

On each pool and budget one solve with the old rule (a partial enumeration hands over only once it has a feasible
assignment) and one with the new (it hands over at the handover time either way), in alternating order. Prints the
mean gap against the exact optimum (an unanswered pool counts 100%), the share answered, and the paired difference
where both answered.

Usage: ``python scripts/ab_handover.py PRESET SEED COUNT BUDGETS`` (e.g. ``3v3 4000003 100 10,20,50``).
"""

from __future__ import annotations

import gc
import sys

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np

import mgmatch.solvers.mgmatch.solver as mg
from mgmatch.app.resolve import make_solver
from mgmatch.lab.bench_quality import problems_for
from mgmatch.solvers.base import Budget, get_solver


def main() -> None:
    preset, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    budgets = [float(b) for b in sys.argv[4].split(",")]
    probs = problems_for(preset, count, seed)
    refs = [get_solver("exact").solve(p, Budget.of(5000)).objective for p in probs]
    solver = make_solver("mgmatch", probs[0], seed=seed)
    for p in probs[:4]:  # warm-up: the first calls stay out of the numbers
        for b in budgets:
            solver.solve(p, Budget.of(b))
    gc.collect()
    gc.freeze()
    gaps: dict[tuple[bool, float], list[float]] = {(f, b): [] for f in (False, True) for b in budgets}
    for r in range(2):
        for i, p in enumerate(probs):
            for b in budgets:
                for flag in ((False, True) if (i + r) % 2 == 0 else (True, False)):
                    mg.EMPTY_HANDOVER = flag
                    sol = solver.solve(p, Budget.of(b))
                    gaps[(flag, b)].append(1.0 if sol.objective is None else (refs[i] - sol.objective) / abs(refs[i]))
    for b in budgets:
        old, new = np.array(gaps[(False, b)]), np.array(gaps[(True, b)])
        both = (old < 1) & (new < 1)
        d = new[both] - old[both]
        print(f"{preset} {b:g} ms: old {100 * old.mean():.3f}% answered {100 * (old < 1).mean():.1f}% | "
              f"new {100 * new.mean():.3f}% answered {100 * (new < 1).mean():.1f}% | new − old where both answered "
              f"{100 * d.mean():+.4f} ± {100 * d.std(ddof=1) / np.sqrt(d.size):.4f} points")


if __name__ == "__main__":
    main()
