"""Tickets in Redis (:class:`~mgmatch.app.store.protocols.TicketStore`): a hash per ticket with expiry,
the pool's queue, expiry and pending indexes as sorted sets, a players hash, and a Lua script for every
change (create with idempotency, claim, commit, release, takeover, cancel, expire, the reaper)."""

from __future__ import annotations

import dataclasses
import json
import time

import anyio.to_thread
import redis.exceptions as rex

from ...keys import EVENTS_MAXLEN, TICKET_RETENTION_S
from ..base import Conflict, MatchRecord, MatchResult, Ticket, pool_of
from ..protocols import TicketStore
from .core import _REAP_BATCH, _SOURCES, RedisCore, _is_cluster_pipeline, _queue_script
from .errors import _guard_public

_PLAYERS_SLICE = 64  # players-hash entries the reaper checks per round


@_guard_public
class RedisTickets(RedisCore, TicketStore):
    """Tickets of every pool; each change one script on the pool's shard."""

    def _create_kv(self, ticket: Ticket, idempotency_key: str | None) -> dict[str, list]:
        k, pool = self.keys, ticket.pool
        ttl_s = max(0.001, ticket.expires_at - ticket.created_at)
        idem_key = k.idempotency(pool, idempotency_key or "-")
        return {"keys": [idem_key, k.ticket(pool, ticket.id), k.queue(pool), k.expiry(pool), k.events(pool),
                         k.players(pool)],
                "args": [ticket.id, ticket.data_json(), repr(ttl_s), "1" if idempotency_key else "0",
                         TICKET_RETENTION_S, EVENTS_MAXLEN, k.ticket(pool, ""), *(p["id"] for p in ticket.players)]}

    def _create_call(self, ticket: Ticket, idempotency_key: str | None, client=None):
        kv = self._create_kv(ticket, idempotency_key)
        if _is_cluster_pipeline(client):
            return _queue_script(client, self._s["create"], kv)
        return self._s["create"](**kv, client=client)

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """One round trip for the whole batch (a pipeline of the create script)."""
        try:
            replies = self._create_pipeline(items)
        except rex.NoScriptError:  # flushed between redis-py's SCRIPT EXISTS and the batch, or (a cluster's
            # pipelines load no scripts) a node that never ran it, a replica promoted: load it, once more
            self.r.script_load(_SOURCES["create"])
            replies = self._create_pipeline(items)  # (a create replayed for the same ticket is a no-op)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, replies, strict=True):
            try:
                out.append(self._created(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    def _create_pipeline(self, items: list[tuple[Ticket, str | None]]) -> list:
        pipe = self.r.pipeline(transaction=False)
        for t, key in items:
            self._create_call(t, key, client=pipe)
        return pipe.execute()

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        return self._created(ticket, self._create_call(ticket, idempotency_key))

    @staticmethod
    def _read_create(ticket: Ticket, prev: str) -> tuple[Ticket | None, str | None]:
        """Read the create script's reply: '+<created> <expires>' = created (the ticket with Redis's
        times); '!<pid> <tid>' = the player is already queued (raises Conflict); else the id of the
        ticket the idempotency key made earlier."""
        if prev.startswith("+"):
            created, expires = prev[1:].split(" ", 1)
            return dataclasses.replace(ticket, created_at=float(created), expires_at=float(expires)), None
        if prev.startswith("!"):
            pid, other = prev[1:].split(" ", 1)
            raise Conflict(f"player {pid!r} is already queued in ticket {other}")
        return None, prev

    def _created(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        stored, earlier_id = self._read_create(ticket, prev)
        if stored is not None:
            return stored, True
        earlier = self.get(earlier_id)
        return (earlier, False) if earlier is not None else (ticket, True)

    async def _acreated(self, ticket: Ticket, prev: str) -> tuple[Ticket, bool]:
        stored, earlier_id = self._read_create(ticket, prev)
        if stored is not None:
            return stored, True
        earlier = await self.aget(earlier_id)
        return (earlier, False) if earlier is not None else (ticket, True)

    async def acreate(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.create, ticket, idempotency_key)
        prev = await aio[1]["create"](**self._create_kv(ticket, idempotency_key))
        return await self._acreated(ticket, prev)

    async def acreate_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.create_many, items)
        try:
            prevs = await self._acreate_pipeline(aio, items)
        except rex.NoScriptError:  # as in create_many
            await aio[0].script_load(_SOURCES["create"])
            prevs = await self._acreate_pipeline(aio, items)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), prev in zip(items, prevs, strict=True):
            try:
                out.append(await self._acreated(t, prev))
            except Conflict as err:
                out.append(err)
        return out

    async def _acreate_pipeline(self, aio, items: list[tuple[Ticket, str | None]]) -> list:
        client, scripts = aio
        async with client.pipeline(transaction=False) as pipe:
            for t, key in items:
                kv = self._create_kv(t, key)
                if _is_cluster_pipeline(pipe):
                    _queue_script(pipe, scripts["create"], kv)
                else:
                    await scripts["create"](**kv, client=pipe)
            return await pipe.execute()

    async def aget(self, ticket_id: str) -> Ticket | None:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.get, ticket_id)
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        f = await aio[0].hgetall(self.keys.ticket(pool, ticket_id))
        return Ticket.from_fields(ticket_id, f).view() if f else None

    async def acancel(self, ticket_id: str) -> Ticket | None:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.cancel, ticket_id)
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        out = await aio[1]["cancel"](**self._cancel_kv(pool, ticket_id))
        return await self.aget(ticket_id) if self._cancelled(out) else None

    def get(self, ticket_id: str) -> Ticket | None:
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        f = self.r.hgetall(self.keys.ticket(pool, ticket_id))
        if not f:
            return None
        return Ticket.from_fields(ticket_id, f).view()

    def get_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        if not ticket_ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for tid in ticket_ids:
            pipe.hgetall(self.keys.ticket(pool, tid))
        return [Ticket.from_fields(tid, f).view() if f else None
                for tid, f in zip(ticket_ids, pipe.execute(), strict=True)]

    def cancel(self, ticket_id: str) -> Ticket | None:
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        out = self._s["cancel"](**self._cancel_kv(pool, ticket_id))
        return self.get(ticket_id) if self._cancelled(out) else None

    def _cancel_kv(self, pool: str, ticket_id: str) -> dict[str, list]:
        return {"keys": [*self._ended_keys(pool), self.keys.ticket(pool, ticket_id)], "args": [EVENTS_MAXLEN]}

    @staticmethod
    def _cancelled(out: str) -> bool:
        """Read the cancel script's reply: True = cancelled, False = no such ticket; else the ticket's
        status, which cannot be cancelled (raises Conflict)."""
        if out not in ("", "ok"):
            raise Conflict(f"ticket is {out}")
        return out == "ok"

    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        ids = self.queued_ids(pool, limit)
        now = time.time()
        return [t for t in self.get_many(pool, ids) if t is not None and t.status == "queued" and t.expires_at > now]

    def queued_ids(self, pool: str, limit: int = 10_000) -> list[str]:
        if limit <= 0:
            return []
        return list(self.r.zrange(self.keys.queue(pool), 0, limit - 1))

    def queue_depth(self, pool: str) -> int:
        return int(self.r.zcard(self.keys.queue(pool)))

    def player_count(self, pool: str) -> int:
        """Entries of the pool's players hash (players with a live ticket, once the reaper caught up)."""
        return int(self.r.hlen(self.keys.players(pool)))

    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        if not ticket_ids:
            return False
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return bool(self._s["claim"](keys=keys, args=[match_id, self._duration(lease_until), *ticket_ids]))

    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult, record: MatchRecord | None = None) -> bool:
        keys = [*self._ended_keys(pool), *(self.keys.ticket(pool, t) for t in selected),
                *(self.keys.ticket(pool, t) for t in unselected)]
        results = [json.dumps(result.for_ticket(t)) for t in selected]
        args = [match_id, len(selected), *results, EVENTS_MAXLEN]
        if record is not None:
            keys += [self.keys.match(pool, record.match_id), self.keys.matches(pool)]
            args += [record.record_json(), repr(self.match_retention_s), self.match_max_count, record.match_id,
                     self.keys.match(pool, "")]
        return bool(self._s["commit"](keys=keys, args=args))

    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        if not ticket_ids:
            return 0
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._s["release"](keys=keys, args=[match_id]))

    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        if not ticket_ids:
            return 0
        keys = [*self._pool_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        return int(self._s["takeover"](keys=keys, args=[claim_id, new_id, self._duration(lease_until)]))

    def expire_ticket(self, pool: str, ticket_id: str, claim_id: str, reason: str) -> bool:
        keys = [*self._ended_keys(pool), self.keys.ticket(pool, ticket_id)]
        return bool(self._s["expire_ticket"](keys=keys, args=[claim_id, reason, EVENTS_MAXLEN]))

    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        """One reaper round at Redis TIME (``now`` is ignored: the server's clock decides)."""
        k = self.keys
        expired, released = self._s["reap"](
            keys=[*self._ended_keys(pool), k.players_cursor(pool)],
            args=[k.ticket(pool, ""), _REAP_BATCH, EVENTS_MAXLEN, _PLAYERS_SLICE])
        return int(expired), int(released)
