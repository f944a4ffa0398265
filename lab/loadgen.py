"""A lean HTTP/1.1 keep-alive client for the load generators (``bench service``, ``bench chaos``).

A load generator must cost far less CPU than the server it measures. httpx's AsyncClient costs
about as much per request as the server does: on the 2-core machine a chaos run's httpx ingest
reached ~70–115 tickets/s where this client reaches ~700 against the same server (both measured
against ``mgmatch serve --store redis``). Only what the benches need: JSON bodies, a few
headers, ``Content-Length`` framing (what uvicorn answers with), loopback.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


class TransportError(ConnectionError):
    """The connection broke or timed out before a whole response arrived (``kind`` says how)."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


@dataclass
class Response:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    content: bytes = b""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Conn:
    """One keep-alive connection; reconnects after a broken one."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> Response:
        """Send one request and read its response; raises :class:`TransportError`."""
        try:
            return await asyncio.wait_for(self._request(method, path, body, headers or {}), self.timeout_s)
        except TimeoutError:
            self.close()
            raise TransportError("ReadTimeout", f"no response within {self.timeout_s:g} s") from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as err:
            self.close()
            if isinstance(err, TransportError):
                raise
            raise TransportError(type(err).__name__, str(err)) from None

    async def _request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> Response:
        if self.writer is not None and (self.reader.at_eof() or self.writer.is_closing()):
            # the server closed this idle keep-alive connection (uvicorn after 5 s idle): reconnect
            # rather than send into it (a master-kill chaos run paused its ingest for ~8 s and then
            # counted all 64 of its connections as dropped by the service)
            self.close()
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(head.encode("latin-1") + b"\r\n" + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        hdrs: dict[str, str] = {}
        for ln in lines[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        length = int(hdrs.get("content-length", "0") or 0)
        data = await self.reader.readexactly(length) if length else b""
        if hdrs.get("connection", "").lower() == "close":
            self.close()
        return Response(status, hdrs, data)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Client:
    """A pool of ``size`` keep-alive connections to ``base_url`` (``http://host:port``); a request
    waits for a free connection."""

    def __init__(self, base_url: str, size: int = 32, timeout_s: float = 10.0):
        host, port = base_url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
        self._free: asyncio.Queue[Conn] = asyncio.Queue()
        self._all = [Conn(host, int(port), timeout_s) for _ in range(size)]
        for c in self._all:
            self._free.put_nowait(c)

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> Response:
        conn = await self._free.get()
        try:
            return await conn.request(method, path, body, headers)
        finally:
            self._free.put_nowait(conn)

    async def post(self, path: str, content: bytes = b"", headers: dict[str, str] | None = None) -> Response:
        return await self.request("POST", path, content, {"content-type": "application/json", **(headers or {})})

    async def get(self, path: str) -> Response:
        return await self.request("GET", path)

    async def delete(self, path: str) -> Response:
        return await self.request("DELETE", path)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for c in self._all:
            c.close()
