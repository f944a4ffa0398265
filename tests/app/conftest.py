"""Fixtures for the service tests: a live uvicorn server factory, a Redis URL with a fresh key prefix, a
redis-server of the test's own."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import REDIS_URL, LiveServer, SpareRedis  # noqa: E402


@pytest.fixture
def live():
    """Factory: live(runtime) → a started server wrapping build_asgi(runtime); stopped after the test."""
    from mgmatch.app.api import build_asgi

    started: list[tuple[LiveServer, object]] = []

    def _start(rt) -> LiveServer:
        srv = LiveServer(build_asgi(rt)).__enter__()
        started.append((srv, rt))
        return srv

    yield _start
    for srv, rt in started:
        srv.__exit__(None, None, None)
        rt.stop()


@pytest.fixture
def redis_url():
    """A Redis URL and a fresh key prefix; every key under the prefix is deleted afterwards."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as err:
        pytest.skip(f"no Redis answers at {REDIS_URL}: {err}")
    prefix = "mgmtest" + uuid.uuid4().hex[:8]
    yield REDIS_URL, prefix
    for key in client.scan_iter(f"{prefix}:*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture
def spare_redis():
    """A started redis-server of this test's own (stop/start it to simulate an outage; no persistence)."""
    srv = SpareRedis()
    if srv.exe is None:
        pytest.skip("no redis-server binary")
    srv.start()
    yield srv
    srv.stop()
