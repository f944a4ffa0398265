"""The whole loop a studio runs, end to end on a real uvicorn server: tickets → matches → the game server posts
each match's engagement → `mgmatch export-log` → `mgmatch fit-engagement --logs` → a pool config naming the
refitted file ({path, sha256}) verifies, loads and forms matches with it.

The engagement posted is a known function of the players' features (each player's first two features, and how
even the teams are on the third), so the fit has signal to find: its held-out R² must be clearly positive.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, LiveServer, client, poll, service_config  # noqa: E402

from mgmatch.app.api import build_asgi  # noqa: E402
from mgmatch.app.results import export_matchlog  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.core.engagement import load_engagement  # noqa: E402

MATCHES = 150  # 900 players of pool "small" (2 teams of 3, 4 features)


def true_engagement(teams: list[list[list[float]]]) -> float:
    """What the game server reports: the players' x0 + x1/2, less the teams' imbalance on x2."""
    x = [np.array(t) for t in teams]
    return float(sum((t[:, 0] + 0.5 * t[:, 1]).sum() for t in x) - abs(x[0][:, 2].sum() - x[1][:, 2].sum()))


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from mgmatch.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                                            **(env or {})})


def _play(url: str, tag: str, n_matches: int, seed: int) -> dict[str, dict]:
    """Queue 6·n_matches seeded players; wait until every ticket is matched; post each match's result.
    Returns match id → the match as a ticket shows it."""
    rng = np.random.default_rng(seed)
    feats = {f"{tag}{i}": [round(float(v), 4) for v in rng.uniform(-1, 1, 4)] for i in range(6 * n_matches)}
    pids = list(feats)
    ids = []
    with client(url) as c:
        for s in range(0, len(pids), 100):
            body = {"tickets": [{"pool": "small", "players": [{"id": p, "features": feats[p]}]}
                                for p in pids[s:s + 100]]}
            r = c.post("/v1/tickets/batch", json=body)
            assert r.status_code == 200, r.text
            ids += [t["id"] for t in r.json()["tickets"]]

        def all_matched():
            views = [c.get(f"/v1/tickets/{t}").json() for t in ids]
            return views if all(v["status"] == "matched" for v in views) else None

        views = poll(all_matched, timeout=120, every=0.5)
        matches = {v["match"]["match_id"]: v["match"] for v in views}
        assert len(matches) == n_matches
        for mid, m in matches.items():
            y = true_engagement([[feats[p] for p in team] for team in m["teams"]])
            r = c.post(f"/v1/matches/{mid}/result", json={"engagement": y})
            assert r.status_code == 202, r.text
        r = c.post(f"/v1/matches/{next(iter(matches))}/result", json={"engagement": -5.0})
        assert r.status_code == 409  # the first result stays
    return matches


def _check_log(log: Path, matches: dict[str, dict]) -> None:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert {x["match_id"] for x in lines} == set(matches)
    for x in lines:
        assert x["format"] == "mgmatch-matchlog/v1" and [[p["id"] for p in t] for t in x["teams"]] == \
            matches[x["match_id"]]["teams"]
        assert x["engagement"] == pytest.approx(true_engagement([[p["features"] for p in t] for t in x["teams"]]))


def _agreement(model_path: Path, seed: int = 11, n: int = 400) -> float:
    """Correlation of a model's prediction with the true engagement over fresh random 3v3 teams."""
    m = load_engagement(model_path)
    x = np.random.default_rng(seed).uniform(-1, 1, (n, 6, 4))
    team_of = np.array([0, 0, 0, 1, 1, 1])
    pred = [m.evaluate(m.embed(f), team_of) for f in x]
    return float(np.corrcoef(pred, [true_engagement([f[:3].tolist(), f[3:].tolist()]) for f in x])[0, 1])


def _fit_and_reload(tmp_path: Path, log: Path, store_settings: dict) -> None:
    """Fit on the exported log, then a pool naming the refitted file verifies, loads and forms a match with it."""
    eng = tmp_path / "refit.json"
    out = _cli("fit-engagement", "--logs", str(log), "--out", str(eng), "--epochs", "80", "--patience", "0",
               "--seed", "0", "--quiet")
    assert out.returncode == 0, out.stderr
    assert json.loads(eng.read_text())["training"]["holdout"]["r2"] > 0.3
    # the refitted model learned the game's engagement; the model the matches were formed with knows nothing of it
    assert _agreement(eng) > 0.7
    assert abs(_agreement(SPEC_EXAMPLES / "engagement-small.json")) < 0.3
    digest = hashlib.sha256(eng.read_bytes()).hexdigest()
    (tmp_path / "refit").mkdir()
    cfg = yaml.safe_load(service_config(tmp_path / "refit").read_text())
    cfg["pools"][0]["engagement_model"] = {"path": str(eng), "sha256": digest}  # the pool's own file, pinned
    cfg.pop("models")  # the old "small" entry: the pool's own file now takes that name
    cfg_path = tmp_path / "refit" / "service.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    out = _cli("models", "verify", "--config", str(cfg_path))
    assert out.returncode == 0, out.stderr + out.stdout
    rt = Runtime.build(Settings(config=cfg_path, **store_settings))
    rt.start_embedded(tick_s=0.02)
    try:
        with LiveServer(build_asgi(rt)) as srv:
            (m,) = _play(srv.url, "again", 1, seed=7).values()
        assert m["model_version"] == digest[:12]  # formed with the refitted model
    finally:
        rt.stop()


def _serve_and_play(settings: Settings, tag: str, seed: int, export=None) -> dict[str, dict]:
    """A service of its own (stopped afterwards, as before a deploy of the new model) plays MATCHES matches."""
    rt = Runtime.build(settings)
    rt.start_embedded(tick_s=0.02)
    try:
        with LiveServer(build_asgi(rt)) as srv:
            matches = _play(srv.url, tag, MATCHES, seed=seed)
        if export is not None:
            export(rt)
    finally:
        rt.stop()
    return matches


@pytest.mark.slow
def test_loop_on_the_memory_store(tmp_path):
    log = tmp_path / "log.jsonl"
    got = {}

    def export(rt):  # the memory store lives in the serving process: export from there
        got["stats"] = export_matchlog(rt.store, list(rt.pools), log)

    matches = _serve_and_play(Settings(config=service_config(tmp_path)), "m", 1, export)
    stats = got["stats"]
    assert stats.written == {"small": MATCHES, "3v3": 0}
    _check_log(log, matches)
    _fit_and_reload(tmp_path, log, {})


@pytest.mark.slow
@pytest.mark.redis
def test_loop_on_redis_with_the_export_log_command(tmp_path, redis_url):
    url, prefix = redis_url
    store = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    matches = _serve_and_play(Settings(config=service_config(tmp_path), **store), "r", 2)
    log = tmp_path / "log.jsonl"
    env = {"MGMATCH_KEY_PREFIX": prefix, "MGMATCH_CONFIG": str(service_config(tmp_path))}
    out = _cli("export-log", "--out", str(log), "--store", "redis", "--redis-url", url, "--pool", "small", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"out": str(log), "matches": MATCHES, "per_pool": {"small": MATCHES},
                                      "without_result": {"small": 0}}
    _check_log(log, matches)
    _fit_and_reload(tmp_path, log, store)
