"""Offline, simulated-time runs of the service's matchmaking: ``mgmatch replay`` and ``mgmatch bench waits``.

One driver (:func:`simulate`) pushes a ticket stream through a service config: an in-memory store
and one :class:`~mgmatch.app.matchmaker.Matchmaker` per pool, all on a simulated clock; tickets
arrive at their stream times, the matchmakers tick every ``tick_s`` of simulated time (the service's
50 ms), and every solve runs the real engine (the pool's method, budget and rules), whose wall time
does not advance the simulated clock. Ticks while no pool has a match's worth of live players are
skipped (no policy can form a match then), so an hour of stream costs what its solves cost.

**Ticket stream** ``mgmatch-tickets/v1``: JSON Lines, one ticket per line::

    {"time": 12.5, "pool": "3v3", "players": [{"id": "p1", "features": [...], "skill": 1510, ...}]}

``time`` (seconds from any origin, ≥ 0; lines in any order), ``pool`` (a pool of the config),
``players`` (one player or a party, spec players as the ticket API takes them). Optional: ``id``
(the ticket's name in reports), ``ttl_s`` (default: the pool's ``ticket_ttl_s``), ``format``
(``"mgmatch-tickets/v1"``). :func:`read_stream` names the line and the field of the first error;
:func:`generate_stream` writes a seeded stream from a scenario preset's player world.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from mgmatch.app.ab import Experiments
from mgmatch.app.config import ServiceConfig
from mgmatch.app.matchmaker import Matchmaker
from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings
from mgmatch.app.store import Conflict, MemoryStore, Ticket, new_ticket_id
from mgmatch.core.errors import InvalidInput, from_pydantic
from mgmatch.core.files import read_text
from mgmatch.core.instance import Player

STREAM_FORMAT = "mgmatch-tickets/v1"
_KNOWN_FIELDS = {"time", "pool", "players", "id", "ttl_s", "format"}


@dataclass(frozen=True)
class Arrival:
    """One ticket of a stream."""

    time: float
    pool: str
    players: list[dict[str, Any]]
    name: str
    ttl_s: float | None = None
    line: int = 0


class SimClock:
    """The simulated clock every component of a run reads."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- the stream file


def _bad(where: str, line: int, field_: str, message: str) -> InvalidInput:
    return InvalidInput(f"{where} line {line}, {field_}", message)


def parse_arrival(obj: Any, line: int, where: str = "tickets") -> Arrival:
    """One stream line (already JSON-decoded) → an Arrival; InvalidInput names the line and field."""
    if not isinstance(obj, dict):
        raise _bad(where, line, "ticket", "expected a JSON object")
    unknown = sorted(set(obj) - _KNOWN_FIELDS)
    if unknown:
        raise _bad(where, line, unknown[0], f"unknown field; a {STREAM_FORMAT} line has {', '.join(sorted(_KNOWN_FIELDS))}")
    if "format" in obj and obj["format"] != STREAM_FORMAT:
        raise _bad(where, line, "format", f"expected {STREAM_FORMAT!r}, got {str(obj['format'])[:40]!r}")
    t = obj.get("time")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise _bad(where, line, "time", f"expected seconds ≥ 0, got {str(t)[:40]}")
    pool = obj.get("pool")
    if not isinstance(pool, str) or not pool:
        raise _bad(where, line, "pool", "expected a pool name")
    players = obj.get("players")
    if not isinstance(players, list) or not players:
        raise _bad(where, line, "players", "expected a non-empty list of players")
    out, seen = [], set()
    for i, p in enumerate(players):
        try:
            player = Player.model_validate(p)
        except ValidationError as err:
            e = from_pydantic(err, f"players[{i}]")
            raise _bad(where, line, e.field, e.message) from None
        if player.id in seen:
            raise _bad(where, line, f"players[{i}].id", f"duplicate player id {player.id!r}")
        seen.add(player.id)
        d = player.model_dump(mode="json", exclude_none=True, exclude={"waited_s", "party"})
        out.append(d)
    ttl = obj.get("ttl_s")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0):
        raise _bad(where, line, "ttl_s", f"expected seconds > 0, got {str(ttl)[:40]}")
    name = obj.get("id", f"line-{line}")
    if not isinstance(name, str) or not name:
        raise _bad(where, line, "id", "expected a non-empty string")
    return Arrival(float(t), pool, out, name, None if ttl is None else float(ttl), line)


def read_stream(path: str | Path) -> list[Arrival]:
    """Read a ``mgmatch-tickets/v1`` file (blank lines skipped), sorted by time (stable)."""
    p = Path(path)
    try:
        text = read_text(p)
    except FileNotFoundError:
        raise InvalidInput(str(p), "no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInput(str(p), f"cannot read: {err}") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            raise _bad(str(p), n, "line", f"not JSON: {err.msg}") from None
        out.append(parse_arrival(obj, n, str(p)))
    if not out:
        raise InvalidInput(str(p), "no tickets in the file")
    out.sort(key=lambda a: a.time)
    return out


def check_stream(arrivals: list[Arrival], config: ServiceConfig, where: str = "tickets") -> None:
    """Every ticket's pool exists in ``config`` and its players fit that pool (model width, rule fields,
    party size). A player queued in two tickets at once is not an error of the file: the store refuses
    the second ticket, as the API would, and the run counts it (``refused``)."""
    pools = {p.name: p for p in config.pools}
    for a in arrivals:
        pool = pools.get(a.pool)
        if pool is None:
            raise _bad(where, a.line, "pool", f"unknown pool {a.pool!r}; the config has {', '.join(pools)}")
        try:
            pool.check_fit(a.players)
        except InvalidInput as err:
            raise _bad(where, a.line, err.field, err.message) from None
        if a.ttl_s is not None and a.ttl_s > pool.ticket_ttl_s:
            raise _bad(where, a.line, "ttl_s", f"at most {pool.ticket_ttl_s:g} s in pool {pool.name}")


def validate(config: ServiceConfig, arrivals: list[Arrival], where: str = "tickets") -> None:
    """Build ``config`` as a run would (models loaded, each pool's feature width known) and check the
    stream against it (:func:`check_stream`); nothing runs. InvalidInput names the config's field or
    the stream's line and field."""
    rt = Runtime.build(Settings(store="memory", embedded_workers=False, reason_after_ticks=0),
                       config.model_copy(deep=True), store=MemoryStore())
    try:
        check_stream(arrivals, rt.config, where)
    finally:
        rt.stop()


def generate_stream(preset: str, pool: str, rate: float, duration_s: float, seed: int,
                    arrivals: str = "poisson", party_share: float = 0.0, max_party: int = 1) -> list[dict[str, Any]]:
    """A seeded ``mgmatch-tickets/v1`` stream: tickets of ``pool`` at ``rate`` tickets per second for
    ``duration_s`` (``poisson``: exponential gaps; ``steady``: evenly spaced), players drawn from the
    preset's player world (features, skill, roles, pings); a ``party_share`` of tickets are parties
    of 2..``max_party``."""
    from mgmatch.core.presets import generate_instances

    if arrivals not in ("poisson", "steady"):
        raise InvalidInput("arrivals", f"expected poisson or steady, got {arrivals!r}")
    rng = np.random.default_rng(seed)
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.exponential(1.0 / rate) if arrivals == "poisson" else 1.0 / rate
        if t > duration_s:
            break
        times.append(round(t, 4))
    sizes = [int(rng.integers(2, max_party + 1)) if max_party >= 2 and rng.random() < party_share else 1
             for _ in times]
    need = sum(sizes)
    players: list[dict[str, Any]] = []
    k = 0
    while len(players) < need:
        for inst in generate_instances(preset, 16, seed * 7919 + k):
            for p in inst.players:
                d = {key: v for key, v in p.to_json().items() if key in ("features", "skill", "roles", "pings")}
                d["id"] = f"p{len(players)}"
                players.append(d)
        k += 1
    out, at = [], 0
    for n, (t, s) in enumerate(zip(times, sizes, strict=True)):
        line: dict[str, Any] = {"time": t, "pool": pool, "players": players[at:at + s], "id": f"t{n}"}
        if n == 0:
            line["format"] = STREAM_FORMAT
        out.append(line)
        at += s
    return out


def write_stream(lines: list[dict[str, Any]], path: str | Path) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    tmp.replace(p)


# --------------------------------------------------------------------------- the driver


@dataclass
class SimTicket:
    arrival: Arrival
    id: str | None = None           # None: refused (a player already queued)
    created_at: float = 0.0
    matched_at: float | None = None
    match_id: str | None = None
    expired: bool = False
    estimate: float | None = None   # estimated_wait_s right after creation (bench waits)
    reason: str | None = None       # the last unmatched reason of a ticket never matched


@dataclass
class SimMatch:
    match_id: str
    pool: str
    at: float
    teams: list[list[str]]
    engagement: float | None
    skill_gap: float | None


@dataclass
class SimResult:
    tickets: list[SimTicket]
    matches: list[SimMatch]
    end: float
    ticks: int
    refused: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def simulate(config: ServiceConfig, arrivals: list[Arrival], *, tick_s: float = 0.05, drain_s: float | None = None,
             on_created: Callable[[Runtime, SimTicket], None] | None = None,
             reason_after_ticks: int = 20) -> SimResult:
    """Run ``arrivals`` through ``config`` on a simulated clock (see the module doc). After the last
    arrival the matchmakers go on for ``drain_s`` (default: the longest ticket TTL of the config), or
    until no pool has a match's worth of live players. ``on_created`` sees each ticket right after it
    was stored, at its arrival time (``bench waits`` reads its wait estimate there). The matchmakers
    diagnose unmatched reasons as the service does (every ``reason_after_ticks`` ticks; 0 = off); a
    ticket left unmatched keeps its last one (:attr:`SimTicket.reason`)."""
    config = config.model_copy(deep=True)
    if not arrivals:
        return SimResult([], [], 0.0, 0)
    clock = SimClock(arrivals[0].time)
    store = MemoryStore(clock=clock, max_events=1_000_000)
    rt = Runtime.build(Settings(store="memory", embedded_workers=False, reason_after_ticks=0), config, store=store)
    rt.runner.clock = clock
    pools = rt.pools
    mms = {name: Matchmaker(p, store, rt.runner, rt.experiments, tick_s=tick_s, reason_after_ticks=reason_after_ticks)
           for name, p in pools.items()}
    sims = [SimTicket(a) for a in arrivals]
    by_id: dict[str, SimTicket] = {}
    matches: dict[str, SimMatch] = {}
    drain = drain_s if drain_s is not None else max(p.ticket_ttl_s for p in pools.values())
    end = arrivals[-1].time + drain
    models = {name: (rt.engine.engagement.get(p.engagement_model) if p.engagement_model else None)
              for name, p in pools.items()}
    ticks = refused = 0
    nxt = 0
    k = math.ceil(clock.now / tick_s - 1e-9)  # tick index: ticks run at k · tick_s

    def live_enough() -> bool:
        return any(sum(len(t.players) for t in store.queued(name, p.window)) >= p.match_size
                   for name, p in pools.items())

    try:
        while True:
            while nxt < len(sims) and sims[nxt].arrival.time <= k * tick_s:
                s = sims[nxt]
                nxt += 1
                clock.now = max(clock.now, s.arrival.time)
                if _admit(store, pools[s.arrival.pool], s, clock.now, rt.experiments):
                    by_id[s.id] = s
                    if on_created is not None:
                        on_created(rt, s)
                else:
                    refused += 1
            if nxt >= len(sims) and (k * tick_s > end or not live_enough()):
                break
            clock.now = max(clock.now, k * tick_s)
            for mm in mms.values():
                mm.tick(clock.now)
            ticks += 1
            _collect(store, by_id, matches, models)
            k += 1
            # nothing can match until the next arrival: jump to its tick (no policy forms a match short of players)
            if nxt < len(sims) and sims[nxt].arrival.time > k * tick_s and not live_enough():
                k = math.ceil(sims[nxt].arrival.time / tick_s - 1e-9)
    finally:
        rt.stop()
    for s in sims:
        if s.id is not None and s.matched_at is None:
            t = store.get(s.id)
            s.expired = t is not None and t.view(clock.now).status == "expired"
            s.reason = t.unmatched_reason if t is not None else None
    return SimResult(sims, sorted(matches.values(), key=lambda m: m.at), clock.now, ticks, refused)


def _admit(store: MemoryStore, pool: Any, s: SimTicket, now: float, experiments: Experiments | None = None) -> bool:
    """Store the arrival as a queued ticket at ``now``; False when one of its players is already queued.

    An experiment of the pool keyed by player (or by header: a stream has none, so the first player's id, as
    the API falls back to) fixes the ticket's arm here, as the API does at ingest."""
    a = s.arrival
    ttl = a.ttl_s if a.ttl_s is not None else pool.ticket_ttl_s
    arm = ab_key = None
    exp = experiments.for_pool(pool.name) if experiments is not None else None
    if exp is not None and exp.config.key in ("player", "header"):
        ab_key = a.players[0]["id"]
        arm = exp.arm_for(ab_key).name
    try:
        stored, _ = store.create(Ticket(new_ticket_id(a.pool), a.pool, [dict(p) for p in a.players], now, now + ttl,
                                        arm=arm, ab_key=ab_key))
    except Conflict:
        return False
    s.id, s.created_at = stored.id, stored.created_at
    return True


def _collect(store: MemoryStore, by_id: dict[str, SimTicket], matches: dict[str, SimMatch],
             models: dict[str, Any]) -> None:
    """Read the store's events since the last tick: the matched tickets, and their new matches scored."""
    events = list(store.events)
    store.events.clear()
    new: dict[str, list[SimTicket]] = {}
    for e in events:
        if e["event"] != "matched":
            continue
        s = by_id.get(e["ticket"])
        t = store.get(e["ticket"])
        if s is None or t is None or t.result is None:
            continue
        s.matched_at, s.match_id = e["ts"], t.result["match_id"]
        if s.match_id not in matches:
            matches[s.match_id] = SimMatch(s.match_id, t.pool, e["ts"], t.result["teams"], None, None)
        new.setdefault(s.match_id, []).append(s)
    for mid, members in new.items():
        m = matches[mid]
        _score(m, {p["id"]: p for s in members for p in s.arrival.players}, models.get(m.pool))


def _score(m: SimMatch, players: dict[str, dict[str, Any]], model: Any) -> None:
    """Engagement under the pool's model and the gap between the teams' mean skills."""
    if any(pid not in players for team in m.teams for pid in team):
        return
    order = [pid for team in m.teams for pid in team]
    team_of = np.array([j for j, team in enumerate(m.teams) for _ in team])
    if model is not None:
        feats = np.array([players[pid]["features"] for pid in order], dtype=np.float64)
        m.engagement = float(model.evaluate(model.embed(feats), team_of))
    skills = [[players[pid].get("skill") for pid in team] for team in m.teams]
    if all(s is not None for team in skills for s in team) and all(skills):
        means = [sum(team) / len(team) for team in skills]
        m.skill_gap = float(max(means) - min(means))


# --------------------------------------------------------------------------- summaries


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def reason_kind(reason: str | None) -> str:
    """A reason with its numbers (as N) and its parenthesized details left out, to count reasons of one
    kind together."""
    if not reason:
        return "no reason recorded (fewer than a match's worth of players, or too few ticks)"
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r" \([^)]*\)", "", reason))


def summarize(res: SimResult) -> dict[str, Any]:
    """What ``replay`` compares between configs."""
    waits = [s.matched_at - s.created_at for s in res.tickets if s.matched_at is not None]
    eng = [m.engagement for m in res.matches if m.engagement is not None]
    gaps = [m.skill_gap for m in res.matches if m.skill_gap is not None]
    queued = [s for s in res.tickets if s.id is not None]
    unmatched = [s for s in queued if s.matched_at is None]
    return {
        "tickets": len(res.tickets),
        "refused": res.refused,
        "matches": len(res.matches),
        "players_matched": sum(len(s.arrival.players) for s in queued if s.matched_at is not None),
        "players_unmatched": sum(len(s.arrival.players) for s in unmatched),
        "tickets_expired": sum(1 for s in unmatched if s.expired),
        "engagement_mean": float(np.mean(eng)) if eng else None,
        "wait_p50_s": percentile(waits, 50),
        "wait_p99_s": percentile(waits, 99),
        "wait_mean_s": float(np.mean(waits)) if waits else None,
        "skill_gap_mean": float(np.mean(gaps)) if gaps else None,
        "simulated_s": res.end - (res.tickets[0].arrival.time if res.tickets else 0.0),
        "ticks": res.ticks,
        "unmatched_reasons": _reasons(unmatched),
    }


def _reasons(unmatched: list[SimTicket]) -> list[dict[str, Any]]:
    """Players left unmatched per kind of reason, most first."""
    counts: Counter[str] = Counter()
    for s in unmatched:
        counts[reason_kind(s.reason)] += len(s.arrival.players)
    return [{"reason": k, "players": n} for k, n in counts.most_common()]


# --------------------------------------------------------------------------- bench waits


def bench_waits(config: ServiceConfig, arrivals: list[Arrival], tick_s: float = 0.05) -> dict[str, Any]:
    """Run the stream and compare each ticket's ``estimated_wait_s``, read right after it was stored
    (what its first GET shows), with the wait it then had. Also scores the plain queue-drain formula
    (players ahead / throughput) on the same reads, as a baseline."""
    from mgmatch.app.waits import estimate_wait

    drain: dict[int, float | None] = {}

    def on_created(rt: Runtime, s: SimTicket) -> None:
        pool = rt.pools[s.arrival.pool]
        inp = rt.store.wait_inputs(pool.name, s.id)
        t = rt.store.get(s.id)
        s.estimate = estimate_wait(inp, len(s.arrival.players), pool.match_size, t.expires_at if t else None)
        if inp.rank is not None and inp.rate:
            per = inp.live_players / inp.live_tickets if inp.live_tickets else 1.0
            drain[id(s)] = inp.rank * per / inp.rate
        else:
            drain[id(s)] = None

    res = simulate(config, arrivals, tick_s=tick_s, on_created=on_created)
    rows = [(s.estimate, drain.get(id(s)), s.matched_at - s.created_at) for s in res.tickets
            if s.matched_at is not None and s.estimate is not None]
    zero = [r for r in rows if r[2] <= 0]  # matched on the tick they arrived: no relative error
    rows = [r for r in rows if r[2] > 0]

    def errors(k: int) -> dict[str, Any]:
        rel = np.array([abs(r[k] - r[2]) / r[2] for r in rows if r[k] is not None])
        ab = np.array([abs(r[k] - r[2]) for r in rows if r[k] is not None])
        if rel.size == 0:
            return {"n": 0, "median_rel_error": None, "p90_rel_error": None, "mean_abs_error_s": None,
                    "within_30pct": None}
        return {"n": int(rel.size), "median_rel_error": float(np.median(rel)),
                "p90_rel_error": float(np.percentile(rel, 90)), "mean_abs_error_s": float(ab.mean()),
                "within_30pct": float(np.mean(rel <= 0.3))}

    summary = summarize(res)
    real = [r[2] for r in rows]
    return {
        "tickets": summary["tickets"], "matched": sum(1 for s in res.tickets if s.matched_at is not None),
        "with_estimate": sum(1 for s in res.tickets if s.estimate is not None),
        "scored": len(rows),
        "zero_wait": len(zero), "zero_wait_estimated_zero": sum(1 for r in zero if r[0] == 0),
        "real_wait_mean_s": float(np.mean(real)) if real else None,
        "estimate_mean_s": float(np.mean([r[0] for r in rows])) if rows else None,
        "estimate": errors(0), "queue_drain_baseline": errors(1),
        "replay": summary,
    }
