"""A learning pool's refit (mgmatch.pipeline.refit): the lineage, the validation split, the explorers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgmatch.core.engagement import parse_engagement
from mgmatch.pipeline import refit as R

F = 3


def _model(w, bias=0.0):
    return {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F,
            "player_layers": [{"weight": np.eye(F).tolist(), "bias": [0.0] * F}],
            "head_layers": [{"weight": [list(w) + [-v for v in w]], "bias": [bias]}]}


def _log(path, n, truth, seed, start=0):
    rng = np.random.default_rng(seed)
    m = parse_engagement(truth)
    with open(path, "w") as f:
        for k in range(start, start + n):
            x = rng.normal(size=(2, 2, F))
            y = float(m.head(m.embed(x.reshape(-1, F)).reshape(2, 2, -1).sum(1).reshape(-1)))
            f.write(json.dumps({"match_id": f"m{k}", "teams": [[{"id": f"p{k}{j}{i}", "features": x[j, i].tolist()}
                                                               for i in range(2)] for j in range(2)],
                                "engagement": y}) + "\n")


def test_validation_is_the_newest_results_once_there_are_enough():
    val, own, seed = R._split_own(1000, 300, 0)
    assert val.tolist() == list(range(970, 1000))            # the newest 10% of the pool's 300 results
    assert own.tolist() == list(range(700, 970)) and seed.tolist() == list(range(700))
    val, own, seed = R._split_own(1000, R.MIN_OWN_VALIDATION - 1, 0)
    assert len(val) == 100 and len(seed) == 0                # a seeded tenth of everything
    assert sorted(val.tolist() + own.tolist()) == list(range(1000))
    assert R._split_own(1000, 10, 0)[0].tolist() == R._split_own(1000, 10, 0)[0].tolist()


@pytest.mark.slow
def test_a_refit_goes_on_training_the_live_model_and_trains_the_explorers(tmp_path):
    truth = _model([1.0, -0.5, 0.25], 0.3)
    _log(tmp_path / "train.jsonl", 300, truth, 1)
    _log(tmp_path / "hold.jsonl", 60, truth, 2, start=1000)
    live = parse_engagement(_model([0.9, -0.4, 0.2], 0.25))
    res = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], live, epochs=30, seed=3, explorers=2)
    cand = parse_engagement(res.model)
    # a warm start keeps the live model's form (here linear) and moves toward the truth
    assert len(cand.head_layers) == 1 and len(cand.player_layers) == 1
    assert res.candidate_mse < res.live_mse
    assert len(res.explorers) == 2
    ex = [parse_engagement(e) for e in res.explorers]
    w = [np.asarray(m.head_layers[0].weight) for m in (cand, *ex)]
    assert not np.allclose(w[1], w[2]) and not np.allclose(w[0], w[1])   # jittered, bootstrapped lineages
    # the next refit continues each explorer's own lineage; the same inputs give the same models
    again = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], live, epochs=30, seed=3, explorers=2)
    assert again.model == res.model and again.explorers == res.explorers
    nxt = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], cand, epochs=2, seed=4, explorers=2,
                  live_explorers=ex)
    for old, new in zip(ex, nxt.explorers, strict=True):
        moved = np.abs(np.asarray(parse_engagement(new).head_layers[0].weight) - np.asarray(old.head_layers[0].weight))
        assert moved.max() < 0.2   # two epochs on from where it was, not a jitter of the candidate


def _hidden_model(rng, scale=0.1):
    """A one-hidden-layer model of small random weights (knows nothing yet)."""
    return {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F,
            "player_layers": [{"weight": np.eye(F).tolist(), "bias": [0.0] * F}],
            "head_layers": [{"weight": (scale * rng.normal(size=(4, 2 * F))).tolist(), "bias": [0.0] * 4},
                            {"weight": (scale * rng.normal(size=(1, 4))).tolist(), "bias": [0.0]}]}


@pytest.mark.slow
def test_the_first_refit_adds_balance_units_which_learn_what_imbalance_costs(tmp_path):
    """Engagement falls with the teams' imbalance in feature 0 (|S0_a − S0_b|): the refit that widens the
    live model with balance units puts the effect on feature 0's units and predicts better than the one
    that keeps the model's shape."""
    truth = {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F,
             "player_layers": [{"weight": np.eye(F).tolist(), "bias": [0.0] * F}],
             "head_layers": [{"weight": [[1, 0, 0, -1, 0, 0], [-1, 0, 0, 1, 0, 0]], "bias": [0.0, 0.0]},
                             {"weight": [[-1.0, -1.0]], "bias": [1.0]}]}
    _log(tmp_path / "train.jsonl", 300, truth, 1)
    _log(tmp_path / "hold.jsonl", 100, truth, 2, start=1000)
    live = parse_engagement(_hidden_model(np.random.default_rng(0)))
    kw = {"epochs": 30, "seed": 3}
    wide = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], live, **kw)
    plain = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], live, balance=False, **kw)
    assert wide.model["training"]["balance_units"] == 2 * F and "balance_units" not in plain.model["training"]
    assert len(parse_engagement(plain.model).head_layers[0].bias) == 4
    assert wide.candidate_mse < plain.candidate_mse < 0.01 * wide.live_mse
    # what an imbalance of 1 in feature 0 costs, with the rest balanced: 1 in truth
    m = parse_engagement(wide.model)
    base = np.zeros((2, 2, F))
    off = base.copy()
    off[0, 0, 0] = 1.0
    cost = [float(m.head(m.embed(x.reshape(-1, F)).reshape(2, 2, -1).sum(1).reshape(-1))) for x in (base, off)]
    assert cost[0] - cost[1] == pytest.approx(1.0, abs=0.25)
    # the lineage is widened once: the next refit keeps its shape and its record
    nxt = R.refit([], [tmp_path / "train.jsonl"], [tmp_path / "hold.jsonl"], parse_engagement(wide.model), epochs=2, seed=4)
    assert nxt.model["training"]["balance_units"] == 2 * F
    assert len(nxt.model["head_layers"][0]["bias"]) == 4 + 2 * F


def test_a_given_split_needs_separate_held_out_matches(tmp_path):
    """fit_data with explicit (training, validation) indexes never draws a holdout from the same data."""
    from mgmatch.pipeline.fit_engagement import LogFitConfig, fit_data

    truth = _model([1.0, -0.5, 0.25], 0.3)
    _log(tmp_path / "train.jsonl", 40, truth, 1)
    data = R.read_logs([tmp_path / "train.jsonl"], {tmp_path / "train.jsonl"})
    with pytest.raises(ValueError, match="hold_data"):
        fit_data(data, LogFitConfig(epochs=1), split=(np.arange(30), np.arange(30, 40)))
