"""Server handoff: a committed match is POSTed to the pool's allocator (``allocator: {url, timeout_ms,
retries}``), which answers where the match is played (``{"connection": "host:port", ...}``, e.g. a small
service in front of Agones' ``GameServerAllocation``). The answer goes into the match as its tickets'
``assignment``. An allocator that fails, times out or answers garbage is retried; after the retries the
players go back to the queue at their place with the reason (see :meth:`JobRunner._commit`). In a pool with
a ready check, the allocator is called once every player accepted (:meth:`Matchmaker.allocations`).

Request body: ``{"match_id", "pool", "teams": [[player id, ...], ...], "region"}``. A 2xx answer must be a
JSON object whose ``connection`` is ``host:port``; its other string, number or boolean fields (at most 16)
are kept in the assignment too. A 4xx other than 408/429 is not retried (the allocator refused the match).
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx

_CONNECTION = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):\d{1,5}")
_MAX_EXTRA = 16


def lease_s(cfg) -> float:
    """The longest :func:`allocate` can take with ``cfg`` (every attempt timing out, every backoff) plus a
    margin: how long a matchmaker holds a confirmed ready check's allocation before another may retry it."""
    attempts = int(cfg.retries) + 1
    backoff = sum(min(1.0, 0.05 * 2 ** (a - 1)) for a in range(1, attempts))
    return attempts * float(cfg.timeout_ms) / 1000 + backoff + 5.0


class AllocationFailed(Exception):
    """The allocator gave no usable answer within its retries; the message says what it did last."""


def assignment_of(obj: Any) -> dict[str, Any] | None:
    """The assignment in an allocator's answer, or None when it has no valid ``connection``."""
    if not isinstance(obj, dict):
        return None
    conn = obj.get("connection")
    if not isinstance(conn, str) or len(conn) > 300 or not _CONNECTION.fullmatch(conn) or int(conn.rsplit(":", 1)[1]) > 65535:
        return None
    extra = {k: v for k, v in obj.items() if k != "connection" and isinstance(k, str) and len(k) <= 64
             and isinstance(v, str | int | float | bool) and (not isinstance(v, str) or len(v) <= 1024)}
    return {"connection": conn, **dict(list(extra.items())[:_MAX_EXTRA])}


def allocate(cfg, match: dict[str, Any], client: httpx.Client | None = None) -> dict[str, Any]:
    """POST ``match`` to ``cfg.url``: the assignment, after up to ``cfg.retries`` retries.

    Raises:
        AllocationFailed: every attempt failed (timeout, connection error, 5xx/408/429, not JSON, no valid
            ``connection``), or the allocator refused the match (another 4xx).
    """
    own = client is None
    client = client or httpx.Client()
    last = "no attempt"
    try:
        for attempt in range(int(cfg.retries) + 1):
            if attempt:
                time.sleep(min(1.0, 0.05 * 2 ** (attempt - 1)))
            try:
                r = client.post(cfg.url, json=match, timeout=cfg.timeout_ms / 1000)
            except httpx.HTTPError as err:
                last = f"{type(err).__name__} after {cfg.timeout_ms:g} ms" if isinstance(err, httpx.TimeoutException) \
                    else f"{type(err).__name__}"
                continue
            if r.status_code >= 400:
                last = f"HTTP {r.status_code}"
                if r.status_code < 500 and r.status_code not in (408, 429):
                    break
                continue
            try:
                obj = r.json()
            except ValueError:
                last = "the answer is not JSON"
                continue
            got = assignment_of(obj)
            if got is None:
                last = 'the answer has no valid "connection" (host:port)'
                continue
            return got
    finally:
        if own:
            client.close()
    raise AllocationFailed(f"{last} ({int(cfg.retries) + 1} attempt(s))")
