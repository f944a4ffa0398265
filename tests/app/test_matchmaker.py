"""The matchmaker loop over both stores: a tick's cost does not grow with the queue, a ticket that no
longer fits its pool is expired with a reason instead of stalling the pool, and backpressure."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, service_config  # noqa: E402

from mgmatch.app.matchmaker import Job, Matchmaker, ticket_problem  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.service import ticket_out  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import Ticket, new_ticket_id  # noqa: E402


class CountingStore:
    """The runtime's store, counting the ticket bodies a matchmaker reads."""

    def __init__(self, inner):
        self.inner, self.bodies = inner, 0

    def get_many(self, pool, ids):
        self.bodies += len(ids)
        return self.inner.get_many(pool, ids)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _queue(rt: Runtime, n: int, dim: int = 4, pool: str = "small", start: int = 0) -> list[str]:
    now = time.time()
    items = [(Ticket(new_ticket_id(pool), pool, [{"id": f"m{start + i}", "features": features(start + i, dim)}],
                     now - 100 + (start + i) * 1e-3, now + 300), None) for i in range(n)]
    return [res[0].id for res in rt.store.create_many(items)]


def _claim_into(store, jobs: list[dict]):
    """A matchmaker's ``publish`` for a store without job streams: claims, then keeps the job in ``jobs``."""
    def publish(pool, ticket_ids, claim_id, lease_until, job):
        if not store.claim(pool, ticket_ids, claim_id, lease_until):
            return False
        jobs.append(job)
        return True
    return publish


def test_a_tick_reads_a_bounded_window_and_each_body_once(make_rt):
    rt = make_rt(max_candidates=12, scan_window=30)
    _queue(rt, 400)
    store = CountingStore(rt.store)
    jobs: list[dict] = []
    mm = Matchmaker(rt.pools["small"], store, None, rt.experiments, publish=_claim_into(store, jobs))
    assert mm.tick() == 1
    assert store.bodies == 30  # the window, not the queue
    assert len(jobs[0]["tickets"]) == 12
    store.bodies = 0
    assert mm.tick() == 1
    assert store.bodies == 12  # only the tickets that entered the window; the rest were parsed already
    assert not set(jobs[0]["tickets"]) & set(jobs[1]["tickets"])


def _stale_and_fitting(rt: Runtime, now: float) -> tuple[Ticket, list[str]]:
    """A ticket queued before the pool's model changed (5 features where the model now reads 4), the
    oldest, and 6 tickets that fit."""
    bad = Ticket(new_ticket_id("small"), "small", [{"id": "stale", "features": [0.1] * 5}], now - 500, now + 300)
    rt.store.create(bad)
    return bad, _queue(rt, 6)


def test_a_ticket_that_no_longer_fits_is_expired_with_a_reason_and_the_pool_goes_on(make_rt):
    rt = make_rt(max_candidates=12)
    now = time.time()
    bad, good = _stale_and_fitting(rt, now)
    assert ticket_problem(rt.pools["small"], bad) is not None
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    formed = sum(mm.tick() for _ in range(3))
    assert formed == 1
    t = rt.store.get(bad.id)
    assert t.status == "expired" and "players[0].features" in t.reason and "got 5" in t.reason
    assert ticket_out(t)["reason"] == t.reason  # what GET /v1/tickets/{id} (and gRPC) show
    assert all(rt.store.get(tid).status == "matched" for tid in good)
    assert ticket_out(rt.store.get(good[0]))["match"]["matched_at"] >= now


def test_a_ticket_stored_with_blank_names_before_they_were_refused_is_still_matched(make_rt):
    """The API now refuses blank party, role and region names; a ticket queued by an earlier version
    with them is not expired by the upgrade (accepted data is never lost)."""
    rt = make_rt(max_candidates=12)
    now = time.time()
    old = Ticket(new_ticket_id("small"), "small", [{"id": "old", "features": features(99), "roles": [" "],
                                                    "pings": {"": 40}}], now - 500, now + 300)
    rt.store.create(old)
    good = _queue(rt, 5)
    assert ticket_problem(rt.pools["small"], old) is None
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert sum(mm.tick() for _ in range(3)) == 1
    assert [rt.store.get(tid).status for tid in [old.id, *good]] == ["matched"] * 6


def test_the_job_runner_expires_a_claimed_ticket_that_stopped_fitting_and_matches_the_rest(make_rt):
    rt = make_rt(max_candidates=12)
    now = time.time()
    bad, good = _stale_and_fitting(rt, now)
    job = Job("c0ffee", "small", [bad.id, *good], 2, [], 0.0, None, now + 30)
    assert rt.store.claim("small", job.tickets, job.claim_id, job.lease_until)
    assert rt.runner.run(job) == 1
    assert rt.store.get(bad.id).status == "expired"
    assert "features" in rt.store.get(bad.id).reason
    assert [rt.store.get(tid).status for tid in good] == ["matched"] * 6


@pytest.mark.redis
def test_backpressure_stops_claiming_while_the_pools_jobs_wait(redis_url, tmp_path):
    url, prefix = redis_url
    rt = Runtime.build(Settings(config=service_config(tmp_path, max_candidates=6, max_inflight_jobs=1),
                                store="redis", redis_url=url, key_prefix=prefix, embedded_workers=False))
    _queue(rt, 30)
    mm = Matchmaker(rt.pools["small"], rt.store, None, rt.experiments, publish=rt.store.claim_job,
                    backlog=rt.store.jobs_lag)
    assert mm.tick() == 1
    assert mm.tick() == 0 and mm.tick() == 0  # one job waits for a solver: nothing more is claimed
    assert rt.store.queue_depth("small") == 24
    (eid, _), = rt.store.read_jobs("small", "t", count=1, block_ms=None)
    rt.store.ack_job("small", eid)
    assert mm.tick() == 1


class CountingEngine:
    """The runtime's engine, counting one-match and joint solves."""

    def __init__(self, inner):
        self.inner, self.single, self.joint = inner, 0, []

    def solve(self, *args, **kw):
        self.single += 1
        return self.inner.solve(*args, **kw)

    def solve_batch(self, inst, plan, pool, matches, **kw):
        self.joint.append(matches)
        return self.inner.solve_batch(inst, plan, pool, matches, **kw)


def _party_queue(rt: Runtime, start: int = 0) -> list[str]:
    """18 players: three parties of 2 and 12 singles."""
    now = time.time()
    items = []
    for i in range(15):
        n = 2 if i < 3 else 1
        players = [{"id": f"j{start + i}-{k}", "features": features(start + 3 * i + k, 4)} for k in range(n)]
        items.append((Ticket(new_ticket_id("small"), "small", players, now - 100 + i * 1e-3, now + 300), None))
    return [res[0].id for res in rt.store.create_many(items)]


@pytest.mark.parametrize("partition", ["joint", "auto"])
def test_the_matchmaker_forms_several_matches_from_one_joint_solve(make_rt, partition):
    rt = make_rt(max_candidates=18, partition=partition, time_budget_ms=300)
    ids = _party_queue(rt)
    engine = CountingEngine(rt.runner.engine)
    rt.runner.engine = engine
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert mm.tick() == 3  # 18 players, room for three matches of 6
    assert engine.joint == [3] and engine.single == 0
    tickets = [rt.store.get(tid) for tid in ids]
    assert all(t.status == "matched" for t in tickets)
    matches: dict[str, list] = {}
    for t in tickets:
        matches.setdefault(t.result["match_id"], []).append(t)
        assert t.result["method"] == "joint"
    assert len(matches) == 3
    for group in matches.values():  # whole tickets (parties) per match, 3 players a team
        teams = group[0].result["teams"]
        assert sorted(len(team) for team in teams) == [3, 3]
        placed = sorted(pid for team in teams for pid in team)
        assert placed == sorted(p["id"] for t in group for p in t.players)
    for match_id in matches:  # joint matches name their pool and keep a record (results, export-log)
        assert match_id.startswith("small.")
        record = rt.store.get_match("small", match_id)
        assert record is not None and sorted(len(team) for team in record.teams) == [3, 3]


def test_auto_keeps_a_predictor_method_one_match_at_a_time(make_rt):
    rt = make_rt(max_candidates=18, partition="auto", method="mgmatch", time_budget_ms=300)
    _party_queue(rt)
    engine = CountingEngine(rt.runner.engine)
    rt.runner.engine = engine
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert mm.tick() >= 2
    assert engine.joint == [] and engine.single >= 2


def test_a_sequential_pool_solves_one_match_at_a_time(make_rt):
    rt = make_rt(max_candidates=18, partition="sequential", method="surrogate", time_budget_ms=200)
    _party_queue(rt)
    engine = CountingEngine(rt.runner.engine)
    rt.runner.engine = engine
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert mm.tick() >= 2
    assert engine.joint == [] and engine.single >= 2


def test_a_bad_partition_names_the_field():
    from mgmatch.app.config import parse_config
    from mgmatch.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        parse_config({"pools": [{"name": "x", "team_size": 3, "partition": "together"}]})
    assert err.value.field == "config.pools[0].partition"
    assert parse_config({"pools": [{"name": "x", "team_size": 3}]}).pools[0].partition == "auto"
