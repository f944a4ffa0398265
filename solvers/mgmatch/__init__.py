"""MGMatch's fast solver (paper §4.3): predict, solve the surrogate MIP, polish, then search the true MIP.

One concept per module:

- :mod:`~mgmatch.solvers.mgmatch.solver`: :class:`MGMatchSolver`, the path a solve takes (enumerate,
  warm-started SCIP or the pipeline), the prediction and the warm-up, and the ``mgmatch`` and ``bgcn``
  methods;
- :mod:`~mgmatch.solvers.mgmatch.pipeline`: the pipeline path, one method per step (plan the search,
  repair first, surrogate MIP, polish, tabu search, search of the engagement MIP);
- :mod:`~mgmatch.solvers.mgmatch.local`: the local searches on the true objective every path uses;
- :mod:`~mgmatch.solvers.mgmatch.history`: the cost model, :class:`SolveHistory`, what earlier solves
  measured (stage times, paces, search and repair records), handed to the solver;
- :mod:`~mgmatch.solvers.mgmatch.tuning`: how the budget is divided between the stages, with reasons;
- :mod:`~mgmatch.solvers.mgmatch.prediction`: the :class:`Predictor` protocol, and from its P to a start
  (greedy rounding, parties whole, one host region).

Which path a solve takes (enumerate, warm-started SCIP, or the pipeline) is chosen by
:mod:`mgmatch.solvers.policy`.
"""

from __future__ import annotations

from .history import SolveHistory, default_history, tabu_pace_s, using
from .prediction import (
    Predictor,
    near_players,
    near_region,
    party_units,
    region_admits,
    round_prediction,
    rounding,
)
from .solver import MGMatchSolver, bgcn_solver, mgmatch_solver
from .tuning import DEFAULT_TIME_LIMIT_MS, EMPTY_HANDOVER

__all__ = [
    "DEFAULT_TIME_LIMIT_MS", "EMPTY_HANDOVER", "MGMatchSolver", "Predictor", "SolveHistory", "bgcn_solver",
    "default_history", "mgmatch_solver", "near_players", "near_region", "party_units", "region_admits",
    "round_prediction", "rounding", "tabu_pace_s", "using",
]
