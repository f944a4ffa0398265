"""A battle-royale pool (br-100: 25 squads of 4) through the live service: tickets with parties, a
matchmaker tick forming one 100-player match with every party whole in one squad."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import client, poll

from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings
from mgmatch.core.presets import get_preset
from mgmatch.core.world import features, sample_population

POOL = {"name": "br-100", "teams": 25, "team_size": 4, "engagement_model": "br-100",
        "rules": [{"kind": "party_together"}, {"kind": "skill_balance", "max_diff": 300}],
        "method": "lobby", "time_budget_ms": 300, "max_candidates": 300, "partition": "sequential",
        "dispatch": {"policy": "immediate"}}


def _tickets(seed: int = 3) -> list[dict]:
    """8 parties of 4, 10 of 3, 10 of 2 and 30 solos (130 players: one match of 100 and a bench)."""
    world = get_preset("br-100").world
    rng = np.random.default_rng(seed)
    sizes = [4] * 8 + [3] * 10 + [2] * 10 + [1] * 30
    pop = sample_population(world, sum(sizes), rng, skill_center=1500.0, skill_sd=120.0)
    X = np.round(features(world, pop, rng), 4).tolist()
    out, k = [], 0
    for t, n in enumerate(sizes):
        out.append({"pool": "br-100", "players": [{"id": f"t{t}-{m}", "features": X[k + m],
                                                   "skill": round(float(pop.rating[k + m]), 1)} for m in range(n)]})
        k += n
    return out


def test_a_battle_royale_pool_forms_a_100_player_match_with_parties_whole(tmp_path, live):
    cfg = tmp_path / "service.yaml"
    cfg.write_text(yaml.safe_dump({"pools": [POOL]}))
    rt = Runtime.build(Settings(config=cfg, store="memory"))
    rt.warm()
    rt.start_embedded(tick_s=0.05)
    srv = live(rt)
    bodies = _tickets()
    with client(srv.url) as c:
        assert poll(lambda: c.get("/readyz").status_code == 200)
        ids = []
        for body in bodies:
            r = c.post("/v1/tickets", json=body)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])

        def views():
            got = [c.get(f"/v1/tickets/{t}").json() for t in ids]
            return got if sum(len(v["players"]) for v in got if v["status"] == "matched") >= 100 else None

        done = poll(views, timeout=120.0, every=0.5)
    matched = [v for v in done if v["status"] == "matched"]
    matches = {v["match"]["match_id"] for v in matched}
    assert len(matches) == 1, matches
    teams = matched[0]["match"]["teams"]
    assert len(teams) == 25 and all(len(t) == 4 for t in teams)
    everyone = [p for t in teams for p in t]
    assert len(everyone) == len(set(everyone)) == 100
    for v in matched:  # each ticket (a party of 1–4) sits whole in the squad it names
        assert set(v["players"]) <= set(teams[v["match"]["team"]])
    assert sorted(p for v in matched for p in v["players"]) == sorted(everyone)
    assert matched[0]["match"]["method"] == "lobby"
