"""``mgmatch solve`` and ``mgmatch check`` (spec §4)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from mgmatch.app.cli import MAX_TIME_LIMIT_MS, check_time_limit_ms, cli, emit, seed_option
from mgmatch.app.resolve import build_problem, make_solver
from mgmatch.core.instance import read_json
from mgmatch.core.solution import parse_solution, team_of_from_teams
from mgmatch.solvers.base import Budget, methods


def _method_help() -> str:
    try:
        return "Method: " + "; ".join(f"{k} ({v})" for k, v in methods().items())
    except Exception:  # pragma: no cover - help must render even while a solver module is broken
        return "Solution method."


@cli.command("solve", help="Solve one instance; prints a Solution (spec §2) as JSON.")
def solve_cmd(
    instance: Annotated[Path, typer.Argument(help="Instance file (mgmatch-instance/v1).")],
    method: Annotated[str, typer.Option("--method", "-m", help=_method_help())] = "exact",
    engagement: Annotated[Path | None, typer.Option(help="Engagement model file (mgmatch-engagement/v1).")] = None,
    time_limit_ms: Annotated[float | None, typer.Option("--time-limit-ms", help=f"Wall-clock budget in ms (> 0, ≤ {MAX_TIME_LIMIT_MS:,.0f}: a day).")] = None,
    predictor: Annotated[str | None, typer.Option(help="Predictor for mgmatch/bgcn: a shipped name or an ONNX file.")] = None,
    seed: Annotated[int, seed_option(help="Seed for randomized methods.")] = 0,
    objective: Annotated[str | None, typer.Option(help="local-search objective: engagement (default) or awesomenauts.")] = None,
) -> None:
    check_time_limit_ms(time_limit_ms)
    problem = build_problem(read_json(instance), engagement)
    solver = make_solver(method, problem, predictor=predictor, seed=seed, objective=objective)
    prepare = getattr(solver, "prepare", None)
    if prepare is not None and time_limit_ms is not None:
        # a one-shot process: its first-call costs (a cold ONNX session, SCIP's first build) come
        # before the budget, as they do in a running service after its first solve
        prepare(problem)
    emit(solver.solve(problem, Budget.of(time_limit_ms)).to_json())


@cli.command("check", help="Check a Solution against an instance's rules; exit 0 if feasible, 1 if not.")
def check_cmd(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    solution: Annotated[Path, typer.Argument(help="Solution file (mgmatch-solution/v1).")],
    engagement: Annotated[Path | None, typer.Option(help="Engagement model file.")] = None,
) -> None:
    problem = build_problem(read_json(instance), engagement)
    sol = parse_solution(read_json(solution), str(solution))
    team_of = team_of_from_teams(problem.instance, sol.teams, f"{solution}:teams")
    violations = problem.checker.violations(team_of)
    has_teams = bool((np.asarray(team_of) >= 0).any())
    objective = problem.objective(team_of) if has_teams else None
    emit({"feasible": not violations, "violations": violations, "objective": objective})
    sys.exit(0 if not violations else 1)
