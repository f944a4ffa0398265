"""Large lobbies: formats up to 100 teams and 200 selected players; the ffa-32 and br-100 presets."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.checker import Checker
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.limits import MAX_SELECTED, MAX_TEAMS
from mgmatch.core.presets import generate_with_truth
from mgmatch.core.rules import PartyTogetherRule, RoleMinRule, RolesRule, SkillBalanceRule


def _inst(teams: int, size: int | None = None, sizes: list[int] | None = None, n: int | None = None) -> dict:
    total = sum(sizes) if sizes else teams * size
    obj = {"format": "mgmatch-instance/v1", "teams": teams,
           "players": [{"id": f"p{i}", "features": [float(i)], "party": f"g{i // 4}"} for i in range(n or total)],
           "rules": [{"kind": "party_together"}]}
    obj.update({"team_sizes": sizes} if sizes else {"team_size": size})
    return obj


def test_a_hundred_teams_and_two_hundred_players_are_read():
    assert MAX_TEAMS == 100 and MAX_SELECTED == 200
    inst = parse_instance(_inst(100, 2, n=260))
    assert inst.teams == 100 and inst.n_selected == 200
    ffa = parse_instance(_inst(100, 1))
    assert ffa.sizes == (1,) * 100
    assert parse_instance(_inst(50, sizes=[4] * 49 + [4])).n_selected == 200


@pytest.mark.parametrize("obj,field", [
    (_inst(101, 1), "teams"),
    (_inst(67, 3), "team_size"),                       # 201 places
    (_inst(50, sizes=[4] * 49 + [5]), "team_sizes"),
])
def test_beyond_the_limits_is_refused_naming_the_field(obj, field):
    with pytest.raises(InvalidInput) as ex:
        parse_instance(obj)
    assert ex.value.field == field


@pytest.mark.parametrize("preset,teams,size,lo,hi", [("ffa-32", 32, 1, 48, 64), ("br-100", 25, 4, 150, 300)])
def test_large_presets_plant_a_feasible_witness(preset, teams, size, lo, hi):
    for g in generate_with_truth(preset, 3, 11):
        inst = g.instance
        assert (inst.teams, inst.sizes[0]) == (teams, size) and lo <= inst.n <= hi
        assert Checker(inst).violations(g.witness) == []
        assert np.bincount(g.witness[g.witness >= 0], minlength=teams).tolist() == [size] * teams
        kinds = {type(r) for r in inst.rules}
        if preset == "br-100":
            # squads: parties of 1–4 kept whole, a support in every squad, balanced mean skill
            assert {PartyTogetherRule, RoleMinRule, SkillBalanceRule} <= kinds and RolesRule not in kinds
            sizes = {}
            for p in inst.players:
                if p.party is not None:
                    sizes[p.party] = sizes.get(p.party, 0) + 1
            assert sizes and max(sizes.values()) <= 4
        else:
            # teams of one: no parties, no role slots, no pairwise balance (a skill window instead)
            assert not kinds & {PartyTogetherRule, RolesRule, SkillBalanceRule}
        assert g.true_engagement(g.witness) > 0
