"""Backfills in the matchmaker over both stores: filled within one tick before new matches form, the
existing players pinned, parties whole, the pool's rules kept, and under concurrency (matchmakers of
two replicas ticking at once) no player both in a backfill and a new match."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features  # noqa: E402

from mgmatch.app.matchmaker import Matchmaker  # noqa: E402
from mgmatch.app.service import BackfillIn, prepare_backfill, ticket_out  # noqa: E402
from mgmatch.app.store import Ticket, new_ticket_id  # noqa: E402


def _ticket(rt, ids, k=0, skill=None, pool="small"):
    now = time.time()
    players = [{"id": pid, "features": features(k + i), **({"skill": skill} if skill is not None else {})}
               for i, pid in enumerate(ids)]
    t, created = rt.store.create(Ticket(new_ticket_id(pool), pool, players, now - 10 + k * 1e-3, now + 300))
    assert created
    return t.id


def _backfill(rt, teams, open_, pool="small", skill=None, match_id="game-1", ttl_s=None):
    players = [{"id": pid, "features": features(50 + i), **({"skill": skill[pid]} if skill else {})}
               for i, pid in enumerate(p for team in teams for p in team)]
    body = BackfillIn(pool=pool, match_id=match_id, players=players, teams=teams, open=open_, ttl_s=ttl_s)
    return rt.store.create_backfill(prepare_backfill(rt, body))


def _mm(rt, pool="small"):
    return Matchmaker(rt.pools[pool], rt.store, rt.runner, rt.experiments)


def test_an_open_backfill_is_filled_in_one_tick_before_new_matches(make_rt):
    rt = make_rt()
    b = _backfill(rt, [["e0", "e1", "e2"], ["e3"]], [0, 2])
    solo = [_ticket(rt, [f"s{i}"], i) for i in range(2)]
    mm = _mm(rt)
    assert mm.tick() >= 1  # one tick
    got = rt.store.get_backfill(b.id)
    assert got.status == "filled" and got.assigned == [[], sorted(got.assigned[1])]
    assert sorted(got.assigned[1]) == ["s0", "s1"] and sorted(got.tickets) == sorted(solo)
    for tid in solo:
        out = ticket_out(rt.store.get(tid))
        m = out["match"]
        assert out["status"] == "matched" and m["match_id"] == "game-1" and m["team"] == 1
        assert m["backfill_id"] == b.id and set(m["teams"][0]) == {"e0", "e1", "e2"}
        assert set(m["teams"][1]) == {"e3", "s0", "s1"} and m["method"] == "exact"
    assert rt.store.queue_depth("small") == 0


def test_parties_stay_whole_and_pins_hold(make_rt):
    rt = make_rt()
    # team 0 has one free slot, team 1 two: the party of two can only go to team 1
    b = _backfill(rt, [["e0", "e1"], ["e2"]], [1, 2])
    party = _ticket(rt, ["pa", "pb"], 0)
    solo = _ticket(rt, ["s0"], 1)
    _mm(rt).tick()
    got = rt.store.get_backfill(b.id)
    assert got.status == "filled", got
    assert got.assigned == [["s0"], sorted(got.assigned[1])] and sorted(got.assigned[1]) == ["pa", "pb"]
    assert rt.store.get(party).result["team"] == 1 and rt.store.get(solo).result["team"] == 0


def test_a_party_too_big_for_any_open_slot_is_left_queued_and_nothing_partial(make_rt):
    rt = make_rt()
    b = _backfill(rt, [["e0", "e1"], ["e2", "e3"]], [1, 1])
    party = _ticket(rt, ["pa", "pb"], 0)
    _mm(rt).tick()
    assert rt.store.get_backfill(b.id).status == "open"
    assert rt.store.get_backfill(b.id).assigned == [[], []]
    assert rt.store.get(party).status == "queued"
    # one solo is not enough for two slots: a fill is all or nothing
    s0 = _ticket(rt, ["s0"], 1)
    _mm(rt).tick()
    assert rt.store.get_backfill(b.id).status == "open" and rt.store.get(s0).status == "queued"
    s1 = _ticket(rt, ["s1"], 2)
    _mm(rt).tick()
    assert rt.store.get_backfill(b.id).status == "filled"
    assert rt.store.get(s0).status == rt.store.get(s1).status == "matched"
    assert rt.store.get(party).status == "queued"


def test_the_pools_rules_hold_for_the_whole_match(make_rt):
    # skill_balance over the whole match, pinned players included: team 0 is strong (2000), team 1 weak
    # (1000) with one slot; only the 3000-rated ticket keeps the mean difference within 600
    rt = make_rt(rules=[{"kind": "party_together"}, {"kind": "skill_balance", "max_diff": 600}])
    skill = {"e0": 2000.0, "e1": 2000.0, "e2": 2000.0, "e3": 1000.0, "e4": 1000.0}
    b = _backfill(rt, [["e0", "e1", "e2"], ["e3", "e4"]], [0, 1], skill=skill)
    low = _ticket(rt, ["low"], 0, skill=1000.0)
    high = _ticket(rt, ["high"], 1, skill=3000.0)
    _mm(rt).tick()
    got = rt.store.get_backfill(b.id)
    assert got.status == "filled" and got.assigned == [[], ["high"]]
    assert rt.store.get(high).status == "matched" and rt.store.get(low).status == "queued"


def test_no_player_in_a_backfill_and_a_new_match_under_concurrency(make_rt):
    """Two matchmakers of the same pool (two replicas briefly both leading) tick concurrently over a
    queue that backfills and new matches both want. Every player ends in at most one place."""
    rt = make_rt()
    backfills = [_backfill(rt, [[f"e{k}a", f"e{k}b"], [f"e{k}c"]], [1, 2], match_id=f"game-{k}") for k in range(4)]
    tickets = [_ticket(rt, [f"s{i}"], i) for i in range(30)]
    mms = [_mm(rt), _mm(rt)]
    stop = time.time() + 6.0
    errors: list[BaseException] = []

    def run(mm):
        try:
            while time.time() < stop:
                mm.tick()
        except BaseException as err:  # noqa: BLE001 - surfaced below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(mm,)) for mm in mms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    where: dict[str, str] = {}
    for tid in tickets:
        t = rt.store.get(tid)
        if t.status != "matched":
            assert t.status == "queued"
            continue
        key = f"{t.result['match_id']}/{t.result.get('backfill_id')}"
        for pid in (p["id"] for p in t.players):
            assert pid not in where, f"{pid} in {where[pid]} and {key}"
            where[pid] = key
    filled = [rt.store.get_backfill(b.id) for b in backfills]
    assert all(b.status == "filled" for b in filled)
    for b in filled:
        for pid in (p for team in b.assigned for p in team):
            assert where[pid] == f"{b.match_id}/{b.id}"
    assert sum(1 for v in where.values() if v.endswith("/None")) >= 6  # new matches formed too
    assert len(where) + sum(rt.store.get(t).status == "queued" for t in tickets) == 30


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_bench_backfill_fills_every_backfill_in_the_first_tick(store, request):
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.backfill_bench import run_backfill_bench

    url = None
    if store == "redis":
        url, _ = request.getfixturevalue("redis_url")
    r = run_backfill_bench("3v3", store, tickets=40, backfills=4, seed=2, redis_url=url).to_json()
    assert r["filled"] == 4 and r["filled_in_first_tick"] == 4 and r["ticks_to_fill_max"] == 1, r
    assert r["double_booked"] == 0 and r["new_matches"] >= 1 and r["fill_ms_p50"] > 0
    with pytest.raises(InvalidInput) as err:
        run_backfill_bench("3v3", "disk", tickets=40, backfills=4, seed=2)
    assert err.value.field == "store"


@pytest.mark.service
def test_bench_backfill_cli_refuses_bad_input_in_one_line():
    import subprocess

    out = subprocess.run([sys.executable, "-c", "from mgmatch.cli import main; main()", "bench", "backfill",
                          "--store", "disk"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "--store" in out.stderr, out.stderr
