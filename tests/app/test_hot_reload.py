"""Hot reload of predictor files: the ``.onnx`` and its sidecar are both watched, in either order.

Two exports are simulated with the shipped 3v3 and 12v12 predictors copied in turn into one folder
(``hot/model.onnx`` + ``hot/model.json``); ``check_reload()`` is called directly instead of waiting
on the watcher's interval, except in the one test that runs the watcher itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import shipped_predictor_problem  # noqa: E402

from mgmatch.app import metrics  # noqa: E402
from mgmatch.app.config import ModelsConfig  # noqa: E402
from mgmatch.app.models_hub import Predictors  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "shipped"
NAME = "hotp"


@pytest.fixture(autouse=True)
def _shipped_predictors_load():
    for name in ("3v3", "12v12"):
        if (problem := shipped_predictor_problem(name)) is not None:
            pytest.skip(problem)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def count(self) -> int:
        return sum(NAME in r.getMessage() for r in self.records)


@pytest.fixture
def warnings():
    """The hub's warnings (its own handler: independent of how another test configured logging)."""
    logger = logging.getLogger("mgmatch.models")
    handler = _Records()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _hub(tmp_path: Path, **entry) -> tuple[Predictors, Path]:
    """A hub watching ``hot/model.onnx`` (first export: the shipped 3v3, pinned by its sidecar)."""
    onnx = tmp_path / "hot" / "model.onnx"
    onnx.parent.mkdir()
    shutil.copy(SHIPPED / "3v3.onnx", onnx)
    shutil.copy(SHIPPED / "3v3.json", onnx.with_suffix(".json"))
    hub = Predictors(ModelsConfig(predictors=[{"name": NAME, "path": str(onnx), **entry}], reload_interval_s=1))
    assert hub.get(NAME).version.startswith("3v3@")
    return hub, onnx


def _model_info(version: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("mgmatch_model_info",
                                             {"kind": "predictor", "name": NAME, "version": version})


def _rejections() -> float:
    return metrics.REGISTRY.get_sample_value("mgmatch_model_reloads_total",
                                             {"kind": "predictor", "name": NAME, "result": "rejected"}) or 0.0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_new_onnx_then_its_sidecar_later_is_swapped_in(tmp_path, warnings):
    """The audit's sequence: the new .onnx first (refused, its digest fails the old sidecar's pin),
    its sidecar later; the new version serves once the sidecar arrives, the .onnx untouched since."""
    hub, onnx = _hub(tmp_path)
    old = hub.get(NAME).version
    inner = hub.get(NAME).inner
    shutil.copy(SHIPPED / "12v12.onnx", onnx)
    assert hub.check_reload() == []
    assert hub.get(NAME).inner is inner and warnings.count() == 1
    assert "rejected" in warnings.records[-1].getMessage()
    onnx_stamp = onnx.stat().st_mtime_ns
    shutil.copy(SHIPPED / "12v12.json", onnx.with_suffix(".json"))
    assert hub.check_reload() == [NAME]
    assert onnx.stat().st_mtime_ns == onnx_stamp  # no touch needed
    new = hub.get(NAME).version
    assert new.startswith("12v12@") and new != old
    assert _model_info(new) == 1 and _model_info(old) is None
    assert hub.check_reload() == [] and warnings.count() == 1


def test_sidecar_first_then_the_onnx(tmp_path, warnings):
    """The reverse order: the new sidecar first (refused: it pins a file not there yet), then the .onnx."""
    hub, onnx = _hub(tmp_path)
    inner = hub.get(NAME).inner
    shutil.copy(SHIPPED / "12v12.json", onnx.with_suffix(".json"))
    assert hub.check_reload() == []
    assert hub.get(NAME).inner is inner and hub.get(NAME).version.startswith("3v3@")
    assert warnings.count() == 1  # the sidecar alone is a checked (and refused) state
    shutil.copy(SHIPPED / "12v12.onnx", onnx)
    assert hub.check_reload() == [NAME]
    assert hub.get(NAME).version.startswith("12v12@")
    assert warnings.count() == 1


@pytest.mark.parametrize("config_pin", [False, True], ids=["sidecar-pin", "config-pin"])
def test_sidecar_only_change_updates_the_gate(tmp_path, config_pin):
    """A new measured gate written into the sidecar, the .onnx unchanged: the loaded predictor's gate
    follows (also when the config, not the sidecar, pins the digest)."""
    entry = {"sha256": _sha(SHIPPED / "3v3.onnx")} if config_pin else {}
    hub, onnx = _hub(tmp_path, **entry)
    assert hub.get(NAME).gate["use"] == "network"
    side = onnx.with_suffix(".json")
    meta = json.loads(side.read_text())
    meta["gate"] = {**meta["gate"], "use": "gradient", "measured": "2027-01-01"}
    side.write_text(json.dumps(meta, indent=1))
    assert hub.check_reload() == [NAME]
    assert hub.get(NAME).gate["use"] == "gradient"
    assert hub.get(NAME).gate["measured"] == "2027-01-01"
    assert hub.check_reload() == []


def test_a_refused_state_is_logged_once(tmp_path, warnings):
    hub, onnx = _hub(tmp_path)
    before = _rejections()
    shutil.copy(SHIPPED / "12v12.onnx", onnx)  # state A: 12v12 .onnx, 3v3 sidecar
    for _ in range(4):
        assert hub.check_reload() == []
    assert warnings.count() == 1 and _rejections() == before + 1
    side = onnx.with_suffix(".json")  # state B: the sidecar rewritten, still pinning another file
    meta = json.loads(side.read_text())
    meta["gate"] = {**meta["gate"], "use": "gradient"}
    side.write_text(json.dumps(meta))
    for _ in range(4):
        assert hub.check_reload() == []
    assert warnings.count() == 2 and _rejections() == before + 2
    # the same refused state again (a touch): checked again, not logged again
    st = onnx.stat()
    os.utime(onnx, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert hub.check_reload() == [] and warnings.count() == 2
    assert hub.get(NAME).version.startswith("3v3@")


def test_half_written_files_are_refused_then_picked_up(tmp_path, warnings):
    hub, onnx = _hub(tmp_path)
    inner = hub.get(NAME).inner
    side = onnx.with_suffix(".json")
    shutil.copy(SHIPPED / "12v12.json", side)
    assert hub.check_reload() == []
    # a partial copy of the .onnx: refused, the live model keeps serving
    data = (SHIPPED / "12v12.onnx").read_bytes()
    with open(onnx, "wb") as f:
        f.write(data[: len(data) // 2])
    assert hub.check_reload() == []
    assert hub.get(NAME).inner is inner and hub.get(NAME).version.startswith("3v3@")
    with open(onnx, "ab") as f:
        f.write(data[len(data) // 2:])
    assert hub.check_reload() == [NAME]
    assert hub.get(NAME).version.startswith("12v12@")
    # a partial copy of the sidecar (next export 3v3, .onnx already in place): refused, then picked up
    inner = hub.get(NAME).inner
    shutil.copy(SHIPPED / "3v3.onnx", onnx)
    text = (SHIPPED / "3v3.json").read_bytes()
    side.write_bytes(text[: len(text) // 2])
    assert hub.check_reload() == []
    assert hub.get(NAME).inner is inner and hub.get(NAME).version.startswith("12v12@")
    side.write_bytes(text)
    assert hub.check_reload() == [NAME]
    assert hub.get(NAME).version.startswith("3v3@")


def test_rewriting_the_serving_files_does_not_reload(tmp_path, warnings):
    """The same bytes written again (or touched) are not a new version."""
    hub, onnx = _hub(tmp_path)
    inner = hub.get(NAME).inner
    shutil.copy(SHIPPED / "3v3.onnx", onnx)
    shutil.copy(SHIPPED / "3v3.json", onnx.with_suffix(".json"))
    assert hub.check_reload() == []
    assert hub.get(NAME).inner is inner and warnings.count() == 0


def test_the_watcher_swaps_in_an_export_whose_sidecar_comes_later(tmp_path):
    """The watcher thread itself (short interval): new .onnx, a pause, then its sidecar."""
    onnx = tmp_path / "hot" / "model.onnx"
    onnx.parent.mkdir()
    shutil.copy(SHIPPED / "3v3.onnx", onnx)
    shutil.copy(SHIPPED / "3v3.json", onnx.with_suffix(".json"))
    hub = Predictors(ModelsConfig(predictors=[{"name": NAME, "path": str(onnx)}], reload_interval_s=0.1))
    assert hub.get(NAME).version.startswith("3v3@")
    hub.start_watcher()
    try:
        shutil.copy(SHIPPED / "12v12.onnx", onnx)
        time.sleep(0.5)  # several checks refuse it
        assert hub.get(NAME).version.startswith("3v3@")
        shutil.copy(SHIPPED / "12v12.json", onnx.with_suffix(".json"))
        deadline = time.monotonic() + 10
        while not hub.get(NAME).version.startswith("12v12@") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hub.get(NAME).version.startswith("12v12@")
    finally:
        hub.stop()
