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

The imbalance itself is in :mod:`.imbalance`, the offline partition in :mod:`.partition`, the
role-restricted approximation in :mod:`.roles`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sortedcontainers import SortedList

from mgmatch.core.errors import InvalidInput

from .imbalance import Game, Params, best_split, check_values, split_ids, split_masks, v_q


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
        check_values(s, t)
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
