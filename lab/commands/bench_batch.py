"""``mgmatch bench batch``: several matches from one pool, joint partition against one match after another."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, check_time_limit_ms, fail, seed_option, short_int

#: the default pool per preset: room for this many matches among this many candidates
DEFAULTS = {"3v3": (24, 4), "12v12": (72, 3), "ffa-32": (128, 2), "br-100": (200, 2)}
#: most seeded pools one run takes (the README's runs use 20–200)
MAX_POOLS = 1_000_000


@bench_app.command("batch", help="Form up to M matches from seeded pools of N candidates twice with the same total "
                                 "budget: jointly (one solve partitions the pool) and one match after another "
                                 "(budget / M each); total engagement, time p50/p99, feasible %. A table on stdout, "
                                 "JSON with --json.")
def batch_cmd(
    preset: Annotated[str, typer.Option(help="Scenario preset (3v3, 12v12, 12v12-deep, ffa-32, br-100).")] = "3v3",
    candidates: Annotated[int | None, typer.Option(help="Candidates per pool (≤ 100; ffa-32 ≤ 128, br-100 ≤ 300); "
                                                        "default 24 (3v3), 72 (12v12), 128 (ffa-32), 200 (br-100).")] = None,
    matches: Annotated[int | None, typer.Option(help="Room for this many matches; default 4 (3v3), 3 (12v12).")] = None,
    budget_ms: Annotated[float | None, typer.Option(help="Total budget per pool, ms; default 100 × matches.")] = None,
    pools: Annotated[int, typer.Option(help="Seeded pools.")] = 20,
    method: Annotated[str, typer.Option(help="The sequential path's method (model-free).")] = "surrogate",
    seed: Annotated[int, seed_option(help="Seed of the pools.")] = 0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.core.presets import get_preset
    from mgmatch.lab.bench_batch import MAX_CANDIDATES, max_candidates, run
    from mgmatch.solvers.base import method_info

    p = get_preset(preset, "--preset")
    dc, dm = DEFAULTS.get(preset, (MAX_CANDIDATES, 2))
    matches = dm if matches is None else matches
    candidates = dc if candidates is None else candidates
    S = p.teams * p.team_size
    if matches < 1:
        fail(f"--matches must be ≥ 1, got {matches}")
    cap = max_candidates(preset)
    if not 1 <= candidates <= cap:
        fail(f"--candidates must be 1–{cap} for --preset {preset}, got {candidates}")
    if candidates < matches * S:
        fail(f"--candidates: {matches} matches of {S} players need at least {matches * S}, got {candidates}")
    budget_ms = 100.0 * matches if budget_ms is None else budget_ms
    check_time_limit_ms(budget_ms, "--budget-ms")
    if not 1 <= pools <= MAX_POOLS:
        fail(f"--pools must be ≥ 1 and ≤ {MAX_POOLS:,}, got {short_int(pools)}")
    if method_info(method, "--method").needs_predictor:
        fail(f"--method: {method!r} needs a predictor; the sequential path here runs a model-free method")
    err = Console(stderr=True)
    res = run(preset, candidates, matches, budget_ms, pools, seed, method,
              progress=lambda r: err.print(f"pool {r.pool} {r.mode}: {r.matches} matches, total {r.total:.3f}, "
                                           f"{r.time_ms:.0f} ms"))
    table = Table(title=f"batch {preset}: {candidates} candidates, room for {matches} matches, {budget_ms:g} ms total, "
                        f"{pools} pools, seed {seed} (sequential: {method}, {budget_ms / matches:g} ms per match)")
    for col in ("mode", "total engagement", "matches", "per match", "time p50 ms", "time p99 ms", "feasible %"):
        table.add_column(col, justify="right")
    for mode in ("sequential", "joint"):
        s = res["summary"][mode]
        per = "—" if s["per_match_mean"] is None else f"{s['per_match_mean']:.3f}"
        table.add_row(mode, f"{s['total_mean']:.3f}", f"{s['matches_mean']:.2f}", per, f"{s['time_p50_ms']:.0f}",
                      f"{s['time_p99_ms']:.0f}", f"{s['feasible_pct']:.0f}")
    out = Console(file=sys.stdout, width=160)
    out.print(table)
    out.print(f"joint − sequential: {res['joint_minus_sequential_mean']:+.3f} per pool; joint better on "
              f"{res['joint_wins']}, tied on {res['ties']}, worse on {res['joint_losses']} of {pools} pools")
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(res, indent=2, allow_nan=False) + "\n")
