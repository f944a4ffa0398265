"""``mgmatch bench ab``: a replayed A/B experiment answered by a truth model, read out by the A/B report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, emit, fail, seed_option

#: most tickets the instances may turn into (one per player)
MAX_TICKETS = 1_000_000


@bench_app.command("ab", help="Replay a ticket stream through a service config with an A/B experiment (simulated "
                              "clock, real solvers), answer every match with truth(teams) + Normal(0, noise²) "
                              "(--truth: an engagement model standing in for the players) through the results "
                              "path, and print the experiment's A/B report beside the lift measured with the "
                              "truth. The stream: --tickets, or the players of --instances at --rate.")
def bench_ab_cmd(
    config: Annotated[Path, typer.Option(help="Service config (YAML) with the experiment.")],
    truth: Annotated[Path, typer.Option(help="The true engagement model (mgmatch-engagement/v1).")],
    tickets: Annotated[Path | None, typer.Option(help="A ticket stream (mgmatch-tickets/v1).")] = None,
    instances: Annotated[Path | None, typer.Option(help="A folder of instance files (spec §1) whose players "
                                                        "arrive one per ticket (instead of --tickets).")] = None,
    pool: Annotated[str | None, typer.Option(help="With --instances: the pool the tickets queue for (default: the "
                                                  "experiment's first pool).")] = None,
    rate: Annotated[float, typer.Option(help="With --instances: tickets per second.")] = 60.0,
    experiment: Annotated[str | None, typer.Option(help="The experiment (default: the config's only one).")] = None,
    noise: Annotated[float, typer.Option(help="Standard deviation of the noise added to each true result.")] = 0.0,
    alpha: Annotated[float, typer.Option(help="The report's error rate.")] = 0.05,
    seed: Annotated[int, seed_option(help="Seed of the noise and of the arrivals made from --instances.")] = 0,
    log: Annotated[Path | None, typer.Option(help="Also write the matches with their results as a match log "
                                                  "(spec §5, with `arm`).")] = None,
) -> None:
    from mgmatch.app.abreport import UnknownExperiment, experiment_config, experiment_pools
    from mgmatch.app.config import load_config
    from mgmatch.core.engagement import load_engagement
    from mgmatch.lab.ab_bench import run, stream_from_instances
    from mgmatch.lab.replay import parse_arrival, read_stream, validate

    if (tickets is None) == (instances is None):
        fail("give --tickets FILE or --instances DIR (one of them)")
    if not (math.isfinite(noise) and noise >= 0):
        fail(f"--noise must be a finite number ≥ 0, got {noise}")
    if not (math.isfinite(alpha) and 0 < alpha < 1):
        fail(f"--alpha must be in (0, 1), got {alpha}")
    if not (math.isfinite(rate) and rate > 0):
        fail(f"--rate must be a finite number > 0, got {rate}")
    if log is not None and not log.parent.is_dir():
        fail(f"--log: no such folder {str(log.parent)!r}")
    cfg = load_config(config)
    model = load_engagement(truth)
    if tickets is not None:
        arrivals = read_stream(tickets)
    else:
        if not instances.is_dir():
            fail(f"--instances: no such folder {str(instances)!r}")
        files = sorted(instances.glob("*.json"))
        if not files:
            fail(f"--instances: no *.json instance files in {str(instances)!r}")
        name = experiment or (cfg.experiments[0].name if len(cfg.experiments) == 1 else None)
        if pool is None:
            try:
                pools = experiment_pools(cfg, experiment_config(cfg, name)) if name else []
            except UnknownExperiment as err:
                fail(f"--experiment: {err.message}")
            if not pools:
                fail("--pool: name the pool the tickets queue for")
            pool = pools[0]
        lines = stream_from_instances(files, rate, seed, pool)
        if len(lines) > MAX_TICKETS:
            fail(f"--instances: {len(lines):,} players; at most {MAX_TICKETS:,}")
        arrivals = sorted((parse_arrival(x, n + 1, str(instances)) for n, x in enumerate(lines)), key=lambda a: a.time)
    validate(cfg, arrivals, str(tickets or instances))
    if model.feature_dim != len(arrivals[0].players[0]["features"]):
        fail(f"--truth: the model reads {model.feature_dim} features; the players have "
             f"{len(arrivals[0].players[0]['features'])}")
    try:
        emit(run(cfg, arrivals, model, experiment=experiment, noise=noise, seed=seed, alpha=alpha, log=log))
    except UnknownExperiment as err:
        fail(f"--experiment: {err.message}")
