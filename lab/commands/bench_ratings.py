"""``mgmatch bench ratings``: ratings written per second from match results (openskill, once per match)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option


@bench_app.command("ratings", help="Rate random matches' players from their outcome (openskill Plackett–Luce, once "
                                   "per match) on the memory store or Redis: ratings written per second.")
def bench_ratings_cmd(
    store: Annotated[str, typer.Option(help="memory or redis.")] = "memory",
    matches: Annotated[int, typer.Option(help="Matches rated.")] = 2000,
    team_size: Annotated[int, typer.Option(help="Players per team (two teams).")] = 3,
    players: Annotated[int, typer.Option(help="Population the matches draw from (smaller = more contention).")] = 2000,
    threads: Annotated[int, typer.Option(help="Threads posting outcomes at once.")] = 4,
    repeat_share: Annotated[float, typer.Option(help="Share of matches posted a second time (must change "
                                                     "nothing).")] = 0.1,
    seed: Annotated[int, seed_option(help="Seed of the matches and outcomes.")] = 0,
    redis_url: Annotated[str, typer.Option(help="Redis for --store redis (redis+cluster:// for a cluster; keys under "
                                                "a fresh prefix, deleted after).")] = "redis://127.0.0.1:6379/0",
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from mgmatch.app.store import StoreUnavailable
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.ratings_bench import run_ratings_bench

    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    try:
        res = run_ratings_bench(store, matches, team_size, players, threads, seed, repeat_share, redis_url)
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
