"""MGMatch's multimodal network, the BGCN baselines and the training loop."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.networks import ARCHS, NetConfig, batch_tensors, build
from mgmatch.models.train import TrainConfig, load_checkpoint, save_checkpoint, train

torch.set_num_threads(1)


def _net(arch: str, emb_dim: int, seed: int = 0):
    torch.manual_seed(seed)
    return build(NetConfig(arch=arch, teams=2, emb_dim=emb_dim)).eval()


@pytest.fixture(scope="module")
def presets3():
    m = load_model("3v3")
    return [Problem(i, m) for i in generate_instances("3v3", 4, seed=3)]


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_arch_scores_every_x_variable(arch, presets3):
    net = _net(arch, presets3[0].model.embed_dim)
    gb = batch([encode(p, net.cfg.encoding) for p in presets3])
    with torch.no_grad():
        logits = net(*batch_tensors(gb))
    assert logits.shape == (sum(p.instance.n * 2 for p in presets3),)
    assert torch.isfinite(logits).all()
    assert hasattr(net, "hyper") == ARCHS[arch]["logical"]
    assert hasattr(net, "intra") == ARCHS[arch]["team"]


@pytest.mark.parametrize("arch", ["mgmatch", "bgcn-te", "bgcn-bigm"])
def test_a_graphs_prediction_does_not_depend_on_its_batch_mates(arch, presets3):
    net = _net(arch, presets3[0].model.embed_dim)
    gs = [encode(p, net.cfg.encoding) for p in presets3]
    assert len({g.n_players for g in gs}) > 1  # padding is exercised
    with torch.no_grad():
        together = batch(gs).split(net.forward_batch(batch(gs)).numpy())
        alone = [net.forward_batch(batch([g])).numpy().reshape(g.n_players, 2) for g in gs]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_each_arch_reads_exactly_its_modalities(presets3):
    gb = batch([encode(p) for p in presets3])
    t = list(batch_tensors(gb))
    flipped = list(t)
    flipped[5] = -t[5]                      # negate every condition literal (Table 8 features)
    noisy = list(t)
    noisy[8] = t[8] + 1.0                   # other player embeddings
    outs = {}
    with torch.no_grad():
        for arch in ("mgmatch", "bgcn", "bgcn-lc", "bgcn-te"):
            net = _net(arch, presets3[0].model.embed_dim)
            base = net(*t)
            outs[arch] = (float((net(*flipped) - base).abs().max()), float((net(*noisy) - base).abs().max()))
    assert outs["mgmatch"][0] > 1e-4 and outs["mgmatch"][1] > 1e-4
    assert outs["bgcn"] == (0.0, 0.0)
    assert outs["bgcn-lc"][0] > 1e-4 and outs["bgcn-lc"][1] == 0.0
    assert outs["bgcn-te"][0] == 0.0 and outs["bgcn-te"][1] > 1e-4


def _small(seed: int, model) -> tuple[Problem, np.ndarray]:
    """A 6-player 2v2 instance with a random `if` rule, labelled by brute force."""
    rng = np.random.default_rng(seed)
    players = [{"id": f"p{i}", "features": rng.normal(size=4).round(3).tolist()} for i in range(6)]
    a, b, c = rng.choice(6, 3, replace=False)
    rules = [{"kind": "if", "when": {"all": [[f"p{a}", 0], {"not": [f"p{b}", 1]}]},
              "then": {"terms": [[f"p{c}", 1, 1.0]], "sense": "<=", "rhs": 0}},
             {"kind": "avoid", "players": [f"p{b}", f"p{c}"], "scope": "team"}]
    prob = Problem(parse_instance({"teams": 2, "team_size": 2, "players": players, "rules": rules}), model)
    cands = []
    for picked in itertools.permutations(range(6), 4):
        t = np.full(6, -1)
        t[list(picked[:2])] = 0
        t[list(picked[2:])] = 1
        cands.append(t)
    cands = np.unique(np.asarray(cands), axis=0)
    ok = cands[prob.checker.feasible(cands)]
    return prob, ok[int(np.argmax(prob.objectives(ok)))]


def test_training_fits_brute_force_optima_and_keeps_the_best_epoch(example_paths, tmp_path):
    model = load_engagement(example_paths["engagement"])
    items = [_small(s, model) for s in range(30)]
    metrics = tmp_path / "metrics.jsonl"
    res = train(items, TrainConfig(arch="mgmatch", epochs=8, batch_size=8, lr_switch=0.75, seed=1, lr=3e-3),
                metrics_path=metrics, progress=False)
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [m["epoch"] for m in lines] == list(range(1, 9))
    assert {"train_loss", "val_bce", "val_acc", "val_topk", "lr"} <= set(lines[0])
    assert lines[-1]["lr"] == 3e-6 and lines[0]["lr"] == 3e-3
    assert lines[-1]["train_loss"] < 0.8 * lines[0]["train_loss"]  # it learns
    best = min(lines, key=lambda m: m["val_bce"])
    assert res.best_epoch == best["epoch"]
    # the returned network is the best epoch's: re-evaluating it reproduces that val BCE
    from mgmatch.models.train import evaluate, make_examples

    rng = np.random.default_rng(1)
    perm = rng.permutation(len(items))
    val = make_examples([items[k] for k in perm[:3]], "logical")
    assert evaluate(res.net, val)["val_bce"] == pytest.approx(best["val_bce"], rel=1e-5)
    # a checkpoint round trip restores the same function
    save_checkpoint(res.net, tmp_path / "c.pt")
    net2, _ = load_checkpoint(tmp_path / "c.pt")
    gb = batch([e.graph for e in val])
    with torch.no_grad():
        np.testing.assert_allclose(net2.forward_batch(gb).numpy(), res.net.forward_batch(gb).numpy(), atol=1e-6)
