"""The one protocol every method implements, and the registry that names them.

A solver takes a :class:`~mgmatch.core.problem.Problem` and a wall-clock budget and returns a
spec :class:`~mgmatch.core.solution.Solution`. Objective and region are always computed by
``Problem.solution`` (one evaluator), and every returned assignment has passed the checker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mgmatch.core.errors import InvalidInput
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


def methods() -> dict[str, str]:
    """Method name → one-line description, for ``mgmatch solve --help``."""
    _load_all()
    return {k: v.description for k, v in sorted(_REGISTRY.items())}


def method_info(name: str, field: str = "method") -> MethodInfo:
    """The registration of method ``name``.

    Args:
        name: A method name.
        field: The input field to name in the error (e.g. ``solve.method`` in a config).

    Raises:
        InvalidInput: ``name`` is not a registered method.
    """
    _load_all()
    info = _REGISTRY.get(name)
    if info is None:
        raise InvalidInput(field, f"unknown method {name!r}; expected one of {', '.join(sorted(_REGISTRY))}")
    return info


def make_solver(method: str, *, predictor: Any = None, seed: int = 0, field: str = "method",
                **options: Any) -> Solver:
    """The one factory the CLI and the service build solvers with.

    The method's registration decides what it receives: ``predictor`` only when it needs one,
    ``seed`` only when it is seeded; ``options`` go to the solver as they are.

    Args:
        method: A registered method name.
        predictor: A loaded solution predictor (an object with ``predict(problems)``); required
            by methods registered with ``needs_predictor=True``, ignored by the others.
        seed: The seed of a randomized method.
        field: The input field that named the method, for errors.
        **options: Further solver options (e.g. ``objective`` for local-search).

    Raises:
        InvalidInput: Unknown method, or a predictor is needed and none was given.
    """
    info = method_info(method, field)
    if info.needs_predictor:
        if predictor is None:
            raise InvalidInput("predictor", f"method {method!r} needs a solution predictor; none was given")
        options["predictor"] = predictor
    if info.seeded:
        options["seed"] = seed
    return info.factory(**options)


def get_solver(name: str, **options) -> Solver:
    """The solver of method ``name`` built from ``options`` exactly as given (no declared defaults).

    Raises:
        KeyError: ``name`` is not a registered method.
    """
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(name)
    return _REGISTRY[name].factory(**options)


def _load_all() -> None:
    # importing the modules registers their solvers
    from . import registry  # noqa: F401
