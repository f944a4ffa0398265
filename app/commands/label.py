"""``mgmatch label``: exact labels for training, in parallel, resumable (pipeline.label).

Two sources: a directory of a game's own instance files with its engagement model
(``--instances DIR --engagement ENG.json``, spec §6), or a preset's generator (``--preset --count``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import MAX_TIME_LIMIT_MS, cli, emit, fail, seed_option, short_int
from mgmatch.core.errors import InvalidInput
from mgmatch.core.limits import MAX_INSTANCE_COUNT


@contextmanager
def _ray_named() -> Iterator[None]:
    """A Ray error of the pipeline (``ray``: e.g. ``auto`` finding no cluster) as the option's: ``--ray``."""
    try:
        yield
    except InvalidInput as err:
        if err.field == "ray":
            fail(f"--ray: {err.message}")
        raise


@cli.command("label", help="Solve instances exactly and store the optima as a training dataset (resumable: a rerun "
                           "skips what is done): every *.json of --instances DIR with --engagement ENG.json, or "
                           "--count generated instances of a --preset. Prints a JSON summary with throughput.")
def label_cmd(
    out: Annotated[Path, typer.Option(help="Dataset directory (created when missing).")],
    instances: Annotated[Path | None, typer.Option("--instances", help="Directory of instance files "
                                                   "(spec §1) to label.")] = None,
    engagement: Annotated[Path | None, typer.Option("--engagement", help="The game's engagement model "
                                                    "(with --instances).")] = None,
    preset: Annotated[str | None, typer.Option(help="Or generate instances of a preset (3v3, 12v12, 12v12-deep).")] = None,
    count: Annotated[int | None, typer.Option(help="--preset: instances 0 … count−1.")] = None,
    seed: Annotated[int, seed_option(help="--preset: generator seed; instance i depends on (preset, seed, i).")] = 0,
    workers: Annotated[int, typer.Option(help="Local worker processes (or CPUs of --ray local).")] = 1,
    time_limit_s: Annotated[float, typer.Option("--time-limit-s", help="Per-instance limit of the exact solve; "
                                                "the best solution and its gap are kept when it is hit.")] = 60.0,
    start_ms: Annotated[float, typer.Option("--start-ms", help="SCIP starts from the answer the `surrogate` method "
                                            "finds in this many ms (within --time-limit-s; 0: no start). For "
                                            "engagement models SCIP does not close in the limit (12v12-deep).")] = 0.0,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray cluster address host:port (or ray://host:port), 'auto', "
                                            "or 'local' to start a local Ray. An address that does not answer "
                                            "within a few seconds is refused.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")] = True,
) -> None:
    if workers < 1:
        fail(f"--workers must be ≥ 1, got {workers}")
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        fail(f"--time-limit-s must be a finite number > 0, got {time_limit_s}")
    if time_limit_s > MAX_TIME_LIMIT_MS / 1e3:
        fail(f"--time-limit-s must be ≤ {MAX_TIME_LIMIT_MS / 1e3:,.0f} (a day), got {time_limit_s:g}")
    if not 0 <= start_ms < time_limit_s * 1e3:
        fail(f"--start-ms must be ≥ 0 and below --time-limit-s ({time_limit_s * 1e3:g} ms), got {start_ms:g}")
    if out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a directory")
    if ray is not None:
        from mgmatch.pipeline.label import check_ray_address

        try:  # before anything is read or written: Ray itself retries a dead address for minutes
            check_ray_address(ray)
        except InvalidInput as err:
            fail(f"--ray: {err.message}")
    if (instances is None) == (preset is None):
        fail("give either --instances DIR --engagement ENG.json or --preset NAME --count N")
    if instances is not None:
        if engagement is None:
            fail("--instances needs --engagement ENG.json (the game's engagement model)")
        if count is not None:
            fail("--count applies to --preset only (--instances labels every *.json of the directory)")
        if not instances.is_dir():
            fail(f"--instances {instances}: no such directory")
        if not engagement.is_file():
            fail(f"--engagement {engagement}: no such file")
        from mgmatch.pipeline.label import label_instances

        with _ray_named():
            run = label_instances(instances, engagement, out, workers=workers, time_limit_s=time_limit_s,
                                  ray_address=ray, progress=progress, start_ms=start_ms)
        emit(run.to_json())
        return
    if engagement is not None:
        fail("--engagement applies to --instances (a preset uses its shipped model)")
    if count is None:
        fail("--preset needs --count N")
    if not 0 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 0 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    from mgmatch.pipeline.label import label

    with _ray_named():
        run = label(preset, count, seed, out, workers=workers, time_limit_s=time_limit_s, ray_address=ray,
                    progress=progress, start_ms=start_ms)
    emit(run.to_json())
