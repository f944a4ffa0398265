"""``mgmatch fit-engagement``: simulate a preset's match history, fit its engagement network, write JSON.

The app layer never imports torch: the fitting pipeline is imported inside the command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, cli, emit, fail
from mgmatch.core.presets import PRESETS


@cli.command("fit-engagement", help="Simulate match history for a preset, fit the engagement network (MSE), write mgmatch-engagement/v1 JSON.")
def fit_cmd(
    preset: Annotated[str, typer.Option(help=f"Scenario preset: {', '.join(PRESETS)}.")],
    out: Annotated[Path, typer.Option(help="Output model file (JSON).")],
    matches: Annotated[int, typer.Option(help="Simulated training matches.")] = 200_000,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed for the world, the history and the fit.")] = 0,
    players: Annotated[int | None, typer.Option(help="World size (default max(20000, matches/2)).")] = None,
    holdout: Annotated[int, typer.Option(help="Held-out matches over a fresh world.")] = 20_000,
    batch: Annotated[int, typer.Option(help="Minibatch size.")] = 256,
    lr: Annotated[float, typer.Option(help="Peak learning rate (one-cycle schedule).")] = 2e-3,
    embed_dim: Annotated[int, typer.Option(help="Player embedding width E.")] = 12,
    head_hidden: Annotated[int, typer.Option(help="Neurons of the single hidden head layer.")] = 16,
    quiet: Annotated[bool, typer.Option(help="No per-epoch progress on stderr.")] = False,
) -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    for name, v in (("--matches", matches), ("--epochs", epochs), ("--holdout", holdout), ("--batch", batch),
                    ("--embed-dim", embed_dim), ("--head-hidden", head_hidden)):
        if v < 1:
            fail(f"{name} must be ≥ 1, got {v}")
    if players is not None and players < 2 * PRESETS[preset].team_size * PRESETS[preset].teams:
        fail(f"--players must be ≥ {2 * PRESETS[preset].team_size * PRESETS[preset].teams}, got {players}")
    if not lr > 0:
        fail(f"--lr must be > 0, got {lr}")
    from mgmatch.pipeline.fit_engagement import FitConfig, fit, write

    cmd = (f"mgmatch fit-engagement --preset {preset} --matches {matches} --epochs {epochs} --seed {seed}"
           + (f" --players {players}" if players is not None else "")
           + (f" --holdout {holdout}" if holdout != 20_000 else "")
           + (f" --batch {batch}" if batch != 256 else "")
           + (f" --lr {lr:g}" if lr != 2e-3 else "")
           + (f" --embed-dim {embed_dim}" if embed_dim != 12 else "")
           + (f" --head-hidden {head_hidden}" if head_hidden != 16 else "")
           + f" --out {out}")
    cfg = FitConfig(preset, matches=matches, epochs=epochs, seed=seed, players=players, holdout_matches=holdout,
                    batch=batch, lr=float(lr), embed_dim=embed_dim, head_hidden=(head_hidden,))
    log = None if quiet else (lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
    result = fit(cfg, command=cmd, log=log)
    write(result, out)
    emit({"out": str(out), "holdout": result.record["holdout"], "seconds": result.record["seconds"]})


@bench_app.command("engagement-fidelity",
                   help="Does optimizing a 3v3 engagement model serve the ground truth? Enumerates every feasible "
                        "assignment of generated instances and compares model and true engagement.")
def fidelity_cmd(
    preset: Annotated[str, typer.Option(help="Preset (3v3: pools small enough to enumerate).")] = "3v3",
    model: Annotated[Path | None, typer.Option(help="Engagement model file (default: the shipped one).")] = None,
    count: Annotated[int, typer.Option(help="Number of instances.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the generated instances.")] = 0,
) -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    if count < 1:
        fail(f"--count must be ≥ 1, got {count}")
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.presets import load_model
    from mgmatch.pipeline.fit_engagement import fidelity

    m = load_model(preset) if model is None else load_engagement(model)
    emit({"model": str(model) if model else f"shipped:{preset}", **fidelity(preset, m, count, seed)})
