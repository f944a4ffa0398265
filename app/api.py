"""The HTTP API (FastAPI; OpenAPI at /docs).

- ``POST /v1/solve`` — a candidate pool in the spec's instance format, plus optional ``method``
  and ``time_limit_ms`` → a spec Solution (with ``arm``, ``model_version``), synchronously.
- ``POST /v1/tickets`` — queue a player or a party for a pool; ``GET``/``DELETE /v1/tickets/{id}``.
- ``GET /healthz`` (process up), ``/readyz`` (store reachable, workers running), ``/metrics``.

Bad input is 422 (400 for a body that is not JSON) with ``{"error": {"field", "message"}}``
naming the field (FastAPI's own validation errors are rewritten to the same shape and keep
``detail``); never 5xx.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import anyio
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from mgmatch.core.errors import InvalidInput, join
from mgmatch.core.instance import Instance, Player, parse_instance

from . import metrics
from .ab import Plan, plan_for
from .config import SOLVE_POOL
from .runtime import Runtime
from .security import Guard
from .store import Conflict, Ticket, new_ticket_id


class PlayerIn(Player):
    """A player in a ticket (the spec's player; ``waited_s`` and ``party`` are set by the service)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", frozen=True)


class TicketIn(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    pool: str = Field(description="Pool (game mode) to queue for.", min_length=1, max_length=32)
    players: list[PlayerIn] = Field(min_length=1, max_length=64, description="One player, or a party kept together.")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128,
                                        description="Retries with the same key return the first ticket.")
    ttl_s: float | None = Field(default=None, gt=0, description="Seconds before an unmatched ticket expires.")
    attributes: dict[str, str | float | bool] = Field(default_factory=dict, max_length=32,
                                                      description="Opaque key/values returned with the ticket.")


class MatchOut(BaseModel):
    match_id: str
    teams: list[list[str]] = Field(description="Player ids per team.")
    team: int = Field(description="The team of this ticket's players.")
    region: str | None = None
    method: str | None = None
    arm: str | None = None
    model_version: str | None = None
    objective: float | None = None


class TicketOut(BaseModel):
    id: str
    pool: str
    status: str = Field(description="queued | proposed | matched | expired | cancelled")
    players: list[str]
    created_at: float
    expires_at: float
    arm: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    match: MatchOut | None = None


def ticket_out(t: Ticket) -> dict[str, Any]:
    out: dict[str, Any] = {"id": t.id, "pool": t.pool, "status": t.status, "players": [p["id"] for p in t.players],
                           "created_at": t.created_at, "expires_at": t.expires_at, "arm": t.arm,
                           "attributes": t.attributes}
    if t.status == "matched" and t.result:
        r = t.result
        out["match"] = {k: r.get(k) for k in ("match_id", "teams", "team", "region", "method", "arm",
                                              "model_version", "objective")}
    return out


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tickets: list[TicketIn] = Field(min_length=1, max_length=100)


class BatchOut(BaseModel):
    tickets: list[dict[str, Any]] = Field(description="Per ticket, in order: the ticket, or {error: {field, message}}.")


def prepare_ticket(rt: Runtime, body: TicketIn, ab_header: str | None,
                   idempotency_key: str | None) -> tuple[Ticket, str | None]:
    """Validate a ticket against its pool and build the stored record (InvalidInput names the field)."""
    pool = rt.pools.get(body.pool)
    if pool is None:
        raise InvalidInput("pool", f"unknown pool {body.pool!r}; known: {', '.join(rt.pools)}")
    if len(body.players) > pool.max_party:
        raise InvalidInput("players", f"a party of {len(body.players)} does not fit a team of {pool.max_party}")
    seen = set()
    kinds = {r.get("kind") for r in pool.rules}
    for i, p in enumerate(body.players):
        if p.id in seen:
            raise InvalidInput(f"players[{i}].id", f"duplicate player id {p.id!r}")
        seen.add(p.id)
        if pool.feature_dim is not None and len(p.features) != pool.feature_dim:
            raise InvalidInput(f"players[{i}].features",
                               f"expected {pool.feature_dim} numbers (pool {pool.name}'s model), got {len(p.features)}")
        for need, attr in (({"skill_balance", "skill_spread"}, "skill"),
                           ({"roles", "role_min", "role_max"}, "roles"), ({"max_ping"}, "pings")):
            if kinds & need and getattr(p, attr) is None:
                raise InvalidInput(f"players[{i}].{attr}", f"required by pool {pool.name}'s rules")
    ttl = body.ttl_s if body.ttl_s is not None else pool.ticket_ttl_s
    if ttl > pool.ticket_ttl_s:
        raise InvalidInput("ttl_s", f"at most {pool.ticket_ttl_s:g} s in pool {pool.name}")
    now = time.time()
    arm, ab_key = None, None
    exp = rt.experiments.for_pool(pool.name)
    if exp is not None and exp.config.key in ("player", "header"):
        ab_key = ab_header if exp.config.key == "header" and ab_header else body.players[0].id
        arm = exp.arm_for(ab_key).name
    players = [p.model_dump(exclude_none=True, exclude={"waited_s"}) for p in body.players]
    for p in players:
        p["features"] = list(p["features"])
        if "roles" in p:
            p["roles"] = list(p["roles"])
    t = Ticket(new_ticket_id(pool.name), pool.name, players, now, now + ttl, arm=arm, ab_key=ab_key,
               attributes=dict(body.attributes))
    return t, idempotency_key or body.idempotency_key


def solve_request(rt: Runtime, obj: dict[str, Any], ab_key: str | None) -> tuple[Instance, Plan]:
    """A /v1/solve request object (an instance plus optional ``method`` and ``time_limit_ms``) →
    the instance and the plan to solve it with. Shared by HTTP and gRPC; InvalidInput names the field."""
    s = rt.settings
    obj = dict(obj)
    method = obj.pop("method", None)
    limit = obj.pop("time_limit_ms", None)
    if method is not None and not isinstance(method, str):
        raise InvalidInput("method", "expected a method name")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise InvalidInput("time_limit_ms", f"expected a number > 0, got {limit!r}")
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


def _err(status: int, field: str, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}, **extra}, status_code=status)


_SOLVE_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {
        "type": "object", "required": ["teams", "players"],
        "description": "A candidate pool in the spec's instance format (mgmatch-instance/v1), plus optional "
                       "`method` and `time_limit_ms`.",
        "properties": {
            "format": {"type": "string", "example": "mgmatch-instance/v1"},
            "teams": {"type": "integer", "minimum": 2}, "team_size": {"type": "integer", "minimum": 1},
            "team_sizes": {"type": "array", "items": {"type": "integer"}},
            "players": {"type": "array", "items": {"type": "object"}},
            "rules": {"type": "array", "items": {"type": "object"}},
            "engagement_model": {"type": "string"},
            "method": {"type": "string", "description": "Solver method (default: exact)."},
            "time_limit_ms": {"type": "number", "description": "Wall-clock budget (default 100)."},
        }}}},
}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def create_app(rt: Runtime) -> FastAPI:
    s = rt.settings
    blocking = s.store != "memory"

    async def call(fn, *args):
        if blocking:
            return await anyio.to_thread.run_sync(fn, *args)
        return fn(*args)

    app = FastAPI(title="mgmatch", version="0.1.0",
                  description="Real-time matchmaking that maximizes predicted engagement under hard rules.")
    app.state.runtime = rt

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = [p for p in first.get("loc", ()) if p != "body"]
        field = join("", loc) or "body"
        msg = "field required" if first.get("type") == "missing" else first.get("msg", "invalid value")
        if first.get("type") == "extra_forbidden":
            msg = "unknown field"
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]
        return _err(422, field, f"{field}: {msg}", detail=detail)

    @app.exception_handler(InvalidInput)
    async def _invalid(request: Request, exc: InvalidInput):
        return _err(422, exc.field, str(exc))

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict):
        return _err(409, "status", str(exc))

    @app.get("/healthz", tags=["ops"])
    async def healthz():
        return {"status": "ok", "uptime_s": round(time.time() - rt.started_at, 1)}

    @app.get("/readyz", tags=["ops"])
    async def readyz():
        ok, checks = await call(rt.readiness)
        return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"])
    async def prom():
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/solve", tags=["solve"], openapi_extra={"requestBody": _SOLVE_BODY},
              summary="Solve one candidate pool synchronously; returns a spec Solution.")
    async def solve(request: Request, x_mgmatch_ab_key: str | None = Header(default=None)):
        t0 = time.perf_counter()
        raw = await request.body()
        try:
            obj = json.loads(raw, parse_constant=_reject_constant)
        except ValueError as err:
            return _err(400, "body", f"body: not valid JSON ({err})")
        if not isinstance(obj, dict):
            return _err(422, "body", "body: expected a JSON object (an instance)")
        inst, plan = solve_request(rt, obj, x_mgmatch_ab_key)
        sol = await anyio.to_thread.run_sync(lambda: rt.engine.solve(inst, plan, SOLVE_POOL, start=t0))
        return JSONResponse(sol.to_json())

    @app.post("/v1/tickets", tags=["tickets"], status_code=201, response_model=TicketOut,
              responses={200: {"model": TicketOut, "description": "Replay of an earlier idempotency key"}},
              summary="Queue a player or a party for a pool.")
    async def create_ticket(body: TicketIn, idempotency_key: str | None = Header(default=None),
                            x_mgmatch_ab_key: str | None = Header(default=None)):
        t, key = prepare_ticket(rt, body, x_mgmatch_ab_key, idempotency_key)
        stored, created = await rt.store.acreate(t, key)
        if created:
            metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
        return JSONResponse(ticket_out(stored), status_code=201 if created else 200)

    @app.post("/v1/tickets/batch", tags=["tickets"], response_model=BatchOut,
              summary="Queue up to 100 tickets in one request (validated as a whole, created one by one).")
    async def create_tickets(body: BatchIn, x_mgmatch_ab_key: str | None = Header(default=None)):
        prepared = []
        for k, item in enumerate(body.tickets):
            try:
                prepared.append(prepare_ticket(rt, item, x_mgmatch_ab_key, None))
            except InvalidInput as err:
                raise InvalidInput(join(f"tickets[{k}]", [err.field]) if err.field else f"tickets[{k}]",
                                   err.message) from None
        results = await rt.store.acreate_many(prepared)
        out = []
        for (t, _), res in zip(prepared, results, strict=True):
            if isinstance(res, Conflict):
                out.append({"error": {"field": "players", "message": str(res)}})
                continue
            stored, created = res
            if created:
                metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
            out.append(ticket_out(stored))
        return JSONResponse({"tickets": out})

    @app.get("/v1/tickets/{ticket_id}", tags=["tickets"], response_model=TicketOut, summary="A ticket's status.")
    async def get_ticket(ticket_id: str):
        t = await rt.store.aget(ticket_id)
        if t is None:
            return _err(404, "ticket_id", f"no ticket {ticket_id!r}")
        return JSONResponse(ticket_out(t))

    @app.delete("/v1/tickets/{ticket_id}", tags=["tickets"], response_model=TicketOut,
                summary="Cancel a queued or proposed ticket.")
    async def cancel_ticket(ticket_id: str):
        t = await rt.store.acancel(ticket_id)
        if t is None:
            return _err(404, "ticket_id", f"no ticket {ticket_id!r}")
        metrics.TICKET_EVENTS.labels(t.pool, "cancelled").inc()
        return JSONResponse(ticket_out(t))

    return app


def build_asgi(rt: Runtime):
    """The FastAPI app behind the guard (what uvicorn serves)."""
    return Guard(create_app(rt), rt.settings)
