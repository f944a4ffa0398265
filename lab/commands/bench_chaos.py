"""``mgmatch bench chaos``: the production topology under worker kills, a Redis restart and a FLUSHALL.

With ``--cluster`` the store is a Redis Cluster (3 masters, a replica each) and the Redis restart is a
failover of the master serving the pool's slot (``--failover graceful|kill``).

Starts its own ``redis-server`` (loopback, append-only file with ``appendfsync always``, so what
Redis acknowledged survives its SIGKILL), the API, a matchmaker and ``--solvers`` solver workers
as processes; ingests ``--tickets`` tickets over HTTP while killing workers and Redis; then
reports accepted, matched, lost, double-booked, 5xx, players matched per second and the wait
p50/p99 (see :mod:`mgmatch.lab.chaos`). Every process it started is stopped at the end, also on
Ctrl-C. Exit 0 when nothing was lost or double-booked and no 5xx other than 503 was seen, else 1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option

ROWS = [
    ("accepted", "accepted"), ("not accepted (503s past the retry window, or refused)", "not_accepted"),
    ("accepted before / after FLUSHALL", None), ("matched (tickets)", "matched"),
    ("matched players", "matched_players"), ("lost", "lost"), ("leftover (< one match)", "leftover"),
    ("flushed tickets not reading 404", "flushed_not_404"), ("tickets that read 404, then existed", "transient_404"),
    ("double-booked players (new matches and backfills)", "double_booked"),
    ("twins posted / refused / after end / double live", None), ("twin 409s naming another field or ticket",
                                                                "twin_wrong_answer"),
    ("backfills accepted / filled / players backfilled", None), ("backfills their tickets do not confirm",
                                                                 "backfill_mismatched"),
    ("inconsistent tickets / malformed matches", None), ("HTTP 5xx other than 503", "http_5xx_non_503"),
    ("HTTP 503", "http_503"), ("dropped connections", "transport_errors"),
    ("players matched per second", "players_per_s"), ("wait p50 (s)", "wait_p50_s"), ("wait p99 (s)", "wait_p99_s"),
    ("ingest tickets/s (offered)", None), ("elapsed (s)", "elapsed_s"),
]


def markdown(r: dict) -> str:
    """The report as a Markdown table, then the chaos events and the processes' error counts."""
    special = {
        "accepted before / after FLUSHALL": f"{r['accepted_before_flush']} / {r['accepted_after_flush']}",
        "inconsistent tickets / malformed matches": f"{r['inconsistent_tickets']} / {r['malformed_matches']}",
        "ingest tickets/s (offered)": f"{r['ingest_rate']} ({r['rate_offered']:g})",
        "twins posted / refused / after end / double live":
            f"{r['twins']} / {r['twins_refused']} / {r['twins_after_end']} / {r['twin_double_live']}",
        "backfills accepted / filled / players backfilled":
            f"{r['backfills']} / {r['backfills_by_status'].get('filled', 0)} / {r['backfilled_players']}",
    }
    store = f"cluster (failover {r['failover']})" if r.get("store") == "cluster" else "redis"
    lines = [f"cpu_count={os.cpu_count()} pool={r['pool']} tickets={r['tickets']} solvers={r['solvers']} "
             f"kills={r['kills']} seed={r['seed']} store={store} appendfsync={r['appendfsync']}", "",
             "| metric | value |", "|---|---|"]
    for label, key in ROWS:
        value = special[label] if key is None else r.get(key)
        lines.append(f"| {label} | {'—' if value is None else value} |")
    lines.append("")
    if r["lost"]:
        lines.append(f"lost by status: {r['lost_by_status']} (e.g. {', '.join(r['lost_sample'])})")
    lines.append(f"wait measured from: {r['wait_source']}; HTTP codes: {r['http_codes']}"
                 + (f"; dropped connections: {r['transport_error_kinds']}" if r["transport_errors"] else ""))
    lines.append("events: " + "; ".join(f"{e['t']}s {e['what']}" for e in r["events"]))
    for name, p in r.get("processes", {}).items():
        if p["tracebacks"] or p["error_lines"] or not p["running"]:
            last = f" last: {p['last_errors'][-1]}" if p["last_errors"] else ""
            lines.append(f"{name}: started {p['starts']}×, running={p['running']}, {p['tracebacks']} tracebacks, "
                         f"{p['error_lines']} ERROR lines.{last}")
    return "\n".join(lines) + "\n"


def passed(r: dict) -> bool:
    """Every ticket accepted, nothing lost, nobody double-booked, every match consistent, no 5xx but 503, flushed tickets gone."""
    return (r["accepted"] > 0 and r["not_accepted"] == 0 and r["lost"] == 0 and r["double_booked"] == 0 and r["inconsistent_tickets"] == 0
            and r["malformed_matches"] == 0 and r["http_5xx_non_503"] == 0 and not r["flushed_not_404"]
            and r["transient_404"] == 0 and r["backfill_mismatched"] == 0
            and r.get("twin_double_live", 0) == 0 and r.get("twin_wrong_answer", 0) == 0)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@bench_app.command("chaos", help="Kill workers and Redis, FLUSHALL, while ingesting tickets over HTTP: lost, "
                                 "double-booked, 5xx, players matched per second, wait p50/p99.")
def bench_chaos_cmd(
    tickets: Annotated[int, typer.Option(help="Tickets to ingest.")] = 2000,
    pool: Annotated[str, typer.Option(help="Pool: 3v3, 12v12 (built in), br-100, ffa-32 (large lobbies, "
                                               "served from a config the run writes); players come from its "
                                               "preset world.")] = "3v3",
    solvers: Annotated[int, typer.Option(help="Solver worker processes.")] = 2,
    kills: Annotated[int, typer.Option(help="SIGKILLs of a solver or the matchmaker (each restarted).")] = 3,
    rate: Annotated[float, typer.Option(help="Offered ingest rate (tickets/s); above what the solvers match, so "
                                             "the matching rate is what is measured.")] = 250.0,
    seed: Annotated[int, seed_option(help="Seed of the generated players.")] = 0,
    concurrency: Annotated[int, typer.Option(help="HTTP requests in flight at most.")] = 32,
    backfills: Annotated[int, typer.Option(help="Backfills (running matches missing 1–2 players) posted over the "
                                                "ingest, filled from the same queue.")] = 20,
    twins: Annotated[int, typer.Option(help="Accepted tickets whose first player is at once queued in the other "
                                            "built-in pool too (must be refused: one live ticket per player).")] = 50,
    redis_restart: Annotated[bool, typer.Option("--redis-restart/--no-redis-restart",
                                                help="SIGKILL Redis once and start it again.")] = True,
    flush: Annotated[bool, typer.Option("--flush/--no-flush", help="FLUSHALL at 60% of the ingest.")] = True,
    redis_down_s: Annotated[float, typer.Option(help="Seconds Redis stays down when restarted.")] = 2.0,
    appendfsync: Annotated[str, typer.Option(help="Redis AOF fsync policy: always (nothing acknowledged is lost on "
                                                  "its SIGKILL) or everysec (the deployment default; faster).")] = "always",
    cluster: Annotated[bool, typer.Option("--cluster/--no-cluster",
                                          help="Run on a Redis Cluster of 3 masters with a replica each (needs "
                                               "redis-cli); the Redis restart becomes a failover of the pool's "
                                               "master.")] = False,
    failover: Annotated[str, typer.Option(help="With --cluster: graceful (CLUSTER FAILOVER; nothing acknowledged "
                                               "is lost) or kill (SIGKILL the master; writes its replica had not "
                                               "received are lost).")] = "graceful",
    min_idle_ms: Annotated[int, typer.Option(help="Solvers take over a dead solver's job after this (ms).")] = 2000,
    stall_s: Annotated[float, typer.Option(help="Stop waiting for matches after this long without progress.")] = 60.0,
    max_s: Annotated[float, typer.Option(help="Upper bound on the whole run (s), start-up excluded.")] = 1800.0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")] = None,
    logs: Annotated[Path | None, typer.Option(help="Copy the processes' logs into this directory.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print chaos events on stderr as they happen.")] = False,
) -> None:
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.chaos import ChaosError, ChaosPlan, run_chaos

    plan = ChaosPlan(tickets=tickets, pool=pool, solvers=solvers, kills=kills, rate=rate, seed=seed, concurrency=concurrency,
                     restart_redis=redis_restart, flush=flush, redis_down_s=redis_down_s, appendfsync=appendfsync,
                     cluster=cluster, failover=failover,
                     min_idle_ms=min_idle_ms, backfills=backfills, twins=twins,
                     stall_s=stall_s, max_s=max_s, logs_to=logs)
    try:
        plan.validate()
    except InvalidInput as err:
        fail(f"--{err.field.replace('_', '-')}: {err.message}")
    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")
    say = (lambda m: sys.stderr.write(f"chaos: {m}\n")) if verbose else None
    # Ctrl-C and SIGTERM raise KeyboardInterrupt wherever the run is, and its clean-up stops what it started:
    # with Python's own handler in place, asyncio.run would turn Ctrl-C into a cancellation of the run's main
    # task, which its coroutines absorbed (the run went on to the end and exited 0)
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        report = run_chaos(plan, say)
    except ChaosError as err:
        sys.stderr.write(f"mgmatch: bench chaos: {str(err).splitlines()[0]}\n")
        raise typer.Exit(1) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if json_file is not None:
        try:
            json_file.write_text(json.dumps(report, indent=1, allow_nan=False))
        except OSError as err:
            fail(f"--json: cannot write {json_file}: {err.strerror}")
    sys.stdout.write(markdown(report))
    if not passed(report):
        raise typer.Exit(1)
