"""MGMatch's fast solver (paper §4.3): predict, solve the surrogate MIP, polish on the true objective.

Pipeline inside one wall-clock budget (default 100 ms, INCLUDING encoding and inference):

1. **Predict.** A :class:`Predictor` maps the problem to P [N, D], the probability that player i
   is on team j in the optimum (the multimodal GNN for ``mgmatch``, a bipartite GCN for
   ``bgcn``). Solvers never import torch or ``mgmatch.models``: the predictor is handed in.
2. **Round.** Greedy rounding of P (highest p first, fill every team) gives a candidate; when the
   checker accepts it, it is the fallback answer and SCIP's warm start.
3. **Surrogate MIP** (Eq. 20–21): max Σ p_ij x_ij over the same compiled rules, built by the
   shared :class:`~mgmatch.solvers.mip.MipModel` with its ``fast`` preset, time-limited to the
   budget left minus a share kept for polishing. Same feasible region as the real problem, so a
   proof of infeasibility here is a proof for the instance.
4. **Polish** (:mod:`mgmatch.solvers.polish`): best-improvement swaps on the true engagement
   objective, feasibility kept by the checker, until a local optimum. Every feasible start is
   polished (rounding, SCIP's solution pool), best first; while budget remains, the surrogate is
   solved again with no-good cuts on the assignments seen (its next most likely answers), and
   those are polished too. The best polished assignment wins.

The answer is always checker-feasible; when nothing feasible was found in time the status is
``no_solution`` (never a rule-breaking assignment). ``status`` is ``feasible`` (the surrogate's
optimum proves nothing about engagement) or ``infeasible`` when SCIP proved the rules
unsatisfiable.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .base import Budget, register
from .mip import MipModel
from .polish import polish

#: default wall-clock budget when the caller gives none (the paper's 3v3 online limit)
DEFAULT_TIME_LIMIT_MS = 100.0
#: share of the budget left after inference kept back for polishing
POLISH_SHARE = 0.2
#: time kept for building the Solution after polishing, seconds
FINISH_RESERVE_S = 0.002
#: a surrogate re-solve is only started with at least this much time for SCIP
MIN_RESOLVE_S = 0.005
#: a surrogate re-solve (free, cut, re-transform, read the pool) takes about this much beyond
#: SCIP's own time limit; raised to the longest seen during one solve
RESOLVE_OVERHEAD_S = 0.012
#: SCIP checks its time limit between nodes and overshoots it by a few ms: stop it this early
SCIP_MARGIN_S = 0.004


@runtime_checkable
class Predictor(Protocol):
    """Solution prediction: one probability matrix per problem.

    ``version`` names the model (recorded in every answer). ``predict`` returns, per problem, an
    array p [N, D] with values in [0, 1]: the predicted probability that player i is on team j in
    the optimal assignment. Batch several problems in one call when you can.
    """

    version: str

    def predict(self, problems: list[Problem]) -> list[np.ndarray]: ...


def round_prediction(p: np.ndarray, sizes: tuple[int, ...] | list[int]) -> np.ndarray:
    """Greedy rounding: take (player, team) pairs by decreasing p until every team is full.

    Shapes: p [N, D] → team_of [N] (−1 bench). Always fills every team (N ≥ Σ sizes).
    """
    N, D = p.shape
    free = np.asarray(sizes, dtype=np.int64).copy()
    t = np.full(N, -1, dtype=np.int64)
    for flat in np.argsort(-p, axis=None, kind="stable"):
        i, j = divmod(int(flat), D)
        if t[i] < 0 and free[j] > 0:
            t[i] = j
            free[j] -= 1
            if not free.any():
                break
    return t


class MGMatchSolver:
    """Predictor → surrogate MIP (SCIP) → polish. See the module docstring."""

    def __init__(self, predictor: Predictor | None = None, name: str = "mgmatch",
                 default_time_limit_ms: float = DEFAULT_TIME_LIMIT_MS, polish_share: float = POLISH_SHARE,
                 use_polish: bool = True, warm_start: bool = True, resolve: bool = True):
        if predictor is None:
            raise InvalidInput("predictor", f"method {name!r} needs a solution predictor "
                                            "(e.g. mgmatch.models.runtime.load_predictor(name)); none was given")
        if not hasattr(predictor, "predict"):
            raise InvalidInput("predictor", f"{type(predictor).__name__} has no predict(problems) method")
        self.predictor = predictor
        self.name = name
        self.default_time_limit_ms = default_time_limit_ms
        self.polish_share = polish_share
        self.use_polish = use_polish
        self.warm_start = warm_start
        self.resolve = resolve

    def _predict(self, problem: Problem) -> np.ndarray:
        out = self.predictor.predict([problem])
        N, D = problem.instance.n, problem.instance.teams
        if len(out) != 1:
            raise ValueError(f"predictor returned {len(out)} predictions for 1 problem")
        p = np.asarray(out[0], dtype=np.float64)
        if p.shape != (N, D):
            raise ValueError(f"predictor returned shape {p.shape}, expected ({N}, {D})")
        if not np.isfinite(p).all():
            raise ValueError("predictor returned non-finite probabilities")
        return np.clip(p, 0.0, 1.0)

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        limit_ms = budget.time_limit_ms if budget.time_limit_ms is not None else self.default_time_limit_ms
        deadline = budget.start + limit_ms / 1e3
        version = getattr(self.predictor, "version", None)
        stats: dict = {"predictor": version}

        def left() -> float:
            return deadline - time.perf_counter()

        def answer(team_of, status) -> Solution:
            return problem.solution(team_of, status, self.name, budget.elapsed_ms(), stats=stats)

        if left() <= 0:
            return answer(None, "no_solution")
        t0 = time.perf_counter()
        p = self._predict(problem)
        stats["predict_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        if left() <= FINISH_RESERVE_S:
            return answer(None, "no_solution")

        # greedy rounding: a free candidate and the warm start when it is feasible
        rounded = round_prediction(p, problem.instance.sizes)
        starts: dict[bytes, np.ndarray] = {}
        if problem.checker.feasible(rounded[None])[0]:
            starts[rounded.tobytes()] = rounded
        stats["rounding_feasible"] = bool(starts)

        # surrogate MIP with the budget left minus the polishing share
        t1 = time.perf_counter()
        share = self.polish_share if self.use_polish else 0.0

        def scip_time() -> float:
            return left() * (1.0 - share) - FINISH_RESERVE_S - SCIP_MARGIN_S

        mip = None
        if scip_time() > 0:
            mip = MipModel.build(problem.compiled, checker=problem.checker, fast=True)
            mip.set_linear_objective(p)
            if self.warm_start and starts:
                mip.warm_start(next(iter(starts.values())))
            if scip_time() > 0:
                mip.set_time_limit(scip_time())
                res = mip.solve()
                stats["surrogate_status"] = res.status
                if res.status == "infeasible" and res.team_of is None and not starts:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    return answer(None, "infeasible")
                for t in _pool(mip, problem, res.team_of):
                    starts.setdefault(t.tobytes(), t)
        stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        if not starts:
            return answer(None, "no_solution")
        cands = list(starts.values())
        vals = [problem.objective(t) for t in cands]
        order = np.argsort(vals)[::-1]
        best, best_obj = cands[order[0]], vals[order[0]]
        stats["surrogate_objective"] = best_obj
        if not self.use_polish:
            return answer(best, "feasible")

        # polish every start best first; then, while time is left, ask the surrogate for its next
        # best assignment (no-good cuts on those seen) and polish that too
        t2 = time.perf_counter()
        queue = [cands[k] for k in order]
        polished, resolves, moves = 0, 0, 0
        cut: set[bytes] = set()
        stop = deadline - FINISH_RESERVE_S
        pace = 0.0  # seconds per polish round, the longest seen
        overhead = RESOLVE_OVERHEAD_S  # re-solve time beyond SCIP's limit, the longest seen
        while time.perf_counter() + pace < stop:
            if not queue:
                limit = scip_time() - overhead
                if mip is None or limit < MIN_RESOLVE_S or not self.resolve:
                    break
                t_r = time.perf_counter()
                new = _resolve(mip, problem, [t for k, t in starts.items() if k not in cut], limit)
                overhead = max(overhead, time.perf_counter() - t_r - limit)
                cut.update(starts)
                resolves += 1
                new = [t for t in new if t.tobytes() not in starts]
                if not new:
                    break
                for t in new:
                    starts[t.tobytes()] = t
                queue.extend(new)
            res_p = polish(problem, queue.pop(0), deadline=stop, round_s=pace)
            pace = max(pace, res_p.round_s)
            polished += 1
            moves += res_p.rounds
            if res_p.objective > best_obj:
                best, best_obj = res_p.team_of, res_p.objective
        stats.update(polish_ms=round((time.perf_counter() - t2) * 1e3, 3), polish_starts=polished,
                     polish_moves=moves, surrogate_resolves=resolves)
        return answer(best, "feasible")


def _read(mip: MipModel, sol) -> np.ndarray:
    m = mip.model
    N, D = mip.x.shape
    vals = np.asarray([[m.getSolVal(sol, mip.x[i, j]) for j in range(D)] for i in range(N)])
    return np.where(vals.max(1) > 0.5, vals.argmax(1), -1).astype(np.int64)


def _pool(mip: MipModel, problem: Problem, first: np.ndarray | None, limit: int = 10) -> list[np.ndarray]:
    """The checker-feasible assignments of SCIP's solution pool (best surrogate value first)."""
    out = [] if first is None else [first]
    sols = mip.model.getSols() if mip.model.getNSols() > 0 else []
    rest = [_read(mip, s) for s in sols[:limit]]
    if rest:
        T = np.stack(rest)
        out += [t for t in T[problem.checker.feasible(T)]]
    return out


def _resolve(mip: MipModel, problem: Problem, cut: list[np.ndarray], seconds: float) -> list[np.ndarray]:
    """Cut off the assignments ``cut`` (no-good: Σ x[i, t_i] ≤ S − 1, as |x| = S) and solve again."""
    from pyscipopt import quicksum

    m = mip.model
    m.freeTransform()
    for t in cut:
        sel = np.flatnonzero(t >= 0)
        m.addCons(quicksum(mip.x[i, t[i]] for i in sel) <= len(sel) - 1)
    mip.set_time_limit(seconds)
    res = mip.solve()
    return _pool(mip, problem, res.team_of)


@register("mgmatch", "MGMatch: multimodal GNN prediction → surrogate MIP (SCIP) → polish on engagement; 100 ms default")
def mgmatch_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="mgmatch", **options)


@register("bgcn", "BGCN baseline: bipartite-GCN prediction → surrogate MIP (SCIP) → polish; 100 ms default")
def bgcn_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="bgcn", **options)
