"""Match records in Redis (:class:`~mgmatch.app.store.protocols.RecordStore`): a hash per match and an
index by commit time, written (and trimmed) by the commit script; results posted by a script."""

from __future__ import annotations

import json
from typing import Any

from ..base import MatchRecord
from ..protocols import RecordStore
from .core import RedisCore
from .errors import _guard_public


@_guard_public
class RedisRecords(RedisCore, RecordStore):
    """Committed matches' records and their results."""

    def get_match(self, pool: str, match_id: str) -> MatchRecord | None:
        f = self.r.hgetall(self.keys.match(pool, match_id))
        return MatchRecord.from_fields(f) if f.get("record") else None

    def put_match_result(self, pool: str, match_id: str, result: dict[str, Any]) -> tuple[MatchRecord | None, bool]:
        out = self._s["match_result"](keys=[self.keys.match(pool, match_id)],
                                      args=[json.dumps(result, allow_nan=False)])
        if not out or not out[1]:
            return None, False
        stored, record, at, res, res_at = (list(out) + [None] * 5)[:5]
        fields = {"record": record, "time": at, "result": res or "", "result_at": res_at or ""}
        return MatchRecord.from_fields(fields), bool(int(stored))

    def match_index(self, pool: str, min_time: float, limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        low = "-inf" if min_time == float("-inf") else repr(float(min_time))
        rows = self.r.zrangebyscore(self.keys.matches(pool), low, "+inf", start=0, num=limit, withscores=True)
        return [(mid, float(score)) for mid, score in rows]

    def get_matches(self, pool: str, match_ids: list[str]) -> list[MatchRecord | None]:
        if not match_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for mid in match_ids:
            pipe.hgetall(self.keys.match(pool, mid))
        return [MatchRecord.from_fields(f) if f.get("record") else None for f in pipe.execute()]
