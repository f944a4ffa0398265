"""Policy ``quality_threshold`` (Heroes of the Storm): longest waiter first; match once a group is good enough."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mgmatch.core.errors import InvalidInput

from .base import BasePolicy, cap_players, pop_base_params, pop_int, pop_number, reject_unknown
from .contract import Decision, PoolShape, Waiting, player_skill, total_players


def group_around(anchor: Waiting, waiting: Sequence[Waiting], need: int) -> list[Waiting] | None:
    """The tickets nearest in skill to ``anchor`` that together hold ≥ ``need`` players."""
    others = sorted((t for t in waiting if t.ticket_id != anchor.ticket_id),
                    key=lambda t: (abs(t.skill - anchor.skill), t.enqueued_at, t.ticket_id))
    group, have = [anchor], anchor.size
    for t in others:
        if have >= need:
            break
        group.append(t)
        have += t.size
    return group if have >= need else None


def skill_spread(group: Sequence[Waiting]) -> float:
    """Max − min player skill over the tickets of ``group``."""
    skills = [player_skill(p) for t in group for p in t.players]
    return max(skills) - min(skills)


@dataclass
class QualityThreshold(BasePolicy):
    """Heroes of the Storm: longest waiter first; match once a group is good enough.

    For each ticket in waiting order (longest first, at most ``scan`` of them) the group of
    tickets nearest to it in skill that fills one match is scored by its skill spread
    (max − min player skill). The threshold for that ticket is ``max_spread +
    spread_growth_per_s × waited`` (capped at ``spread_cap``); the first ticket whose group
    passes anchors the candidate pool.
    """

    max_spread: float = 100.0
    spread_growth_per_s: float = 10.0
    spread_cap: float = math.inf
    scan: int = 50
    name: str = "quality_threshold"

    @classmethod
    def from_params(cls, params: dict) -> QualityThreshold:
        base = pop_base_params(params)
        ms = pop_number(params, "max_spread", 100.0)
        g = pop_number(params, "spread_growth_per_s", 10.0)
        cap = pop_number(params, "spread_cap", math.inf, allow_inf=True)
        scan = pop_int(params, "scan", 50)
        reject_unknown("quality_threshold", params)
        if cap < ms:
            raise InvalidInput("spread_cap", f"must be ≥ max_spread ({ms:g}), got {cap:g}")
        return cls(**base, max_spread=ms, spread_growth_per_s=g, spread_cap=cap, scan=scan)

    def threshold(self, waited_s: float) -> float:
        return min(self.spread_cap, self.max_spread + self.spread_growth_per_s * waited_s)

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        self.check_fits(shape)
        have = total_players(waiting)
        need = shape.match_players
        if have < need:
            return Decision(False, reason=f"{have} of {need} players waiting")
        order = sorted(waiting, key=lambda t: (t.enqueued_at, t.ticket_id))
        best_gap = math.inf
        for t in order[: self.scan]:
            group = group_around(t, waiting, need)
            if group is None:
                continue
            spread, thr = skill_spread(group), self.threshold(t.waited(now))
            if spread <= thr:
                cands = self.select(waiting, now, anchor=t)
                # make sure the good-enough group itself is in the pool (it is near the anchor)
                ids = {c.ticket_id for c in cands}
                extra = [g for g in group if g.ticket_id not in ids]
                if extra:
                    cands = group + [c for c in cands if c.ticket_id not in {g.ticket_id for g in group}]
                    cands = cap_players(cands, self.max_candidates)
                return self.decision(cands, shape, now,
                                     f"ticket {t.ticket_id} waited {t.waited(now):.3g}s: spread {spread:.4g} ≤ {thr:.4g}",
                                     max_matches=1)
            best_gap = min(best_gap, spread - thr)
        # time until the longest waiter's threshold could cover its group's spread
        nxt = None
        if self.spread_growth_per_s > 0 and math.isfinite(best_gap):
            nxt = best_gap / self.spread_growth_per_s
        return Decision(False, next_check_s=nxt, reason="no group of good enough quality yet")
