"""The instance object (spec §1) of queued tickets in a pool: shared by the matchmaker's matches and
the backfiller's fills."""

from __future__ import annotations

from typing import Any

from .config import PoolConfig
from .store import Ticket


def instance_object(pool: PoolConfig, tickets: list[Ticket], now: float) -> tuple[dict[str, Any], dict[str, str]]:
    """The instance object of a candidate pool, and player id → ticket id in player order (a ticket
    whose player id was already seen is left out)."""
    players, owner = [], {}
    parties = False
    for t in tickets:
        if any(p["id"] in owner for p in t.players):
            continue
        for p in t.players:
            q = {k: v for k, v in p.items() if k != "party"}
            q["waited_s"] = max(0.0, now - t.created_at)
            if len(t.players) > 1:
                q["party"] = t.id
                parties = True
            players.append(q)
            owner[p["id"]] = t.id
    rules = list(pool.rules)
    if parties and not any(r.get("kind") == "party_together" for r in rules):
        rules.append({"kind": "party_together"})
    obj = {"teams": pool.teams, "players": players, "rules": rules}
    if pool.team_sizes is not None:
        obj["team_sizes"] = list(pool.team_sizes)
    else:
        obj["team_size"] = pool.team_size
    if pool.engagement_model:
        obj["engagement_model"] = pool.engagement_model
    return obj, owner
