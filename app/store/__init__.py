"""The ticket store: one interface (:mod:`.base`), in memory (:mod:`.memory`, the embedded default)
and in Redis (:mod:`.redis`, production; its Lua scripts in ``lua/``), and the factory."""

from __future__ import annotations

from .base import (
    MATCH_MAX_COUNT,
    MATCH_RETENTION_S,
    RETENTION_S,
    Backfill,
    Conflict,
    MatchRecord,
    MatchResult,
    Store,
    StoreUnavailable,
    Ticket,
    TicketStatus,
    match_pool,
    new_ticket_id,
    pool_of,
    wait_reachable,
)
from .memory import MemoryStore
from .redis import RedisStore

__all__ = ["MATCH_MAX_COUNT", "MATCH_RETENTION_S", "RETENTION_S", "Backfill", "Conflict", "MatchRecord", "MatchResult",
           "MemoryStore", "RedisStore", "Store", "StoreUnavailable", "Ticket", "TicketStatus", "make_store",
           "match_pool", "new_ticket_id", "pool_of", "wait_reachable"]


def make_store(settings) -> Store:
    """The one factory: ``settings.store`` picks the implementation."""
    if settings.store == "redis":
        return RedisStore.from_url(settings.redis_url, prefix=settings.key_prefix,
                                   match_retention_s=settings.match_retention_s,
                                   call_timeout_s=settings.store_timeout_s,
                                   match_max_count=settings.match_max_count)
    return MemoryStore(match_retention_s=settings.match_retention_s, match_max_count=settings.match_max_count)
