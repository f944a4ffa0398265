"""``skill``: the skill-based matchmaker studios run today, the baseline every lift is measured against.

Spec §7: take the longest-waiting ticket as the anchor, add the players nearest to it in skill that
the rules allow, split the chosen players into teams whose skill sums are as close as the rules
allow. It reads no engagement model (the Solution's ``objective`` is still the model's value of the
answer, computed by :meth:`Problem.solution` as for every method).

The common case needs no MIP: when some split of the anchor and its nearest players is feasible,
every split of them is checked at once (the checker, vectorized; up to :data:`FAST_MAX_SPLITS`
splits) and the one with the closest skill sums is the answer. Otherwise both steps are small MIPs
over the compiled rules (:class:`~mgmatch.solvers.mip.MipModel`, the same
rows every SCIP solve reads), so "that the rules allow" means exactly the project's rules:

1. **Select.** Maximize Σ_ij (B·[i = anchor] − |skill_i − skill_anchor| / scale)·x_ij: the anchor
   whenever some feasible match holds it (B outweighs every distance), then the nearest players in
   skill. The anchor is the player with the largest ``waited_s`` (the first listed on ties, and
   when no player says how long it waited).
2. **Split.** With the selection fixed (every other player excluded, every selected player on a
   team), minimize max_j S_j − min_j S_j, S_j the skill sum of team j, warm-started from step 1's
   assignment (which is feasible, so step 2 always has an answer to return).

**Large lobbies** (the pools MGMatch's policy sends to the lobby search, :func:`~mgmatch.solvers.policy.lobby_path`:
ffa-32, br-100): compiling the rules for these MIPs alone takes longer than the budget, so the same
two steps are the lobby search's construction without the model (:func:`~mgmatch.solvers.lobby.skill_lobby`):
the anchor kept, the candidates nearest in skill first, squads balanced by solo swaps as far as they go.

Players without a ``skill`` count as skill 0 (all equally near). Every answer is judged by the one
checker (:class:`~mgmatch.core.checker.Checker`, through :meth:`MipModel.solve`). Status:
``feasible`` with an answer (its engagement is not optimized, so never ``optimal``), ``infeasible``
when SCIP proves step 1 has no feasible assignment (the rules allow no match), else ``no_solution``.
"""

from __future__ import annotations

import math
import time
from itertools import combinations

import numpy as np
from pyscipopt import quicksum

from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .interface import Budget, register
from .lobby import skill_lobby
from .mip import BuildInterrupted, MipModel, released
from .policy import lobby_path

#: the share of the time left that the selection MIP may use; the split gets the rest
SELECT_SHARE = 0.6
#: time of a limited budget kept back for reading and checking the answer and for the node SCIP is in
#: when its clock runs out: this many seconds, or this share of what is left when that is more
#: (the ``exact`` method's margins)
MARGIN_S = 0.012
MARGIN_SHARE = 0.10
#: the split stops once its skill-sum spread is proven within this many skill points of the best
SPLIT_ABS_GAP = 1.0
#: the direct path enumerates the splits of the nearest players when they have at most this many
FAST_MAX_SPLITS = 20_000


def splits(sizes: tuple[int, ...], m: int, limit: int = FAST_MAX_SPLITS) -> np.ndarray | None:
    """Every way to split players 0..m−1 into teams of ``sizes`` (team index per player, [B, m]); None
    when there are more than ``limit``."""
    from math import comb

    count, left = 1, m
    for k in sizes:
        count *= comb(left, k)
        left -= k
    if count > limit:
        return None
    rows: list[list[int]] = []

    def rec(prefix: list[int], j: int) -> None:
        if j == len(sizes):
            rows.append(list(prefix))
            return
        free = [i for i in range(m) if prefix[i] < 0]
        for team in combinations(free, sizes[j]):
            for i in team:
                prefix[i] = j
            rec(prefix, j + 1)
            for i in team:
                prefix[i] = -1

    rec([-1] * m, 0)
    return np.asarray(rows, dtype=np.int64).reshape(-1, m)


def anchor_of(waited: np.ndarray) -> int:
    """Index of the longest-waiting player (the first on ties; 0 when nobody waited)."""
    return int(np.argmax(np.nan_to_num(waited, nan=0.0))) if len(waited) else 0


def selection_weights(skill: np.ndarray, anchor: int) -> np.ndarray:
    """Per-player weight of step 1: B for the anchor, minus the distance to its skill (scaled to ≤ 1) for all."""
    s = np.nan_to_num(skill, nan=0.0)
    dist = np.abs(s - s[anchor])
    scale = float(dist.max()) or 1.0
    w = -dist / scale
    w[anchor] += 2.0 * len(s) + 1.0  # more than the whole selection's distances can add up to
    return w


@register("skill", "Skill-based baseline: anchor on the longest waiter, nearest players in skill the rules allow, teams with the closest skill sums")
class SkillSolver:
    """The skill-based matchmaker (see the module doc)."""

    name = "skill"

    def __init__(self, **_ignored) -> None:
        self.last_stats: dict = {}

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        with released():
            return self._solve(problem, budget)

    def _limit(self, budget: Budget, share: float) -> float | None:
        left = budget.remaining()
        if left is None:
            return None
        return max(1e-3, (left - min(MARGIN_S, MARGIN_SHARE * left)) * share)

    def _solve(self, problem: Problem, budget: Budget) -> Solution:
        inst = problem.instance
        D = inst.teams
        skill = np.nan_to_num(inst.skills(), nan=0.0)
        waited = np.asarray([p.waited_s if p.waited_s is not None else 0.0 for p in inst.players], dtype=np.float64)
        anchor = anchor_of(waited)
        direct = self._direct(problem, skill, anchor)
        if direct is not None:
            self.last_stats = {"anchor": inst.players[anchor].id, "path": "direct"}
            return problem.solution(direct, "feasible", self.name, budget.elapsed_ms())
        if lobby_path(problem):
            # a large lobby (ffa-32, br-100): compiling the rules for the MIPs alone takes ~0.5 s
            self.last_stats = {"anchor": inst.players[anchor].id, "path": "lobby"}
            deadline = budget.deadline()
            team_of = skill_lobby(problem, anchor, math.inf if deadline is None else deadline - MARGIN_S / 4)
            if team_of is None:
                return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())
            return problem.solution(team_of, "feasible", self.name, budget.elapsed_ms())
        w = selection_weights(skill, anchor)
        try:
            mip = MipModel.build(problem.compiled, checker=problem.checker, settings="fast",
                                 deadline=budget.deadline())
        except BuildInterrupted:
            return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())
        mip.set_linear_objective(np.repeat(w[:, None], D, axis=1))
        mip.set_time_limit(self._limit(budget, SELECT_SHARE))
        first = mip.solve()
        mip.dispose()
        self.last_stats = {"anchor": inst.players[anchor].id, "select_status": first.status}
        if first.team_of is None:
            status = "infeasible" if first.status == "infeasible" else "no_solution"
            return problem.solution(None, status, self.name, budget.elapsed_ms())
        team_of = self._split(problem, budget, skill, first.team_of)
        return problem.solution(team_of, "feasible", self.name, budget.elapsed_ms())

    def _direct(self, problem: Problem, skill: np.ndarray, anchor: int) -> np.ndarray | None:
        """The common case without a MIP: the anchor and its nearest in skill, every split of them
        checked at once (the checker, vectorized), the feasible one with the closest skill sums; None
        when no split of them is feasible (or they have too many splits to enumerate)."""
        inst = problem.instance
        M = sum(inst.sizes)
        s = np.nan_to_num(skill, nan=0.0)
        dist = np.abs(s - s[anchor])
        dist[anchor] = -1.0
        chosen = np.argsort(dist, kind="stable")[:M]
        T = splits(tuple(inst.sizes), M)
        if T is None:
            return None
        sums = np.stack([(T == j) @ s[chosen] for j in range(inst.teams)], axis=1)
        order = np.argsort(sums.max(1) - sums.min(1), kind="stable")
        full = np.full((len(T), inst.n), -1, dtype=np.int64)
        full[:, chosen] = T[order]
        ok = problem.checker.feasible(full)
        return full[int(np.argmax(ok))].copy() if ok.any() else None

    def _split(self, problem: Problem, budget: Budget, skill: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """Re-split the chosen players into teams with the closest skill sums the rules allow (step 2);
        ``chosen`` itself when the split finds nothing better in time."""
        D = problem.instance.teams
        if budget.expired():
            return chosen
        try:
            mip = MipModel.build(problem.compiled, checker=problem.checker, settings="fast",
                                 deadline=budget.deadline())
        except BuildInterrupted:
            return chosen
        m, x = mip.model, mip.x
        sel = np.flatnonzero(chosen >= 0)
        mip.exclude(np.flatnonzero(chosen < 0))
        for i in sel.tolist():
            m.addCons(quicksum(x[i, j] for j in range(D)) == 1)
        lo, hi = float(skill[sel].min()) * len(sel), float(skill[sel].max()) * len(sel)
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        top = m.addVar("skill_sum_max", vtype="C", lb=lo, ub=hi)
        bottom = m.addVar("skill_sum_min", vtype="C", lb=lo, ub=hi)
        for j in range(D):
            team_sum = quicksum(float(skill[i]) * x[i, j] for i in sel.tolist())
            m.addCons(top >= team_sum)
            m.addCons(bottom <= team_sum)
        m.setObjective(top - bottom, "minimize")
        m.setParam("limits/absgap", SPLIT_ABS_GAP)
        mip.warm_start(chosen)
        mip.set_time_limit(self._limit(budget, 1.0))
        t0 = time.perf_counter()
        res = mip.solve()
        mip.dispose()
        self.last_stats.update(split_status=res.status, split_s=round(time.perf_counter() - t0, 4))
        if res.team_of is None:
            return chosen
        before = _spread(skill, chosen, D)
        return res.team_of if _spread(skill, res.team_of, D) <= before + 1e-9 else chosen


def _spread(skill: np.ndarray, team_of: np.ndarray, D: int) -> float:
    sums = np.asarray([skill[team_of == j].sum() for j in range(D)])
    return float(sums.max() - sums.min())
