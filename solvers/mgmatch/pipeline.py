"""MGMatch's pipeline path (paper §4.3), one method per step, for pools the policy does not enumerate or
hand to SCIP at once (:mod:`mgmatch.solvers.policy`).

After the prediction P and its rounding (:mod:`~mgmatch.solvers.mgmatch.prediction`):

1. **Plan the search** (:meth:`PipelineSteps._plan_search`): from the history, whether SCIP's search of
   the engagement MIP (step 5) will run in this solve. It does not while it has not been paying (but for
   a probe now and then, and no probe where repair first applies: :func:`_too_tight_to_probe`), nor
   where its measured builds or the measured surrogate stage leave it no time
   (``stats["search_skipped"]`` says why).
2. **Repair first** (:meth:`PipelineSteps._repair_first`): where the search will not run and the
   surrogate stage would leave tabu search fewer than :data:`REPAIR_MAX_ITERATIONS` iterations, the
   surrogate MIP would be there only for a feasible start; tabu search walks the party-whole rounding
   to one instead (its penalty measures how far outside each broken rule it is) and on with all the
   time. The surrogate MIP gets the rest only when nothing is feasible by :data:`REPAIR_SHARE` of it,
   and repair first is tried only while recent tries succeeded (retried now and then).
   ``stats["repair_first"]``: ``repaired`` or ``failed``; ``stats["repair_skipped"]``: why it was not
   tried (``unmeasured``, ``iterations``, ``success_rate``).
3. **Surrogate MIP** (Eq. 20–21, :meth:`PipelineSteps._surrogate_stage`): max Σ p_ij x_ij over the same
   compiled rules (:class:`~mgmatch.solvers.mip.MipModel`, ``fast`` preset), time-limited to
   :data:`SURROGATE_SHARE` of the time left (at least :data:`SURROGATE_MIN_S`; all of it while nothing
   feasible is known). Same feasible region as the real problem, so its proof of infeasibility is one
   for the instance. A build that cannot fit is not started; one that runs past the deadline is
   abandoned.
4. **Polish** (:meth:`PipelineSteps._polish_stage`) the starts best first for at most
   :data:`POLISH_SHARE` of the time left, then **tabu search** (:meth:`PipelineSteps._tabu_stage`, first
   from the roundings of the other host regions: :meth:`PipelineSteps._region_probes`) for its share
   (:meth:`~mgmatch.solvers.mgmatch.local.LocalSearchSteps._tabu_share`); without time for any MIP,
   polish and tabu search get all of it.
5. **Search the true MIP** (:meth:`PipelineSteps._search_stage`, :mod:`mgmatch.solvers.pas`): the
   surrogate model becomes the tight big-M engagement MIP (no second build), warm-started with the best
   assignment and cut off at its value, with the rest of the budget (:data:`FINAL_POLISH_SHARE` kept
   back to polish what it finds unless SCIP proves it optimal). It finds better assignments in the
   same time than re-solving the surrogate with no-good cuts would.

**Selection search instead, where the team patterns are few** (:mod:`mgmatch.solvers.selection`: benched
candidates and at most 2 048 ways to split the selected players): the predicted players' best split or
the feasible rounding is the start, and the selection search gets all the time; the surrogate MIP runs
only when neither is feasible, and selections drawn from the prediction only when it finds nothing
either (``stats["selection_start"]``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from ..interface import Budget
from ..mip import BuildClock, BuildInterrupted, MipModel
from ..pas import true_search
from ..selection import applicable as selection_applicable
from ..selection import start_from_scores
from .history import SolveHistory, repair_key, search_key
from .local import LocalSearchSteps
from .prediction import favour, near_players, party_units, region_admits, round_prediction
from .tuning import (
    FINAL_POLISH_SHARE,
    FINISH_RESERVE_S,
    FIRST_MARGIN_S,
    REGION_PROBE_EACH_S,
    REGION_PROBE_MIN_S,
    REGION_PROBE_SHARE,
    REGION_PROBES,
    REPAIR_KEEP,
    REPAIR_MAX_ITERATIONS,
    REPAIR_MIN_RATE,
    REPAIR_MIN_SEEN,
    REPAIR_RETRY_EVERY,
    REPAIR_RETRY_MAX,
    REPAIR_SHARE,
    SCIP_MARGIN_S,
    SEARCH_BUILD_SHARE,
    SEARCH_MIN_S,
    SURROGATE_MIN_S,
    TABU_SHARE,
)


class PipelineSteps(LocalSearchSteps):
    """The pipeline path of :class:`~mgmatch.solvers.mgmatch.MGMatchSolver` (which sets the options read
    here; see its docstring)."""

    name: str
    use_polish: bool
    search: bool
    warm_start: bool
    repair_first: bool
    polish_share: float
    surrogate_share: float
    tr_fraction: float
    tr_delta: float

    def _pipeline(self, problem: Problem, budget: Budget, p: np.ndarray, rounded: np.ndarray, starts: dict,
                  stats: dict, answer) -> Solution:
        """Surrogate MIP → polish → tabu search → search of the engagement MIP (the module docstring's
        steps 3–5), each step a method; ``starts`` collects the feasible assignments found so far."""
        stop = budget.deadline() - FINISH_RESERVE_S
        selecting = self.selection and self.use_polish and selection_applicable(problem)
        if selecting:
            done = self._selection_first(problem, p, starts, stop, stats, answer)
            if done is not None:
                return done
        plan = _SearchPlan(search_key(problem, budget, self.name))
        if self.search and self.use_polish and self.tabu_share is None and not selecting:
            self._plan_search(problem, budget, plan)
            if plan.skip is not None and self.repair_first:
                done = self._repair_instead(problem, budget, rounded, starts, stats, answer, plan)
                if done is not None:
                    return done
        # a model the search may turn into the engagement MIP needs a new SCIP instance
        searchless = not (self.search and self.use_polish) or selecting or plan.skip is not None
        mip, done = self._surrogate_stage(problem, budget, p, starts, stats, answer, searchless, selecting)
        if done is not None:
            return done
        if selecting:
            return self._selection_answer(problem, p, starts, stop, stats, answer)
        if not starts:
            return answer(None, "no_solution")
        cands, vals, order = _ranked(problem, starts)
        stats["surrogate_objective"] = vals[order[0]]
        if not self.use_polish:
            return answer(cands[order[0]], "feasible")
        searching = self.search and mip is not None
        best, best_obj, pace = self._polish_stage(problem, budget, cands, vals, order, stop, searching, stats)
        if not searching:
            return answer(best, "feasible")
        best, best_obj, go_on = self._tabu_stage(problem, budget, p, mip, plan, best, best_obj, stop, pace, stats)
        if not go_on:
            return answer(best, "feasible")
        return self._search_stage(problem, budget, p, mip, plan, best, best_obj, stop, pace, stats, answer)

    def _selection_first(self, problem: Problem, p: np.ndarray, starts: dict, stop: float, stats: dict,
                         answer) -> Solution | None:
        """Few team patterns and benched candidates: the predicted players, best split, are the start of
        a selection search with all the time (None: they and the rounding have no feasible split, and
        the surrogate MIP looks for a start)."""
        t1 = time.perf_counter()
        start = start_from_scores(problem, p.sum(axis=1), samples=0)
        stats["selection_start_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        if start is not None:
            starts.setdefault(start.tobytes(), start)
        if not starts:
            return None
        # the predicted players' best split, or the rounding when that is better
        stats["selection_start"] = "prediction" if start is not None else "rounding"
        best = max(starts.values(), key=problem.objective)
        best, _ = self._tabu(problem, best, problem.objective(best), stop, 0.0, stats)
        return answer(best, "feasible")

    def _plan_search(self, problem: Problem, budget: Budget, plan: _SearchPlan) -> None:
        """Whether SCIP's search of the engagement MIP will run in this solve, from the history: not
        while it has not been paying (but for a probe now and then), nor where its measured builds or
        the measured surrogate stage leave it no time (``plan.skip`` says why)."""
        history, key = self.history, plan.key
        deadline = budget.deadline()
        if history.not_paying(key):
            plan.probe = history.probe_due(key)
            plan.skip = None if plan.probe else "not_paying"
            if plan.probe and self.repair_first and _too_tight_to_probe(history, problem, budget, self.name):
                plan.probe, plan.skip = None, "too_tight_to_probe"
        slowest = history.slowest_search_build(key[0])
        stage = history.stage_s(problem, budget, self.name) or 0.0
        after = (deadline - time.perf_counter() - stage) * (1.0 - self.polish_share)
        if plan.skip is None and not plan.probe and slowest is not None and slowest > SEARCH_BUILD_SHARE * after:
            plan.skip = "build_too_slow"
        # the fastest recent stage decides whether the search and the fallback of a failed repair can have
        # any time at all (one slow stage must not decide it for good: a solve that repairs first records
        # no stage)
        plan.fastest_stage = history.fastest_stage(problem, budget, self.name, SURROGATE_MIN_S)
        plan.left = deadline - FINISH_RESERVE_S - time.perf_counter()
        if (plan.skip is None and not plan.probe and plan.fastest_stage > 0.0
                and (plan.left - plan.fastest_stage) * (1.0 - self.polish_share) < SEARCH_MIN_S):
            plan.skip = "no_time"

    def _repair_instead(self, problem: Problem, budget: Budget, rounded: np.ndarray, starts: dict, stats: dict,
                        answer, plan: _SearchPlan) -> Solution | None:
        """The search will not run, so the surrogate MIP is there only for a feasible start: repair first
        (:meth:`_repair_first`) walks the rounding to one instead, and on with all the time."""
        # no fallback: the surrogate stage does not fit what a failed repair would leave it
        alone = plan.fastest_stage >= (1.0 - REPAIR_SHARE) * plan.left
        done = self._repair_first(problem, budget, rounded, starts, stats, answer, alone=alone)
        if done is not None:
            stats["search_skipped"] = plan.skip
            if plan.skip == "build_too_slow":
                self.history.forget_oldest_build(plan.key[0])
        return done

    def _surrogate_stage(self, problem: Problem, budget: Budget, p: np.ndarray, starts: dict, stats: dict, answer,
                         searchless: bool, selecting: bool) -> tuple[MipModel | None, Solution | None]:
        """The surrogate MIP (Eq. 20–21) with its share of the time left (at least SURROGATE_MIN_S; all of
        it while nothing feasible is known); its solution pool joins ``starts``. Returns the model (None:
        not built or not solved) and the answer where the stage ends the solve (no time to build it, or
        the rules proved infeasible). Its time, or its miss, is recorded in the history."""
        stop = budget.deadline() - FINISH_RESERVE_S
        t1 = time.perf_counter()
        mip = None
        if stop - time.perf_counter() > SCIP_MARGIN_S:
            size = BuildClock.size(problem.compiled)
            try:
                # a build measured as too slow is not started when there is an answer to polish instead;
                # without one it is tried anyway (abandoned at the deadline, so never late), since build
                # times vary with what ran just before
                if starts and self.history.surrogate_builds.expected_s(size) > stop - time.perf_counter():
                    self.history.surrogate_builds.skipped(size)
                    t1 = None  # not started: no stage to record
                    raise BuildInterrupted("no time to build the surrogate MIP (measured build times)")
                mip = MipModel.build(problem.compiled, checker=problem.checker, fast=True, deadline=stop,
                                     reuse=searchless)
                self.history.surrogate_builds.record(time.perf_counter() - t1, size)
            except BuildInterrupted:
                stats["surrogate_status"] = "build_interrupted"
                if t1 is None:
                    stats["surrogate_ms"] = 0.0
                else:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    # started and did not fit: a miss, as long as all the time it had (else a budget where
                    # it never fits never has a measured stage, and repair first is never tried there)
                    self.history.record_stage(self.history.stage_misses, problem, budget,
                                              max(stop, time.perf_counter()) - t1, self.name)
                if selecting:
                    return None, self._selection_answer(problem, p, starts, stop, stats, answer)
                return None, self._polish_only(problem, stop, starts, stats, answer)
            mip.set_linear_objective(p)
            if self.warm_start and starts:
                mip.warm_start(next(iter(starts.values())))
            room = stop - time.perf_counter() - SCIP_MARGIN_S
            surrogate_s = min(room, max(room * self.surrogate_share, SURROGATE_MIN_S))
            if surrogate_s > 0:
                res = self._solve_surrogate(problem, mip, starts, room, surrogate_s, stop)
                stats["surrogate_status"] = res.status
                if res.status == "infeasible" and res.team_of is None and not starts:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    return mip, answer(None, "infeasible")
                for t in _pool(mip, problem, res.team_of):
                    starts.setdefault(t.tobytes(), t)
            else:  # built, but no time left to solve it: a miss (as above)
                mip = None
                self.history.record_stage(self.history.stage_misses, problem, budget,
                                          max(stop, time.perf_counter()) - t1, self.name)
        stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        if mip is not None:
            self.history.record_stage(self.history.surrogate_times, problem, budget, time.perf_counter() - t1,
                                      self.name)
        return mip, None

    def _solve_surrogate(self, problem: Problem, mip: MipModel, starts: dict, room: float, surrogate_s: float,
                         stop: float):
        """SCIP on the built surrogate MIP. With a start to polish, for the surrogate's share; with none, a
        first feasible assignment depth first, with all the time if need be (stopping as early as SCIP
        lately overran its limit on pools of the size), then SCIP's own search for the share."""
        if starts:
            mip.set_time_limit(surrogate_s)
            return mip.solve()
        history, n = self.history, problem.instance.n
        limit = room + SCIP_MARGIN_S - history.overshoot_margin(history.first_overshoot, n, FIRST_MARGIN_S)
        res = mip.solve_first(limit)
        if res.status == "timelimit":
            history.record_overshoot(history.first_overshoot, n, res.time_s - limit)
        more = stop - time.perf_counter() - SCIP_MARGIN_S
        if res.status == "sollimit" and more > 2 * SURROGATE_MIN_S:
            # (with less left, polishing the first solution on the true objective pays more)
            mip.set_time_limit(mip.model.getSolvingTime() + max(more * self.surrogate_share, SURROGATE_MIN_S))
            first, res = res, mip.solve()
            if res.team_of is None:
                res = first
        return res

    def _polish_stage(self, problem: Problem, budget: Budget, cands: list[np.ndarray], vals: list[float],
                      order: np.ndarray, stop: float, searching: bool, stats: dict) -> tuple[np.ndarray, float, float]:
        """The starts (``cands``, their objectives ``vals``, best first in ``order``) polished in that
        order, with at most the polishing share of the time left when the true search follows (all of it
        otherwise); no round is started that the measured pace says cannot finish. Returns the best assignment, its objective and the polish pace (seconds per round)."""
        best, best_obj = cands[order[0]], vals[order[0]]
        t2 = time.perf_counter()
        polish_stop = min(budget.share(self.polish_share).deadline(), stop) if searching else stop
        size = problem.instance.n ** 2
        pace = self.history.polish_rounds.expected_s(size)  # seconds per polish round
        polished, moves = 0, 0
        for k in order:
            if time.perf_counter() + pace >= polish_stop:
                if not polished:
                    self.history.polish_rounds.skipped(size)
                break
            res_p = self._polish(problem, cands[k], polish_stop, pace)
            pace = max(pace, res_p.round_s)
            polished += 1
            moves += res_p.rounds
            if res_p.objective > best_obj:
                best, best_obj = res_p.team_of, res_p.objective
        stats.update(polish_ms=round((time.perf_counter() - t2) * 1e3, 3), polish_starts=polished,
                     polish_moves=moves, polished_objective=best_obj)
        return best, best_obj, pace

    def _tabu_stage(self, problem: Problem, budget: Budget, p: np.ndarray, mip: MipModel, plan: _SearchPlan,
                    best: np.ndarray, best_obj: float, stop: float, pace: float,
                    stats: dict) -> tuple[np.ndarray, float, bool]:
        """Tabu search (after the region probes) walks on from the local optimum with its share of the time
        left: all of it where the search will not run. Returns the best, its objective and whether SCIP's
        search follows."""
        if mip.reused:  # predicted not to search (it cannot: see MipModel.build)
            share = 1.0
        elif plan.probe is None:
            share = self._tabu_share(budget.remaining(), plan.key)
        else:
            share = TABU_SHARE if plan.probe else 1.0
        if share > 0:
            tabu_stop = min(budget.share(share).deadline(), stop)
            best, best_obj = self._region_probes(problem, p, best, best_obj, tabu_stop, pace, stats)
            best, best_obj = self._tabu(problem, best, best_obj, tabu_stop, pace, stats)
        if share >= 1.0 and (self.tabu_share is None or mip.reused):
            stats["search_skipped"] = plan.skip or "not_paying"
            if plan.skip == "build_too_slow":
                self.history.forget_oldest_build(plan.key[0])
            return best, best_obj, False
        return best, best_obj, True

    def _search_stage(self, problem: Problem, budget: Budget, p: np.ndarray, mip: MipModel, plan: _SearchPlan,
                      best: np.ndarray, best_obj: float, stop: float, pace: float, stats: dict, answer) -> Solution:
        """Predict-and-Search on the true objective from the best assignment so far, time kept back to
        polish what it finds unless it proves the optimum. Where building the engagement objective would
        take most of what is left (its measured builds for this model), tabu search goes on instead."""
        history, key = self.history, plan.key
        t3 = time.perf_counter()
        reserve = max(budget.remaining() * FINAL_POLISH_SHARE, 2 * pace)
        slowest = history.slowest_search_build(key[0])
        if slowest is not None and slowest > SEARCH_BUILD_SHARE * (stop - reserve - t3):
            stats["search_skipped"] = "build_too_slow"
            history.forget_oldest_build(key[0])
            if self._tabu_share(None) > 0:
                best, best_obj = self._tabu(problem, best, best_obj, stop, pace, stats)
            return answer(best, "feasible")
        # freeing the searched model is inside the budget too (measured; it is done before polishing)
        msize = BuildClock.size(problem.compiled)
        free_s = history.engagement_frees.expected_s(msize)
        margin = history.overshoot_margin(history.search_overshoot, problem.instance.n, SCIP_MARGIN_S)
        found = true_search(problem, mip, p, best, best_obj, stop=stop - reserve - free_s,
                            fraction=self.tr_fraction, delta=self.tr_delta, margin_s=margin)
        stats.update(found.stats)
        if "search_overshoot_ms" in found.stats:
            history.record_overshoot(history.search_overshoot, problem.instance.n,
                                     found.stats["search_overshoot_ms"] / 1e3)
        t4 = time.perf_counter()
        mip.dispose()
        history.engagement_frees.record(time.perf_counter() - t4, msize)
        if found.team_of is not None and found.objective > best_obj:
            best, best_obj = found.team_of, found.objective
            if not found.proven_optimal:
                res_p = self._polish(problem, best, stop, pace)
                stats["final_polish_moves"] = res_p.rounds
                if res_p.objective > best_obj:
                    best, best_obj = res_p.team_of, res_p.objective
        probing = plan.probe is not None
        history.record_search(key, found.proven_optimal or found.team_of is not None, probing)
        if probing:
            stats["search_probe"] = True
        if "search_build_ms" in found.stats:
            history.record_search_build(key[0], found.stats["search_build_ms"] / 1e3)
        stats["search_total_ms"] = round((time.perf_counter() - t3) * 1e3, 3)
        # SCIP finished the whole engagement MIP: its answer, or (nothing better under the objective
        # limit) the polished incumbent, is the optimum — same proof as the exact solver's
        return answer(best, "optimal" if found.proven_optimal else "feasible")

    def _region_probes(self, problem: Problem, p: np.ndarray, best: np.ndarray, best_obj: float, stop: float,
                       pace: float, stats: dict) -> tuple[np.ndarray, float]:
        """Short tabu walks from the rounding of P in each other host region that can hold the match
        (:data:`REGION_PROBES`); the best of them and ``best``. ``stats["region_probes"]``: how many ran,
        ``stats["region_probe_won"]``: one of them beat ``best``."""
        near = near_players(problem) if REGION_PROBES else None
        left = stop - time.perf_counter()
        if near is None or left < REGION_PROBE_MIN_S or (self.selection and selection_applicable(problem)):
            return best, best_obj
        slots = sum(problem.instance.sizes)
        selected = np.asarray(best) >= 0
        mass = p.sum(axis=1)
        alts = [g for g in range(near.shape[1]) if near[:, g].sum() >= slots and not near[selected, g].all()
                and region_admits(problem, near[:, g])]
        # the regions the prediction favours first, as many as get REGION_PROBE_EACH_S each
        alts.sort(key=lambda g: -favour(mass, near[:, g], slots))
        alts = alts[:int(REGION_PROBE_SHARE * left / REGION_PROBE_EACH_S)]
        if not alts:
            return best, best_obj
        each = REGION_PROBE_SHARE * left / len(alts)
        units = party_units(problem)
        won = False
        for g in alts:
            start = round_prediction(np.where(near[:, g][:, None], p, p - 2.0), problem.instance.sizes, units)
            res = self._tabu_run(problem, start, min(time.perf_counter() + each, stop), pace, stats)
            if res.team_of is not None and res.objective > best_obj:
                best, best_obj, won = res.team_of, res.objective, True
        stats["region_probes"] = len(alts)
        stats["region_probe_won"] = won
        return best, best_obj

    def _repair_first(self, problem: Problem, budget: Budget, rounded: np.ndarray, starts: dict, stats: dict,
                      answer, alone: bool = False) -> Solution | None:
        """Tabu search from the best start, or from ``rounded`` (:func:`rounding` of P), with all the time
        left, its penalty walking a rule-breaking start to a feasible one. None (the time left goes
        to the surrogate MIP) when nothing is feasible by :data:`REPAIR_SHARE` of the time left, when
        the rules after it say no (:data:`REPAIR_MAX_ITERATIONS`, :data:`REPAIR_MIN_RATE`), or when
        the surrogate stage (for this engagement model and budget) or tabu search (for this model)
        was never measured; ``stats["repair_skipped"]`` says which. ``alone``: the surrogate stage is
        measured as not fitting the time left at all, so there is no fallback to give the time to:
        tabu search walks until the deadline whatever the recent repairs did (turned off by the success
        rule there, the solve would answer nothing)."""
        stop = budget.deadline() - FINISH_RESERVE_S
        t0 = time.perf_counter()
        expected = self.history.repair_iterations(problem, budget, t0, self.name, FINISH_RESERVE_S, SURROGATE_MIN_S)
        if expected is None:
            stats["repair_skipped"] = "unmeasured"
            return None
        stats["repair_expected_iterations"] = round(expected, 1)
        if stats["repair_expected_iterations"] >= REPAIR_MAX_ITERATIONS:
            stats["repair_skipped"] = "iterations"  # the pipeline leaves tabu search time enough
            return None
        key = repair_key(problem, budget, self.name, stats.get("predictor_used"))
        tries = self.history.repairs.get(key, [])
        retry = False
        if not alone and len(tries) >= REPAIR_MIN_SEEN and sum(tries) < REPAIR_MIN_RATE * len(tries):
            self.history.repair_skips[key] = self.history.repair_skips.get(key, 0) + 1
            if self.history.repair_skips[key] < self.history.repair_retry_gap.get(key, REPAIR_RETRY_EVERY):
                stats["repair_skipped"] = "success_rate"
                return None
            self.history.repair_skips[key], retry = 0, True
        self.history.wear_stage(problem, budget, self.name)
        start = max(starts.values(), key=problem.objective) if starts else rounded
        res = self._tabu_run(problem, start, stop, 0.0, stats,
                             feasible_by=None if alone else t0 + REPAIR_SHARE * (stop - t0))
        repaired = res.team_of is not None
        if retry and repaired:
            # a retry that repairs starts the record afresh: the failures before it no longer count
            # (kept, a chance run of early failures would hold repair first off for many solves)
            self.history.repairs[key] = [True]
            self.history.repair_retry_gap[key] = REPAIR_RETRY_EVERY
        else:
            self.history.remember(self.history.repairs, key, repaired, REPAIR_KEEP)
        if retry and not repaired:
            gap = self.history.repair_retry_gap.get(key, REPAIR_RETRY_EVERY)
            self.history.repair_retry_gap[key] = min(2 * gap, REPAIR_RETRY_MAX)
        stats["repair_first"] = "repaired" if repaired else "failed"
        if not repaired:
            if not starts and res.last is not None:
                # a last repair (nothing feasible after the surrogate stage either) resumes where this
                # walk stopped instead of from the rounding again, with the few iterations left
                rounded[:] = res.last
            return None
        return answer(res.team_of, "feasible")

    def _polish_only(self, problem: Problem, stop: float, starts: dict, stats: dict, answer) -> Solution:
        """No time for a MIP: the best start polished, then tabu-searched, until ``stop``
        (``no_solution`` without one)."""
        if not starts:
            return answer(None, "no_solution")
        best = max(starts.values(), key=problem.objective)
        best_obj = problem.objective(best)
        res_p = self._polish(problem, best, stop)
        stats["final_polish_moves"] = res_p.rounds
        if res_p.objective > best_obj:
            best, best_obj = res_p.team_of, res_p.objective
        if self._tabu_share(None) > 0:
            best, best_obj = self._tabu(problem, best, best_obj, stop, res_p.round_s, stats)
        return answer(best, "feasible")

    def _selection_answer(self, problem: Problem, p: np.ndarray, starts: dict, stop: float, stats: dict,
                          answer) -> Solution:
        """Selection search until ``stop`` from the best start (the surrogate MIP's; when it found
        none, selections drawn by the prediction, :func:`start_from_scores`)."""
        if starts:
            stats.setdefault("selection_start", "surrogate")
        else:
            start = start_from_scores(problem, p.sum(axis=1), stop, seed=self.seed)
            if start is None:
                return answer(None, "no_solution")
            starts[start.tobytes()] = start
            stats["selection_start"] = "sampled"
        best = max(starts.values(), key=problem.objective)
        best, _ = self._tabu(problem, best, problem.objective(best), stop, 0.0, stats)
        return answer(best, "feasible")


@dataclass
class _SearchPlan:
    """What a pipeline solve decided, before its surrogate stage, about SCIP's search of the engagement MIP.

    Attributes:
        key: The history's search key (engagement model, budget, method).
        probe: True where the search is not paying and this solve probes it, False where it is not paying
            and this is no probe, None where the measured rule decides after polishing.
        skip: Why the search will not run (``not_paying``, ``build_too_slow``, ``no_time``,
            ``too_tight_to_probe``), or None.
        fastest_stage: The fastest recent surrogate stage (seconds; 0.0: unknown).
        left: Seconds left for the answer when the plan was made.
    """

    key: tuple
    probe: bool | None = None
    skip: str | None = None
    fastest_stage: float = 0.0
    left: float = 0.0


def _too_tight_to_probe(history: SolveHistory, problem: Problem, budget: Budget, method: str = "") -> bool:
    """A probe due where repair first applies (the pipeline would leave tabu search fewer than
    :data:`REPAIR_MAX_ITERATIONS`) is not run: there the surrogate stage, polishing and a search that
    has not been paying cost the whole answer. The search, not paying, is then never probed again at
    that budget."""
    expected = history.repair_iterations(problem, budget, time.perf_counter(), method, FINISH_RESERVE_S, SURROGATE_MIN_S)
    return expected is not None and expected < REPAIR_MAX_ITERATIONS


def _ranked(problem: Problem, starts: dict) -> tuple[list[np.ndarray], list[float], np.ndarray]:
    """The starts, their objectives and their order, best first."""
    cands = list(starts.values())
    vals = [problem.objective(t) for t in cands]
    return cands, vals, np.argsort(vals)[::-1]


def _read(mip: MipModel, sol) -> np.ndarray:
    m = mip.model
    N, D = mip.x.shape
    vals = np.asarray([[m.getSolVal(sol, mip.x[i, j]) for j in range(D)] for i in range(N)])
    return np.where(vals.max(1) > 0.5, vals.argmax(1), -1).astype(np.int64)


def _pool(mip: MipModel, problem: Problem, first: np.ndarray | None, limit: int = 10) -> list[np.ndarray]:
    """The checker-feasible assignments of SCIP's solution pool (best surrogate value first)."""
    out = [] if first is None else [first]
    sols = mip.model.getSols() if mip.model.getNSols() > 0 else []
    rest = [_read(mip, s) for s in sols[:limit]]
    if rest:
        T = np.stack(rest)
        out += [t for t in T[problem.checker.feasible(T)]]
    return out
