"""Offline stage: labelled dataset → trained prediction network → ONNX + sidecar (``mgmatch train``).

Writes into ``out``: ``metrics.jsonl`` (one line per epoch), ``checkpoint.pt`` (torch state of the
best epoch), ``model.onnx`` and ``model.json`` (the runtime's files, parity-checked against torch).
With ``ship=NAME`` the ONNX and sidecar are also copied to ``models/shipped/NAME.{onnx,json}``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from pathlib import Path

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import load_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.export import export, parity
from mgmatch.models.networks import ARCHS
from mgmatch.models.runtime import SHIPPED
from mgmatch.models.train import TrainConfig, resolve_device, save_checkpoint, train

from .dataset import dataset_engagement, load_dataset, read_manifest

#: largest |p_torch − p_onnxruntime| accepted before a model is written out
PARITY_TOL = 1e-5


def load_problems(data: str | Path, limit: int | None = None, only_optimal: bool = False) -> list[tuple[Problem, np.ndarray]]:
    """``(problem, team_of*)`` for every labelled instance.

    The engagement model is the dataset's own (``DATA/engagement.json``, a game's own model) when
    it carries one, else the shipped model each record names.
    """
    own = dataset_engagement(data)
    items = []
    for inst, team_of, meta in load_dataset(data, only_optimal=only_optimal):
        if own is not None:
            items.append((Problem(inst, own, model_name=own.name), team_of))
        else:
            name = meta.get("model") or inst.engagement_model
            if name is None:
                raise InvalidInput(str(data), f"record {meta.get('index')} names no engagement model")
            items.append((Problem(inst, load_model(name), model_name=name), team_of))
        if limit is not None and len(items) >= limit:
            break
    return items


def run(data: str | Path, arch: str, epochs: int, seed: int, out: str | Path, *, limit: int | None = None,
        only_optimal: bool = False, batch_size: int = 32, lr: float = 3e-4, lr_switch: float = 0.5, hidden: int = 32, rounds: int = 2,
        threads: int = 1, device: str = "cpu", ship: str | None = None, progress: bool = True) -> dict:
    """Train, export and verify one network; returns the sidecar written.

    ``device`` is the torch device the training runs on (``cpu`` or ``cuda[:N]``; an unusable one is
    an :class:`InvalidInput` for field ``device`` before any data is read); the files written are the
    same format either way, and the sidecar's ``training`` records the device beside ``train_s``.
    """
    if arch not in ARCHS:
        raise InvalidInput("arch", f"unknown arch {arch!r}; expected one of {', '.join(ARCHS)}")
    if epochs < 1:
        raise InvalidInput("epochs", "must be ≥ 1")
    resolve_device(device)
    items = load_problems(data, limit=limit, only_optimal=only_optimal)
    if len(items) < 2:
        raise InvalidInput(str(data), f"needs at least 2 labelled instances, found {len(items)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    metrics = out / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    cfg = TrainConfig(arch=arch, epochs=epochs, seed=seed, batch_size=batch_size, lr=lr, lr_switch=lr_switch,
                      hidden=hidden, rounds=rounds, threads=threads, device=device)
    t0 = time.perf_counter()
    res = train(items, cfg, metrics_path=metrics, progress=progress)
    train_s = time.perf_counter() - t0
    save_checkpoint(res.net, out / "checkpoint.pt", {"best_epoch": res.best_epoch, "best": res.best})

    manifest = read_manifest(data) or {}
    model_names = sorted({p.model_name for p, _ in items if p.model_name})
    cmd = ["mgmatch", "train", "--data", str(data), "--arch", arch, "--epochs", str(epochs), "--seed", str(seed),
           "--out", str(out)]
    for flag, value, default in (("--limit", limit, None), ("--batch-size", batch_size, 32), ("--lr", lr, 3e-4),
                                 ("--lr-switch", lr_switch, 0.5),
                                 ("--hidden", hidden, 32), ("--rounds", rounds, 2), ("--device", device, "cpu"),
                                 ("--ship", ship, None)):
        if value != default:
            cmd += [flag, str(value)]
    if only_optimal:
        cmd.append("--only-optimal")
    training = {
        "data": str(data), "preset": manifest.get("preset"),
        "engagement_model": model_names[0] if len(model_names) == 1 else model_names,
        "instances": len(items), "n_train": res.n_train, "n_val": res.n_val, "only_optimal": only_optimal,
        "epochs": epochs, "best_epoch": res.best_epoch, "seed": seed, "batch_size": batch_size,
        "lr": [cfg.lr, cfg.lr_low], "lr_switch": lr_switch, "train_s": round(train_s, 1), "device": device,
        "val_metrics": {k: round(float(res.best[k]), 5) for k in ("val_bce", "val_acc", "val_topk")},
        "command": " ".join(shlex.quote(a) for a in cmd),
    }
    start = f" --start-ms {manifest['start_ms']:g}" if manifest and manifest.get("start_ms") else ""
    if manifest.get("source") == "instances":
        training["labels"] = {k: manifest.get(k) for k in ("instances", "count", "done", "optimal", "time_limit_s",
                                                           "start_ms", "method", "engagement_sha256")}
        training["label_command"] = (f"mgmatch label --instances {manifest.get('instances')} --engagement ENG.json "
                                     f"--time-limit-s {manifest.get('time_limit_s')}{start} --out {data}")
        training["engagement_sha256"] = manifest.get("engagement_sha256")
    elif manifest:
        training["labels"] = {k: manifest.get(k) for k in ("preset", "seed", "count", "done", "optimal", "time_limit_s",
                                                           "start_ms", "method")}
        # the label quality (time-limited labels keep their proven gap) and the engagement model they optimize
        training["labels"].update({k: manifest[k] for k in ("feasible_only", "gap_mean", "gap_max", "time_limits_s",
                                                             "start_ms_values", "model_sha256") if k in manifest})
        if manifest.get("model_sha256"):
            training["engagement_sha256"] = manifest["model_sha256"]
        training["label_command"] = (f"mgmatch label --preset {manifest.get('preset')} --count {manifest.get('count')} "
                                     f"--seed {manifest.get('seed')} --time-limit-s {manifest.get('time_limit_s')}{start} "
                                     f"--out {data}")
    check = [p for p, _ in items[: min(16, len(items))]]
    gb = batch([encode(p, res.net.cfg.encoding) for p in check])
    onnx_path = out / "model.onnx"
    meta = export(res.net, gb, onnx_path, training=training, name=ship or out.name)
    diff = parity(res.net, onnx_path, gb)
    if diff > PARITY_TOL:
        raise RuntimeError(f"ONNX export disagrees with torch by {diff:.2e} (> {PARITY_TOL})")
    meta["parity_max_abs"] = diff
    onnx_path.with_suffix(".json").write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n")
    if ship:
        SHIPPED.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(onnx_path, SHIPPED / f"{ship}.onnx")
        shutil.copyfile(onnx_path.with_suffix(".json"), SHIPPED / f"{ship}.json")
    return meta
