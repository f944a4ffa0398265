"""``mgmatch bench quality``: per-method gap/time/feasibility against the exact optimum, outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgmatch.cli import main
from mgmatch.core.problem import Problem
from mgmatch.lab.bench_quality import run_quality, write_outputs
from mgmatch.solvers.base import get_solver
from mgmatch.solvers.mgmatch import MGMatchSolver

PRESET, SEED = "3v3", 3  # small instances: the exact reference takes milliseconds


class OptimumPredictor:
    """Predicts the optimum itself (enumerated): MGMatch must then score a zero gap."""

    version = "optimum"

    def predict(self, problems: list[Problem]) -> list[np.ndarray]:
        from mgmatch.core.solution import team_of_from_teams
        from mgmatch.solvers.base import Budget

        out = []
        for pr in problems:
            sol = get_solver("enumerate").solve(pr, Budget.of(None))
            t = team_of_from_teams(pr.instance, sol.teams)
            p = np.zeros((pr.instance.n, pr.instance.teams))
            p[np.flatnonzero(t >= 0), t[t >= 0]] = 1.0
            out.append(p)
        return out


def factory(method: str, problem: Problem):
    if method == "mgmatch":
        return MGMatchSolver(OptimumPredictor(), default_time_limit_ms=2000)
    return get_solver(method, **({"seed": 0} if method == "random" else {}))


def test_quality_summary_and_outputs(tmp_path):
    res = run_quality(PRESET, ["mgmatch", "random", "optmatch"], 300.0, 2, SEED, exact_time_limit_s=30,
                      factory=factory, progress_methods=["mgmatch"], ladder_ms=[100.0, 300.0])
    s = res.summary()
    assert set(s) == {"mgmatch", "random", "optmatch"}
    for m, row in s.items():
        assert row["feasible_rate"] == 1.0 and row["violations"] == 0, m
        assert 0.0 <= row["mean_gap"] <= 1.0
        assert row["p99_time_ms"] >= row["mean_time_ms"] > 0
    assert s["mgmatch"]["mean_gap"] == pytest.approx(0.0, abs=1e-9)  # oracle prediction → the optimum
    assert all(ref.kind == "optimal" for ref in res.references)
    # per-instance gaps are relative to the exact optimum
    for r in res.runs:
        ref = res.references[r.index].objective
        assert r.gap == pytest.approx((ref - r.objective) / abs(ref), abs=1e-12)
    assert [p["time_limit_ms"] for p in res.progress["mgmatch"]] == [100.0, 300.0]

    written = write_outputs(res, tmp_path / "out", tmp_path / "q.json")
    doc = json.loads((tmp_path / "q.json").read_text())
    assert doc["methods"]["optmatch"]["feasible_rate"] == 1.0
    assert {"mean_gap", "p99_time_ms", "feasible_rate"} <= set(doc["methods"]["random"])
    assert len(doc["instances"]) == 2 and set(doc["instances"][0]["runs"]) == {"mgmatch", "random", "optmatch"}
    png = tmp_path / "out" / f"progress-{PRESET}.png"
    assert str(png) in written and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "out" / f"quality-{PRESET}.md").read_text()
    assert "| optmatch |" in md and "gap" in md


def test_no_answer_counts_as_full_gap():
    res = run_quality(PRESET, ["random"], 0.001, 1, SEED, exact_time_limit_s=30, factory=factory,
                      progress_methods=[])
    row = res.summary()["random"]
    assert row["feasible_rate"] == 0.0 and row["mean_gap"] == 1.0 and row["mean_gap_found"] is None


def test_cli_quality(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "quality", "--preset", PRESET, "--methods", "random,scip", "--count", "1", "--seed", str(SEED),
              "--time-limit-ms", "100", "--json", str(tmp_path / "q.json"), "--progress-methods", ""])
    assert e.value.code == 0
    assert "| scip |" in capsys.readouterr().out
    assert json.loads((tmp_path / "q.json").read_text())["methods"]["random"]["feasible_rate"] == 1.0


def test_cli_names_the_missing_method(monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "quality", "--methods", "random,nosuchmethod", "--count", "1"])
    assert e.value.code == 2
    assert "nosuchmethod" in capsys.readouterr().err

    import mgmatch.models.runtime as runtime

    def missing(name, *a, **k):
        raise FileNotFoundError(f"no trained model {name}")

    monkeypatch.setattr(runtime, "load_predictor", missing)
    with pytest.raises(SystemExit) as e:
        main(["bench", "quality", "--methods", "mgmatch", "--count", "1", "--seed", str(SEED)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "'mgmatch'" in err and err.count("\n") == 1


def test_budgets_share_instances_and_references_and_pools_have_their_size():
    from mgmatch.lab.bench_quality import budgets_markdown, problems_for, run_budgets

    pools = problems_for(PRESET, 3, SEED, pool_size=(12, 14))
    assert all(12 <= pr.instance.n <= 14 for pr in pools)
    assert [pr.instance.n for pr in pools] == [pr.instance.n for pr in problems_for(PRESET, 3, SEED, (12, 14))]
    results = run_budgets(PRESET, ["random", "optmatch"], [50.0, 200.0], 2, SEED, exact_time_limit_s=30,
                          factory=factory, pool_size=(12, 14))
    assert [r.time_limit_ms for r in results] == [50.0, 200.0]
    assert results[0].references is results[1].references  # one exact reference per instance
    for r in results:
        assert r.pool_size == (12, 14) and r.to_json()["pool_size"] == [12, 14]
        assert {run.method for run in r.runs} == {"random", "optmatch"} and len(r.runs) == 4
    md = budgets_markdown(results)
    assert "pools of 12–14" in md and "| 50 |" in md and "| 200 |" in md


def test_cli_budgets_and_pool_size(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "quality", "--preset", PRESET, "--methods", "random", "--count", "1", "--seed", str(SEED),
              "--budgets", "50,100", "--pool-size", "12-13", "--json", str(tmp_path / "b.json"),
              "--progress-methods", ""])
    assert e.value.code == 0
    assert "| 100 |" in capsys.readouterr().out
    doc = json.loads((tmp_path / "b.json").read_text())
    assert [r["time_limit_ms"] for r in doc["results"]] == [50.0, 100.0]
    for args, field in ((["--budgets", "10,x"], "--budgets"), (["--budgets", "10,10"], "--budgets"),
                        (["--budgets", "0"], "--budgets"), (["--pool-size", "a-b"], "--pool-size"),
                        (["--pool-size", "4-8"], "--pool-size"), (["--pool-size", "90-101"], "--pool-size"),
                        (["--pool-size", "50-40"], "--pool-size")):
        with pytest.raises(SystemExit) as e:
            main(["bench", "quality", "--preset", PRESET, "--methods", "random", "--count", "1", *args])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert field in err and err.count("\n") == 1
