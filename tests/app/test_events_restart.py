"""0 events missed by a reconnecting SSE client across a killed API process and a Redis restart: a real
``mgmatch serve`` process on a redis-server of the test's own (with an append-only file, so a restart
keeps its data), tickets created while the client is cut off, every event of the pool's stream received
once, in order."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sse_helpers import Reconnecting  # noqa: E402
from svc_helpers import ServeProcess, SpareRedis, features, poll, service_config  # noqa: E402

from mgmatch.app.store import RedisStore, Ticket, new_ticket_id

pytestmark = [pytest.mark.redis, pytest.mark.service]


def _create(url: str, pid: str, i: int) -> str:
    """Create a ticket through the API, retrying while the service or its store is coming back."""
    def attempt():
        try:
            r = httpx.post(url + "/v1/tickets", json={"pool": "small", "players": [
                {"id": pid, "features": features(i)}]}, timeout=5)
        except httpx.HTTPError:
            return None
        return r.json()["id"] if r.status_code == 201 else None

    return poll(attempt, timeout=30, every=0.1)


def test_no_event_missed_across_an_api_kill_and_a_redis_restart(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary")
    rds = SpareRedis(aof_dir=tmp_path)  # AOF, fsync always: a restart keeps the events stream
    rds.start()
    cfg = service_config(tmp_path)
    args = ["--config", cfg, "--store", "redis", "--redis-url", rds.url]
    os.environ.setdefault("MGMATCH_STARTUP_WAIT_S", "60")
    api = ServeProcess(*args)
    port = api.port
    store = RedisStore.from_url(rds.url)
    try:
        with api:
            with Reconnecting(f"{api.url}/v1/events?pool=small") as sse:
                ids = [_create(api.url, f"a{i}", i) for i in range(6)]
                poll(lambda: sum(e["event"] == "matched" for e in sse.events) == 6, timeout=30)
                api.proc.kill()  # the API process dies, mid-stream
                api.proc.wait(10)
                # tickets queued while no API runs (another replica's work): the client is cut off
                now = time.time()
                for i in range(3):
                    t = Ticket(new_ticket_id("small"), "small", [{"id": f"b{i}", "features": features(i)}], now, now + 60)
                    ids.append(store.create(t)[0].id)
                again = ServeProcess(*args)
                again.port, again.url = port, f"http://127.0.0.1:{port}"
                with again:
                    ids += [_create(again.url, f"c{i}", i) for i in range(3)]  # 6 queued: they match
                    poll(lambda: sum(e["event"] == "matched" for e in sse.events) == 12, timeout=60)
                    rds.stop()  # Redis restarts (AOF keeps the stream)
                    time.sleep(1.0)
                    rds.start()
                    ids += [_create(again.url, f"d{i}", i) for i in range(6)]
                    poll(lambda: sum(e["event"] == "matched" for e in sse.events) == 18, timeout=60)
                    time.sleep(0.5)
        stream = store.read_events("small", "0-0", count=10_000)
        got = [e["id"] for e in sse.events]
        assert got == [eid for eid, _ in stream]  # every event once, in order
        assert len(got) == 36 and sse.connections >= 2
        assert {e["data"]["id"] for e in sse.events} == set(ids)
    finally:
        store.close()
        rds.stop()
