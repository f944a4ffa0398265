"""Ticket events as clients see them: their public names, their payload, and the watchers that SSE
(:mod:`mgmatch.app.api`), gRPC (:mod:`mgmatch.app.grpc_server`) and webhooks (:mod:`mgmatch.app.webhooks`)
read them with.

The store appends an event to its pool's log in the same atomic step as the ticket change
(:class:`~mgmatch.app.store.protocols.EventStore`). Its internal name (what the Lua scripts and the memory
store write) becomes a public type here, in one table, :data:`EVENT_TYPES`; a new transition adds a row.
An event's ``id`` is its log entry id (``<ms>-<seq>``: the store clock's milliseconds at the change), which a
client sends back as ``Last-Event-ID`` to resume; its ``data`` is the ticket as ``GET /v1/tickets/{id}``
shows it at that event (:func:`snapshot`).

Adding an event type (e.g. a ready check's ``proposed``): emit it where the ticket changes, in the same
atomic step, with ``emit(events_key, maxlen, kind, ticket_id, field, value, …)`` of ``lua/lib.lua`` in a
Redis script and ``self._event(kind, ticket, **fields)`` under the memory store's lock; add its row to
:data:`EVENT_TYPES` (public name, whether it ends the ticket's stream, the status its snapshot shows).
SSE, gRPC, webhooks and the webhook config's ``events`` list pick it up from there.

Retention: a pool's log keeps about ``EVENTS_MAXLEN`` (100,000) entries in Redis, ``max_events`` (10,000)
per pool in memory. A client resuming from an id older than what is kept gets one ``resync`` event (the
ticket as it is now, or for a pool stream ``{"pool", "last_event_id"}``) and then the stream from the
oldest kept entry on: it should GET the tickets it cares about. The ``resync`` event's id is the newest
trimmed entry's, so a client that reconnects with it gets the kept entries without another ``resync``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from . import metrics
from .service import ticket_out
from .store import EventStore, Store, Ticket


@dataclass(frozen=True)
class EventType:
    """A public event type: its name, whether the ticket's stream ends with it, and the ticket status
    that its snapshot shows (None: the ticket as stored, for a terminal state that cannot change again)."""

    name: str
    terminal: bool
    status: str | None = None


#: public types by the internal name the store writes (a ``matched`` event with a ``backfill`` field is
#: ``backfilled``, see :func:`public_type`); the flow's ``proposed``/``declined`` transitions add rows here
EVENT_TYPES: dict[str, EventType] = {
    "created": EventType("queued", terminal=False, status="queued"),
    "queued": EventType("queued", terminal=False, status="queued"),  # back in the queue after a ready check
    "proposed": EventType("proposed", terminal=False, status="proposed"),
    "matched": EventType("matched", terminal=True),
    "backfilled": EventType("backfilled", terminal=True),
    "cancelled": EventType("cancelled", terminal=True),
    "expired": EventType("expired", terminal=True),
    "declined": EventType("declined", terminal=True),
}
#: every public type, in lifecycle order (what a webhook's ``events`` may name)
PUBLIC_TYPES: tuple[str, ...] = tuple(dict.fromkeys(t.name for t in EVENT_TYPES.values()))
#: a resuming client missed trimmed events: it should GET the ticket(s)
RESYNC = "resync"
#: seconds between SSE comment lines on an idle stream (proxies close silent connections)
HEARTBEAT_S = 15.0
#: how long one store read waits for a new event (below the store's call deadline)
READ_BLOCK_MS = 1000
_ENTRY_ID = re.compile(r"^\d{1,20}(-\d{1,20})?$")


def event_type(fields: dict[str, str]) -> EventType | None:
    """The public type of a log entry's fields (None for an internal event clients do not see)."""
    kind = fields.get("event", "")
    if kind == "matched" and fields.get("backfill"):
        kind = "backfilled"
    return EVENT_TYPES.get(kind)


def public_type(fields: dict[str, str]) -> str | None:
    t = event_type(fields)
    return None if t is None else t.name


def valid_entry_id(value: str) -> bool:
    """Whether ``value`` is a log entry id (``<ms>`` or ``<ms>-<seq>``), as ``Last-Event-ID`` must be."""
    return bool(_ENTRY_ID.match(value)) and all(int(p) < 2**64 for p in value.split("-"))


def snapshot(t: Ticket, kind: EventType) -> dict[str, Any]:
    """The ticket as GET showed it at this event: for a non-terminal event its status then, without
    the match or end reason it may have gained since; for a terminal one, the ticket as stored."""
    out = ticket_out(t)
    if kind.status is not None:
        out["status"] = kind.status
        if kind.status != "proposed":
            out.pop("match", None)
        out.pop("reason", None)
    return out


@dataclass
class Event:
    id: str
    type: str
    pool: str
    ticket: dict[str, Any]
    owner: str | None = None
    terminal: bool = False

    def sse(self) -> str:
        import json

        return f"id: {self.id}\nevent: {self.type}\ndata: {json.dumps(self.ticket, separators=(',', ':'))}\n\n"


def entry_ms(entry_id: str) -> float:
    """The store-clock time (Unix seconds) an entry id was made at."""
    return int(entry_id.partition("-")[0]) / 1000


def observe(transport: str, step: str, entry_ids: list[str], now: float | None = None) -> None:
    """Time from commit to ``step`` of these entries into ``mgmatch_events_push_seconds`` (where a push's
    latency goes: the log read, then the send)."""
    now = time.time() if now is None else now
    h = metrics.EVENT_PUSH_SECONDS.labels(transport, step)
    for eid in entry_ids:
        h.observe(max(0.0, now - entry_ms(eid)))


def _key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def missed(after: str, last_trimmed: str) -> bool:
    """Whether a reader resuming after ``after`` missed trimmed entries."""
    return _key(last_trimmed) > _key(after)


def start_after(t: Ticket) -> str:
    """The log id just before the ticket's creation: its own stream starts here."""
    return f"{max(0, int(t.created_at * 1000) - 1)}-0"


class _Owners:
    """Tickets already read on one stream, by id (bounded): their owner and body for the next events."""

    def __init__(self, size: int = 4096):
        self.size, self.d = size, OrderedDict()

    def get(self, tid: str) -> Ticket | None:
        return self.d.get(tid)

    def put(self, t: Ticket) -> None:
        self.d[t.id] = t
        self.d.move_to_end(t.id)
        while len(self.d) > self.size:
            self.d.popitem(last=False)


def _events(entries: list[tuple[str, dict[str, str]]], tickets: dict[str, Ticket | None], pool: str,
            owner: str | None, only: str | None = None) -> list[Event]:
    out = []
    for eid, f in entries:
        kind = event_type(f)
        tid = f.get("ticket", "")
        if kind is None or (only is not None and tid != only):
            continue
        t = tickets.get(tid)
        if t is None or (owner is not None and t.owner != owner):
            continue
        out.append(Event(eid, kind.name, pool, snapshot(t, kind), t.owner, kind.terminal))
    return out


async def watch_ticket(store: Store, t: Ticket, after: str | None,
                       stop: Callable[[], bool] = lambda: False) -> AsyncIterator[Event | None]:
    """The events of one ticket from after ``after`` (None: from its creation), ending after a terminal
    one. Yields None when a read found nothing (a moment for the caller's heartbeat)."""
    pool = t.pool
    cursor = after or start_after(t)
    trimmed = None if after is None else await asyncio.to_thread(store.last_trimmed_event_id, pool)
    if trimmed is not None and missed(after, trimmed):
        # its id is where the kept entries start: a client resuming from it misses nothing more
        current = await store.aget(t.id) or t
        yield Event(trimmed, RESYNC, pool, ticket_out(current))
        if current.status in ("matched", "cancelled", "expired"):
            return
    while not stop():
        entries = await store.aread_events(pool, cursor, 100, READ_BLOCK_MS)
        if not entries:
            yield None
            continue
        cursor = entries[-1][0]
        mine = [(eid, f) for eid, f in entries if f.get("ticket") == t.id]
        if not mine:
            yield None
            continue
        observe("sse", "read", [eid for eid, _ in mine])
        current = await store.aget(t.id)
        for ev in _events(mine, {t.id: current}, pool, None):
            yield ev
            if ev.terminal:
                return


async def watch_pool(store: Store, pool: str, owner: str | None, after: str | None,
                     stop: Callable[[], bool] = lambda: False, now_id: str | None = None) -> AsyncIterator[Event | None]:
    """Every event of the pool's tickets that ``owner`` owns (None: every ticket) after ``after`` (None:
    from now on: after ``now_id``, the log's last id read before the stream was answered, so that an
    event committed once the client saw the answer is never missed). Yields None when a read found nothing."""
    if after is None:
        cursor = now_id if now_id is not None else await asyncio.to_thread(store.last_event_id, pool)
    else:
        cursor = after
        trimmed = await asyncio.to_thread(store.last_trimmed_event_id, pool)
        if missed(after, trimmed):
            yield Event(trimmed, RESYNC, pool, {"pool": pool, "last_event_id": trimmed})
    cache = _Owners()
    while not stop():
        entries = await store.aread_events(pool, cursor, 200, READ_BLOCK_MS)
        if not entries:
            yield None
            continue
        cursor = entries[-1][0]
        observe("sse", "read", [eid for eid, _ in entries])
        tickets = await _atickets(store, pool, entries, cache)
        out = _events(entries, tickets, pool, owner)
        for ev in out:
            yield ev
        if not out:
            yield None
        # the memory store's reads answer without suspending: a stream replaying a long log (Last-Event-ID far
        # back) would otherwise hold the event loop for all of it, while the live streams' events wait
        await asyncio.sleep(0)


def _tickets(store: Store, pool: str, entries: list[tuple[str, dict[str, str]]],
             cache: _Owners | None = None) -> dict[str, Ticket | None]:
    """The tickets the entries name, in one store round trip (as they are now)."""
    ids = list(dict.fromkeys(f.get("ticket", "") for _, f in entries if f.get("ticket")))
    found = dict(zip(ids, store.get_many(pool, ids), strict=True)) if ids else {}
    return _cached(found, cache)


async def _atickets(store: Store, pool: str, entries: list[tuple[str, dict[str, str]]],
                    cache: _Owners | None = None) -> dict[str, Ticket | None]:
    """:func:`_tickets` on the event loop (no thread hop: the store's own async read)."""
    ids = list(dict.fromkeys(f.get("ticket", "") for _, f in entries if f.get("ticket")))
    found = dict(zip(ids, await store.aget_many(pool, ids), strict=True)) if ids else {}
    return _cached(found, cache)


def _cached(found: dict[str, Ticket | None], cache: _Owners | None) -> dict[str, Ticket | None]:
    if cache is not None:
        for tid, t in found.items():
            if t is not None:
                cache.put(t)
            elif (old := cache.get(tid)) is not None:  # gone from the store since: its last known body
                found[tid] = old
    return found


def watch_ticket_sync(store: EventStore, get: Callable[[str], Ticket | None], t: Ticket, after: str | None,
                      stop: Callable[[], bool]) -> Iterator[Event | None]:
    """:func:`watch_ticket` for a thread (the gRPC server)."""
    pool, cursor = t.pool, after or start_after(t)
    trimmed = None if after is None else store.last_trimmed_event_id(pool)
    if trimmed is not None and missed(after, trimmed):
        current = get(t.id) or t
        yield Event(trimmed, RESYNC, pool, ticket_out(current))
        if current.status in ("matched", "cancelled", "expired"):
            return
    while not stop():
        entries = store.read_events(pool, cursor, 100, READ_BLOCK_MS)
        if not entries:
            yield None
            continue
        cursor = entries[-1][0]
        mine = [(eid, f) for eid, f in entries if f.get("ticket") == t.id]
        if not mine:
            yield None
            continue
        for ev in _events(mine, {t.id: get(t.id)}, pool, None):
            yield ev
            if ev.terminal:
                return


def watch_pool_sync(store: Store, pool: str, owner: str | None, after: str | None,
                    stop: Callable[[], bool], started: Callable[[], None] | None = None) -> Iterator[Event | None]:
    """:func:`watch_pool` for a thread (the gRPC server). ``started`` is called once the stream's position
    is fixed: every event committed after that call reaches the stream (the gRPC server then sends the
    response's headers, so a client can wait for them before it acts)."""
    cursor = store.last_event_id(pool) if after is None else after
    if started is not None:
        started()
    trimmed = None if after is None else store.last_trimmed_event_id(pool)
    if trimmed is not None and missed(after, trimmed):
        yield Event(trimmed, RESYNC, pool, {"pool": pool, "last_event_id": trimmed})
    cache = _Owners()
    while not stop():
        entries = store.read_events(pool, cursor, 200, READ_BLOCK_MS)
        if not entries:
            yield None
            continue
        cursor = entries[-1][0]
        out = _events(entries, _tickets(store, pool, entries, cache), pool, owner)
        yield from out
        if not out:
            yield None


async def sse_stream(events: AsyncIterator[Event | None], heartbeat_s: float = HEARTBEAT_S,
                     on_error: Callable[[BaseException], str] | None = None) -> AsyncIterator[str]:
    """Server-Sent Events text: ``retry:`` first, then one block per event, a ``: ping`` comment when the
    stream was silent for ``heartbeat_s``. A store outage ends the stream with an ``error`` event (the
    client reconnects with its Last-Event-ID and misses nothing)."""
    yield "retry: 1000\n\n"
    last = time.monotonic()
    metrics.EVENT_STREAMS.labels("sse").inc()
    try:
        async for ev in events:
            if ev is None:
                if time.monotonic() - last >= heartbeat_s:
                    last = time.monotonic()
                    yield ": ping\n\n"
                continue
            last = time.monotonic()
            yield ev.sse()
            if ev.type != RESYNC:
                observe("sse", "sent", [ev.id])
    except Exception as err:
        if on_error is None:
            raise
        yield on_error(err)
    finally:
        metrics.EVENT_STREAMS.labels("sse").dec()
