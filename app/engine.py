"""One solve as the service runs it: encode, predict (maybe), solve under the budget, fall back.

Stages are timed into ``mgmatch_stage_duration_seconds`` (encode, inference, solve, end_to_end).
A method that needs a predictor (``mgmatch``, ``bgcn``) gets it through a deadline: when the
predictor is missing, failing or later than ``PREDICT_SHARE`` of the budget, the solve falls back
to the plan's model-free ``fallback_method`` within the same deadline, counts
``mgmatch_predictor_fallback_total`` and says so on the Solution (``fallback``: the reason).
With a ``capture`` (:mod:`mgmatch.app.capture`), the solved pool is offered to it after the
solve, outside the budget (a draw and a non-blocking put; the writing runs on its own thread).
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution
from mgmatch.solvers.base import Budget, make_solver, method_info, methods
from mgmatch.solvers.batch import solve_joint
from mgmatch.solvers.policy import lobby_path

from . import metrics
from .ab import Plan
from .models_hub import EngagementModels, PredictorDown, Predictors

log = logging.getLogger("mgmatch.engine")

#: the predictor must answer within this share of the budget, else the solve falls back
PREDICT_SHARE = 0.5
#: the method label of the matches of a joint batch solve (:meth:`Engine.solve_batch`)
BATCH_METHOD = "joint"


class DeadlinePredictor:
    """What a solver sees: the shared (batching or remote) predictor behind a per-solve deadline.

    ``labels`` (pool, method, arm): each call's time is observed as the ``inference`` stage; None for
    calls that are no solve's (a start-up warm-up, :meth:`mgmatch.app.runtime.Runtime.prepare_solvers`)."""

    def __init__(self, backend: Any, timeout_s: float, labels: tuple[str, str, str] | None = None):
        self.backend, self.timeout_s, self.labels = backend, timeout_s, labels
        self.version = backend.version

    @property
    def gate(self) -> dict | None:
        return getattr(self.backend, "gate", None)

    def predict(self, problems: list[Problem]):
        t0 = time.perf_counter()
        try:
            out = self.backend.predict(problems, timeout_s=self.timeout_s)
        finally:
            if self.labels is not None:
                metrics.STAGE_SECONDS.labels("inference", *self.labels).observe(time.perf_counter() - t0)
        self.version = getattr(self.backend, "version", self.version)
        return out


class Engine:
    """Binds models, predictors and solvers; thread-safe (one Engine per process)."""

    def __init__(self, engagement: EngagementModels, predictors: Predictors | Any | None,
                 default_model: str | None = None, capture: Any | None = None):
        self.engagement = engagement
        self.predictors = predictors
        self.default_model = default_model
        self.capture = capture  # mgmatch.app.capture.Capture, or None
        methods()  # import every solver module now, not inside the first solve's budget
        self._warned: dict[tuple[str, str], float] = {}

    def check_method(self, method: str, field: str = "method") -> None:
        """Raise :class:`InvalidInput` naming ``field`` unless ``method`` is registered."""
        method_info(method, field)

    def problem(self, instance: Instance, model_name: str | None) -> Problem:
        name = model_name or instance.engagement_model or self.default_model
        if name is None:
            from mgmatch.core.presets import resolve_model

            name, model = resolve_model(instance)
        else:
            try:
                model = self.engagement.get(name)
            except InvalidInput as err:
                raise InvalidInput("engagement_model", err.message) from None
        problem = Problem(instance, model, model_name=name)
        _ = problem.embeddings, problem.checker  # encode now, not inside the budget's solve
        if not lobby_path(problem):  # a large lobby is answered without the compiled rows (~0.5 s at br-100)
            _ = problem.compiled
        return problem

    def solve(self, instance: Instance, plan: Plan, pool: str, seed: int = 0, start: float | None = None) -> Solution:
        """Solve one candidate pool under ``plan``; ``start`` (perf_counter) opens the budget."""
        t0 = time.perf_counter() if start is None else start
        arm = plan.arm or metrics.NO_ARM
        info = method_info(plan.method)
        t_enc = time.perf_counter()
        with metrics.stage("encode", pool, plan.method, arm):
            problem = self.problem(instance, plan.engagement_model)
        timing = {"queued_ms": round((t_enc - t0) * 1e3, 3),
                  "encode_ms": round((time.perf_counter() - t_enc) * 1e3, 3)}
        budget = Budget(plan.time_budget_ms, t0)
        method, fallback_reason, predictor_version = plan.method, None, None
        sol: Solution | None = None
        if info.needs_predictor:
            name = info.predictor_name(problem.model_name, plan.predictor)
            try:
                if self.predictors is None:
                    raise PredictorDown("unavailable", "no predictor configured in this process")
                if name is None:
                    raise PredictorDown("unavailable", f"no predictor named for {method!r} (anonymous engagement model)")
                backend = self.predictors.get(name)
                # a network that cannot score this pool is refused before the solve: the solver may
                # answer without calling it (its gate says `gradient` at this budget), and the pool
                # would be served as `mgmatch` with nobody told its predictor is for another game
                mismatch = getattr(backend, "problem_mismatch", None)
                why = mismatch(problem) if callable(mismatch) else None
                if why is not None:
                    raise PredictorDown("error", f"predictor {name}: {why[1]}")
                left = budget.left_s()
                pred = DeadlinePredictor(backend, max(0.001, (left or 1.0) * PREDICT_SHARE), (pool, method, arm))
                solver = make_solver(method, predictor=pred)
                with metrics.stage("solve", pool, method, arm):
                    sol = solver.solve(problem, budget)
                # the solver's policy may answer without the network (enumeration, or the
                # engagement gradient when the network does not pay): then no predictor version
                used = (sol.stats or {}).get("predictor_used", pred.version)
                predictor_version = pred.version if used == pred.version else None
            except PredictorDown as err:
                fallback_reason = err.reason
                now = time.monotonic()
                if now - self._warned.get((pool, err.reason), -1e9) > 60:  # once a minute per pool and reason
                    self._warned[(pool, err.reason)] = now
                    log.warning("pool %s: %s falls back to %s: %s", pool, method, plan.fallback_method, err)
        if sol is None:
            if fallback_reason is not None:
                metrics.FALLBACKS.labels(pool, plan.method, fallback_reason).inc()
                method = plan.fallback_method
            solver = make_solver(method, seed=seed)
            with metrics.stage("solve", pool, method, arm):
                sol = solver.solve(problem, budget)
        extra: dict[str, Any] = {"arm": plan.arm, "engagement_model": problem.model_name,
                                 "model_version": predictor_version or self.engagement.version(problem.model_name)}
        if fallback_reason is not None:
            extra["fallback"] = fallback_reason
        extra["stats"] = {**timing, **(getattr(sol, "stats", None) or {})}
        sol = sol.model_copy(update=extra)
        metrics.record_solution(pool, method, arm, sol.status, sol.objective, sol.gap)
        metrics.STAGE_SECONDS.labels("end_to_end", pool, method, arm).observe(time.perf_counter() - t0)
        if self.capture is not None:
            self.capture.offer(pool, instance, sol)
        return sol


    def solve_batch(self, instance: Instance, plan: Plan, pool: str, matches: int, seed: int = 0,
                    start: float | None = None) -> list[Solution]:
        """Several disjoint matches of one candidate pool in one joint solve (:mod:`mgmatch.solvers.batch`),
        with ``matches × plan.time_budget_ms`` (what ``matches`` one-at-a-time solves would get). Model-free:
        the plan's method and predictor are not used; each Solution's method is ``joint``. Empty when
        no match was found."""
        t0 = time.perf_counter() if start is None else start
        arm = plan.arm or metrics.NO_ARM
        with metrics.stage("encode", pool, BATCH_METHOD, arm):
            problem = self.problem(instance, plan.engagement_model)
        enc_ms = round((time.perf_counter() - t0) * 1e3, 3)
        with metrics.stage("solve", pool, BATCH_METHOD, arm):
            res = solve_joint(problem, matches, Budget(plan.time_budget_ms * matches, t0), seed=seed)
        extra: dict[str, Any] = {"arm": plan.arm, "engagement_model": problem.model_name,
                                 "model_version": self.engagement.version(problem.model_name)}
        out = []
        for sol in res.solutions(problem):
            sol = sol.model_copy(update={**extra, "stats": {"encode_ms": enc_ms, **(sol.stats or {})}})
            metrics.record_solution(pool, BATCH_METHOD, arm, sol.status, sol.objective, sol.gap)
            out.append(sol)
        metrics.STAGE_SECONDS.labels("end_to_end", pool, BATCH_METHOD, arm).observe(time.perf_counter() - t0)
        return out


def seed_of(text: str) -> int:
    """A stable seed from a match or request id."""
    return zlib.crc32(text.encode())
