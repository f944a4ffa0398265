"""The engagement evaluator follows spec §3 exactly, one assignment or a batch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mgmatch.core.engagement import load_engagement, parse_engagement
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams


def _reference(model_obj: dict, features: np.ndarray, team_of: np.ndarray) -> float:
    """Spec §3 written out with plain loops: a second, independent reading."""
    def stack(layers, h):
        for k, layer in enumerate(layers):
            w, b = np.array(layer["weight"]), np.array(layer["bias"])
            h = np.array([sum(w[o, i] * h[i] for i in range(len(h))) + b[o] for o in range(len(b))])
            if k < len(layers) - 1:
                h = np.maximum(h, 0)
        return h
    x = features.copy()
    if "feature_mean" in model_obj:
        x = x - np.array(model_obj["feature_mean"])
    if "feature_scale" in model_obj:
        x = x / np.array(model_obj["feature_scale"])
    emb = [stack(model_obj["player_layers"], row) for row in x]
    teams = []
    for j in range(model_obj["teams"]):
        t = np.zeros_like(emb[0])
        for i, e in enumerate(emb):
            if team_of[i] == j:
                t = t + e
        teams.append(t)
    return float(stack(model_obj["head_layers"], np.concatenate(teams))[0])


def test_example_objective_matches_expected(example_paths, example_instance_obj):
    model = load_engagement(example_paths["engagement"])
    inst = parse_instance(example_instance_obj)
    expected = json.loads(example_paths["expected"].read_text())
    t = team_of_from_teams(inst, expected["teams"])
    assert Problem(inst, model).objective(t) == pytest.approx(expected["objective"], abs=1e-9)


def test_batch_equals_single_equals_reference(example_paths, example_instance_obj):
    obj = json.loads(example_paths["engagement"].read_text())
    obj["feature_mean"] = [0.1, -0.2, 0.0, 0.3]
    obj["feature_scale"] = [1.5, 0.5, 2.0, 1.0]
    model = parse_engagement(obj)
    inst = parse_instance(example_instance_obj)
    pb = Problem(inst, model)
    rng = np.random.default_rng(7)
    batch = np.stack([rng.permutation([0, 0, 0, 1, 1, 1, -1, -1]) for _ in range(40)])
    many = pb.objectives(batch)
    for b in range(len(batch)):
        ref = _reference(obj, inst.features(), batch[b])
        assert pb.objective(batch[b]) == pytest.approx(ref, abs=1e-9)
        assert many[b] == pytest.approx(ref, abs=1e-4)  # batch path runs in float32


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda o: o.update(feature_dim=5), "player_layers\\[0\\].weight"),
        (lambda o: o["head_layers"][1]["bias"].append(0.0), "head_layers\\[1\\].bias"),
        (lambda o: o.update(feature_scale=[1, 0, 1, 1]), "feature_scale"),
        (lambda o: o.update(feature_mean=[1, 2]), "feature_mean"),
        (lambda o: o.update(head_layers=[]), "head_layers"),
        (lambda o: o["head_layers"].pop(), "one output"),
    ],
)
def test_bad_models_are_rejected(example_paths, change, match):
    obj = json.loads(example_paths["engagement"].read_text())
    change(obj)
    with pytest.raises(InvalidInput, match=match):
        parse_engagement(obj)


def test_model_and_instance_must_agree(example_paths, mutate):
    model = load_engagement(example_paths["engagement"])
    inst = parse_instance(mutate(lambda o: [p.update(features=p["features"] + [0.0]) for p in o["players"]]))
    with pytest.raises(InvalidInput, match="feature_dim"):
        Problem(inst, model)


@pytest.mark.parametrize(
    "change, field",
    [
        # a ragged weight matrix reached numpy before the shape check: "setting an array element with a sequence"
        (lambda o: o["player_layers"][0]["weight"][1].pop(), "player_layers[0].weight[1]"),
        (lambda o: o["head_layers"][1].update(weight=[]), "head_layers[1].weight"),
        (lambda o: o.update(feature_dim="4"), "feature_dim"),
        (lambda o: o["head_layers"][0]["weight"][0].__setitem__(0, True), "head_layers[0].weight[0][0]"),
        # beyond float32: the batch evaluator overflowed and SCIP called a feasible instance infeasible
        (lambda o: o["head_layers"][0]["bias"].__setitem__(0, 1e308), "head_layers[0].bias[0]"),
        (lambda o: o.update(feature_scale=[1, 1e-300, 1, 1]), "feature_scale[1]"),
    ],
)
def test_bad_models_name_the_field(example_paths, change, field):
    obj = json.loads(example_paths["engagement"].read_text())
    change(obj)
    with pytest.raises(InvalidInput) as err:
        parse_engagement(obj, "eng.json")
    assert err.value.field == f"eng.json.{field}", str(err.value)
    assert "Value error" not in str(err.value)


@pytest.mark.parametrize("preset", ["3v3", "12v12-deep"])
def test_head_gradient_matches_finite_differences(preset):
    """The head's backpropagation (one for the whole project) against central differences of the head
    itself, on a model with one hidden layer and one with two."""
    from mgmatch.core.engagement import head_gradient
    from mgmatch.core.presets import load_model

    model = load_model(preset)
    rng = np.random.default_rng(7)
    D = 2
    t = rng.normal(size=D * model.embed_dim) * 3.0

    def head(v):
        return float(model.head(v))

    g = head_gradient(model, t)
    eps = 1e-6
    fd = np.array([(head(t + eps * e) - head(t - eps * e)) / (2 * eps) for e in np.eye(t.size)])
    assert g.shape == t.shape
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6)
