"""Webhook delivery: every configured receiver gets the ticket events it asked for, POSTed and signed,
at least once.

Each webhook reads each pool's event log with its own delivery group
(:meth:`~mgmatch.app.store.protocols.EventStore.read_deliveries`, a Redis consumer group ``webhook:<id>``),
so its progress is kept in the store: a restarted deliverer first resends what it had read and not
acknowledged, and one that died for good has its entries taken over by another after
:data:`CLAIM_IDLE_MS`. A delivery is a POST of::

    {"id": "<pool>:<entry id>", "type": "matched", "pool": "3v3", "occurred_at": 1795400000.123,
     "ticket": {...the ticket as GET /v1/tickets/{id} shows it at that event...}}

with the headers ``X-Mgmatch-Event-Id`` (the same on every retry: de-duplicate on it),
``X-Mgmatch-Event``, ``X-Mgmatch-Attempt``, ``X-Mgmatch-Timestamp`` and
``X-Mgmatch-Signature: t=<timestamp>,v1=<hex HMAC-SHA-256(secret, "<timestamp>." + body)>``.
A 2xx answer acknowledges it (in the reader's next round, with the others delivered meanwhile); anything
else (another status, a timeout, a refused connection) is retried after ``backoff_s``, doubling up to
``max_backoff_s``, and after ``max_attempts`` it goes to the pool's dead letters
(``GET /v1/webhooks/dead-letters``) with the last error.

Delivery runs on its own threads (the reader and, per receiver, a small pool of senders with a bounded
number of deliveries in flight), never on a solve's or a request's: a slow or dead receiver only holds
back its own events, which wait in the store.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import http.client
import json
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from . import events, metrics
from .config import WebhookConfig
from .store import StoreUnavailable

log = logging.getLogger("mgmatch.webhooks")

#: entries another deliverer read and left unacknowledged this long are taken over (it died)
CLAIM_IDLE_MS = 30_000
#: senders per receiver
SENDERS = 4
#: the longest an idle reader waits for new entries at once (a blocking read of the logs wakes it at the
#: first new one; the cap bounds how late it notices a due retry or a stop)
IDLE_WAIT_S = 0.1
_BATCH = 100
#: the longest the reader waits between tries while the store is unreachable: the events committed once it is
#: back wait for this at most (at 2 s, a Redis restart in bench push put 1% of the webhook deliveries past 150 ms)
_OUTAGE_RETRY_MAX_S = 0.25
#: bytes of a receiver's answer read (its status is what counts; a longer body closes the connection)
_MAX_ANSWER = 64 * 1024


def signature(secret: str, body: bytes, ts: int) -> str:
    """The ``X-Mgmatch-Signature`` value of a delivery: ``t=<ts>,v1=<hex HMAC-SHA-256(secret, "<ts>." + body)>``."""
    mac = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={ts},v1={mac}"


def verify(secret: str, header: str, body: bytes, max_skew_s: float = 300.0, now: float | None = None) -> bool:
    """What a receiver checks: the signature matches the body and its timestamp is recent."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        ts = int(parts["t"])
    except (ValueError, KeyError):
        return False
    now = time.time() if now is None else now
    if abs(now - ts) > max_skew_s:
        return False
    return hmac.compare_digest(signature(secret, body, ts), header)


def group_of(hook: WebhookConfig) -> str:
    return f"webhook:{hook.id}"


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    pool: str = field(compare=False)
    entry: str = field(compare=False)
    type: str = field(compare=False)
    body: bytes = field(compare=False)
    owner: str | None = field(compare=False)
    ticket: str = field(compare=False)
    attempts: int = field(default=0, compare=False)
    error: str = field(default="", compare=False)


class _Poster:
    """POSTs to one URL over a kept-alive connection per sender thread (``http.client``: a delivery costs
    a fraction of the CPU of a general-purpose client's, and delivery shares the interpreter with the
    API and the solves). A connection the receiver closed meanwhile is opened again once at once."""

    def __init__(self, url: str, timeout_s: float):
        u = urlsplit(url)
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname or "", u.port
        self.path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.host_header = u.netloc.rpartition("@")[2]
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connect(self) -> http.client.HTTPConnection:
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        conn.connect()
        # the body of a POST on a kept-alive connection would otherwise wait for the receiver's delayed ACK
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._all.append(conn)
        return conn

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        """The answer's status; OSError or http.client.HTTPException when there was none."""
        conn = getattr(self._local, "conn", None)
        for fresh in ((False, True) if conn is not None else (True,)):
            if fresh:
                if conn is not None:
                    conn.close()
                conn = self._local.conn = None
                conn = self._local.conn = self._connect()
            try:
                conn.request("POST", self.path, body=body, headers={"host": self.host_header, **headers})
                resp = conn.getresponse()
                resp.read(_MAX_ANSWER)
                if resp.will_close or not resp.isclosed():  # an answer larger than we read: start afresh
                    conn.close()
                    self._local.conn = None
                return resp.status
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if fresh:  # a new connection failed too: the receiver's fault, not a stale connection's
                    conn.close()
                    self._local.conn = None
                    raise
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


class _Receiver:
    """One webhook: its senders, what is in flight for it, its retries waiting."""

    def __init__(self, hook: WebhookConfig, pools: list[str]):
        self.hook, self.group = hook, group_of(hook)
        self.pools = [p for p in pools if hook.pools is None or p in hook.pools]
        self.wanted = set(hook.events or events.PUBLIC_TYPES)
        self.poster = _Poster(hook.url, float(hook.timeout_s))
        self.senders = ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix=f"webhook-{hook.id}")
        self.in_flight = 0
        self.resumed: set[str] = set()  # pools whose own unacknowledged entries were taken up again


class Deliverer:
    """Reads the pools' event logs for every webhook and delivers them (see the module's docstring).

    ``step()`` does one round (what a worker harness calls); ``start()`` runs it on a thread.
    """

    def __init__(self, store, hooks: list[WebhookConfig], pools: list[str], consumer: str,
                 claim_idle_ms: int = CLAIM_IDLE_MS):
        self.store, self.consumer, self.claim_idle_ms = store, consumer, claim_idle_ms
        self.receivers = [_Receiver(h, pools) for h in hooks]
        self._lock = threading.Lock()
        self._retries: list[tuple[_Delivery, _Receiver]] = []  # heap by due time
        self._acks: list[tuple[_Receiver, str, str]] = []  # acks (and dead letters) the store refused for now
        self._seq = 0
        self._held: set[tuple[str, str, str]] = set()  # (webhook, pool, entry) in flight or waiting to retry here
        self._last_claim = 0.0
        # per pool, the newest entry id any read returned: an idle reader blocks until the log has a newer one
        self._cursor: dict[str, str] = {}
        self._room = threading.Event()  # set when a delivery ends: a full receiver may take more
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.dead = 0

    # ------------------------------------------------------------------ the loop

    def start(self) -> Deliverer:
        self._thread = threading.Thread(target=self._run, daemon=True, name="webhooks")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for r in self.receivers:
            r.senders.shutdown(wait=False, cancel_futures=True)
            r.poster.close()
        try:  # what was delivered and not yet acknowledged is not sent again by the next deliverer
            self._flush_acks()
        except StoreUnavailable:
            log.warning("webhooks: %d deliveries left unacknowledged at stop (store unavailable): sent again "
                        "on restart", len(self._acks))

    def _run(self) -> None:
        wait = 0.0
        while not self._stop.is_set():
            try:
                if not self.step():
                    self.idle()
                wait = 0.0
                continue
            except StoreUnavailable as err:
                wait = min(_OUTAGE_RETRY_MAX_S, max(0.05, wait * 2))
                log.warning("webhooks: store unavailable (%s); retrying in %.2f s", err, wait)
            except Exception:
                log.exception("webhooks: step failed")
                wait = 0.5
            self._stop.wait(wait)

    def idle(self) -> None:
        """Wait for work after a round that found none: new entries in a log (a blocking read, so a new
        event is sent at once rather than at the next poll), a delivery ending while a receiver is full,
        a retry falling due, or at most :data:`IDLE_WAIT_S`."""
        cap = IDLE_WAIT_S
        with self._lock:
            if self._retries:
                cap = min(cap, max(0.001, self._retries[0][0].due - time.monotonic()))
            full = any(r.in_flight >= r.hook.max_in_flight for r in self.receivers)
        if full:  # its entries wait in the log, which would wake the read at once: wait for a free slot
            self._room.wait(min(cap, 0.005))
            self._room.clear()
            return
        pools = {p for r in self.receivers for p in r.pools}
        for pool in pools - set(self._cursor):
            self._cursor[pool] = self.store.last_event_id(pool)
        if pools:
            self.store.wait_events({p: self._cursor[p] for p in pools}, max(1, int(cap * 1000)))
        else:
            self._stop.wait(cap)

    def _saw(self, pool: str, entries: list[tuple[str, dict[str, str]]]) -> None:
        if entries and (pool not in self._cursor or events._key(entries[-1][0]) > events._key(self._cursor[pool])):
            self._cursor[pool] = entries[-1][0]

    def step(self) -> bool:
        """One round: due retries, new entries for every receiver with room, then the acks of what was
        delivered since the last round (after the reads: a new event waits for no acknowledgement's write).
        True when it did something."""
        busy = self._due_retries()
        claim = time.monotonic() - self._last_claim >= self.claim_idle_ms / 3000
        if claim:
            self._last_claim = time.monotonic()
        for r in self.receivers:
            for pool in r.pools:
                room = r.hook.max_in_flight - r.in_flight
                if room <= 0:
                    break
                if pool not in r.resumed:  # after a restart: what this consumer read and never acknowledged
                    entries = self.store.read_deliveries(pool, r.group, self.consumer, min(room, _BATCH), pending=True)
                    if len(entries) < min(room, _BATCH):
                        r.resumed.add(pool)
                elif claim:
                    entries = [(eid, f) for eid, f in self.store.autoclaim_deliveries(
                        pool, r.group, self.consumer, self.claim_idle_ms, min(room, _BATCH))
                        if (r.hook.id, pool, eid) not in self._held]  # not the ones this deliverer is retrying
                    entries += self.store.read_deliveries(pool, r.group, self.consumer, min(room, _BATCH))
                else:
                    entries = self.store.read_deliveries(pool, r.group, self.consumer, min(room, _BATCH))
                if entries:
                    busy = True
                    self._saw(pool, entries)
                    self._dispatch(r, pool, entries)
        return self._flush_acks() or busy

    # ------------------------------------------------------------------ deliveries

    def _dispatch(self, r: _Receiver, pool: str, entries: list[tuple[str, dict[str, str]]]) -> None:
        skip = [eid for eid, f in entries if events.public_type(f) not in r.wanted]
        if skip:
            self.store.ack_deliveries(pool, r.group, skip)
        todo = [(eid, f) for eid, f in entries if events.public_type(f) in r.wanted]
        if not todo:
            return
        events.observe("webhook", "read", [eid for eid, _ in todo])
        tickets = events._tickets(self.store, pool, todo)
        for eid, f in todo:
            kind = events.event_type(f)
            t = tickets.get(f.get("ticket", ""))
            if t is None:  # the ticket is gone (past its retention): nothing to show, nothing to send
                self.store.ack_deliveries(pool, r.group, [eid])
                continue
            body = json.dumps({"id": f"{pool}:{eid}", "type": kind.name, "pool": pool,
                               "occurred_at": events.entry_ms(eid), "ticket": events.snapshot(t, kind)},
                              separators=(",", ":")).encode()
            self._seq += 1
            d = _Delivery(0.0, self._seq, pool, eid, kind.name, body, t.owner, t.id)
            self._send(r, d)

    def _send(self, r: _Receiver, d: _Delivery) -> None:
        with self._lock:
            r.in_flight += 1
            self._held.add((r.hook.id, d.pool, d.entry))
        r.senders.submit(self._attempt, r, d)

    def _attempt(self, r: _Receiver, d: _Delivery) -> None:
        if not d.attempts:
            events.observe("webhook", "sent", [d.entry])
        d.attempts += 1
        ts = int(time.time())
        headers = {"content-type": "application/json", "user-agent": "mgmatch-webhooks",
                   "x-mgmatch-event-id": f"{d.pool}:{d.entry}",
                   "x-mgmatch-event": d.type, "x-mgmatch-attempt": str(d.attempts), "x-mgmatch-timestamp": str(ts),
                   "x-mgmatch-signature": signature(r.hook.secret, d.body, ts)}
        try:
            status = r.poster.post(d.body, headers)
            ok = 200 <= status < 300
            d.error = "" if ok else f"HTTP {status}"
        except (OSError, http.client.HTTPException) as err:
            ok, d.error = False, f"{type(err).__name__}: {err}"[:300]
        except Exception as err:  # noqa: BLE001 - a delivery never takes its sender thread down
            ok, d.error = False, f"{type(err).__name__}: {err}"[:300]
        metrics.WEBHOOK_DELIVERIES.labels(r.hook.id, "delivered" if ok else "failed").inc()
        if ok:
            metrics.WEBHOOK_SECONDS.labels(r.hook.id).observe(max(0.0, time.time() - events.entry_ms(d.entry)))
            self._done(r, d.pool, d.entry)
            with self._lock:
                self.delivered += 1
                r.in_flight -= 1
                self._held.discard((r.hook.id, d.pool, d.entry))
            self._room.set()
            return
        if d.attempts >= r.hook.max_attempts:
            self._give_up(r, d)
            with self._lock:
                r.in_flight -= 1
                self._held.discard((r.hook.id, d.pool, d.entry))
            self._room.set()
            return
        wait = min(float(r.hook.max_backoff_s), float(r.hook.backoff_s) * 2 ** (d.attempts - 1))
        d.due = time.monotonic() + wait
        with self._lock:  # stays in flight while it waits: a failing receiver takes no more
            heapq.heappush(self._retries, (d, r))

    def _due_retries(self) -> bool:
        due = []
        now = time.monotonic()
        with self._lock:
            while self._retries and self._retries[0][0].due <= now:
                due.append(heapq.heappop(self._retries))
        for d, r in due:
            r.senders.submit(self._attempt, r, d)
        return bool(due)

    def _done(self, r: _Receiver, pool: str, entry: str) -> None:
        # acknowledged by the loop's next round, together with the others delivered meanwhile: one XACK per
        # receiver and pool instead of one per delivery on the sender (an fsynced write on an AOF Redis,
        # which held the sender from its next delivery). A deliverer that dies first sends these again on its
        # restart: delivery is at least once either way.
        with self._lock:
            self._acks.append((r, pool, entry))

    def _give_up(self, r: _Receiver, d: _Delivery) -> None:
        log.warning("webhook %s: event %s:%s dead-lettered after %d attempts (%s)", r.hook.id, d.pool, d.entry,
                    d.attempts, d.error)
        fields: dict[str, Any] = {"webhook": r.hook.id, "url": r.hook.url, "event_id": f"{d.pool}:{d.entry}",
                                  "event": d.type, "ticket": d.ticket, "attempts": d.attempts, "error": d.error,
                                  "owner": d.owner, "payload": json.loads(d.body)}
        try:
            self.store.dead_letter_delivery(d.pool, r.group, d.entry, fields)
            metrics.WEBHOOK_DELIVERIES.labels(r.hook.id, "dead_lettered").inc()
            with self._lock:
                self.dead += 1
        except StoreUnavailable:  # still pending in the store: retried from the start after a restart
            log.warning("webhook %s: could not dead-letter %s:%s (store unavailable)", r.hook.id, d.pool, d.entry)

    def _flush_acks(self) -> bool:
        """Acknowledge what was delivered since the last round, one call per receiver and pool; what the store
        refused stays for the next round."""
        with self._lock:
            acks, self._acks = self._acks, []
        groups: dict[tuple[str, str], tuple[_Receiver, str, list[str]]] = {}
        for r, pool, entry in acks:
            groups.setdefault((r.hook.id, pool), (r, pool, []))[2].append(entry)
        batches = list(groups.values())
        for i, (r, pool, entries) in enumerate(batches):
            try:
                self.store.ack_deliveries(pool, r.group, entries)
            except StoreUnavailable:
                with self._lock:
                    self._acks.extend((rr, pp, e) for rr, pp, es in batches[i:] for e in es)
                raise
        return bool(acks)


def start_deliverer(rt) -> Deliverer | None:
    """The runtime's webhook deliverer on its own thread (None when no webhook is configured)."""
    if not rt.config.webhooks:
        return None
    consumer = rt.settings.worker_id or f"{socket.gethostname()}-webhooks"  # stable: a restart resumes its own
    return Deliverer(rt.store, rt.config.webhooks, [p.name for p in rt.config.pools], consumer).start()
