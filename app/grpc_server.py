"""The optional gRPC API (``mgmatch serve --grpc-port N``): the HTTP API's routes and messages.

Service ``mgmatch.v1.Matchmaker`` (``app/rpc/matchmaker.proto``): Solve, CreateTicket, GetTicket,
CancelTicket, CreateBackfill, GetBackfill, CancelBackfill, PostMatchResult. A request is turned into the same JSON
object the HTTP API reads and goes through
the same service logic (:mod:`mgmatch.app.service`: validation, ownership, error mapping), solve
pool, runtime and store, so both front ends answer alike. Errors become status codes with the
HTTP API's message (which names the field): INVALID_ARGUMENT (HTTP 422), NOT_FOUND (404, also
another client's ticket), ALREADY_EXISTS (409, a player already queued), FAILED_PRECONDITION
(409, a ticket that can no longer be cancelled), UNAUTHENTICATED (401), RESOURCE_EXHAUSTED
(429), UNAVAILABLE (503: store unreachable or solve pool full; trailing metadata ``retry-after``).
What protobuf can carry and JSON cannot is refused INVALID_ARGUMENT naming the field: a NaN or an
infinity in a Struct (``rules[0].rhs``, ``attributes.a``, ``players[0].sigma``), a typed player field
repeated in ``extra`` (``players[0].extra.id``), a result without ``engagement``.

API keys travel in the ``x-api-key`` or ``authorization: Bearer`` metadata. Request signing is
HTTP-only: with ``MGMATCH_HMAC_SECRET`` and no API keys, every gRPC call is refused
UNAUTHENTICATED (configure keys for gRPC, and TLS in front). Requires the ``grpc`` extra
(grpcio, protobuf).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from pydantic import ValidationError

from mgmatch.core.errors import InvalidInput, from_pydantic

from . import events, metrics, service
from .rpc import matchmaker_pb2 as pb
from .rpc import matchmaker_pb2_grpc as pb_grpc
from .runtime import Runtime, SolvePoolFull
from .security import grpc_client, rate_buckets
from .service import STORE_ERRORS, BackfillIn, NotFound, ResultIn, TicketIn, backfill_out, ticket_out
from .store import Conflict

#: errors the service maps to a status code (anything else is a bug and surfaces as UNKNOWN)
#: watch streams (WatchTicket, WatchEvents) one server runs at once, each holding a thread
WATCH_STREAMS = 64
_KNOWN = (InvalidInput, NotFound, Conflict, SolvePoolFull, *STORE_ERRORS)


#: the google.protobuf message types whose numbers are JSON numbers (no NaN or infinity in JSON)
_STRUCTS = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue")
#: message fields whose contents the JSON object holds one level up (the HTTP body is the instance itself;
#: a player's extra fields are the player's own)
_FLATTENED = {("mgmatch.v1.SolveRequest", "instance"), ("mgmatch.v1.Player", "extra")}
#: a player's typed fields: ``extra`` may not carry them (it would silently replace them)
_PLAYER_FIELDS = frozenset(pb.Player.DESCRIPTOR.fields_by_name)


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _check_value(v, path: str) -> None:
    """Refuse a non-finite number anywhere in a ``google.protobuf.Value`` (InvalidInput naming it)."""
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        if not math.isfinite(v.number_value):
            raise InvalidInput(path, f"must be a finite number, got {v.number_value}")
    elif kind == "struct_value":
        _check_struct(v.struct_value, path)
    elif kind == "list_value":
        _check_list(v.list_value, path)


def _check_struct(s, path: str) -> None:
    for k, v in s.fields.items():
        _check_value(v, _at(path, k))


def _check_list(lst, path: str) -> None:
    for i, v in enumerate(lst.values):
        _check_value(v, _at(path, i))


def _check_finite(msg, path: str = "") -> None:
    """Refuse a NaN or an infinity in any Struct/Value of a request (JSON has neither, and protobuf's JSON
    conversion raises on them): InvalidInput naming the field as the request's JSON object has it
    (``rules[0].rhs``, ``attributes.a``, ``players[1].sigma``)."""
    name = msg.DESCRIPTOR.full_name
    if name in _STRUCTS:
        {"google.protobuf.Struct": _check_struct, "google.protobuf.Value": _check_value,
         "google.protobuf.ListValue": _check_list}[name](msg, path)
        return
    for fd, value in msg.ListFields():
        if fd.message_type is None or fd.message_type.GetOptions().map_entry:
            continue  # scalars and maps of scalars: protobuf's JSON writes a non-finite double as a string
        sub = path if (name, fd.name) in _FLATTENED else _at(path, fd.name)
        if fd.is_repeated:
            for i, item in enumerate(value):
                _check_finite(item, _at(sub, i))
        else:
            _check_finite(value, sub)


def _to_dict(msg) -> dict[str, Any]:
    """A request message as the JSON object the HTTP API reads (unset fields absent).

    Raises:
        InvalidInput: a non-finite number in a Struct (naming it), or a message JSON cannot express (``body``).
    """
    _check_finite(msg)
    try:
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)
    except json_format.Error as err:  # defensive: _check_finite refuses what protobuf is known to raise on
        raise InvalidInput("body", f"cannot read the request as JSON ({str(err)[:200]})") from None


def _players(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spec's players from their protobuf form: ``extra``'s fields become the player's own.

    Raises:
        InvalidInput: ``players[i].extra.<key>`` when ``extra`` holds a typed field of the player (which it
            would silently replace; HTTP has one object per player, so the same key twice cannot happen there).
    """
    out = []
    for i, p in enumerate(items):
        q = {k: v for k, v in p.items() if k != "extra"}
        extra = p.get("extra") or {}
        for key in extra:
            if key in _PLAYER_FIELDS:
                raise InvalidInput(f"players[{i}].extra.{key}",
                                   f"{key!r} is a field of the player message; set it there, not in extra")
        q.update(extra)
        out.append(q)
    return out


def instance_json(inst: pb.Instance) -> dict[str, Any]:
    """The spec's instance object from its protobuf form (unset fields absent).

    Raises:
        InvalidInput: as :func:`_to_dict` and :func:`_players` (a non-finite Struct number, a typed field in extra).
    """
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


def backfill_message(b: dict[str, Any]) -> pb.Backfill:
    obj = {k: v for k, v in b.items() if v is not None}
    obj["teams"] = _teams(b.get("teams", []))
    obj["assigned"] = _teams(b.get("assigned", []))
    return json_format.ParseDict(obj, pb.Backfill())


class _Undecodable:
    """A request that protobuf could not decode (e.g. a Struct nested past protobuf's recursion limit)."""

    def __init__(self, reason: str):
        self.reason = reason


def _decoder(message_type):
    """A request deserializer that hands the RPC an :class:`_Undecodable` instead of raising, so the
    caller gets INVALID_ARGUMENT (HTTP 400 ``body``) rather than gRPC's INTERNAL."""

    def decode(raw: bytes):
        try:
            return message_type.FromString(raw)
        except DecodeError as err:
            return _Undecodable(f"cannot decode the request ({err}); nested too deep?")

    return decode


def _observed(fn):
    """Count every call by method and final status code, and time it; refuse an undecodable request."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self, request, context):
        t0 = time.perf_counter()
        code = "OK"
        try:
            if isinstance(request, _Undecodable):
                self._guard(context)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"body: {request.reason}")
            return fn(self, request, context)
        except Exception:
            code = context.code().name if context.code() is not None else "UNKNOWN"
            raise
        finally:
            metrics.GRPC_REQUESTS.labels(name, code).inc()
            metrics.GRPC_SECONDS.labels(name).observe(time.perf_counter() - t0)

    return wrapper


#: the initial metadata of a WatchEvents stream, sent once it reads from its position
WATCHING = (("mgmatch-watching", "1"),)


def _watch(fn):
    """A streaming RPC: one of the server's stream slots while it runs (RESOURCE_EXHAUSTED when none is
    free, so watchers never take every thread from the unary calls), counted by final status."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self, request, context):
        code = "OK"
        try:
            if isinstance(request, _Undecodable):
                self._guard(context)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"body: {request.reason}")
            if not self.streams.acquire(blocking=False):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "streams: every watch slot of this server is busy")
            metrics.EVENT_STREAMS.labels("grpc").inc()
            try:
                yield from fn(self, request, context)
            finally:
                metrics.EVENT_STREAMS.labels("grpc").dec()
                self.streams.release()
        except Exception:
            code = context.code().name if context.code() is not None else "UNKNOWN"
            raise
        finally:
            metrics.GRPC_REQUESTS.labels(name, code).inc()

    return wrapper


def _event_message(ev: events.Event) -> pb.TicketEvent:
    msg = pb.TicketEvent(id=ev.id, type=ev.type, pool=ev.pool)
    if "status" in ev.ticket:
        msg.ticket.CopyFrom(ticket_message(ev.ticket))
    return msg


def _last_event_id(value: str) -> str | None:
    if not value:
        return None
    if not events.valid_entry_id(value):
        raise InvalidInput("last_event_id", "last_event_id: expected an event id as sent in TicketEvent.id")
    return value


class MatchmakerService(pb_grpc.MatchmakerServicer):
    def __init__(self, rt: Runtime, streams: int = 0):
        self.rt = rt
        self.streams = threading.BoundedSemaphore(max(1, streams))
        s = rt.settings
        self.keys = {k.encode() for k in s.api_keys}
        self.buckets = rate_buckets(s)

    # ------------------------------------------------------------------ guard

    def _guard(self, context) -> str | None:
        """Authenticate and rate-limit a call (aborting it when refused); returns the ticket owner."""
        md = {k.lower(): v.encode() for k, v in context.invocation_metadata() if isinstance(v, str)}
        who = grpc_client(self.rt.settings, self.keys, md.get("x-api-key"), md.get("authorization"),
                          context.peer() or "?")
        if who is None:
            metrics.HTTP_REJECTED.labels("unauthorized").inc()
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "authorization: missing or invalid API key (gRPC takes API keys only)")
        client, owner = who
        if self.buckets is not None and self.buckets.take(client) > 0:
            metrics.HTTP_REJECTED.labels("rate_limited").inc()
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"rate: limit {self.rt.settings.rate_limit_per_s:g}/s exceeded")
        return owner

    def _fail(self, context, err: Exception, **conflict) -> None:
        """Abort the call with the status code and message the service gives ``err``."""
        f = service.failure(err, self.rt.settings.retry_after_s, **conflict)
        if f is None:
            raise err
        if f.retry_after_s is not None:
            metrics.HTTP_REJECTED.labels("store_unavailable" if f.field == "store" else "solve_pool_full").inc()
            context.set_trailing_metadata((("retry-after", str(f.retry_after_s)),))
        context.abort(grpc.StatusCode[f.grpc_code], f.message)

    # ------------------------------------------------------------------ rpcs

    @_observed
    def Solve(self, request: pb.SolveRequest, context) -> pb.Solution:
        t0 = time.perf_counter()
        self._guard(context)
        try:
            obj = instance_json(request.instance)
            if request.HasField("method"):
                obj["method"] = request.method
            if request.HasField("time_limit_ms"):
                obj["time_limit_ms"] = request.time_limit_ms
            inst, plan = service.solve_request(self.rt, obj, request.ab_key if request.HasField("ab_key") else None)
            sol = self.rt.solves.submit(service.solve, self.rt, inst, plan, t0).result()
        except _KNOWN as err:
            self._fail(context, err)
        return solution_message(sol)

    @_observed
    def CreateTicket(self, request: pb.CreateTicketRequest, context) -> pb.Ticket:
        owner = self._guard(context)
        try:
            obj = _to_dict(request)
            obj["players"] = _players(obj.get("players", []))
            ab_key = obj.pop("ab_key", None)
            try:
                body = TicketIn.model_validate(obj)
            except ValidationError as err:
                raise from_pydantic(err) from None
            unrated = service.unrated(self.rt, body)
            ratings = self.rt.store.get_ratings(unrated) if unrated else None
            t, key = service.prepare_ticket(self.rt, body, ab_key, None, owner, ratings)
            stored, created = self.rt.store.create(t, key)
            stored = service.created(stored, owner, t)
        except _KNOWN as err:
            self._fail(context, err, conflict_code="ALREADY_EXISTS", conflict_field="players")
        if created:
            metrics.TICKET_EVENTS.labels(t.pool, "created").inc()
        return ticket_message(ticket_out(stored))

    @_observed
    def GetTicket(self, request: pb.TicketRef, context) -> pb.Ticket:
        owner = self._guard(context)
        try:
            t = service.owned(self.rt.store.get(service.lookup_id(request.id, "id")), request.id, owner, "id")
            out = service.ticket_status_sync(self.rt, t)
        except _KNOWN as err:
            self._fail(context, err)
        return ticket_message(out)

    @_observed
    def CancelTicket(self, request: pb.TicketRef, context) -> pb.Ticket:
        owner = self._guard(context)
        try:
            service.lookup_id(request.id, "id")
            if owner is not None:  # another client's ticket is "not found", and stays as it is
                service.owned(self.rt.store.get(request.id), request.id, owner, "id")
            t = service.owned(self.rt.store.cancel(request.id), request.id, owner, "id")
        except _KNOWN as err:
            self._fail(context, err)
        metrics.TICKET_EVENTS.labels(t.pool, "cancelled").inc()
        return ticket_message(ticket_out(t))

    @_observed
    def CreateBackfill(self, request: pb.CreateBackfillRequest, context) -> pb.Backfill:
        owner = self._guard(context)
        try:
            obj = _to_dict(request)
            obj["players"] = _players(obj.get("players", []))
            obj["teams"] = [t.get("players", []) for t in obj.get("teams", [])]
            try:
                body = BackfillIn.model_validate(obj)
            except ValidationError as err:
                raise from_pydantic(err) from None
            b = self.rt.store.create_backfill(service.prepare_backfill(self.rt, body, owner))
        except _KNOWN as err:
            self._fail(context, err)
        metrics.BACKFILL_EVENTS.labels(b.pool, "created").inc()
        return backfill_message(backfill_out(b))

    @_observed
    def GetBackfill(self, request: pb.BackfillRef, context) -> pb.Backfill:
        owner = self._guard(context)
        try:
            b = self.rt.store.get_backfill(service.lookup_id(request.id, "id", "backfill"))
            b = service.owned(b, request.id, owner, "id", "backfill")
        except _KNOWN as err:
            self._fail(context, err)
        return backfill_message(backfill_out(b))

    @_observed
    def CancelBackfill(self, request: pb.BackfillRef, context) -> pb.Backfill:
        owner = self._guard(context)
        try:
            service.lookup_id(request.id, "id", "backfill")
            if owner is not None:  # another client's backfill is "not found", and stays as it is
                service.owned(self.rt.store.get_backfill(request.id), request.id, owner, "id", "backfill")
            b = service.owned(self.rt.store.cancel_backfill(request.id), request.id, owner, "id", "backfill")
        except _KNOWN as err:
            self._fail(context, err)
        metrics.BACKFILL_EVENTS.labels(b.pool, "cancelled").inc()
        return backfill_message(backfill_out(b))

    @_observed
    def PostMatchResult(self, request: pb.MatchResultRequest, context) -> pb.MatchResultAck:
        owner = self._guard(context)
        try:
            try:
                obj: dict[str, Any] = {"players": dict(request.players) or None}
                if request.HasField("engagement"):  # absent: "engagement: field required", as HTTP answers
                    obj["engagement"] = request.engagement
                if request.ranks:
                    obj["ranks"] = list(request.ranks)
                if request.HasField("winner"):
                    obj["winner"] = request.winner
                body = ResultIn.model_validate(obj)
            except ValidationError as err:
                raise from_pydantic(err) from None
            out = service.post_result(self.rt, request.match_id, body, owner)
        except _KNOWN as err:
            self._fail(context, err, conflict_code="ALREADY_EXISTS", conflict_field="result")
        ratings = out.pop("ratings", None)
        if ratings is not None:
            out["ratings_status"] = ratings["status"]
        return json_format.ParseDict({k: v for k, v in out.items() if v is not None}, pb.MatchResultAck())

    @_watch
    def WatchTicket(self, request: pb.WatchTicketRequest, context):
        owner = self._guard(context)
        try:
            after = _last_event_id(request.last_event_id)
            t = service.owned(self.rt.store.get(service.lookup_id(request.id, "id")), request.id, owner, "id")
            stream = events.watch_ticket_sync(self.rt.store, self.rt.store.get, t, after,
                                              lambda: not context.is_active())
            for ev in stream:
                if ev is not None:
                    yield _event_message(ev)
        except _KNOWN as err:
            self._fail(context, err)

    @_watch
    def WatchEvents(self, request: pb.WatchEventsRequest, context):
        owner = self._guard(context)
        try:
            after = _last_event_id(request.last_event_id)
            if request.pool not in self.rt.pools:
                raise InvalidInput("pool", f"pool: no pool {request.pool[:64]!r}")
            # the headers go out once the stream's position is fixed (WATCHING): a client that waits for
            # them (``call.initial_metadata()``) misses no event it causes afterwards
            for ev in events.watch_pool_sync(self.rt.store, request.pool, owner, after,
                                             lambda: not context.is_active(),
                                             lambda: context.send_initial_metadata(WATCHING)):
                if ev is not None:
                    yield _event_message(ev)
        except _KNOWN as err:
            self._fail(context, err)

    def _answer(self, request: pb.MatchAnswerRequest, context, accept: bool) -> pb.MatchAnswer:
        owner = self._guard(context)
        try:
            try:
                body = service.AnswerIn.model_validate({"player_id": request.player_id})
            except ValidationError as err:
                raise from_pydantic(err) from None
            out = service.answer_match(self.rt, request.match_id, body, accept, owner)
        except _KNOWN as err:
            self._fail(context, err)
        return pb.MatchAnswer(match_id=out["match_id"], status=out["status"])

    @_observed
    def AcceptMatch(self, request: pb.MatchAnswerRequest, context) -> pb.MatchAnswer:
        return self._answer(request, context, True)

    @_observed
    def DeclineMatch(self, request: pb.MatchAnswerRequest, context) -> pb.MatchAnswer:
        return self._answer(request, context, False)


def _handlers(svc: MatchmakerService) -> grpc.GenericRpcHandler:
    """The service's method handlers (as the generated ``add_MatchmakerServicer_to_server`` builds them),
    with request deserializers that never raise."""
    desc = pb.DESCRIPTOR.services_by_name["Matchmaker"]
    methods = {}
    for m in desc.methods:
        request_type = getattr(pb, m.input_type.name)
        response_type = getattr(pb, m.output_type.name)
        make = grpc.unary_stream_rpc_method_handler if m.server_streaming else grpc.unary_unary_rpc_method_handler
        methods[m.name] = make(getattr(svc, m.name), request_deserializer=_decoder(request_type),
                               response_serializer=response_type.SerializeToString)
    return grpc.method_handlers_generic_handler(desc.full_name, methods)


def start_grpc(rt: Runtime, host: str, port: int, threads: int = 16,
               streams: int = WATCH_STREAMS) -> tuple[grpc.Server, int]:
    """Start the gRPC server on ``host:port`` (0 = a free port); returns it and the bound port. ``streams``
    watch streams run at once, each on its own thread, besides ``threads`` for the unary calls."""
    max_msg = rt.settings.max_body_bytes
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads + streams, thread_name_prefix="grpc"),
                         options=[("grpc.max_receive_message_length", max_msg)])
    server.add_generic_rpc_handlers((_handlers(MatchmakerService(rt, streams)),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind gRPC to {host}:{port}")
    server.start()
    return server, bound
