"""``mgmatch bench backfill``: ticks and milliseconds to fill open backfills from a queue."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, seed_option
from mgmatch.lab.bench_io import check_json_out, report, run_bench


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
    from mgmatch.lab.backfill_bench import run_backfill_bench

    check_json_out(json_file)
    res = run_bench(lambda: run_backfill_bench(pool, store, tickets, backfills, seed, redis_url))
    report(res, json_file, ok=not res.double_booked)
