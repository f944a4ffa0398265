"""Benchmark of EOMM's real-time pairing: milliseconds per pool, stage by stage.

For each of ``pools`` seeded pools of ``pool`` players drawn from the synthetic world of
:mod:`mgmatch.lab.sim_eomm`: churn prediction and Eq. 7 weights (``weights``), the assignment
relaxation and its duals (``duals``), the pruning and the blossom on the reduced costs
(``blossom``), and their sum (``total``: what pairing the pool costs). With ``dense`` the same
pools are also paired by rustworkx's blossom on the whole graph with the raw weights (no pruning,
no reduced costs) — the plain use of the library, for comparison; both must find the same weight.
"""

from __future__ import annotations

import time

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.solvers.eomm import (
    DEFAULT_CHURN,
    OutcomeModel,
    blossom,
    min_weight_perfect_matching,
    pair_weights,
)

from .sim_eomm import make_world

STAGES = ("weights", "duals", "blossom", "total")


#: largest pool (players) and number of pools one run takes: the README's runs use 300 × 50
MAX_POOL = 10_000
MAX_POOLS = 1_000_000


def short(v: int) -> str:
    """An integer for an error message: its digits, or its size when it is huge."""
    return str(v) if abs(v) < 10**20 else f"an integer of about {len(str(abs(v)))} digits"


def _summary(ms: list[float]) -> dict:
    a = np.asarray(ms)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max())}


def run(pool: int = 300, pools: int = 50, seed: int = 0, dense: bool = False, world_size: int = 20000) -> dict:
    """Per-stage ms (mean, p50, p95, max) of EOMM's pairing over ``pools`` pools of ``pool`` players."""
    if pool < 18 or pool % 2:
        raise InvalidInput("pool", f"must be even and ≥ 18 (smaller pools skip the pruning), got {pool}")
    if pool > MAX_POOL:
        raise InvalidInput("--pool", f"must be ≤ {MAX_POOL:,} (its graph has pool² / 2 edges), got {short(pool)}")
    if not 1 <= pools <= MAX_POOLS:
        raise InvalidInput("--pools", f"must be ≥ 1 and ≤ {MAX_POOLS:,}, got {short(pools)}")
    world = make_world(world_size, seed)
    rng = np.random.default_rng(seed + 3)
    om = OutcomeModel()
    times: dict[str, list[float]] = {k: [] for k in STAGES}
    dense_ms: list[float] = []
    edges, calls = [], []
    iu, ju = np.triu_indices(pool, 1)
    for _ in range(pools):
        p = world.take(rng.choice(world.size, pool, replace=False))
        t0 = time.perf_counter()
        W = pair_weights(p.mu, p.sigma ** 2, DEFAULT_CHURN.predict(p.history, p.gpd), om)
        t1 = time.perf_counter()
        st: dict = {}
        pairs = min_weight_perfect_matching(W, stats=st)
        t2 = time.perf_counter()
        times["weights"].append((t1 - t0) * 1e3)
        times["duals"].append(st["duals_ms"])
        times["blossom"].append(st["blossom_ms"])
        times["total"].append((t2 - t0) * 1e3)
        edges.append(st["edges"])
        calls.append(st["blossom_calls"])
        if dense:
            t3 = time.perf_counter()
            ref = blossom(pool, iu, ju, W[iu, ju])
            dense_ms.append((time.perf_counter() - t3) * 1e3)
            got, want = sum(W[a, b] for a, b in pairs), sum(W[a, b] for a, b in ref)
            if len(ref) != pool // 2 or abs(got - want) > 1e-9 * max(1.0, abs(want)):
                raise RuntimeError(f"pruned matching {got!r} differs from the whole-graph blossom {want!r}")
    out = {"pool": pool, "pools": pools, "seed": seed, "edges_total": len(iu),
           "edges_kept_mean": float(np.mean(edges)), "blossom_calls_mean": float(np.mean(calls)),
           "ms": {k: _summary(v) for k, v in times.items()}}
    if dense:
        out["ms"]["dense_blossom"] = _summary(dense_ms)
    return out
