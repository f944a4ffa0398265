"""Fit the engagement network on a match log and export it to the spec JSON (``mgmatch fit-engagement``).

**A studio's log** (:func:`fit_log`): the log (spec §5, :mod:`mgmatch.pipeline.matchlog`) gives
the teams D and ``feature_dim``; a seeded share of its matches is held out and never trained on, a
seeded share of the rest is the validation set of early stopping (the best epoch on validation
MSE is kept). The torch network (:class:`mgmatch.models.engagement_torch.EngagementNet`) is fitted
with MSE (MGMatch §4.1), Adam and a one-cycle learning rate, and written as
``mgmatch-engagement/v1`` JSON with a ``training`` record (command, seed, sizes of every split,
epochs, architecture, held-out MSE / MAE / R², seconds, date).

**A preset** (:func:`fit`): the preset's simulator (:func:`mgmatch.core.world.simulate_history`)
writes a training log and a held-out log over a *fresh* world (players never seen in training),
and :func:`fit_log` fits them: the same code path as a studio's log.
"""

from __future__ import annotations

import copy
import datetime as _dt
import io
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import get_preset
from mgmatch.core.world import matchlog_lines, simulate_history
from mgmatch.models.engagement_torch import EngagementNet, export_json

from .matchlog import MatchData, load_matchlog


@dataclass
class LogFitConfig:
    """How to fit a log.

    Early stopping: after ``patience`` epochs in a row without lowering the best validation MSE by
    more than ``min_delta`` (relative), training stops; the best epoch's weights are kept.
    ``patience`` 0 turns it off (every epoch runs).
    """

    epochs: int = 30
    seed: int = 0
    holdout_share: float = 0.1
    val_share: float = 0.1
    patience: int = 5
    min_delta: float = 0.005
    batch: int = 512
    lr: float = 3e-3
    player_hidden: tuple[int, ...] = (64, 32)
    embed_dim: int = 12
    head_hidden: tuple[int, ...] = (16,)
    head_l1: float = 0.0
    threads: int = 1
    name: str | None = None
    #: each epoch trains on a fresh seeded sample of at most this many training matches (None: all of
    #: them), so a refit's cost stops growing with the data (``mgmatch.pipeline.refit``)
    epoch_matches: int | None = None
    team_hidden: tuple[int, ...] | None = None   # the set form's team network (None: the dense head)
    team_pool: str = "sum"


@dataclass
class FitConfig:
    """A preset's fit: simulate ``matches`` over a world of ``players`` and fit them."""

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
    head_l1: float = 0.0
    threads: int = 1
    write_log: str | None = None        # keep the simulated training log here (else a temp file)
    team_hidden: tuple[int, ...] | None = None   # the set form's team network (None: the dense head)
    team_pool: str = "sum"


@dataclass
class FitResult:
    model: EngagementModel
    net: EngagementNet
    record: dict[str, Any]
    holdout: MatchData
    holdout_pred: np.ndarray


def _positive_int(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InvalidInput(name, f"must be a positive integer, got {v!r}")


def _check_arch(epochs: int, batch: int, lr: float, embed_dim: int, player_hidden, head_hidden,
                head_l1: float) -> None:
    for name, v in (("epochs", epochs), ("batch", batch), ("embed_dim", embed_dim)):
        _positive_int(name, v)
    if not (isinstance(lr, float) and math.isfinite(lr) and lr > 0):
        raise InvalidInput("lr", f"must be a positive number, got {lr!r}")
    for name, widths in (("player_layers", player_hidden), ("head_layers", head_hidden)):
        for w in widths:
            _positive_int(name, w)
    if len(head_hidden) > 4 or any(w > 256 for w in head_hidden):
        raise InvalidInput("head_layers", "at most 4 hidden head layers of at most 256 neurons "
                                          "(the exact MIP spends one binary per unstable head neuron)")
    if not (math.isfinite(head_l1) and head_l1 >= 0):
        raise InvalidInput("head_l1", f"must be a finite number ≥ 0, got {head_l1}")


def _check_team(team_hidden: tuple[int, ...] | None, team_pool: str) -> None:
    """The set form's team network: 1–4 layers of at most 256 neurons, pooled by sum or mean."""
    if team_hidden is None:
        return
    if not 1 <= len(team_hidden) <= 4:
        raise InvalidInput("team_layers", f"the set form needs 1–4 team layers, got {len(team_hidden)}")
    for w in team_hidden:
        _positive_int("team_layers", w)
        if w > 256:
            raise InvalidInput("team_layers", f"at most 256 neurons per team layer, got {w}")
    if team_pool not in ("sum", "mean"):
        raise InvalidInput("team_pool", f"must be 'sum' or 'mean', got {team_pool!r}")


def _check_log_cfg(cfg: LogFitConfig) -> None:
    _check_arch(cfg.epochs, cfg.batch, cfg.lr, cfg.embed_dim, cfg.player_hidden, cfg.head_hidden, cfg.head_l1)
    _check_team(cfg.team_hidden, cfg.team_pool)
    if not 0.0 < cfg.holdout_share < 1.0:
        raise InvalidInput("holdout_share", f"must lie in (0, 1), got {cfg.holdout_share!r}")
    if not 0.0 <= cfg.val_share < 1.0:
        raise InvalidInput("val_share", f"must lie in [0, 1), got {cfg.val_share!r}")
    if isinstance(cfg.patience, bool) or not isinstance(cfg.patience, int) or cfg.patience < 0:
        raise InvalidInput("patience", f"must be an integer ≥ 0, got {cfg.patience!r}")
    if cfg.patience and cfg.val_share == 0:
        raise InvalidInput("patience", "early stopping needs a validation share > 0")
    _positive_int("threads", cfg.threads)
    if cfg.epoch_matches is not None:
        _positive_int("epoch_matches", cfg.epoch_matches)


def _tensors(data: MatchData, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(data.features[idx])), torch.from_numpy(data.mask(idx))


def predict(net: EngagementNet, data: MatchData, idx: np.ndarray | None = None, batch: int = 4096) -> np.ndarray:
    """Predicted engagement of the matches ``idx`` of ``data`` (all when None), float64 [m]."""
    idx = np.arange(data.matches) if idx is None else np.asarray(idx)
    out = []
    net.eval()
    with torch.no_grad():
        for s in range(0, len(idx), batch):
            out.append(net(*_tensors(data, idx[s:s + batch])).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def metrics(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """MSE, MAE, R² (1 − MSE / variance of the target) and the target's mean and variance."""
    err = pred - y
    var = float(y.var()) if len(y) else 0.0
    mse = float(np.mean(err ** 2)) if len(y) else 0.0
    return {"matches": int(len(y)), "mse": round(mse, 6), "mae": round(float(np.mean(np.abs(err))) if len(y) else 0.0, 6),
            "r2": round(1 - mse / var, 4) if var > 0 else 0.0, "target_var": round(var, 6),
            "target_mean": round(float(y.mean()) if len(y) else 0.0, 6)}


def _split(m: int, cfg: LogFitConfig, has_holdout: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded (train, validation, held-out) match indexes; each sorted."""
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x686F6C64]))
    perm = rng.permutation(m)
    n_hold = 0 if has_holdout else max(1, int(round(cfg.holdout_share * m)))
    rest = m - n_hold
    n_val = max(1, int(round(cfg.val_share * rest))) if cfg.val_share > 0 else 0
    if rest - n_val < 1:
        raise InvalidInput("logs", f"{m} matches are too few to hold out {n_hold} and validate on {n_val}")
    hold, val, train = perm[:n_hold], perm[n_hold:n_hold + n_val], perm[n_hold + n_val:]
    return np.sort(train), np.sort(val), np.sort(hold)


def fit_log(logs: list[str | Path], cfg: LogFitConfig, *, holdout_logs: list[str | Path] | None = None,
            command: str | None = None, progress: bool = False, extra: dict[str, Any] | None = None) -> FitResult:
    """Fit the engagement network on match logs.

    Args:
        logs: match-log files (spec §5).
        cfg: split, early stopping, optimizer and architecture.
        holdout_logs: a separate held-out log (then nothing of ``logs`` is held out).
        command: the command line recorded in ``training.command``.
        progress: progress bars on stderr (reading, then one step per epoch).
        extra: fields merged into the ``training`` record.
    Raises:
        InvalidInput: a bad log line (file, line and field named), a bad setting, too few matches.
    """
    _check_log_cfg(cfg)
    t0 = time.perf_counter()
    data = load_matchlog(logs, progress=progress)
    hold_data = None
    if holdout_logs:
        hold_data = load_matchlog(holdout_logs, progress=progress)
        if (hold_data.teams, hold_data.feature_dim) != (data.teams, data.feature_dim):
            raise InvalidInput("holdout_logs", f"has {hold_data.teams} teams × {hold_data.feature_dim} features; "
                                               f"the log has {data.teams} × {data.feature_dim}")
    t_read = time.perf_counter() - t0
    return fit_data(data, cfg, hold_data=hold_data, command=command or "mgmatch fit-engagement " + " ".join(
        f"--logs {p}" for p in logs), progress=progress, extra=extra, logs=[str(p) for p in logs],
        holdout_split=None if hold_data is None else "separate log: " + ", ".join(str(p) for p in holdout_logs or []),
        t0=t0, t_read=t_read)


def fit_data(data: MatchData, cfg: LogFitConfig, *, hold_data: MatchData | None = None, command: str = "",
             progress: bool = False, extra: dict[str, Any] | None = None, logs: list[str] | None = None,
             holdout_split: str | None = None, t0: float | None = None, t_read: float = 0.0,
             split: tuple[np.ndarray, np.ndarray] | None = None,
             init: EngagementNet | None = None) -> FitResult:
    """Fit the engagement network on matches already in arrays (what :func:`fit_log` does after reading).

    Args:
        data: the matches to fit (a seeded share held out unless ``hold_data`` is given).
        cfg: split, early stopping, optimizer and architecture.
        hold_data: separate held-out matches (then nothing of ``data`` is held out).
        command, logs, holdout_split, extra: what the ``training`` record says.
        split: (training, validation) match indexes in place of the seeded split (needs
            ``hold_data``); a training index may repeat (that match then weighs as many times).
        init: a network to go on training (a warm start; its normalization stays) instead of a new one.
    """
    _check_log_cfg(cfg)
    t0 = time.perf_counter() if t0 is None else t0
    if split is not None:
        if hold_data is None:  # a seeded holdout drawn from data could overlap the given training indexes
            raise ValueError("fit_data: split needs hold_data")
        train_idx, val_idx = split
    else:
        train_idx, val_idx, hold_idx = _split(data.matches, cfg, hold_data is not None)
    if hold_data is None:
        hold_data = data
    else:
        hold_idx = np.arange(hold_data.matches)

    threads_before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        net, fit_info = _train(data, train_idx, val_idx, cfg, progress, init=init)
    finally:
        torch.set_num_threads(threads_before)
    t_train = time.perf_counter() - t0 - t_read

    hold_pred = predict(net, hold_data, hold_idx)
    sample = train_idx if len(train_idx) <= 100_000 else np.sort(
        np.random.default_rng(cfg.seed).choice(train_idx, 100_000, replace=False))
    sizes = data.sizes
    record: dict[str, Any] = {
        "command": command,
        "seed": cfg.seed,
        "logs": logs or [],
        "teams": data.teams,
        "feature_dim": data.feature_dim,
        "team_sizes": {"min": sizes.min(0).tolist(), "max": sizes.max(0).tolist()},
        "matches": {"total": data.matches + (0 if hold_data is data else hold_data.matches),
                    "train": int(len(train_idx)), "validation": int(len(val_idx)), "holdout": int(len(hold_idx))},
        "epochs": cfg.epochs, "epochs_run": fit_info["epochs_run"], "best_epoch": fit_info["best_epoch"],
        "early_stopping": ({"patience": cfg.patience, "min_delta": cfg.min_delta, "on": "validation mse"}
                           if cfg.patience else None),
        "curve": fit_info["curve"],
        "batch": cfg.batch, "lr": cfg.lr, "threads": cfg.threads,
        "loss": "mse" if not cfg.head_l1 else f"mse + {cfg.head_l1:g}·Σ|head weights| (on the normalized target)",
        "head_l1": cfg.head_l1,
        "target": "engagement (as logged)",
        "architecture": net.architecture(),
        "train": _short(metrics(predict(net, data, sample), data.y[sample])),
        "validation": _short(metrics(predict(net, data, val_idx), data.y[val_idx])) if len(val_idx) else None,
        "holdout": {"split": (f"seeded random {cfg.holdout_share:.0%} of the log" if hold_data is data
                              else holdout_split or "separate matches"),
                    **metrics(hold_pred, hold_data.y[hold_idx])},
        "seconds": {"read": round(t_read, 1), "train": round(t_train, 1), "total": round(time.perf_counter() - t0, 1)},
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
    }
    if extra:
        record.update(extra)
    model = parse_engagement(export_json(net, cfg.name, record))
    hold_view = hold_data.take(hold_idx)
    return FitResult(model, net, record, hold_view, hold_pred)


def _short(m: dict[str, float]) -> dict[str, float]:
    return {k: m[k] for k in ("matches", "mse", "mae", "r2")}


def _train(data: MatchData, train_idx: np.ndarray, val_idx: np.ndarray, cfg: LogFitConfig,
           progress: bool, init: EngagementNet | None = None) -> tuple[EngagementNet, dict[str, Any]]:
    torch.manual_seed(cfg.seed)
    if init is not None:
        net = init
    else:
        mean, std = data.feature_stats(np.unique(train_idx))
        std[std < 1e-6] = 1.0
        y_train = data.y[train_idx]
        t_scale = float(y_train.std()) or 1.0
        net = EngagementNet(data.feature_dim, data.teams, cfg.player_hidden, cfg.embed_dim, cfg.head_hidden,
                            mean, std, float(y_train.mean()), t_scale, team_hidden=cfg.team_hidden, team_pool=cfg.team_pool)
    y = torch.as_tensor(((data.y - net.target_mean) / net.target_scale).astype(np.float32))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    per_epoch = len(train_idx) if cfg.epoch_matches is None else min(len(train_idx), cfg.epoch_matches)
    steps = cfg.epochs * math.ceil(per_epoch / cfg.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=steps, pct_start=0.1)
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x65706F63]))
    best_val, best_state, best_epoch, stale, epoch = math.inf, None, cfg.epochs, 0, 0
    curve: list[dict[str, Any]] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.epochs, desc="fit", unit="epoch", file=sys.stderr)
    try:
        for epoch in range(1, cfg.epochs + 1):
            net.train()
            total = 0.0
            order = train_idx[rng.permutation(len(train_idx))][:per_epoch]
            for s in range(0, len(order), cfg.batch):
                idx = np.sort(order[s:s + cfg.batch])
                xb, mb = _tensors(data, idx)
                loss = torch.mean((net.raw(xb, mb) - y[idx]) ** 2)
                if cfg.head_l1:
                    loss = loss + cfg.head_l1 * sum(m.weight.abs().sum() for m in net.head if isinstance(m, torch.nn.Linear))
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                total += float(loss.detach()) * len(idx)
            train_mse = total / len(order) * net.target_scale ** 2
            post = {"train_mse": f"{train_mse:.4g}"}
            point: dict[str, Any] = {"epoch": epoch, "train_mse": round(train_mse, 6)}
            if len(val_idx):
                val_mse = float(np.mean((predict(net, data, val_idx) - data.y[val_idx]) ** 2))
                post["val_mse"] = f"{val_mse:.4g}"
                point["val_mse"] = round(val_mse, 6)
                stale = 0 if val_mse < best_val * (1 - cfg.min_delta) else stale + 1
                if val_mse < best_val:
                    best_val, best_epoch = val_mse, epoch
                    best_state = copy.deepcopy(net.state_dict())
            curve.append(point)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(post)
            if cfg.patience and stale >= cfg.patience:
                break
    finally:
        if bar is not None:
            bar.close()
    if best_state is not None:
        net.load_state_dict(best_state)
    else:
        best_epoch = epoch
    net.eval()
    return net, {"epochs_run": epoch, "best_epoch": best_epoch, "curve": curve}


def plot_png(result: FitResult) -> bytes:
    """Predicted vs observed engagement of the held-out matches, as PNG bytes (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    y, p = result.holdout.y, result.holdout_pred
    h = result.record["holdout"]
    fig = Figure(figsize=(5.5, 5), dpi=110)
    ax = fig.add_subplot()
    if len(y) > 5000:
        ax.hexbin(y, p, gridsize=60, mincnt=1, bins="log", cmap="viridis")
    else:
        ax.scatter(y, p, s=6, alpha=0.5)
    lo, hi = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("observed engagement")
    ax.set_ylabel("predicted engagement")
    ax.set_title(f"held-out: {h['matches']} matches, R² = {h['r2']:.3f}, MSE = {h['mse']:.4g}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # created with the umask's permissions
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write(result: FitResult, out: str | Path, plot: str | Path | None = None) -> None:
    """Write the model JSON (and the PNG) whole or not at all: temp file, then rename."""
    png = plot_png(result) if plot is not None else None
    body = (json.dumps(result.model.to_json(), allow_nan=False) + "\n").encode()
    if png is not None and plot is not None:
        _atomic_write(Path(plot), png)
    _atomic_write(Path(out), body)


# --------------------------------------------------------------------------- presets


def _check(cfg: FitConfig) -> None:
    get_preset(cfg.preset)
    for name in ("matches", "holdout_matches", "threads"):
        _positive_int(name, getattr(cfg, name))
    _check_arch(cfg.epochs, cfg.batch, cfg.lr, cfg.embed_dim, cfg.player_hidden, cfg.head_hidden, cfg.head_l1)
    _check_team(cfg.team_hidden, cfg.team_pool)


def _write_log(path: Path, lines) -> None:
    with open(path, "w") as f:
        for line in lines:
            f.write(line + "\n")


def fit(cfg: FitConfig, command: str | None = None, progress: bool = False) -> FitResult:
    """Simulate a preset's history as match logs, then fit them with :func:`fit_log`."""
    _check(cfg)
    p = get_preset(cfg.preset)
    t0 = time.perf_counter()
    root = np.random.SeedSequence([cfg.seed, 0x6E6761])
    train_rng, hold_rng = (np.random.default_rng(s) for s in root.spawn(2))
    n_players = cfg.players or max(20_000, cfg.matches // 2)
    hist = simulate_history(p.world, n_players, cfg.matches, train_rng)
    hold = simulate_history(p.world, max(5_000, cfg.holdout_matches // 2), cfg.holdout_matches, hold_rng)
    with tempfile.TemporaryDirectory(prefix="mgmatch-fit-") as tmp:
        train_log = Path(cfg.write_log) if cfg.write_log else Path(tmp) / "train.jsonl"
        hold_log = Path(tmp) / "holdout.jsonl"
        _write_log(train_log, matchlog_lines(hist))
        _write_log(hold_log, matchlog_lines(hold, id_prefix="fresh"))
        del hist, hold
        t_sim = time.perf_counter() - t0
        log_cfg = LogFitConfig(epochs=cfg.epochs, seed=cfg.seed, val_share=0.0, patience=0, batch=cfg.batch, lr=cfg.lr,
                               player_hidden=cfg.player_hidden, embed_dim=cfg.embed_dim, head_hidden=cfg.head_hidden,
                               head_l1=cfg.head_l1, threads=cfg.threads, name=cfg.preset,
                               team_hidden=cfg.team_hidden, team_pool=cfg.team_pool)
        cmd = command or (f"mgmatch fit-engagement --preset {cfg.preset} --matches {cfg.matches} "
                          f"--epochs {cfg.epochs} --seed {cfg.seed}")
        res = fit_log([train_log], log_cfg, holdout_logs=[hold_log], command=cmd, progress=progress,
                      extra={"world_players": n_players,
                             "target": "expected players retained after the match (mgmatch.core.world.engagement)"})
    rec = res.record
    rec["logs"] = [str(cfg.write_log)] if cfg.write_log else ["(simulated, not kept)"]
    rec["holdout"]["split"] = "separate simulated log"
    rec["holdout"]["world"] = "fresh players (unseen in training)"
    rec["seconds"] = {"simulate": round(t_sim, 1), **rec["seconds"], "total": round(time.perf_counter() - t0, 1)}
    res.model = parse_engagement(export_json(res.net, cfg.preset, rec))
    return res


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
