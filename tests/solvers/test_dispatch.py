"""Dispatch policies (when and on whom to solve) and rule relaxation over waiting time."""

from __future__ import annotations

import math

import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Player, parse_instance
from mgmatch.core.rules import MaxPingRule, RoleMinRule, SkillBalanceRule, SkillSpreadRule
from mgmatch.solvers.dispatch import Decision, PoolShape, Waiting, make_policy
from mgmatch.solvers.relax import parse_relax, relax

SHAPE = PoolShape.uniform(2, 2)


def ticket(tid: str, skills, at: float) -> Waiting:
    return Waiting(tid, tuple(Player(id=f"{tid}.{j}", features=(0.0,), skill=float(s)) for j, s in enumerate(skills)),
                   enqueued_at=at)


def solo(n: int, skill=lambda i: 1000 + 10 * i, start: float = 0.0) -> list[Waiting]:
    return [ticket(f"t{i}", [skill(i)], start + i) for i in range(n)]


# --------------------------------------------------------------------------- immediate


def test_immediate_waits_for_a_full_match_then_picks_oldest_and_nearest_within_the_cap():
    pol = make_policy("immediate", max_candidates=4)
    assert not pol.decide(solo(3), SHAPE, 10.0).solve
    waiting = [ticket("old", [1000], 0.0)] + [ticket(n, [s], 5.0) for n, s in
                                               [("a", 1005), ("far", 2000), ("b", 1300), ("c", 1010)]]
    d = pol.decide(waiting, SHAPE, 10.0)
    assert d.solve and d.tickets == ("old", "a", "c", "b")  # longest waiter first, then by skill distance
    assert d.max_matches == 1
    # at equal skill distance the longer waiter goes first
    d = pol.decide([ticket("old", [1000], 0.0), ticket("x", [1100], 9.0), ticket("y", [900], 1.0),
                    ticket("z", [1000], 9.5), ticket("w", [1000], 9.6)], SHAPE, 10.0)
    assert d.tickets[:3] == ("old", "z", "w") and "y" in d.tickets and "x" not in d.tickets


def test_parties_are_never_split_and_count_towards_the_match():
    pol = make_policy("immediate", max_candidates=4)
    d = pol.decide([ticket("duo", [1000, 1010], 0.0), ticket("duo2", [990, 1000], 1.0)], SHAPE, 5.0)
    assert d.solve and set(d.tickets) == {"duo", "duo2"}
    waiting = [ticket("duo", [1000, 1010], 0.0), ticket("trio", [1000, 1000, 1000], 1.0), ticket("s", [1500], 1.0),
               ticket("s2", [1600], 1.0)]
    d = pol.decide(waiting, SHAPE, 5.0)
    assert "trio" not in d.tickets and set(d.tickets) == {"duo", "s", "s2"}  # the trio would overflow 4


# --------------------------------------------------------------------------- batch


def test_batch_runs_fixed_rounds_and_tells_every_ticket_its_wait():
    pol = make_policy("batch", interval_s=60, offset_s=0)
    waiting = solo(6)
    d = pol.decide(waiting, SHAPE, 130.0)  # first call between rounds: wait for 180
    assert not d.solve and d.next_check_s == pytest.approx(50.0)
    assert d.eta_s == {t.ticket_id: pytest.approx(50.0) for t in waiting}
    assert not pol.decide(waiting, SHAPE, 179.0).solve
    d = pol.decide(waiting, SHAPE, 180.5)
    assert d.solve and len(d.tickets) == 6 and d.max_matches == 1 and d.eta_s["t0"] == pytest.approx(59.5)
    assert not pol.decide(waiting, SHAPE, 181.0).solve  # one solve per round
    assert pol.decide(waiting + solo(4, start=100), SHAPE, 240.0).max_matches == 2
    # a round with too few players is skipped, the ETA points at the next
    small = make_policy("batch", interval_s=10)
    small.decide(solo(1), SHAPE, 5.0)
    d = small.decide(solo(1), SHAPE, 12.0)
    assert not d.solve and d.eta_s["t0"] == pytest.approx(8.0)


# --------------------------------------------------------------------------- quality threshold


def test_quality_threshold_relaxes_with_waiting_and_keeps_the_longest_waiter_first():
    pol = make_policy("quality_threshold", max_spread=50, spread_growth_per_s=10, spread_cap=500)
    spread_out = [ticket(f"t{i}", [1000 + 100 * i], float(i)) for i in range(4)]  # best spread 300
    assert not pol.decide(spread_out, SHAPE, 10.0).solve  # t0 waited 10 s: threshold 150
    d = pol.decide(spread_out, SHAPE, 26.0)  # t0 waited 26 s: threshold 310 ≥ 300
    assert d.solve and d.tickets[0] == "t0" and set(d.tickets) == {"t0", "t1", "t2", "t3"}
    # a tight group among newer tickets matches at once even if the oldest cannot
    tight = spread_out + [ticket(f"n{i}", [3000 + i], 20.0 + i) for i in range(4)]
    d = pol.decide(tight, SHAPE, 24.0)
    assert d.solve and d.tickets[0] == "n0" and {"n0", "n1", "n2", "n3"} <= set(d.tickets)
    assert pol.threshold(1e9) == 500


# --------------------------------------------------------------------------- factory


@pytest.mark.parametrize(("name", "params", "field"), [
    ("nope", {}, "policy"),
    ("batch", {"interval_s": 0}, "interval_s"),
    ("batch", {"interval_s": "soon"}, "interval_s"),
    ("immediate", {"max_candidates": 1}, "max_candidates"),
    ("immediate", {"speed": 3}, "speed"),
    ("quality_threshold", {"max_spread": 100, "spread_cap": 10}, "spread_cap"),
    ("game_queue", {"q": 0.5}, "q"),
    ("game_queue", {"games": 0}, "games"),
    ("wu", {"alpha": -1}, "alpha"),
    ("immediate", {"relax": [{"after_s": 5, "rule": "skill_balance", "set": {"max_diff": -1}}]}, "relax.steps[0]"),
])
def test_make_policy_names_the_bad_parameter(name, params, field):
    with pytest.raises(InvalidInput) as err:
        make_policy(name, **params)
    assert err.value.field.startswith(field)


def test_a_pool_too_small_for_the_cap_is_refused():
    with pytest.raises(InvalidInput, match="max_candidates"):
        make_policy("immediate", max_candidates=3).decide(solo(4), SHAPE, 0.0)


# --------------------------------------------------------------------------- relaxation


def instance(waits=(0.0, 0.0, 0.0, 0.0)):
    players = [{"id": f"p{i}", "features": [0.0], "skill": 1000.0 + i, "roles": ["tank", "dps"],
                "pings": {"eu": 40.0}, "waited_s": w} for i, w in enumerate(waits)]
    return parse_instance({"teams": 2, "team_size": 2, "players": players, "rules": [
        {"kind": "skill_balance", "max_diff": 100}, {"kind": "max_ping", "max_ms": 80},
        {"kind": "role_min", "role": "tank", "min": 1}, {"kind": "role_min", "role": "dps", "min": 1},
        {"kind": "skill_spread", "max_spread": 300}]})


STEPS = {"key": "max", "steps": [
    {"after_s": 30, "rule": "skill_balance", "set": {"max_diff": 200}},
    {"after_s": 60, "rule": "skill_balance", "set": {"max_diff": 400}},
    {"after_s": 45, "rule": "max_ping", "set": {"max_ms": 150}},
    {"after_s": 20, "rule": "role_min", "where": {"role": "tank"}, "set": {"min": 0}},
    {"after_s": 90, "rule": "skill_spread", "drop": True},
]}


def rules_of(inst, cls):
    return [r for r in inst.rules if isinstance(r, cls)]


def test_relax_applies_the_steps_reached_by_the_waiting_time():
    inst = instance()
    assert relax(inst, 10.0, STEPS) is inst
    r = relax(inst, 35.0, STEPS)
    assert rules_of(r, SkillBalanceRule)[0].max_diff == 200
    assert rules_of(r, MaxPingRule)[0].max_ms == 80
    assert [x.min for x in rules_of(r, RoleMinRule)] == [0, 1]  # only the tank rule
    r = relax(inst, 100.0, STEPS)
    assert rules_of(r, SkillBalanceRule)[0].max_diff == 400  # the later step wins
    assert rules_of(r, MaxPingRule)[0].max_ms == 150
    assert rules_of(r, SkillSpreadRule) == []
    assert rules_of(inst, SkillBalanceRule)[0].max_diff == 100  # input untouched


@pytest.mark.parametrize(("key", "expect"), [("max", 400), ("min", 100), ("avg", 200)])
def test_relax_keys_on_the_configured_waiting_time(key, expect):
    inst = instance(waits=(10.0, 40.0, 40.0, 70.0))  # min 10, avg 40, max 70
    r = relax(inst, None, {**STEPS, "key": key})
    assert rules_of(r, SkillBalanceRule)[0].max_diff == expect


@pytest.mark.parametrize(("cfg", "field"), [
    ({"steps": [{"rule": "skill_balance", "set": {"max_diff": 1}}]}, "relax.steps[0].after_s"),
    ({"steps": [{"after_s": 1, "rule": "linear", "set": {}}]}, "relax.steps[0].rule"),
    ({"steps": [{"after_s": 1, "rule": "max_ping", "set": {"max_diff": 1}}]}, "relax.steps[0].set.max_diff"),
    ({"steps": [{"after_s": -1, "rule": "max_ping", "set": {"max_ms": 1}}]}, "relax.steps[0].after_s"),
    ({"steps": [{"after_s": 1, "rule": "avoid", "set": {"scope": "team"}}]}, "relax.steps[0].rule"),
    ({"key": "median", "steps": []}, "relax.key"),
    ({"steps": [{"after_s": 1, "rule": "max_ping", "set": {"max_ms": 1}, "drop": True}]}, "relax.steps[0].set"),
    ({"stepz": []}, "relax.stepz"),
])
def test_bad_relax_config_names_the_field(cfg, field):
    with pytest.raises(InvalidInput) as err:
        parse_relax(cfg)
    assert err.value.field.startswith(field)


def test_decision_carries_the_active_relaxations_for_the_loop():
    pol = make_policy("immediate", relax=STEPS)
    waiting = [ticket(f"t{i}", [1000 + i], at=0.0) for i in range(4)]
    d = pol.decide(waiting, SHAPE, now=50.0)
    assert d.waited_s == 50.0
    assert sorted(s.after_s for s in d.relax_steps) == [20, 30, 45]
    r = d.apply(instance())
    assert rules_of(r, SkillBalanceRule)[0].max_diff == 200 and rules_of(r, MaxPingRule)[0].max_ms == 150
    assert Decision(False).apply(instance()) == instance()
    assert [s["after_s"] for s in d.to_json()["relax_steps"]] == [20, 30, 45]
    assert math.isfinite(d.to_json()["waited_s"])
