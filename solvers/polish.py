"""Feasibility-preserving improvement on the TRUE engagement objective (MGMatch's last stage).

Starting from a feasible assignment, :func:`polish` repeatedly applies the best improving move
among

- **team swaps**: two selected players on different teams trade places;
- **bench swaps**: a selected player leaves and a benched player takes his slot on that team;
- **party swaps** (when the instance has parties): a whole party trades places with another
  party of the same size on another team or on the bench, so ``party_together`` does not block
  every move of its members.

Every move of one round is scored in one compiled pass
(:class:`~mgmatch.solvers.moves.MoveScorer`: objective and rules broken per move); the best
feasible move whose exact float64 objective really improves is taken (best improvement; the
ranking value is float32 after the first layer, so the best :data:`EXACT_TRIES` are computed
exactly). The checker confirms the polished answer (the start is kept should it ever disagree
with the scorer), so polishing never makes an answer worse and never leaves the feasible region. The loop stops at a local optimum, when the deadline passes, or
before a round that (judging by the last one) could not finish by the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem

from .moves import neighbourhood, scorer_of

#: improving-looking moves whose exact objective is computed per round, best first (the ranking is
#: float32, within RANK_SLACK of the exact value, relative)
EXACT_TRIES = 4
RANK_SLACK = 1e-5
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

    def confirmed(local: bool) -> PolishResult:
        # the checker, the one judge of the rules, confirms the answer (the scorer's rows agree
        # with it up to float rounding at a bound; then the start is kept)
        if improved and not problem.checker.feasible(cur[None])[0]:
            return PolishResult(start, start_obj, rounds, False, local, pace, seen)
        return PolishResult(cur, cur_obj, rounds, improved, local, pace, seen)

    scorer = scorer_of(problem)
    start, start_obj = cur.copy(), cur_obj
    while rounds < max_rounds and not out_of_time():
        if deadline is not None and time.perf_counter() + pace > deadline:
            break
        t_round = time.perf_counter()
        moves = neighbourhood(cur, units)
        if len(moves) == 0:
            return confirmed(True)  # no neighbour at all: a local optimum
        vals, broken, _, _ = scorer.score(cur, moves)
        # feasible moves that look improving, best first (float32 ranking; the exact float64
        # objective decides)
        order = np.flatnonzero((broken == 0) & (vals > cur_obj + MIN_GAIN - RANK_SLACK * max(1.0, abs(cur_obj))))
        order = order[np.argsort(-vals[order], kind="stable")]
        accepted = False
        for c in order[:EXACT_TRIES]:
            nxt = moves.apply(cur, int(c))
            obj = problem.objective(nxt)
            if obj > cur_obj + MIN_GAIN:
                cur, cur_obj, accepted = nxt, obj, True
                break
        seen = max(seen, time.perf_counter() - t_round)
        pace = max(pace, seen)
        if not accepted:
            return confirmed(True)
        rounds += 1
        improved = True
    return confirmed(False)
