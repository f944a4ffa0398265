"""EOMM's simulation: the shipped churn model is the seeded fit, and Table 2's ordering holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgmatch.pipeline.sim_eomm import METHODS, fit_churn_model, make_world, simulate, true_churn
from mgmatch.solvers.eomm import DEFAULT_CHURN


def test_default_churn_model_is_the_seed0_fit():
    m = fit_churn_model(seed=0)
    assert np.allclose(m.coef, DEFAULT_CHURN.coef, atol=1e-3)
    assert m.intercept == pytest.approx(DEFAULT_CHURN.intercept, abs=1e-2)


def test_world_is_seeded_and_losses_hurt_retention():
    a, b = make_world(500, seed=3), make_world(500, seed=3)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(np.nan_to_num(a.history), np.nan_to_num(b.history))
    assert (true_churn(a, "L") > true_churn(a, "W")).all()


def test_table2_ordering_for_fixed_seed():
    res = simulate([40], rounds=40, seed=0, churn=DEFAULT_CHURN, world_size=5000)
    e = res["pools"]["40"]
    assert e["EOMM"] > e["SkillMM"] and e["EOMM"] > e["RandomMM"]
    assert min(e["SkillMM"], e["RandomMM"]) > e["WorstMM"]
    assert e["welch_p"]["WorstMM"] < 0.05
    assert all(len(e["per_round"][m]) == 40 for m in METHODS)


def test_cli_validates_and_writes_json(tmp_path):
    from mgmatch.app.cli import main

    with pytest.raises(SystemExit) as err:
        main(["simulate", "eomm", "--pool", "7"])
    assert err.value.code == 2
    out = tmp_path / "t.json"
    with pytest.raises(SystemExit) as err:
        main(["simulate", "eomm", "--pool", "10", "--rounds", "3", "--seed", "1", "--json", str(out)])
    assert err.value.code == 0
    doc = json.loads(out.read_text())
    assert set(METHODS) <= set(doc["pools"]["10"])
    timing = doc["pools"]["10"]["eomm_pairing_ms"]
    assert 0 < timing["p50"] <= timing["p95"] <= timing["max"] and doc["wall_s"] > 0
