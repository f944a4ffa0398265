"""Worker processes and a Redis that is down, emptied or restarted: on a spare-port ``redis-server``
of the test's own. Workers started before Redis wait for it; after FLUSHALL and after a restart new
tickets match with every process still the same one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, poll, service_config  # noqa: E402
from test_store_resilience import REDIS_SERVER, SpareRedis  # noqa: E402

from mgmatch.app.store import RedisStore, Ticket, new_ticket_id  # noqa: E402

pytestmark = [pytest.mark.redis, pytest.mark.slow,
              pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server binary for a spare-port server")]


def _env(cfg: Path, url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "MGMATCH_CONFIG": str(cfg), "MGMATCH_STORE": "redis", "MGMATCH_REDIS_URL": url,
            "MGMATCH_KEY_PREFIX": "r", "MGMATCH_EMBEDDED_WORKERS": "false", "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1", **extra}


def _worker(kind: str, env: dict, log: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from mgmatch.cli import main; main()", "worker", kind, "--metrics-port", "0",
           *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True)


def _queue(store: RedisStore, tag: str, n: int = 6) -> list[str]:
    now = time.time()
    return [store.create(Ticket(new_ticket_id("small"), "small", [{"id": f"{tag}{i}", "features": features(i)}],
                                now, now + 300))[0].id for i in range(n)]


def _all_matched(store: RedisStore, ids: list[str]):
    try:
        return all((t := store.get(tid)) is not None and t.status == "matched" for tid in ids)
    except Exception:  # noqa: BLE001 - Redis still coming back
        return False


def test_workers_wait_for_redis_then_survive_flushall_and_a_restart(tmp_path):
    redis = SpareRedis(tmp_path)  # not started yet
    cfg = service_config(tmp_path, lease_s=5.0)
    env = _env(cfg, redis.url, MGMATCH_STARTUP_WAIT_S="120")
    logs = {k: tmp_path / f"{k}.log" for k in ("matchmaker", "solver")}
    procs = {"matchmaker": _worker("matchmaker", env, logs["matchmaker"]),
             "solver": _worker("solver", env, logs["solver"], "--min-idle-ms", "1000")}
    store = RedisStore.from_url(redis.url, prefix="r")
    try:
        # both wait (logged) for a Redis that is not there yet, rather than exiting
        for k in procs:
            poll(lambda k=k: "does not answer" in logs[k].read_text(), timeout=90)
        assert all(p.poll() is None for p in procs.values())
        redis.start()
        first = _queue(store, "a")
        poll(lambda: _all_matched(store, first), timeout=90)

        assert redis.cli("FLUSHALL") == "OK"  # Redis lost everything: groups, leader key, tickets
        assert all(store.get(t) is None for t in first)  # lost tickets read as unknown (404)
        second = _queue(store, "b")
        poll(lambda: _all_matched(store, second), timeout=60)

        redis.kill()  # a restart without persistence: down for a moment, then back empty
        time.sleep(0.5)
        redis.start()
        third = _queue(store, "c")
        poll(lambda: _all_matched(store, third), timeout=60)
        assert all(p.poll() is None for p in procs.values()), {k: logs[k].read_text()[-2000:] for k in procs}
        solver_log = logs["solver"].read_text()
        assert "creating it again" in solver_log and "store back after" in solver_log
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {k: p.wait(30) for k, p in procs.items()}
        redis.kill()
    assert codes == {"matchmaker": 0, "solver": 0}, {k: logs[k].read_text()[-2000:] for k in procs}


def test_a_worker_gives_up_after_the_startup_wait_with_one_line(tmp_path):
    redis = SpareRedis(tmp_path)  # never started
    env = _env(service_config(tmp_path), redis.url, MGMATCH_STARTUP_WAIT_S="0.5")
    out = subprocess.run([sys.executable, "-c", "from mgmatch.cli import main; main()", "worker", "solver",
                          "--metrics-port", "0"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("mgmatch: Redis at") and "did not answer within 0.5 s" in last
    assert "Traceback" not in out.stderr


def test_serve_gives_up_after_the_startup_wait_with_one_line(tmp_path):
    redis = SpareRedis(tmp_path)  # never started
    env = _env(service_config(tmp_path), redis.url, MGMATCH_STARTUP_WAIT_S="0.5")
    out = subprocess.run([sys.executable, "-c", "from mgmatch.cli import main; main()", "serve", "--store", "redis",
                          "--port", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last == f"mgmatch: cannot reach Redis at {redis.url} within 0.5 s (MGMATCH_STARTUP_WAIT_S)"
    assert "does not answer; waiting" in out.stderr and "Traceback" not in out.stderr
