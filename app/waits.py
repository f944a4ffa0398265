"""Wait estimates of queued tickets and the reasons a ticket stays unmatched.

**Estimate** (:func:`estimate_wait`). The pool's throughput μ (players matched per second over the
last ``THROUGHPUT_WINDOW_S``, written by whoever commits matches, read from the store) and the
ticket's place in the queue (players ahead ``a``, its own players ``s``, players queued ``Q``; the
queue is ordered by creation time; players are counted as tickets × the pool's players per live
ticket, so parties count by their size). With ``m`` players per match, the ticket's match is the
``j = ⌈(a + s) / m⌉``-th of the queue. Two things must happen before it forms: enough players must be
there (``j·m − Q`` more must arrive) and the ``j − 1`` matches before it must be formed; in a steady
pool both go at μ (what arrives is what is matched), so::

    estimated_wait_s = max(j·m − Q, (j − 1)·m) / μ

That is the time until the missing players arrive while the queue is shorter than a match
(the usual state of a pool that keeps up), and the time to drain the players ahead when it is
backlogged; it is capped at the ticket's remaining TTL (it cannot wait longer). It is ``None``
(unknown) while the pool formed matches in fewer than two distinct seconds of the window, and for a
ticket that is not queued.

**Reasons** (:func:`diagnose`). After ``MGMATCH_REASON_AFTER_TICKS`` ticks in which a ticket was a
candidate of its pool's matchmaker without being matched, the matchmaker checks the pool's rules
against the tickets queued with it and stores the first failing check as ``unmatched_reason``.
Each check is a necessary condition for a match that includes the ticket, cheap enough for the
matchmaker's loop (sorting and counting over the scan window, no solve). The checks, in order:
players queued, party sizes that cannot fill the teams, ``max_ping`` regions, ``roles`` /
``role_min`` / ``role_max`` supply, ``skill_spread``, ``skill_balance`` (with ``max_ping``, the role
and skill checks run per region the ticket can play in). When the whole queue passes, the same
checks run on the players a solve would consider now (the dispatch policy's candidate selection):
the ticket is not among them, or they hold no match for it. When every check passes, the reason
says that matches could be formed but the solver picked other players.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .config import PoolConfig
from .store import Ticket
from .store.base import WaitInputs


def estimate_wait(inp: WaitInputs, own_players: int, match_size: int,
                  expires_at: float | None = None) -> float | None:
    """Seconds until the ticket's match forms (see the module doc), or None when unknown; never more
    than the ticket's remaining TTL (``expires_at`` against the store's clock ``inp.now``): a ticket
    does not wait past it."""
    if inp.rank is None or inp.rate is None or not inp.rate > 0 or match_size < 1:
        return None
    per_ticket = inp.live_players / inp.live_tickets if inp.live_tickets > 0 and inp.live_players > 0 else 1.0
    ahead = inp.rank * per_ticket
    mine = ahead + max(1, own_players)
    queued = max(inp.queued_tickets * per_ticket, mine)
    j = max(1, math.ceil(mine / match_size - 1e-9))
    wait = max(j * match_size - queued, (j - 1) * match_size, 0.0) / inp.rate
    if expires_at is not None and inp.now is not None:
        wait = min(wait, max(0.0, expires_at - inp.now))
    return round(wait, 1)


# --------------------------------------------------------------------------- reasons


def _rules(pool: PoolConfig, kind: str) -> list[dict[str, Any]]:
    return [r for r in pool.rules if isinstance(r, dict) and r.get("kind") == kind]


def _pack(need: tuple[int, ...], counts: tuple[int, ...]) -> bool:
    """Can parties (``counts[k]`` parties of size k+1) fill teams of the sizes ``need`` exactly?"""
    return _pack_sorted(tuple(sorted(need, reverse=True)), counts)


@lru_cache(maxsize=4096)
def _pack_sorted(need: tuple[int, ...], counts: tuple[int, ...]) -> bool:
    if not need:
        return True
    first, rest = need[0], need[1:]
    if first == 0:
        return _pack_sorted(rest, counts)
    for k in range(min(first, len(counts)), 0, -1):
        if counts[k - 1] > 0:
            c = list(counts)
            c[k - 1] -= 1
            left = tuple(sorted((first - k, *rest), reverse=True))
            if _pack_sorted(left, tuple(c)):
                return True
    return False


def _party_reason(pool: PoolConfig, t: Ticket, others: Sequence[Ticket]) -> str | None:
    sizes = [len(o.players) for o in others]
    if len(t.players) == 1 and all(s == 1 for s in sizes):
        return None
    top = pool.max_party
    cap = pool.match_size  # more parties of one size than players in a match never help
    counts = tuple(min(cap, sum(1 for s in sizes if s == k)) for k in range(1, top + 1))
    team_sizes = list(pool.sizes)
    s = len(t.players)
    for j, size in enumerate(team_sizes):  # the ticket's party on some team, the others filled around it
        if size >= s and _pack(tuple(team_sizes[:j] + [size - s] + team_sizes[j + 1:]), counts):
            return None
    shown = ", ".join(f"{n}×{k}" for k, n in enumerate(counts, 1) if n)
    return (f"the queued parties cannot fill teams of {'/'.join(map(str, team_sizes))} around this party of {s} "
            f"(queued: {shown or 'none'})")


def _regions(players: list[dict[str, Any]], max_ms: float) -> set[str]:
    """Regions where every one of the players has a ping ≤ max_ms."""
    out: set[str] | None = None
    for p in players:
        ok = {r for r, ms in (p.get("pings") or {}).items() if ms <= max_ms}
        out = ok if out is None else out & ok
    return out or set()


def _ping_reason(pool: PoolConfig, t: Ticket,
                 others: Sequence[Ticket]) -> tuple[str | None, list[tuple[str | None, list[Ticket]]]]:
    """The max_ping reason, and per region this ticket can play in (most players first, at most 4) the
    other tickets that can play there too; without a max_ping rule, one group of every ticket."""
    rules = _rules(pool, "max_ping")
    if not rules:
        return None, [(None, list(others))]
    max_ms = min(float(r["max_ms"]) for r in rules)
    mine = _regions(t.players, max_ms)
    if not mine:
        best = min(((max((p.get("pings") or {}).get(r, math.inf) for p in t.players), r)
                    for r in {r for p in t.players for r in (p.get("pings") or {})}), default=None)
        near = f" (nearest: {best[1]} at {best[0]:g} ms)" if best and math.isfinite(best[0]) else ""
        return f"no region within max_ping {max_ms:g} ms for this ticket's players{near}", []
    groups: dict[str, list[Ticket]] = {r: [] for r in mine}
    for o in others:
        for r in mine & _regions(o.players, max_ms):
            groups[r].append(o)
    players = {r: len(t.players) + sum(len(o.players) for o in g) for r, g in groups.items()}
    order = sorted(groups, key=lambda r: (-players[r], r))
    region = order[0]
    if players[region] < pool.match_size:
        return (f"no region within max_ping {max_ms:g} ms has enough players for this ticket: best {region} "
                f"with {players[region]} of {pool.match_size}"), []
    return None, [(r, groups[r]) for r in order[:4] if players[r] >= pool.match_size]


def _role_reason(pool: PoolConfig, t: Ticket, others: Sequence[Ticket]) -> str | None:
    players = [p for o in (t, *others) for p in o.players]
    accepts = [set(p.get("roles") or ()) for p in players]
    teams = pool.teams
    for r in _rules(pool, "roles"):
        slots = {role: int(n) * teams for role, n in (r.get("slots") or {}).items()}
        for role, need in slots.items():
            have = sum(1 for a in accepts if role in a)
            if have < need:
                return (f"not enough {role} players: a match needs {need} players who play {role}, "
                        f"{have} queued")
        # the ticket's own roles: every slot it could take is claimed by specialists who waited longer
        ahead = [set(p.get("roles") or ()) for o in others if o.created_at <= t.created_at for p in o.players]
        mine = set.intersection(*(set(p.get("roles") or ()) for p in t.players)) & set(slots)
        if mine and all(sum(1 for a in ahead if a == {role}) >= slots[role] for role in mine):
            role = "/".join(sorted(mine))
            n = sum(1 for a in ahead if len(a) == 1 and next(iter(a)) in mine)
            return (f"no team has a free {role} slot: {n} players who play only {role} waited longer for the "
                    f"{sum(slots[x] for x in mine)} {role} slots of a match")
    for r in _rules(pool, "role_min"):
        need, role = int(r["min"]) * teams, r["role"]
        have = sum(1 for a in accepts if role in a)
        if have < need:
            return f"role_min {role}: a match needs {need} players who play {role}, {have} queued"
    for r in _rules(pool, "role_max"):
        role = r["role"]
        need = pool.match_size - int(r["max"]) * teams
        have = sum(1 for a in accepts if role not in a)
        if need > 0 and have < need:
            return f"role_max {role}: a match needs {need} players who do not play {role}, {have} queued"
    return None


def _skill(p: dict[str, Any]) -> float | None:
    s = p.get("skill")
    return float(s) if isinstance(s, int | float) else None


def _spread_reason(pool: PoolConfig, t: Ticket, others: Sequence[Ticket]) -> str | None:
    rules = _rules(pool, "skill_spread")
    if not rules:
        return None
    spread = min(float(r["max_spread"]) for r in rules)
    own = [s for p in t.players if (s := _skill(p)) is not None]
    if not own:
        return None
    lo, hi = min(own), max(own)
    if hi - lo > spread:
        return f"this party's skills span {hi - lo:g} > skill_spread {spread:g}"
    skills = sorted([s for o in others for p in o.players if (s := _skill(p)) is not None] + own)
    best = 0
    j = 0
    for i, start in enumerate(skills):  # windows [start, start + spread] that hold the ticket's players
        if start > lo:
            break
        if start + spread < hi:
            continue
        j = max(j, i)
        while j < len(skills) and skills[j] <= start + spread:
            j += 1
        best = max(best, j - i)
    if best < pool.match_size:
        mid = (lo + hi) / 2
        return (f"only {best} queued players within skill_spread {spread:g} of this ticket's skill {mid:.0f} "
                f"({pool.match_size} needed)")
    return None


def _balance_reason(pool: PoolConfig, t: Ticket, others: Sequence[Ticket]) -> str | None:
    rules = _rules(pool, "skill_balance")
    if not rules:
        return None
    max_diff = min(float(r["max_diff"]) for r in rules)
    own = [s for p in t.players if (s := _skill(p)) is not None]
    if len(own) != len(t.players):
        return None
    centre = sum(own) / len(own)
    rest = sorted((s for o in others for p in o.players if (s := _skill(p)) is not None),
                  key=lambda s: abs(s - centre))[: pool.match_size - len(own)]
    if len(rest) < pool.match_size - len(own):
        return None
    # longest-processing-time split of the nearest players, this ticket's party fixed on the largest team
    sizes = list(pool.sizes)
    first = max(range(len(sizes)), key=lambda j: sizes[j])
    sums = [0.0] * len(sizes)
    free = list(sizes)
    sums[first], free[first] = sum(own), sizes[first] - len(own)
    if free[first] < 0:
        return None
    for s in sorted(rest, reverse=True):
        j = min((j for j in range(len(sizes)) if free[j] > 0), key=lambda j: sums[j] / sizes[j] + s / sizes[j])
        sums[j] += s
        free[j] -= 1
    means = [sums[j] / sizes[j] for j in range(len(sizes))]
    diff = max(means) - min(means)
    if diff > max_diff:
        return (f"skill_balance {max_diff:g}: the {pool.match_size} queued players nearest this ticket's skill "
                f"split into teams {diff:.0f} apart in mean skill")
    return None


def _rule_reason(pool: PoolConfig, t: Ticket, others: Sequence[Ticket]) -> str | None:
    """The first rule check that fails for ``t`` among ``others``; with max_ping, the role and skill
    checks run per region the ticket can play in, and fail only when they fail in every one (the
    reason given is the best region's)."""
    total = len(t.players) + sum(len(o.players) for o in others)
    if total < pool.match_size:
        return f"only {total} players queued in pool {pool.name}; a match needs {pool.match_size}"
    why = _party_reason(pool, t, others)
    if why:
        return why
    why, groups = _ping_reason(pool, t, others)
    if why:
        return why
    first = None
    for region, group in groups:
        why = next((w for check in (_role_reason, _spread_reason, _balance_reason) if (w := check(pool, t, group))),
                   None)
        if why is None:
            return None
        if first is None:
            first = (region, why)
    region, why = first
    return why if region is None else f"in region {region} (the best within max_ping): {why}"


def diagnose(pool: PoolConfig, t: Ticket, others: Sequence[Ticket], candidates: set[str] | None = None,
             solved_empty: bool = False) -> str:
    """Why ``t`` is not matched, from the pool's rules against the other queued tickets ``others``
    (the matchmaker's window of the ticket's group): the first failing check, see the module doc.

    ``candidates``: the ticket ids a solve would consider now (the dispatch policy's selection).
    When the whole queue passes every check, the reason is then about that selection: the ticket is
    not in it, or the checks fail among the selected players. ``solved_empty``: the last solve over
    the ticket's candidates formed no match (what the reason says when every check passes).
    """
    why = _rule_reason(pool, t, others)
    if why:
        return why
    total = len(t.players) + sum(len(o.players) for o in others)
    ahead = sum(len(o.players) for o in others if o.created_at < t.created_at)
    if candidates is None:
        if ahead + len(t.players) > pool.max_candidates:
            return (f"{ahead} players waited longer; a solve considers the {pool.max_candidates} longest-waiting "
                    "players")
    elif t.id not in candidates:
        return (f"not among the {pool.max_candidates} players a solve considers (the longest waiter and those "
                f"nearest their skill; {ahead} players waited longer than this ticket)")
    else:
        chosen = [o for o in others if o.id in candidates]
        why = _rule_reason(pool, t, chosen)
        if why:
            n = len(t.players) + sum(len(o.players) for o in chosen)
            return f"among the {n} players a solve considers: {why}"
    if solved_empty:
        return (f"the last solve over the players a solve considers formed no match: the rules together admit none "
                f"among them, or none was found within the pool's {pool.time_budget_ms:g} ms budget")
    return (f"{total} players queued could form a match, but the matches formed so far left this ticket out "
            "(the solver picked players who fit the rules or the engagement model better)")
