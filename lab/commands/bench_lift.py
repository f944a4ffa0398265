"""``mgmatch bench lift``: skill-based matchmaking against a pool that learns, per world (:mod:`mgmatch.lab.lift`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, emit, fail, seed_option


@bench_app.command("lift", help="The learning loop's proof: per world, a skill-based history fits the starting model, "
                                "then one ticket stream is replayed against the world's truth through four arms "
                                "(skill, MGMatch fitted once, MGMatch learning, MGMatch with the truth pinned). "
                                "Reports lift capture over the last half, the per-window safety check, a PNG per "
                                "world and JSON under --out; --docs writes the Markdown page.")
def bench_lift_cmd(
    worlds: Annotated[str, typer.Option(help="Comma-separated worlds: 5v5 (examples/5v5), mentor.")] = "5v5,mentor",
    matches: Annotated[int, typer.Option(help="Matches per arm (the stream is sized for about this many).")] = 2000,
    history: Annotated[int, typer.Option(help="Matches of the skill-based history the starting model is fitted on.")] = 5000,
    window_matches: Annotated[int, typer.Option(help="Matches per window of the plot and the safety check.")] = 250,
    budget_ms: Annotated[float, typer.Option(help="Each solve's time budget (ms).")] = 30.0,
    arms: Annotated[str, typer.Option(help="Comma-separated arms (skill, fitted, learning, truth).")] = "skill,fitted,learning,truth",
    seed: Annotated[int, seed_option(help="Seed of the history, the stream, the results' noise and the refits.")] = 0,
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds, one run of every world per seed (in place "
                                                    "of --seed): the page reports each run and the worlds' means.")] = None,
    out: Annotated[Path, typer.Option(help="Folder of <world>.json, <world>.png and the run's files.")] = Path("results/lift"),
    docs: Annotated[Path | None, typer.Option(help="Also write this Markdown page (with the plots beside it).")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars on stderr.")] = True,
) -> None:
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.lift import ARMS, page, plot, run_world
    from mgmatch.lab.lift_worlds import WORLDS, get_world

    names = [w.strip() for w in worlds.split(",") if w.strip()]
    if not names:
        fail("--worlds: give at least one world")
    for n in names:
        if n not in WORLDS:
            fail(f"--worlds: unknown world {n!r}; expected one of {', '.join(WORLDS)}")
    arm_list = tuple(a.strip() for a in arms.split(",") if a.strip())
    if not arm_list or any(a not in ARMS for a in arm_list) or len(set(arm_list)) != len(arm_list):
        fail(f"--arms: give distinct arms among {', '.join(ARMS)}, got {arms!r}")
    if not 20 <= matches <= 1_000_000:
        fail(f"--matches must be in 20..1000000, got {matches}")
    if not 100 <= history <= 1_000_000:
        fail(f"--history must be in 100..1000000, got {history}")
    if not 1 <= window_matches <= matches:
        fail(f"--window-matches must be in 1..--matches, got {window_matches}")
    if not 1.0 <= budget_ms <= 60_000:
        fail(f"--budget-ms must be in 1..60000, got {budget_ms}")

    if seeds is None:
        seed_list = [seed]
    else:
        try:
            seed_list = [int(x) for x in seeds.split(",") if x.strip()]
        except ValueError:
            fail(f"--seeds: give comma-separated integers, got {seeds!r}")
        if not seed_list or len(set(seed_list)) != len(seed_list) or any(s < 0 for s in seed_list):
            fail(f"--seeds: give distinct non-negative integers, got {seeds!r}")
    multi = len(seed_list) > 1

    def bar(desc: str, total: int):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="match", file=sys.stderr, disable=not progress)

    results = []
    for n in names:
        world = get_world(n)
        for s in seed_list:
            # rounds of about two matches' worth of players (the issue's service setting), the same for every arm
            rate = 2.0
            stem = f"{n}-seed{s}" if multi else n
            try:
                res = run_world(world, matches=matches, seed=s, out=out / f"seed{s}" if multi else out,
                                budget_ms=budget_ms, window=window_matches, history=history, rate=rate,
                                interval_s=2 * world.match_size / rate, max_candidates=40, arms=arm_list, progress=bar)
            except InvalidInput as err:
                fail(str(err))
            res["stem"] = stem
            try:
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{stem}.json").write_text(json.dumps(res, indent=1, allow_nan=False) + "\n")
                plot(res, out / f"{stem}.png")
            except OSError as err:
                fail(f"--out: cannot write under {out}: {err.strerror}")
            results.append(res)
    seed_arg = f"--seeds {','.join(map(str, seed_list))}" if multi else f"--seed {seed_list[0]}"
    command = ("mgmatch bench lift --worlds " + ",".join(names) + f" --matches {matches} --history {history} "
               f"--window-matches {window_matches} --budget-ms {budget_ms:g} {seed_arg} --out {out}"
               + (f" --docs {docs}" if docs is not None else ""))
    if docs is not None:
        try:
            docs.parent.mkdir(parents=True, exist_ok=True)
            for r in results:
                shutil.copyfile(out / f"{r['stem']}.png", docs.parent / f"lift-{r['stem']}.png")
            docs.write_text(page(results, command))
        except OSError as err:
            fail(f"--docs: cannot write {docs}: {err.strerror}")
    emit({"command": command, "worlds": [{k: r.get(k) for k in ("world", "seed", "matches", "last_half_true_engagement",
                                                               "lift_capture_learning", "lift_capture_fitted")}
                                         | {"safe": r.get("safety", {}).get("safe")} for r in results]})
