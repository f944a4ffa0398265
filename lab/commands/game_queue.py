"""``mgmatch bench game-queue``: µs per insert, delete and query of the Alman–McKay game queue."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, fail, seed_option


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"--sizes: expected comma-separated integers, got {text!r}")
    if not sizes or any(n < 1 for n in sizes):
        fail(f"--sizes: expected positive integers, got {text!r}")
    return sizes


@bench_app.command("game-queue", help="Build the Alman–McKay game queue at each size, then time random inserts, "
                                      "deletes and best-game queries (mean and p99 µs); a table on stdout, JSON "
                                      "with --json.")
def game_queue_cmd(
    sizes: Annotated[str, typer.Option(help="Comma-separated queue sizes.")] = "1000,10000,100000,1000000",
    k: Annotated[int, typer.Option("--k", help="Team size k (games are k vs k).")] = 5,
    alpha: Annotated[float, typer.Option(help="Fairness weight α.")] = 1.0,
    p: Annotated[float, typer.Option("--p", help="Fairness norm p ≥ 1 (inf allowed).")] = 1.0,
    q: Annotated[float, typer.Option("--q", help="Uniformity norm q ≥ 1 (inf allowed).")] = 2.0,
    beta: Annotated[float, typer.Option(help="Time weight β of g = f + β·min entry time.")] = 0.0,
    ops: Annotated[int, typer.Option(help="Timed random operations per size (⅓ each kind).")] = 3000,
    dist: Annotated[str, typer.Option(help="Skill distribution: normal (1500±300) or uniform (0..3000).")] = "normal",
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.lab.bench_game_queue import run

    ns = _sizes(sizes)
    if k < 1:
        fail(f"--k must be ≥ 1, got {k}")
    if not (alpha >= 0) or math.isinf(alpha):
        fail(f"--alpha must be a finite number ≥ 0, got {alpha}")
    if not (beta >= 0) or math.isinf(beta):
        fail(f"--beta must be a finite number ≥ 0, got {beta}")
    if not (p >= 1):
        fail(f"--p must be ≥ 1 or inf, got {p}")
    if not (q >= 1):
        fail(f"--q must be ≥ 1 or inf, got {q}")
    if ops < 3:
        fail(f"--ops must be ≥ 3, got {ops}")
    if any(n < 2 * k for n in ns):
        fail(f"--sizes: every size must be ≥ 2k = {2 * k}")
    err = Console(stderr=True)
    res = run(ns, k, alpha, p, q, beta, ops, seed, dist,
              progress=lambda r: err.print(f"n={r.n:,}: build {r.build_s:.2f}s, insert {r.insert_us:.0f}µs, "
                                           f"delete {r.delete_us:.0f}µs, query {r.query_us:.0f}µs"))
    table = Table(title=f"game queue k={k} α={alpha:g} p={p:g} q={q:g} β={beta:g} (window W={res['window']}, "
                        f"{ops} ops/size, {dist} skills, seed {seed})")
    for col in ("n", "build s", "1st query ms", "insert µs", "delete µs", "query µs",
                "insert p99", "delete p99", "query p99", "searches"):
        table.add_column(col, justify="right")
    for r in res["results"]:
        table.add_row(f"{r['n']:,}", f"{r['build_s']:.2f}", f"{r['first_query_ms']:.1f}", f"{r['insert_us']:.0f}",
                      f"{r['delete_us']:.0f}", f"{r['query_us']:.1f}", f"{r['insert_p99_us']:.0f}",
                      f"{r['delete_p99_us']:.0f}", f"{r['query_p99_us']:.0f}", str(r["searches"]))
    Console(file=sys.stdout, width=160).print(table)
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(res, indent=2, allow_nan=False) + "\n")
