"""Ticket events in memory (:class:`~mgmatch.app.store.protocols.EventStore`): the log per pool that
:meth:`MemoryCore._event <mgmatch.app.store.memory.core.MemoryCore._event>` appends to under the lock,
with Redis-style entry ids, read by the watchers and by the webhooks' delivery groups."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any

from ...keys import WEBHOOK_DEAD_LETTER_MAXLEN
from ..protocols import EventStore
from .core import MemoryCore


def _id(entry_id: str) -> tuple[int, int]:
    """An entry id as Redis reads one (``<ms>`` or ``<ms>-<seq>``); ValueError for anything else."""
    ms, _, seq = entry_id.partition("-")
    out = int(ms), int(seq or 0)
    if out[0] < 0 or out[1] < 0:
        raise ValueError(f"not a stream id: {entry_id!r}")
    return out


def _str(eid: tuple[int, int]) -> str:
    return f"{eid[0]}-{eid[1]}"


class MemoryEvents(MemoryCore, EventStore):
    """The pools' event logs and the webhooks' delivery groups, in this process."""

    def _after(self, pool: str, after: tuple[int, int], count: int) -> list[tuple[str, dict[str, str]]]:
        out = []
        for eid, f in reversed(self._log.get(pool, ())):  # the newest first: a tail read touches only new ones
            if eid <= after:
                break
            out.append((eid, f))
        return [(_str(eid), dict(f)) for eid, f in reversed(out)][:count]

    def read_events(self, pool: str, after: str, count: int = 100,
                    block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        since = _id(after)
        deadline = time.monotonic() + (block_ms or 0) / 1000
        with self._lock:
            while True:
                out = self._after(pool, since, count)
                left = deadline - time.monotonic()
                if out or not block_ms or left <= 0:
                    return out
                self._log_cond.wait(left)

    async def aread_events(self, pool: str, after: str, count: int = 100,
                           block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        since = _id(after)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (block_ms or 0) / 1000
        while True:
            fut = loop.create_future()
            with self._lock:
                out = self._after(pool, since, count)
                if out or not block_ms or deadline <= loop.time():
                    return out
                self._log_waiters.add((loop, fut))
            try:
                await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    self._log_waiters.discard((loop, fut))

    def wait_events(self, after: dict[str, str], block_ms: int) -> bool:
        since = {pool: _id(eid) for pool, eid in after.items()}
        deadline = time.monotonic() + block_ms / 1000
        with self._lock:
            while True:
                for pool, eid in since.items():
                    log = self._log.get(pool)
                    if log and log[-1][0] > eid:
                        return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._log_cond.wait(left)

    def last_event_id(self, pool: str) -> str:
        with self._lock:
            log = self._log.get(pool)
            return _str(log[-1][0]) if log else "0-0"

    def last_trimmed_event_id(self, pool: str) -> str:
        with self._lock:
            return _str(self._log_trimmed.get(pool, (0, 0)))

    def read_deliveries(self, pool: str, group: str, consumer: str, count: int = 100,
                        pending: bool = False) -> list[tuple[str, dict[str, str]]]:
        key = (pool, group)
        with self._lock:
            if key not in self._groups:  # a new group starts at the log's end, as in Redis
                log = self._log.get(pool)
                self._groups[key] = log[-1][0] if log else (0, 0)
                self._group_pending[key] = {}
            held = self._group_pending[key]
            log = {eid: f for eid, f in self._log.get(pool, ())}
            if pending:
                mine = sorted(eid for eid, (c, _) in held.items() if c == consumer)[:count]
                return [(_str(eid), dict(log.get(eid, {}))) for eid in mine if eid in log]
            out = self._after(pool, self._groups[key], count)
            now = time.monotonic()
            for eid, _ in out:
                held[_id(eid)] = (consumer, now)
            if out:
                self._groups[key] = _id(out[-1][0])
            return out

    def autoclaim_deliveries(self, pool: str, group: str, consumer: str, min_idle_ms: int,
                             count: int = 100) -> list[tuple[str, dict[str, str]]]:
        key = (pool, group)
        with self._lock:
            held = self._group_pending.get(key, {})
            log = {eid: f for eid, f in self._log.get(pool, ())}
            now, out = time.monotonic(), []
            for eid in sorted(held):
                if len(out) >= count:
                    break
                if now - held[eid][1] >= min_idle_ms / 1000:
                    if eid not in log:  # trimmed meanwhile: nothing left to deliver
                        del held[eid]
                        continue
                    held[eid] = (consumer, now)
                    out.append((_str(eid), dict(log[eid])))
            return out

    def ack_deliveries(self, pool: str, group: str, entry_ids: list[str]) -> None:
        with self._lock:
            held = self._group_pending.get((pool, group), {})
            for eid in entry_ids:
                held.pop(_id(eid), None)

    def dead_letter_delivery(self, pool: str, group: str, entry_id: str, fields: dict[str, Any]) -> str:
        with self._lock:
            self._group_pending.get((pool, group), {}).pop(_id(entry_id), None)
            self._log_last = max(self._log_last, (int(self._clock() * 1000), 0))
            self._log_last = (self._log_last[0], self._log_last[1] + 1)
            did = _str(self._log_last)
            dead = self._dead_hooks.setdefault(pool, deque(maxlen=WEBHOOK_DEAD_LETTER_MAXLEN))
            dead.append((did, json.loads(json.dumps({**fields, "entry": entry_id, "at": time.time()}))))
            return did

    def delivery_dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(reversed(self._dead_hooks.get(pool, ())))[:count]
