"""The in-process matchmaker (``mgmatch serve``) while its store is unavailable: like the separate workers
it backs off (50 ms doubling to 2 s) and logs one warning when the outage starts and one line when it ends,
not a traceback per tick; matching resumes by itself. Any other error of a tick is logged with its
traceback at most once a minute and never stops the loop."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, poll, service_config  # noqa: E402

from mgmatch.app.matchmaker import Matchmaker, Outage  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import StoreUnavailable, Ticket, new_ticket_id  # noqa: E402

MM_LOG = "mgmatch.matchmaker"


class SwitchedStore:
    """The runtime's store behind a switch: while ``error`` is set every call raises it."""

    def __init__(self, inner):
        self.inner, self.error, self.calls_refused = inner, None, 0

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self.error is not None:
                self.calls_refused += 1
                raise self.error
            return attr(*args, **kwargs)
        return call


def _queue(store, tag: str, n: int = 6) -> list[str]:
    now = time.time()
    return [store.create(Ticket(new_ticket_id("small"), "small", [{"id": f"{tag}{i}", "features": features(i)}],
                                now - 10 + i * 1e-3, now + 300))[0].id for i in range(n)]


def _matched(store, ids: list[str]) -> bool:
    try:
        return all((t := store.get(tid)) is not None and t.status == "matched" for tid in ids)
    except StoreUnavailable:
        return False


def _records(caplog, level: int | None = None) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == MM_LOG and (level is None or r.levelno == level)]


@pytest.fixture
def memory_rt(tmp_path):
    rt = Runtime.build(Settings(config=service_config(tmp_path), store="memory", embedded_workers=False))
    rt.warm()
    yield rt
    rt.stop()


def test_an_outage_backs_off_to_the_cap_logs_once_each_way_and_matching_resumes(memory_rt, caplog):
    rt = memory_rt
    store = SwitchedStore(rt.store)
    mm = Matchmaker(rt.pools["small"], store, rt.runner, rt.experiments)
    assert mm.step() == mm.tick_s  # an empty queue: the idle wait
    caplog.set_level(logging.INFO, logger=MM_LOG)
    store.error = StoreUnavailable("Redis unavailable: ConnectionError: connection refused")
    waits = [mm.step() for _ in range(12)]  # 12 ticks into the outage
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert store.calls_refused == 12
    warnings = _records(caplog, logging.WARNING)
    assert len(warnings) == 1 and "store unavailable" in warnings[0].getMessage()
    assert "pool small" in warnings[0].getMessage()
    assert not _records(caplog, logging.ERROR) and not any(r.exc_info for r in caplog.records)

    store.error = None
    ids = _queue(rt.store, "a")
    assert mm.step() == 0  # the store answers: a match at once, no wait
    assert _matched(rt.store, ids)
    back = [r for r in _records(caplog, logging.INFO) if "store back after" in r.getMessage()]
    assert len(back) == 1 and "12 failed attempts" in back[0].getMessage()
    assert len(_records(caplog)) == 2  # the outage: one line as it began, one as it ended

    store.error = StoreUnavailable("again")  # a second outage starts from 50 ms again, logged again
    assert [mm.step() for _ in range(2)] == [0.05, 0.1]
    assert len(_records(caplog, logging.WARNING)) == 2


def test_a_socket_error_that_escapes_the_store_counts_as_an_outage(memory_rt, caplog):
    store = SwitchedStore(memory_rt.store)
    mm = Matchmaker(memory_rt.pools["small"], store, memory_rt.runner, memory_rt.experiments)
    caplog.set_level(logging.INFO, logger=MM_LOG)
    store.error = ConnectionResetError("connection reset by peer")
    assert [mm.step() for _ in range(3)] == [0.05, 0.1, 0.2]
    assert len(_records(caplog, logging.WARNING)) == 1 and not _records(caplog, logging.ERROR)


def test_other_tick_errors_are_logged_with_a_traceback_at_most_once_a_minute(memory_rt, caplog):
    rt = memory_rt
    store = SwitchedStore(rt.store)
    mm = Matchmaker(rt.pools["small"], store, rt.runner, rt.experiments)
    caplog.set_level(logging.INFO, logger=MM_LOG)
    store.error = KeyError("a bug")
    waits = [mm.step() for _ in range(50)]
    assert waits == [0.5] * 50  # retried, never faster than the workers retry a failing step
    errors = _records(caplog, logging.ERROR)
    assert len(errors) == 1 and errors[0].exc_info is not None and "tick failed" in errors[0].getMessage()
    assert not _records(caplog, logging.WARNING)  # not an outage

    mm.error_log_every_s = 0.0  # the minute has passed: logged again, with the count left out meanwhile
    mm.step()
    errors = _records(caplog, logging.ERROR)
    assert len(errors) == 2 and "49 more failed ticks were not logged" in errors[1].getMessage()

    store.error = None
    ids = _queue(rt.store, "b")
    assert mm.step() == 0 and _matched(rt.store, ids)


@pytest.mark.redis
def test_the_embedded_loop_rides_out_a_redis_that_stops_and_comes_back(spare_redis, tmp_path, caplog):
    """The audit's repro without the server process: the loop of ``mgmatch serve`` on a redis-server of the
    test's own, stopped for ~2 s, then started again (empty)."""
    rt = Runtime.build(Settings(config=service_config(tmp_path), store="redis", redis_url=spare_redis.url,
                                key_prefix="mmo", embedded_workers=False))
    rt.warm()
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    mm.outage = Outage(mm.outage.what, first_s=0.01, cap_s=0.16)  # the 50 ms → 2 s curve, 5× faster
    waits: list[float] = []
    failed = mm.outage.failed

    def record(err):
        waits.append(failed(err))
        return waits[-1]
    mm.outage.failed = record  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger=MM_LOG)
    mm.start()
    try:
        first = _queue(rt.store, "a")
        poll(lambda: _matched(rt.store, first), timeout=20)

        spare_redis.stop()
        time.sleep(2.0)
        assert mm.alive
        assert not _records(caplog, logging.ERROR), [r.getMessage() for r in _records(caplog, logging.ERROR)]
        assert not any(r.exc_info for r in _records(caplog))
        assert len(_records(caplog, logging.WARNING)) == 1
        assert len(waits) >= 4 and waits[:4] == [0.01, 0.02, 0.04, 0.08]
        assert max(waits) == 0.16 and waits == sorted(waits)  # backed off, up to the cap

        spare_redis.start()
        second = _queue(rt.store, "b")  # Redis came back empty: new tickets match without a restart
        poll(lambda: _matched(rt.store, second), timeout=20)
        back = [r for r in _records(caplog, logging.INFO) if "store back after" in r.getMessage()]
        assert len(back) == 1
        assert len(_records(caplog)) == 2, [r.getMessage() for r in _records(caplog)]
    finally:
        mm.stop()
        rt.stop()
    assert not mm.alive
