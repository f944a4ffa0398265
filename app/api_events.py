"""The push routes of the HTTP API (added to the app by :func:`mgmatch.app.api.create_app`).

- ``GET /v1/tickets/{ticket_id}/events`` — Server-Sent Events of one ticket: ``id:`` (resume with
  ``Last-Event-ID``), ``event:`` (``queued``, ``proposed``, ``matched``, ``backfilled``, ``cancelled``,
  ``expired``, ``declined``, or ``resync``) and ``data:`` (the ticket as ``GET /v1/tickets/{id}`` shows it
  at that event). The stream ends after a terminal event.
- ``GET /v1/events?pool=P`` — every event of the pool's tickets that the caller's key owns (every
  ticket without authentication), from now on or from ``Last-Event-ID``.
- ``GET /v1/webhooks/dead-letters?pool=P`` — webhook deliveries given up on (the caller's tickets only).

A ticket of another client is 404, as on the ticket routes; a ``Last-Event-ID`` that is not an entry id
is 422 naming it; an unknown pool is 422 ``pool``; a store down when the stream starts is 503.
See :mod:`mgmatch.app.events` for the payloads and the retention.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from mgmatch.core.errors import InvalidInput

from . import events, service
from .runtime import Runtime
from .security import OWNER_SCOPE_KEY
from .service import STORE_ERRORS

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_SSE_DOC = {200: {"description": "text/event-stream: `id`, `event`, `data` (the ticket as GET shows it).",
                  "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


#: set when the process is asked to stop: open streams end (within a store read, ≤ 1 s) so that the
#: server's graceful shutdown, which waits for every response to finish, is not held open by them
STOPPING = threading.Event()


def _end_streams_on_signals() -> None:
    """Chain SIGTERM and SIGINT (uvicorn's handlers, installed while it serves) so that they also end the
    open event streams; clients reconnect to another replica with their Last-Event-ID. Only the main
    thread can do it (a server run on another thread, as in tests, ends its streams when it is dropped)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        prev = signal.getsignal(sig)
        if getattr(prev, "_ends_streams", False):
            continue

        def handler(signum, frame, prev=prev):
            STOPPING.set()
            if callable(prev):
                prev(signum, frame)
            elif prev == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                signal.raise_signal(signum)

        handler._ends_streams = True
        signal.signal(sig, handler)


def _last_id(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not events.valid_entry_id(value.strip()):
        raise InvalidInput("Last-Event-ID", "Last-Event-ID: expected an event id as sent in `id:` (<ms>-<seq>)")
    return value.strip()


def _pool(rt: Runtime, pool: str) -> str:
    if pool not in rt.pools:
        raise InvalidInput("pool", f"pool: no pool {pool[:64]!r} (known: {', '.join(sorted(rt.pools))})")
    return pool


def _store_error(err: BaseException) -> str:
    """A stream's last message when the store went away mid-stream: reconnect with Last-Event-ID."""
    if isinstance(err, STORE_ERRORS):
        body = {"error": {"field": "store", "message": "store unavailable; reconnect with Last-Event-ID"}}
        return f"event: error\ndata: {json.dumps(body)}\n\n"
    raise err


def add_event_routes(app: FastAPI, rt: Runtime, errors: Callable[..., dict[int, dict]],
                     common: tuple[int, ...]) -> None:
    """Register the push routes on ``app`` (``errors(*codes)`` documents the error answers)."""

    def owner_of(request: Request) -> str | None:
        return request.scope.get(OWNER_SCOPE_KEY)

    def stream(gen) -> StreamingResponse:
        _end_streams_on_signals()
        body = events.sse_stream(gen, rt.settings.sse_heartbeat_s, _store_error)
        return StreamingResponse(body, media_type="text/event-stream", headers=_SSE_HEADERS)

    @app.get("/v1/tickets/{ticket_id}/events", tags=["events"], response_class=StreamingResponse,
             responses={**_SSE_DOC, **errors(404, *common)},
             summary="Server-Sent Events of one ticket, until it ends; resumes from Last-Event-ID.")
    async def ticket_events(request: Request, ticket_id: str,
                            last_event_id: Annotated[str | None, Header()] = None):
        after = _last_id(last_event_id)
        t = await rt.store.aget(service.lookup_id(ticket_id))
        t = service.owned(t, ticket_id, owner_of(request))
        return stream(events.watch_ticket(rt.store, t, after, STOPPING.is_set))

    @app.get("/v1/events", tags=["events"], response_class=StreamingResponse,
             responses={**_SSE_DOC, **errors(*common)},
             summary="Server-Sent Events of every ticket of a pool the caller owns; resumes from Last-Event-ID.")
    async def pool_events(request: Request, pool: Annotated[str, Query(max_length=64)],
                          last_event_id: Annotated[str | None, Header()] = None):
        after = _last_id(last_event_id)
        _pool(rt, pool)
        now_id = await asyncio.to_thread(rt.store.last_event_id, pool)  # a store that is down answers 503 here
        return stream(events.watch_pool(rt.store, pool, owner_of(request), after, STOPPING.is_set, now_id))

    @app.get("/v1/webhooks/dead-letters", tags=["events"], responses=errors(*common),
             summary="Webhook deliveries given up on after their retries (newest first, the caller's tickets).")
    async def dead_letters(request: Request, pool: Annotated[str, Query(max_length=64)],
                           limit: Annotated[int, Query(ge=1, le=1000)] = 100):
        _pool(rt, pool)
        owner = owner_of(request)
        rows = await asyncio.to_thread(rt.store.delivery_dead_letters, pool, 10_000 if owner else limit)
        out: list[dict[str, Any]] = []
        for did, f in rows:
            if owner is not None and f.get("owner") != owner:
                continue
            out.append({"id": did, **{k: v for k, v in f.items() if k != "owner"}})
            if len(out) >= limit:
                break
        return JSONResponse({"pool": pool, "dead_letters": out})
