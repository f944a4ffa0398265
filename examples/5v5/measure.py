#!/usr/bin/env python3
"""The 5v5 example's numbers: MGMatch and ``surrogate`` at a budget against the exact optimum, and the
regret under the game's *true* engagement.

On held-out pools (write them with a seed the labels did not use)::

    python examples/5v5/measure.py --pools /tmp/5v5/test-pools --count 100 --budget-ms 50 \\
        --engagement examples/5v5/engagement.json --predictor examples/5v5/model.onnx --json out.json

Per pool:

- the fitted model's optimum (``exact``, proven within ``--exact-time-limit-s``) is the reference;
- each method runs under the budget, timed end to end as the service does (encoding the pool,
  the network, the solve: the clock starts before the pool is encoded); its answer is re-checked
  by the rule checker; ``gap`` = (optimum − objective) / |optimum| (an unanswered or infeasible pool
  counts as gap 1);
- true regret: the hidden world's engagement (``simulate.truth_model()``, exact) of the teams a
  method chose, against the true best assignment of the same pool under the same rules (proven
  by ``exact`` on the true objective). Reported absolute and relative to |true best|, also for the
  fitted model's own optimum (what a perfect solver of the fitted model would lose).

Seeded: the pools are files; the solvers' randomness is seeded by ``--seed``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import simulate  # noqa: E402

from mgmatch.core.engagement import parse_engagement  # noqa: E402
from mgmatch.core.instance import load_instance  # noqa: E402
from mgmatch.core.problem import Problem  # noqa: E402
from mgmatch.core.solution import team_of_from_teams  # noqa: E402
from mgmatch.solvers.base import Budget, get_solver, make_solver  # noqa: E402


def _problem(inst, model, name: str) -> Problem:
    pr = Problem(inst, model, model_name=name)
    _ = pr.embeddings, pr.compiled, pr.checker  # encode, as the service does before the solve
    return pr


def _exact(pr: Problem, limit_s: float) -> tuple[dict, np.ndarray | None]:
    t0 = time.perf_counter()
    sol = get_solver("exact").solve(pr, Budget.of(limit_s * 1e3))
    ms = (time.perf_counter() - t0) * 1e3
    t = team_of_from_teams(pr.instance, sol.teams) if sol.has_assignment else None
    return {"status": sol.status, "objective": sol.objective, "ms": round(ms, 2)}, t


def _timed(solver, inst, model, budget_ms: float) -> tuple[dict, np.ndarray | None]:
    t0 = time.perf_counter()
    pr = _problem(inst, model, "5v5")
    sol = solver.solve(pr, Budget(budget_ms, t0))
    ms = (time.perf_counter() - t0) * 1e3
    out = {"status": sol.status, "ms": ms, "feasible": False, "objective": None}
    t = None
    if sol.has_assignment:
        t = team_of_from_teams(inst, sol.teams)
        if bool(pr.checker.feasible(t[None])[0]):
            out["feasible"], out["objective"] = True, float(pr.objective(t))
        else:
            t = None
    return out, t


def _f(x: float | None, digits: int, scale: float = 1.0) -> str:
    return "–" if x is None else f"{scale * x:.{digits}f}"


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pools", type=Path, required=True, help="Folder of held-out pool files (simulate.py pools).")
    ap.add_argument("--count", type=int, default=100, help="Use the first COUNT pools (name order).")
    ap.add_argument("--engagement", type=Path, default=HERE / "engagement.json")
    ap.add_argument("--predictor", type=Path, default=HERE / "model.onnx")
    ap.add_argument("--budget-ms", type=float, default=50.0)
    ap.add_argument("--methods", default="mgmatch,surrogate")
    ap.add_argument("--exact-time-limit-s", type=float, default=60.0, help="Limit of the fitted model's exact solve.")
    ap.add_argument("--true-time-limit-s", type=float, default=30.0,
                    help="Limit of the true objective's exact solve; unproven → the best known assignment "
                         "(the regret is then a lower bound, counted in true_best_proven).")
    ap.add_argument("--regret-count", type=int, default=None, help="Measure the true regret on the first N pools "
                                                                   "only (default: all).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the randomized solvers.")
    ap.add_argument("--json", type=Path, help="Write every number (per pool too) here.")
    args = ap.parse_args(argv)
    files = sorted(args.pools.glob("*.json"))[:args.count]
    if not files:
        ap.error(f"no *.json pools in {args.pools}")
    from mgmatch.models.runtime import OnnxPredictor

    fitted = parse_engagement(json.loads(args.engagement.read_text()), str(args.engagement))
    truth = parse_engagement(simulate.truth_model(), "truth")
    predictor = OnnxPredictor(args.predictor)
    methods = [m for m in args.methods.split(",") if m]
    solvers = {m: make_solver(m, predictor=predictor) if m in ("mgmatch", "bgcn") else make_solver(m, seed=args.seed)
               for m in methods}
    insts = [load_instance(f) for f in files]
    refs, truths = [], []
    for k, inst in enumerate(insts):
        ref, t_fit = _exact(_problem(inst, fitted, "5v5"), args.exact_time_limit_s)
        tru_pr = _problem(inst, truth, "truth")
        tru = {"status": "skipped", "objective": None, "ms": 0.0}
        if args.regret_count is None or k < args.regret_count:
            tru, _ = _exact(tru_pr, args.true_time_limit_s)
        ref["true_value"] = float(tru_pr.objective(t_fit)) if t_fit is not None else None
        if tru["objective"] is not None and ref["true_value"] is not None:
            tru["objective"] = max(tru["objective"], ref["true_value"])  # best known when not proven
        refs.append(ref)
        truths.append((tru, tru_pr))
        print(f"exact {k + 1}/{len(insts)}: fitted {ref['status']} {ref['objective']:.4f} ({ref['ms']:.0f} ms), "
              f"true best {tru['status']} {tru['objective']} ({tru['ms']:.0f} ms)", file=sys.stderr)
    for s in solvers.values():  # warm-up: first-call caches stay out of the timings
        s.solve(_problem(insts[0], fitted, "5v5"), Budget.of(args.budget_ms))
    gc.collect()
    gc.freeze()
    per_method = {}
    for m, solver in solvers.items():
        rows = []
        for k, inst in enumerate(insts):
            run, t = _timed(solver, inst, fitted, args.budget_ms)
            ref = refs[k]["objective"]
            run["gap"] = (max(0.0, (ref - run["objective"]) / max(abs(ref), 1e-9))
                          if run["feasible"] and ref is not None else 1.0)
            tru, tru_pr = truths[k]
            if t is not None and tru["objective"] is not None:
                run["true_value"] = float(tru_pr.objective(t))
                tru["objective"] = max(tru["objective"], run["true_value"])  # best known when not proven
            rows.append(run)
        per_method[m] = rows
    for m, rows in list(per_method.items()):
        for k, run in enumerate(rows):
            if "true_value" in run:
                run["regret"] = truths[k][0]["objective"] - run["true_value"]
        times = [r["ms"] for r in rows]
        regrets = [r["regret"] for r in rows if "regret" in r]
        rel = [r["regret"] / max(abs(t[0]["objective"]), 1e-9) for r, t in zip(rows, truths, strict=True)
               if "regret" in r]
        per_method[m] = {
            "mean_gap": float(np.mean([r["gap"] for r in rows])),
            "p99_gap": _pct([r["gap"] for r in rows], 99),
            "within_1pct": float(np.mean([r["gap"] <= 0.01 for r in rows])),
            "feasible_rate": float(np.mean([r["feasible"] for r in rows])),
            "mean_ms": float(np.mean(times)), "p99_ms": _pct(times, 99), "max_ms": float(max(times)),
            "mean_true_regret": float(np.mean(regrets)) if regrets else None,
            "mean_true_regret_rel": float(np.mean(rel)) if rel else None,
            "runs": rows}
    opt_k = [k for k in range(len(insts)) if refs[k]["true_value"] is not None and truths[k][0]["objective"] is not None]
    opt_regret = [truths[k][0]["objective"] - refs[k]["true_value"] for k in opt_k]
    opt_rel = [r / max(abs(truths[k][0]["objective"]), 1e-9) for k, r in zip(opt_k, opt_regret, strict=True)]
    summary = {"pools": len(insts), "budget_ms": args.budget_ms, "engagement": str(args.engagement),
               "predictor": str(args.predictor), "predictor_version": predictor.version,
               "fitted_optimum": {"proven_optimal": int(sum(r["status"] == "optimal" for r in refs)),
                                  "mean_exact_ms": float(np.mean([r["ms"] for r in refs])),
                                  "mean_true_regret": float(np.mean(opt_regret)),
                                  "mean_true_regret_rel": float(np.mean(opt_rel))},
               "true_best_proven": int(sum(t[0]["status"] == "optimal" for t in truths)),
               "true_best_measured": int(sum(t[0]["objective"] is not None for t in truths)),
               "mean_true_best": float(np.mean([t[0]["objective"] for t in truths if t[0]["objective"] is not None])),
               "methods": per_method, "references": refs}
    lines = [f"{len(insts)} held-out pools, budget {args.budget_ms:g} ms; fitted optimum proven on "
             f"{summary['fitted_optimum']['proven_optimal']}; true best measured on {summary['true_best_measured']} "
             f"(proven on {summary['true_best_proven']}, else the best known); "
             f"mean true best {summary['mean_true_best']:.4f}", "",
             "| teams chosen by | mean gap to the fitted optimum | pools within 1% | feasible | mean ms | p99 ms "
             "| true regret (mean) | true regret / true best |", "|---|---|---|---|---|---|---|---|"]
    for m, r in per_method.items():
        lines.append(f"| {m} @ {args.budget_ms:g} ms | {100 * r['mean_gap']:.2f}% | {100 * r['within_1pct']:.0f}% | "
                     f"{100 * r['feasible_rate']:.0f}% | {r['mean_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{_f(r['mean_true_regret'], 4)} | {_f(r['mean_true_regret_rel'], 2, 100)}% |")
    fo = summary["fitted_optimum"]
    lines.append(f"| exact (fitted model's optimum) | 0 | 100% | 100% | {fo['mean_exact_ms']:.0f} | – | "
                 f"{fo['mean_true_regret']:.4f} | {100 * fo['mean_true_regret_rel']:.2f}% |")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
