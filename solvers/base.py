"""The one protocol every method implements, and the registry that names them.

A solver takes a :class:`~mgmatch.core.problem.Problem` and a wall-clock budget and returns a
spec :class:`~mgmatch.core.solution.Solution`. Objective and region are always computed by
``Problem.solution`` (one evaluator), and every returned assignment has passed the checker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution


@dataclass(frozen=True)
class Budget:
    """A wall-clock budget. ``time_limit_ms=None`` means no limit."""

    time_limit_ms: float | None = None
    start: float = 0.0

    @staticmethod
    def of(time_limit_ms: float | None) -> Budget:
        return Budget(time_limit_ms, time.perf_counter())

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1e3

    def left_s(self) -> float | None:
        if self.time_limit_ms is None:
            return None
        return max(0.0, self.time_limit_ms / 1e3 - (time.perf_counter() - self.start))

    def expired(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0.0


class Solver(Protocol):
    name: str

    def solve(self, problem: Problem, budget: Budget) -> Solution: ...


_REGISTRY: dict[str, tuple[Callable[..., Solver], str]] = {}


def register(name: str, description: str) -> Callable:
    """Class decorator: make a solver available as ``--method name``."""

    def deco(factory: Callable[..., Solver]) -> Callable[..., Solver]:
        _REGISTRY[name] = (factory, description)
        return factory

    return deco


def methods() -> dict[str, str]:
    """Method name → one-line description, for ``mgmatch solve --help``."""
    _load_all()
    return {k: v[1] for k, v in sorted(_REGISTRY.items())}


def get_solver(name: str, **options) -> Solver:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(name)
    return _REGISTRY[name][0](**options)


def _load_all() -> None:
    # importing the modules registers their solvers
    from . import registry  # noqa: F401
