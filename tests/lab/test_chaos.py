"""The production topology under fire: API, matchmaker and 2 solvers as processes, a real redis-server
with an fsync-always AOF, ≥ 2,000 tickets over HTTP, solvers and the matchmaker SIGKILLed, Redis
SIGKILLed and restarted, then FLUSHALL. The run is :func:`mgmatch.lab.chaos.run_chaos`, the same
code as ``mgmatch bench chaos``; it starts its own redis-server (no shared Redis needed)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from chaos_helpers import REDIS_SERVER, describe  # noqa: E402

from mgmatch.core.presets import load_model  # noqa: E402
from mgmatch.lab.chaos import (  # noqa: E402
    ChaosPlan,
    backfill_schedule,
    make_backfills,
    make_tickets,
    run_chaos,
    schedule,
    twin_plan,
)
from mgmatch.lab.chaos_checks import check_backfills, check_matches, check_twins  # noqa: E402


def _view(tid: str, players: list[str], mid: str, teams: list[list[str]], team: int) -> dict:
    return {"id": tid, "status": "matched", "players": players,
            "match": {"match_id": mid, "teams": teams, "team": team}}


def test_match_check_finds_double_booking_inconsistent_teams_and_wrong_sizes():
    a = [["p1", "p2", "p3"], ["p4", "p5", "p6"]]
    b = [["p1", "p7", "p8"], ["p9", "p10", "p11"]]  # p1 again: double booked
    views = [_view("t1", ["p1"], "m1", a, 0), _view("t2", ["p4"], "m1", a, 1), _view("t3", ["p7"], "m2", b, 0)]
    got = check_matches(views, (3, 3))
    assert got.double_booked == ["p1"] and got.matches == 2 and not got.inconsistent and not got.malformed
    wrong_team = [_view("t1", ["p1"], "m1", a, 1)]  # p1 is not in team 1
    assert check_matches(wrong_team, (3, 3)).inconsistent == ["t1"]
    other_teams = [_view("t1", ["p1"], "m1", a, 0), _view("t2", ["p4"], "m1", [a[1], a[0]], 0)]
    assert check_matches(other_teams, (3, 3)).inconsistent == ["t2"]
    short = [_view("t1", ["p1"], "m1", [["p1", "p2"], ["p4", "p5", "p6"]], 0)]
    assert check_matches(short, (3, 3)).malformed == ["m1"]
    assert check_matches(views[:2], (3, 3)).ok


def _bf_view(tid, players, bid, mid, teams, team):
    v = _view(tid, players, mid, teams, team)
    v["match"]["backfill_id"] = bid
    return v


def test_backfill_checks_find_players_in_a_backfill_and_a_new_match():
    full = [["e1", "e2", "e3"], ["e4", "n1", "n2"]]
    bf = {"id": "b1", "status": "filled", "match_id": "g1", "assigned": [[], ["n1", "n2"]]}
    views = [_bf_view("t1", ["n1"], "b1", "g1", full, 1), _bf_view("t2", ["n2"], "b1", "g1", full, 1)]
    assert check_backfills([bf], views).ok and check_backfills([bf], views).assigned_players == 2
    assert check_matches(views, (3, 3)).ok
    # n2's ticket reads a new match instead: n2 is in the backfill and in that match
    m = [["n2", "x1", "x2"], ["x3", "x4", "x5"]]
    elsewhere = [views[0], _view("t2", ["n2"], "m9", m, 0)]
    got = check_backfills([bf], elsewhere)
    assert got.double_booked == ["n2"] and got.mismatched == ["b1"]
    # two backfills assigning the same player; and a ticket of the backfill it does not list
    bf2 = {"id": "b2", "status": "filled", "match_id": "g2", "assigned": [["n1"], []]}
    assert "n1" in check_backfills([bf, bf2], views).double_booked
    stray = [*views, _bf_view("t3", ["n3"], "b1", "g1", full, 1)]
    assert check_backfills([bf], stray).mismatched == ["b1"]
    # matches are keyed by backfill: a player in a backfill and in a new match is double booked there too
    both = [*views, _view("t9", ["n1"], "m9", [["n1", "x1", "x2"], ["x3", "x4", "x5"]], 0)]
    assert check_matches(both, (3, 3)).double_booked == ["n1"]


def test_chaos_backfills_are_deterministic_fit_the_pool_and_leave_open_slots():
    a, b = make_backfills("3v3", 10, seed=3), make_backfills("3v3", 10, seed=3)
    assert a == b and a != make_backfills("3v3", 10, seed=4)
    dim = load_model("3v3").feature_dim
    for body in a:
        ids = [p["id"] for p in body["players"]]
        assert sorted(ids) == sorted(p for t in body["teams"] for p in t)
        assert all(len(p["features"]) == dim for p in body["players"])
        assert [len(t) + n for t, n in zip(body["teams"], body["open"], strict=True)] == [3, 3]
        assert 1 <= sum(body["open"]) <= 2
    assert backfill_schedule(ChaosPlan(tickets=2000, backfills=4)) == [100, 525, 950, 1375]


def test_chaos_tickets_are_deterministic_fit_the_pool_and_parties_fill_a_team():
    a, b = make_tickets("3v3", 300, seed=3, party_share=0.1), make_tickets("3v3", 300, seed=3, party_share=0.1)
    assert a == b and a != make_tickets("3v3", 300, seed=4, party_share=0.1)
    dim = load_model("3v3").feature_dim
    sizes = {len(t["players"]) for t in a}
    assert sizes == {1, 3}
    ids = [p["id"] for t in a for p in t["players"]]
    assert len(ids) == len(set(ids))
    assert all(len(p["features"]) == dim for t in a for p in t["players"])


def test_transport_errors_are_counted_by_kind_and_timed_into_the_run():
    """A request without an HTTP answer is counted by kind and placed in the run's time line (the
    report's ``transport_error_window_s``), so a failure can be set against the chaos events."""
    import time

    from mgmatch.lab import loadgen
    from mgmatch.lab.chaos import ChaosRun

    run = ChaosRun(ChaosPlan(), [], "http://127.0.0.1:9", None, None, lambda _: None)
    run.t0 = time.time() - 5.0
    run._transport_error(loadgen.TransportError("ReadTimeout"))
    run.t0 -= 2.0
    run._transport_error(loadgen.TransportError("ConnectError"))
    assert dict(run.tally.transport_errors) == {"ReadTimeout": 1, "ConnectError": 1}
    assert run.tally.transport_error_at == [pytest.approx(5.0, abs=0.5), pytest.approx(7.0, abs=0.5)]


@pytest.mark.service
def test_the_load_client_reopens_a_keep_alive_connection_the_server_closed_while_idle():
    """uvicorn closes a keep-alive connection idle past its timeout (5 s by default): the next request
    goes out on a new connection, not into the closed one. (A master-kill chaos run paused its ingest
    for ~8 s and then reported all 64 of its connections as dropped by the service.)"""
    import asyncio
    import socket
    import threading
    import time

    import uvicorn

    from mgmatch.lab import loadgen

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, timeout_keep_alive=0.2,
                                           log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started

    async def two_requests_apart() -> list[int]:
        client = loadgen.Client(f"http://127.0.0.1:{port}", size=1)
        try:
            first = await client.get("/")
            await asyncio.sleep(0.8)  # the server closes the idle connection meanwhile
            second = await client.get("/")
            return [first.status_code, second.status_code]
        finally:
            client.close()

    try:
        assert asyncio.run(two_requests_apart()) == [200, 200]
    finally:
        server.should_exit = True
        thread.join(10)


def test_twin_check_counts_a_second_live_ticket_and_a_409_that_names_nothing():
    ok = {"field": "players[0].id", "message": "players[0].id: player 'c0' already holds live ticket 3v3.a"}
    out = check_twins([
        {"player": "c0", "first": "3v3.a", "code": 409, "error": ok, "first_status": "queued"},
        {"player": "c1", "first": "3v3.b", "code": 201, "error": None, "first_status": "matched"},
        {"player": "c2", "first": "3v3.c", "code": 201, "error": None, "first_status": "proposed"},
        {"player": "c3", "first": "3v3.d", "code": 409, "error": {"field": "players", "message": "x"},
         "first_status": "queued"},
    ])
    assert (out.posted, out.refused, out.after_end) == (4, 1, 1)
    assert out.double_live == ["c2"] and out.wrong_answer == ["c3"] and not out.ok


def test_twins_are_spread_over_the_ingest_and_fit_the_other_pool():
    plan = ChaosPlan(tickets=100, pool="3v3", twins=10, seed=3)
    twins = twin_plan(plan)
    assert sorted(twins) == list(range(0, 100, 10)) and twin_plan(plan) == twins
    dim = load_model("12v12").feature_dim
    assert all(b["pool"] == "12v12" and len(b["players"]) == 1 and len(b["players"][0]["features"]) == dim
               for b in twins.values())
    assert twin_plan(ChaosPlan(tickets=12, twins=50)).keys() == set(range(12))


def test_chaos_plan_names_a_bad_failover_mode():
    from mgmatch.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        ChaosPlan(cluster=True, failover="nuke").validate()
    assert err.value.field == "failover"


def test_chaos_schedule_kills_workers_and_restarts_redis_before_the_flush():
    events = schedule(ChaosPlan(tickets=2000, kills=3, solvers=2))
    assert [(e.at, e.kind, e.target) for e in events] == [
        (200, "kill", "solver-0"), (500, "kill", "matchmaker"), (700, "redis", ""), (800, "kill", "solver-1"),
        (1200, "flush", "")]


@pytest.mark.slow
@pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server binary on PATH")
def test_kills_redis_restart_and_flushall_lose_nothing_redis_kept_and_book_nobody_twice(tmp_path):
    plan = ChaosPlan(tickets=2000, pool="3v3", solvers=2, kills=3, rate=80.0, seed=11, redis_down_s=1.5,
                     restart_after_s=0.5, min_idle_ms=1000, stall_s=45.0, max_s=240.0, accept_timeout_s=30.0,
                     logs_to=tmp_path / "logs")
    r = run_chaos(plan)
    why = describe(r)
    kinds = [e["what"] for e in r["events"]]
    # the chaos happened: 3 SIGKILLs (each worker started again), Redis killed and back, the flush
    assert sum(w.startswith("SIGKILL ") and "redis" not in w for w in kinds) == 3, why
    assert "SIGKILL redis-server" in kinds and any(w.startswith("FLUSHALL") for w in kinds), why
    assert r["processes"]["solver-0"]["starts"] == 2 and r["processes"]["matchmaker"]["starts"] == 2, why
    # every ticket got in (503s are retried), on both sides of the flush
    assert r["accepted"] == 2000 and r["accepted_before_flush"] > 0 and r["accepted_after_flush"] > 0, why
    # no 5xx but 503, and the API never dropped a connection
    assert r["http_5xx_non_503"] == 0, why
    assert r["transport_errors"] == 0, why
    # nothing lost that Redis kept: every ticket matched except a remainder smaller than one match
    assert r["lost"] == 0 and r["transient_404"] == 0, why
    # (a remainder of fewer than 6 players can be left on each side of the flush)
    assert r["matched"] + r["leftover"] == r["accepted"] and r["leftover"] <= 10, why
    # the flushed tickets are gone (404), not resurrected half-written
    assert r["flushed_not_404"] == 0, why
    # nobody double-booked; every match consistent across its tickets and 3v3-shaped
    assert r["double_booked"] == 0 and r["inconsistent_tickets"] == 0 and r["malformed_matches"] == 0, why
    # backfills took players from the same queue, and every filled one is confirmed by its tickets
    assert r["backfills"] == plan.backfills and r["backfills_by_status"].get("filled", 0) > 0, why
    assert r["backfill_double_booked"] == 0 and r["backfill_mismatched"] == 0, why
    # a player queued in the other pool while their ticket is live is refused, naming the ticket
    assert r["twins"] == plan.twins and r["twins_refused"] > 0, why
    assert r["twin_double_live"] == 0 and r["twin_wrong_answer"] == 0, why


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.cluster
@pytest.mark.skipif(REDIS_SERVER is None or shutil.which("redis-cli") is None,
                    reason="the cluster run needs redis-server and redis-cli on PATH")
def test_on_a_cluster_a_master_failover_and_kills_lose_nothing_and_book_nobody_twice(tmp_path):
    """The same run on a Redis Cluster (3 masters, a replica each): the master serving the pool's slot
    hands over to its replica (CLUSTER FAILOVER) mid-ingest, workers are SIGKILLed, then FLUSHALL on
    every master."""
    plan = ChaosPlan(tickets=1000, pool="3v3", solvers=2, kills=3, rate=80.0, seed=12, cluster=True,
                     failover="graceful", restart_after_s=0.5, min_idle_ms=1000, stall_s=45.0, max_s=240.0,
                     accept_timeout_s=30.0, logs_to=tmp_path / "logs")
    r = run_chaos(plan)
    why = describe(r)
    kinds = [e["what"] for e in r["events"]]
    assert r["store"] == "cluster" and r["failover"] == "graceful", why
    assert any(w.startswith("CLUSTER FAILOVER") for w in kinds), why
    assert any(w.startswith("replica ") and "is the pool's master" in w for w in kinds), why
    assert sum(w.startswith("SIGKILL ") for w in kinds) == 3 and any(w.startswith("FLUSHALL") for w in kinds), why
    assert r["accepted"] == 1000 and r["accepted_before_flush"] > 0 and r["accepted_after_flush"] > 0, why
    assert r["http_5xx_non_503"] == 0 and r["transport_errors"] == 0, why
    assert r["lost"] == 0 and r["transient_404"] == 0 and r["flushed_not_404"] == 0, why
    assert r["matched"] + r["leftover"] == r["accepted"] and r["leftover"] <= 10, why
    assert r["double_booked"] == 0 and r["inconsistent_tickets"] == 0 and r["malformed_matches"] == 0, why
    assert r["twins"] == plan.twins and r["twins_refused"] > 0 and r["twin_double_live"] == 0, why
    assert r["twin_wrong_answer"] == 0, why
    assert all(p["tracebacks"] == 0 for p in r["processes"].values()), why
    assert r["processes"]["api"]["error_lines"] == 0, why  # e.g. no unclosed asyncio cluster clients


def _processes_with(marker: bytes) -> list[int]:
    """Pids whose environment contains ``marker`` (this user's processes)."""
    pids = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in env.read_bytes():
                pids.append(int(env.parent.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
@pytest.mark.skipif(REDIS_SERVER is None or not Path("/proc/self/environ").exists(),
                    reason="needs redis-server and /proc")
def test_bench_chaos_interrupted_stops_every_process_it_started_and_removes_its_temp_dir():
    import re
    import signal
    import socket
    import subprocess

    # a run far longer than the test waits (2,000 tickets at 40/s), so the interrupt always finds it running
    cmd = [sys.executable, "-c", "from mgmatch.cli import main; main()", "bench", "chaos", "--tickets", "2000",
           "--rate", "40", "-v"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        up = ""
        for line in proc.stderr:
            if "service up at" in line:
                up = line
                break
        m = re.search(r"at http://127\.0\.0\.1:(\d+) \(Redis redis://127\.0\.0\.1:(\d+)/0.*key prefix (\S+), "
                      r"logs in (\S+)\)", up)
        assert m, f"no start-up line: {up!r}"
        api_port, redis_port, prefix, workdir = int(m[1]), int(m[2]), m[3], Path(m[4])
        marker = f"MGMATCH_KEY_PREFIX={prefix}".encode()
        assert len(_processes_with(marker)) == 4 and workdir.is_dir()  # API, matchmaker, 2 solvers
        seen = []
        for line in proc.stderr:  # interrupted while the chaos runs
            seen.append(line)
            if "SIGKILL" in line:
                break
        assert proc.poll() is None, f"the run ended before it was interrupted: {''.join(seen[-5:])!r}"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _processes_with(marker) == [] and not workdir.exists()
    for port in (api_port, redis_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
