"""Ratings from results (issue 30): a result's ranks or winner updates each player's openskill rating
(Plackett–Luce) once per match, on every store; GET /v1/players/{id}; a pool with ``skill_from:
ratings`` takes a ticket's missing skill from the stored rating; bad outcomes are named."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from openskill.models import PlackettLuce

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, poll, service_config  # noqa: E402

from mgmatch.app.ratings import default_rating, rate_match  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import Rating  # noqa: E402


def test_a_match_is_rated_once_and_a_moved_version_is_stale(store):
    after = {"a": Rating(27.0, 8.0, 1), "b": Rating(23.0, 8.0, 1)}
    assert store.rate_match("p.m1", {"a": 0, "b": 0}, after) == "applied"
    got = store.get_ratings(["a", "b", "nobody"])
    assert set(got) == {"a", "b"} and got["a"].mu == 27.0 and got["a"].games == 1 and got["a"].version == 1
    assert store.rate_match("p.m1", {"a": 1, "b": 1}, {"a": Rating(30.0, 7.0, 2)}) == "done"  # same match again
    assert store.get_ratings(["a"])["a"].mu == 27.0
    # another match computed from a's version 0 while m1 wrote version 1: refused, nothing written
    assert store.rate_match("p.m2", {"a": 0, "c": 0}, {"a": Rating(1.0, 1.0, 1), "c": Rating(1.0, 1.0, 1)}) == "stale"
    assert store.get_ratings(["c"]) == {} and store.get_ratings(["a"])["a"].mu == 27.0


def test_ratings_follow_openskill_plackett_luce_and_apply_once(store):
    status, view = rate_match(store, "p.m1", [["a", "b"], ["c", "d"]], [1.0, 0.0])  # team 1 won
    assert status == "applied"
    model = PlackettLuce()
    want = model.rate([[model.rating(), model.rating()], [model.rating(), model.rating()]], ranks=[1, 0])
    got = store.get_ratings(["a", "c"])
    assert got["a"].mu == pytest.approx(want[0][0].mu) and got["c"].mu == pytest.approx(want[1][0].mu)
    assert got["c"].mu > default_rating().mu > got["a"].mu and got["a"].games == 1
    assert view["c"]["ordinal"] == pytest.approx(want[1][0].mu - 3 * want[1][0].sigma)
    assert rate_match(store, "p.m1", [["a", "b"], ["c", "d"]], [1.0, 0.0]) == ("done", {})
    assert store.get_ratings(["a"])["a"].games == 1


def test_concurrent_matches_sharing_a_player_both_count(store):
    barrier = threading.Barrier(4)

    def play(k: int) -> None:
        barrier.wait()
        rate_match(store, f"p.c{k}", [["shared", f"x{k}"], [f"y{k}", f"z{k}"]], [0.0, 1.0])

    threads = [threading.Thread(target=play, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    shared = store.get_ratings(["shared"])["shared"]
    assert shared.games == 4 and shared.version == 4  # no update lost to a concurrent one


def _settings(tmp_path, store_kind, request, **pool) -> Settings:
    extra = {}
    if store_kind == "redis":
        url, prefix = request.getfixturevalue("redis_url")
        extra = {"store": "redis", "redis_url": url, "key_prefix": prefix}
    return Settings(config=service_config(tmp_path, **pool), **extra)


def _one_match(c, tag: str) -> dict:
    ids = []
    for i in range(6):
        r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"{tag}{i}", "features": features(i)}]})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    views = poll(lambda: [v for t in ids if (v := c.get(f"/v1/tickets/{t}").json())["status"] == "matched"]
                 if all(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids) else None)
    return views[0]["match"]


@pytest.mark.parametrize("store_kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_result_with_a_winner_rates_its_players_once_over_http(tmp_path, live, store_kind, request):
    rt = Runtime.build(_settings(tmp_path, store_kind, request))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    with client(srv.url) as c:
        m = _one_match(c, "rt")
        url = f"/v1/matches/{m['match_id']}/result"
        before = c.get("/v1/players/rt0").json()
        assert before == {"id": "rt0", "mu": 25.0, "sigma": pytest.approx(25 / 3), "ordinal": pytest.approx(0.0),
                          "games": 0}
        for body, field in (({"engagement": 1, "winner": 2}, "winner"), ({"engagement": 1, "ranks": [0, 1, 2]}, "ranks"),
                            ({"engagement": 1, "ranks": [0, 1], "winner": 0}, "winner"),
                            ({"engagement": 1, "winner": -1}, "winner"), ({"engagement": 1, "ranks": ["x", 1]}, "ranks[0]")):
            r = c.post(url, json=body)
            assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)
        r = c.post(url, json={"engagement": 0.7, "winner": 1})
        assert r.status_code == 202 and r.json()["ratings"]["status"] == "applied", r.text
        winners, losers = m["teams"][1], m["teams"][0]
        w, lo = c.get(f"/v1/players/{winners[0]}").json(), c.get(f"/v1/players/{losers[0]}").json()
        assert w["games"] == lo["games"] == 1 and w["mu"] > 25.0 > lo["mu"]
        again = c.post(url, json={"engagement": 0.7, "winner": 1})  # a retry: accepted, rated once
        assert again.status_code == 202 and again.json()["status"] == "duplicate"
        assert again.json()["ratings"] == {"status": "done", "players": {}}
        assert c.get(f"/v1/players/{winners[0]}").json() == w
        # another outcome for the same match is a conflict, not a second update
        assert c.post(url, json={"engagement": 0.7, "winner": 0}).status_code == 409
        assert c.get(f"/v1/players/{winners[0]}").json() == w
        assert c.get("/v1/players/" + "x" * 300).status_code in (404, 422)


@pytest.mark.parametrize("store_kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_skill_from_ratings_pool_takes_the_stored_mu_when_a_ticket_gives_no_skill(tmp_path, live, store_kind,
                                                                                      request):
    rules = [{"kind": "party_together"}, {"kind": "skill_balance", "max_diff": 100}]
    rt = Runtime.build(_settings(tmp_path, store_kind, request, rules=rules, skill_from="ratings"))
    rt.store.rate_match("small.seed", {"vet": 0}, {"vet": Rating(31.5, 4.0, 9)})
    srv = live(rt)
    with client(srv.url) as c:
        vet = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "vet", "features": features(0)}]})
        new = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "new", "features": features(1)}]})
        own = c.post("/v1/tickets", json={"pool": "small", "players": [
            {"id": "own", "features": features(2), "skill": 12.0}]})
        assert vet.status_code == new.status_code == own.status_code == 201, (vet.text, new.text)
        skills = {t.players[0]["id"]: t.players[0]["skill"]
                  for t in (rt.store.get(r.json()["id"]) for r in (vet, new, own))}
        assert skills == {"vet": 31.5, "new": 25.0, "own": 12.0}
    # without skill_from the same pool refuses a ticket without skill, naming the field
    rt2 = Runtime.build(Settings(config=service_config(tmp_path / "x" if (tmp_path / "x").mkdir() is None else None,
                                                       rules=rules)))
    srv2 = live(rt2)
    with client(srv2.url) as c:
        r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "vet", "features": features(0)}]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "players[0].skill"
