"""Several matches from one candidate pool in one solve (issue 11 item 5; MGMatch §6.2 leaves it as future work).

Given N candidates and room for M matches (each of ``S = Σ K_j`` players), the pool is partitioned
**jointly**: every player is in at most one match, every match satisfies the pool's rules on its
own (the rules of the instance applied per match, with the players of the other matches benched),
and the objective is the SUM over matches of the learned engagement. :func:`solve_joint` works in
four stages inside one wall-clock budget (default ``M × 100 ms``, the same total the matchmaker
gives M one-at-a-time solves):

1. **Scores per match.** Anchor ``b`` is the b-th block of S players in skill order (the
   Awesomenauts start: sort on skill, cut into matches). Match b's score of "player i on team j"
   is the engagement gradient at that anchor (the first-order gain of adding i to team j of a
   match like block b, as the ``surrogate`` method's p but at the block's team sums) plus the
   player's closeness in skill to the block; scaled to [0, 1] over all matches.
2. **Seed** (SCIP on the compiled rules, the scores as a linear objective). Match k is the
   surrogate MIP with p[k], the players of matches 0..k−1 fixed out (:func:`greedy_seed`). When
   that leaves fewer than M matches, :func:`augment` re-splits one match and the unmatched
   players into TWO matches (a two-block joint MIP, everyone else fixed out), weakest match first.
   Still fewer: the joint surrogate MIP over all M match indices (:func:`joint_seed`: one copy of
   the compiled rules per match, every auxiliary per match, so each match has its own host region,
   skill window and role slots; ``Σ_m Σ_j x[m, i, j] ≤ 1`` per player; objective
   ``Σ_m Σ_ij p[m, i, j]·x[m, i, j]``; symmetry between match indices broken by ordering the
   matches on total skill). Measured: under load the M-block MIP often finds nothing in its share
   on tight 3v3 pools where seed + augment find all M, so it is the last resort.
3. **Joint local search on the true objective** (Awesomenauts: best single swap between matches
   until none improves): moves are team swaps inside a match, swaps with an unmatched candidate,
   swaps of two players of DIFFERENT matches, and swaps of whole parties of the same size (inside
   a match, between matches, with the unmatched). Every candidate is scored exactly
   (``Problem.objectives``, the sum over the one or two matches it changes), improving ones are
   checked by the checker best first; a round applies the best feasible move and then the next
   best ones that touch other matches and players (their gains add up exactly).
4. **Per-match engagement-MIP search** (:func:`mgmatch.solvers.pas.true_search`) with the
   other matches' players fixed out, matches in a seeded random order, an equal share of the time
   left each, warm-started with the current match and cut off at its value; local search again
   after every improvement.

:func:`solve_sequential` is the baseline the matchmaker ran before: solve one match with a
registered method, remove its players, repeat, each solve with ``budget / M``.

Every returned match is checker-feasible on the full instance and the matches are disjoint.
Instances with ``include`` rules are refused here (a pool's rules never name players; "this player
in SOME match" is not a per-match rule). Pools the policy sends to the lobby search
(:func:`mgmatch.solvers.policy.lobby_path`: ffa-32, br-100) take none of the stages above (building
their SCIP models alone outlasts the budget): :mod:`mgmatch.solvers.batch_lobby` forms their matches
by lobby searches, and there an ``include`` rule holds over the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyscipopt import Model

from mgmatch.core.engagement import engagement_gradient, head_gradient
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance
from mgmatch.core.problem import Problem
from mgmatch.core.rules import IncludeRule
from mgmatch.core.solution import Solution

from .base import Budget, make_solver
from .batch_lobby import lobby_batch
from .batch_search import MIN_GAIN, joint_local_search
from .cip import CipText
from .mip import MipModel, new_model, write_rules
from .pas import true_search
from .policy import lobby_path

#: ``prefer_joint``: joint when a match has at least this many players ...
AUTO_LARGE_MATCH = 12
#: ... or the candidates are at most this many times the players the matches need
AUTO_TIGHTNESS = 2.1
#: per-match budget when the caller gives none (the matchmaker's default time_budget_ms)
DEFAULT_MATCH_MS = 100.0
#: share of the budget by which the one-match-at-a-time seed should be done (a match that found nothing
#: in its share may go on until AUGMENT_SHARE)
GREEDY_SHARE = 0.3
#: ... the re-splitting of one or two matches and the unmatched into one more match (when fewer than M)
AUGMENT_SHARE = 0.5
#: ... the same on the pool-wide scores (when still fewer than M)
RETRY_SHARE = 0.65
#: ... the joint surrogate MIP over all M match indices (when still fewer than M)
SEED_SHARE = 0.75
#: ... the first match of the seed when none was found sooner (no match at all would be the worst answer)
FIRST_MATCH_SHARE = 0.85
#: an engagement-MIP build is estimated at this many surrogate-model builds until one was timed
MIP_BUILD_FACTOR = 5.0
#: relative gap at which a seed's surrogate MIP stops (its objective only guides the seed)
GREEDY_GAP = 0.01
#: weight of the skill closeness to the anchor block in the per-match scores (gradient scaled to [0, 1])
CLOSENESS_WEIGHT = 1.0
#: time kept for building the answer, seconds
FINISH_RESERVE_S = 0.002
#: SCIP overshoots its limit by a few ms: stop it this early
SCIP_MARGIN_S = 0.004


@dataclass
class BatchResult:
    """Disjoint matches of one pool: ``matches[k]`` is a team_of [N] over the whole pool (−1: not in
    match k), ``objectives[k]`` its engagement."""

    matches: list[np.ndarray]
    objectives: list[float]
    method: str
    time_ms: float
    status: str  # "feasible" (at least one match), "infeasible" (SCIP proved none), "no_solution"
    stats: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return float(sum(self.objectives))

    def solutions(self, problem: Problem) -> list[Solution]:
        """One spec Solution per match (objective and region computed by ``Problem.solution``)."""
        return [problem.solution(t, "feasible", self.method, self.time_ms,
                                 stats={**self.stats, "batch_index": k, "batch_matches": len(self.matches)})
                for k, t in enumerate(self.matches)]


def prefer_joint(match_size: int, candidates: int, matches: int) -> bool:
    """The ``auto`` rule of a pool's ``partition``: is the joint solve the better one for this job?

    Joint when there is room for at least 2 matches and either a match has at least
    :data:`AUTO_LARGE_MATCH` players or the candidates are at most :data:`AUTO_TIGHTNESS` × the
    players the matches need: the pool shapes ``mgmatch bench batch`` measured (README, "Several
    matches from one pool": 3v3 with 24, 40 and 100 candidates for 4, 4 and 8 matches, 12v12 with 72
    and 100 for 3), where joint was ahead in total engagement on every shape. Looser pools of small
    matches were not measured and keep the one-at-a-time path.
    """
    if matches < 2:
        return False
    return match_size >= AUTO_LARGE_MATCH or candidates <= AUTO_TIGHTNESS * matches * match_size


def room(instance: Instance, matches: int) -> int:
    """How many matches of ``instance``'s format its candidates can fill, at most ``matches``."""
    return max(0, min(int(matches), instance.n // instance.n_selected))


def verify(problem: Problem, matches: list[np.ndarray]) -> list[str]:
    """Why a set of matches is not a valid batch (empty when it is): overlaps and rule violations. Every
    rule but ``include`` holds per match; an ``include`` rule holds over the batch (each of its players
    in some match, :mod:`mgmatch.solvers.batch_lobby`)."""
    out: list[str] = []
    inst = problem.instance
    used = np.zeros(inst.n, dtype=np.int64)
    per_batch = {f"rules[{k}] (include)" for k, r in enumerate(inst.rules) if isinstance(r, IncludeRule)}
    for k, t in enumerate(matches):
        t = np.asarray(t)
        used += t >= 0
        for v in problem.checker.violations(t):
            if v.split(":", 1)[0] not in per_batch:
                out.append(f"match {k}: {v}")
    ids = inst.ids
    out += [f"player {ids[i]} is in {int(used[i])} matches" for i in np.flatnonzero(used > 1)]
    for k, r in enumerate(inst.rules):
        if isinstance(r, IncludeRule):
            missing = [p for p in r.players if not used[inst.index[p]]]
            if missing:
                out.append(f"rules[{k}] (include): required players in no match: {missing}")
    return out


def _check_matches(matches: int) -> None:
    if isinstance(matches, bool) or not isinstance(matches, int) or matches < 1:
        raise InvalidInput("matches", f"expected an integer ≥ 1, got {matches!r}")


def _check_batchable(problem: Problem, matches: int) -> None:
    _check_matches(matches)
    for k, r in enumerate(problem.instance.rules):
        if isinstance(r, IncludeRule):
            raise InvalidInput(f"rules[{k}]", "an include rule names players; a batch solve takes per-match rules only")


# --------------------------------------------------------------------------- sequential baseline


def _names(obj: Any) -> set[str]:
    """Player ids a rule's JSON names (``player`` / ``players`` fields, at any depth)."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "player" and isinstance(v, str):
                out.add(v)
            elif k == "players" and isinstance(v, list | tuple):
                out.update(p for p in v if isinstance(p, str))
            else:
                out |= _names(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            out |= _names(v)
    return out


def subproblem(problem: Problem, keep: np.ndarray) -> Problem:
    """The problem on the players ``keep`` (indexes) only, as the matchmaker rebuilds it after a match:
    a rule naming a removed player is dropped; embeddings are reused."""
    inst = problem.instance
    players = tuple(inst.players[i] for i in keep)
    ids = {p.id for p in players}
    rules = tuple(r for r in inst.rules if _names(r.to_json()) <= ids)
    sub = Instance(inst.teams, inst.sizes, players, rules, inst.engagement_model, inst.uniform_size,
                   {p.id: k for k, p in enumerate(players)})
    out = Problem(sub, problem.model, problem.model_name)
    out.__dict__["embeddings"] = problem.embeddings[keep]
    return out


def team_of_solution(problem: Problem, sol: Solution) -> np.ndarray:
    t = np.full(problem.instance.n, -1, dtype=np.int64)
    for j, team in enumerate(sol.teams):
        for pid in team:
            t[problem.instance.index[pid]] = j
    return t


def solve_sequential(problem: Problem, matches: int, budget: Budget, method: str = "surrogate", seed: int = 0,
                     predictor: Any = None) -> BatchResult:
    """One match after another: solve with ``method`` under ``budget / M``, remove its players, repeat."""
    _check_batchable(problem, matches)
    M = room(problem.instance, matches)
    limit = budget.time_limit_ms if budget.time_limit_ms is not None else DEFAULT_MATCH_MS * max(M, 1)
    per_ms = limit / max(M, 1)
    N = problem.instance.n
    used = np.zeros(N, dtype=bool)
    out: list[np.ndarray] = []
    status = "no_solution"
    for k in range(M):
        keep = np.flatnonzero(~used)
        if keep.size < problem.instance.n_selected:
            break
        b = Budget.of(per_ms)  # each solve its own share, encoding included, as the matchmaker runs it
        sub = subproblem(problem, keep)
        # the service's encoding: the compiled rules, except for a pool the policy sends to the lobby
        # search (which compiles nothing; compiling a br-100 pool takes about a match's budget)
        _ = sub.checker if lobby_path(sub) else (sub.compiled, sub.checker)
        sol = make_solver(method, predictor=predictor, seed=seed + k).solve(sub, b)
        if not sol.has_assignment:
            if sol.status == "infeasible" and not out:
                status = "infeasible"
            break
        t = np.full(N, -1, dtype=np.int64)
        t[keep] = team_of_solution(sub, sol)
        out.append(t)
        used |= t >= 0
    if out:
        status = "feasible"
    objs = [problem.objective(t) for t in out]
    return BatchResult(out, objs, f"sequential-{method}", budget.elapsed_ms(), status, {"per_match_ms": per_ms})


# --------------------------------------------------------------------------- joint: scores and seed


def skill_order(instance: Instance) -> np.ndarray:
    """Players by decreasing skill (players without a skill last, in index order)."""
    s = instance.skills()
    key = np.where(np.isfinite(s), -s, np.inf)
    return np.argsort(key, kind="stable")


def match_scores(problem: Problem, M: int) -> np.ndarray:
    """p [M, N, D] in [0, 1]: the engagement gradient at each anchor block's team sums, plus closeness in
    skill to the block (module docstring, stage 1)."""
    inst = problem.instance
    emb = np.asarray(problem.embeddings, dtype=np.float64)
    N, E = emb.shape
    D, S = inst.teams, inst.n_selected
    order = skill_order(inst)
    s = inst.skills()
    have = np.isfinite(s)
    span = float(np.ptp(s[have])) if have.sum() > 1 else 0.0
    grads, close = [], []
    for b in range(M):
        block = order[b * S:(b + 1) * S]
        mean = emb[block].mean(0)
        g = head_gradient(problem.model, np.concatenate([mean * inst.sizes[j] for j in range(D)]))
        grads.append(emb @ g.reshape(D, E).T)
        c = np.zeros(N)
        bs = s[block][np.isfinite(s[block])]
        if span > 0 and bs.size:
            c[have] = 1.0 - np.abs(s[have] - float(np.median(bs))) / span
        close.append(np.repeat(c[:, None], D, axis=1))
    G = np.stack(grads)
    lo, hi = float(G.min()), float(G.max())
    G = (G - lo) / (hi - lo) if hi > lo else np.full_like(G, 0.5)
    return (G + CLOSENESS_WEIGHT * np.stack(close)) / (1.0 + CLOSENESS_WEIGHT)


def pool_scores(problem: Problem) -> np.ndarray:
    """p [N, D]: the engagement gradient at the uniform assignment over the whole pool, scaled to [0, 1]
    (the ``surrogate`` method's scores, which the sequential path solves with)."""
    g = engagement_gradient(problem.model, problem.embeddings, problem.instance.sizes)
    lo, hi = float(g.min()), float(g.max())
    return (g - lo) / (hi - lo) if hi > lo else np.full_like(g, 0.5)


def _block_model(problem: Problem, p: np.ndarray, allowed: np.ndarray | None = None) -> tuple[Model, list[MipModel]]:
    """The joint surrogate MIP: one copy of the compiled rules per match index (stage 2); only the players
    ``allowed`` (a mask [N]; None: all) may be placed. Written as CIP text and read by SCIP in one call
    (:mod:`mgmatch.solvers.cip`)."""
    comp = problem.compiled
    M = p.shape[0]
    N, D = comp.n_players, comp.n_teams
    cip = CipText()
    firsts, stats = [], []
    for _ in range(M):
        first = cip.add_vars(comp.n_vars)[0]
        firsts.append(first)
        stats.append(write_rules(cip, comp, first))
    xs = np.asarray(firsts, dtype=np.int64)[:, None, None] + np.arange(N * D, dtype=np.int64).reshape(N, D)  # [M, N, D]
    for i in range(N):  # a player is in at most one match
        if allowed is not None and not allowed[i]:
            for v in xs[:, i, :].reshape(-1).tolist():
                cip.set_upper_bound(v, 0.0)
            continue
        cip.add_row(xs[:, i, :].reshape(-1), np.ones(M * D), "<=", 1.0)
    s = problem.instance.skills()
    if allowed is not None:
        s = np.where(allowed, s, 0.0)
    if np.isfinite(s).all() and M > 1:  # symmetry: matches ordered by total skill
        sk = np.repeat(s.astype(np.float64), D)
        for b in range(M - 1):
            cip.add_row(np.concatenate([xs[b].reshape(-1), xs[b + 1].reshape(-1)]), np.concatenate([sk, -sk]), ">=", 0.0)
    cip.set_objective(dict(zip(xs.reshape(-1).tolist(), np.asarray(p[:M], dtype=np.float64).reshape(-1).tolist(),
                               strict=True)))
    m = new_model("fast")
    variables = cip.read(m)
    blocks: list[MipModel] = []
    for b in range(M):
        xhat = variables[firsts[b]:firsts[b] + comp.n_vars]
        x = np.asarray(xhat[:N * D], dtype=object).reshape(N, D)
        blocks.append(MipModel(comp, m, x, xhat, problem.checker, stats={"variables": comp.n_vars, **stats[b]}))
    return m, blocks


def _read_blocks(m: Model, blocks: list[MipModel], sol) -> np.ndarray:
    out = []
    for blk in blocks:
        N, D = blk.x.shape
        v = np.asarray([[m.getSolVal(sol, blk.x[i, j]) for j in range(D)] for i in range(N)])
        out.append(np.where(v.max(1) > 0.5, v.argmax(1), -1).astype(np.int64))
    return np.stack(out)


def joint_seed(problem: Problem, p: np.ndarray, stop: float, stats: dict,
               start: np.ndarray | None = None) -> tuple[np.ndarray | None, bool]:
    """Stage 2: the joint surrogate MIP's best checker-feasible partition [M', N] (M' ≤ M, fewer when SCIP
    proves M impossible), and whether SCIP proved even one match impossible. ``start`` [M, N]: a partition
    handed to SCIP as its first solution."""
    M = p.shape[0]
    while M >= 1:
        left = stop - time.perf_counter() - SCIP_MARGIN_S
        if left <= 0:
            return None, False
        t0 = time.perf_counter()
        m, blocks = _block_model(problem, p[:M])
        stats["seed_build_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        left = stop - time.perf_counter() - SCIP_MARGIN_S
        if left <= 0:
            return None, False
        if start is not None and start.shape[0] == M:
            sol = m.createPartialSol()
            for blk, t in zip(blocks, start, strict=True):
                for i in range(t.shape[0]):
                    for j in range(blk.x.shape[1]):
                        m.setSolVal(sol, blk.x[i, j], 1.0 if t[i] == j else 0.0)
            m.addSol(sol)
        m.setParam("limits/time", left)
        m.optimize()
        status = m.getStatus()
        stats["seed_status"] = status
        stats["seed_matches"] = M
        for sol in m.getSols()[:10]:
            T = _read_blocks(m, blocks, sol)
            if problem.checker.feasible(T).all() and ((T >= 0).sum(0) <= 1).all():
                return T, False
        if status != "infeasible":
            return None, False
        if M == 1:
            return None, True
        M -= 1
    return None, False


def greedy_seed(problem: Problem, p: np.ndarray, stop: float, hard_stop: float | None = None,
                first_stop: float | None = None, stats: dict | None = None) -> np.ndarray | None:
    """One match at a time: the surrogate MIP with p[k] as objective and the players of the matches so far
    fixed out (one model, re-solved), until M matches, a failure or ``stop``. Each match gets an equal
    share of the time left (SCIP stops within :data:`GREEDY_GAP` of its bound); one that found nothing
    in its share goes on until ``hard_stop`` (the first match until ``first_stop``: without it there is
    no answer at all)."""
    rows: list[np.ndarray] = []
    if stop - time.perf_counter() <= SCIP_MARGIN_S * 2:
        return None
    hard_stop = stop if hard_stop is None else max(stop, hard_stop)
    tb = time.perf_counter()
    mip = MipModel.build(problem.compiled, checker=problem.checker, fast=True)
    if stats is not None:
        stats["greedy_build_s"] = time.perf_counter() - tb
    mip.model.setParam("limits/gap", GREEDY_GAP)
    for k in range(p.shape[0]):
        left = stop - time.perf_counter() - SCIP_MARGIN_S
        if left <= 0:
            break
        if k:
            mip.model.freeTransform()
            mip.exclude(np.flatnonzero(rows[-1] >= 0))
        mip.set_linear_objective(p[k])
        t0 = time.perf_counter()
        mip.set_time_limit(left / (p.shape[0] - k))
        res = mip.solve()
        more = (hard_stop if k or first_stop is None else max(hard_stop, first_stop)) - time.perf_counter() - SCIP_MARGIN_S
        if res.team_of is None and res.status == "timelimit" and more > 0:
            mip.set_time_limit(time.perf_counter() - t0 + more)  # SCIP's clock runs on across the calls
            res = mip.solve()
        if res.team_of is None:
            if stats is not None:
                stats["greedy_status"] = res.status  # "infeasible" for the first match: no match exists
            break
        rows.append(res.team_of)
    return np.stack(rows) if rows else None


def augment(problem: Problem, T: np.ndarray | None, p: np.ndarray, stop: float, stats: dict) -> np.ndarray | None:
    """Add matches to a partition with fewer than M: the players of r of its matches (r = 1, then 2; the
    weakest matches first) and the unmatched ones are re-split into r + 1 matches by the joint MIP (r + 1
    blocks, everyone else fixed out); a success adds a match. Repeats until M matches, no re-split works,
    or ``stop``."""
    M = p.shape[0]
    if T is None:
        return None
    tries = 0
    while T.shape[0] < M and time.perf_counter() < stop:
        free = ~(T >= 0).any(0)
        weak = np.argsort([problem.objective(t) for t in T]).tolist()
        combos = [(m,) for m in weak] + [(a, b) for x, a in enumerate(weak) for b in weak[x + 1:]]
        grown = False
        for C in combos:
            left = stop - time.perf_counter() - SCIP_MARGIN_S
            if left <= SCIP_MARGIN_S:
                break
            allowed = free | (T[list(C)] >= 0).any(0)
            rows = np.stack([p[c] for c in C] + [p[T.shape[0]]])
            model, blocks = _block_model(problem, rows, allowed)
            model.setParam("limits/time", max(0.001, min(left, (stop - time.perf_counter()) / 2)))
            model.optimize()
            tries += 1
            for sol in model.getSols()[:5]:
                new = _read_blocks(model, blocks, sol)
                if problem.checker.feasible(new).all() and not (new[:, ~allowed] >= 0).any() \
                        and ((new >= 0).sum(0) <= 1).all():
                    T = np.concatenate([np.delete(T, list(C), axis=0), new])
                    grown = True
                    break
            if grown:
                break
        if not grown:
            break
    stats["augment_tries"] = tries
    return T


# --------------------------------------------------------------------------- joint: per-match search


def match_search(problem: Problem, T: np.ndarray, m: int, p: np.ndarray, obj: float, stop: float,
                 stats: dict | None = None) -> np.ndarray | None:
    """Stage 4: the engagement MIP of match m with the other matches' players fixed out, from T[m]; a better
    match, or None. ``stats["mip_build_s"]`` keeps the longest model build seen (the caller starts no search
    that could not finish building)."""
    if stop - time.perf_counter() <= SCIP_MARGIN_S * 2:
        return None
    t0 = time.perf_counter()
    mip = MipModel.build(problem.compiled, checker=problem.checker, fast=True)
    others = ((T >= 0).any(0)) & (T[m] < 0)
    mip.exclude(np.flatnonzero(others))
    found = true_search(problem, mip, p, T[m], obj, stop=stop, fraction=0.0, margin_s=SCIP_MARGIN_S)
    if stats is not None:
        build_s = time.perf_counter() - t0 - found.stats.get("search_ms", 0.0) / 1e3 + found.stats.get(
            "search_build_ms", 0.0) / 1e3
        stats["mip_build_s"] = max(stats.get("mip_build_s", 0.0), build_s)
    if found.team_of is None or found.objective is None or found.objective <= obj + MIN_GAIN:
        return None
    if ((found.team_of >= 0) & others).any():  # pragma: no cover - the bounds forbid it
        return None
    return found.team_of


def solve_joint(problem: Problem, matches: int, budget: Budget, seed: int = 0) -> BatchResult:
    """Partition the pool into up to ``matches`` matches jointly (module docstring); a pool the policy
    sends to the lobby search is formed by lobby searches instead (:mod:`mgmatch.solvers.batch_lobby`)."""
    _check_matches(matches)
    M = room(problem.instance, matches)
    limit = budget.time_limit_ms if budget.time_limit_ms is not None else DEFAULT_MATCH_MS * max(M, 1)
    deadline = budget.start + limit / 1e3
    stop = deadline - FINISH_RESERVE_S
    stats: dict = {"requested_matches": matches}
    if M and lobby_path(problem):
        return _joint_lobbies(problem, M, budget, stop, seed, stats)
    _check_batchable(problem, matches)
    rng = np.random.default_rng(seed)

    def answer(T: np.ndarray | None, objs, status: str) -> BatchResult:
        rows = [] if T is None else [T[k] for k in range(T.shape[0])]
        return BatchResult(rows, [float(v) for v in (objs if T is not None else [])], "joint", budget.elapsed_ms(),
                           status, stats)

    if M == 0:
        return answer(None, [], "no_solution")
    _ = problem.embeddings, problem.compiled, problem.checker
    t0 = time.perf_counter()
    p = match_scores(problem, M)
    # seed: one match at a time on the per-match scores; fewer than M matches → re-split matches and the
    # unmatched (augment); still fewer → the same again on the pool-wide scores (the sequential path's
    # choice of players), then the joint MIP over all M match indices
    span = stop - t0
    T = greedy_seed(problem, p, t0 + span * GREEDY_SHARE, t0 + span * AUGMENT_SHARE,
                    t0 + span * FIRST_MATCH_SHARE, stats)
    stats["greedy_matches"] = 0 if T is None else int(T.shape[0])
    stats["seed"] = "greedy"
    if T is not None and T.shape[0] < M:
        T = augment(problem, T, p, t0 + span * AUGMENT_SHARE, stats)
        stats["seed"] = "greedy+augment"
    if T is not None and T.shape[0] < M:
        flat = np.repeat(pool_scores(problem)[None], M, axis=0)
        U = greedy_seed(problem, flat, t0 + span * RETRY_SHARE)
        if U is not None and U.shape[0] < M:
            U = augment(problem, U, flat, t0 + span * RETRY_SHARE, stats)
        if U is not None and U.shape[0] > T.shape[0]:
            T, stats["seed"] = U, "pool-scores"
    proven_none = T is None and stats.get("greedy_status") == "infeasible"
    # the M-block model costs about M single-match builds: only when that fits twice in its share
    affordable = t0 + span * SEED_SHARE - time.perf_counter() > 2 * M * stats.get("greedy_build_s", 0.0)
    if T is not None and T.shape[0] < M and affordable:
        J, _ = joint_seed(problem, p, t0 + span * SEED_SHARE, stats)
        if J is not None and J.shape[0] > T.shape[0]:
            T, stats["seed"] = J, "joint-mip"
    stats["seed_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    if T is None:
        return answer(None, [], "infeasible" if proven_none else "no_solution")
    objs = np.asarray([problem.objective(t) for t in T])
    stats["seed_total"] = float(objs.sum())

    # joint local search to a local optimum (or the deadline)
    t1 = time.perf_counter()
    T, objs, moves, local = joint_local_search(problem, T, objs, stop)
    stats.update(search_moves=moves, search_local_optimum=local, search_ms=round((time.perf_counter() - t1) * 1e3, 3),
                 search_total=float(objs.sum()))

    # per-match engagement-MIP search with the time left, matches in a seeded random order, each an
    # equal share; local search again after every improvement
    t2 = time.perf_counter()
    improved = 0
    order = rng.permutation(T.shape[0])
    for n, m in enumerate(order.tolist()):
        share = (stop - time.perf_counter()) / (len(order) - n)
        # building the engagement MIP costs a few surrogate builds (measured: 3-6 on both presets) until one was timed
        build = stats.get("mip_build_s", MIP_BUILD_FACTOR * stats.get("greedy_build_s", 0.0))
        if share <= SCIP_MARGIN_S * 3 + 2 * build:
            continue
        got = match_search(problem, T, m, p[m], float(objs[m]), time.perf_counter() + share, stats)
        if got is not None:
            T[m] = got
            objs[m] = problem.objective(got)
            improved += 1
            T, objs, more, _ = joint_local_search(problem, T, objs, stop)
            moves += more
    stats.update(mip_improved=improved, mip_ms=round((time.perf_counter() - t2) * 1e3, 3), moves=moves)
    return answer(T, objs, "feasible")


def _joint_lobbies(problem: Problem, M: int, budget: Budget, stop: float, seed: int, stats: dict) -> BatchResult:
    """The large-lobby path of :func:`solve_joint`: no SCIP model, M lobby searches (:func:`lobby_batch`);
    every match checked on the pool's per-match rules and the batch on ``include`` and overlaps."""
    stats["path"] = "lobby"
    rows, covered = lobby_batch(problem, M, stop, seed, stats)
    bad = verify(problem, rows)
    if not covered:
        stats["rejected"] = "an included player is in no match the lobby searches formed"
    elif bad:  # pragma: no cover - each lobby passed its match's checker and took only free players
        stats["rejected"] = bad[:3]
    if bad or not rows:
        return BatchResult([], [], "joint", budget.elapsed_ms(), "no_solution", stats)
    objs = [problem.objective(t) for t in rows]
    return BatchResult(rows, objs, "joint", budget.elapsed_ms(), "feasible", stats)
