"""Policy ``immediate``: solve as soon as the waiting players can fill one match."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import BasePolicy, pop_base_params, reject_unknown
from .contract import Decision, PoolShape, Waiting, total_players


@dataclass
class Immediate(BasePolicy):
    """Solve as soon as the waiting players can fill one match."""

    name: str = "immediate"

    @classmethod
    def from_params(cls, params: dict) -> Immediate:
        base = pop_base_params(params)
        reject_unknown("immediate", params)
        return cls(**base)

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        self.check_fits(shape)
        have = total_players(waiting)
        if have < shape.match_players:
            return Decision(False, reason=f"{have} of {shape.match_players} players waiting")
        cands = self.select(waiting, now)
        return self.decision(cands, shape, now, f"{have} players waiting ≥ {shape.match_players}")
