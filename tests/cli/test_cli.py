"""The command-line contract (spec §4), through the console script's function (in this process, see
cli_helpers.run) and, for a solve, a check and a refusal, through ``python -m mgmatch`` in a process of its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_line_error, run  # noqa: E402


@pytest.mark.service
@pytest.mark.parametrize("method", ["exact", "scip", "enumerate"])
def test_solve_reproduces_the_spec_example(example_paths, method):
    proc = run("solve", example_paths["instance"], "--engagement", example_paths["engagement"], "--method", method,
               process=method == "exact")
    assert proc.returncode == 0, proc.stderr
    sol = json.loads(proc.stdout)
    expected = json.loads(example_paths["expected"].read_text())
    assert sol["format"] == "mgmatch-solution/v1"
    assert sol["status"] == expected["status"]
    assert sol["teams"] == expected["teams"]
    assert sol["objective"] == pytest.approx(expected["objective"], abs=1e-6)
    assert sol["region"] == "eu" and sol["method"] == method


@pytest.mark.service
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
    proc = run("check", example_paths["instance"], bad, "--engagement", example_paths["engagement"], process=True)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["feasible"] is False
    assert any(v.startswith("rules[3] (avoid)") for v in out["violations"])


@pytest.mark.service
def test_solve_help_lists_methods():
    proc = run("solve", "--help")
    assert proc.returncode == 0
    for m in ("exact", "scip", "enumerate"):
        assert m in proc.stdout


@pytest.mark.service
def test_bad_inputs_exit_2_with_one_line(example_paths, tmp_path, mutate):
    assert "no such file" in one_line_error(run("solve", tmp_path / "nope.json", process=True))
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


@pytest.mark.service
def test_utf8_files_with_a_byte_order_mark_are_read(example_paths, tmp_path):
    """Instance, engagement model and solution files saved as UTF-8 with a BOM (as Windows editors do)
    were refused as "not valid JSON: Unexpected UTF-8 BOM"."""
    bom = b"\xef\xbb\xbf"
    inst, eng = tmp_path / "instance.json", tmp_path / "engagement.json"
    inst.write_bytes(bom + example_paths["instance"].read_bytes())
    eng.write_bytes(bom + example_paths["engagement"].read_bytes())
    proc = run("solve", inst, "--engagement", eng)
    assert proc.returncode == 0, proc.stderr
    sol = json.loads(proc.stdout)
    assert sol["teams"] == json.loads(example_paths["expected"].read_text())["teams"]
    answer = tmp_path / "solution.json"
    answer.write_bytes(bom + proc.stdout.encode())
    proc = run("check", inst, answer, "--engagement", eng)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["feasible"] is True
    # only a leading BOM is skipped: one inside the text is still not JSON
    inner = tmp_path / "inner.json"
    inner.write_bytes(b" " + bom + example_paths["instance"].read_bytes())
    assert "not valid JSON" in one_line_error(run("solve", inner, "--engagement", eng))


@pytest.mark.service
def test_a_predictor_trained_for_another_engagement_model_is_refused(tmp_path):
    """``--predictor 12v12`` on a 3v3 instance was accepted: the network read the 3v3 model's player
    embeddings (the same width) and guided the search by what it learned of another objective. It is
    refused naming the predictor; a pool of another size scored by the network's own model is not."""
    from mgmatch.core.presets import generate_instances

    inst = tmp_path / "3v3.json"
    inst.write_text(json.dumps(generate_instances("3v3", 1, seed=0)[0].to_json()))
    shipped = Path(__file__).resolve().parents[2] / "models" / "shipped"
    for method, predictor in (("mgmatch", "12v12"), ("mgmatch", "12v12-deep"), ("bgcn", "12v12-bgcn"),
                              ("mgmatch", str(shipped / "12v12.onnx"))):
        msg = one_line_error(run("solve", inst, "--method", method, "--predictor", predictor, "--time-limit-ms", "300"))
        assert msg.startswith("mgmatch: predictor: ") and "trained for engagement model '12v12" in msg, msg
    ok = run("solve", inst, "--method", "mgmatch", "--predictor", "3v3", "--time-limit-ms", "300")
    assert ok.returncode == 0, ok.stderr
    # the network reads pools of any size: 3 a side, scored by the 12v12 model it was trained for
    small = generate_instances("12v12", 1, seed=0)[0].to_json()
    small.update(team_size=3, rules=[], engagement_model="12v12", players=small["players"][:10])
    (tmp_path / "small.json").write_text(json.dumps(small))
    ok = run("solve", tmp_path / "small.json", "--method", "mgmatch", "--predictor", "12v12", "--time-limit-ms", "300")
    assert ok.returncode == 0, ok.stderr
    assert [len(t) for t in json.loads(ok.stdout)["teams"]] == [3, 3]


@pytest.mark.service
def test_instance_without_matching_model_is_an_input_error(example_paths):
    # the spec example has feature_dim 4: no shipped model matches, so a model file is required
    msg = one_line_error(run("solve", example_paths["instance"]))
    assert "engagement" in msg


@pytest.mark.service
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


def test_a_budgeted_solve_prepares_before_its_budget_and_an_unbudgeted_one_does_not(example_paths, monkeypatch):
    """`mgmatch solve --time-limit-ms` is a one-shot process: the solver's first-call costs (a cold
    predictor, SCIP's first model, tabu search's first walk) are paid by ``prepare`` before the budget
    starts; without a budget there is nothing to protect. In process (typer's runner), with
    ``prepare`` spied on."""
    from typer.testing import CliRunner

    from mgmatch.app.cli import _load_commands, cli
    from mgmatch.solvers import mgmatch as mg

    _load_commands()
    calls = []
    real = mg.MGMatchSolver.prepare
    monkeypatch.setattr(mg.MGMatchSolver, "prepare", lambda self, problem, **kw: calls.append(
        (problem.instance.n, kw)) or real(self, problem, **kw))
    args = ["solve", str(example_paths["instance"]), "--method", "surrogate",
            "--engagement", str(example_paths["engagement"])]
    runner = CliRunner()
    res = runner.invoke(cli, [*args, "--time-limit-ms", "50"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] in ("optimal", "feasible")
    assert calls == [(8, {})]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0 and calls == [(8, {})]


def test_the_command_index_names_the_module_of_every_command_and_a_run_loads_only_it():
    """A run imports only its command's module (app/cli.py ``command_index``, read from the sources): the
    index must name every command the fully loaded CLI has, and nothing else."""
    import typer

    from mgmatch.app.cli import _load_commands, _wanted, cli, command_index
    from mgmatch.cli import COMMANDS

    _load_commands(COMMANDS)
    tree = typer.main.get_command(cli)
    paths = {(name, sub) for name in ("bench", "simulate") for sub in tree.commands[name].commands}
    paths |= {(name,) for name in tree.commands if name not in ("bench", "simulate")}
    index = command_index(COMMANDS)
    assert set(index) == paths
    assert _wanted(["bench", "push", "--rate", "nan"], index) == "mgmatch.lab.commands.bench_push"
    assert _wanted(["models", "verify", "--config", "x"], index) == "mgmatch.app.commands.models"
    assert _wanted(["solve", "x.json"], index) == "mgmatch.app.commands.solve"
    for everything in (["--help"], [], ["bench", "--help"], ["bench"], ["nope"]):
        assert _wanted(everything, index) is None
