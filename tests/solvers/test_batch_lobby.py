"""The joint batch on large lobbies (issue 31): pools the policy sends to the lobby search form their
matches by lobby searches, with no SCIP model, disjoint, each feasible, ``include`` held over the batch."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.compiler import parties
from mgmatch.core.presets import load_model
from mgmatch.core.problem import Problem
from mgmatch.core.rules import IncludeRule
from mgmatch.lab.bench_batch import pool_instance
from mgmatch.solvers.base import Budget
from mgmatch.solvers.batch import solve_joint, verify
from mgmatch.solvers.batch_lobby import groups_to_try, include_group, included
from mgmatch.solvers.policy import lobby_path


def _pool(preset: str, candidates: int, seed: int) -> Problem:
    inst = pool_instance(preset, candidates, 2, seed, include=True)
    return Problem(inst, load_model(preset), preset)


@pytest.mark.parametrize("preset, candidates, seed, budget_ms", [
    ("ffa-32", 128, 0, 1000.0),
    ("ffa-32", 128, 3, 1000.0),
    ("br-100", 300, 2, 2000.0),
])
def test_two_large_lobbies_are_disjoint_feasible_and_hold_every_included_player(preset, candidates, seed, budget_ms):
    problem = _pool(preset, candidates, seed)
    inc = included(problem)
    assert inc.sum() >= 2 and any(isinstance(r, IncludeRule) for r in problem.instance.rules)
    assert lobby_path(problem)
    res = solve_joint(problem, 2, Budget.of(budget_ms), seed=seed)
    assert res.status == "feasible" and len(res.matches) == 2, res.stats
    assert res.stats["path"] == "lobby"
    assert "compiled" not in problem.__dict__  # no SCIP model was built
    assert verify(problem, res.matches) == []
    T = np.stack(res.matches)
    assert ((T >= 0).sum(0) <= 1).all()
    assert (T[:, inc] >= 0).any(0).all()  # every included player plays in some match
    for t in res.matches:
        assert sorted(np.bincount(t[t >= 0], minlength=problem.instance.teams)) == sorted(problem.instance.sizes)
    for members in parties(problem.instance).values():
        assert len({tuple(T[:, i] >= 0) for i in members}) == 1  # a party plays whole in one match, or not
    assert res.objectives == pytest.approx([problem.objective(t) for t in res.matches])


def test_verify_holds_include_over_the_batch_and_names_a_missing_player():
    problem = _pool("ffa-32", 128, 0)
    res = solve_joint(problem, 2, Budget.of(1000.0), seed=0)
    assert verify(problem, res.matches) == []
    inc = np.flatnonzero(included(problem))
    carrier = next(k for k, t in enumerate(res.matches) if (t[inc] >= 0).any())
    rest = [t for k, t in enumerate(res.matches) if k != carrier]
    bad = verify(problem, rest)
    assert bad and all("(include): required players in no match" in v for v in bad)
    assert verify(problem, [res.matches[carrier], res.matches[carrier]])  # overlapping matches


def test_included_players_are_grouped_by_what_one_lobby_can_hold():
    problem = _pool("br-100", 300, 0)
    inc = included(problem)
    group = include_group(problem, inc)
    assert group.any() and not (group & ~inc).any()
    tries = groups_to_try(problem, group)
    assert (tries[0] == group).all()
    if group.sum() >= 2:  # then its two sides of the widest skill gap, the larger first
        a, b = tries[1], tries[2]
        assert not (a & b).any() and ((a | b) == group).all() and a.sum() >= b.sum()
        skill = problem.instance.skills()
        assert skill[a].max() < skill[b].min() or skill[b].max() < skill[a].min()


def test_a_small_pool_keeps_the_scip_joint_batch():
    inst = pool_instance("3v3", 24, 2, 1)
    problem = Problem(inst, load_model("3v3"), "3v3")
    assert not lobby_path(problem)
    res = solve_joint(problem, 2, Budget.of(2000.0), seed=1)
    assert "path" not in res.stats and "seed" in res.stats and not verify(problem, res.matches)


def test_a_lobby_search_with_too_few_players_available_finds_none():
    import time

    from mgmatch.solvers.lobby import lobby_search

    problem = _pool("ffa-32", 128, 0)
    for n in (0, 31):  # none, and one short of the 32 a lobby needs
        avail = np.zeros(problem.instance.n, dtype=bool)
        avail[:n] = True
        team_of, _ = lobby_search(problem, time.perf_counter() + 1.0, 0, available=avail)
        assert team_of is None
