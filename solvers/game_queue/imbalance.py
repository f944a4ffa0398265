"""The Alman–McKay imbalance of a game and the exact best team split (shared by the game queue,
the offline partition, the role-restricted games and the ``game-queue`` method).

A game is two disjoint teams X, Y of k players. Its imbalance is

    f(X, Y) = α·d_p(X, Y) + v_q(X ∪ Y),
    d_p = |‖s_X‖_p − ‖s_Y‖_p|,   v_q = (mean over the 2k players of |s − μ|^q)^{1/q},

with p, q ∈ [1, ∞] (∞: d_∞ = |max X − max Y|, v_∞ = max |s − μ|); skills are ≥ 0 as in the
paper.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mgmatch.core.errors import InvalidInput

#: largest team size: every leaf tries C(2k−1, k−1) splits and the window grows like k^{1+1/q}
MAX_K = 6


@dataclass(frozen=True)
class Params:
    """Imbalance parameters: team size k, α, p, q ∈ [1, ∞] and the time weight β."""

    k: int
    alpha: float = 1.0
    p: float = 1.0
    q: float = 2.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 1 <= self.k <= MAX_K:
            raise InvalidInput("k", f"team size must be an integer in 1..{MAX_K} (the structure is exponential "
                                    f"in k), got {self.k!r}")
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (v >= 0) or math.isinf(v):
                raise InvalidInput(name, f"must be a finite number ≥ 0, got {v!r}")
        for name in ("p", "q"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (v >= 1):
                raise InvalidInput(name, f"must be a number ≥ 1 or inf, got {v!r}")

    @property
    def window(self) -> int:
        """W = ⌊4(1+α)k^{1+1/q}⌋ (Lemma 2), at least 2k − 1."""
        inv_q = 0.0 if math.isinf(self.q) else 1.0 / self.q
        return max(2 * self.k - 1, int(math.floor(4.0 * (1.0 + self.alpha) * self.k ** (1.0 + inv_q) + 1e-9)))

    @property
    def rho(self) -> float:
        """ρ = 2k^{1/q}(1+α), the approximation factor of the role and partition algorithms."""
        inv_q = 0.0 if math.isinf(self.q) else 1.0 / self.q
        return 2.0 * self.k ** inv_q * (1.0 + self.alpha)

    @property
    def range_factor(self) -> float:
        """Lemma 6: v_q(S) ≥ k^{−1/q}·(max − min)/2."""
        inv_q = 0.0 if math.isinf(self.q) else 1.0 / self.q
        return self.k ** (-inv_q) / 2.0


def v_q(skills: Sequence[float] | np.ndarray, q: float) -> float:
    """q-uniformity: the q-norm mean of deviations from the mean skill."""
    s = np.asarray(skills, dtype=np.float64)
    dev = np.abs(s - s.mean())
    if math.isinf(q):
        return float(dev.max())
    return float(np.mean(dev ** q) ** (1.0 / q))


def p_skill(skills: Sequence[float] | np.ndarray, p: float) -> float:
    s = np.asarray(skills, dtype=np.float64)
    if math.isinf(p):
        return float(s.max())
    return float(np.sum(s ** p) ** (1.0 / p))


def d_p(x: Sequence[float], y: Sequence[float], p: float) -> float:
    """p-fairness |‖x‖_p − ‖y‖_p|."""
    return abs(p_skill(x, p) - p_skill(y, p))


def imbalance(x: Sequence[float], y: Sequence[float], params: Params) -> float:
    """f(X, Y) = α·d_p + v_q(X ∪ Y)."""
    return params.alpha * d_p(x, y, params.p) + v_q(list(x) + list(y), params.q)


@lru_cache(maxsize=16)
def split_masks(k: int) -> np.ndarray:
    """All splits of 2k slots into two teams of k with slot 0 in team X: bool [C(2k−1, k−1), 2k]."""
    rows = []
    for rest in itertools.combinations(range(1, 2 * k), k - 1):
        m = np.zeros(2 * k, dtype=bool)
        m[0] = True
        m[list(rest)] = True
        rows.append(m)
    return np.asarray(rows)


def best_split(skills: np.ndarray, p: float) -> tuple[float, np.ndarray]:
    """Minimum d_p over all splits of 2k skills into two teams of k, and the team-X mask."""
    z = np.asarray(skills, dtype=np.float64)
    k = z.size // 2
    masks = split_masks(k)
    if math.isinf(p):
        sx = np.where(masks, z, -np.inf).max(axis=1)
        sy = np.where(~masks, z, -np.inf).max(axis=1)
        d = np.abs(sx - sy)
    elif p == 1.0:
        sx = masks @ z
        d = np.abs(2.0 * sx - z.sum())
    else:
        zp = z ** p
        sx = masks @ zp
        d = np.abs(sx ** (1.0 / p) - (zp.sum() - sx) ** (1.0 / p))
    j = int(np.argmin(d))
    return float(d[j]), masks[j]


def best_split_batch(blocks: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`best_split` for many blocks at once: blocks [B, 2k] → (d [B], mask index [B])."""
    z = np.asarray(blocks, dtype=np.float64)
    k = z.shape[1] // 2
    masks = split_masks(k)
    mf = masks.astype(np.float64)
    if math.isinf(p):
        sx = np.where(masks[None], z[:, None, :], -np.inf).max(axis=2)
        sy = np.where(~masks[None], z[:, None, :], -np.inf).max(axis=2)
        d = np.abs(sx - sy)
    elif p == 1.0:
        d = np.abs(2.0 * (z @ mf.T) - z.sum(axis=1, keepdims=True))
    else:
        zp = z ** p
        sx = zp @ mf.T
        d = np.abs(sx ** (1.0 / p) - (zp.sum(axis=1, keepdims=True) - sx) ** (1.0 / p))
    j = np.argmin(d, axis=1)
    return d[np.arange(len(z)), j], j


# --------------------------------------------------------------------------- games


def split_ids(ids: Sequence[str], mask: np.ndarray) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(team X, team Y) ids from a team-X mask."""
    x = tuple(i for i, mk in zip(ids, mask, strict=True) if mk)
    y = tuple(i for i, mk in zip(ids, mask, strict=True) if not mk)
    return x, y


@dataclass(frozen=True)
class Game:
    """A game: two teams of player ids, its imbalance f and priority g = f + β·min entry time."""

    team_x: tuple[str, ...]
    team_y: tuple[str, ...]
    imbalance: float
    priority: float

    @property
    def players(self) -> tuple[str, ...]:
        return self.team_x + self.team_y

    def to_json(self) -> dict:
        return {"teams": [list(self.team_x), list(self.team_y)], "imbalance": self.imbalance,
                "priority": self.priority}


def best_split_all(z: np.ndarray, p: float, mask: np.ndarray) -> np.ndarray:
    """d_p of one fixed split ``mask`` for many blocks z [B, 2k]."""
    x, y = z[:, mask], z[:, ~mask]
    if math.isinf(p):
        return np.abs(x.max(axis=1) - y.max(axis=1))
    return np.abs((x ** p).sum(axis=1) ** (1.0 / p) - (y ** p).sum(axis=1) ** (1.0 / p))


def check_values(s: np.ndarray, t: np.ndarray) -> None:
    """InvalidInput unless every skill is finite and ≥ 0 and every entry time finite."""
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise InvalidInput("skill", "skills must be finite numbers ≥ 0")
    if not np.all(np.isfinite(t)):
        raise InvalidInput("entry_time", "entry times must be finite numbers")
