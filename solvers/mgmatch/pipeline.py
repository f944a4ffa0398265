"""MGMatch's fast solver (paper §4.3): predict, solve the surrogate MIP, polish, then search the true MIP.

**Policy first** (:mod:`mgmatch.solvers.policy`, ``policy="auto"``; ``"enumerate"``, ``"scip"`` or
``"pipeline"`` force a path): from measured cost estimates it picks one of three paths —
enumerate every team formation (small pools: a proven optimum in a few ms, or as far as a tight
budget goes), warm-start SCIP on the engagement MIP at once with the rounded prediction (when the
runtime predictor says the MIP closes well inside the time left), or the pipeline below. It also
decides whether the trained predictor runs (its measured time must fit 20% of the time left —
on the pipeline path, of what the surrogate stage, measured per engagement model, leaves — and
not on small pools) or the engagement gradient (``surrogate``'s, ~0.05 ms) stands in. A predictor
whose sidecar carries a measured ``gate`` (an interleaved comparison with ``surrogate`` at each of
several budgets, ``scripts/interleaved.py --gate``) follows its verdict at the measured budget nearest
the solve's: ``gradient`` (MGMatch with it was behind ``surrogate`` there) and it never runs, the
gradient standing in; ``network`` and it runs when it fits half the time left, not 20%.
``stats["predictor_gate"]`` says which verdict applied. Every MIP
build counts against the budget: one that cannot fit (measured build times,
:class:`~mgmatch.solvers.mip.BuildClock`) is not started, one that runs past the deadline is
abandoned (:class:`~mgmatch.solvers.mip.BuildInterrupted`), and SCIP's limit is what is left after
building. ``stats["policy_path"]`` and ``stats["predictor_used"]`` say what ran.

Pipeline inside one wall-clock budget (default 100 ms, INCLUDING encoding and inference):

1. **Predict.** A :class:`Predictor` maps the problem to P [N, D], the probability that player i
   is on team j in the optimum (the multimodal GNN for ``mgmatch``, a bipartite GCN for
   ``bgcn``). Solvers never import torch or ``mgmatch.models``: the predictor is handed in.
2. **Round.** Greedy rounding of P (highest p first, fill every team) gives a candidate; when the
   checker accepts it, it is a fallback answer and SCIP's warm start.
3. **Surrogate MIP** (Eq. 20–21): max Σ p_ij x_ij over the same compiled rules, built by the
   shared :class:`~mgmatch.solvers.mip.MipModel` with its ``fast`` preset, time-limited to
   :data:`SURROGATE_SHARE` of the time left (at least :data:`SURROGATE_MIN_S`; it goes on with
   all the time left when that found no feasible assignment). Same feasible region as the real
   problem, so a proof of infeasibility here is a proof for the instance.
   **Repair first** (``repair_first``, :meth:`MGMatchSolver._repair_first`): when SCIP's search
   (step 5) will not run in this solve (not paying and no probe due, or its measured build will
   not fit; a probe due is not run where repair first applies: :func:`_too_tight_to_probe`) and
   the surrogate stage would leave tabu search fewer than :data:`REPAIR_MAX_ITERATIONS`
   iterations, steps 3–4 are replaced by tabu search from the party-whole rounding, which repairs
   it itself (its penalty on how far outside each broken rule is) and walks on with all the time;
   the surrogate MIP gets the rest only when nothing is feasible by :data:`REPAIR_SHARE` of it.
   Repair first is also taken where the surrogate stage measured for the model and budget (its
   fastest recent run; where none completed, its shortest miss) leaves SCIP's search less than
   :data:`SEARCH_MIN_S` (``search_skipped: no_time``), with no search record needed; and where that
   stage does not even fit what a failed repair would leave it, the walk goes on to the deadline.
   A solve that would answer ``no_solution`` with time left (no feasible start, and the surrogate
   MIP's build did not fit or found nothing) has tabu search repair the rounding the same way with
   what is left (``stats["last_repair"]``).
   ``stats["repair_first"]``: ``repaired`` or ``failed``; where it was considered but not tried,
   ``stats["repair_skipped"]`` says why: ``unmeasured`` (no surrogate stage measured for the model
   and budget, or no tabu pace for the model, yet), ``iterations`` (the pipeline leaves tabu search
   enough) or ``success_rate`` (recent repairs failed too often; a retry that repairs clears their
   record).
4. **Polish** (:mod:`mgmatch.solvers.polish`): best-improvement swaps on the true engagement
   objective, feasibility kept by the checker. The starts (rounding, SCIP's solution pool) are
   polished best first for at most :data:`POLISH_SHARE` of the time left.
   Then **tabu search** (:mod:`mgmatch.solvers.tabu`) walks on from the best polished
   assignment, through worse and rule-breaking neighbours (penalized), with three-player rotations
   added to the moves, for :data:`TABU_SHARE` of the time left — when the runtime predictor says
   SCIP's search is unlikely to improve in time (:data:`TABU_SCIP_RATIO`; ``tabu_share`` sets the
   share instead). Without time for any MIP, polish and tabu search get all of it.
5. **Search the true MIP** (:mod:`mgmatch.solvers.pas`, Predict-and-Search): the surrogate model
   becomes the tight big-M engagement MIP (no second build), warm-started with the best polished
   assignment and cut off at its value, and SCIP searches it with the rest of the budget
   (:data:`FINAL_POLISH_SHARE` kept back). A trust region around P is available
   (``tr_fraction``/``tr_delta``) but off by default: it measured worse on both presets (see the
   :mod:`~mgmatch.solvers.pas` docstring). What SCIP finds better is polished again unless SCIP
   proved it optimal. The surrogate re-solve loop with no-good cuts of earlier versions is gone:
   the true search finds better assignments than the surrogate's next-most-likely ones in the same
   time (12v12 at 100 ms, seed 2000003: 0.55% → 0.09% mean gap).

**Selection search instead, where the team patterns are few** (:mod:`mgmatch.solvers.selection`:
a pool with benched candidates and at most 2 048 ways to split the selected players, e.g. 5v5 or
3v3): the predicted players' best split (Σ_j p_ij ranks them; parties whole) or the feasible
rounding is the start, and the selection search (swap who plays, every split scored) gets all the
time left; the surrogate MIP runs only when neither is feasible, and selections drawn from the
prediction only when it finds nothing either (``stats["selection_start"]``: prediction, rounding,
surrogate, sampled). On a 3v3 pool whose enumeration is not expected to finish in the budget, the
enumeration hands its best over once it has one and :data:`ENUM_SELECTION_SHARE` of the time is
left (``enumeration``). ``selection=False`` keeps the steps above.

The answer is always checker-feasible; when nothing feasible was found in time the status is
``no_solution`` (never a rule-breaking assignment). ``status`` is ``optimal`` when the true
search finished the whole engagement MIP (``stats["search_proven_optimal"]``; bound = objective),
``infeasible`` when SCIP proved the rules unsatisfiable, else ``feasible``. ``stats`` also records where the time went (``predict_ms``,
``surrogate_ms``, ``polish_ms``, ``tabu_ms``, ``search_build_ms``, ``search_ms``, ``search_total_ms``).
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
from ..mip import SCIP_READS, BuildClock, BuildInterrupted, MipModel, released
from ..moves import warm as warm_moves
from ..pas import TR_DELTA, TR_FRACTION, true_search
from ..policy import (
    GATED_PREDICT_SHARE,
    PATHS,
    PREDICT_SHARE,
    Choice,
    choose,
    enumerate_chunk,
    gate_budget_ms,
    gate_verdict,
    record_enumeration,
    use_trained_predictor,
)
from ..polish import PolishResult, polish
from ..selection import applicable as selection_applicable
from ..selection import selection_search, start_from_scores
from ..tabu import TABU_ROUNDS, TabuResult, tabu_search
from .history import SolveHistory, default_history, repair_key, search_key
from .prediction import (
    Predictor,
    favour,
    near_players,
    party_units,
    region_admits,
    round_prediction,
    rounding,
)
from .tuning import (
    DEFAULT_TIME_LIMIT_MS,
    EMPTY_HANDOVER,
    ENUM_SELECTION_SHARE,
    FINAL_POLISH_SHARE,
    FINISH_RESERVE_S,
    FIRST_MARGIN_S,
    POLISH_SHARE,
    PREPARE_PREDICTS,
    PREPARE_WALK_S,
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
    SURROGATE_SHARE,
    TABU_SCIP_RATIO,
    TABU_SHARE,
    TEARDOWN_MAX_SHARE,
)


class MGMatchSolver:
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
        first calls (a cold ONNX session allocates and optimises: 9 ms against 5 on a 12v12-deep
        pool), a first surrogate MIP (the build's first paths in pyscipopt and SCIP; its instance then
        serves this thread's next build) and a first tabu walk. Nothing is left on ``problem``: the
        work runs on a twin of it, and the solve does all of its own.

        ``measure``: then build the surrogate MIP and walk once more, warm, and record those as a
        solve records them (the surrogate build's time by size, tabu search's pace), so the first
        solve at a tight budget can choose its path from them as later ones do (a one-shot
        `mgmatch solve` of a 12v12-deep pool at 10 ms answered nothing without them: it ran the
        surrogate stage to measure it). Only for ``problem`` itself: a warm-up pool of another
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
            # time): tabu search repairs the rounding with what is left. Without it, 2 of a new
            # process's first 40 12v12 solves at 20 ms answered nothing 2 ms in, and a 3v3 pool
            # whose feasible assignments are rare answered nothing 6 ms into 10 ms
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

    def _repair_first(self, problem: Problem, budget: Budget, rounded: np.ndarray, starts: dict, stats: dict,
                      answer, alone: bool = False) -> Solution | None:
        """Tabu search from the best start, or from ``rounded`` (:func:`rounding` of P), with all the time
        left, its penalty walking a rule-breaking start to a feasible one. None (the time left goes
        to the surrogate MIP) when nothing is feasible by :data:`REPAIR_SHARE` of the time left, when
        the rules after it say no (:data:`REPAIR_MAX_ITERATIONS`, :data:`REPAIR_MIN_RATE`), or when
        the surrogate stage (for this engagement model and budget) or tabu search (for this model)
        was never measured; ``stats["repair_skipped"]`` says which. ``alone``: the surrogate stage is
        measured as not fitting the time left at all, so there is no fallback to give the time to:
        tabu search walks until the deadline whatever the recent repairs did (12v12 at 10 ms: with
        the success rule, repair first was off in 46 of 80 solves, which then answered nothing)."""
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
            # (kept, a chance run of early failures held repair first off for ~16 solves per
            # success needed to outweigh them: 12v12-deep at 50 ms skipped it on 43 of 80 solves)
            self.history.repairs[key] = [True]
            self.history.repair_retry_gap[key] = REPAIR_RETRY_EVERY
        else:
            self.history.remember(self.history.repairs, key, repaired, REPAIR_KEEP)
        if retry and not repaired:
            self.history.repair_retry_gap[key] = min(2 * self.history.repair_retry_gap.get(key, REPAIR_RETRY_EVERY), REPAIR_RETRY_MAX)
        stats["repair_first"] = "repaired" if repaired else "failed"
        if not repaired:
            if not starts and res.last is not None:
                # a last repair (nothing feasible after the surrogate stage either) resumes where this
                # walk stopped instead of from the rounding again: a 12v12 pool of 96 candidates needs
                # 20 iterations, and at 10 ms the first walk gave up after 16, the surrogate MIP found
                # nothing, and the last repair started over with time for a few
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

    def _pipeline(self, problem: Problem, budget: Budget, p: np.ndarray, rounded: np.ndarray, starts: dict,
                  stats: dict, answer) -> Solution:
        """Surrogate MIP → polish → search of the engagement MIP (the module docstring's steps 3–5)."""
        deadline = budget.deadline()
        selecting = self.selection and self.use_polish and selection_applicable(problem)
        if selecting:
            # few team patterns and benched candidates: the predicted players, best split, are the
            # start of a selection search with all the time (the surrogate MIP only when they
            # have no feasible split)
            t1 = time.perf_counter()
            start = start_from_scores(problem, p.sum(axis=1), samples=0)
            stats["selection_start_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
            if start is not None:
                starts.setdefault(start.tobytes(), start)
            if starts:  # the predicted players' best split, or the rounding when that is better
                stats["selection_start"] = "prediction" if start is not None else "rounding"
                best = max(starts.values(), key=problem.objective)
                best, _ = self._tabu(problem, best, problem.objective(best), deadline - FINISH_RESERVE_S, 0.0, stats)
                return answer(best, "feasible")

        # when SCIP's search of the engagement MIP will not run in this solve (it has not been
        # paying and this is no probe, or its measured builds will not fit what the surrogate stage
        # and polishing leave), the surrogate MIP is there only for a feasible start: tabu search
        # repairs the rounding instead and walks on with all the time
        key = search_key(problem, budget, self.name)
        probe = None  # None: the search's measured rule decides after polishing
        skip = None   # why the search will not run: "not_paying", "build_too_slow", "no_time", "too_tight_to_probe"
        if self.search and self.use_polish and self.tabu_share is None and not selecting:
            if self.history.not_paying(key):
                probe = self.history.probe_due(key)
                skip = None if probe else "not_paying"
                if probe and self.repair_first and _too_tight_to_probe(self.history, problem, budget, self.name):
                    probe, skip = None, "too_tight_to_probe"
            builds = self.history.search_builds.get(key[0])
            stage = self.history.stage_s(problem, budget, self.name) or 0.0
            after = (deadline - time.perf_counter() - stage) * (1.0 - self.polish_share)
            if skip is None and not probe and builds and max(builds) > SEARCH_BUILD_SHARE * after:
                skip = "build_too_slow"
            # the fastest recent stage decides whether the search and the fallback of a failed repair
            # can have any time at all (one slow stage, e.g. a process's first, must not decide it for
            # good: a solve that repairs first records no stage)
            fastest = self.history.fastest_stage(problem, budget, self.name, SURROGATE_MIN_S)
            left = deadline - FINISH_RESERVE_S - time.perf_counter()
            if skip is None and not probe and fastest > 0.0 and (left - fastest) * (1.0 - self.polish_share) < SEARCH_MIN_S:
                skip = "no_time"
            if skip is not None and self.repair_first:
                # no fallback: the surrogate stage does not fit what a failed repair would leave it
                alone = fastest >= (1.0 - REPAIR_SHARE) * left
                done = self._repair_first(problem, budget, rounded, starts, stats, answer, alone=alone)
                if done is not None:
                    stats["search_skipped"] = skip
                    if skip == "build_too_slow":
                        self.history.forget_oldest_build(key[0])
                    return done

        # a model the search may turn into the engagement MIP needs a new SCIP instance
        searchless = not (self.search and self.use_polish) or selecting or skip is not None
        # surrogate MIP (Eq. 20-21): its share of the budget left (at least SURROGATE_MIN_S); when
        # that gave no feasible assignment, the solve goes on with all the time left
        t1 = time.perf_counter()
        stop = deadline - FINISH_RESERVE_S
        mip = None
        if stop - time.perf_counter() > SCIP_MARGIN_S:
            size = BuildClock.size(problem.compiled)
            try:
                # a build measured as too slow is not started when there is an answer to polish
                # instead; without one it is tried anyway (abandoned at the deadline, so never
                # late): at 20 ms on 12v12, build times vary 5–10 ms with what ran just before,
                # and skipping left 9 of 40 pools unanswered
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
                    # started and did not fit: a miss, as long as all the time it had (else a budget
                    # where it never fits never has a measured stage, the search is never found to
                    # have no time, and repair first is never tried: 12v12 at 10 ms, 84% unanswered)
                    self.history.record_stage(self.history.stage_misses, problem, budget, max(stop, time.perf_counter()) - t1, self.name)
                if selecting:
                    return self._selection_answer(problem, p, starts, stop, stats, answer)
                return self._polish_only(problem, stop, starts, stats, answer)
            mip.set_linear_objective(p)
            if self.warm_start and starts:
                mip.warm_start(next(iter(starts.values())))
            room = stop - time.perf_counter() - SCIP_MARGIN_S
            surrogate_s = min(room, max(room * self.surrogate_share, SURROGATE_MIN_S))
            if surrogate_s > 0:
                if starts:
                    mip.set_time_limit(surrogate_s)
                    res = mip.solve()
                else:
                    # nothing to polish yet: a first feasible assignment depth first, with all the
                    # time if need be, then SCIP's own search for the surrogate's share
                    margin = self.history.overshoot_margin(self.history.first_overshoot, problem.instance.n,
                                                           FIRST_MARGIN_S)
                    limit = room + SCIP_MARGIN_S - margin
                    res = mip.solve_first(limit)
                    if res.status == "timelimit":
                        self.history.record_overshoot(self.history.first_overshoot, problem.instance.n,
                                                      res.time_s - limit)
                    more = stop - time.perf_counter() - SCIP_MARGIN_S
                    if res.status == "sollimit" and more > 2 * SURROGATE_MIN_S:
                        # (with less left, polishing the first solution on the true objective pays more)
                        mip.set_time_limit(mip.model.getSolvingTime() + max(more * self.surrogate_share,
                                                                            SURROGATE_MIN_S))
                        first, res = res, mip.solve()
                        if res.team_of is None:
                            res = first
                stats["surrogate_status"] = res.status
                if res.status == "infeasible" and res.team_of is None and not starts:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    return answer(None, "infeasible")
                for t in _pool(mip, problem, res.team_of):
                    starts.setdefault(t.tobytes(), t)
            else:  # built, but no time left to solve it: a miss (as above)
                mip = None
                self.history.record_stage(self.history.stage_misses, problem, budget, max(stop, time.perf_counter()) - t1, self.name)
        stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        if mip is not None:
            self.history.record_stage(self.history.surrogate_times, problem, budget, time.perf_counter() - t1, self.name)
        if selecting:
            return self._selection_answer(problem, p, starts, stop, stats, answer)
        if not starts:
            return answer(None, "no_solution")
        cands = list(starts.values())
        vals = [problem.objective(t) for t in cands]
        order = np.argsort(vals)[::-1]
        best, best_obj = cands[order[0]], vals[order[0]]
        stats["surrogate_objective"] = best_obj
        if not self.use_polish:
            return answer(best, "feasible")

        # polish the starts best first, with at most the polishing share of the time left when
        # the true search follows (all of it otherwise)
        t2 = time.perf_counter()
        searching = self.search and mip is not None
        polish_stop = min(budget.share(self.polish_share).deadline(), stop) if searching else stop
        pace = self.history.polish_rounds.expected_s(problem.instance.n ** 2)  # seconds per polish round
        polished, moves = 0, 0
        for k in order:
            if time.perf_counter() + pace >= polish_stop:
                if not polished:
                    self.history.polish_rounds.skipped(problem.instance.n ** 2)
                break
            res_p = self._polish(problem, cands[k], polish_stop, pace)
            pace = max(pace, res_p.round_s)
            polished += 1
            moves += res_p.rounds
            if res_p.objective > best_obj:
                best, best_obj = res_p.team_of, res_p.objective
        stats.update(polish_ms=round((time.perf_counter() - t2) * 1e3, 3), polish_starts=polished,
                     polish_moves=moves, polished_objective=best_obj)
        if not searching:
            return answer(best, "feasible")

        # tabu search walks on from the local optimum with its share of the time left
        probing = probe is not None
        if mip.reused:  # predicted not to search (it cannot: see MipModel.build)
            share = 1.0
        elif probe is None:
            share = self._tabu_share(budget.remaining(), key)
        else:
            share = TABU_SHARE if probe else 1.0
        if share > 0:
            tabu_stop = min(budget.share(share).deadline(), stop)
            best, best_obj = self._region_probes(problem, p, best, best_obj, tabu_stop, pace, stats)
            best, best_obj = self._tabu(problem, best, best_obj, tabu_stop, pace, stats)
        if share >= 1.0 and (self.tabu_share is None or mip.reused):
            stats["search_skipped"] = skip or "not_paying"
            if skip == "build_too_slow":
                self.history.forget_oldest_build(key[0])
            return answer(best, "feasible")

        # Predict-and-Search on the true objective, from the best assignment so far;
        # time is kept back to polish what it finds unless it proves the optimum. When building
        # the engagement objective would take most of what is left (its measured builds for this
        # model), tabu search goes on with the time instead
        t3 = time.perf_counter()
        reserve = max(budget.remaining() * FINAL_POLISH_SHARE, 2 * pace)
        slowest = self.history.slowest_search_build(key[0])
        if slowest is not None and slowest > SEARCH_BUILD_SHARE * (stop - reserve - t3):
            stats["search_skipped"] = "build_too_slow"
            self.history.forget_oldest_build(key[0])
            if self._tabu_share(None) > 0:
                best, best_obj = self._tabu(problem, best, best_obj, stop, pace, stats)
            return answer(best, "feasible")
        # freeing the searched model is inside the budget too (measured; it is done before polishing)
        msize = BuildClock.size(problem.compiled)
        free_s = self.history.engagement_frees.expected_s(msize)
        margin = self.history.overshoot_margin(self.history.search_overshoot, problem.instance.n, SCIP_MARGIN_S)
        found = true_search(problem, mip, p, best, best_obj, stop=stop - reserve - free_s,
                            fraction=self.tr_fraction, delta=self.tr_delta, margin_s=margin)
        stats.update(found.stats)
        if "search_overshoot_ms" in found.stats:
            self.history.record_overshoot(self.history.search_overshoot, problem.instance.n,
                                          found.stats["search_overshoot_ms"] / 1e3)
        t4 = time.perf_counter()
        mip.dispose()
        self.history.engagement_frees.record(time.perf_counter() - t4, msize)
        if found.team_of is not None and found.objective > best_obj:
            best, best_obj = found.team_of, found.objective
            if not found.proven_optimal:
                res_p = self._polish(problem, best, stop, pace)
                stats["final_polish_moves"] = res_p.rounds
                if res_p.objective > best_obj:
                    best, best_obj = res_p.team_of, res_p.objective
        hit = found.proven_optimal or found.team_of is not None
        self.history.record_search(key, hit, probing)
        if probing:
            stats["search_probe"] = True
        if "search_build_ms" in found.stats:
            self.history.record_search_build(key[0], found.stats["search_build_ms"] / 1e3)
        stats["search_total_ms"] = round((time.perf_counter() - t3) * 1e3, 3)
        # SCIP finished the whole engagement MIP: its answer, or (nothing better under the objective
        # limit) the polished incumbent, is the optimum — same proof as the exact solver's
        return answer(best, "optimal" if found.proven_optimal else "feasible")


def _too_tight_to_probe(history: SolveHistory, problem: Problem, budget: Budget, method: str = "") -> bool:
    """A probe due where repair first applies (the pipeline would leave tabu search fewer than
    :data:`REPAIR_MAX_ITERATIONS`) is not run: there the surrogate stage, polishing and a search that
    has not been paying cost the whole answer. The search, not paying, is then never probed again at
    that budget."""
    expected = history.repair_iterations(problem, budget, time.perf_counter(), method, FINISH_RESERVE_S, SURROGATE_MIN_S)
    return expected is not None and expected < REPAIR_MAX_ITERATIONS


def _add(stats: dict, **values) -> None:
    """Add to counters in ``stats`` (a stage that runs twice in one solve reports both runs)."""
    for k, v in values.items():
        stats[k] = round(stats.get(k, 0) + v, 3)


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


@register("mgmatch", "MGMatch: multimodal GNN prediction → surrogate MIP (SCIP) → polish → search of the engagement MIP; 100 ms default", needs_predictor=True)
def mgmatch_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="mgmatch", **options)


@register("bgcn", "BGCN baseline: bipartite-GCN prediction → surrogate MIP (SCIP) → polish → engagement-MIP search; 100 ms default", needs_predictor=True, predictor_suffix="-bgcn")
def bgcn_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="bgcn", **options)
