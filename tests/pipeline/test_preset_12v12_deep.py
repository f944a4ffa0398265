"""The ``12v12-deep`` preset (the paper's hard regime): its pools, its deeper engagement model, the
predictors shipped for it (trained on its time-limited labels), and every Table 2 method on one of
its big pools."""

from __future__ import annotations

import hashlib
import json
import time
from importlib import resources

import numpy as np
import pytest

from mgmatch.core.checker import Checker
from mgmatch.core.presets import PRESETS, generate_with_witness, load_model, model_sha256, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.models.runtime import load_predictor, shipped_names

NAME = "12v12-deep"


@pytest.fixture(scope="module")
def generated():
    return generate_with_witness(NAME, 20, 7)


def test_the_preset_is_the_12v12_game_with_big_pools(generated):
    p, base = PRESETS[NAME], PRESETS["12v12"]
    assert (p.teams, p.team_size, p.feature_dim) == (2, 12, 66)
    assert p.world.slots == base.world.slots and p.world.roles == base.world.roles
    assert p.pool == (60, 100)
    sizes = [inst.n for inst, _ in generated]
    assert min(sizes) >= 60 and max(sizes) <= 100 and max(sizes) >= 90
    model = load_model(NAME)
    for inst, witness in generated:
        assert inst.engagement_model == NAME
        assert resolve_model(inst)[1] is model
        assert Checker(inst).violations(witness) == []
        Problem(inst, model)  # the instance's dims agree with the model


def test_the_engagement_model_has_two_hidden_head_layers_of_64_and_its_record():
    m = load_model(NAME)
    assert [len(layer.bias) for layer in m.head_layers] == [64, 64, 1]
    assert (m.teams, m.feature_dim) == (2, 66)
    t = m.training
    assert t["command"].startswith(f"mgmatch fit-engagement --preset {NAME} ") and "--head-layers 64,64" in t["command"]
    assert "--seed " in t["command"] and t["matches"]["train"] >= 50_000
    assert t["holdout"]["mse"] < 0.3 * t["holdout"]["target_var"]
    # another model than 12v12's: a different objective for the same players
    assert model_sha256(NAME) != model_sha256("12v12")


def test_the_deep_head_was_fitted_sparse_so_scip_proves_its_pools():
    """The head was fitted with an L1 penalty (``--head-l1``): most of its neurons are stable over a
    pool's team formations and need no binary, and SCIP proves a pool's optimum (the unpenalized fit
    left 97–125 of 128 neurons unstable, and most pools unproven after 60 s)."""
    from mgmatch.solvers.mip import MipModel

    m = load_model(NAME)
    assert m.training["head_l1"] > 0 and "--head-l1 " in m.training["command"]
    inst = min((inst for inst, _ in generate_with_witness(NAME, 4, 7)), key=lambda i: i.n)
    p = Problem(inst, m)
    mip = MipModel.build(p.compiled, checker=p.checker, settings="exact")
    st = mip.add_engagement_objective(p)
    assert st["neurons"] == 128 and st["bigm_neurons"] <= 0.4 * st["neurons"], st
    mip.set_time_limit(300.0)  # a safeguard, not a timing: the proof takes about a second
    res = mip.solve()
    assert res.optimal, res.status
    assert p.checker.violations(res.team_of) == []
    assert res.objective == pytest.approx(p.objective(res.team_of), abs=1e-6)


def test_the_shipped_engagement_file_is_the_one_its_predictors_were_trained_for():
    raw = (resources.files("mgmatch.core") / "presets" / f"engagement-{NAME}.json").read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    assert model_sha256(NAME) == sha
    names = [n for n in shipped_names() if n == NAME or n.startswith(NAME + "-")]
    assert NAME in names
    for n in names:
        tr = load_predictor(n).meta["training"]
        assert tr["preset"] == NAME and tr["engagement_model"] == NAME
        assert tr["engagement_sha256"] == sha, f"{n} was trained on labels of another engagement model"
        labels = tr["labels"]
        # the labels were solved under a time limit and keep their gaps
        assert labels["time_limit_s"] > 0 and labels["time_limits_s"] == [labels["time_limit_s"]]
        assert labels["gap_max"] is not None and labels["gap_max"] >= labels["gap_mean"] >= 0
        assert labels["done"] >= 200 and labels["model_sha256"] == sha


@pytest.fixture(scope="module")
def big_pool() -> Problem:
    inst = max((inst for inst, _ in generate_with_witness(NAME, 6, 11)), key=lambda i: i.n)
    name, model = resolve_model(inst)
    return Problem(inst, model, model_name=name)


@pytest.mark.parametrize("method", ["mgmatch", "bgcn", "surrogate", "scip", "random", "optmatch"])
def test_every_table2_method_answers_a_big_deep_pool_feasibly_within_budget(big_pool, method):
    from mgmatch.app.resolve import make_solver
    from mgmatch.solvers.base import Budget

    if method == "bgcn" and f"{NAME}-bgcn" not in shipped_names():
        pytest.skip("no BGCN predictor shipped for 12v12-deep")
    assert big_pool.instance.n >= 90
    limit = 500.0
    solver = make_solver(method, big_pool, seed=0)
    t0 = time.perf_counter()
    sol = solver.solve(big_pool, Budget.of(limit))
    wall = (time.perf_counter() - t0) * 1e3
    assert sol.status in ("feasible", "optimal"), sol.status
    team_of = team_of_from_teams(big_pool.instance, sol.teams)
    assert big_pool.checker.violations(team_of) == []
    assert sol.objective == pytest.approx(big_pool.objective(team_of))
    # the slack only absorbs preemption on a loaded machine, not a stage run past the deadline
    assert wall <= limit + max(30.0, 0.5 * limit), f"{method}: {wall:.1f} ms for a {limit} ms budget"
    assert np.isfinite(sol.objective)


def test_the_shipped_predictors_carry_their_measured_gates():
    """Each shipped mgmatch network was measured against the engagement gradient at 10, 20, 50 and
    100 ms (scripts/interleaved.py --gate): the sidecars carry a verdict per budget, its evidence and
    the command; each verdict follows the rule (network only where it ran, answered as many pools as
    `surrogate` and was ahead on average by more than two standard errors), the solver follows the nearest budget's, and the loaded (and
    batching) predictors carry the gate. 12v12-deep's network, retrained on labels started from
    `surrogate` answers, is ahead where it runs (its first network, trained on 3 s SCIP labels, was
    behind and gated out)."""
    from mgmatch.app.models_hub import BatchingPredictor
    from mgmatch.solvers.policy import gate_verdict

    deep, plain = load_predictor("12v12-deep"), load_predictor("12v12")
    assert deep.gate["use"] == plain.gate["use"] == "network"
    for p in (deep, plain):
        assert p.gate["command"].startswith("python scripts/interleaved.py") and "--gate" in p.gate["command"]
        by = p.gate["by_budget_ms"]
        assert {"10", "20", "50", "100"} <= set(by)
        for b, v in by.items():
            assert {"use", "diff_points", "se_points", "pairs", "network_ran", "answered"} <= set(v)
            ahead = (v["network_ran"] >= 0.5 and v["diff_points"] is not None and v["se_points"] is not None
                     and v["diff_points"] + 2 * v["se_points"] < 0
                     and v["answered"]["mgmatch"] >= v["answered"]["surrogate"])
            assert v["use"] == ("network" if ahead else "gradient"), b  # the verdict follows its own rule
            assert gate_verdict(p.gate, float(b)) == v["use"]
            # read on the machine that measured it (its own pace), each budget reads its own verdict
            assert gate_verdict(p.gate, float(b), p.gate["pace_us"] * 1e-6) == v["use"]
        assert p.gate["pace_us"] > 0  # the measuring machine's tabu pace, which solves scale budgets by
        assert (p.gate["use"] == "network") == any(v["use"] == "network" for v in by.values())
        # strict JSON: no NaN where a budget had too few pairs for a standard error
        json.loads(p.path.with_suffix(".json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in sidecar"))
    # where the network runs on 12v12-deep at 100 ms, it is ahead by more than its standard error
    top = deep.gate["by_budget_ms"]["100"]
    assert top["use"] == "network" and top["diff_points"] + top["se_points"] < 0
    assert deep.meta["training"]["labels"]["start_ms"] > 0  # labels started from a heuristic answer
    batching = BatchingPredictor(deep, "12v12-deep")
    assert batching.gate == deep.gate
