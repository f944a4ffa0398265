"""Exact methods: ``scip`` (big-M MIP), ``enumerate`` (exhaustive search) and ``exact`` (picks one).

All three maximize the true engagement network under every rule and return ``optimal`` with a
proof, ``infeasible`` with a proof, or — when the budget runs out — the best checked assignment
found as ``feasible`` (with SCIP's dual bound as ``bound``) or ``no_solution``.
"""

from __future__ import annotations

import time

import numpy as np
from pyscipopt import SCIP_PARAMSETTING

from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .enumerate import best_assignment, count_assignments
from .interface import Budget, register
from .mip import ENGAGEMENT_BUILDS, BuildClock, BuildInterrupted, MipModel, released
from .policy import hidden_neurons, record_enumeration, scip_estimate_s

#: ``exact`` enumerates when an instance has at most this many assignments, else runs SCIP.
#: Measured on 30 3v3 preset instances (seed 2, quiet machine, current ``exact`` SCIP preset,
#: build included; ad-hoc script): enumeration ~1 µs per assignment plus ~1 ms (14 300 → 9 ms,
#: 28 380 → 29 ms, 47 320 → 45 ms, 156 800 → 120 ms), SCIP 8–51 ms, median ~20 ms. Enumeration
#: won on every instance below 20 000 assignments but one 401 ms outlier (a stall at 1 860),
#: and lost on 4 of the 6 from 20 240 up. (Against the slower former preset it was ~50 000.)
ENUMERATE_MAX_ASSIGNMENTS = 25_000

#: Seconds of a time-limited budget kept back from SCIP for reading, checking and reporting the
#: answer (p99 of the 100 ms runs overshot by 6–8 ms without it) and for the node SCIP is in when
#: its clock runs out: with at most 5% (8 ms) kept, p99 was 105.6–106.2 ms at 100 ms on pools of
#: 60–100 candidates, over the budget + 5 ms; so at most 10% (12 ms)
SOLVE_MARGIN_S = 0.012
SOLVE_MARGIN_SHARE = 0.10
#: SCIP is not started with less time left than this many times the build took
MIN_SOLVE_PER_BUILD = 0.5
#: where the runtime predictor (:func:`~mgmatch.solvers.policy.scip_estimate_s`) expects no proof
#: within the time left, SCIP's primal heuristics run at their default settings instead of the
#: ``exact`` preset's fast ones (tuned for proofs): see :meth:`ScipSolver._solve`
PRIMAL_HEURISTICS = True
#: ... only with at least this many seconds left after the build. With less, the default heuristics'
#: root often ended without an incumbent and SCIP overran its limit further (interleaved against the
#: fast heuristics, 2026-11-27: 12v12-deep at 50 ms, ~25 ms left, answered 5–25% of pools against
#: 25–40%; 3v3 at 10 ms 98% answered against 100%, at 20 ms p99 25.6 ms, past the budget + 5 ms)
PRIMAL_MIN_LEFT_S = 0.03


@register("scip", "big-M MIP of the engagement network solved by SCIP (optimal, or best found within the time limit)")
class ScipSolver:
    """SCIP on the big-M MIP. ``last_stats`` holds the model sizes and SCIP's result of the last solve."""

    name = "scip"

    def __init__(self, settings: str = "exact", **_ignored) -> None:
        self.settings = settings
        self.last_stats: dict = {}

    def solve(self, problem: Problem, budget: Budget, method: str | None = None,
              start: np.ndarray | None = None) -> Solution:
        """``start``: a team_of [N] SCIP starts from (:meth:`MipModel.warm_start`), e.g. a heuristic's answer."""
        with released():  # its SCIP instance serves the next solve's build
            return self._solve(problem, budget, method or self.name, start)

    def _solve(self, problem: Problem, budget: Budget, method: str, start: np.ndarray | None = None) -> Solution:
        sol = self._scip(problem, budget, method, start)
        if start is None or sol.status in ("optimal", "infeasible"):
            return sol
        # a start SCIP did not reach (no time to build, or cut off before it read the hint) or did not beat is
        # still the answer: a solve started from a feasible answer never ends below it
        start = np.asarray(start)
        if (start >= 0).sum() != sum(problem.instance.sizes) or problem.checker.violations(start):
            return sol
        value = problem.objective(start)
        if sol.has_assignment and sol.objective is not None and sol.objective >= value - 1e-9:
            return sol
        return problem.solution(start, "feasible", method, budget.elapsed_ms(), bound=sol.bound)

    def _scip(self, problem: Problem, budget: Budget, method: str, start: np.ndarray | None = None) -> Solution:
        t0 = time.perf_counter()
        # the budget counts building: a build that cannot fit is not started (measured build
        # times, ENGAGEMENT_BUILDS), one that runs past the deadline is abandoned, and SCIP's own
        # (wall-clock) limit is what is left after building
        size = BuildClock.size(problem.compiled)
        left = budget.remaining()
        if left is not None and ENGAGEMENT_BUILDS.expected_s(size) > left:
            ENGAGEMENT_BUILDS.skipped(size)
            self.last_stats = {"status": "no_time", "build_s": 0.0, "time_limit_s": None,
                               "expected_build_s": ENGAGEMENT_BUILDS.expected_s(size)}
            return problem.solution(None, "no_solution", method, budget.elapsed_ms())
        try:
            mip = MipModel.build(problem.compiled, checker=problem.checker, settings=self.settings,
                                 deadline=budget.deadline(), reuse=True)
            mip.add_engagement_objective(problem, deadline=budget.deadline())
        except BuildInterrupted:
            self.last_stats = {"status": "no_time", "build_s": time.perf_counter() - t0, "time_limit_s": None}
            return problem.solution(None, "no_solution", method, budget.elapsed_ms())
        build_s = time.perf_counter() - t0
        ENGAGEMENT_BUILDS.record(build_s, size)
        left = budget.remaining()
        if left is not None and left < MIN_SOLVE_PER_BUILD * build_s:
            # too little left for SCIP's presolve and root LP on a model this size: it would
            # overrun (12v12-deep at 50 ms: ~40 ms builds, then 5–10 ms past the budget)
            self.last_stats = dict(mip.stats, status="no_time", build_s=build_s, time_limit_s=None)
            return problem.solution(None, "no_solution", method, budget.elapsed_ms())
        primal = (PRIMAL_HEURISTICS and self.settings == "exact" and left is not None
                  and left >= PRIMAL_MIN_LEFT_S
                  and scip_estimate_s(problem.instance.n, sum(problem.instance.sizes), hidden_neurons(problem)) > left)
        if primal:
            # no proof expected in time: the best incumbent is the answer, and the fast heuristics
            # kept SCIP on its first one (12v12-deep, 6 pools: the same 18.49 mean at 100 ms and at
            # 1 s; with the default heuristics 18.88 and 19.35)
            mip.model.setHeuristics(SCIP_PARAMSETTING.DEFAULT)
        if start is not None:  # after the heuristics preset, which would reset the hint's completesol settings
            mip.warm_start(start)
        # keep a little of the budget for reading the solution and checking it
        limit = None if left is None else max(1e-3, left - min(SOLVE_MARGIN_S, SOLVE_MARGIN_SHARE * left))
        mip.set_time_limit(limit)
        res = mip.solve()
        self.last_stats = dict(mip.stats, status=res.status, nodes=res.nodes, scip_time_s=res.time_s,
                               binaries=int(mip.model.getNBinVars()), build_s=build_s, time_limit_s=limit,
                               primal_heuristics=primal)
        ms = budget.elapsed_ms()
        if res.status == "infeasible":
            return problem.solution(None, "infeasible", method, ms)
        if res.team_of is None:
            return problem.solution(None, "no_solution", method, ms, bound=res.bound)
        if res.optimal:
            return problem.solution(res.team_of, "optimal", method, ms)
        return problem.solution(res.team_of, "feasible", method, ms, bound=res.bound)


@register("enumerate", "exhaustive vectorized search over every team formation (small instances)")
class EnumerateSolver:
    """Every assignment checked and scored in numpy batches."""

    name = "enumerate"

    def __init__(self, **_ignored) -> None:
        self.last_stats: dict = {}

    def solve(self, problem: Problem, budget: Budget, method: str | None = None) -> Solution:
        method = method or self.name
        t0 = time.perf_counter()
        res = best_assignment(problem, budget.deadline())
        record_enumeration(time.perf_counter() - t0, res.examined)
        self.last_stats = {"examined": res.examined, "feasible": res.feasible, "complete": res.complete}
        ms = budget.elapsed_ms()
        if res.complete:
            if res.team_of is None:
                return problem.solution(None, "infeasible", method, ms)
            return problem.solution(res.team_of, "optimal", method, ms)
        if res.team_of is None:
            return problem.solution(None, "no_solution", method, ms)
        return problem.solution(res.team_of, "feasible", method, ms)


@register("exact", "optimal engagement: enumeration on tiny instances, else the big-M MIP by SCIP")
class ExactSolver:
    """Enumerates when the instance has at most :data:`ENUMERATE_MAX_ASSIGNMENTS`, else SCIP."""

    name = "exact"

    def __init__(self, enumerate_max: int = ENUMERATE_MAX_ASSIGNMENTS, **options) -> None:
        self.enumerate_max = enumerate_max
        self.scip = ScipSolver(**options)
        self.enum = EnumerateSolver()
        self.last_engine: str | None = None

    def engine(self, problem: Problem) -> str:
        return "enumerate" if count_assignments(problem) <= self.enumerate_max else "scip"

    def solve(self, problem: Problem, budget: Budget, start: np.ndarray | None = None) -> Solution:
        """``start``: a team_of [N] SCIP starts from (enumeration needs none)."""
        self.last_engine = self.engine(problem)
        if self.last_engine == "enumerate":
            return self.enum.solve(problem, budget, method=self.name)
        return self.scip.solve(problem, budget, method=self.name, start=start)
