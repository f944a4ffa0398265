"""CIP text read by SCIP (mgmatch.solvers.cip) and the first-solution solve (real SCIP)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from pyscipopt import Model

from mgmatch.solvers.cip import CipText
from mgmatch.solvers.mip import MipModel, new_model

_spec = importlib.util.spec_from_file_location("_exact_helpers", Path(__file__).with_name("test_exact.py"))
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


def _solve(cip: CipText) -> tuple[Model, list]:
    m = new_model("default")
    v = cip.read(m)
    m.optimize()
    return m, v


def test_rows_bounds_objective_and_offset_are_read_back_exactly():
    cip = CipText()
    a, b = cip.add_vars(2)                     # binaries
    y = cip.add_var("C", -1.5, 2.25)           # continuous with its bounds
    # a repeated variable gets the sum of its coefficients; zero terms vanish
    cip.add_row([a, b, a, y], [1.0, 1.0, 1.0, 0.0], "<=", 2.0)          # 2a + b ≤ 2
    cip.add_row([y, a], [1.0, -0.1], ">=", -1.0)                         # y ≥ 0.1a − 1
    cip.add_row([b], [1.0], "==", 1.0)
    cip.set_objective({a: 3.0, b: 1e-7, y: -1 / 3}, offset=0.125)       # maximize
    m, (va, vb, vy) = _solve(cip)
    assert m.getStatus() == "optimal"
    # b = 1 forces a = 0 (2a + b ≤ 2 allows a ≤ 0.5); y at its lower bound −1 (bound −1.5 cut by the row)
    assert (round(m.getVal(va)), round(m.getVal(vb))) == (0, 1)
    assert m.getVal(vy) == pytest.approx(-1.0)
    assert m.getObjVal() == pytest.approx(1e-7 + 1 / 3 + 0.125, abs=1e-12)
    assert (vy.getLbOriginal(), vy.getUbOriginal()) == (-1.5, 2.25)
    assert va.vtype() == "BINARY" and vy.vtype() == "CONTINUOUS"


def test_variables_come_back_in_the_order_added_though_scip_sorts_them_by_type():
    cip = CipText()
    order = [cip.add_var("C", 0, 5), cip.add_var("B"), cip.add_var("C", 0, 7), cip.add_var("B")]
    cip.set_objective({v: 1.0 for v in order})
    m, v = _solve(cip)
    assert [round(m.getVal(x)) for x in v] == [5, 1, 7, 1]
    assert [x.getUbOriginal() for x in v] == [5.0, 1.0, 7.0, 1.0]


def test_an_empty_row_and_an_infeasible_one():
    cip = CipText()
    cip.add_vars(1)
    cip.add_row([], [], "<=", 1.0)      # 0 ≤ 1: holds
    m, _ = _solve(cip)
    assert m.getStatus() == "optimal"
    cip.add_row([0], [0.0], ">=", 1.0)  # 0 ≥ 1: never holds
    m, _ = _solve(cip)
    assert m.getStatus() == "infeasible"


def test_bad_rows_are_refused():
    cip = CipText()
    cip.add_vars(2)
    with pytest.raises(ValueError, match="sense"):
        cip.add_row([0], [1.0], "<", 1.0)
    with pytest.raises(ValueError, match="2 variables but 1 coefficients"):
        cip.add_row([0, 1], [1.0], "<=", 1.0)
    with pytest.raises(ValueError, match="kind"):
        cip.add_vars(1, "I")
    with pytest.raises(ValueError, match="out of range"):
        cip.add_row([0, 2], [1.0, 1.0], "<=", 1.0)
    with pytest.raises(ValueError, match="out of range"):
        cip.add_row([-1], [1.0], "<=", 1.0)
    with pytest.raises(ValueError, match="NaN"):
        cip.add_row([0], [float("nan")], "<=", 1.0)


def test_infinite_bounds_are_read_back():
    cip = CipText()
    y = cip.add_var("C", -float("inf"), float("inf"))
    x = cip.add_var("C", 0.0, float("inf"))
    cip.add_row([y], [1.0], "<=", 3.5)
    cip.add_row([x, y], [1.0, -1.0], "<=", 1.0)
    cip.set_objective({y: 1.0, x: 1.0})
    m, (vy, vx) = _solve(cip)
    assert m.getStatus() == "optimal" and m.getObjVal() == pytest.approx(3.5 + 4.5)
    assert m.isInfinity(-vy.getLbOriginal()) and m.isInfinity(vx.getUbOriginal())


def test_the_file_holds_no_player_id():
    p = helpers.random_problem(1, 2, [2, 2], 6, [])
    cip = CipText()
    cip.add_vars(p.compiled.n_vars)
    from mgmatch.solvers.mip import write_rules

    write_rules(cip, p.compiled)
    text = cip.text()
    assert not any(player.id in text for player in p.instance.players)


@pytest.mark.parametrize("seed", range(4))
def test_first_solution_then_the_same_optimum_as_one_solve(seed):
    """solve_first stops at SCIP's first solution (depth first) and leaves the model to go on:
    continuing reaches the optimum that one plain solve proves."""
    p = helpers.random_problem(seed, 2, [3, 3], 9, ["roles", "avoid", "if", "party_together"], plant=True)
    rng = np.random.default_rng(seed)
    pv = rng.random((p.instance.n, p.instance.teams))
    plain = MipModel.build(p.compiled, checker=p.checker, fast=True)
    plain.set_linear_objective(pv)
    ref = plain.solve()
    mip = MipModel.build(p.compiled, checker=p.checker, fast=True)
    mip.set_linear_objective(pv)
    first = mip.solve_first(10.0)
    if ref.status == "infeasible":
        assert first.status == "infeasible" and first.team_of is None
        return
    assert first.status in ("sollimit", "optimal") and first.team_of is not None
    assert p.checker.feasible(first.team_of[None])[0]
    assert mip.model.getParam("limits/solutions") == -1
    mip.set_time_limit(mip.model.getSolvingTime() + 10.0)
    rest = mip.solve()
    assert rest.status == "optimal"
    assert rest.objective == pytest.approx(ref.objective, abs=1e-6)
