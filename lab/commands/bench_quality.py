"""``mgmatch bench quality``: every method against the exact optimum (paper Table 2, Figure 5)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import MAX_TIME_LIMIT_MS, bench_app, check_time_limit_ms, fail, seed_option, short_int
from mgmatch.core.limits import MAX_INSTANCE_COUNT

DEFAULT_METHODS = "mgmatch,bgcn,scip,random,optmatch,local-search"


def _limit(x: float, flag: str) -> None:
    """One time limit of a list (ms): finite, > 0 and ≤ a day, else exit 2 naming ``flag``."""
    if not (x > 0 and math.isfinite(x)):
        fail(f"{flag}: every time limit must be a finite number > 0, got {x}")
    if x > MAX_TIME_LIMIT_MS:
        fail(f"{flag}: every time limit must be ≤ {MAX_TIME_LIMIT_MS:,.0f} (a day), got {x:g}")


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
    reference_method: Annotated[str, typer.Option(help="Method of the reference solve, run for --exact-time-limit-s: "
                                                       "exact, or a long search (e.g. lobby) where no exact solve "
                                                       "answers; its answers are best known, not proven.")] = "exact",
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
    from mgmatch.lab.bench_quality import budgets_markdown, run_budgets, run_quality, write_outputs

    get_preset(preset)
    from mgmatch.solvers.base import method_info

    method_info(reference_method, "reference_method")
    names = [m.strip() for m in methods.split(",") if m.strip()]
    if not names:
        fail("--methods: give at least one method")
    if len(set(names)) != len(names):
        fail(f"--methods: a method is listed twice in {methods!r}")
    check_time_limit_ms(time_limit_ms)
    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    if not (exact_time_limit_s > 0 and math.isfinite(exact_time_limit_s)):
        fail(f"--exact-time-limit-s must be a finite number > 0, got {exact_time_limit_s}")
    if exact_time_limit_s > MAX_TIME_LIMIT_MS / 1e3:
        fail(f"--exact-time-limit-s must be ≤ {MAX_TIME_LIMIT_MS / 1e3:,.0f} (a day), got {exact_time_limit_s:g}")
    try:
        ladder = [float(x) for x in ladder_ms.split(",") if x.strip()]
    except ValueError:
        fail(f"--ladder-ms: expected comma-separated numbers, got {ladder_ms!r}")
    plotted = [m.strip() for m in progress_methods.split(",") if m.strip()]
    if plotted and not ladder:
        fail("--ladder-ms: give at least one time limit for the progress runs (or --progress-methods '' for none)")
    for x in ladder:
        _limit(x, "--ladder-ms")
    budget_list = [time_limit_ms]
    if budgets is not None:
        try:
            budget_list = [float(x) for x in budgets.split(",") if x.strip()]
        except ValueError:
            fail(f"--budgets: expected comma-separated numbers, got {budgets!r}")
        if not budget_list:
            fail("--budgets: give at least one budget")
        for x in budget_list:
            _limit(x, "--budgets")
        if len(set(budget_list)) != len(budget_list):
            fail(f"--budgets: a budget is listed twice in {budgets!r}")
    sizes = None
    if pool_size is not None:
        from mgmatch.lab.bench_batch import MAX_CANDIDATES

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
                          factory=factory, progress_methods=plotted, ladder_ms=ladder, log=log, pool_size=sizes,
                          reference_method=reference_method)
        write_outputs(res, out, json_file)
        sys.stdout.write(res.markdown())
        return
    results = run_budgets(preset, names, budget_list, count, seed, exact_time_limit_s=exact_time_limit_s,
                          factory=factory, progress_methods=plotted, ladder_ms=ladder, log=log, pool_size=sizes,
                          reference_method=reference_method)
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps({"benchmark": "quality-budgets", "results": [r.to_json() for r in results]},
                                        indent=1, allow_nan=False) + "\n")
    if out is not None:
        for r in results:
            write_outputs(r, out / f"{r.time_limit_ms:g}ms", None)
    sys.stdout.write(budgets_markdown(results))
