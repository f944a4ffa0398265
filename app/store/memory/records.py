"""Match records in memory (:class:`~mgmatch.app.store.protocols.RecordStore`); a commit keeps them
(:meth:`MemoryCore._keep_match <mgmatch.app.store.memory.core.MemoryCore._keep_match>`)."""

from __future__ import annotations

import json
from itertools import islice
from typing import Any

from ..base import MatchRecord
from ..protocols import RecordStore
from .core import MemoryCore


class MemoryRecords(MemoryCore, RecordStore):
    """Committed matches' records by pool, indexed by commit time; readers get copies."""

    def get_match(self, pool: str, match_id: str) -> MatchRecord | None:
        with self._lock:
            rec = self._live_match(pool, match_id)
            return None if rec is None else MatchRecord(**rec.__dict__)

    def put_match_result(self, pool: str, match_id: str, result: dict[str, Any]) -> tuple[MatchRecord | None, bool]:
        with self._lock:
            rec = self._live_match(pool, match_id)
            if rec is None:
                return None, False
            fresh = rec.result is None
            if fresh:
                rec.result, rec.result_at = json.loads(json.dumps(result, allow_nan=False)), self._clock()
            return MatchRecord(**rec.__dict__), fresh

    def match_index(self, pool: str, min_time: float, limit: int) -> list[tuple[str, float]]:
        with self._lock:
            index = self._match_index.get(pool)
            if not index or limit <= 0:
                return []
            low = max(min_time, self._clock() - self.match_retention_s)
            return [(mid, t) for t, mid in islice(index.irange((low, "")), limit)]

    def get_matches(self, pool: str, match_ids: list[str]) -> list[MatchRecord | None]:
        with self._lock:
            return [None if (r := self._live_match(pool, mid)) is None else MatchRecord(**r.__dict__)
                    for mid in match_ids]
