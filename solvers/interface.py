"""What every solver module imports: the wall-clock :class:`Budget`, the :class:`Solver` protocol and
the :func:`register` decorator that names a method.

A solver takes a :class:`~mgmatch.core.problem.Problem` and a wall-clock budget and returns a
spec :class:`~mgmatch.core.solution.Solution`. Objective and region are always computed by
``Problem.solution`` (one evaluator), and every returned assignment has passed the checker.

The lookups (:func:`~mgmatch.solvers.base.make_solver`, :func:`~mgmatch.solvers.base.method_info`, …)
live in :mod:`mgmatch.solvers.base`, above every solver module: they import the solvers to fill the
registry, and the solvers import only this module, so the imports never run in a circle.
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
    """A wall-clock budget on the ``time.perf_counter()`` clock. ``time_limit_ms=None`` means no limit.

    Solvers read it only through these helpers (no hand-written ms ↔ s conversions):
    :meth:`deadline` (the absolute instant it runs out), :meth:`remaining` (seconds left),
    :meth:`expired`, :meth:`elapsed_ms` (for the Solution's ``solve_ms``), :meth:`share` (a
    sub-budget holding a fraction of what is left, e.g. for one phase of a solve) and
    :meth:`or_default` (a limit for methods that never run unbounded).
    """

    time_limit_ms: float | None = None
    start: float = 0.0

    @staticmethod
    def of(time_limit_ms: float | None) -> Budget:
        """A budget of ``time_limit_ms`` starting now."""
        return Budget(time_limit_ms, time.perf_counter())

    @property
    def unlimited(self) -> bool:
        return self.time_limit_ms is None

    def elapsed_ms(self, now: float | None = None) -> float:
        """Milliseconds since the budget started."""
        return ((time.perf_counter() if now is None else now) - self.start) * 1e3

    def deadline(self, default_ms: float | None = None) -> float | None:
        """The ``perf_counter()`` instant the budget runs out.

        Args:
            default_ms: The limit to assume when the budget has none (``None``: no deadline).
        """
        limit_ms = self.time_limit_ms if self.time_limit_ms is not None else default_ms
        return None if limit_ms is None else self.start + limit_ms / 1e3

    def remaining(self, now: float | None = None) -> float | None:
        """Seconds left (≥ 0), or ``None`` without a limit."""
        end = self.deadline()
        if end is None:
            return None
        return max(0.0, end - (time.perf_counter() if now is None else now))

    def left_s(self) -> float | None:
        """Seconds left (≥ 0), or ``None`` without a limit (same as :meth:`remaining`)."""
        return self.remaining()

    def expired(self, now: float | None = None) -> bool:
        left = self.remaining(now)
        return left is not None and left <= 0.0

    def share(self, fraction: float, now: float | None = None) -> Budget:
        """A budget starting ``now`` that holds ``fraction`` (0–1) of the time left; unlimited stays unlimited."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"a budget share is a fraction in [0, 1], got {fraction!r}")
        now = time.perf_counter() if now is None else now
        left = self.remaining(now)
        return Budget(None if left is None else left * fraction * 1e3, now)

    def or_default(self, default_ms: float) -> Budget:
        """This budget, or one of ``default_ms`` from the same start when it has no limit."""
        return self if self.time_limit_ms is not None else Budget(default_ms, self.start)


class Solver(Protocol):
    name: str

    def solve(self, problem: Problem, budget: Budget) -> Solution: ...


@dataclass(frozen=True)
class MethodInfo:
    """What a registered method is and what it needs, as declared by its ``@register`` line.

    Attributes:
        name: The method name (``--method``, a pool's ``method``).
        description: One line for ``mgmatch solve --help``.
        factory: Builds the solver from keyword options.
        needs_predictor: The solver takes a solution predictor (``predictor=``) and cannot run
            without one.
        seeded: The solver is randomized and takes ``seed=``.
        predictor_suffix: The shipped predictor for engagement model ``<model>`` is named
            ``<model><predictor_suffix>`` (mgmatch → ``3v3``, bgcn → ``3v3-bgcn``).
    """

    name: str
    description: str
    factory: Callable[..., Solver]
    needs_predictor: bool = False
    seeded: bool = False
    predictor_suffix: str = ""

    def predictor_name(self, model_name: str | None, explicit: str | None = None) -> str | None:
        """The predictor this method loads: ``explicit`` when given, else the one named after the model.

        Args:
            model_name: The problem's engagement model name (``None`` for an anonymous model file).
            explicit: A predictor named by the caller (``--predictor``, a pool's ``predictor``).

        Returns:
            The predictor name, or ``None`` when the method needs none or nothing names one.
        """
        if not self.needs_predictor:
            return None
        if explicit:
            return explicit
        return None if model_name is None else f"{model_name}{self.predictor_suffix}"


_REGISTRY: dict[str, MethodInfo] = {}


def register(name: str, description: str, *, needs_predictor: bool = False, seeded: bool = False,
             predictor_suffix: str = "") -> Callable:
    """Decorator for a solver class or factory: make it available as ``--method name``.

    Args:
        name: The method name.
        description: One line for ``mgmatch solve --help``.
        needs_predictor: The factory takes ``predictor=`` and fails without one.
        seeded: The factory takes ``seed=`` (every randomized method must).
        predictor_suffix: Suffix of the predictor name after the engagement model's name.
    """
    if predictor_suffix and not needs_predictor:
        raise ValueError(f"method {name!r}: predictor_suffix without needs_predictor")

    def deco(factory: Callable[..., Solver]) -> Callable[..., Solver]:
        _REGISTRY[name] = MethodInfo(name, description, factory, needs_predictor, seeded, predictor_suffix)
        return factory

    return deco
