"""The HTTP API (FastAPI; OpenAPI at /docs).

- ``POST /v1/solve`` — a candidate pool in the spec's instance format, plus optional ``method``
  and ``time_limit_ms`` → a spec Solution (with ``arm``, ``model_version``), synchronously, on
  the solve pool's own threads (``MGMATCH_SOLVE_THREADS``, ``MGMATCH_SOLVE_QUEUE``).
- ``POST /v1/tickets`` — queue a player or a party for a pool; ``GET``/``DELETE /v1/tickets/{id}``
  (only the client that created a ticket sees it; see :mod:`mgmatch.app.service`).
- ``POST /v1/backfills`` — open slots of a running match, filled from the pool's queue by the
  matchmaker; ``GET``/``DELETE /v1/backfills/{id}`` (owned like tickets).
- ``POST /v1/matches/{match_id}/result`` — the game server reports a finished match's engagement
  (and optionally each player's) → 202; kept with the match's record for ``mgmatch export-log``.
- ``GET /v1/experiments/{name}`` — an A/B experiment's report: per arm matches, results, mean engagement, the
  lift over the control with an always-valid confidence sequence and p-value, the sample-ratio check
  (:mod:`mgmatch.app.abreport`; the same document as ``mgmatch ab report --json``).
- ``GET /healthz`` (process up), ``/readyz`` (store answers a ping within ``MGMATCH_READYZ_TIMEOUT_S``,
  workers running), ``/metrics``.

Bad input is 422 (400 ``body`` for a body that is not JSON — truncated, garbage, not UTF-8, empty — on every
route, or that nests too deep; 413 for one too large) with
``{"error": {"field", "message"}}`` naming the field (FastAPI's own validation errors are
rewritten to the same shape and keep ``detail``; so are routing's own 404 ``path`` and 405 ``method``). Reusing an
idempotency key for another ticket is 409 ``idempotency_key``. An unreachable store or a full solve pool is
503 with ``Retry-After`` (field ``store`` / ``solve``); never another 5xx. The logic shared with
gRPC lives in :mod:`mgmatch.app.service`; this module is transport only.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from mgmatch.core.errors import InvalidInput, describe, join

from . import abreport, metrics, service
from .api_events import add_event_routes
from .ratings import rating_view
from .runtime import Runtime, SolvePoolFull
from .security import OWNER_SCOPE_KEY, Guard
from .service import STORE_ERRORS, BackfillIn, NotFound, ResultIn, TicketIn, backfill_out, ticket_out
from .store import Conflict

__all__ = ["BatchIn", "TicketIn", "build_asgi", "create_app", "ticket_out"]


class MatchOut(BaseModel):
    match_id: str
    teams: list[list[str]] = Field(description="Player ids per team.")
    team: int = Field(description="The team of this ticket's players.")
    region: str | None = None
    method: str | None = None
    arm: str | None = None
    model_version: str | None = None
    objective: float | None = None
    matched_at: float | None = Field(default=None, description="Unix seconds when the match was committed.")
    assignment: dict[str, Any] | None = Field(default=None, description="Where the match is played, from the pool's "
                                                                      "allocator: connection (host:port) and the "
                                                                      "allocator's other fields.")
    accept_deadline: float | None = Field(default=None, description="While proposed in a ready check: Unix "
                                                                    "seconds (store clock) by which every player "
                                                                    "must accept.")
    backfill_id: str | None = Field(default=None, description="The backfill this ticket filled (then match_id is "
                                                              "the backfill's running match).")


class TicketOut(BaseModel):
    id: str
    pool: str
    status: str = Field(description="queued | proposed | matched | expired | cancelled | declined")
    players: list[str]
    created_at: float
    expires_at: float
    arm: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    match: MatchOut | None = None
    reason: str | None = Field(default=None, description="Why an expired ticket ended before its TTL, e.g. it no "
                                                         "longer fits its pool's model or rules.")
    estimated_wait_s: float | None = Field(
        default=None, description="GET of a queued ticket: seconds until its match is expected, from the pool's recent "
                                  "throughput and the ticket's place in the queue; null while unknown (matches in fewer "
                                  "than two distinct seconds of the pool's last 120 s).")
    unmatched_reason: str | None = Field(
        default=None, description="Why a queued ticket is not matched yet, once it stayed unmatched for "
                                  "MGMATCH_REASON_AFTER_TICKS matchmaker ticks (e.g. \"not enough healer players: a "
                                  "match needs 6 players who play healer, 4 queued\").")


class BackfillOut(BaseModel):
    id: str
    pool: str
    status: str = Field(description="open | filled | cancelled | expired")
    match_id: str
    teams: list[list[str]] = Field(description="The players already in the match, per team (pinned).")
    open: list[int] = Field(description="Open slots per team, as requested.")
    assigned: list[list[str]] = Field(description="New player ids per team (empty until filled; a fill is all or "
                                                  "nothing).")
    tickets: list[str] = Field(description="The tickets that filled it.")
    created_at: float
    expires_at: float
    filled_at: float | None = None


class ErrorDetail(BaseModel):
    field: str = Field(description="The offending field's path (e.g. players[0].features, body, store).")
    message: str = Field(description="One readable line that names the field.")


class ErrorOut(BaseModel):
    error: ErrorDetail


def _errors(*codes: int) -> dict[int, dict]:
    """OpenAPI entries for the error answers a route can give (all ``{"error": {field, message}}``)."""
    why = {400: "Body not JSON, or nested deeper than the limit.", 401: "Missing or invalid API key / signature.",
           404: "No such ticket (backfill or match) for this client.",
           409: "Conflict with the ticket's, backfill's, player's or match's state.",
           413: "Body larger than the limit.", 422: "Invalid input; `field` names it.",
           429: "Rate limit exceeded (Retry-After).",
           503: "Store unreachable or solve pool full (Retry-After); retry later."}
    return {c: {"model": ErrorOut, "description": why[c]} for c in codes}


_V1_ERRORS = (400, 401, 413, 422, 429, 503)


class ResultOut(BaseModel):
    match_id: str
    pool: str
    status: str = Field(description="accepted (stored now) | duplicate (the same result was stored before)")
    engagement: float
    received_at: float | None = Field(default=None, description="Unix seconds (store clock) the result was stored.")
    ratings: RatingsOut | None = Field(default=None, description="With ranks or winner: the players' rating update.")


class AnswerOut(BaseModel):
    match_id: str
    status: str = Field(description="pending (others still to accept) | matched (everyone accepted) | allocating "
                                    "(everyone accepted; the pool's allocator is asked for a game server) | "
                                    "declined (this decline ended the check)")


class PlayerRatingOut(BaseModel):
    id: str
    mu: float = Field(description="Mean of the player's skill (openskill Plackett–Luce; a new player is 25).")
    sigma: float = Field(description="Uncertainty of mu.")
    ordinal: float = Field(description="mu − 3·sigma: a conservative skill estimate for leaderboards.")
    games: int = Field(description="Results with an outcome that rated this player.")


class RatingsOut(BaseModel):
    status: str = Field(description="applied (updated now) | done (this match updated them before; nothing changed)")
    players: dict[str, PlayerRatingOut] = Field(description="The new ratings (empty when done).")


ResultOut.model_rebuild()


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tickets: list[TicketIn] = Field(min_length=1, max_length=100)


class BatchOut(BaseModel):
    tickets: list[dict[str, Any]] = Field(description="Per ticket, in order: the ticket, or {error: {field, message}}.")


def _err(status: int, field: str, message: str, headers: dict | None = None, **extra) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}, **extra}, status_code=status, headers=headers)


def _answer(exc: Exception, rt: Runtime, **conflict) -> JSONResponse:
    """The JSON error answer to an exception :func:`service.failure` knows (re-raised otherwise)."""
    f = service.failure(exc, rt.settings.retry_after_s, **conflict)
    if f is None:
        raise exc
    headers = None
    if f.retry_after_s is not None:
        headers = {"Retry-After": str(f.retry_after_s)}
        metrics.HTTP_REJECTED.labels("store_unavailable" if f.field == "store" else "solve_pool_full").inc()
    return _err(f.status, f.field, f.message, headers)


def _owner(request: Request) -> str | None:
    return request.scope.get(OWNER_SCOPE_KEY)


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


def _parse_json(raw: bytes | str) -> Any:
    """A request body read as JSON the way ``/v1/solve`` reads it: ``ValueError`` when it is not JSON
    (bad syntax, truncated, empty, not UTF-8, or NaN/Infinity, which JSON does not have)."""
    return json.loads(raw, parse_constant=_reject_constant)


def _not_json(err: Exception) -> JSONResponse:
    """Every JSON-body route's answer to a body that is not JSON: 400 naming ``body``, with the parser's reason."""
    return _err(400, "body", f"body: not valid JSON ({str(err)[:200]})")


def _empty_body(request: Request) -> bool:
    """Whether the request came without a body (``Content-Length: 0``, or neither length nor chunks)."""
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() == "0"
    return "transfer-encoding" not in request.headers


def _why_not_json(request: Request, exc: RequestValidationError) -> ValueError | None:
    """Why a JSON-body route's body is not JSON at all, when one of FastAPI's errors is about that (its
    ``json_invalid``, the whole body missing because it was empty, or the raw bytes of a body sent under
    another content type); None when the body is JSON and the errors are about its value (those stay 422)."""
    for e in exc.errors():
        loc = tuple(e.get("loc", ()))
        if loc[:1] != ("body",):
            continue
        if e.get("type") == "json_invalid":  # FastAPI's parse failed; exc.body holds the decoded text
            raw = exc.body if isinstance(exc.body, (str, bytes)) else ""
            fallback = ValueError(f"{(e.get('ctx') or {}).get('error', 'invalid JSON')} (char {loc[-1]})")
        elif loc == ("body",) and isinstance(exc.body, (bytes, bytearray)):  # not parsed: not a JSON content type
            raw, fallback = bytes(exc.body), None
        elif loc == ("body",) and e.get("type") == "missing" and _empty_body(request):
            raw, fallback = b"", ValueError("empty body")
        else:
            continue
        try:
            _parse_json(raw)
        except ValueError as err:
            return err
        return fallback
    return None


#: where the service serves Swagger UI's and ReDoc's scripts and styles (from the fastapi-offline package)
DOCS_ASSETS = "/docs-assets"


def create_app(rt: Runtime) -> FastAPI:
    # /docs (Swagger UI) and /redoc load their scripts and styles from the package (DOCS_ASSETS), not a CDN
    app = FastAPIOffline(title="mgmatch", version="0.1.0", static_url=DOCS_ASSETS,
                         description="Real-time matchmaking that maximizes predicted engagement under hard rules.")
    app.state.runtime = rt

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        # a body that is not JSON at all is 400 `body` on every route, as /v1/solve answers it (FastAPI's
        # own json_invalid error would read "[15]: JSON decode error", a 422 naming a character offset)
        why = _why_not_json(request, exc)
        if why is not None:
            return _not_json(why)
        errors = exc.errors()
        first = dict(errors[0]) if errors else {"loc": (), "msg": "invalid request"}
        loc = tuple(first.get("loc", ()))
        first["loc"] = loc[1:] if loc[:1] == ("body",) else loc  # the body's own fields are named bare
        field, msg = describe(first)
        field = field or "body"
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]
        return _err(422, field, f"{field}: {msg}", detail=detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's body read failed outside its JSON parser (a body that is not UTF-8): not JSON either
            return _not_json(exc.__cause__)
        # routing's own answers (no such path, method not allowed) in the error shape of every other answer
        field = {404: "path", 405: "method"}.get(exc.status_code, "request")
        what = request.url.path if field == "path" else request.method
        message = f"{field}: {exc.detail} ({what[:80]!r})" if field in ("path", "method") else f"{field}: {exc.detail}"
        return _err(exc.status_code, field, message, getattr(exc, "headers", None), detail=exc.detail)

    async def _known(request: Request, exc: Exception):
        return _answer(exc, rt)

    async def _conflict(request: Request, exc: Exception):  # cancel answers its own conflicts
        return _answer(exc, rt, conflict_code="ALREADY_EXISTS", conflict_field="players")

    for kind in (InvalidInput, NotFound, SolvePoolFull, *STORE_ERRORS):
        app.add_exception_handler(kind, _known)
    app.add_exception_handler(Conflict, _conflict)

    @app.get("/healthz", tags=["ops"], summary="Liveness: the process is up.")
    async def healthz():
        return {"status": "ok", "uptime_s": round(time.time() - rt.started_at, 1)}

    @app.get("/readyz", tags=["ops"], summary="Readiness: the store answers and the workers run.", responses={503: {"description": "Not ready (store unreachable, workers down)."}})
    async def readyz():
        # the ping runs on the probe's own thread: neither anyio's pool nor the solve pool can delay it
        try:
            store_ok = bool(await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(rt.probe.start())),
                                                   rt.settings.readyz_timeout_s))
        except TimeoutError:
            store_ok = False
        ok, checks = rt.readiness(store_ok)
        return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503,
                            headers=None if ok else {"Retry-After": str(rt.settings.retry_after_s)})

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics.", response_class=Response, responses={200: {
        "description": "Prometheus text exposition format.",
        "content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prom():
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/solve", tags=["solve"], openapi_extra={"requestBody": _SOLVE_BODY},
              summary="Solve one candidate pool synchronously; returns a spec Solution.",
              responses=_errors(*_V1_ERRORS))
    async def solve(request: Request, x_mgmatch_ab_key: str | None = Header(default=None)):
        t0 = time.perf_counter()
        raw = await request.body()
        try:
            obj = _parse_json(raw)
        except ValueError as err:
            return _not_json(err)
        if not isinstance(obj, dict):
            return _err(422, "body", "body: expected a JSON object (an instance)")
        inst, plan = service.solve_request(rt, obj, x_mgmatch_ab_key)
        sol = await asyncio.wrap_future(rt.solves.submit(service.solve, rt, inst, plan, t0))
        return JSONResponse(sol)

    @app.post("/v1/tickets", tags=["tickets"], status_code=201, response_model=TicketOut,
              responses={200: {"model": TicketOut, "description": "Replay of an earlier idempotency key"},
                         **_errors(409, *_V1_ERRORS)},
              summary="Queue a player or a party for a pool.")
    async def create_ticket(request: Request, body: TicketIn, idempotency_key: str | None = Header(default=None),
                            x_mgmatch_ab_key: str | None = Header(default=None)):
        owner = _owner(request)
        unrated = service.unrated(rt, body)
        ratings = await rt.store.aget_ratings(unrated) if unrated else None
        t, key = service.prepare_ticket(rt, body, x_mgmatch_ab_key, idempotency_key, owner, ratings)
        stored, created = await rt.store.acreate(t, key)
        stored = service.created(stored, owner, t)
        if created:
            metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
        return JSONResponse(ticket_out(stored), status_code=201 if created else 200)

    @app.post("/v1/tickets/batch", tags=["tickets"], response_model=BatchOut, responses=_errors(*_V1_ERRORS),
              summary="Queue up to 100 tickets in one request (validated as a whole, created one by one).")
    async def create_tickets(request: Request, body: BatchIn, x_mgmatch_ab_key: str | None = Header(default=None)):
        owner = _owner(request)
        prepared = []
        for k, item in enumerate(body.tickets):
            try:
                unrated = service.unrated(rt, item)
                ratings = await rt.store.aget_ratings(unrated) if unrated else None
                prepared.append(service.prepare_ticket(rt, item, x_mgmatch_ab_key, None, owner, ratings))
            except InvalidInput as err:
                raise InvalidInput(join(f"tickets[{k}]", [err.field]) if err.field else f"tickets[{k}]",
                                   err.message) from None
        results = await rt.store.acreate_many(prepared)
        out = []
        for (t, _), res in zip(prepared, results, strict=True):
            if isinstance(res, Conflict):
                field = getattr(res, "field", None) or "players"
                out.append({"error": {"field": field, "message": f"{field}: {res}"}})
                continue
            stored, created = res
            try:
                service.created(stored, owner, t)
            except (InvalidInput, service.KeyReused) as err:
                f = service.failure(err, rt.settings.retry_after_s)
                out.append({"error": {"field": f.field, "message": f.message}})
                continue
            if created:
                metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
            out.append(ticket_out(stored))
        return JSONResponse({"tickets": out})

    @app.get("/v1/tickets/{ticket_id}", tags=["tickets"], response_model=TicketOut, summary="A ticket's status.",
             responses=_errors(404, *_V1_ERRORS))
    async def get_ticket(request: Request, ticket_id: str):
        t = await rt.store.aget(service.lookup_id(ticket_id))
        return JSONResponse(await service.ticket_status(rt, service.owned(t, ticket_id, _owner(request))))

    @app.delete("/v1/tickets/{ticket_id}", tags=["tickets"], response_model=TicketOut,
                responses=_errors(404, 409, *_V1_ERRORS), summary="Cancel a queued or proposed ticket.")
    async def cancel_ticket(request: Request, ticket_id: str):
        owner = _owner(request)
        service.lookup_id(ticket_id)
        if owner is not None:  # another client's ticket is "not found", and stays as it is
            service.owned(await rt.store.aget(ticket_id), ticket_id, owner)
        try:
            t = await rt.store.acancel(ticket_id)
        except Conflict as err:
            return _answer(err, rt)
        t = service.owned(t, ticket_id, owner)
        metrics.TICKET_EVENTS.labels(t.pool, "cancelled").inc()
        return JSONResponse(ticket_out(t))

    @app.post("/v1/backfills", tags=["backfills"], status_code=201, response_model=BackfillOut,
              responses=_errors(*_V1_ERRORS), summary="Ask for open slots of a running match to be filled.")
    async def create_backfill(request: Request, body: BackfillIn):
        b = service.prepare_backfill(rt, body, _owner(request))
        stored = await asyncio.to_thread(rt.store.create_backfill, b)
        metrics.BACKFILL_EVENTS.labels(stored.pool, "created").inc()
        return JSONResponse(backfill_out(stored), status_code=201)

    @app.get("/v1/backfills/{backfill_id}", tags=["backfills"], response_model=BackfillOut,
             summary="A backfill's status and the players assigned to it.", responses=_errors(404, *_V1_ERRORS))
    async def get_backfill(request: Request, backfill_id: str):
        b = await asyncio.to_thread(rt.store.get_backfill, service.lookup_id(backfill_id, "backfill_id", "backfill"))
        return JSONResponse(backfill_out(service.owned(b, backfill_id, _owner(request), "backfill_id", "backfill")))

    @app.delete("/v1/backfills/{backfill_id}", tags=["backfills"], response_model=BackfillOut,
                responses=_errors(404, 409, *_V1_ERRORS), summary="Cancel an open backfill.")
    async def cancel_backfill(request: Request, backfill_id: str):
        owner = _owner(request)
        service.lookup_id(backfill_id, "backfill_id", "backfill")
        if owner is not None:  # another client's backfill is "not found", and stays as it is
            service.owned(await asyncio.to_thread(rt.store.get_backfill, backfill_id), backfill_id, owner, "backfill_id", "backfill")
        try:
            b = await asyncio.to_thread(rt.store.cancel_backfill, backfill_id)
        except Conflict as err:
            return _answer(err, rt)
        b = service.owned(b, backfill_id, owner, "backfill_id", "backfill")
        metrics.BACKFILL_EVENTS.labels(b.pool, "cancelled").inc()
        return JSONResponse(backfill_out(b))

    async def _answer_route(request: Request, match_id: str, body: service.AnswerIn, accept: bool):
        try:
            out = await anyio.to_thread.run_sync(service.answer_match, rt, match_id, body, accept, _owner(request))
        except Conflict as err:
            return _answer(err, rt)
        return JSONResponse(out)

    @app.post("/v1/matches/{match_id}/accept", tags=["matches"], response_model=AnswerOut,
              responses=_errors(404, 409, *_V1_ERRORS), summary="Accept a proposed match (ready check) for a player.")
    async def accept_match(request: Request, match_id: str, body: service.AnswerIn):
        return await _answer_route(request, match_id, body, True)

    @app.post("/v1/matches/{match_id}/decline", tags=["matches"], response_model=AnswerOut,
              responses=_errors(404, 409, *_V1_ERRORS),
              summary="Decline a proposed match (ready check): the player's ticket ends, the others requeue.")
    async def decline_match(request: Request, match_id: str, body: service.AnswerIn):
        return await _answer_route(request, match_id, body, False)

    @app.get("/v1/players/{player_id}", tags=["players"], response_model=PlayerRatingOut,
             responses=_errors(*_V1_ERRORS), summary="A player's rating (a player never rated has the prior).")
    async def get_player(player_id: str):
        if not 0 < len(player_id) <= service.MAX_NAME_CHARS:
            raise InvalidInput("player_id", f"1–{service.MAX_NAME_CHARS} characters, got {len(player_id)}")
        got = await rt.store.aget_ratings([player_id])
        return JSONResponse(rating_view(player_id, got.get(player_id)))

    @app.post("/v1/matches/{match_id}/result", tags=["matches"], status_code=202, response_model=ResultOut,
              responses=_errors(404, 409, *_V1_ERRORS),
              summary="Report a finished match's engagement (kept for the match log, `mgmatch export-log`).")
    async def post_result(request: Request, match_id: str, body: ResultIn):
        try:
            out = await anyio.to_thread.run_sync(service.post_result, rt, match_id, body, _owner(request))
        except Conflict as err:
            return _answer(err, rt, conflict_code="ALREADY_EXISTS", conflict_field="result")
        return JSONResponse(out, status_code=202)

    ab_outcomes = abreport.OutcomeCache()  # the match records with a result, read from the store once

    @app.get("/v1/experiments/{name}", tags=["experiments"], responses=_errors(404, *_V1_ERRORS),
             summary="An A/B experiment's report: per arm matches, results, mean engagement, lift over the control "
                     "(always-valid confidence sequence and p-value) and the sample-ratio check.")
    async def experiment_report(name: str, control: str | None = None, alpha: float = 0.05, horizon: int | None = None):
        try:
            out = await anyio.to_thread.run_sync(
                lambda: abreport.report_from_store(rt.store, rt.config, name, control=control, alpha=alpha,
                                                   horizon=horizon, cache=ab_outcomes))
        except abreport.UnknownExperiment as err:
            raise NotFound("name", err.message) from None
        except InvalidInput as err:  # a query parameter, named as FastAPI names them (query.alpha)
            raise InvalidInput(f"query.{err.field}", err.message) from None
        return JSONResponse(out)

    add_event_routes(app, rt, _errors, _V1_ERRORS)
    return app


def build_asgi(rt: Runtime):
    """The FastAPI app behind the guard (what uvicorn serves)."""
    return Guard(create_app(rt), rt.settings)
