"""Several matches from one pool in one solve: disjoint, rule-abiding matches with parties whole, and a
joint partition that beats one-match-at-a-time where greedy is short-sighted."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.compiler import parties
from mgmatch.core.engagement import parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import load_model
from mgmatch.core.problem import Problem
from mgmatch.core.rules import parse_rule
from mgmatch.lab.bench_batch import pool_instance
from mgmatch.solvers.base import Budget
from mgmatch.solvers.batch import joint_local_search, prefer_joint, solve_joint, solve_sequential, verify

#: engagement of a 1v1 match with skills a, b: C − |a − b| − 3·max(0, |a − b| − 1.5)
C = 10.0
DIFF_MODEL = {
    "teams": 2, "feature_dim": 1,
    "player_layers": [{"weight": [[1.0]], "bias": [0.0]}],
    "head_layers": [{"weight": [[1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]], "bias": [0.0, 0.0, -1.5, -1.5]},
                    {"weight": [[-1.0, -1.0, -3.0, -3.0]], "bias": [C]}],
}


def greedy_trap() -> Problem:
    """Four 1v1 players with skills 0, 1, 1, 2: the best single match (1 vs 1, value C) leaves 0 vs 2
    (C − 3.5); the best pair of matches is 0 vs 1 and 1 vs 2 (2C − 2)."""
    inst = parse_instance({"teams": 2, "team_size": 1, "rules": [],
                           "players": [{"id": pid, "features": [s], "skill": s}
                                       for pid, s in (("a", 0.0), ("b", 1.0), ("c", 1.0), ("d", 2.0))]})
    return Problem(inst, parse_engagement(DIFF_MODEL))


def test_joint_beats_the_greedy_sequential_path_where_the_best_first_match_spoils_the_second():
    problem = greedy_trap()
    seq = solve_sequential(problem, 2, Budget.of(2000.0), method="exact")
    joint = solve_joint(problem, 2, Budget.of(2000.0), seed=0)
    assert len(seq.matches) == len(joint.matches) == 2
    assert not verify(problem, seq.matches) and not verify(problem, joint.matches)
    assert seq.total == pytest.approx(2 * C - 3.5)  # greedy took b vs c first
    assert joint.total == pytest.approx(2 * C - 2.0)  # {a, b} and {c, d} (or {a, c} and {b, d})
    pairs = sorted(sorted(problem.instance.ids[i] for i in np.flatnonzero(t >= 0)) for t in joint.matches)
    assert pairs in ([["a", "b"], ["c", "d"]], [["a", "c"], ["b", "d"]])


def test_the_cross_match_swap_repairs_the_greedy_partition():
    problem = greedy_trap()
    greedy = np.array([[-1, 0, 1, -1], [0, -1, -1, 1]])  # b vs c, a vs d
    objs = np.array([problem.objective(t) for t in greedy])
    T, new, moves, local = joint_local_search(problem, greedy, objs, None)
    assert local and moves >= 1
    assert new.sum() == pytest.approx(2 * C - 2.0)
    assert not verify(problem, list(T))


@pytest.mark.parametrize("seed", [0, 1])
def test_joint_matches_are_disjoint_feasible_and_keep_parties_whole(seed):
    inst = pool_instance("3v3", 30, 4, seed)
    problem = Problem(inst, load_model("3v3"), "3v3")
    groups = parties(inst)
    assert groups, "the pool should hold parties"
    res = solve_joint(problem, 4, Budget.of(3000.0), seed=seed)
    assert res.status == "feasible" and len(res.matches) == 4  # four planted matches exist
    assert verify(problem, res.matches) == []
    T = np.stack(res.matches)
    assert ((T >= 0).sum(0) <= 1).all()
    for members in groups.values():
        where = {(int(np.argmax(T[:, i] >= 0)) if (T[:, i] >= 0).any() else -1,
                  int(T[:, i].max())) for i in members}
        assert len(where) == 1, f"party split: {where}"
    assert res.objectives == pytest.approx([problem.objective(t) for t in res.matches])
    sols = res.solutions(problem)
    assert [s.objective for s in sols] == pytest.approx(res.objectives)
    assert all(s.status == "feasible" and s.stats["batch_matches"] == 4 for s in sols)


def test_joint_forms_at_least_as_many_matches_as_sequential_on_a_tight_pool():
    # 24 candidates, room for exactly 4 matches of 6: greedy picks strand players the last match needed
    inst = pool_instance("3v3", 24, 4, 3)
    problem = Problem(inst, load_model("3v3"), "3v3")
    seq = solve_sequential(problem, 4, Budget.of(2000.0))
    joint = solve_joint(problem, 4, Budget.of(2000.0))
    assert not verify(problem, joint.matches) and not verify(problem, seq.matches)
    assert len(joint.matches) >= len(seq.matches)
    assert len(joint.matches) == 4


def test_bad_batch_requests_name_the_field():
    problem = greedy_trap()
    with pytest.raises(InvalidInput) as err:
        solve_joint(problem, 0, Budget.of(100.0))
    assert err.value.field == "matches"
    inc = problem.instance.with_rules([parse_rule({"kind": "include", "players": ["a"]}, "rules[0]")])
    with pytest.raises(InvalidInput) as err:
        solve_joint(Problem(inc, problem.model), 2, Budget.of(100.0))
    assert err.value.field == "rules[0]"


def test_the_number_of_matches_is_capped_by_the_room_in_the_pool():
    problem = greedy_trap()
    res = solve_joint(problem, 5, Budget.of(1000.0))
    seq = solve_sequential(problem, 5, Budget.of(1000.0), method="exact")
    assert len(res.matches) == 2 and len(seq.matches) == 2
    assert res.stats["requested_matches"] == 5


def test_auto_picks_joint_on_the_measured_pool_shapes_only():
    assert not prefer_joint(6, 24, 1)  # one match: nothing to partition
    assert prefer_joint(6, 24, 4) and prefer_joint(6, 40, 4) and prefer_joint(6, 100, 8)  # measured 3v3 shapes
    assert prefer_joint(24, 72, 3) and prefer_joint(24, 100, 3)  # 12v12
    assert not prefer_joint(6, 100, 4)  # 4.2 × the players needed: not measured, one at a time
