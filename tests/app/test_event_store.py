"""The EventStore concern on memory, Redis and a Redis Cluster: the log the ticket changes append to,
reads after an id (blocking and async), trimming detection, and the delivery groups (new entries once,
pending ones again after a restart, takeover of a dead consumer's, acks, dead letters)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import queued_tickets  # noqa: E402


def _key(eid: str) -> tuple[int, int]:
    ms, _, seq = eid.partition("-")
    return int(ms), int(seq)


def test_the_log_holds_every_change_in_order_and_reads_after_an_id(store):
    ids = queued_tickets(store, 3, pool="p")
    store.cancel(ids[1])
    log = store.read_events("p", "0-0")
    assert [(f["event"], f["ticket"]) for _, f in log] == [("created", ids[0]), ("created", ids[1]),
                                                            ("created", ids[2]), ("cancelled", ids[1])]
    assert [_key(e) for e, _ in log] == sorted(_key(e) for e, _ in log) and len({e for e, _ in log}) == 4
    assert store.last_event_id("p") == log[-1][0]
    assert store.read_events("p", log[1][0]) == log[2:]
    assert store.read_events("p", log[-1][0]) == []
    assert store.read_events("other", "0-0") == [] and store.last_event_id("other") == "0-0"
    assert store.last_trimmed_event_id("p") == "0-0" and store.last_trimmed_event_id("other") == "0-0"
    t0 = time.monotonic()
    assert store.read_events("p", log[-1][0], block_ms=200) == []
    assert time.monotonic() - t0 >= 0.15  # waited for one


def test_async_read_wakes_on_a_new_event(store):
    queued_tickets(store, 1, pool="p")
    last = store.last_event_id("p")

    async def main():
        reader = asyncio.create_task(store.aread_events("p", last, block_ms=2000))
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        await asyncio.to_thread(queued_tickets, store, 1, "p", 60.0, 1)
        got = await reader
        return got, time.monotonic() - t0

    got, waited = asyncio.run(main())
    assert [f["event"] for _, f in got] == ["created"] and waited < 1.0


def test_wait_events_returns_at_once_for_a_newer_entry_and_wakes_on_a_new_one(store):
    queued_tickets(store, 1, pool="p")
    last = store.last_event_id("p")
    t0 = time.monotonic()
    assert store.wait_events({"p": "0-0", "q": "0-0"}, 2000) is True  # already newer: no wait
    assert time.monotonic() - t0 < 0.5
    t0 = time.monotonic()
    assert store.wait_events({"p": last, "q": "0-0"}, 200) is False  # nothing newer: waited the whole time
    assert time.monotonic() - t0 >= 0.15

    def later():
        time.sleep(0.2)
        queued_tickets(store, 1, "q", 60.0, 1)

    import threading

    th = threading.Thread(target=later)
    th.start()
    t0 = time.monotonic()
    assert store.wait_events({"p": last, "q": "0-0"}, 3000) is True
    waited = time.monotonic() - t0
    th.join()
    assert 0.1 <= waited < 2.0, waited  # woken by the new entry, not at the end of the wait


def test_delivery_groups_deliver_once_resume_pending_and_dead_letter(store):
    queued_tickets(store, 1, pool="p")
    assert store.read_deliveries("p", "webhook:a", "c1") == []  # a new group starts at the end
    ids = queued_tickets(store, 3, pool="p", start=1)
    got = store.read_deliveries("p", "webhook:a", "c1")
    assert [f["ticket"] for _, f in got] == ids
    assert store.read_deliveries("p", "webhook:a", "c1") == []  # read once
    assert [f["ticket"] for _, f in store.read_deliveries("p", "webhook:b", "c1")] == []  # groups are separate
    store.ack_deliveries("p", "webhook:a", [got[0][0]])
    # a restarted consumer of the same name gets what it read and did not acknowledge
    assert [e for e, _ in store.read_deliveries("p", "webhook:a", "c1", pending=True)] == [got[1][0], got[2][0]]
    # another consumer takes over entries left idle
    time.sleep(0.05)
    taken = store.autoclaim_deliveries("p", "webhook:a", "c2", min_idle_ms=10)
    assert [e for e, _ in taken] == [got[1][0], got[2][0]]
    assert store.read_deliveries("p", "webhook:a", "c1", pending=True) == []
    did = store.dead_letter_delivery("p", "webhook:a", got[1][0], {"webhook": "a", "error": "HTTP 500", "attempts": 3})
    dead = store.delivery_dead_letters("p")
    assert dead[0][0] == did and dead[0][1]["error"] == "HTTP 500" and dead[0][1]["entry"] == got[1][0]
    assert [e for e, _ in store.read_deliveries("p", "webhook:a", "c2", pending=True)] == [got[2][0]]


def test_an_expired_event_carries_its_reason_only_when_there_is_one(store):
    ids = queued_tickets(store, 2, pool="p", ttl=0.3)
    assert store.claim("p", [ids[0]], "p.m1", time.time() + 30)
    assert store.expire_ticket("p", ids[0], "p.m1", "no longer fits the pool")
    time.sleep(0.4)
    store.reap("p")
    ended = [f for _, f in store.read_events("p", "0-0") if f["event"] == "expired"]
    assert ended == [{"event": "expired", "ticket": ids[0], "reason": "no longer fits the pool"},
                     {"event": "expired", "ticket": ids[1]}]


def test_ready_check_transitions_are_public_events(store):
    """The ready check's transitions (written by the flow's scripts) reach clients under their public
    names: proposed, then declined for the decliner and queued again for the others; every internal
    event the store writes has a public type."""
    from test_ready_check import _proposed

    from mgmatch.app import events

    party, solo, later, mid = _proposed(store)
    assert store.answer_check("p", mid, "c", False) == "declined"
    log = store.read_events("p", "0-0")
    seen = [(events.public_type(f), f["ticket"]) for _, f in log]
    assert all(kind is not None for kind, _ in seen), [f for _, f in log]
    assert seen[:3] == [("queued", party.id), ("queued", solo.id), ("queued", later.id)]
    assert sorted(seen[3:]) == sorted([("proposed", party.id), ("proposed", solo.id), ("declined", solo.id),
                                       ("queued", party.id)])
    assert [k for k, t in seen[3:] if t == solo.id] == ["proposed", "declined"]
    assert events.EVENT_TYPES["declined"].terminal and not events.EVENT_TYPES["proposed"].terminal
