"""The ticket store: its types (:mod:`.base`), one protocol per concern (:mod:`.protocols`: tickets,
match records, backfills, wait statistics, and the workers' jobs, inference and leases), each in
memory (:mod:`.memory`, the embedded default) and in Redis (:mod:`.redis`, production, one server or
a cluster; its Lua scripts in ``lua/``), and the factory."""

from __future__ import annotations

from .base import (
    MATCH_MAX_COUNT,
    MATCH_RETENTION_S,
    RETENTION_S,
    Backfill,
    Conflict,
    MatchRecord,
    MatchResult,
    PlayerBusy,
    Rating,
    StoreUnavailable,
    Ticket,
    TicketStatus,
    match_pool,
    new_ticket_id,
    pool_of,
    wait_reachable,
)
from .memory import MemoryStore
from .protocols import (
    BackfillStore,
    InferenceStore,
    JobStore,
    LeaseStore,
    RatingStore,
    ReadyCheckStore,
    RecordStore,
    StatsStore,
    Store,
    TicketStore,
)
from .redis import RedisStore

__all__ = ["MATCH_MAX_COUNT", "MATCH_RETENTION_S", "RETENTION_S", "Backfill", "BackfillStore", "Conflict",
           "InferenceStore", "JobStore", "LeaseStore", "MatchRecord", "MatchResult", "MemoryStore", "PlayerBusy", "Rating", "RatingStore", "ReadyCheckStore", "RecordStore",
           "RedisStore", "StatsStore", "Store", "StoreUnavailable", "Ticket", "TicketStatus", "TicketStore",
           "make_store", "match_pool", "new_ticket_id", "pool_of", "wait_reachable"]


def make_store(settings) -> Store:
    """The one factory: ``settings.store`` picks the implementation."""
    if settings.store == "redis":
        return RedisStore.from_url(settings.redis_url, prefix=settings.key_prefix,
                                   match_retention_s=settings.match_retention_s,
                                   call_timeout_s=settings.store_timeout_s,
                                   match_max_count=settings.match_max_count)
    return MemoryStore(match_retention_s=settings.match_retention_s, match_max_count=settings.match_max_count)
