"""The match log a studio fits its engagement model on, written from the service's match records.

Every match the matchmaker commits keeps a :class:`~mgmatch.app.store.MatchRecord` (its teams as the
spec players the solver saw, features included); the game server posts the match's engagement to
``POST /v1/matches/{match_id}/result`` (:func:`mgmatch.app.service.post_result`). :func:`export_matchlog`
writes the matches that have a result as ``mgmatch-matchlog/v1`` (spec §5), ready for
``mgmatch fit-engagement --logs``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .store import RecordStore


@dataclass
class ExportStats:
    """What an export wrote: matches with a result per pool, and those skipped for lack of one."""

    written: dict[str, int] = field(default_factory=dict)
    without_result: dict[str, int] = field(default_factory=dict)

    @property
    def matches(self) -> int:
        return sum(self.written.values())


def export_matchlog(store: RecordStore, pools: list[str], out: Path, since: float | None = None) -> ExportStats:
    """Write every match of ``pools`` (with time ≥ ``since``) that has a result to ``out``, oldest first per pool,
    as spec §5 JSON Lines (``format`` on every line). Atomic: the lines go to a temporary file beside ``out``,
    which is renamed over it only once complete; on any error ``out`` is left as it was.

    A log holds one team count and one feature width (spec §5): pools that differ belong in separate logs;
    :class:`ValueError` names the first line that breaks this (nothing written).
    """
    stats = ExportStats()
    out = Path(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    shape: tuple[int, int, str] | None = None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for pool in pools:
                stats.written[pool] = stats.without_result[pool] = 0
                for rec in store.iter_matches(pool, since):
                    if rec.result is None:
                        stats.without_result[pool] += 1
                        continue
                    teams, dim = len(rec.teams), len(rec.teams[0][0]["features"])
                    if shape is None:
                        shape = (teams, dim, pool)
                    elif (teams, dim) != shape[:2]:
                        raise ValueError(f"pool {pool} has {teams} teams of players with {dim} features; pool "
                                         f"{shape[2]} has {shape[0]} and {shape[1]}: export them to separate logs "
                                         f"(--pool)")
                    f.write(json.dumps(rec.log_line(), allow_nan=False, separators=(",", ":")) + "\n")
                    stats.written[pool] += 1
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return stats
