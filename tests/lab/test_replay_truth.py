"""``mgmatch replay --truth`` (spec §7): results from a truth model, a pool that learns during the replay,
windows of true engagement, reproducible for a seed."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import one_line_error, run  # noqa: E402

from mgmatch.lab.lift import stream  # noqa: E402
from mgmatch.lab.lift_worlds import get_world  # noqa: E402

# every test runs `mgmatch replay` in a subprocess; the replays refit models
pytestmark = [pytest.mark.service, pytest.mark.slow]


def start_model(world) -> dict:
    """A useless starting model: the structure of the truth, every weight 0, bias −2 (a constant far off)."""
    t = world.truth()
    head = [{"weight": [[0.0] * len(r) for r in layer["weight"]], "bias": [0.0] * len(layer["bias"])}
            for layer in t["head_layers"]]
    head[-1]["bias"] = [-2.0]
    return {**t, "name": "start", "head_layers": head}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("truth")
    world = get_world("mentor")
    (d / "truth.json").write_text(json.dumps(world.truth()))
    body = json.dumps(start_model(world)).encode()
    (d / "eng0.json").write_bytes(body)
    arrivals = stream(world, 480, rate=2.0, seed=3)
    with open(d / "tickets.jsonl", "w") as f:
        for a in arrivals:
            f.write(json.dumps({"time": a.time, "pool": a.pool, "players": a.players, "id": a.name}) + "\n")
    pool = {"name": "lift", "teams": 2, "team_size": 3, "rules": [{"kind": "skill_balance", "max_diff": 150}],
            "engagement_model": {"path": "eng0.json", "sha256": hashlib.sha256(body).hexdigest()},
            # exact enumerates these small pools: the answers do not depend on the machine's speed
            "method": "exact", "time_budget_ms": 2000, "max_candidates": 14, "partition": "sequential",
            "ticket_ttl_s": 600, "dispatch": {"policy": "batch", "params": {"interval_s": 6}},
            "learning": {"min_results": 25, "refit_every": 25, "min_holdout": 3, "epochs": 10, "explore": 0.3,
                         "explore_min": 0.3}}
    (d / "learn.yaml").write_text(json.dumps({"pools": [pool]}))
    return d


def replay(d: Path, *extra) -> dict:
    proc = run("replay", "--tickets", d / "tickets.jsonl", "--config", d / "learn.yaml", "--truth", d / "truth.json",
               "--noise", "0.1", "--seed", "4", "--window-matches", "10", "--tick-s", "1", "--json", *extra,
               timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_replay_against_a_truth_learns_and_reports_windows(setup):
    out = replay(setup)
    r = out["results"][0]
    assert out["truth"].endswith("truth.json") and out["noise"] == 0.1 and out["window_matches"] == 10
    assert r["matches"] >= 30
    ws = r["windows"]
    assert sum(w["matches"] for w in ws) == r["matches"]
    assert all(w["matches"] == 10 for w in ws[:-1])
    assert set(ws[0]) >= {"matches", "true_engagement_mean", "model_versions"}
    assert r["true_engagement_mean"] == pytest.approx(sum(w["true_engagement_mean"] * w["matches"] for w in ws)
                                                      / r["matches"])
    # the useless starting model was replaced during the replay: later windows carry other versions
    versions = [v for w in ws for v in w["model_versions"]]
    assert len(set(versions)) >= 2, r.get("learning")
    assert any(f["outcome"] == "live" for f in r["learning"]["lift"]["refits"])
    assert any(w["explore_share"] > 0 for w in ws)
    # the config's own learning folder is untouched: the replay learns in a temporary one
    assert not (setup / "learned").exists()
    # the same seed replays the same run
    again = replay(setup)["results"][0]
    assert again["windows"] == ws


@pytest.mark.parametrize(("args", "needle"), [(("--truth", "missing.json"), "--truth"),
                                              (("--noise", "-1"), "--noise"),
                                              (("--window-matches", "0"), "--window-matches")])
def test_bad_truth_options_exit_2_with_one_line(setup, args, needle):
    base = {"--truth": str(setup / "truth.json"), "--noise": "0", "--window-matches": "5"}
    base[args[0]] = str(setup / args[1]) if args[0] == "--truth" else args[1]
    flat = [x for kv in base.items() for x in kv]
    proc = run("replay", "--tickets", setup / "tickets.jsonl", "--config", setup / "learn.yaml", *flat, "--json")
    assert needle in one_line_error(proc)


def test_a_truth_for_another_game_is_refused(setup, tmp_path):
    other = get_world("5v5").truth()  # 6 features, the tickets carry 8
    (tmp_path / "t.json").write_text(json.dumps(other))
    proc = run("replay", "--tickets", setup / "tickets.jsonl", "--config", setup / "learn.yaml",
               "--truth", tmp_path / "t.json")
    assert "features" in one_line_error(proc)
