"""Stage 3 of the joint batch solve (:mod:`mgmatch.solvers.batch`): the local search on the true
objective over a partition of the pool into matches (the Awesomenauts move, best single swap between
matches, until none improves). Moves are team swaps inside a match, swaps with an unmatched candidate,
swaps of two players of different matches, and swaps of whole parties of the same size; every
candidate is scored exactly over the one or two matches it changes, and improving ones are checked by
the checker best first."""

from __future__ import annotations

import time

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem

#: candidates handed to the checker at once
CHECK_CHUNK = 64
#: after the best move of a round, at most this many more chunks are checked for moves on other matches
EXTRA_CHUNKS = 4
#: an improvement below this is none (stops cycling on float noise)
MIN_GAIN = 1e-9


def _swap_rows(t: np.ndarray, i: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Rows of ``t`` with positions i and k exchanged (one row per pair)."""
    R = np.repeat(t[None, :], i.size, axis=0)
    r = np.arange(i.size)
    R[r, i], R[r, k] = t[k], t[i]
    return R


def _moves(T: np.ndarray, units: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every neighbour of the partition T [M, N]: (m1 [B], rows1 [B, N], m2 [B] (−1: none), rows2 [B, N])."""
    M, N = T.shape
    own = np.full(N, -1, dtype=np.int64)
    for m in range(M):
        own[T[m] >= 0] = m
    free = np.flatnonzero(own < 0)
    m1s, r1s, m2s, r2s = [], [], [], []

    def add(m1: int, R1: np.ndarray, m2: int = -1, R2: np.ndarray | None = None) -> None:
        if R1.shape[0] == 0:
            return
        m1s.append(np.full(R1.shape[0], m1))
        r1s.append(R1)
        m2s.append(np.full(R1.shape[0], m2))
        r2s.append(R1 if R2 is None else R2)

    for m in range(M):
        t = T[m]
        sel = np.flatnonzero(t >= 0)
        a, b = np.triu_indices(sel.size, 1)
        i, k = sel[a], sel[b]
        keep = t[i] != t[k]
        add(m, _swap_rows(t, i[keep], k[keep]))  # team swaps inside the match
        if free.size:  # a matched player out, an unmatched one in his place
            add(m, _swap_rows(t, np.repeat(sel, free.size), np.tile(free, sel.size)))
        for m2 in range(m + 1, M):  # a player of match m and one of match m2 trade places
            t2 = T[m2]
            sel2 = np.flatnonzero(t2 >= 0)
            i = np.repeat(sel, sel2.size)
            k = np.tile(sel2, sel.size)
            R1 = np.repeat(t[None, :], i.size, axis=0)
            R2 = np.repeat(t2[None, :], i.size, axis=0)
            r = np.arange(i.size)
            R1[r, k], R1[r, i] = t[i], -1
            R2[r, i], R2[r, k] = t2[k], -1
            add(m, R1, m2, R2)
    # whole parties of the same size trade places (inside a match, between matches, with the unmatched)
    for x, u in enumerate(units):
        mu, tu = own[u[0]], T[own[u[0]], u[0]] if own[u[0]] >= 0 else -1
        if not ((own[u] == mu).all() and (mu < 0 or (T[mu, u] == tu).all())):
            continue
        for v in units[x + 1:]:
            if v.size != u.size:
                continue
            mv, tv = own[v[0]], T[own[v[0]], v[0]] if own[v[0]] >= 0 else -1
            if not ((own[v] == mv).all() and (mv < 0 or (T[mv, v] == tv).all())):
                continue
            if (mu, tu) == (mv, tv) or (mu < 0 and mv < 0):
                continue
            if mu == mv:
                R = T[mu].copy()
                R[u], R[v] = tv, tu
                add(mu, R[None, :])
                continue
            rows = {}
            for m_, gone, come, team in ((mu, u, v, tu), (mv, v, u, tv)):
                if m_ >= 0:
                    R = T[m_].copy()
                    R[gone], R[come] = -1, team
                    rows[m_] = R[None, :]
            ms = sorted(rows)
            add(ms[0], rows[ms[0]], ms[1] if len(ms) > 1 else -1, rows[ms[-1]] if len(ms) > 1 else None)
    if not m1s:
        e = np.empty((0, N), dtype=np.int64)
        return np.empty(0, np.int64), e, np.empty(0, np.int64), e
    return np.concatenate(m1s), np.concatenate(r1s), np.concatenate(m2s), np.concatenate(r2s)


def joint_local_search(problem: Problem, T: np.ndarray, objs: np.ndarray, deadline: float | None,
                       max_rounds: int = 10_000) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Stage 3: best-improvement swaps within and across matches on the true objective.

    Returns (T, per-match objectives, accepted moves, reached a local optimum)."""
    T, objs = T.copy(), np.asarray(objs, dtype=np.float64).copy()
    units = [np.asarray(g, dtype=np.int64) for g in parties(problem.instance).values()]
    rounds, pace = 0, 0.0
    while rounds < max_rounds:
        now = time.perf_counter()
        if deadline is not None and now + pace > deadline:
            return T, objs, rounds, False
        m1, R1, m2, R2 = _moves(T, units)
        if m1.size == 0:
            return T, objs, rounds, True
        if deadline is not None and time.perf_counter() > deadline:
            return T, objs, rounds, False
        gain = problem.objectives(R1) - objs[m1]
        two = m2 >= 0
        if two.any():
            gain[two] += problem.objectives(R2[two]) - objs[m2[two]]
        if deadline is not None and time.perf_counter() > deadline:
            return T, objs, rounds, False
        cand = np.flatnonzero(gain > MIN_GAIN)
        cand = cand[np.argsort(-gain[cand], kind="stable")]
        # the best feasible move, then (same round) the next best feasible ones that touch neither its
        # matches nor its players: their gains were computed on unchanged matches, so they add up exactly
        touched_m: set[int] = set()
        touched_p = np.zeros(T.shape[1], dtype=bool)
        accepted, scanned_after = 0, 0
        for s in range(0, cand.size, CHECK_CHUNK):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if accepted and (scanned_after >= EXTRA_CHUNKS or len(touched_m) >= T.shape[0]):
                break
            c = cand[s:s + CHECK_CHUNK]
            c = c[[not (({int(m1[q]), int(m2[q])} - {-1}) & touched_m) for q in c]] if touched_m else c
            if c.size == 0:
                continue
            if accepted:
                scanned_after += 1
            ok = problem.checker.feasible(R1[c]) & problem.checker.feasible(R2[c])
            for q in c[ok]:
                ms = [int(m1[q])] + ([int(m2[q])] if m2[q] >= 0 else [])
                if any(m in touched_m for m in ms):
                    continue
                changed = np.zeros(T.shape[1], dtype=bool)
                changed |= R1[q] != T[ms[0]]
                if len(ms) > 1:
                    changed |= R2[q] != T[ms[1]]
                if (changed & touched_p).any():
                    continue
                new1 = problem.objective(R1[q])  # exact float64: accept only a real improvement
                new2 = problem.objective(R2[q]) if len(ms) > 1 else 0.0
                old = objs[ms[0]] + (objs[ms[1]] if len(ms) > 1 else 0.0)
                if new1 + new2 <= old + MIN_GAIN:
                    continue
                T[ms[0]] = R1[q]
                objs[ms[0]] = new1
                if len(ms) > 1:
                    T[ms[1]] = R2[q]
                    objs[ms[1]] = new2
                touched_m.update(ms)
                touched_p |= changed
                accepted += 1
                rounds += 1
        pace = max(pace, time.perf_counter() - now)
        if not accepted:
            return T, objs, rounds, True
        if rounds >= max_rounds:
            break
    return T, objs, rounds, False
