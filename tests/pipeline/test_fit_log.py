"""``mgmatch fit-engagement --logs``: a studio's match log (spec §5) → its engagement model (spec §3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from own_game import Game, match_lines, write_log

from mgmatch.cli import main
from mgmatch.core.engagement import parse_engagement
from mgmatch.pipeline.fit_engagement import LogFitConfig, fit_log
from mgmatch.pipeline.matchlog import load_matchlog

GAME = Game()  # 3 teams of 2, 5 features


def _cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ex:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return ex.value.code, out.out, out.err


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return write_log(tmp_path_factory.mktemp("log") / "own.jsonl", GAME, 1500, seed=1)


@pytest.fixture(scope="module")
def fitted(log):
    return fit_log([log], LogFitConfig(epochs=12, patience=0, seed=5, batch=64, threads=1))


def test_teams_and_features_come_from_the_log_and_part_is_held_out(fitted):
    r = fitted.record
    assert (r["teams"], r["feature_dim"]) == (3, 5) and fitted.model.teams == 3 and fitted.model.feature_dim == 5
    assert r["team_sizes"] == {"min": [2, 2, 2], "max": [2, 2, 2]}
    m = r["matches"]
    assert m == {"total": 1500, "train": 1215, "validation": 135, "holdout": 150}
    # the held-out numbers are those of the held-out matches, recomputed here
    y, p = fitted.holdout.y, fitted.holdout_pred
    assert len(y) == 150
    assert r["holdout"]["mse"] == pytest.approx(float(np.mean((p - y) ** 2)), abs=1e-6)
    assert r["holdout"]["r2"] == pytest.approx(1 - np.mean((p - y) ** 2) / y.var(), abs=1e-4)
    # a learnable game: far better than predicting the mean
    assert r["holdout"]["r2"] > 0.5, r["holdout"]
    assert r["epochs_run"] == 12 and r["seed"] == 5 and r["date"].endswith("Z")


def test_the_model_file_scores_matches_as_the_network(fitted):
    model = parse_engagement(json.loads(json.dumps(fitted.model.to_json())))
    hold = fitted.holdout
    net = fitted.net.double().eval()
    with torch.no_grad():
        ref = net(torch.as_tensor(hold.features[:20], dtype=torch.float64)).numpy()
    fitted.net.float()
    got = [float(model.evaluate(model.embed(hold.features[m].reshape(6, 5).astype(np.float64)),
                                np.repeat(np.arange(3), 2))) for m in range(20)]
    assert np.max(np.abs(np.asarray(got) - ref)) <= 1e-5
    assert np.allclose(got, fitted.holdout_pred[:20], atol=1e-4)


def test_the_split_is_seeded(log):
    cfg = LogFitConfig(epochs=1, patience=0, seed=9, threads=1)
    a, b = fit_log([log], cfg), fit_log([log], cfg)
    assert a.model.to_json()["head_layers"] == b.model.to_json()["head_layers"]
    assert np.array_equal(a.holdout.y, b.holdout.y)
    c = fit_log([log], LogFitConfig(epochs=1, patience=0, seed=10, threads=1))
    assert not np.array_equal(a.holdout.y, c.holdout.y)


def test_early_stopping_keeps_the_best_validation_epoch(log):
    r = fit_log([log], LogFitConfig(epochs=40, patience=1, min_delta=0.0, lr=0.05, seed=2, threads=1)).record
    curve = [e["val_mse"] for e in r["curve"]]
    assert r["epochs_run"] < 40 and len(curve) == r["epochs_run"]
    assert r["best_epoch"] == int(np.argmin(curve)) + 1
    assert r["validation"]["mse"] == pytest.approx(min(curve), rel=1e-3)


def test_team_sizes_may_differ_between_teams_and_lines(tmp_path):
    """Sum pooling ignores the padding of a smaller team: the file's numpy model agrees."""
    g = Game(teams=2, sizes=(3, 2), feature_dim=4)
    lines = list(match_lines(g, 400, seed=0))
    for line in lines[::7]:  # a player left early
        line["teams"][0].pop()
    path = tmp_path / "ragged-teams.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    res = fit_log([path], LogFitConfig(epochs=2, patience=0, threads=1))
    assert res.record["team_sizes"] == {"min": [2, 2], "max": [3, 2]}
    data = load_matchlog([path])
    model = res.model
    for m in (0, 1):  # line 1 (index 0) lost a player; line 2 did not
        sizes = data.sizes[m]
        X = np.concatenate([data.features[m, j, :sizes[j]] for j in range(2)]).astype(np.float64)
        team_of = np.repeat(np.arange(2), sizes)
        want = float(model.evaluate(model.embed(X), team_of))
        with torch.no_grad():
            got = float(res.net(torch.from_numpy(data.features[m:m + 1]), torch.from_numpy(data.mask([m])))[0])
        assert got == pytest.approx(want, abs=1e-4)
    assert data.sizes[0].tolist() == [2, 2] and data.sizes[1].tolist() == [3, 2]


def test_cli_writes_the_model_and_a_plot(log, tmp_path, capsys):
    out, png = tmp_path / "eng.json", tmp_path / "fit.png"
    code, stdout, err = _cli(capsys, "fit-engagement", "--logs", log, "--out", out, "--epochs", "3", "--seed", "4",
                             "--head-layers", "8,8", "--player-layers", "16", "--embed-dim", "6", "--batch", "64",
                             "--name", "own", "--plot", png, "--quiet")
    assert code == 0, err
    summary = json.loads(stdout)
    m = parse_engagement(json.loads(out.read_text()))
    assert m.name == "own" and m.embed_dim == 6
    assert [len(layer.bias) for layer in m.head_layers] == [8, 8, 1]
    assert [len(layer.bias) for layer in m.player_layers] == [16, 6]
    tr = m.training
    assert tr["command"] == (f"mgmatch fit-engagement --logs {log} --seed 4 --epochs 3 --embed-dim 6 "
                             f"--player-layers 16 --head-layers 8,8 --batch 64 --name own --out {out}")
    assert summary["holdout"] == tr["holdout"] and summary["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))


def _good_lines() -> list[dict]:
    return list(match_lines(GAME, 6, seed=3))


def _bad(kind: str) -> tuple[str, int, str]:
    """A log text with one defect, the line that has it, and the field the error must name."""
    lines = _good_lines()
    raw = None
    if kind == "missing engagement":
        del lines[2]["engagement"]
        line, field = 3, "engagement"
    elif kind == "missing features":
        del lines[1]["teams"][2][1]["features"]
        line, field = 2, "teams[2][1].features"
    elif kind == "missing id":
        del lines[4]["teams"][0][0]["id"]
        line, field = 5, "teams[0][0].id"
    elif kind == "ragged features":
        lines[3]["teams"][1][0]["features"].append(0.5)
        line, field = 4, "teams[1][0].features"
    elif kind == "one team":
        lines[2]["teams"] = lines[2]["teams"][:1]
        line, field = 3, "teams"
    elif kind == "teams change":
        lines[5]["teams"] = lines[5]["teams"][:2]
        line, field = 6, "teams"
    elif kind == "non-numeric engagement":
        lines[1]["engagement"] = "high"
        line, field = 2, "engagement"
    elif kind == "boolean engagement":
        lines[1]["engagement"] = True
        line, field = 2, "engagement"
    elif kind == "NaN engagement":
        lines[3]["engagement"] = 987654.25
        raw = json.dumps(lines[3]).replace("987654.25", "NaN")
        line, field = 4, "engagement"
    elif kind == "infinite feature":
        lines[3]["teams"][0][1]["features"][2] = 987654.25
        raw = json.dumps(lines[3]).replace("987654.25", "-Infinity")
        line, field = 4, "teams[0][1].features"
    elif kind == "string feature":
        lines[2]["teams"][0][1]["features"][3] = "7"
        line, field = 3, "teams[0][1].features[3]"
    elif kind == "bad JSON":
        raw = json.dumps(lines[4])[:-5]
        line, field = 5, "JSON"
    elif kind == "no format on line 1":
        del lines[0]["format"]
        line, field = 1, "format"
    elif kind == "player twice":
        lines[1]["teams"][1][0]["id"] = lines[1]["teams"][0][0]["id"]
        line, field = 2, "teams[1][0].id"
    else:
        raise AssertionError(kind)
    texts = [json.dumps(x) for x in lines]
    if raw is not None:
        texts[line - 1] = raw
    return "\n".join(texts) + "\n", line, field


BAD = ["missing engagement", "missing features", "missing id", "ragged features", "one team", "teams change",
       "non-numeric engagement", "boolean engagement", "NaN engagement", "infinite feature", "string feature",
       "bad JSON", "no format on line 1", "player twice"]


@pytest.mark.parametrize("kind", BAD)
def test_a_bad_line_is_exit_2_naming_line_and_field_and_nothing_is_written(kind, tmp_path, capsys):
    text, line, field = _bad(kind)
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    out, png = tmp_path / "out" / "eng.json", tmp_path / "out" / "fit.png"
    code, stdout, err = _cli(capsys, "fit-engagement", "--logs", path, "--out", out, "--plot", png, "--epochs", "1",
                             "--quiet")
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"bad.jsonl line {line}" in err and field in err, err
    assert not out.exists() and not png.exists() and not (tmp_path / "out").exists()


def test_a_log_with_a_byte_order_mark_reads_as_without(tmp_path):
    import gzip

    plain = write_log(tmp_path / "plain.jsonl", GAME, 20, seed=2)
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    packed = tmp_path / "marked.jsonl.gz"
    packed.write_bytes(gzip.compress(marked.read_bytes()))
    want = load_matchlog([plain])
    for path in (marked, packed):
        got = load_matchlog([path])
        assert np.array_equal(got.features, want.features) and np.array_equal(got.y, want.y)


def test_empty_log_and_missing_file_are_exit_2(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    code, _, err = _cli(capsys, "fit-engagement", "--logs", tmp_path / "empty.jsonl", "--out", tmp_path / "e.json")
    assert code == 2 and "no matches" in err and not (tmp_path / "e.json").exists()
    code, _, err = _cli(capsys, "fit-engagement", "--logs", tmp_path / "nope.jsonl", "--out", tmp_path / "e.json")
    assert code == 2 and "nope.jsonl" in err
    code, _, err = _cli(capsys, "fit-engagement", "--out", tmp_path / "e.json")
    assert code == 2 and "--logs" in err
    code, _, err = _cli(capsys, "fit-engagement", "--logs", tmp_path / "empty.jsonl", "--head-layers", "8,x",
                        "--out", tmp_path / "e.json")
    assert code == 2 and "--head-layers" in err


def test_an_empty_log_file_with_progress_bars_is_exit_2_with_one_line(tmp_path, capsys):
    """A zero-byte log: the progress bar had no total, and ``if bar:`` raised tqdm's TypeError."""
    (tmp_path / "zero.jsonl").write_bytes(b"")
    code, _, err = _cli(capsys, "fit-engagement", "--logs", tmp_path / "zero.jsonl", "--out", tmp_path / "e.json")
    assert code == 2 and "no matches" in err and not (tmp_path / "e.json").exists()
    assert len(err.strip().splitlines()) == 1, err
