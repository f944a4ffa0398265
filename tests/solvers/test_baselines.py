"""Baselines of Table 2: random sampling and OptMatch (CP-SAT enumeration + engagement scoring)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from mgmatch.core.compiler import Row
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.baselines import OptMatchSolver, RandomSolver, integer_row


def problems(preset: str, count: int, seed: int) -> list[Problem]:
    out = []
    for inst in generate_instances(preset, count, seed):
        name, model = resolve_model(inst)
        out.append(Problem(inst, model, model_name=name))
    return out


def assert_feasible_answer(pr: Problem, sol) -> np.ndarray:
    assert sol.status in ("feasible", "optimal")
    t = team_of_from_teams(pr.instance, sol.teams)
    assert pr.checker.violations(t) == []
    assert sol.objective == pytest.approx(pr.objective(t))
    return t


def test_random_returns_checker_feasible_assignments():
    for pr in problems("3v3", 3, seed=21) + problems("12v12", 1, seed=21):
        sol = RandomSolver(seed=1, max_samples=1500).solve(pr, Budget.of(5000))
        assert_feasible_answer(pr, sol)
        assert sol.stats["distinct_feasible"] >= 1


def test_random_is_deterministic_by_seed_and_keeps_the_best_sample():
    pr = problems("3v3", 1, seed=22)[0]
    a = RandomSolver(seed=7, max_samples=512).solve(pr, Budget.of(10_000))
    b = RandomSolver(seed=7, max_samples=512).solve(pr, Budget.of(10_000))
    assert a.teams == b.teams and a.objective == b.objective
    more = RandomSolver(seed=7, max_samples=4096).solve(pr, Budget.of(10_000))
    assert more.objective >= a.objective - 1e-9  # the same first samples plus more: never worse


def test_random_respects_the_budget():
    pr = problems("12v12", 1, seed=23)[0]
    sol = RandomSolver(seed=0).solve(pr, Budget.of(50))
    assert sol.time_ms <= 50 + 25
    zero = RandomSolver(seed=0).solve(pr, Budget.of(0))
    assert zero.status == "no_solution" and not zero.has_assignment


def test_optmatch_finds_the_enumeration_optimum_on_small_instances():
    for pr in problems("3v3", 4, seed=3):
        ref = get_solver("enumerate").solve(pr, Budget.of(None))
        sol = OptMatchSolver().solve(pr, Budget.of(20_000))
        assert_feasible_answer(pr, sol)
        assert sol.status == "optimal" and sol.stats["complete"]
        assert sol.objective == pytest.approx(ref.objective, abs=1e-9)


def test_optmatch_under_a_short_budget_is_feasible_or_nothing():
    pr = problems("12v12", 1, seed=24)[0]
    sol = OptMatchSolver().solve(pr, Budget.of(300))
    if sol.status != "no_solution":
        assert_feasible_answer(pr, sol)
        assert sol.status == "feasible"  # 12v12 cannot be enumerated in 300 ms


def test_optmatch_proves_infeasibility():
    pr = problems("3v3", 1, seed=3)[0]
    obj = copy.deepcopy(pr.instance.to_json())
    a, b = obj["players"][0]["id"], obj["players"][1]["id"]
    obj["rules"] += [{"kind": "include", "players": [a, b]}, {"kind": "avoid", "players": [a, b], "scope": "match"}]
    bad = Problem(parse_instance(obj), pr.model)
    sol = OptMatchSolver().solve(bad, Budget.of(5000))
    assert sol.status == "infeasible" and not sol.has_assignment


def test_integer_scaling_is_exact_for_rational_rows():
    row = Row(np.array([0, 1, 2]), np.array([1 / 3, -2 / 3, 0.5]), "<=", 1.25, 0, "t")
    coefs, rhs, sense = integer_row(row)
    scale = coefs[2] / 0.5
    assert sense == "<="
    assert all(abs(c - s * scale) < 1e-9 for c, s in zip(coefs, (1 / 3, -2 / 3, 0.5), strict=True))
    assert rhs == pytest.approx(1.25 * scale)


def test_registered_with_seed_option():
    assert get_solver("random", seed=3).seed == 3
    assert get_solver("optmatch").name == "optmatch"
