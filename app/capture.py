"""Opt-in capture of solved candidate pools as spec instance files (``mgmatch-instance/v1``, §1).

A studio that wants to train its own network needs its *real* pools, labelled exactly
(``mgmatch label --instances DIR --engagement ENG.json``). With ``capture`` in the service config
(globally, or per pool), the engine hands every solved pool to :meth:`Capture.offer` after the
solve; a seeded draw keeps ``sample_rate`` of them, and a writer thread writes each kept pool as
one instance file. Nothing of it runs inside a solve's budget: ``offer`` is a random draw and a
non-blocking put on a bounded queue (a full queue drops the capture and counts it).

Privacy: player ids (and the premade-group ids in ``party``, and ids named inside rules) are
replaced by ``HMAC-SHA-256(salt, id)`` (20 hex digits, prefix ``p-`` / ``g-``): the same player
gets the same pseudonym in every capture made with the same salt (labels and histories stay
joinable) and the id cannot be recovered without the salt. Only the spec's player fields are kept
(``features``, ``skill``, ``roles``, ``party``, ``pings``, ``waited_s``); extra fields a client added
are dropped, since they may carry identifiers.

Bounds: at most ``max_files`` files and ``max_bytes`` bytes per capture folder (counting the
files already there at start-up); past either, captures are dropped (``limit``). A write that
fails (disk full, permissions) is logged once a minute and counted (``error``); it never fails
the solve. Metric: ``mgmatch_capture_instances_total{pool, result}`` with result ``written``,
``queue_full``, ``limit`` or ``error``.

Files: ``<dir>/<pool>/<unix ms>-<seq>.json``, written to a temporary name and renamed, so a
reader never sees half a file. Each carries an optional ``capture`` record (pool, time, the
method, status and objective the service answered with) that instance readers ignore.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import queue
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import Counter

from mgmatch.core.instance import Instance

from . import metrics
from .config import CaptureConfig, ServiceConfig

log = logging.getLogger("mgmatch.capture")

CAPTURES = Counter("mgmatch_capture_instances_total",
                   "Solved pools offered to capture after sampling, by result (written, queue_full, limit, error).",
                   ["pool", "result"], registry=metrics.REGISTRY)

#: player fields of spec §1 that a capture keeps
_PLAYER_FIELDS = ("skill", "roles", "pings", "waited_s")


def pseudonym(salt: str, value: str, prefix: str = "p-") -> str:
    """Keyed, stable, one-way pseudonym of an id: ``prefix`` + 20 hex digits of HMAC-SHA-256(salt, value)."""
    return prefix + hmac.new(salt.encode(), value.encode(), hashlib.sha256).hexdigest()[:20]


def _map_condition(cond: Any, ids: dict[str, str]) -> Any:
    if isinstance(cond, list) and len(cond) == 2 and isinstance(cond[0], str):
        return [ids.get(cond[0], cond[0]), cond[1]]
    if isinstance(cond, dict):
        return {k: (_map_condition(v, ids) if k == "not" else [_map_condition(c, ids) for c in v]
                    if k in ("all", "any") and isinstance(v, list) else v) for k, v in cond.items()}
    return cond


def _map_rule(rule: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A rule's JSON with every player id it names replaced (linear/if terms, conditions, player lists)."""
    out = dict(rule)
    if isinstance(out.get("terms"), list):
        out["terms"] = [[ids.get(t[0], t[0]), *t[1:]] if isinstance(t, list) and t else t for t in out["terms"]]
    if isinstance(out.get("then"), dict):
        out["then"] = _map_rule(out["then"], ids)
    if "when" in out:
        out["when"] = _map_condition(out["when"], ids)
    if isinstance(out.get("players"), list):
        out["players"] = [ids.get(p, p) for p in out["players"]]
    return out


def pseudonymized(instance: Instance, salt: str) -> dict[str, Any]:
    """The instance as spec JSON with ids replaced by :func:`pseudonym` and only spec player fields kept."""
    ids = {p.id: pseudonym(salt, p.id) for p in instance.players}
    obj = instance.to_json()
    players = []
    for p, src in zip(obj["players"], instance.players, strict=True):
        q: dict[str, Any] = {"id": ids[src.id], "features": p["features"]}
        for k in _PLAYER_FIELDS:
            if k in p:
                q[k] = p[k]
        if src.party is not None:
            q["party"] = pseudonym(salt, src.party, "g-")
        players.append(q)
    obj["players"] = players
    obj["rules"] = [_map_rule(r, ids) for r in obj["rules"]]
    return obj


@dataclass
class _Item:
    pool: str
    instance: Instance
    answer: dict[str, Any]
    at: float


class Recorder:
    """One capture folder: a seeded sampler, a bounded queue, a writer thread, file and byte bounds."""

    def __init__(self, config: CaptureConfig):
        self.config = config
        self.dir = Path(config.dir)
        self._rngs: dict[str, random.Random] = {}
        self._lock = threading.Lock()
        self._q: queue.Queue[_Item | None] = queue.Queue(maxsize=config.queue)
        self._seq = 0
        self._last_error = -1e9
        self.files, self.bytes = self._existing()
        self._thread = threading.Thread(target=self._run, name=f"capture-{self.dir.name}", daemon=True)
        self._thread.start()

    def _existing(self) -> tuple[int, int]:
        files = size = 0
        if self.dir.is_dir():
            for f in self.dir.glob("*/*.json"):
                try:
                    size += f.stat().st_size
                    files += 1
                except OSError:
                    continue
        return files, size

    def sampled(self, pool: str) -> bool:
        """The seeded draw: True for ``sample_rate`` of the calls (its own stream per pool)."""
        rate = self.config.sample_rate
        if rate >= 1.0:
            return True
        if rate <= 0.0:
            return False
        with self._lock:
            rng = self._rngs.get(pool)
            if rng is None:
                rng = self._rngs[pool] = random.Random(f"{self.config.seed}:{pool}")
            return rng.random() < rate

    def offer(self, pool: str, instance: Instance, answer: dict[str, Any]) -> bool:
        """Queue a solved pool (never blocks); returns whether it was queued."""
        if not self.sampled(pool):
            return False
        try:
            self._q.put_nowait(_Item(pool, instance, answer, time.time()))
        except queue.Full:
            CAPTURES.labels(pool, "queue_full").inc()
            return False
        return True

    def _run(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                self._write(item)
            finally:
                self._q.task_done()

    def _write(self, item: _Item) -> None:
        cfg = self.config
        if self.files >= cfg.max_files or self.bytes >= cfg.max_bytes:
            CAPTURES.labels(item.pool, "limit").inc()
            return
        try:
            obj = pseudonymized(item.instance, cfg.salt)
            obj["capture"] = {"pool": item.pool, "time": round(item.at, 3), **item.answer}
            data = json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
            if self.bytes + len(data) > cfg.max_bytes:
                CAPTURES.labels(item.pool, "limit").inc()
                return
            folder = self.dir / item.pool
            folder.mkdir(parents=True, exist_ok=True)
            self._seq += 1
            name = f"{int(item.at * 1e3)}-{os.getpid()}-{self._seq:06d}.json"
            tmp = folder / f".{name}.tmp"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, folder / name)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except (OSError, ValueError) as err:  # disk full, permissions, a non-finite number: the solve stands
            CAPTURES.labels(item.pool, "error").inc()
            now = time.monotonic()
            if now - self._last_error > 60:
                self._last_error = now
                log.warning("capture to %s failed (captures are dropped, solves go on): %s", self.dir, err)
            return
        self.files += 1
        self.bytes += len(data)
        CAPTURES.labels(item.pool, "written").inc()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued capture is written or dropped; returns False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self._q.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def stop(self) -> None:
        try:
            self._q.put_nowait(None)
        except queue.Full:
            pass


class Capture:
    """Pool name → its recorder (pools sharing a capture folder share one), from the service config."""

    def __init__(self, config: ServiceConfig):
        by_dir: dict[Path, Recorder] = {}
        self._for: dict[str, Recorder] = {}
        names = [p.name for p in config.pools] + ["solve"]
        for name in names:
            cfg = config.capture_for(name)
            if cfg is None:
                continue
            key = Path(cfg.dir).resolve()
            if key not in by_dir:
                by_dir[key] = Recorder(cfg)
            self._for[name] = by_dir[key]
        self.recorders = list(by_dir.values())

    @staticmethod
    def from_config(config: ServiceConfig) -> Capture | None:
        """A capture when the config asks for one (globally or on a pool), else None."""
        if config.capture is None and all(p.capture is None for p in config.pools):
            return None
        return Capture(config)

    def offer(self, pool: str, instance: Instance, solution: Any) -> bool:
        """After a solve: maybe queue its pool for writing. Never raises, never blocks."""
        rec = self._for.get(pool)
        if rec is None:
            return False
        try:
            answer = {k: getattr(solution, k, None) for k in ("method", "status", "objective")}
            return rec.offer(pool, instance, answer)
        except Exception:  # a capture never fails a solve
            log.exception("capture of a %s solve failed", pool)
            return False

    def flush(self, timeout_s: float = 10.0) -> bool:
        return all(r.flush(timeout_s) for r in self.recorders)

    def stop(self) -> None:
        for r in self.recorders:
            r.stop()
