"""Supervised training of the solution-prediction networks (paper §4.2.3, Eq. 19).

Adam at 3e-4, then 3e-6 for the rest (the paper: 50 + 50 epochs), mini-batches of whole graphs,
binary cross-entropy against the optimal x*, the best epoch on validation BCE kept. One JSON line
per epoch goes to ``metrics.jsonl``: train loss, validation BCE, validation accuracy of the rounded
prediction (p ≥ 0.5 per x_ij) and top-K hit rate (share of the optimum's selected (player, team)
pairs among the K = Σ team sizes largest p).

``TrainConfig.device`` runs the training on ``cpu`` (the default) or a CUDA GPU (``cuda[:N]``).
Initialization and the input normalizers are computed on the CPU either way, and the network
comes back on the CPU, so checkpoints and the ONNX export do not depend on the device.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem

from .encoder import Graph, GraphBatch, batch, encode
from .networks import NetConfig, SolutionNet, batch_tensors, bce_loss, build


@dataclass
class TrainConfig:
    arch: str = "mgmatch"
    epochs: int = 20
    seed: int = 0
    batch_size: int = 32
    lr: float = 3e-4
    lr_low: float = 3e-6
    lr_switch: float = 0.5     # share of the epochs run at ``lr`` before dropping to ``lr_low``
    val_share: float = 0.1
    hidden: int = 32
    rounds: int = 2
    threads: int = 1
    device: str = "cpu"        # torch device: "cpu" or "cuda[:N]" (see resolve_device)


@dataclass
class Example:
    """One encoded training instance: its graph and the label y [N, D] (x*_ij)."""

    graph: Graph
    y: np.ndarray
    sizes: tuple[int, ...]


@dataclass
class TrainResult:
    net: SolutionNet
    best_epoch: int
    best: dict
    history: list[dict] = field(default_factory=list)
    n_train: int = 0
    n_val: int = 0


def resolve_device(name: str) -> torch.device:
    """The torch device ``name`` names, checked usable for training here.

    Raises:
        InvalidInput: (field ``device``) for a name torch does not parse, a type other than cpu and
            cuda, or a CUDA device that is not available (no CUDA build or GPU, or no such index).
    """
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise InvalidInput("device", f"{name!r} is not a torch device; expected cpu or cuda[:N]") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise InvalidInput("device", f"{name!r}: training runs on cpu or cuda[:N], not {dev.type}")
    if not torch.cuda.is_available():
        raise InvalidInput("device", f"{name!r}: CUDA is not available here (torch {torch.__version__}, "
                                     f"CUDA build {torch.version.cuda or 'none'})")
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        raise InvalidInput("device", f"{name!r}: no such CUDA device ({count} visible)")
    return dev


def make_examples(items: list[tuple[Problem, np.ndarray]], encoding: str) -> list[Example]:
    """Encode ``(problem, team_of*)`` pairs once."""
    out = []
    for problem, team_of in items:
        t = np.asarray(team_of)
        D = problem.instance.teams
        y = (t[:, None] == np.arange(D)[None, :]).astype(np.float32)
        out.append(Example(encode(problem, encoding), y, problem.instance.sizes))
    return out


def _batches(examples: list[Example], size: int, rng: np.random.Generator | None) -> list[tuple[GraphBatch, np.ndarray, list[Example]]]:
    order = np.arange(len(examples)) if rng is None else rng.permutation(len(examples))
    out = []
    for s in range(0, len(order), size):
        chunk = [examples[k] for k in order[s:s + size]]
        out.append((batch([e.graph for e in chunk]), np.concatenate([e.y.reshape(-1) for e in chunk]), chunk))
    return out


def evaluate(net: SolutionNet, examples: list[Example], batch_size: int = 64) -> dict:
    """Validation metrics: BCE, rounded accuracy, top-K hit rate (the network on any device)."""
    net.eval()
    bce_sum, n, correct, hits, positives = 0.0, 0, 0, 0, 0
    with torch.no_grad():
        for gb, y, chunk in _batches(examples, batch_size, None):
            logits = net.forward_batch(gb)
            yt = torch.from_numpy(y).to(logits.device)
            bce_sum += float(torch.nn.functional.binary_cross_entropy_with_logits(logits, yt, reduction="sum"))
            n += len(y)
            p = torch.sigmoid(logits).cpu().numpy()
            correct += int(((p >= 0.5) == (y >= 0.5)).sum())
            for pe, e in zip(gb.split(p), chunk, strict=True):
                k = sum(e.sizes)
                top = np.argsort(-pe, axis=None, kind="stable")[:k]
                hits += int(e.y.reshape(-1)[top].sum())
                positives += int(e.y.sum())
    return {"val_bce": bce_sum / max(n, 1), "val_acc": correct / max(n, 1), "val_topk": hits / max(positives, 1)}


def train(items: list[tuple[Problem, np.ndarray]], cfg: TrainConfig, metrics_path: str | Path | None = None,
          progress: bool = True) -> TrainResult:
    """Train one network on labelled problems.

    Args:
        items: ``(problem, team_of*)`` with the optimal (or best known) assignment per problem.
        cfg: hyperparameters; ``cfg.arch`` picks the network and the graph encoding, ``cfg.device``
            where it trains.
        metrics_path: where to append one JSON line per epoch (None: keep in memory only).
        progress: show a progress bar on stderr.

    Returns:
        the best epoch's network, on the CPU whatever ``cfg.device`` was.
    """
    device = resolve_device(cfg.device)
    if len(items) < 2:
        raise ValueError("training needs at least two labelled instances (one for validation)")
    torch.set_num_threads(max(1, cfg.threads))
    torch.manual_seed(cfg.seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    teams = {p.instance.teams for p, _ in items}
    emb = {p.model.embed_dim for p, _ in items}
    if len(teams) != 1 or len(emb) != 1:
        raise ValueError("all instances must share the team count and the engagement model's embedding width")
    net_cfg = NetConfig(arch=cfg.arch, teams=teams.pop(), emb_dim=emb.pop(), hidden=cfg.hidden, rounds=cfg.rounds)
    net = build(net_cfg)
    examples = make_examples(items, net_cfg.encoding)
    perm = rng.permutation(len(examples))
    n_val = max(1, int(round(cfg.val_share * len(examples))))
    val = [examples[k] for k in perm[:n_val]]
    tr = [examples[k] for k in perm[n_val:]]
    all_tr = batch([e.graph for e in tr])
    net.fit_normalizers(*(torch.from_numpy(a) for a in (all_tr.var_feat, all_tr.cons_feat, all_tr.edge_feat)))
    # initialized and normalizers fitted on the CPU above, so a seed gives the same start on any device
    net.to(device)

    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    switch = max(1, int(math.ceil(cfg.lr_switch * cfg.epochs)))
    best, best_state, best_epoch = None, None, -1
    history: list[dict] = []
    mf = open(metrics_path, "a") if metrics_path is not None else None
    bar = tqdm(range(1, cfg.epochs + 1), desc=f"train {cfg.arch}", unit="epoch", disable=not progress, file=sys.stderr)
    try:
        for epoch in bar:
            lr = cfg.lr if epoch <= switch else cfg.lr_low
            for g in opt.param_groups:
                g["lr"] = lr
            net.train()
            t0 = time.perf_counter()
            loss_sum, count = 0.0, 0
            for gb, y, _ in _batches(tr, cfg.batch_size, rng):
                logits = net(*batch_tensors(gb, device))
                loss = bce_loss(logits, torch.from_numpy(y).to(device))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                opt.step()
                loss_sum += float(loss.detach()) * len(y)
                count += len(y)
            m = {"epoch": epoch, "lr": lr, "train_loss": loss_sum / max(count, 1), **evaluate(net, val),
                 "epoch_s": round(time.perf_counter() - t0, 3)}
            m["best"] = best is None or m["val_bce"] < best["val_bce"]
            if m["best"]:
                best, best_epoch = dict(m), epoch
                best_state = copy.deepcopy(net.state_dict())
            history.append(m)
            if mf is not None:
                mf.write(json.dumps(m) + "\n")
                mf.flush()
            bar.set_postfix(loss=f"{m['train_loss']:.4f}", val_bce=f"{m['val_bce']:.4f}", topk=f"{m['val_topk']:.3f}")
    finally:
        if mf is not None:
            mf.close()
    assert best_state is not None and best is not None
    net.load_state_dict(best_state)
    net.to("cpu")  # checkpoints, the ONNX export and its parity check read CPU tensors
    net.eval()
    return TrainResult(net, best_epoch, best, history, len(tr), len(val))


def save_checkpoint(net: SolutionNet, path: str | Path, extra: dict | None = None) -> None:
    """Write ``net``'s config, state and ``extra``; the state as CPU tensors whatever device ``net`` is on."""
    if net.var_keep.device.type != "cpu":
        net = copy.deepcopy(net).cpu()  # a copy: the caller's network stays where it is
    torch.save({"config": net.cfg.to_json(), "state": net.state_dict(), "extra": extra or {}}, path)


def load_checkpoint(path: str | Path) -> tuple[SolutionNet, dict]:
    ck = torch.load(path, map_location="cpu", weights_only=True)
    net = build(NetConfig(**ck["config"]))
    net.load_state_dict(ck["state"])
    net.eval()
    return net, ck.get("extra", {})
