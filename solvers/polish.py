"""Feasibility-preserving improvement on the TRUE engagement objective (MGMatch's last stage).

Starting from a feasible assignment, :func:`polish` repeatedly applies the best improving move
among

- **team swaps**: two selected players on different teams trade places;
- **bench swaps**: a selected player leaves and a benched player takes his slot on that team;
- **party swaps** (when the instance has parties): a whole party trades places with another
  party of the same size on another team or on the bench, so ``party_together`` does not block
  every move of its members.

Every candidate of one round is evaluated in a single numpy batch (``Problem.objectives``), the
improving ones are sorted best first and handed to the checker in chunks; the first feasible one
in that order is the best feasible improving move (best improvement). The move is accepted only if
the exact float64 objective really improves, so polishing never makes an answer worse and never
leaves the feasible region. The loop stops at a local optimum, when the deadline passes, or
before a round that (judging by the last one) could not finish by the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem

#: candidates handed to the checker at once (sorted by objective, best first)
CHECK_CHUNK = 64
#: an improvement below this (absolute) is treated as none: it stops cycling on float noise
MIN_GAIN = 1e-9


@dataclass
class PolishResult:
    team_of: np.ndarray
    objective: float
    rounds: int
    improved: bool
    local_optimum: bool
    round_s: float = 0.0  # the longest round seen (seconds): callers budget further calls with it
    measured_round_s: float = 0.0  # the longest round this call timed (0: none ran); round_s also counts the pace given


def candidate_moves(team_of: np.ndarray, units: list[np.ndarray]) -> np.ndarray:
    """All candidate neighbours of ``team_of`` as a batch [M, N]."""
    t = np.asarray(team_of)
    N = t.shape[0]
    sel = np.flatnonzero(t >= 0)
    bench = np.flatnonzero(t < 0)
    out = []
    # team swaps: i, k selected on different teams
    if sel.size:
        a, b = np.triu_indices(sel.size, 1)
        i, k = sel[a], sel[b]
        keep = t[i] != t[k]
        i, k = i[keep], k[keep]
        if i.size:
            m = np.repeat(t[None, :], i.size, axis=0)
            r = np.arange(i.size)
            m[r, i], m[r, k] = t[k], t[i]
            out.append(m)
    # bench swaps: i selected leaves, k from the bench takes its team
    if sel.size and bench.size:
        i = np.repeat(sel, bench.size)
        k = np.tile(bench, sel.size)
        m = np.repeat(t[None, :], i.size, axis=0)
        r = np.arange(i.size)
        m[r, k] = t[i]
        m[r, i] = -1
        out.append(m)
    # unit swaps: a party moves as one block with another party or the same number of singles
    for u in units:
        team_u = t[u[0]]
        if not (t[u] == team_u).all():
            continue
        for v in units:
            if v is u or v.size != u.size or not (t[v] == t[v[0]]).all() or t[v[0]] == team_u:
                continue
            if team_u < 0 and t[v[0]] < 0:
                continue
            m = t.copy()
            m[u], m[v] = t[v[0]], team_u
            out.append(m[None, :])
    if not out:
        return np.empty((0, N), dtype=t.dtype)
    return np.concatenate(out, axis=0)


def polish(problem: Problem, team_of: np.ndarray, deadline: float | None = None,
           max_rounds: int = 1000, round_s: float = 0.0) -> PolishResult:
    """Improve a feasible assignment by best-improvement local search until ``deadline``.

    Args:
        problem: the instance and its engagement model.
        team_of: a feasible assignment [N] (team per player, −1 bench).
        deadline: ``time.perf_counter()`` value at which to stop; None for no limit.
        max_rounds: at most this many accepted moves.
        round_s: expected seconds per round (e.g. from an earlier call); no round is started
            that would not finish by the deadline at this pace.
    Returns:
        the best assignment found (the input when nothing improves), its exact objective.
    """
    cur = np.asarray(team_of, dtype=np.int64).copy()
    cur_obj = problem.objective(cur)
    groups = parties(problem.instance)
    units = [np.asarray(m, dtype=np.int64) for m in groups.values()]
    rounds, improved = 0, False

    def out_of_time() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    pace = round_s  # seconds per round: a round that cannot finish by the deadline is not started
    seen = 0.0

    def result(local: bool) -> PolishResult:
        return PolishResult(cur, cur_obj, rounds, improved, local, pace, seen)

    while rounds < max_rounds and not out_of_time():
        if deadline is not None and time.perf_counter() + pace > deadline:
            break
        t_round = time.perf_counter()
        cand = candidate_moves(cur, units)
        if cand.shape[0] == 0:
            return result(True)
        vals = problem.objectives(cand)
        order = np.argsort(-vals, kind="stable")
        order = order[vals[order] > cur_obj + MIN_GAIN]
        accepted = False
        for s in range(0, order.size, CHECK_CHUNK):
            if out_of_time():
                seen = max(seen, time.perf_counter() - t_round)
                pace = max(pace, seen)
                return result(False)
            idx = order[s:s + CHECK_CHUNK]
            ok = problem.checker.feasible(cand[idx])
            for c in idx[ok]:  # best first
                obj = problem.objective(cand[c])  # exact float64 value
                if obj > cur_obj + MIN_GAIN:
                    cur, cur_obj = cand[c].copy(), obj
                    accepted = True
                    break
            if accepted:
                break
        seen = max(seen, time.perf_counter() - t_round)
        pace = max(pace, seen)
        if not accepted:
            return result(True)
        rounds += 1
        improved = True
    return result(False)
