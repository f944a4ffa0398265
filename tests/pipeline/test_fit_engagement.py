"""Fitting the engagement network on simulated history, and its export to the spec JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mgmatch.cli import main
from mgmatch.core.engagement import parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import load_model
from mgmatch.models.engagement_torch import from_engagement_model
from mgmatch.pipeline.fit_engagement import FitConfig, fit


@pytest.fixture(scope="module")
def quick():
    torch.set_num_threads(1)
    return fit(FitConfig("3v3", matches=4000, epochs=5, seed=3, players=4000, holdout_matches=1000, batch=64))


def test_preset_fit_beats_the_target_variance_on_unseen_players(quick):
    h = quick.record["holdout"]
    assert h["mse"] < 0.5 * h["target_var"], h
    pred_const = float(np.mean((quick.holdout.y - quick.holdout.y.mean()) ** 2))
    assert h["mse"] < 0.5 * pred_const
    assert h["world"].startswith("fresh players") and h["matches"] == 1000


def test_preset_training_record(quick):
    r = quick.record
    assert r["command"].startswith("mgmatch fit-engagement --preset 3v3 --matches 4000 --epochs 5 --seed 3")
    assert r["seed"] == 3 and r["matches"]["train"] == 4000 and r["epochs"] == 5
    assert r["architecture"]["head_layers"] == [24, 16, 1]
    assert (r["teams"], r["feature_dim"]) == (2, 196) and r["team_sizes"] == {"min": [3, 3], "max": [3, 3]}
    assert {"mse", "mae", "r2", "target_var"} <= set(r["holdout"]) and r["date"].endswith("Z")
    assert quick.model.name == "3v3" and r["seconds"]["simulate"] >= 0


def test_preset_simulator_writes_spec_match_log_lines():
    from mgmatch.core.presets import PRESETS
    from mgmatch.core.world import matchlog_lines, simulate_history
    from mgmatch.pipeline.matchlog import check_line

    hist = simulate_history(PRESETS["3v3"].world, 200, 5, np.random.default_rng(0))
    lines = [json.loads(t) for t in matchlog_lines(hist)]
    assert lines[0]["format"] == "mgmatch-matchlog/v1" and "format" not in lines[1]
    for n, obj in enumerate(lines, start=1):
        sizes, dim, y = check_line(obj, Path("sim.jsonl"), n, n == 1, 2, 196)
        assert sizes == [3, 3] and dim == 196 and y == pytest.approx(hist.y[n - 1], abs=1e-8)
    ids = [p["id"] for t in lines[2]["teams"] for p in t]
    assert ids == [f"p{i}" for i in hist.teams[2].reshape(-1)]


def test_export_parity_numpy_json_vs_torch(quick, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(quick.model.to_json()))
    model = parse_engagement(json.loads(path.read_text()))
    net = quick.net.double().eval()
    hold = quick.holdout
    idx = np.arange(0, hold.matches, 40)
    with torch.no_grad():
        ref = net(torch.as_tensor(hold.features[idx], dtype=torch.float64)).numpy()
    D, K = hold.features.shape[1:3]
    got = np.array([float(model.evaluate(model.embed(hold.features[m].reshape(D * K, -1).astype(np.float64)),
                                         np.repeat(np.arange(D), K))) for m in idx])
    assert np.max(np.abs(got - ref)) <= 1e-5
    quick.net.float()


@pytest.mark.parametrize("name", ["3v3", "12v12", "12v12-deep"])
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
        fit(FitConfig("3v3", matches=10, epochs=1, head_hidden=(16, 0)))
    with pytest.raises(InvalidInput):
        fit(FitConfig("3v3", matches=10, epochs=1, head_hidden=(512,)))


def _head_l1_norm(net) -> float:
    return float(sum(float(m.weight.detach().abs().sum()) for m in net.head if isinstance(m, torch.nn.Linear)))


def test_head_l1_makes_a_sparser_head_that_still_fits_and_is_recorded(quick):
    torch.set_num_threads(1)
    sparse = fit(FitConfig("3v3", matches=4000, epochs=5, seed=3, players=4000, holdout_matches=1000, batch=64,
                           head_l1=3e-3))
    # the same data, seed and schedule: only the penalty differs
    assert _head_l1_norm(sparse.net) < 0.8 * _head_l1_norm(quick.net)
    h = sparse.record["holdout"]
    assert h["mse"] < 0.5 * h["target_var"], h
    assert sparse.record["head_l1"] == 3e-3 and "Σ|head weights|" in sparse.record["loss"]
    assert quick.record["head_l1"] == 0.0 and quick.record["loss"] == "mse"


def test_bad_head_l1_is_invalid_input(tmp_path, capsys):
    for bad in (-1e-3, float("nan"), float("inf")):
        with pytest.raises(InvalidInput) as ex:
            fit(FitConfig("3v3", matches=10, epochs=1, head_l1=bad))
        assert ex.value.field == "head_l1"
    with pytest.raises(SystemExit) as ex:
        main(["fit-engagement", "--preset", "3v3", "--head-l1", "-0.1", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and len(err.strip().splitlines()) == 1 and "--head-l1" in err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("args, names", [
    (["--seed", "-1"], "--seed"),
    (["--out", "{tmp}"], "--out"),                        # a directory
    (["--out", "/proc/m.json"], "--out"),                  # cannot be written
])
def test_fit_cli_refuses_a_bad_seed_or_out_before_fitting(tmp_path, capsys, args, names):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    base = ["fit-engagement", "--preset", "3v3", "--matches", "50", "--epochs", "1", "--quiet"]
    if "--out" not in args:
        base += ["--out", str(tmp_path / "m.json")]
    with pytest.raises(SystemExit) as ex:
        main(base + args)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and len(err.strip().splitlines()) == 1 and names in err, err
    assert not (tmp_path / "m.json").exists()


def test_preset_fit_cli_writes_a_model_and_its_log_and_rejects_bad_input(tmp_path, capsys):
    out, log = tmp_path / "m.json", tmp_path / "sim.jsonl"
    with pytest.raises(SystemExit) as ex:
        main(["fit-engagement", "--preset", "12v12", "--matches", "300", "--epochs", "1", "--players", "2000",
              "--holdout", "200", "--quiet", "--write-log", str(log), "--out", str(out)])
    assert ex.value.code == 0, capsys.readouterr().err
    m = parse_engagement(json.loads(out.read_text()))
    assert (m.teams, m.feature_dim) == (2, 66)
    assert m.training["command"].endswith(f"--out {out}") and m.training["logs"] == [str(log)]
    assert len(log.read_text().splitlines()) == 300
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
