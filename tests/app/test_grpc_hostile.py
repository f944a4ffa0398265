"""Hostile gRPC input: what protobuf can carry and JSON cannot (NaN and infinities in a Struct, a field left
unset, a key twice) is INVALID_ARGUMENT naming the field, as HTTP's 422, never UNKNOWN; the server serves on."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import sys
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, features, poll, service_config  # noqa: E402
from test_grpc import _code, _instance_message  # noqa: E402

from mgmatch.app.grpc_server import start_grpc  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2 as pb  # noqa: E402
from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402

NAN, INF = float("nan"), float("inf")
_TAGS = itertools.count()  # unique player ids across the module's calls (queued players stay queued)


@contextlib.contextmanager
def _serving(tmp_path: Path):
    """A live gRPC server on a runtime with embedded workers (matches form), and a client."""
    rt = Runtime.build(Settings(config=service_config(tmp_path)))
    rt.start_embedded(tick_s=0.02)
    server, port = start_grpc(rt, "127.0.0.1", 0)
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.MatchmakerStub(ch)
    finally:
        ch.close()
        server.stop(grace=None)
        rt.stop()


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    with _serving(tmp_path_factory.mktemp("hostile")) as s:
        yield s


@pytest.fixture
def quiet_server(caplog):
    """Fails the test when the server logged an error (grpc logs a handler's exception with its traceback)."""
    caplog.set_level(logging.WARNING)
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


def _spec_instance() -> pb.Instance:
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    return _instance_message({**inst, "engagement_model": "small"})


def _solve(rule: dict | None = None, extra: dict | None = None) -> pb.SolveRequest:
    msg = _spec_instance()
    if rule is not None:  # the only rule: rules[0]
        del msg.rules[:]
        msg.rules.add().update(rule)
    if extra is not None:
        msg.players[0].extra.update(extra)
    return pb.SolveRequest(instance=msg, time_limit_ms=5000)


def _ticket(tag: str, attributes: dict | None = None, extra: dict | None = None) -> pb.CreateTicketRequest:
    req = pb.CreateTicketRequest(pool="small", players=[pb.Player(id=f"{tag}-a", features=features(0)),
                                                        pb.Player(id=f"{tag}-b", features=features(1))])
    if attributes is not None:
        req.attributes.update(attributes)
    if extra is not None:
        req.players[1].extra.update(extra)
    return req


def _backfill(tag: str, extra: dict | None = None) -> pb.CreateBackfillRequest:
    ids = [f"{tag}{i}" for i in range(4)]
    req = pb.CreateBackfillRequest(pool="small", match_id=f"game-{tag}",
                                   players=[pb.Player(id=pid, features=features(40 + i)) for i, pid in enumerate(ids)],
                                   teams=[pb.Team(players=ids[:3]), pb.Team(players=ids[3:])], open=[0, 2])
    if extra is not None:
        req.players[1].extra.update(extra)
    return req


def _still_serving(stub, rpc: str) -> None:
    """A good call of the same method answers."""
    tag = f"ok{next(_TAGS)}"
    if rpc == "Solve":
        assert stub.Solve(_solve(), timeout=30).status in ("optimal", "feasible")
    elif rpc == "CreateTicket":
        assert stub.CreateTicket(_ticket(tag), timeout=30).status == "queued"
    else:
        assert stub.CreateBackfill(_backfill(tag), timeout=30).status == "open"


@pytest.mark.parametrize("rpc,request_,field", [
    ("Solve", lambda: _solve(rule={"kind": "linear", "terms": [["p01", 0, 1]], "sense": "<=", "rhs": NAN}),
     "rules[0].rhs"),
    ("Solve", lambda: _solve(rule={"kind": "skill_balance", "max_diff": INF}), "rules[0].max_diff"),
    ("Solve", lambda: _solve(rule={"kind": "linear", "terms": [["p01", 0, -INF]], "sense": "<=", "rhs": 1}),
     "rules[0].terms[0][2]"),
    ("Solve", lambda: _solve(extra={"sigma": NAN}), "players[0].sigma"),
    ("CreateTicket", lambda: _ticket("nan-attr", attributes={"a": NAN}), "attributes.a"),
    ("CreateTicket", lambda: _ticket("inf-attr", attributes={"a": -INF}), "attributes.a"),
    ("CreateTicket", lambda: _ticket("nan-sigma", extra={"sigma": NAN}), "players[1].sigma"),
    ("CreateTicket", lambda: _ticket("inf-ping", extra={"peer_pings": {"q": INF}}), "players[1].peer_pings.q"),
    ("CreateBackfill", lambda: _backfill("inf-sigma", extra={"sigma": INF}), "players[1].sigma"),
], ids=["solve-rhs-nan", "solve-max_diff-inf", "solve-term-neg-inf", "solve-sigma-nan", "ticket-attr-nan",
        "ticket-attr-neg-inf", "ticket-sigma-nan", "ticket-peer-ping-inf", "backfill-sigma-inf"])
def test_non_finite_struct_numbers_are_invalid_argument_naming_the_field(stub, quiet_server, rpc, request_, field):
    code, details = _code(getattr(stub, rpc), request_())
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert details.startswith(f"{field}: must be a finite number"), details
    _still_serving(stub, rpc)


@pytest.mark.parametrize("key,value", [("id", "p1"), ("features", [1.0]), ("skill", 1.0), ("roles", ["tank"]),
                                       ("party", "x"), ("pings", {"eu": 1.0}), ("waited_s", 3.0),
                                       ("extra", {"sigma": 1.0})])
@pytest.mark.parametrize("rpc", ["Solve", "CreateTicket", "CreateBackfill"])
def test_player_extra_may_not_override_a_typed_field(stub, quiet_server, rpc, key, value):
    tag = f"x{next(_TAGS)}"
    req = {"Solve": lambda: _solve(extra={key: value}), "CreateTicket": lambda: _ticket(tag, extra={key: value}),
           "CreateBackfill": lambda: _backfill(tag, extra={key: value})}[rpc]()
    field = f"players[{0 if rpc == 'Solve' else 1}].extra.{key}"
    code, details = _code(getattr(stub, rpc), req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(f"{field}: "), (code, details)
    assert "field of the player" in details, details
    _still_serving(stub, rpc)


def test_player_extra_still_carries_the_solvers_extra_fields(stub, quiet_server):
    t = stub.CreateTicket(_ticket("eomm", extra={"sigma": 80.0, "recent": ["W", "L"]}), timeout=30)
    assert t.status == "queued"


def test_match_result_without_engagement_is_invalid_argument(tmp_path, quiet_server):
    with _serving(tmp_path) as stub:  # a server of its own: no open backfill takes these players
        ids = [stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[
            pb.Player(id=f"res{i}", features=features(i))])).id for i in range(6)]
        done = poll(lambda: all((t := stub.GetTicket(pb.TicketRef(id=i))).status == "matched" for i in ids) and t,
                    timeout=30)
        mid = done.match.match_id
        code, details = _code(stub.PostMatchResult, pb.MatchResultRequest(match_id=mid, players={"res0": 1.0}))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details == "engagement: field required", (code, details)
        # nothing was stored: the real result is accepted (ALREADY_EXISTS when an unset engagement counted as 0)
        ack = stub.PostMatchResult(pb.MatchResultRequest(match_id=mid, engagement=0.0))
        assert ack.status == "accepted" and ack.engagement == 0.0
        assert stub.PostMatchResult(pb.MatchResultRequest(match_id=mid, engagement=0.0)).status == "duplicate"
