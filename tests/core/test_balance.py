"""Balance units (mgmatch.core.balance): an exact widening of an engagement model."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.balance import MAX_BALANCE_UNITS, add_balance_units, balance_units
from mgmatch.core.engagement import parse_engagement


def _net(rng, F, D, player=(5, 4), head=(6,), embed=3):
    widths = [F, *player, embed]
    pl = [{"weight": rng.normal(size=(widths[i + 1], widths[i])).tolist(), "bias": rng.normal(size=widths[i + 1]).tolist()}
          for i in range(len(widths) - 1)]
    hw = [D * embed, *head, 1]
    hl = [{"weight": rng.normal(size=(hw[i + 1], hw[i])).tolist(), "bias": rng.normal(size=hw[i + 1]).tolist()}
          for i in range(len(hw) - 1)]
    return {"format": "mgmatch-engagement/v1", "teams": D, "feature_dim": F, "player_layers": pl, "head_layers": hl,
            "feature_mean": rng.normal(size=F).tolist(), "feature_scale": (1 + rng.random(F)).tolist()}


def _values(model, x):
    """Engagement of matches x [m, D, K, F]."""
    m, D, K, F = x.shape
    e = model.embed(x.reshape(-1, F)).reshape(m, D, K, -1).sum(2)
    return model.head(e.reshape(m, -1))


@pytest.mark.parametrize("D,player,head", [(2, (5, 4), (6,)), (3, (7,), (4, 3)), (2, (), (5,))])
def test_the_widened_model_computes_the_same_function(D, player, head):
    rng = np.random.default_rng(D + len(player) + len(head))
    F = 4
    m = _net(rng, F, D, player, head)
    wide = add_balance_units(m)
    n = 2 * F * D * (D - 1) // 2
    assert wide is not None and balance_units(wide["training"]) == n
    a, b = parse_engagement(m), parse_engagement(wide)
    assert len(b.head_layers[0].bias) == len(a.head_layers[0].bias) + n
    assert b.embed_dim == a.embed_dim + F
    x = rng.normal(size=(200, D, 3, F)) * 2
    assert np.abs(_values(a, x) - _values(b, x)).max() < 1e-9


def test_the_units_are_the_teams_imbalance_of_each_feature():
    rng = np.random.default_rng(5)
    F = 3
    m = _net(rng, F, 2)
    wide = add_balance_units(m)
    b = parse_engagement(wide)
    x = rng.normal(size=(50, 2, 4, F))
    emb = b.embed(x.reshape(-1, F)).reshape(50, 2, 4, -1).sum(2).reshape(50, -1)
    W0, b0 = np.asarray(b.head_layers[0].weight), np.asarray(b.head_layers[0].bias)
    units = np.maximum(emb @ W0.T + b0, 0)[:, -2 * F:]
    diff = (x[:, 0].sum(1) - x[:, 1].sum(1)) / np.asarray(m["feature_scale"])   # normalized team-sum difference
    assert np.allclose(units[:, 0::2], np.maximum(diff, 0)) and np.allclose(units[:, 1::2], np.maximum(-diff, 0))


def test_what_cannot_take_balance_units_is_left_as_it_is():
    rng = np.random.default_rng(1)
    m = _net(rng, 3, 2)
    assert add_balance_units(add_balance_units(m)) is None            # widened once
    assert add_balance_units({**m, "head_layers": [{"weight": [[0.0] * 6], "bias": [0.0]}]}) is None  # no hidden layer
    assert add_balance_units(_net(rng, 3, 1)) is None                  # one team: nothing to balance
    many = MAX_BALANCE_UNITS // 2 + 1                                  # 2 teams: 2 units a feature, past the cap
    assert add_balance_units(_net(rng, many, 2)) is None
    assert add_balance_units({**m, "team_layers": [{"weight": [[1.0] * 3], "bias": [0.0]}]}) is None  # the set form
