"""``mgmatch generate``: instances of a scenario preset, plus the preset's engagement model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import cli, emit, fail, seed_option, short_int
from mgmatch.core.limits import MAX_INSTANCE_COUNT
from mgmatch.core.presets import PRESETS, generate_instances, load_model, stats


@cli.command("generate", help="Write COUNT instances of a preset (DIR/instance-00000.json, …) and DIR/engagement.json.")
def generate_cmd(
    preset: Annotated[str, typer.Option(help=f"Scenario preset: {', '.join(PRESETS)}.")],
    count: Annotated[int, typer.Option(help="Number of instances (≥ 1).")],
    out: Annotated[Path, typer.Option(help="Output folder (created if missing).")],
    seed: Annotated[int, seed_option(help="Seed; the same seed gives the same instances.")] = 0,
    show_stats: Annotated[bool, typer.Option("--stats", help="Print the average compiled size as JSON.")] = False,
) -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    if out.exists() and not out.is_dir():
        fail(f"--out: {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"--out: cannot create {out}: {err.strerror}")
    instances = generate_instances(preset, count, seed)
    width = max(5, len(str(count - 1)))
    for k, inst in enumerate(instances):
        (out / f"instance-{k:0{width}d}.json").write_text(json.dumps(inst.to_json()) + "\n")
    (out / "engagement.json").write_text(json.dumps(load_model(preset).to_json()) + "\n")
    if show_stats:
        emit({"preset": preset, "seed": seed, "out": str(out), **stats(instances)})


@cli.command("preset-stats", help="Average compiled size of a preset's instances (constraints, logical share).")
def preset_stats_cmd(
    preset: Annotated[str, typer.Option(help=f"Scenario preset: {', '.join(PRESETS)}.")],
    count: Annotated[int, typer.Option(help="Number of instances (≥ 1).")] = 200,
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
) -> None:
    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    emit({"preset": preset, "seed": seed, **stats(generate_instances(preset, count, seed))})
