"""The service logic HTTP (:mod:`mgmatch.app.api`) and gRPC (:mod:`mgmatch.app.grpc_server`) share.

Both front ends turn a request into the same JSON-shaped object and call into here: ticket
validation and preparation (:func:`prepare_ticket`), the ``/v1/solve`` request (:func:`solve_request`),
the ticket's output shape (:func:`ticket_out`), ownership (:func:`owned`, :func:`scoped_key`) and
the mapping of every error to an HTTP status and a gRPC code (:func:`failure`), so both answer
alike. Neither front end holds logic of its own beyond transport.

Ownership: a ticket belongs to the client that created it — its API key (``key:<16 hex of the
key's SHA-256>``) or, for HMAC-signed requests, the shared secret (``hmac``: every signer is one
client). Any other client gets 404 for it (not 403: a ticket's existence is not disclosed), and
idempotency keys are scoped per client, so a replay by another client never returns someone
else's ticket. With no authentication configured there is no owner and every client sees every
ticket.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Annotated, Any

import redis.exceptions
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StringConstraints, WithJsonSchema

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, Player, PlayerExtras, parse_instance
from mgmatch.core.jsontypes import Integer, Number
from mgmatch.core.limits import (
    MAX_BACKFILL_TTL_S,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_TEAM_SIZE,
    MAX_TEAMS,
    MAX_TEXT_CHARS,
)

from . import metrics
from .ab import Plan, plan_for
from .config import SOLVE_POOL
from .ratings import ranks_from, rate_match, skill_of
from .runtime import Runtime, SolvePoolFull
from .store import (
    Backfill,
    Conflict,
    Rating,
    RecordStore,
    StoreUnavailable,
    Ticket,
    match_pool,
    new_ticket_id,
)
from .store.base import WaitInputs
from .waits import estimate_wait

#: longest idempotency key and A/B key (body or header)
MAX_KEY_CHARS = 128
#: most attributes on a ticket
MAX_ATTRIBUTES = 32
#: a ticket id longer than this names no ticket (answered 404 without a store lookup)
MAX_TICKET_ID_CHARS = 128
#: errors that mean "the store cannot be reached now" (503 / UNAVAILABLE), whichever layer raised them
STORE_ERRORS: tuple[type[BaseException], ...] = (StoreUnavailable, redis.exceptions.ConnectionError,
                                                 redis.exceptions.TimeoutError)

AttrKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]


def _attribute_value(v: Any) -> str | float | bool:
    """A ticket attribute's value: a string (≤ MAX_TEXT_CHARS), a finite number (kept as a float) or a boolean.

    One validator rather than a union, so that a bad value is one error at ``attributes.<key>``
    (a union reports one error per member, under pydantic's member tags).
    """
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        if len(v) > MAX_TEXT_CHARS:
            raise ValueError(f"a string value has at most {MAX_TEXT_CHARS} characters, got {len(v)}")
        return v
    if isinstance(v, (int, float)):
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            raise ValueError("must be a finite number")
        return x
    raise ValueError(f"expected a string, a number or a boolean, got {'null' if v is None else type(v).__name__}")


AttrValue = Annotated[str | float | bool, PlainValidator(_attribute_value), WithJsonSchema(
    {"anyOf": [{"type": "string", "maxLength": MAX_TEXT_CHARS}, {"type": "number"}, {"type": "boolean"}]})]


class PlayerIn(Player, PlayerExtras):
    """A player in a ticket (the spec's player; ``waited_s`` and ``party`` are set by the service).

    Besides the spec's fields it takes the optional ones solvers read (:class:`PlayerExtras`:
    EOMM's ``sigma``, ``recent`` and ``games_per_day``, the Awesomenauts score's ``previous`` and
    ``peer_pings``), so a pool served by those methods gets them through tickets; any other field
    is refused (422 naming it)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class TicketIn(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    pool: str = Field(description="Pool (game mode) to queue for.", min_length=1, max_length=32)
    players: list[PlayerIn] = Field(min_length=1, max_length=64, description="One player, or a party kept together.")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_CHARS,
                                        description="Retries with the same key return the first ticket.")
    ttl_s: Number | None = Field(default=None, gt=0, description="Seconds before an unmatched ticket expires.")
    attributes: dict[AttrKey, AttrValue] = Field(
        default_factory=dict, max_length=MAX_ATTRIBUTES, description="Opaque key/values returned with the ticket.")


class NotFound(LookupError):
    """No such ticket for this client (HTTP 404, gRPC NOT_FOUND)."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class Failure:
    """How both front ends answer one error: HTTP status, gRPC code name, the field, a message."""

    status: int
    grpc_code: str
    field: str
    message: str
    retry_after_s: int | None = None


def failure(exc: BaseException, retry_after_s: int, conflict_code: str = "FAILED_PRECONDITION",
            conflict_field: str = "status") -> Failure | None:
    """The answer to ``exc``, or None for an error that is a bug (left to surface as a 500).

    ``conflict_code``/``conflict_field`` say what a :class:`Conflict` means where it was raised:
    a player already queued (create: ALREADY_EXISTS, ``players``) or a ticket that can no longer
    change (cancel: FAILED_PRECONDITION, ``status``).
    """
    if isinstance(exc, InvalidInput):
        return Failure(422, "INVALID_ARGUMENT", exc.field, str(exc))
    if isinstance(exc, NotFound):
        return Failure(404, "NOT_FOUND", exc.field, str(exc))
    if isinstance(exc, Conflict):
        field = getattr(exc, "field", None) or conflict_field
        return Failure(409, conflict_code, field, f"{field}: {exc}")
    if isinstance(exc, STORE_ERRORS):
        return Failure(503, "UNAVAILABLE", "store", "store: the ticket store cannot be reached; retry shortly",
                       retry_after_s)
    if isinstance(exc, SolvePoolFull):
        return Failure(503, "UNAVAILABLE", "solve", f"solve: {exc}; retry shortly", retry_after_s)
    return None


# --------------------------------------------------------------------------- tickets


def _bounded_key(value: str | None, field: str) -> str | None:
    if value is not None and len(value) > MAX_KEY_CHARS:
        raise InvalidInput(field, f"at most {MAX_KEY_CHARS} characters, got {len(value)}")
    return value


def scoped_key(idempotency_key: str | None, owner: str | None) -> str | None:
    """The idempotency key as stored: per client, so another client's replay never finds this ticket."""
    if idempotency_key is None or owner is None:
        return idempotency_key
    return f"{owner}/{idempotency_key}"


def unrated(rt: Runtime, body: TicketIn) -> list[str]:
    """Players whose skill a ``skill_from: ratings`` pool takes from their stored rating (those without one)."""
    pool = rt.pools.get(body.pool)
    if pool is None or getattr(pool, "skill_from", "ticket") != "ratings":
        return []
    return [p.id for p in body.players if p.skill is None]


def prepare_ticket(rt: Runtime, body: TicketIn, ab_header: str | None, idempotency_key: str | None,
                   owner: str | None = None, ratings: dict[str, Rating] | None = None) -> tuple[Ticket, str | None]:
    """Validate a ticket against its pool and build the stored record and its (scoped) idempotency key.

    Raises:
        InvalidInput: naming the field (``pool``, ``players[i].features``, ``ttl_s``, ``idempotency_key`` …).
    """
    _bounded_key(idempotency_key, "idempotency_key")
    _bounded_key(ab_header, "ab_key")
    pool = rt.pools.get(body.pool)
    if pool is None:
        raise InvalidInput("pool", f"unknown pool {body.pool!r}; known: {', '.join(rt.pools)}")
    seen = set()
    for i, p in enumerate(body.players):
        if p.id in seen:
            raise InvalidInput(f"players[{i}].id", f"duplicate player id {p.id!r}")
        seen.add(p.id)
    players = [p.model_dump(exclude_none=True, exclude={"waited_s"}) for p in body.players]
    if getattr(pool, "skill_from", "ticket") == "ratings":
        for p in players:
            if "skill" not in p:
                p["skill"] = skill_of((ratings or {}).get(p["id"]))
    pool.check_fit(players)
    ttl = body.ttl_s if body.ttl_s is not None else pool.ticket_ttl_s
    if ttl > pool.ticket_ttl_s:
        raise InvalidInput("ttl_s", f"at most {pool.ticket_ttl_s:g} s in pool {pool.name}")
    now = time.time()
    arm, ab_key = None, None
    exp = rt.experiments.for_pool(pool.name)
    if exp is not None and exp.config.key in ("player", "header"):
        ab_key = ab_header if exp.config.key == "header" and ab_header else body.players[0].id
        arm = exp.arm_for(ab_key).name
    for p in players:
        p["features"] = list(p["features"])
        if "roles" in p:
            p["roles"] = list(p["roles"])
    t = Ticket(new_ticket_id(pool.name), pool.name, players, now, now + ttl, arm=arm, ab_key=ab_key,
               attributes=dict(body.attributes), owner=owner)
    return t, scoped_key(idempotency_key or body.idempotency_key, owner)


class KeyReused(Conflict):
    """An idempotency key sent again with another ticket (HTTP 409, gRPC ALREADY_EXISTS; field ``idempotency_key``)."""

    field = "idempotency_key"


def created(stored: Ticket, owner: str | None, asked: Ticket | None = None) -> Ticket:
    """The ticket a create answers with.

    Refuses (defensively) one that belongs to another client, and a replay of an idempotency key
    whose first ticket is not the one ``asked`` for (another pool or other players): answering with
    the first ticket would tell the client that players it never queued are queued.
    """
    if owner is not None and stored.owner != owner:
        raise InvalidInput("idempotency_key", "already used by another client")
    if asked is not None and stored.id != asked.id and (
            stored.pool != asked.pool or [p["id"] for p in stored.players] != [p["id"] for p in asked.players]):
        ids = [short_id(p["id"]) for p in stored.players[:5]] + (["…"] if len(stored.players) > 5 else [])
        raise KeyReused(f"already used for ticket {stored.id} (pool {stored.pool}, players {ids}); "
                        "a new ticket needs a new key")
    return stored


def owned(t: Ticket | Backfill | None, object_id: str, owner: str | None, field: str = "ticket_id",
          what: str = "ticket"):
    """``t`` (a ticket, or a backfill with ``what="backfill"``) when this client may see it; else
    :class:`NotFound` (also for another client's)."""
    if t is None or (owner is not None and t.owner != owner):
        raise NotFound(field, f"no {what} {short_id(object_id)!r}")
    return t


def lookup_id(object_id: str, field: str = "ticket_id", what: str = "ticket") -> str:
    """``object_id`` when it can name a ticket (or a backfill) at all; else :class:`NotFound`
    without touching the store."""
    if not 0 < len(object_id) <= MAX_TICKET_ID_CHARS:
        raise NotFound(field, f"no {what} {short_id(object_id)!r}")
    return object_id


def short_id(ticket_id: str) -> str:
    return ticket_id if len(ticket_id) <= 80 else ticket_id[:80] + "…"


def ticket_out(t: Ticket) -> dict[str, Any]:
    """A ticket as both APIs return it (``match`` only once matched)."""
    out: dict[str, Any] = {"id": t.id, "pool": t.pool, "status": t.status, "players": [p["id"] for p in t.players],
                           "created_at": t.created_at, "expires_at": t.expires_at, "arm": t.arm,
                           "attributes": t.attributes}
    if t.status == "matched" and t.result:
        r = t.result
        out["match"] = {k: r.get(k) for k in ("match_id", "teams", "team", "region", "method", "arm",
                                              "model_version", "objective", "matched_at")}
        if r.get("assignment"):
            out["match"]["assignment"] = r["assignment"]
    if t.status == "proposed" and t.result and "accept_deadline" in t.result:  # in a ready check
        r = t.result
        out["match"] = {k: r.get(k) for k in ("match_id", "teams", "team", "region", "method", "arm",
                                              "model_version", "objective", "accept_deadline")}
    if t.reason:
        out["reason"] = t.reason
    if t.status == "matched" and t.result and t.result.get("backfill_id"):
        out["match"]["backfill_id"] = t.result["backfill_id"]
    if t.unmatched_reason and t.status in ("queued", "proposed"):
        out["unmatched_reason"] = t.unmatched_reason
    return out


def _with_wait(rt: Runtime, t: Ticket, out: dict[str, Any], inputs: WaitInputs | None) -> dict[str, Any]:
    if t.status == "queued":
        pool = rt.pools.get(t.pool)
        out["estimated_wait_s"] = (None if pool is None or inputs is None
                                   else estimate_wait(inputs, len(t.players), pool.match_size, t.expires_at))
    return out


async def ticket_status(rt: Runtime, t: Ticket) -> dict[str, Any]:
    """A ticket as GET returns it: :func:`ticket_out`, plus ``estimated_wait_s`` while it is queued
    (seconds, from the pool's recent throughput and the ticket's place in the queue; null while the
    pool formed matches in fewer than two distinct seconds of the last THROUGHPUT_WINDOW_S), see
    :mod:`mgmatch.app.waits`."""
    inputs = await rt.store.await_inputs(t.pool, t.id) if t.status == "queued" and t.pool in rt.pools else None
    return _with_wait(rt, t, ticket_out(t), inputs)


def ticket_status_sync(rt: Runtime, t: Ticket) -> dict[str, Any]:
    """:func:`ticket_status` for the synchronous gRPC front end."""
    inputs = rt.store.wait_inputs(t.pool, t.id) if t.status == "queued" and t.pool in rt.pools else None
    return _with_wait(rt, t, ticket_out(t), inputs)


# --------------------------------------------------------------------------- solve


def solve_request(rt: Runtime, obj: dict[str, Any], ab_key: str | None) -> tuple[Instance, Plan]:
    """A /v1/solve request object (an instance plus optional ``method`` and ``time_limit_ms``) →
    the instance and the plan to solve it with. InvalidInput names the field."""
    s = rt.settings
    _bounded_key(ab_key, "ab_key")
    obj = dict(obj)
    method = obj.pop("method", None)
    limit = obj.pop("time_limit_ms", None)
    if method is not None and (not isinstance(method, str) or len(method) > MAX_NAME_CHARS):
        raise InvalidInput("method", "expected a method name")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            got = "a huge negative integer" if isinstance(limit, int) and limit < -10**40 else repr(limit)[:40]
            raise InvalidInput("time_limit_ms", f"expected a number > 0, got {got}")
        if limit > s.max_time_limit_ms:
            raise InvalidInput("time_limit_ms", f"at most {s.max_time_limit_ms:g} ms")
    players = obj.get("players")
    if isinstance(players, list) and len(players) > s.max_solve_players:
        raise InvalidInput("players", f"{len(players)} players; a solve takes at most {s.max_solve_players}")
    obj.setdefault("format", "mgmatch-instance/v1")
    inst = parse_instance(obj)
    exp = rt.experiments.for_pool(SOLVE_POOL)
    arm = None
    if exp is not None:
        key = ab_key if exp.config.key == "header" and ab_key else ",".join(sorted(inst.ids))
        arm = exp.arm_for(key)
    d = rt.config.solve
    plan = plan_for(None, arm, default_method=d.method, default_budget_ms=d.time_budget_ms,
                    default_fallback=d.fallback_method)
    if method is not None:
        rt.engine.check_method(method)
        plan = replace(plan, method=method)
    if limit is not None:
        plan = replace(plan, time_budget_ms=float(limit))
    # time_limit_ms is the server's whole budget for the request: the solver gets it less the reserve
    # for sending the answer (the Solution's time_ms stays the solver's own wall time)
    solver_ms = max(1.0, plan.time_budget_ms - s.response_reserve_ms)
    plan = replace(plan, time_budget_ms=solver_ms)
    return inst, plan


def solve(rt: Runtime, inst: Instance, plan: Plan, start: float) -> dict[str, Any]:
    """Run one /v1/solve (on the caller's thread; callers submit it to ``rt.solves``) → the Solution's JSON."""
    return rt.engine.solve(inst, plan, SOLVE_POOL, start=start).to_json()


# --------------------------------------------------------------------------- backfills


class BackfillIn(BaseModel):
    """``POST /v1/backfills``: open slots of a running match, to be filled from the pool's queue."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    pool: str = Field(description="Pool (game mode) whose queue fills the slots.", min_length=1, max_length=32)
    match_id: str = Field(min_length=1, max_length=MAX_KEY_CHARS,
                          description="The running match; filled tickets report it as their match_id.")
    players: list[PlayerIn] = Field(min_length=1, max_length=MAX_TEAMS * MAX_TEAM_SIZE,
                                    description="The spec players now in the match.")
    teams: list[Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]],
                          Field(max_length=MAX_TEAM_SIZE)]] = Field(
        min_length=1, max_length=MAX_TEAMS, description="Ids of `players` per team; they stay on these teams.")
    open: list[Integer] = Field(min_length=1, max_length=MAX_TEAMS, description="Free slots per team to fill.")
    ttl_s: Number | None = Field(default=None, gt=0, le=MAX_BACKFILL_TTL_S,
                                description="Seconds before an unfilled backfill expires (default: the pool's "
                                            "ticket TTL).")


def prepare_backfill(rt: Runtime, body: BackfillIn, owner: str | None = None) -> Backfill:
    """Validate a backfill against its pool and build the stored record.

    Raises:
        InvalidInput: naming the field (``pool``, ``players[i].features``, ``teams[j][k]``, ``open[j]``, ``ttl_s`` …).
    """
    pool = rt.pools.get(body.pool)
    if pool is None:
        raise InvalidInput("pool", f"unknown pool {body.pool!r}; known: {', '.join(rt.pools)}")
    players = [p.model_dump(exclude_none=True, exclude={"waited_s", "party"}) for p in body.players]
    index: dict[str, int] = {}
    for i, p in enumerate(players):
        if p["id"] in index:
            raise InvalidInput(f"players[{i}].id", f"duplicate player id {p['id']!r}")
        index[p["id"]] = i
        try:
            pool.check_fit([p])
        except InvalidInput as err:
            raise InvalidInput(err.field.replace("players[0]", f"players[{i}]", 1), err.message) from None
        p["features"] = list(p["features"])
        if "roles" in p:
            p["roles"] = list(p["roles"])
    if len(body.teams) != pool.teams:
        raise InvalidInput("teams", f"{len(body.teams)} teams; pool {pool.name} has {pool.teams}")
    if len(body.open) != pool.teams:
        raise InvalidInput("open", f"{len(body.open)} entries; pool {pool.name} has {pool.teams} teams")
    placed: set[str] = set()
    for j, team in enumerate(body.teams):
        for k, pid in enumerate(team):
            if pid not in index:
                raise InvalidInput(f"teams[{j}][{k}]", f"{pid[:80]!r} is not in players")
            if pid in placed:
                raise InvalidInput(f"teams[{j}][{k}]", f"{pid[:80]!r} is on a team already")
            placed.add(pid)
    for i, p in enumerate(players):
        if p["id"] not in placed:
            raise InvalidInput(f"players[{i}].id", f"{p['id']!r} is on no team")
    for j, (n, size) in enumerate(zip(body.open, pool.sizes, strict=True)):
        if n < 0:
            raise InvalidInput(f"open[{j}]", f"expected a number ≥ 0, got {n}")
        if n + len(body.teams[j]) > size:
            raise InvalidInput(f"open[{j}]", f"{n} open + {len(body.teams[j])} players exceed team size {size} "
                                             f"of pool {pool.name}")
        if n + len(body.teams[j]) < 1:
            raise InvalidInput(f"open[{j}]", "team has no player and no open slot")
    if sum(body.open) < 1:
        raise InvalidInput("open", "no open slot to fill")
    ttl = body.ttl_s if body.ttl_s is not None else min(pool.ticket_ttl_s, MAX_BACKFILL_TTL_S)
    now = time.time()
    return Backfill(new_ticket_id(pool.name), pool.name, body.match_id, players, [list(t) for t in body.teams],
                    list(body.open), now, now + ttl, owner=owner)


def backfill_out(b: Backfill) -> dict[str, Any]:
    """A backfill as both APIs return it."""
    return {"id": b.id, "pool": b.pool, "status": b.status, "match_id": b.match_id, "teams": b.teams,
            "open": b.open, "assigned": b.assigned or [[] for _ in b.teams], "tickets": b.tickets,
            "created_at": b.created_at, "expires_at": b.expires_at, "filled_at": b.filled_at}
# --------------------------------------------------------------------------- match results

#: a match id longer than this names no match (answered 404 without a store lookup)
MAX_MATCH_ID_CHARS = 256
#: most per-player entries in one result (more than any match has players)
MAX_RESULT_PLAYERS = 1000


class ResultIn(BaseModel):
    """What the game server reports when a match ends (``POST /v1/matches/{match_id}/result``)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    engagement: Number = Field(description="The match's engagement: the number the studio wants to maximize (spec "
                                          "§5), e.g. the share of its players who queued again within 10 minutes.")
    players: dict[Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)], Number] | None = Field(
        default=None, max_length=MAX_RESULT_PLAYERS,
        description="Optional per-player engagement, player id → number; every id must be a player of the match.")
    ranks: list[Number] | None = Field(
        default=None, min_length=2, max_length=64,
        description="Optional outcome: one rank per team, in the match's team order, lower is better (ties "
                    "allowed); updates the players' ratings once. Not with winner.")
    winner: Integer | None = Field(default=None, ge=0, le=63,
                                   description="Optional outcome: the index of the winning team (the others tie "
                                               "behind it); updates the players' ratings once. Not with ranks.")


def post_result(rt: Runtime, match_id: str, body: ResultIn, owner: str | None) -> dict[str, Any]:
    """Keep a match's result for the match log. The first result stays: the same result posted again (a retry)
    is accepted again, a different one is a :class:`Conflict`.

    Raises:
        NotFound: ``match_id`` names no match this client may see (unknown, past its retention, or, with
            authentication, a match none of whose tickets this client created).
        InvalidInput: ``players.<id>`` is not a player of the match, or a number is not finite.
        Conflict: the match already has a different result.
    """
    pool = match_pool(match_id) if len(match_id) <= MAX_MATCH_ID_CHARS else None
    label = pool if pool in rt.pools else "other"

    def unknown() -> NotFound:
        metrics.MATCH_RESULTS.labels(label, "unknown").inc()
        return NotFound("match_id", f"no match {short_id(match_id)!r} (unknown, or past its retention of "
                                    f"{rt.settings.match_retention_s:g} s)")

    if pool is None or pool not in rt.pools:
        raise unknown()
    records: RecordStore = rt.store  # all this route touches of the store
    rec = records.get_match(pool, match_id)
    if rec is None or (owner is not None and owner not in rec.owners):
        raise unknown()
    if not math.isfinite(body.engagement):  # pydantic refuses these already; a caller building ResultIn may not
        raise InvalidInput("engagement", "must be a finite number")
    result: dict[str, Any] = {"engagement": float(body.engagement)}
    if body.players:
        known = rec.player_ids()
        for pid, v in body.players.items():
            if pid not in known:
                raise InvalidInput(f"players.{pid}", f"player {short_id(pid)!r} is not in match {short_id(match_id)!r}")
            if not math.isfinite(v):
                raise InvalidInput(f"players.{pid}", "must be a finite number")
        result["players"] = {pid: float(v) for pid, v in body.players.items()}
    teams = [[p["id"] for p in team] for team in rec.teams]
    ranks = outcome_ranks(body, len(teams))
    if ranks is not None:
        result["ranks"] = ranks
    stored, fresh = records.put_match_result(pool, match_id, result)
    if stored is None:  # expired between the two calls
        raise unknown()
    if not fresh and stored.result != result:
        metrics.MATCH_RESULTS.labels(pool, "conflict").inc()
        raise Conflict(f"match {short_id(match_id)!r} already has a different result "
                       f"(engagement {stored.result['engagement'] if stored.result else None!r}); the first one stays")
    metrics.MATCH_RESULTS.labels(pool, "accepted" if fresh else "duplicate").inc()
    if fresh and rt.learning is not None:
        rt.learning.on_result(stored)  # a learning pool's training data (mgmatch.app.learning)
    out = {"match_id": match_id, "pool": pool, "status": "accepted" if fresh else "duplicate",
           "engagement": stored.result["engagement"] if stored.result else result["engagement"],
           "received_at": stored.result_at}
    if ranks is not None:  # also on a duplicate: the first post may have stopped before its ratings
        rated, ratings = rate_match(rt.store, match_id, teams, ranks)
        out["ratings"] = {"status": rated, "players": ratings}
    return out


class AnswerIn(BaseModel):
    """A player's answer to a ready check (``POST /v1/matches/{match_id}/accept`` or ``/decline``)."""

    model_config = ConfigDict(extra="forbid")

    player_id: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="A player of the proposed match.")


def answer_match(rt: Runtime, match_id: str, body: AnswerIn, accept: bool, owner: str | None) -> dict[str, Any]:
    """Accept or decline a proposed match for one player (see :class:`~mgmatch.app.store.ReadyCheckStore`).

    Raises:
        NotFound: no ready check ``match_id`` holding ``player_id`` that this client may see (unknown, past its
            retention, in a pool without ``accept``, or none of its tickets is this client's).
        Conflict: the check already ended another way (declined or expired, for an accept; matched or
            expired, for a decline).
    """
    pool = match_pool(match_id) if len(match_id) <= MAX_MATCH_ID_CHARS else None
    state = "unknown"
    if pool is not None and pool in rt.pools:
        allocate = rt.pools[pool].allocator is not None  # the last accept waits for a game server
        state = rt.store.answer_check(pool, match_id, body.player_id, accept, owner, allocate)
    if state == "unknown":
        raise NotFound("match_id", f"no ready check {short_id(match_id)!r} with player {short_id(body.player_id)!r}")
    if state not in (("pending", "allocating", "matched") if accept else ("declined",)):  # a decline replayed stays declined
        raise Conflict(f"the ready check of match {short_id(match_id)!r} already ended: {state}")
    metrics.TICKET_EVENTS.labels(pool, "accepted" if accept else "declined").inc()
    return {"match_id": match_id, "status": state}


def outcome_ranks(body: ResultIn, teams: int) -> list[float] | None:
    """The result's outcome as one rank per team (None without one).

    Raises:
        InvalidInput: ``winner`` given with ``ranks``, ``ranks`` not one per team, ``winner`` not a team.
    """
    if body.ranks is not None and body.winner is not None:
        raise InvalidInput("winner", "give ranks or winner, not both")
    if body.ranks is not None:
        if len(body.ranks) != teams:
            raise InvalidInput("ranks", f"expected {teams} ranks (one per team of the match), got {len(body.ranks)}")
        return [float(r) for r in body.ranks]
    if body.winner is not None:
        if body.winner >= teams:
            raise InvalidInput("winner", f"the match has teams 0–{teams - 1}, got {body.winner}")
        return ranks_from(body.winner, teams)
    return None
