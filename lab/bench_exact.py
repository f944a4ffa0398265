"""The exact-solve benchmark: how long proving the optimum takes, per method, on a preset.

For ``count`` instances of a preset (``generate_instances(preset, count, seed)``, the preset's
shipped engagement model) every method solves each instance exactly (optionally under a time
limit). Per method: median and max wall time of ``solve`` (model building included), status
counts, and for ``scip`` the MIP's size (binaries, big-M neurons of the engagement network);
for ``enumerate`` the number of assignments searched. The methods must agree on every proven
optimum; the largest disagreement is reported (``max_objective_diff``).

``enumerate`` is skipped on instances with more than ``ENUMERATE_CAP`` assignments when there is
no time limit (it could not finish); the count is still reported.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from mgmatch.core.presets import generate_instances, load_model
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.enumerate import count_assignments
from mgmatch.solvers.exact import ENUMERATE_MAX_ASSIGNMENTS

#: an unlimited enumeration is skipped above this many assignments (≈ 1 min at ~2 M/s)
ENUMERATE_CAP = 100_000_000


@dataclass
class Run:
    method: str
    index: int
    status: str
    objective: float | None
    bound: float | None
    time_ms: float | None
    assignments: int
    binaries: int | None = None
    bigm_neurons: int | None = None
    stable_neurons: int | None = None
    engine: str | None = None


@dataclass
class MethodSummary:
    method: str
    solved: int
    statuses: dict
    median_ms: float | None
    max_ms: float | None
    median_binaries: float | None = None
    median_bigm_neurons: float | None = None


@dataclass
class ExactBench:
    preset: str
    count: int
    seed: int
    time_limit_ms: float | None
    methods: list[str]
    runs: list[Run] = field(default_factory=list)
    summaries: list[MethodSummary] = field(default_factory=list)
    median_assignments: float | None = None
    max_objective_diff: float | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def markdown(self) -> str:
        lim = "none" if self.time_limit_ms is None else f"{self.time_limit_ms:g} ms"
        lines = [f"## Exact solves: {self.preset}, {self.count} instances (seed {self.seed}, time limit {lim})", "",
                 f"Median assignments per instance: {self.median_assignments:,.0f}; "
                 f"`exact` enumerates up to {ENUMERATE_MAX_ASSIGNMENTS:,}.", "",
                 "| method | solved (optimal/infeasible) | statuses | median ms | max ms | median binaries | median big-M neurons |",
                 "|---|---|---|---|---|---|---|"]

        def f(v, fmt):
            return "–" if v is None else format(v, fmt)

        for s in self.summaries:
            st = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()))
            lines.append(f"| {s.method} | {s.solved}/{self.count} | {st} | {f(s.median_ms, '.1f')} | {f(s.max_ms, '.1f')} "
                         f"| {f(s.median_binaries, '.0f')} | {f(s.median_bigm_neurons, '.0f')} |")
        lines += ["", f"Largest objective disagreement between proven optima: {f(self.max_objective_diff, '.2e')}", ""]
        return "\n".join(lines)


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def run_exact_bench(preset: str, count: int, seed: int, methods: Sequence[str] = ("scip", "enumerate"),
                    time_limit_ms: float | None = None,
                    log: Callable[[str], None] | None = None) -> ExactBench:
    """Solve ``count`` preset instances with every method; see the module docstring."""
    model = load_model(preset)
    instances = generate_instances(preset, count, seed)
    res = ExactBench(preset, count, seed, time_limit_ms, list(methods))
    counts = []
    for k, inst in enumerate(instances):
        n_assign = count_assignments(Problem(inst, model, model_name=preset))
        counts.append(n_assign)
        for method in methods:
            problem = Problem(inst, model, model_name=preset)  # fresh: caches are part of the cost
            if method == "enumerate" and time_limit_ms is None and n_assign > ENUMERATE_CAP:
                res.runs.append(Run(method, k, "skipped", None, None, None, n_assign))
                continue
            solver = get_solver(method)
            t0 = time.perf_counter()
            sol = solver.solve(problem, Budget.of(time_limit_ms))
            ms = (time.perf_counter() - t0) * 1e3
            run = Run(method, k, sol.status, sol.objective, sol.bound, ms, n_assign)
            scip_stats = getattr(getattr(solver, "scip", solver), "last_stats", {})
            if method in ("scip", "exact") and "binaries" in scip_stats:
                if method == "scip" or getattr(solver, "last_engine", None) == "scip":
                    run.binaries = scip_stats["binaries"]
                    run.bigm_neurons = scip_stats["bigm_neurons"]
                    run.stable_neurons = scip_stats["stable_active"] + scip_stats["stable_inactive"]
            run.engine = getattr(solver, "last_engine", None)
            res.runs.append(run)
            if log:
                log(f"{preset} #{k} {method}: {sol.status} {sol.objective} in {ms:.1f} ms")
    res.median_assignments = _median(counts)
    for method in methods:
        runs = [r for r in res.runs if r.method == method and r.status != "skipped"]
        times = [r.time_ms for r in runs]
        res.summaries.append(MethodSummary(
            method, sum(r.status in ("optimal", "infeasible") for r in runs),
            dict(Counter(r.status for r in res.runs if r.method == method)),
            _median(times), max(times) if times else None,
            _median([r.binaries for r in runs if r.binaries is not None]),
            _median([r.bigm_neurons for r in runs if r.bigm_neurons is not None])))
    diffs = []
    for k in range(count):
        opt = [r.objective for r in res.runs if r.index == k and r.status == "optimal"]
        if len(opt) > 1:
            diffs.append(max(opt) - min(opt))
    res.max_objective_diff = max(diffs) if diffs else None
    return res
