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

import time
from dataclasses import dataclass, replace
from typing import Annotated, Any

import redis.exceptions
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, Player, parse_instance
from mgmatch.core.limits import MAX_NAME_CHARS, MAX_TEXT_CHARS

from .ab import Plan, plan_for
from .config import SOLVE_POOL
from .runtime import Runtime, SolvePoolFull
from .store import Conflict, StoreUnavailable, Ticket, new_ticket_id
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
AttrText = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]


class PlayerIn(Player):
    """A player in a ticket (the spec's player; ``waited_s`` and ``party`` are set by the service)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class TicketIn(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    pool: str = Field(description="Pool (game mode) to queue for.", min_length=1, max_length=32)
    players: list[PlayerIn] = Field(min_length=1, max_length=64, description="One player, or a party kept together.")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_CHARS,
                                        description="Retries with the same key return the first ticket.")
    ttl_s: float | None = Field(default=None, gt=0, description="Seconds before an unmatched ticket expires.")
    attributes: dict[AttrKey, AttrText | float | bool] = Field(
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
        return Failure(409, conflict_code, conflict_field, f"{conflict_field}: {exc}")
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


def prepare_ticket(rt: Runtime, body: TicketIn, ab_header: str | None, idempotency_key: str | None,
                   owner: str | None = None) -> tuple[Ticket, str | None]:
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


def created(stored: Ticket, owner: str | None) -> Ticket:
    """The ticket a create answers with; refuses (defensively) one that belongs to another client."""
    if owner is not None and stored.owner != owner:
        raise InvalidInput("idempotency_key", "already used by another client")
    return stored


def owned(t: Ticket | None, ticket_id: str, owner: str | None, field: str = "ticket_id") -> Ticket:
    """``t`` when this client may see it; else :class:`NotFound` (also for another client's ticket)."""
    if t is None or (owner is not None and t.owner != owner):
        raise NotFound(field, f"no ticket {short_id(ticket_id)!r}")
    return t


def lookup_id(ticket_id: str, field: str = "ticket_id") -> str:
    """``ticket_id`` when it can name a ticket at all; else :class:`NotFound` without touching the store."""
    if not 0 < len(ticket_id) <= MAX_TICKET_ID_CHARS:
        raise NotFound(field, f"no ticket {short_id(ticket_id)!r}")
    return ticket_id


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
    if t.reason:
        out["reason"] = t.reason
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
            raise InvalidInput("time_limit_ms", f"expected a number > 0, got {str(limit)[:40]}")
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
