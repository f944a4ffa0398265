"""Ready checks survive killed workers (issue 30): real ``mgmatch worker matchmaker`` and ``worker solver``
processes on Redis, SIGKILLed while a match is proposed and its players answer. The check lives in the
store: the answers still confirm it or send the others back to their place, a restarted matchmaker ends
an overdue check, and no player is lost or in two matches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, poll, service_config  # noqa: E402

from mgmatch.app.store import RedisStore, Ticket, new_ticket_id  # noqa: E402

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.service]


class _Workers:
    """The pool's matchmaker and one solver, as processes that the test kills and starts again."""

    def __init__(self, tmp_path: Path, url: str, prefix: str):
        cfg = service_config(tmp_path, accept={"timeout_s": 8}, lease_s=5.0)
        self.env = {**os.environ, "MGMATCH_CONFIG": str(cfg), "MGMATCH_STORE": "redis", "MGMATCH_REDIS_URL": url,
                    "MGMATCH_KEY_PREFIX": prefix, "MGMATCH_EMBEDDED_WORKERS": "false", "OMP_NUM_THREADS": "1",
                    "PYTHONUNBUFFERED": "1"}
        self.tmp = tmp_path
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, kind: str) -> None:
        extra = ["--min-idle-ms", "1000"] if kind == "solver" else []
        log = (self.tmp / f"{kind}.log").open("a")
        self.procs[kind] = subprocess.Popen(
            [sys.executable, "-c", "from mgmatch.cli import main; main()", "worker", kind, "--metrics-port", "0",
             *extra], env=self.env, stdout=subprocess.DEVNULL, stderr=log, text=True)

    def kill(self, kind: str) -> None:
        p = self.procs[kind]
        p.send_signal(signal.SIGKILL)
        p.wait(10)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def _queue(store: RedisStore, tag: str, n: int = 6) -> list[str]:
    now = time.time()
    return [store.create(Ticket(new_ticket_id("small"), "small", [{"id": f"{tag}{i}", "features": features(i)}],
                                now, now + 600))[0].id for i in range(n)]


def _check(store: RedisStore, ids: list[str]):
    """The match id when every one of ``ids`` is proposed in one ready check, else None."""
    ts = [store.get(t) for t in ids]
    mids = {(t.result or {}).get("match_id") for t in ts if t is not None and t.status == "proposed"
            and "accept_deadline" in (t.result or {})}
    return mids.pop() if len(mids) == 1 and all(t.status == "proposed" for t in ts) else None


def test_answers_and_a_restarted_matchmaker_end_checks_whose_workers_were_killed(tmp_path, redis_url):
    url, prefix = redis_url
    store = RedisStore.from_url(url, prefix=prefix)
    w = _Workers(tmp_path, url, prefix)
    w.start("matchmaker")
    w.start("solver")
    try:
        # 1. killed mid-check, every player accepts: matched once, with the proposed teams
        first = _queue(store, "a")
        mid = poll(lambda: _check(store, first), timeout=120)
        w.kill("solver")
        w.kill("matchmaker")
        assert [store.answer_check("small", mid, f"a{i}", True) for i in range(6)] == ["pending"] * 5 + ["matched"]
        assert {store.get(t).status for t in first} == {"matched"}
        assert {store.get(t).result["match_id"] for t in first} == {mid}

        # 2. killed mid-check, one declines: the decliner ends, the others go back at their place and are
        #    proposed again with a newcomer once the workers are back
        w.start("matchmaker")
        w.start("solver")
        second = _queue(store, "b")
        created = {t: store.get(t).created_at for t in second}
        mid2 = poll(lambda: _check(store, second), timeout=120)
        w.kill("solver")
        assert store.answer_check("small", mid2, "b0", True) == "pending"
        assert store.answer_check("small", mid2, "b3", False) == "declined"
        back = [t for t in second if store.get(t).status == "queued"]
        assert len(back) == 5 and store.get(second[3]).status == "declined"
        assert all(store.get(t).created_at == created[t] for t in back)  # their original waiting time
        assert store.queued_ids("small", 10) == back  # in creation order, ahead of anything newer
        newcomer = _queue(store, "n", 1)
        w.start("solver")
        mid3 = poll(lambda: _check(store, back + newcomer), timeout=120)
        assert mid3 != mid2
        w.kill("matchmaker")
        players = [p for team in store.get(back[0]).result["teams"] for p in team]
        assert [store.answer_check("small", mid3, p, True) for p in players][-1] == "matched"

        # 3. killed mid-check and nobody answers in time: the check outlives the matchmaker; the restarted
        #    one ends it, the accepter goes back to the queue, the others expire
        w.start("matchmaker")
        third = _queue(store, "c")
        mid4 = poll(lambda: _check(store, third), timeout=120)
        w.kill("matchmaker")
        w.kill("solver")
        assert store.answer_check("small", mid4, "c0", True) == "pending"
        time.sleep(max(0.0, store.get(third[0]).result["accept_deadline"] - time.time()) + 0.5)
        assert store.get(third[0]).status == "proposed"  # nothing ended it while no matchmaker ran
        w.start("matchmaker")
        poll(lambda: store.get(third[1]).status == "expired", timeout=120)
        assert store.get(third[0]).status == "queued"
        assert {store.get(t).status for t in third[1:]} == {"expired"}

        # nobody lost, nobody in two matches
        seen: dict[str, str] = {}
        for t in first + second + newcomer + third:
            v = store.get(t)
            assert v.status in ("matched", "queued", "declined", "expired"), (t, v.status)
            if v.status == "matched":
                for p in v.players:
                    assert seen.setdefault(p["id"], v.result["match_id"]) == v.result["match_id"]
        assert len(seen) == 12
    finally:
        w.stop()
