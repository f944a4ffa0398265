"""``mgmatch worker matchmaker|solver|inference|webhooks|learner``: the production processes, connected by Redis."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import cli, fail

KINDS = ("matchmaker", "solver", "inference", "webhooks", "learner")


@cli.command("worker", help="Run one worker process (matchmaker, solver, inference, webhooks, or learner: the refits "
                            "of the pools with `learning:`, one per config) against Redis.")
def worker_cmd(
    kind: Annotated[str, typer.Argument(help="matchmaker | solver | inference | webhooks | learner")],
    config: Annotated[Path | None, typer.Option(help="Service config (YAML); default: built-in pools.")] = None,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL (env MGMATCH_REDIS_URL).")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Prometheus port (env MGMATCH_METRICS_PORT; 0 = none).")] = None,
    min_idle_ms: Annotated[int, typer.Option(help="Solver: take over jobs unacknowledged this long (crashed worker).")] = 10_000,
    local_predictor: Annotated[bool, typer.Option("--local-predictor/--remote-predictor",
                                                  help="Solver: run the predictor in-process instead of asking "
                                                       "inference workers.")] = False,
) -> None:
    from pydantic import ValidationError

    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import load_settings
    from mgmatch.app.store import make_store
    from mgmatch.app.workers import RemotePredictors, StartupTimeout, run_worker

    if kind not in KINDS:
        fail(f"KIND must be one of {', '.join(KINDS)}, got {kind!r}")
    if min_idle_ms < 100:
        fail(f"--min-idle-ms must be ≥ 100, got {min_idle_ms}")
    try:
        settings = load_settings(config=config, redis_url=redis_url, metrics_port=metrics_port, store="redis",
                                 embedded_workers=False)
    except ValidationError as err:
        first = err.errors()[0]
        fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = make_store(settings)  # connects lazily: a Redis down now is waited for (MGMATCH_STARTUP_WAIT_S)
    predictors = RemotePredictors(store) if kind == "solver" and not local_predictor else None
    rt = Runtime.build(settings, store=store, predictors=predictors)
    if kind == "learner" and rt.learning is None:
        fail("worker learner: no pool of the config has `learning:`")
    rt.settle()
    try:
        run_worker(kind, rt, min_idle_ms=min_idle_ms)
    except StartupTimeout as err:
        fail(str(err))
