"""Process settings (environment, prefix ``MGMATCH_``), typed, validated and read once.

What a process is (store, Redis address, limits, credentials) comes from the environment; what the
matchmaking does (pools, experiments, models) comes from the YAML config named by ``config``
(see :mod:`mgmatch.app.config`). Both are read once at start-up and injected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Everything a service or worker process reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="MGMATCH_", extra="ignore", validate_default=True)

    config: Path | None = Field(default=None, description="YAML service config; None = the built-in 3v3 and 12v12 pools.")
    store: Literal["memory", "redis"] = Field(default="memory", description="Ticket store backend.")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0",
                           description="Redis URL for store=redis: redis://, rediss:// or unix:// for one Redis; "
                                       "redis+cluster://host:port (rediss+cluster:// with TLS) for a Redis Cluster, "
                                       "through any one of its nodes (database 0 only).")
    key_prefix: str = Field(default="mgm", pattern=r"^[A-Za-z0-9_.:-]{1,32}$",
                            description="Prefix of every Redis key (one deployment per prefix).")
    embedded_workers: bool = Field(default=True, description="Run matchmaker/solver/inference inside the API process.")
    # --- security and limits
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                     description="Accepted API keys (comma-separated); empty = no key check.")
    hmac_secret: str | None = Field(default=None, description="Shared secret for HMAC-signed requests.")
    hmac_max_skew_s: float = Field(default=300.0, gt=0)
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="Largest accepted request body.")
    max_solve_players: int = Field(default=100, ge=2, le=1000, description="Largest candidate pool for /v1/solve.")
    max_time_limit_ms: float = Field(default=10_000.0, gt=0, description="Largest time budget a request may ask for.")
    response_reserve_ms: float = Field(default=5.0, ge=0, le=1000,
                                       description="Share of a /v1/solve budget kept for sending the answer: the "
                                                   "solver gets time_limit_ms minus this, so the reply leaves in time.")
    rate_limit_per_s: float = Field(default=0.0, ge=0, description="Requests per second per client; 0 = unlimited.")
    rate_limit_burst: float = Field(default=200.0, ge=1)
    grpc_port: int = Field(default=0, ge=0, le=65535,
                           description="Port of the optional gRPC API beside HTTP (0 = off; needs the grpc extra).")
    solve_threads: int = Field(default=8, ge=1, le=256,
                               description="Threads that run /v1/solve (and gRPC Solve) requests; their own pool, so "
                                           "solves never take the threads /readyz and the store calls use.")
    solve_queue: int = Field(default=64, ge=0, le=100_000,
                             description="Solves that may wait for a solve thread; beyond threads + queue a solve is "
                                         "answered 503 with Retry-After (gRPC UNAVAILABLE).")
    store_timeout_s: float = Field(default=3.0, gt=0, le=60,
                                   description="A ticket request's Redis calls (create, read, cancel, wait estimate) "
                                               "answer 503 with Retry-After when Redis has not answered within "
                                               "this, instead of holding the client's connection (a failover, a "
                                               "stalled node); the client's retry reaches a fresh connection.")
    readyz_timeout_s: float = Field(default=1.0, gt=0, le=30,
                                    description="/readyz answers not ready when the store's ping takes longer.")
    retry_after_s: int = Field(default=1, ge=1, le=3600,
                               description="Retry-After of a 503 (store unreachable, solve pool full).")
    # --- workers
    metrics_port: int = Field(default=9100, ge=0, le=65535, description="Prometheus port of a worker process (0 = none).")
    metrics_host: str = Field(default="0.0.0.0", min_length=1,
                              description="Address a worker's Prometheus port binds (127.0.0.1: loopback only, "
                                          "as on a host network).")
    worker_id: str | None = Field(default=None, description="Consumer name in the stream groups (default host-pid).")
    startup_wait_s: float = Field(default=60.0, ge=0, le=3600,
                                  description="A worker starting while Redis is unreachable waits this long for it "
                                              "(retrying, logged), then exits.")
    max_deliveries: int = Field(default=3, ge=1, le=100,
                                description="A solve job delivered this many times without being acknowledged (it "
                                            "crashed its solver each time) goes to the pool's dead-letter stream on "
                                            "its next takeover; its tickets go back to the queue.")
    max_ticket_crashes: int = Field(default=3, ge=1, le=100,
                                    description="A ticket in this many dead-lettered jobs ends expired with a reason "
                                                "instead of going back to the queue again.")
    # --- match records (results and the match log)
    match_retention_s: float = Field(default=86_400.0, gt=0, le=90 * 86_400,
                                     description="A committed match's record (its players' features at match time, "
                                                 "teams, result) is kept this long for POST "
                                                 "/v1/matches/{id}/result and `mgmatch export-log`.")
    match_max_count: int = Field(default=10_000, ge=1, le=10_000_000,
                                 description="Most match records kept per pool; the oldest go first.")
    sse_heartbeat_s: float = Field(default=15.0, gt=0, le=300,
                                   description="Seconds between comment lines on an idle event stream (SSE), so "
                                               "proxies keep it open.")
    reason_after_ticks: int = Field(default=20, ge=0, le=1_000_000,
                                    description="After this many matchmaker ticks unmatched (every 50 ms), a queued "
                                                "ticket's GET shows unmatched_reason, diagnosed from the pool's rules "
                                                "against the queue (re-checked every as many ticks); 0 = off.")
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str) -> str:
        from redis.connection import parse_url

        scheme = v.partition("://")[0].lower() if "://" in v else ""
        if scheme not in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
            raise ValueError("expected a redis://, rediss://, unix://, redis+cluster:// or rediss+cluster:// URL, "
                             f"got {v[:100]!r}")
        if scheme.endswith("+cluster"):
            opts = parse_url(scheme.removesuffix("+cluster") + v[len(scheme):])
            if not opts.get("host"):
                raise ValueError("a cluster URL names one of its nodes: redis+cluster://host:port")
            if opts.get("db", 0) != 0:
                raise ValueError(f"a Redis Cluster has only database 0, got {opts['db']}")
        return v

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, v):
        if isinstance(v, str):
            return [k.strip() for k in v.split(",") if k.strip()]
        return v


def load_settings(**overrides) -> Settings:
    """Read the environment once; keyword overrides (from CLI flags) win over it."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
