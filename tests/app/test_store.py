"""The store contract, run over both implementations (in-memory, and Redis with its Lua scripts)."""

from __future__ import annotations

import time

import pytest

from mgmatch.app.store import Conflict, MatchResult, MemoryStore, RedisStore, Ticket, new_ticket_id, pool_of


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request):
    if request.param == "memory":
        yield MemoryStore()
        return
    url, prefix = request.getfixturevalue("redis_url")
    s = RedisStore.from_url(url, prefix=prefix)
    yield s
    s.close()


def _tickets(store, n, pool="p", ttl=60.0, start=0):
    now = time.time()
    out = []
    for i in range(start, start + n):
        t = Ticket(new_ticket_id(pool), pool, [{"id": f"u{i}", "features": [float(i)]}], now + i * 1e-3, now + ttl)
        stored, created = store.create(t)
        assert created
        out.append(stored.id)
    return out


def _result(match_id, ids):
    return MatchResult(match_id, [[f"x{k}" for k in range(len(ids))]], {t: 0 for t in ids})


def test_ticket_ids_carry_their_pool():
    tid = new_ticket_id("12v12")
    assert pool_of(tid) == "12v12"
    assert pool_of("garbage") is None and pool_of("p.short") is None


def test_claim_is_all_or_nothing(store):
    ids = _tickets(store, 6)
    assert store.claim("p", ids[:4], "m1", time.time() + 30)
    # overlaps a proposed ticket → nothing of the second claim happens
    assert not store.claim("p", ids[3:], "m2", time.time() + 30)
    assert [store.get(t).status for t in ids] == ["proposed"] * 4 + ["queued"] * 2
    assert [t.id for t in store.queued("p")] == ids[4:]
    assert store.queue_depth("p") == 2


def test_commit_matches_selected_and_requeues_the_rest_in_fifo_order(store):
    ids = _tickets(store, 6)
    assert store.claim("p", ids, "m1", time.time() + 30)
    assert store.commit("p", "m1", ids[1:3], ids[:1] + ids[3:], _result("m1-0", ids[1:3]))
    assert [store.get(t).status for t in ids] == ["queued", "matched", "matched", "queued", "queued", "queued"]
    assert store.get(ids[1]).result["match_id"] == "m1-0"
    assert [t.id for t in store.queued("p")] == [ids[0]] + ids[3:]  # original order kept


def test_commit_refuses_when_a_selected_ticket_was_cancelled(store):
    ids = _tickets(store, 4)
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
    ids = _tickets(store, 6)
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
    ids = _tickets(store, 3, ttl=0.3)
    more = _tickets(store, 2, start=10)
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
    # another pool is another queue
    assert store.create(Ticket(new_ticket_id("q"), "q", [{"id": "a", "features": [1.0]}], now, now + 60))[1]
    store.cancel(first.id)
    assert store.create(Ticket(new_ticket_id("p"), "p", [{"id": "a", "features": [1.0]}], now, now + 60))[1]


@pytest.mark.redis
def test_redis_keys_of_a_pool_share_one_hash_tag(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    ids = _tickets(s, 2, pool="12v12")
    keys = list(s.r.scan_iter(f"{prefix}:*"))
    assert keys and all("{12v12}" in k for k in keys)
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
