"""``mgmatch bench ready``: ready-check throughput with a share of declines (nothing lost, nobody twice)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option
from mgmatch.lab.bench_io import check_json_out, report, run_bench


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
    kill_every_s: Annotated[float, typer.Option(
        help="0: matchmaker ticks in this process. Otherwise a redis-server of the run's own, a matchmaker and "
             "--solvers solver processes, one of them SIGKILLed and restarted every this many seconds while "
             "players answer checks (--store and --redis-url do not apply).")] = 0.0,
    solvers: Annotated[int, typer.Option(help="Solver processes with --kill-every-s.")] = 2,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from mgmatch.lab.ready_bench import run_ready_bench

    check_json_out(json_file)
    if not 0 < max_s <= 86_400:
        fail(f"--max-s: must be in (0, 86400], got {max_s}")
    if kill_every_s:
        from mgmatch.lab.chaos import ChaosError
        from mgmatch.lab.ready_kills import run_ready_kills

        try:
            res = run_bench(lambda: run_ready_kills(pool, tickets, decline_share, seed, kill_every_s, solvers, max_s,
                                                    say=lambda m: typer.echo(m, err=True)))
        except ChaosError as err:
            fail(str(err))
    else:
        res = run_bench(lambda: run_ready_bench(pool, store, tickets, decline_share, seed, redis_url, max_s))
    report(res, json_file, ok=res.ok)
