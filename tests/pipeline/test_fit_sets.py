"""``mgmatch fit-engagement --team-layers``: the set form (spec §3 ``team_layers``) fitted from a
match log of a many-team game, exported, and read back as the same function."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from own_game import Game, write_log

from mgmatch.cli import main
from mgmatch.core.engagement import parse_engagement
from mgmatch.pipeline.fit_engagement import LogFitConfig, fit_log

GAME = Game(teams=10, sizes=(2,) * 10, feature_dim=4)   # engagement falls with the spread of team strengths


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return write_log(tmp_path_factory.mktemp("log") / "ffa.jsonl", GAME, 1200, seed=2)


@pytest.fixture(scope="module")
def fitted(log):
    cfg = LogFitConfig(epochs=15, patience=0, seed=3, batch=64, player_hidden=(16,), embed_dim=4,
                       team_hidden=(12,), team_pool="mean", head_hidden=(8,))
    return fit_log([log], cfg)


def test_the_set_form_is_fitted_exported_and_scores_as_the_network(fitted):
    model = parse_engagement(json.loads(json.dumps(fitted.model.to_json())))
    assert model.team_pool == "mean" and [len(layer.bias) for layer in model.team_layers] == [12]
    assert [len(layer.weight[0]) for layer in model.head_layers] == [12, 8]  # the head reads the pooled teams
    assert fitted.record["architecture"]["team_layers"] == [4, 12]
    hold = fitted.holdout
    net = fitted.net.double().eval()
    with torch.no_grad():
        ref = net(torch.as_tensor(hold.features[:20], dtype=torch.float64)).numpy()
    fitted.net.float()
    team_of = np.repeat(np.arange(10), 2)
    got = [float(model.evaluate(model.embed(hold.features[m].reshape(20, 4).astype(np.float64)), team_of))
           for m in range(20)]
    assert np.max(np.abs(np.asarray(got) - ref)) <= 1e-5
    # it learned something of a game whose engagement depends on the teams only as a set
    assert fitted.record["holdout"]["r2"] > 0.5, fitted.record["holdout"]


def test_cli_team_layers_and_bad_values(log, tmp_path, capsys):
    out = tmp_path / "eng.json"

    def run(*args):
        with pytest.raises(SystemExit) as ex:
            main([str(a) for a in ("fit-engagement", "--logs", log, "--out", out, "--quiet", *args)])
        got = capsys.readouterr()
        return ex.value.code, got.err

    code, err = run("--epochs", "2", "--team-layers", "6", "--embed-dim", "3", "--player-layers", "8")
    assert code == 0, err
    m = parse_engagement(json.loads(out.read_text()))
    assert m.team_pool == "sum" and [len(layer.bias) for layer in m.team_layers] == [6]
    assert "--team-layers 6" in m.training["command"]
    out.unlink()
    for args, needle in ((("--team-layers", "x"), "--team-layers"), (("--team-layers", ""), "--team-layers"),
                         (("--team-layers", "8", "--team-pool", "max"), "--team-pool")):
        code, err = run(*args)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()
