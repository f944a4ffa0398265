"""The optional gRPC API: a real `mgmatch serve --grpc-port` process, the same answers as HTTP."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, client, features, poll, served_grpc, service_config  # noqa: E402

from mgmatch.app.grpc_server import instance_json, start_grpc  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2 as pb  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402

RPC = Path(__file__).resolve().parents[2] / "app" / "rpc"


def _player(pid: str, i: int) -> pb.Player:
    return pb.Player(id=pid, features=features(i), skill=1500.0 + i)


def _instance_message(obj: dict) -> pb.Instance:
    from google.protobuf import json_format

    players = [{k: v for k, v in p.items() if k in pb.Player.DESCRIPTOR.fields_by_name} for p in obj["players"]]
    return json_format.ParseDict({**{k: v for k, v in obj.items() if k != "players"}, "players": players},
                                 pb.Instance())


@pytest.fixture
def served(tmp_path):
    """`mgmatch serve` with HTTP and gRPC on free ports (in-memory store, embedded workers)."""
    with served_grpc(tmp_path) as both:
        yield both


def _code(fn, *args) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        fn(*args)
    return info.value.code(), info.value.details()


@pytest.mark.service
def test_solve_over_grpc_equals_the_spec_example_and_names_bad_fields(served):
    stub, _ = served
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    expected = json.loads((SPEC_EXAMPLES / "expected-small.json").read_text())
    msg = _instance_message({**inst, "engagement_model": "small"})
    sol = stub.Solve(pb.SolveRequest(instance=msg, time_limit_ms=5000), timeout=30)
    assert sol.format == "mgmatch-solution/v1" and sol.status == "optimal"
    assert sol.objective == pytest.approx(expected["objective"], abs=1e-6)
    assert sorted(sorted(t.players) for t in sol.teams) == sorted(sorted(t) for t in expected["teams"])
    assert sol.model_version and "encode_ms" in sol.stats
    bad_teams = pb.Instance()
    bad_teams.CopyFrom(msg)
    bad_teams.teams = 1
    for req, field in ((pb.SolveRequest(instance=msg, method="nope"), "method"),
                       (pb.SolveRequest(instance=msg, time_limit_ms=-1), "time_limit_ms"),
                       (pb.SolveRequest(instance=bad_teams), "teams")):
        code, details = _code(stub.Solve, req)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(field), details


@pytest.mark.service
def test_ticket_lifecycle_over_grpc_shares_the_store_with_http(served):
    stub, url = served
    party = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[_player("g0", 0), _player("g1", 1)],
                                                     idempotency_key="party-1"))
    assert party.status == "queued" and list(party.players) == ["g0", "g1"]
    again = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[_player("g0", 0), _player("g1", 1)],
                                                     idempotency_key="party-1"))
    assert again.id == party.id
    code, details = _code(stub.CreateTicket, pb.CreateTicketRequest(pool="small", players=[_player("g0", 0)]))
    assert code == grpc.StatusCode.ALREADY_EXISTS and "g0" in details
    code, details = _code(stub.CreateTicket, pb.CreateTicketRequest(
        pool="small", players=[pb.Player(id="x", features=[1.0, 2.0])]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("players[0].features"), details
    code, details = _code(stub.CreateTicket, pb.CreateTicketRequest(pool="nope", players=[_player("y", 3)]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("pool"), details
    ids = [party.id] + [stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[_player(f"s{i}", i + 2)])).id
                        for i in range(4)]
    done = poll(lambda: all(stub.GetTicket(pb.TicketRef(id=i)).status == "matched" for i in ids)
                and [stub.GetTicket(pb.TicketRef(id=i)) for i in ids], timeout=30)
    match_ids = {t.match.match_id for t in done}
    assert len(match_ids) == 1
    teams = [list(team.players) for team in done[0].match.teams]
    assert any({"g0", "g1"} <= set(team) for team in teams)
    with client(url) as c:  # HTTP reads the same ticket
        assert c.get(f"/v1/tickets/{party.id}").json()["match"]["match_id"] == done[0].match.match_id
    code, _ = _code(stub.CancelTicket, pb.TicketRef(id=party.id))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    code, _ = _code(stub.GetTicket, pb.TicketRef(id="small.00000000000000000000000000000000"))
    assert code == grpc.StatusCode.NOT_FOUND
    lone = stub.CreateTicket(pb.CreateTicketRequest(pool="3v3", players=[pb.Player(id="z", features=[0.0] * 196)],
                                                    ttl_s=60))
    assert stub.CancelTicket(pb.TicketRef(id=lone.id)).status == "cancelled"


def test_api_keys_guard_grpc(tmp_path):
    rt = Runtime.build(Settings(config=service_config(tmp_path), api_keys=["k-1"], embedded_workers=False))
    server, port = start_grpc(rt, "127.0.0.1", 0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.MatchmakerStub(ch)
            ref = pb.TicketRef(id="small.00000000000000000000000000000000")
            assert _code(stub.GetTicket, ref)[0] == grpc.StatusCode.UNAUTHENTICATED
            code, _ = _code(lambda r: stub.GetTicket(r, metadata=[("x-api-key", "wrong")]), ref)
            assert code == grpc.StatusCode.UNAUTHENTICATED
            code, _ = _code(lambda r: stub.GetTicket(r, metadata=[("authorization", "Bearer k-1")]), ref)
            assert code == grpc.StatusCode.NOT_FOUND  # authenticated, and the ticket is unknown
    finally:
        server.stop(grace=None)


def test_instance_message_round_trips_to_the_spec_json():
    inst = {"format": "mgmatch-instance/v1", "teams": 2, "team_size": 1, "engagement_model": "m",
            "rules": [{"kind": "skill_balance", "max_diff": 150}, {"kind": "party_together"}],
            "players": [{"id": "a", "features": [1.0, 2.0], "skill": 1500, "roles": ["tank"], "pings": {"eu": 20},
                         "party": "p1", "sigma": 80.0},
                        {"id": "b", "features": [0.5, -1.0]}]}
    msg = _instance_message(inst)
    msg.players[0].extra.update({"sigma": 80.0})
    back = instance_json(msg)
    assert back["teams"] == 2 and back["team_size"] == 1 and back["engagement_model"] == "m"
    assert back["rules"] == [{"kind": "skill_balance", "max_diff": 150.0}, {"kind": "party_together"}]
    assert back["players"][0] == {"id": "a", "features": [1.0, 2.0], "skill": 1500.0, "roles": ["tank"],
                                  "pings": {"eu": 20.0}, "party": "p1", "sigma": 80.0}
    assert back["players"][1] == {"id": "b", "features": [0.5, -1.0]}  # unset = absent


@pytest.mark.service
def test_generated_modules_match_the_proto(tmp_path):
    # protoc runs in a subprocess: grpc_tools' compiler extension and OR-Tools abort when loaded in one process
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools (dev extra) is not installed")
    code = ("import sys, grpc_tools, pathlib; from grpc_tools import protoc; "
            "sys.exit(protoc.main(['protoc', '-I' + sys.argv[1], '-I' + str(pathlib.Path(grpc_tools.__file__).parent / '_proto'), "
            "'--python_out=' + sys.argv[2], '--grpc_python_out=' + sys.argv[2], sys.argv[1] + '/matchmaker.proto']))")
    run = subprocess.run([sys.executable, "-c", code, str(RPC), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    fresh = (tmp_path / "matchmaker_pb2_grpc.py").read_text().replace(
        "import matchmaker_pb2 as", "from . import matchmaker_pb2 as")
    assert (tmp_path / "matchmaker_pb2.py").read_text() == (RPC / "matchmaker_pb2.py").read_text(), "run `make grpc`"
    assert fresh == (RPC / "matchmaker_pb2_grpc.py").read_text(), "run `make grpc`"


@pytest.mark.redis
def test_store_down_is_unavailable_over_grpc_with_retry_after(tmp_path, spare_redis):
    rt = Runtime.build(Settings(config=service_config(tmp_path), store="redis", redis_url=spare_redis.url,
                                key_prefix="gdown", embedded_workers=False))
    server, port = start_grpc(rt, "127.0.0.1", 0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.MatchmakerStub(ch)
            t = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[_player("d0", 0)]), timeout=30)
            spare_redis.stop()
            for fn, req in ((stub.GetTicket, pb.TicketRef(id=t.id)), (stub.CancelTicket, pb.TicketRef(id=t.id)),
                            (stub.CreateTicket, pb.CreateTicketRequest(pool="small", players=[_player("d1", 1)]))):
                with pytest.raises(grpc.RpcError) as info:
                    fn(req, timeout=30)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value.details()
                assert info.value.details().startswith("store")
                assert dict(info.value.trailing_metadata())["retry-after"] == "1"
            spare_redis.start()
            assert stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[_player("d2", 2)]),
                                     timeout=30).status == "queued"
    finally:
        server.stop(grace=None)
        rt.stop()


def _nested_all(depth: int):
    when = ["p01", 0]
    for _ in range(depth - 1):
        when = {"all": [when]}
    return when


def test_deep_rules_over_grpc_are_invalid_argument_never_internal(tmp_path):
    from google.protobuf import json_format

    rt = Runtime.build(Settings(config=service_config(tmp_path), embedded_workers=False))
    server, port = start_grpc(rt, "127.0.0.1", 0)
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.MatchmakerStub(ch)
            for depth, field in ((17, "rules[0].when"), (20, "body")):
                rule = {"kind": "if", "when": _nested_all(depth),
                        "then": {"terms": [["p02", 0, 1]], "sense": "<=", "rhs": 1}}
                players = [{k: v for k, v in p.items() if k in pb.Player.DESCRIPTOR.fields_by_name}
                           for p in inst["players"]]
                msg = json_format.ParseDict({**{k: v for k, v in inst.items() if k != "players"}, "players": players,
                                             "rules": [rule], "engagement_model": "small"}, pb.Instance())
                code, details = _code(stub.Solve, pb.SolveRequest(instance=msg))
                assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(field), (depth, details[:200])
    finally:
        server.stop(grace=None)
        rt.stop()


def test_every_rpc_is_observed():
    """Every method of the service is counted and timed, and refuses an undecodable request
    (``_observed``): a method added without it would answer such a request UNKNOWN."""
    from mgmatch.app.grpc_server import MatchmakerService

    names = [m.name for m in pb.DESCRIPTOR.services_by_name["Matchmaker"].methods]
    assert "PostMatchResult" in names and "CreateBackfill" in names
    unobserved = [n for n in names if not hasattr(getattr(MatchmakerService, n), "__wrapped__")]
    assert unobserved == []
