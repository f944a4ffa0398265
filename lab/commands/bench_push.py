"""``mgmatch bench push``: commit-to-receipt latency of SSE and webhooks, events lost across a Redis restart."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option


@bench_app.command("push", help="Tickets over HTTP into a real mgmatch serve; an SSE client (reconnecting) and a "
                                "webhook receiver: p50/p99 ms from commit to receipt, events lost and duplicated.")
def bench_push_cmd(
    store: Annotated[str, typer.Option(help="memory, or redis (a redis-server of the bench's own, AOF).")] = "memory",
    rate: Annotated[float, typer.Option(help="Tickets per second.")] = 30.0,
    duration_s: Annotated[float, typer.Option(help="Seconds of ticket load.")] = 20.0,
    redis_restart: Annotated[bool, typer.Option("--redis-restart/--no-redis-restart",
                                                help="Stop Redis for a second halfway (--store redis).")] = False,
    seed: Annotated[int, seed_option(help="Seed of the generated players.")] = 0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose/--quiet", help="Progress on stderr.")] = False,
) -> None:
    from mgmatch.lab.push_bench import PushPlan, markdown, run_push_bench

    if store not in ("memory", "redis"):
        fail(f"--store must be memory or redis, got {store!r}")
    if not 0 < rate <= 2000:
        fail(f"--rate must be in (0, 2000], got {rate:g}")
    if not 1 <= duration_s <= 3600:
        fail(f"--duration-s must be in [1, 3600], got {duration_s:g}")
    if redis_restart and store != "redis":
        fail("--redis-restart needs --store redis")
    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    say = (lambda m: sys.stderr.write(f"bench push: {m}\n")) if verbose else None
    try:
        res = run_push_bench(PushPlan(store, rate, duration_s, seed, redis_restart), say)
    except RuntimeError as err:
        fail(str(err).splitlines()[0])
    if json_file is not None:
        try:
            json_file.write_text(json.dumps(res, indent=1, allow_nan=False))
        except OSError as err:
            fail(f"--json: cannot write {json_file}: {err.strerror}")
    sys.stdout.write(markdown(res))
    if res["sse"]["lost"] or res["webhook"]["lost"]:
        raise typer.Exit(1)
