"""``mgmatch fit-engagement``: fit the engagement network on a match log (spec §5–6), or on a preset's simulated one.

The app layer never imports torch: the fitting pipeline is imported inside the command.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, cli, emit, fail, seed_option, short_int
from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import PRESETS

#: largest ``--matches`` / ``--holdout`` of ``--preset`` (the default is 200,000; a simulated match holds
#: D·K player indices and the fit keeps every match's features in memory, so 1e12 failed allocating)
MAX_SIM_MATCHES = 10_000_000
#: largest ``--players`` of ``--preset`` (the default world is max(20,000, matches/2) ≤ 5,000,000)
MAX_SIM_PLAYERS = 100_000_000
#: largest ``--embed-dim`` (default 12) and hidden layer width of ``--player-layers`` / ``--head-layers``
MAX_WIDTH = 4096


@contextmanager
def _logs_named() -> Iterator[None]:
    """A log-reading error of the pipeline (field ``logs``: no such file, not gzip, truncated, empty) as the
    option's: ``--logs``."""
    try:
        yield
    except InvalidInput as err:
        if err.field == "logs":
            fail(f"--logs: {err.message}")
        raise


def _widths(flag: str, text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """``"64,64"`` → (64, 64); ``""`` or ``"none"`` → () (no hidden layer)."""
    if text is None:
        return default
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        out = tuple(int(t) for t in text.split(","))
    except ValueError:
        fail(f"{flag} must be comma-separated layer widths like 64,64, got {text!r}")
    if any(w < 1 for w in out):
        fail(f"{flag}: every width must be ≥ 1, got {text!r}")
    if any(w > MAX_WIDTH for w in out):
        fail(f"{flag}: every width must be ≤ {MAX_WIDTH:,}, got {text!r}")
    return out


@cli.command("fit-engagement",
             help="Fit the engagement network (MSE) on a match log (--logs, spec §5) or on a preset's simulated "
                  "history (--preset); hold part out; write mgmatch-engagement/v1 JSON with a training record.")
def fit_cmd(
    out: Annotated[Path, typer.Option(help="Output model file (JSON); written only when the fit succeeds.")],
    logs: Annotated[list[Path] | None, typer.Option("--logs", help="Match log (JSON Lines, spec §5; .gz too). "
                                                    "Repeat for several files.")] = None,
    preset: Annotated[str | None, typer.Option(help=f"Or simulate a preset's history: {', '.join(PRESETS)}.")] = None,
    seed: Annotated[int, seed_option("--seed", help="Seed of the split, the shuffling and the initialization "
                                           "(and of the simulated world with --preset).")] = 0,
    epochs: Annotated[int | None, typer.Option(help="Most epochs (default 30 with --logs, 20 with --preset).")] = None,
    patience: Annotated[int, typer.Option(help="Early stopping: stop after this many epochs without a better "
                                               "validation MSE by 0.5% (0: off). --logs only.")] = 5,
    holdout_share: Annotated[float, typer.Option(help="Share of the log held out (seeded) for the reported "
                                                      "MSE and R².")] = 0.1,
    holdout_logs: Annotated[list[Path] | None, typer.Option("--holdout-logs", help="Held-out log instead of "
                                                            "a share of --logs (e.g. last week's matches).")] = None,
    val_share: Annotated[float, typer.Option(help="Share of the rest used for early stopping.")] = 0.1,
    embed_dim: Annotated[int, typer.Option(help="Player embedding width E.")] = 12,
    player_layers: Annotated[str | None, typer.Option(help="Hidden widths of the player MLP, e.g. 64,32.")] = None,
    head_layers: Annotated[str | None, typer.Option(help="Hidden widths of the head, e.g. 16 or 64,64 (the exact "
                                                         "MIP spends one binary per unstable head neuron).")] = None,
    head_hidden: Annotated[int | None, typer.Option(hidden=True, help="Same as --head-layers N.")] = None,
    team_layers: Annotated[str | None, typer.Option(help="The set form for many teams: widths of a team network "
                                                         "shared over the teams, e.g. 16 (its outputs are pooled "
                                                         "over the teams, then the head reads them); default: the "
                                                         "dense head over every team's embedding.")] = None,
    team_pool: Annotated[str, typer.Option(help="With --team-layers: pool the teams by sum or mean.")] = "sum",
    head_l1: Annotated[float, typer.Option(help="L1 penalty on the head's weights, added to the normalized MSE: "
                                                "sparser heads whose neurons are more often stable, which the "
                                                "exact MIP proves far faster (0: none; 3e-4 for 12v12-deep).")] = 0.0,
    batch: Annotated[int | None, typer.Option(help="Minibatch size (default 512 with --logs, 256 with --preset).")] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate of the one-cycle schedule "
                                                  "(default 3e-3 with --logs, 2e-3 with --preset).")] = None,
    threads: Annotated[int, typer.Option(help="torch CPU threads (one is fastest for these small layers on a "
                                              "busy machine).")] = 1,
    name: Annotated[str | None, typer.Option(help="Model name stored in the file (default: none; the preset's "
                                                  "name with --preset).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Also write a predicted-vs-observed PNG of the held-out "
                                                   "matches.")] = None,
    matches: Annotated[int, typer.Option(help="--preset: simulated training matches.")] = 200_000,
    players: Annotated[int | None, typer.Option(help="--preset: world size (default max(20000, matches/2)).")] = None,
    holdout: Annotated[int, typer.Option(help="--preset: held-out matches over a fresh world.")] = 20_000,
    write_log: Annotated[Path | None, typer.Option(help="--preset: keep the simulated training log here.")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bars on stderr.")] = False,
) -> None:
    if (preset is None) == (not logs):
        fail("give exactly one of --logs and --preset")
    if out.is_dir():
        fail(f"--out: {str(out)!r} is a directory; give the model file to write")
    # the folder it goes in: checked now, not after the whole fit (a file in the way ran the fit, then failed)
    for parent in (p for p in out.absolute().parents if p.exists()):
        if not parent.is_dir():
            fail(f"--out: {str(out)!r} cannot be written: {str(parent)!r} is a file, not a folder")
        break
    # and that the folder takes a new file, as the write's temp file will need (a read-only or virtual file
    # system, /proc, fails only at the write, after the whole fit)
    if out.absolute().parent.is_dir():
        import tempfile

        try:
            tempfile.TemporaryFile(dir=out.absolute().parent).close()
        except OSError as e:
            fail(f"--out: cannot write {str(out)!r}: {e.strerror or e}")
    if head_hidden is not None and head_layers is not None:
        fail("give --head-layers or --head-hidden, not both")
    head = _widths("--head-layers", head_layers if head_hidden is None else str(head_hidden), (16,))
    player = _widths("--player-layers", player_layers, (64, 32))
    team = None if team_layers is None else _widths("--team-layers", team_layers, ())
    if team is not None and not team:
        fail("--team-layers needs at least one width, e.g. 16")
    if team_pool not in ("sum", "mean"):
        fail(f"--team-pool must be sum or mean, got {team_pool!r}")
    for flag, v in (("--batch", batch), ("--embed-dim", embed_dim), ("--epochs", epochs), ("--threads", threads)):
        if v is not None and v < 1:
            fail(f"{flag} must be ≥ 1, got {v}")
    if embed_dim > MAX_WIDTH:
        fail(f"--embed-dim must be ≤ {MAX_WIDTH:,}, got {short_int(embed_dim)}")
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        fail(f"--lr must be > 0, got {lr}")
    if not (math.isfinite(head_l1) and head_l1 >= 0):
        fail(f"--head-l1 must be ≥ 0, got {head_l1}")
    if plot is not None and plot.suffix.lower() != ".png":
        fail(f"--plot must name a .png file, got {str(plot)!r}")
    arch_flags = ((f" --embed-dim {embed_dim}" if embed_dim != 12 else "")
                  + (f" --player-layers {','.join(map(str, player))}" if player != (64, 32) else "")
                  + (f" --head-layers {','.join(map(str, head)) or 'none'}" if head != (16,) else "")
                  + (f" --head-l1 {head_l1:g}" if head_l1 else "")
                  + (f" --team-layers {','.join(map(str, team))}" if team else "")
                  + (f" --team-pool {team_pool}" if team and team_pool != "sum" else "")
                  + (f" --batch {batch}" if batch is not None else "") + (f" --lr {lr:g}" if lr is not None else ""))
    if preset is not None:
        _fit_preset(preset, out, seed, epochs or 20, matches, players, holdout, batch or 256, lr or 2e-3, embed_dim,
                    player, head, threads, write_log, plot, quiet, arch_flags, head_l1, team, team_pool)
        return
    if not 0 < holdout_share < 1:
        fail(f"--holdout-share must lie in (0, 1), got {holdout_share}")
    if not 0 <= val_share < 1:
        fail(f"--val-share must lie in [0, 1), got {val_share}")
    if patience < 0:
        fail(f"--patience must be ≥ 0, got {patience}")
    if patience and val_share == 0:
        fail("--patience needs --val-share > 0 (or --patience 0)")
    for p in [*logs, *(holdout_logs or [])]:  # type: ignore[misc]
        if not p.is_file():
            fail(f"--logs: no such file {str(p)!r}")
    try:
        from mgmatch.pipeline.fit_engagement import LogFitConfig, fit_log
    except ImportError:  # no torch (the service image): a bad log is still reported as such, before that
        with _logs_named():
            _validate_logs(list(logs), holdout_logs)  # type: ignore[arg-type]
        raise

    n_epochs = epochs or 30
    cfg = LogFitConfig(epochs=n_epochs, seed=seed, holdout_share=holdout_share, val_share=val_share,
                       patience=patience, batch=batch or 512, lr=float(lr or 3e-3), player_hidden=player,
                       embed_dim=embed_dim, head_hidden=head, head_l1=head_l1, threads=threads, name=name,
                       team_hidden=team, team_pool=team_pool)
    cmd = ("mgmatch fit-engagement " + " ".join(f"--logs {shlex.quote(str(p))}" for p in logs)  # type: ignore[union-attr]
           + "".join(f" --holdout-logs {shlex.quote(str(p))}" for p in holdout_logs or [])
           + f" --seed {seed} --epochs {n_epochs}"
           + (f" --patience {patience}" if patience != 5 else "")
           + (f" --holdout-share {holdout_share:g}" if holdout_share != 0.1 and not holdout_logs else "")
           + (f" --val-share {val_share:g}" if val_share != 0.1 else "")
           + arch_flags + (f" --threads {threads}" if threads != 1 else "")
           + (f" --name {shlex.quote(name)}" if name else "") + f" --out {shlex.quote(str(out))}")
    with _logs_named():
        result = fit_log(list(logs), cfg, holdout_logs=list(holdout_logs) if holdout_logs else None,  # type: ignore[arg-type]
                         command=cmd, progress=not quiet)
    _write(result, out, plot)
    r = result.record
    emit({"out": str(out), "teams": r["teams"], "feature_dim": r["feature_dim"], "matches": r["matches"],
          "holdout": r["holdout"], "epochs_run": r["epochs_run"], "best_epoch": r["best_epoch"],
          "seconds": r["seconds"], **({"plot": str(plot)} if plot else {})})


def _validate_logs(logs: list[Path], holdout_logs: list[Path] | None) -> None:
    """Pass 1 of the log reader (numpy only, no progress bar): InvalidInput naming the file, line and field of
    the first bad line, or the log's shape when the held-out log's teams and features differ from it."""
    from mgmatch.core.errors import InvalidInput
    from mgmatch.pipeline.matchlog import measure

    shape = measure(logs)
    if holdout_logs:
        hold = measure(holdout_logs)
        if (hold.teams, hold.feature_dim) != (shape.teams, shape.feature_dim):
            raise InvalidInput("holdout_logs", f"has {hold.teams} teams × {hold.feature_dim} features; "
                                               f"the log has {shape.teams} × {shape.feature_dim}")


def _write(result, out: Path, plot: Path | None) -> None:
    """Write the fitted model (and the plot), or exit 2 naming the file that cannot be written."""
    from mgmatch.pipeline.fit_engagement import write

    try:
        write(result, out, plot)
    except OSError as e:
        fail(f"--out: cannot write {str(e.filename or out)!r}: {e.strerror or e}")


def _fit_preset(preset: str, out: Path, seed: int, epochs: int, matches: int, players: int | None, holdout: int,
                batch: int, lr: float, embed_dim: int, player: tuple[int, ...], head: tuple[int, ...], threads: int,
                write_log: Path | None, plot: Path | None, quiet: bool, arch_flags: str, head_l1: float = 0.0,
                team: tuple[int, ...] | None = None, team_pool: str = "sum") -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    for flag, v in (("--matches", matches), ("--holdout", holdout)):
        if not 1 <= v <= MAX_SIM_MATCHES:
            fail(f"{flag} must be ≥ 1 and ≤ {MAX_SIM_MATCHES:,}, got {short_int(v)}")
    # the simulator draws rating windows of 2·need … players/4 players (core.world.simulate_history), need = D·K
    least = 8 * PRESETS[preset].team_size * PRESETS[preset].teams
    if players is not None and not least <= players <= MAX_SIM_PLAYERS:
        fail(f"--players must be ≥ {least:,} (8 × the {preset} match's {least // 8} players) and "
             f"≤ {MAX_SIM_PLAYERS:,}, got {short_int(players)}")
    from mgmatch.pipeline.fit_engagement import FitConfig, fit

    cmd = (f"mgmatch fit-engagement --preset {preset} --matches {matches} --epochs {epochs} --seed {seed}"
           + (f" --players {players}" if players is not None else "")
           + (f" --holdout {holdout}" if holdout != 20_000 else "")
           + arch_flags + (f" --threads {threads}" if threads != 1 else "")
           + (f" --write-log {write_log}" if write_log else "") + f" --out {out}")
    cfg = FitConfig(preset, matches=matches, epochs=epochs, seed=seed, players=players, holdout_matches=holdout,
                    batch=batch, lr=float(lr), player_hidden=player, embed_dim=embed_dim, head_hidden=head,
                    head_l1=head_l1, threads=threads, write_log=str(write_log) if write_log else None,
                    team_hidden=team, team_pool=team_pool)
    result = fit(cfg, command=cmd, progress=not quiet)
    _write(result, out, plot)
    emit({"out": str(out), "holdout": result.record["holdout"], "seconds": result.record["seconds"]})


@bench_app.command("engagement-fidelity",
                   help="Does optimizing a 3v3 engagement model serve the ground truth? Enumerates every feasible "
                        "assignment of generated instances and compares model and true engagement.")
def fidelity_cmd(
    preset: Annotated[str, typer.Option(help="Preset (3v3: pools small enough to enumerate).")] = "3v3",
    model: Annotated[Path | None, typer.Option(help="Engagement model file (default: the shipped one).")] = None,
    count: Annotated[int, typer.Option(help="Number of instances.")] = 30,
    seed: Annotated[int, seed_option("--seed", help="Seed of the generated instances.")] = 0,
) -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    from mgmatch.core.limits import MAX_INSTANCE_COUNT

    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.presets import load_model
    from mgmatch.pipeline.fit_engagement import fidelity

    m = load_model(preset) if model is None else load_engagement(model)
    if model is not None:
        ref = load_model(preset)
        if (m.teams, m.feature_dim) != (ref.teams, ref.feature_dim):
            fail(f"--model {model}: scores {m.teams} teams of {m.feature_dim} features; preset {preset}'s players "
                 f"have {ref.feature_dim} features in {ref.teams} teams")
    emit({"model": str(model) if model else f"shipped:{preset}", **fidelity(preset, m, count, seed)})
