"""Exact simulation of Wu's when-to-match model (greedy vs patient), against the closed forms.

Each period t: the waiting cost is charged on the pool as it stands *before* the arrival (one
per waiting player — the paper's state X_t and its Π_k accounting), then one player arrives
(H with probability q), then the policy may form a game:

- greedy: 2n waiting → match them; an odd number of H means imbalance I = 1, cost α·2n;
- patient: 2n waiting with an even number of H → match them (zero imbalance); with an odd
  number wait; 2n + 1 waiting → match 2n with an even number of H (zero imbalance), leaving
  one player of the type whose count was odd.

Only counts matter (costs are linear), so the state is (#H, #L) in the pool.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.solvers.wu import check_params, closed_form, greedy_is_optimal, greedy_threshold

POLICIES = ("greedy", "patient")
#: most periods one run simulates: 100 × the README's runs (10⁶), about a minute; memory stays flat
#: (arrivals are drawn in chunks of :data:`_CHUNK`)
MAX_PERIODS = 100_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class WuResult:
    policy: str
    n: int
    q: float
    alpha: float
    periods: int
    seed: int
    games: int
    imbalanced_games: int
    waiting_cost: float
    imbalance_cost: float
    cost_per_period: float
    waiting_cost_per_period: float
    imbalance_cost_per_period: float
    closed_form: float
    relative_error: float
    greedy_threshold: float
    greedy_is_optimal: bool
    mean_wait_per_player: float

    def to_json(self) -> dict:
        out = asdict(self)
        if math.isinf(out["greedy_threshold"]):
            out["greedy_threshold"] = None  # JSON has no inf: α* unbounded (q ∈ {0, 1})
        return out


def simulate(n: int, q: float, alpha: float, periods: int, policy: str, seed: int = 0) -> WuResult:
    """Run ``periods`` periods of ``policy`` and return costs next to the closed form."""
    check_params(n, q, alpha)
    if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
        raise InvalidInput("periods", f"must be an integer ≥ 1, got {periods!r}")
    if periods > MAX_PERIODS:
        raise InvalidInput("periods", f"must be ≤ {MAX_PERIODS:,}, got {periods}")
    if policy not in POLICIES:
        raise InvalidInput("policy", f"expected one of {', '.join(POLICIES)}, got {policy!r}")
    rng = np.random.default_rng(seed)

    def arrivals():  # the same draws as rng.random(periods), chunk by chunk
        left = periods
        while left:
            k = min(left, _CHUNK)
            yield from (rng.random(k) < q).tolist()
            left -= k

    two_n = 2 * n
    h = low = 0
    waiting = 0
    games = imbalanced = 0
    matched_players = 0
    greedy = policy == "greedy"
    for is_h in arrivals():
        waiting += h + low  # one per waiting player, before the arrival
        if is_h:
            h += 1
        else:
            low += 1
        size = h + low
        if greedy:
            if size == two_n:
                games += 1
                imbalanced += h & 1
                matched_players += two_n
                h = low = 0
        elif size == two_n:
            if not h & 1:
                games += 1
                matched_players += two_n
                h = low = 0
        elif size == two_n + 1:
            games += 1
            matched_players += two_n
            # keep one player of the type whose count is odd; the other 2n have an even #H
            if h & 1:
                h, low = 1, 0
            else:
                h, low = 0, 1
    imb_cost = alpha * two_n * imbalanced
    total = waiting + imb_cost
    cf = closed_form(policy, n, q, alpha)
    cpp = total / periods
    return WuResult(
        policy=policy, n=n, q=q, alpha=alpha, periods=periods, seed=seed, games=games,
        imbalanced_games=imbalanced, waiting_cost=float(waiting), imbalance_cost=float(imb_cost),
        cost_per_period=cpp, waiting_cost_per_period=waiting / periods,
        imbalance_cost_per_period=imb_cost / periods, closed_form=cf,
        relative_error=abs(cpp - cf) / cf if cf > 0 else abs(cpp),
        greedy_threshold=greedy_threshold(n, q), greedy_is_optimal=greedy_is_optimal(n, q, alpha),
        mean_wait_per_player=waiting / matched_players if matched_players else 0.0,
    )
