#!/usr/bin/env python3
"""The inference worker's batch latency by onnxruntime execution provider: CUDA against the CPU.

For each shipped predictor named, ``--count`` held-out pools of its preset are encoded and scored in
batches of each size, on every provider this onnxruntime build has (``CUDAExecutionProvider`` with
``onnxruntime-gpu`` on a GPU machine, ``CPUExecutionProvider`` always, one thread as the service
runs it); printed per provider and batch size: median milliseconds of ``session.run`` alone and of
the whole ``predict`` (encoding and batching included), over ``--repeat`` timed runs after 3 warm-ups.

Usage: ``python scripts/gpu-inference.py --predictors 12v12,12v12-deep --batches 1,8,32,128``.
"""

from __future__ import annotations

import argparse
import time

import mgmatch  # noqa: F401  (before numpy: the package sets one BLAS thread)

# isort: split

import numpy as np
import onnxruntime as ort

from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.models.encoder import batch, encode
from mgmatch.models.runtime import load_predictor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictors", default="12v12,12v12-deep")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--count", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    sizes = [int(b) for b in args.batches.split(",")]
    if "CUDAExecutionProvider" in ort.get_available_providers() and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA and cuDNN from the nvidia-* wheels beside torch, where they are
    print(f"onnxruntime {ort.__version__}, providers {ort.get_available_providers()}, device {ort.get_device()}")
    for name in args.predictors.split(","):
        pred = load_predictor(name)
        preset = pred.meta.get("preset") or name.split("-bgcn")[0]
        problems = []
        for inst in generate_instances(preset, args.count, args.seed):
            model_name, model = resolve_model(inst)
            problems.append(Problem(inst, model, model_name=model_name))
        for provider in [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()]:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.log_severity_level = 3
            pred.session = ort.InferenceSession(str(pred.path), sess_options=opts, providers=[provider])
            for b in sizes:
                chunk = problems[:b]
                gb = batch([encode(pr, pred.encoding) for pr in chunk])
                feed = {k: v for k, v in gb.inputs().items() if k in pred.inputs}
                for _ in range(3):
                    pred.session.run(["p"], feed)
                    pred.predict(chunk)
                runs, whole = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    pred.session.run(["p"], feed)
                    runs.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    pred.predict(chunk)
                    whole.append(time.perf_counter() - t0)
                ran = pred.session.get_providers()[0].replace("ExecutionProvider", "")
                print(f"{name} {ran} batch {b}: session.run "
                      f"{1e3 * np.median(runs):.2f} ms, predict {1e3 * np.median(whole):.2f} ms "
                      f"({1e3 * np.median(whole) / b:.3f} ms per pool)", flush=True)


if __name__ == "__main__":
    main()
