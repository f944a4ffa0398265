"""One player, one live ticket, in any pool (issue 30): the 409 names ``players[i].id`` and the holding
ticket; the player is free again once that ticket ends; concurrent creates across pools leave exactly
one live ticket per player on memory, Redis and a Redis Cluster; a create stopped between its steps
can neither lock a player forever nor come back as a second live ticket."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, service_config

from mgmatch.app.store import Conflict, MatchResult, PlayerBusy, RedisStore, Ticket, new_ticket_id


def _t(pool: str, *pids: str, ttl: float = 60.0) -> Ticket:
    now = time.time()
    return Ticket(new_ticket_id(pool), pool, [{"id": p, "features": [1.0]} for p in pids], now, now + ttl)


def test_a_player_live_in_one_pool_is_refused_in_another_naming_the_field_and_ticket(store):
    first, _ = store.create(_t("p", "a", "b"))
    with pytest.raises(PlayerBusy) as err:
        store.create(_t("q", "c", "b"))
    assert err.value.field == "players[1].id" and err.value.holder == first.id and first.id in str(err.value)
    # the refused ticket took nothing: its other player is free
    assert store.create(_t("q", "c"))[1]


@pytest.mark.parametrize("end", ["cancel", "matched", "expired", "claim_expired"])
def test_the_player_is_free_again_once_the_ticket_ends(store, end):
    t = _t("p", "a", ttl=0.3 if end == "expired" else 60.0)
    first, _ = store.create(t)
    if end == "cancel":
        store.cancel(first.id)
    elif end == "matched":
        assert store.claim("p", [first.id], "m1", time.time() + 30)
        assert store.commit("p", "m1", [first.id], [], MatchResult("m1", [["a"]], {first.id: 0}))
    elif end == "expired":
        time.sleep(0.5)  # past its TTL: no longer live even before the reaper ran
    else:
        assert store.claim("p", [first.id], "m1", time.time() + 30)
        assert store.expire_ticket("p", first.id, "m1", "unsolvable")
    stored, created = store.create(_t("q", "a"))
    assert created and stored.status == "queued"


def test_a_proposed_ticket_still_holds_its_player(store):
    first, _ = store.create(_t("p", "a"))
    assert store.claim("p", [first.id], "m1", time.time() + 30)
    with pytest.raises(PlayerBusy):
        store.create(_t("q", "a"))
    store.release("p", "m1", [first.id])  # back in the queue: still live
    with pytest.raises(PlayerBusy):
        store.create(_t("q", "a"))


def test_concurrent_creates_across_two_pools_leave_one_live_ticket_per_player(store):
    players = sorted(f"cc{i}" for i in range(12))
    results: list = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def worker(k: int) -> None:
        start.wait()
        for rnd in range(3):
            for pid in players:
                pool = "p" if (k + rnd) % 2 else "q"
                try:
                    res = store.create(_t(pool, pid))
                except Conflict as err:
                    res = err
                with lock:
                    results.append((pid, res))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    created = {}
    for pid, res in results:
        if not isinstance(res, Conflict):
            created.setdefault(pid, []).append(res[0].id)
        else:
            assert isinstance(res, PlayerBusy) and res.player_id == pid
    # every player got exactly one ticket, the others were refused naming it
    assert sorted(created) == players and all(len(v) == 1 for v in created.values()), created
    live = [t for pool in ("p", "q") for t in store.queued(pool)]
    assert sorted(p["id"] for t in live for p in t.players) == players
    for pid, res in results:  # a refusal names the winner, or a racing create that itself lost (never stored)
        if isinstance(res, PlayerBusy) and res.holder != created[pid][0]:
            assert res.holder is None or store.get(res.holder) is None, res


def test_a_batch_naming_a_player_twice_or_one_live_elsewhere_refuses_in_place(store):
    held, _ = store.create(_t("q", "x"))
    out = store.create_many([(_t("p", "a"), None), (_t("p", "b", "a"), None), (_t("p", "x"), None),
                             (_t("p", "c"), None)])
    assert [type(o).__name__ for o in out] == ["tuple", "PlayerBusy", "PlayerBusy", "tuple"]
    assert out[1].field == "players[1].id" and out[1].holder == out[0][0].id
    assert out[2].holder == held.id
    assert store.create(_t("q", "b"))[1]  # the refused batch ticket gave its other player back


@pytest.mark.redis
@pytest.mark.parametrize("redis_url", ["single", "cluster"], indirect=True)
def test_redis_a_create_stopped_between_its_steps_neither_locks_forever_nor_comes_back(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    try:
        ghost = _t("p", "a", "b")
        # the first step only (the players' locks), as if the process died before its pool's script ran
        assert s._drive(s._lock_players([ghost], {})) == ({}, {}, [])
        assert s.r.get(s.keys.player_lock("a")) == ghost.id
        other, created = s.create(_t("q", "a"))  # meets the lock, finds no such ticket: voids it, takes over
        assert created and s.r.get(s.keys.player_lock("a")) == other.id
        # the stopped create resumes: its pool's script refuses the voided ticket
        reply = s._drive(iter_script(s, "create", s._create_kv(ghost, None)))
        assert reply == ["~"] and s.get(ghost.id) is None
        # a second create of the first ticket refuses too, naming the live holder, and frees "b"
        with pytest.raises(PlayerBusy) as err:
            s.create(ghost)
        assert err.value.holder == other.id
        assert s.create(_t("q", "b"))[1]
        assert [t.id for t in s.queued("p")] == []
    finally:
        s.close()


def iter_script(s: RedisStore, name: str, kv: dict):
    """A one-request create flow: run one script of it (what a resumed process would send)."""
    replies = yield ("script", name, [kv])
    return replies


@pytest.mark.redis
def test_redis_a_replayed_create_after_a_lost_reply_is_still_one_ticket(redis_url):
    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    try:
        t = _t("p", "a")
        first, created = s.create(t)
        assert created
        again, created = s.create(t)  # the same ticket id again: its locks already name it
        assert again.id == first.id and created
        assert s.queue_depth("p") == 1
    finally:
        s.close()


@pytest.mark.parametrize("end", ["live", "cancel"])
def test_a_replayed_idempotency_key_answers_its_ticket_and_leaves_no_lock_behind(store, end):
    # the key is read with the players' locks (one round trip on Redis): a replay answers the earlier
    # ticket and gives back any lock its new ticket took meanwhile (the earlier one had ended)
    first, created = store.create(_t("p", "a"), "k1")
    assert created
    if end == "cancel":
        store.cancel(first.id)
        if isinstance(store, RedisStore):  # its lock gone too (as when it outlived its ttl): the replay takes it
            store.r.delete(store.keys.player_lock("a"))
    replay = _t("p", "a")
    again, created = store.create(replay, "k1")
    assert again.id == first.id and not created
    if isinstance(store, RedisStore):  # the replay's own ticket id holds no player's lock
        assert store.r.get(store.keys.player_lock("a")) in (first.id, None)
    if end == "live":  # the earlier ticket still holds the player
        with pytest.raises(PlayerBusy) as err:
            store.create(_t("q", "a"))
        assert err.value.holder == first.id
    else:  # the replay holds nothing: the player is free
        assert store.create(_t("q", "a"))[1]


@pytest.mark.parametrize("store_kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_http_and_grpc_answer_409_naming_the_player_field_and_the_ticket(tmp_path, live, store_kind, request):
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    extra = {}
    if store_kind == "redis":
        url, prefix = request.getfixturevalue("redis_url")
        extra = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    rt = Runtime.build(Settings(config=service_config(tmp_path), **extra))
    srv = live(rt)
    with client(srv.url) as c:
        r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "x", "features": features(0)}]})
        assert r.status_code == 201, r.text
        held = r.json()["id"]
        r = c.post("/v1/tickets", json={"pool": "3v3", "players": [
            {"id": "y", "features": [0.0] * 196}, {"id": "x", "features": [0.0] * 196}]})
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert err["field"] == "players[1].id" and held in err["message"]
        r = c.post("/v1/tickets/batch", json={"tickets": [
            {"pool": "3v3", "players": [{"id": "x", "features": [0.0] * 196}]}]})
        assert r.status_code == 200 and r.json()["tickets"][0]["error"]["field"] == "players[0].id"
        assert c.delete(f"/v1/tickets/{held}").status_code == 200
        assert c.post("/v1/tickets", json={"pool": "3v3", "players": [
            {"id": "x", "features": [0.0] * 196}]}).status_code == 201


def test_grpc_create_answers_already_exists_naming_the_player_field_and_the_ticket(tmp_path):
    grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
    from mgmatch.app.grpc_server import start_grpc
    from mgmatch.app.rpc import matchmaker_pb2 as pb
    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    rt = Runtime.build(Settings(config=service_config(tmp_path)))
    server, port = start_grpc(rt, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.MatchmakerStub(channel)
        held = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[
            pb.Player(id="g", features=features(0))]), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            stub.CreateTicket(pb.CreateTicketRequest(pool="3v3", players=[
                pb.Player(id="h", features=[0.0] * 196), pb.Player(id="g", features=[0.0] * 196)]), timeout=10)
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert err.value.details().startswith("players[1].id") and held.id in err.value.details()
    finally:
        channel.close()
        server.stop(0)
        rt.stop()


@pytest.mark.redis
def test_redis_scripts_flushed_are_loaded_again_for_every_step_of_a_create(redis_url):
    # every step sends its scripts as plain EVALSHA (no SCRIPT EXISTS first): a Redis that lost its scripts
    # answers NOSCRIPT, and the step loads them and runs again, the idempotency read batched with the locks too
    import asyncio

    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix)
    try:
        s.r.script_flush()
        first, created = s.create(_t("p", "a"), "k1")
        assert created
        s.r.script_flush()
        again, created = s.create(_t("p", "a"), "k1")  # a replay: the key read with the locks
        assert again.id == first.id and not created
        s.r.script_flush()
        with pytest.raises(PlayerBusy):  # refused: its locks go back with the (empty) creates
            s.create(_t("q", "a"), "k2")

        async def aio():
            s.r.script_flush()
            got, made = await s.acreate(_t("p", "b"), "k3")
            assert made
            s.r.script_flush()
            assert (await s.acreate(_t("p", "b"), "k3"))[0].id == got.id

        asyncio.run(aio())
        assert s.queue_depth("p") == 2
    finally:
        s.close()
