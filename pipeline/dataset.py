"""The labelled dataset on disk (written by ``mgmatch label``) and its loader.

Format ``mgmatch-labels/v1`` — a directory::

    DIR/manifest.json        what the dataset is (see below), rewritten after every run
    DIR/shard-00000.jsonl    records of instance indexes 0 … SHARD_SIZE−1, one JSON object per line
    DIR/shard-00001.jsonl    indexes SHARD_SIZE … 2·SHARD_SIZE−1, …

``manifest.json``::

    {"format": "mgmatch-labels/v1", "preset": "3v3", "seed": 0, "count": 1000,
     "time_limit_s": 60.0, "method": "exact", "shard_size": 1000, "model": "3v3",
     "model_sha256": "9f2c…",          # SHA-256 of the shipped engagement-<preset>.json labelled with
     "done": 1000, "optimal": 987, "runs": [{...throughput of each run...}],
     "feasible_only": 13, "without_solution": 0,     # labels that are time-limited best solutions / none
     "gap_mean": 0.0004, "gap_max": 0.021,           # proven relative gaps over labels with an assignment
     "time_limits_s": [60.0],                        # every limit the records were solved under
     "start_ms": 300.0, "start_ms_values": [300.0]}  # the last run's start (0: none), every one used

``model_sha256`` pins the preset's engagement model: resuming a dataset after the shipped model
changed is refused (the labels would optimize two objectives). Manifests written before the pin
and the summary fields lack them; readers treat every one of these fields as optional.

One record (one line; JSON only, never pickle)::

    {"index": 17,                      # position in the dataset; instance seed derives from (seed, index)
     "instance_seed": 123456789,       # the seed the preset generator was called with
     "instance": {...},                # mgmatch-instance/v1
     "model": "3v3",                   # engagement model name (the preset's)
     "status": "optimal",              # exact solver status: optimal | feasible | infeasible | no_solution
     "optimal": true,                  # proven optimal (gap 0 within tolerance)
     "team_of": [0, -1, 1, ...],       # best assignment: team per player, −1 bench; null when none
     "objective": 5.71, "bound": 5.71, "gap": 0.0,   # engagement, proven upper bound, relative gap
     "time_ms": 812.4, "method": "exact", "time_limit_s": 60.0,
     "start_ms": 300.0, "start_objective": 5.70}     # only with a start: SCIP began from the answer
                                                     # `surrogate` found in start_ms (within the limit)

A dataset labelled from a game's own instance files (``mgmatch label --instances DIR
--engagement ENG.json``) has ``"source": "instances"`` in its manifest, a copy of the engagement
model in ``DIR/engagement.json`` pinned by ``engagement_sha256``, ``"preset": null``, and each
record names its instance ``file``; ``model`` is the engagement model's ``name`` (or null).

Records are appended (and flushed to disk) one at a time by the single writer process as solves
finish, so a crash loses at most the solves in flight; a torn last line is ignored on reading. An
index may appear twice only if two runs raced; the later record wins. Where the optimum was out
of reach within the time limit the record keeps the best solution with ``status: "feasible"``,
``optimal: false`` and its proven ``gap``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, parse_instance

DATASET_FORMAT = "mgmatch-labels/v1"
MANIFEST = "manifest.json"
#: a dataset labelled from instance files keeps its engagement model here (pinned in the manifest)
ENGAGEMENT_FILE = "engagement.json"
SHARD_SIZE = 1000


def shard_path(root: Path, index: int, shard_size: int = SHARD_SIZE) -> Path:
    return root / f"shard-{index // shard_size:05d}.jsonl"


def read_manifest(root: str | Path) -> dict | None:
    p = Path(root) / MANIFEST
    if not p.exists():
        return None
    try:
        m = json.loads(p.read_text())
    except json.JSONDecodeError as err:
        raise InvalidInput(str(p), f"not valid JSON: {err.msg}") from None
    if not isinstance(m, dict) or m.get("format") != DATASET_FORMAT:
        raise InvalidInput(str(p), f"not a {DATASET_FORMAT} manifest")
    return m


def write_manifest(root: str | Path, manifest: dict) -> None:
    """Atomically replace the manifest (write a temporary file, then rename)."""
    p = Path(root) / MANIFEST
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, p)


def dataset_engagement(root: str | Path, manifest: dict | None = None):
    """The engagement model a dataset was labelled with, when it carries one (else None).

    Raises:
        InvalidInput: the copy is missing or its SHA-256 differs from the manifest's pin.
    """
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.files import sha256_file

    m = manifest if manifest is not None else read_manifest(root)
    if not m or not m.get("engagement_sha256"):
        return None
    path = Path(root) / m.get("engagement", ENGAGEMENT_FILE)
    if not path.is_file():
        raise InvalidInput(str(path), "the dataset's engagement model is missing")
    if sha256_file(path) != m["engagement_sha256"]:
        raise InvalidInput(str(path), "the dataset's engagement model does not match the SHA-256 in its manifest")
    return load_engagement(path)


def iter_records(root: str | Path) -> Iterator[dict]:
    """Every complete record of every shard, in file order (torn or foreign lines skipped)."""
    for shard in sorted(Path(root).glob("shard-*.jsonl")):
        with shard.open() as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash mid-write
                if isinstance(rec, dict) and isinstance(rec.get("index"), int):
                    yield rec


def records(root: str | Path) -> dict[int, dict]:
    """Index → record (the later record wins when an index appears twice)."""
    out: dict[int, dict] = {}
    for rec in iter_records(root):
        out[rec["index"]] = rec
    return out


def done_indexes(root: str | Path) -> set[int]:
    return set(records(root))


def append_record(root: str | Path, rec: dict, shard_size: int = SHARD_SIZE) -> None:
    """Append one record to its shard and push it to disk before returning."""
    line = json.dumps(rec, allow_nan=False, separators=(",", ":")) + "\n"
    path = shard_path(Path(root), rec["index"], shard_size)
    if path.exists() and path.stat().st_size:  # end a torn last line first (a crash mid-write)
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = "\n" + line
    with path.open("a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def load_dataset(root: str | Path, only_optimal: bool = False) -> list[tuple[Instance, np.ndarray, dict[str, Any]]]:
    """Load a labelled dataset for training.

    Args:
        root: the dataset directory written by ``mgmatch label``.
        only_optimal: keep only labels proven optimal (else also time-limited best solutions,
            marked ``meta["optimal"] = False`` with their ``gap``).
    Returns:
        ``(instance, team_of, meta)`` per labelled instance, sorted by index; ``team_of`` [N]
        int64 (team per player, −1 bench); ``meta`` is the record without ``instance`` and
        ``team_of`` (index, status, optimal, objective, bound, gap, time_ms, model, …).
        Instances without an assignment (infeasible, or nothing found in time) are left out.
    """
    root = Path(root)
    if not root.is_dir():
        raise InvalidInput(str(root), "no such dataset directory")
    read_manifest(root)  # validates the format when present
    out = []
    for _, rec in sorted(records(root).items()):
        if rec.get("team_of") is None:
            continue
        if only_optimal and not rec.get("optimal"):
            continue
        inst = parse_instance(rec["instance"], stored=True)  # labelled earlier: never refused by a later check
        team_of = np.asarray(rec["team_of"], dtype=np.int64)
        meta = {k: v for k, v in rec.items() if k not in ("instance", "team_of")}
        out.append((inst, team_of, meta))
    return out
