"""Method ``lobby``: large lobbies (ffa-32, br-100) answered feasibly, better than the planted lobby,
with its own rule filters agreeing with the checker."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.presets import generate_with_witness, load_model
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.lobby import LobbySolver, _Lobby, _Residual


@pytest.mark.parametrize("preset", ["ffa-32", "br-100"])
def test_answers_are_feasible_and_beat_the_planted_lobby(preset):
    model = load_model(preset)
    gains = []
    for inst, witness in generate_with_witness(preset, 3, 2024):
        pb = Problem(inst, model)
        sol = LobbySolver(seed=1).solve(pb, Budget.of(1500.0))
        assert sol.status == "feasible", sol.model_extra
        team_of = np.full(inst.n, -1)
        for j, team in enumerate(sol.teams):
            assert len(team) == inst.sizes[j]
            team_of[[inst.index[p] for p in team]] = j
        assert Problem(inst, model).checker.violations(team_of) == []
        assert sol.objective == pytest.approx(pb.objective(team_of))
        gains.append(sol.objective - pb.objective(witness))
    # the witness fills the slots with no regard to engagement: the climb must do better on average
    assert np.mean(gains) > 0, gains


def test_registered_and_stops_without_a_budget():
    assert get_solver("lobby").name == "lobby"
    inst, _ = generate_with_witness("ffa-32", 1, 5)[0]
    sol = LobbySolver(seed=3, default_time_limit_ms=300.0).solve(Problem(inst, load_model("ffa-32")), Budget.of(None))
    assert sol.status == "feasible" and sol.time_ms < 5000


@pytest.mark.parametrize("preset", ["ffa-32", "br-100"])
def test_its_rule_filters_agree_with_the_checker(preset):
    """The residual rules (avoid, if, linear) and the kept ones (role minimums, balance, include) judge
    random swaps from a feasible lobby exactly as the checker does."""
    model = load_model(preset)
    for inst, witness in generate_with_witness(preset, 2, 77):
        pb = Problem(inst, model)
        lobby = _Lobby(pb, np.random.default_rng(0))
        res = _Residual(pb)
        assert res.supported
        ok = np.ones(inst.n, dtype=bool)  # every player, so that moves may break ping and window too
        a, b, A, B = lobby._moves(witness, ok, 300)
        pre = lobby._prefilter(witness, a, b, A, B)
        rows = np.stack([lobby._apply(witness, a[c], b[c], A[c], B[c]) for c in range(len(a))])
        masks = pb.checker.rule_masks(rows)
        base = lobby._base_violation(witness, a, b, A, B)
        kept_rules = [k for k, r in enumerate(inst.rules) if type(r).__name__ in
                      ("RoleMinRule", "SkillBalanceRule", "IncludeRule")]
        for c in range(len(a)):
            # the repair's measure of the kept rules is 0 exactly when the checker finds them kept
            assert (base[c] == 0) == all(masks[k + 1, c] for k in kept_rules), c
            moved = np.concatenate([A[c][A[c] >= 0], B[c][B[c] >= 0]])
            ours = bool(pre[c]) and res.holds(rows[c], moved)
            kept = [k for k, r in enumerate(inst.rules) if type(r).__name__ in
                    ("RoleMinRule", "SkillBalanceRule", "IncludeRule", "AvoidRule", "IfRule", "LinearRule",
                     "PartyTogetherRule")]
            theirs = bool(masks[0, c]) and all(masks[k + 1, c] for k in kept)
            assert ours == theirs, (c, [inst.rules[k].kind for k in kept if not masks[k + 1, c]])


def test_unsupported_rules_never_give_an_infeasible_answer():
    """12v12 (role slots, which the lobby's construction does not fill): feasible or no answer, never
    a broken one."""
    model = load_model("12v12")
    inst, _ = generate_with_witness("12v12", 1, 3)[0]
    pb = Problem(inst, model)
    sol = LobbySolver().solve(pb, Budget.of(300.0))
    if sol.status == "feasible":
        team_of = np.full(inst.n, -1)
        for j, team in enumerate(sol.teams):
            team_of[[inst.index[p] for p in team]] = j
        assert pb.checker.violations(team_of) == []
    else:
        assert sol.status == "no_solution"


def test_mgmatch_policy_sends_large_lobbies_to_the_lobby_search():
    from mgmatch.solvers.policy import LOBBY_MIN_VARIABLES, lobby_path

    big = [Problem(generate_with_witness(p, 1, 9)[0][0], load_model(p)) for p in ("ffa-32", "br-100")]
    small = [Problem(generate_with_witness(p, 1, 9)[0][0], load_model(p)) for p in ("12v12-deep", "3v3")]
    assert all(pb.instance.n * pb.instance.teams >= LOBBY_MIN_VARIABLES and lobby_path(pb) for pb in big)
    assert not any(lobby_path(pb) for pb in small)
    sol = get_solver("surrogate").solve(big[0], Budget.of(400.0))  # model-free MGMatch
    assert sol.method == "surrogate" and sol.status == "feasible"
    assert sol.model_extra["stats"]["policy_path"] == "lobby"
