"""Predictor requests in Redis (:class:`~mgmatch.app.store.protocols.InferenceStore`): one request
stream (group ``inference``) on the ``{infer}`` slot, one short-lived reply list per request."""

from __future__ import annotations

import json
from typing import Any

from ...keys import BLOCK_MS, INFERENCE_GROUP, INFERENCE_MAXLEN, INFERENCE_REPLY_TTL_S
from ..protocols import InferenceStore
from .core import RedisCore
from .errors import _guard_public

# a predictor reply is waited for at most this long (below the socket timeout, see core)
_MAX_REPLY_WAIT_S = 8.0


@_guard_public
class RedisInference(RedisCore, InferenceStore):
    """Requests from solvers, replies from the inference workers."""

    def request_inference(self, requests: list[dict[str, Any]]) -> None:
        """Queue predictor requests (each with an ``id``); the stream is trimmed approximately."""
        pipe = self.r.pipeline(transaction=False)
        for req in requests:
            pipe.xadd(self.keys.inference_requests(), {"req": json.dumps(req)}, maxlen=INFERENCE_MAXLEN,
                      approximate=True)
        pipe.execute()

    def await_inference(self, request_id: str, timeout_s: float) -> dict[str, Any] | None:
        """The reply to one request, waiting at most ``timeout_s``; None when none came."""
        wait = min(_MAX_REPLY_WAIT_S, max(0.01, timeout_s))
        got = self.r.blpop([self.keys.inference_reply(request_id)], timeout=wait)
        return None if got is None else json.loads(got[1])

    def read_inference(self, consumer: str, count: int, block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        """New predictor requests for this inference worker (entries trimmed meanwhile are skipped)."""
        stream = self.keys.inference_requests()
        resp = self._grouped(stream, INFERENCE_GROUP, lambda: self.r.xreadgroup(
            INFERENCE_GROUP, consumer, {stream: ">"}, count=count, block=block_ms))
        return [(eid, json.loads(f["req"])) for _, es in (resp or []) for eid, f in es if f]

    def reply_inference(self, replies: dict[str, dict[str, Any]], entry_ids: list[str]) -> None:
        """Push each reply to its list (expiring), then acknowledge and delete the requests."""
        stream = self.keys.inference_requests()
        pipe = self.r.pipeline(transaction=False)
        for rid, reply in replies.items():
            key = self.keys.inference_reply(rid)
            pipe.rpush(key, json.dumps(reply))
            pipe.expire(key, INFERENCE_REPLY_TTL_S)
        if entry_ids:
            pipe.xack(stream, INFERENCE_GROUP, *entry_ids)
            pipe.xdel(stream, *entry_ids)
        pipe.execute()

    def drop_stale_inference(self, consumer: str, min_idle_ms: int, count: int = 100) -> int:
        """Acknowledge and delete requests a dead inference worker left pending for ``min_idle_ms``
        (longer than any solver waits for a reply). XAUTOCLAIM also drops pending references to
        entries the approximate trimming deleted, so the group's pending list cannot grow forever."""
        stream = self.keys.inference_requests()
        resp = self._grouped(stream, INFERENCE_GROUP, lambda: self.r.xautoclaim(
            stream, INFERENCE_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count))
        ids = [eid for eid, _ in (resp[1] if resp else [])]
        if ids:
            self.reply_inference({}, ids)
        return len(ids) + (len(resp[2]) if resp and len(resp) > 2 else 0)
