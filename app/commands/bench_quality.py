"""``mgmatch bench quality``: every method against the exact optimum (paper Table 2, Figure 5)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option

DEFAULT_METHODS = "mgmatch,bgcn,scip,random,optmatch,local-search"


@bench_app.command("quality", help="Objective, gap to the exact optimum, mean/p99 time and feasibility rate per "
                                   "method on held-out preset instances; Markdown on stdout, JSON and a "
                                   "progress PNG (objective vs time, Figure 5) on request.")
def quality_cmd(
    preset: Annotated[str, typer.Option(help="Scenario preset (3v3, 12v12, 12v12-deep).")] = "3v3",
    methods: Annotated[str, typer.Option(help="Comma-separated methods.")] = DEFAULT_METHODS,
    time_limit_ms: Annotated[float, typer.Option("--time-limit-ms", help="Budget per solve (ms).")] = 100.0,
    count: Annotated[int, typer.Option(help="Held-out instances.")] = 20,
    seed: Annotated[int, seed_option(help="Seed of the held-out instances (use one unlike the labels').")] = 1_000_003,
    exact_time_limit_s: Annotated[float, typer.Option("--exact-time-limit-s", help="Time limit of the reference exact solve.")] = 60.0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for quality-<preset>.md/.json and progress-<preset>.png.")] = None,
    progress_methods: Annotated[str, typer.Option(help="Methods in the progress plot (those also benchmarked); '' for none.")] = "scip,mgmatch",
    ladder_ms: Annotated[str, typer.Option(help="Time limits (ms) of the progress runs.")] = "10,20,50,100,200,500,1000",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress on stderr.")] = False,
    budgets: Annotated[str | None, typer.Option(help="Comma-separated budgets (ms), e.g. 10,20,50,100: every "
                                                     "method at each on the same instances and references, "
                                                     "one table over budgets (replaces --time-limit-ms).")] = None,
    pool_size: Annotated[str | None, typer.Option(help="LO-HI: pools of LO–HI candidates in the preset's world "
                                                       "(one match each, built as bench batch builds its pools) "
                                                       "instead of the preset's instances, e.g. 90-100.")] = None,
) -> None:
    from mgmatch.app.resolve import make_solver
    from mgmatch.core.presets import get_preset
    from mgmatch.pipeline.bench_quality import budgets_markdown, run_budgets, run_quality, write_outputs

    get_preset(preset)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    if not names:
        fail("--methods: give at least one method")
    if len(set(names)) != len(names):
        fail(f"--methods: a method is listed twice in {methods!r}")
    if not time_limit_ms > 0:
        fail(f"--time-limit-ms must be > 0, got {time_limit_ms}")
    if count < 1:
        fail(f"--count must be ≥ 1, got {count}")
    if not exact_time_limit_s > 0:
        fail(f"--exact-time-limit-s must be > 0, got {exact_time_limit_s}")
    try:
        ladder = [float(x) for x in ladder_ms.split(",") if x.strip()]
    except ValueError:
        fail(f"--ladder-ms: expected comma-separated numbers, got {ladder_ms!r}")
    if any(not x > 0 for x in ladder):
        fail("--ladder-ms: every time limit must be > 0")
    plotted = [m.strip() for m in progress_methods.split(",") if m.strip()]
    budget_list = [time_limit_ms]
    if budgets is not None:
        try:
            budget_list = [float(x) for x in budgets.split(",") if x.strip()]
        except ValueError:
            fail(f"--budgets: expected comma-separated numbers, got {budgets!r}")
        if not budget_list or any(not x > 0 for x in budget_list):
            fail("--budgets: give at least one budget, every budget > 0")
        if len(set(budget_list)) != len(budget_list):
            fail(f"--budgets: a budget is listed twice in {budgets!r}")
    sizes = None
    if pool_size is not None:
        from mgmatch.pipeline.bench_batch import MAX_CANDIDATES

        lo_s, sep, hi_s = pool_size.partition("-")
        try:
            sizes = (int(lo_s), int(hi_s) if sep else int(lo_s))
        except ValueError:
            fail(f"--pool-size: expected LO-HI candidates (e.g. 90-100), got {pool_size!r}")
        preset_obj = get_preset(preset)
        need = preset_obj.teams * preset_obj.team_size
        if not need <= sizes[0] <= sizes[1] <= MAX_CANDIDATES:
            fail(f"--pool-size: need {need} ≤ LO ≤ HI ≤ {MAX_CANDIDATES} for {preset}, got {pool_size!r}")

    def factory(method: str, problem):
        try:
            return make_solver(method, problem, seed=seed)
        except Exception as err:  # any failure to build a method is reported by its name
            msg = str(err).splitlines()[0] if str(err) else type(err).__name__
            fail(f"method {method!r} is not available: {msg}")

    log = (lambda m: sys.stderr.write(m + "\n")) if verbose else None
    if budgets is None:
        res = run_quality(preset, names, time_limit_ms, count, seed, exact_time_limit_s=exact_time_limit_s,
                          factory=factory, progress_methods=plotted, ladder_ms=ladder, log=log, pool_size=sizes)
        write_outputs(res, out, json_file)
        sys.stdout.write(res.markdown())
        return
    results = run_budgets(preset, names, budget_list, count, seed, exact_time_limit_s=exact_time_limit_s,
                          factory=factory, progress_methods=plotted, ladder_ms=ladder, log=log, pool_size=sizes)
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps({"benchmark": "quality-budgets", "results": [r.to_json() for r in results]},
                                        indent=1, allow_nan=False) + "\n")
    if out is not None:
        for r in results:
            write_outputs(r, out / f"{r.time_limit_ms:g}ms", None)
    sys.stdout.write(budgets_markdown(results))
