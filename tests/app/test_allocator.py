"""Server handoff (issue 30): a committed match is POSTed to the pool's allocator, a real local HTTP
process (tests/app/allocator_server.py); its connection goes into the tickets' match. An allocator that
is slow, fails or answers garbage is retried, then the players return to the queue at their place with
the reason; a flaky one that recovers within the retries allocates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, free_port, poll, service_config  # noqa: E402

from mgmatch.app.allocator import assignment_of  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402

SERVER = Path(__file__).with_name("allocator_server.py")


@pytest.fixture
def allocator():
    """Factory: allocator(mode, fails=0) → its URL; the process is stopped after the test."""
    procs = []

    def start(mode: str, fails: int = 0) -> str:
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, str(SERVER), str(port), mode, str(fails)]))
        url = f"http://127.0.0.1:{port}"
        assert poll(lambda: _up(url), timeout=20)
        return url

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/log", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _run(tmp_path, live, url: str, retries: int = 1, timeout_ms: float = 500):
    rt = Runtime.build(Settings(config=service_config(
        tmp_path, allocator={"url": url + "/allocate", "timeout_ms": timeout_ms, "retries": retries})))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    c = client(srv.url).__enter__()
    ids = [c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"h{i}", "features": features(i)}]})
           .json()["id"] for i in range(6)]
    return rt, c, ids


def test_a_match_gets_the_allocators_connection(tmp_path, live, allocator):
    url = allocator("ok")
    rt, c, ids = _run(tmp_path, live, url)
    views = poll(lambda: [v for t in ids if (v := c.get(f"/v1/tickets/{t}").json())["status"] == "matched"]
                 if all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids) else None)
    a = views[0]["match"]["assignment"]
    assert a == {"connection": "10.0.0.1:7777", "server": "gs-1"}
    assert all(v["match"]["assignment"] == a for v in views)
    sent = httpx.get(url + "/log").json()
    assert len(sent) == 1 and sent[0]["match_id"] == views[0]["match"]["match_id"]
    assert sorted(p for team in sent[0]["teams"] for p in team) == [f"h{i}" for i in range(6)]


@pytest.mark.parametrize("mode,why", [("fail", "HTTP 500"), ("garbage", "not JSON"), ("noconn", "connection"),
                                      ("slow", "Timeout")])
def test_a_failing_allocator_is_retried_then_the_players_go_back_at_their_place(tmp_path, live, allocator, mode, why):
    url = allocator(mode)
    rt, c, ids = _run(tmp_path, live, url, retries=1, timeout_ms=300)
    before = {t: c.get(f"/v1/tickets/{t}").json()["created_at"] for t in ids}
    assert poll(lambda: len(httpx.get(url + "/log").json()) >= 2, timeout=30)  # the first try and one retry
    v = poll(lambda: (x := c.get(f"/v1/tickets/{ids[0]}").json()).get("unmatched_reason") and x, timeout=30)
    assert "allocator failed" in v["unmatched_reason"] and why in v["unmatched_reason"], v
    for t in ids:  # never matched without a server; back in the queue with their original waiting time
        got = c.get(f"/v1/tickets/{t}").json()
        assert got["status"] in ("queued", "proposed") and got["created_at"] == before[t]
        assert "match" not in got
    rt.stop()


def test_a_flaky_allocator_that_recovers_within_the_retries_allocates(tmp_path, live, allocator):
    url = allocator("flaky", fails=2)
    rt, c, ids = _run(tmp_path, live, url, retries=2)
    views = poll(lambda: [v for t in ids if (v := c.get(f"/v1/tickets/{t}").json())["status"] == "matched"]
                 if all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids) else None, timeout=30)
    assert views[0]["match"]["assignment"]["connection"] == "10.0.0.3:7777"
    assert len(httpx.get(url + "/log").json()) == 3


def test_answers_without_a_valid_connection_are_not_assignments():
    assert assignment_of({"connection": "gs.example:7777", "x": 1, "nested": {"a": 1}}) == {
        "connection": "gs.example:7777", "x": 1}
    assert assignment_of({"connection": "[::1]:80"}) == {"connection": "[::1]:80"}
    for bad in ([], {"connection": 7}, {"connection": "host"}, {"connection": "host:99999"},
                {"connection": "a b:1"}, {"connection": "h:1\n"}):
        assert assignment_of(bad) is None, bad


def test_config_refuses_a_bad_allocator_and_takes_one_with_a_ready_check(tmp_path):
    from mgmatch.app.config import PoolConfig

    base = {"name": "p", "team_size": 3}
    with pytest.raises(Exception, match="url"):
        PoolConfig(**base, allocator={"url": "ftp://x"})
    with pytest.raises(Exception, match="retries"):
        PoolConfig(**base, allocator={"url": "http://x", "retries": 99})
    both = PoolConfig(**base, allocator={"url": "http://x"}, accept={"timeout_s": 5})
    assert both.allocator.url == "http://x" and both.accept.timeout_s == 5


def _all(c, ids, cond):
    """The tickets' views when ``cond`` holds for every one, else None."""
    vs = [c.get(f"/v1/tickets/{t}").json() for t in ids]
    return vs if all(cond(v) for v in vs) else None


def _checked(tmp_path, live, request, store: str, url: str, retries: int = 1):
    settings = {} if store == "memory" else dict(zip(("redis_url", "key_prefix"), request.getfixturevalue("redis_url"),
                                                      strict=True), store="redis")
    rt = Runtime.build(Settings(config=service_config(
        tmp_path, accept={"timeout_s": 60}, allocator={"url": url + "/allocate", "timeout_ms": 300, "retries": retries}),
        **settings))
    rt.start_embedded(tick_s=0.02)
    c = client(live(rt).url).__enter__()
    ids = [c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"rc{i}", "features": features(i)}]})
           .json()["id"] for i in range(6)]
    def one_proposal():
        vs = [c.get(f"/v1/tickets/{t}").json() for t in ids]
        same = len({v.get("match", {}).get("match_id") for v in vs}) == 1
        # "proposed" without "match" is the solver's claim, before the ready check starts
        return vs if same and all(v["status"] == "proposed" and "match" in v for v in vs) else None

    views = poll(one_proposal, timeout=30)
    mid = views[0]["match"]["match_id"]
    answers = [c.post(f"/v1/matches/{mid}/accept", json={"player_id": f"rc{i}"}).json()["status"] for i in range(6)]
    return rt, c, ids, views, mid, answers


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_confirmed_ready_check_gets_the_allocators_connection(tmp_path, live, allocator, request, store):
    """A pool with a ready check and an allocator: nothing is POSTed while players accept; the last accept
    answers `allocating`, the allocator gets the match once, and its connection goes into the match."""
    url = allocator("ok")
    rt, c, ids, views, mid, answers = _checked(tmp_path, live, request, store, url)
    try:
        assert answers == ["pending"] * 5 + ["allocating"]
        done = poll(lambda: _all(c, ids, lambda v: v["status"] == "matched"), timeout=30)
        for v in done:
            assert v["match"]["match_id"] == mid
            assert v["match"]["assignment"] == {"connection": "10.0.0.1:7777", "server": "gs-1"}
        sent = httpx.get(url + "/log").json()
        assert [x["match_id"] for x in sent] == [mid]  # once, after everyone accepted
        assert sorted(p for team in sent[0]["teams"] for p in team) == [f"rc{i}" for i in range(6)]
        assert c.post(f"/v1/matches/{mid}/accept", json={"player_id": "rc0"}).json()["status"] == "matched"
        assert c.post(f"/v1/matches/{mid}/decline", json={"player_id": "rc0"}).status_code == 409
    finally:
        rt.stop()


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_confirmed_ready_check_whose_allocator_fails_requeues_everyone_at_the_head(tmp_path, live, allocator,
                                                                                   request, store):
    url = allocator("fail")
    rt, c, ids, views, mid, answers = _checked(tmp_path, live, request, store, url)
    try:
        assert answers[-1] == "allocating"
        created = {v["id"]: v["created_at"] for v in views}
        assert poll(lambda: len(httpx.get(url + "/log").json()) >= 2, timeout=30)  # the first try and one retry
        got = poll(lambda: _all(c, ids, lambda v: v.get("unmatched_reason")), timeout=30)
        for v in got:  # never matched without a server; back at their place, with the reason
            assert "allocator failed" in v["unmatched_reason"] and "HTTP 500" in v["unmatched_reason"], v
            assert v["status"] in ("queued", "proposed") and v["created_at"] == created[v["id"]]
            assert v.get("match", {}).get("match_id") != mid
        assert c.post(f"/v1/matches/{mid}/accept", json={"player_id": "rc0"}).status_code == 409
        assert {x["match_id"] for x in httpx.get(url + "/log").json()} == {mid}  # a new check is not confirmed yet
    finally:
        rt.stop()


def test_the_agones_allocator_asks_for_a_fleets_server_and_answers_mgmatchs_shape():
    import importlib.util

    import yaml

    folder = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "agones"
    spec = importlib.util.spec_from_file_location("agones_allocator", folder / "allocator.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    req = mod.allocation_request({"match_id": "3v3.abc-0-x", "teams": [["a"], ["b"]]}, "mgmatch-game")
    assert req["kind"] == "GameServerAllocation"
    assert req["spec"]["selectors"] == [{"matchLabels": {"agones.dev/fleet": "mgmatch-game"}}]
    assert req["spec"]["metadata"]["labels"]["mgmatch.io/match"] == "3v3.abc-0-x"
    code, body = mod.answer_of({"state": "Allocated", "address": "1.2.3.4", "gameServerName": "gs-1",
                                "ports": [{"name": "default", "port": 7001}]})
    assert code == 200 and assignment_of(body) == {"connection": "1.2.3.4:7001", "gameserver": "gs-1"}
    assert mod.answer_of({"state": "UnAllocated"})[0] == 503  # mgmatch retries, then requeues
    docs = [d for name in ("allocator.yaml", "fleet.yaml") for d in yaml.safe_load_all((folder / name).read_text())]
    kinds = {d["kind"] for d in docs}
    assert kinds == {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "Fleet"}
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["allocation.agones.dev"], "resources": ["gameserverallocations"],
                              "verbs": ["create"]}]
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(kust["resources"]) == {"allocator.yaml", "fleet.yaml"}
