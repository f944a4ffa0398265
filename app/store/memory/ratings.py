"""Players' ratings in memory (:class:`~mgmatch.app.store.protocols.RatingStore`)."""

from __future__ import annotations

import dataclasses

from ..base import Rating
from ..protocols import RatingStore
from .core import MemoryCore


class MemoryRatings(MemoryCore, RatingStore):
    """Ratings by player id and the matches already rated (kept for the match retention), under the lock."""

    def get_ratings(self, player_ids: list[str]) -> dict[str, Rating]:
        with self._lock:
            return {pid: self._ratings[pid] for pid in player_ids if pid in self._ratings}

    def rate_match(self, match_id: str, before: dict[str, int], after: dict[str, Rating]) -> str:
        now = self._clock()
        with self._lock:
            if self._rated.get(match_id, 0.0) > now:
                return "done"
            for pid in after:
                have = self._ratings.get(pid)
                if (have.version if have is not None else 0) != int(before.get(pid, 0)):
                    return "stale"
            for pid, r in after.items():
                self._ratings[pid] = dataclasses.replace(r, version=int(before.get(pid, 0)) + 1)
            if len(self._rated) > 100_000:  # forget marks past the retention (their records are gone)
                self._rated = {m: t for m, t in self._rated.items() if t > now}
            self._rated[match_id] = now + self.match_retention_s
            return "applied"
