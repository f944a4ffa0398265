"""Fit a preset's engagement network on simulated match history and export it to the spec JSON.

Stages: simulate a world and its match history (:func:`mgmatch.core.world.simulate_history`),
fit the torch network (:class:`mgmatch.models.engagement_torch.EngagementNet`) with MSE
(MGMatch §4.1) on the expected number of retained players, measure it on a held-out history over
a *fresh* world (players never seen in training), and write ``mgmatch-engagement/v1`` JSON with a
``training`` record (command, seed, matches, epochs, architecture, held-out MSE/MAE, date).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import get_preset
from mgmatch.core.world import FORMATIONS, History, simulate_history
from mgmatch.models.engagement_torch import EngagementNet, export_json


@dataclass
class FitConfig:
    preset: str
    matches: int = 200_000
    epochs: int = 20
    seed: int = 0
    players: int | None = None          # world size; default max(20000, matches // 2)
    holdout_matches: int = 20_000       # on a fresh world
    batch: int = 256
    lr: float = 2e-3
    player_hidden: tuple[int, ...] = (64, 32)
    embed_dim: int = 12
    head_hidden: tuple[int, ...] = (16,)
    threads: int = 1


@dataclass
class FitResult:
    model: EngagementModel
    net: EngagementNet
    record: dict[str, Any]
    holdout: History


def _check(cfg: FitConfig) -> None:
    get_preset(cfg.preset)
    for name in ("matches", "epochs", "holdout_matches", "batch", "embed_dim"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidInput(name, f"must be a positive integer, got {v!r}")
    if not (isinstance(cfg.lr, float) and math.isfinite(cfg.lr) and cfg.lr > 0):
        raise InvalidInput("lr", f"must be a positive number, got {cfg.lr!r}")
    if len(cfg.head_hidden) != 1 or not 1 <= cfg.head_hidden[0] <= 64:
        raise InvalidInput("head_hidden", "the head has exactly one hidden layer of 1..64 neurons (the exact MIP needs a small head)")


def _batches(teams: torch.Tensor, X: torch.Tensor, y: torch.Tensor, batch: int, gen: torch.Generator | None):
    M = teams.shape[0]
    order = torch.randperm(M, generator=gen) if gen is not None else torch.arange(M)
    for s in range(0, M, batch):
        idx = order[s:s + batch]
        yield X[teams[idx]], y[idx]


def predict(net: EngagementNet, hist: History, batch: int = 4096) -> np.ndarray:
    """Predicted engagement of every match of ``hist`` [M] (float64 output of the float32 net)."""
    X = torch.as_tensor(hist.features)
    teams = torch.as_tensor(hist.teams.astype(np.int64))
    out = []
    net.eval()
    with torch.no_grad():
        for s in range(0, teams.shape[0], batch):
            out.append(net(X[teams[s:s + batch]]).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def metrics(pred: np.ndarray, hist: History) -> dict[str, float]:
    err = pred - hist.y
    var = float(hist.y.var())
    mse = float(np.mean(err ** 2))
    out = {"mse": round(mse, 5), "mae": round(float(np.mean(np.abs(err))), 5), "target_var": round(var, 5),
           "r2": round(1 - mse / var, 4) if var > 0 else 0.0, "target_mean": round(float(hist.y.mean()), 4)}
    for f, name in enumerate(FORMATIONS):
        m = hist.formation == f
        if m.any():
            out[f"mse_{name}"] = round(float(np.mean(err[m] ** 2)), 5)
    return out


def fit(cfg: FitConfig, command: str | None = None, log=None) -> FitResult:
    """Simulate, fit and export. ``log`` receives one line per epoch when given."""
    _check(cfg)
    p = get_preset(cfg.preset)
    t0 = time.perf_counter()
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    root = np.random.SeedSequence([cfg.seed, 0x6E6761])
    train_rng, hold_rng = (np.random.default_rng(s) for s in root.spawn(2))
    n_players = cfg.players or max(20_000, cfg.matches // 2)
    hist = simulate_history(p.world, n_players, cfg.matches, train_rng)
    hold = simulate_history(p.world, max(5_000, cfg.holdout_matches // 2), cfg.holdout_matches, hold_rng)
    t_sim = time.perf_counter() - t0

    mean = hist.features.astype(np.float64).mean(0)
    scale = hist.features.astype(np.float64).std(0)
    scale[scale < 1e-6] = 1.0
    net = EngagementNet(p.feature_dim, p.teams, cfg.player_hidden, cfg.embed_dim, cfg.head_hidden,
                        mean, scale, float(hist.y.mean()), float(hist.y.std()))
    X = torch.as_tensor(hist.features)
    teams = torch.as_tensor(hist.teams.astype(np.int64))
    y = torch.as_tensor(((hist.y - net.target_mean) / net.target_scale).astype(np.float32))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    steps = cfg.epochs * math.ceil(cfg.matches / cfg.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    for epoch in range(cfg.epochs):
        net.train()
        total, n = 0.0, 0
        for xb, yb in _batches(teams, X, y, cfg.batch, gen):
            loss = torch.mean((net.raw(xb) - yb) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(yb)
            n += len(yb)
        if log is not None:
            hm = metrics(predict(net, hold), hold)
            log(f"epoch {epoch + 1}/{cfg.epochs}: train mse {total / n * net.target_scale ** 2:.4f}, "
                f"held-out mse {hm['mse']:.4f} mae {hm['mae']:.4f}")
    train_m = metrics(predict(net, hist), hist)
    hold_m = metrics(predict(net, hold), hold)
    record = {
        "command": command or f"mgmatch fit-engagement --preset {cfg.preset} --matches {cfg.matches} "
                              f"--epochs {cfg.epochs} --seed {cfg.seed}",
        "seed": cfg.seed,
        "matches": cfg.matches,
        "world_players": n_players,
        "epochs": cfg.epochs,
        "batch": cfg.batch,
        "lr": cfg.lr,
        "loss": "mse",
        "target": "expected players retained after the match (mgmatch.core.world.engagement)",
        "architecture": net.architecture(),
        "train": {"mse": train_m["mse"], "mae": train_m["mae"]},
        "holdout": {"matches": cfg.holdout_matches, "world": "fresh players (unseen in training)", **hold_m},
        "seconds": {"simulate": round(t_sim, 1), "total": round(time.perf_counter() - t0, 1)},
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
    }
    model = parse_engagement(export_json(net, cfg.preset, record))
    return FitResult(model, net, record, hold)


def write(result: FitResult, out: str | Path) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.model.to_json()) + "\n")


# --------------------------------------------------------------------------- fidelity


def enumerate_assignments(n: int, D: int, K: int) -> np.ndarray:
    """Every assignment of D ordered teams of K players out of n (team_of rows [B, n]).

    Meant for small pools (3v3 with n ≤ 20: at most 1,007,760 rows).
    """
    from itertools import combinations

    rows: list[np.ndarray] = []

    def rec(prefix: np.ndarray, j: int) -> None:
        if j == D:
            rows.append(prefix.copy())
            return
        free = np.flatnonzero(prefix < 0)
        for team in combinations(free.tolist(), K):
            prefix[list(team)] = j
            rec(prefix, j + 1)
            prefix[list(team)] = -1

    rec(np.full(n, -1, dtype=np.int8), 0)
    return np.stack(rows)


def fidelity(preset: str, model: EngagementModel, count: int, seed: int) -> dict[str, Any]:
    """How well optimizing ``model`` serves the ground truth, on ``count`` generated instances.

    For each instance every feasible assignment is enumerated (3v3-sized pools only) and scored by
    the model and by the ground-truth engagement of the world. Reports the mean true engagement of
    the model's optimum, of the true optimum, of the planted witness and of a random feasible
    assignment, the share of the achievable gain over random that the model's optimum captures,
    and the Spearman rank correlation of model and truth over the feasible assignments.
    """
    from mgmatch.core.checker import Checker
    from mgmatch.core.presets import generate_with_truth

    p = get_preset(preset)
    if p.team_size * p.teams > 8:
        raise InvalidInput("preset", f"fidelity enumerates every assignment; {preset} pools are too large")
    rows = []
    for g in generate_with_truth(preset, count, seed):
        inst = g.instance
        T = enumerate_assignments(inst.n, inst.teams, inst.sizes[0])
        T = T[Checker(inst).feasible(T)]
        emb = model.embed(inst.features())
        pred = model.evaluate(emb, T)
        true = g.true_engagement(T)
        rank_p = np.argsort(np.argsort(pred))
        rank_t = np.argsort(np.argsort(true))
        rho = float(np.corrcoef(rank_p, rank_t)[0, 1]) if len(T) > 2 else float("nan")
        rows.append({"feasible": len(T), "model_opt": float(true[np.argmax(pred)]), "true_opt": float(true.max()),
                     "random": float(true.mean()), "witness": float(g.true_engagement(g.witness)),
                     "predicted_opt": float(pred.max()), "spearman": rho})
    mean = {k: float(np.nanmean([r[k] for r in rows])) for k in rows[0]}
    gain = [(r["model_opt"] - r["random"]) / (r["true_opt"] - r["random"]) for r in rows if r["true_opt"] > r["random"]]
    return {
        "preset": preset, "instances": len(rows), "seed": seed,
        "mean_feasible_assignments": round(mean["feasible"], 1),
        "true_engagement": {k: round(mean[k], 4) for k in ("model_opt", "true_opt", "witness", "random")},
        "predicted_at_model_opt": round(mean["predicted_opt"], 4),
        "gain_captured": round(float(np.mean(gain)), 4) if gain else None,
        "spearman": round(mean["spearman"], 4),
    }
