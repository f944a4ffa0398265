"""Tickets carry the optional player fields solvers read (EOMM's ``sigma``, ``recent``,
``games_per_day``; the Awesomenauts score's ``previous``, ``peer_pings``), checked as the instance
reader checks them, and nothing else: a real uvicorn server over the memory store and over Redis."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, features, service_config

from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings

EXTRAS = {"sigma": 80.0, "recent": ["W", "L", "D"], "games_per_day": 3.5,
          "previous": {"teammates": ["x1"], "opponents": ["x2"]}, "peer_pings": {"x1": 30.0}}


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_ticket_keeps_the_player_fields_solvers_read_and_refuses_others(tmp_path, live, store, request):
    settings: dict = {}
    if store == "redis":
        url, prefix = request.getfixturevalue("redis_url")
        settings = {"store": "redis", "redis_url": url, "key_prefix": prefix, "embedded_workers": False}
    rt = Runtime.build(Settings(config=service_config(tmp_path), **settings))
    srv = live(rt)
    with client(srv.url) as c:
        player = {"id": "e0", "features": features(0), "skill": 1500.0, **EXTRAS}
        r = c.post("/v1/tickets", json={"pool": "small", "players": [player]})
        assert r.status_code == 201, r.text
        stored = rt.store.get(r.json()["id"])
        assert stored is not None
        kept = stored.players[0]
        for key, value in EXTRAS.items():
            assert kept[key] == value, key
        # bad values are refused as the instance reader refuses them, naming the field; a field no
        # solver reads is refused as before; the ticket accepted first is untouched
        for extra, field in [({"sigma": -1}, "players[0].sigma"), ({"sigma": 1e308}, "players[0].sigma"),
                             ({"recent": ["W", "X"]}, "players[0].recent[1]"),
                             ({"games_per_day": "often"}, "players[0].games_per_day"),
                             ({"peer_pings": [1, 2]}, "players[0].peer_pings"),
                             ({"previous": {"teammates": 5}}, "players[0].previous.teammates"),
                             ({"note": "hi"}, "players[0].note")]:
            bad = {"id": "e1", "features": features(1), **extra}
            r = c.post("/v1/tickets", json={"pool": "small", "players": [bad]})
            assert r.status_code == 422, (extra, r.text)
            assert r.json()["error"]["field"] == field, (extra, r.json())
        assert rt.store.get(stored.id).players[0]["sigma"] == 80.0
