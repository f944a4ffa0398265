"""A :class:`Problem` binds an instance to its engagement model, with everything solvers share.

Built once per request: player embeddings (constant per instance, paper §4.1), the compiled
standard form and the checker are computed lazily and cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .checker import Checker
from .compiler import Compiled, compile_instance
from .engagement import EngagementModel
from .errors import InvalidInput
from .instance import Instance
from .solution import Solution, Status, relative_gap, teams_from_team_of


@dataclass
class Problem:
    instance: Instance
    model: EngagementModel
    model_name: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        inst, m = self.instance, self.model
        if inst.teams != m.teams:
            raise InvalidInput("teams", f"the engagement model scores {m.teams} teams, the instance has {inst.teams}")
        dim = len(inst.players[0].features)
        if dim != m.feature_dim:
            raise InvalidInput("players[0].features", f"expected {m.feature_dim} numbers (the engagement model's feature_dim), got {dim}")

    @cached_property
    def embeddings(self) -> np.ndarray:
        """Player embeddings [N, E]."""
        return self.model.embed(self.instance.features())

    @cached_property
    def compiled(self) -> Compiled:
        return compile_instance(self.instance)

    @cached_property
    def checker(self) -> Checker:
        return Checker(self.instance)

    def objective(self, team_of: np.ndarray) -> float:
        return float(self.model.evaluate(self.embeddings, np.asarray(team_of)))

    def objectives(self, team_of: np.ndarray) -> np.ndarray:
        return self.model.evaluate(self.embeddings, np.asarray(team_of).reshape(-1, self.instance.n))

    def solution(self, team_of: np.ndarray | None, status: Status, method: str, time_ms: float,
                 bound: float | None = None, **extra) -> Solution:
        """Build a spec Solution; the objective and region are computed here, never by a solver."""
        if team_of is None:
            teams: list[list[str]] = [[] for _ in range(self.instance.teams)]
            return Solution(status=status, teams=teams, method=method, time_ms=round(time_ms, 3),
                            bound=bound, **extra)
        obj = self.objective(team_of)
        if status == "optimal" and bound is None:
            bound = obj
        return Solution(status=status, teams=teams_from_team_of(self.instance, team_of), objective=obj,
                        method=method, time_ms=round(time_ms, 3), region=self.checker.region(team_of),
                        bound=bound, gap=relative_gap(obj, bound), **extra)
