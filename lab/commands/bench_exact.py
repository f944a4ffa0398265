"""``mgmatch bench exact``: exact solve times per method on a preset (the labelling cost)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, check_time_limit_ms, fail, seed_option, short_int
from mgmatch.core.limits import MAX_INSTANCE_COUNT

from ..bench_io import report

EXACT_METHODS = ("scip", "enumerate", "exact")


@bench_app.command("exact", help="Median and max exact solve time per method over preset instances, with the MIP "
                                 "sizes (binaries, big-M neurons); Markdown on stdout, JSON on request.")
def exact_cmd(
    preset: Annotated[str, typer.Option(help="Scenario preset (3v3, 12v12, 12v12-deep).")] = "3v3",
    count: Annotated[int, typer.Option(help="Instances.")] = 20,
    seed: Annotated[int, seed_option(help="Seed of the generated instances.")] = 0,
    methods: Annotated[str, typer.Option(help="Comma-separated: scip, enumerate, exact.")] = "scip,enumerate",
    time_limit_ms: Annotated[float | None, typer.Option("--time-limit-ms", help="Budget per solve (ms); none by default.")] = None,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every solve on stderr.")] = False,
) -> None:
    from mgmatch.core.presets import get_preset
    from mgmatch.lab.bench_exact import run_exact_bench

    get_preset(preset)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    if not names:
        fail("--methods: give at least one method")
    bad = [m for m in names if m not in EXACT_METHODS]
    if bad:
        fail(f"--methods: {bad[0]!r} is not an exact method; expected some of {', '.join(EXACT_METHODS)}")
    if len(set(names)) != len(names):
        fail(f"--methods: a method is listed twice in {methods!r}")
    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    check_time_limit_ms(time_limit_ms)
    log = (lambda m: sys.stderr.write(m + "\n")) if verbose else None
    res = run_exact_bench(preset, count, seed, names, time_limit_ms, log=log)
    report(res, json_file, ok=True)
