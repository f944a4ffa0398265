"""Separate worker processes connected by Redis: ``mgmatch worker matchmaker|solver|inference``.

One harness for all of them (Open Match's appmain, arq's worker): a Prometheus port, a heartbeat,
SIGTERM/SIGINT → finish the current job, then exit. Redis going away never kills a worker: at
start-up it waits for Redis (``MGMATCH_STARTUP_WAIT_S``, retrying, logged), and in its loop every
:class:`StoreUnavailable` backs off exponentially (to 2 s; logged once per outage) and carries on.
After Redis lost its data the store creates the consumer groups again and the leader key is taken
afresh, so new tickets match with no process restarted.

- **matchmaker** — per pool, takes the pool's leader key (one loop per pool across replicas),
  reaps, asks the dispatch policy, claims candidates atomically and publishes a job on the pool's
  stream.
- **solver** — reads jobs with the ``solvers`` consumer group; first takes over jobs a dead worker
  left unacknowledged for ``MGMATCH_JOB_MIN_IDLE_MS`` (XAUTOCLAIM), fencing them: the tickets still
  proposed by that job are re-stamped with a new claim id and lease in one Lua call, so the earlier
  runner, if it is slow rather than dead, can no longer commit or release them; solves, commits,
  releases, then XACK+XDEL. A job taken over after ``MGMATCH_MAX_DELIVERIES`` deliveries (it
  crashed its solver each time), or whose run raised, goes to the pool's dead-letter stream
  (``mgmatch_solver_dead_letters_total``); its tickets go back to the queue, and a ticket that was
  in ``MGMATCH_MAX_TICKET_CRASHES`` such jobs ends expired with the reason.
- **webhooks** — delivers ticket events to the configured webhooks (:mod:`mgmatch.app.webhooks`): one
  consumer group per webhook on each pool's events stream, retries with backoff, dead letters.
- **inference** — reads predictor requests (``inference`` group) in batches, runs the ONNX network
  once per batch and pushes each reply to its reply list. Solvers reach it through
  :class:`RemotePredictors`; with no live inference worker, or no reply in time, the solve falls
  back (``mgmatch_predictor_fallback_total``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import threading
import time
import uuid
from typing import Any

import numpy as np

from mgmatch.core.instance import parse_instance

from . import metrics
from .keys import BLOCK_MS, HEARTBEAT_TTL_S, INFERENCE_REPLY_TTL_S
from .matchmaker import MAX_BACKOFF_S, Job, Matchmaker, Outage
from .models_hub import PredictorDown
from .runtime import Runtime
from .store import InferenceStore, RedisStore, StoreUnavailable, wait_reachable

log = logging.getLogger("mgmatch.worker")


class StartupTimeout(RuntimeError):
    """Redis did not answer within the start-up wait."""


class Harness:
    def __init__(self, kind: str, rt: Runtime):
        if not isinstance(rt.store, RedisStore):
            raise RuntimeError("separate workers need the Redis store (MGMATCH_STORE=redis)")
        self.kind, self.rt, self.store = kind, rt, rt.store
        self.worker_id = rt.settings.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.stop = threading.Event()
        self.outage = Outage(f"{kind} {self.worker_id}", logger=log)

    def install_signals(self) -> None:
        def handler(signum, _frame):
            log.info("%s %s: signal %s, draining", self.kind, self.worker_id, signum)
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def wait_for_store(self, wait_s: float | None = None) -> bool:
        """Wait until Redis answers, retrying with back-off and logging every ~10 s; True once it does,
        False if stopped meanwhile. Raises StartupTimeout after ``wait_s`` (default MGMATCH_STARTUP_WAIT_S)."""
        wait_s = self.rt.settings.startup_wait_s if wait_s is None else wait_s
        reached = wait_reachable(self.store.ping, wait_s, f"{self.kind} {self.worker_id}: Redis at "
                                 f"{self.rt.settings.redis_url}", self.stop, MAX_BACKOFF_S)
        if reached is False:
            raise StartupTimeout(f"Redis at {self.rt.settings.redis_url} did not answer within {wait_s:g} s "
                                 f"(MGMATCH_STARTUP_WAIT_S)")
        return bool(reached)

    def _beat(self) -> None:
        outage = Outage(f"{self.kind} {self.worker_id} heartbeat", logger=log)
        while not self.stop.is_set():
            try:
                self.store.heartbeat(self.kind, self.worker_id, HEARTBEAT_TTL_S)
                outage.ok()
            except StoreUnavailable as err:  # Redis away for a moment: keep trying
                self.stop.wait(min(outage.failed(err), HEARTBEAT_TTL_S / 3))
                continue
            except Exception:
                log.exception("heartbeat failed")
            self.stop.wait(HEARTBEAT_TTL_S / 3)

    def step_once(self, step) -> bool:
        """One loop iteration: the step, or a back-off when the store is unavailable. Never raises."""
        try:
            busy = bool(step())
        except StoreUnavailable as err:
            self.stop.wait(self.outage.failed(err))
            return True  # waited already
        except Exception:
            log.exception("%s step failed", self.kind)
            self.stop.wait(0.5)
            return True
        self.outage.ok()
        return busy

    def run(self, step, metrics_port: int | None = None) -> None:
        """Call ``step()`` until stopped; ``step`` returns True when it did work (no idle wait)."""
        if not self.wait_for_store():
            return
        port = self.rt.settings.metrics_port if metrics_port is None else metrics_port
        if port:
            from prometheus_client import start_http_server

            start_http_server(port, addr=self.rt.settings.metrics_host, registry=metrics.REGISTRY)
        threading.Thread(target=self._beat, daemon=True, name="heartbeat").start()
        metrics.WORKER_UP.labels(self.kind).set(1)
        log.info("%s worker %s up", self.kind, self.worker_id)
        try:
            while not self.stop.is_set():
                if not self.step_once(step):
                    self.stop.wait(0.01)
        finally:
            metrics.WORKER_UP.labels(self.kind).set(0)
            try:
                self.store.forget_worker(self.kind, self.worker_id)
            except Exception:  # noqa: BLE001 - the entry expires with its heartbeat anyway
                pass
            log.info("%s worker %s stopped", self.kind, self.worker_id)


# --------------------------------------------------------------------------- matchmaker


#: a pool's leader key lives this long; its holder renews it every LEADER_RENEW_S (a third), and a
#: standby asks for it every LEADER_RETRY_S, instead of three Redis calls per pool on every loop
LEADER_TTL_MS = 3000
LEADER_RENEW_S = 1.0
LEADER_RETRY_S = 0.5


def matchmaker_step(h: Harness, mms: list[Matchmaker], leases: dict[str, tuple[float, bool]]) -> bool:
    """One loop over the pools: tick those this worker leads. ``leases`` (pool → (next check on the
    monotonic clock, leader?)) is the loop's memory of the leader keys. Between renewals a worker may
    believe it still leads for at most LEADER_RENEW_S after its key was lost (a flush, a failover):
    two matchmakers may then tick one pool for that long, which atomic claims make harmless."""
    busy = False
    now = time.monotonic()
    for mm in mms:
        pool = mm.pool.name
        check_at, leader = leases.get(pool, (0.0, False))
        if now >= check_at:
            leader = h.store.acquire_leader(pool, h.worker_id, ttl_ms=LEADER_TTL_MS)
            leases[pool] = (now + (LEADER_RENEW_S if leader else LEADER_RETRY_S), leader)
        if not leader:
            continue
        metrics.WORKER_UP.labels(f"matchmaker-{pool}").set(1)
        busy |= bool(mm.tick())
    if not busy:
        h.stop.wait(0.05)
    return busy


def make_matchmakers(rt: Runtime) -> list[Matchmaker]:
    store: RedisStore = rt.store  # type: ignore[assignment]
    return [Matchmaker(p, store, None, rt.experiments, publish=store.claim_job,
                       backlog=store.jobs_lag, engine=rt.engine, reason_after_ticks=rt.settings.reason_after_ticks)
            for p in rt.config.pools]


# --------------------------------------------------------------------------- solver


def solver_step(h: Harness, min_idle_ms: int) -> bool:
    store, rt = h.store, h.rt
    pools = list(rt.pools)
    for pool in pools:  # recover jobs of crashed solvers first
        taken = store.autoclaim_jobs(pool, h.worker_id, min_idle_ms)
        if not taken:
            continue
        deliveries = store.job_deliveries(pool, [eid for eid, _ in taken])
        for eid, obj in taken:
            n = deliveries.get(eid)
            if n is None:
                continue  # no longer pending (acknowledged meanwhile)
            if n > rt.settings.max_deliveries:
                dead_letter(h, pool, eid, obj, f"delivered {n} times, never acknowledged (it crashed its solver)", n)
                continue
            run_job(h, pool, eid, obj, recovered=True, deliveries=n)
    did = False
    for pool in pools:
        block = BLOCK_MS if len(pools) == 1 else None
        for eid, obj in store.read_jobs(pool, h.worker_id, count=1, block_ms=block):
            run_job(h, pool, eid, obj)
            did = True
    return did


def dead_letter(h: Harness, pool: str, eid: str, obj: Any, reason: str, deliveries: int) -> None:
    """Give up on a job: its tickets back to the queue (a ticket in too many failed jobs ends expired),
    the job to the pool's dead-letter stream, acknowledged and deleted; counted and logged."""
    claim_id = obj.get("claim_id") if isinstance(obj, dict) else None
    tickets = obj.get("tickets") if isinstance(obj, dict) else None
    requeued = expired = 0
    if isinstance(claim_id, str) and isinstance(tickets, list) and tickets:
        limit = h.rt.settings.max_ticket_crashes
        requeued, expired = h.store.release_crashed(
            pool, claim_id, [str(t) for t in tickets], limit, f"in {limit} solve jobs that failed (dead-lettered)")
    h.store.dead_letter_job(pool, eid, obj if isinstance(obj, dict) else {"raw": obj}, reason, deliveries,
                            h.worker_id)
    metrics.DEAD_LETTERS.labels(pool).inc()
    if requeued:
        metrics.TICKET_EVENTS.labels(pool, "requeued").inc(requeued)
    if expired:
        metrics.TICKET_EVENTS.labels(pool, "expired").inc(expired)
    log.error("pool %s: job %s dead-lettered after %d deliveries (%s); %d tickets requeued, %d expired", pool,
              claim_id, deliveries, reason, requeued, expired)


def run_job(h: Harness, pool: str, eid: str, obj: dict, recovered: bool = False, deliveries: int = 1) -> None:
    try:
        job = Job.from_json(obj)
    except Exception as err:  # noqa: BLE001 - a malformed entry can never run
        dead_letter(h, pool, eid, obj, f"malformed job: {type(err).__name__}: {err}", deliveries)
        return
    cfg = h.rt.pools.get(job.pool)
    if cfg is None:  # a pool this solver's config does not know: the leases hand the tickets back
        h.store.ack_job(pool, eid)
        return
    if recovered:
        # fence: the tickets get this run's id, so a slow-but-alive earlier runner can no longer commit them
        fenced = f"{job.claim_id}.{uuid.uuid4().hex[:8]}"
        held = h.store.takeover(pool, job.claim_id, fenced, job.tickets, time.time() + cfg.lease_s)
        log.info("solver %s took over job %s as %s (delivery %d, %d tickets still proposed)", h.worker_id,
                 job.claim_id, fenced, deliveries, held)
        if held == 0:  # committed, or the lease ran out and the tickets went back already
            h.store.ack_job(pool, eid)
            return
        job = dataclasses.replace(job, claim_id=fenced)
    try:
        h.rt.runner.run(job)
    except StoreUnavailable:
        raise  # the job stays pending: taken over once Redis answers, its tickets protected by the lease
    except Exception as err:  # noqa: BLE001 - a job that raises would raise again: never acked silently
        log.exception("pool %s: job %s raised", pool, job.claim_id)
        dead_letter(h, pool, eid, obj, f"run raised {type(err).__name__}: {err}", deliveries)
        return
    h.store.ack_job(pool, eid)


# --------------------------------------------------------------------------- inference


class RemotePredictor:
    """A predictor in another process: requests on a stream, replies on a list (BLPOP)."""

    def __init__(self, store: InferenceStore, name: str, model_of):
        self.store, self.name, self.model_of = store, name, model_of
        self.version = f"{name}@remote"
        self.gate: dict | None = None  # the inference worker's predictor's gate, from its replies

    def predict(self, problems: list, timeout_s: float | None = None) -> list[np.ndarray]:
        deadline = time.time() + (timeout_s if timeout_s is not None else 1.0)
        reqs = [{"id": uuid.uuid4().hex, "predictor": self.name, "model": pr.model_name, "deadline": deadline,
                 "instance": pr.instance.to_json()} for pr in problems]
        out = []
        try:
            self.store.request_inference(reqs)
            for req in reqs:
                left = deadline - time.time()
                if left <= 0:
                    raise PredictorDown("late", f"predictor {self.name}: no reply in time")
                reply = self.store.await_inference(req["id"], left)
                if reply is None:
                    raise PredictorDown("late", f"predictor {self.name}: no reply in time")
                if "error" in reply:
                    raise PredictorDown("error", f"predictor {self.name}: {reply['error']}")
                self.version = reply.get("version", self.version)
                self.gate = reply.get("gate", self.gate)
                out.append(np.asarray(reply["p"], dtype=np.float64))
        except StoreUnavailable as err:
            raise PredictorDown("unavailable", f"predictor {self.name}: {err}") from None
        return out


class RemotePredictors:
    """``get(name)`` for the engine; refuses at once when no inference worker is alive."""

    def __init__(self, store: RedisStore):
        self.store = store
        self._alive_at = 0.0
        self._alive = False
        self._cache: dict[str, RemotePredictor] = {}

    def get(self, name: str) -> RemotePredictor:
        now = time.monotonic()
        if now - self._alive_at > 2.0:
            try:
                self._alive = bool(self.store.workers("inference"))
            except StoreUnavailable:
                self._alive = False
            self._alive_at = now
        if not self._alive:
            raise PredictorDown("unavailable", "no inference worker is alive")
        if name not in self._cache:
            self._cache[name] = RemotePredictor(self.store, name, None)
        return self._cache[name]


class InferenceLoop:
    """The inference worker's step: a batch of requests in, one predictor call per predictor, replies
    out; every ~10 s, requests a dead inference worker left pending are dropped (nobody waits for them)."""

    def __init__(self, h: Harness, max_batch: int = 32):
        self.h, self.max_batch = h, max_batch
        self._swept_at = 0.0

    def __call__(self) -> bool:
        h = self.h
        if time.monotonic() - self._swept_at > 10.0:
            h.store.drop_stale_inference(h.worker_id, min_idle_ms=INFERENCE_REPLY_TTL_S * 1000)
            self._swept_at = time.monotonic()
        entries = h.store.read_inference(h.worker_id, self.max_batch)
        if not entries:
            return False
        h.store.reply_inference(answer(h.rt, [req for _, req in entries]), [eid for eid, _ in entries])
        return True


def answer(rt: Runtime, requests: list[dict]) -> dict[str, dict]:
    """Replies by request id: predictions, or an error (requests past their deadline get none)."""
    now = time.time()
    by_predictor: dict[str, list[tuple[dict, Any]]] = {}
    replies: dict[str, dict] = {}
    for req in requests:
        if req.get("deadline", now + 1) < now:
            continue  # nobody waits for it any more
        try:
            problem = rt.engine.problem(parse_instance(req["instance"], stored=True), req.get("model"))
            by_predictor.setdefault(req["predictor"], []).append((req, problem))
        except Exception as err:  # noqa: BLE001 - the request is bad, the worker is fine
            replies[req["id"]] = {"error": f"bad request: {err}"}
    for name, items in by_predictor.items():
        try:
            pred = rt.predictors.get(name)
            with metrics.stage("inference", "-", name, None):
                out = pred.predict([pr for _, pr in items], timeout_s=5.0)
            for (req, _), p in zip(items, out, strict=True):
                replies[req["id"]] = {"p": np.asarray(p).tolist(), "version": pred.version,
                                      "gate": getattr(pred, "gate", None)}
        except Exception as err:  # noqa: BLE001 - reported to every waiting solver, which falls back
            for req, _ in items:
                replies[req["id"]] = {"error": str(err)}
    return replies


class LearnerLoop:
    """The ``learner`` worker's step: every ``interval_s``, the learning pools' new results from the
    store appended to their logs and the pools that are due refitted (:mod:`mgmatch.app.learning`).
    It solves nothing, so it fits in its own thread. Run one learner per config: it is the only
    writer of the pools' learning folders (a shared volume the solver workers read the live models from)."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.interval_s = min(lp.cfg.interval_s for lp in rt.learning.pools.values())
        self.next_at = 0.0

    def __call__(self) -> bool:
        now = time.monotonic()
        if now < self.next_at:
            return False
        self.next_at = now + self.interval_s
        self.rt.learning.step(store=self.rt.store)
        return False


def run_worker(kind: str, rt: Runtime, min_idle_ms: int = 10_000, metrics_port: int | None = None) -> None:
    h = Harness(kind, rt)
    h.install_signals()
    if kind == "matchmaker":
        mms = make_matchmakers(rt)
        leases: dict[str, tuple[float, bool]] = {}
        h.run(lambda: matchmaker_step(h, mms, leases), metrics_port)
    elif kind == "solver":
        if rt.learning is not None:
            rt.learning.start(rt.store, refit=False)  # serve the models the learner puts live
        h.run(lambda: solver_step(h, min_idle_ms), metrics_port)
    elif kind == "webhooks":
        from .webhooks import Deliverer

        if not rt.config.webhooks:
            raise RuntimeError("the webhooks worker needs webhooks: in the service config")
        d = Deliverer(rt.store, rt.config.webhooks, [p.name for p in rt.config.pools], h.worker_id)
        try:
            h.run(d.step, metrics_port)
        finally:
            d.stop()
    elif kind == "learner":
        if rt.learning is None:
            raise RuntimeError("no pool of the config has `learning:`; the learner has nothing to do")
        h.run(LearnerLoop(rt), metrics_port)
    elif kind == "inference":
        if isinstance(rt.predictors, RemotePredictors):
            raise RuntimeError("the inference worker runs the predictors itself")
        rt.warm()
        rt.predictors.start_watcher()
        h.run(InferenceLoop(h), metrics_port)
    else:
        raise ValueError(f"unknown worker kind {kind!r}")
