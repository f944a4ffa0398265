"""The solution format (``mgmatch-solution/v1``) and conversions to and from assignments."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidInput, from_pydantic, join
from .instance import Instance

SOLUTION_FORMAT = "mgmatch-solution/v1"
Status = Literal["optimal", "feasible", "infeasible", "no_solution"]
STATUSES = ("optimal", "feasible", "infeasible", "no_solution")


class Solution(BaseModel):
    """One answer to an instance. ``teams`` lists player ids in team order (empty lists when none)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="allow")

    format: str = SOLUTION_FORMAT
    status: Status
    teams: list[list[str]]
    objective: float | None = Field(default=None, description="Engagement of the assignment.")
    method: str | None = None
    time_ms: float | None = None
    region: str | None = None
    bound: float | None = Field(default=None, description="Best proven upper bound on the engagement.")
    gap: float | None = Field(default=None, description="(bound − objective) / max(|objective|, 1e-9).")
    arm: str | None = None

    @property
    def has_assignment(self) -> bool:
        return any(self.teams)

    def to_json(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    return max(0.0, (bound - objective) / max(abs(objective), 1e-9))


def parse_solution(obj: Any, where: str = "solution") -> Solution:
    if not isinstance(obj, dict):
        raise InvalidInput(where, "a solution must be a JSON object")
    try:
        sol = Solution.model_validate(obj)
    except ValidationError as err:
        raise from_pydantic(err, where) from None
    if sol.format != SOLUTION_FORMAT:
        got = sol.format if len(sol.format) <= 40 else sol.format[:40] + "…"
        raise InvalidInput(join(where, ["format"]), f"expected {SOLUTION_FORMAT!r}, got {got!r}")
    return sol


def team_of_from_teams(inst: Instance, teams: list[list[str]], where: str = "solution.teams") -> np.ndarray:
    """Ids per team → team index per player (−1 for the bench)."""
    if len(teams) != inst.teams:
        raise InvalidInput(where, f"expected {inst.teams} teams, got {len(teams)}")
    t = np.full(inst.n, -1, dtype=np.int64)
    for j, members in enumerate(teams):
        for k, pid in enumerate(members):
            if pid not in inst.index:
                raise InvalidInput(f"{where}[{j}][{k}]", f"unknown player id {pid!r}")
            i = inst.index[pid]
            if t[i] >= 0:
                raise InvalidInput(f"{where}[{j}][{k}]", f"player {pid!r} appears twice")
            t[i] = j
    return t


def teams_from_team_of(inst: Instance, team_of: np.ndarray) -> list[list[str]]:
    """Team index per player → ids per team, in player order within a team."""
    ids = inst.ids
    return [[ids[i] for i in np.flatnonzero(np.asarray(team_of) == j)] for j in range(inst.teams)]
