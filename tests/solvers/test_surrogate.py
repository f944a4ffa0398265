"""The model-free surrogate (engagement gradient → surrogate MIP → polish): the service's fallback."""

from __future__ import annotations

import numpy as np

from mgmatch.core.engagement import engagement_gradient
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.surrogate import GradientPredictor


def _problems(preset: str, count: int, seed: int) -> list[Problem]:
    out = []
    for inst in generate_instances(preset, count, seed):
        name, model = resolve_model(inst)
        out.append(Problem(inst, model, model_name=name))
    return out


def test_gradient_prediction_is_the_scaled_engagement_gradient():
    pr = _problems("3v3", 1, 5)[0]
    (p,) = GradientPredictor().predict([pr])
    g = engagement_gradient(pr.model, pr.embeddings, pr.instance.sizes)
    assert p.shape == (pr.instance.n, pr.instance.teams)
    assert p.min() == 0.0 and p.max() == 1.0
    # an affine rescaling: the ranking of (player, team) pairs is the gradient's
    assert np.array_equal(np.argsort(p, axis=None, kind="stable"), np.argsort(g, axis=None, kind="stable"))


def test_surrogate_answers_are_feasible_and_close_to_the_optimum_without_a_predictor():
    solver = get_solver("surrogate", predictor=object())  # a predictor handed in is ignored
    for pr in _problems("3v3", 6, 11):
        sol = solver.solve(pr, Budget.of(200))
        assert sol.method == "surrogate" and sol.status in ("feasible", "optimal"), sol.status
        t = team_of_from_teams(pr.instance, sol.teams)
        assert pr.checker.feasible(t[None])[0]
        best = get_solver("exact").solve(pr, Budget.of(None))
        assert best.status == "optimal"
        assert sol.objective <= best.objective + 1e-9
        assert sol.objective >= best.objective - 0.05 * abs(best.objective)  # polished, not just any feasible


def test_surrogate_finds_feasible_12v12_pools_quickly():
    solver = get_solver("surrogate")
    for pr in _problems("12v12", 3, 4):
        sol = solver.solve(pr, Budget.of(250))
        assert sol.status in ("feasible", "optimal") and sol.time_ms <= 400
        t = team_of_from_teams(pr.instance, sol.teams)
        assert pr.checker.feasible(t[None])[0]
