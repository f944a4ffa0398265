"""``mgmatch label``: exact labels for training, in parallel, resumable (pipeline.label)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import cli, emit, fail


@cli.command("label", help="Generate preset instances, solve each exactly, store the optima as a dataset "
                           "(resumable: a rerun skips done indexes). Prints a JSON summary with throughput.")
def label_cmd(
    preset: Annotated[str, typer.Option(help="Scenario preset (3v3, 12v12).")],
    count: Annotated[int, typer.Option(help="Instances 0 … count−1.")],
    out: Annotated[Path, typer.Option(help="Dataset directory (created when missing).")],
    seed: Annotated[int, typer.Option(help="Generator seed; instance i depends on (preset, seed, i).")] = 0,
    workers: Annotated[int, typer.Option(help="Local worker processes (or CPUs of --ray local).")] = 1,
    time_limit_s: Annotated[float, typer.Option("--time-limit-s", help="Per-instance limit of the exact solve; "
                                                "the best solution and its gap are kept when it is hit.")] = 60.0,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray cluster address, or 'local' to start a local Ray.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")] = True,
) -> None:
    from mgmatch.pipeline.label import label

    if count < 0:
        fail(f"--count must be ≥ 0, got {count}")
    if workers < 1:
        fail(f"--workers must be ≥ 1, got {workers}")
    if not time_limit_s > 0:
        fail(f"--time-limit-s must be > 0, got {time_limit_s}")
    if out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a directory")
    run = label(preset, count, seed, out, workers=workers, time_limit_s=time_limit_s, ray_address=ray,
                progress=progress)
    emit(run.to_json())
