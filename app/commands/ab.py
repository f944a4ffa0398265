"""``mgmatch ab report``: an A/B experiment's readout, from the service's store or from a match log."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from mgmatch.app.cli import cli, emit, fail

ab_app = typer.Typer(help="A/B experiments: read out the arms (matches, results, engagement, lift, sample ratio).",
                     no_args_is_help=True)
cli.add_typer(ab_app, name="ab")


def _num(v: float | None, digits: int = 4) -> str:
    return "–" if v is None else f"{v:.{digits}g}"


def _interval(ci: list[float] | None) -> str:
    return "–" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _p(p: float) -> str:
    if p == 0.0:  # below the smallest float: the evidence is overwhelming
        return "< 1e-300"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def render(report: dict[str, Any]) -> None:
    """The report as a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    level = f"{report['confidence']:.0%}"
    where = f"pools {', '.join(report['pools'])}" if report.get("pools") else report["source"]
    table = Table(title=f"experiment {report['experiment']} ({where}; control: {report['control']})",
                  title_justify="left")
    for col, just in (("arm", "left"), ("weight", "right"), ("matches", "right"), ("results", "right"),
                      ("engagement", "right"), ("95% CI", "right"), ("lift", "right"),
                      (f"lift {level} CS", "right"), ("p (always valid)", "right")):
        table.add_column(col, justify=just)
    for a in report["arms"]:
        lift = a["lift"]
        if a["control"]:
            lift_cells = ["control", "", ""]
        elif lift is None:
            lift_cells = [f"needs ≥ {report['min_results']} results per arm", "", ""]
        else:
            rel = f" ({lift['relative']:+.1%})" if lift["relative"] is not None else ""
            mark = " *" if lift["significant"] else ""
            lift_cells = [f"{lift['estimate']:+.4g}{rel}", _interval(lift["ci"]), _p(lift["p_value"]) + mark]
        table.add_row(a["name"], _num(a["weight"]), str(a["matches"]), str(a["results"]),
                      _num(a["engagement_mean"]), _interval(a["engagement_ci95"]), *lift_cells)
    console = Console(soft_wrap=True)
    if not console.is_terminal:  # a file or a pipe: whole rows, not wrapped at 80 columns
        console = Console(soft_wrap=True, width=200)
    console.print(table)
    srm = report["srm"]
    if srm is None:
        console.print("sample ratio: not checked (" + ("no configured weights: give --config" if any(
            a["weight"] is None for a in report["arms"]) else "fewer than two arms with matches") + ")")
    else:
        observed = ", ".join(f"{a['name']} {s:.1%}" for a, s in zip(report["arms"], srm["observed_share"], strict=True))
        expected = ", ".join(f"{s:.1%}" for s in srm["expected_share"])
        verdict = "[bold red]MISMATCH[/]: the arms did not get the configured traffic; do not trust the lift" \
            if srm["flagged"] else "ok"
        console.print(f"sample ratio: {verdict} (matches {observed}; configured {expected}; "
                      f"χ² {srm['chi2']:.3g}, p {_p(srm['p_value'])}, flagged below {srm['threshold']:g})")
    ignored = {k: v for k, v in report["ignored"].items() if v}
    if ignored:
        console.print("not counted: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in ignored.items()))
    console.print(f"* p < {report['alpha']:g}. The lift's CS and p-value stay valid however often the report is "
                  "read (mixture sequential test); the arms' 95% CI is the fixed-sample interval.")


@ab_app.command("report", help="Per arm of an experiment: matches, results, mean engagement (95% CI), lift over "
                               "the control with an always-valid confidence sequence and p-value (safe to read "
                               "while the experiment runs), and a sample-ratio-mismatch check. Reads the shared "
                               "store (--redis-url / --store redis) or a match log (--log, spec §5 lines with "
                               "`arm`).")
def report_cmd(
    experiment: Annotated[str | None, typer.Argument(help="Experiment name (config `experiments[].name`); default: "
                                                          "every experiment of the config.")] = None,
    config: Annotated[Path | None, typer.Option(help="Service config (YAML) naming the experiments (env "
                                                     "MGMATCH_CONFIG; default: the built-in one). With --log: "
                                                     "optional, gives the arms' weights.")] = None,
    store: Annotated[str | None, typer.Option(help="The store the service uses: redis (env MGMATCH_STORE; implied "
                                                   "by --redis-url).")] = None,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL (env MGMATCH_REDIS_URL); keys under "
                                                       "MGMATCH_KEY_PREFIX.")] = None,
    log: Annotated[Path | None, typer.Option(help="Read a match log (JSON Lines, spec §5; lines carry `arm`) "
                                                  "instead of the store.")] = None,
    control: Annotated[str | None, typer.Option(help="The control arm (default: the arm named `control`, else "
                                                     "the first).")] = None,
    alpha: Annotated[float, typer.Option(help="Error rate of the lift's confidence sequence and test (0 < α < 1).")
                     ] = 0.05,
    horizon: Annotated[int | None, typer.Option(help="Results (both arms) at which the confidence sequence is "
                                                     "tightest; valid at every other size too (default 1000).")
                       ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    from pydantic import ValidationError

    from mgmatch.app.abreport import UnknownExperiment, report_from_log, report_from_store
    from mgmatch.app.config import load_config
    from mgmatch.app.settings import load_settings
    from mgmatch.app.store import StoreUnavailable, make_store

    if not (math.isfinite(alpha) and 0 < alpha < 1):
        fail(f"--alpha must be in (0, 1), got {alpha:g}")
    if horizon is not None and not 1 <= horizon <= 10**9:
        fail(f"--horizon must be in 1 … 10^9, got {horizon}")
    reports: list[dict[str, Any]] = []
    try:
        if log is not None:
            if store is not None or redis_url is not None:
                fail("--log reads a match log; --store/--redis-url read the store: give one or the other")
            if log.is_dir() or not log.exists():
                fail(f"--log: no such file {str(log)!r}")
            cfg = load_config(config) if config is not None else None
            reports.append(report_from_log(log, cfg, experiment, control=control, alpha=alpha, horizon=horizon))
        else:
            try:
                settings = load_settings(config=config, store=store or ("redis" if redis_url else None),
                                         redis_url=redis_url)
            except ValidationError as err:
                first = err.errors()[0]
                fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")
            if settings.store != "redis":
                fail("--store: the memory store lives inside the serving process and ends with it; ab report reads a "
                     "shared store (--redis-url URL, or --store redis) or a match log (--log FILE)")
            cfg = load_config(settings.config)
            names = [experiment] if experiment is not None else [e.name for e in cfg.experiments]
            if not names:
                fail(f"the config ({settings.config or 'built-in'}) has no experiments")
            st = make_store(settings)
            try:
                for name in names:
                    reports.append(report_from_store(st, cfg, name, control=control, alpha=alpha, horizon=horizon))
            except StoreUnavailable as err:
                fail(f"--redis-url: cannot read the store at {settings.redis_url}: {err}")
            finally:
                st.close()
    except UnknownExperiment as err:
        fail(f"experiment: {err.message}")
    if json_out:
        emit(reports[0] if experiment is not None or log is not None else {"experiments": reports})
        return
    for r in reports:
        render(r)
