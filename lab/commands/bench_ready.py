"""``mgmatch bench ready``: ready-check throughput with a share of declines (nothing lost, nobody twice)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option


@bench_app.command("ready", help="Matchmaker ticks on a built-in pool with a ready check; players accept or "
                                 "decline (--decline-share): matches confirmed per second, nothing lost.")
def bench_ready_cmd(
    pool: Annotated[str, typer.Option(help="Built-in pool (3v3, 12v12).")] = "3v3",
    store: Annotated[str, typer.Option(help="memory or redis.")] = "memory",
    tickets: Annotated[int, typer.Option(help="Solo tickets queued first.")] = 600,
    decline_share: Annotated[float, typer.Option(help="Probability that a player declines.")] = 0.1,
    seed: Annotated[int, seed_option(help="Seed of the players and of who declines.")] = 0,
    redis_url: Annotated[str, typer.Option(help="Redis for --store redis (keys under a fresh prefix, deleted "
                                                "after).")] = "redis://127.0.0.1:6379/0",
    max_s: Annotated[float, typer.Option(help="Upper bound on the run (s).")] = 300.0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from mgmatch.app.store import StoreUnavailable
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.ready_bench import run_ready_bench

    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    if not 0 < max_s <= 86_400:
        fail(f"--max-s: must be in (0, 86400], got {max_s}")
    try:
        res = run_ready_bench(pool, store, tickets, decline_share, seed, redis_url, max_s)
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
    if not res.ok:
        raise typer.Exit(1)
