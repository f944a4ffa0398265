"""The A/B statistics: the always-valid lift test against its published formulas and in simulated continuous
monitoring (seeded), and the sample-ratio check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgmatch.pipeline import abstats
from mgmatch.pipeline.abstats import Accumulator, Moments


def test_mixing_scale_solves_the_width_optimum():
    # r* = τ²/s² at the horizon is the root of r = log(1 + r) − 2 log α; for α = 0.05 that is 8.212
    r = abstats.mixing_rho2(0.05, 1)
    assert r == pytest.approx(math.log1p(r) - 2 * math.log(0.05), abs=1e-9)
    assert r == pytest.approx(8.212, abs=1e-3)
    assert abstats.mixing_rho2(0.05, 1000) == pytest.approx(r / 1000)
    # it is the minimum of the width: a bit either side is wider
    width = [abstats.cs_half_width(1.0, x, 0.05) for x in (0.8 * r, r, 1.25 * r)]
    assert width[1] < width[0] and width[1] < width[2]
    with pytest.raises(ValueError):
        abstats.mixing_rho2(1.0)


def test_half_width_is_waudby_smiths_asymptotic_cs():
    # Waudby-Smith et al. (2024): σ̂ · √( 2(tρ² + 1)/(t²ρ²) · log(√(tρ² + 1)/α) ), with se = σ̂/√t and r = tρ²
    sigma, t, rho2, alpha = 1.7, 2500, 0.0009, 0.05
    expected = sigma * math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1) / alpha))
    assert abstats.cs_half_width(sigma / math.sqrt(t), t * rho2, alpha) == pytest.approx(expected, rel=1e-12)


def test_lift_matches_the_msprt_of_johari_et_al():
    # two arms with known moments; Λ = √(s²/(s²+τ²)) · exp(τ²Δ̂² / (2 s²(s²+τ²))) (Johari et al. 2022)
    ctl, trt = Moments(n=400, mean=1.0, m2=399 * 0.25), Moments(n=600, mean=1.1, m2=599 * 0.36)
    alpha, horizon = 0.05, 2000
    s2 = 0.36 / 600 + 0.25 / 400
    tau2 = abstats.mixing_rho2(alpha, horizon) * 1000 * s2
    lam = math.sqrt(s2 / (s2 + tau2)) * math.exp(tau2 * 0.1 ** 2 / (2 * s2 * (s2 + tau2)))
    res = abstats.lift(ctl, trt, alpha, horizon)
    assert res.estimate == pytest.approx(0.1)
    assert res.relative == pytest.approx(0.1)
    assert res.se == pytest.approx(math.sqrt(s2))
    assert res.p_value == pytest.approx(min(1.0, 1 / lam), rel=1e-9)
    # the CS is where Λ(δ) < 1/α: at its ends Λ = 1/α exactly
    for end in res.ci:
        z2 = (0.1 - end) ** 2 / s2
        assert -0.5 * math.log1p(tau2 / s2) + 0.5 * tau2 / (s2 + tau2) * z2 == pytest.approx(math.log(1 / alpha))
    # wider than the fixed-sample interval, which is valid only for one look
    assert res.ci[0] < res.fixed_ci[0] < res.fixed_ci[1] < res.ci[1]


def test_lift_needs_results_and_handles_no_noise():
    assert abstats.lift(Moments.of([1.0] * 9), Moments.of([2.0] * 50)) is None
    exact = abstats.lift(Moments.of([1.0] * 20), Moments.of([1.5] * 20))
    assert exact.estimate == 0.5 and exact.ci == (0.5, 0.5) and exact.p_value == 0.0
    same = abstats.lift(Moments.of([1.0] * 20), Moments.of([1.0] * 20))
    assert same.p_value == 1.0


def test_accumulator_equals_batch_moments():
    y = np.random.default_rng(3).normal(5.0, 2.0, 1001)
    acc = Accumulator()
    for v in y:
        acc.push(float(v))
    m, ref = acc.moments(), Moments.of(y)
    assert m.n == ref.n and m.mean == pytest.approx(ref.mean) and m.var == pytest.approx(np.var(y, ddof=1))
    lo, hi = abstats.mean_ci(m)
    assert lo < 5.0 < hi and hi - lo == pytest.approx(2 * 1.9623 * np.std(y, ddof=1) / math.sqrt(1001), rel=1e-3)


def _monitor(rng, runs, n, lift, draw):
    """Each run: n results arriving in random arm order; every arrival is a look."""
    ever_p, ever_fixed, missed = 0, 0, 0
    for _ in range(runs):
        order = rng.random(n) < 0.5
        yc, yt = draw(rng, int((~order).sum())), draw(rng, int(order.sum())) + lift
        est, p, half, p_fixed = abstats.sequential_p_values(yc, yt, order)
        ok = ~np.isnan(est)
        ever_p += bool(np.nanmin(p) < 0.05)
        ever_fixed += bool(np.nanmin(p_fixed) < 0.05)
        missed += bool(np.any(np.abs(est[ok] - lift) > half[ok]))
    return ever_p / runs, ever_fixed / runs, missed / runs


def test_peeking_at_every_result_keeps_the_error_rate_under_the_null():
    # skewed engagement (exponential), no difference between the arms; 300 experiments read after every result
    rng = np.random.default_rng(20261129)
    always_valid, fixed, missed = _monitor(rng, 300, 3000, 0.0, lambda r, k: r.exponential(1.0, k))
    assert always_valid <= 0.05, always_valid
    assert missed <= 0.05, missed
    # the fixed-sample z-test read the same way rejects the true null far more often than its 5%
    assert fixed > 0.25, fixed


def test_confidence_sequence_covers_a_true_lift_at_every_look():
    rng = np.random.default_rng(7)
    _, _, missed = _monitor(rng, 300, 3000, 0.25, lambda r, k: r.normal(1.0, 1.0, k))
    assert missed <= 0.05, missed


def test_a_known_lift_is_found():
    rng = np.random.default_rng(11)
    ctl = Moments.of(rng.normal(1.70, 0.5, 2500))
    trt = Moments.of(rng.normal(1.80, 0.5, 2500))
    res = abstats.lift(ctl, trt)
    assert res.p_value < 0.01 and res.ci[0] < 0.10 < res.ci[1] and res.ci[0] > 0
    assert res.to_json(0.05)["significant"] is True


def test_sample_ratio_mismatch():
    flagged = abstats.sample_ratio([600, 400], [1, 1])
    assert flagged.chi2 == pytest.approx(40.0) and flagged.p_value < 1e-9 and flagged.flagged
    assert not abstats.sample_ratio([510, 490], [1, 1]).flagged
    assert not abstats.sample_ratio([600, 400], [3, 2]).flagged  # 60/40 is what 3:2 asks for
    assert abstats.sample_ratio([600, 400], [3, 2]).to_json()["expected_share"] == pytest.approx([0.6, 0.4])
    assert abstats.sample_ratio([0, 0], [1, 1]) is None
    assert abstats.sample_ratio([5], [1]) is None
