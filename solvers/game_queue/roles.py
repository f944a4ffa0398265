"""Role-restricted games (Alman–McKay §6): a ρ-approximation via shortest intervals with
distinct representatives, ρ = 2k^{1/q}(1+α).

Each team needs one player in each of the k roles; a player accepts a subset of roles. Exact
best role-restricted games admit no efficient structure under 3SUM (Theorem 2); the
approximation (Theorem 3) takes a shortest skill interval [a, b] containing 2k *distinct*
players that can cover every role twice (the lists l_1, l'_1, …, l_k, l'_k), and forms the best
role-feasible game from those 2k players; Lemma 5 gives f ≤ (1+α)(b − a) and Lemma 6 gives
OPT ≥ k^{−1/q}(b − a)/2, hence f ≤ ρ·OPT.

Here the shortest interval is found by a two-pointer sweep over the players sorted by skill;
coverage of a window is Hall's condition on role subsets (for every set R of roles, at least
2|R| window players accept a role in R), checked against per-acceptance-mask counts with one
small matrix product (2^k × 2^k). A query is therefore O(n·4^k) — the dynamic O(log n)
pointer structure of the paper's Lemma 3 is not implemented. :class:`RoleGameQueue` keeps the
players sorted (O(log n) insert/delete) and runs the sweep on query. Besides the shortest
interval, the ``windows`` next-shortest minimal intervals are evaluated too and the best game
among them is returned (never worse than the guarantee).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from sortedcontainers import SortedList

from mgmatch.core.errors import InvalidInput

from .imbalance import Game, Params, d_p, split_masks, v_q


@dataclass(frozen=True)
class RolePlayer:
    id: str
    skill: float
    roles: frozenset[str]


@lru_cache(maxsize=8)
def _hall(k: int) -> tuple[np.ndarray, np.ndarray]:
    """A[R, mask] = 1 when acceptance mask meets role set R (R ≠ ∅); need[R] = 2|R|."""
    full = 1 << k
    a = np.zeros((full - 1, full), dtype=np.int64)
    need = np.zeros(full - 1, dtype=np.int64)
    for r in range(1, full):
        need[r - 1] = 2 * bin(r).count("1")
        for m in range(full):
            if m & r:
                a[r - 1, m] = 1
    return a, need


def _team_ok(masks: Sequence[int], k: int) -> bool:
    """Can these k players take the k roles, one each? (bitmask DP)"""
    reach = {0}
    for m in masks:
        nxt = set()
        for used in reach:
            free = m & ~used
            while free:
                b = free & -free
                nxt.add(used | b)
                free ^= b
        reach = nxt
        if not reach:
            return False
    return (1 << k) - 1 in reach


def best_role_game(members: Sequence[RolePlayer], role_index: dict[str, int], params: Params) -> Game | None:
    """Best role-feasible game using exactly these 2k players (all splits enumerated)."""
    k = params.k
    if len(members) != 2 * k:
        raise InvalidInput("players", f"expected {2 * k} players, got {len(members)}")
    mems = sorted(members, key=lambda p: (p.skill, p.id))
    masks = [_mask(p, role_index) for p in mems]
    z = np.asarray([p.skill for p in mems])
    v = v_q(z, params.q)
    best: Game | None = None
    for row in split_masks(k):
        xs = [i for i in range(2 * k) if row[i]]
        ys = [i for i in range(2 * k) if not row[i]]
        if not (_team_ok([masks[i] for i in xs], k) and _team_ok([masks[i] for i in ys], k)):
            continue
        f = params.alpha * d_p(z[xs], z[ys], params.p) + v
        if best is None or f < best.imbalance:
            best = Game(tuple(mems[i].id for i in xs), tuple(mems[i].id for i in ys), f, f)
    return best


def _mask(p: RolePlayer, role_index: dict[str, int]) -> int:
    m = 0
    for r in p.roles:
        if r in role_index:
            m |= 1 << role_index[r]
    return m


def _representatives(window: Sequence[RolePlayer], role_index: dict[str, int], k: int) -> list[RolePlayer] | None:
    """2k distinct players of the window covering each role twice (augmenting paths), preferring
    the window's ends so the chosen set spans as little as the window allows."""
    slots = [r for r in range(k) for _ in range(2)]
    masks = [_mask(p, role_index) for p in window]
    # try the ends first: the last player (the one that closed the window) and the first
    order = [len(window) - 1, 0] + list(range(1, len(window) - 1)) if len(window) > 1 else [0]
    owner: dict[int, int] = {}  # player index → slot

    def augment(s: int, seen: set[int]) -> bool:
        for pi in order:
            if pi in seen or not (masks[pi] >> slots[s]) & 1:
                continue
            seen.add(pi)
            if pi not in owner or augment(owner[pi], seen):
                owner[pi] = s
                return True
        return False

    for s in range(2 * k):
        if not augment(s, set()):
            return None
    return [window[i] for i in sorted(owner)]


def shortest_intervals(players: Sequence[RolePlayer], roles: Sequence[str], k: int) -> list[tuple[float, int, int]]:
    """Minimal windows (range, lo, hi) over players sorted by skill that cover every role twice
    with distinct players, one per left end, sorted by range."""
    role_index = {r: i for i, r in enumerate(roles)}
    a, need = _hall(k)
    cnt = np.zeros(1 << k, dtype=np.int64)
    masks = [_mask(p, role_index) for p in players]
    out = []
    hi = -1
    n = len(players)
    for lo in range(n):
        while hi + 1 < n and not np.all(a @ cnt >= need):
            hi += 1
            cnt[masks[hi]] += 1
        if not np.all(a @ cnt >= need):
            break
        out.append((players[hi].skill - players[lo].skill, lo, hi))
        cnt[masks[lo]] -= 1
    out.sort()
    return out


def role_game_approx(players: Sequence[RolePlayer], roles: Sequence[str], params: Params,
                     windows: int = 8) -> Game | None:
    """A role-feasible game within ρ = 2k^{1/q}(1+α) of the best one (or None if none exists)."""
    if len(roles) != params.k or len(set(roles)) != params.k:
        raise InvalidInput("roles", f"expected {params.k} distinct roles (one per team slot), got {list(roles)}")
    ps = sorted(players, key=lambda p: (p.skill, p.id))
    role_index = {r: i for i, r in enumerate(roles)}
    best: Game | None = None
    for _, lo, hi in shortest_intervals(ps, roles, params.k)[: max(1, windows)]:
        reps = _representatives(ps[lo: hi + 1], role_index, params.k)
        if reps is None:  # pragma: no cover - Hall's condition guarantees a system
            continue
        g = best_role_game(reps, role_index, params)
        if g is not None and (best is None or g.imbalance < best.imbalance):
            best = g
    return best


class RoleGameQueue:
    """Players sorted by skill with O(log n) insert/delete; :meth:`best_game` runs the
    shortest-interval approximation (O(n·4^k) per query)."""

    def __init__(self, roles: Sequence[str], alpha: float = 1.0, p: float = 1.0, q: float = 2.0, windows: int = 8):
        self.roles = tuple(roles)
        self.params = Params(len(self.roles), float(alpha), float(p), float(q), 0.0)
        if len(set(self.roles)) != len(self.roles) or not self.roles:
            raise InvalidInput("roles", "roles must be distinct and non-empty")
        self.windows = windows
        self._sl: SortedList = SortedList()
        self._by_id: dict[str, RolePlayer] = {}

    def __len__(self) -> int:
        return len(self._sl)

    def insert(self, pid: str, skill: float, roles: Sequence[str]) -> None:
        if pid in self._by_id:
            raise InvalidInput("player_id", f"player {pid!r} is already in the queue")
        if not math.isfinite(skill) or skill < 0:
            raise InvalidInput("skill", f"must be a finite number ≥ 0, got {skill!r}")
        bad = [r for r in roles if r not in self.roles]
        if bad or not roles:
            raise InvalidInput("roles", f"roles must be a non-empty subset of {list(self.roles)}, got {list(roles)}")
        p = RolePlayer(pid, float(skill), frozenset(roles))
        self._by_id[pid] = p
        self._sl.add((p.skill, pid))

    def delete(self, pid: str) -> None:
        p = self._by_id.pop(pid, None)
        if p is None:
            raise InvalidInput("player_id", f"player {pid!r} is not in the queue")
        self._sl.remove((p.skill, pid))

    def best_game(self) -> Game | None:
        ps = [self._by_id[pid] for _, pid in self._sl]
        return role_game_approx(ps, self.roles, self.params, self.windows)


def exhaustive_role_game(players: Sequence[RolePlayer], roles: Sequence[str], params: Params) -> Game | None:
    """The best role-restricted game by trying every 2k-subset (reference for small n)."""
    role_index = {r: i for i, r in enumerate(roles)}
    best = None
    for sub in itertools.combinations(players, 2 * params.k):
        g = best_role_game(sub, role_index, params)
        if g is not None and (best is None or g.imbalance < best.imbalance):
            best = g
    return best
