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


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda o: o["players"][1].update(party=""), "players[1].party"),
        (lambda o: o["players"][1].update(party=" \t"), "players[1].party"),
        (lambda o: o["players"][2].update(roles=["guard", ""]), "players[2].roles[1]"),
        (lambda o: o["players"][2].update(roles=["  "]), "players[2].roles[0]"),
        (lambda o: o["players"][3]["pings"].update({"": 30}), "players[3].pings"),
        (lambda o: o["players"][3]["pings"].update({"   ": 30}), "players[3].pings"),
        (lambda o: o["rules"].append({"kind": "role_min", "role": " ", "min": 0}), "rules[8].role"),
        (lambda o: o["rules"].append({"kind": "role_max", "role": "\t", "max": 3}), "rules[8].role"),
        (lambda o: o["rules"][0].update(slots={"guard": 1, "forward": 1, " ": 1}), "rules[0].slots"),
    ],
)
def test_empty_or_blank_party_role_and_region_names_are_refused(mutate, change, field):
    """``"party": ""``, ``"roles": [" "]``, a ``""`` region in ``pings`` were accepted (a blank region
    could even be a Solution's ``region``)."""
    with pytest.raises(InvalidInput) as err:
        parse_instance(mutate(change))
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(field) and ("empty" in err.value.message or "non-empty" in err.value.message)
    # what was stored before the check (queued tickets, labelled datasets) still reads back
    parse_instance(mutate(change), stored=True)


def test_names_with_inner_spaces_are_still_names(mutate):
    def f(o):
        o["players"][0].update(party="night owls", roles=["guard", "off tank"])
        o["players"][0]["pings"]["eu west"] = 20
    inst = parse_instance(mutate(f))
    assert inst.players[0].party == "night owls" and inst.players[0].pings["eu west"] == 20


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


@pytest.mark.parametrize(
    "change, field",
    [  # pydantic's lax mode read these as numbers; the spec's numbers are JSON numbers
        (lambda o: o.update(teams="2"), "teams"),
        (lambda o: o.update(team_size=True), "team_size"),
        (lambda o: (o.pop("team_size"), o.update(team_sizes=[3, "3"])), "team_sizes[1]"),
        (lambda o: o["players"][1]["features"].__setitem__(2, True), "players[1].features[2]"),
        (lambda o: o["players"][1].update(skill="1500"), "players[1].skill"),
        (lambda o: o["players"][1].update(pings={"eu": "20"}), "players[1].pings.eu"),
        (lambda o: o["players"][1].update(waited_s=False), "players[1].waited_s"),
    ],
)
def test_numbers_must_be_json_numbers(mutate, change, field):
    with pytest.raises(InvalidInput) as err:
        parse_instance(mutate(change))
    assert err.value.field == field, str(err.value)


def test_integral_floats_and_numpy_integers_are_integers(mutate):
    import numpy as np

    inst = parse_instance(mutate(lambda o: o.update(teams=2.0, team_size=np.int64(3))))
    assert inst.teams == 2 and inst.sizes == (3, 3)


@pytest.mark.parametrize(
    "extra, field",
    [  # optional player fields the solvers read (EOMM, the Awesomenauts score): checked on reading
        ({"sigma": 1e308}, "players[2].sigma"),  # EOMM squared it: OverflowError, HTTP 500
        ({"sigma": -1}, "players[2].sigma"),
        ({"games_per_day": "often"}, "players[2].games_per_day"),
        ({"recent": "WWL"}, "players[2].recent"),
        ({"recent": ["W", "win"]}, "players[2].recent[1]"),
        ({"peer_pings": [30]}, "players[2].peer_pings"),  # the scorer called .items() on it
        ({"peer_pings": {"p01": -5}}, "players[2].peer_pings.p01"),
        ({"previous": [1]}, "players[2].previous"),
        ({"previous": {"opponents": 7}}, "players[2].previous.opponents"),
    ],
)
def test_optional_fields_solvers_read_name_the_field(mutate, extra, field):
    with pytest.raises(InvalidInput) as err:
        parse_instance(mutate(lambda o: o["players"][2].update(extra)))
    assert err.value.field == field, str(err.value)


def test_optional_fields_are_kept_as_given(mutate):
    extra = {"sigma": 80, "games_per_day": 2.5, "recent": ["W", "D", "L"], "peer_pings": {"p01": 30},
             "previous": {"teammates": ["p01"], "opponents": []}, "note": {"free": ["form"]}}
    inst = parse_instance(mutate(lambda o: o["players"][2].update(extra)))
    assert {k: inst.players[2].model_extra[k] for k in extra} == extra


def test_a_file_that_is_not_utf8_is_an_input_error(tmp_path):
    p = tmp_path / "latin1.json"
    p.write_bytes(b'{"teams": "\xff"}')
    with pytest.raises(InvalidInput, match="not UTF-8") as err:
        read_json(p)
    assert err.value.field == str(p)
