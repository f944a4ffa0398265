"""Separate worker processes over a real Redis: crash recovery, no lost ticket, no double booking."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config, shipped_predictor_problem  # noqa: E402

from mgmatch.app.matchmaker import Job, JobRunner, Matchmaker  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import Ticket, new_ticket_id  # noqa: E402

pytestmark = pytest.mark.redis

# A matchmaker+solver that claims a candidate pool, reads the solve job from the stream, and hangs
# (the test then kills it with SIGKILL: "crashed mid-match", job unacknowledged, tickets proposed).
DOOMED = textwrap.dedent("""
    import time
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings
    from mgmatch.app.workers import make_matchmakers
    rt = Runtime.build(Settings())
    mm = [m for m in make_matchmakers(rt) if m.pool.name == "small"][0]
    assert mm.tick() == 1, "no job published"
    jobs = rt.store.read_jobs("small", "doomed", count=1, block_ms=1000)
    assert len(jobs) == 1
    print("CLAIMED", jobs[0][1]["claim_id"], flush=True)
    time.sleep(600)
""")


def _env(cfg: Path, url: str, prefix: str) -> dict[str, str]:
    return {**os.environ, "MGMATCH_CONFIG": str(cfg), "MGMATCH_STORE": "redis", "MGMATCH_REDIS_URL": url,
            "MGMATCH_KEY_PREFIX": prefix, "MGMATCH_EMBEDDED_WORKERS": "false", "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1"}


def _worker(kind: str, env: dict, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from mgmatch.cli import main; main()", "worker", kind, "--metrics-port", "0", *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _runtime(cfg: Path, url: str, prefix: str) -> Runtime:
    return Runtime.build(Settings(config=cfg, store="redis", redis_url=url, key_prefix=prefix, embedded_workers=False))


def _queue(rt: Runtime, n: int, pool: str = "small") -> list[str]:
    ids, now = [], time.time()
    for i in range(n):
        t = Ticket(new_ticket_id(pool), pool, [{"id": f"w{i}", "features": features(i)}], now + i * 1e-3, now + 120)
        ids.append(rt.store.create(t)[0].id)
    return ids


def _doomed(env: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", DOOMED], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if not line.startswith("CLAIMED"):
        proc.kill()
        raise AssertionError(f"doomed worker failed: {line!r} {proc.stderr.read()[-2000:]}")
    return proc, line.split()[1]


def _assert_no_double_booking(tickets: list[dict]) -> dict[str, list[list[str]]]:
    """Every ticket matched once; a match's teams agree across its tickets; no player in two matches."""
    matches: dict[str, list[list[str]]] = {}
    for t in tickets:
        assert t.status == "matched", t.status
        m = t.result
        assert matches.setdefault(m["match_id"], m["teams"]) == m["teams"]
        for pid in (p["id"] for p in t.players):
            assert pid in m["teams"][m["team"]]
    seen: dict[str, str] = {}
    for mid, teams in matches.items():
        for pid in (p for team in teams for p in team):
            assert pid not in seen, f"player {pid} in {seen[pid]} and {mid}"
            seen[pid] = mid
    return matches


def test_solver_killed_mid_match_is_taken_over_by_another(tmp_path, redis_url):
    url, prefix = redis_url
    cfg = service_config(tmp_path)
    env = _env(cfg, url, prefix)
    rt = _runtime(cfg, url, prefix)
    ids = _queue(rt, 6)
    doomed, claim_id = _doomed(env)
    try:
        assert [rt.store.get(t).status for t in ids] == ["proposed"] * 6
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    assert rt.store.jobs_lag("small") == 1  # the job is pending for the dead consumer
    solver = _worker("solver", env, "--min-idle-ms", "300")
    try:
        poll(lambda: all(rt.store.get(t).status == "matched" for t in ids), timeout=60)
        tickets = [rt.store.get(t) for t in ids]
        matches = _assert_no_double_booking(tickets)
        # the dead worker's job, finished by the new one under its fenced claim id '<claim>.<token>'
        assert len(matches) == 1 and next(iter(matches)).startswith(f"small.{claim_id}.")
        poll(lambda: rt.store.jobs_lag("small") == 0, timeout=10)
    finally:
        solver.send_signal(signal.SIGTERM)
        assert solver.wait(20) == 0, solver.stderr.read()[-2000:]


def test_slow_runner_overtaken_by_a_takeover_cannot_commit(tmp_path, redis_url):
    """Runner A (slow, not dead) reaches its commit only after runner B fenced the claim: A's commit
    fails and A's release leaves B's tickets alone; B forms the match under its fenced id."""
    url, prefix = redis_url
    cfg = service_config(tmp_path)
    rt = _runtime(cfg, url, prefix)
    ids = _queue(rt, 6)
    mm = Matchmaker(rt.pools["small"], rt.store, None, rt.experiments, publish=rt.store.claim_job)
    assert mm.tick() == 1
    (_, obj), = rt.store.read_jobs("small", "a", count=1, block_ms=None)
    job = Job.from_json(obj)
    store, fenced = rt.store, f"{job.claim_id}.b"

    class TakenOverBeforeCommit:  # the store as runner A sees it: B fences the claim while A solves
        def __getattr__(self, name):
            return getattr(store, name)

        def commit(self, *args, **kw):
            assert store.takeover("small", job.claim_id, fenced, job.tickets, time.time() + 30) == 6
            return store.commit(*args, **kw)

    slow = JobRunner(rt.runner.pools, TakenOverBeforeCommit(), rt.engine, rt.experiments)
    assert slow.run(job) == 0
    assert [rt.store.get(t).status for t in ids] == ["proposed"] * 6  # still B's, not requeued by A
    assert rt.runner.run(dataclasses.replace(job, claim_id=fenced)) == 1
    matches = _assert_no_double_booking([rt.store.get(t) for t in ids])
    assert next(iter(matches)).startswith(f"small.{fenced}-0-")


def test_lease_expiry_returns_a_dead_workers_tickets_to_the_queue(tmp_path, redis_url):
    url, prefix = redis_url
    cfg = service_config(tmp_path, lease_s=1.0)
    rt = _runtime(cfg, url, prefix)
    ids = _queue(rt, 6)
    doomed, claim_id = _doomed(_env(cfg, url, prefix))
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    time.sleep(1.2)
    # nobody takes the job over; the embedded matchmaker's reaper hands the tickets back and matches them
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert mm.tick() == 1
    matches = _assert_no_double_booking([rt.store.get(t) for t in ids])
    assert len(matches) == 1 and not next(iter(matches)).startswith(f"small.{claim_id}")


def test_production_topology_api_matchmaker_two_solvers_one_killed(tmp_path, redis_url, live):
    url, prefix = redis_url
    cfg = service_config(tmp_path, lease_s=3.0)
    env = _env(cfg, url, prefix)
    rt = _runtime(cfg, url, prefix)
    srv = live(rt)
    workers = [_worker("matchmaker", env), _worker("solver", env, "--min-idle-ms", "500"),
               _worker("solver", env, "--min-idle-ms", "500")]
    try:
        with client(srv.url) as c:
            assert c.get("/readyz").json()["checks"]["store"] is True
            ids = []
            for i in range(24):
                r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"g{i}", "features": features(i)}]})
                assert r.status_code == 201, r.text
                ids.append(r.json()["id"])
            poll(lambda: any(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids), timeout=60)
            workers[1].send_signal(signal.SIGKILL)  # one solver dies while matches are being formed
            poll(lambda: all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids), timeout=90)
            views = [c.get(f"/v1/tickets/{t}").json() for t in ids]
        matches = _assert_no_double_booking([rt.store.get(t) for t in ids])
        assert len(matches) == 4 and all(sum(map(len, teams)) == 6 for teams in matches.values())
        assert {v["match"]["match_id"] for v in views} == set(matches)
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(20)


def test_inference_worker_serves_remote_predictions_and_absence_falls_back(tmp_path, redis_url):
    from mgmatch.app.ab import Plan
    from mgmatch.app.workers import RemotePredictors
    from mgmatch.core.presets import generate_instances

    url, prefix = redis_url
    cfg = service_config(tmp_path)
    env = _env(cfg, url, prefix)
    settings = Settings(config=cfg, store="redis", redis_url=url, key_prefix=prefix, embedded_workers=False)
    from mgmatch.app.store import make_store

    store = make_store(settings)
    rt = Runtime.build(settings, store=store, predictors=RemotePredictors(store))
    # a 12v12 pool: MGMatch's policy asks the network for it (a 3v3 pool would be enumerated)
    inst = generate_instances("12v12", 1, seed=3)[0]
    plan = Plan("mgmatch", "exact", 3000.0, "12v12", None, None)
    down = rt.engine.solve(inst, plan, "t")
    assert down.fallback == "unavailable" and down.method != "mgmatch"
    if (problem := shipped_predictor_problem("12v12")) is not None:
        pytest.skip(problem)
    worker = _worker("inference", env)
    try:
        poll(lambda: store.workers("inference"), timeout=60)
        rt.engine.predictors._alive_at = 0.0  # look again now rather than after the 2 s cache
        sol = rt.engine.solve(inst, plan, "t")
        assert sol.method == "mgmatch" and getattr(sol, "fallback", None) is None, sol
        assert sol.model_version.startswith("12v12@") and sol.has_assignment
        assert sol.stats["predictor_used"] == sol.model_version
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0, worker.stderr.read()[-2000:]
    assert not store.workers("inference")  # the heartbeat went with it
