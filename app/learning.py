"""Pools that learn from their own results (spec §7; the pool config's ``learning:``).

**Data.** A result posted for a learning pool's match (``POST /v1/matches/{id}/result``, the replay's
``--truth``) reaches :meth:`PoolLearner.on_result` in the process that accepted it; a learner in
another process finds it in the store (:meth:`PoolLearner.scan`). Each result is appended as a spec
§5 line (with ``model_version``, ``policy`` and ``propensity``) to one of two logs in the pool's
``learning.dir``: ``<pool>.holdout.jsonl`` for a fixed share of matches (a seeded draw by arrival order,
``holdout_share``, a seeded draw per result in the order they arrive), never trained on, else ``<pool>.train.jsonl``. Appends are flushed and synced
before they count; a partial last line (a process killed mid-append) is cut at start-up. The store
keeps every result until its retention, so a result not yet appended when a process died is
appended by the next scan.

**Refits** (:meth:`PoolLearner.refit`) run outside the solve path, once ``refit_every`` new results
arrived, or sooner while the pool is young (:meth:`PoolLearner.due`), and the pool has ``min_results``:
the live model goes on training (a warm start: :mod:`mgmatch.pipeline.refit` says why) on the
``seed_log`` plus the training log (its newest ``max_results``), by
:func:`mgmatch.pipeline.refit.refit` (torch, one thread), in the calling thread (the replay, the
``learner`` worker) or in a child process (``serve``: the fit never holds the solving threads' GIL).
The candidate goes live only if its mean squared error on the held-out results is at most the live
model's × (1 + ``tolerance``); otherwise it is logged and counted
(``mgmatch_learning_refits_total{outcome="rejected"}``), as is a refit that fails
(``outcome="failed"``), and the live model stays. A model that goes live is written as
``<sha256>.json`` (temporary file, then rename), its explorers (below) first, then the pointer
``<pool>.live.json`` names it (also renamed into place): a process killed at any point leaves the last
good model live. Its version, on every match formed with it, is the first 12 hex digits of its
SHA-256 (the pinned start model's version is too). Other processes pick up a new pointer within
``interval_s`` (:meth:`PoolLearner.poll`).

**Rollback** (:meth:`PoolLearner.guard`). A candidate's own mistakes show only once it forms
matches (its optimizer goes where it overrates matches), so each version's exploit results are
counted (from the logs at start-up), and a live version whose mean result trails an earlier
refit's by more than two standard errors is replaced by the best such version (the same file and
version again; counted as ``outcome="rollback"``).

**Exploration.** Each match of a learning pool is formed by policy ``explore`` with probability ε,
else ``exploit``; ε starts at ``explore`` and decays toward ``explore_min`` with a half-life of
``explore_half_life`` results (a new pool explores most). An explore match runs method ``explore``
(the model's best of a few rule-aware random matches: :mod:`mgmatch.solvers.explore`). With
``explorers`` N, every refit also trains N models, each a lineage of its own on a bootstrap sample of
the data (jittered off the live model at first); the live model's ``training.explorers`` lists their
files (by SHA-256), they are served as ``<model>#<k>``, and an explore match runs the pool's method
on one of them drawn at random (Thompson sampling: the ensemble's spread stands in for the model's
uncertainty). docs/guides/learning.md says what each costs and bought. The draws are seeded
(``seed``), so a replay is reproducible. The record says ``policy`` and ``propensity`` (the policy's
probability).

**The predictor.** A solution predictor (``mgmatch``, ``bgcn``) is trained on labels of the
starting model; once a refit goes live it predicts the optimum of a model that no longer serves.
A learning pool then solves ``exploit`` matches with its ``fallback_method`` (``surrogate`` by
default: the engagement gradient of the live model in place of the network, no training), and
with no predictor at all it does so from the start. Retraining the predictor per refit (labelling
thousands of pools exactly) costs far more than a refit; the docs say how to retrain it offline
once the model settles.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.solvers.base import method_info

from . import metrics
from .ab import Plan, bucket
from .config import PoolConfig, ServiceConfig
from .models_hub import EngagementModels
from .store import MatchRecord, Store

log = logging.getLogger("mgmatch.learning")

EXPLORE, EXPLOIT = "explore", "exploit"
#: a model version is judged by its exploit results once it has this many (and so is the version it is
#: compared with): see :meth:`PoolLearner.guard`
ROLLBACK_MIN_RESULTS = 100
#: standard errors by which a version's mean result must trail an earlier version's for a rollback
ROLLBACK_SE = 2.0
#: the method of explore matches (:mod:`mgmatch.solvers.explore`)
EXPLORE_METHOD = "explore"


@dataclass
class Decision:
    """What one match of a learning pool runs: the plan, and the policy with its probability."""

    plan: Plan
    policy: str
    propensity: float
    seed: int = 0        # the solver's seed (from the learner's seeded stream: a replay is reproducible)


def version_of(sha256: str) -> str:
    """A model version: the first 12 hex digits of its file's SHA-256."""
    return sha256[:12]


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _repair_log(path: Path, on_row: Callable[[dict[str, Any]], None] | None = None) -> set[str]:
    """Cut a partial last line (a writer killed mid-append) and return the match ids the log holds
    (``on_row`` sees every line's JSON)."""
    if not path.is_file():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        _atomic_write(path, data[:cut])
        log.warning("%s: cut a partial last line (%d bytes)", path, len(data) - cut)
        data = data[:cut]
    ids = set()
    for line in data.splitlines():
        if line.strip():
            row = json.loads(line)
            mid = row.get("match_id")
            if mid is not None:
                ids.add(str(mid))
            if on_row is not None:
                on_row(row)
    return ids


def _lower_priority() -> None:
    """The refit process yields the CPU to the solving process (nice 19; a refit may take longer, a solve may not)."""
    try:
        os.nice(19)
    except OSError:  # not permitted here: the refit runs at the service's priority
        pass


def _fit_job(seed_logs: list[str], train: list[str], holdout: list[str], live_json: dict, kw: dict) -> dict:
    """A refit in a child process: plain data in, plain data out."""
    from mgmatch.pipeline.refit import refit

    explorers = [parse_engagement(m) for m in kw.pop("live_explorers", None) or []]
    res = refit([Path(p) for p in seed_logs], [Path(p) for p in train], [Path(p) for p in holdout],
                parse_engagement(live_json), live_explorers=explorers or None, **kw)
    return res.__dict__


class PoolLearner:
    """The learning state of one pool in one process (see the module doc)."""

    def __init__(self, pool: PoolConfig, engagement: EngagementModels):
        assert pool.learning is not None and pool.engagement_model is not None
        self.pool, self.cfg, self.engagement = pool, pool.learning, engagement
        self.name = pool.name
        self.model_name = pool.engagement_model
        self.dir = Path(self.cfg.dir)
        self.train_log = self.dir / f"{self.name}.train.jsonl"
        self.holdout_log = self.dir / f"{self.name}.holdout.jsonl"
        self.pointer = self.dir / f"{self.name}.live.json"
        self.start_version = engagement.version(self.model_name)
        self.live_version = self.start_version
        self._lock = threading.Lock()
        self._pending: list[MatchRecord] = []
        self._rng = np.random.default_rng(np.random.SeedSequence([self.cfg.seed, 0x6C6561726E]))
        self._pointer_mtime: float | None = None
        #: the live explorers (hub names ``<model>#<k>``) and their models (see the module doc)
        self.explorers: list[str] = []
        self._explorer_models: list[EngagementModel] = []
        self.refits: list[dict[str, Any]] = []  # what each refit did (newest last)
        #: version → [results, sum, sum of squares] of the engagement of its exploit matches
        self.served: dict[str, list[float]] = {}
        self._seen = _repair_log(self.train_log, self._count) | _repair_log(self.holdout_log, self._count)
        self.results = len(self._seen)
        self.results_at_refit = self.results
        self.poll()

    # ------------------------------------------------------------------ serving

    @property
    def changed(self) -> bool:
        """A refit went live: the model serving is not the pool's starting model."""
        return self.live_version != self.start_version

    def explore_share(self) -> float:
        c = self.cfg
        return float(c.explore_min + (c.explore - c.explore_min) * 0.5 ** (self.results / c.explore_half_life))

    def decide(self, plan: Plan) -> Decision | None:
        """The policy of one match (a seeded draw) and the plan it runs; None for a plan that does not
        use the pool's learned model (an A/B arm with another model, or method ``skill``)."""
        if plan.engagement_model != self.model_name or plan.method == "skill":
            return None
        eps = self.explore_share()
        with self._lock:
            u = float(self._rng.random())
            seed = int(self._rng.integers(2**31))
        if u < eps:
            explorers = self.explorers
            if explorers:  # Thompson sampling: the pool's method on one of the explorers, drawn at random
                with self._lock:
                    k = int(self._rng.integers(len(explorers)))
                d = self.exploit(replace(plan, engagement_model=explorers[k]), eps, seed)
                return Decision(d.plan, EXPLORE, eps, seed)
            return Decision(replace(plan, method=EXPLORE_METHOD), EXPLORE, eps, seed)
        return self.exploit(plan, eps, seed)

    def exploit(self, plan: Plan, eps: float, seed: int = 0) -> Decision:
        """The exploit policy's plan: the pool's method, or its fallback once the predictor's model is gone."""
        if method_info(plan.method).needs_predictor and self.changed:
            plan = replace(plan, method=plan.fallback_method)  # the predictor learned the starting model's optima
        return Decision(plan, EXPLOIT, 1.0 - eps, seed)

    def poll(self) -> bool:
        """Serve the model the live pointer names when it changed since the last look; True when it did.
        A pointer or file that does not check out is logged and ignored (the model serving stays)."""
        try:
            mtime = self.pointer.stat().st_mtime
        except FileNotFoundError:
            return False
        if mtime == self._pointer_mtime:
            return False
        self._pointer_mtime = mtime
        try:
            info = json.loads(self.pointer.read_text())
            path = self.dir / info["file"]
            body = path.read_bytes()
            digest = hashlib.sha256(body).hexdigest()
            if digest != info["sha256"]:
                raise ValueError(f"{path}: SHA-256 {digest} does not match the pointer's {info['sha256']}")
            model = self._with_version(parse_engagement(json.loads(body)), digest)
        except (OSError, ValueError, KeyError, InvalidInput) as err:
            log.error("pool %s: live model pointer %s not used: %s", self.name, self.pointer, err)
            return False
        if (model.teams, model.feature_dim) != (self.pool.teams, self.pool.feature_dim or model.feature_dim):
            log.error("pool %s: live model %s does not fit the pool", self.name, info.get("file"))
            return False
        explorers = self._load_explorers(model)
        if explorers is None:
            return False
        self._serve(model, explorers)
        return True

    def _load_explorers(self, model: EngagementModel) -> list[EngagementModel] | None:
        """The explorers a live model names (``training.explorers``: their SHA-256s, files in ``dir``), each
        checked; [] for a model that names none, None (logged) when one is missing or does not check out."""
        shas = (model.training or {}).get("explorers") or []
        out = []
        for sha in shas:
            path = self.dir / f"{sha}.json"
            try:
                body = path.read_bytes()
                if hashlib.sha256(body).hexdigest() != sha:
                    raise ValueError(f"{path}: SHA-256 does not match its name")
                out.append(self._with_version(parse_engagement(json.loads(body)), sha))
            except (OSError, ValueError, InvalidInput) as err:
                log.error("pool %s: explorer %s not used (the live model stays): %s", self.name, path, err)
                return None
        return out

    def _serve(self, model: EngagementModel, explorers: list[EngagementModel]) -> None:
        names = [f"{self.model_name}#{k}" for k in range(len(explorers))]
        for n, m in zip(names, explorers, strict=True):
            self.engagement.replace(n, m)
        self.engagement.replace(self.model_name, model)
        self.explorers, self._explorer_models = names, explorers
        self.live_version = version_of(model.file_sha256 or "")

    def _with_version(self, model: EngagementModel, digest: str) -> EngagementModel:
        model = model.model_copy(update={"name": self.model_name,
                                         "training": {**(model.training or {}), "version": version_of(digest),
                                                      "sha256": version_of(digest)}})
        model.model_post_init(None)
        model._file_sha256 = digest
        return model

    # ------------------------------------------------------------------ data

    def on_result(self, rec: MatchRecord) -> None:
        """A result accepted for one of this pool's matches (the results path calls this)."""
        if rec.result is None:
            return
        with self._lock:
            self._pending.append(rec)

    def scan(self, store: Store) -> int:
        """Queue every result in the store this learner has not appended yet; returns how many."""
        fresh = []
        for rec in store.iter_matches(self.name):
            if rec.result is not None and rec.match_id not in self._seen:
                fresh.append(rec)
        with self._lock:
            self._pending.extend(fresh)
        return len(fresh)

    def flush(self) -> int:
        """Append the queued results to the logs (synced); returns how many were new."""
        with self._lock:
            pending, self._pending = self._pending, []
        lines: dict[Path, list[str]] = {self.train_log: [], self.holdout_log: []}
        added = []
        for rec in pending:
            if rec.match_id in self._seen or rec.match_id in added:
                continue
            # the n-th result of the pool is held out by a seeded draw (match ids carry random claim ids)
            held = bucket(f"{self.cfg.seed}:holdout:{self.results + len(added)}") < self.cfg.holdout_share
            row = rec.log_line()
            self._count(row)
            line = json.dumps(row, allow_nan=False, separators=(",", ":"))
            lines[self.holdout_log if held else self.train_log].append(line)
            added.append(rec.match_id)
        for path, rows in lines.items():
            if rows:
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write("\n".join(rows) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
        self._seen.update(added)
        self.results += len(added)
        return len(added)

    def _count(self, row: dict[str, Any]) -> None:
        version = row.get("model_version")
        if version is not None and row.get("policy") == EXPLOIT:
            st = self.served.setdefault(str(version), [0.0, 0.0, 0.0])
            y = float(row["engagement"])
            st[0], st[1], st[2] = st[0] + 1, st[1] + y, st[2] + y * y

    def _mean_se(self, version: str) -> tuple[float, float]:
        n, s1, s2 = self.served[version]
        mean = s1 / n
        return mean, math.sqrt(max(s2 / n - mean * mean, 0.0) / (n - 1))

    def guard(self) -> str | None:
        """Roll back a live refit whose own matches do worse than an earlier refit's did.

        The held-out check cannot see this: the optimizer goes where the new model overrates matches,
        which no held-out result covers, so its mistakes show only once it forms matches. Once the live
        version has
        :data:`ROLLBACK_MIN_RESULTS` exploit results, it is compared with every earlier version the
        pool refit (its file in ``dir``) that has as many: if one's mean result is higher by more than
        :data:`ROLLBACK_SE` standard errors of the difference, the best such version goes live again
        (logged, counted as ``outcome="rollback"``). Returns the version rolled back to, or None."""
        live = self.live_version
        if self.served.get(live, [0])[0] < ROLLBACK_MIN_RESULTS:
            return None
        m_live, se_live = self._mean_se(live)
        best, best_mean = None, -math.inf
        for version, st in self.served.items():
            if version == live or st[0] < ROLLBACK_MIN_RESULTS:
                continue
            files = [f for f in self.dir.glob(f"{version}*.json") if f.name != self.pointer.name]
            if not files:
                continue  # the starting model, or a version whose file is gone
            m, se = self._mean_se(version)
            if m - m_live > ROLLBACK_SE * math.sqrt(se * se + se_live * se_live) and m > best_mean:
                best, best_mean = files[0], m
        if best is None:
            return None
        back = self.install(json.loads(best.read_bytes()), {"rollback_from": live, "results": self.results})
        metrics.LEARNING_REFITS.labels(self.name, "rollback").inc()
        log.warning("pool %s: model %s rolled back to %s: its matches' mean engagement %.4g against %.4g",
                    self.name, live, back, m_live, best_mean)
        self.refits.append({"results": self.results, "outcome": "rollback", "from": live, "version": back})
        return back

    def due(self) -> bool:
        """A refit is due once the pool has ``min_results`` and then every ``refit_every`` new results, or
        sooner while the pool is young: once its results grew by half since the last refit (at 100, 150,
        225, … with the defaults), so the starting model, fitted on the seed log only, serves briefly."""
        new = self.results - self.results_at_refit
        return self.results >= self.cfg.min_results and new >= min(self.cfg.refit_every, self.results_at_refit // 2)

    # ------------------------------------------------------------------ refits

    def refit(self, executor: ProcessPoolExecutor | None = None) -> str:
        """Fit, check on the held-out results, and go live or not; returns the outcome (``live``,
        ``rejected``, ``waiting``: too few held-out results, ``failed``)."""
        self.results_at_refit = self.results
        holdout_n = sum(1 for _ in open(self.holdout_log)) if self.holdout_log.is_file() else 0
        if holdout_n < self.cfg.min_holdout:
            metrics.LEARNING_REFITS.labels(self.name, "waiting").inc()
            return "waiting"
        live = self.engagement.get(self.model_name)
        kw = {"epochs": self.cfg.epochs, "seed": self.cfg.seed + len(self.refits),
              "max_results": self.cfg.max_results, "name": self.model_name, "explorers": self.cfg.explorers,
              "balance": self.cfg.balance_units}
        seed_logs = [Path(self.cfg.seed_log)] if self.cfg.seed_log is not None else []
        t0 = time.perf_counter()
        try:
            if executor is None:
                from mgmatch.pipeline.refit import refit

                res = refit(seed_logs, [self.train_log], [self.holdout_log], live,
                            live_explorers=self._explorer_models or None, **kw).__dict__
            else:
                res = executor.submit(_fit_job, [str(p) for p in seed_logs], [str(self.train_log)],
                                      [str(self.holdout_log)], live.to_json(),
                                      {**kw, "live_explorers": [m.to_json() for m in self._explorer_models]}).result()
        except Exception as err:  # noqa: BLE001 - a failed refit is logged and counted, never fatal
            metrics.LEARNING_REFITS.labels(self.name, "failed").inc()
            log.error("pool %s: refit failed (the live model stays): %s: %s", self.name, type(err).__name__, err)
            self.refits.append({"results": self.results, "outcome": "failed", "error": str(err)})
            return "failed"
        metrics.LEARNING_REFIT_SECONDS.labels(self.name).observe(time.perf_counter() - t0)
        cand, cur = res["candidate_mse"], res["live_mse"]
        entry = {"results": self.results, "train_matches": res["train_matches"],
                 "holdout_matches": res["holdout_matches"], "candidate_mse": cand, "live_mse": cur,
                 "seconds": round(res["seconds"], 2), "live_version": self.live_version}
        if not (np.isfinite(cand) and cand <= cur * (1.0 + self.cfg.tolerance)):
            metrics.LEARNING_REFITS.labels(self.name, "rejected").inc()
            log.warning("pool %s: refit rejected: held-out MSE %.5g against the live model's %.5g (%d results)",
                        self.name, cand, cur, res["holdout_matches"])
            self.refits.append({**entry, "outcome": "rejected"})
            return "rejected"
        self.install(res["model"], {"candidate_mse": cand, "live_mse": cur, "results": self.results},
                     res.get("explorers"))
        metrics.LEARNING_REFITS.labels(self.name, "live").inc()
        log.info("pool %s: model %s live: held-out MSE %.5g (was %.5g)", self.name, self.live_version, cand, cur)
        self.refits.append({**entry, "outcome": "live", "version": self.live_version})
        return "live"

    def _write_model(self, model_json: dict) -> str:
        """Write a model as ``<sha256>.json`` in ``dir`` (temporary file, then rename); returns its SHA-256."""
        body = (json.dumps(model_json, allow_nan=False) + "\n").encode()
        digest = hashlib.sha256(body).hexdigest()
        _atomic_write(self.dir / f"{digest}.json", body)
        return digest

    def install(self, model_json: dict, info: dict[str, Any], explorers: list[dict] | None = None) -> str:
        """Write a model version (its explorers first, each a file named by its SHA-256, which the model's
        ``training.explorers`` lists) and point the pool at it (each step a rename), then serve it;
        returns its version."""
        if explorers:
            shas = [self._write_model(m) for m in explorers]
            model_json = {**model_json, "training": {**(model_json.get("training") or {}), "explorers": shas}}
        digest = self._write_model(model_json)
        pointer = {"pool": self.name, "file": f"{digest}.json", "sha256": digest, "version": version_of(digest),
                   "previous": self.live_version, "at": time.time(), **info}
        _atomic_write(self.pointer, (json.dumps(pointer, allow_nan=False) + "\n").encode())
        model = self._with_version(parse_engagement(model_json), digest)
        if explorers:  # the explorers just written, as they are (no second read of their files)
            served = [self._with_version(parse_engagement(m), sha) for m, sha in zip(explorers, shas, strict=True)]
        else:  # a rollback: the explorers the model names, read back and checked (none if one is gone, logged)
            served = self._load_explorers(model) or []
        self._serve(model, served)
        self._pointer_mtime = self.pointer.stat().st_mtime
        return self.live_version


def new_refit_executor() -> ProcessPoolExecutor:
    """The child process ``serve`` refits in: spawned (no copy of the service's threads), at the lowest CPU priority."""
    import multiprocessing

    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_lower_priority)


class Learning:
    """The learning pools of one process, and the loop that refits them (service, ``learner`` worker)."""

    def __init__(self, config: ServiceConfig, engagement: EngagementModels):
        self.pools: dict[str, PoolLearner] = {p.name: PoolLearner(p, engagement)
                                              for p in config.pools if p.learning is not None}
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self._executor: ProcessPoolExecutor | None = None

    def __bool__(self) -> bool:
        return bool(self.pools)

    def get(self, pool: str) -> PoolLearner | None:
        return self.pools.get(pool)

    def on_result(self, rec: MatchRecord) -> None:
        learner = self.pools.get(rec.pool)
        if learner is not None:
            learner.on_result(rec)

    def step(self, store: Store | None = None, executor: ProcessPoolExecutor | None = None) -> dict[str, str]:
        """One round: (scan the store,) append new results, refit the pools that are due; returns each
        refit's outcome by pool."""
        out = {}
        for name, learner in self.pools.items():
            if store is not None:
                learner.scan(store)
            learner.flush()
            learner.guard()
            if learner.due():
                out[name] = learner.refit(executor)
        return out

    def poll(self) -> None:
        for learner in self.pools.values():
            learner.poll()

    def run_forever(self, store: Store, refit: bool, in_process: bool = False, scan_always: bool = False) -> None:
        """Every ``interval_s``: with ``refit``, append and refit (a child process fits unless ``in_process``);
        without, only pick up models another process put live. The store is scanned for results at the
        first round, and at every round with ``scan_always`` (a learner that is not the process the
        results are posted to)."""
        interval = min(p.cfg.interval_s for p in self.pools.values())
        if refit and not in_process and self._executor is None:
            self._executor = new_refit_executor()
        metrics.WORKER_UP.labels("learner").set(1)
        try:
            scanned = False
            while not self._stop.is_set():
                try:
                    if refit:
                        self.step(store if scan_always or not scanned else None, self._executor)
                        scanned = True  # at start: results accepted while no learner ran
                    else:
                        self.poll()
                except Exception:  # noqa: BLE001 - the loop outlives a bad round
                    log.exception("learning round failed")
                self._stop.wait(interval)
        finally:
            metrics.WORKER_UP.labels("learner").set(0)

    def start(self, store: Store, refit: bool = True) -> None:
        if not self.pools or self.thread is not None:
            return
        self.thread = threading.Thread(target=self.run_forever, args=(store, refit), name="learner", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
