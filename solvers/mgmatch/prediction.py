"""The solution predictor MGMatch is handed, and from its probabilities P [N, D] to a start: greedy
rounding that keeps parties whole and, under a ``max_ping`` rule, fills the teams from one host region
the prediction favours.

The rounding is what every MGMatch path starts from (the warm start of SCIP, the start tabu search
repairs), so it is built to be repairable: a party split or a team spread over regions leaves rules
broken that the local searches, which do not change region, walk out of slowly or never.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from mgmatch.core.problem import Problem
from mgmatch.core.rules import IncludeRule, PartyTogetherRule, RoleMinRule, RolesRule


@runtime_checkable
class Predictor(Protocol):
    """Solution prediction: one probability matrix per problem.

    ``version`` names the model (recorded in every answer). ``predict`` returns, per problem, an
    array p [N, D] with values in [0, 1]: the predicted probability that player i is on team j in
    the optimal assignment. Batch several problems in one call when you can.
    """

    version: str

    def predict(self, problems: list[Problem]) -> list[np.ndarray]: ...


def round_prediction(p: np.ndarray, sizes: tuple[int, ...] | list[int],
                     units: list[np.ndarray] | None = None) -> np.ndarray:
    """Greedy rounding: take (player, team) pairs by decreasing p until every team is full.

    With ``units`` (parties: player index arrays), a party is placed whole, by its members' mean
    p, where its team has room for it; players a party-whole rounding could not place (no team
    with room for the party) are placed one by one after. Shapes: p [N, D] → team_of [N] (−1 bench).
    Always fills every team (N ≥ Σ sizes).
    """
    N, D = p.shape
    free = np.asarray(sizes, dtype=np.int64).copy()
    t = np.full(N, -1, dtype=np.int64)
    if units:
        groups = [np.asarray(u, dtype=np.int64) for u in units if len(u) > 1]
        unit_of = np.full(N, -1, dtype=np.int64)
        for k, g in enumerate(groups):
            unit_of[g] = k
        singles = np.flatnonzero(unit_of < 0)  # the units after the parties: one player each
        unit_of[singles] = len(groups) + np.arange(singles.size)
        U = len(groups) + singles.size
        # each unit's mean p [units, D], in one vectorized pass: a per-unit loop costs a visible share
        # of a tight budget on large pools
        sums = np.zeros((U, D))
        np.add.at(sums, unit_of, p)
        score = sums / np.bincount(unit_of, minlength=U)[:, None]
        for flat in np.argsort(-score, axis=None, kind="stable"):
            u, j = divmod(int(flat), D)
            g = groups[u] if u < len(groups) else singles[u - len(groups):u - len(groups) + 1]
            if t[g[0]] < 0 and free[j] >= g.size:
                t[g] = j
                free[j] -= g.size
                if not free.any():
                    return t
    for flat in np.argsort(-p, axis=None, kind="stable"):
        i, j = divmod(int(flat), D)
        if t[i] < 0 and free[j] > 0:
            t[i] = j
            free[j] -= 1
            if not free.any():
                break
    return t


def near_region(problem: Problem, p: np.ndarray) -> np.ndarray | None:
    """Under a ``max_ping`` rule, the players within its limit of the host region whose
    nearby players the prediction favours most (the largest Σ_j p_ij of its best Σ sizes near
    players): bool [N]. None without the rule or when no region has enough near players.

    Under ``party_together`` a player counts as near a region only when his whole party is (a region
    whose near players include parties with far members cannot take those parties, and its rounding
    may never be repaired). Regions whose near players cannot meet the ``include`` and role rules
    (:func:`region_admits`) are passed over while another can: tabu search does not change regions,
    so a rounding in such a region stays infeasible."""
    near = near_players(problem)
    if near is None:
        return None
    slots = sum(problem.instance.sizes)
    mass = p.sum(axis=1)
    regions = [g for g in range(near.shape[1]) if near[:, g].sum() >= slots]
    regions = [g for g in regions if region_admits(problem, near[:, g])] or regions
    best, mask = -np.inf, None
    for g in regions:
        value = favour(mass, near[:, g], slots)
        if value > best:
            best, mask = value, near[:, g]
    return mask


def favour(mass: np.ndarray, near: np.ndarray, slots: int) -> float:
    """How much the prediction favours a region: Σ_j p_ij of its best ``slots`` near players
    (``mass``: Σ_j p_ij per player)."""
    return float(np.sort(mass[near])[::-1][:slots].sum())


def near_players(problem: Problem) -> np.ndarray | None:
    """bool [N, regions]: the player, and under ``party_together`` his whole party, is within the
    ``max_ping`` limit of the region (None without the rule)."""
    chk = problem.checker
    if chk.far is None:
        return None
    near = ~chk.far
    for members in party_units(problem) or ():
        near[members] = near[members].all(axis=0)
    return near


def region_admits(problem: Problem, near: np.ndarray) -> bool:
    """Whether the players ``near`` (bool [N]) can meet the rules that need certain players on the
    teams: every ``include`` player among them, and for each ``roles`` rule every set of its roles
    (Hall's condition) and each ``role_min`` with enough of them for all the teams. A necessary
    condition only (it ignores the other rules and how the players split into teams)."""
    chk = problem.checker
    D = problem.instance.teams
    index = problem.instance.index
    for rule in problem.instance.rules:
        if isinstance(rule, IncludeRule):
            if not all(near[index[x]] for x in rule.players):
                return False
        elif isinstance(rule, RolesRule):
            can, need, _ = chk.hall(rule)
            if (can[near].sum(axis=0) < D * need).any():
                return False
        elif isinstance(rule, RoleMinRule):
            if int(chk.accepts(rule.role)[near].sum()) < D * rule.min:
                return False
    return True


def rounding(problem: Problem, p: np.ndarray) -> np.ndarray:
    """The rounding of P that solves start from: parties whole (:func:`party_units`) and, under a
    ``max_ping`` rule, players near one host region (:func:`near_region`) before any far one, so that
    tabu search, which does not change regions, can repair it within a few iterations."""
    mask = near_region(problem, p)
    q = p if mask is None else np.where(mask[:, None], p, p - 2.0)  # p ∈ [0, 1]: far players last
    return round_prediction(q, problem.instance.sizes, party_units(problem))


def party_units(problem: Problem) -> list[np.ndarray] | None:
    """The parties a ``party_together`` rule keeps whole (player index arrays), else None."""
    if not any(isinstance(r, PartyTogetherRule) for r in problem.instance.rules):
        return None
    return [np.asarray(m, dtype=np.int64) for m in problem.checker.parties.values()]
