"""Capture of solved pools as pseudonymized spec instance files (a real runtime, a real uvicorn server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, client, features, poll, service_config  # noqa: E402

from mgmatch.app.capture import CAPTURES, Capture, Recorder, pseudonym, pseudonymized  # noqa: E402
from mgmatch.app.config import CaptureConfig, load_config  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.core.errors import InvalidInput  # noqa: E402
from mgmatch.core.instance import load_instance, parse_instance  # noqa: E402

SALT = "studio-secret-salt"


def _config(tmp_path: Path, capture: dict, where: str = "global") -> Path:
    path = service_config(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    if where == "global":
        cfg["capture"] = capture
    else:
        cfg["pools"][0]["capture"] = capture
    path.write_text(yaml.safe_dump(cfg))
    return path


def _runtime(path: Path) -> Runtime:
    return Runtime.build(Settings(config=path, store="memory"))


def _count(pool: str, result: str) -> float:
    return CAPTURES.labels(pool, result)._value.get()


def test_pseudonyms_are_keyed_and_stable():
    a = pseudonym(SALT, "alice")
    assert a == pseudonym(SALT, "alice") and a.startswith("p-") and len(a) == 22
    assert a != pseudonym("another-salt", "alice") and a != pseudonym(SALT, "bob")
    assert "alice" not in a


def test_pseudonymized_instance_maps_every_id_and_keeps_only_spec_fields():
    obj = {"teams": 2, "team_size": 1, "engagement_model": "small",
           "players": [{"id": "alice", "features": [0.1, 0.2, 0.3, 0.4], "skill": 1500, "party": "g1",
                        "email": "alice@example.com"},
                       {"id": "bob", "features": [0.0, 0.1, 0.2, 0.3], "party": "g1", "waited_s": 3.0},
                       {"id": "carol", "features": [0.5, 0.1, 0.2, 0.3]}],
           "rules": [{"kind": "avoid", "players": ["alice", "carol"], "scope": "team"},
                     {"kind": "include", "players": ["bob"]},
                     {"kind": "linear", "terms": [["carol", 0, 1.0]], "sense": "<=", "rhs": 1},
                     {"kind": "if", "when": {"not": ["alice", 0]},
                      "then": {"terms": [["bob", 1, 1.0]], "sense": "<=", "rhs": 1}}]}
    out = pseudonymized(parse_instance(obj), SALT)
    text = json.dumps(out)
    for raw in ("alice", "bob", "carol", "g1", "example.com"):
        assert raw not in text
    a, b, c = (pseudonym(SALT, x) for x in ("alice", "bob", "carol"))
    assert [p["id"] for p in out["players"]] == [a, b, c]
    assert out["players"][0]["party"] == out["players"][1]["party"] == pseudonym(SALT, "g1", "g-")
    assert out["players"][0]["skill"] == 1500 and out["players"][1]["waited_s"] == 3.0
    assert out["rules"][0]["players"] == [a, c] and out["rules"][1]["players"] == [b]
    assert out["rules"][2]["terms"][0][0] == c
    assert out["rules"][3]["when"] == {"not": [a, 0]} and out["rules"][3]["then"]["terms"][0][0] == b
    again = parse_instance(out)  # still a valid instance: a studio can label it
    assert again.n == 3 and len(again.rules) == 4


def test_sampling_is_seeded(tmp_path):
    def draws(seed):
        rec = Recorder(CaptureConfig(dir=tmp_path / f"s{seed}", salt=SALT, sample_rate=0.3, seed=seed))
        try:
            return [rec.sampled("p") for _ in range(400)]
        finally:
            rec.stop()

    first = draws(1)
    assert first == draws(1) and first != draws(2)
    assert 80 < sum(first) < 160


def test_matchmaker_pools_are_captured_and_labelled(tmp_path, live):
    """Tickets matched by the embedded matchmaker → instance files → ``label --instances`` labels them."""
    cap = tmp_path / "captures"
    rt = _runtime(_config(tmp_path, {"dir": str(cap), "salt": SALT, "sample_rate": 1.0}))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    with client(srv.url) as c:
        assert poll(lambda: c.get("/readyz").status_code == 200)
        for i in range(6):
            r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"player{i}", "features": features(i)}]})
            assert r.status_code == 201, r.text
        files = poll(lambda: rt.engine.capture.flush() and sorted((cap / "small").glob("*.json")))
    inst = load_instance(files[0])
    assert sorted(inst.ids) == sorted(pseudonym(SALT, f"player{i}") for i in range(6))
    record = json.loads(files[0].read_text())["capture"]
    assert record["pool"] == "small" and record["status"] in ("optimal", "feasible")

    from mgmatch.pipeline.dataset import load_dataset
    from mgmatch.pipeline.label import label_instances

    label_instances(cap / "small", SPEC_EXAMPLES / "engagement-small.json", tmp_path / "labels", workers=1,
                    time_limit_s=30, progress=False)
    ((labelled, team_of, meta),) = load_dataset(tmp_path / "labels")
    assert sorted(labelled.ids) == sorted(inst.ids) and meta["optimal"]
    assert abs(meta["objective"] - record["objective"]) < 1e-6  # the service's exact answer, labelled again


def test_solve_requests_are_captured_only_when_asked(tmp_path, live):
    cap = tmp_path / "captures"
    body = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    for solve_requests, expect in ((False, 0), (True, 1)):
        folder = cap / str(solve_requests)
        rt = _runtime(_config(tmp_path, {"dir": str(folder), "salt": SALT, "solve_requests": solve_requests}))
        srv = live(rt)
        with client(srv.url) as c:
            r = c.post("/v1/solve", json=body)
            assert r.status_code == 200, r.text
        assert rt.engine.capture.flush()
        assert len(list(folder.glob("solve/*.json"))) == expect


def test_bounded_by_max_files(tmp_path):
    inst = parse_instance(json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text()))
    rec = Recorder(CaptureConfig(dir=tmp_path / "cap", salt=SALT, max_files=2))
    before = _count("bounded", "limit")
    for _ in range(4):
        assert rec.offer("bounded", inst, {"status": "optimal"})
    assert rec.flush()
    assert len(list((tmp_path / "cap" / "bounded").glob("*.json"))) == 2
    assert _count("bounded", "limit") - before == 2
    rec.stop()
    again = Recorder(CaptureConfig(dir=tmp_path / "cap", salt=SALT, max_files=2))  # counts what is there
    assert again.offer("bounded", inst, {}) and again.flush()
    assert len(list((tmp_path / "cap" / "bounded").glob("*.json"))) == 2
    again.stop()


def test_a_failing_disk_never_fails_the_solve(tmp_path, live):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the capture folder should be")
    rt = _runtime(_config(tmp_path, {"dir": str(blocker / "cap"), "salt": SALT, "solve_requests": True}))
    srv = live(rt)
    before = _count("solve", "error")
    body = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    with client(srv.url) as c:
        for _ in range(2):
            r = c.post("/v1/solve", json=body)
            assert r.status_code == 200 and r.json()["status"] == "optimal"
    assert rt.engine.capture.flush()
    assert _count("solve", "error") - before == 2


def test_pool_capture_overrides_global_and_paths_follow_the_config(tmp_path):
    path = _config(tmp_path, {"dir": "pool-cap", "salt": SALT, "sample_rate": 0.5}, where="pool")
    cfg = load_config(path)
    assert cfg.capture_for("small").dir == tmp_path / "pool-cap"
    assert cfg.capture_for("3v3") is None and cfg.capture_for("solve") is None
    (tmp_path / "none").mkdir()
    assert Capture.from_config(load_config(service_config(tmp_path / "none"))) is None


@pytest.mark.parametrize("capture, field", [({"dir": "c", "salt": SALT, "sample_rate": 1.5}, "capture.sample_rate"),
                                            ({"dir": "c", "salt": "short"}, "capture.salt"),
                                            ({"salt": SALT}, "capture.dir"),
                                            ({"dir": "c", "salt": SALT, "max_files": 0}, "capture.max_files")])
def test_bad_capture_config_names_the_field(tmp_path, capture, field):
    with pytest.raises(InvalidInput) as err:
        load_config(_config(tmp_path, capture))
    assert err.value.field.endswith(field)
