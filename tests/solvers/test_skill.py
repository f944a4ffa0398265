"""Method ``skill`` (spec §7): anchor on the longest waiter, nearest in skill the rules allow, closest skill sums."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from mgmatch.core.engagement import parse_engagement
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers.base import Budget, make_solver, methods


def tiny_model(seed: int, teams: int = 2):
    rng = np.random.default_rng(seed)
    return parse_engagement({
        "format": "mgmatch-engagement/v1", "teams": teams, "feature_dim": 2,
        "player_layers": [{"weight": rng.normal(size=(3, 2)).tolist(), "bias": [0.0, 0.0, 0.0]}],
        "head_layers": [{"weight": rng.normal(size=(4, 3 * teams)).tolist(), "bias": [0.1] * 4},
                        {"weight": rng.normal(size=(1, 4)).tolist(), "bias": [0.0]}]})


def instance(skills, waited=None, rules=(), team_size=2, teams=2, extra=None):
    players = []
    for k, s in enumerate(skills):
        p = {"id": f"p{k}", "features": [float(k % 3), float(s) / 1000], "skill": float(s)}
        if waited is not None:
            p["waited_s"] = float(waited[k])
        players.append({**p, **((extra or {}).get(k, {}))})
    return parse_instance({"format": "mgmatch-instance/v1", "teams": teams, "team_size": team_size,
                           "players": players, "rules": list(rules)})


def solve(inst, model=None, budget_ms=2000):
    pr = Problem(inst, model or tiny_model(0, inst.teams))
    sol = make_solver("skill").solve(pr, Budget.of(budget_ms))
    return pr, sol


def test_skill_is_a_registered_method():
    assert "skill" in methods()


def test_anchor_is_the_longest_waiter_and_its_nearest_in_skill_join():
    skills = [1000, 1100, 1500, 1510, 1490, 1520, 2000, 900, 1495]
    waited = [1, 2, 3, 50, 4, 5, 6, 7, 8]  # p3 (1510) waited longest
    pr, sol = solve(instance(skills, waited))
    chosen = {pid for team in sol.teams for pid in team}
    # the four nearest to 1510: 1510 itself, 1500, 1520, 1495
    assert chosen == {"p3", "p2", "p5", "p8"}
    assert sol.status == "feasible"
    assert pr.checker.violations(team_of_from_teams(pr.instance, sol.teams)) == []


def test_a_different_longest_waiter_moves_the_selection():
    skills = [1000, 1100, 1500, 1510, 1490, 1520, 2000, 900, 1495]
    waited = [60, 2, 3, 50, 4, 5, 6, 7, 8]  # now p0 (1000) waited longest
    _, sol = solve(instance(skills, waited))
    chosen = {pid for team in sol.teams for pid in team}
    assert chosen == {"p0", "p1", "p7", "p4"}  # 1000, 1100, 900, then 1490 (nearer than 1495)


def test_teams_have_the_closest_skill_sums():
    skills = [1000, 1010, 1300, 1320, 1600, 1590]
    waited = [9, 0, 0, 0, 0, 0]
    pr, sol = solve(instance(skills, waited, team_size=3))
    t = team_of_from_teams(pr.instance, sol.teams)
    sums = [sum(skills[i] for i in range(6) if t[i] == j) for j in range(2)]
    best = min(abs(sum(skills[i] for i in c) - (sum(skills) - sum(skills[i] for i in c)))
               for c in combinations(range(6), 3))
    assert abs(sums[0] - sums[1]) == pytest.approx(best)


def test_rules_are_respected_and_move_the_choice():
    skills = [1500, 1505, 1510, 1495, 1800, 1200, 1700]
    waited = [30, 0, 0, 0, 0, 0, 0]
    # p1 and p2 (nearest to the anchor) may never both play; p3 must be on team 1 with p0 … via avoid rules
    rules = [{"kind": "avoid", "players": ["p1", "p2"], "scope": "match"},
             {"kind": "avoid", "players": ["p0", "p3"], "scope": "team"}]
    pr, sol = solve(instance(skills, waited, rules=rules))
    t = team_of_from_teams(pr.instance, sol.teams)
    assert pr.checker.violations(t) == []
    chosen = {pid for team in sol.teams for pid in team}
    assert "p0" in chosen and not {"p1", "p2"} <= chosen
    assert chosen == {"p0", "p3", "p1", "p6"} or chosen == {"p0", "p3", "p2", "p6"}


def test_infeasible_rules_answer_infeasible():
    skills = [1500, 1505, 1510, 1495]
    rules = [{"kind": "avoid", "players": ["p0", "p1"], "scope": "match"}]
    _, sol = solve(instance(skills, rules=rules))
    assert sol.status == "infeasible"
    assert sol.teams == [[], []]


def test_reads_no_engagement_model():
    skills = [1000, 1100, 1500, 1510, 1490, 1520, 2000, 900, 1495]
    inst = instance(skills, [1, 2, 3, 50, 4, 5, 6, 7, 8])
    a = solve(inst, tiny_model(1))[1]
    b = solve(inst, tiny_model(2))[1]
    assert a.teams == b.teams
    assert a.objective != b.objective  # the objective is still the model's value of the answer


def test_preset_pools_get_feasible_answers_within_the_budget():
    for inst in list(generate_instances("3v3", 3, 5)) + list(generate_instances("12v12", 1, 5)):
        name, model = resolve_model(inst)
        pr = Problem(inst, model, model_name=name)
        sol = make_solver("skill").solve(pr, Budget.of(300))
        assert sol.status == "feasible"
        assert pr.checker.violations(team_of_from_teams(inst, sol.teams)) == []
        assert sol.time_ms <= 300 + 20


def test_the_direct_path_answers_when_the_nearest_players_can_be_split_and_the_mip_otherwise():
    skills = [1000, 1100, 1500, 1510, 1490, 1520, 2000, 900, 1495]
    inst = instance(skills, [1, 2, 3, 50, 4, 5, 6, 7, 8])
    pr = Problem(inst, tiny_model(0))
    s = make_solver("skill")
    direct = s.solve(pr, Budget.of(2000))
    assert s.last_stats["path"] == "direct"
    # the same answer as the two MIPs give: the nearest four, split with the closest sums
    rules = [{"kind": "avoid", "players": ["p3", "p2"], "scope": "team"}]
    pr2 = Problem(instance(skills, [1, 2, 3, 50, 4, 5, 6, 7, 8], rules=rules), tiny_model(0))
    s2 = make_solver("skill")
    sol = s2.solve(pr2, Budget.of(2000))
    assert {p for t in sol.teams for p in t} == {p for t in direct.teams for p in t}
    assert s2.last_stats["path"] == "direct"  # p3 and p2 on different teams: still a split of the nearest
    t = team_of_from_teams(pr2.instance, sol.teams)
    assert t[2] != t[3]
    rules = [{"kind": "avoid", "players": ["p3", "p2"], "scope": "match"}]
    pr3 = Problem(instance(skills, [1, 2, 3, 50, 4, 5, 6, 7, 8], rules=rules), tiny_model(0))
    s3 = make_solver("skill")
    sol = s3.solve(pr3, Budget.of(2000))
    assert "path" not in s3.last_stats and s3.last_stats["select_status"] == "optimal"
    assert {p for t in sol.teams for p in t} == {"p3", "p5", "p8", "p4"}  # p2 out: 1490 is next


def test_large_lobbies_take_the_lobby_construction_and_keep_the_anchor():
    from mgmatch.core.presets import generate_with_witness, load_model

    model = load_model("br-100")
    inst, _ = generate_with_witness("br-100", 1, 2024)[0]
    pr = Problem(inst, model)
    s = make_solver("skill")
    sol = s.solve(pr, Budget.of(2000))
    assert s.last_stats["path"] == "lobby"
    assert sol.status == "feasible"
    team_of = team_of_from_teams(inst, sol.teams)
    assert pr.checker.violations(team_of) == []
    waited = np.asarray([p.waited_s or 0.0 for p in inst.players])
    assert team_of[int(np.argmax(waited))] >= 0
