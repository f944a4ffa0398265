"""Wiring: settings + config → store, models, engine, experiments, matchmakers. Built once per process."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from mgmatch.core.errors import InvalidInput

from .ab import Experiments
from .capture import Capture
from .config import ServiceConfig, load_config
from .engine import DeadlinePredictor, Engine
from .learning import Learning
from .matchmaker import JobRunner, Matchmaker
from .models_hub import EngagementModels, Predictors
from .settings import Settings
from .store import Store, make_store

log = logging.getLogger("mgmatch.runtime")


class SolvePoolFull(Exception):
    """Every solve thread is busy and the queue is full (HTTP 503 with Retry-After, gRPC UNAVAILABLE)."""


class SolvePool:
    """The threads that run synchronous solves (/v1/solve, gRPC Solve): ``threads`` run, ``queue`` wait.

    A solve beyond ``threads + queue`` is refused at once with :class:`SolvePoolFull` rather than
    queued without bound. Being its own executor, it never takes a thread from anyio's default pool,
    which ``/readyz`` and the store calls use: however many solves are in flight, the replica stays
    ready.
    """

    def __init__(self, threads: int, queue: int):
        self.threads, self.capacity = threads, threads + queue
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="solve")
        self._lock = threading.Lock()
        self._admitted = 0

    @property
    def in_flight(self) -> int:
        """Solves running or waiting now."""
        return self._admitted

    def submit(self, fn: Callable[..., Any], *args) -> Future:
        """Run ``fn(*args)`` on a solve thread; raises :class:`SolvePoolFull` when none may wait."""
        with self._lock:
            if self._admitted >= self.capacity:
                raise SolvePoolFull(f"{self._admitted} solves in flight ({self.threads} running, the rest queued)")
            self._admitted += 1
        try:
            fut = self._pool.submit(fn, *args)
        except BaseException:
            self._release()
            raise
        fut.add_done_callback(lambda _: self._release())
        return fut

    def _release(self) -> None:
        with self._lock:
            self._admitted -= 1

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class StoreProbe:
    """The store's ping on its own thread, one at a time, answered within a bounded time.

    A ping that hangs (Redis unreachable: connect and socket timeouts of seconds) keeps its thread,
    but every caller gets its answer after ``timeout_s`` at most: not ready. Callers arriving while
    a ping is in flight share it instead of queueing more.
    """

    def __init__(self, ping: Callable[[], bool], timeout_s: float):
        self.ping, self.timeout_s = ping, timeout_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-probe")
        self._lock = threading.Lock()
        self._inflight: Future | None = None

    def start(self) -> Future:
        """The ping in flight, or a new one."""
        with self._lock:
            if self._inflight is None or self._inflight.done():
                self._inflight = self._pool.submit(self._safe_ping)
            return self._inflight

    def _safe_ping(self) -> bool:
        try:
            return bool(self.ping())
        except Exception as err:  # an unreachable store is "not ready", never an error of /readyz
            log.debug("store ping failed: %s", err)
            return False

    def check(self) -> bool:
        """Blocking: the store answered a ping within the timeout."""
        try:
            return bool(self.start().result(timeout=self.timeout_s))
        except (FutureTimeout, CancelledError):
            return False

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _engagement_for(engagement: EngagementModels, name: str, where: str, pool=None, arm: bool = False):
    """The engagement model ``name``, loaded now; InvalidInput naming ``where`` unless it loads and scores
    ``pool``'s matches: its number of teams, and for an A/B arm the features the pool's tickets carry."""
    try:
        model = engagement.get(name)
    except InvalidInput as err:
        # a pool's own file already names its field (….path, ….sha256); keep that
        raise InvalidInput(err.field if err.field.startswith(where) else where, err.message) from None
    if pool is not None and model.teams != pool.teams:
        the_pool = f"pool {pool.name!r}" if arm else "the pool"
        raise InvalidInput(where, f"model {name!r} scores {model.teams} teams, {the_pool} has {pool.teams}")
    if arm and pool.feature_dim is not None and model.feature_dim != pool.feature_dim:
        raise InvalidInput(where, f"model {name!r} takes {model.feature_dim} features, the tickets of pool {pool.name!r} "
                                  f"carry {pool.feature_dim} (its model {pool.engagement_model!r})")
    return model


#: seconds a start-up warm-up waits for a predictor's answer (no solve's budget is running)
WARM_PREDICT_TIMEOUT_S = 5.0


@dataclass
class Runtime:
    settings: Settings
    config: ServiceConfig
    store: Store
    engine: Engine
    experiments: Experiments
    runner: JobRunner
    predictors: Predictors | None
    matchmakers: list[Matchmaker] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    solves: SolvePool | None = None
    probe: StoreProbe | None = None
    #: (pool, method) pairs the start-up warm-up prepared (None: not run yet)
    prepared: list[tuple[str, str]] | None = None
    #: the webhook deliverer (:mod:`mgmatch.app.webhooks`) of an embedded runtime with webhooks configured
    deliverer: Any = None
    #: the learning pools (spec §7), None when no pool learns
    learning: Learning | None = None

    def __post_init__(self) -> None:
        if self.solves is None:
            self.solves = SolvePool(self.settings.solve_threads, self.settings.solve_queue)
        if self.probe is None:
            self.probe = StoreProbe(self.store.ping, self.settings.readyz_timeout_s)

    @property
    def pools(self):
        return {p.name: p for p in self.config.pools}

    @staticmethod
    def build(settings: Settings, config: ServiceConfig | None = None, store: Store | None = None,
              predictors=None) -> Runtime:
        """Validate everything up front: unknown methods or models stop the process here."""
        config = config or load_config(settings.config)
        store = store or make_store(settings)
        engagement = EngagementModels(config.models)
        if predictors is None:
            predictors = Predictors(config.models)
        engine = Engine(engagement, predictors, config.default_engagement_model, capture=Capture.from_config(config))
        for k, p in enumerate(config.pools):
            engine.check_method(p.method, f"pools[{k}].method")
            engine.check_method(p.fallback_method, f"pools[{k}].fallback_method")
            if p.engagement_model is not None:
                model = _engagement_for(engagement, p.engagement_model, f"pools[{k}].engagement_model", p)
                p.feature_dim = model.feature_dim
        engine.check_method(config.solve.method, "solve.method")
        engine.check_method(config.solve.fallback_method, "solve.fallback_method")
        if config.default_engagement_model is not None:
            _engagement_for(engagement, config.default_engagement_model, "default_engagement_model")
        experiments = Experiments(config)
        for i, e in enumerate(config.experiments):
            # the pools this experiment's arms apply to (a pool takes the first experiment naming it)
            covered = [p for p in config.pools if (x := experiments.for_pool(p.name)) is not None and x.config is e]
            for j, a in enumerate(e.arms):
                if a.method is not None:
                    engine.check_method(a.method, f"experiments[{i}].arms[{j}].method")
                if a.engagement_model is not None:
                    where = f"experiments[{i}].arms[{j}].engagement_model"
                    _engagement_for(engagement, a.engagement_model, where)
                    for p in covered:
                        _engagement_for(engagement, a.engagement_model, where, p, arm=True)
                if a.dispatch is not None:
                    where = f"experiments[{i}].arms[{j}].dispatch"
                    if e.key != "player":
                        # the matchmaker groups tickets by arm only under key: player; with match or
                        # header the arm is drawn after the dispatch decision, so the pool's policy decides
                        raise InvalidInput(where, f"an arm's dispatch policy needs key: player (the experiment has "
                                                  f"key: {e.key}, where the arm is drawn after the dispatch decision)")
                    if "max_candidates" in a.dispatch.params:
                        raise InvalidInput(f"{where}.params.max_candidates", "set max_candidates on the pool instead")
                    for p in covered:
                        try:
                            a.dispatch.build(p.max_candidates)
                        except InvalidInput as err:
                            raise InvalidInput(f"{where}.params.{err.field}" if err.field else f"{where}.params",
                                               err.message) from None
        learning = Learning(config, engagement) or None  # reads each learning pool's live model
        runner = JobRunner({p.name: p for p in config.pools}, store, engine, experiments, learning=learning)
        return Runtime(settings, config, store, engine, experiments, runner, predictors, learning=learning)

    def warm(self) -> dict[str, str]:
        """Load every predictor a pool or an arm will ask for now, not inside the first solve's budget."""
        from mgmatch.solvers.base import method_info
        from mgmatch.solvers.moves import warm as warm_moves

        from .models_hub import PredictorDown

        warm_moves()  # the local searches' compiled scorer (numba): loaded or compiled now
        loaded: dict[str, str] = {}
        if self.predictors is None:
            self._prepare_once()
            return loaded
        wanted = []
        for p in self.config.pools:
            for method, predictor, model in self._plans(p):
                name = method_info(method).predictor_name(model, predictor)
                if name is not None:
                    wanted.append(name)
        for name in dict.fromkeys(wanted):
            try:
                loaded[name] = self.predictors.get(name).version
            except PredictorDown as err:
                log.warning("predictor %s not loaded (solves will fall back): %s", name, err)
        self._prepare_once()
        return loaded

    def _prepare_once(self) -> None:
        """:meth:`prepare_solvers` at the first :meth:`warm` only (``serve`` warms in
        :meth:`start_embedded` and again in :meth:`settle`)."""
        if self.prepared is None:
            self.prepared = self.prepare_solvers()

    def _plans(self, p) -> list[tuple[str, Any, Any]]:
        """(method, predictor, engagement model) of a pool and of each of its A/B arms."""
        exp = self.experiments.for_pool(p.name)
        arms = [] if exp is None else [(a.method or p.method, a.predictor or p.predictor,
                                         a.engagement_model or p.engagement_model) for a in exp.config.arms]
        return [(p.method, p.predictor, p.engagement_model), *arms]

    def prepare_solvers(self) -> list[tuple[str, str]]:
        """Each pool's (and arm's) first-solve costs paid now, not inside its first real solve's budget:
        the solver's ``prepare`` (MGMatch, BGCN, ``surrogate``: the network's cold calls, SCIP's first
        model, a first tabu walk) on a rule-free warm-up pool of the pool's game (its teams and sizes,
        half as many benched candidates again, zero features). Returns the (pool, method) pairs
        prepared. A warm-up that fails (its predictor down, a model it cannot read) is logged and
        leaves the costs to the pool's first solve: it never stops the service."""
        from mgmatch.core.instance import parse_instance
        from mgmatch.solvers.base import make_solver, method_info

        done: list[tuple[str, str]] = []
        seen: set[tuple] = set()
        for p in self.config.pools:
            for method, predictor, model in self._plans(p):
                key = (method, str(predictor), str(model), p.teams, p.sizes)
                if key in seen:
                    continue
                seen.add(key)
                try:
                    info = method_info(method)
                    name = model if isinstance(model, str) else None
                    dim = p.feature_dim
                    if dim is None and (name or self.engine.default_model):
                        dim = self.engine.engagement.get(name or self.engine.default_model).feature_dim
                    if dim is None:
                        continue  # the model is resolved per instance: nothing to warm it on
                    n = min(p.max_candidates, p.match_size + max(2, p.match_size // 2))
                    obj = {"teams": p.teams, "team_sizes": list(p.sizes),
                           "players": [{"id": f"warm-{i}", "features": [0.0] * dim} for i in range(n)]}
                    if model is not None:
                        obj["engagement_model"] = model
                    problem = self.engine.problem(parse_instance(obj), None)
                    backend = None
                    if info.needs_predictor:
                        pname = info.predictor_name(problem.model_name, predictor)
                        if pname is None or self.predictors is None:
                            continue
                        backend = DeadlinePredictor(self.predictors.get(pname), WARM_PREDICT_TIMEOUT_S)
                    solver = make_solver(method, predictor=backend)
                    if hasattr(solver, "prepare"):
                        solver.prepare(problem, measure=False)
                        done.append((p.name, method))
                except Exception as err:  # noqa: BLE001 - a warm-up never stops the service
                    log.warning("pool %s: %s not prepared before its first solve: %s", p.name, method, err)
        return done

    def settle(self) -> None:
        """Load what the first requests would load, then move the whole heap out of the collector's way.

        A full (generation-2) collection walks every tracked object: with SCIP, onnxruntime, numpy,
        pydantic and FastAPI loaded that is ~50 ms with the GIL held, every few seconds under
        load — a stall on every solve in flight. ``gc.freeze()`` after start-up puts the long-lived
        start-up objects in a permanent generation that collections skip.
        """
        self.warm()
        gc.collect()
        gc.freeze()

    def start_embedded(self, tick_s: float = 0.05) -> None:
        """Run every pool's matchmaker (and its solves) as threads of this process."""
        self.warm()
        for p in self.config.pools:
            mm = Matchmaker(p, self.store, self.runner, self.experiments, tick_s=tick_s,
                            reason_after_ticks=self.settings.reason_after_ticks)
            mm.start()
            self.matchmakers.append(mm)
        from .webhooks import start_deliverer

        self.deliverer = start_deliverer(self)
        if isinstance(self.predictors, Predictors):
            self.predictors.start_watcher()
        if self.learning is not None:
            self.learning.start(self.store, refit=True)  # refits in a child process, outside the solves

    def stop(self) -> None:
        for mm in self.matchmakers:
            mm.stop()
        if self.deliverer is not None:
            self.deliverer.stop()
        if self.learning is not None:
            self.learning.stop()
        if isinstance(self.predictors, Predictors):
            self.predictors.stop()
        self.solves.shutdown()
        self.probe.shutdown()
        if self.engine.capture is not None:
            self.engine.capture.stop()

    def readiness(self, store_ok: bool | None = None) -> tuple[bool, dict]:
        """Whether this process should take traffic, and why: the store answers a ping within
        ``readyz_timeout_s`` (or ``store_ok``, when the caller probed it), the embedded matchmakers run."""
        checks: dict[str, object] = {"store": self.probe.check() if store_ok is None else store_ok}
        if self.settings.embedded_workers:
            checks["matchmakers"] = all(m.alive for m in self.matchmakers) and bool(self.matchmakers)
        return all(bool(v) for v in checks.values()), checks
