"""``mgmatch bench backfill``: ticks and milliseconds to fill open backfills from a queue."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option


@bench_app.command("backfill", help="Open backfills and queued tickets in a built-in pool, then matchmaker ticks: "
                                    "ticks to fill each backfill, ms per fill and per tick, double booking.")
def bench_backfill_cmd(
    pool: Annotated[str, typer.Option(help="Built-in pool (3v3, 12v12).")] = "3v3",
    store: Annotated[str, typer.Option(help="memory or redis.")] = "memory",
    tickets: Annotated[int, typer.Option(help="Solo tickets queued first.")] = 200,
    backfills: Annotated[int, typer.Option(help="Backfills opened (running matches missing 1–2 players).")] = 8,
    seed: Annotated[int, seed_option(help="Seed of the generated players.")] = 0,
    redis_url: Annotated[str, typer.Option(help="Redis for --store redis (keys under a fresh prefix, deleted after).")]
    = "redis://127.0.0.1:6379/0",
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from mgmatch.app.store import StoreUnavailable
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.backfill_bench import run_backfill_bench

    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    try:
        res = run_backfill_bench(pool, store, tickets, backfills, seed, redis_url)
    except InvalidInput as err:
        fail(f"--{err.field.replace('_', '-')}: {err.message}")
    except StoreUnavailable as err:
        fail(f"--redis-url: {err}")
    if json_file is not None:
        try:
            json_file.write_text(json.dumps(res.to_json(), indent=1, allow_nan=False))
        except OSError as err:
            fail(f"--json: cannot write {json_file}: {err.strerror}")
    sys.stdout.write(res.markdown())
    if res.double_booked:
        raise typer.Exit(1)
