"""Ticket events in Redis (:class:`~mgmatch.app.store.protocols.EventStore`): the pool's ``events``
stream that the ticket scripts append to, read with XREAD by the watchers (SSE, gRPC) and with one
consumer group per webhook by the deliverer; deliveries given up on go to the pool's
``webhook-dead`` stream."""

from __future__ import annotations

import json
import time
from typing import Any

import redis.exceptions as rex

from ...keys import WEBHOOK_DEAD_LETTER_MAXLEN
from ..protocols import EventStore
from .core import RedisCore, _LazyCluster
from .errors import _guard_public


@_guard_public
class RedisEvents(RedisCore, EventStore):
    """The pools' events streams and the webhooks' consumer groups on them."""

    def read_events(self, pool: str, after: str, count: int = 100,
                    block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        resp = self.r.xread({self.keys.events(pool): after}, count=count, block=block_ms or None)
        return [(eid, f) for _, entries in (resp or []) for eid, f in entries if f]

    async def aread_events(self, pool: str, after: str, count: int = 100,
                           block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        aio = self._async()
        if aio is None:
            import anyio.to_thread

            return await anyio.to_thread.run_sync(lambda: self.read_events(pool, after, count, block_ms))
        resp = await aio[0].xread({self.keys.events(pool): after}, count=count, block=block_ms or None)
        return [(eid, f) for _, entries in (resp or []) for eid, f in entries if f]

    def wait_events(self, after: dict[str, str], block_ms: int) -> bool:
        if not after:
            time.sleep(block_ms / 1000)
            return False
        streams = {self.keys.events(pool): eid for pool, eid in after.items()}
        if len(streams) > 1 and isinstance(self.r, _LazyCluster):
            # the pools' streams are in different slots, which one XREAD cannot span: look every 5 ms
            deadline = time.monotonic() + block_ms / 1000
            while True:
                if any(self.r.xread({k: v}, count=1) for k, v in streams.items()):
                    return True
                if (left := deadline - time.monotonic()) <= 0:
                    return False
                time.sleep(min(0.005, left))
        return bool(self.r.xread(streams, count=1, block=max(1, int(block_ms))))

    def last_event_id(self, pool: str) -> str:
        last = self.r.xrevrange(self.keys.events(pool), count=1)
        return last[0][0] if last else "0-0"

    def last_trimmed_event_id(self, pool: str) -> str:
        try:
            info = self.r.xinfo_stream(self.keys.events(pool))
        except rex.ResponseError as err:  # no stream yet: nothing was ever trimmed
            if "no such key" in str(err).lower():
                return "0-0"
            raise
        return info.get("max-deleted-entry-id") or "0-0"

    def _new_group(self, stream: str, group: str) -> None:
        """A webhook's group starts at the stream's end: a webhook added to the config gets the events from
        then on, not the whole kept history. (A group lost with Redis's data is created again at the
        start of the new stream, by ``_grouped``.)"""
        if (stream, group) in self._groups:
            return
        try:
            self.r.xgroup_create(stream, group, id="$", mkstream=True)
        except rex.ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise
        self._groups.add((stream, group))

    def read_deliveries(self, pool: str, group: str, consumer: str, count: int = 100,
                        pending: bool = False) -> list[tuple[str, dict[str, str]]]:
        stream = self.keys.events(pool)
        self._new_group(stream, group)
        resp = self._grouped(stream, group, lambda: self.r.xreadgroup(
            group, consumer, {stream: "0" if pending else ">"}, count=count))
        return [(eid, f) for _, entries in (resp or []) for eid, f in entries if f]

    def autoclaim_deliveries(self, pool: str, group: str, consumer: str, min_idle_ms: int,
                             count: int = 100) -> list[tuple[str, dict[str, str]]]:
        stream = self.keys.events(pool)
        resp = self._grouped(stream, group, lambda: self.r.xautoclaim(
            stream, group, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count))
        return [(eid, f) for eid, f in (resp[1] if resp else []) if f]

    def ack_deliveries(self, pool: str, group: str, entry_ids: list[str]) -> None:
        if entry_ids:
            self.r.xack(self.keys.events(pool), group, *entry_ids)

    def dead_letter_delivery(self, pool: str, group: str, entry_id: str, fields: dict[str, Any]) -> str:
        pipe = self.r.pipeline(transaction=True)
        pipe.xadd(self.keys.webhook_dead_letters(pool),
                  {"fields": json.dumps({**fields, "entry": entry_id, "at": time.time()})},
                  maxlen=WEBHOOK_DEAD_LETTER_MAXLEN, approximate=True)
        pipe.xack(self.keys.events(pool), group, entry_id)
        return pipe.execute()[0]

    def delivery_dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        return [(eid, json.loads(f["fields"])) for eid, f in
                self.r.xrevrange(self.keys.webhook_dead_letters(pool), count=count)]
