"""Tickets in Redis (:class:`~mgmatch.app.store.protocols.TicketStore`): a hash per ticket with expiry,
the pool's queue, expiry and pending indexes as sorted sets, a players hash, and a Lua script for every
change (create with idempotency, claim, commit, release, takeover, cancel, expire, the reaper)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Generator
from typing import Any

import anyio.to_thread
import redis.asyncio.cluster as aiocluster
import redis.exceptions as rex

from ...keys import EVENTS_MAXLEN, TICKET_RETENTION_S
from ..base import Conflict, MatchRecord, MatchResult, PlayerBusy, Ticket, pool_of
from ..protocols import TicketStore
from .core import _REAP_BATCH, _SOURCES, RedisCore, _queue_script
from .errors import _guard_public

_PLAYERS_SLICE = 64  # players-hash entries the reaper checks per round
_LOCK_ROUNDS = 3  # takeovers of a player's lock a create tries before it answers 409 (creates keep racing)


@_guard_public
class RedisTickets(RedisCore, TicketStore):
    """Tickets of every pool; each change one script on the pool's shard."""

    def _create_kv(self, ticket: Ticket, idempotency_key: str | None) -> dict[str, list]:
        k, pool = self.keys, ticket.pool
        ttl_s = max(0.001, ticket.expires_at - ticket.created_at)
        idem_key = k.idempotency(pool, idempotency_key or "-")
        return {"keys": [idem_key, k.ticket(pool, ticket.id), k.queue(pool), k.expiry(pool), k.events(pool),
                         k.players(pool), k.void(pool, ticket.id)],
                "args": [ticket.id, ticket.data_json(), repr(ttl_s), "1" if idempotency_key else "0",
                         TICKET_RETENTION_S, EVENTS_MAXLEN, k.ticket(pool, ""), *(p["id"] for p in ticket.players)]}

    # ------------------------------------------------------------------ create: one live ticket per player
    #
    # A player's cross-pool lock (keys.player_lock, its own slot) names the ticket holding the player. A create
    # takes the locks of its players first, then runs its pool's create script. Nothing frees a lock when its
    # ticket ends (that script runs in the pool's slot): a create that meets a lock asks the named ticket's
    # pool whether it is still live (ticket_live.lua) and, if not, takes the lock over. A named ticket that does
    # not exist is voided by that question, so a create stopped between its two steps can never create it
    # later: a crash leaves at worst a lock that the next create takes over, never two live tickets.
    #
    # The flow is written once as a generator of store requests (("get", keys) or ("script", name, kvs), each
    # sent as one pipeline); _drive and _adrive run it on the sync and the asyncio client.

    def _lock_kv(self, ticket: Ticket, player_id: str, dead: str = "") -> dict[str, list]:
        ttl_ms = int((max(0.001, ticket.expires_at - ticket.created_at) + TICKET_RETENTION_S) * 1000)
        return {"keys": [self.keys.player_lock(player_id)], "args": [ticket.id, ttl_ms, dead]}

    def _unlock_kvs(self, ticket: Ticket) -> list[dict[str, list]]:
        return [{"keys": [self.keys.player_lock(p["id"])], "args": [ticket.id]} for p in ticket.players]

    def _live_kv(self, holder: str) -> dict[str, list] | None:
        pool = pool_of(holder)
        if pool is None:  # not a ticket id at all: nothing holds the player
            return None
        return {"keys": [self.keys.ticket(pool, holder), self.keys.void(pool, holder)],
                "args": [int(TICKET_RETENTION_S * 1000)]}

    def _lock_players(self, tickets: list[Ticket], idem: dict[int, str]
                      ) -> Generator[tuple, list, tuple[dict[str, Conflict], dict[int, str], list]]:
        """Take every player's lock for each ticket, or none. ``idem`` (index in ``tickets`` → its idempotency
        key) is read in the same round trip as the first locks: a replayed key answers with its earlier
        ticket, and the locks its new ticket may have taken go back. Returns ticket id → PlayerBusy for the
        refused, index → the earlier ticket's id for the replays, and the unlock calls still to send (the
        caller sends them with its next request)."""
        in_batch = {t.id for t in tickets}
        dead: dict[tuple[str, str], str] = {}  # (ticket, player) → a holder found no longer live
        refused: dict[str, Conflict] = {}
        prevs: dict[int, str] = {}
        replayed: set[str] = set()  # ids of the tickets whose idempotency key was replayed (read in round 0)
        slots = [(t, i, p["id"]) for t in tickets for i, p in enumerate(t.players)]
        for rnd in range(_LOCK_ROUNDS):
            lock = ("script", "player_lock", [self._lock_kv(t, pid, dead.get((t.id, pid), "")) for t, _, pid in slots])
            if rnd == 0 and idem:
                got, replies = yield ("batch", [("get", list(idem.values())), lock])
                prevs = {j: prev for j, prev in zip(idem, got, strict=True) if prev}
                replayed = {tickets[j].id for j in prevs}
            else:
                replies = yield lock
            contested = [(t, i, pid, h) for (t, i, pid), h in zip(slots, replies, strict=True)
                         if h and t.id not in replayed]
            holders = sorted({h for *_, h in contested if h not in in_batch and self._live_kv(h) is not None})
            answers = (yield ("script", "ticket_live", [self._live_kv(h) for h in holders])) if holders else []
            live = {h for h, a in zip(holders, answers, strict=True) if int(a)}
            slots = []
            for t, i, pid, h in contested:
                if t.id in refused:
                    continue
                if h in in_batch or h in live:  # another ticket of this batch, or a live one elsewhere
                    refused[t.id] = PlayerBusy(i, pid, h)
                else:
                    dead[(t.id, pid)] = h
                    slots.append((t, i, pid))
            slots = [s for s in slots if s[0].id not in refused]
            if not slots:
                break
        for t, i, pid in slots:  # still contested after every round: creates of this player keep racing
            refused.setdefault(t.id, PlayerBusy(i, pid, None))
        back = [kv for t in tickets if t.id in refused or t.id in replayed for kv in self._unlock_kvs(t)]
        return refused, prevs, back

    def _create_flow(self, items: list[tuple[Ticket, str | None]]) -> Generator[tuple, list, list]:
        """Per item, the create script's reply (read by _created) or the Conflict that refused it.

        Two round trips when nothing contends (the idempotency keys with the players' locks, then the creates);
        a lock held by a ticket elsewhere adds one to ask whether that ticket is live, and a create that did not
        happen one to give its locks back."""
        k = self.keys
        out: list = [None] * len(items)
        idem = {j: k.idempotency(t.pool, key) for j, (t, key) in enumerate(items) if key}
        refused, prevs, unlock = yield from self._lock_players([t for t, _ in items], idem)
        go = []
        for j, (t, _) in enumerate(items):
            if j in prevs:  # a replayed key answers with its earlier ticket
                out[j] = prevs[j]
            elif t.id in refused:
                out[j] = refused[t.id]
            else:
                go.append(j)
        create = ("script", "create", [self._create_kv(*items[j]) for j in go])
        if unlock:  # the refused and the replays give their locks back with the creates
            replies, _ = yield ("batch", [create, ("script", "player_unlock", unlock)])
        else:
            replies = (yield create) if go else []
        back, voided = [], []
        for j, reply in zip(go, replies, strict=True):
            out[j] = reply
            if not reply.startswith("+"):
                back.append(items[j][0])
            if reply == "~":
                voided.append(j)
        if back:  # not created here (an earlier ticket of the key, a conflict, voided): give the locks back
            yield ("script", "player_unlock", [kv for t in back for kv in self._unlock_kvs(t)])
        if voided:  # another create took a player over while this one was between its steps
            holders = iter((yield ("get", [k.player_lock(p["id"]) for j in voided for p in items[j][0].players])))
            for j in voided:
                t, busy = items[j][0], None
                for i, p in enumerate(t.players):
                    h = next(holders)
                    if busy is None and h and h != t.id:
                        busy = PlayerBusy(i, p["id"], h)
                out[j] = busy or PlayerBusy(0, t.players[0]["id"], None)
        return out

    @staticmethod
    def _requests(req: tuple) -> list[tuple]:
        """The parts of one request of the create flow (a "batch" holds several, sent as one pipeline)."""
        return list(req[1]) if req[0] == "batch" else [req]

    @staticmethod
    def _queue(pipe, scripts: dict[str, Any], part: tuple) -> int:
        """Queue one part on a pipeline; how many replies it takes. Scripts go as plain EVALSHA: redis-py's
        script objects would send a SCRIPT EXISTS round trip before every pipeline; a NOSCRIPT reply (Redis
        restarted or flushed its scripts, a promoted replica) is handled by the caller."""
        if part[0] == "get":
            for key in part[1]:
                pipe.get(key)
            return len(part[1])
        for kv in part[2]:
            _queue_script(pipe, scripts[part[1]], kv)
        return len(part[2])

    @staticmethod
    def _split(req: tuple, counts: list[int], replies: list) -> list:
        """A pipeline's replies as the flow expects them: a list per part of a batch, else the list."""
        parts, at = [], 0
        for n in counts:
            parts.append(replies[at:at + n])
            at += n
        return parts if req[0] == "batch" else parts[0]

    def _run(self, req: tuple) -> list:
        """One request of the create flow as one pipeline on the sync client."""
        parts = self._requests(req)
        if not any(p[-1] for p in parts):
            return self._split(req, [0] * len(parts), [])

        def batch() -> list:
            pipe = self.r.pipeline(transaction=False)
            counts = [self._queue(pipe, self._s, p) for p in parts]
            return self._split(req, counts, pipe.execute())

        try:
            return batch()
        except rex.NoScriptError:  # Redis lost its scripts (a restart, a SCRIPT FLUSH), or a node of a
            # cluster never ran one, a replica promoted: load the request's scripts, run it once more
            for name in {p[1] for p in parts if p[0] == "script"}:
                self.r.script_load(_SOURCES[name])
            return batch()  # (every script of the flow is safe to replay)

    async def _arun(self, aio, req: tuple) -> list:
        """One request of the create flow as one pipeline on the asyncio client."""
        client, scripts = aio
        parts = self._requests(req)
        if not any(p[-1] for p in parts):
            return self._split(req, [0] * len(parts), [])

        async def batch() -> list:
            async with client.pipeline(transaction=False) as pipe:
                counts = [self._queue(pipe, scripts, p) for p in parts]
                return self._split(req, counts, await pipe.execute())

        try:
            return await batch()
        except rex.NoScriptError:  # as in _run
            for name in {p[1] for p in parts if p[0] == "script"}:
                await client.script_load(_SOURCES[name])
            return await batch()

    def _drive(self, flow: Generator) -> Any:
        try:
            req = next(flow)
            while True:
                req = flow.send(self._run(req))
        except StopIteration as stop:
            return stop.value

    async def _adrive(self, aio, flow: Generator) -> Any:
        try:
            req = next(flow)
            while True:
                req = flow.send(await self._arun(aio, req))
        except StopIteration as stop:
            return stop.value

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """A few round trips for the whole batch (a pipeline per step of the create flow)."""
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), reply in zip(items, self._drive(self._create_flow(items)), strict=True):
            if isinstance(reply, Conflict):
                out.append(reply)
                continue
            try:
                out.append(self._created(t, reply))
            except Conflict as err:
                out.append(err)
        return out

    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        res = self.create_many([(ticket, idempotency_key)])[0]
        if isinstance(res, Conflict):
            raise res
        return res

    @staticmethod
    def _read_create(ticket: Ticket, prev: str) -> tuple[Ticket | None, str | None]:
        """Read the create script's reply: '+<created> <expires>' = created (the ticket with Redis's
        times); '!<pid> <tid>' = the player is already queued in the pool (raises PlayerBusy); else the id
        of the ticket the idempotency key made earlier."""
        if prev.startswith("+"):
            created, expires = prev[1:].split(" ", 1)
            return dataclasses.replace(ticket, created_at=float(created), expires_at=float(expires)), None
        if prev.startswith("!"):
            pid, other = prev[1:].split(" ", 1)
            index = next((i for i, p in enumerate(ticket.players) if p["id"] == pid), 0)
            raise PlayerBusy(index, pid, other)
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
        res = (await self.acreate_many([(ticket, idempotency_key)]))[0]
        if isinstance(res, Conflict):
            raise res
        return res

    async def acreate_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.create_many, items)
        out: list[tuple[Ticket, bool] | Conflict] = []
        for (t, _), reply in zip(items, await self._adrive(aio, self._create_flow(items)), strict=True):
            if isinstance(reply, Conflict):
                out.append(reply)
                continue
            try:
                out.append(await self._acreated(t, reply))
            except Conflict as err:
                out.append(err)
        return out

    async def aget(self, ticket_id: str) -> Ticket | None:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.get, ticket_id)
        pool = pool_of(ticket_id)
        if pool is None:
            return None
        f = await aio[0].hgetall(self.keys.ticket(pool, ticket_id))
        return Ticket.from_fields(ticket_id, f).view() if f else None

    async def aget_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        aio = self._async()
        if aio is None or isinstance(aio[0], aiocluster.RedisCluster):
            # a cluster's reads stay on a thread: on the asyncio cluster client, a pool stream's reads across
            # a master failover left unclosed node connections behind (tests/lab/test_chaos.py's failover run)
            return await anyio.to_thread.run_sync(self.get_many, pool, ticket_ids)
        if not ticket_ids:
            return []
        async with aio[0].pipeline(transaction=False) as pipe:
            for tid in ticket_ids:
                pipe.hgetall(self.keys.ticket(pool, tid))
            found = await pipe.execute()
        return [Ticket.from_fields(tid, f).view() if f else None for tid, f in zip(ticket_ids, found, strict=True)]

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
