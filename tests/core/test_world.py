"""The synthetic player world and its ground-truth engagement process."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core.presets import PRESETS
from mgmatch.core.world import (
    FORMATIONS,
    engagement,
    features,
    sample_population,
    simulate_history,
)

W3 = PRESETS["3v3"].world
W12 = PRESETS["12v12"].world


def test_same_seed_same_world_other_seed_other_world():
    a = simulate_history(W3, 2000, 500, np.random.default_rng(7))
    b = simulate_history(W3, 2000, 500, np.random.default_rng(7))
    c = simulate_history(W3, 2000, 500, np.random.default_rng(8))
    assert np.array_equal(a.features, b.features) and np.array_equal(a.teams, b.teams)
    assert np.array_equal(a.y, b.y)
    assert not np.array_equal(a.features, c.features)


@pytest.mark.parametrize("cfg", [W3, W12], ids=["3v3", "12v12"])
def test_feature_blocks_cover_the_vector(cfg):
    blocks = cfg.blocks()
    spans = sorted(blocks.values())
    assert spans[0][0] == 0 and spans[-1][1] == cfg.feature_dim
    assert all(spans[k][1] == spans[k + 1][0] for k in range(len(spans) - 1))
    rng = np.random.default_rng(0)
    pop = sample_population(cfg, 300, rng)
    X = features(cfg, pop, rng)
    assert X.shape == (300, cfg.feature_dim) and np.isfinite(X).all()
    s, e = blocks["recent"]
    assert np.array_equal(X[:, s:e], pop.recent)
    s, e = blocks["heroes"]
    assert np.allclose(X[:, s:e].sum(1), 1.0)
    # the rating column tracks the latent skill
    assert np.corrcoef(X[:, blocks["profile"][0]], pop.mu)[0, 1] > 0.8


def test_streak_is_the_current_run():
    rng = np.random.default_rng(1)
    pop = sample_population(W3, 50, rng)
    pop.recent[0] = [-1, -1, -1, 1, 0, 0, 1, 1, -1, 0]
    pop.recent[1] = [1] * 10
    pop.recent[2] = [0, -1, -1, -1, -1, -1, -1, -1, -1, -1]
    assert pop.streak[:3].tolist() == [-3.0, 10.0, 0.0]


@pytest.mark.parametrize("cfg,lo,hi", [(W3, 4.6, 6.0), (W12, 14.5, 21.0)], ids=["3v3", "12v12"])
def test_engagement_scale_and_good_matches_score_higher(cfg, lo, hi):
    h = simulate_history(cfg, 4000, 3000, np.random.default_rng(3))
    assert lo < h.y.mean() < hi
    assert (h.y > 0).all() and (h.y < cfg.teams * cfg.team_size).all()
    rand = h.y[h.formation == FORMATIONS.index("random")].mean()
    snake = h.y[h.formation == FORMATIONS.index("bracket_snake")].mean()
    roles = h.y[h.formation == FORMATIONS.index("bracket_roles")].mean()
    assert snake > rand and roles > rand


def _flat_population(n: int, seed: int = 0):
    """Players alike in everything but what a test sets."""
    pop = sample_population(W3, n, np.random.default_rng(seed))
    pop.mu[:] = 1500.0
    pop.ping[:] = 30.0
    pop.recent[:] = 0
    pop.propensity[:] = 0.0
    pop.main_role[:] = np.arange(n) % 3
    return pop


def test_unfair_matches_lose_engagement():
    pop = _flat_population(6)
    teams = np.array([[[0, 1, 2], [3, 4, 5]]])
    fair = engagement(W3, pop, teams)[0]
    pop.mu[:3] = 1800.0
    unfair = engagement(W3, pop, teams)[0]
    assert unfair < fair - 0.05


def test_crowded_roles_and_high_ping_lose_engagement():
    pop = _flat_population(6)
    teams = np.array([[[0, 1, 2], [3, 4, 5]]])
    base = engagement(W3, pop, teams)[0]
    pop.main_role[:3] = 0  # three guards on team 0
    crowded = engagement(W3, pop, teams)[0]
    assert crowded < base - 0.02
    pop = _flat_population(6)
    pop.ping[0] = 160.0  # far from every region
    assert engagement(W3, pop, teams)[0] < base - 0.02


def test_a_loss_on_a_losing_streak_hurts_more():
    pop = _flat_population(6)
    teams = np.array([[[0, 1, 2], [3, 4, 5]]])
    pop.mu[:3] = 1300.0  # team 0 likely loses
    calm = engagement(W3, pop, teams, per_player=True)[0, 0, 0]
    pop.recent[0, :4] = -1
    tilted = engagement(W3, pop, teams, per_player=True)[0, 0, 0]
    assert tilted < calm
