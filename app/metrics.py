"""Every Prometheus metric of the service, declared once: ``mgmatch_<subsystem>_<name>_<unit>``.

Stage latencies, match counts, solver outcomes and objective/gap carry ``pool``, ``method`` and
``arm`` labels (the A/B arm, ``-`` outside an experiment); /v1/solve reports under pool ``solve``.
The names below are the documented contract (docs/reference/metrics.md, generated from this registry, and the
Grafana dashboard).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
NO_ARM = "-"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)

STAGE_SECONDS = Histogram(
    "mgmatch_stage_duration_seconds", "Latency of one stage (encode, inference, solve, end_to_end).",
    ["stage", "pool", "method", "arm"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
MATCHES = Counter("mgmatch_matchmaker_matches_total", "Matches formed.", ["pool", "method", "arm"], registry=REGISTRY)
PLAYERS_MATCHED = Counter("mgmatch_matchmaker_players_matched_total", "Players placed in a match.",
                          ["pool", "method", "arm"], registry=REGISTRY)
CLAIM_CONFLICTS = Counter("mgmatch_matchmaker_claim_conflicts_total",
                          "Claims or commits refused because a ticket changed meanwhile.", ["pool", "stage"],
                          registry=REGISTRY)
TICKET_WAIT = Histogram("mgmatch_tickets_wait_seconds", "Time from ticket creation to its match.",
                        ["pool", "arm"], buckets=_WAIT_BUCKETS, registry=REGISTRY)
TICKET_EVENTS = Counter("mgmatch_tickets_events_total", "Ticket events (created, cancelled, expired, requeued).",
                        ["pool", "event"], registry=REGISTRY)
QUEUE_DEPTH = Gauge("mgmatch_tickets_queue_depth", "Queued tickets per pool (as last seen by the matchmaker).",
                    ["pool"], registry=REGISTRY)
SOLVER_STATUS = Counter("mgmatch_solver_status_total", "Solver outcomes by status.",
                        ["pool", "method", "arm", "status"], registry=REGISTRY)
OBJECTIVE = Histogram("mgmatch_solver_objective", "Engagement objective of returned assignments.",
                      ["pool", "method", "arm"], buckets=(-10, -5, -2, -1, -0.5, 0, 0.5, 1, 2, 5, 10, 20, 50),
                      registry=REGISTRY)
GAP = Histogram("mgmatch_solver_gap_ratio", "Relative gap to the proven bound, when the solver has one.",
                ["pool", "method", "arm"], buckets=(0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
                registry=REGISTRY)
FALLBACKS = Counter("mgmatch_predictor_fallback_total",
                    "Solves that fell back to a model-free method (predictor down, late or failing).",
                    ["pool", "method", "reason"], registry=REGISTRY)
INFERENCE_BATCH = Histogram("mgmatch_inference_batch_size", "Problems per predictor call.",
                            buckets=(1, 2, 4, 8, 16, 32, 64), registry=REGISTRY)
MODEL_INFO = Gauge("mgmatch_model_info", "Loaded model versions (value 1).", ["kind", "name", "version"],
                   registry=REGISTRY)
MODEL_RELOADS = Counter("mgmatch_model_reloads_total", "Model file reloads by result (loaded, rejected, error).",
                        ["kind", "name", "result"], registry=REGISTRY)
HTTP_REQUESTS = Counter("mgmatch_http_requests_total", "HTTP requests by route and status code.",
                        ["route", "code"], registry=REGISTRY)
HTTP_SECONDS = Histogram("mgmatch_http_request_duration_seconds", "HTTP request latency by route.",
                         ["route"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
HTTP_REJECTED = Counter("mgmatch_http_rejected_total", "Requests refused (auth, size, depth, rate, store unavailable, solve pool full).",
                        ["reason"], registry=REGISTRY)
GRPC_REQUESTS = Counter("mgmatch_grpc_requests_total", "gRPC requests by method and status code.",
                        ["method", "code"], registry=REGISTRY)
GRPC_SECONDS = Histogram("mgmatch_grpc_request_duration_seconds", "gRPC request latency by method.",
                         ["method"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
DEAD_LETTERS = Counter("mgmatch_solver_dead_letters_total",
                       "Solve jobs moved to the pool's dead-letter stream (crashed their solver too often, or raised).",
                       ["pool"], registry=REGISTRY)
BACKFILL_EVENTS = Counter("mgmatch_backfills_events_total",
                          "Backfill events (created, filled, cancelled, expired).", ["pool", "event"], registry=REGISTRY)
BACKFILLS_OPEN = Gauge("mgmatch_backfills_open", "Open backfills per pool (as last seen by the matchmaker).", ["pool"],
                       registry=REGISTRY)
BACKFILL_FILL_SECONDS = Histogram("mgmatch_backfills_fill_seconds", "Time from a backfill's creation to its fill.",
                                  ["pool"], buckets=_WAIT_BUCKETS, registry=REGISTRY)
MATCH_RESULTS = Counter("mgmatch_matches_results_total",
                        "Match results posted by game servers, by outcome (accepted, duplicate: the same result "
                        "again, conflict: a different result for a match that has one, unknown: no such match "
                        "or past its retention).", ["pool", "outcome"], registry=REGISTRY)
LEARNING_REFITS = Counter("mgmatch_learning_refits_total",
                          "Refits of a learning pool's model by outcome (live, rejected: held-out results predicted "
                          "worse than by the live model, failed, waiting: too few held-out results; rollback: a live refit's "
                          "matches did worse than an earlier refit's, which went live again).",
                          ["pool", "outcome"], registry=REGISTRY)
LEARNING_REFIT_SECONDS = Histogram("mgmatch_learning_refit_duration_seconds", "Wall time of one refit (fit and check).",
                                   ["pool"], buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600), registry=REGISTRY)
WORKER_UP = Gauge("mgmatch_worker_up", "1 while a worker loop runs.", ["kind"], registry=REGISTRY)

WEBHOOK_DELIVERIES = Counter("mgmatch_webhooks_deliveries_total",
                             "Webhook delivery attempts by outcome (delivered, failed, dead_lettered).",
                             ["webhook", "outcome"], registry=REGISTRY)
WEBHOOK_SECONDS = Histogram("mgmatch_webhooks_delivery_seconds",
                            "Time from an event's commit to its webhook delivery (a 2xx answer), retries included.",
                            ["webhook"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
EVENT_PUSH_SECONDS = Histogram("mgmatch_events_push_seconds",
                               "Time from an event's commit to a step of its push: read (a reader got it from "
                               "the log) or sent (written to an SSE stream; a webhook POST started).",
                               ["transport", "step"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
EVENT_STREAMS = Gauge("mgmatch_events_streams_open", "Event streams open now (transport sse or grpc).",
                      ["transport"], registry=REGISTRY)

DOCUMENTED = (
    "mgmatch_stage_duration_seconds", "mgmatch_matchmaker_matches_total", "mgmatch_matchmaker_players_matched_total",
    "mgmatch_matchmaker_claim_conflicts_total", "mgmatch_tickets_wait_seconds", "mgmatch_tickets_events_total",
    "mgmatch_tickets_queue_depth", "mgmatch_solver_status_total", "mgmatch_solver_objective",
    "mgmatch_solver_gap_ratio", "mgmatch_predictor_fallback_total", "mgmatch_inference_batch_size",
    "mgmatch_model_info", "mgmatch_model_reloads_total", "mgmatch_http_requests_total",
    "mgmatch_http_request_duration_seconds", "mgmatch_http_rejected_total", "mgmatch_worker_up",
    "mgmatch_solver_dead_letters_total", "mgmatch_backfills_events_total", "mgmatch_backfills_open",
    "mgmatch_backfills_fill_seconds", "mgmatch_matches_results_total", "mgmatch_webhooks_deliveries_total",
    "mgmatch_webhooks_delivery_seconds", "mgmatch_events_streams_open", "mgmatch_events_push_seconds", "mgmatch_learning_refits_total",
    "mgmatch_learning_refit_duration_seconds",
)


@contextmanager
def stage(name: str, pool: str, method: str, arm: str | None):
    """Time a block into ``mgmatch_stage_duration_seconds``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        STAGE_SECONDS.labels(name, pool, method, arm or NO_ARM).observe(time.perf_counter() - t0)


def record_solution(pool: str, method: str, arm: str | None, status: str, objective: float | None,
                    gap: float | None) -> None:
    a = arm or NO_ARM
    SOLVER_STATUS.labels(pool, method, a, status).inc()
    if objective is not None:
        OBJECTIVE.labels(pool, method, a).observe(objective)
    if gap is not None:
        GAP.labels(pool, method, a).observe(gap)


def set_model_version(kind: str, name: str, version: str) -> None:
    """Exactly one version per (kind, name) is reported with value 1."""
    for metric in list(MODEL_INFO._metrics):  # noqa: SLF001 - prometheus-client has no public remove-by-prefix
        if metric[0] == kind and metric[1] == name and metric[2] != version:
            MODEL_INFO.remove(*metric)
    MODEL_INFO.labels(kind, name, version).set(1)
