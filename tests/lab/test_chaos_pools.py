"""bench chaos on large-lobby pools: the config the run writes for a preset the built-in config lacks."""

from __future__ import annotations

import pytest

from mgmatch.app.config import parse_config
from mgmatch.core.errors import InvalidInput
from mgmatch.lab.chaos import ChaosPlan, make_backfills, make_tickets, pool_config


@pytest.mark.parametrize("pool,teams,size", [("br-100", 25, 4), ("ffa-32", 32, 1)])
def test_large_lobby_pools_get_a_config_the_service_reads(pool, teams, size):
    cfg = parse_config(pool_config(pool))
    p = cfg.pool(pool)
    assert (p.teams, p.team_size, p.method) == (teams, size, "lobby")
    assert p.max_candidates >= teams * size
    ChaosPlan(pool=pool).validate()
    tickets = make_tickets(pool, 50, seed=1, party_share=0.3)
    assert all(len(t["players"]) in (1, size) for t in tickets)
    if size > 1:  # squads: some tickets are whole parties
        assert any(len(t["players"]) == size for t in tickets)
    bf = make_backfills(pool, 2, seed=1)[0]
    assert len(bf["teams"]) == teams and sum(bf["open"]) >= 1


def test_built_in_pools_need_no_config_and_others_are_refused():
    assert pool_config("3v3") is None and pool_config("12v12") is None
    with pytest.raises(InvalidInput) as ex:
        ChaosPlan(pool="12v12-deep").validate()
    assert ex.value.field == "pool" and "br-100" in ex.value.message
