"""Poison jobs over a real Redis: a job that crashes its solver every time, or whose run raises,
ends in the pool's dead-letter stream, its tickets back in the queue; the pool goes on matching."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, service_config  # noqa: E402

from mgmatch.app import metrics  # noqa: E402
from mgmatch.app.matchmaker import Matchmaker  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import Ticket, new_ticket_id  # noqa: E402
from mgmatch.app.workers import Harness, solver_step  # noqa: E402

pytestmark = pytest.mark.redis


class Crash(BaseException):
    """The solver process dying mid-job (SIGKILL, OOM, a segfault): nothing after it runs, no ack."""


def _setup(tmp_path, redis_url, **settings):
    url, prefix = redis_url
    rt = Runtime.build(Settings(config=service_config(tmp_path), store="redis", redis_url=url, key_prefix=prefix,
                                embedded_workers=False, **settings))
    now = time.time()
    ids = [rt.store.create(Ticket(new_ticket_id("small"), "small", [{"id": f"w{i}", "features": features(i)}],
                                  now, now + 120))[0].id for i in range(6)]
    mm = Matchmaker(rt.pools["small"], rt.store, None, rt.experiments, publish=rt.store.claim_job)
    return rt, Harness("solver", rt), mm, ids


def _dead_letters() -> float:
    return metrics.DEAD_LETTERS.labels("small")._value.get()  # noqa: SLF001 - prometheus-client has no getter


def test_a_job_that_crashes_its_solver_every_time_is_dead_lettered_after_n_deliveries(tmp_path, redis_url):
    rt, h, mm, ids = _setup(tmp_path, redis_url, max_deliveries=3)
    store = rt.store
    assert mm.tick() == 1
    real_run = rt.runner.run

    def crash(job):
        raise Crash(job.claim_id)

    rt.runner.run = crash
    before = _dead_letters()
    for delivery in (1, 2, 3):  # read once, then taken over twice: each run dies
        with pytest.raises(Crash):
            solver_step(h, min_idle_ms=0)
        assert [store.get(t).status for t in ids] == ["proposed"] * 6, delivery
        assert store.jobs_lag("small") == 1
    solver_step(h, min_idle_ms=0)  # the 4th delivery: not run again, dead-lettered
    assert [store.get(t).status for t in ids] == ["queued"] * 6
    assert store.r.hget(store.keys.ticket("small", ids[0]), "crashes") == "1"
    assert store.jobs_lag("small") == 0 and store.r.xlen(store.keys.jobs("small")) == 0
    (_, dead), = store.dead_letters("small")
    assert dead["deliveries"] == 4 and sorted(dead["job"]["tickets"]) == sorted(ids)
    assert "crashed its solver" in dead["reason"] and dead["consumer"] == h.worker_id
    assert _dead_letters() == before + 1
    # the pool is not stalled: with a healthy solver the same tickets match
    rt.runner.run = real_run
    assert mm.tick() == 1
    assert solver_step(h, min_idle_ms=0)
    assert [store.get(t).status for t in ids] == ["matched"] * 6


def test_a_job_whose_run_raises_is_dead_lettered_at_once_with_its_tickets_released(tmp_path, redis_url):
    rt, h, mm, ids = _setup(tmp_path, redis_url, max_ticket_crashes=2)
    store = rt.store

    def boom(*args, **kwargs):
        raise RuntimeError("solver bug")

    real_solve = rt.engine.solve
    rt.engine.solve = boom
    before = _dead_letters()
    assert mm.tick() == 1
    assert solver_step(h, min_idle_ms=60_000)
    assert [store.get(t).status for t in ids] == ["queued"] * 6
    assert store.jobs_lag("small") == 0
    (_, dead), = store.dead_letters("small")
    assert dead["reason"] == "run raised RuntimeError: solver bug" and dead["deliveries"] == 1
    assert _dead_letters() == before + 1
    # a second failing job with the same tickets: each has now been in 2 failed jobs → expired, with why
    assert mm.tick() == 1
    assert solver_step(h, min_idle_ms=60_000)
    views = [store.get(t) for t in ids]
    assert [v.status for v in views] == ["expired"] * 6
    assert all("failed" in v.reason for v in views)
    assert len(store.dead_letters("small")) == 2 and store.player_count("small") == 0
    rt.engine.solve = real_solve
