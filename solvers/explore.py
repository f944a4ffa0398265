"""``explore``: the matches a learning pool forms to learn (spec §7, :mod:`mgmatch.app.learning`).

A few rule-aware random candidate matches (the ``random`` baseline's sampler: parties whole, role
slots, one host region, long waiters first) are drawn from the seed, the checker keeps the feasible
ones and the live model picks the best of them. With :data:`SAMPLES` draws the answer is far from
the model's optimum, so the pool sees results of matches its optimizer would never form, yet it
avoids the matches the model rates worst. ``no_solution`` when no draw was feasible within the budget.
"""

from __future__ import annotations

from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .baselines import RandomSolver
from .interface import Budget, register

#: random candidate matches drawn per explore match
SAMPLES = 32


@register("explore", "Exploration of a learning pool: the best by the model of a few rule-aware random matches", seeded=True)
class ExploreSolver:
    name = "explore"

    def __init__(self, seed: int = 0, samples: int = SAMPLES, **_ignored) -> None:
        self.seed, self.samples = seed, samples

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        """Rounds of ``samples`` draws (each round its own seed) until one round holds a feasible match
        or the budget runs out."""
        k = 0
        while True:
            sol = RandomSolver(seed=self.seed + 7919 * k, batch=self.samples, max_samples=self.samples).solve(
                problem, budget)
            k += 1
            if sol.has_assignment or budget.expired() or budget.unlimited and k >= 1000:
                return sol.model_copy(update={"method": self.name, "time_ms": round(budget.elapsed_ms(), 3)})
