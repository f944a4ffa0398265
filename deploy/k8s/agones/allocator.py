"""A small allocator in front of Agones for mgmatch's server handoff (pool ``allocator: {url, ...}``).

mgmatch POSTs each match here: ``{"match_id", "pool", "teams", "region"}``. This service creates an
Agones ``GameServerAllocation`` for the fleet (``FLEET``), with the match id as a label and the teams
as an annotation on the allocated GameServer. It answers ``{"connection": "<address>:<port>",
"gameserver": "<name>"}``. When no GameServer is Ready (``UnAllocated``), or the allocation meets
contention, it answers 503, so mgmatch retries and, after its retries, puts the players back in the
queue at their place.

Standard library only; it runs in the pod with the service account of ``allocator.yaml`` (create on
``gameserverallocations``). Environment: ``FLEET`` (default ``mgmatch-game``), ``PORT`` (8080),
``PORT_NAME`` (the GameServer port to hand out; default the first one).
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
API = "https://kubernetes.default.svc"


def allocation_request(match: dict, fleet: str) -> dict:
    """The GameServerAllocation for one match: a Ready GameServer of the fleet, labelled with the match."""
    label = re.sub(r"[^A-Za-z0-9._-]", "-", str(match.get("match_id", "")))[-63:].strip("-._") or "match"
    return {
        "apiVersion": "allocation.agones.dev/v1",
        "kind": "GameServerAllocation",
        "spec": {
            "selectors": [{"matchLabels": {"agones.dev/fleet": fleet}}],
            "metadata": {
                "labels": {"mgmatch.io/match": label},
                "annotations": {"mgmatch.io/match-id": str(match.get("match_id", "")),
                                "mgmatch.io/teams": json.dumps(match.get("teams", []))},
            },
        },
    }


def answer_of(status: dict, port_name: str | None = None) -> tuple[int, dict]:
    """mgmatch's answer from the allocation's status: 200 with the connection, or 503 to retry."""
    if status.get("state") != "Allocated":
        return 503, {"error": f"allocation {status.get('state', 'failed')}"}
    ports = status.get("ports") or []
    port = next((p for p in ports if port_name is None or p.get("name") == port_name), None)
    if not status.get("address") or port is None:
        return 503, {"error": "allocated GameServer has no address or port"}
    return 200, {"connection": f"{status['address']}:{port['port']}", "gameserver": status.get("gameServerName", "")}


def allocate(match: dict) -> tuple[int, dict]:
    with open(f"{SA}/namespace") as f:
        namespace = f.read().strip()
    with open(f"{SA}/token") as f:
        token = f.read().strip()
    req = urllib.request.Request(
        f"{API}/apis/allocation.agones.dev/v1/namespaces/{namespace}/gameserverallocations",
        data=json.dumps(allocation_request(match, os.environ.get("FLEET", "mgmatch-game"))).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}, method="POST")
    ctx = ssl.create_default_context(cafile=f"{SA}/ca.crt")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            body = json.loads(r.read())
    except urllib.error.HTTPError as err:
        return 503, {"error": f"Kubernetes API answered {err.code}"}
    except (urllib.error.URLError, TimeoutError, ValueError) as err:
        return 503, {"error": f"Kubernetes API unreachable: {err}"}
    return answer_of(body.get("status") or {}, os.environ.get("PORT_NAME"))


class Handler(BaseHTTPRequestHandler):
    def _send(self, code: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # readiness
        self._send(200, {"ok": True})

    def do_POST(self) -> None:
        try:
            match = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            if not isinstance(match, dict):
                raise ValueError("expected a JSON object")
        except ValueError as err:
            self._send(400, {"error": f"body: {err}"})
            return
        self._send(*allocate(match))


if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8080"))), Handler).serve_forever()
