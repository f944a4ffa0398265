"""Policy ``batch`` (Awesomenauts): fixed rounds every ``interval_s`` seconds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .base import BasePolicy, pop_base_params, pop_number, reject_unknown
from .contract import Decision, PoolShape, Waiting, total_players


@dataclass
class Batch(BasePolicy):
    """Fixed rounds every ``interval_s`` seconds at ``offset_s + m·interval_s`` (Awesomenauts).

    At a round everything waiting (up to ``max_candidates``, default 300) is matched at once;
    between rounds every ticket gets the exact ETA of the next round.
    """

    interval_s: float = 60.0
    offset_s: float = 0.0
    name: str = "batch"
    _done_round: int | None = None  # the last round run (None: not called yet)

    @classmethod
    def from_params(cls, params: dict) -> Batch:
        base = pop_base_params(params, default_cap=300)
        interval = pop_number(params, "interval_s", 60.0, strict=True)
        offset = pop_number(params, "offset_s", 0.0, minimum=None)
        reject_unknown("batch", params)
        return cls(**base, interval_s=interval, offset_s=offset)

    def round_index(self, now: float) -> int:
        return math.floor((now - self.offset_s) / self.interval_s)

    def next_round_at(self, now: float) -> float:
        return self.offset_s + (self.round_index(now) + 1) * self.interval_s

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        self.check_fits(shape)
        r = self.round_index(now)
        nxt = self.next_round_at(now)
        eta = {t.ticket_id: nxt - now for t in waiting}
        if self._done_round is None:
            # first call: the current round boundary has passed already; wait for the next one
            self._done_round = r
        if r <= self._done_round:
            return Decision(False, eta_s=eta, next_check_s=nxt - now, reason=f"next round in {nxt - now:.3g}s")
        self._done_round = r
        have = total_players(waiting)
        if have < shape.match_players:
            return Decision(False, eta_s=eta, next_check_s=nxt - now,
                            reason=f"round {r}: {have} of {shape.match_players} players; next round in {nxt - now:.3g}s")
        cands = self.select(waiting, now)
        chosen = {t.ticket_id for t in cands}
        # tickets left out of this round wait for the next one
        left = {tid: v for tid, v in eta.items() if tid not in chosen}
        # candidates that end up unmatched also wait for the next round: give the loop their ETA too
        eta_all = {**{t.ticket_id: nxt - now for t in cands}, **left}
        return self.decision(cands, shape, now, f"round {r}: {have} players", eta=eta_all, next_check_s=nxt - now)
