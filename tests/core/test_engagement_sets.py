"""The set form of the engagement model (spec §3 ``team_layers``/``team_pool``): one team network
shared over the teams, pooled, then the head; its dense expansion is the same function."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.engagement import _mlp, parse_engagement
from mgmatch.core.errors import InvalidInput


def _layer(rng, out, inp):
    return {"weight": rng.normal(0, 0.7, (out, inp)).tolist(), "bias": rng.normal(0, 0.3, out).tolist()}


def _set_model(seed=0, D=5, F=3, E=4, H=(6, 5), pool="sum", head=(4,)):
    rng = np.random.default_rng(seed)
    widths = [E, *H]
    obj = {"format": "mgmatch-engagement/v1", "teams": D, "feature_dim": F,
           "player_layers": [_layer(rng, 7, F), _layer(rng, E, 7)],
           "team_layers": [_layer(rng, widths[k + 1], widths[k]) for k in range(len(H))],
           "head_layers": [_layer(rng, head[0], H[-1]), _layer(rng, 1, head[0])]}
    if pool is not None:
        obj["team_pool"] = pool
    return obj


def _reference(obj: dict, X: np.ndarray, team_of: np.ndarray) -> float:
    """The spec's set form with plain loops: ReLU after every team layer, pooled, then the head."""
    def dense(layer, h):
        w, b = np.array(layer["weight"]), np.array(layer["bias"])
        return np.array([sum(w[o, i] * h[i] for i in range(len(h))) + b[o] for o in range(len(b))])

    def stack(layers, h, last_relu=False):
        for k, layer in enumerate(layers):
            h = dense(layer, h)
            if k < len(layers) - 1 or last_relu:
                h = np.maximum(h, 0)
        return h

    emb = [stack(obj["player_layers"], x) for x in X]
    pooled = 0.0
    for j in range(obj["teams"]):
        t = sum((emb[i] for i in range(len(emb)) if team_of[i] == j), np.zeros_like(emb[0]))
        pooled = pooled + stack(obj["team_layers"], t, last_relu=True)
    if obj.get("team_pool") == "mean":
        pooled = pooled / obj["teams"]
    return float(stack(obj["head_layers"], pooled)[0])


@pytest.mark.parametrize("pool", ["sum", "mean", None])
def test_evaluator_single_batch_dense_and_reference_agree(pool):
    obj = _set_model(pool=pool)
    m = parse_engagement(obj)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(13, 3))
    emb = m.embed(X)
    T = np.stack([rng.permutation(np.r_[np.repeat(np.arange(5), 2), [-1, -1, -1]]) for _ in range(6)])
    batch = m.evaluate(emb, T)
    for b in range(len(T)):
        ref = _reference(obj, X, T[b])
        assert m.evaluate(emb, T[b]) == pytest.approx(ref, rel=1e-9, abs=1e-9)
        assert batch[b] == pytest.approx(ref, rel=1e-4, abs=1e-4)
        te = np.concatenate([(T[b] == j) @ emb for j in range(5)])
        # the dense expansion the MIP and the scorers read is the same function
        assert _mlp(te, m.head_weights)[0] == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_permuting_teams_changes_nothing_and_params_do_not_grow_with_teams():
    obj = _set_model(D=6)
    m = parse_engagement(obj)
    rng = np.random.default_rng(4)
    emb = m.embed(rng.normal(size=(12, 3)))
    t = np.repeat(np.arange(6), 2)
    perm = rng.permutation(6)
    assert m.evaluate(emb, perm[t]) == pytest.approx(m.evaluate(emb, t), rel=1e-12)
    big = _set_model(D=60)
    assert big["team_layers"] == _set_model(D=6)["team_layers"]  # same weights, any D
    assert parse_engagement(big).head_weights[0][0].shape == (60 * 6, 60 * 4)


def test_dense_files_keep_their_meaning_and_sets_are_not_pairwise():
    obj = _set_model(D=2)
    m = parse_engagement(obj)
    rng = np.random.default_rng(5)
    emb = m.embed(rng.normal(size=(4, 3)))
    a, b = m.evaluate(emb, np.array([0, 0, 1, 1])), m.evaluate(emb, np.array([1, 1, 0, 0]))
    assert a == pytest.approx(b, rel=1e-12)
    dense = {k: v for k, v in obj.items() if k not in ("team_layers", "team_pool")}
    dense["head_layers"] = [_layer(rng, 4, 8), _layer(rng, 1, 4)]
    md = parse_engagement(dense)
    assert md.team_layers is None and md.head_weights[0][0].shape == (4, 8)
    assert md.evaluate(emb, np.array([0, 0, 1, 1])) != pytest.approx(md.evaluate(emb, np.array([1, 1, 0, 0])))
    assert "team_layers" not in md.to_json() and "team_layers" in m.to_json()


@pytest.mark.parametrize("edit,field", [
    (lambda o: (o.pop("team_layers"),), "team_pool"),
    (lambda o: o.update(team_pool="max"), "team_pool"),
    (lambda o: o["team_layers"][0].update(weight=[[1.0] * 3] * 6), "team_layers[0].weight[0]"),
    (lambda o: o["team_layers"][1].update(bias=[0.0]), "team_layers[1].bias"),
    (lambda o: o["head_layers"][0].update(weight=[[1.0] * 4] * 4), "head_layers[0].weight[0]"),
    (lambda o: o.update(team_layers=[]), "team_layers"),
])
def test_bad_set_models_name_the_field(edit, field):
    obj = _set_model(pool="mean")
    edit(obj)
    with pytest.raises(InvalidInput) as ex:
        parse_engagement(obj)
    assert ex.value.field.startswith(f"engagement.{field}"), ex.value.field
