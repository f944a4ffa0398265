"""Benchmark of the Alman–McKay game queue: µs per insert, delete and best-game query by size.

For each size n: draw n skills (seeded), bulk-build the queue (one sort), answer one query
(which resolves the anchors that can hold the best game; reported as ``first_query_ms``), freeze
the built objects out of the garbage collector's scans (``gc.freeze``), then
time ``ops`` random operations in a seeded random order — a third inserts of new players, a
third deletes of random present players, a third best-game queries — each timed on its own
with ``perf_counter``. The queue size stays ≈ n.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.solvers.game_queue import GameQueue

DISTS = ("normal", "uniform")


def _skills(rng: np.random.Generator, size: int, dist: str) -> np.ndarray:
    if dist == "normal":
        return np.clip(rng.normal(1500.0, 300.0, size), 0.0, None)
    return rng.uniform(0.0, 3000.0, size)


@dataclass
class SizeResult:
    n: int
    build_s: float
    first_query_ms: float
    insert_us: float
    delete_us: float
    query_us: float
    insert_p99_us: float
    delete_p99_us: float
    query_p99_us: float
    ops: int
    searches: int
    best_imbalance: float

    def to_json(self) -> dict:
        return dict(self.__dict__)


def bench_size(n: int, k: int, alpha: float, p: float, q: float, beta: float, ops: int, seed: int,
               dist: str = "normal") -> SizeResult:
    if n < 2 * k:
        raise InvalidInput("sizes", f"size {n} is below 2k = {2 * k}")
    rng = np.random.default_rng([seed, n])
    skills = _skills(rng, n, dist)
    ids = [f"p{i}" for i in range(n)]
    times = rng.uniform(0.0, 60.0, n) if beta > 0 else None
    t0 = time.perf_counter()
    gq = GameQueue.bulk(ids, skills, times, k=k, alpha=alpha, p=p, q=q, beta=beta)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    gq.best_game()
    first = (time.perf_counter() - t0) * 1e3
    # the million long-lived objects of the build would make every full GC pass walk them all
    gc.collect()
    gc.freeze()
    kinds = rng.permutation(np.arange(ops) % 3)
    new_skills = _skills(rng, ops, dist).tolist()
    present = list(ids)  # may hold deleted ids; skipped on draw
    where = {pid: i for i, pid in enumerate(present)}
    ins: list[float] = []
    dels: list[float] = []
    qs: list[float] = []
    next_id = n
    clock = 60.0
    best = math.inf
    searches0 = gq.stats.searches
    for op, s in zip(kinds.tolist(), new_skills, strict=True):
        clock += 0.01
        if op == 0:
            pid = f"p{next_id}"
            next_id += 1
            a = time.perf_counter()
            gq.insert(pid, s, clock)
            ins.append(time.perf_counter() - a)
            where[pid] = len(present)
            present.append(pid)
        elif op == 1:
            j = int(rng.integers(len(present)))
            pid = present[j]
            a = time.perf_counter()
            gq.delete(pid)
            dels.append(time.perf_counter() - a)
            # swap-remove so every draw hits a present player
            last = present.pop()
            if last != pid:
                present[j] = last
                where[last] = j
            del where[pid]
        else:
            a = time.perf_counter()
            g = gq.best_game()
            qs.append(time.perf_counter() - a)
            if g is not None:
                best = g.imbalance

    def us(xs: list[float]) -> tuple[float, float]:
        if not xs:
            return 0.0, 0.0
        arr = np.asarray(xs) * 1e6
        return float(arr.mean()), float(np.percentile(arr, 99))

    gc.unfreeze()
    (im, ip), (dm, dp), (qm, qp) = us(ins), us(dels), us(qs)
    return SizeResult(n, build, first, im, dm, qm, ip, dp, qp, ops, gq.stats.searches - searches0,
                      best if math.isfinite(best) else -1.0)


#: largest queue size and timed operations per size: the README's runs go to 1,000,000 and 3,000
MAX_SIZE = 10_000_000
MAX_OPS = 10_000_000


def _short(v: int) -> str:
    return str(v) if abs(v) < 10**20 else f"an integer of about {len(str(abs(v)))} digits"


def run(sizes: list[int], k: int, alpha: float, p: float, q: float, beta: float, ops: int, seed: int,
        dist: str = "normal", progress=None) -> dict:
    if dist not in DISTS:
        raise InvalidInput("dist", f"expected one of {', '.join(DISTS)}, got {dist!r}")
    big = [n for n in sizes if n > MAX_SIZE]
    if big:
        raise InvalidInput("--sizes", f"every size must be ≤ {MAX_SIZE:,}, got {_short(big[0])}")
    if ops > MAX_OPS:
        raise InvalidInput("--ops", f"must be ≤ {MAX_OPS:,}, got {_short(ops)}")
    results = []
    window = None
    for n in sizes:
        r = bench_size(n, k, alpha, p, q, beta, ops, seed, dist)
        results.append(r.to_json())
        if progress is not None:
            progress(r)
        window = GameQueue(k, alpha, p, q, beta).W
    return {"k": k, "alpha": alpha, "p": _num(p), "q": _num(q), "beta": beta, "ops": ops, "seed": seed,
            "dist": dist, "window": window, "results": results}


def _num(x: float) -> float | str:
    return "inf" if math.isinf(x) else x
