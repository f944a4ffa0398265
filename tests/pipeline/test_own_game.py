"""Bring your own game, end to end, on a generated game that is not a preset (3 teams of 2, 5 features).

match log → ``fit-engagement`` → pools → ``label`` → ``train`` (a few epochs) → ``solve --method
mgmatch`` with the game's own files → ``check``: feasible.
"""

from __future__ import annotations

import json

import pytest
from own_game import Game, write_log, write_pools

from mgmatch.cli import main
from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import parse_instance, read_json
from mgmatch.core.problem import Problem
from mgmatch.pipeline.dataset import ENGAGEMENT_FILE, load_dataset, read_manifest

GAME = Game(teams=3, sizes=(2, 2, 2), feature_dim=5, seed=11)


def _cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ex:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return ex.value.code, out.out, out.err


def test_log_to_model_to_labels_to_network_to_a_feasible_mgmatch_solve(tmp_path, capsys):
    log = write_log(tmp_path / "own.jsonl", GAME, 1200, seed=0)
    eng = tmp_path / "eng.json"
    code, _, err = _cli(capsys, "fit-engagement", "--logs", log, "--out", eng, "--epochs", "6", "--batch", "64",
                        "--threads", "1", "--quiet")
    assert code == 0, err
    model = load_engagement(eng)
    assert (model.teams, model.feature_dim) == (3, 5)

    pools = write_pools(tmp_path / "pools", GAME, count=10, n=8, seed=1)
    data = tmp_path / "labels"
    code, out, err = _cli(capsys, "label", "--instances", pools, "--engagement", eng, "--out", data,
                          "--time-limit-s", "20", "--no-progress")
    assert code == 0, err
    run = json.loads(out)
    assert run["labelled"] == 10 and run["optimal"] == 10 and run["preset"] is None
    man = read_manifest(data)
    assert man["source"] == "instances" and man["teams"] == 3 and (data / ENGAGEMENT_FILE).is_file()
    for inst, team_of, meta in load_dataset(data):  # labels are feasible and scored by the game's own model
        pr = Problem(inst, model)
        assert pr.checker.violations(team_of) == []
        assert pr.objective(team_of) == pytest.approx(meta["objective"], abs=1e-7)
        assert meta["file"].startswith("pool-")
    # resumable: a rerun labels nothing new; a new pool file is labelled alone
    code, out, _ = _cli(capsys, "label", "--instances", pools, "--engagement", eng, "--out", data, "--no-progress")
    assert code == 0 and json.loads(out)["labelled"] == 0
    write_pools(tmp_path / "more", GAME, count=11, n=8, seed=1)
    (pools / "pool-0010.json").write_text((tmp_path / "more" / "pool-0010.json").read_text())
    # ... here started from the model-free `surrogate` answer of a 3-team game (enumeration proves it anyway)
    code, out, _ = _cli(capsys, "label", "--instances", pools, "--engagement", eng, "--out", data, "--no-progress",
                        "--start-ms", "50")
    assert code == 0 and json.loads(out)["labelled"] == 1 and len(load_dataset(data)) == 11
    (_, _, last), = [d for d in load_dataset(data) if d[2]["file"] == "pool-0010.json"]
    assert last["optimal"] and last["start_ms"] == 50 and last["start_objective"] <= last["objective"] + 1e-9
    assert read_manifest(data)["start_ms_values"] == [0.0, 50.0]

    mdir = tmp_path / "net"
    code, out, err = _cli(capsys, "train", "--data", data, "--out", mdir, "--epochs", "2", "--batch-size", "4",
                          "--quiet")
    assert code == 0, err
    side = json.loads(out)
    assert side["teams"] == 3 and side["training"]["preset"] is None
    assert side["training"]["engagement_sha256"] == man["engagement_sha256"]
    assert (mdir / "model.onnx").is_file() and (mdir / "model.json").is_file()

    # a pool the network never saw, solved with the game's own files, is feasible
    write_pools(tmp_path / "new", GAME, count=1, n=9, seed=7)
    pool = tmp_path / "new" / "pool-0000.json"
    code, out, err = _cli(capsys, "solve", pool, "--method", "mgmatch", "--engagement", eng,
                          "--predictor", mdir / "model.onnx")
    assert code == 0, err
    sol = json.loads(out)
    assert sol["method"] == "mgmatch" and sol["status"] in ("optimal", "feasible")
    assert [len(t) for t in sol["teams"]] == [2, 2, 2]
    (tmp_path / "sol.json").write_text(out)
    code, out, err = _cli(capsys, "check", pool, tmp_path / "sol.json", "--engagement", eng)
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["feasible"] and verdict["violations"] == []
    inst = parse_instance(read_json(pool))
    assert verdict["objective"] == pytest.approx(sol["objective"], abs=1e-7) and inst.teams == 3


def test_label_refuses_bad_instances_and_foreign_datasets_before_writing(tmp_path, capsys):
    log = write_log(tmp_path / "own.jsonl", GAME, 300, seed=0)
    eng = tmp_path / "eng.json"
    assert _cli(capsys, "fit-engagement", "--logs", log, "--out", eng, "--epochs", "1", "--threads", "1",
                "--quiet")[0] == 0
    pools = write_pools(tmp_path / "pools", GAME, count=3, n=8, seed=1)
    bad = json.loads((pools / "pool-0001.json").read_text())
    bad["players"][3]["features"] = bad["players"][3]["features"][:4]
    (pools / "pool-0001.json").write_text(json.dumps(bad))
    code, _, err = _cli(capsys, "label", "--instances", pools, "--engagement", eng, "--out", tmp_path / "d",
                        "--no-progress")
    assert code == 2 and "pool-0001.json" in err and "features" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()
    (pools / "pool-0001.json").unlink()
    # a preset dataset directory is not extended with another game's labels
    assert _cli(capsys, "label", "--preset", "3v3", "--count", "1", "--seed", "3", "--out", tmp_path / "p",
                "--no-progress")[0] == 0
    code, _, err = _cli(capsys, "label", "--instances", pools, "--engagement", eng, "--out", tmp_path / "p",
                        "--no-progress")
    assert code == 2 and "another" in err
    code, _, err = _cli(capsys, "label", "--instances", pools, "--out", tmp_path / "q")
    assert code == 2 and "--engagement" in err
