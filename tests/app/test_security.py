"""Authentication, ownership and the metrics label on a real uvicorn server (and a real gRPC server):
malformed signatures are 401, another client's ticket is 404, random paths add no metric series, gRPC
is never more open than HTTP."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, service_config  # noqa: E402

from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.security import parse_signature, sign, verify  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402


def _runtime(tmp_path, **settings) -> Runtime:
    return Runtime.build(Settings(config=service_config(tmp_path), embedded_workers=False, **settings))


def _store_settings(store: str, request) -> dict:
    if store == "memory":
        return {}
    url, prefix = request.getfixturevalue("redis_url")
    return {"store": "redis", "redis_url": url, "key_prefix": prefix}


# --------------------------------------------------------------------------- HMAC parsing


HOSTILE_SIGNATURES = [
    "t=" + "9" * 400 + ",v1=" + "0" * 64,  # OverflowError on main
    "t=1700000000,v1=" + "é" * 64,  # non-ASCII: compare_digest raised TypeError on main
    "t=１７００００００００,v1=" + "0" * 64,  # full-width digits pass str.isdigit()
    "t=1700000000",
    "v1=" + "0" * 64,
    "t=,v1=",
    "garbage",
    "",
    ",,,,",
    "t=-5,v1=" + "0" * 64,
    "t=1e9,v1=" + "0" * 64,
    "t=1700000000,v1=" + "0" * 63,
    "t=1700000000,v1=" + "0" * 64 + "," * 5000,
]


@pytest.mark.parametrize("header", HOSTILE_SIGNATURES)
def test_malformed_signature_parses_to_none(header):
    assert parse_signature(header) is None
    assert verify("s", header, "GET", "/v1/tickets/x", b"", 300) is False


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_verify_never_raises_on_any_header(header):
    assert verify("s", header, "POST", "/v1/tickets", b"{}", 300) in (True, False)


def test_a_good_signature_still_verifies():
    header = sign("s", "POST", "/v1/tickets", b"{}")
    assert verify("s", header, "post", "/v1/tickets", b"{}", 300)
    assert not verify("s", header, "POST", "/v1/tickets", b"{ }", 300)
    assert not verify("s", sign("s", "POST", "/v1/tickets", b"{}", t=time.time() - 1000), "POST", "/v1/tickets",
                      b"{}", 300)


def test_hostile_signatures_are_401_on_a_live_server(tmp_path, live):
    srv = live(_runtime(tmp_path, hmac_secret="s3cret"))
    with client(srv.url) as c:
        for header in HOSTILE_SIGNATURES:
            r = c.get("/v1/tickets/small." + "0" * 32, headers={"x-mgmatch-signature": header.encode("utf-8")})
            assert r.status_code == 401, (header[:40], r.text)
            assert r.json()["error"]["field"] == "authorization"
        raw_latin1 = b"t=1700000000,v1=" + bytes(range(128, 192))
        assert c.get("/v1/tickets/x", headers={"x-mgmatch-signature": raw_latin1}).status_code == 401


# --------------------------------------------------------------------------- metrics label


def _route_labels(text: str) -> set[str]:
    return set(re.findall(r'^mgmatch_http_requests_total\{code="\d+",route="([^"]*)"\}', text, re.M))


def test_random_paths_add_no_metric_series(tmp_path, live):
    srv = live(_runtime(tmp_path))
    rng = random.Random(9)
    with client(srv.url) as c:
        c.get("/nothing-here")
        c.get("/v1/nothing-here")
        c.get("/v1/tickets/small." + "0" * 32)
        c.get("/metrics")  # a request is counted once answered: the next scrape shows this one
        before = _route_labels(c.get("/metrics").text)
        assert {"other", "/v1/tickets/{ticket_id}", "/metrics"} <= before
        for _ in range(300):
            tail = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-_.") for _ in range(rng.randint(1, 60)))
            prefix = rng.choice(["/", "/v1/", "/v1/tickets/", "/healthz/", "/static/"])
            assert c.get(prefix + tail).status_code in (401, 404, 405, 422)
        after = _route_labels(c.get("/metrics").text)
    assert after == before, sorted(after - before)[:10]


# --------------------------------------------------------------------------- ownership over HTTP


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_tickets_belong_to_the_key_that_created_them(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, api_keys=["k1", "k2"], **_store_settings(store, request)))
    k1, k2 = {"x-api-key": "k1"}, {"x-api-key": "k2"}
    body = {"pool": "small", "players": [{"id": "own-a", "features": features(1)}]}
    with client(srv.url) as c:
        mine = c.post("/v1/tickets", json=body, headers={**k1, "idempotency-key": "same"})
        assert mine.status_code == 201, mine.text
        tid = mine.json()["id"]
        assert c.get(f"/v1/tickets/{tid}", headers=k1).status_code == 200
        for r in (c.get(f"/v1/tickets/{tid}", headers=k2), c.delete(f"/v1/tickets/{tid}", headers=k2)):
            assert r.status_code == 404 and r.json()["error"]["field"] == "ticket_id"
        assert c.get(f"/v1/tickets/{tid}", headers=k1).json()["status"] == "queued"  # k2's DELETE changed nothing
        # the same idempotency key from k2 is k2's own key: never k1's ticket
        other = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "own-b", "features": features(2)}]},
                       headers={**k2, "idempotency-key": "same"})
        assert other.status_code == 201 and other.json()["id"] != tid
        replay = c.post("/v1/tickets", json=body, headers={**k2, "idempotency-key": "same"})
        assert replay.status_code in (200, 409) and replay.json().get("id") != tid
        batch = c.post("/v1/tickets/batch", headers=k2, json={"tickets": [{**body, "idempotency_key": "same"}]})
        assert batch.status_code == 200 and batch.json()["tickets"][0].get("id") != tid
        assert c.post("/v1/tickets", json=body, headers={**k1, "idempotency-key": "same"}).json()["id"] == tid
        assert c.delete(f"/v1/tickets/{tid}", headers=k1).json()["status"] == "cancelled"


def test_without_authentication_every_client_sees_every_ticket(tmp_path, live):
    srv = live(_runtime(tmp_path))
    with client(srv.url) as a, client(srv.url) as b:
        tid = a.post("/v1/tickets", json={"pool": "small", "players": [{"id": "open", "features": features(3)}]}).json()["id"]
        assert b.get(f"/v1/tickets/{tid}").status_code == 200
        assert b.delete(f"/v1/tickets/{tid}").json()["status"] == "cancelled"


# --------------------------------------------------------------------------- gRPC


def _grpc(rt):
    grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
    from mgmatch.app.grpc_server import start_grpc
    from mgmatch.app.rpc import matchmaker_pb2 as pb
    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc

    server, port = start_grpc(rt, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return grpc, pb, pb_grpc.MatchmakerStub(channel), lambda: (channel.close(), server.stop(grace=None))


def _code(grpc, fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as info:
        fn(*args, **kw)
    return info.value.code()


def test_grpc_refuses_every_call_when_only_hmac_is_configured(tmp_path):
    grpc, pb, stub, close = _grpc(_runtime(tmp_path, hmac_secret="s3cret"))
    try:
        ref = pb.TicketRef(id="small." + "0" * 32)
        calls = [(stub.GetTicket, ref), (stub.CancelTicket, ref),
                 (stub.CreateTicket, pb.CreateTicketRequest(pool="small", players=[pb.Player(id="h", features=features(1))])),
                 (stub.Solve, pb.SolveRequest(instance=pb.Instance(teams=2, team_size=1)))]
        for fn, req in calls:
            assert _code(grpc, fn, req) == grpc.StatusCode.UNAUTHENTICATED
            sig = sign("s3cret", "POST", "/mgmatch.v1.Matchmaker/GetTicket", req.SerializeToString())
            assert _code(grpc, fn, req, metadata=[("x-mgmatch-signature", sig)]) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        close()


def test_grpc_tickets_belong_to_their_key_and_hmac_plus_keys_takes_keys(tmp_path):
    rt = _runtime(tmp_path, api_keys=["k1", "k2"], hmac_secret="s3cret")
    grpc, pb, stub, close = _grpc(rt)
    k1, k2 = [("x-api-key", "k1")], [("authorization", "Bearer k2")]
    try:
        t = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[pb.Player(id="g-own", features=features(1))],
                                                     idempotency_key="same"), metadata=k1)
        assert stub.GetTicket(pb.TicketRef(id=t.id), metadata=k1).status == "queued"
        assert _code(grpc, stub.GetTicket, pb.TicketRef(id=t.id), metadata=k2) == grpc.StatusCode.NOT_FOUND
        assert _code(grpc, stub.CancelTicket, pb.TicketRef(id=t.id), metadata=k2) == grpc.StatusCode.NOT_FOUND
        assert _code(grpc, stub.GetTicket, pb.TicketRef(id=t.id)) == grpc.StatusCode.UNAUTHENTICATED
        replay = pb.CreateTicketRequest(pool="small", players=[pb.Player(id="g-other", features=features(2))],
                                        idempotency_key="same")
        assert stub.CreateTicket(replay, metadata=k2).id != t.id
        assert stub.CancelTicket(pb.TicketRef(id=t.id), metadata=k1).status == "cancelled"
    finally:
        close()
        rt.stop()


@pytest.mark.service
def test_grpc_server_does_not_import_the_http_module():
    code = ("import sys, mgmatch.app.grpc_server; "
            "assert 'mgmatch.app.api' not in sys.modules, 'grpc_server imports the HTTP module'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
