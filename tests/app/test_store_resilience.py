"""The Redis store after Redis lost its data, flushed its scripts or restarted: on a spare-port
``redis-server`` of the test's own (never the shared one: these tests FLUSHALL and kill it)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from mgmatch.app.keys import INFERENCE_GROUP, SOLVER_GROUP
from mgmatch.app.store import RedisStore, StoreUnavailable, Ticket, new_ticket_id

REDIS_SERVER = shutil.which("redis-server")
pytestmark = [pytest.mark.redis,
              pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server binary for a spare-port server")]


class SpareRedis:
    """A ``redis-server`` without persistence on a free loopback port: start, kill, start again."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> SpareRedis:
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: {(self.dir / 'redis.log').read_text()[-500:]}") from None
                time.sleep(0.05)
        client.close()
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def cli(self, *args: str) -> str:
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()


@pytest.fixture
def spare(tmp_path):
    srv = SpareRedis(tmp_path).start()
    yield srv
    srv.kill()


def _ticket(pid: str, pool: str = "p") -> Ticket:
    now = time.time()
    return Ticket(new_ticket_id(pool), pool, [{"id": pid, "features": [1.0]}], now, now + 60)


def test_after_flushall_groups_come_back_and_lost_tickets_read_as_unknown(spare):
    s = RedisStore.from_url(spare.url, prefix="m")
    lost = s.create(_ticket("a"))[0]
    s.publish_job("p", {"n": 1})
    assert [j for _, j in s.read_jobs("p", "c1", block_ms=None)] == [{"n": 1}]
    assert s.acquire_leader("p", "mm1", 60_000)
    s.read_inference("i1", 10, block_ms=None)  # the inference group exists and is cached
    assert spare.cli("FLUSHALL") == "OK"
    # every cached group is gone; each call creates it again instead of failing with NOGROUP for ever
    assert s.get(lost.id) is None
    assert s.autoclaim_jobs("p", "c1", 0) == []
    eid = s.publish_job("p", {"n": 2})
    assert [j for _, j in s.read_jobs("p", "c1", block_ms=None)] == [{"n": 2}]
    assert s.job_deliveries("p", [eid]) == {eid: 1}
    s.ack_job("p", eid)
    assert s.jobs_lag("p") == 0
    s.request_inference([{"id": "r1"}])
    assert [r["id"] for _, r in s.read_inference("i1", 10, block_ms=None)] == ["r1"]
    assert s.acquire_leader("p", "mm2", 60_000)  # the leader key went with the data: taken afresh
    # a new ticket for the same player is accepted and claimed like any other
    fresh = s.create(_ticket("a"))[0]
    assert s.claim("p", [fresh.id], "m1", time.time() + 30)
    groups = {g["name"] for g in s.r.xinfo_groups(s.keys.jobs("p"))}
    assert groups == {SOLVER_GROUP}
    assert {g["name"] for g in s.r.xinfo_groups(s.keys.inference_requests())} == {INFERENCE_GROUP}
    # the matchmaker's claim-and-publish too, into a stream whose group went with another FLUSHALL: the
    # job's XADD makes the stream, the solver's read makes the group again (from id 0) and gets the job
    assert spare.cli("FLUSHALL") == "OK"
    other = s.create(_ticket("b"))[0]
    assert s.claim_job("p", [other.id], "m2", time.time() + 30, {"claim_id": "m2"})
    assert [j for _, j in s.read_jobs("p", "c1", block_ms=None)] == [{"claim_id": "m2"}]
    s.close()


def test_scripts_flushed_are_loaded_again_sync_pipelined_and_async(spare):
    s = RedisStore.from_url(spare.url, prefix="m")
    t = s.create(_ticket("a"))[0]
    assert spare.cli("SCRIPT", "FLUSH") == "OK"
    assert s.create(_ticket("b"))[1]
    assert spare.cli("SCRIPT", "FLUSH") == "OK"
    out = s.create_many([(_ticket("c"), None), (_ticket("d"), None)])
    assert [o[1] for o in out] == [True, True]
    assert spare.cli("SCRIPT", "FLUSH") == "OK"
    assert s.claim("p", [t.id], "m1", time.time() + 30)

    async def aio():
        first = await s.acreate(_ticket("e"))
        assert spare.cli("SCRIPT", "FLUSH") == "OK"
        assert (await s.acreate(_ticket("f")))[1]
        assert spare.cli("SCRIPT", "FLUSH") == "OK"
        many = await s.acreate_many([(_ticket("g"), None), (_ticket("h"), None)])
        assert [o[1] for o in many] == [True, True]
        assert spare.cli("SCRIPT", "FLUSH") == "OK"
        assert (await s.acancel(first[0].id)).status == "cancelled"

    asyncio.run(aio())
    assert s.queue_depth("p") == 6
    s.close()


def test_a_restart_is_unavailable_while_down_and_recovers_after_sync_and_async(spare):
    s = RedisStore.from_url(spare.url, prefix="m")

    async def scenario():
        # the same clients (a sync pool and the loop's asyncio pool) live through the restart
        assert (await s.acreate(_ticket("a")))[1] and s.create(_ticket("b"))[1]
        spare.kill()
        with pytest.raises(StoreUnavailable):
            await s.acreate(_ticket("c"))
        with pytest.raises(StoreUnavailable):
            await s.aget(new_ticket_id("p"))
        with pytest.raises(StoreUnavailable):
            s.create(_ticket("c"))
        with pytest.raises(StoreUnavailable):
            s.read_jobs("p", "c1", block_ms=None)
        assert not s.ping()
        spare.start()  # no persistence: it comes back empty
        assert s.ping()
        created, fresh = await s.acreate(_ticket("a"))
        assert fresh and (await s.aget(created.id)).status == "queued"
        assert s.create(_ticket("b"))[1]
        s.publish_job("p", {"n": 1})
        assert len(s.read_jobs("p", "c1", block_ms=None)) == 1

    asyncio.run(scenario())
    s.close()
