"""Separate worker processes connected by Redis: ``mgmatch worker matchmaker|solver|inference``.

One harness for all of them (Open Match's appmain, arq's worker): start-up checks, a Prometheus
port, a heartbeat key, SIGTERM/SIGINT → finish the current job, then exit.

- **matchmaker** — per pool, takes the pool's leader key (one loop per pool across replicas),
  reaps, asks the dispatch policy, claims candidates atomically and publishes a job on the pool's
  stream.
- **solver** — reads jobs with the ``solvers`` consumer group; first takes over jobs a dead worker
  left unacknowledged for ``MGMATCH_JOB_MIN_IDLE_MS`` (XAUTOCLAIM), fencing them: the tickets still
  proposed by that job are re-stamped with a new claim id and lease in one Lua call, so the earlier
  runner, if it is slow rather than dead, can no longer commit or release them; solves, commits,
  releases, then XACK+XDEL.
- **inference** — reads predictor requests (``inference`` group) in batches, runs the ONNX network
  once per batch and pushes each reply to its reply list. Solvers reach it through
  :class:`RemotePredictors`; with no live inference worker, or no reply in time, the solve falls
  back (``mgmatch_predictor_fallback_total``).
"""

from __future__ import annotations

import dataclasses
import json
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
from .keys import BLOCK_MS, HEARTBEAT_TTL_S, INFERENCE_GROUP, INFERENCE_REPLY_TTL_S
from .matchmaker import Job, Matchmaker
from .models_hub import PredictorDown
from .redis_store import RedisStore
from .runtime import Runtime

log = logging.getLogger("mgmatch.worker")
INFERENCE_MAXLEN = 10_000  # requests are latency-bound: an old one is worthless, approximate trimming is fine


class Harness:
    def __init__(self, kind: str, rt: Runtime):
        if not isinstance(rt.store, RedisStore):
            raise RuntimeError("separate workers need the Redis store (MGMATCH_STORE=redis)")
        self.kind, self.rt, self.store = kind, rt, rt.store
        self.worker_id = rt.settings.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.stop = threading.Event()

    def install_signals(self) -> None:
        def handler(signum, _frame):
            log.info("%s %s: signal %s, draining", self.kind, self.worker_id, signum)
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def _beat(self) -> None:
        while not self.stop.is_set():
            try:
                self.store.heartbeat(self.kind, self.worker_id, HEARTBEAT_TTL_S)
            except Exception:  # Redis away for a moment: keep trying
                log.warning("heartbeat failed", exc_info=True)
            self.stop.wait(HEARTBEAT_TTL_S / 3)

    def run(self, step, metrics_port: int | None = None) -> None:
        """Call ``step()`` until stopped; ``step`` returns True when it did work (no idle wait)."""
        if not self.store.ping():
            raise RuntimeError(f"cannot reach Redis at {self.rt.settings.redis_url}")
        port = self.rt.settings.metrics_port if metrics_port is None else metrics_port
        if port:
            from prometheus_client import start_http_server

            start_http_server(port, registry=metrics.REGISTRY)
        threading.Thread(target=self._beat, daemon=True, name="heartbeat").start()
        metrics.WORKER_UP.labels(self.kind).set(1)
        log.info("%s worker %s up", self.kind, self.worker_id)
        try:
            while not self.stop.is_set():
                try:
                    busy = step()
                except Exception:
                    log.exception("%s step failed", self.kind)
                    busy = False
                    self.stop.wait(0.5)
                if not busy:
                    self.stop.wait(0.01)
        finally:
            metrics.WORKER_UP.labels(self.kind).set(0)
            try:
                self.store.r.delete(self.store.keys.heartbeat(self.kind, self.worker_id))
            except Exception:
                pass
            log.info("%s worker %s stopped", self.kind, self.worker_id)


# --------------------------------------------------------------------------- matchmaker


def matchmaker_step(h: Harness, mms: list[Matchmaker]) -> bool:
    busy = False
    for mm in mms:
        pool = mm.pool.name
        if not h.store.acquire_leader(pool, h.worker_id, ttl_ms=3000):
            continue
        metrics.WORKER_UP.labels(f"matchmaker-{pool}").set(1)
        busy |= bool(mm.tick())
    if not busy:
        h.stop.wait(0.05)
    return busy


def make_matchmakers(rt: Runtime) -> list[Matchmaker]:
    store: RedisStore = rt.store  # type: ignore[assignment]
    return [Matchmaker(p, store, None, rt.experiments, publish=store.publish_job) for p in rt.config.pools]


# --------------------------------------------------------------------------- solver


def solver_step(h: Harness, min_idle_ms: int) -> bool:
    store, rt = h.store, h.rt
    pools = list(rt.pools)
    for pool in pools:  # recover jobs of crashed solvers first
        for eid, obj in store.autoclaim_jobs(pool, h.worker_id, min_idle_ms):
            run_job(h, pool, eid, obj, recovered=True)
    did = False
    for pool in pools:
        block = BLOCK_MS if len(pools) == 1 else None
        for eid, obj in store.read_jobs(pool, h.worker_id, count=1, block_ms=block):
            run_job(h, pool, eid, obj)
            did = True
    return did


def run_job(h: Harness, pool: str, eid: str, obj: dict, recovered: bool = False) -> None:
    job = Job.from_json(obj)
    cfg = h.rt.pools.get(job.pool)
    if cfg is None:
        h.store.ack_job(pool, eid)
        return
    if recovered:
        # fence: the tickets get this run's id, so a slow-but-alive earlier runner can no longer commit them
        fenced = f"{job.claim_id}.{uuid.uuid4().hex[:8]}"
        held = h.store.takeover(pool, job.claim_id, fenced, job.tickets, time.time() + cfg.lease_s)
        log.info("solver %s took over job %s as %s (%d tickets still proposed)", h.worker_id, job.claim_id,
                 fenced, held)
        if held == 0:  # committed, or the lease ran out and the tickets went back already
            h.store.ack_job(pool, eid)
            return
        job = dataclasses.replace(job, claim_id=fenced)
    h.rt.runner.run(job)
    h.store.ack_job(pool, eid)


# --------------------------------------------------------------------------- inference


class RemotePredictor:
    """A predictor in another process: requests on a stream, replies on a list (BLPOP)."""

    def __init__(self, store: RedisStore, name: str, model_of):
        self.store, self.name, self.model_of = store, name, model_of
        self.version = f"{name}@remote"

    def predict(self, problems: list, timeout_s: float | None = None) -> list[np.ndarray]:
        r, k = self.store.r, self.store.keys
        deadline = time.time() + (timeout_s if timeout_s is not None else 1.0)
        ids = []
        pipe = r.pipeline(transaction=False)
        for pr in problems:
            rid = uuid.uuid4().hex
            ids.append(rid)
            pipe.xadd(k.inference_requests(), {"req": json.dumps({
                "id": rid, "predictor": self.name, "model": pr.model_name, "deadline": deadline,
                "instance": pr.instance.to_json()})}, maxlen=INFERENCE_MAXLEN, approximate=True)
        pipe.execute()
        out = []
        for rid in ids:
            left = deadline - time.time()
            if left <= 0:
                raise PredictorDown("late", f"predictor {self.name}: no reply in time")
            got = r.blpop([k.inference_reply(rid)], timeout=max(0.01, left))
            if got is None:
                raise PredictorDown("late", f"predictor {self.name}: no reply in time")
            reply = json.loads(got[1])
            if "error" in reply:
                raise PredictorDown("error", f"predictor {self.name}: {reply['error']}")
            self.version = reply.get("version", self.version)
            out.append(np.asarray(reply["p"], dtype=np.float64))
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
            self._alive = bool(self.store.workers("inference"))
            self._alive_at = now
        if not self._alive:
            raise PredictorDown("unavailable", "no inference worker is alive")
        if name not in self._cache:
            self._cache[name] = RemotePredictor(self.store, name, None)
        return self._cache[name]


def inference_step(h: Harness, max_batch: int = 32) -> bool:
    store, rt = h.store, h.rt
    stream = store.keys.inference_requests()
    store.ensure_group(stream, INFERENCE_GROUP)
    resp = store.r.xreadgroup(INFERENCE_GROUP, h.worker_id, {stream: ">"}, count=max_batch, block=BLOCK_MS)
    entries = [(eid, json.loads(f["req"])) for _, es in (resp or []) for eid, f in es if f]
    if not entries:
        return False
    now = time.time()
    by_predictor: dict[str, list[tuple[dict, Any]]] = {}
    replies: dict[str, dict] = {}
    for _, req in entries:
        if req.get("deadline", now + 1) < now:
            continue  # nobody waits for it any more
        try:
            problem = rt.engine.problem(parse_instance(req["instance"]), req.get("model"))
            by_predictor.setdefault(req["predictor"], []).append((req, problem))
        except Exception as err:
            replies[req["id"]] = {"error": f"bad request: {err}"}
    for name, items in by_predictor.items():
        try:
            pred = rt.predictors.get(name)
            with metrics.stage("inference", "-", name, None):
                out = pred.predict([pr for _, pr in items], timeout_s=5.0)
            for (req, _), p in zip(items, out, strict=True):
                replies[req["id"]] = {"p": np.asarray(p).tolist(), "version": pred.version}
        except Exception as err:
            for req, _ in items:
                replies[req["id"]] = {"error": str(err)}
    pipe = store.r.pipeline(transaction=False)
    for rid, reply in replies.items():
        key = store.keys.inference_reply(rid)
        pipe.rpush(key, json.dumps(reply))
        pipe.expire(key, INFERENCE_REPLY_TTL_S)
    ids = [eid for eid, _ in entries]
    pipe.xack(stream, INFERENCE_GROUP, *ids)
    pipe.xdel(stream, *ids)
    pipe.execute()
    return True


def run_worker(kind: str, rt: Runtime, min_idle_ms: int = 10_000, metrics_port: int | None = None) -> None:
    h = Harness(kind, rt)
    h.install_signals()
    if kind == "matchmaker":
        mms = make_matchmakers(rt)
        h.run(lambda: matchmaker_step(h, mms), metrics_port)
    elif kind == "solver":
        h.run(lambda: solver_step(h, min_idle_ms), metrics_port)
    elif kind == "inference":
        if isinstance(rt.predictors, RemotePredictors):
            raise RuntimeError("the inference worker runs the predictors itself")
        rt.warm()
        rt.predictors.start_watcher()
        h.run(lambda: inference_step(h), metrics_port)
    else:
        raise ValueError(f"unknown worker kind {kind!r}")
