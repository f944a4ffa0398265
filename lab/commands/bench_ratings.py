"""``mgmatch bench ratings``: ratings written per second from match results (openskill, once per match)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, seed_option
from mgmatch.lab.bench_io import check_json_out, report, run_bench


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
    from mgmatch.lab.ratings_bench import run_ratings_bench

    check_json_out(json_file)
    res = run_bench(lambda: run_ratings_bench(store, matches, team_size, players, threads, seed, repeat_share, redis_url))
    report(res, json_file, ok=res.ok)
