"""Tabu search on the TRUE engagement objective: the anytime search after polishing.

:func:`polish` stops at the first assignment that no single move improves. Under role slots,
skill-balance bounds and parties most moves are infeasible, so those local optima are poor (the
5v5 example's pools: 6–12% below the fitted optimum after polishing). :func:`tabu_search` goes on
from there (Glover's tabu search, the classic for assignment neighbourhoods):

- every iteration takes the **best move** of the same neighbourhood as :func:`polish` (team swaps,
  bench swaps, party swaps) plus three-player **rotations** (a seeded sample of at most
  :data:`ROTATIONS_MAX`) and **party exchanges** (a whole party with as many players of no party
  from another team or the bench, :data:`PARTY_DRAWS` seeded draws each;
  :func:`~mgmatch.solvers.moves.neighbourhood`), even when it makes the assignment worse, so the
  search walks out of a local optimum (a benched party that an ``include`` rule needs otherwise
  comes in one member at a time, through states that split it);
- a move may break rules: its score is its objective minus a **penalty** per broken rule and per
  unit of how far outside its bounds each broken row lies (:class:`~mgmatch.solvers.moves.Scored`'s
  ``excess``: a skill gap of 300 against a bound of 90 is further from feasible than one of 120;
  counts alone left the walk on plateaus), which grows while the walk stays infeasible and
  shrinks while it stays feasible (strategic oscillation), and starts afresh when a rule-breaking
  start is first repaired; only feasible states can become the answer;
- the players a move touched may not move again for a seeded random ``tenure`` of iterations
  (**tabu**), so it does not walk straight back; a feasible move that would beat the best
  assignment seen is allowed anyway (**aspiration**);
- after ``restart_after`` iterations without a new best, the walk restarts from the best
  assignment with the tabu list cleared (**intensification**).

All moves of one iteration are scored in one compiled pass (:class:`~mgmatch.solvers.moves.MoveScorer`:
each move's head pre-activation and rules broken from the players it changes; ~0.5 ms for the
~2 200 moves of a 12v12 pool of 48, where the objective batch and the checker took 1.5–2.5 ms;
a whole iteration now takes ~0.2 ms on the 12v12 preset's ~1 000-move neighbourhoods,
``scripts/tabu-pace.py``), and the move taken is the argmax of the penalized score over the whole
neighbourhood (:func:`~mgmatch.solvers.moves.choose`, compiled). The exact float64
objective is computed only for feasible moves that come near the best, and the checker confirms
the answer at the end (falling back to the best before it, should the two ever disagree), so the
answer is never worse than a feasible start and never breaks a rule. No iteration is started that,
at the measured pace, would end past the deadline.

Measured on the 5v5 example (``examples/5v5``), 20 held-out pools, from MGMatch's polished
answers: the mean gap to the fitted optimum went 4.9% → 3.3% at 20 ms and 3.2% → 1.6% at 1 s by
adding rotations (README, "The fast solver"); see :mod:`mgmatch.solvers.mgmatch` for how the pipeline shares its
time between this stage and SCIP's search of the engagement MIP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem

from .mip import BuildClock
from .moves import choose, neighbourhood, scorer_of
from .polish import MIN_GAIN, RANK_SLACK

#: tabu tenure: a moved player stays tabu for a random number of iterations in this range
TENURE = (4, 8)
#: rotations scored per iteration at most (a seeded random subset beyond: a 12v12 pool of 100
#: candidates has ~22 000). Fewer, faster iterations won once the neighbourhood was compiled: on 120
#: 12v12 pools at 20 ms, 1 500 → 300 took MGMatch from 0.96% to 0.52% (p99 22.0 → 20.0 ms), at 50 ms
#: 0.13% → 0.12%, at 100 ms 0.02% → 0.01% (``mgmatch bench quality --preset 12v12 --methods
#: mgmatch,surrogate --budgets 20,50,100 --count 120``, once with each value); 100–300 measured alike
#: at 20 ms, none at all worse (0.58% on the same pools, surrogate)
ROTATIONS_MAX = 300
#: party exchanges per whole party and other position per iteration (a party with as many players
#: of no party from there; :func:`~mgmatch.solvers.moves.neighbourhood`). On 120 12v12 pools at 20 ms
#: (interleaved solves, the same process): 0 → 8 took MGMatch from 0.61% to 0.47%; 16 measured
#: alike (0.38% against 0.42%, within the noise)
PARTY_DRAWS = 8
#: while the walk has visited no feasible assignment, moves are ranked with the head's proxy
#: (:meth:`~mgmatch.solvers.moves.MoveScorer.head`)
REPAIR_PROXY = True
#: iterations without a new best before the walk restarts from the best
RESTART_AFTER = 25
#: after this many iterations in a row at infeasible (feasible) states, the penalty per broken
#: rule is multiplied (divided) by PENALTY_STEP
STREAK = 3
PENALTY_STEP = 1.5
#: the penalty grows to at most this many times its start (then breaking any rule costs more than
#: any objective difference; beyond, it would only overflow)
PENALTY_MAX = 1e6
#: measured iterations (seconds per candidate cell, candidates × players), shared by the process:
#: no iteration is started whose expected time would end past the deadline (a 12v12 pool of 50
#: scores ~2 000 candidates per iteration, a 5v5 pool of 30 ~1 000)
TABU_ROUNDS = BuildClock()
#: ... times this, for the spread of one iteration's time (the upper quartile alone let the last
#: iteration end 2–3 ms past the deadline on 12v12 pools at 100 ms)
PACE_SAFETY = 1.5


@dataclass
class TabuResult:
    team_of: np.ndarray | None  # None: no feasible assignment was visited (infeasible start)
    objective: float | None
    iterations: int
    improved: bool          # a better assignment than the start was found
    restarts: int
    round_s: float          # the longest iteration seen (seconds)
    last: np.ndarray | None = None  # where the walk stood at the end (a walk given up resumes from there)


def tabu_search(problem: Problem, start: np.ndarray, deadline: float, *, seed: int = 0,
                tenure: tuple[int, int] = TENURE, restart_after: int = RESTART_AFTER,
                round_s: float = 0.0, max_iterations: int | None = None, rotations: bool = True,
                feasible_by: float | None = None) -> TabuResult:
    """Walk from the assignment ``start`` until ``deadline`` (a ``perf_counter()`` instant).

    Args:
        problem: the instance, its rules and engagement model.
        start: an assignment [N] (team per player, −1 bench) that fills every team; when it breaks
            rules, the penalty walks it towards feasible ones (e.g. a rounded prediction).
        deadline: stop before this instant; no iteration is started that would end past it at
            the pace ``round_s`` (seconds per iteration, e.g. an earlier stage's) or the one measured.
        seed: seeds the tenures (the walk is otherwise deterministic).
        max_iterations: stop after this many (None: only the deadline).
        feasible_by: give up at this instant when no feasible assignment was visited by then (a
            rule-breaking start that does not repair in time; None: walk on until the deadline).
    Returns:
        the best feasible assignment visited (``start`` when it is feasible and none beat it) and
        its exact objective; None and None when no feasible assignment was visited.
    """
    rng = np.random.default_rng(seed)
    cur = np.asarray(start, dtype=np.int64).copy()
    start_ok = bool(problem.checker.feasible(cur[None])[0])
    start_obj = problem.objective(cur)
    best, best_obj = (cur.copy(), start_obj) if start_ok else (None, -np.inf)
    units = [np.asarray(m, dtype=np.int64) for m in parties(problem.instance).values()]
    scorer = scorer_of(problem)
    bests: list[tuple[np.ndarray, float]] = []  # earlier bests, in case the checker rejects a later one
    until = np.zeros(cur.size, dtype=np.int64)  # player i is tabu while the iteration < until[i]
    penalty = penalty0 = None  # objective units per broken rule (adaptive; set from the first neighbourhood)
    streak = 0      # > 0: iterations in a row at feasible states, < 0: at infeasible ones
    pace = round_s
    it = since_best = restarts = 0
    while max_iterations is None or it < max_iterations:
        t0 = time.perf_counter()
        if t0 + pace >= deadline or (best is None and feasible_by is not None and t0 + pace >= feasible_by):
            break
        it += 1
        moves = neighbourhood(cur, units, ROTATIONS_MAX if rotations else 0, rng,
                              PARTY_DRAWS if rotations else 0, problem.instance.teams)
        cells = len(moves) * cur.size
        if len(moves) == 0:
            break
        if time.perf_counter() + PACE_SAFETY * TABU_ROUNDS.expected_s(cells) >= deadline:
            if it == 1:
                TABU_ROUNDS.skipped(cells)  # not one iteration fitted at the measured pace
            break
        # no feasible assignment yet: moves rank by the rules they break, the objective only
        # orders near-equals, and its proxy does (the first iteration, which sets the penalty, and
        # every one after a repair use the head itself)
        proxy = REPAIR_PROXY and best is None and penalty is not None
        vals, broken, tabu, excess = scorer.score(cur, moves, until, it, proxy=proxy)
        if penalty is None:
            finite = np.isfinite(vals)
            spread = float(np.ptp(vals[finite])) if finite.any() else 0.0
            penalty = penalty0 = max(spread, 1e-3 * max(1.0, abs(start_obj)))
        # a tabu move counts only when it is feasible and would beat the best (aspiration); a
        # rule-breaking move costs the penalty per broken rule plus per unit of how far outside
        # (so of two moves breaking as many rules, the nearer to feasible ranks higher)
        chosen = choose(vals, broken, tabu, excess, penalty, best_obj + MIN_GAIN)
        if chosen < 0:
            if not until.any():
                break  # no move at all
            until[:] = 0  # every move was tabu: clear the list and go on
            continue
        chosen_ok = bool(broken[chosen] == 0)
        until[moves.players(chosen)] = it + rng.integers(tenure[0], tenure[1] + 1)
        cur = moves.apply(cur, chosen)
        since_best += 1
        if chosen_ok:
            # the exact float64 objective only where the ranking value comes near the best
            if vals[chosen] > best_obj - RANK_SLACK * max(1.0, abs(best_obj)):
                cur_obj = problem.objective(cur)
                if best is None or cur_obj > best_obj + MIN_GAIN:
                    if best is not None:
                        bests.append((best, best_obj))
                    else:  # repaired: the penalty of the search proper from here
                        penalty = penalty0
                    best, best_obj, since_best = cur.copy(), cur_obj, 0
            streak = max(streak, 0) + 1
        else:
            streak = min(streak, 0) - 1
        # strategic oscillation: rules broken for a while cost more, kept for a while cost less
        if streak <= -STREAK:
            penalty = min(penalty * PENALTY_STEP, penalty0 * PENALTY_MAX)
        elif streak >= STREAK:
            penalty /= PENALTY_STEP
        if since_best >= restart_after and best is not None:
            cur, since_best, streak = best.copy(), 0, 0
            until[:] = 0
            restarts += 1
        took = time.perf_counter() - t0
        TABU_ROUNDS.record(took, cells)
        pace = max(pace, took)
    # the checker, the one judge of the rules, confirms the answer (the scorer agrees with it up to
    # float rounding at a bound; then the best before it that it accepts)
    if best is not None and (not start_ok or best_obj > start_obj + MIN_GAIN):
        while best is not None and not problem.checker.feasible(best[None])[0]:
            best, best_obj = bests.pop() if bests else (None, -np.inf)
    if best is None:
        return TabuResult(None, None, it, False, restarts, pace, cur)
    return TabuResult(best, best_obj, it, not start_ok or best_obj > start_obj + MIN_GAIN, restarts, pace, cur)
