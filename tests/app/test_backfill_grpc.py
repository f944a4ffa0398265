"""Backfills over gRPC: the HTTP routes' twins (same validation, ownership and store)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config  # noqa: E402

from mgmatch.app.grpc_server import start_grpc  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2 as pb  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402


def _code(call, req):
    try:
        call(req)
    except grpc.RpcError as err:
        return err.code(), err.details()
    return grpc.StatusCode.OK, ""


def _request(**kw) -> pb.CreateBackfillRequest:
    players = [pb.Player(id=pid, features=features(40 + i)) for i, pid in enumerate(["e0", "e1", "e2", "e3"])]
    base = {"pool": "small", "match_id": "game-g", "players": players,
            "teams": [pb.Team(players=["e0", "e1", "e2"]), pb.Team(players=["e3"])], "open": [0, 2]}
    return pb.CreateBackfillRequest(**{**base, **kw})


@pytest.fixture
def grpc_rt(tmp_path, live):
    rt = Runtime.build(Settings(config=service_config(tmp_path), api_keys=["k-1", "k-2"]))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)  # HTTP on the same runtime (stopped by the fixture)
    server, port = start_grpc(rt, "127.0.0.1", 0)
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield pb_grpc.MatchmakerStub(ch), srv.url
    ch.close()
    server.stop(grace=None)


def test_backfill_over_grpc_is_filled_and_shares_the_store_with_http(grpc_rt):
    stub, url = grpc_rt
    md = [("x-api-key", "k-1")]
    b = stub.CreateBackfill(_request(ttl_s=30), metadata=md)
    assert b.status == "open" and b.match_id == "game-g" and [list(t.players) for t in b.assigned] == [[], []]
    for i in range(2):
        stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[pb.Player(id=f"g{i}", features=features(i))]),
                          metadata=md)
    done = poll(lambda: (v := stub.GetBackfill(pb.BackfillRef(id=b.id), metadata=md)).status == "filled" and v)
    assert sorted(done.assigned[1].players) == ["g0", "g1"] and len(done.tickets) == 2
    t = stub.GetTicket(pb.TicketRef(id=done.tickets[0]), metadata=md)
    assert t.status == "matched" and t.match.match_id == "game-g" and t.match.backfill_id == b.id
    with client(url) as c:  # HTTP reads the same backfill
        assert c.get(f"/v1/backfills/{b.id}", headers={"x-api-key": "k-1"}).json()["status"] == "filled"
    code, details = _code(lambda r: stub.CancelBackfill(r, metadata=md), pb.BackfillRef(id=b.id))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "filled" in details
    other = stub.CreateBackfill(_request(match_id="game-h"), metadata=md)
    # another client's backfill is not found, and stays open
    code, _ = _code(lambda r: stub.CancelBackfill(r, metadata=[("x-api-key", "k-2")]), pb.BackfillRef(id=other.id))
    assert code == grpc.StatusCode.NOT_FOUND
    assert stub.CancelBackfill(pb.BackfillRef(id=other.id), metadata=md).status == "cancelled"
    code, _ = _code(lambda r: stub.GetBackfill(r, metadata=md), pb.BackfillRef(id="small." + "0" * 32))
    assert code == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("change,field", [
    ({"pool": "nope"}, "pool"),
    ({"open": [0, 3]}, "open[1]"),
    ({"open": [0]}, "open"),
    ({"teams": [pb.Team(players=["e0", "e1", "e2"]), pb.Team(players=["zz"])]}, "teams[1][0]"),
    ({"players": [pb.Player(id="e0", features=[1.0])]}, "players[0].features"),
    ({"ttl_s": -1}, "ttl_s"),
])
def test_bad_backfills_over_grpc_are_invalid_argument_naming_the_field(grpc_rt, change, field):
    stub, _ = grpc_rt
    code, details = _code(lambda r: stub.CreateBackfill(r, metadata=[("x-api-key", "k-1")]), _request(**change))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(field), details
