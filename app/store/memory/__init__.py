"""The in-memory store (the embedded default): one module per concern over one shared state.

:mod:`.core` holds the state and the lock; :mod:`.tickets`, :mod:`.records`, :mod:`.backfills` and
:mod:`.stats` implement the protocols of :mod:`mgmatch.app.store.protocols`. :class:`MemoryStore`
is all of them at once, over one state, so the steps that span two concerns stay atomic.
"""

from __future__ import annotations

from ..protocols import Store
from .backfills import MemoryBackfills
from .checks import MemoryChecks
from .core import MemoryCore
from .ratings import MemoryRatings
from .records import MemoryRecords
from .stats import MemoryStats
from .tickets import MemoryTickets

__all__ = ["MemoryBackfills", "MemoryChecks", "MemoryCore", "MemoryRatings", "MemoryRecords", "MemoryStats", "MemoryStore", "MemoryTickets"]


class MemoryStore(MemoryTickets, MemoryRecords, MemoryBackfills, MemoryStats, MemoryRatings, MemoryChecks,
                  Store):
    """Everything in one process, behind one lock. The embedded default."""
