"""The runtime solution predictor: encoded graph → ONNX network → P [N, D]. No torch.

Imports only onnxruntime, numpy, :mod:`mgmatch.core` and the numpy graph encoder, so the service
image runs it without torch (the training networks' torch-geometric layers are plain ONNX ops once
exported: gathers and ``ScatterElements(add)``). :class:`OnnxPredictor` implements the fast
solver's ``Predictor`` protocol (``version``, ``predict(problems)``); a batch of problems is scored
in one ``session.run`` on the batched graph. CUDA is used when onnxruntime offers it, else the CPU.

Shipped models live in ``models/shipped/<name>.onnx`` with a ``<name>.json`` sidecar
(``mgmatch-predictor/v1``, see :mod:`mgmatch.models.export`); :func:`load_predictor` resolves a
name ("3v3", "12v12", "3v3-bgcn", …) or a path, and checks the file's SHA-256 against the pin.

A network reads a pool of any size (a graph network over the compiled problem), but only with the
team count it was built for, the player embeddings of the engagement model it was trained against
(their width, and what each of their numbers means) and that model's gradient as a feature: on a
problem scored by another engagement model its predictions point at another objective.
:meth:`OnnxPredictor.check` refuses such a problem (``InvalidInput`` naming ``predictor``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort

from mgmatch.core.errors import InvalidInput
from mgmatch.core.files import read_text, sha256_file
from mgmatch.core.problem import Problem

from .encoder import FEATURE_VERSION, batch, encode

SHIPPED = Path(__file__).resolve().parent / "shipped"



def providers() -> list[str]:
    """CUDA first when this onnxruntime build has it, the CPU always."""
    avail = ort.get_available_providers()
    return (["CUDAExecutionProvider"] if "CUDAExecutionProvider" in avail else []) + ["CPUExecutionProvider"]


class OnnxPredictor:
    """A trained solution-prediction network behind onnxruntime.

    Args:
        path: the ``.onnx`` file; its sidecar ``.json`` beside it (architecture, encoding, …).
        sha256: when given, the file's SHA-256 must equal it (else InvalidInput).
        threads: onnxruntime intra-op threads on the CPU.
    """

    def __init__(self, path: str | Path, sha256: str | None = None, threads: int = 1):
        self.path = Path(path)
        if not self.path.is_file():
            raise InvalidInput("predictor", f"no model file {str(self.path)!r}")
        side = self.path.with_suffix(".json")
        if not side.is_file():
            raise InvalidInput("predictor", f"model {self.path.name} has no sidecar {side.name}")
        try:
            self.meta = json.loads(read_text(side))
        except json.JSONDecodeError as err:
            raise InvalidInput(str(side), f"not valid JSON: {err.msg}") from None
        except UnicodeDecodeError as err:
            raise InvalidInput(str(side), f"not valid JSON: not UTF-8 text (byte offset {err.start})") from None
        if not isinstance(self.meta, dict):
            raise InvalidInput(str(side), "not a predictor sidecar (expected a JSON object)")
        if self.meta.get("feature_version") != FEATURE_VERSION:
            raise InvalidInput("predictor", f"{self.path.name} was trained on features "
                                            f"{self.meta.get('feature_version')!r}; this encoder makes {FEATURE_VERSION!r}")
        self.sha256 = sha256_file(self.path)
        if sha256 is not None and sha256.lower() != self.sha256:
            raise InvalidInput("predictor", f"{self.path.name}: SHA-256 {self.sha256} does not match the pinned {sha256}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(self.path), sess_options=opts, providers=providers())
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.encoding: str = self.meta["encoding"]
        self.teams: int = int(self.meta["teams"])
        self.emb_dim: int = int(self.meta["emb_dim"])
        self.version: str = self.meta.get("version") or f"{self.path.stem}@{self.sha256[:12]}"
        # the sidecar's measured verdict on the network against the engagement gradient (see
        # scripts/interleaved.py --gate): {"use": "network" | "gradient", the evidence}; None: not measured
        gate = self.meta.get("gate")
        self.gate: dict | None = gate if isinstance(gate, dict) and gate.get("use") in ("network", "gradient") else None
        self.engagement_name, self.engagement_sha256 = _trained_for(self.meta)

    def problem_mismatch(self, problem: Problem) -> tuple[str, str] | None:
        """``(field, message)`` saying why this network cannot score ``problem``, or None when it can
        (the message starts with the predictor's version):
        another team count, another embedding width, or another engagement model than the one its
        labels were solved with (compared by file SHA-256 where both sides know theirs; a model built in
        memory, or a sidecar that records none, is not compared). Pool and team sizes may differ."""
        if problem.instance.teams != self.teams:
            return "teams", f"{self.version} scores {self.teams} teams, the instance has {problem.instance.teams}"
        if problem.model.embed_dim != self.emb_dim:
            return "engagement_model", (f"{self.version} reads {self.emb_dim}-wide player embeddings, "
                                        f"the engagement model makes {problem.model.embed_dim}")
        have = getattr(problem.model, "file_sha256", None)
        if self.engagement_sha256 is not None and have is not None and have != self.engagement_sha256:
            trained = f"{self.engagement_name!r} " if self.engagement_name else ""
            used = problem.model_name or problem.model.name
            return "engagement_model", (
                f"{self.version} was trained for engagement model {trained}(SHA-256 "
                f"{self.engagement_sha256[:12]}…), the instance is scored by {f'{used!r} ' if used else ''}"
                f"(SHA-256 {have[:12]}…): its predictions would aim at another objective; use that model's "
                "predictor or train one on its labels")
        return None

    def check(self, problem: Problem) -> None:
        """Raise InvalidInput (field ``predictor``) unless this network can score ``problem``
        (see :meth:`problem_mismatch`)."""
        why = self.problem_mismatch(problem)
        if why is not None:
            raise InvalidInput("predictor", why[1])

    @property
    def device(self) -> str:
        return "cuda" if "CUDAExecutionProvider" in self.session.get_providers() else "cpu"

    def _check(self, k: int, problem: Problem) -> None:
        why = self.problem_mismatch(problem)
        if why is not None:
            raise InvalidInput(f"problems[{k}].{why[0]}", f"predictor {why[1]}")

    def predict(self, problems: list[Problem]) -> list[np.ndarray]:
        """P [N, D] per problem, all problems in one ``session.run``."""
        if not problems:
            return []
        for k, pr in enumerate(problems):
            self._check(k, pr)
        gb = batch([encode(pr, self.encoding) for pr in problems])
        feed = {k: v for k, v in gb.inputs().items() if k in self.inputs}
        (p,) = self.session.run(["p"], feed)
        return [a.astype(np.float64) for a in gb.split(p)]


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _trained_for(meta: dict) -> tuple[str | None, str | None]:
    """``(name, file SHA-256)`` of the engagement model a sidecar's network was trained against.

    The sidecar's ``training.engagement_sha256`` (written since labels pin their model); for an older
    sidecar that records only the name of a shipped preset model, that model's file (what the
    project pairs with the predictor of the same name). ``(name, None)`` when unknown."""
    tr = meta.get("training")
    tr = tr if isinstance(tr, dict) else {}
    name = tr.get("engagement_model")
    name = name if isinstance(name, str) and name else None
    sha = tr.get("engagement_sha256")
    if isinstance(sha, str) and _SHA256.match(sha):
        return name, sha
    if name is not None:
        from mgmatch.core.presets import model_names, model_sha256

        if name in model_names():
            return name, model_sha256(name)
    return name, None


def shipped_names() -> list[str]:
    """Names of the shipped predictors (``models/shipped/<name>.onnx``)."""
    if not SHIPPED.is_dir():
        return []
    return sorted(p.stem for p in SHIPPED.glob("*.onnx") if p.with_suffix(".json").is_file())


def load_predictor(name_or_path: str | Path, threads: int = 1) -> OnnxPredictor:
    """A shipped predictor by name (its sidecar's SHA-256 pinned), or any ``.onnx`` by path."""
    s = str(name_or_path)
    if s in shipped_names():
        path = SHIPPED / f"{s}.onnx"
        pin = json.loads(read_text(path.with_suffix(".json"))).get("sha256")
        return OnnxPredictor(path, sha256=pin, threads=threads)
    p = Path(s)
    if p.suffix == ".onnx" or p.is_file():
        return OnnxPredictor(p, threads=threads)
    raise InvalidInput("predictor", f"unknown predictor {s!r}; shipped: {', '.join(shipped_names()) or 'none'}")
