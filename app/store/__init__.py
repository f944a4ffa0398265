"""The ticket store: one interface (:mod:`.base`), in memory (:mod:`.memory`, the embedded default)
and in Redis (:mod:`.redis`, production; its Lua scripts in ``lua/``), and the factory."""

from __future__ import annotations

from .base import (
    RETENTION_S,
    Backfill,
    Conflict,
    MatchResult,
    Store,
    StoreUnavailable,
    Ticket,
    TicketStatus,
    new_ticket_id,
    pool_of,
    wait_reachable,
)
from .memory import MemoryStore
from .redis import RedisStore

__all__ = ["RETENTION_S", "Backfill", "Conflict", "MatchResult", "MemoryStore", "RedisStore", "Store", "StoreUnavailable",
           "Ticket", "TicketStatus", "make_store", "new_ticket_id", "pool_of", "wait_reachable"]


def make_store(settings) -> Store:
    """The one factory: ``settings.store`` picks the implementation."""
    if settings.store == "redis":
        return RedisStore.from_url(settings.redis_url, prefix=settings.key_prefix)
    return MemoryStore()
