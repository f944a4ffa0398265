"""The local searches MGMatch runs on the true objective, paced by what its history measured.

:class:`LocalSearchSteps` is the part of :class:`~mgmatch.solvers.mgmatch.MGMatchSolver` that every
path uses: polishing (:mod:`mgmatch.solvers.polish`, best-improvement swaps), tabu search
(:mod:`mgmatch.solvers.tabu`, through worse and rule-breaking neighbours) or, where the team patterns
are few, the selection search (:mod:`mgmatch.solvers.selection`), and the rule for how much of the time
left tabu search takes. Each records its pace in the solver's
:class:`~mgmatch.solvers.mgmatch.history.SolveHistory`, so no round is started that could not finish.
"""

from __future__ import annotations

import time

import numpy as np

from mgmatch.core.problem import Problem

from ..policy import Choice
from ..polish import PolishResult, polish
from ..selection import applicable as selection_applicable
from ..selection import selection_search
from ..tabu import TabuResult, tabu_search
from .history import SolveHistory
from .tuning import TABU_SCIP_RATIO, TABU_SHARE


class LocalSearchSteps:
    """Polish, tabu and selection search for :class:`~mgmatch.solvers.mgmatch.MGMatchSolver` (which sets
    the attributes read here: ``history``, ``seed``, ``selection``, ``tabu_share``, ``last_choice``)."""

    history: SolveHistory
    seed: int
    selection: bool
    tabu_share: float | None
    last_choice: Choice | None

    def _polish(self, problem: Problem, team_of: np.ndarray, deadline: float, pace: float = 0.0) -> PolishResult:
        """:func:`polish` paced by the measured rounds (the history's ``polish_rounds``) and recording them."""
        size = problem.instance.n ** 2
        res = polish(problem, team_of, deadline=deadline, round_s=max(pace, self.history.polish_rounds.expected_s(size)))
        if res.measured_round_s > 0:
            self.history.polish_rounds.record(res.measured_round_s, size)
        elif not res.local_optimum:
            self.history.polish_rounds.skipped(size)  # no round fitted at the measured pace
        return res

    def _tabu_share(self, left_s: float | None, key: tuple | None = None) -> float:
        """The tabu stage's share of the time left: the given one, or by the measured rule
        (:data:`TABU_SCIP_RATIO`) from the policy's SCIP estimate, or from how often SCIP's search
        helped lately (:data:`SEARCH_HIT_RATE`, ``key`` from :func:`_search_key`); ``left_s`` None:
        no SCIP search follows, tabu search may take all the time."""
        if self.tabu_share is not None:
            return self.tabu_share
        if left_s is None:
            return 1.0
        if self.history.not_paying(key):
            # SCIP's search has not been paying: tabu search takes all the time, except that one
            # solve in self.history.search_probe_gap still searches (after tabu), to notice when it pays again
            return TABU_SHARE if self.history.probe_due(key) else 1.0
        est = self.last_choice.scip_estimate_s if self.last_choice is not None else 0.0
        return TABU_SHARE if est > TABU_SCIP_RATIO * left_s else 0.0

    def _tabu(self, problem: Problem, best: np.ndarray, best_obj: float, stop: float, pace: float,
              stats: dict) -> tuple[np.ndarray, float]:
        """The anytime local search from ``best`` until ``stop``; the better of the two.

        Selection search (:mod:`mgmatch.solvers.selection`: who plays, every team split scored)
        where it applies (benched candidates, few team patterns; ``stats["selection_*"]``), else
        tabu search on assignments (``stats["tabu_*"]``)."""
        t0 = time.perf_counter()
        if t0 + pace >= stop:
            self.history.polish_rounds.skipped(problem.instance.n ** 2)  # the pace given is polishing's
            return best, best_obj
        if self.selection and selection_applicable(problem):
            sel = selection_search(problem, best, stop, seed=self.seed)
            _add(stats, selection_ms=round((time.perf_counter() - t0) * 1e3, 3), selection_iterations=sel.iterations,
                 selection_restarts=sel.restarts)
            stats["selection_improved"] = stats.get("selection_improved", False) or sel.improved
            return (sel.team_of, sel.objective) if sel.objective > best_obj else (best, best_obj)
        res = self._tabu_run(problem, best, stop, pace, stats)
        if res.objective > best_obj:
            return res.team_of, res.objective
        return best, best_obj

    def _tabu_run(self, problem: Problem, start: np.ndarray, stop: float, pace: float, stats: dict,
                  feasible_by: float | None = None) -> TabuResult:
        """:func:`tabu_search`, its time and iterations added to ``stats`` and its pace remembered."""
        t0 = time.perf_counter()
        res = tabu_search(problem, start, stop, seed=self.seed, round_s=pace, feasible_by=feasible_by)
        took = time.perf_counter() - t0
        _add(stats, tabu_ms=round(took * 1e3, 3), tabu_iterations=res.iterations, tabu_restarts=res.restarts)
        stats["tabu_improved"] = stats.get("tabu_improved", False) or res.improved
        self.history.record_tabu(problem, took, res.iterations)
        return res


def _add(stats: dict, **values) -> None:
    """Add to counters in ``stats`` (a stage that runs twice in one solve reports both runs)."""
    for k, v in values.items():
        stats[k] = round(stats.get(k, 0) + v, 3)
