"""One refit of a learning pool's engagement model (the torch side of :mod:`mgmatch.app.learning`).

The data are match logs (spec §5): the studio's ``seed_log`` and the pool's own results that the
learner appended to its training log. The fit is :func:`mgmatch.pipeline.fit_engagement.fit_data`
(the same network, optimizer and early stopping as ``mgmatch fit-engagement``, one thread so a
refit takes one core), with three choices of its own:

- **A lineage.** The candidate goes on training the live model (a warm start), not a new network.
  An optimizer goes where its model overrates matches, and the pool's results there correct the
  model one refit at a time; a fresh fit of the same data forgets what those corrections found
  (docs/guides/learning.md).
- **Validation on the newest results** (:func:`_split_own`): early stopping watches the results that
  arrived last, which no model of the lineage has trained on; older results would favour the live
  model, which trained on them, and stop every refit at once.
- **The pool's results weigh more** than seed-log matches (up to :data:`OWN_WEIGHT` times each): they
  are where the optimizer goes.
- **Balance units.** The first refit widens the live model (exactly, the function unchanged) with a
  unit for each feature's imbalance between the teams (:mod:`mgmatch.core.balance`), which a network
  fitted on a skill-based log lacks and rarely finds from a pool's noisy results; the lineage keeps
  them (docs/guides/learning.md says what they bought on ``bench lift``).

With ``explorers`` the refit also trains the pool's explorers, each a lineage of its own on a
bootstrap sample of the data, started off the live model with jittered weights; the learner forms
explore matches by Thompson sampling over them (:mod:`mgmatch.app.learning`). The pool's held-out
results (never trained on) judge the candidate against the live model: :func:`refit` returns both
mean squared errors; the learner decides.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mgmatch.core.balance import add_balance_units, balance_units
from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.models.engagement_torch import from_engagement_model

from .fit_engagement import LogFitConfig, fit_data
from .matchlog import MatchData, load_matchlog

#: each epoch of a refit trains on a seeded sample of at most this many matches: a refit of 50,000
#: results costs what one of 20,000 does
EPOCH_MATCHES = 20_000

#: a refit trains for at most this many optimizer steps (its epochs are cut to fit), at :data:`LR` (the
#: one-cycle schedule's peak). A young pool's few hundred results among thousands of seed-log matches
#: hold effects the seed log never showed (a team mix the old matchmaker never made); the network finds
#: them only after a long fit at a high rate, and then its error drops by half at once. Offline, mentor
#: world, the seed log plus 1,000 of a pool's results, three fit seeds: 1,500 steps at 3e-3 found the
#: effect in 0 of 3 fits, 4,000 steps at 3e-3 in 3 of 3 but late (best epoch 120-245), 4,000 at 1e-2
#: in 3 of 3 by epoch 76-90. From :data:`LONG_UNTIL` training matches on, the cap falls linearly to
#: :data:`MAX_STEPS_LARGE` at :data:`LARGE_FROM`: a pool that large has results wherever its optimizer
#: goes, and a refit of 50,000 results stays within a minute on one core (1,500 steps: 28 s)
MAX_STEPS = 4000
MAX_STEPS_LARGE = 1500
LONG_UNTIL, LARGE_FROM = 10_000, 50_000
LR = 1e-2
BATCH = 512
#: epochs without a better validation MSE before a refit stops (the best epoch's weights are kept): the
#: validation MSE stays flat for dozens of epochs before the network finds such an effect
PATIENCE = 40
#: each of the pool's results weighs up to this many times a seed-log match (all of them together at
#: most as much as the seed log)
OWN_WEIGHT = 4
#: early stopping validates on the newest this share of the pool's results (:func:`_split_own`), once
#: there are MIN_OWN_VALIDATION of them
VALIDATION_SHARE = 0.1
MIN_OWN_VALIDATION = 50
#: a new explorer starts as the live model with Normal noise of this many standard deviations of each
#: weight tensor added
EXPLORER_JITTER = 0.2

#: path → (bytes read, matches parsed so far): the logs a learner appends to are read once, then only
#: their new lines (a refit process keeps this between refits)
_CACHE: dict[str, tuple[int, MatchData]] = {}


def _concat(a: MatchData | None, b: MatchData) -> MatchData:
    if a is None or a.matches == 0:
        return b
    if b.matches == 0:
        return a
    K = max(a.features.shape[2], b.features.shape[2])

    def pad(d: MatchData) -> np.ndarray:
        extra = K - d.features.shape[2]
        return d.features if extra == 0 else np.pad(d.features, ((0, 0), (0, 0), (0, extra), (0, 0)))
    return MatchData(np.concatenate([pad(a), pad(b)]), np.concatenate([a.sizes, b.sizes]),
                     np.concatenate([a.y, b.y]), a.sources)


def _parse_lines(raw: bytes, where: str) -> MatchData:
    """Lines the learner wrote itself (already valid spec §5): parsed without the per-field checks."""
    rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
    if not rows:
        return MatchData(np.zeros((0, 2, 1, 1), np.float32), np.zeros((0, 2), np.int16), np.zeros(0), [where])
    D = len(rows[0]["teams"])
    K = max(len(t) for r in rows for t in r["teams"])
    F = len(rows[0]["teams"][0][0]["features"])
    feats = np.zeros((len(rows), D, K, F), np.float32)
    sizes = np.zeros((len(rows), D), np.int16)
    for m, r in enumerate(rows):
        for j, team in enumerate(r["teams"]):
            sizes[m, j] = len(team)
            feats[m, j, :len(team)] = [p["features"] for p in team]
    return MatchData(feats, sizes, np.asarray([r["engagement"] for r in rows], dtype=np.float64), [where])


def read_logs(paths: list[Path], trusted: set[Path] | None = None) -> MatchData:
    """The matches of ``paths``, in order. A file is read once and then only its appended lines; files
    in ``trusted`` (the learner's own logs) skip the per-field checks, the others are read by
    :func:`load_matchlog` (a file that changed other than by appending is read again)."""
    out: MatchData | None = None
    for p in paths:
        key = str(Path(p).resolve())
        size = Path(p).stat().st_size
        done, data = _CACHE.get(key, (0, None))
        if data is None or size < done:
            done, data = 0, None
        if size > done:
            if trusted is not None and Path(p) in trusted:
                with open(p, "rb") as f:
                    f.seek(done)
                    raw = f.read(size - done)
                raw = raw[:raw.rfind(b"\n") + 1]  # a line still being written waits for the next refit
                data, done = _concat(data, _parse_lines(raw, key)), done + len(raw)
            else:
                data, done = load_matchlog([p]), size
            _CACHE[key] = (done, data)
        out = _concat(out, data)
    assert out is not None
    return out


@dataclass
class RefitResult:
    """A fitted candidate and how it and the live model predict the held-out results."""

    model: dict[str, Any]          # mgmatch-engagement/v1 JSON of the candidate
    candidate_mse: float
    live_mse: float
    train_matches: int
    holdout_matches: int
    seconds: float
    explorers: list[dict[str, Any]] | None = None  # mgmatch-engagement/v1 JSON of each explorer


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


def _split_own(matches: int, own: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(validation, the pool's results to train on, seed-log matches to train on) of a refit's data, the
    seed log first and the pool's results after it in arrival order. Validation is the newest
    :data:`VALIDATION_SHARE` of the pool's results: no model of the lineage trained on them yet, and
    they come from the matches the live model forms now. A pool with fewer than
    :data:`MIN_OWN_VALIDATION` results validates on a seeded share of everything."""
    if own >= MIN_OWN_VALIDATION:
        n_val = max(10, int(round(VALIDATION_SHARE * own)))
        base = matches - own
        return base + np.arange(own - n_val, own), base + np.arange(own - n_val), np.arange(base)
    perm = np.random.default_rng(np.random.SeedSequence([seed, 0x76616C])).permutation(matches)
    n_val = max(1, int(round(VALIDATION_SHARE * matches)))
    return np.sort(perm[:n_val]), np.sort(perm[n_val:]), np.arange(0)


def _jitter(net: torch.nn.Module, scale: float, seed: int) -> None:
    """Add Normal noise of ``scale`` × each parameter tensor's standard deviation (a new explorer's
    prior: its lineage disagrees with the live model wherever no result has pulled them together)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            sd = float(p.std()) if p.numel() > 1 else float(p.abs().mean())
            p.add_(scale * sd * torch.randn(p.shape, generator=g))


def refit(seed_logs: list[Path], train_logs: list[Path], holdout_logs: list[Path], live: EngagementModel, *,
          epochs: int = 300, seed: int = 0, max_results: int | None = None, name: str | None = None,
          extra: dict[str, Any] | None = None, epoch_matches: int | None = EPOCH_MATCHES,
          explorers: int = 0, live_explorers: list[EngagementModel] | None = None,
          balance: bool = True) -> RefitResult:
    """Fit a candidate (and the explorers) on the seed logs and the pool's results, and score the candidate
    and ``live`` on ``holdout_logs``.

    Args:
        seed_logs: the studio's match logs (spec §5), read with every check.
        train_logs: the pool's own results that the learner appended (read without the per-field checks:
            see :func:`read_logs`); the newest ``max_results`` of them are trained on.
        holdout_logs: the pool's held-out results (the learner's too), never trained on.
        live: the model serving now (the candidate goes on training it).
        epoch_matches: matches per epoch at most (:data:`EPOCH_MATCHES`).
        explorers: how many explorers to train besides the candidate (see the module doc).
        live_explorers: the live explorers, each the start of its lineage (None or another count:
            new explorers start off ``live``).
        balance: widen a model without balance units before training it (:mod:`mgmatch.core.balance`).
    Raises:
        InvalidInput: a bad log, too few matches, or a log whose teams or features differ from ``live``.
    """
    t0 = time.perf_counter()

    def present(paths: list[Path]) -> list[Path]:
        return [Path(p) for p in paths if Path(p).is_file() and Path(p).stat().st_size > 0]

    own_logs, hold = present(train_logs), present(holdout_logs)
    trusted = set(own_logs) | set(hold)
    own = read_logs(own_logs, trusted) if own_logs else None
    if own is not None and max_results is not None and own.matches > max_results:
        own = own.take(np.arange(own.matches - max_results, own.matches))
    logs = present(seed_logs) + own_logs
    if not hold:
        raise InvalidInput("learning", "no held-out results yet")
    parts = [("seed_log", read_logs(present(seed_logs)) if present(seed_logs) else None), ("results", own),
             ("held-out results", read_logs(hold, trusted))]
    for what, d in parts:
        if d is not None and d.matches and (d.teams, d.feature_dim) != (live.teams, live.feature_dim):
            raise InvalidInput("learning", f"{what} have {d.teams} teams × {d.feature_dim} features; the live model "
                                           f"scores {live.teams} × {live.feature_dim}")
    data = _concat(parts[0][1], own) if own is not None else parts[0][1]
    hold_data = parts[2][1]
    if data is None or data.matches == 0:
        raise InvalidInput("learning", "no training data yet")
    val_idx, own_train, seed_train = _split_own(data.matches, own.matches if own is not None else 0, seed)
    # each of the pool's results weighs up to OWN_WEIGHT times, and all of them at most as much as the seed log
    rep = int(np.clip(math.ceil(len(seed_train) / max(1, len(own_train))), 1, OWN_WEIGHT))
    # batches of 512 (fit-engagement's), smaller on a young pool's few results: at least 8 steps an
    # epoch, which the one-cycle schedule needs to have a warm-up
    n_train = len(seed_train) + rep * len(own_train)
    per_epoch = min(n_train, epoch_matches or n_train)
    batch = int(max(8, min(BATCH, per_epoch // 8)))
    max_steps = int(np.interp(data.matches, [LONG_UNTIL, LARGE_FROM], [MAX_STEPS, MAX_STEPS_LARGE]))
    epochs = max(1, min(epochs, max_steps // math.ceil(per_epoch / batch)))
    cfg = LogFitConfig(epochs=epochs, seed=seed, val_share=0.1, patience=PATIENCE, lr=LR, threads=1, name=name,
                       epoch_matches=epoch_matches, batch=batch)
    K = 1 + max(0, explorers)
    jsons = []
    for k in range(K):
        if k == 0:
            own_k, seed_k = own_train, seed_train
            start = live
        else:  # an explorer: a bootstrap of the data, its own lineage (jittered off the live model at first)
            rng = np.random.default_rng(np.random.SeedSequence([seed, 0x626F6F74, k]))
            own_k = np.sort(rng.choice(own_train, len(own_train))) if len(own_train) else own_train
            seed_k = np.sort(rng.choice(seed_train, len(seed_train))) if len(seed_train) else seed_train
            start = live_explorers[k - 1] if live_explorers and len(live_explorers) == K - 1 else None
        base = start if start is not None else live
        if balance and not balance_units(base.training) and (wide := add_balance_units(base.to_json())) is not None:
            base = parse_engagement(wide)
        init = from_engagement_model(base)
        if k > 0 and start is None:
            _jitter(init, EXPLORER_JITTER, seed * 7919 + k)
        res = fit_data(data, replace(cfg, seed=seed + 1000 * k), hold_data=hold_data,
                       command="refit (mgmatch.app.learning)", logs=[p.name for p in logs],
                       holdout_split="the pool's held-out results", extra=extra,
                       split=(np.concatenate([seed_k] + [own_k] * rep), val_idx), init=init)
        j = res.model.to_json()
        if units := balance_units(base.training):  # the lineage keeps its balance units (it is widened once)
            j.setdefault("training", {})["balance_units"] = units
        # the file's SHA-256 is the model's version: the same data and seed give the same version (no clock in it)
        for key in ("date", "seconds"):
            j.get("training", {}).pop(key, None)
        jsons.append(j)
    candidate = parse_engagement(jsons[0])
    return RefitResult(jsons[0], mse(candidate, hold_data), mse(live, hold_data), data.matches, hold_data.matches,
                       time.perf_counter() - t0, jsons[1:])
