"""Fitting the engagement network on simulated history, and its export to the spec JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mgmatch.app.cli import main
from mgmatch.core.engagement import parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import load_model
from mgmatch.models.engagement_torch import from_engagement_model
from mgmatch.pipeline.fit_engagement import FitConfig, fit


@pytest.fixture(scope="module")
def quick():
    torch.set_num_threads(1)
    return fit(FitConfig("3v3", matches=6000, epochs=4, seed=3, players=6000, holdout_matches=2000))


def test_fit_beats_the_target_variance_on_unseen_players(quick):
    h = quick.record["holdout"]
    assert h["mse"] < 0.5 * h["target_var"], h
    pred_const = float(np.mean((quick.holdout.y - quick.holdout.y.mean()) ** 2))
    assert h["mse"] < 0.5 * pred_const


def test_training_record(quick):
    r = quick.record
    assert r["command"].startswith("mgmatch fit-engagement --preset 3v3 --matches 6000 --epochs 4 --seed 3")
    assert r["seed"] == 3 and r["matches"] == 6000 and r["epochs"] == 4
    assert r["architecture"]["head_layers"] == [24, 16, 1]
    assert {"mse", "mae", "target_var"} <= set(r["holdout"]) and r["date"].endswith("Z")


def _numpy_engagement(model, hist, m: int) -> float:
    D, K = hist.teams.shape[1:]
    emb = model.embed(hist.features[hist.teams[m].reshape(-1)].astype(np.float64))
    return float(model.evaluate(emb, np.repeat(np.arange(D), K)))


def test_export_parity_numpy_json_vs_torch(quick, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(quick.model.to_json()))
    model = parse_engagement(json.loads(path.read_text()))
    net = quick.net.double().eval()
    hist = quick.holdout
    idx = np.arange(0, len(hist.y), 40)
    with torch.no_grad():
        X = torch.as_tensor(hist.features[hist.teams[idx]], dtype=torch.float64)
        ref = net(X).numpy()
    got = np.array([_numpy_engagement(model, hist, m) for m in idx])
    assert np.max(np.abs(got - ref)) <= 1e-5
    quick.net.float()


@pytest.mark.parametrize("name", ["3v3", "12v12"])
def test_shipped_model_round_trips_through_torch(name):
    from mgmatch.core.presets import PRESETS
    from mgmatch.core.world import features, sample_population

    model = load_model(name)
    p = PRESETS[name]
    rng = np.random.default_rng(0)
    X = features(p.world, sample_population(p.world, 2 * p.team_size, rng), rng)
    net = from_engagement_model(model).double().eval()
    with torch.no_grad():
        ref = float(net(torch.as_tensor(X.reshape(1, 2, p.team_size, -1)))[0])
    got = float(model.evaluate(model.embed(X), np.repeat([0, 1], p.team_size)))
    assert abs(got - ref) <= 1e-5


def test_bad_fit_config_is_invalid_input():
    with pytest.raises(InvalidInput):
        fit(FitConfig("5v5", matches=10, epochs=1))
    with pytest.raises(InvalidInput):
        fit(FitConfig("3v3", matches=0, epochs=1))
    with pytest.raises(InvalidInput):
        fit(FitConfig("3v3", matches=10, epochs=1, head_hidden=(16, 16)))


def test_fit_cli_writes_a_model_and_rejects_bad_input(tmp_path, capsys):
    out = tmp_path / "m.json"
    with pytest.raises(SystemExit) as ex:
        main(["fit-engagement", "--preset", "12v12", "--matches", "600", "--epochs", "1", "--players", "2000",
              "--holdout", "300", "--quiet", "--out", str(out)])
    assert ex.value.code == 0, capsys.readouterr().err
    m = parse_engagement(json.loads(out.read_text()))
    assert (m.teams, m.feature_dim) == (2, 66)
    assert m.training["command"].endswith(f"--out {out}")
    capsys.readouterr()
    with pytest.raises(SystemExit) as ex:
        main(["fit-engagement", "--preset", "7v7", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and len(err.strip().splitlines()) == 1 and "7v7" in err


def test_enumerate_assignments_counts_every_ordered_split():
    from math import comb

    from mgmatch.pipeline.fit_engagement import enumerate_assignments

    T = enumerate_assignments(8, 2, 3)
    assert T.shape == (comb(8, 3) * comb(5, 3), 8)
    assert len({t.tobytes() for t in T}) == len(T)
    assert ((T == 0).sum(1) == 3).all() and ((T == 1).sum(1) == 3).all()
