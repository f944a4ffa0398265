"""Wait estimates and unmatched reasons: the store record (both stores), the estimate, the diagnosis
rule by rule, the matchmaker writing reasons and throughput, and both front ends showing them."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, service_config

from mgmatch.app.config import PoolConfig
from mgmatch.app.store import MatchResult, Ticket, new_ticket_id
from mgmatch.app.store.base import THROUGHPUT_WINDOW_S, WaitInputs, rate_of
from mgmatch.app.waits import diagnose, estimate_wait


def _queue(store, n, pool="p", party=1, start=0):
    now = time.time()
    ids = []
    for i in range(start, start + n):
        players = [{"id": f"u{i}-{k}", "features": [float(i)]} for k in range(party)]
        stored, _ = store.create(Ticket(new_ticket_id(pool), pool, players, now + i * 1e-3, now + 60))
        ids.append(stored.id)
    return ids


# --------------------------------------------------------------------------- the store's record


def test_rate_needs_two_seconds_with_matches_in_the_window_and_counts_those_after_the_first():
    assert rate_of([], 100.0) is None
    assert rate_of([(99, 12)], 100.0) is None  # one second of matches (however many): still unknown
    # players of the seconds after the oldest one, over the time since the middle of that oldest second
    assert rate_of([(90, 6), (95, 6), (100, 6)], 100.2) == pytest.approx(12 / 9.7)
    # a second older than the window is not counted
    assert rate_of([(100 - int(THROUGHPUT_WINDOW_S) - 2, 6), (99, 6)], 100.0) is None


def test_wait_inputs_read_place_queue_players_and_throughput(store):
    solo = _queue(store, 3)
    party = _queue(store, 2, party=2, start=10)
    first = store.wait_inputs("p", solo[0])
    assert first.rank == 0 and first.queued_tickets == 5 and first.live_players == 7 and first.live_tickets == 5
    assert first.rate is None  # no matches yet
    assert store.wait_inputs("p", party[1]).rank == 4
    # both matches in one wall-clock second: start just after a second turns (on a slow machine the two
    # calls to a cluster once straddled a boundary, and two seconds of matches give a rate)
    time.sleep((1.0 - time.time() % 1.0) % 1.0 + 0.02)
    store.record_matched("p", 6)
    store.record_matched("p", 6)
    assert store.wait_inputs("p", solo[0]).rate is None  # matches in one second only: still unknown
    time.sleep(1.05)
    store.record_matched("p", 6)
    rate = store.wait_inputs("p", solo[0]).rate
    # 6 players over the 0.55–1.6 s since the middle of the first second
    assert rate is not None and 6 / 1.6 < rate < 6 / 0.55
    # a claimed (proposed) ticket is not in the queue: no rank; it still counts as live
    assert store.claim("p", [solo[0]], "m1", time.time() + 30)
    out = store.wait_inputs("p", solo[0])
    assert out.rank is None and out.queued_tickets == 4 and out.live_tickets == 5 and out.live_players == 7
    # pools are separate
    assert store.wait_inputs("other", solo[1]).rate is None


def test_unmatched_reason_is_kept_only_on_live_tickets(store):
    ids = _queue(store, 3)
    assert store.set_unmatched_reason("p", ids[0], "only 3 players queued")
    assert store.get(ids[0]).unmatched_reason == "only 3 players queued"
    assert store.set_unmatched_reason("p", ids[0], None)
    assert store.get(ids[0]).unmatched_reason is None
    # a matched ticket is not written, an unknown one is not created
    assert store.claim("p", ids[1:2], "m1", time.time() + 30)
    assert store.commit("p", "m1", ids[1:2], [], MatchResult("m1-0", [["u1"]], {ids[1]: 0}))
    assert not store.set_unmatched_reason("p", ids[1], "late")
    assert store.get(ids[1]).unmatched_reason is None
    ghost = new_ticket_id("p")
    assert not store.set_unmatched_reason("p", ghost, "nobody")
    assert store.get(ghost) is None


# --------------------------------------------------------------------------- the estimate


def _inputs(rank, queued, rate, players=None, tickets=None):
    return WaitInputs(rank, queued, players if players is not None else queued, tickets or queued, rate)


def test_estimate_is_unknown_without_throughput_or_a_place_in_the_queue():
    assert estimate_wait(_inputs(0, 3, None), 1, 6) is None
    assert estimate_wait(_inputs(0, 3, 0.0), 1, 6) is None
    assert estimate_wait(_inputs(None, 3, 1.0), 1, 6) is None


def test_estimate_waits_for_the_missing_players_while_the_queue_is_short():
    # 2 players queued, the ticket is the second: 4 more must arrive at 2 players/s
    assert estimate_wait(_inputs(1, 2, 2.0), 1, 6) == 2.0
    # the one who completes a match waits for nothing
    assert estimate_wait(_inputs(5, 6, 2.0), 1, 6) == 0.0
    # the first of a fresh queue waits for 5 more
    assert estimate_wait(_inputs(0, 1, 1.0), 1, 6) == 5.0


def test_estimate_drains_the_players_ahead_when_the_queue_is_backlogged():
    # 30 tickets ahead of 60: its match is the 6th, five matches (30 players) go first
    assert estimate_wait(_inputs(30, 60, 3.0), 1, 6) == 10.0
    # parties count by their players: 10 tickets of 3 players ahead = 30 players
    assert estimate_wait(_inputs(10, 20, 3.0, players=60, tickets=20), 3, 6) == 10.0


def test_estimate_never_exceeds_the_remaining_ttl():
    inp = WaitInputs(30, 60, 60, 60, 3.0, now=1000.0)
    assert estimate_wait(inp, 1, 6, expires_at=1004.0) == 4.0
    assert estimate_wait(inp, 1, 6, expires_at=1100.0) == 10.0
    assert estimate_wait(inp, 1, 6, expires_at=900.0) == 0.0


# --------------------------------------------------------------------------- reasons, rule by rule


def _pool(rules=(), **kw):
    return PoolConfig(name="p", teams=2, team_size=3, rules=list(rules), max_candidates=kw.pop("max_candidates", 24),
                      **kw)


_clock = [1000.0]


def _t(*players, at=None):
    if at is None:
        _clock[0] += 1
        at = _clock[0]
    ps = [{"id": f"x{at}-{k}", "features": [0.0], **p} for k, p in enumerate(players)]
    return Ticket(new_ticket_id("p"), "p", ps, at, at + 300)


def test_reason_too_few_players():
    me = _t({})
    assert diagnose(_pool(), me, [_t({}) for _ in range(3)]) == "only 4 players queued in pool p; a match needs 6"


def test_reason_parties_that_cannot_fill_teams():
    me = _t({}, {})  # a party of 2 needs a solo on its team; the queue holds only parties of 2 and 3
    others = [_t({}, {}), _t({}, {}, {}), _t({}, {})]
    why = diagnose(_pool(), me, others)
    assert why.startswith("the queued parties cannot fill teams of 3/3 around this party of 2"), why
    assert diagnose(_pool(), me, [*others, _t({})]) != why  # one solo more and it fits


def test_reason_max_ping_without_a_region_or_without_enough_players_there():
    rule = [{"kind": "max_ping", "max_ms": 100}]
    far = _t({"pings": {"eu": 180, "na": 240}})
    near = [_t({"pings": {"eu": 40}}) for _ in range(6)]
    assert diagnose(_pool(rule), far, near) == \
        "no region within max_ping 100 ms for this ticket's players (nearest: eu at 180 ms)"
    me = _t({"pings": {"na": 30, "eu": 150}})
    mixed = [_t({"pings": {"na": 50}}) for _ in range(3)] + near
    assert diagnose(_pool(rule), me, mixed) == \
        "no region within max_ping 100 ms has enough players for this ticket: best na with 4 of 6"


def test_reason_roles_shortage_and_crowded_slots():
    rule = [{"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 1}}]
    me = _t({"roles": ["dps"]})
    no_healers = [_t({"roles": ["tank"]}), _t({"roles": ["tank"]}), _t({"roles": ["dps"]}),
                  _t({"roles": ["healer"]}), _t({"roles": ["dps", "tank"]})]
    assert diagnose(_pool(rule), me, no_healers) == \
        "not enough healer players: a match needs 2 players who play healer, 1 queued"
    # enough of every role, but two healer-only players waited longer than this healer-only ticket
    old = [_t({"roles": ["healer"]}, at=1.0), _t({"roles": ["healer"]}, at=2.0)]
    healer = _t({"roles": ["healer"]})
    rest = [_t({"roles": ["tank"]}), _t({"roles": ["tank"]}), _t({"roles": ["dps"]}), _t({"roles": ["dps"]})]
    assert diagnose(_pool(rule), healer, old + rest) == \
        "no team has a free healer slot: 2 players who play only healer waited longer for the 2 healer slots of a match"


def test_reason_role_min_and_role_max():
    mins = [{"kind": "role_min", "role": "healer", "min": 1}]
    me = _t({"roles": ["dps"]})
    others = [_t({"roles": ["dps"]}) for _ in range(4)] + [_t({"roles": ["healer"]})]
    assert diagnose(_pool(mins), me, others) == "role_min healer: a match needs 2 players who play healer, 1 queued"
    maxes = [{"kind": "role_max", "role": "dps", "max": 1}]
    assert diagnose(_pool(maxes), me, others) == \
        "role_max dps: a match needs 4 players who do not play dps, 1 queued"


def test_reason_skill_spread_and_party_span():
    rule = [{"kind": "skill_spread", "max_spread": 100}]
    me = _t({"skill": 2500})
    others = [_t({"skill": 1500 + 10 * i}) for i in range(6)] + [_t({"skill": 2450})]
    assert diagnose(_pool(rule), me, others) == \
        "only 2 queued players within skill_spread 100 of this ticket's skill 2500 (6 needed)"
    wide = _t({"skill": 1000}, {"skill": 1300})
    assert diagnose(_pool(rule), wide, others) == "this party's skills span 300 > skill_spread 100"
    assert not diagnose(_pool(rule), _t({"skill": 1520}), others).startswith("only")


def test_reason_skill_balance_for_a_party_far_above_the_queue():
    rule = [{"kind": "skill_balance", "max_diff": 100}]
    stars = _t({"skill": 2600}, {"skill": 2600})
    others = [_t({"skill": 1500}) for _ in range(6)]
    why = diagnose(_pool(rule), stars, others)
    assert why.startswith("skill_balance 100: the 6 queued players nearest this ticket's skill split into teams"), why
    solo = _t({"skill": 1500})
    assert not diagnose(_pool(rule), solo, others).startswith("skill_balance")


def test_reason_queue_position_then_the_generic_one():
    pool = _pool(max_candidates=6)
    others = [_t({}) for _ in range(8)]
    late = _t({})
    assert diagnose(pool, late, others) == "8 players waited longer; a solve considers the 6 longest-waiting players"
    early = _t({}, at=0.5)
    assert diagnose(pool, early, others).startswith("9 players queued could form a match, but")


def test_reason_roles_are_checked_in_the_regions_the_ticket_can_play_in():
    rules = [{"kind": "max_ping", "max_ms": 100}, {"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 1}}]
    me = _t({"roles": ["dps"], "pings": {"eu": 30}})
    eu = [_t({"roles": [r], "pings": {"eu": 40}}) for r in ("dps", "tank", "tank", "healer", "dps")]
    na_healers = [_t({"roles": ["healer"], "pings": {"na": 40}}) for _ in range(3)]
    # enough healers in the queue, but only one who can play in eu
    assert diagnose(_pool(rules), me, eu + na_healers) == ("in region eu (the best within max_ping): not enough "
                                                           "healer players: a match needs 2 players who play healer, "
                                                           "1 queued")
    eu_healer = _t({"roles": ["healer"], "pings": {"eu": 60, "na": 40}})
    assert not diagnose(_pool(rules), me, [*eu, *na_healers, eu_healer]).startswith("in region")


def test_reason_about_the_players_a_solve_considers():
    rules = [{"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 1}}]
    me = _t({"roles": ["dps"]}, at=1.0)
    others = [_t({"roles": [r]}) for r in ("dps", "tank", "tank", "healer", "healer", "dps", "dps")]
    selected = {me.id, *(o.id for o in others if o.created_at < others[3].created_at)}  # no healer among them
    why = diagnose(_pool(rules), me, others, candidates=selected)
    assert why == ("among the 4 players a solve considers: only 4 players queued in pool p; a match needs 6"), why
    sel = {me.id, *(o.id for o in others[:3]), others[5].id, others[6].id}  # 6 players, no healer
    assert diagnose(_pool(rules), me, others, candidates=sel) == (
        "among the 6 players a solve considers: not enough healer players: a match needs 2 players who play healer, "
        "0 queued")
    plain = [_t({}) for _ in range(8)]
    late = plain[-1]
    assert diagnose(_pool(), late, plain[:-1], candidates={o.id for o in plain[:6]}) == (
        "not among the 24 players a solve considers (the longest waiter and those nearest their skill; 7 players "
        "waited longer than this ticket)")
    assert diagnose(_pool(rules), me, others, candidates={me.id, *(o.id for o in others)}).startswith(
        "8 players queued could form a match")
    assert diagnose(_pool(rules), me, others, candidates={me.id, *(o.id for o in others)}, solved_empty=True) == (
        "the last solve over the players a solve considers formed no match: the rules together admit none among "
        "them, or none was found within the pool's 100 ms budget")


# --------------------------------------------------------------------------- the matchmaker


def _runtime(tmp_path, pool_overrides=None, **settings):
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    return Runtime.build(Settings(config=service_config(tmp_path, **(pool_overrides or {})), **settings))


def test_matchmaker_stores_a_reason_after_the_unmatched_ticks_and_records_throughput(tmp_path):
    from mgmatch.app.matchmaker import Matchmaker

    # one match per solve: the runner's clock is read once per match (a joint solve reads it once)
    rt = _runtime(tmp_path, {"partition": "sequential"}, embedded_workers=False)
    try:
        pool = rt.pools["small"]
        mm = Matchmaker(pool, rt.store, rt.runner, rt.experiments, reason_after_ticks=3)
        now = time.time()
        ids = [rt.store.create(Ticket(new_ticket_id("small"), "small",
                                      [{"id": f"a{i}", "features": features(i)}], now, now + 60))[0].id
               for i in range(4)]
        for _ in range(2):
            mm.tick()
        assert rt.store.get(ids[0]).unmatched_reason is None  # 2 ticks: not yet
        mm.tick()
        assert rt.store.get(ids[0]).unmatched_reason == "only 4 players queued in pool small; a match needs 6"
        # two matches form (the runner's clock puts them 2 s apart): the throughput becomes known, and the
        # matched tickets show no reason
        ticks = iter([now - 4.0, now - 2.0])
        rt.runner.clock = lambda: next(ticks)
        more = [rt.store.create(Ticket(new_ticket_id("small"), "small",
                                       [{"id": f"b{i}", "features": features(i)}], now, now + 60))[0].id
                for i in range(8)]
        assert mm.tick() == 2
        assert all(rt.store.get(t).status == "matched" for t in ids + more)
        from mgmatch.app.service import ticket_out
        assert "unmatched_reason" not in ticket_out(rt.store.get(ids[0]))
        lone = rt.store.create(Ticket(new_ticket_id("small"), "small", [{"id": "c", "features": features(0)}],
                                      time.time(), time.time() + 60))[0].id
        assert rt.store.wait_inputs("small", lone).rate is not None  # two matches recorded by the runner
    finally:
        rt.stop()


def test_reasons_can_be_switched_off(tmp_path):
    from mgmatch.app.matchmaker import Matchmaker

    rt = _runtime(tmp_path, embedded_workers=False)
    try:
        mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments, reason_after_ticks=0)
        tid = rt.store.create(Ticket(new_ticket_id("small"), "small", [{"id": "a", "features": features(0)}],
                                     time.time(), time.time() + 60))[0].id
        for _ in range(5):
            mm.tick()
        assert rt.store.get(tid).unmatched_reason is None
    finally:
        rt.stop()


# --------------------------------------------------------------------------- both front ends


@pytest.mark.parametrize("kind", ["memory", pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("cluster", marks=[pytest.mark.redis, pytest.mark.cluster])])
def test_get_shows_the_estimate_and_the_reason_over_http(tmp_path, live, kind, request):
    extra = {}
    if kind != "memory":  # the API reads the estimate's inputs with the asyncio client (cluster client on a cluster)
        url, prefix = request.getfixturevalue("cluster_url" if kind == "cluster" else "redis_url")
        extra = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    rt = _runtime(tmp_path, embedded_workers=False, **extra)
    srv = live(rt)
    with client(srv.url) as c:
        ids = [c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"h{i}", "features": features(i)}]})
               .json()["id"] for i in range(2)]
        got = c.get(f"/v1/tickets/{ids[1]}").json()
        assert got["status"] == "queued" and got["estimated_wait_s"] is None and "unmatched_reason" not in got
        rt.store.record_matched("small", 6)
        time.sleep(1.05)
        rt.store.record_matched("small", 6)  # 6 players over 0.55–1.6 s
        got = c.get(f"/v1/tickets/{ids[1]}").json()
        # 2 queued, the second: 4 players missing at 3.75–11 players/s
        assert 0.3 <= got["estimated_wait_s"] <= 1.1, got
        # the first ticket waits for the same 4 players (the rate drifts down a little between the reads)
        assert c.get(f"/v1/tickets/{ids[0]}").json()["estimated_wait_s"] == pytest.approx(got["estimated_wait_s"],
                                                                                          abs=0.25)
        assert rt.store.set_unmatched_reason("small", ids[0], "only 2 players queued in pool small; a match needs 6")
        assert c.get(f"/v1/tickets/{ids[0]}").json()["unmatched_reason"].startswith("only 2 players")
        # a cancelled ticket has neither
        gone = c.delete(f"/v1/tickets/{ids[0]}").json()
        assert gone["status"] == "cancelled"
        after = c.get(f"/v1/tickets/{ids[0]}").json()
        assert "estimated_wait_s" not in after and "unmatched_reason" not in after


def test_get_shows_the_estimate_and_the_reason_over_grpc(tmp_path):
    pytest.importorskip("grpc")
    import grpc

    from mgmatch.app.grpc_server import start_grpc
    from mgmatch.app.rpc import matchmaker_pb2 as pb
    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc

    rt = _runtime(tmp_path, embedded_workers=False)
    server, port = start_grpc(rt, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.MatchmakerStub(channel)
        t = stub.CreateTicket(pb.CreateTicketRequest(pool="small", players=[pb.Player(id="g", features=features(0))]))
        got = stub.GetTicket(pb.TicketRef(id=t.id))
        assert not got.HasField("estimated_wait_s") and not got.HasField("unmatched_reason")
        now = time.time()
        rt.store.record_matched("small", 6, now - 1.0)
        rt.store.record_matched("small", 6, now)
        rt.store.set_unmatched_reason("small", t.id, "only 1 players queued in pool small; a match needs 6")
        got = stub.GetTicket(pb.TicketRef(id=t.id))
        assert 0.4 <= got.estimated_wait_s <= 1.3  # 5 missing at 6 players over 0.5–1.5 s
        assert got.unmatched_reason.startswith("only 1 players")
    finally:
        channel.close()
        server.stop(0)
        rt.stop()
