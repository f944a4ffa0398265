"""A/B experiments by config: weighted arms, chosen by a stable hash of a configurable key.

The same key always lands in the same arm (SHA-256 of ``salt:experiment:key``, not Python's
salted ``hash``), across processes and restarts. With ``key: player`` the arm is fixed per ticket
at ingest (hashed on its first player id) and the matchmaker only matches tickets of one arm
together; ``key: match`` picks an arm per match; ``key: header`` hashes a request header on
``/v1/solve`` (falling back to the instance's sorted player ids).
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass

from .config import ArmConfig, ExperimentConfig, PoolConfig, ServiceConfig


def bucket(text: str) -> float:
    """A stable number in [0, 1) for ``text``."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Experiment:
    config: ExperimentConfig

    @property
    def name(self) -> str:
        return self.config.name

    def arm_for(self, key: str) -> ArmConfig:
        arms = self.config.arms
        total = sum(a.weight for a in arms)
        edges, acc = [], 0.0
        for a in arms:
            acc += a.weight / total
            edges.append(acc)
        x = bucket(f"{self.config.salt}:{self.config.name}:{key}")
        return arms[min(bisect.bisect_right(edges, x), len(arms) - 1)]


class Experiments:
    """Which experiment covers a pool (at most one), and what an arm changes."""

    def __init__(self, config: ServiceConfig):
        self._by_pool: dict[str, Experiment] = {}
        self._global: Experiment | None = None
        for e in config.experiments:
            exp = Experiment(e)
            if not e.pools:
                self._global = self._global or exp
            for p in e.pools:
                self._by_pool.setdefault(p, exp)

    def for_pool(self, pool: str | None) -> Experiment | None:
        if pool is not None and pool in self._by_pool:
            return self._by_pool[pool]
        return self._global


@dataclass(frozen=True)
class Plan:
    """What one solve runs: the pool's settings with the arm's overrides applied."""

    method: str
    fallback_method: str
    time_budget_ms: float
    engagement_model: str | None
    predictor: str | None
    arm: str | None


def plan_for(pool: PoolConfig | None, arm: ArmConfig | None, *, default_method: str = "exact",
             default_budget_ms: float = 100.0, default_fallback: str = "surrogate") -> Plan:
    method = pool.method if pool else default_method
    fallback = pool.fallback_method if pool else default_fallback
    budget = pool.time_budget_ms if pool else default_budget_ms
    model = pool.engagement_model if pool else None
    predictor = pool.predictor if pool else None
    if arm is not None:
        method = arm.method or method
        budget = arm.time_budget_ms or budget
        model = arm.engagement_model or model
        predictor = arm.predictor or predictor
    return Plan(method, fallback, budget, model, predictor, arm.name if arm else None)
