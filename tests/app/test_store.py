"""The store contract, run over both implementations (in-memory, and Redis with its Lua scripts)."""

from __future__ import annotations

import time

import pytest
from svc_helpers import queued_tickets

from mgmatch.app.store import Conflict, MatchResult, RedisStore, Ticket, new_ticket_id, pool_of


def pytest_generate_tests(metafunc):
    """Every Redis test runs on one Redis and on the session's Redis Cluster (3 masters, 3 replicas)."""
    if "redis_url" in metafunc.fixturenames:
        metafunc.parametrize("redis_url", ["single", pytest.param("cluster", marks=pytest.mark.cluster)],
                             indirect=True)


def _result(match_id, ids):
    return MatchResult(match_id, [[f"x{k}" for k in range(len(ids))]], {t: 0 for t in ids})


def test_ticket_ids_carry_their_pool():
    tid = new_ticket_id("12v12")
    assert pool_of(tid) == "12v12"
    assert pool_of("garbage") is None and pool_of("p.short") is None


def test_claim_is_all_or_nothing(store):
    ids = queued_tickets(store, 6)
    assert store.claim("p", ids[:4], "m1", time.time() + 30)
    # overlaps a proposed ticket → nothing of the second claim happens
    assert not store.claim("p", ids[3:], "m2", time.time() + 30)
    assert [store.get(t).status for t in ids] == ["proposed"] * 4 + ["queued"] * 2
    assert [t.id for t in store.queued("p")] == ids[4:]
    assert store.queue_depth("p") == 2


def test_commit_matches_selected_and_requeues_the_rest_in_fifo_order(store):
    ids = queued_tickets(store, 6)
    assert store.claim("p", ids, "m1", time.time() + 30)
    assert store.commit("p", "m1", ids[1:3], ids[:1] + ids[3:], _result("m1-0", ids[1:3]))
    assert [store.get(t).status for t in ids] == ["queued", "matched", "matched", "queued", "queued", "queued"]
    assert store.get(ids[1]).result["match_id"] == "m1-0"
    assert [t.id for t in store.queued("p")] == [ids[0]] + ids[3:]  # original order kept


def test_commit_refuses_when_a_selected_ticket_was_cancelled(store):
    ids = queued_tickets(store, 4)
    assert store.claim("p", ids, "m1", time.time() + 30)
    assert store.cancel(ids[0]).status == "cancelled"
    assert not store.commit("p", "m1", ids[:2], ids[2:], _result("m1-0", ids[:2]))
    assert [store.get(t).status for t in ids] == ["cancelled", "queued", "queued", "queued"]
    # a commit under another claim id changes nothing
    assert store.claim("p", ids[1:], "m2", time.time() + 30)
    assert not store.commit("p", "other", ids[1:3], [], _result("x", ids[1:3]))
    assert [store.get(t).status for t in ids[1:]] == ["proposed"] * 3  # still m2's, untouched
    assert store.release("p", "other", ids[1:]) == 0
    assert store.release("p", "m2", ids[1:]) == 3
    assert [store.get(t).status for t in ids[1:]] == ["queued"] * 3


def test_takeover_fences_the_earlier_runner(store):
    ids = queued_tickets(store, 6)
    assert store.claim("p", ids, "c1", time.time() + 30)
    # the slow runner commits one match before the takeover: that one stands
    assert store.commit("p", "c1", ids[:2], [], _result("c1-0-a", ids[:2]))
    lease = time.time() + 60
    assert store.takeover("p", "c1", "c1.b", ids, lease) == 4  # the four still proposed
    assert {store.get(t).match_id for t in ids[2:]} == {"c1.b"}
    assert store.get(ids[2]).lease_until == pytest.approx(lease)
    # the slow runner, still alive, can neither commit nor release what it lost
    assert not store.commit("p", "c1", ids[2:4], [], _result("c1-1-a", ids[2:4]))
    assert store.release("p", "c1", ids[2:]) == 0
    assert [store.get(t).status for t in ids[2:]] == ["proposed"] * 4
    # a second takeover fences the first taker too (the stream entry still names c1)
    assert store.takeover("p", "c1", "c1.c", ids, lease) == 4
    assert not store.commit("p", "c1.b", ids[2:4], [], _result("c1.b-0", ids[2:4]))
    assert store.commit("p", "c1.c", ids[2:4], [], _result("c1.c-0", ids[2:4]))
    assert store.release("p", "c1.c", ids[4:]) == 2
    assert [store.get(t).status for t in ids] == ["matched"] * 4 + ["queued"] * 2
    assert store.takeover("p", "c1", "c1.d", ids, lease) == 0  # nothing left to take
    assert store.get(ids[0]).result["match_id"] == "c1-0-a" and store.get(ids[2]).result["match_id"] == "c1.c-0"


def test_reaper_expires_and_recovers_expired_leases(store):
    ids = queued_tickets(store, 3, ttl=0.3)
    more = queued_tickets(store, 2, start=10)
    assert store.claim("p", more, "m1", time.time() + 0.2)  # a worker claims, then dies
    time.sleep(0.4)
    expired, released = store.reap("p")
    assert (expired, released) == (3, 2)
    assert [store.get(t).status for t in ids] == ["expired"] * 3
    assert [store.get(t).status for t in more] == ["queued"] * 2
    # the dead worker's late commit is refused: its tickets were already handed back
    assert not store.commit("p", "m1", more, [], _result("m1-0", more))
    with pytest.raises(Conflict):
        store.cancel(ids[0])


def test_idempotency_and_one_live_ticket_per_player(store):
    now = time.time()
    t = Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60)
    first, created = store.create(t, "key-1")
    assert created
    again, created = store.create(Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60),
                                  "key-1")
    assert not created and again.id == first.id
    with pytest.raises(Conflict, match="'a'"):
        store.create(Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60))
    # one live ticket per player across pools too (issue 30)
    with pytest.raises(Conflict, match=first.id):
        store.create(Ticket(new_ticket_id("q"), "q", [{"id": "a", "features": [1.0]}], now, now + 60))
    store.cancel(first.id)
    assert store.create(Ticket(new_ticket_id("q"), "q", [{"id": "a", "features": [1.0]}], now, now + 60))[1]


@pytest.mark.redis
def test_redis_keys_of_a_pool_share_one_hash_tag(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    ids = queued_tickets(s, 2, pool="12v12")
    keys = list(s.r.scan_iter(f"{prefix}:*"))
    # every key of the pool carries its tag; the players' cross-pool locks each live in their own slot
    assert keys and all("{12v12}" in k or k.endswith(":live") and ":{pl:" in k for k in keys)
    assert sorted(k for k in keys if ":{pl:" in k) == sorted(s.keys.player_lock(f"u{i}") for i in range(2))
    assert s.r.ttl(s.keys.ticket("12v12", ids[0])) > 3600  # TTL + retention
    assert s.r.xlen(s.keys.events("12v12")) == 2


def test_create_many_reports_conflicts_in_place(store):
    now = time.time()
    items = [(Ticket(new_ticket_id("p"), "p", [{"id": pid, "features": [1.0]}], now, now + 60), None)
             for pid in ("a", "b", "a", "c")]
    out = store.create_many(items)
    assert [isinstance(o, Conflict) for o in out] == [False, False, True, False]
    assert [o[1] for o in out if not isinstance(o, Conflict)] == [True, True, True]
    assert store.queue_depth("p") == 3


def _party(store, pids, pool="p", ttl=60.0):
    now = time.time()
    t = Ticket(new_ticket_id(pool), pool, [{"id": pid, "features": [1.0]} for pid in pids], now, now + ttl)
    return store.create(t)[0].id


def test_queued_ids_are_fifo_and_get_many_reads_in_order(store):
    ids = queued_tickets(store, 5)
    assert store.queued_ids("p") == ids
    assert store.queued_ids("p", limit=2) == ids[:2]
    assert store.claim("p", ids[1:3], "m1", time.time() + 30)
    assert store.queued_ids("p") == [ids[0], *ids[3:]]
    unknown = new_ticket_id("p")
    got = store.get_many("p", [ids[2], unknown, ids[0]])
    assert got[1] is None
    assert (got[0].id, got[0].status, got[0].match_id) == (ids[2], "proposed", "m1")
    assert (got[2].id, got[2].status) == (ids[0], "queued")
    assert store.get_many("p", []) == []


def test_expire_ticket_keeps_its_reason_and_frees_its_players(store):
    ids = queued_tickets(store, 3)
    assert store.claim("p", ids, "m1", time.time() + 30)
    assert not store.expire_ticket("p", ids[0], "other", "bad")  # not this claim's ticket
    assert store.expire_ticket("p", ids[0], "m1", "its model changed")
    t = store.get(ids[0])
    assert (t.status, t.reason) == ("expired", "its model changed")
    assert not store.expire_ticket("p", ids[0], "m1", "again")  # no longer proposed
    assert store.get(ids[0]).reason == "its model changed"
    # the player may queue again at once; the other tickets are still the claim's
    queued_tickets(store, 1, start=0)
    assert store.release("p", "m1", ids) == 2
    with pytest.raises(Conflict):
        store.cancel(ids[0])


def test_players_hash_does_not_grow(store):
    """Every way a ticket ends (matched, cancelled, expired early, TTL) frees its players."""
    for rnd in range(3):
        base = rnd * 100
        ids = queued_tickets(store, 8, start=base)
        party = _party(store, [f"party{rnd}a", f"party{rnd}b"])
        short = queued_tickets(store, 2, start=base + 50, ttl=0.2)
        assert store.player_count("p") == 12
        assert store.claim("p", [*ids[:4], party], "m", time.time() + 30)
        assert store.commit("p", "m", ids[:2] + [party], ids[2:4], _result("m-0", ids[:2] + [party]))
        assert store.claim("p", ids[2:4], "n", time.time() + 30)
        assert store.expire_ticket("p", ids[2], "n", "bad")
        store.cancel(ids[3])  # proposed → cancelled
        for tid in ids[4:]:
            store.cancel(tid)  # queued → cancelled
        time.sleep(0.25)
        assert store.reap("p")[0] == 2
        assert [store.get(t).status for t in short] == ["expired", "expired"]
        assert store.player_count("p") == 0, rnd


def test_a_player_entry_does_not_free_a_newer_ticket(store):
    ids = queued_tickets(store, 1, ttl=0.2)
    time.sleep(0.25)  # expired by TTL, not reaped yet: the player may queue again
    newer = queued_tickets(store, 1)
    assert store.reap("p")[0] == 1
    assert store.player_count("p") == 1
    with pytest.raises(Conflict):
        queued_tickets(store, 1)  # the newer ticket still holds the player
    assert store.get(ids[0]).status == "expired" and store.get(newer[0]).status == "queued"


@pytest.mark.redis
def test_redis_stamps_times_from_its_own_clock(redis_url):
    """A host whose clock is far off neither expires tickets early nor gives leases that never end."""
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    skew = -86_400.0  # this host is a day behind
    t = Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], time.time() + skew,
               time.time() + skew + 60)
    stored, created = s.create(t)
    sec, usec = s.r.time()
    server_now = sec + usec / 1e6
    assert created and abs(stored.created_at - server_now) < 5
    assert stored.expires_at == pytest.approx(stored.created_at + 60, abs=1e-3)
    got = s.get(t.id)
    assert (got.created_at, got.expires_at) == (stored.created_at, stored.expires_at)
    assert s.reap("p") == (0, 0)  # the skewed caller's `now` is not the clock
    assert s.claim("p", [t.id], "m", time.time() + 30)  # a 30 s lease on any host's clock
    assert s.get(t.id).lease_until == pytest.approx(server_now + 30, abs=5)
    assert s.takeover("p", "m", "m.x", [t.id], time.time() + 90) == 1
    assert s.get(t.id).lease_until == pytest.approx(server_now + 90, abs=5)
    s.close()


@pytest.mark.redis
def test_redis_scripts_are_safe_to_replay(redis_url):
    """redis-py retries a call whose reply was lost on a broken connection: a replay changes nothing."""
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    now = time.time()
    t = Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60)
    first, _ = s.create(t)
    again, created = s.create(t)  # the same ticket id again: not a conflict with itself
    assert created and (again.created_at, again.expires_at) == (first.created_at, first.expires_at)
    assert s.queue_depth("p") == 1 and s.r.xlen(s.keys.events("p")) == 1
    assert s.claim("p", [t.id], "m", time.time() + 30)
    assert s.claim("p", [t.id], "m", time.time() + 30)  # the same claim again
    assert not s.claim("p", [t.id], "other", time.time() + 30)
    assert s.commit("p", "m", [t.id], [], _result("m-0", [t.id]))
    assert s.commit("p", "m", [t.id], [], _result("m-0", [t.id]))
    assert s.get(t.id).status == "matched" and s.r.xlen(s.keys.events("p")) == 2
    s.close()


@pytest.mark.redis
def test_a_job_is_claimed_and_published_in_one_step(redis_url):
    """claim_job proposes the tickets and puts the job on the solvers' stream together: a refused claim
    publishes nothing, and a replay (a retry after a lost reply) neither claims nor publishes twice."""
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    ids = queued_tickets(s, 6)
    job = {"claim_id": "m1", "tickets": ids[:4]}
    assert s.claim_job("p", ids[:4], "m1", time.time() + 30, job)
    assert s.claim_job("p", ids[:4], "m1", time.time() + 30, job)  # replayed: held, not published again
    assert not s.claim_job("p", ids[3:], "m2", time.time() + 30, {"claim_id": "m2"})  # ids[3] is m1's
    assert [s.get(t).status for t in ids] == ["proposed"] * 4 + ["queued"] * 2
    assert [t.id for t in s.queued("p")] == ids[4:]
    (eid, got), = s.read_jobs("p", "solver", count=10, block_ms=None)
    assert got == job and s.r.xlen(s.keys.jobs("p")) == 1
    # a ticket that is gone (cancelled) refuses the whole claim
    assert s.cancel(ids[4]).status == "cancelled"
    assert not s.claim_job("p", ids[4:], "m3", time.time() + 30, {"claim_id": "m3"})
    assert s.get(ids[5]).status == "queued" and s.r.xlen(s.keys.jobs("p")) == 1
    s.close()


@pytest.mark.redis
def test_a_ticket_in_too_many_failed_jobs_ends_expired(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    ids = queued_tickets(s, 3)
    assert s.claim("p", ids, "c1", time.time() + 30)
    assert s.takeover("p", "c1", "c1.x", ids, time.time() + 30) == 3
    assert s.release_crashed("p", "c1", ids, 2, "crashed") == (3, 0)  # the takeover's tickets count too
    assert [s.get(t).status for t in ids] == ["queued"] * 3
    assert s.claim("p", ids[:2], "c2", time.time() + 30)
    assert s.release_crashed("p", "c2", ids[:2], 2, "crashed") == (0, 2)
    assert [(s.get(t).status, s.get(t).reason) for t in ids] == [("expired", "crashed")] * 2 + [("queued", None)]
    assert s.player_count("p") == 1 and s.queued_ids("p") == ids[2:]
    s.close()


@pytest.mark.redis
def test_worker_liveness_is_one_sorted_set_per_kind(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    s.heartbeat("inference", "w1", 15)
    s.heartbeat("inference", "w2", 15)
    s.heartbeat("solver", "w3", 15)
    assert sorted(s.workers("inference")) == ["w1", "w2"] and s.workers("solver") == ["w3"]
    s.forget_worker("inference", "w2")
    s.r.zadd(s.keys.workers("inference"), {"dead": 1.0})  # a heartbeat that ran out long ago
    assert s.workers("inference") == ["w1"]
    s.heartbeat("inference", "w1", 15)
    assert s.r.zrange(s.keys.workers("inference"), 0, -1) == ["w1"]  # pruned by the heartbeat
    assert sorted(s.r.scan_iter(f"{prefix}:workers*")) == [s.keys.workers("inference"), s.keys.workers("solver")]
    s.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_redis_raises_store_unavailable_everywhere():
    """Sync and async, every call: StoreUnavailable (the API's 503), never a raw redis error."""
    import asyncio

    from mgmatch.app.store import StoreUnavailable

    s = RedisStore.from_url(f"redis://127.0.0.1:{_closed_port()}/0", prefix="x")
    now = time.time()
    t = Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60)
    calls = [lambda: s.create(t), lambda: s.create_many([(t, None)]), lambda: s.get(t.id),
             lambda: s.get_many("p", [t.id]), lambda: s.cancel(t.id), lambda: s.queued("p"),
             lambda: s.queued_ids("p"), lambda: s.queue_depth("p"), lambda: s.claim("p", [t.id], "m", now + 9),
             lambda: s.commit("p", "m", [t.id], [], _result("m", [t.id])), lambda: s.release("p", "m", [t.id]),
             lambda: s.takeover("p", "m", "n", [t.id], now + 9), lambda: s.expire_ticket("p", t.id, "m", "r"),
             lambda: s.reap("p"), lambda: s.publish_job("p", {}), lambda: s.read_jobs("p", "c", block_ms=None),
             lambda: s.autoclaim_jobs("p", "c", 10), lambda: s.ack_job("p", "1-0"),
             lambda: s.heartbeat("solver", "w", 15), lambda: s.workers("inference"),
             lambda: s.acquire_leader("p", "w", 1000), lambda: s.read_inference("c", 1, block_ms=None)]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            call()
    assert s.ping() is False

    async def aio():
        for call in (lambda: s.acreate(t), lambda: s.acreate_many([(t, None)]), lambda: s.aget(t.id),
                     lambda: s.acancel(t.id)):
            with pytest.raises(StoreUnavailable):
                await call()

    asyncio.run(aio())


@pytest.mark.redis
def test_trimmed_or_abandoned_inference_requests_cannot_wedge_the_group(redis_url):
    """A dead inference worker's pending requests, some trimmed away by MAXLEN ~, are dropped (not
    pending for ever); a live worker still gets every new request."""
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    stream = s.keys.inference_requests()
    s.request_inference([{"id": f"old{i}"} for i in range(5)])
    assert len(s.read_inference("dead", 10, block_ms=None)) == 5  # read, then the worker died
    s.r.xtrim(stream, maxlen=2)  # what approximate trimming may do to pending entries
    s.request_inference([{"id": "new"}])
    assert [r["id"] for _, r in s.read_inference("live", 10, block_ms=None)] == ["new"]
    assert s.r.xpending(stream, "inference")["pending"] == 6
    assert s.drop_stale_inference("live", min_idle_ms=0) == 6
    assert s.r.xpending(stream, "inference")["pending"] == 0 and s.r.xlen(stream) == 0
    s.close()
