"""``mgmatch simulate eomm`` (EOMM's Table 2: retained players per round, four pairing methods) and
``mgmatch bench eomm`` (the real-time pairing, stage by stage)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option, short_int, simulate_app

#: most rounds of ``simulate eomm`` per pool size (the paper ran 10,000)
MAX_ROUNDS = 100_000


@simulate_app.command("eomm", help="Reproduce the shape of EOMM's Table 2: mean retained players per round for "
                                   "WorstMM, SkillMM, RandomMM and EOMM at each pool size, with Welch t-tests of "
                                   "EOMM vs each (synthetic seeded world).")
def eomm_cmd(
    pool: Annotated[list[int] | None, typer.Option("--pool", help="Pool size (even); repeat for several. "
                                                   "Default: the paper's 100 200 300 400 500.")] = None,
    rounds: Annotated[int, typer.Option(help="Rounds of matchmaking per pool size (the paper ran 10,000).")] = 20,
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write per pool size the mean retained per round "
                                                  "of each method, the Welch p-values and EOMM's pairing time per round "
                                                  "(ms: mean, p50, p95, max) to this file.")] = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.lab.sim_eomm import METHODS, PAPER_POOLS, WORLD_SIZE, simulate

    pools = list(pool) if pool else list(PAPER_POOLS)
    for p in pools:
        if p < 2 or p % 2:
            fail(f"--pool: sizes must be even and ≥ 2, got {short_int(p)}")
        if p > WORLD_SIZE:
            fail(f"--pool: sizes must be ≤ {WORLD_SIZE:,} (the synthetic world's players), got {short_int(p)}")
    if rounds < 2:
        fail(f"--rounds must be ≥ 2 (a t-test needs two rounds), got {short_int(rounds)}")
    if rounds > MAX_ROUNDS:
        fail(f"--rounds must be ≤ {MAX_ROUNDS:,}, got {short_int(rounds)}")
    t0 = time.perf_counter()
    res = simulate(pools, rounds, seed)
    wall_s = time.perf_counter() - t0
    table = Table(title=f"Mean retained players per round ({rounds} rounds, seed {seed})")
    table.add_column("Method")
    for p in pools:
        table.add_column(f"P={p}", justify="right")
    for m in METHODS:
        table.add_row(m, *[f"{res['pools'][str(p)][m]:.2f}" for p in pools])
    for m in METHODS[:-1]:
        table.add_row(f"p (EOMM vs {m})", *[_fmt(res["pools"][str(p)]["welch_p"][m]) for p in pools])
    for q in ("p50", "p95", "max"):
        table.add_row(f"EOMM pairing ms {q}", *[f"{res['pools'][str(p)]['eomm_pairing_ms'][q]:.1f}" for p in pools])
    console = Console(stderr=False)
    console.print(table)
    console.print(f"wall time {wall_s:.1f} s")
    if json_out is not None:
        doc = {"seed": seed, "rounds": rounds, "wall_s": wall_s,
               "pools": {str(p): {**{m: res["pools"][str(p)][m] for m in METHODS},
                                  "welch_p": res["pools"][str(p)]["welch_p"],
                                  "eomm_pairing_ms": res["pools"][str(p)]["eomm_pairing_ms"]} for p in pools}}
        try:
            json_out.write_text(json.dumps(doc, indent=2))
        except OSError as err:
            fail(f"--json: cannot write {json_out}: {err.strerror}")


def _fmt(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


@bench_app.command("eomm", help="Time EOMM's real-time pairing of seeded pools from the synthetic world, stage by "
                                "stage (weights, assignment duals, pruned blossom, total; ms p50/p95/max); "
                                "--dense also times rustworkx's blossom on the whole graph for comparison.")
def bench_eomm_cmd(
    pool: Annotated[int, typer.Option(help="Players per pool (even, ≥ 18).")] = 300,
    pools: Annotated[int, typer.Option(help="Pools to pair.")] = 50,
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
    dense: Annotated[bool, typer.Option("--dense", help="Also pair each pool on the whole graph with the raw "
                                                        "weights (and check the same optimum).")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the per-stage ms to this file.")] = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.lab.bench_eomm import run

    if pool < 18 or pool % 2:
        fail(f"--pool must be even and ≥ 18, got {pool}")
    if pools < 1:
        fail(f"--pools must be ≥ 1, got {pools}")
    res = run(pool, pools, seed, dense)
    table = Table(title=f"EOMM pairing, {pools} pools of {pool} players (seed {seed}; "
                        f"{res['edges_kept_mean']:.0f} of {res['edges_total']} edges kept on average)")
    for col in ("stage", "mean ms", "p50 ms", "p95 ms", "max ms"):
        table.add_column(col, justify="right" if col != "stage" else "left")
    for stage, v in res["ms"].items():
        table.add_row(stage, *[f"{v[k]:.1f}" for k in ("mean", "p50", "p95", "max")])
    Console(stderr=False).print(table)
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(res, indent=2))
        except OSError as err:
            fail(f"--json: cannot write {json_out}: {err.strerror}")
