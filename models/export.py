"""ONNX export (opset 18) of a trained network, its JSON sidecar, and the torch ↔ onnxruntime check.

The exported graph takes the arrays of :class:`~mgmatch.models.encoder.GraphBatch` (dynamic node,
edge, literal and batch counts) and returns ``p`` [X], the probability of every x_ij of every graph
in the batch. Inputs a network does not read (BGCN ignores the player embeddings) are dropped by
the exporter; the runtime feeds only the inputs the session declares.

The network's torch-geometric layers (``MessagePassing`` with add/mean aggregation, ``HeteroConv``
summing over edge types) trace to standard ops: gathers for the endpoint features, and
``ScatterElements(reduction="add")`` for both aggregations (mean divides by a scattered count).
onnxruntime reproduces torch to ~1e-7 on the sigmoid output; :func:`parity` measures it and
``mgmatch train`` refuses a model above 1e-5.

Sidecar ``<model>.json`` (format ``mgmatch-predictor/v1``): architecture, graph encoding, feature
version and columns, teams, embedding width, the file's SHA-256, and how it was trained (data size,
epochs, seed, validation metrics, the reproducing command).
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import torch

from mgmatch.core.files import sha256_file

from .encoder import COND_COLUMNS, CONS_COLUMNS, EDGE_COLUMNS, FEATURE_VERSION, VAR_COLUMNS, GraphBatch
from .networks import ProbabilityNet, SolutionNet, batch_tensors

PREDICTOR_FORMAT = "mgmatch-predictor/v1"
OPSET = 18

_DYNAMIC = {
    "var_feat": {0: "V"}, "cons_feat": {0: "C"}, "edge_index": {1: "E"}, "edge_feat": {0: "E"},
    "cond_index": {1: "Q"}, "cond_feat": {0: "Q"}, "x_var": {0: "X"}, "x_token": {0: "X"},
    "player_emb": {0: "B", 1: "N"}, "player_mask": {0: "B", 1: "N"}, "p": {0: "X"},
}


def onnx_bytes(net: SolutionNet, example: GraphBatch) -> bytes:
    """Trace ``net`` (sigmoid included) on ``example`` and return the ONNX model bytes.

    Args:
        net: the network (put in eval mode).
        example: any batch; node, edge, literal, batch and pool counts stay dynamic.
    """
    net.eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(ProbabilityNet(net), batch_tensors(example), buf, opset_version=OPSET, dynamo=False,
                          input_names=list(GraphBatch.INPUT_NAMES), output_names=["p"], dynamic_axes=_DYNAMIC)
    return buf.getvalue()


def export(net: SolutionNet, example: GraphBatch, path: str | Path, training: dict | None = None,
           name: str | None = None) -> dict:
    """Write ``path`` (ONNX) and its sidecar ``path.with_suffix('.json')``; return the sidecar.

    Args:
        net: the trained network.
        example: a batch to trace on (see :func:`onnx_bytes`).
        path: the ``.onnx`` file to write.
        training: how it was trained, stored under ``training`` in the sidecar.
        name: the model's name (default: the file's stem).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(onnx_bytes(net, example))
    sha = sha256_file(path)
    meta = {
        "format": PREDICTOR_FORMAT,
        "name": name or path.stem,
        "version": f"{name or path.stem}@{sha[:12]}",
        "arch": net.cfg.arch,
        "encoding": net.cfg.encoding,
        "network": net.cfg.to_json(),
        "teams": net.cfg.teams,
        "emb_dim": net.cfg.emb_dim,
        "feature_version": FEATURE_VERSION,
        "columns": {"var": list(VAR_COLUMNS), "cons": list(CONS_COLUMNS), "edge": list(EDGE_COLUMNS),
                    "cond": list(COND_COLUMNS)},
        "opset": OPSET,
        "sha256": sha,
        "bytes": path.stat().st_size,
        "training": training or {},
    }
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n")
    return meta


def parity(net: SolutionNet, onnx_model: str | Path | bytes, gb: GraphBatch) -> float:
    """Largest |p_torch − p_onnxruntime| on one batch.

    Args:
        net: the torch network.
        onnx_model: its export, a path or the bytes.
        gb: the batch to compare on.
    """
    import onnxruntime as ort

    src = onnx_model if isinstance(onnx_model, bytes) else str(onnx_model)
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    got = sess.run(["p"], {k: v for k, v in gb.inputs().items() if k in names})[0]
    net.eval()
    with torch.no_grad():
        want = ProbabilityNet(net)(*batch_tensors(gb)).numpy()
    return float(np.abs(got - want).max())
