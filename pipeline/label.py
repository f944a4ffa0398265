"""Training labels at scale: generate instances, solve each exactly, store the optima.

``label(preset, count, seed, out)`` generates instances ``0 … count−1`` of a preset (instance i
is ``generate_instances(preset, count, seed)[i]``: it depends only on (preset, seed, i), never on
``count``), solves each with the ``exact`` method under a time limit, and appends one record per
instance to the dataset in ``out`` (format in :mod:`mgmatch.pipeline.dataset`).

- **Resumable.** Indexes already in the dataset are skipped; records are written one by one by
  this (the only writing) process as solves finish, so a crash loses only the solves in flight
  (at most ``2 × workers``).
- **Parallel.** Local processes (:class:`concurrent.futures.ProcessPoolExecutor`, one SCIP
  thread each, BLAS/OpenMP pinned to one thread), or a Ray cluster (``ray_address``: an address,
  or ``"local"`` to start a local Ray with ``workers`` CPUs). Work crosses process boundaries as
  JSON text.
- **Time limits.** Where the optimum is out of reach within ``time_limit_s`` the record keeps the
  best solution found, ``status: "feasible"``, ``optimal: false`` and its proven gap.

Throughput (instances per core-hour) of each run is returned and appended to the manifest.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from mgmatch.core.errors import InvalidInput

from .dataset import (
    DATASET_FORMAT,
    ENGAGEMENT_FILE,
    SHARD_SIZE,
    append_record,
    done_indexes,
    read_manifest,
    records,
    write_manifest,
)

#: solver used for labels (enumeration on tiny instances, else the big-M MIP in SCIP)
LABEL_METHOD = "exact"
#: with a start (``start_ms`` > 0), the method whose answer SCIP starts from
START_METHOD = "surrogate"
#: in-flight jobs per worker (bounds what a crash can lose)
INFLIGHT_PER_WORKER = 2
#: seconds a Ray address gets to resolve, accept a connection and answer gRPC before it is refused
#: (``ray.init`` itself retries an unreachable address for minutes)
RAY_CONNECT_TIMEOUT_S = 3.0
#: ``[ray://]host:port``: a hostname, an IPv4 address or a bracketed IPv6 address, and a port
_RAY_ADDRESS = re.compile(r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?)"
                          r":(?P<port>[0-9]{1,5})$")


def _single_thread() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


def label_one(job_json: str) -> str:
    """Solve one labelling job exactly; runs in a worker. JSON text in, JSON text out.

    The job: ``{"index", "instance" (instance JSON), "time_limit_s"}``; the result is the
    dataset record (see :mod:`mgmatch.pipeline.dataset`).
    """
    _single_thread()
    from mgmatch.core.instance import parse_instance
    from mgmatch.core.presets import resolve_model
    from mgmatch.core.problem import Problem
    from mgmatch.core.solution import team_of_from_teams
    from mgmatch.solvers.base import Budget, get_solver, make_solver

    job = json.loads(job_json)
    inst = parse_instance(job["instance"])
    if job.get("engagement"):
        model = _engagement_file(job["engagement"])
        name = model.name
    else:
        name, model = resolve_model(inst)
    problem = Problem(inst, model, model_name=name)
    t0 = time.perf_counter()
    limit = job["time_limit_s"]
    budget = Budget.of(None if limit is None else limit * 1e3)
    start_ms = float(job.get("start_ms") or 0.0)
    start = start_objective = None
    if start_ms > 0:
        # a heuristic answer first (never the network being trained: `surrogate` runs on the
        # engagement gradient), and SCIP starts from it with the rest of the limit
        first = make_solver(START_METHOD).solve(problem, Budget.of(start_ms))
        if first.has_assignment:
            start, start_objective = team_of_from_teams(inst, first.teams), first.objective
    sol = get_solver(LABEL_METHOD).solve(problem, budget, start=start)
    if start is not None and sol.status != "optimal" and (
            not sol.has_assignment or start_objective > sol.objective):
        # SCIP read the start but returned less (its own best rejected by the checker, or no
        # time to solve after building): the start is the label, with SCIP's bound
        sol = problem.solution(start, "feasible", LABEL_METHOD, budget.elapsed_ms(), bound=sol.bound)
    elapsed_ms = (time.perf_counter() - t0) * 1e3
    team_of = team_of_from_teams(inst, sol.teams).tolist() if sol.has_assignment else None
    rec = {
        "index": job["index"],
        "instance": job["instance"],
        "model": name,
        "status": sol.status,
        "optimal": sol.status == "optimal",
        "team_of": team_of,
        "objective": sol.objective,
        "bound": sol.bound,
        "gap": sol.gap,
        "time_ms": round(elapsed_ms, 3),
        "method": LABEL_METHOD,
        "time_limit_s": limit,
    }
    if start_ms > 0:
        rec["start_ms"] = start_ms
        rec["start_objective"] = start_objective
    if job.get("file"):
        rec["file"] = job["file"]
    return json.dumps(rec, allow_nan=False)


@functools.lru_cache(maxsize=4)
def _engagement_file(path: str):
    """The engagement model of a dataset (loaded once per worker process)."""
    from mgmatch.core.engagement import load_engagement

    return load_engagement(path)


@dataclass
class LabelRun:
    """What one call of :func:`label` did."""

    out: str
    preset: str | None
    count: int
    done_before: int
    labelled: int
    optimal: int
    feasible_only: int
    without_solution: int
    workers: int
    backend: str
    wall_s: float
    solve_s: float
    instances: str | None = None

    @property
    def per_core_hour(self) -> float | None:
        """Instances labelled per core-hour of wall time (workers × wall)."""
        if self.labelled == 0 or self.wall_s <= 0:
            return None
        return self.labelled / (self.workers * self.wall_s / 3600.0)

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["instances_per_core_hour"] = None if self.per_core_hour is None else round(self.per_core_hour, 1)
        d["mean_solve_s"] = round(self.solve_s / self.labelled, 4) if self.labelled else None
        return d


def _manifest_for(out: Path, preset: str, seed: int, count: int, time_limit_s: float | None) -> dict:
    from mgmatch.core.presets import model_sha256

    sha = model_sha256(preset)
    m = read_manifest(out)
    if m is None:
        return {"format": DATASET_FORMAT, "preset": preset, "seed": seed, "count": count,
                "time_limit_s": time_limit_s, "method": LABEL_METHOD, "shard_size": SHARD_SIZE,
                "model": preset, "model_sha256": sha, "done": 0, "optimal": 0, "runs": []}
    for key, val in (("preset", preset), ("seed", seed)):
        if m.get(key) != val:
            raise InvalidInput(key, f"{out} holds a dataset with {key}={m.get(key)!r}, not {val!r}; "
                                    "use another --out directory")
    # datasets from before the pin carry none: nothing to compare (and nothing claimed for them)
    if m.get("model_sha256") not in (None, sha):
        raise InvalidInput("preset", f"{out} was labelled with another {preset} engagement model (SHA-256 "
                                     f"{m['model_sha256'][:12]}…, shipped now {sha[:12]}…); its labels would mix "
                                     "two objectives: use another --out directory")
    m["count"] = max(int(m.get("count", 0)), count)
    m["time_limit_s"] = time_limit_s
    return m


def _check_start(start_ms: float, time_limit_s: float | None) -> None:
    if not (start_ms >= 0 and start_ms < float("inf")):
        raise InvalidInput("start_ms", f"must be ≥ 0, got {start_ms}")
    if time_limit_s is not None and start_ms >= time_limit_s * 1e3:
        raise InvalidInput("start_ms", f"must be below the time limit ({time_limit_s * 1e3:g} ms), got {start_ms:g}")


def label_summary(recs: Iterable[dict]) -> dict:
    """What the labels are worth: how many are only time-limited best solutions, their proven gaps,
    and every time limit the records were solved under (a resumed run may have changed it)."""
    recs = list(recs)
    gaps = [float(r["gap"]) for r in recs if r.get("team_of") is not None and r.get("gap") is not None]
    limits = sorted({r.get("time_limit_s") for r in recs}, key=lambda v: (v is None, v or 0.0))
    return {"feasible_only": sum(1 for r in recs if not r.get("optimal") and r.get("team_of") is not None),
            "without_solution": sum(1 for r in recs if r.get("team_of") is None),
            "gap_mean": round(sum(gaps) / len(gaps), 6) if gaps else None,
            "gap_max": round(max(gaps), 6) if gaps else None,
            "time_limits_s": limits,
            "start_ms_values": sorted({float(r.get("start_ms") or 0.0) for r in recs})}


def check_ray_address(address: str | None, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Refuse a Ray address that cannot be a reachable cluster, within about ``timeout_s`` seconds.

    Accepted: ``None`` (no Ray), ``"local"`` (start one here), ``"auto"`` (Ray finds a running local
    cluster, or ``RAY_ADDRESS``), and ``[ray://]host:port`` whose host resolves, whose port accepts a
    TCP connection and answers gRPC (the protocol of a cluster's GCS and of the Ray Client server).
    ``ray.init`` retries an address that does not answer for minutes; this answers in seconds.

    Raises:
        InvalidInput: field ``ray``, the message saying what is wrong with the address.
    """
    if address is None or address in ("local", "auto"):
        if address == "auto" and os.environ.get("RAY_ADDRESS", "") not in ("", "auto", "local"):
            try:
                check_ray_address(os.environ["RAY_ADDRESS"], timeout_s)
            except InvalidInput as err:
                raise InvalidInput("ray", f"auto: RAY_ADDRESS {err.message}") from None
        return
    shown = address if len(address) <= 80 else address[:80] + "…"
    m = _RAY_ADDRESS.match(address)
    if m is None:
        raise InvalidInput("ray", f"expected 'local', 'auto' or a Ray cluster address host:port (e.g. "
                                  f"10.0.0.5:6379, or ray://host:10001 for Ray Client), got {shown!r}")
    host, port = m["host"].strip("[]"), int(m["port"])
    if not 1 <= port <= 65535:
        raise InvalidInput("ray", f"{shown}: port must be 1…65535, got {port}")
    deadline = time.monotonic() + timeout_s
    addrs = _resolve(host, port, timeout_s)
    if isinstance(addrs, str):
        raise InvalidInput("ray", f"{shown}: cannot resolve host {host!r} ({addrs})")
    try:
        socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic())).close()
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise InvalidInput("ray", f"{shown}: no Ray cluster answers there ({why})") from None
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return  # a TLS cluster: the plain gRPC handshake below cannot tell
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio comes with ray
        return
    channel = grpc.insecure_channel(f"{m['host']}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=max(0.5, deadline - time.monotonic()))
    except grpc.FutureTimeoutError:
        raise InvalidInput("ray", f"{shown}: the port accepts connections but does not answer as a Ray cluster "
                                  f"(no gRPC within {timeout_s:g} s)") from None
    finally:
        channel.close()


def _resolve(host: str, port: int, timeout_s: float) -> list | str:
    """``getaddrinfo`` bounded by ``timeout_s`` (a hanging DNS server must not hang the command):
    the addresses, or why there are none."""
    out: list = []

    def run() -> None:
        try:
            out.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as err:
            out.append(err.strerror or str(err))

    t = threading.Thread(target=run, name="ray-address", daemon=True)
    t.start()
    t.join(timeout_s)
    return out[0] if out else f"no answer within {timeout_s:g} s"


def _run_local(jobs: list[str], workers: int, on_result: Callable[[str], None]) -> None:
    if workers == 1:
        for j in jobs:
            on_result(label_one(j))
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork after SCIP/OR-Tools/torch may have been loaded
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_single_thread) as pool:
        pending: set[Future] = set()
        it = iter(jobs)
        limit = workers * INFLIGHT_PER_WORKER
        for j in it:
            pending.add(pool.submit(label_one, j))
            if len(pending) >= limit:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_result(f.result())
            for j in it:
                pending.add(pool.submit(label_one, j))
                if len(pending) >= limit:
                    break


def _run_ray(jobs: list[str], workers: int, address: str, on_result: Callable[[str], None]) -> int:
    """Run the jobs as Ray tasks (one CPU each); returns the cluster's CPU count."""
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is an optional extra
        raise InvalidInput("ray", "Ray is not installed (pip install 'mgmatch[ray]')") from None
    started = False
    if not ray.is_initialized():
        if address == "local":
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
        else:
            try:  # the address was checked by label() / label_instances() before anything was written
                ray.init(address=address, log_to_driver=False)
            except ConnectionError:  # "auto" with no cluster running here
                raise InvalidInput("ray", f"{address}: no running Ray cluster found (start one with `ray start "
                                          "--head`, or give its address host:port)") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(label_one)
        cpus = max(1, int(ray.cluster_resources().get("CPU", workers)))
        limit = cpus * INFLIGHT_PER_WORKER
        it = iter(jobs)
        pending = [remote.remote(j) for j in islice(it, limit)]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                on_result(ray.get(r))
            for j in it:
                pending.append(remote.remote(j))
                if len(pending) >= limit:
                    break
        return cpus
    finally:
        if started:
            ray.shutdown()


def label(preset: str, count: int, seed: int, out: str | Path, workers: int = 1,
          time_limit_s: float | None = 60.0, ray_address: str | None = None, progress: bool = True,
          indexes: Iterable[int] | None = None, start_ms: float = 0.0) -> LabelRun:
    """Label instances ``0 … count−1`` of ``preset`` (or only ``indexes``) into ``out``.

    Args:
        preset: scenario name ("3v3", "12v12").
        count: dataset size; a later call with a larger count extends the dataset.
        seed: generator seed (instance i depends on (preset, seed, i) only).
        out: dataset directory (created when missing).
        workers: local processes, or CPUs of a local Ray.
        time_limit_s: per-instance time limit of the exact solve; None for none.
        ray_address: a Ray cluster address, "local" to start one here, None for local processes.
        progress: show a progress bar on stderr.
        indexes: label only these indexes (all below ``count``); default all.
        start_ms: > 0: SCIP starts from the answer :data:`START_METHOD` finds in this many ms
            (counted in ``time_limit_s``). Where SCIP does not close, its answer alone can be far
            below a fast heuristic's: 12v12-deep at 3 s, 6.6% below ``surrogate`` at 300 ms.
    Returns:
        a :class:`LabelRun` with counts and throughput.
    """
    from mgmatch.core.presets import generate_instances, get_preset

    get_preset(preset)
    check_ray_address(ray_address)
    if count < 0:
        raise InvalidInput("count", f"must be ≥ 0, got {count}")
    if workers < 1:
        raise InvalidInput("workers", f"must be ≥ 1, got {workers}")
    if time_limit_s is not None and not time_limit_s > 0:
        raise InvalidInput("time_limit_s", f"must be > 0, got {time_limit_s}")
    _check_start(start_ms, time_limit_s)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    manifest = _manifest_for(root, preset, seed, count, time_limit_s)
    manifest["start_ms"] = start_ms
    write_manifest(root, manifest)
    done = done_indexes(root)
    wanted = sorted(set(range(count) if indexes is None else indexes))
    if wanted and (wanted[0] < 0 or wanted[-1] >= count):
        raise InvalidInput("indexes", f"must lie in 0..{count - 1}")
    todo = [i for i in wanted if i not in done]
    t0 = time.perf_counter()
    instances = generate_instances(preset, todo[-1] + 1, seed) if todo else []
    jobs = [json.dumps({"index": i, "instance": instances[i].to_json(), "time_limit_s": time_limit_s,
                        "start_ms": start_ms})
            for i in todo]
    del instances
    return _execute(root, manifest, jobs, len(done), preset, count, workers, ray_address, progress, t0,
                    f"label {preset}")


class _PlainProgress:
    """The progress line without tqdm (the service image has none): ``label 3v3: 12/100 optimal=11 gap_only=1``,
    rewritten in place at most twice a second, only when stderr is a terminal (else nothing)."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""
        self.shown, self.width = 0.0, 0
        self.tty = sys.stderr.isatty()

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty and (force or now - self.shown >= 0.5):
            self.shown = now
            line = f"{self.desc}: {self.n}/{self.total} {self.postfix}".rstrip()
            sys.stderr.write("\r" + line.ljust(self.width))
            sys.stderr.flush()
            self.width = len(line)

    def update(self, n: int = 1) -> None:
        self.n += n
        self._show()

    def set_postfix(self, **fields) -> None:
        self.postfix = " ".join(f"{k}={v}" for k, v in fields.items())

    def close(self) -> None:
        if self.tty and self.shown:
            self._show(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


def _progress_bar(total: int, desc: str):
    """A tqdm bar on stderr, or :class:`_PlainProgress` where tqdm is not installed (the service image):
    labelling never needs it."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainProgress(total, desc)
    return tqdm(total=total, desc=desc, unit="inst", file=sys.stderr)


def _execute(root: Path, manifest: dict, jobs: list[str], done_before: int, what: str | None, count: int,
             workers: int, ray_address: str | None, progress: bool, t0: float, desc: str,
             instances: str | None = None) -> LabelRun:
    """Solve ``jobs``, append each record as it arrives, update the manifest; returns the run."""
    counts = {"optimal": 0, "feasible": 0, "none": 0}
    solve_s = 0.0
    bar = _progress_bar(len(jobs), desc) if progress and jobs else None

    def on_result(text: str) -> None:
        nonlocal solve_s
        rec = json.loads(text)
        append_record(root, rec, manifest.get("shard_size", SHARD_SIZE))
        solve_s += rec["time_ms"] / 1e3
        if rec["optimal"]:
            counts["optimal"] += 1
        elif rec["team_of"] is not None:
            counts["feasible"] += 1
        else:
            counts["none"] += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(optimal=counts["optimal"], gap_only=counts["feasible"])

    backend = "sequential" if workers == 1 and ray_address is None else "processes"
    cores = workers
    try:
        if ray_address is not None:
            backend = "ray-local" if ray_address == "local" else "ray"
            cores = _run_ray(jobs, workers, ray_address, on_result) if jobs else workers
        else:
            _run_local(jobs, workers, on_result)
    finally:
        if bar is not None:
            bar.close()
        wall = time.perf_counter() - t0
        run = LabelRun(str(root), what, count, done_before, sum(counts.values()), counts["optimal"],
                       counts["feasible"], counts["none"], cores, backend, round(wall, 3), round(solve_s, 3),
                       instances)
        recs = records(root)
        manifest["done"] = len(recs)
        manifest["optimal"] = sum(1 for r in recs.values() if r.get("optimal"))
        manifest.update(label_summary(recs.values()))
        manifest["runs"] = list(manifest.get("runs", [])) + [run.to_json()]
        write_manifest(root, manifest)
    return run


def _check_instances(files: list[Path], model) -> list[dict]:
    """Every instance file parsed and bound to ``model`` (InvalidInput names the file and field)."""
    from mgmatch.core.instance import parse_instance, read_json
    from mgmatch.core.problem import Problem

    out = []
    for f in files:
        obj = read_json(f)
        try:
            problem = Problem(parse_instance(obj), model)
            problem.compiled  # noqa: B018 - rules refer to known players and teams
        except InvalidInput as err:
            raise InvalidInput(f"{f.name}: {err.field}" if err.field else f.name, err.message) from None
        out.append(obj)
    return out


def label_instances(instances: str | Path, engagement: str | Path, out: str | Path, workers: int = 1,
                    time_limit_s: float | None = 60.0, ray_address: str | None = None,
                    progress: bool = True, start_ms: float = 0.0) -> LabelRun:
    """Label every ``*.json`` instance of a directory with a game's own engagement model.

    The dataset keeps a copy of the model (``DATA/engagement.json``, pinned by SHA-256 in the
    manifest) so that ``mgmatch train`` reads the same model. Every instance is validated against
    the model before anything is written. Resumable: files already labelled (by name) are
    skipped; new files in the directory get the next indexes (in name order).

    Args:
        instances: directory of spec §1 instance files.
        engagement: the game's ``mgmatch-engagement/v1`` file (e.g. from ``mgmatch fit-engagement``).
        out: dataset directory (created when missing).
        workers: local processes, or CPUs of a local Ray.
        time_limit_s: per-instance time limit of the exact solve; None for none.
        ray_address: a Ray cluster address, "local" to start one here, None for local processes.
        progress: show a progress bar on stderr.
        start_ms: as in :func:`label`.
    Raises:
        InvalidInput: no instances, a bad instance or model file, or ``out`` holding another dataset.
    """
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.files import sha256_file

    src = Path(instances)
    if not src.is_dir():
        raise InvalidInput("instances", f"no such directory {str(src)!r}")
    check_ray_address(ray_address)
    if workers < 1:
        raise InvalidInput("workers", f"must be ≥ 1, got {workers}")
    if time_limit_s is not None and not time_limit_s > 0:
        raise InvalidInput("time_limit_s", f"must be > 0, got {time_limit_s}")
    _check_start(start_ms, time_limit_s)
    files = sorted(p for p in src.glob("*.json") if p.is_file())
    if not files:
        raise InvalidInput("instances", f"{src} holds no *.json instance files")
    model = load_engagement(engagement)
    sha = sha256_file(engagement)
    objs = _check_instances(files, model)
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise InvalidInput("out", f"{root} exists and is not a directory")
    m = read_manifest(root) if root.is_dir() else None
    if m is not None and (m.get("source") != "instances" or m.get("engagement_sha256") != sha):
        raise InvalidInput("out", f"{root} holds a dataset labelled with another engagement model or from "
                                  "presets; use another --out directory")
    root.mkdir(parents=True, exist_ok=True)
    eng_copy = root / ENGAGEMENT_FILE
    if not eng_copy.is_file() or sha256_file(eng_copy) != sha:
        tmp = eng_copy.with_suffix(".json.tmp")
        shutil.copyfile(engagement, tmp)
        os.replace(tmp, eng_copy)
    if m is None:
        m = {"format": DATASET_FORMAT, "source": "instances", "preset": None, "instances": str(src.resolve()),
             "engagement": ENGAGEMENT_FILE, "engagement_sha256": sha, "engagement_name": model.name,
             "teams": model.teams, "feature_dim": model.feature_dim, "time_limit_s": time_limit_s,
             "method": LABEL_METHOD, "shard_size": SHARD_SIZE, "done": 0, "optimal": 0, "runs": []}
    m["time_limit_s"] = time_limit_s
    m["start_ms"] = start_ms
    m["count"] = len(files)
    write_manifest(root, m)
    recs = records(root)
    done_files = {r.get("file") for r in recs.values()}
    nxt = max(recs, default=-1) + 1
    t0 = time.perf_counter()
    jobs = []
    for f, obj in zip(files, objs, strict=True):
        if f.name in done_files:
            continue
        jobs.append(json.dumps({"index": nxt, "file": f.name, "instance": obj, "time_limit_s": time_limit_s,
                                "start_ms": start_ms, "engagement": str(eng_copy.resolve())}))
        nxt += 1
    del objs
    return _execute(root, m, jobs, len(recs), None, len(files), workers, ray_address, progress, t0,
                    f"label {src.name}", instances=str(src))
