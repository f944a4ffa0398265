"""Fixtures for the service tests: a live uvicorn server factory, a Redis URL with a fresh key prefix, a
redis-server of the test's own."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import REDIS_URL, LiveServer, SpareRedis, service_config  # noqa: E402


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("cluster", marks=[pytest.mark.redis, pytest.mark.cluster])])
def store(request):
    """A store of each kind: in memory, on the shared Redis and on the session's Redis Cluster (fresh key
    prefix each)."""
    from mgmatch.app.store import MemoryStore, RedisStore

    if request.param == "memory":
        yield MemoryStore()
        return
    url, prefix = request.getfixturevalue("cluster_url" if request.param == "cluster" else "redis_url")
    s = RedisStore.from_url(url, prefix=prefix)
    yield s
    s.close()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def make_rt(request, tmp_path):
    """Factory: a runtime over the memory store or a real Redis (fresh key prefix), pool overrides."""

    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    def _make(**pool) -> Runtime:
        cfg = service_config(tmp_path, **pool)
        if request.param == "memory":
            rt = Runtime.build(Settings(config=cfg, store="memory"))
        else:
            url, prefix = request.getfixturevalue("redis_url")
            rt = Runtime.build(Settings(config=cfg, store="redis", redis_url=url, key_prefix=prefix,
                                        embedded_workers=False))
        # what serve and the workers do before their first solve: the numba kernels loaded (~0.4 s the
        # first time in a process) outside a solve's budget, or a test's first timed solve may find nothing
        rt.warm()
        return rt

    return _make


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


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    """A Redis Cluster of this test session's own: 3 masters with a replica each on loopback ports
    (AOF, fsync always), shared by the tests that ask for it; a test may fail masters over."""
    from mgmatch.lab.localcluster import LocalCluster

    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("the Redis Cluster tests start their own cluster: redis-server and redis-cli must be on PATH")
    cluster = LocalCluster(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster):
    """The session cluster's store URL (``redis+cluster://``) and a fresh key prefix; every key under
    the prefix, on every master, is deleted afterwards."""
    import redis.cluster

    from mgmatch.app.store.redis import cluster_node_url

    for port in redis_cluster.ports:  # a test before may have killed a node or failed a master over
        if port not in redis_cluster.running():
            redis_cluster.restart(port)
    redis_cluster.wait_healthy()
    prefix = "mgmtest" + uuid.uuid4().hex[:8]
    yield redis_cluster.url, prefix
    redis_cluster.wait_healthy()
    client = redis.cluster.RedisCluster.from_url(cluster_node_url(redis_cluster.url))
    for key in client.scan_iter(f"{prefix}:*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture
def redis_url(request):
    """A Redis URL and a fresh key prefix; every key under the prefix is deleted afterwards. On the
    shared Redis, or on the session's cluster when parametrized indirectly with ``"cluster"``."""
    import redis

    if getattr(request, "param", "single") == "cluster":
        yield request.getfixturevalue("cluster_url")
        return
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
