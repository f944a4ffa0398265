"""The store's concerns, one protocol each, and :class:`Store`, the ones every store implements.

A caller that needs one concern types against its protocol (the results route takes a
:class:`RecordStore`, the backfill filler a :class:`BackfillStore`), so a test can hand it a fake
with only those methods, and a reader sees what it touches. Each protocol has an in-memory
implementation (:mod:`.memory`) and a Redis one (:mod:`.redis`, a single server or a Redis Cluster);
the composed :class:`~mgmatch.app.store.MemoryStore` and :class:`~mgmatch.app.store.RedisStore`
implement all of them over one shared state (one lock, or one client and key schema), because some
steps span two concerns atomically: a commit keeps the match's record, a backfill fill matches
tickets, a wait estimate reads the queue.

The distributed workers' concerns (:class:`JobStore`, :class:`InferenceStore`, :class:`LeaseStore`)
exist in Redis only: in memory, the matchmaker, solvers and predictors run in one process and need
no stream between them.

Implementations subclass the protocols they implement (so the defaults here are inherited and a
missing method fails at instantiation); anything else may satisfy them structurally (a test's fake).
They are runtime-checkable: ``isinstance(store, JobStore)`` says whether a store has the workers'
streams.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ..keys import BLOCK_MS
from .base import Backfill, Conflict, MatchRecord, MatchResult, Rating, Ticket, WaitInputs


@runtime_checkable
class TicketStore(Protocol):
    """Tickets and their lifecycle (see :mod:`.base`): create, read, cancel, the pool's queue, the
    atomic claim of a candidate pool, commit or release, the takeover of a dead runner's claim, and
    the reaper."""

    @abstractmethod
    def create(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        """Store a new ticket; with a known idempotency key, return the earlier ticket and False."""

    def create_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        """Create several tickets; a ticket refused by a conflict yields its Conflict in its place."""
        out: list[tuple[Ticket, bool] | Conflict] = []
        for t, key in items:
            try:
                out.append(self.create(t, key))
            except Conflict as err:
                out.append(err)
        return out

    @abstractmethod
    def get(self, ticket_id: str) -> Ticket | None: ...

    @abstractmethod
    def get_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        """Tickets of one pool by id, in order (None where unknown), in one round trip."""

    @abstractmethod
    def cancel(self, ticket_id: str) -> Ticket | None:
        """queued/proposed → cancelled; raises Conflict for a matched/expired ticket; None if unknown."""

    @abstractmethod
    def queued(self, pool: str, limit: int = 10_000) -> list[Ticket]:
        """Queued, unexpired tickets of a pool, longest waiting first."""

    @abstractmethod
    def queued_ids(self, pool: str, limit: int = 10_000) -> list[str]:
        """Ids of queued tickets, longest waiting first; no ticket bodies (cheap). A ticket whose TTL
        just passed may still be listed until the reaper expires it (a claim refuses it)."""

    @abstractmethod
    def queue_depth(self, pool: str) -> int: ...

    @abstractmethod
    def player_count(self, pool: str) -> int:
        """Players with a live ticket in the pool (what the one-ticket-per-player check holds; in Redis,
        once the reaper caught up with tickets that ended without freeing their players)."""

    @abstractmethod
    def claim(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float) -> bool:
        """queued → proposed for every ticket, or for none (returns False)."""

    @abstractmethod
    def commit(self, pool: str, match_id: str, selected: list[str], unselected: list[str],
               result: MatchResult, record: MatchRecord | None = None) -> bool:
        """Selected → matched, unselected → queued, all or nothing; False (and all proposed returned) on conflict.
        With ``record``, the match's record is kept in the same atomic step (see :class:`RecordStore`)."""

    @abstractmethod
    def release(self, pool: str, match_id: str, ticket_ids: list[str]) -> int:
        """proposed (by this match) → queued; returns how many moved."""

    @abstractmethod
    def expire_ticket(self, pool: str, ticket_id: str, claim_id: str, reason: str) -> bool:
        """proposed (by ``claim_id``) → expired with ``reason``; its players are freed and an ``expired``
        event carries the reason. False (nothing changed) if the claim does not hold the ticket."""

    @abstractmethod
    def reap(self, pool: str, now: float | None = None) -> tuple[int, int]:
        """Expire queued tickets past their TTL, release proposals past their lease: (expired, released).
        ``now`` is honoured by the in-memory store; a store with a server clock uses that clock."""

    @abstractmethod
    def takeover(self, pool: str, claim_id: str, new_id: str, ticket_ids: list[str], lease_until: float) -> int:
        """Fence a claim for a runner taking it over: every ticket still proposed by ``claim_id`` (or by
        an earlier takeover of it, ``<claim_id>.<token>``) is re-stamped ``new_id`` with a fresh lease.
        A runner still holding an older id then fails to commit or release them. Returns tickets taken."""

    # The API's hot path is async: a store that talks to a server over the network overrides these
    # with native asyncio calls (no thread hop per request); an in-process store answers directly.

    async def acreate(self, ticket: Ticket, idempotency_key: str | None = None) -> tuple[Ticket, bool]:
        return self.create(ticket, idempotency_key)

    async def acreate_many(self, items: list[tuple[Ticket, str | None]]) -> list[tuple[Ticket, bool] | Conflict]:
        return self.create_many(items)

    async def aget(self, ticket_id: str) -> Ticket | None:
        return self.get(ticket_id)

    async def acancel(self, ticket_id: str) -> Ticket | None:
        return self.cancel(ticket_id)

    async def aget_many(self, pool: str, ticket_ids: list[str]) -> list[Ticket | None]:
        return self.get_many(pool, ticket_ids)


@runtime_checkable
class RecordStore(Protocol):
    """Records of committed matches (:class:`~.base.MatchRecord`): what results are posted to and the
    match log is exported from. A commit given a record keeps it atomically with the commit
    (:meth:`TicketStore.commit`); it lasts the store's match retention and the pool keeps at most its
    max count of them, oldest dropped first."""

    @abstractmethod
    def get_match(self, pool: str, match_id: str) -> MatchRecord | None:
        """The record of a committed match of ``pool`` (None: unknown, or past its retention)."""

    @abstractmethod
    def put_match_result(self, pool: str, match_id: str, result: dict[str, Any]) -> tuple[MatchRecord | None, bool]:
        """Keep the match's result unless it has one: (the record with the result it now holds, True when this
        call stored it). (None, False) for an unknown or expired match. The first result stays."""

    @abstractmethod
    def match_index(self, pool: str, min_time: float, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` (match id, time) of the pool's records with time ≥ ``min_time``, oldest first."""

    @abstractmethod
    def get_matches(self, pool: str, match_ids: list[str]) -> list[MatchRecord | None]:
        """Records by id, in order (None where unknown or expired), in one round trip."""

    def iter_matches(self, pool: str, since: float | None = None, batch: int = 500) -> Iterator[MatchRecord]:
        """Every record of the pool with time ≥ ``since``, oldest first, read ``batch`` at a time (a record
        trimmed or expired meanwhile is skipped)."""
        low = float("-inf") if since is None else since
        seen_at_low: set[str] = set()
        while True:
            page = [(mid, t) for mid, t in self.match_index(pool, low, batch + len(seen_at_low))
                    if not (t == low and mid in seen_at_low)][:batch]
            if not page:
                return
            for rec in self.get_matches(pool, [mid for mid, _ in page]):
                if rec is not None:
                    yield rec
            last = page[-1][1]
            if last != low:
                low, seen_at_low = last, set()
            seen_at_low |= {mid for mid, t in page if t == last}


@runtime_checkable
class BackfillStore(Protocol):
    """Open slots of running matches (:class:`~.base.Backfill`), filled from the pool's queue."""

    @abstractmethod
    def create_backfill(self, backfill: Backfill) -> Backfill:
        """Store a new open backfill; returns it with the store's times."""

    @abstractmethod
    def get_backfill(self, backfill_id: str) -> Backfill | None:
        """The backfill as a reader sees it (past its TTL an open one reads expired); None if unknown."""

    @abstractmethod
    def cancel_backfill(self, backfill_id: str) -> Backfill | None:
        """open → cancelled; raises Conflict for a filled/expired/cancelled one; None if unknown."""

    @abstractmethod
    def open_backfills(self, pool: str, limit: int = 100) -> list[Backfill]:
        """Open, unexpired backfills of a pool, soonest to expire first."""

    @abstractmethod
    def fill_backfill(self, pool: str, backfill_id: str, ticket_ids: list[str], assigned: list[list[str]],
                      results: dict[str, dict[str, Any]]) -> bool:
        """In one atomic step: every ticket queued and unexpired → matched with its ``results`` entry
        (players freed, ``matched`` events), and the backfill open and unexpired → filled with
        ``assigned`` and the tickets; or nothing changes and False. A ticket taken here can never be
        claimed for a new match, nor a claimed one taken here."""

    @abstractmethod
    def reap_backfills(self, pool: str, now: float | None = None) -> int:
        """Open backfills past their TTL → expired (out of the open index); returns how many."""


@runtime_checkable
class StatsStore(Protocol):
    """Why and how long tickets wait: the pool's recent throughput (written by whoever commits matches,
    read by every API process, so it lives in the store), a ticket's wait-estimate inputs, and the
    matchmaker's reason for not matching a ticket yet."""

    @abstractmethod
    def record_matched(self, pool: str, players: int, now: float | None = None) -> None:
        """Add one committed match of ``players`` players to the pool's throughput record: players per
        whole second of the clock, the seconds older than THROUGHPUT_WINDOW_S dropped (so a read costs
        at most ~120 entries however busy the pool). ``now`` is honoured by the in-memory store; Redis
        uses its TIME."""

    @abstractmethod
    def wait_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        """What a ticket's wait estimate needs, read at once: its place in the queue, the queue's size
        in tickets and players, and the pool's recent throughput."""

    async def await_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        return self.wait_inputs(pool, ticket_id)

    @abstractmethod
    def set_unmatched_reason(self, pool: str, ticket_id: str, reason: str | None) -> bool:
        """Record (or clear, with None) why a queued ticket is not matched yet; False (nothing written)
        when the ticket is unknown or no longer queued/proposed."""


@runtime_checkable
class JobStore(Protocol):
    """Solve jobs from the matchmaker to the solver workers (Redis: a per-pool stream read by the
    ``solvers`` consumer group, a dead-letter stream for jobs that crash their solver)."""

    @abstractmethod
    def claim_job(self, pool: str, ticket_ids: list[str], match_id: str, lease_until: float,
                  job: dict[str, Any]) -> bool:
        """:meth:`TicketStore.claim` and :meth:`publish_job` in one atomic step, or neither (False: a
        ticket is not free)."""

    @abstractmethod
    def publish_job(self, pool: str, job: dict[str, Any]) -> str:
        """Queue a job for the pool's solvers; returns its entry id."""

    @abstractmethod
    def read_jobs(self, pool: str, consumer: str, count: int = 1,
                  block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        """New jobs for this solver, waiting at most ``block_ms``: (entry id, job)."""

    @abstractmethod
    def autoclaim_jobs(self, pool: str, consumer: str, min_idle_ms: int, count: int = 10) -> list[tuple[str, dict]]:
        """Take over jobs another solver read and never acknowledged (it crashed)."""

    @abstractmethod
    def job_deliveries(self, pool: str, entry_ids: list[str]) -> dict[str, int]:
        """How many times each pending job was delivered (read or taken over); absent = not pending."""

    @abstractmethod
    def ack_job(self, pool: str, entry_id: str) -> None:
        """The job is done: acknowledged and deleted."""

    @abstractmethod
    def dead_letter_job(self, pool: str, entry_id: str, job: dict[str, Any], reason: str, deliveries: int,
                        consumer: str) -> str:
        """Move a job to the pool's dead-letter stream and acknowledge and delete it, in one step."""

    @abstractmethod
    def dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        """The newest dead-lettered jobs of a pool, newest first: (entry id, fields with ``job`` parsed)."""

    @abstractmethod
    def release_crashed(self, pool: str, claim_id: str, ticket_ids: list[str], max_crashes: int,
                        reason: str) -> tuple[int, int]:
        """The tickets of a dead-lettered job: each counts one more crashed job; one at ``max_crashes`` ends
        expired with ``reason``, the others go back to the queue. Returns (requeued, expired)."""

    @abstractmethod
    def jobs_lag(self, pool: str) -> int:
        """Jobs waiting or in flight in the solver group (what a KEDA scaler reads)."""


@runtime_checkable
class InferenceStore(Protocol):
    """Predictor requests from solvers to the inference workers, and their replies."""

    @abstractmethod
    def request_inference(self, requests: list[dict[str, Any]]) -> None:
        """Queue predictor requests (each with an ``id``)."""

    @abstractmethod
    def await_inference(self, request_id: str, timeout_s: float) -> dict[str, Any] | None:
        """The reply to one request, waiting at most ``timeout_s``; None when none came."""

    @abstractmethod
    def read_inference(self, consumer: str, count: int, block_ms: int | None = BLOCK_MS) -> list[tuple[str, dict]]:
        """New predictor requests for this inference worker: (entry id, request)."""

    @abstractmethod
    def reply_inference(self, replies: dict[str, dict[str, Any]], entry_ids: list[str]) -> None:
        """Deliver each reply to its waiting solver, then acknowledge and delete the requests."""

    @abstractmethod
    def drop_stale_inference(self, consumer: str, min_idle_ms: int, count: int = 100) -> int:
        """Drop requests a dead inference worker left pending for ``min_idle_ms``; returns how many."""


@runtime_checkable
class LeaseStore(Protocol):
    """Worker liveness (heartbeats that expire) and pool leadership (one matchmaker loop per pool)."""

    @abstractmethod
    def heartbeat(self, kind: str, worker_id: str, ttl_s: int) -> None:
        """The worker is alive for ``ttl_s`` more seconds (of the store's clock)."""

    @abstractmethod
    def forget_worker(self, kind: str, worker_id: str) -> None:
        """The worker stopped: out of the live set now rather than when its heartbeat expires."""

    @abstractmethod
    def workers(self, kind: str) -> list[str]:
        """Live workers of a kind."""

    @abstractmethod
    def acquire_leader(self, pool: str, worker_id: str, ttl_ms: int) -> bool:
        """Take or renew the pool's leadership for ``ttl_ms``; False while another worker holds it."""


@runtime_checkable
class EventStore(Protocol):
    """The pools' ticket events as an ordered, resumable log, and the webhook deliveries read from it.

    Every ticket change that is an event (created, matched, cancelled, expired; see
    :mod:`mgmatch.app.events` for their public names) is appended to its pool's log in the same atomic
    step as the change. An entry id is ``<ms>-<seq>`` (a Redis stream id: the store clock's milliseconds,
    then a sequence), increasing within a pool. The log keeps about ``EVENTS_MAXLEN`` entries per pool
    (memory: ``max_events``); older ones are trimmed, and :meth:`last_trimmed_event_id` tells a reader
    resuming from an older id that it missed some. A delivery group (one per webhook) reads the log at its
    own pace: an entry read and not acknowledged stays pending for that group until it is acknowledged
    or dead-lettered, so a restarted deliverer resumes it.
    """

    @abstractmethod
    def read_events(self, pool: str, after: str, count: int = 100,
                    block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        """Entries of the pool's log after the id ``after`` ("0-0": from the oldest kept), oldest first,
        at most ``count``; with ``block_ms``, waits that long for one when there is none yet. Each is
        (entry id, fields: ``event``, ``ticket`` and, where they apply, ``match_id``, ``reason``, ``backfill``)."""

    @abstractmethod
    async def aread_events(self, pool: str, after: str, count: int = 100,
                           block_ms: int | None = None) -> list[tuple[str, dict[str, str]]]:
        """:meth:`read_events` for the API's event loop (waiting without holding a thread)."""

    @abstractmethod
    def last_event_id(self, pool: str) -> str:
        """The id of the pool's newest entry ("0-0" when the log is empty)."""

    @abstractmethod
    def last_trimmed_event_id(self, pool: str) -> str:
        """The newest id trimmed from the pool's log ("0-0" when none was): a reader resuming from an older
        id missed the entries in between; resuming from this one, it gets the oldest kept on."""

    @abstractmethod
    def wait_events(self, after: dict[str, str], block_ms: int) -> bool:
        """Wait up to ``block_ms`` for an entry newer than ``after[pool]`` in any of those pools' logs:
        True as soon as there is one (at once when there already is), False after the wait. What a reader
        of delivery groups (:meth:`read_deliveries` does not wait) blocks on instead of polling."""

    @abstractmethod
    def read_deliveries(self, pool: str, group: str, consumer: str, count: int = 100,
                        pending: bool = False) -> list[tuple[str, dict[str, str]]]:
        """Entries for the delivery ``group`` (created at the log's start when new): those never read by it,
        or with ``pending`` those this consumer read and has not acknowledged (what it resumes after a
        restart). Does not wait."""

    @abstractmethod
    def autoclaim_deliveries(self, pool: str, group: str, consumer: str, min_idle_ms: int,
                             count: int = 100) -> list[tuple[str, dict[str, str]]]:
        """Take over entries another consumer of the group read and left unacknowledged ``min_idle_ms``
        (it died); entries trimmed from the log meanwhile are dropped from the group."""

    @abstractmethod
    def ack_deliveries(self, pool: str, group: str, entry_ids: list[str]) -> None:
        """These entries are delivered: no longer pending for the group."""

    @abstractmethod
    def dead_letter_delivery(self, pool: str, group: str, entry_id: str, fields: dict[str, Any]) -> str:
        """Keep an entry the group gave up on in the pool's webhook dead-letter log (``fields`` JSON-able
        values: webhook, event, ticket, attempts, error, owner …) and acknowledge it, in one step; its id."""

    @abstractmethod
    def delivery_dead_letters(self, pool: str, count: int = 100) -> list[tuple[str, dict[str, Any]]]:
        """The newest webhook dead letters of a pool, newest first: (id, the fields given)."""


@runtime_checkable
class RatingStore(Protocol):
    """Players' ratings, updated from match results (:mod:`mgmatch.app.ratings`). A player's rating is
    global (not per pool). Each match updates its players once: the update names the match, and one
    already applied is not applied again (a result posted twice, a retry after a lost reply)."""

    @abstractmethod
    def get_ratings(self, player_ids: list[str]) -> dict[str, Rating]:
        """The stored ratings of these players; a player never rated is absent."""

    async def aget_ratings(self, player_ids: list[str]) -> dict[str, Rating]:
        return self.get_ratings(player_ids)

    @abstractmethod
    def rate_match(self, match_id: str, before: dict[str, int], after: dict[str, Rating]) -> str:
        """Write ``after`` for the match's players, atomically, once per match: ``"applied"``; ``"done"``
        when this match was applied before (nothing written); ``"stale"`` when a player's stored version
        is no longer ``before[player]`` (0 = never rated): another match rated them meanwhile, nothing
        written, the caller reads again and recomputes. The written versions are ``before + 1``. The
        mark that the match was applied lasts the match retention."""


@runtime_checkable
class ReadyCheckStore(Protocol):
    """Ready checks (a pool's ``accept``): a solved match is *proposed* to its players, who accept or
    decline it before a deadline. Its tickets stay ``proposed`` (live: their players hold them), under the
    match's id, out of the claim's reach (a release, a takeover or the lease reaper never touches them).

    - every player accepts → the tickets are ``matched`` and the match's record is kept, as a commit does;
    - a player declines → that player's ticket ends ``declined``; the others go back to the queue at their
      place (their original creation time: the head, not the tail);
    - the deadline passes (:meth:`reap_checks`) → tickets with a player who did not accept end ``expired``
      with a reason, the others go back to the queue at their place.

    Each step is atomic and safe to replay; a check's outcome is final. The check is kept in the store, so
    a killed worker loses nothing: whichever matchmaker reaps the pool next ends an overdue check."""

    @abstractmethod
    def propose_match(self, pool: str, claim_id: str, selected: list[str], result: MatchResult,
                      record: MatchRecord | None, deadline: float) -> bool:
        """Tickets proposed by ``claim_id`` → in the ready check of ``result.match_id`` until ``deadline``,
        all or none (False, and every ticket still held by the claim back in the queue, as a failed commit).
        Each ticket's result shows the match (its id, teams, the ticket's team) and ``accept_deadline``."""

    @abstractmethod
    def answer_check(self, pool: str, match_id: str, player_id: str, accept: bool,
                     owner: str | None = None, allocate: bool = False) -> str:
        """A player's answer. Returns the check's state after it: ``pending`` (others still to answer),
        ``matched`` (this was the last accept), ``declined`` or ``expired`` (it ended; an accept then changes
        nothing, nor does a second decline); ``unknown`` when there is no such check (or it is past its
        retention), the player is not in it, or ``owner`` is given and owns none of its tickets.

        With ``allocate`` (a pool with an allocator), the last accept makes the check ``allocating``
        instead of ``matched``: its tickets stay proposed, and the check waits for
        :meth:`take_allocations` and :meth:`finish_allocation`. Its deadline no longer applies."""

    @abstractmethod
    def reap_checks(self, pool: str, now: float | None = None) -> int:
        """End the pool's checks past their deadline (see above); returns how many ended."""

    @abstractmethod
    def take_allocations(self, pool: str, lease_s: float, limit: int = 16) -> list[dict[str, Any]]:
        """Confirmed checks waiting for a game server that no one holds (new ones, or ones whose taker's
        ``lease_s`` ran out: it died), each held for this caller for ``lease_s``: ``{"match_id", "pool",
        "teams", "region"}``, what the allocator is sent."""

    @abstractmethod
    def finish_allocation(self, pool: str, match_id: str, assignment: dict[str, Any] | None,
                          reason: str = "") -> str:
        """The allocator's outcome for an ``allocating`` check. With an ``assignment``: its tickets are
        ``matched``, each showing it as ``match.assignment``, and the record is kept (``matched``). With
        None: every ticket goes back to its place in the queue, its ``unmatched_reason`` set to ``reason``
        (``unallocated``). When a ticket was cancelled meanwhile, the others go back (``expired``). A check
        no longer allocating is left as it is (its state is returned): the first outcome stands."""


class Store(TicketStore, RecordStore, BackfillStore, StatsStore, RatingStore, ReadyCheckStore, EventStore,
            Protocol):
    """What the API and the matchmaker need of a store: every concern both implementations have."""

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None

