"""Solve latency while a learning pool refits, as ``serve`` runs it (refit in a child process).

``python -m mgmatch.lab.refit_p99 --world 5v5 --results 50000 --budget-ms 50 --seed 0``: writes a
results log of that many matches of the world (:func:`mgmatch.lab.lift.skill_log`), then solves the
world's candidate pools one after another in this process (the pool's method ``surrogate``, the
given budget, through :class:`mgmatch.app.engine.Engine` as the matchmaker does) first with no
refit running, then while :class:`mgmatch.app.learning.PoolLearner` refits on those results in its
child process; prints the p50/p99/max solve time of both phases and the refit's wall time as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from mgmatch.app.ab import plan_for
from mgmatch.app.config import parse_config
from mgmatch.app.engine import Engine
from mgmatch.app.learning import Learning, new_refit_executor
from mgmatch.app.models_hub import EngagementModels
from mgmatch.core.instance import parse_instance

from .lift import skill_log
from .lift_worlds import get_world


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", default="5v5")
    ap.add_argument("--results", type=int, default=50_000)
    ap.add_argument("--budget-ms", type=float, default=50.0)
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--baseline-s", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    world = get_world(a.world)
    rng = np.random.default_rng(a.seed)
    with tempfile.TemporaryDirectory(prefix="mgmatch-refit-p99-") as tmp:
        d = Path(tmp)
        body = json.dumps(world.truth()).encode()
        (d / "eng.json").write_bytes(body)
        cfg = parse_config({"pools": [{
            "name": "p", "teams": world.teams, "team_size": world.team_size, "rules": world.rules,
            "engagement_model": {"path": str(d / "eng.json"), "sha256": hashlib.sha256(body).hexdigest()},
            "method": "surrogate", "time_budget_ms": a.budget_ms,
            "learning": {"dir": str(d / "learned"), "min_results": 10, "refit_every": 10}}]})
        engagement = EngagementModels(cfg.models)
        cfg.pools[0].feature_dim = engagement.get("p").feature_dim
        learning = Learning(cfg, engagement)
        lp = learning.get("p")
        lp.dir.mkdir(parents=True, exist_ok=True)
        skill_log(world, a.results, a.seed, lp.train_log)
        skill_log(world, max(200, a.results // 20), a.seed + 1, lp.holdout_log)
        lp.results = a.results
        engine = Engine(engagement, None)
        plan = plan_for(cfg.pools[0], None)
        insts = []
        for k in range(20):
            players = world.population(rng, a.candidates)
            insts.append(parse_instance({"teams": world.teams, "team_size": world.team_size, "rules": world.rules,
                                         "engagement_model": "p",
                                         "players": [{"id": f"x{k}-{i}", **p} for i, p in enumerate(players)]}))

        def solve_for(seconds: float | None, until: threading.Event | None = None) -> list[float]:
            out, t_end, k = [], (time.perf_counter() + seconds) if seconds else None, 0
            while (t_end is None or time.perf_counter() < t_end) and (until is None or not until.is_set()):
                t0 = time.perf_counter()
                engine.solve(insts[k % len(insts)], plan, "p", seed=k, start=t0)
                out.append((time.perf_counter() - t0) * 1e3)
                k += 1
            return out

        solve_for(3.0)  # warm
        base = solve_for(a.baseline_s)
        executor = new_refit_executor()
        executor.submit(int, 0).result()  # the child is up before the clock starts
        done = threading.Event()
        outcome: dict = {}

        def refit() -> None:
            t0 = time.perf_counter()
            outcome["outcome"] = lp.refit(executor)
            outcome["seconds"] = round(time.perf_counter() - t0, 1)
            done.set()

        th = threading.Thread(target=refit)
        th.start()
        during = solve_for(None, done)
        th.join()
        executor.shutdown()

    def stats(v: list[float]) -> dict:
        return {"solves": len(v), "p50_ms": round(float(np.percentile(v, 50)), 2),
                "p99_ms": round(float(np.percentile(v, 99)), 2), "max_ms": round(max(v), 2)}

    res = {"world": a.world, "results": a.results, "budget_ms": a.budget_ms, "candidates": a.candidates,
           "no_refit": stats(base), "during_refit": stats(during), "refit": outcome}
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
