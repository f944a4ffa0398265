"""Engagement models and solution predictors for the service: pinned files, hot reload, batching.

- Engagement models: the shipped presets (package data) or JSON files named in the config, each
  with a pinned SHA-256.
- Predictors (ONNX, for ``mgmatch``/``bgcn``): files named in the config, pinned by the config's
  SHA-256 or, when the config pins none, by the exporter's sidecar ``<model>.json`` (its
  ``sha256``); else the shipped predictor of that name (``mgmatch.models.runtime``). A file is
  re-checked every ``models.reload_interval_s``: a new export whose digest matches its pin is
  swapped in without a restart (its version appears on responses and on ``mgmatch_model_info``);
  one that does not match is refused and the old version keeps serving. Both the ``.onnx`` and its
  sidecar are watched (the sidecar carries the pin and the measured gate), so a refused export is
  checked again when either file changes afterwards, in whichever order they are copied; a
  half-written file is refused and picked up once complete. Each refused state is logged once.
- :class:`BatchingPredictor` gathers concurrent ``predict`` calls into one call of the network
  (up to ``max_batch`` problems or ``max_wait_ms``), which is what a GPU wants.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.core.engagement import EngagementModel, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.files import read_text, sha256_file

from . import metrics
from .config import ModelFile, ModelsConfig

log = logging.getLogger("mgmatch.models")


class PredictorDown(RuntimeError):
    """The predictor cannot answer (not loadable, failing, or late). ``reason`` labels the metric."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


# --------------------------------------------------------------------------- engagement models


class EngagementModels:
    """Name → engagement model: config files (pinned) first, then the shipped presets."""

    def __init__(self, config: ModelsConfig):
        self._files = {m.name: m for m in config.engagement}
        self._cache: dict[str, EngagementModel] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> EngagementModel:
        with self._lock:
            if name in self._cache:
                return self._cache[name]
        if name in self._files:
            model = _load_engagement_file(self._files[name])
        else:
            from mgmatch.core.presets import load_model

            model = load_model(name)
        with self._lock:
            self._cache[name] = model
        metrics.set_model_version("engagement", name, _engagement_version(model, name))
        return model

    def version(self, name: str) -> str:
        return _engagement_version(self.get(name), name)

    def replace(self, name: str, model: EngagementModel) -> None:
        """Serve ``model`` as ``name`` from now on (a learning pool's refit that went live,
        :mod:`mgmatch.app.learning`); its version is its ``training.version``."""
        with self._lock:
            self._cache[name] = model
        metrics.set_model_version("engagement", name, _engagement_version(model, name))


def _engagement_version(model: EngagementModel, name: str) -> str:
    tr = model.training or {}
    return str(tr.get("version") or tr.get("sha256") or model.name or name)


def entry_field(entry: ModelFile, section: str) -> str:
    """The config path of a model file entry: the pool field that named it, else ``models.<section>[name]``."""
    return entry.where or f"models.{section}[{entry.name}]"


def _load_engagement_file(entry: ModelFile) -> EngagementModel:
    where = entry_field(entry, "engagement")
    path = Path(entry.path)
    if path.suffix != ".json":
        raise InvalidInput(f"{where}.path", "engagement models load from JSON files only")
    if entry.sha256 is None:
        raise InvalidInput(f"{where}.sha256", "an engagement model file needs a pinned sha256")
    if not path.is_file():
        raise InvalidInput(f"{where}.path", f"no such file {path}")
    digest = sha256_file(path)
    if digest != entry.sha256:
        raise InvalidInput(f"{where}.sha256", f"{path}: file digest {digest} does not match the pin {entry.sha256}")
    try:
        obj = json.loads(read_text(path))
    except (UnicodeDecodeError, ValueError) as err:
        raise InvalidInput(f"{where}.path", f"{path}: not valid JSON: {err}") from None
    model = parse_engagement(obj, str(path))
    model = model.model_copy(update={"name": entry.name,
                                     "training": {**(model.training or {}), "sha256": digest[:12]}})
    model.model_post_init(None)
    model._file_sha256 = digest  # what a predictor trained on this model's labels pins
    return model


# --------------------------------------------------------------------------- predictors


def pin_for(entry: ModelFile) -> str | None:
    """The SHA-256 an entry is pinned to: its own, or the one its JSON sidecar records (None: neither)."""
    if entry.sha256 is not None:
        return entry.sha256
    sidecar = Path(entry.path).with_suffix(".json")
    try:
        return json.loads(read_text(sidecar)).get("sha256")
    except (OSError, ValueError):
        return None


def _load_onnx(entry: ModelFile) -> tuple[Any, str]:
    """Load a pinned ONNX predictor; returns (predictor, digest)."""
    path = Path(entry.path)
    if path.suffix != ".onnx":
        raise PredictorDown("rejected", f"{path}: predictors load from .onnx files only")
    pin = pin_for(entry)
    if pin is None:
        raise PredictorDown("rejected", f"{path}: no pinned sha256 (config or sidecar {path.with_suffix('.json').name})")
    if not path.exists():
        raise PredictorDown("unavailable", f"{path}: no such file")
    digest = sha256_file(path)
    if digest != pin:
        raise PredictorDown("rejected", f"{path}: digest {digest[:12]}… does not match the pin {pin[:12]}…")
    try:
        from mgmatch.models.runtime import OnnxPredictor
    except ImportError as err:  # the runtime is not installed in this image
        raise PredictorDown("unavailable", f"predictor runtime unavailable: {err}") from None
    try:
        return OnnxPredictor(str(path), sha256=pin), digest
    except Exception as err:  # bad sidecar, feature version, onnxruntime's own errors (InvalidProtobuf, …)
        raise PredictorDown("rejected", f"{path}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None


def verify_pin(entry: ModelFile, section: str) -> str:
    """Check that a pinned file exists and matches its pin; returns the digest.

    Raises:
        InvalidInput: naming the entry's field (``pools[k].predictor.path`` / ``.sha256``).
    """
    where = entry_field(entry, section)
    path = Path(entry.path)
    if not path.is_file():
        raise InvalidInput(f"{where}.path", f"no such file {path}")
    pin = pin_for(entry)
    if pin is None:
        raise InvalidInput(f"{where}.sha256", f"{path}: no pinned sha256 (config or sidecar)")
    digest = sha256_file(path)
    if digest != pin:
        raise InvalidInput(f"{where}.sha256", f"{path}: file digest {digest} does not match the pin {pin}")
    return digest


class BatchingPredictor:
    """Wraps a predictor; concurrent ``predict`` calls are served by one batched call.

    ``inner`` can be swapped at any time (hot reload); a batch in flight finishes on the old one.
    """

    def __init__(self, inner: Any, name: str, max_batch: int = 32, max_wait_ms: float = 2.0):
        self.inner = inner
        self.name = name
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1e3
        self._q: queue.Queue[tuple[list, Future]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"predictor-{name}", daemon=True)
        self._thread.start()

    @property
    def version(self) -> str:
        return str(getattr(self.inner, "version", self.name))

    @property
    def gate(self) -> dict | None:
        """The inner predictor's measured gate (its sidecar's ``gate``), None when it has none."""
        return getattr(self.inner, "gate", None)

    def problem_mismatch(self, problem: Any) -> tuple[str, str] | None:
        """The inner predictor's ``(field, message)`` saying why it cannot score ``problem``
        (:meth:`mgmatch.models.runtime.OnnxPredictor.problem_mismatch`); None when it can, or when it
        has no such check."""
        check = getattr(self.inner, "problem_mismatch", None)
        return check(problem) if callable(check) else None

    def predict(self, problems: list, timeout_s: float | None = None) -> list[np.ndarray]:
        fut: Future = Future()
        self._q.put((problems, fut))
        try:
            return fut.result(timeout=timeout_s)
        except FutureTimeout:
            fut.cancel()
            raise PredictorDown("late", f"predictor {self.name} did not answer within {timeout_s:.3f}s") from None

    def _run(self) -> None:
        while True:
            first = self._q.get()
            batch = [first]
            n = len(first[0])
            deadline = time.perf_counter() + self.max_wait_s
            while n < self.max_batch:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    item = self._q.get(timeout=left)
                except queue.Empty:
                    break
                batch.append(item)
                n += len(item[0])
            live = [(probs, fut) for probs, fut in batch if fut.set_running_or_notify_cancel()]
            if not live:
                continue
            problems = [p for probs, _ in live for p in probs]
            metrics.INFERENCE_BATCH.observe(len(problems))
            try:
                out = self.inner.predict(problems)
            except Exception as err:  # the network failed: every caller falls back
                for _, fut in live:
                    fut.set_exception(PredictorDown("error", f"predictor {self.name} failed: {err}"))
                continue
            k = 0
            for probs, fut in live:
                fut.set_result(out[k:k + len(probs)])
                k += len(probs)


#: A file changed less than this long before it was stamped may change again without its stamp
#: changing (coarse file-system clocks, an in-place rewrite of the same size): its content is
#: re-hashed at the next checks until the stamp has aged past this window.
_RACY_NS = 2_000_000_000

_Stamp = tuple[int, int, int, int] | None


def _watch_paths(entry: ModelFile) -> tuple[Path, Path]:
    """The files that determine a predictor entry's pin and load: the ``.onnx`` and its sidecar."""
    path = Path(entry.path)
    return path, path.with_suffix(".json")


def _stat_stamp(path: Path) -> _Stamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _snapshot(entry: ModelFile) -> tuple[tuple[_Stamp, ...], bool]:
    """The watched files' stamps, and whether they are settled (none changed within ``_RACY_NS``)."""
    now = time.time_ns()
    stamps = tuple(_stat_stamp(p) for p in _watch_paths(entry))
    settled = all(s is None or now - max(s[2], s[3]) > _RACY_NS for s in stamps)
    return stamps, settled


def _content(entry: ModelFile) -> tuple[str | None, ...]:
    """SHA-256 of each watched file (None: missing or unreadable): the state a check is about."""
    out: list[str | None] = []
    for p in _watch_paths(entry):
        try:
            out.append(sha256_file(p))
        except OSError:
            out.append(None)
    return tuple(out)


@dataclass
class _Watched:
    """A loaded predictor file and its sidecar, as the reload check last saw them."""

    entry: ModelFile
    stamp: tuple[_Stamp, ...]  # the watched files' stamps at the last check
    settled: bool  # False: the stamp may miss a change, re-hash at the next check
    checked: tuple[str | None, ...]  # content at the last check (loaded or refused)
    loaded: tuple[str | None, ...]  # content of the version now serving
    digest: str  # the serving .onnx's SHA-256
    refused: tuple[tuple[str | None, ...], str] | None = None  # the refused state last logged


class Predictors:
    """Name → batching predictor, loaded on first use, files re-checked for new versions."""

    def __init__(self, config: ModelsConfig, max_batch: int = 32, max_wait_ms: float = 2.0):
        self._files = {m.name: m for m in config.predictors}
        for entry in config.predictors:
            if entry.where is not None:
                verify_pin(entry, "predictors")
        self._loaded: dict[str, BatchingPredictor] = {}
        self._watched: dict[str, _Watched] = {}
        self._failed: dict[str, tuple[float, PredictorDown]] = {}
        self._lock = threading.Lock()
        self._reload_lock = threading.Lock()  # one check at a time (watcher, callers)
        self.max_batch, self.max_wait_ms = max_batch, max_wait_ms
        self.reload_interval_s = config.reload_interval_s
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def get(self, name: str) -> BatchingPredictor:
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            failed = self._failed.get(name)
            if failed is not None and time.monotonic() - failed[0] < self.reload_interval_s:
                raise failed[1]
        try:
            inner, watched = self._load(name)
        except PredictorDown as err:
            with self._lock:
                self._failed[name] = (time.monotonic(), err)
            metrics.MODEL_RELOADS.labels("predictor", name, err.reason).inc()
            raise
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = BatchingPredictor(inner, name, self.max_batch, self.max_wait_ms)
                if watched is not None:
                    self._watched[name] = watched
                metrics.MODEL_RELOADS.labels("predictor", name, "loaded").inc()
                metrics.set_model_version("predictor", name, self._loaded[name].version)
            return self._loaded[name]

    def _load(self, name: str) -> tuple[Any, _Watched | None]:
        if name in self._files:
            entry = self._files[name]
            # stamped and hashed before loading: a change while loading shows at the next check
            stamp, settled = _snapshot(entry)
            content = _content(entry)
            inner, digest = _load_onnx(entry)
            return inner, _Watched(entry, stamp, settled, content, content, digest)
        try:
            from mgmatch.models.runtime import load_predictor
        except ImportError as err:
            raise PredictorDown("unavailable", f"predictor runtime unavailable: {err}") from None
        try:
            return load_predictor(name), None
        except (InvalidInput, OSError, ValueError) as err:
            raise PredictorDown("unavailable", f"predictor {name!r}: {err}") from None

    def versions(self) -> dict[str, str]:
        with self._lock:
            return {k: v.version for k, v in self._loaded.items()}

    def check_reload(self) -> list[str]:
        """Swap in new versions of watched files whose digest matches the pin; returns names reloaded.

        A predictor's ``.onnx`` and its sidecar are both watched: a change to either (in any order,
        any number of checks apart) checks the pair again. A refused pair (digest not matching the
        pin, a half-written file, a bad sidecar) leaves the serving version in place, is logged once
        per distinct state, and is checked again when either file changes.
        """
        reloaded = []
        with self._reload_lock:
            with self._lock:
                items = list(self._watched.items())
            for name, w in items:
                if self._check_one(name, w):
                    reloaded.append(name)
        return reloaded

    def _check_one(self, name: str, w: _Watched) -> bool:
        stamp, settled = _snapshot(w.entry)
        changed = stamp != w.stamp
        if not changed and w.settled:
            return False
        content = _content(w.entry)
        if content == w.loaded:  # unchanged, or back to the serving version: nothing to load
            w.stamp, w.settled, w.checked, w.refused = stamp, settled, content, None
            return False
        if not changed and content == w.checked:  # a re-hash inside the racy window found nothing new
            w.stamp, w.settled = stamp, settled
            return False
        try:
            inner, digest = _load_onnx(w.entry)
        except PredictorDown as err:
            w.stamp, w.settled, w.checked = stamp, settled, content
            state = (content, str(err))
            if state != w.refused:
                w.refused = state
                log.warning("model %s not reloaded (%s), %s keeps serving: %s",
                            name, err.reason, self._loaded[name].version, err)
                metrics.MODEL_RELOADS.labels("predictor", name, err.reason).inc()
            return False
        w.stamp, w.settled, w.checked, w.loaded, w.digest, w.refused = stamp, settled, content, content, digest, None
        with self._lock:
            self._loaded[name].inner = inner
            version = self._loaded[name].version
        log.info("model %s reloaded: %s", name, version)
        metrics.MODEL_RELOADS.labels("predictor", name, "loaded").inc()
        metrics.set_model_version("predictor", name, version)
        return True

    def start_watcher(self) -> None:
        if self._watcher is not None:
            return

        def loop() -> None:
            while not self._stop.wait(self.reload_interval_s):
                try:
                    self.check_reload()
                except Exception:  # never let the watcher die
                    log.exception("model reload check failed")

        self._watcher = threading.Thread(target=loop, name="model-watcher", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
