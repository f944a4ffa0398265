"""Pools that name their own model files (pinned by SHA-256), and ``mgmatch models list|verify``."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mgmatch.app.ab import plan_for
from mgmatch.app.config import load_config
from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import generate_instances

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "shipped"
PRESET_MODEL = ROOT / "core" / "presets" / "engagement-3v3.json"
MGMATCH = [sys.executable, "-m", "mgmatch.app"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _own_game(folder: Path, **pool) -> Path:
    """A config whose pool "mine" names a copy of the 3v3 model and predictor by relative path."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(PRESET_MODEL, folder / "eng.json")
    shutil.copy(SHIPPED / "3v3.onnx", folder / "net.onnx")
    shutil.copy(SHIPPED / "3v3.json", folder / "net.json")
    cfg = {"pools": [{"name": "mine", "teams": 2, "team_size": 3, "method": "mgmatch", "time_budget_ms": 2000,
                      "max_candidates": 24,
                      "engagement_model": {"path": "eng.json", "sha256": _sha(folder / "eng.json")},
                      "predictor": {"path": "net.onnx", "sha256": _sha(folder / "net.onnx")}, **pool}]}
    path = folder / "pool.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MGMATCH, *args], capture_output=True, text=True, timeout=120, cwd="/")


def test_pool_files_become_named_entries_relative_to_the_config(tmp_path):
    cfg = load_config(_own_game(tmp_path / "game"))
    pool = cfg.pools[0]
    assert pool.engagement_model == "mine" and pool.predictor == "mine"
    (eng,) = cfg.models.engagement
    (pred,) = cfg.models.predictors
    assert eng.path == tmp_path / "game" / "eng.json" and eng.where == "pools[0].engagement_model"
    assert pred.path == tmp_path / "game" / "net.onnx" and pred.where == "pools[0].predictor"


def test_pool_solves_with_its_own_files(tmp_path):
    rt = Runtime.build(Settings(config=_own_game(tmp_path / "game"), store="memory"))
    try:
        assert rt.config.pools[0].feature_dim == 196
        inst = generate_instances("3v3", 1, seed=5)[0]
        sol = rt.engine.solve(inst, plan_for(rt.config.pools[0], None), "mine")
        assert sol.status in ("optimal", "feasible") and sol.method == "mgmatch"
        assert getattr(sol, "fallback", None) is None  # the pool's own predictor answered
        assert sol.engagement_model == "mine"
        assert rt.predictors.get("mine").inner.path == tmp_path / "game" / "net.onnx"
    finally:
        rt.stop()


@pytest.mark.service
@pytest.mark.parametrize("attr", ["engagement_model", "predictor"])
def test_wrong_pin_stops_start_up_naming_the_field(tmp_path, attr):
    path = _own_game(tmp_path / "game")
    cfg = yaml.safe_load(path.read_text())
    cfg["pools"][0][attr]["sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InvalidInput) as err:
        Runtime.build(Settings(config=path, store="memory"))
    assert err.value.field == f"pools[0].{attr}.sha256"
    assert "does not match the pin" in err.value.message
    r = _run("serve", "--config", str(path), "--port", "1")
    assert r.returncode == 2 and f"pools[0].{attr}.sha256" in r.stderr and "Traceback" not in r.stderr


def test_missing_pool_file_stops_start_up(tmp_path):
    path = _own_game(tmp_path / "game")
    (tmp_path / "game" / "net.onnx").unlink()
    with pytest.raises(InvalidInput) as err:
        Runtime.build(Settings(config=path, store="memory"))
    assert err.value.field == "pools[0].predictor.path"


def test_a_pool_file_may_not_shadow_a_named_entry(tmp_path):
    path = _own_game(tmp_path / "game")
    cfg = yaml.safe_load(path.read_text())
    cfg["models"] = {"engagement": [{"name": "mine", "path": str(PRESET_MODEL), "sha256": _sha(PRESET_MODEL)}]}
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InvalidInput, match="already has an entry named 'mine'"):
        load_config(path)


@pytest.mark.service
def test_models_list_and_verify_pass(tmp_path):
    path = _own_game(tmp_path / "game")
    r = _run("models", "list", "--config", str(path), "--json")
    assert r.returncode == 0, r.stderr
    rows = {(m["kind"], m["name"]): m for m in json.loads(r.stdout)["models"]}
    assert rows[("engagement", "mine")]["path"] == str(tmp_path / "game" / "eng.json")
    assert rows[("predictor", "mine")]["used_by"] == ["pool mine"]
    r = _run("models", "verify", "--config", str(path), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and all(m["ok"] for m in out["models"]) and len(out["models"]) == 2


@pytest.mark.service
def test_verify_names_every_problem(tmp_path):
    path = _own_game(tmp_path / "game")
    cfg = yaml.safe_load(path.read_text())
    cfg["pools"].append({"name": "other", "teams": 2, "team_size": 3, "engagement_model": "no-such-model"})
    path.write_text(yaml.safe_dump(cfg))
    (tmp_path / "game" / "eng.json").write_text("{}")  # tampered: the digest no longer matches
    r = _run("models", "verify", "--config", str(path))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert any("engagement mine" in x and "pools[0].engagement_model.sha256" in x for x in lines)
    assert any("engagement no-such-model" in x and "unknown engagement model" in x for x in lines)
    assert "Traceback" not in r.stderr


@pytest.mark.service
def test_verify_runs_the_network(tmp_path):
    """A file that matches its pin but is no ONNX model fails at loading, not silently."""
    path = _own_game(tmp_path / "game")
    bad = tmp_path / "game" / "net.onnx"
    bad.write_bytes(b"not an onnx model")
    cfg = yaml.safe_load(path.read_text())
    cfg["pools"][0]["predictor"]["sha256"] = _sha(bad)
    path.write_text(yaml.safe_dump(cfg))
    r = _run("models", "verify", "--config", str(path))
    assert r.returncode == 1
    assert r.stderr.startswith("mgmatch: predictor mine:") and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.service
@pytest.mark.parametrize("text, needle", [("pools: [", "not valid YAML"), ("pools: []", "pools"),
                                          ("pools: [{name: a, teams: '2', team_size: 3}]", "pools[0].teams")])
def test_bad_config_is_exit_2(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for cmd in ("list", "verify"):
        r = _run("models", cmd, "--config", str(path))
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _run("models", "list", "--config", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr
