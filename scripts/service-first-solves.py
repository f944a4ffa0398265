#!/usr/bin/env python3
"""A service's first solves of a pool after start-up, with and without the start-up warm-up of its solver.

Each process builds a runtime with one pool (the preset's game, ``mgmatch``, the given budget), runs
``Runtime.settle()`` as ``serve`` does (with ``Runtime.prepare_solvers`` disabled in the ``cold`` arm), then
solves ``--solves`` fresh pools of the preset through the engine and counts those answered. Prints the
answered counts over ``--processes`` processes per arm.

Usage: ``python scripts/service-first-solves.py --preset 12v12-deep --budget-ms 10 [--solves 6]
[--processes 6] [--seed 99]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def one(preset: str, budget: float, solves: int, seed: int, cold: bool) -> None:
    import yaml

    import mgmatch  # noqa: F401  (before numpy: the package sets the thread limits)
    from mgmatch.app.ab import Plan
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings
    from mgmatch.core.presets import generate_instances

    instances = generate_instances(preset, solves, seed)
    size = instances[0].sizes[0]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "service.yaml"
        cfg.write_text(yaml.safe_dump({"pools": [{
            "name": "p", "teams": 2, "team_size": size, "engagement_model": preset, "method": "mgmatch",
            "time_budget_ms": budget, "max_candidates": 100}]}))
        if cold:
            Runtime.prepare_solvers = lambda self: []
        rt = Runtime.build(Settings(config=cfg, store="memory"))
        rt.settle()
        answered = 0
        for inst in instances:
            sol = rt.engine.solve(inst, Plan("mgmatch", "surrogate", budget, preset, None, None), "p")
            answered += sol.has_assignment
        rt.stop()
    print(answered)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="12v12-deep")
    ap.add_argument("--budget-ms", type=float, default=10.0)
    ap.add_argument("--solves", type=int, default=6)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--one", choices=["cold", "prepared"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.preset, args.budget_ms, args.solves, args.seed, args.one == "cold")
        return
    for arm in ("cold", "prepared"):
        total = 0
        for _ in range(args.processes):
            out = subprocess.run([sys.executable, __file__, "--preset", args.preset, "--budget-ms", str(args.budget_ms),
                                  "--solves", str(args.solves), "--seed", str(args.seed), "--one", arm],
                                 check=True, capture_output=True, text=True).stdout
            total += int(out.strip().splitlines()[-1])
        print(f"{args.preset} at {args.budget_ms:g} ms, {arm}: {total} of {args.solves * args.processes} first solves answered")


if __name__ == "__main__":
    main()
