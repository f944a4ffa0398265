"""The offline ρ-approximation of Alman–McKay (Theorem 5): sort, cut into blocks of 2k, split each."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mgmatch.core.errors import InvalidInput

from .imbalance import Game, Params, best_split_batch, check_values, split_ids, split_masks


@dataclass(frozen=True)
class Partition:
    games: list[Game] = field(default_factory=list)
    unassigned: tuple[str, ...] = ()

    @property
    def worst(self) -> float:
        return max((g.imbalance for g in self.games), default=0.0)


def partition(ids: Sequence[str], skills: Sequence[float] | np.ndarray, params: Params) -> Partition:
    """Offline ρ-approximation (Theorem 5): sort by skill, cut into consecutive blocks of 2k,
    split each block to minimize d_p. O(n log n). When 2k does not divide n the
    ``n mod 2k`` players farthest from the median skill are left unassigned (ends of the order).
    """
    s = np.asarray(skills, dtype=np.float64)
    if len(ids) != len(s):
        raise InvalidInput("skills", "ids and skills must have the same length")
    check_values(s, np.zeros(1))
    m = 2 * params.k
    order = np.argsort(s, kind="stable")
    r = len(s) % m
    # leave out r players at the ends (split between low and high end) so blocks stay tight
    lo = r // 2
    keep = order[lo: len(order) - (r - lo)]
    left = [ids[i] for i in np.concatenate([order[:lo], order[len(order) - (r - lo):]])] if r else []
    blocks = keep.reshape(-1, m) if len(keep) else keep.reshape(0, m)
    z = s[blocks]
    d, j = best_split_batch(z, params.p)
    masks = split_masks(params.k)
    mu = z.mean(axis=1, keepdims=True)
    dev = np.abs(z - mu)
    v = dev.max(axis=1) if math.isinf(params.q) else np.mean(dev ** params.q, axis=1) ** (1.0 / params.q)
    f = params.alpha * d + v
    games = []
    for b in range(len(blocks)):
        mk = masks[j[b]]
        members = [ids[i] for i in blocks[b]]
        games.append(Game(*split_ids(members, mk), float(f[b]), float(f[b])))
    return Partition(games, tuple(left))
