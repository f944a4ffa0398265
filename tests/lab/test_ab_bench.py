"""A replayed experiment: the replay gives tickets their arm as the API does (key: player), and ``bench ab``
answers every match with a truth model and reads the report out of the same store."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from mgmatch.app.ab import Experiment
from mgmatch.app.config import load_config
from mgmatch.cli import main
from mgmatch.lab.replay import parse_arrival, simulate

MODEL = Path(__file__).resolve().parents[2] / "docs" / "spec" / "examples" / "engagement-small.json"


def _config(tmp_path: Path) -> Path:
    """One 1v1 pool of the spec example's 4-feature model, split 1:1 by player between two model-free arms."""
    cfg = {
        "pools": [{"name": "duel", "teams": 2, "team_size": 1, "engagement_model": "small", "method": "random",
                   "time_budget_ms": 5, "max_candidates": 2, "dispatch": {"policy": "immediate"}}],
        "models": {"engagement": [{"name": "small", "path": str(MODEL),
                                   "sha256": hashlib.sha256(MODEL.read_bytes()).hexdigest()}]},
        "experiments": [{"name": "exp", "pools": ["duel"], "key": "player",
                         "arms": [{"name": "control", "weight": 1}, {"name": "other", "weight": 1}]}],
    }
    path = tmp_path / "ab.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _stream(n: int) -> list[dict]:
    return [{"time": 0.05 * k, "pool": "duel", "id": f"t{k}",
             "players": [{"id": f"p{k}", "features": [((k * 7) % 11) / 11, (k % 3) / 3, 0.5, (k % 5) / 5]}]}
            for k in range(n)]


def test_replay_gives_tickets_their_arm_and_matches_never_mix_arms(tmp_path):
    cfg = load_config(_config(tmp_path))
    arrivals = [parse_arrival(x, n + 1) for n, x in enumerate(_stream(80))]
    held = {}
    res = simulate(cfg, arrivals, on_created=lambda rt, s: held.setdefault("rt", rt))
    store = held["rt"].store
    exp = Experiment(cfg.experiments[0])
    records = list(store.iter_matches("duel"))
    assert len(records) == len(res.matches) > 20
    for rec in records:
        # every player of a match is of the match's arm, the arm the API gives the player's ticket
        assert {exp.arm_for(p["id"]).name for team in rec.teams for p in team} == {rec.arm}
    assert {rec.arm for rec in records} == {"control", "other"}


def test_bench_ab_posts_truth_results_and_reads_the_report(tmp_path, capsys):
    stream = tmp_path / "tickets.jsonl"
    stream.write_text("".join(json.dumps(x) + "\n" for x in _stream(120)))
    log = tmp_path / "log.jsonl"
    with pytest.raises(SystemExit) as info:
        main(["bench", "ab", "--config", str(_config(tmp_path)), "--truth", str(MODEL), "--tickets", str(stream),
              "--noise", "0.1", "--seed", "3", "--log", str(log)])
    out = capsys.readouterr()
    assert info.value.code == 0, out.err
    doc = json.loads(out.out)
    report = doc["report"]
    assert report["experiment"] == "exp" and report["control"] == "control"
    assert sum(a["matches"] for a in report["arms"]) == doc["matches"] > 40
    assert all(a["results"] == a["matches"] for a in report["arms"])  # every match answered
    truth = {t["name"]: t for t in doc["truth"]}
    assert truth["control"]["true_lift"] is None and isinstance(truth["other"]["true_lift"], float)
    looks = truth["other"]["looks"]
    assert 0 < looks["looks"] <= doc["matches"] - 19  # from 10 results in each arm on, one look per result
    # the sequence covers the lift measured with the truth over the matches so far (all but by chance)
    assert looks["cs_missed_running_true_lift"] <= 0.05 * looks["looks"]
    # the log carries the arms: the report read from it is the report read from the store
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == doc["matches"] and {x["arm"] for x in lines} == {"control", "other"}
    with pytest.raises(SystemExit):
        main(["ab", "report", "--log", str(log), "--config", str(_config(tmp_path)), "--json"])
    from_log = json.loads(capsys.readouterr().out)
    for a, b in zip(from_log["arms"], report["arms"], strict=True):
        assert (a["matches"], a["results"]) == (b["matches"], b["results"])
        assert a["engagement_mean"] == pytest.approx(b["engagement_mean"])


def test_bench_ab_bad_input_exits_2_with_one_line(tmp_path, capsys):
    cfg = _config(tmp_path)
    for args, needle in ((["--tickets", str(tmp_path / "none.jsonl")], "none.jsonl"),
                         ([], "--tickets"),
                         (["--instances", str(tmp_path / "none")], "--instances"),
                         (["--instances", str(tmp_path)], "--instances"),
                         (["--instances", str(tmp_path), "--noise", "-1"], "--noise")):
        with pytest.raises(SystemExit) as info:
            main(["bench", "ab", "--config", str(cfg), "--truth", str(MODEL), *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert info.value.code == 2 and len(err) == 1 and needle in err[0], (args, err)
