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


def test_a_squad_slot_backfill_is_filled_by_the_lobby_search_with_the_match_kept():
    """A running br-100 match missing 1–2 players of its last squad: the lobby search keeps every
    player of the match on his squad (the pins) and fills the open places from the queue."""
    import time

    import numpy as np

    from mgmatch.app.backfill import backfill_instance
    from mgmatch.app.store import Backfill, Ticket, new_ticket_id
    from mgmatch.core.instance import parse_instance
    from mgmatch.core.presets import load_model
    from mgmatch.core.problem import Problem
    from mgmatch.core.solution import team_of_from_teams
    from mgmatch.lab.chaos import EXTRA_POOLS
    from mgmatch.solvers.base import Budget
    from mgmatch.solvers.lobby import LobbySolver

    pool = parse_config({"pools": [EXTRA_POOLS["br-100"]]}).pool("br-100")
    now = time.time()
    queue = [Ticket(new_ticket_id("br-100"), "br-100", t["players"], now, now + 120)
             for t in make_tickets("br-100", 40, 5, party_share=0.1)]
    for bj in make_backfills("br-100", 2, seed=3):
        b = Backfill("b", "br-100", bj["match_id"], bj["players"], bj["teams"], bj["open"], now, now + 60)
        inst = parse_instance(backfill_instance(pool, b, queue, now)[0], stored=True)
        pb = Problem(inst, load_model("br-100"))
        sol = LobbySolver(seed=2).solve(pb, Budget.of(1000.0))
        assert sol.status == "feasible", sol.model_extra
        team_of = team_of_from_teams(inst, sol.teams)
        assert pb.checker.violations(team_of) == []
        for j, team in enumerate(bj["teams"]):
            assert all(team_of[inst.index[p]] == j for p in team)
        assert np.bincount(team_of[team_of >= 0], minlength=25).tolist() == [4] * 25
