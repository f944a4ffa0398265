"""Push events on a live server, over the memory store and Redis: SSE per ticket and per pool (order,
payload, resume with Last-Event-ID, ownership, resync after trimming, hostile input), and webhooks
(signed, retried against a failing receiver, dead-lettered) against a real local HTTP receiver."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from sse_helpers import Listener  # noqa: E402
from svc_helpers import client, features, free_port, poll, service_config  # noqa: E402

from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings
from mgmatch.app.store import MemoryStore
from mgmatch.app.webhooks import verify

#: the tests here start a uvicorn server or a webhook receiver
pytestmark = pytest.mark.service

STORES = ["memory", pytest.param("redis", marks=pytest.mark.redis)]


def _settings(store: str, request, **extra) -> dict:
    if store == "memory":
        return {"sse_heartbeat_s": 0.3, **extra}
    url, prefix = request.getfixturevalue("redis_url")
    return {"store": "redis", "redis_url": url, "key_prefix": prefix, "sse_heartbeat_s": 0.3, **extra}


def _config(tmp_path, webhooks=None) -> Path:
    path = service_config(tmp_path)
    if webhooks:
        cfg = yaml.safe_load(path.read_text())
        cfg["webhooks"] = webhooks
        path.write_text(yaml.safe_dump(cfg))
    return path


def _runtime(tmp_path, settings, webhooks=None, store=None) -> Runtime:
    rt = Runtime.build(Settings(config=_config(tmp_path, webhooks), **settings), store=store)
    rt.start_embedded(tick_s=0.02)
    return rt


def _ticket(c, pid, i, headers=None):
    r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": pid, "features": features(i)}]},
               headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.mark.parametrize("store", STORES)
def test_ticket_stream_in_order_ends_at_its_end_and_resumes(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, _settings(store, request)))
    with client(srv.url) as c:
        first = _ticket(c, "a0", 0)
        with Listener(f"{srv.url}/v1/tickets/{first}/events") as watch:
            ids = [first] + [_ticket(c, f"a{i}", i) for i in range(1, 6)]
            assert watch.done.wait(30), watch.events
        assert watch.status == 200 and watch.error is None
        got = watch.events
        assert [e["event"] for e in got] == ["queued", "matched"]
        queued, matched = got
        # data is the ticket as GET shows it at that event: queued without a match, then matched with it
        assert queued["data"]["status"] == "queued" and "match" not in queued["data"]
        now = c.get(f"/v1/tickets/{first}").json()
        assert matched["data"]["status"] == "matched" and matched["data"]["match"] == now["match"]
        assert matched["data"]["id"] == first and set(matched["data"]["players"]) == {"a0"}
        assert tuple(map(int, queued["id"].split("-"))) < tuple(map(int, matched["id"].split("-")))
        # resume after the first event: only the rest; after the last: the stream has nothing left but ends
        with Listener(f"{srv.url}/v1/tickets/{first}/events", {"Last-Event-ID": queued["id"]}) as again:
            assert again.done.wait(10)
        assert [e["event"] for e in again.events] == ["matched"] and again.events[0]["id"] == matched["id"]
        # a cancelled ticket: queued, cancelled, end
        lone = c.post("/v1/tickets", json={"pool": "3v3", "players": [{"id": "x", "features": [0.0] * 196}]}).json()
        with Listener(f"{srv.url}/v1/tickets/{lone['id']}/events") as watch:
            watch.wait_for(lambda ev: len(ev) == 1)
            assert c.delete(f"/v1/tickets/{lone['id']}").status_code == 200
            assert watch.done.wait(10)
        assert [e["event"] for e in watch.events] == ["queued", "cancelled"]
        assert watch.events[1]["data"]["status"] == "cancelled"
        assert all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids)


@pytest.mark.parametrize("store", STORES)
def test_pool_stream_shows_only_the_callers_tickets_and_resumes_without_gaps(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, _settings(store, request, api_keys=["k1", "k2"])))
    k1, k2 = {"x-api-key": "k1"}, {"x-api-key": "k2"}
    with client(srv.url) as c:
        with Listener(f"{srv.url}/v1/events?pool=small", k1) as mine:
            own = [_ticket(c, f"m{i}", i, k1) for i in range(3)]
            other = [_ticket(c, f"o{i}", i + 3, k2) for i in range(3)]
            got = mine.wait_for(lambda ev: sum(e["event"] == "matched" for e in ev) == 3)
            time.sleep(0.3)
        assert {e["data"]["id"] for e in mine.events} == set(own)  # never another key's ticket
        assert [e["event"] for e in got].count("queued") == 3
        cut = got[1]["id"]
        with Listener(f"{srv.url}/v1/events?pool=small", {**k1, "Last-Event-ID": cut}) as resumed:
            resumed.wait_for(lambda ev: len(ev) == len(got) - 2)
            time.sleep(0.3)
        assert [e["id"] for e in resumed.events] == [e["id"] for e in got[2:]]
        # another key's ticket is 404 on its stream, as on GET
        r = c.get(f"/v1/tickets/{other[0]}/events", headers=k1)
        assert r.status_code == 404 and r.json()["error"]["field"] == "ticket_id"
        assert c.get("/v1/events?pool=small").status_code == 401


def test_hostile_input_on_the_event_routes_is_4xx(tmp_path, live):
    srv = live(_runtime(tmp_path, {"sse_heartbeat_s": 0.3}))
    with client(srv.url) as c:
        t = _ticket(c, "h0", 0)
        for bad in (b"abc", b"1-2-3", b"-1", b"99999999999999999999999-0", b"1-x", "\u00e9".encode()):
            r = c.get(f"/v1/tickets/{t}/events", headers={"Last-Event-ID": bad})
            assert r.status_code == 422 and r.json()["error"]["field"] == "Last-Event-ID", (bad, r.text)
        for path, field in (("/v1/events", "pool"), ("/v1/events?pool=nope", "pool"),
                            ("/v1/events?pool=" + "x" * 200, "pool"), ("/v1/webhooks/dead-letters", "pool"),
                            ("/v1/webhooks/dead-letters?pool=small&limit=0", "limit"),
                            ("/v1/webhooks/dead-letters?pool=small&limit=x", "limit")):
            r = c.get(path)
            assert r.status_code == 422 and r.json()["error"]["field"] in (field, f"query.{field}"), (path, r.text)
        for tid in ("nope", "small." + "0" * 32, "x" * 500):
            assert c.get(f"/v1/tickets/{tid}/events").status_code == 404
        assert c.post(f"/v1/tickets/{t}/events").status_code == 405


def test_a_client_resuming_after_the_retention_gets_resync_then_the_rest(tmp_path, live):
    store = MemoryStore(max_events=4)
    srv = live(_runtime(tmp_path, {"sse_heartbeat_s": 0.3}, store=store))
    with client(srv.url) as c:
        first = c.post("/v1/tickets", json={"pool": "3v3", "players": [{"id": "r", "features": [0.0] * 196}]}).json()
        with Listener(f"{srv.url}/v1/events?pool=3v3") as watch:
            for i in range(4):  # with the first: more events than the pool's log keeps (5 players: no match)
                c.post("/v1/tickets", json={"pool": "3v3", "players": [{"id": f"r{i}", "features": [0.0] * 196}]})
            got = watch.wait_for(lambda ev: len(ev) == 4)
        old = "1-0"
        with Listener(f"{srv.url}/v1/events?pool=3v3", {"Last-Event-ID": old}) as late:
            ev = late.wait_for(lambda ev: len(ev) >= 5)
            time.sleep(0.2)
        assert ev[0]["event"] == "resync" and ev[0]["data"] == {"pool": "3v3", "last_event_id": ev[0]["id"]}
        assert [e["id"] for e in ev[1:]] == [e["id"] for e in got]  # then from the oldest kept on
        # reconnecting with the resync's id: the kept events, no second resync
        with Listener(f"{srv.url}/v1/events?pool=3v3", {"Last-Event-ID": ev[0]["id"]}) as again:
            again.wait_for(lambda e: len(e) >= 4)
            time.sleep(0.2)
        assert [e["id"] for e in again.events] == [e["id"] for e in got]
        with Listener(f"{srv.url}/v1/tickets/{first['id']}/events", {"Last-Event-ID": old}) as late:
            ev = late.wait_for(lambda ev: len(ev) >= 1)
        assert ev[0]["event"] == "resync" and ev[0]["data"]["id"] == first["id"]
        assert ev[0]["data"]["status"] == "queued"


# --------------------------------------------------------------------------- webhooks


class Receiver:
    """A real local HTTP server that records every POST and answers ``fail_first`` failures (500) per
    event id first (``fail_first=-1``: always), optionally after ``delay_s``."""

    def __init__(self, fail_first: int = 0, delay_s: float = 0.0):
        self.fail_first, self.delay_s = fail_first, delay_s
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                with outer.lock:
                    eid = self.headers["x-mgmatch-event-id"]
                    seen = sum(1 for c in outer.calls if c["id"] == eid)
                    outer.calls.append({"id": eid, "body": body, "headers": dict(self.headers.items()),
                                        "at": time.time()})
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                ok = outer.fail_first >= 0 and seen >= outer.fail_first
                self.send_response(200 if ok else 500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


SECRET = "s3cret-s3cret-s3cret"


@pytest.mark.parametrize("store", STORES)
def test_webhook_delivered_signed_and_retried_against_a_failing_receiver(tmp_path, live, store, request):
    rec = Receiver(fail_first=2)
    hooks = [{"url": rec.url, "secret": SECRET, "events": ["matched"], "backoff_s": 0.2, "max_attempts": 5}]
    rt = _runtime(tmp_path, _settings(store, request), webhooks=hooks)
    srv = live(rt)
    try:
        with client(srv.url) as c:
            ids = [_ticket(c, f"w{i}", i) for i in range(6)]
            poll(lambda: len({x["id"] for x in rec.calls if x["headers"]["x-mgmatch-attempt"] == "3"}) == 6,
                 timeout=30)
        by_id: dict[str, list[dict]] = {}
        for call in rec.calls:
            by_id.setdefault(call["id"], []).append(call)
        assert len(by_id) == 6  # one event id per matched ticket, only `matched` (the filter)
        for eid, calls in by_id.items():
            assert [x["headers"]["x-mgmatch-attempt"] for x in calls] == ["1", "2", "3"]
            assert len({x["body"] for x in calls}) == 1  # the same body each time, de-duplicable by id
            for x in calls:
                assert verify(SECRET, x["headers"]["x-mgmatch-signature"], x["body"])
                assert not verify("another-secret-xx", x["headers"]["x-mgmatch-signature"], x["body"])
                assert x["headers"]["x-mgmatch-event"] == "matched"
            gaps = [b["at"] - a["at"] for a, b in zip(calls, calls[1:], strict=False)]
            assert gaps[0] >= 0.19 and gaps[1] >= 0.39, gaps  # exponential backoff: 0.2 s, then 0.4 s
            payload = json.loads(calls[0]["body"])
            assert payload["id"] == eid and payload["type"] == "matched" and payload["pool"] == "small"
            assert payload["ticket"]["status"] == "matched" and payload["ticket"]["id"] in ids
        assert {json.loads(v[0]["body"])["ticket"]["id"] for v in by_id.values()} == set(ids)
        time.sleep(0.5)
        assert len(rec.calls) == 18  # acknowledged: never sent again
        text = client(srv.url).get("/metrics").text
        hook = rt.config.webhooks[0].id
        assert f'mgmatch_webhooks_deliveries_total{{outcome="delivered",webhook="{hook}"}} 6.0' in text
        assert f'mgmatch_webhooks_deliveries_total{{outcome="failed",webhook="{hook}"}} 12.0' in text
        assert f'mgmatch_webhooks_delivery_seconds_count{{webhook="{hook}"}} 6.0' in text
    finally:
        rec.close()


@pytest.mark.parametrize("store", STORES)
def test_webhook_given_up_after_its_attempts_is_listed_as_a_dead_letter(tmp_path, live, store, request):
    rec = Receiver(fail_first=-1)
    hooks = [{"url": rec.url, "secret": SECRET, "backoff_s": 0.02, "max_attempts": 2, "name": "studio"}]
    srv = live(_runtime(tmp_path, _settings(store, request, api_keys=["k1", "k2"]), webhooks=hooks))
    k1 = {"x-api-key": "k1"}
    try:
        with client(srv.url) as c:
            t = c.post("/v1/tickets", json={"pool": "3v3", "players": [{"id": "d", "features": [0.0] * 196}]},
                       headers=k1).json()["id"]
            dead = poll(lambda: c.get("/v1/webhooks/dead-letters?pool=3v3", headers=k1).json()["dead_letters"],
                        timeout=20)
            assert len(dead) == 1
            d = dead[0]
            assert d["webhook"] == "studio" and d["event"] == "queued" and d["ticket"] == t
            assert d["attempts"] == 2 and d["error"] == "HTTP 500" and d["payload"]["ticket"]["id"] == t
            assert "owner" not in d
            # another key does not see it
            assert c.get("/v1/webhooks/dead-letters?pool=3v3", headers={"x-api-key": "k2"}).json()["dead_letters"] == []
        assert len(rec.calls) == 2
    finally:
        rec.close()


@pytest.mark.parametrize(("hook", "field"), [
    ({"url": "ftp://x/y", "secret": SECRET}, "webhooks[0].url"),
    ({"url": "http://x/y", "secret": "short"}, "webhooks[0].secret"),
    ({"url": "http://x/y", "secret": SECRET, "events": ["matched", "nope"]}, "webhooks[0].events[1]"),
    ({"url": "http://x/y", "secret": SECRET, "pools": ["nope"]}, "webhooks[0].pools[0]"),
    ({"url": "http://x/y", "secret": SECRET, "max_attempts": 0}, "webhooks[0].max_attempts"),
    ({"url": "http://x/y", "secret": SECRET, "bogus": 1}, "webhooks[0].bogus"),
])
def test_bad_webhook_config_names_the_field(tmp_path, hook, field):
    from mgmatch.app.config import parse_config
    from mgmatch.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        parse_config(yaml.safe_load(_config(tmp_path, [hook]).read_text()))
    assert err.value.field == f"config.{field}", str(err.value)


@pytest.mark.parametrize("store", STORES)
def test_a_restarted_deliverer_resumes_what_it_had_not_delivered(tmp_path, store, request):
    """Delivery state lives in the store: a deliverer stopped while its receiver was down leaves the events
    pending; a new one under the same consumer name delivers them, each once the receiver answers."""
    from mgmatch.app.config import WebhookConfig
    from mgmatch.app.store import RedisStore, Ticket, new_ticket_id
    from mgmatch.app.webhooks import Deliverer

    def make_store():
        if store == "memory":
            return shared
        url, prefix = request.getfixturevalue("redis_url")
        return RedisStore.from_url(url, prefix=prefix)

    shared = MemoryStore()
    s1 = make_store()
    down = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    hook = WebhookConfig(url=down, secret=SECRET, backoff_s=5, name="h")
    d1 = Deliverer(s1, [hook], ["p"], "host-webhooks")
    d1.step()  # the group starts here
    now = time.time()
    ids = [s1.create(Ticket(new_ticket_id("p"), "p", [{"id": f"u{i}", "features": [1.0]}], now, now + 60))[0].id
           for i in range(3)]
    def tried_once() -> bool:
        d1.step()
        return len(d1._retries) == 3  # read, tried once (refused), waiting to retry

    poll(tried_once, timeout=10)
    d1.stop()
    rec = Receiver()
    try:
        s2 = make_store()
        d2 = Deliverer(s2, [WebhookConfig(url=rec.url, secret=SECRET, backoff_s=5, name="h")], ["p"],
                       "host-webhooks").start()
        poll(lambda: len(rec.calls) >= 3, timeout=20)
        time.sleep(0.3)
        d2.stop()
        assert sorted(json.loads(c["body"])["ticket"]["id"] for c in rec.calls) == sorted(ids)
        assert s2.read_deliveries("p", "webhook:h", "host-webhooks", pending=True) == []  # acknowledged
    finally:
        rec.close()


def test_deliveries_are_acknowledged_together_by_the_next_round():
    """A sender does not acknowledge on its own (one store write per delivery): the reader's round
    acknowledges everything delivered since the last, in one call per receiver and pool."""
    from mgmatch.app.config import WebhookConfig
    from mgmatch.app.store import Ticket, new_ticket_id
    from mgmatch.app.webhooks import Deliverer

    store = MemoryStore()
    calls: list[list[str]] = []
    ack = store.ack_deliveries
    store.ack_deliveries = lambda pool, group, ids: (calls.append(list(ids)), ack(pool, group, ids))[1]
    rec = Receiver()
    d = Deliverer(store, [WebhookConfig(url=rec.url, secret=SECRET, name="h", events=["queued"])], ["p"], "c")
    try:
        d.step()  # the group starts here
        now = time.time()
        for i in range(5):
            store.create(Ticket(new_ticket_id("p"), "p", [{"id": f"u{i}", "features": [1.0]}], now, now + 60))
        d.step()  # reads the five, hands them to the senders, acknowledges those already delivered
        poll(lambda: d.delivered == 5, timeout=10)
        d.step()  # acknowledges the rest
        assert sorted(e for c in calls for e in c) == sorted(e for e, _ in store.read_events("p", "0-0", 10))
        assert len(calls) <= 2  # not one per delivery
        assert store.read_deliveries("p", "webhook:h", "c", pending=True) == []
    finally:
        d.stop()
        rec.close()


def test_a_hanging_receiver_slows_neither_the_api_nor_the_matches(tmp_path, live):
    rec = Receiver(delay_s=4.0)
    hooks = [{"url": rec.url, "secret": SECRET, "timeout_s": 10, "max_in_flight": 2}]
    srv = live(_runtime(tmp_path, {}, webhooks=hooks))
    try:
        with client(srv.url) as c:
            times, ids = [], []
            for i in range(12):
                t0 = time.perf_counter()
                ids.append(_ticket(c, f"hang{i}", i))
                times.append(time.perf_counter() - t0)
            poll(lambda: all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids), timeout=20)
            assert max(times) < 1.0, times
            assert len(rec.calls) <= 4  # only max_in_flight (2) at a time reach the hanging receiver
    finally:
        rec.close()


def test_open_streams_end_when_the_server_is_asked_to_stop():
    """A graceful shutdown waits for every response: open event streams must end on SIGTERM, not hold
    the process (the clients reconnect elsewhere with their Last-Event-ID)."""
    from svc_helpers import ServeProcess

    with ServeProcess() as srv:
        pool = Listener(f"{srv.url}/v1/events?pool=3v3").__enter__()
        t = httpx_post_ticket(srv.url)
        one = Listener(f"{srv.url}/v1/tickets/{t}/events").__enter__()
        one.wait_for(lambda ev: len(ev) == 1)
        t0 = time.time()
        srv.proc.terminate()
        srv.proc.wait(15)
        assert time.time() - t0 < 10
        assert pool.done.wait(5) and one.done.wait(5)


def httpx_post_ticket(url: str) -> str:
    import httpx

    r = httpx.post(url + "/v1/tickets", json={"pool": "3v3", "players": [{"id": "s", "features": [0.0] * 196}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.mark.redis
def test_the_webhooks_worker_process_delivers_from_redis(tmp_path, redis_url):
    """``mgmatch worker webhooks``: the separate deliverer process of a Redis deployment."""
    import os
    import subprocess

    from svc_helpers import MAIN

    from mgmatch.app.store import RedisStore, Ticket, new_ticket_id

    url, prefix = redis_url
    rec = Receiver()
    cfg = _config(tmp_path, [{"url": rec.url, "secret": SECRET, "name": "w"}])
    proc = subprocess.Popen([*MAIN, "worker", "webhooks", "--config", str(cfg), "--redis-url", url,
                             "--metrics-port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MGMATCH_KEY_PREFIX": prefix, "MGMATCH_WORKER_ID": "test-webhooks"})
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        # the worker's group exists once it has read the pool once: only events after that are its
        poll(lambda: any(g["name"] == "webhook:w" for g in _groups(store, "small")), timeout=60)
        now = time.time()
        t = store.create(Ticket(new_ticket_id("small"), "small", [{"id": "ww", "features": features(0)}],
                                now, now + 60))[0]
        poll(lambda: rec.calls, timeout=20)
        body = json.loads(rec.calls[0]["body"])
        assert body["type"] == "queued" and body["ticket"]["id"] == t.id
        assert verify(SECRET, rec.calls[0]["headers"]["x-mgmatch-signature"], rec.calls[0]["body"])
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
        store.close()
        rec.close()
    assert proc.returncode in (0, -15), err[-2000:]


def _groups(store, pool: str) -> list[dict]:
    import redis

    try:
        return store.r.xinfo_groups(store.keys.events(pool))
    except redis.ResponseError:
        return []


def test_deliveries_reuse_a_kept_alive_connection_and_reopen_one_the_receiver_closed():
    """Each sender keeps its connection to a receiver open (HTTP/1.1) between deliveries; when the receiver
    closed it meanwhile (its idle timeout), the next delivery opens a new one and still gets its answer."""
    from mgmatch.app.webhooks import _Poster

    peers: list[tuple] = []
    handlers: list = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            peers.append(self.client_address)
            handlers.append(self)

        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(204 if self.path == "/hook?k=1" else 404)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    poster = _Poster(f"http://127.0.0.1:{server.server_port}/hook?k=1", 5.0)
    try:
        assert [poster.post(b"{}", {"content-type": "application/json"}) for _ in range(20)] == [204] * 20
        assert len(peers) == 1  # one connection for all twenty
        import socket as _socket

        handlers[0].connection.shutdown(_socket.SHUT_RDWR)  # the receiver drops the idle connection
        time.sleep(0.1)
        assert poster.post(b"{}", {}) == 204
        assert len(peers) == 2
    finally:
        poster.close()
        server.shutdown()
        server.server_close()
