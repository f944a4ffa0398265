"""Alman–McKay game queue (Theorem 1): insert, delete and best-game query in O(log n) for fixed k.

A game is two disjoint teams X, Y of k players. Its imbalance is

    f(X, Y) = α·d_p(X, Y) + v_q(X ∪ Y),
    d_p = |‖s_X‖_p − ‖s_Y‖_p|,   v_q = (mean over the 2k players of |s − μ|^q)^{1/q},

with p, q ∈ [1, ∞] (∞: d_∞ = |max X − max Y|, v_∞ = max |s − μ|); skills are ≥ 0 as in the
paper. The time-sensitive priority is g = f + β·min_{r ∈ X∪Y} t_r with t_r the queue-entry
time: lower g is better, so with β > 0 a game holding an early entrant (a long waiter) is
preferred — "more leniency in how imbalanced a game is when it includes a player who has been
waiting for a long time". β = 0 gives the plain best game.

Structure (paper §4): players sorted by skill (``SortedList``); per player p_i ("anchor") the
best game whose least-skilled member is p_i and whose members lie in the window
i … i + W, W = ⌊4(1+α)k^{1+1/q}⌋ (Lemma 2: some best game fits in such a window); a min-heap
(lazy deletion) of those games. An insert or delete touches only the anchors within W before
the changed position. Two engineering refinements keep k = 3…5 practical in Python:

* branch and bound inside the window: players are added in skill order and a branch is cut
  when v_q(S ∪ {y}^{rem}) + β·(earliest possible entry) ≥ the incumbent, where y is the next
  candidate's skill — a valid lower bound (v_q is convex and symmetric, and increasing in a
  common value placed above the current maximum), nondecreasing in y, so the scan stops there;
  the team split is solved exactly over all C(2k−1, k−1) splits (vectorized);
* lazy anchors: an anchor whose window changed gets a *lower bound* key
  (k^{−1/q}·range/2 by Lemma 6, plus β·earliest entry) and is only re-searched when that key
  reaches the top of the heap; anchors whose bound shows the new player cannot improve their
  game are not touched at all. The query pops until the top entry is exact, which is then a
  best game (every other key is ≤ its anchor's true value). The bulk build
  (:meth:`GameQueue.bulk`) sorts once and pushes every anchor with its bound.

With β > 0 the window is the paper's (it states the structure carries over to g); the search
within each window is exact for g.

Also here: :func:`partition` — the O(n log n) offline ρ-approximation (sort, blocks of 2k, best
split of each block; ρ = 2k^{1/q}(1+α)). The role-restricted approximation is in
:mod:`mgmatch.solvers.game_queue_roles`.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from sortedcontainers import SortedList

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .base import Budget, register
from .dispatch import Decision, PoolShape, Waiting, _Base, _check_fits

# --------------------------------------------------------------------------- imbalance

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


def _vbound_fn(q: float):
    """v_q of S ∪ {y}^{rem} for relative skills (anchor = 0): fn(S_list, sum_S, sumsq_S, y, rem, N)."""
    if math.isinf(q):
        def f_inf(s_list, s_sum, s_sq, y, rem, n):
            mu = (s_sum + rem * y) / n
            top = y if rem else s_list[-1]
            return max(mu, top - mu)  # anchor (0) is the minimum
        return f_inf
    if q == 2.0:
        def f2(s_list, s_sum, s_sq, y, rem, n):
            mu = (s_sum + rem * y) / n
            var = (s_sq + rem * y * y) / n - mu * mu
            return math.sqrt(var) if var > 0.0 else 0.0
        return f2
    if q == 1.0:
        def f1(s_list, s_sum, s_sq, y, rem, n):
            mu = (s_sum + rem * y) / n
            tot = rem * abs(y - mu)
            for s in s_list:
                tot += abs(s - mu)
            return tot / n
        return f1

    def fq(s_list, s_sum, s_sq, y, rem, n):
        mu = (s_sum + rem * y) / n
        tot = rem * abs(y - mu) ** q
        for s in s_list:
            tot += abs(s - mu) ** q
        return (tot / n) ** (1.0 / q)
    return fq


class _Anchor:
    __slots__ = ("key", "ver", "exact", "game", "members")

    def __init__(self, key: float, ver: int):
        self.key = key
        self.ver = ver
        self.exact = False
        self.game: Game | None = None
        self.members: tuple[str, ...] = ()


@dataclass
class _Stats:
    searches: int = 0
    leaves: int = 0


class GameQueue:
    """The game queue of Theorem 1 (see the module docstring).

    >>> gq = GameQueue(k=1)
    >>> for pid, s in [("a", 10.0), ("b", 50.0), ("c", 12.0)]:
    ...     gq.insert(pid, s, 0.0)
    >>> sorted(gq.best_game().players)
    ['a', 'c']
    """

    def __init__(self, k: int, alpha: float = 1.0, p: float = 1.0, q: float = 2.0, beta: float = 0.0,
                 window: int | None = None):
        self.params = Params(k, float(alpha), float(p), float(q), float(beta))
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 2 * k - 1):
            raise InvalidInput("window", f"must be an integer ≥ 2k − 1 = {2 * k - 1}, got {window!r}")
        self.W = window if window is not None else self.params.window
        self._sl = SortedList()            # (skill, seq)
        self._pid_of: dict[int, str] = {}   # seq → id
        self._info: dict[str, tuple[float, float, int]] = {}  # id → (skill, entry time, seq)
        self._times = SortedList() if self.params.beta > 0 else None  # (t, seq) for the β bound
        self._anchors: dict[str, _Anchor] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._rev: dict[str, set[str]] = {}  # member id → anchors whose game contains it
        self._ver = 0
        self._vb = _vbound_fn(self.params.q)
        self.stats = _Stats()

    # ------------------------------------------------------------------ public

    def __len__(self) -> int:
        return len(self._sl)

    def __contains__(self, pid: str) -> bool:
        return pid in self._info

    @classmethod
    def bulk(cls, ids: Sequence[str], skills: Sequence[float] | np.ndarray,
             times: Sequence[float] | np.ndarray | None = None, **kw) -> GameQueue:
        """Build from many players at once: one sort, every anchor pushed with its bound."""
        gq = cls(**kw)
        s = np.asarray(skills, dtype=np.float64)
        t = np.zeros(len(s)) if times is None else np.asarray(times, dtype=np.float64)
        if len(ids) != len(s) or len(t) != len(s):
            raise InvalidInput("skills", "ids, skills and times must have the same length")
        _check_values(s, t)
        if len(set(ids)) != len(ids):
            raise InvalidInput("ids", "player ids must be unique")
        order = np.lexsort((np.arange(len(s)), s))
        ids_l = list(ids)
        gq._sl = SortedList(zip(s.tolist(), range(len(s)), strict=True))
        gq._pid_of = dict(enumerate(ids_l))
        gq._info = {pid: (float(s[i]), float(t[i]), i) for i, pid in enumerate(ids_l)}
        if gq._times is not None:
            gq._times = SortedList(zip(t.tolist(), range(len(s)), strict=True))
        gq._seq = len(s)
        n, m = len(s), 2 * gq.params.k
        if n >= m:
            ss = s[order]
            keys = gq.params.range_factor * (ss[m - 1:] - ss[: n - m + 1]) + gq._beta_floor()
            heap = []
            for i, key in enumerate(keys.tolist()):
                pid = ids_l[order[i]]
                gq._ver += 1
                gq._anchors[pid] = _Anchor(key, gq._ver)
                heap.append((key, gq._ver, pid))
            heapq.heapify(heap)
            gq._heap = heap
        return gq

    def insert(self, pid: str, skill: float, entry_time: float = 0.0) -> None:
        """Add a player (``skill`` ≥ 0, ``entry_time`` finite). O(W·log n) plus lazy work."""
        if not isinstance(pid, str) or not pid:
            raise InvalidInput("player_id", f"expected a non-empty string, got {pid!r}")
        if pid in self._info:
            raise InvalidInput("player_id", f"player {pid!r} is already in the queue")
        try:
            skill, entry_time = float(skill), float(entry_time)
        except (TypeError, ValueError):
            raise InvalidInput("skill", f"skill and entry time must be numbers, got {skill!r}, {entry_time!r}") from None
        if not math.isfinite(skill) or skill < 0:
            raise InvalidInput("skill", f"must be a finite number ≥ 0, got {skill!r}")
        if not math.isfinite(entry_time):
            raise InvalidInput("entry_time", f"must be a finite number, got {entry_time!r}")
        seq = self._next_seq()
        self._info[pid] = (skill, entry_time, seq)
        self._pid_of[seq] = pid
        self._sl.add((skill, seq))
        if self._times is not None:
            self._times.add((entry_time, seq))
        pos = self._sl.index((skill, seq))
        n, m, W = len(self._sl), 2 * self.params.k, self.W
        lo = max(0, pos - W)
        seg = list(self._sl.islice(lo, min(n, pos + m)))  # anchors before pos and their blocks
        rf, bfl = self.params.range_factor, self._beta_floor()
        # the new player's own anchor
        if pos + m - 1 < n:
            self._dirty(pid, rf * (seg[pos - lo + m - 1][0] - skill) + bfl, keep=False)
        sk = [x[0] for x in seg]
        nseg = len(sk)
        anchors, pid_of = self._anchors, self._pid_of
        for j in range(pos - lo):
            a_skill = sk[j]
            jm = j + m - 1
            blk = sk[jm] - a_skill if jm < nseg else math.inf
            dx = skill - a_skill
            lb = rf * (dx if dx > blk else blk) + bfl
            a = pid_of[seg[j][1]]
            st = anchors.get(a)
            if st is not None and lb >= st.key:
                continue  # the new player cannot improve this anchor's game
            self._lower(a, lb)

    def delete(self, pid: str) -> None:
        """Remove a player. O(W·log n) plus lazy work."""
        if pid not in self._info:
            raise InvalidInput("player_id", f"player {pid!r} is not in the queue")
        skill, t, seq = self._info.pop(pid)
        pos = self._sl.index((skill, seq))
        self._sl.remove((skill, seq))
        del self._pid_of[seq]
        if self._times is not None:
            self._times.remove((t, seq))
        st = self._anchors.pop(pid, None)
        if st is not None:
            self._unlink(pid, st)
        n, m, W = len(self._sl), 2 * self.params.k, self.W
        rf, bfl = self.params.range_factor, self._beta_floor()
        # anchors whose game used the deleted player: their game is gone, fall back to the bound
        for a in list(self._rev.pop(pid, ())):
            ast = self._anchors.get(a)
            if ast is None:
                continue
            self._unlink(a, ast)
            ast.game, ast.members = None, ()
            a_skill, _, a_seq = self._info[a]
            i = self._sl.index((a_skill, a_seq))
            if i + m - 1 >= n:
                self._drop(a)
                continue
            self._dirty(a, rf * (self._sl[i + m - 1][0] - a_skill) + bfl, keep=True)
        # anchors before pos: their window gained the player now at index i + W
        lo = max(0, pos - W)
        seg = list(self._sl.islice(lo, min(n, pos + W)))
        nseg = len(seg)
        anchors, pid_of = self._anchors, self._pid_of
        for j in range(pos - lo):
            a_skill, a_seq = seg[j]
            if j + m - 1 >= nseg:
                self._drop(pid_of[a_seq])
                continue
            if j + W < nseg:
                blk = seg[j + m - 1][0] - a_skill
                dx = seg[j + W][0] - a_skill
                lb = rf * (dx if dx > blk else blk) + bfl
                a = pid_of[a_seq]
                st = anchors.get(a)
                if st is not None and lb >= st.key:
                    continue
                self._lower(a, lb)

    def best_game(self) -> Game | None:
        """A game of least priority g (least imbalance f when β = 0), or None if < 2k players."""
        heap = self._heap
        while heap:
            key, ver, a = heap[0]
            st = self._anchors.get(a)
            if st is None or st.ver != ver:
                heapq.heappop(heap)
                continue
            if st.exact:
                return st.game
            heapq.heappop(heap)
            self._resolve(a, st)
        return None

    def pop_game(self) -> Game | None:
        """Query the best game and remove its players."""
        g = self.best_game()
        if g is not None:
            for pid in g.players:
                self.delete(pid)
        return g

    def best_games(self, count: int) -> list[Game]:
        """Up to ``count`` disjoint games, each the best among the players left by the previous ones
        (the queue is restored afterwards)."""
        out: list[Game] = []
        removed: list[tuple[str, float, float]] = []
        try:
            while len(out) < count:
                g = self.best_game()
                if g is None:
                    break
                out.append(g)
                for pid in g.players:
                    s, t, _ = self._info[pid]
                    removed.append((pid, s, t))
                    self.delete(pid)
        finally:
            for pid, s, t in removed:
                self.insert(pid, s, t)
        return out

    def skill(self, pid: str) -> float:
        return self._info[pid][0]

    def entry_time(self, pid: str) -> float:
        return self._info[pid][1]

    # ------------------------------------------------------------------ internals

    _seq = 0

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _beta_floor(self) -> float:
        if self._times is None or not self._times:
            return 0.0
        return self.params.beta * self._times[0][0]

    def _push(self, a: str, st: _Anchor) -> None:
        self._ver += 1
        st.ver = self._ver
        heapq.heappush(self._heap, (st.key, st.ver, a))
        if len(self._heap) > 3 * len(self._anchors) + 1024:
            self._heap = [(s.key, s.ver, x) for x, s in self._anchors.items()]
            heapq.heapify(self._heap)

    def _dirty(self, a: str, key: float, keep: bool) -> None:
        st = self._anchors.get(a)
        if st is None:
            st = _Anchor(key, 0)
            self._anchors[a] = st
        else:
            st.key = min(st.key, key) if keep else key
        st.exact = False
        self._push(a, st)

    def _lower(self, a: str, lb: float) -> None:
        """The window of anchor ``a`` changed by a player whose games with ``a`` cost ≥ ``lb``."""
        st = self._anchors.get(a)
        if st is None:
            # the anchor had no game (too few players above it); it may have one now
            a_skill, _, a_seq = self._info[a]
            i = self._sl.index((a_skill, a_seq))
            m = 2 * self.params.k
            if i + m - 1 < len(self._sl):
                self._dirty(a, self.params.range_factor * (self._sl[i + m - 1][0] - a_skill) + self._beta_floor(),
                            keep=False)
            return
        if lb >= st.key:
            return  # cannot beat the anchor's current (exact or bound) value
        st.key = lb
        st.exact = False
        self._push(a, st)

    def _drop(self, a: str) -> None:
        st = self._anchors.pop(a, None)
        if st is not None:
            self._unlink(a, st)

    def _unlink(self, a: str, st: _Anchor) -> None:
        for mbr in st.members:
            s = self._rev.get(mbr)
            if s is not None:
                s.discard(a)
                if not s:
                    del self._rev[mbr]

    def _resolve(self, a: str, st: _Anchor) -> None:
        """Exact best game of anchor ``a`` within its window; push it (or drop the anchor)."""
        self.stats.searches += 1
        P = self.params
        k, m = P.k, 2 * P.k
        a_skill, a_t, a_seq = self._info[a]
        i = self._sl.index((a_skill, a_seq))
        cands = list(self._sl.islice(i + 1, min(len(self._sl), i + 1 + self.W)))
        if len(cands) < m - 1:
            self._drop(a)
            return
        pid_of, info = self._pid_of, self._info
        c_ids = [pid_of[sq] for _, sq in cands]
        c_rel = [s - a_skill for s, _ in cands]
        c_t = [info[x][1] for x in c_ids] if P.beta > 0 else None
        best_g, best = math.inf, None
        # incumbent 1: the anchor's previous game, if all its players are still here
        if st.game is not None and all(x in info for x in st.game.players):
            best_g, best = st.game.priority, st.game
        # incumbent 2: the contiguous block
        g_blk = self._evaluate(a, c_ids[: m - 1])
        if g_blk.priority < best_g:
            best_g, best = g_blk.priority, g_blk
        sufmin = None
        if c_t is not None:
            sufmin = c_t[:] + [math.inf]
            for j in range(len(c_t) - 2, -1, -1):
                sufmin[j] = min(sufmin[j], sufmin[j + 1])
        vb, beta, alpha = self._vb, P.beta, P.alpha
        ncand = len(cands)
        chosen: list[int] = []
        s_list: list[float] = [0.0]

        def dfs(start: int, s_sum: float, s_sq: float, t_min: float) -> None:
            nonlocal best_g, best
            rem = m - len(s_list)
            for j in range(start, ncand - rem + 1):
                y = c_rel[j]
                tm = t_min if sufmin is None else min(t_min, sufmin[j])
                lb = vb(s_list, s_sum, s_sq, y, rem, m) + beta * tm
                if lb >= best_g:
                    return  # nondecreasing in j: nothing further in this scan can win
                if rem == 1:
                    self.stats.leaves += 1
                    # leaf: lb is the exact v_q (+ β term when t is exact at this point)
                    t_leaf = t_min if c_t is None else min(t_min, c_t[j])
                    v = vb(s_list, s_sum, s_sq, y, 1, m)
                    if v + beta * t_leaf >= best_g:
                        continue
                    if alpha > 0:
                        idx = chosen + [j]
                        z = np.asarray([a_skill] + [c_rel[x] + a_skill for x in idx])
                        d, mask = best_split(z, P.p)
                    else:
                        idx, d, mask = chosen + [j], 0.0, None
                    g = v + alpha * d + beta * t_leaf
                    if g < best_g:
                        ids = [a] + [c_ids[x] for x in idx]
                        if mask is None:
                            mask = split_masks(k)[0]
                        best = Game(*split_ids(ids, mask), v + alpha * d, g)
                        best_g = g
                    continue
                chosen.append(j)
                s_list.append(y)
                dfs(j + 1, s_sum + y, s_sq + y * y,
                    t_min if c_t is None else min(t_min, c_t[j]))
                s_list.pop()
                chosen.pop()

        dfs(0, 0.0, 0.0, a_t if P.beta > 0 else 0.0)
        self._unlink(a, st)
        st.game = best
        st.members = best.players
        for x in st.members:
            self._rev.setdefault(x, set()).add(a)
        st.key = best.priority
        st.exact = True
        self._push(a, st)

    def _evaluate(self, a: str, others: Sequence[str]) -> Game:
        """The best split of ``a`` + ``others`` (2k players) as a Game."""
        P = self.params
        ids = [a] + list(others)
        z = np.asarray([self._info[x][0] for x in ids])
        order = np.argsort(z, kind="stable")
        ids = [ids[i] for i in order]
        z = z[order]
        d, mask = best_split(z, P.p)
        v = v_q(z, P.q)
        f = P.alpha * d + v
        g = f + P.beta * min(self._info[x][1] for x in ids) if P.beta > 0 else f
        return Game(*split_ids(ids, mask), f, g)


def _check_values(s: np.ndarray, t: np.ndarray) -> None:
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise InvalidInput("skill", "skills must be finite numbers ≥ 0")
    if not np.all(np.isfinite(t)):
        raise InvalidInput("entry_time", "entry times must be finite numbers")


# --------------------------------------------------------------------------- offline partition


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
    _check_values(s, np.zeros(1))
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


# --------------------------------------------------------------------------- dispatch policy

@dataclass
class GameQueuePolicy(_Base):
    """Dispatch policy ``game_queue``: an incremental :class:`GameQueue` over the waiting players.

    Tickets that arrived since the last call are inserted, tickets gone are deleted (O(log n)
    each). When the best game's imbalance is ≤ ``max_imbalance`` the tickets holding the players
    of the ``games`` best disjoint games form the candidate pool (a party ticket joins whole),
    topped up by waiting time and skill proximity to ``max_candidates`` players.
    """

    alpha: float = 1.0
    p: float = 1.0
    q: float = 2.0
    beta: float = 0.0
    games: int = 1
    max_imbalance: float = math.inf
    name: str = "game_queue"
    _gq: GameQueue | None = None
    _k: int = 0
    _owner: dict = field(default_factory=dict)  # player id → ticket id

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        if shape.teams != 2 or shape.sizes[0] != shape.sizes[1]:
            raise InvalidInput("sizes", f"the game_queue policy needs two teams of equal size, got {list(shape.sizes)}")
        _check_fits(shape, self.max_candidates)
        k = shape.sizes[0]
        if self._gq is None or self._k != k:
            self._gq = GameQueue(k, self.alpha, self.p, self.q, self.beta)
            self._k, self._owner = k, {}
        gq = self._gq
        by_id = {t.ticket_id: t for t in waiting}
        current = {p.id: t.ticket_id for t in waiting for p in t.players}
        for pid in [x for x in self._owner if x not in current]:
            gq.delete(pid)
            del self._owner[pid]
        for t in waiting:
            for p in t.players:
                if p.id not in self._owner:
                    gq.insert(p.id, max(0.0, float(p.skill or 0.0)), t.enqueued_at)
                    self._owner[p.id] = t.ticket_id
        games = gq.best_games(self.games)
        if not games:
            return Decision(False, reason=f"{len(gq)} players: fewer than {2 * k}")
        if games[0].imbalance > self.max_imbalance:
            return Decision(False, reason=f"best game imbalance {games[0].imbalance:.4g} > {self.max_imbalance:g}")
        cands: list[Waiting] = []
        seen: set[str] = set()
        used = 0
        for g in games:
            for pid in g.players:
                tid = current[pid]
                if tid not in seen and used + by_id[tid].size <= self.max_candidates:
                    seen.add(tid)
                    cands.append(by_id[tid])
                    used += by_id[tid].size
        anchor = cands[0]
        for t in self.select(waiting, now, anchor=anchor):
            if t.ticket_id not in seen and used + t.size <= self.max_candidates:
                seen.add(t.ticket_id)
                cands.append(t)
                used += t.size
        return self.decision(cands, shape, now, f"best game imbalance {games[0].imbalance:.4g}",
                             max_matches=len(games))


# --------------------------------------------------------------------------- solver method


@register("game-queue", "Alman–McKay game queue: the least-imbalanced k-vs-k game by skill (α·d_p + v_q), "
                        "ignoring engagement; the first that passes the checker")
class GameQueueSolver:
    """``--method game-queue``: the best game by skill imbalance that satisfies the rules.

    Needs two teams of equal size k and a skill for every player (skills are shifted so the
    lowest is 0: the paper's norms assume non-negative skills). Games are taken from a
    :class:`GameQueue` in order of imbalance; a game that violates a rule (in either team
    orientation) loses its least-skilled player and the queue is asked again, until a feasible
    game is found, the budget runs out or fewer than 2k players remain (``no_solution``).
    """

    name = "game-queue"

    def __init__(self, alpha: float = 1.0, p: float = 1.0, q: float = 2.0, **_: object):
        self.params = Params(1, float(alpha), float(p), float(q))

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        inst = problem.instance
        if inst.teams != 2 or inst.sizes[0] != inst.sizes[1]:
            raise InvalidInput("teams", f"game-queue needs two teams of equal size, got sizes {list(inst.sizes)}")
        for i, pl in enumerate(inst.players):
            if pl.skill is None:
                raise InvalidInput(f"players[{i}].skill", f"game-queue needs every player's skill ({pl.id!r} has none)")
        k = inst.sizes[0]
        if k > MAX_K:
            raise InvalidInput("team_size", f"game-queue handles teams of at most {MAX_K} players, got {k}")
        s = inst.skills() - inst.skills().min()
        if math.comb(inst.n, 2 * k) * len(split_masks(k)) <= EXHAUSTIVE_GAMES:
            return self._exhaustive(problem, budget, s, k)
        gq = GameQueue.bulk(inst.ids, s, None, k=k, alpha=self.params.alpha, p=self.params.p,
                            q=self.params.q)
        checker = problem.checker
        while not budget.expired():
            g = gq.best_game()
            if g is None:
                break
            team_of = np.full((2, inst.n), -1, dtype=np.int64)
            for side, (xs, ys) in enumerate(((g.team_x, g.team_y), (g.team_y, g.team_x))):
                team_of[side, [inst.index[x] for x in xs]] = 0
                team_of[side, [inst.index[y] for y in ys]] = 1
            ok = np.asarray(checker.feasible(team_of))
            if ok.any():
                return problem.solution(team_of[int(np.argmax(ok))], "feasible", self.name, budget.elapsed_ms(),
                                        imbalance=g.imbalance)
            gq.delete(min(g.players, key=lambda x: (gq.skill(x), x)))
        return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())

    def _exhaustive(self, problem: Problem, budget: Budget, s: np.ndarray, k: int) -> Solution:
        """Small instances: every game in order of imbalance, the first feasible one wins."""
        n, P = problem.instance.n, self.params
        subsets = np.asarray(list(itertools.combinations(range(n), 2 * k)), dtype=np.int64)
        masks = split_masks(k)
        z = s[subsets]                                                   # [S, 2k] (sorted by index)
        d = np.stack([best_split_all(z, P.p, m) for m in masks], axis=1)  # [S, M]
        dev = np.abs(z - z.mean(axis=1, keepdims=True))
        v = dev.max(axis=1) if math.isinf(P.q) else np.mean(dev ** P.q, axis=1) ** (1.0 / P.q)
        f = (P.alpha * d + v[:, None]).reshape(-1)
        order = np.argsort(f, kind="stable")
        checker = problem.checker
        for start in range(0, len(order), 512):
            if budget.expired():
                break
            idx = order[start: start + 512]
            si, mi = np.divmod(idx, len(masks))
            team_of = np.full((2 * len(idx), n), -1, dtype=np.int64)
            rows = np.arange(len(idx))
            for slot in range(2 * k):
                side = np.where(masks[mi, slot], 0, 1)
                team_of[2 * rows, subsets[si, slot]] = side
                team_of[2 * rows + 1, subsets[si, slot]] = 1 - side
            ok = np.asarray(checker.feasible(team_of))
            if ok.any():
                j = int(np.argmax(ok))
                return problem.solution(team_of[j], "feasible", self.name, budget.elapsed_ms(),
                                        imbalance=float(f[idx[j // 2]]))
        return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())


#: the game-queue method enumerates every game when there are at most this many
EXHAUSTIVE_GAMES = 200_000


def best_split_all(z: np.ndarray, p: float, mask: np.ndarray) -> np.ndarray:
    """d_p of one fixed split ``mask`` for many blocks z [B, 2k]."""
    x, y = z[:, mask], z[:, ~mask]
    if math.isinf(p):
        return np.abs(x.max(axis=1) - y.max(axis=1))
    return np.abs((x ** p).sum(axis=1) ** (1.0 / p) - (y ** p).sum(axis=1) ** (1.0 / p))
