"""The documented input limits (core.limits): hostile shapes are refused naming the field, never crash."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgmatch.core import limits
from mgmatch.core.engagement import EngagementModel, Layer
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance, read_json
from mgmatch.core.presets import generate_instances, preset_names
from mgmatch.core.problem import Problem

_HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _nested(kind: str, depth: int) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("kind", ["list", "object"])
def test_depth_scan_refuses_100k_nesting_without_recursing(kind):
    assert limits.json_depth_exceeds(_nested(kind, 100_000))
    assert limits.json_depth_exceeds(_nested(kind, limits.MAX_JSON_DEPTH + 1))
    assert not limits.json_depth_exceeds(_nested(kind, limits.MAX_JSON_DEPTH))


def test_depth_scan_ignores_brackets_inside_strings():
    inside = json.dumps({"id": "[" * 1000 + '\\"{' * 500, "list": [[1]]})
    assert not limits.json_depth_exceeds(inside)
    assert limits.json_depth_exceeds(json.dumps({"s": "x\"[", "d": json.loads(_nested("list", 80))}))


@_HYPO
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=40),
       st.integers(min_value=1, max_value=8))
def test_depth_scan_agrees_with_the_parsed_depth(doc, limit):
    def depth(v) -> int:
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        return 0

    assert limits.json_depth_exceeds(json.dumps(doc), limit) == (depth(doc) > limit)


def test_read_json_refuses_a_deep_file_with_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(_nested("list", 100_000))
    with pytest.raises(InvalidInput) as err:
        read_json(path)
    assert "nested deeper" in str(err.value) and "\n" not in str(err.value)


def _not_chain(depth: int):
    when = ["p01", 0]
    for _ in range(depth - 1):
        when = {"not": when}
    return when


def _if_rule(when) -> dict:
    return {"kind": "if", "when": when, "then": {"terms": [["p02", 0, 1]], "sense": "<=", "rhs": 1}}


def test_condition_depth_is_bounded(mutate):
    ok = parse_instance(mutate(lambda o: o.update(rules=[_if_rule(_not_chain(limits.MAX_CONDITION_DEPTH))])))
    assert len(ok.rules) == 1
    for depth in (limits.MAX_CONDITION_DEPTH + 1, 3000):
        with pytest.raises(InvalidInput) as err:
            parse_instance(mutate(lambda o, d=depth: o.update(rules=[_if_rule(_not_chain(d))])))
        assert err.value.field.startswith("rules[0].when") and "nest" in err.value.message


@pytest.mark.parametrize("change, field", [
    (lambda o: o.update(teams=limits.MAX_TEAMS + 1), "teams"),
    (lambda o: o.update(team_size=limits.MAX_TEAM_SIZE + 1), "team_size"),
    (lambda o: (o.pop("team_size"), o.update(team_sizes=[3, limits.MAX_TEAM_SIZE + 1])), "team_sizes[1]"),
    (lambda o: o["players"][1].update(id="x" * 5000), "players[1].id"),
    (lambda o: o["players"][1].update(features=[1e300, 0, 0, 0]), "players[1].features[0]"),
    (lambda o: o["players"][1].update(features=[0.0] * (limits.MAX_FEATURES + 1)), "players[1].features"),
    (lambda o: o["players"][2].update(skill=-2e6), "players[2].skill"),
    (lambda o: o["players"][2].update(waited_s=1e12), "players[2].waited_s"),
    (lambda o: o["players"][3].update(party="g" * 65), "players[3].party"),
    (lambda o: o["players"][3].update(roles=["r" * 65]), "players[3].roles[0]"),
    (lambda o: o["players"][3].update(roles=[f"r{i}" for i in range(limits.MAX_ROLES + 1)]), "players[3].roles"),
    (lambda o: o["players"][4].update(pings={"eu": 1e9}), "players[4].pings.eu"),
    (lambda o: o["players"][4].update(pings={"eu": -1}), "players[4].pings.eu"),
    (lambda o: o["players"][4].update(pings={f"r{i}": 1 for i in range(limits.MAX_REGIONS + 1)}), "players[4].pings"),
    (lambda o: o.update(rules=[{"kind": "skill_balance", "max_diff": 1e300}]), "rules[0].max_diff"),
    (lambda o: o.update(rules=[{"kind": "linear", "terms": [["p01", 0, 1e12]], "sense": "<=", "rhs": 1}]),
     "rules[0].terms[0][2]"),
    (lambda o: o.update(rules=[{"kind": "linear", "terms": [["p01", 10**500, 1]], "sense": "<=", "rhs": 1}]),
     "rules[0].terms[0][1]"),
    (lambda o: o.update(rules=[{"kind": "role_min", "role": "guard", "min": 10**9}]), "rules[0].min"),
    (lambda o: o.update(rules=[{"kind": "avoid", "players": ["p01", "q" * 100], "scope": "team"}]), "rules[0].players[1]"),
])
def test_bounds_name_the_field(mutate, change, field):
    with pytest.raises(InvalidInput) as err:
        parse_instance(mutate(change))
    assert err.value.field == field, str(err.value)
    assert len(str(err.value)) < 300  # the message never echoes a whole hostile value


def test_presets_and_the_spec_example_fit_the_limits(example_instance_obj):
    parse_instance(copy.deepcopy(example_instance_obj))
    assert not limits.json_depth_exceeds(json.dumps(example_instance_obj))
    for name in preset_names():
        for inst in generate_instances(name, 3, seed=7):
            again = parse_instance(json.loads(json.dumps(inst.to_json())))
            assert again.to_json() == inst.to_json()
            assert np.abs(inst.features()).max() <= limits.MAX_ABS_FEATURE


def _model(feature_dim: int, player: list[tuple[float, float]], head: float) -> EngagementModel:
    """A 2-team model whose player layers are (weight, bias) constants of width 2, and a head of weight ``head``."""
    layers, width = [], feature_dim
    for w, b in player:
        layers.append(Layer(weight=[[w] * width] * 2, bias=[b] * 2))
        width = 2
    return EngagementModel(teams=2, feature_dim=feature_dim, player_layers=layers,
                           head_layers=[Layer(weight=[[head] * 4], bias=[0.0])])


def test_a_non_finite_embedding_or_objective_is_invalid_input_never_nan(example_instance_obj):
    inst = parse_instance(example_instance_obj)
    dim = len(inst.players[0].features)
    team_of = np.array([0, 0, 0, 1, 1, 1, -1, -1])
    sane = Problem(inst, _model(dim, [(0.5, 0.0)], 1.0))
    assert np.isfinite(sane.objective(team_of))
    # weights within MAX_ABS_WEIGHT (1e6) overflow float64 only through depth: ×2e6 per layer of width 2
    overflow_embedding = Problem(inst, _model(dim, [(0.0, 1e6)] + [(1e6, 0.0)] * 50, 1.0))
    with pytest.raises(InvalidInput) as err:
        _ = overflow_embedding.embeddings
    assert err.value.field == "players[0].features"
    overflow_head = Problem(inst, _model(dim, [(0.0, 1e6)] + [(1e6, 0.0)] * 47, 1e6))  # embeddings ~1.4e302
    assert np.isfinite(overflow_head.embeddings).all()
    with pytest.raises(InvalidInput) as err:
        overflow_head.objective(team_of)
    assert err.value.field == "players"
