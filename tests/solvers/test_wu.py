"""Wu's when-to-match model: exact simulation against the closed forms, the threshold rule, the policy."""

from __future__ import annotations

import json

import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Player
from mgmatch.lab.sim_wu import simulate
from mgmatch.solvers import wu
from mgmatch.solvers.dispatch import PoolShape, Waiting, make_policy

CASES = [(1, 0.5, 1.0), (2, 0.3, 3.0), (3, 0.8, 0.5), (5, 0.5, 2.0)]


def test_closed_forms_and_threshold_rule():
    assert wu.closed_form("patient", 4, 0.3, 9.0) == 4.0
    # n = 1, q = ½: (2q − 1)^{2n} = 0, so greedy costs ½ + α/2 and α* = 1
    assert wu.closed_form("greedy", 1, 0.5, 1.0) == pytest.approx(1.0)
    assert wu.greedy_threshold(1, 0.5) == pytest.approx(1.0)
    assert wu.greedy_is_optimal(1, 0.5, 1.0) and not wu.greedy_is_optimal(1, 0.5, 1.01)
    # α* = 1 / (1 − 0.4^6) for n = 3, q = 0.7
    assert wu.greedy_threshold(3, 0.7) == pytest.approx(1 / (1 - 0.4 ** 6))
    # greedy loses appeal as n grows (q ≠ ½) and as q → ½
    assert wu.greedy_threshold(5, 0.9) < wu.greedy_threshold(1, 0.9)
    assert wu.greedy_threshold(3, 0.55) < wu.greedy_threshold(3, 0.9)
    # the rule agrees with the two closed forms
    for n, q, a in [(2, 0.6, 0.9), (2, 0.6, 1.2), (4, 0.2, 1.0), (4, 0.2, 3.0)]:
        better = wu.closed_form("greedy", n, q, a) <= wu.closed_form("patient", n, q, a)
        assert wu.greedy_is_optimal(n, q, a) == better
    assert wu.greedy_threshold(2, 1.0) == float("inf")
    with pytest.raises(InvalidInput, match="^q"):
        wu.greedy_is_optimal(2, 1.5, 1.0)
    with pytest.raises(InvalidInput, match="^n"):
        wu.closed_form("greedy", 0, 0.5, 1.0)


@pytest.mark.parametrize("policy", ["greedy", "patient"])
@pytest.mark.parametrize(("n", "q", "alpha"), CASES)
def test_long_simulation_agrees_with_the_closed_form_within_one_percent(policy, n, q, alpha):
    r = simulate(n, q, alpha, 120_000, policy, seed=n)
    assert r.cost_per_period == pytest.approx(r.closed_form, rel=0.01)
    assert r.cost_per_period == pytest.approx(r.waiting_cost_per_period + r.imbalance_cost_per_period)
    if policy == "patient":
        assert r.imbalanced_games == 0
    else:
        assert r.games == 120_000 // (2 * n)
        # the share of imbalanced games is P(#H odd)
        assert r.imbalanced_games / r.games == pytest.approx(wu.odd_probability(n, q), abs=0.02)


def test_simulation_ranks_the_policies_like_the_threshold_rule():
    for n, q, alpha in [(3, 0.5, 0.3), (3, 0.5, 3.0), (2, 0.9, 1.5), (5, 0.6, 1.5)]:
        g = simulate(n, q, alpha, 60_000, "greedy", seed=3).cost_per_period
        p = simulate(n, q, alpha, 60_000, "patient", seed=3).cost_per_period
        assert (g <= p) == wu.greedy_is_optimal(n, q, alpha), (n, q, alpha, g, p)


def test_simulation_is_seeded_and_validates():
    a = simulate(2, 0.4, 1.0, 5000, "patient", seed=9)
    b = simulate(2, 0.4, 1.0, 5000, "patient", seed=9)
    assert a == b
    assert simulate(2, 0.4, 1.0, 5000, "patient", seed=10) != a
    with pytest.raises(InvalidInput, match="policy"):
        simulate(2, 0.4, 1.0, 100, "lazy")
    with pytest.raises(InvalidInput, match="periods"):
        simulate(2, 0.4, 1.0, 0, "greedy")


def _cli(argv, capsys):
    from mgmatch.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_cli_prints_cost_next_to_closed_form(capsys):
    code, out, _ = _cli(["simulate", "wu", "--n", "2", "--q", "0.3", "--alpha", "2", "--periods", "50000",
                         "--policy", "greedy", "--seed", "1"], capsys)
    assert code == 0
    res = json.loads(out)
    assert res["cost_per_period"] == pytest.approx(res["closed_form"], rel=0.01)
    assert res["closed_form"] == pytest.approx(2 - 0.5 + 2 * (1 - 0.4 ** 4) / 2)
    code, _, err = _cli(["simulate", "wu", "--policy", "sometimes"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--policy" in err


def _tickets(skills, start=0):
    return [Waiting(f"t{start + i}", (Player(id=f"u{start + i}", features=(0.0,), skill=float(s)),),
                    enqueued_at=float(start + i)) for i, s in enumerate(skills)]


def test_policy_greedy_matches_at_2n_and_patient_waits_on_an_odd_high_count():
    shape = PoolShape.uniform(2, 2)
    odd = _tickets([2000, 1000, 1000, 1000])  # one high player among 2n = 4
    greedy = make_policy("wu", mode="greedy", high_skill=1500)
    patient = make_policy("wu", mode="patient", high_skill=1500)
    assert greedy.decide(odd, shape, 10.0).solve
    assert not patient.decide(odd, shape, 10.0).solve
    assert patient.decide(odd + _tickets([1000], start=4), shape, 11.0).solve  # 2n + 1: a zero split exists
    even = _tickets([2000, 2000, 1000, 1000])
    assert patient.decide(even, shape, 10.0).solve
    assert not greedy.decide(odd[:3], shape, 10.0).solve


def test_policy_auto_mode_follows_the_threshold_rule_on_observed_q():
    shape = PoolShape.uniform(2, 3)
    # q ≈ ½ observed: α* = 1/(1 − 0^6) ≈ 1, so α = 5 → patient and α = 0.5 → greedy
    pool = _tickets([2000, 1000] * 3)
    for alpha, expect in [(5.0, "patient"), (0.5, "greedy")]:
        pol = make_policy("wu", alpha=alpha, high_skill=1500)
        pol.decide(pool, shape, 0.0)
        assert pol.choose(3) == expect
        assert pol.q_hat() == pytest.approx((3 + 0.5) / 7)
    with pytest.raises(InvalidInput, match="sizes"):
        make_policy("wu").decide(pool, PoolShape(2, (3, 2)), 0.0)
    with pytest.raises(InvalidInput, match="mode"):
        make_policy("wu", mode="eager")
