"""The A/B report: from the store's match records and from a match log, on the command line (bad input: exit 2,
one line) and on the HTTP API (``GET /v1/experiments/{name}``, live server, memory and Redis stores)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import LiveServer, client, free_port, poll, service_config  # noqa: E402

from mgmatch.app.abreport import OutcomeCache, UnknownExperiment, report_from_log, report_from_store  # noqa: E402
from mgmatch.app.config import load_config  # noqa: E402
from mgmatch.app.store import MatchRecord, MatchResult, MemoryStore, RedisStore, Ticket, new_ticket_id  # noqa: E402
from mgmatch.cli import main  # noqa: E402
from mgmatch.core.errors import InvalidInput  # noqa: E402

EXPERIMENT = {"name": "skill-vs-mgmatch", "pools": ["small"], "key": "player",
              "arms": [{"name": "skill", "weight": 1}, {"name": "mgmatch", "weight": 1}]}


def ab_config(tmp_path: Path, experiments=(EXPERIMENT,)) -> Path:
    """The service test config (pools small and 3v3) with ``experiments``."""
    path = service_config(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["experiments"] = list(experiments)
    path.write_text(yaml.safe_dump(cfg))
    return path


def commit_match(store, k: int, arm: str | None, engagement: float | None, pool: str = "small",
                 model_version: str | None = None) -> str:
    """Queue, claim and commit one 1v1 match of ``arm`` (as the matchmaker records it); post ``engagement``."""
    now = time.time()
    ids = [store.create(Ticket(new_ticket_id(pool), pool, [{"id": f"u{k}{s}", "features": [0.1] * 4}], now,
                               now + 60, arm=arm))[0].id for s in "ab"]
    claim = f"c{k}"
    assert store.claim(pool, ids, claim, now + 30)
    mid = f"{pool}.{claim}-0-x"
    rec = MatchRecord(mid, pool, [[{"id": f"u{k}a", "features": [0.1] * 4}], [{"id": f"u{k}b", "features": [0.1] * 4}]],
                      method="exact", arm=arm, model_version=model_version)
    assert store.commit(pool, claim, ids, [], MatchResult(mid, [[f"u{k}a"], [f"u{k}b"]], {ids[0]: 0, ids[1]: 1},
                                                          arm=arm), rec)
    if engagement is not None:
        store.put_match_result(pool, mid, {"engagement": float(engagement)})
    return mid


def fill(store, rng, per_arm: dict[str, tuple[int, float]], without_result: int = 0, start: int = 0) -> int:
    """``per_arm``: arm → (matches, true mean engagement); results ~ N(mean, 0.5²). Returns the next index."""
    k = start
    for arm, (n, mean) in per_arm.items():
        for i in range(n):
            commit_match(store, k, arm, None if i < without_result else rng.normal(mean, 0.5), model_version="v1")
            k += 1
    return k


def _arms(report):
    return {a["name"]: a for a in report["arms"]}


def test_report_from_the_store(tmp_path):
    cfg = load_config(ab_config(tmp_path))
    store = MemoryStore()
    rng = np.random.default_rng(0)
    k = fill(store, rng, {"skill": (150, 1.0), "mgmatch": (150, 1.5)}, without_result=5)
    commit_match(store, k, "retired-arm", 9.0)  # an arm of an earlier config: not counted
    commit_match(store, k + 1, "skill", 1.0, pool="3v3")  # another pool, not in the experiment
    r = report_from_store(store, cfg, "skill-vs-mgmatch")
    assert r["pools"] == ["small"] and r["control"] == "skill" and r["source"] == "store"
    arms = _arms(r)
    assert arms["skill"]["matches"] == 150 and arms["skill"]["results"] == 145
    assert arms["mgmatch"]["model_versions"] == {"v1": 150}
    assert arms["skill"]["lift"] is None and arms["skill"]["control"]
    lift = arms["mgmatch"]["lift"]
    assert lift["ci"][0] < 0.5 < lift["ci"][1] and lift["p_value"] < 0.01 and lift["significant"]
    lo, hi = arms["mgmatch"]["engagement_ci95"]
    assert lo < 1.5 < hi
    assert r["srm"]["flagged"] is False and r["ignored"] == {"other_arms": 1}
    # the control may be named
    swapped = report_from_store(store, cfg, "skill-vs-mgmatch", control="mgmatch")
    assert _arms(swapped)["skill"]["lift"]["estimate"] == pytest.approx(-lift["estimate"])
    json.dumps(r, allow_nan=False)


def test_the_serving_cache_reads_a_record_with_a_result_once(tmp_path, monkeypatch):
    cfg = load_config(ab_config(tmp_path))
    store = MemoryStore(match_max_count=60)
    rng = np.random.default_rng(8)
    fill(store, rng, {"skill": (25, 1.0), "mgmatch": (25, 1.2)}, without_result=5)
    cache = OutcomeCache()
    first = report_from_store(store, cfg, "skill-vs-mgmatch", cache=cache)
    assert first == report_from_store(store, cfg, "skill-vs-mgmatch")
    reads: list[int] = []
    real = store.get_matches
    monkeypatch.setattr(store, "get_matches", lambda pool, ids: reads.append(len(ids)) or real(pool, ids))
    # a result posted since the last report is counted; only the 10 records without a result are read again
    pending = [mid for mid, _ in store.match_index("small", float("-inf"), 100)
               if store.get_match("small", mid).result is None]
    store.put_match_result("small", pending[0], {"engagement": 1.0})
    again = report_from_store(store, cfg, "skill-vs-mgmatch", cache=cache)
    assert sum(reads) == 10 and again["results"] == first["results"] + 1
    # records the store drops (it keeps 60 per pool here) leave the report and the cache
    reads.clear()
    fill(store, rng, {"mgmatch": (30, 1.2)}, start=100)
    later = report_from_store(store, cfg, "skill-vs-mgmatch", cache=cache)
    kept_pending = sum(store.get_match("small", mid).result is None for mid, _ in
                       store.match_index("small", float("-inf"), 100))
    assert kept_pending == 5 and sum(reads) == 30 + kept_pending  # the new records, the old ones still without result
    assert later["matches"] == 60 and later == report_from_store(store, cfg, "skill-vs-mgmatch")


def test_sample_ratio_mismatch_is_flagged(tmp_path):
    cfg = load_config(ab_config(tmp_path))
    store = MemoryStore()
    fill(store, np.random.default_rng(1), {"skill": (240, 1.0), "mgmatch": (160, 1.0)})  # 60/40, configured 50/50
    r = report_from_store(store, cfg, "skill-vs-mgmatch")
    assert r["srm"]["flagged"] and r["srm"]["observed"] == [240, 160] and r["srm"]["p_value"] < 0.001


def test_unknown_experiment_and_bad_options(tmp_path):
    cfg = load_config(ab_config(tmp_path))
    with pytest.raises(UnknownExperiment, match="skill-vs-mgmatch"):
        report_from_store(MemoryStore(), cfg, "nope")
    with pytest.raises(InvalidInput) as info:
        report_from_store(MemoryStore(), cfg, "skill-vs-mgmatch", control="nope")
    assert info.value.field == "control"
    with pytest.raises(InvalidInput) as info:
        report_from_store(MemoryStore(), cfg, "skill-vs-mgmatch", alpha=1.0)
    assert info.value.field == "alpha"
    # an experiment without matches yet reports zeros, not an error
    empty = report_from_store(MemoryStore(), cfg, "skill-vs-mgmatch")
    assert [a["matches"] for a in empty["arms"]] == [0, 0] and empty["srm"] is None


def write_log(path: Path, rows, bad: dict | None = None) -> Path:
    """A spec §5 log: rows of (arm, engagement); ``bad`` overrides fields of the last line."""
    lines = []
    for i, (arm, y) in enumerate(rows):
        line = {"match_id": f"m{i}", "teams": [[{"id": f"a{i}", "features": [0.0, 1.0]}],
                                               [{"id": f"b{i}", "features": [1.0, 0.0]}]], "engagement": y}
        if i == 0:
            line["format"] = "mgmatch-matchlog/v1"
        if arm is not None:
            line.update(arm=arm, policy="exploit", propensity=0.9)
        lines.append(line)
    if bad:
        lines[-1].update(bad)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _rows(rng, n_a=120, n_b=80, lift=0.0):
    return ([("skill", float(rng.normal(1, 0.5))) for _ in range(n_a)]
            + [("mgmatch", float(rng.normal(1 + lift, 0.5))) for _ in range(n_b)] + [(None, 1.0)])


def test_report_from_a_log(tmp_path):
    rng = np.random.default_rng(2)
    log = write_log(tmp_path / "log.jsonl", _rows(rng, lift=0.4))
    r = report_from_log(log)  # no config: the log's arms, no weights, no sample-ratio check
    assert r["experiment"] == "log" and r["control"] == "skill" and r["srm"] is None
    assert r["ignored"] == {"other_arms": 0, "without_arm": 1}
    arms = _arms(r)
    assert arms["mgmatch"]["policies"] == {"exploit": 80} and arms["mgmatch"]["propensity_mean"] == pytest.approx(0.9)
    assert arms["mgmatch"]["lift"]["p_value"] < 0.01
    # with the config: its weights, and a 120/80 split of a 1:1 experiment is a mismatch
    r = report_from_log(log, load_config(ab_config(tmp_path)))
    assert r["experiment"] == "skill-vs-mgmatch" and r["srm"]["observed"] == [120, 80] and r["srm"]["p_value"] < 0.01


def test_a_bad_log_line_names_line_and_field(tmp_path):
    rng = np.random.default_rng(3)
    for bad, field in (({"arm": 7}, "arm"), ({"propensity": 0}, "propensity"), ({"propensity": "x"}, "propensity"),
                       ({"engagement": "high"}, "engagement"), ({"model_version": ""}, "model_version")):
        log = write_log(tmp_path / "bad.jsonl", _rows(rng, 12, 12), bad)
        with pytest.raises(InvalidInput) as info:
            report_from_log(log)
        assert info.value.field.startswith("bad.jsonl line 25") and field in info.value.field, info.value.field
    with pytest.raises(InvalidInput, match="no line names an arm"):
        report_from_log(write_log(tmp_path / "noarm.jsonl", [(None, 1.0)] * 3))


# --------------------------------------------------------------------------- the command line


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["ab", "report", *args])
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("MGMATCH_STORE", "MGMATCH_REDIS_URL", "MGMATCH_CONFIG", "MGMATCH_KEY_PREFIX"):
        monkeypatch.delenv(var, raising=False)


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    cfg = ab_config(tmp_path)
    log = write_log(tmp_path / "log.jsonl", _rows(np.random.default_rng(4), 12, 12))
    bad = write_log(tmp_path / "bad.jsonl", _rows(np.random.default_rng(4), 12, 12), {"arm": 3})
    dead = f"redis://127.0.0.1:{free_port()}/0"
    cases = [
        ([], "--store"),                                   # the memory store is inside the serving process
        (["--store", "memory"], "--store"),
        (["--log", str(tmp_path / "none.jsonl")], "--log"),
        (["--log", str(tmp_path)], "--log"),
        (["--log", str(log), "--redis-url", dead], "--log"),
        (["--log", str(log), "--alpha", "1.5"], "--alpha"),
        (["--log", str(log), "--alpha", "nan"], "--alpha"),
        (["--log", str(log), "--horizon", "0"], "--horizon"),
        (["--log", str(log), "--control", "nope"], "control"),
        (["--log", str(bad)], "bad.jsonl line 25, arm"),
        (["nope", "--log", str(log), "--config", str(cfg)], "nope"),
        (["--log", str(log), "--config", str(tmp_path / "none.yaml")], "none.yaml"),
        (["--redis-url", dead, "--config", str(cfg)], "--redis-url"),
        (["nope", "--redis-url", dead, "--config", str(cfg)], "nope"),
    ]
    for args, needle in cases:
        code, _, err = _run(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in err, (args, err)


def test_cli_reads_a_log(tmp_path, capsys):
    log = write_log(tmp_path / "log.jsonl", _rows(np.random.default_rng(5), 200, 200, lift=0.3))
    code, out, err = _run(capsys, "--log", str(log), "--config", str(ab_config(tmp_path)), "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["experiment"] == "skill-vs-mgmatch" and _arms(r)["mgmatch"]["lift"]["significant"]
    code, out, err = _run(capsys, "--log", str(log))
    assert code == 0, err
    assert "skill" in out and "mgmatch" in out and "sample ratio: not checked" in out and "p (always valid)" in out


@pytest.mark.redis
def test_cli_reads_redis(tmp_path, capsys, redis_url, monkeypatch):
    url, prefix = redis_url
    monkeypatch.setenv("MGMATCH_KEY_PREFIX", prefix)
    store = RedisStore.from_url(url, prefix=prefix)
    fill(store, np.random.default_rng(6), {"skill": (60, 1.0), "mgmatch": (40, 1.5)})
    store.close()
    cfg = ab_config(tmp_path, [EXPERIMENT, {"name": "other", "pools": ["3v3"], "arms": [{"name": "a"}]}])
    code, out, err = _run(capsys, "--redis-url", url, "--config", str(cfg), "--json")  # every experiment
    assert code == 0, err
    reports = json.loads(out)["experiments"]
    assert [r["experiment"] for r in reports] == ["skill-vs-mgmatch", "other"]
    assert [a["matches"] for a in reports[0]["arms"]] == [60, 40] and reports[0]["srm"]["p_value"] < 0.05
    code, out, err = _run(capsys, "skill-vs-mgmatch", "--redis-url", url, "--config", str(cfg))
    assert code == 0 and "MISMATCH" not in out and "skill-vs-mgmatch" in out, err


# --------------------------------------------------------------------------- the HTTP API


def _runtime(tmp_path, store: str, redis=None, **settings):
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    extra = {"store": "redis", "redis_url": redis[0], "key_prefix": redis[1]} if store == "redis" else {"store": "memory"}
    return Runtime.build(Settings(config=ab_config(tmp_path), embedded_workers=False, **extra, **settings))


@pytest.mark.service
@pytest.mark.parametrize("kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_http_route_on_a_live_server(tmp_path, kind, request):
    from mgmatch.app.api import build_asgi

    rt = _runtime(tmp_path, kind, request.getfixturevalue("redis_url") if kind == "redis" else None,
                  api_keys=["k1"])
    fill(rt.store, np.random.default_rng(7), {"skill": (50, 1.0), "mgmatch": (50, 1.6)})
    try:
        with LiveServer(build_asgi(rt)) as srv, client(srv.url) as c:
            assert c.get("/v1/experiments/skill-vs-mgmatch").status_code == 401  # authenticated like every route
            key = {"X-API-Key": "k1"}
            r = c.get("/v1/experiments/skill-vs-mgmatch", headers=key)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body == report_from_store(rt.store, rt.config, "skill-vs-mgmatch")  # one computation
            assert _arms(body)["mgmatch"]["lift"]["significant"]
            r = c.get("/v1/experiments/nope", headers=key)
            assert r.status_code == 404 and r.json()["error"]["field"] == "name" and "nope" in r.json()["error"]["message"]
            r = c.get("/v1/experiments/skill-vs-mgmatch", params={"control": "nope"}, headers=key)
            assert r.status_code == 422 and r.json()["error"]["field"] == "query.control"
            r = c.get("/v1/experiments/skill-vs-mgmatch", params={"alpha": "2"}, headers=key)
            assert r.status_code == 422 and r.json()["error"]["field"] == "query.alpha"
            r = c.get("/v1/experiments/skill-vs-mgmatch", params={"alpha": "x"}, headers=key)
            assert r.status_code == 422 and r.json()["error"]["field"] == "query.alpha"
            r = c.get("/v1/experiments/skill-vs-mgmatch", params={"control": "mgmatch", "alpha": "0.01"}, headers=key)
            assert r.status_code == 200 and r.json()["control"] == "mgmatch" and r.json()["alpha"] == 0.01
    finally:
        rt.stop()


@pytest.mark.service
@pytest.mark.parametrize("kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_end_to_end_the_matchmaker_records_arms_and_the_route_reads_them(tmp_path, kind, request):
    """Tickets through the API → the embedded matchmaker forms matches within each arm → results posted →
    the report counts every match in the arm its players were given."""
    from mgmatch.app.ab import Experiment
    from mgmatch.app.api import build_asgi

    rt = _runtime(tmp_path, kind, request.getfixturevalue("redis_url") if kind == "redis" else None)
    rt.start_embedded(tick_s=0.02)
    exp = Experiment(rt.config.experiments[0])
    rng = np.random.default_rng(9)
    players = [{"id": f"e{i}", "features": [round(float(v), 3) for v in rng.uniform(-1, 1, 4)]} for i in range(48)]
    try:
        with LiveServer(build_asgi(rt)) as srv, client(srv.url) as c:
            r = c.post("/v1/tickets/batch", json={"tickets": [{"pool": "small", "players": [p]} for p in players]})
            ids = [t["id"] for t in r.json()["tickets"]]
            arm_of = {p["id"]: exp.arm_for(p["id"]).name for p in players}
            counts = {a: sum(1 for v in arm_of.values() if v == a) for a in ("skill", "mgmatch")}

            def done():  # every full match's worth of each arm matched (leftovers of fewer than 6 wait)
                views = [c.get(f"/v1/tickets/{t}").json() for t in ids]
                matched = [v for v in views if v["status"] == "matched"]
                return matched if len(matched) == sum(6 * (n // 6) for n in counts.values()) else None

            views = poll(done, timeout=120, every=0.5)
            matches = {v["match"]["match_id"]: v["match"] for v in views}
            for mid, m in matches.items():
                assert {arm_of[p] for team in m["teams"] for p in team} == {m["arm"]}  # arms never mix
                assert c.post(f"/v1/matches/{mid}/result", json={"engagement": 1.0}).status_code == 202
            body = c.get("/v1/experiments/skill-vs-mgmatch").json()
            for a in body["arms"]:
                n = sum(1 for m in matches.values() if m["arm"] == a["name"])
                assert a["matches"] == a["results"] == n == counts[a["name"]] // 6
    finally:
        rt.stop()
