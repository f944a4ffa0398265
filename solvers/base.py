"""The registry's lookups: which methods exist, what each needs, and the one factory that builds them.

The types a solver implements and the :func:`register` decorator live in
:mod:`mgmatch.solvers.interface` (re-exported here for callers); this module sits above every solver
module and imports them (:mod:`mgmatch.solvers.registry`) on the first lookup, so that each registers
its method name.
"""

from __future__ import annotations

from typing import Any

from mgmatch.core.errors import InvalidInput

from .interface import _REGISTRY, Budget, MethodInfo, Solver, register

__all__ = ["Budget", "MethodInfo", "Solver", "get_solver", "make_solver", "method_info", "methods", "register"]


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
