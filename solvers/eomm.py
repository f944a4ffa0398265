"""EOMM — engagement-optimized matchmaking (Chen et al., WWW 2017), ``--method eomm``.

Three parts, each replaceable:

- Outcome model: win probability from ratings with openskill's Thurstone–Mosteller model
  (team rating = Σ μ, Σ σ²), then EOMM's rule (Eqs. 11–13): draw fixed at 20 %, win/lose rescaled
  to the remaining 80 %. ``draw="openskill"`` uses openskill's skill-dependent draw probability
  instead (used to check the paper's theory, where the draw rate depends on the skill gap).
- Churn model: logistic regression on the last 10 outcomes (after the hypothetical match, Eqs.
  8–10) and play frequency, with the upcoming outcome one-hot and a few interactions; fitted by
  L-BFGS (scipy) with L2. :data:`DEFAULT_CHURN` was fitted on the synthetic world of
  :mod:`mgmatch.lab.sim_eomm` (seed 0).
- Pairing (1v1 pools): weight c(s_i, s_j) + c(s_j, s_i) by Eq. 7, minimum-weight perfect matching
  with rustworkx's blossom algorithm (Rust). The graph is pruned exactly first: the assignment
  relaxation (scipy) gives dual values y, and an edge whose reduced cost w_ij − y_i − y_j exceeds
  the gap of a known perfect matching cannot be in any better one; the blossom then runs on the
  reduced costs (same optimum, far fewer dual steps). A 300-player pool is paired in tens of ms.

Spec instances (``mgmatch solve --method eomm``): the player's ``skill`` is the rating μ; optional
extra player fields ``sigma`` (rating uncertainty), ``recent`` (last outcomes, most recent first,
``"W"``/``"D"``/``"L"``) and ``games_per_day``; missing history → neutral defaults (σ = 0, no
history, 1 game per day). The instance's objective is the expected churn of the selected players
relative to a coin-flip match; 1v1 instances are solved exactly over all pairs, team instances with
the best-swap local search of :mod:`mgmatch.solvers.local_search` under the hard rules.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import rustworkx as rx
from scipy.optimize import linear_sum_assignment, minimize
from scipy.special import expit, ndtr, ndtri

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Player
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .interface import Budget, register
from .local_search import SwapSearch

HISTORY = 10
OUTCOMES = ("W", "D", "L")
_CODE = {"W": 1.0, "D": 0.0, "L": -1.0}


# --------------------------------------------------------------------------- outcome model


@dataclass(frozen=True)
class OutcomeModel:
    """Win/draw/lose probabilities from ratings (openskill Thurstone–Mosteller, 2 sides)."""

    beta: float = 25.0 / 6.0
    draw: str = "fixed"  # "fixed" (EOMM Eqs. 11–13) or "openskill"
    draw_p: float = 0.2

    def win(self, mu_a, var_a, mu_b, var_b) -> np.ndarray:
        """P(a beats b) ignoring draws, as openskill's ``predict_win`` for two teams."""
        c = np.sqrt(2 * self.beta**2 + var_a + var_b)
        return ndtr((np.asarray(mu_a) - mu_b) / c)

    def draw_prob(self, mu_a, var_a, mu_b, var_b, n_players: int = 2) -> np.ndarray:
        if self.draw == "fixed":
            return np.full(np.broadcast(np.asarray(mu_a), np.asarray(mu_b)).shape, self.draw_p)
        c = np.sqrt(2 * self.beta**2 + var_a + var_b)
        margin = math.sqrt(n_players) * self.beta * ndtri((1 + 1 / n_players) / 2)
        d = np.asarray(mu_a) - mu_b
        return ndtr((margin - d) / c) - ndtr((-d - margin) / c)

    def probs(self, mu_a, var_a, mu_b, var_b, n_players: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(P(win), P(draw), P(lose)) of side a (Eqs. 11–13: win/lose share 1 − P(draw))."""
        pd = self.draw_prob(mu_a, var_a, mu_b, var_b, n_players)
        pw = (1 - pd) * self.win(mu_a, var_a, mu_b, var_b)
        return pw, pd, 1 - pd - pw


def default_beta(skills: np.ndarray) -> float:
    """openskill's β (25/6) on its own scale; β = 200 for Elo-like ratings (|skill| > 100)."""
    return 25.0 / 6.0 if np.nanmax(np.abs(skills)) <= 100 else 200.0


# --------------------------------------------------------------------------- churn model


def history_matrix(recent: Sequence[Sequence[str]] | None, n: int) -> np.ndarray:
    """Outcome strings (most recent first) → codes [n, 10]: 1 win, 0 draw, −1 loss, NaN unknown."""
    H = np.full((n, HISTORY), np.nan)
    if recent is None:
        return H
    for i, r in enumerate(recent):
        for k, o in enumerate(list(r)[:HISTORY]):
            H[i, k] = _CODE[o]
    return H


def churn_features(H: np.ndarray, gpd: np.ndarray, outcome: str) -> np.ndarray:
    """Features of the state after a hypothetical outcome (Eqs. 8–10).

    Shapes: H [N, 10] codes (NaN unknown), gpd [N] → X [N, 11].
    """
    n = H.shape[0]
    prev_known = np.isfinite(H)
    prev_loss = np.where(prev_known, H == -1, False).sum(1) / np.maximum(prev_known.sum(1), 1)
    Hn = np.concatenate([np.full((n, 1), _CODE[outcome]), H[:, :HISTORY - 1]], axis=1)
    known = np.isfinite(Hn)
    nk = np.maximum(known.sum(1), 1)
    wins = np.where(known, Hn == 1, False)
    losses = np.where(known, Hn == -1, False)
    lstreak = np.cumprod(losses, axis=1).sum(1) / HISTORY
    wstreak = np.cumprod(wins, axis=1).sum(1) / HISTORY
    f = np.log1p(np.asarray(gpd, dtype=float))
    o = np.asarray([outcome == k for k in OUTCOMES], dtype=float)
    ones = np.ones(n)
    return np.stack([o[0] * ones, o[1] * ones, o[2] * ones, wins.sum(1) / nk, losses.sum(1) / nk,
                     lstreak, wstreak, f, o[2] * prev_loss, o[0] * prev_loss, o[2] * f], axis=1)


@dataclass
class ChurnModel:
    """Logistic regression P(churn | state after the match)."""

    coef: np.ndarray
    intercept: float = 0.0

    def prob(self, X: np.ndarray) -> np.ndarray:
        return expit(X @ self.coef + self.intercept)

    def predict(self, H: np.ndarray, gpd: np.ndarray) -> np.ndarray:
        """Churn probability per outcome: [N, 3] for (win, draw, lose)."""
        return np.stack([self.prob(churn_features(H, gpd, o)) for o in OUTCOMES], axis=1)

    @staticmethod
    def fit(X: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> ChurnModel:
        """L2-regularized maximum likelihood (L-BFGS)."""
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        n, d = X.shape

        def f(w):
            z = X @ w[:d] + w[d]
            loss = np.logaddexp(0, z).sum() - y @ z
            g = expit(z) - y
            grad = np.concatenate([X.T @ g, [g.sum()]]) / n
            grad[:d] += l2 * w[:d]
            return loss / n + 0.5 * l2 * w[:d] @ w[:d], grad

        res = minimize(f, np.zeros(d + 1), jac=True, method="L-BFGS-B")
        return ChurnModel(res.x[:d], float(res.x[d]))

    def to_json(self) -> dict:
        return {"coef": [float(c) for c in self.coef], "intercept": float(self.intercept)}


@dataclass
class ChurnTable:
    """A state-free churn model c(outcome) — the paper's theory case."""

    c: dict[str, float] = field(default_factory=lambda: {"W": 0.3, "D": 0.3, "L": 0.3})

    def predict(self, H: np.ndarray, gpd: np.ndarray) -> np.ndarray:
        return np.tile([self.c["W"], self.c["D"], self.c["L"]], (H.shape[0], 1))


# Fitted by mgmatch.lab.sim_eomm.fit_churn_model(seed=0) (see tests/pipeline/test_sim_eomm.py).
DEFAULT_CHURN = ChurnModel(
    coef=np.array([-0.3584, 0.0885, 0.2693, -0.0813, 0.0201, 0.536, -0.1591, -0.599, 1.1668, -0.8389, 0.1069]),
    intercept=0.54,
)


# --------------------------------------------------------------------------- pairing


def pair_weights(mu: np.ndarray, var: np.ndarray, churn: np.ndarray, outcome: OutcomeModel) -> np.ndarray:
    """Eq. 7: W[i, j] = Σ_o Pr(o_ij) (c(s_i, o_ij) + c(s_j, o_ji)), symmetric [N, N].

    Args:
        churn: [N, 3] churn probability of each player after a win, draw, loss.
    """
    pw, pd, pl = outcome.probs(mu[:, None], var[:, None], mu[None, :], var[None, :])
    cW, cD, cL = churn[:, 0], churn[:, 1], churn[:, 2]
    W = pw * (cW[:, None] + cL[None, :]) + pd * (cD[:, None] + cD[None, :]) + pl * (cL[:, None] + cW[None, :])
    return (W + W.T) / 2


#: integer weights for the blossom: the span of the float weights is scaled to 2**48 steps, so a
#: matching of N/2 edges is off the float optimum by at most N/2 · span / 2**49 (rustworkx's
#: blossom takes integer weights only and computes in 128-bit integers)
WEIGHT_STEPS = 2**48


def blossom(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-weight maximum-cardinality matching of the graph on nodes 0..n−1 with edges (a, b, w).

    rustworkx's blossom (Edmonds, O(n³), in Rust) maximizes integer weights, so the float
    weights are flipped and scaled to integers (:data:`WEIGHT_STEPS`). Among the matchings of
    most edges it returns one of least total weight; pairs come as ``(low, high)``, sorted.
    """
    G = rx.PyGraph(node_count_hint=n, edge_count_hint=len(a))
    G.add_nodes_from(range(n))
    if len(a):
        w = np.asarray(w, dtype=np.float64)
        hi, span = float(w.max()), float(np.ptp(w))
        iw = np.rint((hi - w) * (WEIGHT_STEPS / span if span > 0 else 0.0)).astype(np.int64) + 1
        G.add_edges_from(list(zip(np.asarray(a).tolist(), np.asarray(b).tolist(), iw.tolist(), strict=True)))
    M = rx.max_weight_matching(G, max_cardinality=True, weight_fn=int)
    return sorted((min(x, y), max(x, y)) for x, y in M)


def matching_duals(W: np.ndarray) -> np.ndarray:
    """Dual values y with y_i + y_j ≤ W_ij for all i ≠ j, optimal for the fractional matching LP.

    From the assignment relaxation (scipy's ``linear_sum_assignment`` on W with a forbidding
    diagonal): the assignment duals u, v (u_i + v_j ≤ C_ij, tight on the assignment) come from
    shortest-path potentials of its residual graph, and y = (u + v) / 2. Σ y is a lower bound on
    every perfect matching.
    """
    n = len(W)
    C = W.copy()
    np.fill_diagonal(C, np.abs(W).max() * 4 * n + 1.0)
    R = C - C.min(1, keepdims=True)  # row and column reduction: same assignment, fewer scipy steps
    _, s = linear_sum_assignment(R - R.min(0, keepdims=True))
    Wt = C[:, s].T - C[np.arange(n), s][:, None]  # Wt[k, i] = C[i, s(k)] − C[k, s(k)]
    d = np.zeros(n)
    for _ in range(n + 1):
        nd = np.minimum(d, (d[:, None] + Wt).min(0))
        if np.array_equal(nd, d):
            break
        d = nd
    v = np.empty(n)
    v[s] = C[np.arange(n), s] - d
    return (d + v) / 2


def min_weight_perfect_matching(W: np.ndarray, stats: dict | None = None) -> list[tuple[int, int]]:
    """Minimum-weight perfect matching of the complete graph with weights W (N even).

    Exact. The assignment relaxation gives duals y (:func:`matching_duals`) and the bound
    Σ y; an edge's reduced cost w_ij − y_i − y_j ≥ 0 is the least that any perfect matching using
    it exceeds the bound by, so edges whose reduced cost exceeds the gap of a known perfect
    matching are dropped. The blossom (:func:`blossom`) runs on the reduced costs of the kept
    edges — the same optimum, since every perfect matching's reduced costs sum to its weight
    minus Σ y, and with most reduced costs near 0 the blossom starts close to its optimal duals
    (≈ 20× faster than on the raw weights at N = 300; ``mgmatch bench eomm``).

    Args:
        W: Symmetric [N, N] pair weights.
        stats: When given, filled with ``duals_ms`` (assignment relaxation and its duals),
            ``blossom_ms`` (pruning and every blossom call), ``blossom_calls`` and ``edges`` (kept by the
            pruning in the last call).
    """
    W = np.asarray(W, dtype=float)
    n = len(W)
    if n % 2:
        raise ValueError(f"a perfect matching needs an even number of players, got {n}")
    if n == 0:
        return []
    iu, ju = np.triu_indices(n, 1)
    w = W[iu, ju]
    if n <= 16:
        return blossom(n, iu, ju, w)
    t0 = time.perf_counter()
    y = matching_duals(W)
    t1 = time.perf_counter()
    lb = y.sum()
    rc = w - y[iu] - y[ju]
    tol = 1e-9 * max(1.0, abs(lb))
    k = min(len(rc) - 1, 6 * n)
    tau = float(np.partition(rc, k)[k])
    calls = 0
    while True:
        sel = rc <= tau + tol
        pairs = blossom(n, iu[sel], ju[sel], rc[sel])
        calls += 1
        if len(pairs) == n // 2:
            cost = float(sum(W[a, b] for a, b in pairs))
            if cost - lb <= tau + tol:
                break
            tau = cost - lb
        else:
            tau = 2 * tau + tol
    if stats is not None:
        stats.update(duals_ms=(t1 - t0) * 1e3, blossom_ms=(time.perf_counter() - t1) * 1e3, blossom_calls=calls,
                     edges=int(sel.sum()))
    return pairs


def eomm_pairs(skill: Sequence[float], sigma: Sequence[float] | None = None,
               recent: Sequence[Sequence[str]] | None = None, games_per_day: Sequence[float] | None = None,
               churn: ChurnModel | ChurnTable | None = None, outcome: OutcomeModel | None = None,
               ) -> list[tuple[int, int]]:
    """EOMM for a 1v1 pool: indices of the pairs that minimize the total expected churn."""
    mu = np.asarray(skill, dtype=float)
    n = len(mu)
    var = np.zeros(n) if sigma is None else np.asarray(sigma, dtype=float) ** 2
    H = history_matrix(recent, n)
    gpd = np.ones(n) if games_per_day is None else np.asarray(games_per_day, dtype=float)
    outcome = outcome or OutcomeModel(beta=default_beta(mu))
    c = (churn or DEFAULT_CHURN).predict(H, gpd)
    return min_weight_perfect_matching(pair_weights(mu, var, c, outcome))


# --------------------------------------------------------------------------- instances


def player_states(players: Sequence[Player]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(μ, σ², history codes [N, 10], games per day) from the players' fields."""
    n = len(players)
    mu, var, gpd = np.zeros(n), np.zeros(n), np.ones(n)
    recent: list[list[str]] = []
    for i, p in enumerate(players):
        if p.skill is None:
            raise InvalidInput(f"players[{i}].skill", f"required by method eomm but missing for player {p.id!r}")
        mu[i] = p.skill
        ex = dict(getattr(p, "model_extra", None) or {})
        try:
            if ex.get("sigma") is not None:
                var[i] = float(ex["sigma"]) ** 2
            if ex.get("games_per_day") is not None:
                gpd[i] = float(ex["games_per_day"])
                if gpd[i] < 0:
                    raise ValueError
        except (TypeError, ValueError):
            raise InvalidInput(f"players[{i}]", "sigma and games_per_day must be non-negative numbers") from None
        r = ex.get("recent") or []
        if not isinstance(r, list) or any(o not in _CODE for o in r):
            raise InvalidInput(f"players[{i}].recent", 'expected a list of "W", "D" or "L"')
        recent.append(r)
    return mu, var, history_matrix(recent, n), gpd


def churn_objective(problem: Problem, churn=None, outcome: OutcomeModel | None = None):
    """Batch objective for an instance: −(expected churn of the selected players − coin-flip churn)."""
    inst = problem.instance
    mu, var, H, gpd = player_states(inst.players)
    outcome = outcome or OutcomeModel(beta=default_beta(mu))
    c = (churn or DEFAULT_CHURN).predict(H, gpd)  # [N, 3]
    base = 0.4 * c[:, 0] + 0.2 * c[:, 1] + 0.4 * c[:, 2]
    D = inst.teams
    n_players = inst.n_selected

    def f(T: np.ndarray) -> np.ndarray:
        T = np.asarray(T).reshape(-1, inst.n)
        M = np.stack([(T == j) for j in range(D)], axis=1).astype(float)  # [B, D, N]
        tm, tv = M @ mu, M @ var  # [B, D]
        pw = np.zeros_like(tm)
        pd = np.zeros_like(tm)
        for j in range(D):  # team j's win share over its pairwise contests (openskill's n-team rule)
            for k in range(D):
                if k != j:
                    w_, d_, _ = outcome.probs(tm[:, j], tv[:, j], tm[:, k], tv[:, k], n_players)
                    pw[:, j] += w_ / (1 - d_) / (D - 1)
                    pd[:, j] += d_ / (D - 1)
        pw = pw * (1 - pd) * (2 / D)  # D = 2: exactly Eqs. 11–13
        pl = 1 - pd - pw
        churn_team = (pw[:, :, None] * c[None, None, :, 0] + pd[:, :, None] * c[None, None, :, 1]
                      + pl[:, :, None] * c[None, None, :, 2])  # [B, D, N]
        exp = (M * (churn_team - base[None, None, :])).sum((1, 2))
        return -exp

    return f


@register("eomm", "EOMM: minimize expected churn (openskill outcomes, logistic churn; blossom for 1v1 pools)", seeded=True)
class EOMMSolver:
    name = "eomm"

    def __init__(self, seed: int = 0, restarts: int | None = None, churn=None, outcome: OutcomeModel | None = None):
        self.seed, self.restarts, self.churn, self.outcome = seed, restarts, churn, outcome

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        inst = problem.instance
        obj = churn_objective(problem, self.churn, self.outcome)
        best = None
        if inst.sizes == (1, 1):
            # one 1v1 match: the churn change of every ordered pair in closed form, then the
            # checker on candidates in order of value until the first feasible one
            mu, var, H, gpd = player_states(inst.players)
            om = self.outcome or OutcomeModel(beta=default_beta(mu))
            c = (self.churn or DEFAULT_CHURN).predict(H, gpd)
            base = 0.4 * c[:, 0] + 0.2 * c[:, 1] + 0.4 * c[:, 2]
            pw, pd, pl = om.probs(mu[:, None], var[:, None], mu[None, :], var[None, :])
            E = pw * c[:, None, 0] + pd * c[:, None, 1] + pl * c[:, None, 2] - base[:, None]  # i vs j
            val = -(E + E.T)
            np.fill_diagonal(val, -np.inf)
            order = np.argsort(-val, axis=None, kind="stable")[: inst.n * (inst.n - 1)]
            for start in range(0, len(order), 4096):
                a, b = np.unravel_index(order[start:start + 4096], val.shape)
                T = np.full((len(a), inst.n), -1, dtype=np.int64)
                r = np.arange(len(a))
                T[r, a], T[r, b] = 0, 1
                ok = np.flatnonzero(problem.checker.feasible(T))
                if len(ok):
                    best = T[ok[0]]
                    break
                if budget.expired():
                    break
        else:
            best, _ = SwapSearch(problem, obj, seed=self.seed, restarts=self.restarts).run(budget)
        ms = budget.elapsed_ms()
        if best is None:
            return problem.solution(None, "no_solution", self.name, ms)
        return problem.solution(best, "feasible", self.name, ms)
