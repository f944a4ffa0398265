"""ONNX export (opset 18) agrees with torch; the onnxruntime predictor and the shipped models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.export import export, parity
from mgmatch.models.networks import ARCHS, NetConfig, build
from mgmatch.models.runtime import OnnxPredictor, load_predictor, shipped_names

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def problems():
    out = {}
    for preset in ("3v3", "12v12"):
        m = load_model(preset)
        out[preset] = [Problem(i, m, model_name=preset) for i in generate_instances(preset, 5, seed=21)]
    return out


def _exported(arch, probs, path):
    torch.manual_seed(0)
    net = build(NetConfig(arch=arch, teams=2, emb_dim=probs[0].model.embed_dim)).eval()
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
    from mgmatch.app.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_.value.code, out.out, out.err


def test_train_command_writes_a_parity_checked_model_the_runtime_loads(tmp_path, capsys):
    from mgmatch.core.presets import generate_with_witness
    from mgmatch.pipeline.dataset import append_record

    data = tmp_path / "labels"
    data.mkdir()
    for k, (inst, witness) in enumerate(generate_with_witness("3v3", 6, seed=4)):
        append_record(data, {"index": k, "instance": inst.to_json(), "model": "3v3", "status": "feasible",
                             "optimal": False, "team_of": witness.tolist()})
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
