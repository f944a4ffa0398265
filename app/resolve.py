"""From CLI/API inputs to a Problem and a configured solver: the model and predictor lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mgmatch.core.engagement import load_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import resolve_model
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Solver, method_info, methods
from mgmatch.solvers.base import make_solver as build_solver


def build_problem(obj: Any, engagement: Path | str | None = None) -> Problem:
    """Validate an instance object and bind it to its engagement model."""
    inst = parse_instance(obj)
    override = load_engagement(engagement) if engagement is not None else None
    name, model = resolve_model(inst, override)
    if override is not None and override.name is None:
        name = None  # an anonymous model file: no shipped predictor belongs to it
    return Problem(inst, model, model_name=name)


def make_solver(method: str, problem: Problem, predictor: str | None = None, seed: int = 0,
                objective: str | None = None) -> Solver:
    """A solver for ``method`` built by the one solver factory (:func:`mgmatch.solvers.base.make_solver`).

    A method registered with ``needs_predictor`` gets ``predictor`` (a shipped name or an ONNX
    file) or else the predictor shipped for the problem's engagement model; a seeded method gets
    ``seed``.

    Raises:
        InvalidInput: Unknown method, no predictor for a method that needs one, ``predictor`` for
            a method that uses none, a predictor that cannot score ``problem`` (another team count,
            embedding width or engagement model than it was trained for), or ``objective`` for a
            method other than local-search.
    """
    info = method_info(method)
    if objective is not None and method != "local-search":
        raise InvalidInput("objective", f"--objective applies to local-search only, not {method!r}")
    if predictor is not None and not info.needs_predictor:
        users = ", ".join(m for m in methods() if method_info(m).needs_predictor)
        raise InvalidInput("predictor", f"--predictor applies to the methods that use one ({users}), not {method!r}")
    loaded = None
    if info.needs_predictor:
        name = info.predictor_name(problem.model_name, predictor)
        if name is None:
            raise InvalidInput("predictor", f"method {method!r} needs --predictor when the engagement model is a file")
        from mgmatch.models.runtime import load_predictor

        loaded = load_predictor(name)
        # refused here, not at its first predict: the solver may answer a small pool without asking it
        loaded.check(problem)
    opts: dict[str, Any] = {} if objective is None else {"objective": objective}
    return build_solver(method, predictor=loaded, seed=seed, **opts)
