"""Predict-and-Search on the TRUE objective: MGMatch's last search stage (after surrogate + polish).

Han et al. (ICLR 2023, "A GNN-Guided Predict-and-Search Framework for Mixed-Integer Linear
Programming"): after the prediction, let the solver search the ORIGINAL problem near it rather
than trusting a rounded or surrogate answer. Here the original problem is the tight big-M
engagement MIP (:meth:`MipModel.add_engagement_objective`). :func:`true_search`

1. turns the surrogate model that was just solved into the engagement MIP (same rule rows, so no
   second build: ``freeTransform``, the engagement network as objective, SCIP settings measured
   for this small model: the ``exact`` preset of :func:`mgmatch.solvers.mip.apply_settings`,
   which the ``scip``/``exact`` baselines use too);
2. warm-starts it with the best polished assignment (the prediction's, after surrogate and
   polish) and sets SCIP's objective limit just below that value, so only strictly better
   assignments are searched for and every node that cannot beat it is cut off;
3. optionally (``fraction`` > 0 and ``delta`` ≥ 0) first searches a trust region around the
   prediction, Σ_{(i,j) ∈ C} |x_ij − round(p_ij)| ≤ Δ over the set C of the ``fraction`` most
   confident x_ij (largest |p_ij − ½|), for at most ``region_share`` of the time, then drops it;
4. solves with the time left; when SCIP finishes the whole MIP the incumbent is proven optimal.

**Measured: the trust region is off by default.** Tuned on 20 instances per preset (seed
2000003, 12v12 at 100 ms, surrogate/polish shares as shipped): the whole MIP from the polished
incumbent reached a mean gap of 0.09%, a trust region first (C = the 50% most confident x_ij,
Δ = 10 or 6, 30% of the search time) 0.22% / 0.25%, or 0.11–0.29% when kept until proven.
The 12v12 predictors are wrong on ~9 of the ~45 most confident x_ij, so a region tight enough to
speed SCIP up excludes the optimum, and dropping it restarts the tree; the model is small enough
(~150 variables) that SCIP, given a cutoff, does better on all of it. On 3v3 both reach 0.00% at
50 ms, the whole MIP sooner (mean 25 vs 31 ms). Local branching around the incumbent (radius 8 or
16 flips) was no better either (0.90% / 0.80% at 12v12 50 ms vs 0.76% without).

The assignments read back are checker-verified (:meth:`MipModel.solve` returns only checked
ones); the caller keeps the best of them and its own incumbent, so the stage never makes an
answer worse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from pyscipopt import quicksum

from mgmatch.core.problem import Problem

from .mip import BuildInterrupted, MipModel, apply_settings

#: trust region around the prediction (see the module docstring): share of the x variables in it
#: (the most confidently predicted ones); 0 = no trust region, the whole MIP (measured best)
TR_FRACTION = 0.0
#: trust-region radius: flips (x_ij ≠ round(p_ij)) allowed among those; a player moved between
#: two teams is 2 flips, a bench swap 2
TR_DELTA = 10.0
#: at most this share of the search time goes to the trust region; then it is dropped
TR_SHARE = 0.3
#: the objective limit sits this much (relative) below the incumbent's value, so the incumbent's
#: own value (SCIP's arithmetic vs numpy's) is never mistaken for an improvement nor pruned away
CUTOFF_TOL = 1e-9


@dataclass
class SearchResult:
    """Best assignment of the stage (None when SCIP found none better than the incumbent)."""

    team_of: np.ndarray | None
    objective: float | None
    proven_optimal: bool  # SCIP proved optimality on the whole engagement MIP (no trust region)
    solves: int
    stats: dict = field(default_factory=dict)


def trust_region(mip: MipModel, p: np.ndarray, fraction: float, delta: float):
    """Add Σ_{(i,j) ∈ C} |x_ij − round(p_ij)| ≤ delta over the ``fraction`` most confident x_ij.

    Returns the constraint (its right-hand side can be raised later), or None for an empty C.
    """
    N, D = mip.x.shape
    conf = np.abs(p - 0.5).reshape(-1)
    k = int(round(fraction * conf.size))
    if k <= 0:
        return None
    chosen = np.argsort(-conf, kind="stable")[:k]
    terms = []
    for f in chosen.tolist():
        i, j = divmod(f, D)
        terms.append(1 - mip.x[i, j] if p[i, j] >= 0.5 else mip.x[i, j])
    return mip.model.addCons(quicksum(terms) <= float(delta), name="trust_region")


def true_search(problem: Problem, mip: MipModel, p: np.ndarray, incumbent: np.ndarray, inc_obj: float,
                stop: float, fraction: float = TR_FRACTION, delta: float = TR_DELTA,
                margin_s: float = 0.004, min_solve_s: float = 0.003, region_share: float = TR_SHARE) -> SearchResult:
    """Search the engagement MIP around the prediction until ``stop`` (a perf_counter value).

    Args:
        mip: the surrogate model, already solved (it is turned into the engagement MIP here).
        p: the prediction [N, D].
        incumbent: the best feasible assignment so far (warm start, objective limit ``inc_obj``).
        stop: no SCIP solve runs past this; SCIP's own limit is ``margin_s`` earlier (it checks
            its clock between nodes and overshoots a little).
        fraction, delta: the trust region (fraction ≤ 0 or delta < 0: none, the whole MIP).
    """
    if mip.reused:
        raise ValueError("true_search needs a model built with reuse=False (it transforms it back)")
    stats: dict = {}
    t0 = time.perf_counter()
    m = mip.model
    m.freeTransform()
    try:
        mip.add_engagement_objective(problem, deadline=stop - margin_s)
    except BuildInterrupted:  # no time left to search: the caller keeps its incumbent
        stats.update(search_build_ms=round((time.perf_counter() - t0) * 1e3, 3), search_solves=0,
                     search_status=["build_interrupted"], search_proven_optimal=False)
        return SearchResult(None, None, False, 0, stats)
    apply_settings(mip.model, "exact")  # the preset the exact baselines use too
    tr = trust_region(mip, p, fraction, delta) if fraction > 0 and delta >= 0 else None
    if mip.warm_start(incumbent):
        stats["search_warm_start"] = True
    m.setObjlimit(inc_obj - CUTOFF_TOL * max(1.0, abs(inc_obj)))
    stats["search_build_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    best, best_obj, proven, solves = None, inc_obj, False, 0
    statuses = []
    over = None
    region_s = (stop - time.perf_counter()) * region_share
    while True:
        seconds = stop - time.perf_counter() - margin_s
        if seconds < min_solve_s:
            break
        if tr is not None:
            seconds = max(min_solve_s, min(seconds, region_s))
        mip.set_time_limit(seconds)
        t_solve = time.perf_counter()
        res = mip.solve()
        if res.status == "timelimit":  # how far past its limit SCIP stopped (it checks between LP solves)
            over = max(over or 0.0, time.perf_counter() - t_solve - seconds)
        solves += 1
        statuses.append(res.status)
        if res.team_of is not None:
            obj = problem.objective(res.team_of)
            if obj > best_obj:
                best, best_obj = res.team_of, obj
        # "infeasible" under the objective limit = nothing better than the incumbent in the region
        done = res.status in ("optimal", "infeasible")
        if tr is None:
            proven = done
            break
        if not done and res.status != "timelimit":
            break
        m.freeTransform()
        m.delCons(tr)
        tr = None
    stats.update(search_ms=round((time.perf_counter() - t0) * 1e3, 3), search_solves=solves,
                 search_status=statuses, search_proven_optimal=proven)
    if over is not None:
        stats["search_overshoot_ms"] = round(over * 1e3, 3)
    return SearchResult(best, None if best is None else best_obj, proven, solves, stats)
