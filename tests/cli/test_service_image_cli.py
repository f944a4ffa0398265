"""The CLI in the service image (no torch, tqdm, torch-geometric, onnx): bad input and missing offline
packages exit 2 with one line on stderr, never a traceback; what needs none of them still works.

The image is simulated per process: ``sys.modules[name] = None`` makes ``import name`` raise
ModuleNotFoundError, then the ``mgmatch`` entry point runs as ``python -m mgmatch`` does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_line_error  # noqa: E402

from mgmatch.app.store import MatchRecord, MatchResult, MemoryStore, Ticket, new_ticket_id

#: the packages the service (`pip install mgmatch`, the image) leaves out: the [train] extra's
IMAGE_LACKS = ("torch", "torch_geometric", "onnx", "tqdm", "matplotlib")

_ENTRY = ("import runpy, sys\n"
          "for name in sys.argv[1].split(','):\n"
          "    if name: sys.modules[name] = None\n"
          "sys.argv = ['mgmatch', *sys.argv[2:]]\n"
          "runpy.run_module('mgmatch', run_name='__main__')\n")


def run_without(missing: tuple[str, ...], *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """``mgmatch ARGS`` in a fresh interpreter where every package of ``missing`` fails to import."""
    return subprocess.run([sys.executable, "-c", _ENTRY, ",".join(missing), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)



@pytest.fixture
def instances(example_paths, tmp_path):
    """A directory of two instance files (the spec example twice)."""
    d = tmp_path / "instances"
    d.mkdir()
    for name in ("a.json", "b.json"):
        shutil.copy(example_paths["instance"], d / name)
    return d


def _records(root) -> list[dict]:
    return sorted((json.loads(line) for shard in sorted(root.glob("shard-*.jsonl"))
                   for line in shard.read_text().splitlines() if line.strip()), key=lambda r: r["index"])


@pytest.mark.service
def test_label_without_tqdm_labels_without_a_bar(example_paths, instances, tmp_path):
    """`mgmatch label` crashed on `from tqdm import tqdm` unless --no-progress was given."""
    out = tmp_path / "labels"
    proc = run_without(IMAGE_LACKS, "label", "--instances", instances, "--engagement", example_paths["engagement"],
                       "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip() == ""  # stderr is no terminal: no progress line
    summary = json.loads(proc.stdout)
    assert (summary["labelled"], summary["optimal"]) == (2, 2)
    got = _records(out)
    expected = json.loads(example_paths["expected"].read_text())
    assert [r["file"] for r in got] == ["a.json", "b.json"] and all(r["optimal"] for r in got)
    assert all(r["objective"] == pytest.approx(expected["objective"], abs=1e-6) for r in got)
    # the same labels as with tqdm installed
    ref = tmp_path / "ref"
    proc = run_without((), "label", "--instances", instances, "--engagement", example_paths["engagement"],
                       "--out", ref, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    strip = ("time_ms",)
    assert ([{k: v for k, v in r.items() if k not in strip} for r in got]
            == [{k: v for k, v in r.items() if k not in strip} for r in _records(ref)])


@pytest.mark.service
def test_offline_commands_without_torch_exit_2_naming_the_package(example_paths, instances, tmp_path):
    """fit-engagement and train ended in a traceback (ModuleNotFoundError: torch), exit 1."""
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"format": "mgmatch-matchlog/v1", "engagement": 0.1 * k,
                                       "teams": [[{"id": f"a{k}", "features": [0.1, k]}],
                                                 [{"id": f"b{k}", "features": [0.2, -k]}]]}) + "\n"
                           for k in range(20)))
    msg = one_line_error(run_without(IMAGE_LACKS, "fit-engagement", "--logs", log, "--out", tmp_path / "e.json"))
    assert msg.startswith("mgmatch: fit-engagement needs torch") and "pip install mgmatch" in msg, msg
    msg = one_line_error(run_without(IMAGE_LACKS, "fit-engagement", "--preset", "3v3", "--out", tmp_path / "e.json"))
    assert "needs torch" in msg and "pip install 'mgmatch[train]'" in msg, msg
    assert not (tmp_path / "e.json").exists()

    data = tmp_path / "labels"  # a real dataset of 2 labelled instances, labelled in the image
    proc = run_without(IMAGE_LACKS, "label", "--instances", instances, "--engagement", example_paths["engagement"],
                       "--out", data, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    msg = one_line_error(run_without(IMAGE_LACKS, "train", "--data", data, "--out", tmp_path / "model"))
    assert msg.startswith("mgmatch: train needs torch") and "pip install mgmatch" in msg, msg
    # torch present, torch-geometric not: the message names the one that is missing
    msg = one_line_error(run_without(("torch_geometric",), "train", "--data", data, "--out", tmp_path / "model"))
    assert "needs torch-geometric" in msg and "mgmatch[train]" in msg, msg


@pytest.mark.service
def test_a_training_command_without_matplotlib_names_the_train_extra(tmp_path):
    msg = one_line_error(run_without(("matplotlib",), "fit-engagement", "--preset", "3v3", "--matches", "60",
                                     "--players", "60", "--holdout", "20", "--epochs", "1", "--quiet",
                                     "--out", tmp_path / "e.json", "--plot", tmp_path / "p.png"))
    assert "needs matplotlib" in msg and "mgmatch[train]" in msg, msg


def test_a_lab_command_names_the_lab_extra_for_what_it_holds():
    """matplotlib is in both extras: a lab command names the lab's, a training command the training's."""
    from mgmatch.app.cli import missing_package_message

    err = ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    assert missing_package_message(err, "bench quality", lab=True).endswith("pip install 'mgmatch[lab]'")
    assert missing_package_message(err, "fit-engagement").endswith("pip install 'mgmatch[train]'")
    torch = ModuleNotFoundError("No module named 'torch'", name="torch")
    assert missing_package_message(torch, "bench quality", lab=True).endswith("pip install 'mgmatch[train]'")
    assert missing_package_message(ModuleNotFoundError("x", name="numpy"), "solve") is None


@pytest.mark.service
def test_offline_commands_without_torch_report_bad_input_first(tmp_path):
    """Input that is wrong whatever is installed is named as such, not as a missing torch."""
    log = tmp_path / "bad.jsonl"
    log.write_text(json.dumps({"format": "mgmatch-matchlog/v1", "teams": [[{"id": "a", "features": [1.0]}],
                                                                         [{"id": "b", "features": [1.0, 2.0]}]],
                               "engagement": 1.0}) + "\n")
    msg = one_line_error(run_without(IMAGE_LACKS, "fit-engagement", "--logs", log, "--out", tmp_path / "e.json"))
    assert "bad.jsonl line 1" in msg and "torch" not in msg, msg
    empty = tmp_path / "empty"
    empty.mkdir()
    msg = one_line_error(run_without(IMAGE_LACKS, "train", "--data", empty, "--out", tmp_path / "model"))
    assert "needs at least 2 labelled instances, found 0" in msg and "torch" not in msg, msg


@pytest.mark.service
def test_solve_time_limit_above_a_day_is_refused(example_paths):
    """`--time-limit-ms 1e308` ran local-search without a cap (killed after 9 minutes)."""
    inst, eng = example_paths["instance"], example_paths["engagement"]
    for limit in ("1e308", "86400001"):  # refused before any solving: a timeout here is the old unbounded run
        msg = one_line_error(run_without((), "solve", inst, "--engagement", eng, "--method", "local-search",
                                         "--time-limit-ms", limit, timeout=60))
        assert msg.startswith("mgmatch: --time-limit-ms must be ≤ 86,400,000"), msg
    ok = run_without((), "solve", inst, "--engagement", eng, "--method", "exact", "--time-limit-ms", "86400000")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "optimal"


def _export(capsys, *args: str) -> tuple[int, str, str]:
    from mgmatch.cli import main

    with pytest.raises(SystemExit) as info:
        main(["export-log", "--store", "redis", "--redis-url", "redis://127.0.0.1:1/0", *args])
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def test_export_log_refuses_a_pool_neither_config_nor_store_knows(tmp_path, capsys, monkeypatch):
    """`export-log --pool nosuch` exited 0 with an empty log. The store is a memory store standing in for Redis."""
    import mgmatch.app.store as store_module

    for var in ("MGMATCH_STORE", "MGMATCH_REDIS_URL", "MGMATCH_CONFIG", "MGMATCH_KEY_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    store = MemoryStore()
    now = time.time()
    for pool in ("retired", "3v3"):  # "retired": records of a pool since dropped from the config
        ids = [store.create(Ticket(new_ticket_id(pool), pool, [{"id": f"{pool}-{s}", "features": [0.5] * 3}],
                                   now, now + 60))[0].id for s in "ab"]
        assert store.claim(pool, ids, "c0", now + 30)
        mid = f"{pool}.c0-0-t"
        teams = [[{"id": f"{pool}-a", "features": [0.5] * 3}], [{"id": f"{pool}-b", "features": [0.5] * 3}]]
        assert store.commit(pool, "c0", ids, [], MatchResult(mid, [[f"{pool}-a"], [f"{pool}-b"]],
                                                             {ids[0]: 0, ids[1]: 1}), MatchRecord(mid, pool, teams))
        if pool == "retired":
            store.put_match_result(pool, mid, {"engagement": 1.0})
    monkeypatch.setattr(store_module, "make_store", lambda settings: store)
    out = tmp_path / "log.jsonl"

    code, _, err = _export(capsys, "--out", str(out), "--pool", "3v3", "--pool", "nosuch")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("mgmatch: --pool: unknown pool 'nosuch'"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written

    code, stdout, err = _export(capsys, "--out", str(out), "--pool", "retired")
    assert code == 0 and err == "", err
    assert json.loads(stdout)["per_pool"] == {"retired": 1} and len(out.read_text().splitlines()) == 1

    # a configured pool without results yet is not an error: an empty log, and one line saying so
    code, stdout, err = _export(capsys, "--out", str(out), "--pool", "3v3")
    lines = err.strip().splitlines()
    assert code == 0 and len(lines) == 1 and "no matches with a result in 3v3" in lines[0], err
    assert json.loads(stdout)["without_result"] == {"3v3": 1} and out.read_text() == ""
