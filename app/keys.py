"""Every Redis key, stream, group and expiry of the service, each with its reason.

All keys of one pool carry the hash tag ``{pool}``: a pool lives on one Redis Cluster shard, so
the Lua scripts that touch several of its keys run there atomically, and pools spread over shards.
"""

from __future__ import annotations

from dataclasses import dataclass

# A finished ticket stays readable this long after its TTL, so a game server polling late still
# sees matched/expired/cancelled instead of 404.
TICKET_RETENTION_S = 3600
# The events stream keeps about this many entries (approximate trimming; events are never pending).
EVENTS_MAXLEN = 100_000
# The webhook dead-letter stream of a pool keeps about this many deliveries given up on.
WEBHOOK_DEAD_LETTER_MAXLEN = 10_000
# Consumer group of the solver workers on a pool's jobs stream.
SOLVER_GROUP = "solvers"
# Consumer group of the inference workers on the inference request stream.
INFERENCE_GROUP = "inference"
# An inference reply is kept this long for a late reader, then dropped.
INFERENCE_REPLY_TTL_S = 30
# A worker heartbeat lasts this long; a worker that stops refreshing it drops off the live set.
HEARTBEAT_TTL_S = 15
# The dead-letter stream of a pool keeps about this many jobs (approximate trimming; nothing reads
# them as a group, so nothing pending can be trimmed away).
DEAD_LETTER_MAXLEN = 10_000
# Predictor requests are latency-bound: an old one is worthless, so approximate trimming is fine. A
# trimmed entry still pending for a dead inference worker is dropped by XAUTOCLAIM (see
# RedisStore.drop_stale_inference); live workers read only new entries, which trimming never removes.
INFERENCE_MAXLEN = 10_000
# Blocking stream reads wait at most this long (below redis-py's socket timeout, see RedisStore).
BLOCK_MS = 1000


@dataclass(frozen=True)
class Keys:
    """Key names under one deployment prefix (``MGMATCH_KEY_PREFIX``)."""

    prefix: str = "mgm"

    def _pool(self, pool: str) -> str:
        return f"{self.prefix}:{{{pool}}}"

    def ticket(self, pool: str, ticket_id: str) -> str:
        """HASH: id, data (immutable JSON), status, created, expires (Redis TIME), match_id, lease, result,
        reason (why it ended expired early), crashes (dead-lettered jobs it was in)."""
        return f"{self._pool(pool)}:t:{ticket_id}"

    def queue(self, pool: str) -> str:
        """ZSET of queued ticket ids scored by creation time (longest waiting first)."""
        return f"{self._pool(pool)}:queue"

    def expiry(self, pool: str) -> str:
        """ZSET of queued ticket ids scored by their TTL deadline (for the reaper)."""
        return f"{self._pool(pool)}:expiry"

    def pending(self, pool: str) -> str:
        """ZSET of proposed ticket ids scored by their lease deadline (Open Match's pending list)."""
        return f"{self._pool(pool)}:pending"

    def dead_letters(self, pool: str) -> str:
        """STREAM of jobs that crashed their solver too often or raised (fields: job, reason,
        deliveries, entry, consumer, at), for an operator to inspect; trimmed to DEAD_LETTER_MAXLEN."""
        return f"{self._pool(pool)}:deadletter"

    def players_cursor(self, pool: str) -> str:
        """STRING: where the reaper's incremental check of the players hash (HSCAN) goes on."""
        return f"{self._pool(pool)}:players:cursor"

    def idempotency(self, pool: str, key: str) -> str:
        """STRING → ticket id; expires with the ticket's TTL."""
        return f"{self._pool(pool)}:idem:{key}"

    def players(self, pool: str) -> str:
        """HASH player id → ticket id of its live ticket: a player queues at most once per pool. An entry
        goes when its ticket ends (matched, cancelled, expired); the reaper drops any left behind."""
        return f"{self._pool(pool)}:players"

    def player_lock(self, player_id: str) -> str:
        """STRING → the id of the player's live ticket, in any pool (one live ticket per player). Its own
        hash tag ``{pl:<player id>}``, so it lives apart from every pool's slot: a create takes it (SET NX,
        or in place of a ticket that is no longer live) before the pool's create script runs, and nothing
        frees it when its ticket ends; a later create that meets it checks whether the ticket it names is
        still live. Expires with the ticket's TTL plus TICKET_RETENTION_S, when the ticket's hash goes."""
        return f"{self.prefix}:{{pl:{player_id}}}:live"

    def void(self, pool: str, ticket_id: str) -> str:
        """STRING: the ticket may never be created. Set by a create that found a player's lock naming a ticket
        whose hash does not exist (a create that stopped between taking its locks and its pool's script), so
        that create, if it still runs, refuses; expires after TICKET_RETENTION_S."""
        return f"{self._pool(pool)}:void:{ticket_id}"

    def events(self, pool: str) -> str:
        """STREAM of ticket events (created, matched, cancelled, expired; fields event, ticket and, where they
        apply, match_id, reason, backfill), written by the scripts that change the ticket, trimmed to about
        EVENTS_MAXLEN: what the SSE and gRPC watchers read (XREAD) and the webhooks' consumer groups deliver."""
        return f"{self._pool(pool)}:events"

    def webhook_dead_letters(self, pool: str) -> str:
        """STREAM of webhook deliveries given up on after their retries (fields: webhook, event, ticket, entry,
        attempts, error, owner, at), listed by ``GET /v1/webhooks/dead-letters``; trimmed to about
        WEBHOOK_DEAD_LETTER_MAXLEN. Each webhook reads the events stream with its own consumer group
        (``webhook:<id>``), so a restarted deliverer resumes the entries it had not acknowledged."""
        return f"{self._pool(pool)}:webhook-dead"

    def jobs(self, pool: str) -> str:
        """STREAM of solve jobs from the matchmaker to the solver workers (group ``solvers``)."""
        return f"{self._pool(pool)}:jobs"

    def leader(self, pool: str) -> str:
        """STRING: the matchmaker that owns the pool (SET NX PX); one matchmaker loop per pool."""
        return f"{self._pool(pool)}:leader"

    def backfill(self, pool: str, backfill_id: str) -> str:
        """HASH: id, data (immutable JSON: match_id, players, teams, open, owner), status
        (open/filled/cancelled/expired), created, expires (Redis TIME), assigned and tickets (JSON, set
        when filled), filled_at. Lives until its TTL plus TICKET_RETENTION_S."""
        return f"{self._pool(pool)}:bf:{backfill_id}"

    def backfills(self, pool: str) -> str:
        """ZSET of open backfill ids scored by their TTL deadline: what the matchmaker tries to fill
        (soonest to expire first) and what the backfill reaper expires."""
        return f"{self._pool(pool)}:backfills"

    def match(self, pool: str, match_id: str) -> str:
        """HASH of one committed match (:class:`~mgmatch.app.store.base.MatchRecord`): record (immutable JSON:
        teams of spec players as at match time, method, arm, model version, objective, owners), time (Redis
        TIME of the commit), result and result_at once the game server posted it. Written by the commit script
        with the tickets it matches; expires after the match retention (``MGMATCH_MATCH_RETENTION_S``)."""
        return f"{self._pool(pool)}:m:{match_id}"

    def matches(self, pool: str) -> str:
        """ZSET match id → commit time (Redis TIME): the index the match log is exported from. The commit script
        trims it by age (the retention) and to ``MGMATCH_MATCH_MAX_COUNT`` entries, deleting the trimmed hashes."""
        return f"{self._pool(pool)}:matches"

    def throughput(self, pool: str) -> str:
        """HASH whole second of Redis TIME → players matched in that second (HINCRBY per committed match):
        seconds older than THROUGHPUT_WINDOW_S are dropped once the hash holds more than that many, and
        the key expires after two idle windows, so it never holds more than ~120 fields. Solver workers
        write it, API processes read it (HGETALL, in the wait-estimate script) for ``estimated_wait_s``."""
        return f"{self._pool(pool)}:throughput"

    def check(self, pool: str, match_id: str) -> str:
        """HASH of one ready check (a pool's ``accept``): status (pending, allocating, matched, declined,
        expired or unallocated), deadline (Redis TIME), tickets (JSON ids), players (JSON player id → ticket id), owners (JSON), record (the
        match's record JSON, kept when everyone accepted), accepted (count) and ``a:<player id>`` per accept.
        Expires the timeout plus TICKET_RETENTION_S after it was proposed."""
        return f"{self._pool(pool)}:rc:{match_id}"

    def checks(self, pool: str) -> str:
        """ZSET of the pool's pending ready checks (match ids) by deadline: what the reaper ends."""
        return f"{self._pool(pool)}:checks"

    def allocations(self, pool: str) -> str:
        """ZSET of the pool's ready checks that every player accepted and that wait for the pool's allocator
        (match ids), by when a matchmaker may take one (now for a new one; a taker's lease end after)."""
        return f"{self._pool(pool)}:allocations"

    def rating(self, player_id: str) -> str:
        """HASH of one player's rating: mu, sigma, games, version (incremented by every update). In the
        ``{ratings}`` slot with every other rating, so one script updates a match's players atomically on a
        cluster; no expiry (a rating is the player's history)."""
        return f"{self.prefix}:{{ratings}}:r:{player_id}"

    def rated(self, match_id: str) -> str:
        """STRING: the match's result already updated its players' ratings (once per match); expires after
        the match retention, when its record goes (a result can no longer be posted then)."""
        return f"{self.prefix}:{{ratings}}:done:{match_id}"

    def inference_requests(self) -> str:
        """STREAM of predictor requests (group ``inference``); not pool-bound, its own shard."""
        return f"{self.prefix}:{{infer}}:req"

    def inference_reply(self, request_id: str) -> str:
        """LIST with one reply, popped by the waiting solver (BLPOP); expires after INFERENCE_REPLY_TTL_S."""
        return f"{self.prefix}:{{infer}}:resp:{request_id}"

    def workers(self, kind: str) -> str:
        """ZSET worker id → deadline (Redis TIME + HEARTBEAT_TTL_S) of one worker kind: the live ones are
        read with one ZRANGEBYSCORE (no keyspace SCAN); heartbeats prune the dead."""
        return f"{self.prefix}:workers:{kind}"
