"""Wu, *Dynamic matching with teams*: when to match (greedy vs patient).

Model: one player arrives per period, high skill (H) with probability q, low (L) otherwise; a
game is two teams of n; a game with I = |#H team 1 − #H team 2| costs α·I per player (α·I·2n in
all; an optimal split has I ∈ {0, 1}, I = 1 exactly when the 2n players hold an odd number of
H); waiting costs 1 per player per period, charged on the pool *before* each arrival (the
paper's state X_t).

- greedy: match as soon as 2n players wait;
- patient: with 2n waiting, match at once if a zero-imbalance split exists (#H even), else wait
  one period and match 2n of the 2n + 1 with zero imbalance.

Cost per period: patient n; greedy n − ½ + α(1 − (2q − 1)^{2n})/2. Greedy is optimal iff
α ≤ 1/(1 − (2q − 1)^{2n}) (Theorem 3.3).

The dispatch policy ``wu`` built on this rule is :class:`mgmatch.solvers.dispatch.wu.WuPolicy`;
the exact simulation lives in :mod:`mgmatch.lab.sim_wu`.
"""

from __future__ import annotations

import math

from mgmatch.core.errors import InvalidInput


def check_params(n: int, q: float, alpha: float) -> None:
    """Validate Wu's model parameters; InvalidInput names the bad one."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInput("n", f"team size must be an integer ≥ 1, got {n!r}")
    if not (0.0 <= q <= 1.0):
        raise InvalidInput("q", f"must be in [0, 1], got {q!r}")
    if not (alpha >= 0.0) or math.isinf(alpha):
        raise InvalidInput("alpha", f"must be a finite number ≥ 0, got {alpha!r}")


def odd_probability(n: int, q: float) -> float:
    """P(#H among 2n arrivals is odd) = (1 − (2q − 1)^{2n}) / 2."""
    return (1.0 - (2.0 * q - 1.0) ** (2 * n)) / 2.0


def greedy_threshold(n: int, q: float) -> float:
    """α* = 1 / (1 − (2q − 1)^{2n}); inf when q ∈ {0, 1} (greedy never pays imbalance)."""
    check_params(n, q, 0.0)
    d = 1.0 - (2.0 * q - 1.0) ** (2 * n)
    return math.inf if d <= 0.0 else 1.0 / d


def greedy_is_optimal(n: int, q: float, alpha: float) -> bool:
    """Theorem 3.3: greedy is optimal iff α ≤ 1/(1 − (2q − 1)^{2n}) (ties go to greedy)."""
    check_params(n, q, alpha)
    return alpha <= greedy_threshold(n, q)


def closed_form(policy: str, n: int, q: float, alpha: float) -> float:
    """Expected cost per period of ``greedy`` or ``patient``."""
    check_params(n, q, alpha)
    if policy == "patient":
        return float(n)
    if policy == "greedy":
        return n - 0.5 + alpha * odd_probability(n, q)
    raise InvalidInput("policy", f"expected greedy or patient, got {policy!r}")
