"""The HTTP API end to end: a real uvicorn server, the embedded runtime (in-memory store)."""

from __future__ import annotations

import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, client, features, poll, service_config

from mgmatch.app.metrics import DOCUMENTED
from mgmatch.app.runtime import Runtime
from mgmatch.app.security import sign
from mgmatch.app.settings import Settings


def _runtime(tmp_path, start=True, **settings):
    rt = Runtime.build(Settings(config=service_config(tmp_path), **settings))
    if start:
        rt.start_embedded(tick_s=0.02)
    return rt


def _ticket(c, pid, i, pool="small", **kw):
    body = {"pool": pool, "players": [{"id": pid, "features": features(i), "skill": 1500.0 + i}], **kw}
    return c.post("/v1/tickets", json=body)


def test_ticket_lifecycle_matched_with_teams(tmp_path, live):
    srv = live(_runtime(tmp_path))
    with client(srv.url) as c:
        assert c.get("/healthz").json()["status"] == "ok"
        assert poll(lambda: c.get("/readyz").status_code == 200)
        r = c.post("/v1/tickets", json={"pool": "small", "players": [
            {"id": "p0", "features": features(0)}, {"id": "p1", "features": features(1)}]})
        assert r.status_code == 201, r.text
        party = r.json()
        assert party["status"] == "queued" and party["players"] == ["p0", "p1"]
        ids = [party["id"]] + [_ticket(c, f"s{i}", i + 2).json()["id"] for i in range(4)]
        done = poll(lambda: all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids) and
                    [c.get(f"/v1/tickets/{t}").json() for t in ids])
        match_ids = {t["match"]["match_id"] for t in done}
        assert len(match_ids) == 1  # 6 players, one 3v3 match
        teams = done[0]["match"]["teams"]
        assert sorted(p for team in teams for p in team) == ["p0", "p1", "s0", "s1", "s2", "s3"]
        # the party is on one team, and each ticket's "team" is where its players are
        assert any({"p0", "p1"} <= set(team) for team in teams)
        for t in done:
            assert set(t["players"]) <= set(teams[t["match"]["team"]])
            assert t["match"]["method"] == "exact" and t["match"]["model_version"]
        # a matched ticket cannot be cancelled
        r = c.delete(f"/v1/tickets/{ids[0]}")
        assert r.status_code == 409 and "matched" in r.json()["error"]["message"]


def _store_settings(store: str, request) -> dict:
    """Settings for the in-memory store, or for Redis (the API's asyncio path) under a fresh prefix."""
    if store == "memory":
        return {}
    url, prefix = request.getfixturevalue("redis_url")
    return {"store": "redis", "redis_url": url, "key_prefix": prefix}


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_cancel_expire_idempotency_and_duplicate_players(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, start=False, **_store_settings(store, request)))
    with client(srv.url) as c:
        a = _ticket(c, "a", 1, idempotency_key="k-1").json()
        again = _ticket(c, "a", 1, idempotency_key="k-1")
        assert again.status_code == 200 and again.json()["id"] == a["id"]
        dup = _ticket(c, "a", 1)
        assert dup.status_code == 409 and "'a'" in dup.json()["error"]["message"]
        r = c.delete(f"/v1/tickets/{a['id']}")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        assert c.get(f"/v1/tickets/{a['id']}").json()["status"] == "cancelled"
        # after cancellation the player may queue again
        assert _ticket(c, "a", 1).status_code == 201
        short = _ticket(c, "b", 2, ttl_s=0.2).json()
        time.sleep(0.4)
        assert c.get(f"/v1/tickets/{short['id']}").json()["status"] == "expired"
        assert c.delete(f"/v1/tickets/{short['id']}").status_code == 409
        assert c.get("/v1/tickets/small.00000000000000000000000000000000").status_code == 404


@pytest.mark.parametrize("body,field", [
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3]}]}, "players[0].features"),
    ({"pool": "small", "players": [{"id": "x"}]}, "players[0].features"),
    ({"pool": "nope", "players": [{"id": "x", "features": [1, 2, 3, 4]}]}, "pool"),
    ({"pool": "small", "players": []}, "players"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4]}], "ttl_s": -1}, "ttl_s"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4]}], "ttl_s": 1e9}, "ttl_s"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4], "bogus": 1}]}, "players[0].bogus"),
    ({"pool": "small", "players": [{"id": f"x{i}", "features": [1, 2, 3, 4]} for i in range(4)]}, "players"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4]}, {"id": "x", "features": [1, 2, 3, 4]}]},
     "players[1].id"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4], "roles": ["tank", " "]}]}, "players[0].roles[1]"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4], "pings": {"": 20}}]}, "players[0].pings"),
    ({"pool": "small", "players": [{"id": "x", "features": [1, 2, 3, 4], "party": ""}]}, "players[0].party"),
])
def test_bad_ticket_requests_name_the_field(tmp_path, live, body, field):
    srv = live(_runtime(tmp_path, start=False))
    with client(srv.url) as c:
        r = c.post("/v1/tickets", json=body)
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["field"] == field and field in err["message"]


def test_solve_matches_spec_example_and_rejects_bad_input(tmp_path, live):
    srv = live(_runtime(tmp_path, start=False))
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    expected = json.loads((SPEC_EXAMPLES / "expected-small.json").read_text())
    with client(srv.url) as c:
        r = c.post("/v1/solve", json={**inst, "engagement_model": "small", "time_limit_ms": 5000})
        assert r.status_code == 200, r.text
        sol = r.json()
        assert sol["format"] == "mgmatch-solution/v1" and sol["status"] == "optimal"
        assert sol["objective"] == pytest.approx(expected["objective"], abs=1e-6)
        assert sol["model_version"] and sol["method"] in ("exact", "enumerate", "scip")
        bad = [
            ({**inst, "method": "nope"}, "method"),
            ({**inst, "time_limit_ms": 0}, "time_limit_ms"),
            ({**inst, "time_limit_ms": 1e9}, "time_limit_ms"),
            ({**inst, "teams": 1}, "teams"),
            ({**inst, "rules": [{"kind": "skill_balance"}]}, "rules[0].max_diff"),
            ({**inst, "players": inst["players"] * 30}, "players"),
            ({**inst, "engagement_model": "missing-model"}, "engagement_model"),
        ]
        for body, field in bad:
            r = c.post("/v1/solve", json=body)
            assert r.status_code == 422, (field, r.text)
            assert r.json()["error"]["field"] == field, r.text
        r = c.post("/v1/solve", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["field"] == "body"
        r = c.post("/v1/solve", content=b'{"teams": NaN}', headers={"content-type": "application/json"})
        assert r.status_code == 400


def test_solve_budget_keeps_a_reserve_for_the_reply(tmp_path, live):
    # local-search always runs to its deadline: its time shows the budget the solver was given
    srv = live(_runtime(tmp_path, start=False, response_reserve_ms=60.0))
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    with client(srv.url) as c:
        r = c.post("/v1/solve", json={**inst, "engagement_model": "small", "method": "local-search",
                                      "time_limit_ms": 100})
        assert r.status_code == 200, r.text
        sol = r.json()
        assert sol["status"] in ("feasible", "optimal") and sol["time_ms"] < 75  # 100 − 60 ms, not 100
        assert {"queued_ms", "encode_ms"} <= set(sol["stats"])


def _value(text: str, name: str, **labels) -> float:
    """The sample ``name{labels}`` from Prometheus text (labels sorted as the client writes them); 0 if absent."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_have_documented_names_and_labels(tmp_path, live):
    srv = live(_runtime(tmp_path))
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    with client(srv.url) as c:
        before = c.get("/metrics").text
        assert c.post("/v1/solve", json={**inst, "engagement_model": "small"}).status_code == 200
        ids = [_ticket(c, f"m{i}", i).json()["id"] for i in range(6)]
        poll(lambda: all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids))
        text = c.get("/metrics").text
    for name in DOCUMENTED:
        assert f"# TYPE {name} " in text, name

    def delta(name, **labels):
        return _value(text, name, **labels) - _value(before, name, **labels)

    lab = {"arm": "-", "method": "exact", "pool": "small"}
    for stage in ("encode", "solve", "end_to_end"):
        assert delta("mgmatch_stage_duration_seconds_count", **lab, stage=stage) >= 1, stage
    assert delta("mgmatch_matchmaker_matches_total", **lab) == 1
    assert delta("mgmatch_matchmaker_players_matched_total", **lab) == 6
    assert delta("mgmatch_tickets_wait_seconds_count", arm="-", pool="small") == 6
    assert delta("mgmatch_tickets_events_total", event="created", pool="small") == 6
    solved = sum(delta("mgmatch_solver_status_total", arm="-", method=m, pool="solve", status="optimal")
                 for m in ("exact", "enumerate", "scip"))
    assert solved == 1
    assert re.search(r'mgmatch_model_info{kind="engagement",name="small",version="[^"]+"} 1\.0', text)
    assert delta("mgmatch_http_requests_total", code="201", route="/v1/tickets") == 6


def test_api_keys_hmac_body_and_rate_limits(tmp_path, live):
    rt = _runtime(tmp_path, start=False, api_keys=["k1", "k2"], hmac_secret="s3cret", max_body_bytes=4096,
                  rate_limit_per_s=1.0, rate_limit_burst=3)
    srv = live(rt)
    body = json.dumps({"pool": "small", "players": [{"id": "h1", "features": features(1)}]}).encode()
    with client(srv.url) as c:
        assert c.get("/healthz").status_code == 200  # open
        r = c.post("/v1/tickets", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 401 and r.json()["error"]["field"] == "authorization"
        assert c.post("/v1/tickets", content=body, headers={"x-api-key": "wrong"}).status_code == 401
        ok = c.post("/v1/tickets", content=body, headers={"content-type": "application/json", "x-api-key": "k2"})
        assert ok.status_code == 201, ok.text
        tid = ok.json()["id"]
        # HMAC: a signed request passes, as the one "hmac" client: it sees its own tickets, not key k2's
        signed_body = json.dumps({"pool": "small", "players": [{"id": "h2", "features": features(2)}]}).encode()
        mine = c.post("/v1/tickets", content=signed_body, headers={
            "content-type": "application/json", "x-mgmatch-signature": sign("s3cret", "POST", "/v1/tickets", signed_body)})
        assert mine.status_code == 201, mine.text
        hid = mine.json()["id"]
        assert c.get(f"/v1/tickets/{hid}", headers={"x-mgmatch-signature": sign("s3cret", "GET", f"/v1/tickets/{hid}", b"")}).status_code == 200
        assert c.get(f"/v1/tickets/{tid}", headers={"x-mgmatch-signature": sign("s3cret", "GET", f"/v1/tickets/{tid}", b"")}).status_code == 404
        bad = sign("s3cret", "GET", "/v1/tickets/other", b"")
        assert c.get(f"/v1/tickets/{hid}", headers={"x-mgmatch-signature": bad}).status_code == 401
        stale = sign("s3cret", "GET", f"/v1/tickets/{hid}", b"", t=time.time() - 3600)
        assert c.get(f"/v1/tickets/{hid}", headers={"x-mgmatch-signature": stale}).status_code == 401
        big = c.post("/v1/tickets", content=b"x" * 5000, headers={"x-api-key": "k1"})
        assert big.status_code == 413 and big.json()["error"]["field"] == "body"
        codes = [c.get(f"/v1/tickets/{tid}", headers={"x-api-key": "k2"}).status_code for _ in range(6)]
        assert codes[:2] == [200, 200] and 429 in codes
        limited = c.get(f"/v1/tickets/{tid}", headers={"x-api-key": "k2"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_batch_ingest_creates_in_order_and_reports_per_ticket_conflicts(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, start=False, **_store_settings(store, request)))
    one = lambda pid, i: {"pool": "small", "players": [{"id": pid, "features": features(i)}]}  # noqa: E731
    with client(srv.url) as c:
        r = c.post("/v1/tickets/batch", json={"tickets": [one(f"bt{i}", i) for i in range(5)] + [one("bt0", 9)]})
        assert r.status_code == 200, r.text
        out = r.json()["tickets"]
        assert [t.get("players") for t in out[:5]] == [[f"bt{i}"] for i in range(5)]
        assert all(t["status"] == "queued" for t in out[:5])
        assert "bt0" in out[5]["error"]["message"]
        assert c.get(f"/v1/tickets/{out[3]['id']}").json()["status"] == "queued"
        bad = c.post("/v1/tickets/batch", json={"tickets": [one("ok", 1), {**one("x", 2), "pool": "nope"}]})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "tickets[1].pool"
        assert c.get("/v1/tickets/batch").status_code == 404
        too_many = c.post("/v1/tickets/batch", json={"tickets": [one(f"m{i}", i) for i in range(101)]})
        assert too_many.status_code == 422 and too_many.json()["error"]["field"] == "tickets"


# --------------------------------------------------------------------------- resilience: store down, solves busy


def _is_503_store(r) -> None:
    assert r.status_code == 503, r.text
    assert r.json()["error"]["field"] == "store" and int(r.headers["retry-after"]) >= 1


@pytest.mark.redis
def test_store_down_is_503_with_retry_after_and_readyz_false_then_recovers(tmp_path, live, spare_redis):
    rt = _runtime(tmp_path, start=False, store="redis", redis_url=spare_redis.url, key_prefix="down",
                  embedded_workers=False)
    srv = live(rt)
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    with httpx.Client(base_url=srv.url, timeout=5) as c:  # /readyz must answer well within this
        assert poll(lambda: c.get("/readyz").status_code == 200)
        tid = _ticket(c, "r0", 0).json()["id"]
        spare_redis.stop()
        _is_503_store(_ticket(c, "r1", 1))
        _is_503_store(c.get(f"/v1/tickets/{tid}"))
        _is_503_store(c.delete(f"/v1/tickets/{tid}"))
        _is_503_store(c.post("/v1/tickets/batch", json={"tickets": [
            {"pool": "small", "players": [{"id": "r2", "features": features(2)}]}]}))
        ready = c.get("/readyz")
        assert ready.status_code == 503 and ready.json() == {"ready": False, "checks": {"store": False}}
        # /v1/solve does not need the store
        assert c.post("/v1/solve", json={**inst, "engagement_model": "small"}).status_code == 200
        text = c.get("/metrics").text
        assert "mgmatch_http_rejected_total{reason=\"store_unavailable\"}" in text
        assert not re.search(r'mgmatch_http_requests_total\{code="5(?!03)\d\d"', text)
        spare_redis.start()  # back, empty: what was stored is gone, new tickets work
        poll(lambda: c.get("/readyz").status_code == 200)
        assert c.get(f"/v1/tickets/{tid}").status_code == 404
        assert _ticket(c, "r3", 3).status_code == 201


@pytest.mark.redis
def test_a_redis_that_stops_answering_is_503_within_the_store_timeout_and_a_retry_creates_once(
        tmp_path, live, spare_redis):
    """A Redis that holds its connections but answers nothing (CLIENT PAUSE: a stalled node, a failover's
    pause): ticket requests answer 503 after MGMATCH_STORE_TIMEOUT_S instead of holding the client past
    its own timeout; the client's retry with the same Idempotency-Key afterwards leaves one ticket."""
    rt = _runtime(tmp_path, start=False, store="redis", redis_url=spare_redis.url, key_prefix="stall",
                  embedded_workers=False, store_timeout_s=0.5)
    srv = live(rt)
    body = {"pool": "small", "players": [{"id": "s0", "features": features(0)}]}
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        tid = _ticket(c, "s1", 1).json()["id"]
        import redis

        redis.Redis.from_url(spare_redis.url).execute_command("CLIENT", "PAUSE", "2500", "ALL")
        t0 = time.monotonic()
        stalled = c.post("/v1/tickets", json=body, headers={"idempotency-key": "k-stall"})
        _is_503_store(stalled)
        _is_503_store(c.get(f"/v1/tickets/{tid}"))
        assert time.monotonic() - t0 < 2.0  # two answers, each after about the store timeout
        retried = poll(lambda: (r := c.post("/v1/tickets", json=body, headers={"idempotency-key": "k-stall"}))
                       .status_code in (200, 201) and r, timeout=10)
        # whether the paused create ran when Redis answered (a replay: 200) or went with its closed
        # connection (created now: 201), there is one ticket for s0
        assert rt.store.queue_depth("small") == 2
        assert c.get(f"/v1/tickets/{retried.json()['id']}").json()["status"] == "queued"


def test_slow_solves_fill_their_own_pool_and_never_starve_readyz(tmp_path, live):
    # local-search runs to its deadline: each solve holds a solve thread for its whole budget
    rt = _runtime(tmp_path, start=False, solve_threads=2, solve_queue=2, embedded_workers=False)
    srv = live(rt)
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    slow = {**inst, "engagement_model": "small", "method": "local-search", "time_limit_ms": 4000}
    with ThreadPoolExecutor(4) as ex, httpx.Client(base_url=srv.url, timeout=30) as c:
        inflight = [ex.submit(lambda: httpx.post(srv.url + "/v1/solve", json=slow, timeout=60)) for _ in range(4)]
        poll(lambda: rt.solves.in_flight == 4, timeout=10, every=0.01)
        ready = c.get("/readyz", timeout=2)
        assert ready.status_code == 200, ready.text
        assert c.get("/healthz", timeout=2).status_code == 200
        full = c.post("/v1/solve", json=slow)
        assert full.status_code == 503 and full.json()["error"]["field"] == "solve", full.text
        assert int(full.headers["retry-after"]) >= 1
        assert rt.solves.in_flight == 4 and not any(f.done() for f in inflight)  # /readyz did not wait for them
        answers = [f.result() for f in inflight]
    assert all(r.status_code == 200 and r.json()["status"] in ("feasible", "optimal") for r in answers)


# --------------------------------------------------------------------------- hostile input (audit)


def _small_instance(**changes) -> dict:
    return {**json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text()), "engagement_model": "small",
            "time_limit_ms": 2000, **changes}


def _assert_names(r: httpx.Response, field: str, status: int = 422) -> str:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["field"] == field and field in err["message"], r.text
    return err["message"]


def test_numbers_given_as_strings_or_booleans_are_refused_not_coerced(tmp_path, live):
    """Pydantic's lax mode took "2" for 2 and true for 1.0; the spec's numbers are JSON numbers."""
    srv = live(_runtime(tmp_path, start=False))
    inst = _small_instance()
    with client(srv.url) as c:
        for body, field in [
            ({**inst, "teams": "2"}, "teams"),
            ({**inst, "team_size": True}, "team_size"),
            (_small_instance(players=[{**inst["players"][0], "features": ["0.1", 1, 2, 3]}, *inst["players"][1:]]),
             "players[0].features[0]"),
            (_small_instance(players=[{**inst["players"][0], "skill": "1500"}, *inst["players"][1:]]),
             "players[0].skill"),
        ]:
            _assert_names(c.post("/v1/solve", json=body), field)
        assert c.post("/v1/solve", json={**inst, "teams": 2.0}).status_code == 200  # an integral float is an integer
        ticket = {"pool": "small", "players": [{"id": "t1", "features": features(1)}]}
        for body, field in [
            ({**ticket, "players": [{"id": "t1", "features": [True, 0.0, 0.0, 0.0]}]}, "players[0].features[0]"),
            ({**ticket, "players": [{"id": "t1", "features": features(1), "skill": "1500"}]}, "players[0].skill"),
            ({**ticket, "ttl_s": "5"}, "ttl_s"),
        ]:
            _assert_names(c.post("/v1/tickets", json=body), field)
        backfill = {"pool": "small", "match_id": "m-1", "players": [{"id": "b1", "features": features(1)}],
                    "teams": [["b1"], []], "open": ["1", "1"]}
        _assert_names(c.post("/v1/backfills", json=backfill), "open[0]")
        _assert_names(c.post("/v1/matches/small.m1/result", json={"engagement": "0.5"}), "engagement")
        _assert_names(c.post("/v1/matches/small.m1/result", json={"engagement": 0.5, "players": {"a": True}}),
                      "players.a")


def test_ticket_attribute_errors_name_the_attribute_not_pydantic_internals(tmp_path, live):
    srv = live(_runtime(tmp_path, start=False))
    with client(srv.url) as c:
        for attrs, field, needle in [({"mode": {"nested": 1}}, "attributes.mode", "got dict"),
                                     ({"mode": "x" * 300}, "attributes.mode", "256"),
                                     ({"mode": None}, "attributes.mode", "got null"),
                                     ({"mode": 10**400}, "attributes.mode", "finite"),
                                     ({"": 1}, "attributes", "key ''")]:
            r = _ticket(c, "attr", 1, attributes=attrs)
            assert needle in _assert_names(r, field), r.text
        r = _ticket(c, "attr", 1, attributes={"s": "text", "n": 3, "b": True})
        assert r.status_code == 201 and r.json()["attributes"] == {"s": "text", "n": 3.0, "b": True}


def test_optional_player_fields_solvers_read_are_validated_where_the_instance_is_read(tmp_path, live):
    """``sigma`` 1e308 overflowed in EOMM (HTTP 500); a list ``peer_pings`` broke the Awesomenauts score."""
    srv = live(_runtime(tmp_path, start=False))
    inst = _small_instance(method="eomm", time_limit_ms=300)

    def with_extra(**extra) -> dict:
        return {**inst, "players": [{**inst["players"][0], **extra}, *inst["players"][1:]]}

    with client(srv.url) as c:
        for extra, field in [({"sigma": 1e308}, "players[0].sigma"), ({"sigma": "wide"}, "players[0].sigma"),
                             ({"games_per_day": -1}, "players[0].games_per_day"),
                             ({"recent": ["W", "X"]}, "players[0].recent[1]"),
                             ({"peer_pings": [1, 2]}, "players[0].peer_pings"),
                             ({"peer_pings": {"p02": "near"}}, "players[0].peer_pings.p02"),
                             ({"previous": {"teammates": 5}}, "players[0].previous.teammates")]:
            _assert_names(c.post("/v1/solve", json=with_extra(**extra)), field)
        ok = c.post("/v1/solve", json=with_extra(sigma=80.0, games_per_day=3, recent=["W", "L"], note={"any": 1}))
        assert ok.status_code == 200 and ok.json()["method"] == "eomm", ok.text


def test_an_idempotency_key_sent_again_with_other_players_is_409_not_the_first_ticket(tmp_path, live):
    """The replay answered 200 with the first ticket: the client believed players it never queued were queued."""
    srv = live(_runtime(tmp_path, start=False))
    with client(srv.url) as c:
        first = _ticket(c, "k-a", 1, idempotency_key="key-1")
        assert first.status_code == 201
        assert _ticket(c, "k-a", 1, idempotency_key="key-1").json()["id"] == first.json()["id"]  # a true retry
        msg = _assert_names(_ticket(c, "k-b", 2, idempotency_key="key-1"), "idempotency_key", 409)
        assert first.json()["id"] in msg
        assert _ticket(c, "k-b", 2).status_code == 201  # k-b was never queued by the refused request
        batch = c.post("/v1/tickets/batch", json={"tickets": [
            {"pool": "small", "players": [{"id": "k-c", "features": features(3)}], "idempotency_key": "key-2"},
            {"pool": "small", "players": [{"id": "k-d", "features": features(4)}], "idempotency_key": "key-2"}]})
        out = batch.json()["tickets"]
        assert out[0]["players"] == ["k-c"] and out[1]["error"]["field"] == "idempotency_key", batch.text


def test_unknown_paths_and_methods_answer_in_the_error_shape(tmp_path, live):
    srv = live(_runtime(tmp_path, start=False))
    with client(srv.url) as c:
        assert "/v1/nope" in _assert_names(c.get("/v1/nope"), "path", 404)
        assert "PUT" in _assert_names(c.put("/v1/tickets"), "method", 405)
        assert "POST" in _assert_names(c.post("/healthz"), "method", 405)
