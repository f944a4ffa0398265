"""``mgmatch train``: labelled dataset → trained prediction network (ONNX + sidecar).

The torch side is imported only when the command runs, so the service image (no torch) can load
the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import bench_app, cli, emit, fail, seed_option, short_int

_ARCHS = ("mgmatch", "bgcn", "bgcn-bigm", "bgcn-lc", "bgcn-te")
#: largest ``--hidden`` (the default and every shipped model: 32; 4,000,000 failed allocating in torch)
MAX_HIDDEN = 4096
#: most ``--rounds`` (the default and every shipped model: 2)
MAX_ROUNDS = 64


@cli.command("train", help="Train a solution-prediction network on a labelled dataset; export ONNX (prints the sidecar).")
def train_cmd(
    data: Annotated[Path, typer.Option("--data", help="Dataset directory written by `mgmatch label`.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory (metrics.jsonl, checkpoint.pt, model.onnx, model.json).")],
    arch: Annotated[str, typer.Option("--arch", help="mgmatch | bgcn | bgcn-bigm | bgcn-lc | bgcn-te")] = "mgmatch",
    epochs: Annotated[int, typer.Option("--epochs", help="Epochs in all (first --lr-switch share at --lr, the rest at 3e-6).")] = 20,
    seed: Annotated[int, seed_option("--seed", help="Seed: split, shuffling, initialization.")] = 0,
    limit: Annotated[int | None, typer.Option("--limit", help="Use at most this many labelled instances.")] = None,
    only_optimal: Annotated[bool, typer.Option("--only-optimal", help="Keep only labels proven optimal.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Graphs per mini-batch.")] = 32,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate of the first phase (the paper: 3e-4).")] = 3e-4,
    lr_switch: Annotated[float, typer.Option("--lr-switch", help="Share of epochs at --lr before dropping to 3e-6.")] = 0.5,
    hidden: Annotated[int, typer.Option("--hidden", help="Hidden width d_h.")] = 32,
    rounds: Annotated[int, typer.Option("--rounds", help="Graph-convolution rounds K.")] = 2,
    threads: Annotated[int, typer.Option("--threads", help="torch CPU threads.")] = 1,
    device: Annotated[str, typer.Option("--device", help="torch device for training: cpu (default) or cuda[:N]; "
                                        "the exported ONNX model is the same format either way")] = "cpu",
    ship: Annotated[str | None, typer.Option("--ship", help="Also copy the model to models/shipped/NAME.{onnx,json}.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    if arch not in _ARCHS:
        fail(f"--arch must be one of {', '.join(_ARCHS)}, got {arch!r}")
    if epochs < 1:
        fail(f"--epochs must be ≥ 1, got {epochs}")
    if batch_size < 1:
        fail(f"--batch-size must be ≥ 1, got {batch_size}")
    if not 0.0 < lr < 1.0:
        fail(f"--lr must be in (0, 1), got {lr}")
    if not 0.0 < lr_switch <= 1.0:
        fail(f"--lr-switch must be in (0, 1], got {lr_switch}")
    if hidden < 4 or hidden % 4 or hidden > MAX_HIDDEN:
        fail(f"--hidden must be a positive multiple of 4 and ≤ {MAX_HIDDEN:,}, got {short_int(hidden)}")
    if not 1 <= rounds <= MAX_ROUNDS:
        fail(f"--rounds must be ≥ 1 and ≤ {MAX_ROUNDS}, got {short_int(rounds)}")
    if threads < 1:
        fail(f"--threads must be ≥ 1, got {short_int(threads)}")
    if limit is not None and limit < 1:  # --limit caps the instances used; leave it out to use them all
        fail(f"--limit must be ≥ 1 (leave it out to use every labelled instance), got {short_int(limit)}")
    if not data.is_dir():
        fail(f"--data {data}: no such dataset directory")
    if out.exists() and not out.is_dir():
        fail(f"--out {out} exists and is not a directory")
    if ship is not None and (not ship or "/" in ship or ship.startswith(".")):
        fail(f"--ship must be a plain name like '3v3', got {ship!r}")
    try:
        from mgmatch.pipeline.train import run
    except ImportError:  # no torch (the service image): a bad dataset is still reported as such, before that
        _validate_dataset(data, limit, only_optimal)
        raise

    emit(run(data, arch, epochs, seed, out, limit=limit, only_optimal=only_optimal, batch_size=batch_size,
             lr=lr, lr_switch=lr_switch, hidden=hidden, rounds=rounds, threads=threads, device=device, ship=ship,
             progress=not quiet))


def _validate_dataset(data: Path, limit: int | None, only_optimal: bool) -> None:
    """What ``pipeline.train.run`` checks of ``--data`` without torch: the manifest, the engagement model the
    dataset pins, and at least 2 labelled instances (InvalidInput or exit 2 naming the problem)."""
    from mgmatch.pipeline.dataset import dataset_engagement, load_dataset

    dataset_engagement(data)
    found = len(load_dataset(data, only_optimal=only_optimal))
    if limit is not None:
        found = min(found, max(limit, 0))
    if found < 2:
        fail(f"--data {data}: needs at least 2 labelled instances, found {found}")


@bench_app.command("predictor", help="Time a solution predictor (encode + onnxruntime) per instance; optionally score it on labels.")
def bench_predictor_cmd(
    predictor: Annotated[str, typer.Option("--predictor", help="Shipped name (3v3, 12v12, 3v3-bgcn, …) or an .onnx path.")] = "3v3",
    preset: Annotated[str | None, typer.Option("--preset", help="Generate instances of this preset (default: the predictor's).")] = None,
    count: Annotated[int, typer.Option("--count", help="Instances to time.")] = 200,
    seed: Annotated[int, seed_option("--seed", help="Generator seed.")] = 0,
    batch: Annotated[int, typer.Option("--batch", help="Problems per predict() call.")] = 1,
    threads: Annotated[int, typer.Option("--threads", help="onnxruntime CPU threads.")] = 1,
    data: Annotated[Path | None, typer.Option("--data", help="Labelled dataset: also report BCE / accuracy / top-K hit rate.")] = None,
    start: Annotated[int, typer.Option("--start", help="With --data: use records with index ≥ START (held out).")] = 0,
) -> None:
    import time

    import numpy as np

    from mgmatch.core.limits import MAX_INSTANCE_COUNT
    from mgmatch.core.presets import PRESETS, generate_instances, load_model
    from mgmatch.core.problem import Problem
    from mgmatch.models.runtime import load_predictor

    if not 1 <= count <= MAX_INSTANCE_COUNT:
        fail(f"--count must be ≥ 1 and ≤ {MAX_INSTANCE_COUNT:,}, got {short_int(count)}")
    if not 1 <= batch <= count:
        fail(f"--batch must be ≥ 1 and ≤ --count ({count}), got {short_int(batch)}")
    if not 1 <= threads <= 256:
        fail(f"--threads must be ≥ 1 and ≤ 256, got {short_int(threads)}")
    if preset is not None and preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    pred = load_predictor(predictor, threads=threads)
    name = preset or (pred.meta.get("training") or {}).get("preset")
    if name is None:
        fail("--preset is required: the predictor's sidecar names no preset")
    if name not in PRESETS:
        fail(f"--preset is required: the predictor's sidecar names preset {name!r}, which is not one of "
             f"{', '.join(PRESETS)}")
    model = load_model(name)
    problems = [Problem(i, model, model_name=name) for i in generate_instances(name, count, seed)]
    why = pred.problem_mismatch(problems[0])
    if why is not None:
        fail(f"--preset {name}: predictor {why[1]}")
    for p in problems:  # per-instance constants the service computes once per request anyway
        p.embeddings, p.compiled  # noqa: B018
    pred.predict(problems[:batch])  # warm-up
    times, cpu = [], []
    for s in range(0, count, batch):
        chunk = problems[s:s + batch]
        t0, c0 = time.perf_counter(), time.process_time()
        pred.predict(chunk)
        times.append((time.perf_counter() - t0) * 1e3 / len(chunk))
        cpu.append((time.process_time() - c0) * 1e3 / len(chunk))
    t = np.asarray(times)
    out = {"predictor": pred.version, "device": pred.device, "preset": name, "count": count, "batch": batch,
           "threads": threads, "ms_per_instance_mean": round(float(t.mean()), 3),
           "ms_per_instance_p50": round(float(np.percentile(t, 50)), 3),
           "ms_per_instance_p95": round(float(np.percentile(t, 95)), 3),
           # CPU time of this process: what the wall time would be on an idle core
           "cpu_ms_per_instance_mean": round(float(np.mean(cpu)), 3)}
    if data is not None:
        from mgmatch.pipeline.dataset import load_dataset

        recs = [(i, t_of, m) for i, t_of, m in load_dataset(data) if m.get("index", 0) >= start]
        if not recs:
            fail(f"--data {data}: no labelled records with index ≥ {start}")
        probs = [Problem(i, load_model(m.get("model") or name)) for i, _, m in recs]
        ps = pred.predict(probs)
        bce, correct, n, hits, pos = 0.0, 0, 0, 0, 0
        for (inst, t_of, _), p in zip(recs, ps, strict=True):
            y = (t_of[:, None] == np.arange(inst.teams)[None, :]).astype(float)
            q = np.clip(p, 1e-7, 1 - 1e-7)
            bce += float(-(y * np.log(q) + (1 - y) * np.log(1 - q)).sum())
            correct += int(((p >= 0.5) == (y >= 0.5)).sum())
            n += y.size
            top = np.argsort(-p, axis=None, kind="stable")[: inst.n_selected]
            hits += int(y.reshape(-1)[top].sum())
            pos += int(y.sum())
        out.update({"labelled": len(recs), "bce": round(bce / n, 5), "acc": round(correct / n, 5),
                    "topk": round(hits / max(pos, 1), 5)})
    emit(out)
