"""``mgmatch bench cluster``: what one pool costs its Redis Cluster master (see :mod:`mgmatch.lab.clusterbench`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail


@bench_app.command("cluster", help="Create and match tickets on N pools of a Redis Cluster: scripts/s, and per "
                                   "master its µs per script and busy share; one pool's ceiling in tickets/s.")
def bench_cluster_cmd(
    tickets: Annotated[int, typer.Option(help="Tickets per pool.")] = 20_000,
    pools: Annotated[int, typer.Option(help="Pools driven at once (one client thread each).")] = 1,
    batch: Annotated[int, typer.Option(help="Tickets per create_many call (one pipeline).")] = 50,
    match_size: Annotated[int, typer.Option(help="Tickets per claim + commit.")] = 6,
    redis_url: Annotated[str | None, typer.Option(help="An existing cluster (redis+cluster://host:port); default: "
                                                       "start 3 masters + 3 replicas on loopback ports.")] = None,
    appendfsync: Annotated[str, typer.Option(help="AOF fsync policy of the cluster it starts.")] = "everysec",
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Progress on stderr.")] = False,
) -> None:
    from mgmatch.app.store import StoreUnavailable
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.clusterbench import ClusterBenchPlan, dumps, markdown, run_cluster_bench, unreachable
    from mgmatch.lab.localcluster import ClusterStartError

    plan = ClusterBenchPlan(tickets=tickets, pools=pools, batch=batch, match_size=match_size, url=redis_url,
                            appendfsync=appendfsync)
    try:
        plan.validate()
    except InvalidInput as err:
        option = "redis-url" if err.field == "url" else err.field.replace("_", "-")
        fail(f"--{option}: {err.message}")
    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    if redis_url is not None:
        reason = unreachable(redis_url)
        if reason is not None:
            fail(f"--redis-url: cannot reach Redis at {redis_url}: {reason}")
    say = (lambda m: sys.stderr.write(f"bench cluster: {m}\n")) if verbose else None
    try:
        report = run_cluster_bench(plan, say)
    except (ClusterStartError, StoreUnavailable) as err:
        sys.stderr.write(f"mgmatch: bench cluster: {str(err).splitlines()[0]}\n")
        raise typer.Exit(1) from None
    if json_file is not None:
        json_file.write_text(dumps(report))
    sys.stdout.write(markdown(report))
