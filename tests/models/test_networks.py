"""MGMatch's multimodal network (torch-geometric layers), the BGCN baselines and the training loop."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.networks import ARCHS, LEGACY_KEYS, EdgeMLPConv, NetConfig, batch_tensors, bce_loss, build
from mgmatch.models.train import TrainConfig, load_checkpoint, save_checkpoint, train

sys.path.insert(0, str(Path(__file__).parent))
from generated_game import game_problems  # noqa: E402

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


# ---------------------------------------------------------------- torch-geometric layers


def _scatter_sum(src: torch.Tensor, index: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.zeros(rows, src.shape[1]).scatter_add(0, index.unsqueeze(-1).expand(-1, src.shape[1]), src)


def _reference_logits(net, var_feat, cons_feat, edge_index, edge_feat, cond_index, cond_feat, x_var, x_token,
                      player_emb, player_mask):
    """The hand-written scatter-add message passing the PyG layers replaced, on the PyG net's parameters."""
    v = net.emb_v(net.norm_v(var_feat) * net.var_keep)
    c = net.emb_c(net.norm_c(cons_feat))
    e = net.emb_e(net.norm_e(edge_feat))
    ev, ec = edge_index
    qv, qc = cond_index
    n_cond = _scatter_sum(torch.ones_like(cond_feat[:, :1]), qc, c.shape[0])
    for k in range(net.cfg.rounds):
        m = net.conv_c[k].mlp(torch.cat([c[ec], v[ev], e], dim=1))
        c = c + net.upd_c[k](torch.cat([c, net.ln_c[k](_scatter_sum(m, ec, c.shape[0]))], dim=1))
        if net.cfg.logical:
            ce = _scatter_sum(net.conv_cond[k].mlp(torch.cat([v[qv], cond_feat], dim=1)), qc, c.shape[0])
            ce = ce / n_cond.clamp_min(1.0)
            psi, d = net.hyper[k](ce), c.shape[1]
            t = (psi[:, : d * d].reshape(-1, d, d) @ c.unsqueeze(-1)).squeeze(-1) + psi[:, d * d:]
            c = c + (n_cond > 0).float() * (c * torch.tanh(t))
        convs = net.conv_v[k].convs
        agg = _scatter_sum(convs["cons", "coef", "var"].mlp(torch.cat([c[ec], v[ev], e], dim=1)), ev, v.shape[0])
        if net.cfg.logical:
            q = convs["cons", "cond", "var"].mlp(torch.cat([c[qc], v[qv], cond_feat], dim=1))
            agg = agg + _scatter_sum(q, qv, v.shape[0])
        v = v + net.upd_v[k](torch.cat([v, net.ln_v[k](agg)], dim=1))
    x_embed = net.mlp_f(v[x_var])
    if net.cfg.team:
        x_embed = torch.cat([x_embed, net.team_embed(player_emb, player_mask)[x_token]], dim=1)
    return net.head(x_embed).squeeze(-1)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_the_pyg_layers_reproduce_the_hand_written_scatter_math(arch, presets3):
    net = _net(arch, presets3[0].model.embed_dim, seed=4)
    t = batch_tensors(batch([encode(p, net.cfg.encoding) for p in presets3]))
    net.fit_normalizers(t[0], t[1], t[3])
    with torch.no_grad():
        got, want = net(*t), _reference_logits(net, *t)
    assert want.abs().max() > 1e-3  # not a trivial output
    assert float((got - want).abs().max()) <= 1e-6


def test_a_checkpoint_of_the_scatter_version_loads_and_computes_the_same(presets3):
    net = _net("mgmatch", presets3[0].model.embed_dim, seed=7)
    t = batch_tensors(batch([encode(p) for p in presets3]))
    net.fit_normalizers(t[0], t[1], t[3])
    # the scatter version's names: msg_c.k.*, cond.k.*, msg_v.k.*, msg_q.k.*
    back = [(re.compile(r"^conv_c\.(\d+)\.mlp\."), r"msg_c.\1."), (re.compile(r"^conv_cond\.(\d+)\.mlp\."), r"cond.\1."),
            (re.compile(r"^conv_v\.(\d+)\.convs\.<cons___coef___var>\.mlp\."), r"msg_v.\1."),
            (re.compile(r"^conv_v\.(\d+)\.convs\.<cons___cond___var>\.mlp\."), r"msg_q.\1.")]
    old = {}
    for key, value in net.state_dict().items():
        for pattern, repl in back:
            key = pattern.sub(repl, key)
        old[key] = value
    assert {k.split(".")[0] for k in old} >= {"msg_c", "cond", "msg_v", "msg_q"}
    assert not any(k.startswith(("conv_c", "conv_cond", "conv_v")) for k in old)
    assert len(LEGACY_KEYS) == len(back)
    fresh = _net("mgmatch", presets3[0].model.embed_dim, seed=8)
    fresh.load_state_dict(old)  # strict: every parameter found under its old name
    with torch.no_grad():
        assert torch.equal(fresh(*t), net(*t))


def test_edge_mlp_conv_sums_or_averages_mlp_messages_at_the_target():
    torch.manual_seed(0)
    x_src, x_dst = torch.randn(3, 2), torch.randn(4, 5)
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 1, 0, 3]])  # target 2 receives nothing
    edge_attr = torch.randn(4, 1)
    lin = torch.nn.Linear(2 + 5 + 1, 6)
    want_msg = lin(torch.cat([x_src[edge_index[0]], x_dst[edge_index[1]], edge_attr], dim=1))
    add = EdgeMLPConv(lin, ("src", "dst", "edge"), aggr="add")((x_src, x_dst), edge_index, edge_attr)
    mean = EdgeMLPConv(lin, ("src", "dst", "edge"), aggr="mean")((x_src, x_dst), edge_index, edge_attr)
    assert add.shape == mean.shape == (4, 6)
    torch.testing.assert_close(add[1], want_msg[0] + want_msg[1])
    torch.testing.assert_close(mean[1], (want_msg[0] + want_msg[1]) / 2)
    torch.testing.assert_close(add[0], want_msg[2])
    assert torch.equal(add[2], torch.zeros(6)) and torch.equal(mean[2], torch.zeros(6))
    # the layout orders the concatenation: the target first, no edge features
    lin2 = torch.nn.Linear(5 + 2, 3)
    got = EdgeMLPConv(lin2, ("dst", "src"))((x_src, x_dst), edge_index, edge_attr)
    torch.testing.assert_close(got[3], lin2(torch.cat([x_dst[3], x_src[2]])))
    with pytest.raises(ValueError, match="export"):
        EdgeMLPConv(lin, ("src",), aggr="max")
    with pytest.raises(ValueError, match="layout"):
        EdgeMLPConv(lin, ("src", "src"))
    with pytest.raises(ValueError, match="layout"):
        EdgeMLPConv(lin, ("src", "target"))


def test_the_pyg_network_trains_on_a_tiny_generated_3_team_game():
    probs = game_problems(3, (6, 7, 8, 9), seed=2)
    torch.manual_seed(0)
    net = build(NetConfig(arch="mgmatch", teams=3, emb_dim=probs[0].model.embed_dim))
    gb = batch([encode(p) for p in probs])
    t = batch_tensors(gb)
    net.fit_normalizers(t[0], t[1], t[3])
    # a fixed target: the first 2 players of every pool on team 0, the next 2 on team 1, …
    y = torch.from_numpy(np.concatenate([(np.arange(p.instance.n)[:, None] // 2 == np.arange(3)[None, :]).reshape(-1)
                                         for p in probs]).astype(np.float32))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    net.train()
    losses = []
    for _ in range(6):
        loss = bce_loss(net(*t), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
    assert net.conv_v[0].convs["cons", "cond", "var"].mlp[0].weight.grad.abs().sum() > 0  # condition edges learn
    assert losses[-1] < 0.9 * losses[0]
