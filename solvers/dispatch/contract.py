"""The dispatch contract: what a policy sees (:class:`Waiting`, :class:`PoolShape`), what it answers
(:class:`Decision`) and the :class:`Policy` protocol. See the package docstring for the loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, Player

from ..relax import RelaxConfig, RelaxStep, relax


def player_skill(p: Player) -> float:
    """A player's skill for dispatch decisions (a missing skill counts as 0)."""
    return float(p.skill) if p.skill is not None else 0.0


@dataclass(frozen=True)
class Waiting:
    """A waiting ticket. ``players`` has one entry for a solo ticket, several for a party."""

    ticket_id: str
    players: tuple[Player, ...]
    enqueued_at: float
    pool: str = "default"

    def __post_init__(self) -> None:
        if not self.players:
            raise InvalidInput("players", f"ticket {self.ticket_id!r} has no players")
        if not isinstance(self.players, tuple):
            object.__setattr__(self, "players", tuple(self.players))

    @property
    def size(self) -> int:
        return len(self.players)

    @property
    def skill(self) -> float:
        """Mean skill of the ticket's players (missing skills count as 0)."""
        return sum(player_skill(p) for p in self.players) / len(self.players)

    def waited(self, now: float) -> float:
        return max(0.0, now - self.enqueued_at)

    def to_json(self) -> dict:
        return {"ticket_id": self.ticket_id, "players": [p.to_json() for p in self.players],
                "enqueued_at": self.enqueued_at, "pool": self.pool}


def total_players(tickets: Sequence[Waiting]) -> int:
    return sum(t.size for t in tickets)


@dataclass(frozen=True)
class PoolShape:
    """The match shape of a pool: ``teams`` teams with ``sizes[j]`` players each."""

    teams: int
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.sizes, tuple):
            object.__setattr__(self, "sizes", tuple(self.sizes))
        if self.teams < 2 or len(self.sizes) != self.teams or any(s < 1 for s in self.sizes):
            raise InvalidInput("sizes", f"need ≥ 2 teams with one size ≥ 1 each, got teams={self.teams} sizes={list(self.sizes)}")

    @staticmethod
    def uniform(teams: int, team_size: int) -> PoolShape:
        return PoolShape(teams, (team_size,) * teams)

    @property
    def match_players(self) -> int:
        return sum(self.sizes)


@dataclass(frozen=True)
class Decision:
    """What the matchmaker loop should do now (see the package docstring)."""

    solve: bool
    tickets: tuple[str, ...] = ()
    max_matches: int = 0
    relax_steps: tuple[RelaxStep, ...] = ()
    waited_s: float = 0.0
    eta_s: dict[str, float] = field(default_factory=dict)
    next_check_s: float | None = None
    reason: str = ""

    def apply(self, instance: Instance) -> Instance:
        """Apply this decision's relaxations to the instance built from ``tickets``."""
        if not self.relax_steps:
            return instance
        return relax(instance, self.waited_s, RelaxConfig(self.relax_steps, "max"))

    def to_json(self) -> dict:
        return {"solve": self.solve, "tickets": list(self.tickets), "max_matches": self.max_matches,
                "relax_steps": [s.to_json() for s in self.relax_steps], "waited_s": self.waited_s,
                "eta_s": dict(self.eta_s), "next_check_s": self.next_check_s, "reason": self.reason}


class Policy(Protocol):
    """A dispatch policy; one object per pool, called repeatedly with the current waiting list."""

    name: str

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision: ...
