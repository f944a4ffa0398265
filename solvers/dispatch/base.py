"""What every policy shares: the common parameters, candidate selection and parameter parsing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from mgmatch.core.errors import InvalidInput

from ..relax import RelaxConfig, parse_relax
from .contract import Decision, PoolShape, Waiting, total_players


@dataclass
class BasePolicy:
    """Shared parameters and candidate selection of every policy."""

    max_candidates: int = 200
    relax: RelaxConfig = field(default_factory=RelaxConfig)
    skill_scale: float = 100.0
    wait_scale: float = 30.0
    name: str = "base"

    def select(self, waiting: Sequence[Waiting], now: float, anchor: Waiting | None = None) -> list[Waiting]:
        """Candidates by waiting time and skill proximity, at most ``max_candidates`` players.

        The anchor (default: the longest waiter) always comes first; the others are ranked by
        ``|skill − anchor skill| / skill_scale − waited / wait_scale`` (lower first). Tickets
        that would overflow the player cap are skipped (smaller ones may still fit).
        """
        if not waiting:
            return []
        if anchor is None:
            anchor = min(waiting, key=lambda t: (t.enqueued_at, t.ticket_id))
        a_skill = anchor.skill
        rest = [t for t in waiting if t.ticket_id != anchor.ticket_id]
        rest.sort(key=lambda t: (abs(t.skill - a_skill) / self.skill_scale - t.waited(now) / self.wait_scale,
                                 t.enqueued_at, t.ticket_id))
        out, used = [anchor], anchor.size
        for t in rest:
            if used + t.size <= self.max_candidates:
                out.append(t)
                used += t.size
            if used >= self.max_candidates:
                break
        return out

    def decision(self, cands: list[Waiting], shape: PoolShape, now: float, reason: str,
                 max_matches: int | None = None, eta: dict[str, float] | None = None,
                 next_check_s: float | None = None) -> Decision:
        """A decision to solve now on ``cands`` (their relaxations and waiting time filled in)."""
        waits = [t.waited(now) for t in cands]
        waited = self.relax.waited(waits)
        n = total_players(cands)
        mm = max_matches if max_matches is not None else max(1, n // shape.match_players)
        return Decision(True, tuple(t.ticket_id for t in cands), mm, self.relax.active(waited), waited,
                        eta or {}, next_check_s, reason)

    def check_fits(self, shape: PoolShape) -> None:
        """InvalidInput when ``max_candidates`` players cannot fill one match of ``shape``."""
        if self.max_candidates < shape.match_players:
            raise InvalidInput("max_candidates",
                               f"{self.max_candidates} players cannot fill a match of {shape.match_players}")


def cap_players(cands: list[Waiting], cap: int) -> list[Waiting]:
    """The tickets of ``cands`` in order that fit under ``cap`` players in all."""
    out, used = [], 0
    for t in cands:
        if used + t.size <= cap:
            out.append(t)
            used += t.size
    return out


# --------------------------------------------------------------------------- parameter parsing


def pop_number(params: dict, name: str, default: float, *, minimum: float | None = 0.0, strict: bool = False,
               allow_inf: bool = False) -> float:
    """Take parameter ``name`` from ``params`` as a float (InvalidInput names it when bad)."""
    v = params.pop(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(float(v)):
        raise InvalidInput(name, f"expected a number, got {v!r}")
    v = float(v)
    if math.isinf(v) and not allow_inf:
        raise InvalidInput(name, "must be finite")
    if minimum is not None and (v < minimum or (strict and v == minimum)):
        raise InvalidInput(name, f"must be {'>' if strict else '≥'} {minimum:g}, got {v:g}")
    return v


def pop_int(params: dict, name: str, default: int, minimum: int = 1) -> int:
    """Take parameter ``name`` from ``params`` as an integer (InvalidInput names it when bad)."""
    v = params.pop(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise InvalidInput(name, f"expected an integer, got {v!r}")
    if v < minimum:
        raise InvalidInput(name, f"must be ≥ {minimum}, got {v}")
    return int(v)


def pop_base_params(params: dict, default_cap: int = 200) -> dict:
    """The parameters every policy takes, as keyword arguments of :class:`BasePolicy`."""
    return {
        "max_candidates": pop_int(params, "max_candidates", default_cap, minimum=2),
        "relax": parse_relax(params.pop("relax", None), "relax"),
        "skill_scale": pop_number(params, "skill_scale", 100.0, strict=True),
        "wait_scale": pop_number(params, "wait_scale", 30.0, strict=True),
    }


def reject_unknown(policy: str, params: dict) -> None:
    """InvalidInput naming the first parameter left in ``params`` (none of ``policy``'s)."""
    if params:
        bad = sorted(params)[0]
        raise InvalidInput(bad, f"unknown parameter for policy {policy!r}")
