"""Wiring: settings + config → store, models, engine, experiments, matchmakers. Built once per process."""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field

from mgmatch.core.errors import InvalidInput

from .ab import Experiments
from .config import ServiceConfig, load_config
from .engine import Engine
from .matchmaker import JobRunner, Matchmaker
from .models_hub import EngagementModels, Predictors
from .settings import Settings
from .store import Store, make_store

log = logging.getLogger("mgmatch.runtime")


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
        engine = Engine(engagement, predictors, config.default_engagement_model)
        for k, p in enumerate(config.pools):
            engine.check_method(p.method, f"pools[{k}].method")
            engine.check_method(p.fallback_method, f"pools[{k}].fallback_method")
            if p.engagement_model is not None:
                try:
                    model = engagement.get(p.engagement_model)
                except InvalidInput as err:
                    raise InvalidInput(f"pools[{k}].engagement_model", err.message) from None
                if model.teams != p.teams:
                    raise InvalidInput(f"pools[{k}].engagement_model",
                                       f"model {p.engagement_model!r} scores {model.teams} teams, the pool has {p.teams}")
                p.feature_dim = model.feature_dim
        engine.check_method(config.solve.method, "solve.method")
        engine.check_method(config.solve.fallback_method, "solve.fallback_method")
        for e in config.experiments:
            for a in e.arms:
                if a.method is not None:
                    engine.check_method(a.method, f"experiments[{e.name}].arms[{a.name}].method")
        experiments = Experiments(config)
        runner = JobRunner({p.name: p for p in config.pools}, store, engine, experiments)
        return Runtime(settings, config, store, engine, experiments, runner, predictors)

    def warm(self) -> dict[str, str]:
        """Load every predictor a pool or an arm will ask for now, not inside the first solve's budget."""
        from .models_hub import PREDICTOR_METHODS, PredictorDown

        loaded: dict[str, str] = {}
        if self.predictors is None:
            return loaded
        wanted = []
        for p in self.config.pools:
            methods = [(p.method, p.predictor, p.engagement_model)]
            exp = self.experiments.for_pool(p.name)
            if exp is not None:
                methods += [(a.method or p.method, a.predictor or p.predictor, a.engagement_model or p.engagement_model)
                            for a in exp.config.arms]
            for method, predictor, model in methods:
                if method in PREDICTOR_METHODS and (predictor or model):
                    wanted.append(predictor or f"{model}{PREDICTOR_METHODS[method]}")
        for name in dict.fromkeys(wanted):
            try:
                loaded[name] = self.predictors.get(name).version
            except PredictorDown as err:
                log.warning("predictor %s not loaded (solves will fall back): %s", name, err)
        return loaded

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
            mm = Matchmaker(p, self.store, self.runner, self.experiments, tick_s=tick_s)
            mm.start()
            self.matchmakers.append(mm)
        if isinstance(self.predictors, Predictors):
            self.predictors.start_watcher()

    def stop(self) -> None:
        for mm in self.matchmakers:
            mm.stop()
        if isinstance(self.predictors, Predictors):
            self.predictors.stop()

    def readiness(self) -> tuple[bool, dict]:
        checks: dict[str, object] = {"store": self.store.ping()}
        if self.settings.embedded_workers:
            checks["matchmakers"] = all(m.alive for m in self.matchmakers) and bool(self.matchmakers)
        return all(bool(v) for v in checks.values()), checks
