"""EOMM: outcome model parity with openskill, Eq. 7 pairing, the paper's theory, the solver."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from openskill.models import ThurstoneMostellerFull

from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import parse_instance
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.eomm import (
    DEFAULT_CHURN,
    ChurnTable,
    OutcomeModel,
    blossom,
    eomm_pairs,
    matching_duals,
    min_weight_perfect_matching,
    pair_weights,
)


def all_pairings(items):
    if not items:
        yield []
        return
    a = items[0]
    for k in range(1, len(items)):
        rest = items[1:k] + items[k + 1:]
        for p in all_pairings(rest):
            yield [(a, items[k])] + p


def brute_min(W):
    return min(sum(W[a, b] for a, b in p) for p in all_pairings(list(range(len(W)))))


def cost(W, pairs):
    return sum(W[a, b] for a, b in pairs)


def test_outcome_model_matches_openskill():
    os_model = ThurstoneMostellerFull()
    om = OutcomeModel(beta=os_model.beta, draw="openskill")
    for mu_a, s_a, mu_b, s_b in [(25, 8.3, 30, 2.0), (20, 1.0, 21, 3.0), (35, 0.5, 15, 4.0)]:
        a, b = os_model.rating(mu=mu_a, sigma=s_a), os_model.rating(mu=mu_b, sigma=s_b)
        assert om.win(mu_a, s_a**2, mu_b, s_b**2) == pytest.approx(os_model.predict_win([[a], [b]])[0], abs=1e-9)
        assert om.draw_prob(mu_a, s_a**2, mu_b, s_b**2) == pytest.approx(os_model.predict_draw([[a], [b]]), abs=1e-9)


def test_eomm_rule_draw_fixed_at_20_percent():
    pw, pd, pl = OutcomeModel().probs(np.array([10.0, 25.0, 40.0]), 0.0, 25.0, 0.0)
    assert np.allclose(pd, 0.2)
    assert np.allclose(pw + pd + pl, 1.0)
    assert pw[0] < pw[1] < pw[2] and pw[1] == pytest.approx(0.4)


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_matching_is_perfect_and_minimum(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        mu = rng.normal(25, 6, n)
        c = rng.uniform(0.1, 0.7, (n, 3))
        W = pair_weights(mu, np.zeros(n), c, OutcomeModel())
        pairs = min_weight_perfect_matching(W)
        assert sorted(i for p in pairs for i in p) == list(range(n))
        assert cost(W, pairs) == pytest.approx(brute_min(W), abs=1e-12)


def test_pruned_matching_equals_plain_blossom_on_larger_pools():
    import networkx as nx

    rng = np.random.default_rng(3)
    n = 40
    mu = rng.normal(25, 5, n)
    W = pair_weights(mu, np.zeros(n), DEFAULT_CHURN.predict(np.full((n, 10), np.nan), rng.lognormal(0, 1, n)),
                     OutcomeModel())
    W = W + rng.normal(0, 1e-3, (n, n))
    W = (W + W.T) / 2
    G = nx.Graph()
    for a, b in itertools.combinations(range(n), 2):
        G.add_edge(a, b, weight=-W[a, b])
    ref = nx.max_weight_matching(G, maxcardinality=True)
    pairs = min_weight_perfect_matching(W)
    assert len(pairs) == n // 2
    assert cost(W, pairs) == pytest.approx(cost(W, ref), abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_blossom_matches_networkx_on_random_sparse_graphs(seed):
    # rustworkx (integer-scaled weights) against networkx's float blossom: the same number of
    # pairs and the same least total weight among the matchings with most pairs
    import networkx as nx

    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 25))
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(len(iu)) < rng.uniform(0.15, 0.6)
    a, b = iu[keep], ju[keep]
    w = rng.uniform(-3, 5, len(a))
    pairs = blossom(n, a, b, w)
    weight = {(int(x), int(y)): float(v) for x, y, v in zip(a, b, w, strict=True)}
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from((x, y, 10.0 - v) for (x, y), v in weight.items())
    ref = nx.max_weight_matching(G, maxcardinality=True)
    assert len({i for p in pairs for i in p}) == 2 * len(pairs)
    assert all(p in weight for p in pairs)
    assert len(pairs) == len(ref)
    assert sum(weight[p] for p in pairs) == pytest.approx(sum(weight[(min(x, y), max(x, y))] for x, y in ref),
                                                          abs=1e-9)


@pytest.mark.parametrize("n", [18, 30, 64])
def test_pruned_matching_equals_networkx_on_eomm_weights(n):
    # the pruned, reduced-cost blossom against networkx on the whole complete graph
    import networkx as nx

    rng = np.random.default_rng(n)
    mu = rng.normal(25, 5, n)
    H = np.where(rng.random((n, 10)) < 0.5, -1.0, 1.0)
    W = pair_weights(mu, rng.uniform(0.5, 3, n) ** 2, DEFAULT_CHURN.predict(H, rng.lognormal(0, 1, n)),
                     OutcomeModel())
    for sign in (1, -1):  # EOMM's minimum and the simulation's WorstMM (maximum)
        G2 = nx.Graph()
        G2.add_weighted_edges_from((a, b, -sign * W[a, b]) for a, b in itertools.combinations(range(n), 2))
        ref = nx.max_weight_matching(G2, maxcardinality=True)
        pairs = min_weight_perfect_matching(sign * W)
        assert sorted(i for p in pairs for i in p) == list(range(n))
        assert cost(W, pairs) == pytest.approx(cost(W, ref), abs=1e-9)


def test_matching_duals_bound_every_edge_and_pairing():
    rng = np.random.default_rng(7)
    n = 10
    W = rng.uniform(0, 1, (n, n))
    W = (W + W.T) / 2
    y = matching_duals(W)
    iu, ju = np.triu_indices(n, 1)
    assert (W[iu, ju] - y[iu] - y[ju] >= -1e-12).all()
    assert y.sum() <= brute_min(W) + 1e-12


def neighbour_pairing(mu):
    order = np.argsort(mu)
    return [tuple(sorted(order[k:k + 2])) for k in range(0, len(mu), 2)]


@pytest.mark.parametrize("seed", range(6))
def test_theory_skill_equal_optimal_when_draws_retain(seed):
    # c(W) + c(L) > 2 c(D): the draw-maximizing (skill-neighbour) pairing is optimal
    rng = np.random.default_rng(seed)
    n = 8
    mu = np.sort(rng.uniform(20, 30, n))
    table = ChurnTable({"W": 0.25, "D": 0.2, "L": 0.45})
    pairs = eomm_pairs(mu, churn=table, outcome=OutcomeModel(beta=25 / 6, draw="openskill"))
    W = pair_weights(mu, np.zeros(n), table.predict(np.zeros((n, 10)), np.ones(n)), OutcomeModel(beta=25 / 6, draw="openskill"))
    assert cost(W, pairs) == pytest.approx(brute_min(W), abs=1e-12)
    assert cost(W, neighbour_pairing(mu)) == pytest.approx(brute_min(W), abs=1e-12)
    assert sorted(pairs) == sorted(neighbour_pairing(mu))


@pytest.mark.parametrize("seed", range(6))
def test_theory_skill_equal_worst_when_draws_churn(seed):
    # c(W) + c(L) < 2 c(D): the skill-neighbour pairing has the highest total churn of all pairings
    rng = np.random.default_rng(seed)
    n = 8
    mu = rng.uniform(20, 30, n)
    table = ChurnTable({"W": 0.1, "D": 0.4, "L": 0.3})
    om = OutcomeModel(beta=25 / 6, draw="openskill")
    W = pair_weights(mu, np.zeros(n), table.predict(np.zeros((n, 10)), np.ones(n)), om)
    worst = -brute_min(-W)
    assert cost(W, neighbour_pairing(mu)) == pytest.approx(worst, abs=1e-12)
    assert cost(W, eomm_pairs(mu, churn=table, outcome=om)) < worst - 1e-6


def test_state_free_churn_makes_every_pairing_equal_under_fixed_draws():
    rng = np.random.default_rng(0)
    mu = rng.uniform(10, 40, 6)
    table = ChurnTable({"W": 0.1, "D": 0.4, "L": 0.3})
    W = pair_weights(mu, np.zeros(6), table.predict(np.zeros((6, 10)), np.ones(6)), OutcomeModel())
    costs = {round(cost(W, p), 12) for p in all_pairings(list(range(6)))}
    assert len(costs) == 1


def test_odd_pool_rejected():
    with pytest.raises(ValueError):
        min_weight_perfect_matching(np.zeros((3, 3)))


def test_solver_1v1_picks_best_feasible_pair_and_team_instance(example_paths):
    from mgmatch.core.instance import load_instance

    inst = load_instance(example_paths["instance"])
    model = load_engagement(example_paths["engagement"])
    prob = Problem(inst, model)
    sol = get_solver("eomm", seed=0, restarts=3).solve(prob, Budget.of(None))
    assert sol.status == "feasible"
    from mgmatch.core.solution import team_of_from_teams

    assert prob.checker.feasible(team_of_from_teams(inst, sol.teams)[None])[0]
    # a 1v1 instance with the same players: the exact pair search
    obj = inst.to_json()
    obj["team_size"] = 1
    obj["rules"] = []
    inst1 = parse_instance(obj)
    p1 = Problem(inst1, model)
    s1 = get_solver("eomm").solve(p1, Budget.of(None))
    assert s1.status == "feasible" and all(len(t) == 1 for t in s1.teams)


def test_solver_requires_skill(example_paths):
    from mgmatch.core.errors import InvalidInput

    obj = json.loads(example_paths["instance"].read_text())
    obj["rules"] = []
    del obj["players"][0]["skill"]
    prob = Problem(parse_instance(obj), load_engagement(example_paths["engagement"]))
    with pytest.raises(InvalidInput):
        get_solver("eomm").solve(prob, Budget.of(None))


def test_1v1_closed_form_agrees_with_batch_objective(example_paths):
    from mgmatch.solvers.eomm import churn_objective

    obj = json.loads(example_paths["instance"].read_text())
    obj["team_size"], obj["rules"] = 1, [{"kind": "avoid", "players": ["p01", "p02"], "scope": "match"}]
    prob = Problem(parse_instance(obj), load_engagement(example_paths["engagement"]))
    sol = get_solver("eomm").solve(prob, Budget.of(None))
    f = churn_objective(prob)
    n = prob.instance.n
    rows = []
    for a, b in itertools.permutations(range(n), 2):
        t = np.full(n, -1)
        t[a], t[b] = 0, 1
        rows.append(t)
    T = np.asarray(rows)
    ok = prob.checker.feasible(T)
    from mgmatch.core.solution import team_of_from_teams

    got = f(team_of_from_teams(prob.instance, sol.teams)[None])[0]
    assert got == pytest.approx(f(T[ok]).max(), abs=1e-12)
    assert {tuple(t) for t in sol.teams} != {("p01",), ("p02",)}
