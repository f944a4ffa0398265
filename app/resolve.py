"""From CLI/API inputs to a Problem and a configured solver: the model and predictor lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mgmatch.core.engagement import load_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import resolve_model
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Solver, get_solver, methods

PREDICTOR_METHODS = {"mgmatch": "", "bgcn": "-bgcn"}


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
    """A solver for ``method``; mgmatch/bgcn get the predictor shipped for the problem's model."""
    known = methods()
    if method not in known:
        raise InvalidInput("method", f"unknown method {method!r}; expected one of {', '.join(known)}")
    opts: dict[str, Any] = {}
    if method in PREDICTOR_METHODS:
        from mgmatch.models.runtime import load_predictor

        name = predictor or f"{problem.model_name}{PREDICTOR_METHODS[method]}"
        if problem.model_name is None and predictor is None:
            raise InvalidInput("predictor", f"method {method!r} needs --predictor when the engagement model is a file")
        opts["predictor"] = load_predictor(name)
    if method in ("random", "local-search", "eomm"):
        opts["seed"] = seed
    if objective is not None:
        if method != "local-search":
            raise InvalidInput("objective", f"--objective applies to local-search only, not {method!r}")
        opts["objective"] = objective
    return get_solver(method, **opts)
