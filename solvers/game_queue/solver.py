"""``--method game-queue``: the least-imbalanced game by skill that satisfies the instance's rules."""

from __future__ import annotations

import itertools
import math

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from ..interface import Budget, register
from .imbalance import MAX_K, Params, best_split_all, split_masks
from .structure import GameQueue

#: the game-queue method enumerates every game when there are at most this many
EXHAUSTIVE_GAMES = 200_000


@register("game-queue", "Alman–McKay game queue: the least-imbalanced k-vs-k game by skill (α·d_p + v_q), "
                        "ignoring engagement; the first that passes the checker")
class GameQueueSolver:
    """``--method game-queue``: the best game by skill imbalance that satisfies the rules.

    Needs two teams of equal size k and a skill for every player (skills are shifted so the
    lowest is 0: the paper's norms assume non-negative skills). Games are taken from a
    :class:`GameQueue` in order of imbalance; a game that violates a rule (in either team
    orientation) loses its least-skilled player and the queue is asked again, until a feasible
    game is found, the budget runs out or fewer than 2k players remain (``no_solution``).
    """

    name = "game-queue"

    def __init__(self, alpha: float = 1.0, p: float = 1.0, q: float = 2.0, **_: object):
        self.params = Params(1, float(alpha), float(p), float(q))

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        inst = problem.instance
        if inst.teams != 2 or inst.sizes[0] != inst.sizes[1]:
            raise InvalidInput("teams", f"game-queue needs two teams of equal size, got sizes {list(inst.sizes)}")
        for i, pl in enumerate(inst.players):
            if pl.skill is None:
                raise InvalidInput(f"players[{i}].skill", f"game-queue needs every player's skill ({pl.id!r} has none)")
        k = inst.sizes[0]
        if k > MAX_K:
            raise InvalidInput("team_size", f"game-queue handles teams of at most {MAX_K} players, got {k}")
        s = inst.skills() - inst.skills().min()
        if math.comb(inst.n, 2 * k) * len(split_masks(k)) <= EXHAUSTIVE_GAMES:
            return self._exhaustive(problem, budget, s, k)
        gq = GameQueue.bulk(inst.ids, s, None, k=k, alpha=self.params.alpha, p=self.params.p,
                            q=self.params.q)
        checker = problem.checker
        while not budget.expired():
            g = gq.best_game()
            if g is None:
                break
            team_of = np.full((2, inst.n), -1, dtype=np.int64)
            for side, (xs, ys) in enumerate(((g.team_x, g.team_y), (g.team_y, g.team_x))):
                team_of[side, [inst.index[x] for x in xs]] = 0
                team_of[side, [inst.index[y] for y in ys]] = 1
            ok = np.asarray(checker.feasible(team_of))
            if ok.any():
                return problem.solution(team_of[int(np.argmax(ok))], "feasible", self.name, budget.elapsed_ms(),
                                        imbalance=g.imbalance)
            gq.delete(min(g.players, key=lambda x: (gq.skill(x), x)))
        return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())

    def _exhaustive(self, problem: Problem, budget: Budget, s: np.ndarray, k: int) -> Solution:
        """Small instances: every game in order of imbalance, the first feasible one wins."""
        n, P = problem.instance.n, self.params
        subsets = np.asarray(list(itertools.combinations(range(n), 2 * k)), dtype=np.int64)
        masks = split_masks(k)
        z = s[subsets]                                                   # [S, 2k] (sorted by index)
        d = np.stack([best_split_all(z, P.p, m) for m in masks], axis=1)  # [S, M]
        dev = np.abs(z - z.mean(axis=1, keepdims=True))
        v = dev.max(axis=1) if math.isinf(P.q) else np.mean(dev ** P.q, axis=1) ** (1.0 / P.q)
        f = (P.alpha * d + v[:, None]).reshape(-1)
        order = np.argsort(f, kind="stable")
        checker = problem.checker
        for start in range(0, len(order), 512):
            if budget.expired():
                break
            idx = order[start: start + 512]
            si, mi = np.divmod(idx, len(masks))
            team_of = np.full((2 * len(idx), n), -1, dtype=np.int64)
            rows = np.arange(len(idx))
            for slot in range(2 * k):
                side = np.where(masks[mi, slot], 0, 1)
                team_of[2 * rows, subsets[si, slot]] = side
                team_of[2 * rows + 1, subsets[si, slot]] = 1 - side
            ok = np.asarray(checker.feasible(team_of))
            if ok.any():
                j = int(np.argmax(ok))
                return problem.solution(team_of[j], "feasible", self.name, budget.elapsed_ms(),
                                        imbalance=float(f[idx[j // 2]]))
        return problem.solution(None, "no_solution", self.name, budget.elapsed_ms())
