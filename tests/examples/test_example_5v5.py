"""The worked third game (examples/5v5): its pool config verifies and serves, its simulator is consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
GAME = ROOT / "examples" / "5v5"
sys.path.insert(0, str(ROOT / "tests" / "app"))
sys.path.insert(0, str(GAME))

import simulate  # noqa: E402
from svc_helpers import LiveServer, client  # noqa: E402

from mgmatch.app.api import build_asgi  # noqa: E402
from mgmatch.app.commands.models import verify  # noqa: E402
from mgmatch.app.config import load_config  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.core.engagement import parse_engagement  # noqa: E402
from mgmatch.core.instance import load_instance, parse_instance  # noqa: E402
from mgmatch.core.problem import Problem  # noqa: E402
from mgmatch.core.solution import team_of_from_teams  # noqa: E402


def test_pinned_files_verify():
    results, problems = verify(load_config(GAME / "pool.yaml"))
    assert problems == []
    assert {(r["kind"], r["name"], r["source"]) for r in results} == {("engagement", "5v5", "file"),
                                                                      ("predictor", "5v5", "file")}


@pytest.mark.service
def test_serves_a_shipped_pool_feasibly(tmp_path):
    rt = Runtime.build(Settings(config=GAME / "pool.yaml", store="memory"))
    pool_file = sorted((GAME / "pools").glob("*.json"))[0]
    # a generous budget: this checks the files and the path through the service, not the speed
    # (examples/5v5/measure.py measures the 50 ms budget)
    body = {**json.loads(pool_file.read_text()), "time_limit_ms": 5000}
    with LiveServer(build_asgi(rt)) as srv, client(srv.url) as c:
        try:
            r = c.post("/v1/solve", json=body)
        finally:
            rt.stop()
    assert r.status_code == 200, r.text
    sol = r.json()
    assert sol["status"] in ("optimal", "feasible") and sol["method"] == "mgmatch" and "fallback" not in sol
    assert sol["engagement_model"] == "5v5"
    inst = load_instance(pool_file)
    model = rt.engine.engagement.get("5v5")
    pr = Problem(inst, model, model_name="5v5")
    t = team_of_from_teams(inst, sol["teams"])
    assert bool(pr.checker.feasible(t[None])[0])  # roles, skill balance, parties
    assert abs(pr.objective(t) - sol["objective"]) < 1e-6


def test_truth_model_is_the_simulators_objective():
    truth = parse_engagement(simulate.truth_model(), "truth")
    inst_obj = simulate.make_pool(np.random.default_rng(7), 24)
    inst = parse_instance(inst_obj)
    rng = np.random.default_rng(8)
    emb = truth.embed(inst.features())
    for _ in range(20):
        sel = rng.permutation(inst.n)[:10]
        t = np.full(inst.n, -1)
        t[sel[:5]], t[sel[5:]] = 0, 1
        teams = [[inst.ids[i] for i in sel[:5]], [inst.ids[i] for i in sel[5:]]]
        assert truth.evaluate(emb, t) == pytest.approx(simulate.score(inst_obj, teams), abs=1e-9)


@pytest.mark.service
def test_simulator_writes_a_seeded_log_and_valid_pools(tmp_path):
    for k in (0, 1):
        subprocess.run([sys.executable, str(GAME / "simulate.py"), "log", "--matches", "30", "--players", "200",
                        "--seed", "4", "--out", str(tmp_path / f"log{k}.jsonl")], check=True, capture_output=True)
    assert (tmp_path / "log0.jsonl").read_bytes() == (tmp_path / "log1.jsonl").read_bytes()
    from mgmatch.pipeline.matchlog import measure

    shape = measure([tmp_path / "log0.jsonl"])  # validates every line (spec §5)
    assert shape.teams == 2 and shape.feature_dim == len(simulate.FEATURES) and shape.matches == 30
    assert shape.min_sizes == shape.max_sizes == (5, 5)
    r = subprocess.run([sys.executable, str(GAME / "simulate.py"), "pools", "--count", "3", "--seed", "5",
                        "--out", str(tmp_path / "pools")], check=True, capture_output=True, text=True)
    assert json.loads(r.stdout)["pools"] == 3
    for f in sorted((tmp_path / "pools").glob("*.json")):
        inst = load_instance(f)
        assert 20 <= inst.n <= 40 and inst.sizes == (5, 5)
