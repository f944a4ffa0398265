"""Request guard (pure ASGI, cheap): body size and depth limits, API keys or HMAC signatures, rate limits,
HTTP metrics.

Authentication, when configured (``MGMATCH_API_KEYS`` and/or ``MGMATCH_HMAC_SECRET``), applies to
``/v1/*``; a request passes with a known key in ``X-API-Key`` (or ``Authorization: Bearer``) or
with a valid signature::

    X-MGMatch-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<METHOD>.<path>.<body>")>

within ``MGMATCH_HMAC_MAX_SKEW_S`` of the server clock; a header that does not parse is a
refusal like a wrong signature. The guard puts the client identity on the ASGI scope
(``OWNER_SCOPE_KEY``): ``key:<16 hex>`` for an API key, ``hmac`` for a signed request, None
without authentication; tickets belong to it (:mod:`mgmatch.app.service`). Rate limits are
token buckets per client (API key, else the peer address).

Every ``/v1/*`` body is read (at most ``MGMATCH_MAX_BODY_BYTES``) and its JSON nesting measured
on the raw bytes before any parser sees it (at most :data:`~mgmatch.core.limits.MAX_JSON_DEPTH`).
Refusals are JSON ``{"error": {"field", "message"}}`` with 400 (``body`` too deep), 401, 413 or
429, counted in ``mgmatch_http_rejected_total``. Requests are counted in
``mgmatch_http_requests_total`` under the matched route's template (``/v1/tickets/{ticket_id}``)
or ``other``, never the raw path, so random paths add no series.

gRPC carries API keys only: with ``MGMATCH_HMAC_SECRET`` and no ``MGMATCH_API_KEYS`` every gRPC
call is refused UNAUTHENTICATED (:func:`grpc_client`), so gRPC is never more open than HTTP.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time

from starlette.routing import Match

from mgmatch.core.limits import MAX_JSON_DEPTH, json_depth_exceeds

from . import metrics
from .settings import Settings

OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/docs", "/redoc", "/openapi.json")
#: where the guard leaves the client identity that owns tickets (None without authentication)
OWNER_SCOPE_KEY = "mgmatch.owner"
#: the identity of every HMAC-signed request (one shared secret, one client)
HMAC_CLIENT = "hmac"
_TS = re.compile(r"[0-9]{1,15}")
_MAC = re.compile(r"[0-9a-fA-F]{64}")


def sign(secret: str, method: str, path: str, body: bytes, t: float | None = None) -> str:
    """The X-MGMatch-Signature header value for a request (what a game server sends)."""
    ts = str(int(time.time() if t is None else t))
    mac = hmac.new(secret.encode(), f"{ts}.{method.upper()}.{path}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={ts},v1={mac}"


def parse_signature(header: str) -> tuple[int, str] | None:
    """``(t, v1)`` of an ``X-MGMatch-Signature`` value, or None when it does not parse.

    Strict: ``t`` is 1–15 ASCII digits, ``v1`` 64 hex digits; any other shape (missing parts,
    a 400-digit timestamp, non-ASCII) is None, never an exception.
    """
    parts: dict[str, str] = {}
    for item in header.split(",", 8):
        key, sep, value = item.strip().partition("=")
        if not sep:
            return None
        parts[key] = value
    ts, mac = parts.get("t", ""), parts.get("v1", "")
    if not (ts.isascii() and _TS.fullmatch(ts) and mac.isascii() and _MAC.fullmatch(mac)):
        return None
    return int(ts), mac.lower()


def verify(secret: str, header: str, method: str, path: str, body: bytes, max_skew_s: float) -> bool:
    """Whether ``header`` signs this request within the clock skew; False for any malformed header."""
    parsed = parse_signature(header)
    if parsed is None:
        return False
    ts, given = parsed
    if abs(time.time() - ts) > max_skew_s:
        return False
    msg = f"{ts}.{method.upper()}.{path}.".encode("utf-8", "surrogateescape") + body
    want = hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want.encode(), given.encode())


class TokenBuckets:
    """``rate`` tokens per second up to ``burst``, one bucket per client key."""

    def __init__(self, rate: float, burst: float, max_clients: int = 100_000):
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self._b: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, now: float | None = None) -> float:
        """0.0 if allowed, else seconds until a token is available."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._b.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._b[key] = (tokens - 1.0, now)
                return 0.0
            self._b[key] = (tokens, now)
            if len(self._b) > self.max_clients:
                self._b.clear()
            return (1.0 - tokens) / self.rate


def presented_key(x_api_key: bytes | None, authorization: bytes | None) -> bytes | None:
    """The API key a request presents: ``X-API-Key``, else an ``Authorization: Bearer`` token."""
    if x_api_key is not None:
        return x_api_key
    auth = authorization or b""
    return auth[7:].strip() if auth[:7].lower() == b"bearer " else None


def key_client(keys: set[bytes], key: bytes | None) -> str | None:
    """The client identity of a known API key (``key:`` + 16 hex of its SHA-256), else None.
    Compared in constant time; HTTP's guard and the gRPC service both use it."""
    if key is not None and keys and any(hmac.compare_digest(key, k) for k in keys):
        return "key:" + hashlib.sha256(key).hexdigest()[:16]
    return None


def grpc_client(settings: Settings, keys: set[bytes], x_api_key: bytes | None,
                authorization: bytes | None, peer: str) -> tuple[str, str | None] | None:
    """A gRPC call's ``(rate-limit client, ticket owner)``, or None when it must be refused.

    gRPC authenticates with API keys only. Keys configured: a known key is required (owner
    ``key:<16 hex>``). Only an HMAC secret configured: every call is refused, since gRPC cannot
    carry HTTP's request signature and must not be more open than HTTP. Nothing configured:
    anyone, no owner.
    """
    if keys:
        client = key_client(keys, presented_key(x_api_key, authorization))
        return None if client is None else (client, client)
    if settings.hmac_secret:
        return None
    return peer, None


def rate_buckets(settings: Settings) -> TokenBuckets | None:
    """The per-client token buckets of the settings' rate limit; None when there is none."""
    if settings.rate_limit_per_s <= 0:
        return None
    return TokenBuckets(settings.rate_limit_per_s, settings.rate_limit_burst)


def _json(status: int, field: str, message: str, extra_headers: list | None = None):
    body = json.dumps({"error": {"field": field, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return status, headers + (extra_headers or []), body


class Guard:
    """ASGI middleware in front of the FastAPI app."""

    def __init__(self, app, settings: Settings):
        self.app = app
        self.s = settings
        self.keys = {k.encode() for k in settings.api_keys}
        self.buckets = rate_buckets(settings)
        self.routes = list(getattr(app, "routes", []))

    def route_label(self, scope) -> str:
        """The metrics label of a request: its route's template, or ``other`` (never the raw path)."""
        route = scope.get("route")
        if route is not None and isinstance(getattr(route, "path", None), str):
            return route.path
        for r in self.routes:
            match, _ = r.matches(scope)
            if match != Match.NONE and isinstance(getattr(r, "path", None), str):
                return r.path
        return "other"

    async def _send_error(self, send, status, headers, body):
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope["path"]
        state = {"code": 500}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                state["code"] = message["status"]
            await send(message)

        try:
            if path.startswith(OPEN_PATHS) or not path.startswith("/v1/"):
                return await self.app(scope, receive, send_wrapper)
            headers = dict(scope["headers"])
            # body: refuse early on a declared length, else read and count
            declared = headers.get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.s.max_body_bytes:
                metrics.HTTP_REJECTED.labels("body_too_large").inc()
                return await self._send_error(send_wrapper, *_json(413, "body", f"request body over {self.s.max_body_bytes} bytes"))
            chunks, size = [], 0
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > self.s.max_body_bytes:
                    metrics.HTTP_REJECTED.labels("body_too_large").inc()
                    return await self._send_error(send_wrapper, *_json(413, "body", f"request body over {self.s.max_body_bytes} bytes"))
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    break
            body = b"".join(chunks)
            who = self._authenticate(headers, scope, body)
            if who is None:
                metrics.HTTP_REJECTED.labels("unauthorized").inc()
                return await self._send_error(send_wrapper, *_json(401, "authorization",
                                                                   "missing or invalid API key / request signature"))
            client, scope[OWNER_SCOPE_KEY] = who
            if self.buckets is not None:
                wait = self.buckets.take(client)
                if wait > 0:
                    metrics.HTTP_REJECTED.labels("rate_limited").inc()
                    return await self._send_error(send_wrapper, *_json(
                        429, "rate", f"rate limit {self.s.rate_limit_per_s:g}/s exceeded",
                        [(b"retry-after", str(max(1, int(wait + 0.999))).encode())]))
            if json_depth_exceeds(body, MAX_JSON_DEPTH):
                metrics.HTTP_REJECTED.labels("body_too_deep").inc()
                return await self._send_error(send_wrapper, *_json(
                    400, "body", f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels"))
            sent = False

            async def replay():
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            return await self.app(scope, replay, send_wrapper)
        finally:
            label = self.route_label(scope)
            metrics.HTTP_REQUESTS.labels(label, str(state["code"])).inc()
            metrics.HTTP_SECONDS.labels(label).observe(time.perf_counter() - t0)

    def _authenticate(self, headers: dict, scope, body: bytes) -> tuple[str, str | None] | None:
        """``(rate-limit client, ticket owner)`` when the request may pass, else None.

        API key: both are ``key:<16 hex>``. Signed: the peer address and ``hmac``. No authentication
        configured: the peer address and no owner.
        """
        peer = scope.get("client")
        anon = f"ip:{peer[0]}" if peer else "ip:?"
        if not self.keys and not self.s.hmac_secret:
            return anon, None
        client = key_client(self.keys, presented_key(headers.get(b"x-api-key"), headers.get(b"authorization")))
        if client is not None:
            return client, client
        sig = headers.get(b"x-mgmatch-signature")
        if sig is not None and self.s.hmac_secret:
            raw_path = scope.get("raw_path") or scope["path"].encode()
            if verify(self.s.hmac_secret, sig.decode("latin-1"), scope["method"], raw_path.decode("latin-1"), body,
                      self.s.hmac_max_skew_s):
                return anon, HMAC_CLIENT
        return None
