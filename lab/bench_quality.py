"""The quality benchmark (paper Table 2 and Figure 5): every method against the exact optimum.

On held-out instances of a preset (``generate_instances(preset, count, seed)``; use a seed that
differs from the training labels'), each method runs under the same wall-clock budget. Per method:

- ``mean_objective`` — mean engagement over instances where it returned an assignment;
- ``mean_gap`` — mean of (reference − objective) / |reference| over ALL instances, an instance
  without a (checker-feasible) answer counting as gap 1 (the paper counts its objective as 0);
  ``mean_gap_found`` is the same over answered instances only;
- ``mean_time_ms`` / ``p99_time_ms`` — wall time of ``solve`` measured around the call;
- ``feasible_rate`` — share of instances answered with an assignment the checker accepts;
  ``violations`` counts answers the checker rejects (must be 0).

The reference per instance is the ``exact`` solver's optimum (proven within
``exact_time_limit_s``); where it is not proven, the best objective any method or the exact
solve found, with the exact solve's dual bound recorded (``reference: "best_known"``).

The progress plot (Figure 5) runs the plotted methods (SCIP and MGMatch by default) at a ladder of
time limits and draws mean objective against mean solve time, with the mean optimum as a line.
"""

from __future__ import annotations

import gc
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers.base import Budget, Solver, get_solver

SolverFactory = Callable[[str, Problem], Solver]
PROGRESS_METHODS = ("scip", "mgmatch")
DEFAULT_LADDER_MS = (10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


def default_factory(method: str, problem: Problem) -> Solver:
    return get_solver(method)


@dataclass
class Run:
    method: str
    index: int
    status: str
    objective: float | None
    feasible: bool
    violated: bool
    time_ms: float
    gap: float | None = None


@dataclass
class Reference:
    index: int
    objective: float | None
    bound: float | None
    status: str
    kind: str  # optimal | best_known | none
    time_ms: float


@dataclass
class QualityResult:
    preset: str
    count: int
    seed: int
    time_limit_ms: float
    methods: list[str]
    references: list[Reference]
    runs: list[Run]
    progress: dict[str, list[dict]] = field(default_factory=dict)
    pool_size: tuple[int, int] | None = None  # pools of lo–hi candidates instead of the preset's instances
    reference_method: str = "exact"          # the reference solve's method (a long search: best known only)

    def summary(self) -> dict[str, dict]:
        out = {}
        for m in self.methods:
            rs = [r for r in self.runs if r.method == m]
            found = [r for r in rs if r.feasible]
            gaps_all = [(r.gap if r.feasible and r.gap is not None else 1.0) for r in rs
                        if self.references[r.index].objective is not None]
            gaps_found = [r.gap for r in found if r.gap is not None]
            times = np.asarray([r.time_ms for r in rs]) if rs else np.zeros(1)
            out[m] = {
                "instances": len(rs),
                "mean_objective": _mean([r.objective for r in found]),
                "mean_gap": _mean(gaps_all),
                "mean_gap_found": _mean(gaps_found),
                "mean_time_ms": round(float(times.mean()), 3),
                "p99_time_ms": round(float(np.percentile(times, 99)), 3),
                "max_time_ms": round(float(times.max()), 3),
                "feasible_rate": round(len(found) / len(rs), 4) if rs else None,
                "violations": sum(r.violated for r in rs),
            }
        return out

    def to_json(self) -> dict:
        refs = [r for r in self.references if r.objective is not None]
        return {
            "benchmark": "quality",
            "preset": self.preset, "count": self.count, "seed": self.seed,
            "pool_size": None if self.pool_size is None else list(self.pool_size),
            "time_limit_ms": self.time_limit_ms,
            "reference": {
                "mean_objective": _mean([r.objective for r in refs]),
                "proven_optimal": sum(r.kind == "optimal" for r in self.references),
                "mean_time_ms": _mean([r.time_ms for r in self.references]),
                "method": self.reference_method,
            },
            "methods": self.summary(),
            "instances": [
                {"index": ref.index, "reference": ref.objective, "reference_kind": ref.kind, "bound": ref.bound,
                 "exact_time_ms": round(ref.time_ms, 3),
                 "runs": {r.method: {"status": r.status, "objective": r.objective, "gap": r.gap,
                                     "feasible": r.feasible, "time_ms": round(r.time_ms, 3)}
                          for r in self.runs if r.index == ref.index}}
                for ref in self.references
            ],
            "progress": self.progress,
        }

    def markdown(self) -> str:
        s = self.summary()
        ref = self.to_json()["reference"]
        lines = [
            f"### Quality: {self.preset}"
            + ("" if self.pool_size is None else f" pools of {self.pool_size[0]}–{self.pool_size[1]} candidates")
            + f", {self.count} held-out instances (seed {self.seed}), budget {self.time_limit_ms:g} ms",
            "",
            (f"Reference: exact optimum (proven on {ref['proven_optimal']}/{self.count}), "
             f"mean objective {_fmt(ref['mean_objective'])}, mean exact time {_fmt(ref['mean_time_ms'], 0)} ms."
             if self.reference_method == "exact" else
             f"Reference: best known (a long `{self.reference_method}` run, or any method's better answer), "
             f"mean objective {_fmt(ref['mean_objective'])}, mean reference time {_fmt(ref['mean_time_ms'], 0)} ms."),
            "",
            "| method | objective | gap (all) | gap (answered) | mean time ms | p99 time ms | feasible | violations |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in self.methods:
            r = s[m]
            lines.append(f"| {m} | {_fmt(r['mean_objective'])} | {_pct(r['mean_gap'])} | {_pct(r['mean_gap_found'])} | "
                         f"{r['mean_time_ms']:.1f} | {r['p99_time_ms']:.1f} | {_pct(r['feasible_rate'], 1)} | "
                         f"{r['violations']} |")
        return "\n".join(lines) + "\n"


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(np.mean(vals)), 6) if vals else None


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}%"


def _gap(obj: float | None, ref: float | None) -> float | None:
    if obj is None or ref is None:
        return None
    return max(0.0, (ref - obj) / max(abs(ref), 1e-9))


def run_once(solver: Solver, problem: Problem, method: str, index: int, time_limit_ms: float) -> Run:
    """One timed solve, from the state the service starts a solve in (the pool encoded, nothing an
    earlier solve of it built: :meth:`~mgmatch.core.problem.Problem.forget_solves`); the answer is
    re-checked by the checker here."""
    problem.forget_solves()
    t0 = time.perf_counter()
    sol = solver.solve(problem, Budget.of(time_limit_ms))
    ms = (time.perf_counter() - t0) * 1e3
    feasible = violated = False
    obj = None
    if sol.has_assignment:
        t = team_of_from_teams(problem.instance, sol.teams)
        ok = bool(problem.checker.feasible(t[None])[0])
        feasible, violated = ok, not ok
        obj = problem.objective(t) if ok else None
    return Run(method, index, sol.status, obj, feasible, violated, ms)


def problems_for(preset: str, count: int, seed: int, pool_size: tuple[int, int] | None = None) -> list[Problem]:
    """``count`` seeded problems: the preset's own instances, or with ``pool_size`` (lo, hi) pools of
    lo–hi candidates (drawn per pool from the seed) in the preset's world, one match each, built as
    ``mgmatch bench batch`` builds its pools (:func:`mgmatch.lab.bench_batch.pool_instance`)."""
    from mgmatch.core.presets import generate_instances, resolve_model

    if pool_size is None:
        insts = generate_instances(preset, count, seed)
    else:
        from .bench_batch import pool_instance

        lo, hi = pool_size
        sizes = np.random.default_rng([seed, 90]).integers(lo, hi + 1, size=count)
        insts = [pool_instance(preset, int(n), 1, seed + k) for k, n in enumerate(sizes)]
    out = []
    for inst in insts:
        name, model = resolve_model(inst)
        out.append(Problem(inst, model, model_name=name))
    return out


def run_quality(preset: str, methods: Sequence[str], time_limit_ms: float, count: int, seed: int,
                exact_time_limit_s: float = 60.0, factory: SolverFactory = default_factory,
                progress_methods: Sequence[str] = PROGRESS_METHODS,
                ladder_ms: Sequence[float] = DEFAULT_LADDER_MS,
                log: Callable[[str], None] | None = None,
                pool_size: tuple[int, int] | None = None, reference_method: str = "exact") -> QualityResult:
    """Run the benchmark; see the module docstring.

    Args:
        factory: builds the solver of a method, once, from the first problem (the CLI passes one
            that loads the shipped predictors for mgmatch/bgcn); it may raise for a method that
            is unavailable. The same solver then serves every instance of the preset.
        progress_methods: methods drawn in the progress plot (those also in ``methods``).
        ladder_ms: time limits of the progress runs.
        pool_size: (lo, hi): pools of lo–hi candidates instead of the preset's instances
            (:func:`problems_for`).
        reference_method: the method of the reference solve, run for ``exact_time_limit_s`` (default
            ``exact``; a long run of a search, e.g. ``lobby``, where no exact solve answers: its answer is
            then a best known, never a proven optimum).
    """
    return run_budgets(preset, methods, [time_limit_ms], count, seed, exact_time_limit_s, factory,
                       progress_methods, ladder_ms, log, pool_size, reference_method)[0]


def run_budgets(preset: str, methods: Sequence[str], budgets_ms: Sequence[float], count: int, seed: int,
                exact_time_limit_s: float = 60.0, factory: SolverFactory = default_factory,
                progress_methods: Sequence[str] = (), ladder_ms: Sequence[float] = DEFAULT_LADDER_MS,
                log: Callable[[str], None] | None = None,
                pool_size: tuple[int, int] | None = None, reference_method: str = "exact") -> list[QualityResult]:
    """:func:`run_quality` at several budgets on the same problems and exact references.

    Methods take turns per instance and budget (method after method on one instance, then the
    next, the order rotating per instance), so a change of machine load over the run hits every
    method alike. The progress runs
    (when asked) go with the first budget's result.
    """
    problems = problems_for(preset, count, seed, pool_size)
    say = log or (lambda _m: None)
    # build every method first: an unavailable one fails before the long exact solves
    solvers = {m: factory(m, problems[0]) for m in methods} if problems else {}
    refs: list[Reference] = []
    exact = get_solver(reference_method) if reference_method == "exact" else factory(reference_method, problems[0])
    for k, pr in enumerate(problems):
        t0 = time.perf_counter()
        sol = exact.solve(pr, Budget.of(exact_time_limit_s * 1e3))
        pr.forget_solves()
        ms = (time.perf_counter() - t0) * 1e3
        kind = "optimal" if sol.status == "optimal" else ("best_known" if sol.has_assignment else "none")
        refs.append(Reference(k, sol.objective, sol.bound, sol.status, kind, ms))
        say(f"{reference_method} {k + 1}/{count}: {sol.status} {sol.objective} in {ms:.0f} ms")
    if problems:  # warm-up: imports and first-call caches stay out of the timings
        for s in solvers.values():
            for lim in budgets_ms:
                s.solve(problems[0], Budget.of(lim))
    # as the service does after start-up (app/runtime.py): the long-lived heap (problems, models,
    # solvers) leaves the collector's scans, else a generation-2 collection triggered inside a
    # timed solve stalls it by 15-40 ms on this heap
    gc.collect()
    gc.freeze()
    runs_of: dict[float, list[Run]] = {lim: [] for lim in budgets_ms}
    for k, pr in enumerate(problems):
        for lim in budgets_ms:
            # the order rotates per instance: the first solve of an instance warms per-instance
            # caches (enumeration patterns, encoder buffers) for the methods after it
            r = k % len(methods)
            for m in list(methods[r:]) + list(methods[:r]):
                runs_of[lim].append(run_once(solvers[m], pr, m, k, lim))
        say(f"instance {k + 1}/{count}: done")
    # the reference of an instance without a proven optimum is the best anyone found at any budget
    all_runs = [r for rs in runs_of.values() for r in rs]
    for ref in refs:
        if ref.kind != "optimal":
            found = [r.objective for r in all_runs if r.index == ref.index and r.objective is not None]
            if ref.objective is not None:
                found.append(ref.objective)
            if found:
                ref.objective, ref.kind = max(found), "best_known"
    for r in all_runs:
        r.gap = _gap(r.objective, refs[r.index].objective)
    results = [QualityResult(preset, count, seed, lim, list(methods), refs, runs_of[lim], pool_size=pool_size,
                             reference_method=reference_method) for lim in budgets_ms]
    res = results[0]
    for m in progress_methods:
        if m not in methods:
            continue
        pts = []
        for lim in ladder_ms:
            rs = [run_once(solvers[m], pr, m, k, lim) for k, pr in enumerate(problems)]
            objs = [r.objective if r.objective is not None else 0.0 for r in rs]
            gaps = [(_gap(r.objective, refs[r.index].objective) if r.feasible else 1.0) for r in rs
                    if refs[r.index].objective is not None]
            pts.append({"time_limit_ms": lim, "mean_time_ms": round(float(np.mean([r.time_ms for r in rs])), 3),
                        "mean_objective": round(float(np.mean(objs)), 6) if objs else None,
                        "mean_gap": _mean(gaps), "feasible_rate": round(float(np.mean([r.feasible for r in rs])), 4)})
            say(f"progress {m} @ {lim:g} ms: {pts[-1]}")
        res.progress[m] = pts
    return results


def plot_progress(res: QualityResult, path: str | Path) -> None:
    """Figure 5: mean objective (no answer counts 0, as in the paper) against mean solve time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for m, pts in res.progress.items():
        xs = [p["mean_time_ms"] for p in pts]
        ys = [p["mean_objective"] for p in pts]
        ax.plot(xs, ys, marker="o", label=m)
    opt = res.to_json()["reference"]["mean_objective"]
    if opt is not None and math.isfinite(opt):
        proven = all(r.kind == "optimal" for r in res.references)
        ax.axhline(opt, color="gray", linestyle="--",
                   label="optimum (exact)" if proven else "best known (optimum not proven)")
    ax.set_xscale("log")
    ax.set_xlabel("mean solve time (ms, log scale)")
    ax.set_ylabel("mean engagement objective")
    ax.set_title(f"Solving progress, {res.preset} ({res.count} instances)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def budgets_markdown(results: Sequence[QualityResult]) -> str:
    """One table over budgets: mean gap (all instances), p99 time and answered share per method."""
    if not results:
        return ""
    r0 = results[0]
    world = r0.preset + ("" if r0.pool_size is None else f" pools of {r0.pool_size[0]}–{r0.pool_size[1]}")
    lines = [f"### Budgets: {world}, {r0.count} held-out instances (seed {r0.seed})", "",
             "| budget ms | " + " | ".join(f"{m} gap / p99 ms / answered" for m in r0.methods) + " |",
             "|---|" + "---|" * len(r0.methods)]
    for res in results:
        s = res.summary()
        cells = [f"{_pct(s[m]['mean_gap'])} / {s[m]['p99_time_ms']:.1f} / {_pct(s[m]['feasible_rate'], 0)}"
                 for m in res.methods]
        lines.append(f"| {res.time_limit_ms:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(res: QualityResult, out_dir: str | Path | None, json_file: str | Path | None) -> list[str]:
    """Markdown + JSON (+ PNG when there is progress) into ``out_dir``; JSON also to ``json_file``."""
    written = []
    doc = res.to_json()
    if json_file is not None:
        Path(json_file).parent.mkdir(parents=True, exist_ok=True)
        Path(json_file).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        written.append(str(json_file))
    if out_dir is not None:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        stem = f"quality-{res.preset}"
        (d / f"{stem}.md").write_text(res.markdown())
        (d / f"{stem}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        written += [str(d / f"{stem}.md"), str(d / f"{stem}.json")]
        if res.progress:
            plot_progress(res, d / f"progress-{res.preset}.png")
            written.append(str(d / f"progress-{res.preset}.png"))
    return written
