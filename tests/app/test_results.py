"""POST /v1/matches/{match_id}/result (and gRPC PostMatchResult) on a real uvicorn server, over both stores:
202 once a match formed, the first result stays, every bad input named, ownership, metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config  # noqa: E402

from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402

K1, K2 = {"x-api-key": "k1"}, {"x-api-key": "k2"}


def _settings(tmp_path, store: str, request, **kw) -> Settings:
    extra = {}
    if store == "redis":
        url, prefix = request.getfixturevalue("redis_url")
        extra = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    return Settings(config=service_config(tmp_path), **extra, **kw)


def _one_match(c, headers, tag: str = "r") -> dict:
    """Queue six players of pool small (as ``headers``' client), wait for their match; the match object."""
    ids = []
    for i in range(6):
        r = c.post("/v1/tickets", headers=headers,
                   json={"pool": "small", "players": [{"id": f"{tag}{i}", "features": features(i)}]})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    done = poll(lambda: [v for t in ids if (v := c.get(f"/v1/tickets/{t}", headers=headers).json())["status"]
                         == "matched"] if all(c.get(f"/v1/tickets/{t}", headers=headers).json()["status"] == "matched"
                                               for t in ids) else None)
    return done[0]["match"]


def _metric(text: str, outcome: str) -> float:
    for line in text.splitlines():
        if line.startswith("mgmatch_matches_results_total{") and f'outcome="{outcome}"' in line \
                and 'pool="small"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_results_are_accepted_once_and_bad_input_is_named(tmp_path, live, store, request):
    rt = Runtime.build(_settings(tmp_path, store, request, api_keys=["k1", "k2"]))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    with client(srv.url) as c:
        m = _one_match(c, K1)
        mid = m["match_id"]
        assert mid.startswith("small.")
        url = f"/v1/matches/{mid}/result"
        assert c.post(url, json={"engagement": 1.0}).status_code == 401  # authenticated like every write
        # another client (none of the match's tickets is its own) does not see the match
        r = c.post(url, headers=K2, json={"engagement": 1.0})
        assert r.status_code == 404 and r.json()["error"]["field"] == "match_id"
        bad = [({"engagement": "lots"}, "engagement"), ({}, "engagement"), ({"engagement": 1, "extra": 2}, "extra"),
               ({"engagement": 1, "players": {"nobody": 1.0}}, "players.nobody"),
               ({"engagement": 1, "players": {"r0": "x"}}, "players.r0"), ({"engagement": 1, "players": [1]}, "players")]
        for body, field in bad:
            r = c.post(url, headers=K1, json=body)
            assert r.status_code == 422, (body, r.text)
            assert r.json()["error"]["field"] == field and field in r.json()["error"]["message"], (body, r.json())
        for raw in (b'{"engagement": NaN}', b'{"engagement": Infinity}', b'{"engagement": 1, "players": {"r0": NaN}}'):
            r = c.post(url, headers={**K1, "content-type": "application/json"}, content=raw)
            assert r.status_code == 422, (raw, r.text)
        before = c.get("/metrics").text
        body = {"engagement": 0.75, "players": {"r0": 1.0, "r3": 0.0}}
        r = c.post(url, headers=K1, json=body)
        assert r.status_code == 202, r.text
        assert r.json()["status"] == "accepted" and r.json()["pool"] == "small" and r.json()["engagement"] == 0.75
        r = c.post(url, headers=K1, json=body)  # a retry of the same result: accepted again, nothing changes
        assert r.status_code == 202 and r.json()["status"] == "duplicate"
        r = c.post(url, headers=K1, json={"engagement": 0.1})
        assert r.status_code == 409 and r.json()["error"]["field"] == "result"
        assert "already has a different result" in r.json()["error"]["message"]
        for unknown in ("small.nope-0-x", "nodot", "zz.abc", "small." + "x" * 300):
            r = c.post(f"/v1/matches/{unknown}/result", headers=K1, json={"engagement": 1.0})
            assert r.status_code == 404 and r.json()["error"]["field"] == "match_id", unknown
        after = c.get("/metrics").text
    assert _metric(after, "accepted") - _metric(before, "accepted") == 1
    assert _metric(after, "duplicate") - _metric(before, "duplicate") == 1
    assert _metric(after, "conflict") - _metric(before, "conflict") == 1
    rec = rt.store.get_match("small", mid)
    assert rec.result == {"engagement": 0.75, "players": {"r0": 1.0, "r3": 0.0}}
    assert sorted(p["id"] for team in rec.teams for p in team) == [f"r{i}" for i in range(6)]
    assert all(p["features"] == features(int(p["id"][1:])) for team in rec.teams for p in team)


def test_an_expired_match_record_answers_404(tmp_path, live):
    rt = Runtime.build(Settings(config=service_config(tmp_path), match_retention_s=0.5))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    with client(srv.url) as c:
        mid = _one_match(c, {})["match_id"]
        poll(lambda: rt.store.get_match("small", mid) is None, timeout=5)
        r = c.post(f"/v1/matches/{mid}/result", json={"engagement": 1.0})
        assert r.status_code == 404 and "retention" in r.json()["error"]["message"]


def test_post_match_result_over_grpc(tmp_path, live):
    grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
    from mgmatch.app.grpc_server import start_grpc
    from mgmatch.app.rpc import matchmaker_pb2 as pb
    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc

    rt = Runtime.build(Settings(config=service_config(tmp_path), api_keys=["k1"]))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    server, port = start_grpc(rt, "127.0.0.1", 0)
    try:
        with client(srv.url) as c, grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            mid = _one_match(c, K1, tag="g")["match_id"]
            stub = pb_grpc.MatchmakerStub(ch)
            md = [("x-api-key", "k1")]

            def code(req):
                with pytest.raises(grpc.RpcError) as info:
                    stub.PostMatchResult(req, metadata=md)
                return info.value.code(), info.value.details()

            ack = stub.PostMatchResult(pb.MatchResultRequest(match_id=mid, engagement=2.5, players={"g1": 1.0}),
                                       metadata=md)
            assert ack.status == "accepted" and ack.pool == "small" and ack.engagement == 2.5
            assert stub.PostMatchResult(pb.MatchResultRequest(match_id=mid, engagement=2.5, players={"g1": 1.0}),
                                        metadata=md).status == "duplicate"
            assert code(pb.MatchResultRequest(match_id=mid, engagement=3.0))[0] == grpc.StatusCode.ALREADY_EXISTS
            got = code(pb.MatchResultRequest(match_id=mid, engagement=2.5, players={"zz": 1.0}))
            assert got[0] == grpc.StatusCode.INVALID_ARGUMENT and "players.zz" in got[1]
            got = code(pb.MatchResultRequest(match_id=mid, engagement=float("nan")))
            assert got[0] == grpc.StatusCode.INVALID_ARGUMENT and "engagement" in got[1]
            assert code(pb.MatchResultRequest(match_id="small.x-0-y", engagement=1.0))[0] == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop(grace=None)
    assert rt.store.get_match("small", mid).result == {"engagement": 2.5, "players": {"g1": 1.0}}


def test_results_answer_503_while_redis_is_unreachable(tmp_path, live):
    from svc_helpers import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"
    rt = Runtime.build(Settings(config=service_config(tmp_path), store="redis", redis_url=dead, retry_after_s=3))
    srv = live(rt)
    with client(srv.url) as c:
        r = c.post("/v1/matches/small.c-0-x/result", json={"engagement": 1.0})
    assert r.status_code == 503 and r.headers["retry-after"] == "3" and r.json()["error"]["field"] == "store"
