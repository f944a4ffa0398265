"""Ready checks (issue 30): a proposed match is confirmed when every player accepts; a decline ends the
decliner's ticket and puts the others back at their place in the queue; a timeout expires the tickets
of players who did not accept. On memory, Redis and a Redis Cluster, through the store's protocol; the
matchmaker and the HTTP routes end to end."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config  # noqa: E402

from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import MatchRecord, MatchResult, PlayerBusy, Ticket, new_ticket_id  # noqa: E402


def _t(pool: str, *pids: str, at: float | None = None, owner: str | None = None) -> Ticket:
    now = time.time() if at is None else at
    return Ticket(new_ticket_id(pool), pool, [{"id": p, "features": [1.0]} for p in pids], now, now + 120, owner=owner)


def _proposed(store, timeout_s: float = 30.0, owner: str | None = None):
    """A party (a, b) and a solo (c) proposed as one match; their tickets and the match id."""
    base = time.time() - 50
    party, _ = store.create(_t("p", "a", "b", at=base, owner=owner))
    solo, _ = store.create(_t("p", "c", at=base + 1, owner=owner))
    later, _ = store.create(_t("p", "z", at=base + 10))  # queued after both: they must return ahead of it
    assert store.claim("p", [party.id, solo.id], "p.cl", time.time() + 30)
    mid = "p.cl-0-tok"
    result = MatchResult(mid, [["a", "b"], ["c"]], {party.id: 0, solo.id: 1}, method="exact", objective=1.0)
    record = MatchRecord(mid, "p", [[{"id": "a", "features": [1.0]}, {"id": "b", "features": [1.0]}],
                                    [{"id": "c", "features": [1.0]}]], method="exact")
    assert store.propose_match("p", "p.cl", [party.id, solo.id], result, record, time.time() + timeout_s)
    return party, solo, later, mid


def test_every_accept_confirms_the_match_and_keeps_its_record(store):
    party, solo, _, mid = _proposed(store)
    t = store.get(party.id)
    assert t.status == "proposed" and t.result["match_id"] == mid and t.result["teams"] == [["a", "b"], ["c"]]
    assert t.result["accept_deadline"] > time.time() + 20
    # the claim's own steps no longer reach the tickets
    assert store.release("p", "p.cl", [party.id, solo.id]) == 0 and store.reap("p") == (0, 0)
    # a solver taking the job over after the proposing one was killed finds nothing to take (or to lose)
    assert store.takeover("p", "p.cl", "p.cl.new", [party.id, solo.id], time.time() + 30) == 0
    with pytest.raises(PlayerBusy):  # still live: its players hold it
        store.create(_t("q", "c"))
    assert store.answer_check("p", mid, "a", True) == "pending"
    assert store.answer_check("p", mid, "a", True) == "pending"  # a retry counts once
    assert store.answer_check("p", mid, "c", True) == "pending"
    assert store.get_match("p", mid) is None
    assert store.answer_check("p", mid, "b", True) == "matched"
    for tid in (party.id, solo.id):
        t = store.get(tid)
        assert t.status == "matched" and t.result["match_id"] == mid and t.result["matched_at"] > 0
    assert store.get_match("p", mid).match_id == mid
    assert store.answer_check("p", mid, "b", False) == "matched"  # final: a late decline changes nothing
    assert store.create(_t("q", "c"))[1]  # players free once matched


def test_a_decline_ends_the_decliners_ticket_and_requeues_the_others_at_their_place(store):
    party, solo, later, mid = _proposed(store)
    assert store.answer_check("p", mid, "a", True) == "pending"
    assert store.answer_check("p", mid, "c", False) == "declined"
    s = store.get(solo.id)
    assert s.status == "declined"
    p = store.get(party.id)
    assert p.status == "queued" and p.match_id is None and p.created_at == party.created_at
    assert store.queued_ids("p")[:2] == [party.id, later.id]  # at the head, ahead of a ticket queued later
    assert store.answer_check("p", mid, "b", True) == "declined"
    assert store.create(_t("q", "c"))[1]  # the decliner is free
    with pytest.raises(PlayerBusy):  # the requeued party still holds its players
        store.create(_t("q", "a"))
    assert store.get_match("p", mid) is None


def test_a_timeout_expires_who_did_not_accept_and_requeues_who_did(store):
    party, solo, later, mid = _proposed(store, timeout_s=0.4)
    assert store.answer_check("p", mid, "a", True) == "pending"
    assert store.answer_check("p", mid, "b", True) == "pending"
    time.sleep(0.6)
    assert store.reap_checks("p") == 1 and store.reap_checks("p") == 0
    s, p = store.get(solo.id), store.get(party.id)
    assert s.status == "expired" and "ready check" in (s.reason or "")
    assert p.status == "queued" and store.queued_ids("p")[0] == party.id
    assert store.answer_check("p", mid, "c", True) == "expired"


def test_a_partly_accepted_party_expires_on_timeout_and_an_answer_after_the_deadline_ends_it(store):
    party, solo, _, mid = _proposed(store, timeout_s=0.4)
    assert store.answer_check("p", mid, "a", True) == "pending"
    assert store.answer_check("p", mid, "c", True) == "pending"
    time.sleep(0.6)
    assert store.answer_check("p", mid, "b", True) == "expired"  # too late: the check ends now
    assert store.get(party.id).status == "expired" and store.get(solo.id).status == "queued"


def test_unknown_matches_players_and_other_clients_are_unknown(store):
    party, solo, _, mid = _proposed(store, owner="k1")
    assert store.answer_check("p", "p.nope", "a", True) == "unknown"
    assert store.answer_check("p", mid, "stranger", True) == "unknown"
    assert store.answer_check("p", mid, "a", True, owner="k2") == "unknown"
    assert store.answer_check("p", mid, "a", True, owner="k1") == "pending"


def test_a_propose_of_tickets_the_claim_no_longer_holds_returns_them_all(store):
    a, _ = store.create(_t("p", "a"))
    b, _ = store.create(_t("p", "b"))
    assert store.claim("p", [a.id, b.id], "p.cl", time.time() + 30)
    store.cancel(b.id)
    result = MatchResult("p.cl-0-x", [["a"], ["b"]], {a.id: 0, b.id: 1})
    assert not store.propose_match("p", "p.cl", [a.id, b.id], result, None, time.time() + 30)
    assert store.get(a.id).status == "queued" and store.get(b.id).status == "cancelled"


def test_a_ticket_cancelled_during_the_check_fails_it_when_the_rest_accept(store):
    party, solo, _, mid = _proposed(store)
    store.cancel(solo.id)
    for pid in ("a", "b"):
        store.answer_check("p", mid, pid, True)
    assert store.answer_check("p", mid, "c", True) != "matched"
    assert store.get(party.id).status == "queued" and store.get_match("p", mid) is None


def test_a_check_confirmed_for_an_allocator_is_matched_with_its_assignment_once(store):
    party, solo, later, mid = _proposed(store, timeout_s=1.0)
    for pid in ("a", "b"):
        assert store.answer_check("p", mid, pid, True, allocate=True) == "pending"
    assert store.answer_check("p", mid, "c", True, allocate=True) == "allocating"
    assert store.answer_check("p", mid, "c", True, allocate=True) == "allocating"  # a replay
    assert store.answer_check("p", mid, "c", False, allocate=True) == "allocating"  # too late to decline
    time.sleep(1.2)
    assert store.reap_checks("p") == 0 and store.get(party.id).status == "proposed"  # the deadline no longer applies
    taken = store.take_allocations("p", 0.5)
    assert [(x["match_id"], x["teams"]) for x in taken] == [(mid, [["a", "b"], ["c"]])]
    assert store.take_allocations("p", 0.5) == []  # held by the first taker
    time.sleep(0.7)
    assert [x["match_id"] for x in store.take_allocations("p", 30)] == [mid]  # its lease ran out: taken over
    assert store.finish_allocation("p", mid, {"connection": "10.0.0.9:7000", "gs": "x"}) == "matched"
    assert store.finish_allocation("p", mid, None, "late") == "matched"  # the first outcome stands
    for tid in (party.id, solo.id):
        t = store.get(tid)
        assert t.status == "matched" and t.result["assignment"] == {"connection": "10.0.0.9:7000", "gs": "x"}
    assert store.get_match("p", mid).match_id == mid
    assert store.take_allocations("p", 30) == []


def test_a_confirmed_check_without_a_game_server_requeues_everyone_at_their_place(store):
    party, solo, later, mid = _proposed(store)
    for pid in ("a", "b", "c"):
        store.answer_check("p", mid, pid, True, allocate=True)
    assert [x["match_id"] for x in store.take_allocations("p", 30)] == [mid]
    assert store.finish_allocation("p", mid, None, "no game server: HTTP 503") == "unallocated"
    for tid in (party.id, solo.id):
        t = store.get(tid)
        assert t.status == "queued" and t.unmatched_reason == "no game server: HTTP 503" and t.result is None
    assert store.queued_ids("p", 10)[:2] == [party.id, solo.id]  # ahead of the later ticket
    assert store.get_match("p", mid) is None
    assert store.answer_check("p", mid, "a", True, allocate=True) == "unallocated"


def test_a_ticket_cancelled_while_the_allocator_is_asked_sends_the_others_back(store):
    party2, solo2, _, mid2 = _proposed(store)
    for pid in ("a", "b", "c"):
        store.answer_check("p", mid2, pid, True, allocate=True)
    store.cancel(solo2.id)
    assert store.finish_allocation("p", mid2, {"connection": "h:1"}) != "matched"
    assert store.get(party2.id).status == "queued"


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("store_kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_the_matchmaker_proposes_and_the_routes_confirm_or_requeue(tmp_path, live, store_kind, request):
    extra = {}
    if store_kind == "redis":
        url, prefix = request.getfixturevalue("redis_url")
        extra = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    rt = Runtime.build(Settings(config=service_config(tmp_path, accept={"timeout_s": 30}), **extra))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    with client(srv.url) as c:
        ids = [c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"e{i}", "features": features(i)}]})
               .json()["id"] for i in range(6)]
        views = poll(lambda: [v for t in ids if (v := c.get(f"/v1/tickets/{t}").json()).get("match")]
                     if all(c.get(f"/v1/tickets/{t}").json().get("match") for t in ids) else None)
        m = views[0]["match"]
        assert views[0]["status"] == "proposed" and m["accept_deadline"] > time.time()
        mid = m["match_id"]
        url = f"/v1/matches/{mid}"
        for body, code, field in (({"player_id": "nobody"}, 404, "match_id"), ({}, 422, "player_id"),
                                  ({"player_id": 5}, 422, "player_id")):
            r = c.post(url + "/accept", json=body)
            assert r.status_code == code and r.json()["error"]["field"] == field, r.text
        assert c.post("/v1/matches/small.nope/accept", json={"player_id": "e0"}).status_code == 404
        players = [p for team in m["teams"] for p in team]
        for p in players[:-1]:
            r = c.post(url + "/accept", json={"player_id": p})
            assert r.status_code == 200 and r.json()["status"] == "pending", r.text
        r = c.post(url + "/accept", json={"player_id": players[-1]})
        assert r.json() == {"match_id": mid, "status": "matched"}
        assert all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids)
        assert c.post(url + "/decline", json={"player_id": players[0]}).status_code == 409


def test_grpc_accept_and_decline_and_a_ticket_shows_its_proposal(tmp_path):
    grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
    from mgmatch.app.grpc_server import start_grpc
    from mgmatch.app.rpc import matchmaker_pb2 as pb
    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc

    rt = Runtime.build(Settings(config=service_config(tmp_path, accept={"timeout_s": 30})))
    rt.start_embedded(tick_s=0.02)
    server, port = start_grpc(rt, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.MatchmakerStub(channel)
        ids = [stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[
            pb.Player(id=f"g{i}", features=features(i))]), timeout=10).id for i in range(6)]
        t = poll(lambda: (v := stub.GetTicket(pb.TicketRef(id=ids[0]), timeout=10)).match.match_id and v)
        assert t.status == "proposed" and t.match.accept_deadline > time.time()
        mid = t.match.match_id
        with pytest.raises(grpc.RpcError) as err:
            stub.AcceptMatch(pb.MatchAnswerRequest(match_id=mid, player_id="nobody"), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and err.value.details().startswith("match_id")
        with pytest.raises(grpc.RpcError) as err:
            stub.AcceptMatch(pb.MatchAnswerRequest(match_id=mid, player_id=""), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details().startswith("player_id")
        assert stub.AcceptMatch(pb.MatchAnswerRequest(match_id=mid, player_id="g0"), timeout=10).status == "pending"
        other = next(p for team in t.match.teams for p in team.players if p != "g0")
        assert stub.DeclineMatch(pb.MatchAnswerRequest(match_id=mid, player_id=other), timeout=10).status == "declined"
        with pytest.raises(grpc.RpcError) as err:
            stub.AcceptMatch(pb.MatchAnswerRequest(match_id=mid, player_id="g0"), timeout=10)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        channel.close()
        server.stop(0)
        rt.stop()
