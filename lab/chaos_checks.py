"""What a chaos run checks in the tickets it read back: double booking, match consistency, waits.

Pure functions over ticket views (the JSON of ``GET /v1/tickets/{id}``), shared by ``mgmatch bench
chaos`` and its test (:mod:`mgmatch.lab.chaos` runs the processes and collects the views).

A match is consistent when every ticket that reports it reports the same teams, each ticket's
players sit in the team it names, and the match has the pool's team sizes. A player is double
booked when their id appears in two different matches. A ticket that filled a backfill reports the
backfill's running match (``match.backfill_id`` set): its "match" here is the backfill, so a player
in a backfill and in a new match is double booked too; :func:`check_backfills` also checks the
backfills' own views against the tickets'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class MatchCheck:
    """The outcome of :func:`check_matches`."""

    matches: int = 0
    matched_players: int = 0
    double_booked: list[str] = field(default_factory=list)      # player ids in two or more matches
    inconsistent: list[str] = field(default_factory=list)       # ticket ids whose match disagrees with another's
    malformed: list[str] = field(default_factory=list)          # match ids with the wrong team sizes

    @property
    def ok(self) -> bool:
        return not (self.double_booked or self.inconsistent or self.malformed)


def check_matches(views: list[dict], sizes: tuple[int, ...]) -> MatchCheck:
    """Check matched ticket views (each with ``id``, ``players`` and ``match``) against each other.

    Args:
        views: ticket views whose status is ``matched``; others are ignored.
        sizes: the pool's team sizes (e.g. ``(3, 3)``).

    Returns:
        Counts and the offending ids.
    """
    out = MatchCheck()
    teams_of: dict[str, list[list[str]]] = {}
    for v in views:
        m = v.get("match") if v.get("status") == "matched" else None
        if not m:
            continue
        mid, teams, team = m.get("backfill_id") or m.get("match_id"), m.get("teams"), m.get("team")
        if not isinstance(teams, list) or not isinstance(team, int) or not 0 <= team < len(teams):
            out.inconsistent.append(v["id"])
            continue
        first = teams_of.setdefault(mid, teams)
        if first != teams or not set(v.get("players", [])) <= set(teams[team]):
            out.inconsistent.append(v["id"])
    seen: dict[str, str] = {}
    booked: set[str] = set()
    for mid, teams in teams_of.items():
        if tuple(len(t) for t in teams) != tuple(sizes):
            out.malformed.append(mid)
        for pid in (p for t in teams for p in t):
            if pid in seen and seen[pid] != mid:
                booked.add(pid)
            seen[pid] = mid
    out.matches = len(teams_of)
    out.matched_players = len(seen)
    out.double_booked = sorted(booked)
    return out


@dataclass
class BackfillCheck:
    """The outcome of :func:`check_backfills`."""

    by_status: dict[str, int] = field(default_factory=dict)
    assigned_players: int = 0
    double_booked: list[str] = field(default_factory=list)  # players in a backfill and in another match or backfill
    mismatched: list[str] = field(default_factory=list)     # backfill ids whose assignment its tickets do not confirm

    @property
    def ok(self) -> bool:
        return not (self.double_booked or self.mismatched)


def check_backfills(backfills: list[dict], tickets: list[dict]) -> BackfillCheck:
    """Check backfill views (``GET /v1/backfills/{id}``) against ticket views: every player a filled
    backfill assigned has a matched ticket that names this backfill in the team it was assigned to,
    no player is assigned by two backfills, and no ticket names a backfill that does not list it."""
    out = BackfillCheck()
    matched = {p: v for v in tickets if v.get("status") == "matched" and v.get("match")
               for p in v.get("players", [])}
    assigned_by: dict[str, str] = {}
    booked: set[str] = set()
    listed: dict[str, set[str]] = {}
    for b in backfills:
        out.by_status[b["status"]] = out.by_status.get(b["status"], 0) + 1
        if b["status"] != "filled":
            continue
        listed[b["id"]] = set()
        bad = False
        for j, team in enumerate(b.get("assigned") or []):
            for pid in team:
                out.assigned_players += 1
                listed[b["id"]].add(pid)
                if pid in assigned_by:
                    booked.add(pid)
                assigned_by[pid] = b["id"]
                v = matched.get(pid)
                m = (v or {}).get("match") or {}
                if m.get("backfill_id") != b["id"]:
                    if v is not None:
                        booked.add(pid)  # matched elsewhere
                    bad = True
                elif m.get("team") != j or m.get("match_id") != b.get("match_id"):
                    bad = True
        if bad:
            out.mismatched.append(b["id"])
    for pid, v in matched.items():
        bid = (v.get("match") or {}).get("backfill_id")
        if bid is not None and bid in listed and pid not in listed[bid] and bid not in out.mismatched:
            out.mismatched.append(bid)
    out.double_booked = sorted(booked)
    return out


@dataclass
class TwinCheck:
    """The outcome of :func:`check_twins`: players queued again in a second pool right after their
    first ticket was accepted (one player, one live ticket, across pools)."""

    posted: int = 0
    refused: int = 0                                          # 409 naming players[0].id and the first ticket
    after_end: int = 0                                        # accepted: the first ticket had ended meanwhile
    double_live: list[str] = field(default_factory=list)      # accepted while the first ticket was still live
    wrong_answer: list[str] = field(default_factory=list)     # a 409 that names another field or ticket

    @property
    def ok(self) -> bool:
        return not (self.double_live or self.wrong_answer)


def check_twins(outcomes: list[dict]) -> TwinCheck:
    """Classify twin posts. Each outcome: ``player``, ``first`` (the first ticket's id), ``code`` (the
    twin's HTTP status), ``error`` (the 409's error object, if any), ``first_status`` (the first
    ticket's status read *after* the twin's answer: ``queued``/``proposed`` = still live, so an
    accepted twin is a second live ticket; reading after errs on the side of missing one, never of
    reporting one that did not happen)."""
    out = TwinCheck()
    for o in outcomes:
        out.posted += 1
        if o["code"] == 409:
            err = o.get("error") or {}
            if err.get("field") == "players[0].id" and o["first"] in err.get("message", ""):
                out.refused += 1
            elif o.get("first_status") in ("queued", "proposed"):
                out.wrong_answer.append(o["player"])  # refused, but not naming the ticket that holds the player
            else:
                out.refused += 1  # the first ended and another holder (a retry's) was named
        elif o.get("first_status") in ("queued", "proposed"):
            out.double_live.append(o["player"])
        else:
            out.after_end += 1
    return out


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0–100) rounded to 3 decimals; None for no values."""
    if not values:
        return None
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 3)
