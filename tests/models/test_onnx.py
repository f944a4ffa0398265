"""ONNX export (opset 18) of the torch-geometric network agrees with torch; the runtime and the shipped models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.export import export, onnx_bytes, parity
from mgmatch.models.networks import ARCHS, NetConfig, build
from mgmatch.models.runtime import OnnxPredictor, load_predictor, shipped_names

sys.path.insert(0, str(Path(__file__).parent))
from generated_game import game_problems  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def problems():
    out = {}
    for preset in ("3v3", "12v12", "12v12-deep"):
        m = load_model(preset)
        out[preset] = [Problem(i, m, model_name=preset) for i in generate_instances(preset, 5, seed=21)]
    return out


def _exported(arch, probs, path, teams=2):
    torch.manual_seed(0)
    net = build(NetConfig(arch=arch, teams=teams, emb_dim=probs[0].model.embed_dim)).eval()
    gs = [encode(p, net.cfg.encoding) for p in probs]
    fit = batch(gs)
    net.fit_normalizers(*(torch.from_numpy(a) for a in (fit.var_feat, fit.cons_feat, fit.edge_feat)))
    export(net, batch(gs[:2]), path, training={"epochs": 0})
    return net, gs


@pytest.mark.parametrize("arch", list(ARCHS))
def test_onnxruntime_matches_torch_on_real_instances_of_both_presets(arch, problems, tmp_path):
    # both presets' engagement models embed players in 12 numbers: one export serves both
    net, _ = _exported(arch, problems["3v3"] + problems["12v12"], tmp_path / "m.onnx")
    for preset in ("3v3", "12v12"):
        gs = [encode(p, net.cfg.encoding) for p in problems[preset]]
        # other batch sizes, pool sizes and literal counts than the traced example
        for group in (gs, gs[3:], gs[4:]):
            assert parity(net, tmp_path / "m.onnx", batch(group)) <= 1e-5


def test_predictor_scores_a_batch_in_one_call_and_checks_its_pin(problems, tmp_path):
    probs = problems["3v3"]
    _exported("mgmatch", probs, tmp_path / "m.onnx")
    pred = OnnxPredictor(tmp_path / "m.onnx")
    assert pred.device in ("cpu", "cuda") and pred.version.startswith("m@")
    together = pred.predict(probs)
    assert [p.shape for p in together] == [(pr.instance.n, 2) for pr in probs]
    assert all(((p >= 0) & (p <= 1)).all() for p in together)
    for p, pr in zip(together, probs, strict=True):
        np.testing.assert_allclose(p, pred.predict([pr])[0], atol=1e-5)
    assert pred.predict([]) == []
    OnnxPredictor(tmp_path / "m.onnx", sha256=pred.sha256)
    with pytest.raises(InvalidInput, match="SHA-256"):
        OnnxPredictor(tmp_path / "m.onnx", sha256="0" * 64)
    # a 12v12 engagement model with another embedding width, or another team count, is refused
    side = json.loads((tmp_path / "m.json").read_text())
    side["teams"] = 3
    shutil.copyfile(tmp_path / "m.onnx", tmp_path / "t.onnx")
    (tmp_path / "t.json").write_text(json.dumps(side))
    with pytest.raises(InvalidInput, match="teams"):
        OnnxPredictor(tmp_path / "t.onnx").predict(probs[:1])
    side["teams"], side["feature_version"] = 2, "old"
    (tmp_path / "t.json").write_text(json.dumps(side))
    with pytest.raises(InvalidInput, match="features"):
        OnnxPredictor(tmp_path / "t.onnx")
    with pytest.raises(InvalidInput):
        load_predictor("no-such-model")


def test_a_network_refuses_problems_of_another_engagement_model(problems, tmp_path):
    """The sidecar records the engagement model a network was trained against (its file's SHA-256,
    or for older preset sidecars only its name): a problem scored by another model is refused, at
    ``check`` (the CLI, before solving) and at ``predict`` (the service, which then falls back)."""
    from mgmatch.core.engagement import parse_engagement

    _exported("mgmatch", problems["3v3"], tmp_path / "m.onnx")
    side = json.loads((tmp_path / "m.json").read_text())
    three, twelve = problems["3v3"][0], problems["12v12"][0]
    assert three.model.file_sha256 is not None and three.model.file_sha256 != twelve.model.file_sha256
    for training in ({"engagement_model": "3v3"}, {"engagement_sha256": three.model.file_sha256},
                     {"engagement_model": "mine", "engagement_sha256": three.model.file_sha256}):
        (tmp_path / "m.json").write_text(json.dumps({**side, "training": training}))
        pred = OnnxPredictor(tmp_path / "m.onnx")
        pred.check(three)
        assert [p.shape for p in pred.predict([three])] == [(three.instance.n, 2)]
        with pytest.raises(InvalidInput, match="was trained for engagement model") as err:
            pred.check(twelve)
        assert err.value.field == "predictor"
        with pytest.raises(InvalidInput, match="another objective") as err:
            pred.predict([three, twelve])
        assert err.value.field == "problems[1].engagement_model"
    # a model built in memory has no file to compare: not refused (nor is a sidecar that records none)
    memory = parse_engagement(twelve.model.to_json())
    assert memory.file_sha256 is None
    pred.check(Problem(twelve.instance, memory))
    (tmp_path / "m.json").write_text(json.dumps({**side, "training": {"epochs": 0}}))
    OnnxPredictor(tmp_path / "m.onnx").check(twelve)


@pytest.mark.service
def test_the_runtime_imports_no_torch():
    code = "import sys, mgmatch.models.runtime; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("name", shipped_names())
def test_shipped_models_load_pinned_and_predict(name, problems):
    pred = load_predictor(name)
    meta = pred.meta
    assert meta["sha256"] == pred.sha256
    tr = meta["training"]
    assert tr["instances"] > 0 and tr["epochs"] >= 1 and "seed" in tr and tr["command"].startswith("mgmatch train")
    assert set(tr["val_metrics"]) == {"val_bce", "val_acc", "val_topk"}
    preset = tr["preset"]
    out = pred.predict(problems[preset][:2])
    assert [p.shape for p in out] == [(pr.instance.n, 2) for pr in problems[preset][:2]]
    assert all(np.isfinite(p).all() for p in out)


def test_both_presets_have_a_shipped_mgmatch_model():
    assert {"3v3", "12v12"} <= set(shipped_names())


def _cli(capsys, *args) -> tuple[int, str, str]:
    """Run the real entry point in-process (no interpreter start-up per call)."""
    from mgmatch.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_.value.code, out.out, out.err


def _labels(tmp_path, count: int = 6) -> Path:
    """A small labelled 3v3 dataset (generator witnesses as labels) for ``mgmatch train``."""
    from mgmatch.core.presets import generate_with_witness
    from mgmatch.pipeline.dataset import append_record

    data = tmp_path / "labels"
    data.mkdir()
    for k, (inst, witness) in enumerate(generate_with_witness("3v3", count, seed=4)):
        append_record(data, {"index": k, "instance": inst.to_json(), "model": "3v3", "status": "feasible",
                             "optimal": False, "team_of": witness.tolist()})
    return data


def test_train_command_writes_a_parity_checked_model_the_runtime_loads(tmp_path, capsys):
    from mgmatch.core.presets import generate_with_witness

    data = _labels(tmp_path)
    out = tmp_path / "run"
    code, stdout, stderr = _cli(capsys, "train", "--data", data, "--arch", "bgcn-lc", "--epochs", "2", "--seed", "3",
                                "--out", out, "--batch-size", "2", "--quiet")
    assert code == 0, stderr
    side = json.loads(stdout)
    assert side == json.loads((out / "model.json").read_text())
    assert side["arch"] == "bgcn-lc" and side["encoding"] == "logical" and side["parity_max_abs"] <= 1e-5
    tr = side["training"]
    assert (tr["instances"], tr["n_train"], tr["n_val"], tr["epochs"], tr["seed"]) == (6, 5, 1, 2, 3)
    assert tr["command"].startswith("mgmatch train --data") and "--arch bgcn-lc" in tr["command"]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    pred = OnnxPredictor(out / "model.onnx", sha256=side["sha256"])
    inst = generate_with_witness("3v3", 1, seed=4)[0][0]
    (p,) = pred.predict([Problem(inst, load_model("3v3"))])
    assert p.shape == (inst.n, 2)
    code, _, stderr = _cli(capsys, "train", "--data", data, "--arch", "gat", "--out", out)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "--arch" in stderr
    code, _, stderr = _cli(capsys, "train", "--data", tmp_path / "nope", "--out", out)
    assert code == 2 and "no such dataset" in stderr


def _epochs(out: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock field."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "epoch_s"} for r in rows]


def test_train_on_an_explicit_cpu_device_is_the_default_training(tmp_path, capsys):
    data = _labels(tmp_path)
    args = ("train", "--data", data, "--arch", "mgmatch", "--epochs", "2", "--seed", "1", "--batch-size", "2", "--quiet")
    code, stdout, stderr = _cli(capsys, *args, "--out", tmp_path / "default")
    assert code == 0, stderr
    default = json.loads(stdout)
    code, stdout, stderr = _cli(capsys, *args, "--out", tmp_path / "cpu", "--device", "cpu")
    assert code == 0, stderr
    cpu = json.loads(stdout)
    assert default["training"]["device"] == cpu["training"]["device"] == "cpu"
    assert cpu["training"]["train_s"] >= 0
    # the same numbers to the last bit, the same ONNX bytes, the same network weights
    assert _epochs(tmp_path / "cpu") == _epochs(tmp_path / "default") and len(_epochs(tmp_path / "cpu")) == 2
    assert cpu["training"]["val_metrics"] == default["training"]["val_metrics"]
    assert cpu["sha256"] == default["sha256"] and cpu["parity_max_abs"] == default["parity_max_abs"]
    states = [torch.load(tmp_path / d / "checkpoint.pt", weights_only=True)["state"] for d in ("default", "cpu")]
    assert list(states[0]) == list(states[1])
    assert all(torch.equal(states[0][k], states[1][k]) and states[1][k].device.type == "cpu" for k in states[0])
    # the default device is left out of the reproducing command
    assert "--device" not in cpu["training"]["command"]
    assert cpu["training"]["command"] == default["training"]["command"].replace(str(tmp_path / "default"), str(tmp_path / "cpu"))


def _unusable_cuda() -> list[str]:
    """CUDA device names that cannot be used on this machine (an index past the last GPU, and without
    CUDA the bare name too)."""
    if torch.cuda.is_available():
        return [f"cuda:{torch.cuda.device_count()}"]
    return ["cuda", "cuda:7"]


@pytest.mark.parametrize("device", [*_unusable_cuda(), "nonsense", "cuda:x", "meta"])
def test_train_refuses_a_device_it_cannot_use_with_exit_2_and_one_line(device, tmp_path, capsys):
    data = _labels(tmp_path, count=2)
    out = tmp_path / "run"
    code, stdout, stderr = _cli(capsys, "train", "--data", data, "--out", out, "--epochs", "1", "--quiet",
                                "--device", device)
    assert code == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mgmatch: device: ") and repr(device) in lines[0], stderr
    assert not out.exists()  # refused before any training or output


@pytest.mark.parametrize("seed", ["-1", str(2**31)])
def test_train_refuses_a_seed_out_of_range_with_exit_2_and_one_line(seed, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = _cli(capsys, "train", "--data", tmp_path, "--out", out, "--epochs", "1", "--quiet",
                                "--seed", seed)
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1 and "--seed" in stderr, stderr
    assert not out.exists()


def test_train_config_device_is_checked_before_training():
    from mgmatch.models.train import TrainConfig, resolve_device, train

    assert resolve_device("cpu") == torch.device("cpu")
    for device in ("nonsense", "meta", *_unusable_cuda()):
        with pytest.raises(InvalidInput) as err:
            train([], TrainConfig(device=device), progress=False)
        assert err.value.field == "device"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_train_on_cuda_writes_the_same_format_as_on_the_cpu(tmp_path, capsys):
    data = _labels(tmp_path)
    out = tmp_path / "cuda"
    code, stdout, stderr = _cli(capsys, "train", "--data", data, "--arch", "mgmatch", "--epochs", "2", "--seed", "1",
                                "--batch-size", "2", "--quiet", "--out", out, "--device", "cuda")
    assert code == 0, stderr
    side = json.loads(stdout)
    tr = side["training"]
    assert tr["device"] == "cuda" and "--device cuda" in tr["command"] and side["parity_max_abs"] <= 1e-5
    ck = torch.load(out / "checkpoint.pt", weights_only=True)
    assert all(v.device.type == "cpu" for v in ck["state"].values())
    assert len(_epochs(out)) == 2 and all(np.isfinite(r["val_bce"]) for r in _epochs(out))
    pred = OnnxPredictor(out / "model.onnx", sha256=side["sha256"])
    from mgmatch.core.presets import generate_with_witness

    inst = generate_with_witness("3v3", 1, seed=4)[0][0]
    (p,) = pred.predict([Problem(inst, load_model("3v3"))])
    assert p.shape == (inst.n, 2)


@pytest.mark.parametrize("teams", [2, 3])
@pytest.mark.parametrize("arch", ["mgmatch", "bgcn-lc", "bgcn-te"])
def test_the_pyg_network_exports_exactly_for_generated_games_of_2_and_3_teams(arch, teams, tmp_path):
    import onnx

    probs = game_problems(teams, (6, 9, 7, 12, 8), seed=teams)
    net, gs = _exported(arch, probs, tmp_path / "m.onnx", teams=teams)
    # PyG's add and mean aggregations become ScatterElements(add); no other scatter reaches the graph
    graph = onnx.load(tmp_path / "m.onnx").graph
    scatters = {(n.op_type, tuple(a.s for a in n.attribute if a.name == "reduction")) for n in graph.node
                if "Scatter" in n.op_type}
    assert scatters == {("ScatterElements", (b"add",))}
    # graphs of other sizes than the traced pair (which had 6 and 9 players)
    for group in (gs, gs[2:], gs[3:4], gs[4:]):
        assert parity(net, tmp_path / "m.onnx", batch(group)) <= 1e-5
    pred = OnnxPredictor(tmp_path / "m.onnx")
    assert [p.shape for p in pred.predict(probs)] == [(pr.instance.n, teams) for pr in probs]


def _shipped_state(path) -> dict[str, torch.Tensor]:
    """The parameters of a shipped ONNX file under the scatter version's state-dict names.

    The exporter keeps ``net.<name>`` initializers; the weights it transposed for a MatMul get an
    anonymous name, recovered from the MatMul node's module scope (``/net/intra.0.0/ff/ff.0/MatMul``
    → ``intra.0.0.ff.0.weight``); the team position rows are the anonymous [d] addends, in order.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in graph.initializer}
    state = {k.removeprefix("net."): v for k, v in inits.items() if k.startswith("net.")}
    team_pos = []
    for node in graph.node:
        anon = [x for x in node.input if x in inits and not x.startswith("net.")]
        if not anon:
            continue
        (name,) = anon
        if node.op_type == "MatMul":
            scope = node.name.split("/")[2:-1]  # drop "", "net" and the op
            path_ = [c for c, nxt in zip(scope, [*scope[1:], ""], strict=True) if not nxt.startswith(c + ".")]
            state[".".join(path_) + ".weight"] = inits[name].T.contiguous()
        elif node.op_type == "Add":
            team_pos.append(inits[name])
        else:
            raise AssertionError(f"unexpected anonymous initializer in {node.op_type} {node.name}")
    if team_pos:
        state["team_pos"] = torch.stack(team_pos)
    return state


@pytest.mark.parametrize("name", shipped_names())
def test_the_pyg_network_with_a_shipped_models_weights_reproduces_it(name, problems, tmp_path):
    path = load_predictor(name).path
    meta = json.loads(path.with_suffix(".json").read_text())
    net = build(NetConfig(**meta["network"]))
    net.load_state_dict(_shipped_state(path))  # strict: every parameter recovered, under its old name
    net.eval()
    gs = [encode(p, net.cfg.encoding) for p in problems[meta["training"]["preset"]]]
    for group in (gs, gs[1:3], gs[4:]):
        # torch (PyG layers) against onnxruntime on the shipped file, untouched
        assert parity(net, path, batch(group)) <= 1e-5
    # and a fresh export of the PyG network serves the same probabilities as the shipped file
    (tmp_path / "re.onnx").write_bytes(onnx_bytes(net, batch(gs[:2])))
    (tmp_path / "re.json").write_text(path.with_suffix(".json").read_text())
    fresh, shipped = OnnxPredictor(tmp_path / "re.onnx"), load_predictor(name)
    # models shipped before the PyG port are another graph of the same function (other sha256);
    # those exported by the PyG network (12v12-deep, 12v12-deep-bgcn) come back byte for byte
    if name.startswith("12v12-deep"):
        assert fresh.sha256 == shipped.sha256
    else:
        assert fresh.sha256 != shipped.sha256
    probs = problems[meta["training"]["preset"]]
    for a, b in zip(fresh.predict(probs), shipped.predict(probs), strict=True):
        assert np.abs(a - b).max() <= 1e-5
