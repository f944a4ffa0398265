"""`mgmatch serve` and `mgmatch worker` as processes: the embedded default works end to end; bad flags exit 2."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import MAIN, ServeProcess, poll  # noqa: E402


@pytest.mark.service
def test_serve_embedded_default_matches_tickets():
    with ServeProcess() as srv:
        url = srv.url
        assert "openapi" in httpx.get(url + "/openapi.json").json()
        ids = [httpx.post(url + "/v1/tickets", json={"pool": "3v3", "players": [
            {"id": f"c{i}", "features": [0.01 * i] * 196}]}).json()["id"] for i in range(6)]
        poll(lambda: all(httpx.get(f"{url}/v1/tickets/{t}").json()["status"] == "matched" for t in ids), timeout=60)


@pytest.mark.service
def test_bad_flags_exit_2_with_one_line():
    for args, needle in ([["serve", "--port", "0"], "--port"], [["worker", "nope"], "KIND"],
                         [["serve", "--store", "disk"], "store"],
                         [["bench", "service", "--stores", "disk"], "--stores"],
                         [["serve", "--config", "/nonexistent.yaml", "--port", "1"], "/nonexistent.yaml"]):
        t0 = time.time()
        out = subprocess.run([*MAIN, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr, (args, out.stderr)
        assert time.time() - t0 < 60
