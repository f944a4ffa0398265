"""Backfills over HTTP end to end (a real uvicorn server, both stores): create, fill by the running
matchmaker, the filled tickets' view, cancel, ownership per API key, metrics, and every bad input a
422 naming its field."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config  # noqa: E402

from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402


def _runtime(tmp_path, start=True, **settings):
    rt = Runtime.build(Settings(config=service_config(tmp_path), **settings))
    if start:
        rt.start_embedded(tick_s=0.02)
    return rt


def _store_settings(store: str, request) -> dict:
    if store == "memory":
        return {}
    url, prefix = request.getfixturevalue("redis_url")
    return {"store": "redis", "redis_url": url, "key_prefix": prefix}


def _body(**kw):
    players = [{"id": pid, "features": features(40 + i)} for i, pid in enumerate(["e0", "e1", "e2", "e3"])]
    return {"pool": "small", "match_id": "game-7", "players": players, "teams": [["e0", "e1", "e2"], ["e3"]],
            "open": [0, 2], **kw}


def _value(text: str, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_backfill_filled_from_the_queue_end_to_end(tmp_path, live, store, request):
    srv = live(_runtime(tmp_path, **_store_settings(store, request)))
    with client(srv.url) as c:
        before = c.get("/metrics").text
        r = c.post("/v1/backfills", json=_body(ttl_s=60))
        assert r.status_code == 201, r.text
        b = r.json()
        assert b["status"] == "open" and b["id"].startswith("small.") and b["assigned"] == [[], []]
        assert b["match_id"] == "game-7" and b["open"] == [0, 2]
        assert b["expires_at"] - b["created_at"] == pytest.approx(60, abs=0.5)
        ids = [c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"n{i}", "features": features(i)}]})
               .json()["id"] for i in range(2)]
        got = poll(lambda: (v := c.get(f"/v1/backfills/{b['id']}").json())["status"] == "filled" and v)
        assert sorted(got["assigned"][1]) == ["n0", "n1"] and got["assigned"][0] == []
        assert sorted(got["tickets"]) == sorted(ids) and got["filled_at"] >= got["created_at"]
        for tid in ids:
            t = c.get(f"/v1/tickets/{tid}").json()
            assert t["status"] == "matched" and t["match"]["match_id"] == "game-7" and t["match"]["team"] == 1
            assert t["match"]["backfill_id"] == b["id"]
            assert sorted(t["match"]["teams"][1]) == ["e3", "n0", "n1"]
        # a filled backfill cannot be cancelled
        r = c.delete(f"/v1/backfills/{b['id']}")
        assert r.status_code == 409 and r.json()["error"]["field"] == "status" and "filled" in r.text
        # cancel an open one; it then takes nothing
        other = c.post("/v1/backfills", json=_body(match_id="game-8")).json()
        r = c.delete(f"/v1/backfills/{other['id']}")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        late = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "late", "features": features(9)}]})
        time.sleep(0.3)
        assert c.get(f"/v1/backfills/{other['id']}").json()["status"] == "cancelled"
        assert c.get(f"/v1/tickets/{late.json()['id']}").json()["status"] == "queued"
        # expired
        c.delete(f"/v1/tickets/{late.json()['id']}")  # first: nothing queued could fill the short one
        short = c.post("/v1/backfills", json=_body(match_id="game-9", ttl_s=0.2, open=[0, 1])).json()
        time.sleep(0.4)
        assert c.get(f"/v1/backfills/{short['id']}").json()["status"] == "expired"
        assert c.delete(f"/v1/backfills/{short['id']}").status_code == 409
        assert c.get("/v1/backfills/small.00000000000000000000000000000000").status_code == 404
        assert c.delete("/v1/backfills/" + "x" * 300).status_code == 404
        text = c.get("/metrics").text
    for event, n in (("created", 3), ("filled", 1), ("cancelled", 1)):
        got_n = _value(text, "mgmatch_backfills_events_total", event=event, pool="small")
        assert got_n - _value(before, "mgmatch_backfills_events_total", event=event, pool="small") == n, event
    assert _value(text, "mgmatch_backfills_fill_seconds_count", pool="small") >= 1
    assert "# TYPE mgmatch_backfills_open gauge" in text


def test_backfills_belong_to_their_api_key(tmp_path, live):
    srv = live(_runtime(tmp_path, start=False, api_keys=["k1", "k2"]))
    with client(srv.url) as c:
        r = c.post("/v1/backfills", json=_body(), headers={"x-api-key": "k1"})
        assert r.status_code == 201
        bid = r.json()["id"]
        assert c.get(f"/v1/backfills/{bid}", headers={"x-api-key": "k1"}).status_code == 200
        assert c.get(f"/v1/backfills/{bid}", headers={"x-api-key": "k2"}).status_code == 404
        assert c.delete(f"/v1/backfills/{bid}", headers={"x-api-key": "k2"}).status_code == 404
        assert c.get(f"/v1/backfills/{bid}", headers={"x-api-key": "k1"}).json()["status"] == "open"
        assert c.post("/v1/backfills", json=_body()).status_code == 401


def _players(n, dim=4, **extra):
    return [{"id": f"e{i}", "features": features(i, dim), **extra} for i in range(n)]


@pytest.mark.parametrize("change,field", [
    ({"pool": "nope"}, "pool"),
    ({"match_id": ""}, "match_id"),
    ({"players": []}, "players"),
    ({"players": [{"id": "e0", "features": [1, 2, 3]}, *_players(4)[1:]]}, "players[0].features"),
    ({"players": [*_players(4)[:3], {"id": "e3", "features": [1, 2, 3]}]}, "players[3].features"),
    ({"players": [*_players(4), {"id": "e0", "features": features(0)}]}, "players[4].id"),
    ({"players": [*_players(4), {"id": "e9", "features": features(0)}]}, "players[4].id"),
    ({"players": [{**_players(1)[0], "bogus": 1}, *_players(4)[1:]]}, "players[0].bogus"),
    ({"teams": [["e0", "e1", "e2", "e3"]]}, "teams"),
    ({"teams": [["e0", "e1", "e2"], ["zz"]]}, "teams[1][0]"),
    ({"teams": [["e0", "e1", "e2"], ["e3", "e0"]]}, "teams[1][1]"),
    ({"teams": [["e0", "e1", "e2"], ["e3", "x" * 65]]}, "teams[1][1]"),
    ({"teams": [["e0", "e1", "e2"], ["e3"] * 65]}, "teams[1]"),
    ({"open": [1]}, "open"),
    ({"open": [0, 0]}, "open"),
    ({"open": [-1, 2]}, "open[0]"),
    ({"open": [1, 2]}, "open[0]"),
    ({"open": [0, 3]}, "open[1]"),
    ({"open": [0, "x"]}, "open[1]"),
    ({"ttl_s": 0}, "ttl_s"),
    ({"ttl_s": 1e9}, "ttl_s"),
    ({"extra": 1}, "extra"),
])
def test_bad_backfill_requests_name_the_field(tmp_path, live, change, field):
    srv = live(_runtime(tmp_path, start=False))
    with client(srv.url) as c:
        r = c.post("/v1/backfills", json=_body(**change))
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["field"] == field and field in err["message"], err
        r = c.post("/v1/backfills", content=b"{not json", headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500
