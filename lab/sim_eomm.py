"""EOMM's simulation (WWW 2017 §5, Table 2) on a seeded synthetic player world.

The world: a population of player states — rating μ (openskill scale), σ, play frequency (games
per day) and the last 10 outcomes — and a ground-truth churn process (logistic in the state after
the match, with a loss-aversion interaction, a loss-streak non-linearity and per-player noise in
the outcome sensitivity). A synthetic history of (state, outcome, churned) rows from this process
fits the churn model that EOMM uses (:class:`~mgmatch.solvers.eomm.ChurnModel`).

Each round (paper §5.3): draw a pool of P states; pair them with WorstMM (maximum total predicted
churn), SkillMM (consecutive by μ), RandomMM and EOMM (minimum, rustworkx's blossom); draw
outcomes by Eqs. 11–13 and churn by the ground truth; count retained players. All methods see the same pool and the
same random numbers per player (common random numbers). Welch t-tests compare EOMM with each.
Each pool size also reports the wall time of EOMM's pairing per round (churn prediction, Eq. 7
weights and the matching: what the service spends to pair a pool).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from scipy.stats import ttest_ind

from mgmatch.solvers.eomm import (
    HISTORY,
    ChurnModel,
    OutcomeModel,
    churn_features,
    min_weight_perfect_matching,
    pair_weights,
)

METHODS = ("WorstMM", "SkillMM", "RandomMM", "EOMM")
PAPER_POOLS = (100, 200, 300, 400, 500)


@dataclass
class World:
    """A population of player states."""

    mu: np.ndarray
    sigma: np.ndarray
    gpd: np.ndarray
    history: np.ndarray  # [M, 10] codes, NaN unknown
    sensitivity: np.ndarray  # per-player multiplier of the outcome effect (ground truth only)

    @property
    def size(self) -> int:
        return len(self.mu)

    def take(self, idx: np.ndarray) -> World:
        return World(self.mu[idx], self.sigma[idx], self.gpd[idx], self.history[idx], self.sensitivity[idx])


def make_world(size: int = 20000, seed: int = 0) -> World:
    rng = np.random.default_rng(seed)
    mu = rng.normal(25.0, 5.0, size)
    sigma = rng.uniform(0.5, 3.0, size)
    gpd = rng.lognormal(0.5, 0.8, size)
    # each player's recent record leans with a personal form; some have short histories
    form = rng.normal(0, 0.6, size)
    pw = 0.8 * expit(form)
    u = rng.random((size, HISTORY))
    H = np.where(u < pw[:, None], 1.0, np.where(u < pw[:, None] + 0.2, 0.0, -1.0))
    known = rng.integers(0, HISTORY + 1, size)
    H[np.arange(HISTORY)[None, :] >= known[:, None]] = np.nan
    sensitivity = rng.lognormal(0.0, 0.5, size)
    return World(mu, sigma, gpd, H, sensitivity)


def true_churn(w: World, outcome: str) -> np.ndarray:
    """Ground-truth probability of churning (no play in the next 8 hours) after ``outcome``."""
    H = w.history
    known = np.isfinite(H)
    prev_loss = np.where(known, H == -1, False).sum(1) / np.maximum(known.sum(1), 1)
    lead_losses = np.cumprod(np.where(known, H == -1, False), axis=1).sum(1)
    f = np.log1p(w.gpd)
    effect = {"W": -0.35 - 0.9 * prev_loss, "D": 0.05 + 0.0 * prev_loss,
              "L": 0.25 + 1.4 * prev_loss + 0.08 * lead_losses**1.5}[outcome]
    return expit(0.55 - 0.6 * f + w.sensitivity * effect)


def history_rows(w: World, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic match history: each state plays one match (random outcome), churn drawn."""
    u = rng.random(w.size)
    outs = np.where(u < 0.4, 0, np.where(u < 0.6, 1, 2))
    X = np.empty((w.size, 11))
    y = np.empty(w.size)
    for k, o in enumerate(("W", "D", "L")):
        m = outs == k
        sub = w.take(np.flatnonzero(m))
        X[m] = churn_features(sub.history, sub.gpd, o)
        y[m] = rng.random(m.sum()) < true_churn(sub, o)
    return X, y


def fit_churn_model(seed: int = 0, size: int = 20000, l2: float = 1e-3) -> ChurnModel:
    """Fit EOMM's churn model on a synthetic history of the seeded world."""
    w = make_world(size, seed)
    X, y = history_rows(w, np.random.default_rng(seed + 1))
    return ChurnModel.fit(X, y, l2)


def _retained(pairs: np.ndarray, pool: World, u_out: np.ndarray, u_churn: np.ndarray, om: OutcomeModel) -> int:
    a, b = pairs[:, 0], pairs[:, 1]
    pw, pd, _ = om.probs(pool.mu[a], pool.sigma[a] ** 2, pool.mu[b], pool.sigma[b] ** 2)
    u = u_out[np.minimum(a, b)]
    o_a = np.where(u < pw, 0, np.where(u < pw + pd, 1, 2))
    n = pool.size
    out = np.empty(n, dtype=np.int64)
    out[a], out[b] = o_a, 2 - o_a
    churned = 0
    for k, o in enumerate(("W", "D", "L")):
        m = np.flatnonzero(out == k)
        churned += int((u_churn[m] < true_churn(pool.take(m), o)).sum())
    return n - churned


def _pvalue(a: list[int], b: list[int]) -> float | None:
    """Welch's t-test p-value of EOMM vs another method (None when undefined, e.g. no variance)."""
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return None if np.mean(a) == np.mean(b) else 0.0
    p = float(ttest_ind(a, b, equal_var=False).pvalue)
    return p if np.isfinite(p) else None


#: players in the synthetic world a pool is sampled from (without replacement): the largest pool
WORLD_SIZE = 20000


def simulate(pools: list[int] | tuple[int, ...] = PAPER_POOLS, rounds: int = 20, seed: int = 0,
             world_size: int = WORLD_SIZE, churn: ChurnModel | None = None, progress=None) -> dict:
    """Retained players per round for the four methods at each pool size, with Welch t-tests."""
    for p in pools:
        if p < 2 or p % 2:
            raise ValueError(f"pool sizes must be even and ≥ 2, got {p}")
        if p > world_size:
            raise ValueError(f"pool sizes must be ≤ the world's {world_size:,} players, got {p}")
    if rounds < 2:
        raise ValueError(f"rounds must be ≥ 2 for a t-test, got {rounds}")
    world = make_world(world_size, seed)
    churn = churn or fit_churn_model(seed)
    om = OutcomeModel()
    rng = np.random.default_rng(seed + 2)
    out: dict = {"seed": seed, "rounds": rounds, "pools": {}}
    for P in pools:
        res = {m: [] for m in METHODS}
        pairing_s: list[float] = []
        for _ in range(rounds):
            pool = world.take(rng.choice(world.size, P, replace=False))
            t0 = time.perf_counter()
            c = churn.predict(pool.history, pool.gpd)
            W = pair_weights(pool.mu, pool.sigma ** 2, c, om)
            eomm = np.asarray(min_weight_perfect_matching(W))
            pairing_s.append(time.perf_counter() - t0)  # EOMM's whole pairing: churn, weights, matching
            u_out, u_churn = rng.random(P), rng.random(P)
            order = np.argsort(pool.mu)
            pairings = {
                "WorstMM": np.asarray(min_weight_perfect_matching(-W)),
                "SkillMM": order.reshape(-1, 2),
                "RandomMM": rng.permutation(P).reshape(-1, 2),
                "EOMM": eomm,
            }
            for m, pairs in pairings.items():
                res[m].append(_retained(pairs, pool, u_out, u_churn, om))
            if progress is not None:
                progress()
        entry = {m: float(np.mean(v)) for m, v in res.items()}
        entry["per_round"] = {m: v for m, v in res.items()}
        entry["welch_p"] = {m: _pvalue(res["EOMM"], res[m]) for m in METHODS if m != "EOMM"}
        ms = np.asarray(pairing_s) * 1e3
        entry["eomm_pairing_ms"] = {"mean": float(ms.mean()), "p50": float(np.percentile(ms, 50)),
                                    "p95": float(np.percentile(ms, 95)), "max": float(ms.max())}
        out["pools"][str(P)] = entry
    return out
