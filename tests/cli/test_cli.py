"""The command-line contract (spec §4), through the real entry point in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mgmatch", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("method", ["exact", "scip", "enumerate"])
def test_solve_reproduces_the_spec_example(example_paths, method):
    proc = run("solve", example_paths["instance"], "--engagement", example_paths["engagement"], "--method", method)
    assert proc.returncode == 0, proc.stderr
    sol = json.loads(proc.stdout)
    expected = json.loads(example_paths["expected"].read_text())
    assert sol["format"] == "mgmatch-solution/v1"
    assert sol["status"] == expected["status"]
    assert sol["teams"] == expected["teams"]
    assert sol["objective"] == pytest.approx(expected["objective"], abs=1e-6)
    assert sol["region"] == "eu" and sol["method"] == method


def test_check_accepts_the_optimum_and_rejects_a_violation(example_paths, tmp_path):
    expected = json.loads(example_paths["expected"].read_text())
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "mgmatch-solution/v1", **expected}))
    proc = run("check", example_paths["instance"], good, "--engagement", example_paths["engagement"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"feasible": True, "violations": [], "objective": pytest.approx(expected["objective"], abs=1e-9)}

    bad = tmp_path / "bad.json"  # p03 and p04 together violate the avoid rule (rules[3])
    bad.write_text(json.dumps({"status": "feasible", "teams": [["p03", "p04", "p05"], ["p01", "p02", "p06"]]}))
    proc = run("check", example_paths["instance"], bad, "--engagement", example_paths["engagement"])
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["feasible"] is False
    assert any(v.startswith("rules[3] (avoid)") for v in out["violations"])


def test_solve_help_lists_methods():
    proc = run("solve", "--help")
    assert proc.returncode == 0
    for m in ("exact", "scip", "enumerate"):
        assert m in proc.stdout


def test_bad_inputs_exit_2_with_one_line(example_paths, tmp_path, mutate):
    assert "no such file" in one_line_error(run("solve", tmp_path / "nope.json"))
    (tmp_path / "broken.json").write_text("{not json")
    assert "not valid JSON" in one_line_error(run("solve", tmp_path / "broken.json"))
    bad_rule = tmp_path / "bad-rule.json"
    bad_rule.write_text(json.dumps(mutate(lambda o: o["rules"][1].pop("max_diff"))))
    assert "rules[1].max_diff" in one_line_error(run("solve", bad_rule, "--engagement", example_paths["engagement"]))
    assert "method" in one_line_error(run("solve", example_paths["instance"], "--engagement",
                                          example_paths["engagement"], "--method", "magic"))
    assert "time-limit-ms" in one_line_error(run("solve", example_paths["instance"], "--time-limit-ms", "-5"))
    one_line_error(run("solve", example_paths["instance"], "--no-such-flag"))
    sol = tmp_path / "sol.json"
    sol.write_text(json.dumps({"status": "feasible", "teams": [["p01", "p01", "p02"], ["p03", "p04", "p05"]]}))
    assert "appears twice" in one_line_error(run("check", example_paths["instance"], sol, "--engagement",
                                                 example_paths["engagement"]))


def test_instance_without_matching_model_is_an_input_error(example_paths):
    # the spec example has feature_dim 4: no shipped model matches, so a model file is required
    msg = one_line_error(run("solve", example_paths["instance"]))
    assert "engagement" in msg


def test_hostile_files_and_options_exit_2_with_one_line(example_paths, tmp_path):
    """Each of these ended in a traceback (exit 1) or was silently accepted before."""
    inst, eng = example_paths["instance"], example_paths["engagement"]
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'{"teams": "\xff"}')
    assert "not UTF-8" in one_line_error(run("solve", latin1))
    sigma = tmp_path / "sigma.json"
    obj = json.loads(inst.read_text())
    obj["players"][0]["sigma"] = 1e308  # EOMM squared it: OverflowError
    sigma.write_text(json.dumps(obj))
    assert "players[0].sigma" in one_line_error(run("solve", sigma, "--engagement", eng, "--method", "eomm"))
    obj["players"][0].pop("sigma")
    obj["players"][0]["peer_pings"] = [30]  # the Awesomenauts scorer called .items() on it
    sigma.write_text(json.dumps(obj))
    assert "players[0].peer_pings" in one_line_error(run("solve", sigma, "--engagement", eng, "--method",
                                                         "local-search", "--objective", "awesomenauts"))
    ragged = tmp_path / "ragged.json"
    model = json.loads(eng.read_text())
    model["player_layers"][0]["weight"][1].pop()
    ragged.write_text(json.dumps(model))
    assert "player_layers[0].weight[1]" in one_line_error(run("solve", inst, "--engagement", ragged))
    assert "--seed" in one_line_error(run("solve", inst, "--engagement", eng, "--method", "random", "--seed", "-1"))
    assert "--seed" in one_line_error(run("generate", "--preset", "3v3", "--count", "1", "--seed", "-1",
                                          "--out", tmp_path / "g"))
    assert "--count" in one_line_error(run("generate", "--preset", "3v3", "--count", str(10**30),
                                           "--out", tmp_path / "g"))
    assert "--time-limit-ms" in one_line_error(run("solve", inst, "--engagement", eng, "--time-limit-ms", "inf"))
    assert "predictor" in one_line_error(run("solve", inst, "--engagement", eng, "--predictor", "3v3"))
    wrong = tmp_path / "wrong-format.json"
    wrong.write_text(json.dumps({"format": "mgmatch-instance/v1", "status": "feasible",
                                 "teams": [["p01", "p02", "p05"], ["p03", "p06", "p07"]]}))
    assert "format" in one_line_error(run("check", inst, wrong, "--engagement", eng))
