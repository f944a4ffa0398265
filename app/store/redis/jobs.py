"""Solve jobs in Redis (:class:`~mgmatch.app.store.protocols.JobStore`): a stream per pool read by the
``solvers`` consumer group; a job whose worker died is taken over with XAUTOCLAIM, and one delivered
too often goes to the pool's dead-letter stream (its tickets back to the queue, or expired)."""

from __future__ import annotations

import json
import time
from typing import Any

import redis.exceptions as rex

from ...keys import BLOCK_MS, DEAD_LETTER_MAXLEN, EVENTS_MAXLEN, SOLVER_GROUP
from ..protocols import JobStore
from .core import RedisCore
from .errors import _guard_public


@_guard_public
class RedisJobs(RedisCore, JobStore):
    """The pools' job streams and dead-letter streams."""

    def claim_job(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float,
                  job: dict[str, Any]) -> bool:
        """:meth:`~.tickets.RedisTickets.claim` and :meth:`publish_job` in one script: the tickets proposed under ``match_id`` and
        the job on the solvers' stream, or neither (False: a ticket is not free). With two calls, a
        matchmaker killed (or a failover) between them left the tickets proposed in a job no solver had
        until their lease ran out. A retry after a lost reply finds the claim held and publishes nothing."""
        if not ticket_ids:
            return False
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        keys = [*self._pool_keys(pool), stream, *(self.keys.ticket(pool, t) for t in ticket_ids)]
        out = self._s["claim_job"](keys=keys, args=[match_id, self._duration(lease_until), json.dumps(job),
                                                    *ticket_ids])
        return out not in (0, None)

    def publish_job(self, pool: str, job: dict[str, Any]) -> str:
        stream = self.keys.jobs(pool)
        self.ensure_group(stream, SOLVER_GROUP)
        return self.r.xadd(stream, {"job": json.dumps(job)})

    def read_jobs(self, pool: str, consumer: str, count: int = 1,
                  block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        stream = self.keys.jobs(pool)
        resp = self._grouped(stream, SOLVER_GROUP, lambda: self.r.xreadgroup(
            SOLVER_GROUP, consumer, {stream: ">"}, count=count, block=block_ms))
        return [(eid, json.loads(f["job"])) for _, entries in (resp or []) for eid, f in entries if f]

    def autoclaim_jobs(self, pool: str, consumer: str, min_idle_ms: int, count: int = 10) -> list[tuple[str, dict]]:
        """Take over jobs another solver read and never acknowledged (it crashed)."""
        stream = self.keys.jobs(pool)
        resp = self._grouped(stream, SOLVER_GROUP, lambda: self.r.xautoclaim(
            stream, SOLVER_GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count))
        entries = resp[1] if resp else []
        return [(eid, json.loads(f["job"])) for eid, f in entries if f]

    def job_deliveries(self, pool: str, entry_ids: list[str]) -> dict[str, int]:
        """How many times each pending job was delivered (read or taken over); absent = not pending."""
        if not entry_ids:
            return {}
        stream = self.keys.jobs(pool)

        def call():
            pipe = self.r.pipeline(transaction=False)
            for eid in entry_ids:
                pipe.xpending_range(stream, SOLVER_GROUP, min=eid, max=eid, count=1)
            return pipe.execute()

        rows = self._grouped(stream, SOLVER_GROUP, call)
        return {r[0]["message_id"]: int(r[0]["times_delivered"]) for r in rows if r}

    def ack_job(self, pool: str, entry_id: str) -> None:
        # acknowledged jobs are deleted: no MAXLEN trimming that could drop a pending entry
        stream = self.keys.jobs(pool)
        pipe = self.r.pipeline(transaction=False)
        pipe.xack(stream, SOLVER_GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        pipe.execute()

    def dead_letter_job(self, pool: str, entry_id: str, job: dict[str, Any], reason: str, deliveries: int,
                        consumer: str) -> str:
        """Move a job to the pool's dead-letter stream and acknowledge and delete it, in one transaction."""
        stream = self.keys.jobs(pool)
        pipe = self.r.pipeline(transaction=True)
        pipe.xadd(self.keys.dead_letters(pool),
                  {"job": json.dumps(job), "reason": reason, "deliveries": deliveries, "entry": entry_id,
                   "consumer": consumer, "at": repr(time.time())},
                  maxlen=DEAD_LETTER_MAXLEN, approximate=True)
        pipe.xack(stream, SOLVER_GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        return pipe.execute()[0]

    def dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        """The newest dead-lettered jobs of a pool, newest first: (entry id, fields with ``job`` parsed)."""
        out = []
        for eid, f in self.r.xrevrange(self.keys.dead_letters(pool), count=count):
            out.append((eid, {**f, "job": json.loads(f["job"]), "deliveries": int(f["deliveries"])}))
        return out

    def jobs_lag(self, pool: str) -> int:
        """Jobs waiting or in flight in the solver group (what a KEDA scaler reads)."""
        try:
            groups = self.r.xinfo_groups(self.keys.jobs(pool))
        except rex.ResponseError:
            return 0
        for g in groups:
            if g["name"] == SOLVER_GROUP:
                return int(g.get("lag") or 0) + int(g.get("pending") or 0)
        return 0

    def release_crashed(self, pool: str, claim_id: str, ticket_ids: list[str], max_crashes: int,
                        reason: str) -> tuple[int, int]:
        """The tickets of a dead-lettered job (still proposed by the claim or a takeover of it): each
        counts one more crashed job; one at ``max_crashes`` ends expired with ``reason``, the others go
        back to the queue. Returns (requeued, expired)."""
        if not ticket_ids:
            return 0, 0
        keys = [*self._ended_keys(pool), *(self.keys.ticket(pool, t) for t in ticket_ids)]
        requeued, expired = self._s["release_crashed"](keys=keys, args=[claim_id, max_crashes, reason, EVENTS_MAXLEN])
        return int(requeued), int(expired)
