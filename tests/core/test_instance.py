"""Instance parsing: the spec's shapes are accepted, every bad input names its field."""

from __future__ import annotations

import json

import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance, read_json
from mgmatch.core.rules import All, IfRule, Lit, Not


def test_example_parses_with_every_field(example_instance_obj):
    inst = parse_instance(example_instance_obj)
    assert inst.teams == 2 and inst.sizes == (3, 3) and inst.n == 8
    assert inst.players[0].pings == {"eu": 21, "us": 176}
    assert inst.players[0].party == "g1"
    rule = inst.rules[-1]
    assert isinstance(rule, IfRule)
    assert rule.when == All((Lit("p01", 0), Not(Lit("p08", 1))))


def test_round_trip_is_stable(example_instance_obj):
    inst = parse_instance(example_instance_obj)
    again = parse_instance(json.loads(json.dumps(inst.to_json())))
    assert again.to_json() == inst.to_json()
    assert [r.to_json() for r in again.rules] == [r.to_json() for r in inst.rules]


def test_unequal_team_sizes(mutate):
    def f(o):
        del o["team_size"]
        o["teams"] = 3
        o["team_sizes"] = [1, 2, 3]
        o["rules"] = []
    inst = parse_instance(mutate(f))
    assert inst.sizes == (1, 2, 3) and not inst.uniform_size
    assert inst.to_json()["team_sizes"] == [1, 2, 3]


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda o: o.pop("teams"), "teams"),
        (lambda o: o.update(teams=1), "teams"),
        (lambda o: o.update(team_sizes=[3, 3]), "team_size"),
        (lambda o: (o.pop("team_size"), o.update(team_sizes=[3])), "team_sizes"),
        (lambda o: o.update(team_size=5), "players"),
        (lambda o: o.update(format="mgmatch-instance/v0"), "format"),
        (lambda o: o["players"][2].update(id="p01"), "players[2].id"),
        (lambda o: o["players"][3].update(id=""), "players[3].id"),
        (lambda o: o["players"][4]["features"].pop(), "players[4].features"),
        (lambda o: o["players"][1].update(features=[1, "x", 2, 3]), "players[1].features[1]"),
        (lambda o: o["players"][1].update(skill=float("inf")), "players[1].skill"),
        (lambda o: o["players"][0].pop("roles"), "players[0].roles"),
        (lambda o: o["players"][5].pop("pings"), "players[5].pings"),
        (lambda o: o["players"][6].pop("skill"), "players[6].skill"),
        (lambda o: o["rules"][0].update(kind="teleport"), "rules[0].kind"),
        (lambda o: o["rules"][1].pop("max_diff"), "rules[1].max_diff"),
        (lambda o: o["rules"][1].update(max_diff=-3), "rules[1].max_diff"),
        (lambda o: o["rules"][0].update(slots={"guard": 1, "forward": 1}), "rules[0].slots"),
        (lambda o: o["rules"][3].update(players=["p03", "p99"]), "rules[3].players[1]"),
        (lambda o: o["rules"][3].update(scope="lobby"), "rules[3].scope"),
        (lambda o: o["rules"][5].update(players=["nobody"]), "rules[5].players[0]"),
        (lambda o: o["rules"][6]["terms"][0].__setitem__(1, 2), "rules[6].terms[0][1]"),
        (lambda o: o["rules"][6]["terms"][1].__setitem__(0, "zz"), "rules[6].terms[1][0]"),
        (lambda o: o["rules"][6].update(sense="<"), "rules[6].sense"),
        (lambda o: o["rules"][6].pop("rhs"), "rules[6].rhs"),
        (lambda o: o["rules"][7].update(when={"xor": []}), "rules[7].when"),
        (lambda o: o["rules"][7].update(when={"all": []}), "rules[7].when.all"),
        (lambda o: o["rules"][7].update(when=["p01", 7]), "rules[7].when"),
        (lambda o: o["rules"][7].pop("then"), "rules[7].then"),
    ],
)
def test_bad_input_names_the_field(mutate, change, field):
    with pytest.raises(InvalidInput) as err:
        parse_instance(mutate(change))
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(field)


def test_non_finite_numbers_rejected_in_files(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"teams": 2, "team_size": 1, "players": [{"id": "a", "features": [NaN]}]}')
    with pytest.raises(InvalidInput, match="NaN is not a finite number"):
        read_json(p)


def test_unreadable_files_are_input_errors(tmp_path):
    with pytest.raises(InvalidInput, match="no such file"):
        read_json(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        read_json(tmp_path / "broken.json")
