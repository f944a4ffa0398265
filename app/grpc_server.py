"""The optional gRPC API (``mgmatch serve --grpc-port N``): the HTTP API's routes and messages.

Service ``mgmatch.v1.Matchmaker`` (``app/rpc/matchmaker.proto``): Solve, CreateTicket, GetTicket,
CancelTicket. A request is turned into the same JSON object the HTTP API reads and goes through
the same validation (:func:`mgmatch.app.api.solve_request`, :func:`~mgmatch.app.api.prepare_ticket`),
runtime and store, so both front ends answer alike. Errors become status codes with the HTTP
API's message (which names the field): INVALID_ARGUMENT (HTTP 422), NOT_FOUND (404),
ALREADY_EXISTS (409, a player already queued), FAILED_PRECONDITION (409, a ticket that can no
longer be cancelled), UNAUTHENTICATED (401), RESOURCE_EXHAUSTED (429). API keys travel in the
``x-api-key`` or ``authorization: Bearer`` metadata; request signing is HTTP-only (use API keys,
and TLS in front, for gRPC). Requires the ``grpc`` extra (grpcio, protobuf).
"""

from __future__ import annotations

import functools
import time
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import json_format
from pydantic import ValidationError

from mgmatch.core.errors import InvalidInput, from_pydantic

from . import metrics
from .api import TicketIn, prepare_ticket, solve_request, ticket_out
from .config import SOLVE_POOL
from .rpc import matchmaker_pb2 as pb
from .rpc import matchmaker_pb2_grpc as pb_grpc
from .runtime import Runtime
from .security import key_client, presented_key, rate_buckets
from .store import Conflict


def _to_dict(msg) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def _players(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in items:
        q = {k: v for k, v in p.items() if k != "extra"}
        q.update(p.get("extra") or {})
        out.append(q)
    return out


def instance_json(inst: pb.Instance) -> dict[str, Any]:
    """The spec's instance object from its protobuf form (unset fields absent)."""
    obj = _to_dict(inst)
    obj["players"] = _players(obj.get("players", []))
    return obj


def _teams(teams: list[list[str]]) -> list[dict[str, list[str]]]:
    return [{"players": list(t)} for t in teams]


def solution_message(sol: dict[str, Any]) -> pb.Solution:
    obj = {k: v for k, v in sol.items() if k in pb.Solution.DESCRIPTOR.fields_by_name}
    obj["teams"] = _teams(sol.get("teams", []))
    return json_format.ParseDict(obj, pb.Solution())


def ticket_message(t: dict[str, Any]) -> pb.Ticket:
    obj = {k: v for k, v in t.items() if v is not None}
    if "match" in obj:
        m = {k: v for k, v in obj["match"].items() if v is not None}
        m["teams"] = _teams(m.get("teams", []))
        obj["match"] = m
    return json_format.ParseDict(obj, pb.Ticket())


def _observed(fn):
    """Count every call by method and final status code, and time it."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self, request, context):
        t0 = time.perf_counter()
        code = "OK"
        try:
            return fn(self, request, context)
        except Exception:
            code = context.code().name if context.code() is not None else "UNKNOWN"
            raise
        finally:
            metrics.GRPC_REQUESTS.labels(name, code).inc()
            metrics.GRPC_SECONDS.labels(name).observe(time.perf_counter() - t0)

    return wrapper


class MatchmakerService(pb_grpc.MatchmakerServicer):
    def __init__(self, rt: Runtime):
        self.rt = rt
        s = rt.settings
        self.keys = {k.encode() for k in s.api_keys}
        self.buckets = rate_buckets(s)

    # ------------------------------------------------------------------ guard

    def _guard(self, context) -> None:
        client = context.peer() or "?"
        if self.keys:
            md = {k.lower(): v.encode() for k, v in context.invocation_metadata() if isinstance(v, str)}
            client = key_client(self.keys, presented_key(md.get("x-api-key"), md.get("authorization")))
            if client is None:
                metrics.HTTP_REJECTED.labels("unauthorized").inc()
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "authorization: missing or invalid API key")
        if self.buckets is not None and self.buckets.take(client) > 0:
            metrics.HTTP_REJECTED.labels("rate_limited").inc()
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"rate: limit {self.rt.settings.rate_limit_per_s:g}/s exceeded")

    @staticmethod
    def _invalid(context, err: InvalidInput):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))

    # ------------------------------------------------------------------ rpcs

    @_observed
    def Solve(self, request: pb.SolveRequest, context) -> pb.Solution:
        t0 = time.perf_counter()
        self._guard(context)
        obj = instance_json(request.instance)
        if request.HasField("method"):
            obj["method"] = request.method
        if request.HasField("time_limit_ms"):
            obj["time_limit_ms"] = request.time_limit_ms
        try:
            inst, plan = solve_request(self.rt, obj, request.ab_key if request.HasField("ab_key") else None)
            sol = self.rt.engine.solve(inst, plan, SOLVE_POOL, start=t0)
        except InvalidInput as err:
            self._invalid(context, err)
        return solution_message(sol.to_json())

    @_observed
    def CreateTicket(self, request: pb.CreateTicketRequest, context) -> pb.Ticket:
        self._guard(context)
        obj = _to_dict(request)
        obj["players"] = _players(obj.get("players", []))
        ab_key = obj.pop("ab_key", None)
        try:
            try:
                body = TicketIn.model_validate(obj)
            except ValidationError as err:
                raise from_pydantic(err) from None
            t, key = prepare_ticket(self.rt, body, ab_key, None)
            stored, created = self.rt.store.create(t, key)
        except InvalidInput as err:
            self._invalid(context, err)
        except Conflict as err:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"players: {err}")
        if created:
            metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
        return ticket_message(ticket_out(stored))

    @_observed
    def GetTicket(self, request: pb.TicketRef, context) -> pb.Ticket:
        self._guard(context)
        t = self.rt.store.get(request.id)
        if t is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"id: no ticket {request.id!r}")
        return ticket_message(ticket_out(t))

    @_observed
    def CancelTicket(self, request: pb.TicketRef, context) -> pb.Ticket:
        self._guard(context)
        try:
            t = self.rt.store.cancel(request.id)
        except Conflict as err:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"status: {err}")
        if t is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"id: no ticket {request.id!r}")
        metrics.TICKET_EVENTS.labels(t.pool, "cancelled").inc()
        return ticket_message(ticket_out(t))


def start_grpc(rt: Runtime, host: str, port: int, threads: int = 16) -> tuple[grpc.Server, int]:
    """Start the gRPC server on ``host:port`` (0 = a free port); returns it and the bound port."""
    max_msg = rt.settings.max_body_bytes
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
                         options=[("grpc.max_receive_message_length", max_msg)])
    pb_grpc.add_MatchmakerServicer_to_server(MatchmakerService(rt), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind gRPC to {host}:{port}")
    server.start()
    return server, bound
