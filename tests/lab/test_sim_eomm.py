"""EOMM's simulation: the shipped churn model is the seeded fit, and Table 2's ordering holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgmatch.lab.sim_eomm import METHODS, fit_churn_model, make_world, simulate, true_churn
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
    # the bar: EOMM ahead of Random, Skill and Worst at Welch p < 0.01
    res = simulate([100], rounds=100, seed=0, churn=DEFAULT_CHURN, world_size=5000)
    e = res["pools"]["100"]
    assert e["EOMM"] > e["SkillMM"] and e["EOMM"] > e["RandomMM"]
    assert min(e["SkillMM"], e["RandomMM"]) > e["WorstMM"]
    assert all(p < 0.01 for p in e["welch_p"].values()), e["welch_p"]
    assert all(len(e["per_round"][m]) == 100 for m in METHODS)


def test_cli_validates_and_writes_json(tmp_path):
    from mgmatch.cli import main

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


def test_bench_eomm_times_every_stage_and_agrees_with_the_whole_graph_blossom(tmp_path):
    from mgmatch.cli import main
    from mgmatch.lab.bench_eomm import STAGES, run

    res = run(pool=40, pools=3, seed=2, dense=True, world_size=2000)
    assert set(STAGES) | {"dense_blossom"} == set(res["ms"])
    # the pruning keeps a small part of the graph; the stages add up to at most the total
    assert 0 < res["edges_kept_mean"] < res["edges_total"] == 40 * 39 // 2
    assert res["ms"]["weights"]["mean"] + res["ms"]["duals"]["mean"] + res["ms"]["blossom"]["mean"] \
        <= res["ms"]["total"]["mean"] + 1e-6
    with pytest.raises(SystemExit) as err:
        main(["bench", "eomm", "--pool", "17"])
    assert err.value.code == 2
    out = tmp_path / "b.json"
    with pytest.raises(SystemExit) as err:
        main(["bench", "eomm", "--pool", "20", "--pools", "2", "--json", str(out)])
    assert err.value.code == 0
    assert json.loads(out.read_text())["ms"]["total"]["p50"] > 0
