"""gRPC WatchTicket and WatchEvents against a real ``mgmatch serve --grpc-port`` process: the same events,
ids and payloads as the SSE routes, resume after an id, ownership and bad input."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sse_helpers import Listener  # noqa: E402
from svc_helpers import features, served_grpc  # noqa: E402

from mgmatch.app.rpc import matchmaker_pb2 as pb  # noqa: E402

pytestmark = pytest.mark.service  # a real `mgmatch serve` process

KEYS = [("x-api-key", "k1")]


@pytest.fixture
def served(tmp_path):
    """`mgmatch serve` with HTTP and gRPC on free ports (in-memory store, embedded workers, API keys k1, k2)."""
    with served_grpc(tmp_path, MGMATCH_API_KEYS="k1,k2", MGMATCH_STORE="memory") as both:
        yield both


def _collect(stream, out: list, until) -> threading.Thread:
    def run():
        try:
            for ev in stream:
                out.append(ev)
                if until(out):
                    stream.cancel()
                    return
        except grpc.RpcError:
            pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def test_watch_ticket_and_watch_events_stream_what_sse_sends(served):
    stub, url = served
    pool_events: list = []
    pool_stream = stub.WatchEvents(pb.WatchEventsRequest(pool="small"), metadata=KEYS)
    # the headers say the stream reads from its position: the tickets created next are all in it
    assert dict(pool_stream.initial_metadata()).get("mgmatch-watching") == "1"
    th = _collect(pool_stream, pool_events, lambda ev: sum(e.type == "matched" for e in ev) == 3)
    first = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[pb.Player(id="g0", features=features(0))]),
                              metadata=KEYS)
    # a ticket stream from its creation: queued, then (once 6 players are queued) matched, then it ends
    ticket_events: list = []
    tt = _collect(stub.WatchTicket(pb.WatchTicketRequest(id=first.id), metadata=KEYS, timeout=60), ticket_events,
                  lambda ev: False)
    others = [stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[pb.Player(id=f"g{i}",
                                                                                          features=features(i))]),
                                metadata=[("x-api-key", "k1" if i < 3 else "k2")]).id for i in range(1, 6)]
    tt.join(60)
    assert [e.type for e in ticket_events] == ["queued", "matched"]
    assert ticket_events[0].ticket.status == "queued" and not ticket_events[0].ticket.HasField("match")
    assert ticket_events[1].ticket.status == "matched" and ticket_events[1].ticket.match.match_id
    th.join(60)
    # the pool stream: only k1's tickets (first and g1, g2), queued then matched
    assert {e.ticket.id for e in pool_events} == {first.id, *others[:2]}
    assert sorted(e.type for e in pool_events) == ["matched"] * 3 + ["queued"] * 3
    # the same ids and payloads as SSE sends
    with Listener(f"{url}/v1/tickets/{first.id}/events", {"x-api-key": "k1"}) as sse:
        assert sse.done.wait(20)
    assert [(e["id"], e["event"]) for e in sse.events] == [(e.id, e.type) for e in ticket_events]
    # resume after the first event
    rest = list(stub.WatchTicket(pb.WatchTicketRequest(id=first.id, last_event_id=ticket_events[0].id),
                                 metadata=KEYS, timeout=20))
    assert [e.id for e in rest] == [ticket_events[1].id]


def test_watch_refuses_bad_input_and_other_clients_tickets(served):
    stub, _ = served
    t = stub.CreateTicket(pb.CreateTicketRequest(pool="3v3", players=[pb.Player(id="z", features=[0.0] * 196)]),
                          metadata=KEYS)
    cases = [
        (stub.WatchTicket, pb.WatchTicketRequest(id=t.id), [("x-api-key", "k2")], grpc.StatusCode.NOT_FOUND),
        (stub.WatchTicket, pb.WatchTicketRequest(id=t.id, last_event_id="x-1"), KEYS,
         grpc.StatusCode.INVALID_ARGUMENT),
        (stub.WatchTicket, pb.WatchTicketRequest(id="nope"), KEYS, grpc.StatusCode.NOT_FOUND),
        (stub.WatchTicket, pb.WatchTicketRequest(id=t.id), [], grpc.StatusCode.UNAUTHENTICATED),
        (stub.WatchEvents, pb.WatchEventsRequest(pool="nope"), KEYS, grpc.StatusCode.INVALID_ARGUMENT),
        (stub.WatchEvents, pb.WatchEventsRequest(pool="3v3", last_event_id="1-2-3"), KEYS,
         grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for rpc, req, md, code in cases:
        with pytest.raises(grpc.RpcError) as err:
            list(rpc(req, metadata=md, timeout=10))
        assert err.value.code() == code, (req, err.value.details())
