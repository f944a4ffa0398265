"""The Redis store on a real Redis Cluster (3 masters, 3 replicas on loopback ports, started once per
session by the ``redis_cluster`` fixture): every store call that touches several keys stays in one
hash slot, and a master failover (graceful ``CLUSTER FAILOVER``, or a SIGKILL and the replica's
election) costs the callers StoreUnavailable at worst (the API's 503), never another error and never
an acknowledged ticket. The store contract itself runs on the cluster in ``test_store.py``."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from svc_helpers import poll

from mgmatch.app.keys import SOLVER_GROUP
from mgmatch.app.store import MatchResult, RedisStore, StoreUnavailable, Ticket, new_ticket_id
from mgmatch.app.store.redis import cluster_node_url

pytestmark = [pytest.mark.redis, pytest.mark.cluster]


def _ticket(pid: str, pool: str = "p") -> Ticket:
    now = time.time()
    return Ticket(new_ticket_id(pool), pool, [{"id": pid, "features": [1.0]}], now, now + 120)


def test_cluster_urls_are_told_apart_from_single_redis_urls():
    assert cluster_node_url("redis+cluster://10.0.0.5:7000") == "redis://10.0.0.5:7000"
    assert cluster_node_url("rediss+cluster://u:pw@h:7000/0") == "rediss://u:pw@h:7000/0"
    assert cluster_node_url("REDIS+CLUSTER://h:1") == "redis://h:1"
    assert cluster_node_url("redis://h:6379/0") is None and cluster_node_url("unix:///tmp/r.sock") is None


def test_settings_refuse_a_cluster_url_with_another_database_naming_the_field():
    from pydantic import ValidationError

    from mgmatch.app.settings import load_settings

    assert load_settings(redis_url="redis+cluster://h:7000").redis_url == "redis+cluster://h:7000"
    for bad, why in [("redis+cluster://h:7000/3", "only database 0"), ("http://h:7000", "expected a redis://"),
                     ("redis+cluster://", "names one of its nodes")]:
        with pytest.raises(ValidationError) as err:
            load_settings(redis_url=bad)
        first = err.value.errors()[0]
        assert first["loc"] == ("redis_url",) and why in first["msg"], first


def test_keys_of_one_pool_live_on_one_master_and_pools_spread(cluster_url, redis_cluster):
    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)
    pools = [f"pool{i}" for i in range(12)]
    for pool in pools:
        s.create(_ticket(f"a-{pool}", pool))  # one live ticket per player: a player of its own in each pool
        s.publish_job(pool, {"n": 1})
    for pool in pools:
        keys = [s.keys.queue(pool), s.keys.expiry(pool), s.keys.events(pool), s.keys.players(pool), s.keys.jobs(pool)]
        assert len({redis_cluster.master_of(k).port for k in keys}) == 1
    # 12 pools hash to different slots; they land on more than one master
    assert len({redis_cluster.master_of(s.keys.queue(p)).port for p in pools}) > 1
    s.close()


def test_jobs_dead_letters_leaders_and_inference_replies_on_the_cluster(cluster_url):
    """The calls test_store.py does not reach, each a pipeline, transaction or blocking read on one slot."""
    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)
    e1 = s.publish_job("p", {"claim": "c1"})
    e2 = s.publish_job("p", {"claim": "c2"})
    assert [j for _, j in s.read_jobs("p", "w1", count=2, block_ms=None)] == [{"claim": "c1"}, {"claim": "c2"}]
    assert s.job_deliveries("p", [e1, e2]) == {e1: 1, e2: 1}
    assert [eid for eid, _ in s.autoclaim_jobs("p", "w2", min_idle_ms=0)] == [e1, e2]
    assert s.job_deliveries("p", [e1]) == {e1: 2} and s.jobs_lag("p") == 2
    s.ack_job("p", e1)
    s.dead_letter_job("p", e2, {"claim": "c2"}, "crashed", 3, "w2")
    assert s.jobs_lag("p") == 0 and s.job_deliveries("p", [e1, e2]) == {}
    [(_, dead)] = s.dead_letters("p")
    assert dead["job"] == {"claim": "c2"} and dead["deliveries"] == 3 and dead["reason"] == "crashed"
    # a blocking read that times out, then one a publish from another thread wakes
    assert s.read_jobs("p", "w1", block_ms=50) == []
    threading.Timer(0.2, s.publish_job, args=("p", {"claim": "c3"})).start()
    assert [j for _, j in s.read_jobs("p", "w1", block_ms=3000)] == [{"claim": "c3"}]
    # leadership per pool
    assert s.acquire_leader("p", "m1", 5000) and s.acquire_leader("p", "m1", 5000)
    assert not s.acquire_leader("p", "m2", 5000) and s.acquire_leader("q", "m2", 5000)
    # inference: request, read, reply, await (the {infer} slot)
    s.request_inference([{"id": "r1"}, {"id": "r2"}])
    got = s.read_inference("inf", 10, block_ms=None)
    assert [r["id"] for _, r in got] == ["r1", "r2"]
    s.reply_inference({"r1": {"p": [0.5]}, "r2": {"p": [0.25]}}, [eid for eid, _ in got])
    assert s.await_inference("r2", 1.0) == {"p": [0.25]} and s.await_inference("r1", 1.0) == {"p": [0.5]}
    assert s.await_inference("r3", 0.05) is None
    s.close()


def test_an_unreachable_cluster_is_store_unavailable_and_the_store_is_built_before_it_answers():
    """The store is built while no node answers (serve and the workers then wait for it)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = RedisStore.from_url(f"redis+cluster://127.0.0.1:{port}", prefix="x")
    t = _ticket("a")
    for call in (lambda: s.create(t), lambda: s.create_many([(t, None)]), lambda: s.get(t.id),
                 lambda: s.claim("p", [t.id], "m", time.time() + 9), lambda: s.reap("p"),
                 lambda: s.read_jobs("p", "c", block_ms=None), lambda: s.heartbeat("solver", "w", 15),
                 lambda: s.acquire_leader("p", "w", 1000), lambda: s.request_inference([{"id": "r"}])):
        with pytest.raises(StoreUnavailable):
            call()
    assert s.ping() is False

    async def aio():
        for call in (lambda: s.acreate(t), lambda: s.acreate_many([(t, None)]), lambda: s.aget(t.id),
                     lambda: s.acancel(t.id)):
            with pytest.raises(StoreUnavailable):
                await call()
            # the loop's asyncio cluster client is dropped after a failure (a connection of it may
            # still owe a reply): the next call builds a fresh one
            assert s._aio is None

    asyncio.run(aio())
    s.close()


def test_a_connection_closed_under_a_command_inside_redis_py_is_unavailable_other_errors_are_not():
    """The asyncio cluster client's failover race (its connection code fails with AttributeError or
    RuntimeError) is a lost connection; the same exception types raised anywhere else stay bugs."""
    from mgmatch.app.store import redis as store_redis

    ns: dict = {}
    code = "def send(writer):\n    writer.writelines([b'PING'])\n"
    exec(compile(code, store_redis._CONNECTION_MODULES[1], "exec"), ns)  # a frame of redis-py's connection.py

    def caught(fn, *args) -> Exception:
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001 - returned for the assertions
            return err
        raise AssertionError("no error")

    race = caught(ns["send"], None)
    assert isinstance(race, AttributeError) and isinstance(store_redis._unavailable(race), StoreUnavailable)
    elsewhere = caught(lambda w: w.writelines([b"PING"]), None)
    assert isinstance(elsewhere, AttributeError) and store_redis._unavailable(elsewhere) is None
    assert store_redis._unavailable(RuntimeError("the handler is closed")) is None  # no redis-py frame
    assert store_redis._unavailable(ValueError("x")) is None


class _Writer(threading.Thread):
    """Creates tickets in a loop (one at a time and in pipelined batches of 5) until stopped: the
    acknowledged ones, and every error by type (only StoreUnavailable may appear)."""

    def __init__(self, store: RedisStore, pool: str):
        super().__init__(daemon=True)
        self.s, self.pool = store, pool
        self.acked: list[str] = []
        self.errors: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        k = 0
        while not self.stop.is_set():
            try:
                if k % 2:
                    batch = [_ticket(f"w{k}-{j}", self.pool) for j in range(5)]
                    out = self.s.create_many([(t, None) for t in batch])
                    self.acked += [o[0].id for o in out if isinstance(o, tuple)]
                else:
                    self.acked.append(self.s.create(_ticket(f"w{k}", self.pool))[0].id)
            except Exception as err:  # noqa: BLE001 - counted: the test asserts which kinds appeared
                self.errors[type(err).__name__] = self.errors.get(type(err).__name__, 0) + 1
                time.sleep(0.05)
            k += 1


class _Reader(threading.Thread):
    """Blocks on the pool's jobs stream in a loop: the jobs it read, errors by type."""

    def __init__(self, store: RedisStore, pool: str):
        super().__init__(daemon=True)
        self.s, self.pool = store, pool
        self.jobs: list[dict] = []
        self.errors: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                for eid, job in self.s.read_jobs(self.pool, "reader", block_ms=300):
                    self.jobs.append(job)
                    self.s.ack_job(self.pool, eid)
            except Exception as err:  # noqa: BLE001 - counted
                self.errors[type(err).__name__] = self.errors.get(type(err).__name__, 0) + 1
                time.sleep(0.05)


def _under_load(store: RedisStore, pool: str, action) -> tuple[_Writer, _Reader]:
    writer, reader = _Writer(store, pool), _Reader(store, pool)
    writer.start()
    reader.start()
    try:
        time.sleep(0.5)
        action()
        time.sleep(1.0)  # and some more writes after the new master took over
    finally:
        writer.stop.set()
        reader.stop.set()
        writer.join(30)
        reader.join(30)
    return writer, reader


def _works_everywhere_after(store: RedisStore, pool: str) -> None:
    """Plain, pipelined and asyncio calls, the scripts (to be loaded on the new master) and the group."""
    t = store.create(_ticket("after-1", pool))[0]
    assert all(isinstance(o, tuple) for o in store.create_many([(_ticket(f"after-b{j}", pool), None) for j in range(3)]))
    assert store.claim(pool, [t.id], "m-after", time.time() + 30)
    assert store.commit(pool, "m-after", [t.id], [], MatchResult("m-after-0", [["after-1"]], {t.id: 0}))
    store.publish_job(pool, {"after": True})
    assert [j for _, j in store.read_jobs(pool, "after", block_ms=1000)] == [{"after": True}]

    async def aio():
        created, fresh = await store.acreate(_ticket("after-a", pool))
        assert fresh and (await store.aget(created.id)).status == "queued"
        many = await store.acreate_many([(_ticket("after-am", pool), None)])
        assert isinstance(many[0], tuple)

    asyncio.run(aio())


def test_a_graceful_failover_of_the_pools_master_loses_no_acknowledged_ticket(cluster_url, redis_cluster):
    """CLUSTER FAILOVER on the replica of the pool's master while tickets are written and jobs read:
    the replica catches up before it takes over, so every acknowledged ticket is there afterwards;
    callers saw at most StoreUnavailable; plain, pipelined and asyncio calls work on the new master."""
    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)
    pool = "fo"
    master = redis_cluster.master_of(s.keys.queue(pool))
    s.publish_job(pool, {"before": True})
    writer, reader = _under_load(s, pool, lambda: redis_cluster.failover(master))
    assert redis_cluster.master_of(s.keys.queue(pool)).port != master.port
    print(f"failover: {len(writer.acked)} tickets acknowledged, errors {writer.errors} / {reader.errors}")
    assert set(writer.errors) <= {"StoreUnavailable"} and set(reader.errors) <= {"StoreUnavailable"}, \
        (writer.errors, reader.errors)
    assert len(writer.acked) > 20 and {"before": True} in reader.jobs
    tickets = s.get_many(pool, writer.acked)
    assert all(t is not None and t.status == "queued" for t in tickets)
    assert set(s.queued_ids(pool, 100_000)) == set(writer.acked)
    _works_everywhere_after(s, pool)
    s.close()


def test_a_killed_master_is_unavailable_until_its_replica_is_elected_then_serves_what_it_had(
        cluster_url, redis_cluster):
    """SIGKILL of the pool's master: until the replica is elected (cluster-node-timeout) calls raise
    StoreUnavailable, then everything the replica had received is served. Replication is asynchronous:
    here WAIT 1 makes sure the replica has the tickets written before the kill (a write acknowledged
    but not yet replicated would be lost, which is why the chaos run uses a graceful failover)."""
    import redis

    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)
    pool = "km"
    before = [s.create(_ticket(f"b{j}", pool))[0].id for j in range(20)]
    master = redis_cluster.master_of(s.keys.queue(pool))
    with redis_cluster.client(master.port) as c:
        assert c.execute_command("WAIT", 1, 5000) >= 1
    errors: dict[str, int] = {}
    redis_cluster.kill(master.port)
    deadline = time.monotonic() + 60
    while True:  # what a caller sees until the replica takes over
        try:
            s.create(_ticket(f"during{time.monotonic()}", pool))
            break
        except Exception as err:  # noqa: BLE001 - counted
            errors[type(err).__name__] = errors.get(type(err).__name__, 0) + 1
            assert time.monotonic() < deadline, errors
            time.sleep(0.1)
    print(f"killed master: {errors}")
    assert set(errors) == {"StoreUnavailable"}, errors
    poll(lambda: redis_cluster.master_of(s.keys.queue(pool)).port != master.port)  # as every node sees it
    assert [t.status for t in s.get_many(pool, before)] == ["queued"] * 20
    _works_everywhere_after(s, pool)
    redis_cluster.restart(master.port)  # back as a replica of the new master
    assert {n.port: n.role for n in redis_cluster.nodes()}[master.port] == "replica"
    with redis_cluster.client(master.port) as c, pytest.raises(redis.exceptions.MovedError):
        c.set(s.keys.leader(pool), "x")  # a replica refuses the pool's writes: MOVED to the new master
    s.close()


def test_scripts_flushed_on_every_node_are_loaded_again_plain_pipelined_and_async(cluster_url, redis_cluster):
    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)

    def flush_scripts():
        for port in redis_cluster.running():
            with redis_cluster.client(port) as c:
                c.script_flush()

    t = s.create(_ticket("a"))[0]
    flush_scripts()
    assert s.create(_ticket("b"))[1]
    flush_scripts()
    assert [o[1] for o in s.create_many([(_ticket("c"), None), (_ticket("d"), None)])] == [True, True]
    flush_scripts()
    assert s.claim("p", [t.id], "m1", time.time() + 30)

    async def aio():
        flush_scripts()
        assert (await s.acreate(_ticket("e")))[1]
        flush_scripts()
        many = await s.acreate_many([(_ticket("f"), None), (_ticket("g"), None)])
        assert [o[1] for o in many] == [True, True]
        flush_scripts()
        assert (await s.acancel(t.id)).status == "cancelled"

    asyncio.run(aio())
    assert s.queue_depth("p") == 6
    s.close()


def test_the_solver_group_survives_a_failover(cluster_url, redis_cluster):
    """The jobs stream and its consumer group are replicated: a job read before the failover is still
    pending in the group afterwards, and another solver can take it over (XAUTOCLAIM)."""
    url, prefix = cluster_url
    s = RedisStore.from_url(url, prefix=prefix)
    eid = s.publish_job("g", {"claim": "c1"})
    assert [e for e, _ in s.read_jobs("g", "dead-solver", block_ms=None)] == [eid]
    redis_cluster.failover(redis_cluster.master_of(s.keys.jobs("g")))
    assert [e for e, _ in s.autoclaim_jobs("g", "live-solver", min_idle_ms=0)] == [eid]
    assert s.job_deliveries("g", [eid]) == {eid: 2}
    assert s.r.xpending(s.keys.jobs("g"), SOLVER_GROUP)["pending"] == 1
    s.close()


def test_bench_cluster_puts_all_of_a_pools_scripts_on_its_one_master(cluster_url, redis_cluster):
    """``mgmatch bench cluster``'s accounting on the session cluster: every script of a pool ran on the
    master of its slot, the others ran none, and the ceiling follows from the measured µs."""
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.clusterbench import ClusterBenchPlan, markdown, run_cluster_bench

    url, _ = cluster_url
    r = run_cluster_bench(ClusterBenchPlan(tickets=60, pools=1, batch=20, match_size=6, url=url))
    [pool] = r["pool_masters"]
    create, match = r["phases"]
    for phase, expected in ((create, 2 * 60), (match, 2 * 10)):
        assert phase["scripts"] == expected == sum(m["scripts"] for m in phase["masters"].values())
        for node, m in phase["masters"].items():
            mine = node == r["pool_masters"][pool]
            assert m["pools"] == ([pool] if mine else []), (node, m)
            if phase is match:
                assert m["scripts"] == (expected if mine else 0), (node, m)
            else:  # the pool's 60 creates on its master; each player's lock on the player's own slot
                assert m["scripts"] >= 60 if mine else m["scripts"] <= 60, (node, m)
    c = r["one_pool_ceiling"]
    assert c["usec_per_ticket"] == pytest.approx(c["create_usec"] + 2 * c["claim_or_commit_usec"] / 6, abs=0.01)
    assert "ceiling" in markdown(r)
    with pytest.raises(InvalidInput) as err:
        ClusterBenchPlan(url="redis://127.0.0.1:6379/0").validate()
    assert err.value.field == "url"
