"""The statistics of an A/B readout: per-arm means, the lift against control, sample-ratio mismatch.

**Lift with an always-valid confidence sequence and p-value.** An experiment's report is read while it
runs, again and again; a fixed-sample z-test read after every new result rejects a true null far more
often than its α (the more looks, the more often). The lift here is tested with the Gaussian mixture
sequential probability ratio test (mSPRT) of Johari, Koomen, Pekelis & Walsh (2022), "Always Valid
Inference: Continuous Monitoring of A/B Tests", Operations Research 70(3), in the
asymptotic form of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024), "Time-uniform central limit
theory and asymptotic confidence sequences", Annals of Statistics (2024): their asymptotic confidence
sequence, with the variance estimated from the data. With Δ̂ the difference of the arms' means, s² = σ̂_B²/n_B + σ̂_A²/n_A its
squared standard error, and the mixing scale r = τ²/s² = ρ²·N (N the results so far, ρ fixed in
advance, see :func:`mixing_rho2`), the mixture likelihood ratio against lift δ is

    Λ(δ) = (1 + r)^(-1/2) · exp( r/(1+r) · z²/2 ),    z = (Δ̂ − δ)/s,

a nonnegative (super)martingale under lift δ; by Ville's inequality P(∃N: Λ_N(δ) ≥ 1/α) ≤ α. So

- the **p-value** p_N = min(1, 1/Λ_N(0)) dips below α at *any* look with probability ≤ α when the arms
  do not differ: stopping the first time it reads p < α keeps the error rate α, however often one looks;
- the **confidence sequence** {δ : Λ_N(δ) < 1/α} = Δ̂ ± s·√((1+r)/r · (log(1+r) − 2 log α)) covers the
  lift at every N simultaneously with probability ≥ 1 − α. When the lift drifts (a learning arm), it
  covers the running average of the lift over the results so far (Waudby-Smith et al.).

Validity is asymptotic in N (the variance is estimated, the data need not be Gaussian); the simulations in
``tests/pipeline/test_abstats.py`` check the coverage from :data:`MIN_RESULTS` results per arm on.

The formulas are written here rather than taken from a package: ``confseq`` (Howard et al.'s reference
implementation) ships no wheel for this Python and builds against Boost, and ``savvi`` pulls cvxpy and
matplotlib into the service image for a per-observation regression loop; the two closed forms above are a few
lines of numpy, tested against the published formulas and in simulation.

**Sample-ratio mismatch** (SRM; Fabijan et al. (2019), "Diagnosing Sample Ratio Mismatch in Online
Controlled Experiments", KDD): a χ² goodness-of-fit test of the matches per arm against the configured
weights; flagged below :data:`SRM_P_THRESHOLD`. A mismatch means the arms did not get the traffic the
config asked for, so their comparison is suspect whatever its p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: results an arm needs before its lift is tested (the asymptotic confidence sequence needs a variance estimate)
MIN_RESULTS = 10
#: results (both arms together) at which the confidence sequence is made tightest. Its width at other sizes,
#: relative to the tightest possible there: +5% at N*/3, +26% at N*/10 (three times at N*/100), +7% at 10·N*,
#: +18% at 100·N*; so a small N* suits experiments of any length from a few hundred results on
DEFAULT_HORIZON = 1_000
#: a sample-ratio mismatch is flagged at p below this (Fabijan et al. use 0.0005; a report read repeatedly
#: needs a strict threshold so that a true 50/50 split is rarely flagged)
SRM_P_THRESHOLD = 0.001


def _stats():
    """scipy.stats, imported on first use: it costs more to import than the rest of the service's API
    module, and every `mgmatch serve` start would pay for it before its first report."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class Moments:
    """The sufficient statistics of one arm's results: count, mean and sum of squared deviations (M2)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @staticmethod
    def of(values: np.ndarray | list[float]) -> Moments:
        y = np.asarray(values, dtype=np.float64)
        if y.size == 0:
            return Moments()
        mean = float(y.mean())
        return Moments(int(y.size), mean, float(((y - mean) ** 2).sum()))

    @property
    def var(self) -> float:
        """The sample variance (n − 1 in the denominator); 0 below two values."""
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0


class Accumulator:
    """Moments built one value at a time, by Welford's update (stable for long streams): what a report
    reading records in a stream keeps per arm."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def push(self, y: float) -> None:
        self.n += 1
        d = y - self.mean
        self.mean += d / self.n
        self.m2 += d * (y - self.mean)

    def moments(self) -> Moments:
        return Moments(self.n, self.mean, self.m2)


def mean_ci(m: Moments, level: float = 0.95) -> tuple[float, float] | None:
    """The fixed-sample Student-t interval for an arm's mean engagement; None below two results."""
    if m.n < 2:
        return None
    half = float(_stats().t.ppf(0.5 + level / 2, m.n - 1)) * math.sqrt(m.var / m.n)
    return (m.mean - half, m.mean + half)


def mixing_rho2(alpha: float, horizon: int = DEFAULT_HORIZON) -> float:
    """ρ² of the normal mixture, chosen so that the (1 − α) confidence sequence is tightest after ``horizon``
    results: r* = τ²/s² at the horizon solves r = log(1 + r) − 2 log α (the stationary point of the width
    √((1+r)/r · (log(1+r) − 2 log α)) in r; Howard, Ramdas, McAuliffe & Sekhon (2021), "Time-uniform,
    nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)), and ρ² = r*/horizon."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if horizon < 1:
        raise ValueError(f"horizon must be ≥ 1, got {horizon}")
    c = -2.0 * math.log(alpha)
    r = c
    for _ in range(100):  # a contraction (slope 1/(1+r) < 1): converges in a few steps
        r_next = math.log1p(r) + c
        if abs(r_next - r) < 1e-12:
            break
        r = r_next
    return r / horizon


def log_mixture_lr(z: float | np.ndarray, r: float | np.ndarray) -> float | np.ndarray:
    """log Λ: the log mixture likelihood ratio at standardized distance ``z`` with mixing scale ``r`` = τ²/s²."""
    return -0.5 * np.log1p(r) + 0.5 * (r / (1.0 + r)) * np.square(z)


def cs_half_width(se: float | np.ndarray, r: float | np.ndarray, alpha: float) -> float | np.ndarray:
    """Half-width of the (1 − α) confidence sequence: se · √((1+r)/r · (log(1+r) − 2 log α))."""
    return se * np.sqrt((1.0 + r) / r * (np.log1p(r) - 2.0 * math.log(alpha)))


@dataclass(frozen=True)
class Lift:
    """Treatment minus control: the estimate, its always-valid (1 − α) confidence sequence and p-value,
    and for reference the fixed-sample (1 − α) interval (valid only when read once, at a size fixed in advance)."""

    estimate: float
    relative: float | None
    ci: tuple[float, float]
    p_value: float
    se: float
    fixed_ci: tuple[float, float]

    def to_json(self, alpha: float) -> dict:
        return {"estimate": self.estimate, "relative": self.relative, "ci": list(self.ci), "p_value": self.p_value,
                "significant": self.p_value < alpha, "se": self.se, "fixed_sample_ci": list(self.fixed_ci)}


def lift(control: Moments, treatment: Moments, alpha: float = 0.05, horizon: int = DEFAULT_HORIZON,
         min_results: int = MIN_RESULTS) -> Lift | None:
    """The lift of ``treatment`` over ``control`` (difference of mean engagement) with its always-valid
    confidence sequence and p-value (module doc); None while either arm has fewer than ``min_results``
    results."""
    if control.n < max(min_results, 2) or treatment.n < max(min_results, 2):
        return None
    est = treatment.mean - control.mean
    se = math.sqrt(treatment.var / treatment.n + control.var / control.n)
    relative = est / abs(control.mean) if control.mean != 0 else None
    z_fixed = float(_stats().norm.ppf(1 - alpha / 2))
    if se == 0.0:  # every result equal within each arm: no noise, the difference is exact
        p = 1.0 if est == 0 else 0.0
        return Lift(est, relative, (est, est), p, 0.0, (est, est))
    r = mixing_rho2(alpha, horizon) * (control.n + treatment.n)
    half = float(cs_half_width(se, r, alpha))
    log_lr = float(log_mixture_lr(est / se, r))
    p = 1.0 if log_lr <= 0 else math.exp(-log_lr)
    return Lift(est, relative, (est - half, est + half), min(1.0, p), se, (est - z_fixed * se, est + z_fixed * se))


def sequential_p_values(control: np.ndarray, treatment: np.ndarray, order: np.ndarray, alpha: float = 0.05,
                        horizon: int = DEFAULT_HORIZON, min_results: int = MIN_RESULTS
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every look of an experiment at once: results arrive in ``order`` (True = treatment, False = control),
    ``control`` and ``treatment`` holding the arms' values in arrival order. Returns, per arrival, the lift
    estimate, the always-valid p-value, the confidence sequence's half-width and the fixed-sample z-test's
    p-value (NaN before both arms have ``min_results``). What simulations of continuous monitoring use."""
    order = np.asarray(order, dtype=bool)
    n = order.size
    yc, yt = np.asarray(control, float), np.asarray(treatment, float)
    if yc.size != int((~order).sum()) or yt.size != int(order.sum()):
        raise ValueError("control/treatment sizes do not match order")
    y = np.empty(n)
    y[~order], y[order] = yc, yt
    out = []
    for arm in (~order, order):
        k = np.cumsum(arm)
        s1 = np.cumsum(np.where(arm, y, 0.0))
        s2 = np.cumsum(np.where(arm, y * y, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = s1 / k
            var = (s2 - k * mean * mean) / (k - 1)
        out.append((k, mean, np.maximum(var, 0.0)))
    (kc, mc, vc), (kt, mt, vt) = out
    ok = (kc >= max(min_results, 2)) & (kt >= max(min_results, 2))
    est = np.full(n, np.nan)
    p = np.full(n, np.nan)
    half = np.full(n, np.nan)
    p_fixed = np.full(n, np.nan)
    se = np.sqrt(vt[ok] / kt[ok] + vc[ok] / kc[ok])
    est[ok] = mt[ok] - mc[ok]
    r = mixing_rho2(alpha, horizon) * (kc[ok] + kt[ok])
    z = est[ok] / se
    p[ok] = np.minimum(1.0, np.exp(-np.maximum(log_mixture_lr(z, r), 0.0)))
    half[ok] = cs_half_width(se, r, alpha)
    p_fixed[ok] = 2 * _stats().norm.sf(np.abs(z))
    return est, p, half, p_fixed


@dataclass(frozen=True)
class SampleRatio:
    """The χ² test of the matches per arm against the configured weights."""

    observed: list[int]
    expected_share: list[float]
    chi2: float
    p_value: float
    flagged: bool

    def to_json(self) -> dict:
        total = sum(self.observed)
        return {"observed": self.observed, "expected_share": self.expected_share,
                "observed_share": [o / total for o in self.observed] if total else None,
                "chi2": self.chi2, "p_value": self.p_value, "flagged": self.flagged,
                "threshold": SRM_P_THRESHOLD}


def sample_ratio(observed: list[int], weights: list[float], threshold: float = SRM_P_THRESHOLD) -> SampleRatio | None:
    """χ² goodness of fit of ``observed`` counts to the shares of ``weights``; None with fewer than two arms or
    no observation."""
    if len(observed) != len(weights):
        raise ValueError("one weight per arm")
    total = sum(observed)
    if len(observed) < 2 or total == 0:
        return None
    w = np.asarray(weights, float)
    share = w / w.sum()
    res = _stats().chisquare(np.asarray(observed, float), share * total)
    chi2, p = float(res.statistic), float(res.pvalue)
    return SampleRatio(list(map(int, observed)), share.tolist(), chi2, p, p < threshold)
