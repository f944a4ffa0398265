"""A local HTTP allocator for the handoff tests, run as its own process:
``python allocator_server.py PORT MODE [FAILS]``. Modes: ok (answers a connection), slow (sleeps 2 s
first), fail (500), garbage (200, not JSON), noconn (200, JSON without a connection), flaky (500 for the
first FAILS requests, then ok). Every request body is appended to the log the tests read back
(``GET /log``)."""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, MODE = int(sys.argv[1]), sys.argv[2]
FAILS = int(sys.argv[3]) if len(sys.argv) > 3 else 0
LOG: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        return

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps(LOG).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        LOG.append(body)
        mode = MODE
        if mode == "flaky":
            mode = "fail" if len(LOG) <= FAILS else "ok"
        if mode == "slow":
            time.sleep(2.0)
            mode = "ok"
        if mode == "fail":
            self._send(500, b'{"error": "no servers"}')
        elif mode == "garbage":
            self._send(200, b"<html>surprise</html>", "text/html")
        elif mode == "noconn":
            self._send(200, b'{"address": "nowhere"}')
        else:
            n = len(LOG)
            self._send(200, json.dumps({"connection": f"10.0.0.{n}:7777", "server": f"gs-{n}"}).encode())


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
