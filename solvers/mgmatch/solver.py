"""MGMatch's solver (paper §4.3): predict, then enumerate, warm-start SCIP, or run the pipeline.

**The path** (:mod:`mgmatch.solvers.policy`, ``policy="auto"``; ``"enumerate"``, ``"scip"`` or
``"pipeline"`` force one): from measured cost estimates, enumerate every team formation (small pools:
a proven optimum, or as far as a tight budget goes, handing its best to a selection search where that
applies), warm-start SCIP on the engagement MIP at once with the rounded prediction (where the runtime
predictor says the MIP closes well inside the time left), or the pipeline
(:mod:`~mgmatch.solvers.mgmatch.pipeline`). ``stats["policy_path"]`` says which ran.

**The prediction**: a :class:`~mgmatch.solvers.mgmatch.prediction.Predictor` maps the problem to P [N, D],
the probability that player i is on team j in the optimum (the multimodal GNN for ``mgmatch``, a
bipartite GCN for ``bgcn``); solvers never import torch or ``mgmatch.models``: the predictor is handed
in. The trained predictor runs only where its measured time fits its share of the time left (on the
pipeline path, of what the measured surrogate stage leaves) and not on small pools; otherwise the
engagement gradient (``surrogate``'s, far cheaper) stands in. A predictor whose sidecar carries a
measured ``gate`` (a comparison with ``surrogate`` at several budgets) follows its verdict at the budget
nearest the solve's: ``gradient`` and it never runs, ``network`` and it runs when it fits
:data:`~mgmatch.solvers.policy.GATED_PREDICT_SHARE` of the time left. ``stats["predictor_used"]`` and
``stats["predictor_gate"]`` say what ran.

**The budget** (default :data:`~mgmatch.solvers.mgmatch.tuning.DEFAULT_TIME_LIMIT_MS`, encoding and
inference included) is spent by measured costs, kept in the solver's
:class:`~mgmatch.solvers.mgmatch.history.SolveHistory`: every MIP build counts against it (one that
cannot fit is not started, one that runs past the deadline is abandoned, and SCIP's limit is what is
left after building), and the measured teardown after the answer is kept back.

The answer is always checker-feasible; when nothing feasible was found in time the status is
``no_solution`` (never a rule-breaking assignment), and with time left tabu search first tries to
repair the rounding (``stats["last_repair"]``). ``status`` is ``optimal`` when the enumeration finished
or SCIP finished the whole engagement MIP (``stats["search_proven_optimal"]``), ``infeasible`` when
either proved the rules unsatisfiable, else ``feasible``. ``stats`` also records where the time went
(``predict_ms``, ``surrogate_ms``, ``polish_ms``, ``tabu_ms``, ``search_build_ms``, ``search_ms``,
``search_total_ms``).
"""

from __future__ import annotations

import time

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from ..enumerate import best_assignment
from ..gradient import GradientPredictor
from ..interface import Budget, register
from ..lobby import lobby_answer
from ..mip import SCIP_READS, BuildClock, BuildInterrupted, MipModel, released
from ..moves import warm as warm_moves
from ..pas import TR_DELTA, TR_FRACTION
from ..policy import (
    GATED_PREDICT_SHARE,
    PATHS,
    PREDICT_SHARE,
    Choice,
    choose,
    enumerate_chunk,
    gate_budget_ms,
    gate_verdict,
    lobby_path,
    record_enumeration,
    use_trained_predictor,
)
from ..selection import applicable as selection_applicable
from ..tabu import TABU_ROUNDS, tabu_search
from .history import SolveHistory, default_history
from .pipeline import PipelineSteps
from .prediction import Predictor, rounding
from .tuning import (
    DEFAULT_TIME_LIMIT_MS,
    EMPTY_HANDOVER,
    ENUM_SELECTION_SHARE,
    FINAL_POLISH_SHARE,
    FINISH_RESERVE_S,
    POLISH_SHARE,
    PREPARE_PREDICTS,
    PREPARE_WALK_S,
    SCIP_MARGIN_S,
    SURROGATE_MIN_S,
    SURROGATE_SHARE,
    TEARDOWN_MAX_SHARE,
)


class MGMatchSolver(PipelineSteps):
    """Predictor → surrogate MIP (SCIP) → polish → true-MIP search. See the module docstring.

    Options: ``history`` is the :class:`~mgmatch.solvers.mgmatch.history.SolveHistory` the solver
    reads its measured costs from and records into (default: the process's); ``use_polish=False`` returns the best surrogate answer as is (no polish, no search);
    ``search=False`` stops after polishing (which then gets all the time); ``tr_fraction`` /
    ``tr_delta`` set the search's trust region around P (``tr_fraction=0``: none);
    ``selection=False`` never runs the selection search (:mod:`mgmatch.solvers.selection`), so
    pools with few team splits take the same steps as the others.
    """

    def __init__(self, predictor: Predictor | None = None, name: str = "mgmatch",
                 default_time_limit_ms: float = DEFAULT_TIME_LIMIT_MS, polish_share: float = POLISH_SHARE,
                 use_polish: bool = True, warm_start: bool = True, search: bool = True,
                 surrogate_share: float = SURROGATE_SHARE, tr_fraction: float = TR_FRACTION,
                 tr_delta: float = TR_DELTA, policy: str = "auto", tabu_share: float | None = None,
                 selection: bool = True, repair_first: bool = True, seed: int = 0,
                 history: SolveHistory | None = None):
        if predictor is None:
            raise InvalidInput("predictor", f"method {name!r} needs a solution predictor "
                                            "(e.g. mgmatch.models.runtime.load_predictor(name)); none was given")
        if not hasattr(predictor, "predict"):
            raise InvalidInput("predictor", f"{type(predictor).__name__} has no predict(problems) method")
        self.predictor = predictor
        self.name = name
        self.default_time_limit_ms = default_time_limit_ms
        self.polish_share = polish_share
        self.use_polish = use_polish
        self.warm_start = warm_start
        self.search = search
        self.surrogate_share = surrogate_share
        self.tr_fraction = tr_fraction
        self.tr_delta = tr_delta
        if policy not in PATHS:
            raise InvalidInput("policy", f"expected one of {', '.join(PATHS)}, got {policy!r}")
        self.policy = policy
        if tabu_share is not None and not 0.0 <= tabu_share <= 1.0:
            raise InvalidInput("tabu_share", f"must be within [0, 1] (or None: the measured rule), got {tabu_share!r}")
        self.tabu_share = tabu_share
        self.selection = selection
        self.repair_first = repair_first
        self.seed = seed
        #: what earlier solves measured (the process's, unless one is handed in)
        self.history = history if history is not None else default_history()
        self.last_choice: Choice | None = None
        warm_moves()  # the local searches' compiled scorer: loaded now, not inside the first budget

    def prepare(self, problem: Problem, measure: bool = True) -> None:
        """Before a solve's budget starts, what the first solve in a process would do once inside it
        (``mgmatch solve`` calls it on its pool; the service at start-up on a warm-up pool of each
        pool's game, :meth:`mgmatch.app.runtime.Runtime.prepare_solvers`): the trained predictor's
        first calls (a cold ONNX session allocates and optimises, and is slower than a warm one), a
        first surrogate MIP (the build's first paths in pyscipopt and SCIP; its instance then
        serves this thread's next build) and a first tabu walk. Nothing is left on ``problem``: the
        work runs on a twin of it, and the solve does all of its own.

        ``measure``: then build the surrogate MIP and walk once more, warm, and record those as a
        solve records them (the surrogate build's time by size, tabu search's pace), so the first
        solve at a tight budget can choose its path from them as later ones do (without them it would
        run the surrogate stage only to measure it, where it may not fit). Only for ``problem`` itself: a warm-up pool of another
        shape would misstate them."""
        twin = Problem(problem.instance, problem.model, model_name=problem.model_name)
        key = str(getattr(self.predictor, "version", None))
        if not isinstance(self.predictor, GradientPredictor) and key not in self.history.predict_warm:
            for _ in range(PREPARE_PREDICTS):
                self.predictor.predict([twin])
            self.history.predict_warm.add(key)
        p = GradientPredictor().predict([twin])[0]
        # the cold pass's times (a first SCIP read, a first tabu iteration) are no measurement: the
        # clocks the solve consults are put back as they were before it
        clocks = (SCIP_READS, TABU_ROUNDS)
        before = [c.snapshot() for c in clocks]
        self._prepare_pass(twin, p, record=False)
        for c, state in zip(clocks, before, strict=True):
            c.restore(state)
        if measure:
            self._prepare_pass(twin, p, record=True)

    def _prepare_pass(self, twin: Problem, p: np.ndarray, record: bool) -> None:
        """One surrogate MIP built and solved, and one tabu walk of :data:`PREPARE_WALK_S`; ``record``:
        the build's time and the walk's pace recorded as a solve records them."""
        with released():
            t0 = time.perf_counter()
            mip = MipModel.build(twin.compiled, checker=twin.checker, fast=True, reuse=True)
            if record:
                self.history.surrogate_builds.record(time.perf_counter() - t0, BuildClock.size(twin.compiled))
            mip.set_linear_objective(p)
            mip.set_time_limit(SURROGATE_MIN_S)
            mip.solve()
        start, stop = rounding(twin, p), time.perf_counter() + PREPARE_WALK_S
        if record:
            self._tabu_run(twin, start, stop, 0.0, {})
        else:
            tabu_search(twin, start, stop, seed=self.seed)

    def expected_predict_s(self) -> float | None:
        """The trained predictor's expected time: the upper quartile of its last 8 calls in this
        process (kept per predictor version, since the service builds a solver per solve; None:
        never run, or every measurement forgotten)."""
        return self.history.expected_predict_s(str(getattr(self.predictor, "version", None)))

    def _predict(self, problem: Problem, left_s: float | None = None, stats: dict | None = None,
                 small_pool: bool = False, budget_ms: float | None = None) -> np.ndarray:
        """P [N, D] from the trained predictor, or from the engagement gradient (as ``surrogate``)
        when the policy says the predictor does not pay (:func:`~mgmatch.solvers.policy.use_trained_predictor`:
        its expected time does not fit the time left, or the pool is a small one), or when its
        sidecar's measured gate says ``gradient`` at the budget nearest ``budget_ms``
        (:func:`~mgmatch.solvers.policy.gate_verdict`); where the gate says ``network`` there, it must fit
        :data:`~mgmatch.solvers.policy.GATED_PREDICT_SHARE` of the time left instead of ``PREDICT_SHARE``.

        The first call of a predictor in the process is not measured (a cold session would keep the
        process on the gradient), and solves that skip the predictor as too slow wear its record down
        (:meth:`~mgmatch.solvers.mgmatch.history.SolveHistory.predictor_skipped`), so a busy moment does
        not keep it off."""
        trained = not isinstance(self.predictor, GradientPredictor)
        key = str(getattr(self.predictor, "version", None))
        gate = getattr(self.predictor, "gate", None) if trained else None
        scaled = gate_budget_ms(gate, budget_ms, self.history.tabu_pace_s(problem))  # the budget on the gate's machine
        verdict = gate_verdict(gate, scaled) if trained else None
        if verdict is not None and stats is not None and scaled is not None:
            stats["gate_budget_ms"] = round(scaled, 1)
        if verdict == "gradient":
            # measured offline: with this network MGMatch was behind the engagement gradient (`surrogate`)
            # at this budget, or nowhere ahead of it
            if stats is not None:
                stats["predictor_used"] = GradientPredictor.version
                stats["predictor_gate"] = "gradient"
            return self._checked(problem, GradientPredictor().predict([problem]))
        share = GATED_PREDICT_SHARE if verdict == "network" else PREDICT_SHARE
        if verdict == "network" and stats is not None:
            stats["predictor_gate"] = "network"
        if trained and not use_trained_predictor(self.expected_predict_s(), left_s, small_pool, share):
            self.history.predictor_skipped(key, small_pool)
            if stats is not None:
                stats["predictor_used"] = GradientPredictor.version
            return self._checked(problem, GradientPredictor().predict([problem]))
        t0 = time.perf_counter()
        out = self.predictor.predict([problem])
        if trained:
            self.history.record_predict(key, time.perf_counter() - t0)
        else:
            self.history.predict_warm.add(key)
        if stats is not None:
            stats["predictor_used"] = getattr(self.predictor, "version", None)
        return self._checked(problem, out)

    def _checked(self, problem: Problem, out: list) -> np.ndarray:
        N, D = problem.instance.n, problem.instance.teams
        if len(out) != 1:
            raise ValueError(f"predictor returned {len(out)} predictions for 1 problem")
        p = np.asarray(out[0], dtype=np.float64)
        if p.shape != (N, D):
            raise ValueError(f"predictor returned shape {p.shape}, expected ({N}, {D})")
        if not np.isfinite(p).all():
            raise ValueError("predictor returned non-finite probabilities")
        return np.clip(p, 0.0, 1.0)

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        """The measured policy (:mod:`mgmatch.solvers.policy`) picks the path, then runs it; the time
        that freeing its SCIP models takes after the answer (:data:`TEARDOWN`) is kept back from the
        budget, and counts in the answer's ``time_ms``."""
        budget = budget.or_default(self.default_time_limit_ms)
        if self.policy == "auto" and lobby_path(problem):  # large lobbies: before compiling (policy.lobby_path)
            return lobby_answer(problem, budget, self.name)
        size = BuildClock.size(problem.compiled)
        keep = 0.0
        if budget.time_limit_ms is not None:
            keep = min(max(0.0, self.history.teardown.expected_s(size) - FINISH_RESERVE_S), TEARDOWN_MAX_SHARE * budget.time_limit_ms / 1e3)
        sol = self._solve(problem, Budget(budget.time_limit_ms - 1e3 * keep, budget.start) if keep > 0 else budget)
        done = time.perf_counter()  # the solve's frames, and the SCIP models they held, are gone
        self.history.teardown.record(max(0.0, done - budget.start - sol.time_ms / 1e3), size)
        return sol.model_copy(update={"time_ms": round(budget.elapsed_ms(done), 3)})

    def _solve(self, problem: Problem, budget: Budget) -> Solution:
        version = getattr(self.predictor, "version", None)
        stats: dict = {"predictor": version, "predictor_used": None}  # None: answered without predicting

        def answer(team_of, status) -> Solution:
            return problem.solution(team_of, status, self.name, budget.elapsed_ms(), stats=stats)

        if budget.expired():
            return answer(None, "no_solution")
        t0 = time.perf_counter()
        choice = choose(problem, budget.remaining(), self.policy)
        self.last_choice = choice
        stats.update(choice.stats(), policy_ms=round((time.perf_counter() - t0) * 1e3, 3))
        starts: dict[bytes, np.ndarray] = {}
        if choice.path == "enumerate":
            t1 = time.perf_counter()
            # an enumeration not expected to finish hands its best over to a selection search (where
            # that applies) once it has one and ENUM_SELECTION_SHARE of the time is left
            selecting = (self.selection and selection_applicable(problem) and budget.remaining() is not None
                         and choice.enumerate_estimate_s is not None
                         and choice.enumerate_estimate_s > budget.remaining())
            handover = budget.share(1.0 - ENUM_SELECTION_SHARE).deadline() if selecting else None
            res = best_assignment(problem, budget.deadline() - FINISH_RESERVE_S,
                                  chunk=enumerate_chunk(budget.remaining()), handover=handover,
                                  empty_handover=EMPTY_HANDOVER)
            stats.update(enumerate_ms=round((time.perf_counter() - t1) * 1e3, 3), enumerate_complete=res.complete,
                         enumerate_examined=res.examined)
            record_enumeration(time.perf_counter() - t1, res.examined)
            if res.complete:
                return answer(res.team_of, "infeasible" if res.team_of is None else "optimal")
            if res.team_of is not None and selecting:
                stats["selection_start"] = "enumeration"
                best, _ = self._tabu(problem, res.team_of, res.objective, budget.deadline() - FINISH_RESERVE_S,
                                     0.0, stats)
                return answer(best, "feasible")
            if res.team_of is not None:  # cut short: its best is one more start for the pipeline
                starts[res.team_of.tobytes()] = res.team_of
        if budget.remaining() <= FINISH_RESERVE_S:
            return answer(next(iter(starts.values()), None), "feasible" if starts else "no_solution")
        t0 = time.perf_counter()
        # the network competes with the search for the time the fixed stages leave: on the pipeline
        # path, the surrogate stage's measured time (not with a selection search, which has none)
        left = budget.remaining()
        if choice.path != "scip" and not (self.selection and self.use_polish and selection_applicable(problem)):
            left -= self.history.stage_s(problem, budget, self.name) or 0.0
        p = self._predict(problem, left, stats, small_pool=choice.small_pool and self.policy == "auto",
                          budget_ms=budget.time_limit_ms)
        stats["predict_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        if budget.remaining() <= FINISH_RESERVE_S:
            return answer(next(iter(starts.values()), None), "feasible" if starts else "no_solution")

        # greedy rounding: a free candidate and the warm start when it is feasible
        rounded = rounding(problem, p)
        rounding_ok = bool(problem.checker.feasible(rounded[None])[0])
        if rounding_ok:
            starts.setdefault(rounded.tobytes(), rounded.copy())
        stats["rounding_feasible"] = rounding_ok
        with released():  # the SCIP instances built here serve the next solve's builds
            if choice.path == "scip":
                sol = self._scip_path(problem, budget, p, starts, stats, answer)
            else:
                sol = self._pipeline(problem, budget, p, rounded, starts, stats, answer)
        if sol.status == "no_solution" and self.use_polish and self._tabu_share(None) > 0:
            # nothing feasible yet and time left (the surrogate MIP's measured read or build did not
            # fit, as in a fresh process whose first SCIP reads were slow; or it found nothing in its
            # time): tabu search repairs the rounding with what is left rather than answer nothing early
            res = self._tabu_run(problem, rounded, budget.deadline() - FINISH_RESERVE_S, 0.0, stats)
            if res.iterations:
                stats["last_repair"] = "repaired" if res.team_of is not None else "failed"
            if res.team_of is not None:
                return answer(res.team_of, "feasible")
        return sol

    def _scip_path(self, problem: Problem, budget: Budget, p: np.ndarray, starts: dict, stats: dict,
                   answer) -> Solution:
        """The engagement MIP warm-started at once with the best start, with all the time left.

        SCIP's limit is what is left of the budget after building the model (minus the margin it
        overshoots by and a reserve to polish an unproven answer); without a proof, the better of
        SCIP's answer and the start is polished with the reserve.
        """
        deadline = budget.deadline()
        stop = deadline - FINISH_RESERVE_S
        t1 = time.perf_counter()
        start = max(starts.values(), key=problem.objective) if starts else None
        best, best_obj = start, (None if start is None else problem.objective(start))
        size = BuildClock.size(problem.compiled)
        mip = None
        if self.history.engagement_builds.expected_s(size) > stop - t1:  # no time to build: polish the start
            self.history.engagement_builds.skipped(size)
        else:
            try:
                mip = MipModel.build(problem.compiled, checker=problem.checker, settings="exact", deadline=stop,
                                     reuse=True)
                mip.add_engagement_objective(problem, deadline=stop)
                self.history.engagement_builds.record(time.perf_counter() - t1, size)
            except BuildInterrupted:
                mip = None
        if mip is not None and start is not None and self.warm_start:
            mip.warm_start(start)
        stats["scip_build_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        left = stop - time.perf_counter() - SCIP_MARGIN_S
        reserve = left * FINAL_POLISH_SHARE
        limit = left - reserve
        stats["scip_limit_ms"] = round(max(0.0, limit) * 1e3, 3)
        if mip is not None and limit > 0:
            mip.set_time_limit(limit)
            res = mip.solve()
            stats.update(scip_status=res.status, scip_ms=round(res.time_s * 1e3, 3), scip_nodes=res.nodes)
            if res.status == "infeasible" and res.team_of is None and start is None:
                return answer(None, "infeasible")
            if res.team_of is not None:
                obj = problem.objective(res.team_of)
                if res.optimal:
                    return answer(res.team_of, "optimal")
                if best_obj is None or obj > best_obj:
                    best, best_obj = res.team_of, obj
        if best is None:
            return answer(None, "no_solution")
        res_p = self._polish(problem, best, stop)
        stats["final_polish_moves"] = res_p.rounds
        if res_p.objective > best_obj:
            best = res_p.team_of
        return answer(best, "feasible")


@register("mgmatch", "MGMatch: multimodal GNN prediction → surrogate MIP (SCIP) → polish → search of the engagement MIP; 100 ms default", needs_predictor=True)
def mgmatch_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="mgmatch", **options)


@register("bgcn", "BGCN baseline: bipartite-GCN prediction → surrogate MIP (SCIP) → polish → engagement-MIP search; 100 ms default", needs_predictor=True, predictor_suffix="-bgcn")
def bgcn_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="bgcn", **options)
