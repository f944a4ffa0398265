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
        """Player embeddings [N, E].

        Raises:
            InvalidInput: naming the first player whose features the model cannot embed finitely
                (e.g. a custom model's weights overflowing on large features).
        """
        with np.errstate(over="ignore", invalid="ignore"):
            emb = self.model.embed(self.instance.features())
        bad = ~np.isfinite(emb).all(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidInput(f"players[{i}].features",
                               "the engagement model's embedding of these features is not a finite number")
        return emb

    @cached_property
    def compiled(self) -> Compiled:
        return compile_instance(self.instance)

    @cached_property
    def checker(self) -> Checker:
        return Checker(self.instance)

    def forget_solves(self) -> None:
        """Drop what solves left on this problem (``extra``, e.g. the move scorer, and the checker's
        remembered verdicts), keeping the encoding (embeddings, compiled rules, checker) that the
        service computes before a solve's budget starts: a benchmark times each method from the
        same state, as the service meets each pool once."""
        self.extra.clear()
        if "checker" in self.__dict__:  # built: a checker not built yet has nothing to forget
            self.checker.forget_verdicts()

    def objective(self, team_of: np.ndarray) -> float:
        """The engagement of one assignment.

        Raises:
            InvalidInput: (``players``) when the model's value is not finite, which features within the
                documented bounds and a sound model never produce; never a NaN objective.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            value = float(self.model.evaluate(self.embeddings, np.asarray(team_of)))
        if not np.isfinite(value):
            raise InvalidInput("players", "the engagement model's value of this assignment is not a finite number "
                                          "(features too large for the model)")
        return value

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
