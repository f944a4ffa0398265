"""One refit of a learning pool's engagement model (the torch side of :mod:`mgmatch.app.learning`).

The data are match logs (spec §5): the studio's ``seed_log`` and the pool's own results that the
learner appended to its training log. The fit is :func:`mgmatch.pipeline.fit_engagement.fit_data`
(the same network, optimizer and early stopping as ``mgmatch fit-engagement``, one thread so a
refit takes one core). The pool's held-out results (never trained on) judge the new model against
the live one: :func:`refit` returns both mean squared errors; the learner decides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput

from .fit_engagement import LogFitConfig, fit_data
from .matchlog import MatchData, load_matchlog


@dataclass
class RefitResult:
    """A fitted candidate and how it and the live model predict the held-out results."""

    model: dict[str, Any]          # mgmatch-engagement/v1 JSON of the candidate
    candidate_mse: float
    live_mse: float
    train_matches: int
    holdout_matches: int
    seconds: float


def predict(model: EngagementModel, data: MatchData, chunk: int = 8192) -> np.ndarray:
    """The model's engagement of every match of ``data`` (numpy; padding players count for nothing)."""
    out = np.empty(data.matches)
    D, K, F = data.teams, data.features.shape[2], data.feature_dim
    for s in range(0, data.matches, chunk):
        x = data.features[s:s + chunk].astype(np.float64)
        m = x.shape[0]
        emb = model.embed(x.reshape(-1, F)).reshape(m, D, K, -1) * data.mask(slice(s, s + m))[..., None]
        out[s:s + m] = model.head(emb.sum(axis=2).reshape(m, -1))
    return out


def mse(model: EngagementModel, data: MatchData) -> float:
    return float(np.mean((predict(model, data) - data.y) ** 2)) if data.matches else float("nan")


def refit(train_logs: list[Path], holdout_logs: list[Path], live: EngagementModel, *, epochs: int = 30,
          seed: int = 0, max_matches: int | None = None, name: str | None = None,
          extra: dict[str, Any] | None = None) -> RefitResult:
    """Fit a candidate on ``train_logs`` and score it and ``live`` on ``holdout_logs``.

    Args:
        train_logs: match logs to train on (the seed log first, then the pool's own results).
        holdout_logs: the pool's held-out results (spec §5 lines), never trained on.
        live: the model serving now.
        max_matches: keep at most this many of the newest training matches (the last lines).
    Raises:
        InvalidInput: a bad log, too few matches, or a log whose teams or features differ from ``live``.
    """
    t0 = time.perf_counter()
    logs = [p for p in train_logs if Path(p).is_file() and Path(p).stat().st_size > 0]
    if not logs:
        raise InvalidInput("learning", "no training data yet")
    data = load_matchlog(logs)
    if max_matches is not None and data.matches > max_matches:
        data = data.take(np.arange(data.matches - max_matches, data.matches))
    hold = [p for p in holdout_logs if Path(p).is_file() and Path(p).stat().st_size > 0]
    if not hold:
        raise InvalidInput("learning", "no held-out results yet")
    hold_data = load_matchlog(hold)
    for what, d in (("training data", data), ("held-out results", hold_data)):
        if (d.teams, d.feature_dim) != (live.teams, live.feature_dim):
            raise InvalidInput("learning", f"{what} have {d.teams} teams × {d.feature_dim} features; the live model "
                                           f"scores {live.teams} × {live.feature_dim}")
    cfg = LogFitConfig(epochs=epochs, seed=seed, val_share=0.1, patience=5, threads=1, name=name)
    res = fit_data(data, cfg, hold_data=hold_data, command="refit (mgmatch.app.learning)",
                   logs=[str(p) for p in logs], holdout_split="the pool's held-out results", extra=extra)
    model_json = res.model.to_json()
    candidate = parse_engagement(model_json)
    return RefitResult(model_json, mse(candidate, hold_data), mse(live, hold_data), data.matches, hold_data.matches,
                       time.perf_counter() - t0)
