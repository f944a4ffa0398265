"""A chaos run of the production topology: Redis, API, matchmaker and solvers as processes, under fire.

What :func:`run_chaos` does (``mgmatch bench chaos`` and ``tests/app/test_chaos.py`` both call it):

1. starts its own ``redis-server`` on a free loopback port, in a temp dir, with
   ``--appendonly yes --appendfsync always``: every write is fsynced to the append-only file before
   Redis acknowledges it, so a ticket the API acknowledged survives a SIGKILL of Redis;
2. starts ``mgmatch serve --store redis --no-workers``, ``mgmatch worker matchmaker`` and
   ``solvers`` × ``mgmatch worker solver --local-predictor`` against it (their own key prefix,
   no metrics port, no inherited ``MGMATCH_*`` settings);
3. posts ``tickets`` tickets over HTTP at ``rate`` per second (players drawn from the pool's
   preset world with ``seed``; a share of them parties that fill a team), retrying a 503 after its
   ``Retry-After`` and a dropped connection or other 5xx with the same ``Idempotency-Key``; and,
   spread over the ingest, ``backfills`` backfills (a running match missing one or two players,
   its players not in any ticket) that the matchmaker fills from the same queue;
4. meanwhile SIGKILLs a solver or the matchmaker ``kills`` times (each started again shortly
   after), SIGKILLs Redis once and starts it again on the same port and AOF dir, and at
   ``flush_at`` of the tickets pauses the ingest, waits until the tickets accepted so far are
   matched, records them and sends ``FLUSHALL`` (those tickets are legitimately gone: they must
   read 404 afterwards; every ticket accepted later must match);
5. polls every ticket until it is matched (or nothing moves for ``stall_s``), reads every backfill,
   and reports accepted, matched, lost, double-booked players (across new matches and backfills),
   5xx other than 503, 503s, players matched per
   second and the wait p50/p99 (see :func:`run_chaos`);
6. stops every process it started (also on Ctrl-C or an error) and removes its temp dir.

A ticket is *lost* when the API accepted it, Redis kept it (everything acknowledged before the
flush up to the flush, everything after it to the end), and it did not end matched: it reads 404,
expired, or is still queued/proposed when the run gives up. Tickets left queued at the end only
because fewer players than one match remain are *leftover*, not lost.

Over 600 lines: one run owns the processes it starts, the ingest, the kill schedule and the final
accounting; they share the run's state (the tickets accepted before and after the flush, the
processes to restart, the timings) and are read top to bottom as one scenario. The pure checks
over the results live apart, in :mod:`mgmatch.lab.chaos_checks`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from mgmatch.core.errors import InvalidInput

from . import loadgen
from .chaos_checks import check_backfills, check_matches, check_twins, percentile

FINAL = ("matched", "expired", "cancelled", "404")
#: the service's pool for a preset its built-in config lacks: the run writes a config holding it
#: (large lobbies answered by the lobby search; like the built-in pools only parties are a rule: the run's
#: backfills hold random players of the world, whose squads no balance bound would admit)
EXTRA_POOLS: dict[str, dict] = {
    "br-100": {"name": "br-100", "teams": 25, "team_size": 4, "engagement_model": "br-100",
               "rules": [{"kind": "party_together"}],
               "method": "lobby", "time_budget_ms": 100, "max_candidates": 300, "partition": "sequential",
               "dispatch": {"policy": "immediate"}},
    "ffa-32": {"name": "ffa-32", "teams": 32, "team_size": 1, "engagement_model": "ffa-32",
               "rules": [{"kind": "skill_spread", "max_spread": 1500}],
               "method": "lobby", "time_budget_ms": 50, "max_candidates": 64, "partition": "sequential",
               "dispatch": {"policy": "immediate"}},
}


def pool_config(pool: str) -> dict | None:
    """The service config a chaos run of ``pool`` needs, or None when the built-in one has the pool."""
    from mgmatch.app.config import DEFAULT_CONFIG

    if any(p["name"] == pool for p in DEFAULT_CONFIG["pools"]):
        return None
    if pool not in EXTRA_POOLS:
        raise InvalidInput("pool", f"no service pool for preset {pool!r}; known: "
                                   f"{', '.join([p['name'] for p in DEFAULT_CONFIG['pools']] + list(EXTRA_POOLS))}")
    # with the built-in pool its twins go to (twin_pool): a player queued in both is part of the run
    twin = next(p for p in DEFAULT_CONFIG["pools"] if p["name"] == twin_pool(pool))
    return {"pools": [EXTRA_POOLS[pool], twin]}
MAIN = [sys.executable, "-c", "from mgmatch.app.cli import main; main()"]
def redis_persistence(appendfsync: str) -> tuple[str, ...]:
    """The chaos Redis's persistence flags: AOF with this fsync policy, no RDB snapshots."""
    return ("--appendonly", "yes", "--appendfsync", appendfsync, "--save", "")
_WORKER_UP = re.compile(rb"worker \S+ up")


class ChaosError(RuntimeError):
    """The run could not be set up (a process did not start); the message says which and why."""


@dataclass
class ChaosPlan:
    """What a chaos run does. Fractions are of ``tickets`` (the ingest index an event fires at)."""

    tickets: int = 2000
    pool: str = "3v3"
    solvers: int = 2
    kills: int = 3
    rate: float = 100.0                 # offered tickets per second
    seed: int = 0
    party_share: float = 0.05           # share of tickets that are a party filling a whole team
    concurrency: int = 32               # requests in flight at most
    restart_redis: bool = True
    restart_at: float = 0.35
    flush: bool = True
    flush_at: float = 0.6
    redis_down_s: float = 2.0           # how long Redis stays down when restarted
    appendfsync: str = "always"         # "always": nothing acknowledged is lost on a SIGKILL of Redis;
                                        # "everysec" (the deployment default): faster, up to ~1 s lost
    cluster: bool = False               # a Redis Cluster (3 masters + 3 replicas) instead of one Redis; its
                                        # "Redis restart" is a failover of the master serving the pool's slot
    failover: str = "graceful"          # cluster: "graceful" (CLUSTER FAILOVER: nothing acknowledged is lost)
                                        # or "kill" (SIGKILL the master: writes not yet replicated are lost)
    restart_after_s: float = 0.5        # a killed worker is started again this long after
    min_idle_ms: int = 2000             # solvers take over a dead solver's job after this
    stall_s: float = 60.0               # give up waiting for matches after this long without progress
    max_s: float = 1800.0               # the whole run (ingest + waits), start-up excluded
    accept_timeout_s: float = 60.0      # per ticket: keep retrying 503s / dropped connections this long
    start_timeout_s: float = 180.0
    logs_to: Path | None = None         # copy the processes' logs here before the temp dir goes
    backfills: int = 20                 # backfills posted over the ingest (running matches missing 1–2 players)
    twins: int = 50                     # accepted tickets whose first player is at once queued in another
                                        # pool too (at most tickets): the API must refuse (one live
                                        # ticket per player)

    def validate(self) -> None:
        """Raise InvalidInput naming the first bad field."""
        from mgmatch.core.presets import preset_names

        checks = [
            ("tickets", 12 <= self.tickets <= 1_000_000, "must be in 12..1000000"),
            ("pool", self.pool in preset_names(), f"expected one of {', '.join(preset_names())}"),
            ("solvers", 1 <= self.solvers <= 16, "must be in 1..16"),
            ("kills", 0 <= self.kills <= 100, "must be in 0..100"),
            ("rate", 0 < self.rate <= 10_000, "must be in (0, 10000]"),
            ("party_share", 0 <= self.party_share <= 1, "must be in [0, 1]"),
            ("concurrency", 1 <= self.concurrency <= 256, "must be in 1..256"),
            ("restart_at", 0 < self.restart_at < 1, "must be in (0, 1)"),
            ("flush_at", 0 < self.flush_at < 1, "must be in (0, 1)"),
            ("redis_down_s", 0 <= self.redis_down_s <= 60, "must be in [0, 60]"),
            ("appendfsync", self.appendfsync in ("always", "everysec"), "expected always or everysec"),
            ("failover", self.failover in ("graceful", "kill"), "expected graceful or kill"),
            ("restart_after_s", 0 <= self.restart_after_s <= 60, "must be in [0, 60]"),
            ("min_idle_ms", self.min_idle_ms >= 100, "must be ≥ 100"),
            ("stall_s", self.stall_s > 0, "must be > 0"),
            ("max_s", self.max_s > 0, "must be > 0"),
            ("accept_timeout_s", self.accept_timeout_s > 0, "must be > 0"),
            ("backfills", 0 <= self.backfills <= 10_000, "must be in 0..10000"),
            ("twins", 0 <= self.twins <= 10_000, "must be in 0..10000"),
        ]
        for name, ok, msg in checks:
            if not ok:
                raise InvalidInput(name, f"{msg}, got {getattr(self, name)!r}")
        pool_config(self.pool)  # a preset the service has a pool for


# --------------------------------------------------------------------------- tickets


def make_tickets(pool: str, n: int, seed: int, party_share: float = 0.05) -> list[dict]:
    """``n`` ticket bodies for a preset pool: players from the preset's world (features of the pool
    model's dimension), ids ``c<seed>-<k>``; a ``party_share`` of the tickets is a party that fills
    one team (so any remainder of whole matches can still be matched). Deterministic in ``seed``."""
    from mgmatch.core.presets import get_preset
    from mgmatch.core.world import features, sample_population

    preset = get_preset(pool, "pool")
    size = min(preset.world.team_size, 64)
    rng = np.random.default_rng(seed)
    counts = np.where(rng.random(n) < party_share, size, 1) if size > 1 else np.ones(n, dtype=int)
    total = int(counts.sum())
    pop = sample_population(preset.world, total, rng)
    feats = np.round(features(preset.world, pop, rng), 4).tolist()
    skill = np.round(pop.rating, 1).tolist()
    out, j = [], 0
    for c in counts.tolist():
        out.append({"pool": pool, "players": [{"id": f"c{seed}-{j + k}", "features": feats[j + k],
                                               "skill": skill[j + k]} for k in range(c)]})
        j += c
    return out


def make_backfills(pool: str, n: int, seed: int) -> list[dict]:
    """``n`` backfill bodies for a preset pool: running matches ``bf<seed>-<k>`` whose last team misses
    one or two players (the rest full), their players ``bf<seed>-<k>-<i>`` from the preset's world (no
    ticket has them). Deterministic in ``seed``."""
    from mgmatch.core.presets import get_preset
    from mgmatch.core.world import features, sample_population

    preset = get_preset(pool, "pool")
    teams, size = get_preset(pool).teams, min(preset.world.team_size, 64)
    rng = np.random.default_rng([seed, 1])
    out = []
    for k in range(n):
        missing = int(rng.integers(1, min(2, size) + 1))
        counts = [size] * (teams - 1) + [size - missing]
        total = sum(counts)
        pop = sample_population(preset.world, total, rng)
        feats = np.round(features(preset.world, pop, rng), 4).tolist()
        skill = np.round(pop.rating, 1).tolist()
        ids = [f"bf{seed}-{k}-{i}" for i in range(total)]
        team_ids, j = [], 0
        for c in counts:
            team_ids.append(ids[j:j + c])
            j += c
        out.append({"pool": pool, "match_id": f"bf{seed}-{k}",
                    "players": [{"id": pid, "features": feats[i], "skill": skill[i]} for i, pid in enumerate(ids)],
                    "teams": team_ids, "open": [0] * (teams - 1) + [missing]})
    return out


def twin_pool(pool: str) -> str:
    """The other built-in pool of the service's embedded configuration, where twins are posted."""
    return "12v12" if pool == "3v3" else "3v3"


def twin_plan(plan: ChaosPlan) -> dict[int, dict]:
    """Ingest index → a one-player ticket body for ``twin_pool`` (features of that pool's model; the
    player id is filled in with the accepted ticket's first player). Spread evenly over the ingest."""
    n = min(plan.twins, plan.tickets)
    if n <= 0:
        return {}
    other = twin_pool(plan.pool)
    bodies = make_tickets(other, n, plan.seed + 1, party_share=0.0)
    step = plan.tickets / n
    return {min(plan.tickets - 1, int(k * step)): body for k, body in enumerate(bodies)}


def backfill_schedule(plan: ChaosPlan) -> list[int]:
    """The ingest index at which each backfill is posted: spread over 5–90 % of the ingest."""
    n = plan.backfills
    return [max(1, round(plan.tickets * (0.05 + 0.85 * k / max(1, n)))) for k in range(n)]


@dataclass(order=True)
class Event:
    """A chaos event, fired when the ingest reaches ticket index ``at``."""

    at: int
    kind: str          # kill | redis | flush
    target: str = ""


def schedule(plan: ChaosPlan) -> list[Event]:
    """Kills spread over the first part of the ingest (solver-0, matchmaker, solver-1, …), the Redis
    restart at ``restart_at`` and the flush at ``flush_at``."""
    n = plan.tickets
    end = plan.flush_at if plan.flush else 0.9
    events = []
    for k in range(plan.kills):
        frac = 0.1 + (end - 0.15) * k / max(1, plan.kills)
        target = "matchmaker" if k % 2 else f"solver-{(k // 2) % plan.solvers}"
        events.append(Event(max(1, round(n * frac)), "kill", target))
    if plan.restart_redis:
        events.append(Event(max(1, round(n * plan.restart_at)), "redis"))
    if plan.flush:
        events.append(Event(max(2, round(n * plan.flush_at)), "flush"))
    return sorted(events)


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


class RedisServer:
    """A ``redis-server`` on a loopback port with an fsync-always AOF in ``workdir``."""

    def __init__(self, binary: str, workdir: Path, appendfsync: str = "always"):
        self.binary, self.dir, self.appendfsync = binary, workdir / "redis", appendfsync
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
               "--daemonize", "no", "--logfile", str(self.dir / "redis.log"),
               *redis_persistence(self.appendfsync)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=2)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until PING answers (after the AOF is loaded)."""
        import redis

        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise ChaosError(f"redis-server exited: {_tail(self.dir / 'redis.log')}")
            try:
                with self.client() as c:
                    if c.ping():
                        return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ChaosError(f"redis-server did not answer within {timeout_s:g} s")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def flushall(self) -> None:
        with self.client() as c:
            c.flushall()

    def outage(self, down_s: float, event: Callable[[str], None]) -> None:
        """The run's Redis event: SIGKILL, ``down_s`` down, started again on its AOF."""
        self.kill()
        event("SIGKILL redis-server")
        time.sleep(down_s)
        self.start()
        self.wait_ready(120.0)
        event("redis-server back (AOF loaded)")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class ClusterRedis:
    """A Redis Cluster (:class:`~mgmatch.lab.localcluster.LocalCluster`: 3 masters, a replica each) in
    place of :class:`RedisServer`; its Redis event is a failover of the master serving ``key``'s slot
    (the pool's), graceful or by SIGKILL (the killed node is started again as a replica)."""

    def __init__(self, workdir: Path, appendfsync: str, failover: str, key: str):
        from .localcluster import ClusterStartError, LocalCluster

        try:
            self.cluster = LocalCluster(workdir / "cluster", appendfsync=appendfsync)
        except ClusterStartError as err:
            raise ChaosError(str(err)) from None
        self.failover, self.key = failover, key
        self.url = self.cluster.url

    def start(self) -> None:
        from .localcluster import ClusterStartError

        try:
            self.cluster.start()
        except ClusterStartError as err:
            raise ChaosError(str(err)) from None

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        self.cluster.wait_healthy(timeout_s)

    def flushall(self) -> None:
        self.cluster.flushall()

    def outage(self, down_s: float, event: Callable[[str], None]) -> None:
        master = self.cluster.master_of(self.key)
        replica = self.cluster.replica_of(master)
        if self.failover == "graceful":
            event(f"CLUSTER FAILOVER: the pool's master {master.port} hands its slots to replica {replica.port}")
            new = self.cluster.failover(master, timeout_s=60.0)
            event(f"replica {new.port} is the pool's master; {master.port} its replica")
            return
        event(f"SIGKILL the pool's master {master.port} (replica {replica.port})")
        new = self.cluster.kill_master(master)
        event(f"replica {new.port} elected the pool's master")
        time.sleep(down_s)
        self.cluster.restart(master.port)
        event(f"node {master.port} back as a replica")

    def stop(self) -> None:
        self.cluster.stop()


class Procs:
    """The service's processes by name, each logging to ``<workdir>/<name>.log`` (appended on restart)."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.workdir, self.env = workdir, env
        self.args: dict[str, list[str]] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts: Counter[str] = Counter()

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def start(self, name: str, args: list[str] | None = None) -> None:
        if args is not None:
            self.args[name] = args
        with open(self.log(name), "ab") as log:
            self.procs[name] = subprocess.Popen([*MAIN, *self.args[name]], env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        self.starts[name] += 1

    def kill(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def check_alive(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is not None:
            raise ChaosError(f"{name} exited with {p.returncode}: {_tail(self.log(name))}")

    def wait_worker_up(self, name: str, deadline: float) -> None:
        while not _WORKER_UP.search(self.log(name).read_bytes()):
            self.check_alive(name)
            if time.monotonic() > deadline:
                raise ChaosError(f"{name} did not log 'worker … up' in time: {_tail(self.log(name))}")
            time.sleep(0.1)

    def stop_all(self, timeout_s: float = 15.0) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + timeout_s
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def summary(self) -> dict[str, dict]:
        """Per process: starts, tracebacks and ERROR lines logged, the last ERROR lines."""
        out = {}
        for name in self.args:
            text = self.log(name).read_text(errors="replace") if self.log(name).exists() else ""
            errors = [ln for ln in text.splitlines() if " ERROR " in ln or ln.startswith("mgmatch:")]
            out[name] = {"starts": self.starts[name], "running": self.procs[name].poll() is None,
                         "tracebacks": text.count("Traceback (most recent call last)"),
                         "error_lines": len(errors), "last_errors": [e[:300] for e in errors[-3:]]}
        return out


def service_env(redis_url: str, prefix: str) -> dict[str, str]:
    """The children's environment: ours without any MGMATCH_* setting, plus the run's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MGMATCH_")}
    env.update({"MGMATCH_STORE": "redis", "MGMATCH_REDIS_URL": redis_url, "MGMATCH_KEY_PREFIX": prefix,
                "MGMATCH_METRICS_PORT": "0", "MGMATCH_EMBEDDED_WORKERS": "false", "MGMATCH_LOG_LEVEL": "info",
                "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    return env


# --------------------------------------------------------------------------- the run


@dataclass
class Rec:
    """One accepted ticket as the run knows it."""

    idx: int
    id: str
    phase: int                     # 0 = accepted before the flush, 1 = after
    players: list[str]
    created_at: float
    status: str = "queued"
    view: dict | None = None
    matched_t: float | None = None  # match.matched_at if the API exposes it, else when first seen matched
    polled_t: float = 0.0
    accepted_t: float = 0.0


@dataclass
class BfRec:
    """One accepted backfill as the run knows it."""

    k: int
    id: str
    phase: int
    status: str = "open"
    view: dict | None = None


@dataclass
class _Tally:
    codes: Counter = field(default_factory=Counter)
    transport_errors: Counter = field(default_factory=Counter)   # by exception class (ReadTimeout, ConnectError, …)
    transport_error_at: list[float] = field(default_factory=list)   # seconds into the run, one per error
    rejected: list[str] = field(default_factory=list)   # non-retryable refusals of a POST (status: body)
    gave_up: int = 0


class ChaosRun:
    """The asyncio side: ingest, chaos events, polling, the report."""

    def __init__(self, plan: ChaosPlan, bodies: list[bytes], url: str, redis: RedisServer | ClusterRedis, procs: Procs,
                 say: Callable[[str], None], backfills: list[bytes] | None = None):
        self.plan, self.bodies, self.url, self.redis, self.procs, self.say = plan, bodies, url, redis, procs, say
        self.bf_bodies = backfills or []
        self.bfs: list[BfRec] = []
        self.recs: list[Rec] = []
        self.by_player: dict[str, Rec] = {}
        self.tally = _Tally()
        self.phase = 0
        self.events: list[dict] = []
        self.t0 = time.time()
        self.deadline = time.monotonic() + plan.max_s
        self.wait_source: str | None = None
        self.settling = False
        self.settled: dict[str, bool] = {}
        self.flushed_codes: Counter = Counter()
        self.flushed_sample: list[str] = []   # flushed tickets that still answered, as read after the run
        self.transient_404 = 0
        self.ingest_s = 0.0
        self.leftover: list[Rec] = []
        self.pre_leftover: list[Rec] = []
        self._chaos_tasks: list[asyncio.Task] = []
        self.client: loadgen.Client | None = None
        self.twins = twin_plan(plan)
        self.twin_outcomes: list[dict] = []

    def _event(self, what: str) -> None:
        self.events.append({"t": round(time.time() - self.t0, 2), "what": what})
        self.say(what)

    # ---- HTTP
    def _transport_error(self, err: loadgen.TransportError) -> None:
        """A request that got no HTTP answer (a dropped connection, the client's timeout), counted by kind
        and timed, so a report places them among the chaos events."""
        self.tally.transport_errors[err.kind] += 1
        self.tally.transport_error_at.append(round(time.time() - self.t0, 2))

    def _count(self, r: loadgen.Response) -> None:
        self.tally.codes[r.status_code] += 1

    async def _post(self, path: str, body: bytes, headers: dict[str, str], ok: tuple[int, ...],
                    what: str) -> loadgen.Response | None:
        """POST until an answer in ``ok`` (returned), retrying a 503/429 after its Retry-After and a dropped
        connection with backoff; None after another 4xx (kept in ``rejected``, named by ``what``) or when
        the accept timeout would pass (counted as ``gave_up``)."""
        deadline = time.monotonic() + self.plan.accept_timeout_s
        backoff = 0.05
        while True:
            wait = backoff
            try:
                r = await self.client.post(path, content=body, headers=headers)
            except loadgen.TransportError as err:
                self._transport_error(err)
            else:
                self._count(r)
                if r.status_code in ok:
                    return r
                if r.status_code in (429, 503):
                    try:
                        wait = min(2.0, max(0.05, float(r.headers.get("retry-after", backoff))))
                    except ValueError:
                        wait = backoff
                elif r.status_code < 500:
                    self.tally.rejected.append(f"{what}{r.status_code}: {r.text[:200]}")
                    return None
            if time.monotonic() + wait > deadline:
                self.tally.gave_up += 1
                return None
            await asyncio.sleep(wait)
            backoff = min(1.0, backoff * 2)

    async def _accept(self, i: int) -> None:
        headers = {"content-type": "application/json", "idempotency-key": f"chaos-{self.plan.seed}-{i}"}
        r = await self._post("/v1/tickets", self.bodies[i], headers, (200, 201), "")
        if r is not None:
            v = r.json()
            # polled before it counts (a replayed key may answer with a ticket already matched)
            rec = Rec(i, v["id"], self.phase, v["players"], v["created_at"], accepted_t=time.time())
            self.recs.append(rec)
            self.by_player.update((p, rec) for p in rec.players)
            if i in self.twins:
                await self._twin(self.twins[i], rec)

    async def _twin(self, body: dict, rec: Rec) -> None:
        """Queue the ticket's first player in the other pool too, at once; then read the first ticket: an
        accepted twin while it is still live is a player with two live tickets. An accepted twin is
        cancelled (it would wait alone in its pool)."""
        pid = rec.players[0]
        twin = {**body, "players": [{**body["players"][0], "id": pid}]}
        r = await self._post("/v1/tickets", json.dumps(twin).encode(), {"content-type": "application/json"},
                             (201, 409), "twin ")
        if r is None:
            return
        first = None
        try:
            g = await self.client.get(f"/v1/tickets/{rec.id}")
            first = g.json().get("status") if g.status_code == 200 else str(g.status_code)
        except loadgen.TransportError as err:
            self._transport_error(err)
        self.twin_outcomes.append({"player": pid, "first": rec.id, "code": r.status_code, "first_status": first,
                                   "error": r.json().get("error") if r.status_code == 409 else None})
        if r.status_code == 201:
            try:
                await self.client.delete(f"/v1/tickets/{r.json()['id']}")
            except loadgen.TransportError as err:
                self._transport_error(err)

    async def _backfill(self, k: int) -> None:
        """POST backfill ``k`` (a retried backfill may exist twice: the checks key a backfilled match by its
        backfill id)."""
        r = await self._post("/v1/backfills", self.bf_bodies[k], {"content-type": "application/json"}, (201,),
                             "backfill ")
        if r is not None:
            self.bfs.append(BfRec(k, r.json()["id"], self.phase))

    async def _read_backfills(self, phase: int) -> None:
        """Read every backfill of ``phase`` once (after its tickets settled; before the flush for those
        accepted before it): its final view, or 404."""
        sem = asyncio.Semaphore(self.plan.concurrency)

        async def one(b: BfRec) -> None:
            async with sem:
                try:
                    r = await self.client.get(f"/v1/backfills/{b.id}")
                except loadgen.TransportError as err:
                    self._transport_error(err)
                    return
            self._count(r)
            if r.status_code == 404:
                b.status = "404"
            elif r.status_code == 200:
                b.view = r.json()
                b.status = b.view["status"]

        await asyncio.gather(*(one(b) for b in self.bfs if b.phase == phase))

    async def _get(self, rec: Rec, sem: asyncio.Semaphore, into: Counter | None = None) -> None:
        async with sem:
            try:
                r = await self.client.get(f"/v1/tickets/{rec.id}")
            except loadgen.TransportError as err:
                self._transport_error(err)
                return
        self._count(r)
        if into is not None:  # the after-flush check: only the code matters
            into[r.status_code] += 1
            if r.status_code != 404 and len(self.flushed_sample) < 5:
                self.flushed_sample.append(f"{rec.id} (HTTP {r.status_code}, was {rec.status}): {r.text[:300]}")
            return
        rec.polled_t = time.monotonic()
        if r.status_code == 404:
            rec.status = "404"
        elif r.status_code == 200:
            v = r.json()
            rec.status, rec.view = v["status"], v
            if rec.status == "matched" and rec.matched_t is None:
                m = v.get("match") or {}
                at = m.get("matched_at")
                if self.wait_source is None:
                    self.wait_source = "match.matched_at" if at is not None else "first seen matched by the poller (it or a ticket of its match), polled every ~1 s"
                rec.matched_t = float(at) if at is not None else time.time()
                if at is None:  # the match's other tickets were matched then too; their own GET confirms it later
                    for pid in (p for team in m.get("teams") or [] for p in team):
                        other = self.by_player.get(pid)
                        if other is not None and other.matched_t is None:
                            other.matched_t = rec.matched_t

    async def _poll(self, recs: list[Rec], into: Counter | None = None) -> None:
        sem = asyncio.Semaphore(self.plan.concurrency)
        await asyncio.gather(*(self._get(r, sem, into) for r in recs))

    def _pending(self, phase: int) -> list[Rec]:
        return [r for r in self.recs if r.phase == phase and r.status not in FINAL]

    async def _background_poll(self) -> None:
        """Polls the 40 oldest unsettled tickets every second while ingesting (when they were first
        seen matched; a GET that shows a match dates its other tickets too), every 5 s once the API
        is known to report ``match.matched_at``: light next to the ingest it watches."""
        while True:
            if not self.settling:
                now = time.monotonic()
                pending = [r for r in self._pending(self.phase) if now - r.polled_t > 1.0][:40]
                await self._poll(pending)
            await asyncio.sleep(5.0 if self.wait_source == "match.matched_at" else 1.0)

    async def _settle(self, phase: int, label: str) -> bool:
        """Poll until every ticket of ``phase`` is final but a leftover of fewer players than one
        match; False when nothing moved for ``stall_s`` or the run's deadline passed."""
        size = self._match_size()
        self.leftover = []
        started = time.monotonic()
        last_progress, prev = started, None
        while True:
            pending = self._pending(phase)
            queued = [r for r in pending if r.status == "queued" and r.polled_t > started]
            if len(queued) == len(pending) and sum(len(r.players) for r in queued) < size:
                self.leftover = queued
                self.settled[label] = True
                return True
            now = time.monotonic()
            if prev is None or len(pending) < prev:
                last_progress, prev = now, len(pending)
            if now - last_progress > self.plan.stall_s or now > self.deadline:
                self.settled[label] = False
                self._event(f"{label}: gave up with {len(pending)} tickets unmatched "
                            f"({dict(Counter(r.status for r in pending))})")
                return False
            # least recently polled first, oldest first among those (the queue matches about FIFO)
            batch = sorted(pending, key=lambda r: (r.polled_t, r.idx))[:200]
            await self._poll(batch)
            if len(batch) == len(pending) or sum(r.status in FINAL for r in batch) < len(batch) // 2:
                # all read, or the batch was mostly still waiting: give the workers a moment instead of
                # taking their CPU with GETs (the harness must not slow down what it measures)
                await asyncio.sleep(0.5)

    async def _recheck_404(self, phase: int) -> None:
        """Read the tickets that answered 404 once more: a ticket that reappears was reported gone
        while it existed (counted in ``transient_404``); its new status stands."""
        gone = [r for r in self.recs if r.phase == phase and r.status == "404"]
        await self._poll(gone)
        self.transient_404 += sum(r.status != "404" for r in gone)

    def _match_size(self) -> int:
        from mgmatch.core.presets import get_preset

        p = get_preset(self.plan.pool)
        return p.teams * p.team_size

    # ---- chaos
    async def _chaos(self, ev: Event) -> None:
        if ev.kind == "kill":
            self.procs.kill(ev.target)
            self._event(f"SIGKILL {ev.target}")
            await asyncio.sleep(self.plan.restart_after_s)
            self.procs.start(ev.target)
            self._event(f"started {ev.target} again")
        elif ev.kind == "redis":
            await asyncio.to_thread(self.redis.outage, self.plan.redis_down_s, self._event)

    async def _flush(self) -> None:
        self.settling = True
        await asyncio.gather(*self._chaos_tasks)
        before = len(self.recs)
        self._event(f"ingest paused at {before} accepted; waiting for them to match before FLUSHALL")
        await self._settle(0, "before flush")
        await self._recheck_404(0)
        await self._read_backfills(0)
        self.pre_leftover = list(self.leftover)
        await asyncio.to_thread(self.redis.flushall)
        self.phase = 1
        self._event(f"FLUSHALL ({before} tickets accepted before it are gone)")
        self.settling = False

    # ---- main
    async def main(self) -> dict:
        plan = self.plan
        # the lean keep-alive client: httpx would cost the 2 cores about as much as the API it drives
        async with loadgen.Client(self.url, size=plan.concurrency * 2, timeout_s=10.0) as self.client:
            poller = asyncio.create_task(self._background_poll())
            events = schedule(plan)
            bf_at, bf_next = backfill_schedule(plan)[:len(self.bf_bodies)], 0
            sem = asyncio.Semaphore(plan.concurrency)
            inflight: set[asyncio.Task] = set()
            start, base = time.monotonic(), 0
            ingest_started = time.monotonic()
            paused = 0.0
            for i in range(plan.tickets):
                while events and events[0].at <= i:
                    ev = events.pop(0)
                    if ev.kind == "flush":
                        await asyncio.gather(*inflight)
                        p0 = time.monotonic()
                        await self._flush()
                        paused += time.monotonic() - p0
                        start, base = time.monotonic(), i
                    else:
                        self._chaos_tasks.append(asyncio.create_task(self._chaos(ev)))
                while bf_next < len(bf_at) and bf_at[bf_next] <= i:
                    self._chaos_tasks.append(asyncio.create_task(self._backfill(bf_next)))
                    bf_next += 1
                if time.monotonic() > self.deadline:
                    self._event(f"run deadline: ingest stopped at ticket {i}")
                    break
                await asyncio.sleep(max(0.0, start + (i - base) / plan.rate - time.monotonic()))
                await sem.acquire()
                task = asyncio.create_task(self._accept(i))
                inflight.add(task)
                task.add_done_callback(lambda t: (sem.release(), inflight.discard(t)))
            await asyncio.gather(*inflight)
            await asyncio.gather(*self._chaos_tasks)
            self.ingest_s = time.monotonic() - ingest_started - paused
            self._event(f"ingest done: {len(self.recs)} accepted")
            self.settling = True
            poller.cancel()
            await self._settle(self.phase, "end")
            await self._recheck_404(self.phase)
            await self._read_backfills(self.phase)
            if plan.flush:
                flushed = [r for r in self.recs if r.phase == 0]
                await self._poll(flushed, into=self.flushed_codes)
        return self.report()

    def report(self) -> dict:
        plan = self.plan
        pre = [r for r in self.recs if r.phase == 0]
        post = [r for r in self.recs if r.phase == 1]
        leftover_ids = {r.id for r in self.leftover} | {r.id for r in self.pre_leftover}
        matched = [r for r in self.recs if r.status == "matched"]
        lost = [r for r in self.recs if r.status != "matched" and r.id not in leftover_ids]
        from mgmatch.core.presets import get_preset

        p = get_preset(plan.pool)
        check = check_matches([r.view for r in matched if r.view], (p.team_size,) * p.teams)
        bf = check_backfills([b.view for b in self.bfs if b.view], [r.view for r in matched if r.view])
        booked = sorted(set(check.double_booked) | set(bf.double_booked))
        twins = check_twins(self.twin_outcomes)
        waits = [r.matched_t - r.created_at for r in matched if r.matched_t is not None]
        # per side of the flush: first accept → last match (the pause to confirm matches before the flush is left out)
        spans = []
        for phase in (0, 1):
            done = [r.matched_t for r in matched if r.phase == phase and r.matched_t is not None]
            if done:
                spans.append(max(done) - min(r.accepted_t for r in self.recs if r.phase == phase))
        span = sum(spans)
        codes = self.tally.codes
        non503 = sum(n for c, n in codes.items() if c >= 500 and c != 503)
        return {
            "pool": plan.pool, "tickets": plan.tickets, "seed": plan.seed, "solvers": plan.solvers,
            "kills": plan.kills, "rate_offered": plan.rate, "appendfsync": plan.appendfsync,
            "store": "cluster" if plan.cluster else "redis", "failover": plan.failover if plan.cluster else None,
            "accepted": len(self.recs), "accepted_before_flush": len(pre) if plan.flush else None,
            "accepted_after_flush": len(post) if plan.flush else None,
            "not_accepted": plan.tickets - len(self.recs), "gave_up": self.tally.gave_up,
            "rejected": self.tally.rejected[:5],
            "matched": len(matched), "matched_players": check.matched_players, "matches": check.matches,
            "lost": len(lost), "lost_by_status": dict(Counter(r.status for r in lost)),
            "lost_sample": [r.id for r in lost[:5]], "leftover": len(leftover_ids),
            "transient_404": self.transient_404,
            "flushed_not_404": sum(n for c, n in self.flushed_codes.items() if c != 404) if plan.flush else None,
            "flushed_codes": {str(c): n for c, n in sorted(self.flushed_codes.items())},
            "flushed_not_404_sample": self.flushed_sample,
            "double_booked": len(booked), "double_booked_sample": booked[:5],
            "backfills": len(self.bfs), "backfills_by_status": dict(Counter(b.status for b in self.bfs)),
            "backfilled_players": bf.assigned_players, "backfill_double_booked": len(bf.double_booked),
            "backfill_mismatched": len(bf.mismatched),
            "twins": twins.posted, "twins_refused": twins.refused, "twins_after_end": twins.after_end,
            "twin_double_live": len(twins.double_live), "twin_double_live_sample": twins.double_live[:5],
            "twin_wrong_answer": len(twins.wrong_answer),
            "inconsistent_tickets": len(check.inconsistent), "malformed_matches": len(check.malformed),
            "http_5xx_non_503": non503, "http_503": codes.get(503, 0),
            "http_codes": {str(c): n for c, n in sorted(codes.items())},
            "transport_errors": sum(self.tally.transport_errors.values()),
            "transport_error_kinds": dict(self.tally.transport_errors),
            "transport_error_window_s": ([min(self.tally.transport_error_at), max(self.tally.transport_error_at)]
                                         if self.tally.transport_error_at else None),
            "players_per_s": round(check.matched_players / span, 1) if span and span > 0 else None,
            "wait_p50_s": percentile(waits, 50), "wait_p99_s": percentile(waits, 99),
            "wait_source": self.wait_source,
            "ingest_rate": round(len(self.recs) / self.ingest_s, 1) if self.ingest_s > 0 else None,
            "settled": self.settled, "elapsed_s": round(time.time() - self.t0, 1), "events": self.events,
        }


def run_chaos(plan: ChaosPlan, say: Callable[[str], None] | None = None) -> dict:
    """Run one chaos experiment (see the module doc) and return its report.

    Report keys: ``accepted``; ``matched`` (tickets) and ``matched_players``; ``lost`` (accepted,
    kept by Redis, not matched; ``lost_by_status`` says how they ended: ``404``, ``expired``,
    ``queued``, ``proposed``); ``leftover``; ``transient_404`` (tickets that read 404 and existed after
    all); ``flushed_not_404`` (tickets from before the flush that still read); ``double_booked``
    (players in two matches, a backfill counting as its own match), ``backfills`` (accepted),
    ``backfills_by_status`` (filled, open, expired; those from before the flush read just before it),
    ``backfilled_players``; ``twins`` (players queued in a second pool right after their ticket was
    accepted), ``twins_refused`` (409 naming ``players[0].id`` and the first ticket), ``twins_after_end``
    (accepted after the first ended), ``twin_double_live`` (accepted while the first was live: must be
    0), ``twin_wrong_answer`` (a 409 naming neither);
    ``backfill_double_booked``, ``backfill_mismatched`` (filled backfills their tickets do not
    confirm), ``inconsistent_tickets``, ``malformed_matches``; ``http_5xx_non_503``,
    ``http_503``, ``transport_errors`` (``transport_error_kinds`` by exception, ``transport_error_window_s`` the
    first and last, seconds into the run, or None); ``players_per_s``
    (matched players / time from the first accept to the last match, on each side of the flush;
    the pause before it, while the run confirms every match, is left out);
    ``wait_p50_s``/``wait_p99_s`` (ticket ``created_at`` → match time; ``wait_source`` says whether
    that is the API's ``match.matched_at`` or when the poller first saw it matched); ``elapsed_s``;
    ``events``; ``processes`` (starts, tracebacks and ERROR lines per process).

    Raises:
        InvalidInput: a bad plan field.
        ChaosError: redis-server is missing or a process did not start.
    """
    plan.validate()
    say = say or (lambda _msg: None)
    binary = shutil.which("redis-server")
    if binary is None:
        raise ChaosError("redis-server not found on PATH (the chaos run starts its own)")
    if plan.cluster and shutil.which("redis-cli") is None:
        raise ChaosError("redis-cli not found on PATH (the cluster run creates its cluster with it)")
    bodies = [json.dumps(t).encode() for t in make_tickets(plan.pool, plan.tickets, plan.seed, plan.party_share)]
    backfills = [json.dumps(b).encode() for b in make_backfills(plan.pool, plan.backfills, plan.seed)]
    workdir = Path(tempfile.mkdtemp(prefix="mgmatch-chaos-"))
    prefix = f"chaos{uuid.uuid4().hex[:8]}"
    if plan.cluster:
        from mgmatch.app.keys import Keys

        redis: RedisServer | ClusterRedis = ClusterRedis(workdir, plan.appendfsync, plan.failover,
                                                         Keys(prefix).queue(plan.pool))
    else:
        redis = RedisServer(binary, workdir, plan.appendfsync)
    env = service_env(redis.url, prefix)
    extra = pool_config(plan.pool)
    if extra is not None:
        import yaml

        (workdir / "config.yaml").write_text(yaml.safe_dump(extra))
        env["MGMATCH_CONFIG"] = str(workdir / "config.yaml")
    procs = Procs(workdir, env)
    try:
        redis.start()
        redis.wait_ready()
        port = free_port()
        procs.start("api", ["serve", "--host", "127.0.0.1", "--port", str(port), "--store", "redis", "--no-workers"])
        procs.start("matchmaker", ["worker", "matchmaker"])
        for k in range(plan.solvers):
            procs.start(f"solver-{k}", ["worker", "solver", "--local-predictor", "--min-idle-ms", str(plan.min_idle_ms)])
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, procs, time.monotonic() + plan.start_timeout_s)
        say(f"service up at {url} (Redis {redis.url}, AOF fsync {plan.appendfsync}, key prefix {prefix}, "
            f"logs in {workdir})")
        run = ChaosRun(plan, bodies, url, redis, procs, say, backfills)
        report = asyncio.run(run.main())
        report["processes"] = procs.summary()
        return report
    finally:
        procs.stop_all()
        redis.stop()
        if plan.logs_to is not None:
            shutil.copytree(workdir, plan.logs_to, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.aof", "*.rdb"))
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_ready(url: str, procs: Procs, deadline: float) -> None:
    while True:
        procs.check_alive("api")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise ChaosError(f"the API did not become ready in time: {_tail(procs.log('api'))}")
        time.sleep(0.2)
    for name in procs.args:
        if name != "api":
            procs.wait_worker_up(name, deadline)
