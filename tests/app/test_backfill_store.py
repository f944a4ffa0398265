"""Backfills in the store, over both implementations: create/get/cancel/expire, the atomic fill, and
under concurrency no ticket both in a backfill and in a new match."""

from __future__ import annotations

import threading
import time

import pytest
from svc_helpers import queued_tickets

from mgmatch.app.store import Backfill, Conflict, MatchResult, Ticket, new_ticket_id


def _backfill(store, pool="p", ttl=60.0, match_id="m-1", owner=None) -> Backfill:
    now = time.time()
    b = Backfill(new_ticket_id(pool), pool, match_id, [{"id": "e0", "features": [0.0]}, {"id": "e1", "features": [1.0]}],
                 [["e0"], ["e1"]], [1, 1], now, now + ttl, owner=owner)
    return store.create_backfill(b)


def _results(match_id, bid, ids):
    return {t: {"match_id": match_id, "team": k, "backfill_id": bid} for k, t in enumerate(ids)}


def test_create_get_and_cancel(store):
    b = _backfill(store, owner="key:abc")
    got = store.get_backfill(b.id)
    assert got.status == "open" and got.match_id == "m-1" and got.teams == [["e0"], ["e1"]]
    assert got.open == [1, 1] and got.assigned == [[], []] and got.owner == "key:abc"
    assert got.expires_at - got.created_at == pytest.approx(60.0, abs=0.01)
    assert [x.id for x in store.open_backfills("p")] == [b.id]
    assert store.cancel_backfill(b.id).status == "cancelled"
    assert store.open_backfills("p") == []
    with pytest.raises(Conflict, match="cancelled"):
        store.cancel_backfill(b.id)
    assert store.get_backfill("p." + "0" * 32) is None and store.cancel_backfill("p." + "0" * 32) is None
    assert store.get_backfill("nonsense") is None


def test_fill_matches_tickets_and_fills_the_backfill_atomically(store):
    ids = queued_tickets(store, 3)
    b = _backfill(store)
    assert store.fill_backfill("p", b.id, ids[:2], [["u0"], ["u1"]], _results("m-1", b.id, ids[:2]))
    got = store.get_backfill(b.id)
    assert got.status == "filled" and got.assigned == [["u0"], ["u1"]] and got.tickets == ids[:2]
    assert got.filled_at is not None
    for k, tid in enumerate(ids[:2]):
        t = store.get(tid)
        assert t.status == "matched" and t.result["match_id"] == "m-1" and t.result["team"] == k
    assert [t.id for t in store.queued("p")] == ids[2:]
    assert store.open_backfills("p") == []
    # the same fill replayed (a retry after a lost reply) says yes again and changes nothing
    assert store.fill_backfill("p", b.id, ids[:2], [["u0"], ["u1"]], _results("m-1", b.id, ids[:2]))
    # another fill of a filled backfill is refused
    assert not store.fill_backfill("p", b.id, ids[2:], [["u2"], []], _results("m-1", b.id, ids[2:]))
    assert store.get(ids[2]).status == "queued"
    # the filled tickets' players may queue again; a filled backfill cannot be cancelled
    again, created = store.create(Ticket(new_ticket_id("p"), "p", [{"id": "u0", "features": [0.0]}], time.time(),
                                         time.time() + 60))
    assert created and again.status == "queued"
    with pytest.raises(Conflict, match="filled"):
        store.cancel_backfill(b.id)


def test_fill_is_all_or_nothing(store):
    ids = queued_tickets(store, 4)
    b = _backfill(store)
    # one ticket proposed for a new match → nothing filled, nothing changed
    assert store.claim("p", ids[1:2], "c1", time.time() + 30)
    assert not store.fill_backfill("p", b.id, ids[:2], [["u0"], ["u1"]], _results("m-1", b.id, ids[:2]))
    assert store.get(ids[0]).status == "queued" and store.get(ids[1]).status == "proposed"
    assert store.get_backfill(b.id).status == "open"
    # a cancelled ticket → refused too
    store.cancel(ids[2])
    assert not store.fill_backfill("p", b.id, ids[2:], [["u2"], ["u3"]], _results("m-1", b.id, ids[2:]))
    assert store.get(ids[3]).status == "queued"
    # a cancelled backfill takes nothing
    store.cancel_backfill(b.id)
    assert not store.fill_backfill("p", b.id, [ids[0], ids[3]], [["u0"], ["u3"]], _results("m-1", b.id, ids))
    assert store.get(ids[0]).status == "queued" and store.get(ids[3]).status == "queued"
    # unknown backfill, or one of another pool
    assert not store.fill_backfill("p", "p." + "1" * 32, ids[:1], [["u0"], []], _results("m", "x", ids[:1]))


def test_expired_backfill_reads_expired_takes_nothing_and_is_reaped(store):
    ids = queued_tickets(store, 2)
    b = _backfill(store, ttl=0.2)
    time.sleep(0.3)
    assert store.get_backfill(b.id).status == "expired"
    assert store.open_backfills("p") == []
    assert not store.fill_backfill("p", b.id, ids, [["u0"], ["u1"]], _results("m-1", b.id, ids))
    assert [store.get(t).status for t in ids] == ["queued", "queued"]
    with pytest.raises(Conflict, match="expired"):
        store.cancel_backfill(b.id)
    assert store.reap_backfills("p") == 1
    assert store.reap_backfills("p") == 0
    assert store.get_backfill(b.id).status == "expired"


@pytest.mark.parametrize("rounds", [40])
def test_no_ticket_in_a_backfill_and_a_new_match_at_once(store, rounds):
    """Racing threads: backfills fill overlapping ticket sets while claims + commits form matches from
    them. Every ticket ends in exactly one place: one backfill or one match, never both."""
    won_fill: list[tuple[str, list[str]]] = []
    won_match: list[tuple[str, list[str]]] = []
    for r in range(rounds):
        ids = queued_tickets(store, 4, start=4 * r)
        b1, b2 = _backfill(store, match_id=f"bf{r}a"), _backfill(store, match_id=f"bf{r}b")
        barrier = threading.Barrier(3)

        def fill(b, pair, barrier=barrier):
            barrier.wait()
            if store.fill_backfill("p", b.id, pair, [[], []], _results(b.match_id, b.id, pair)):
                won_fill.append((b.id, pair))

        def match(quad, r=r, barrier=barrier):
            barrier.wait()
            cid = f"claim{r}"
            if store.claim("p", quad, cid, time.time() + 30):
                assert store.commit("p", cid, quad, [], MatchResult(f"m{r}", [quad], {t: 0 for t in quad}))
                won_match.append((cid, quad))

        threads = [threading.Thread(target=fill, args=(b1, ids[:2])), threading.Thread(target=fill, args=(b2, ids[1:3])),
                   threading.Thread(target=match, args=(ids,))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    owner: dict[str, str] = {}
    for where, tickets in won_fill + won_match:
        for t in tickets:
            assert t not in owner, f"ticket {t} in {owner[t]} and {where}"
            owner[t] = where
    # and every winner's tickets read matched under it
    for bid, pair in won_fill:
        assert store.get_backfill(bid).status == "filled"
        assert all(store.get(t).result["backfill_id"] == bid for t in pair)
    for _cid, quad in won_match:
        assert all(store.get(t).result["match_id"].startswith("m") for t in quad)
    assert won_fill or won_match
