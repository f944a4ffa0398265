"""Baselines of the paper's Table 2: ``random`` and ``optmatch``.

- ``random``: sample assignments within the budget and keep the best feasible one by the
  engagement model. Samples respect the cheap structure of the rules (required players first,
  parties placed as one block, a random host region and skill window restricting the pool, role
  slots filled by players who accept the role); the checker judges each batch of samples
  (vectorized) and the engagement network scores the feasible ones in one batch.
- ``optmatch`` (OptMatch, Gong et al.): Google OR-Tools CP-SAT enumerates feasible assignments of
  the compiled standard form (binary x and auxiliary variables, linear rows with integer-scaled
  coefficients, logical rows enforced through a Boolean literal implied by their condition) with
  a solution callback that collects as many distinct assignments as the budget allows; the
  engagement network scores them and the best is returned. When the enumeration finishes inside
  the budget, every feasible assignment was scored and the answer is proven ``optimal``.

This module imports OR-Tools; never import highspy in the same process (they crash together).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from mgmatch.core.compiler import CAnd, CLit, COr, Row, parties
from mgmatch.core.problem import Problem
from mgmatch.core.rules import (
    IncludeRule,
    PartyTogetherRule,
    RolesRule,
    SkillSpreadRule,
)
from mgmatch.core.solution import Solution

from .interface import Budget, register

#: samples built and checked per batch by ``random``
RANDOM_BATCH = 256
#: time kept back for scoring and building the answer, in seconds
RESERVE_S = 0.004
#: ``optmatch`` also keeps this back to check and score the enumerated assignments
SCORE_RESERVE_S = 0.005


# =========================================================================== random


class _Sampler:
    """Builds random assignments that respect the cheap structure of an instance's rules."""

    def __init__(self, problem: Problem):
        inst = problem.instance
        self.N, self.D = inst.n, inst.teams
        self.sizes = list(inst.sizes)
        checker = problem.checker
        party_rule = any(isinstance(r, PartyTogetherRule) for r in inst.rules)
        groups = parties(inst) if party_rule else {}
        in_group = np.zeros(self.N, dtype=bool)
        self.units: list[np.ndarray] = []
        for members in groups.values():
            self.units.append(np.asarray(members))
            in_group[members] = True
        self.units += [np.asarray([i]) for i in range(self.N) if not in_group[i]]
        self.unit_size = np.asarray([u.size for u in self.units])
        required = set()
        for r in inst.rules:
            if isinstance(r, IncludeRule):
                required.update(inst.index[p] for p in r.players)
        self.unit_required = np.asarray([any(int(i) in required for i in u) for u in self.units])
        # host regions: per region, which players reach it
        self.reach = None
        if checker.max_ping is not None and checker.regions:
            self.reach = checker.ping <= checker.max_ping + 1e-6  # [N, R]
        spreads = [r.max_spread for r in inst.rules if isinstance(r, SkillSpreadRule)]
        self.spread = min(spreads) if spreads else None
        self.skill = inst.skills()
        roles_rules = [r for r in inst.rules if isinstance(r, RolesRule)]
        self.slots: list[str] = []
        if roles_rules:
            rr = roles_rules[0]
            self.slots = [role for role, c in rr.slots.items() for _ in range(c)]
            self.accepts = {role: np.asarray([role in (p.roles or ()) for p in inst.players])
                            for role in rr.slots}

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        N = self.N
        eligible = np.ones(N, dtype=bool)
        if self.reach is not None:
            eligible &= self.reach[:, rng.integers(self.reach.shape[1])]
        if self.spread is not None:
            lo = self.skill[rng.integers(N)] - rng.random() * self.spread
            eligible &= (self.skill >= lo) & (self.skill <= lo + self.spread)
        t = np.full(N, -1, dtype=np.int64)
        free = list(self.sizes)
        order = rng.permutation(len(self.units))
        # required units first, then parties (hard to place late), then singles
        key = (~self.unit_required[order]).astype(int) * 2 + (self.unit_size[order] == 1).astype(int)
        order = order[np.argsort(key, kind="stable")]
        use_slots = bool(self.slots)
        for ui in order:
            u = self.units[ui]
            if not self.unit_required[ui] and not eligible[u].all():
                continue
            teams = [j for j in rng.permutation(self.D) if free[j] >= u.size]
            if not teams:
                continue
            if use_slots and u.size == 1:
                # a single takes a team where a slot he accepts is still open
                placed = False
                for j in teams:
                    if self._slot_open(t, j, int(u[0])):
                        t[u] = j
                        free[j] -= 1
                        placed = True
                        break
                if not placed:
                    continue
            else:
                j = teams[0]
                t[u] = j
                free[j] -= u.size
            if not any(free):
                break
        return t

    def _slot_open(self, t: np.ndarray, j: int, i: int) -> bool:
        """Whether player i can join team j and every member still gets a distinct accepted slot."""
        members = np.flatnonzero(t == j).tolist() + [i]
        if len(members) > len(self.slots):
            return False
        fits = np.stack([self.accepts[role][members] for role in self.slots], axis=1)  # [members, slots]
        match = maximum_bipartite_matching(csr_matrix(fits.astype(np.int8)), perm_type="column")
        return bool((match >= 0).all())


@register("random", "Random: sample rule-aware random assignments within the budget, keep the best by engagement", seeded=True)
class RandomSolver:
    """The Random baseline of Table 2 (samples within the time limit; best feasible one wins)."""

    name = "random"

    def __init__(self, seed: int = 0, batch: int = RANDOM_BATCH, default_time_limit_ms: float = 100.0,
                 max_samples: int | None = None):
        self.seed = seed
        self.batch = batch
        self.default_time_limit_ms = default_time_limit_ms
        self.max_samples = max_samples

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        deadline = budget.deadline(self.default_time_limit_ms)
        rng = np.random.default_rng(self.seed)
        sampler = _Sampler(problem)
        best, best_obj, n_samples, n_feasible = None, -math.inf, 0, 0
        seen: set[bytes] = set()
        judge_s = 0.0  # time to check and score one batch, the longest seen
        while time.perf_counter() < deadline - RESERVE_S - judge_s:
            if self.max_samples is not None and n_samples >= self.max_samples:
                break
            rows = []
            for _ in range(self.batch):
                rows.append(sampler.sample(rng))
                if time.perf_counter() >= deadline - RESERVE_S - judge_s:
                    break
            t_judge = time.perf_counter()
            T = np.stack(rows)
            n_samples += T.shape[0]
            T = T[problem.checker.feasible(T)]
            if T.shape[0]:
                T = np.unique(T, axis=0)
                fresh = [k for k in range(T.shape[0]) if T[k].tobytes() not in seen]
                seen.update(T[k].tobytes() for k in fresh)
                n_feasible += len(fresh)
                T = T[fresh]
            if T.shape[0]:
                vals = problem.objectives(T)
                k = int(np.argmax(vals))
                if vals[k] > best_obj:
                    best, best_obj = T[k].copy(), float(vals[k])
            judge_s = max(judge_s, time.perf_counter() - t_judge)
        elapsed = budget.elapsed_ms()
        stats = {"samples": n_samples, "distinct_feasible": n_feasible}
        if best is None:
            return problem.solution(None, "no_solution", self.name, elapsed, stats=stats)
        return problem.solution(best, "feasible", self.name, elapsed, stats=stats)


# =========================================================================== optmatch


def integer_row(row: Row, max_denominator: int = 10**6) -> tuple[list[int], int, str]:
    """Scale a row to integer coefficients: exact when the coefficients are rationals with small
    denominators, otherwise rounded at 1e-6 with the right-hand side rounded the safe way."""
    coefs = [Fraction(float(c)).limit_denominator(max_denominator) for c in row.coefs]
    rhs = Fraction(float(row.rhs)).limit_denominator(max_denominator)
    exact = all(abs(float(f) - float(c)) <= 1e-12 * max(1.0, abs(float(c))) for f, c in zip(coefs, row.coefs, strict=True))
    exact &= abs(float(rhs) - row.rhs) <= 1e-12 * max(1.0, abs(row.rhs))
    if exact:
        lcm = 1
        for f in coefs + [rhs]:
            lcm = lcm * f.denominator // math.gcd(lcm, f.denominator)
        if lcm <= 10**9:
            ints = [int(f * lcm) for f in coefs]
            return ints, int(rhs * lcm), row.sense
    scale = 10**6
    ints = [int(round(float(c) * scale)) for c in row.coefs]
    r = float(row.rhs) * scale
    # the activity tolerance of the checker is 1e-6 relative; round the rhs outward by one unit
    if row.sense == "<=":
        return ints, math.floor(r + 1e-6 * max(1.0, abs(r))) + 1, "<="
    if row.sense == ">=":
        return ints, math.ceil(r - 1e-6 * max(1.0, abs(r))) - 1, ">="
    return ints, int(round(r)), "=="


def _build_cpsat(problem: Problem):
    """The compiled form as a CP-SAT model; returns (model, variables in compiled order).

    Auxiliary variables are pinned to one canonical value per assignment of x wherever that is
    cheap, so that enumeration does not revisit one team assignment under many auxiliary
    values: every condition literal is fully reified (b ⇔ cond), the skill window starts at the
    lowest selected skill, and the host region is the first region every selected player reaches.
    """
    from ortools.sat.python import cp_model

    compiled = problem.compiled
    inst = problem.instance
    N, D = compiled.n_players, compiled.n_teams
    m = cp_model.CpModel()
    v = [m.NewBoolVar(f"v{k}") for k in range(compiled.n_vars)]

    def add_row(row: Row):
        coefs, rhs, sense = integer_row(row)
        pairs = [(v[int(k)], c) for c, k in zip(coefs, row.vars.tolist(), strict=True) if c != 0]
        if not pairs:  # an empty row: constant activity 0
            ok = (sense == "<=" and 0 <= rhs) or (sense == ">=" and 0 >= rhs) or (sense == "==" and rhs == 0)
            return m.AddBoolOr([]) if not ok else None
        expr = cp_model.LinearExpr.WeightedSum([p[0] for p in pairs], [p[1] for p in pairs])
        if sense == "<=":
            return m.Add(expr <= rhs)
        if sense == ">=":
            return m.Add(expr >= rhs)
        return m.Add(expr == rhs)

    def literal(c):
        """A literal L ⇔ c (fully reified, so it adds no freedom to the enumeration)."""
        if isinstance(c, CLit):
            return v[c.var].Not() if c.negated else v[c.var]
        lits = [literal(a) for a in c.args]
        b = m.NewBoolVar("")
        if isinstance(c, CAnd):
            m.AddBoolOr([lit.Not() for lit in lits] + [b])
            for lit in lits:
                m.AddImplication(b, lit)
        else:
            assert isinstance(c, COr)
            for lit in lits:
                m.AddImplication(lit, b)
            m.AddBoolOr(lits).OnlyEnforceIf(b)
        return b

    for row in compiled.rows:
        add_row(row)
    for lrow in compiled.logical:
        ct = add_row(lrow.then)
        lit = literal(lrow.cond)
        if ct is None:
            continue
        ct.OnlyEnforceIf(lit)

    # canonical auxiliaries (each keeps at least one choice for every feasible x)
    sel = []
    for i in range(N):
        si = m.NewBoolVar(f"sel{i}")
        m.Add(sum(v[i * D + j] for j in range(D)) == si)
        sel.append(si)
    skills = inst.skills()
    for k, rule in enumerate(inst.rules):
        if not isinstance(rule, SkillSpreadRule):
            continue
        wins = [q for q in range(compiled.n_x, compiled.n_vars)
                if compiled.var_origin[q] == k and ".window[" in compiled.var_names[q]]
        for q, start in zip(wins, np.unique(skills), strict=True):
            m.AddBoolOr([sel[i] for i in np.flatnonzero(skills == start)]).OnlyEnforceIf(v[q])
    if compiled.region_vars:
        checker = problem.checker
        reach = checker.ping <= checker.max_ping + 1e-6 * max(1.0, abs(checker.max_ping))
        for r, h in enumerate(compiled.region_vars):
            for earlier in range(r):
                m.AddBoolOr([sel[i] for i in np.flatnonzero(~reach[:, earlier])]).OnlyEnforceIf(v[h])
    return m, v


@register("optmatch", "OptMatch: OR-Tools CP-SAT enumerates feasible assignments in the budget, the engagement network picks the best", seeded=True)
class OptMatchSolver:
    """OptMatch's second stage as in the paper's Table 2 (CP-SAT + engagement scoring)."""

    name = "optmatch"

    def __init__(self, seed: int = 0, default_time_limit_ms: float = 100.0, max_solutions: int = 200_000):
        self.seed = seed
        self.default_time_limit_ms = default_time_limit_ms
        self.max_solutions = max_solutions
        # import OR-Tools here, not in solve(): its first import takes ~0.5 s of no one's budget
        from ortools.sat.python import cp_model  # noqa: F401

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        from ortools.sat.python import cp_model

        deadline = budget.deadline(self.default_time_limit_ms)
        compiled = problem.compiled
        N, D = compiled.n_players, compiled.n_teams
        model, v = _build_cpsat(problem)
        xvars = v[:compiled.n_x]
        found: dict[bytes, np.ndarray] = {}
        cap = self.max_solutions

        class Cb(cp_model.CpSolverSolutionCallback):
            def __init__(self):
                super().__init__()
                self.stopped_early = False

            def on_solution_callback(self):
                x = np.fromiter((self.Value(xv) for xv in xvars), dtype=np.int8, count=len(xvars)).reshape(N, D)
                t = np.where(x.any(1), x.argmax(1), -1).astype(np.int64)
                found.setdefault(t.tobytes(), t)
                if len(found) >= cap or time.perf_counter() >= deadline - RESERVE_S - SCORE_RESERVE_S:
                    self.stopped_early = True
                    self.StopSearch()

        left = deadline - RESERVE_S - SCORE_RESERVE_S - time.perf_counter()
        status = None
        cb = Cb()
        if left > 0:
            solver = cp_model.CpSolver()
            solver.parameters.enumerate_all_solutions = True
            solver.parameters.num_workers = 1
            # no LP relaxation: enumeration is pure propagation, ~30× more solutions per second
            solver.parameters.linearization_level = 0
            solver.parameters.random_seed = self.seed
            solver.parameters.max_time_in_seconds = left
            status = solver.Solve(model, cb)
        complete = status == cp_model.OPTIMAL and not cb.stopped_early
        stats = {"enumerated": len(found), "complete": bool(complete)}
        elapsed = budget.elapsed_ms()
        if not found:
            if status == cp_model.INFEASIBLE:
                return problem.solution(None, "infeasible", self.name, elapsed, stats=stats)
            return problem.solution(None, "no_solution", self.name, elapsed, stats=stats)
        T = np.stack(list(found.values()))
        T = T[problem.checker.feasible(T)]
        if T.shape[0] == 0:  # only reachable if integer scaling loosened a row
            return problem.solution(None, "no_solution", self.name, budget.elapsed_ms(), stats=stats)
        vals = problem.objectives(T)
        # the batch evaluator runs in float32: settle near-ties in float64
        top = np.flatnonzero(vals >= vals.max() - 1e-4 * max(1.0, abs(vals.max())))
        exact = [problem.objective(T[k]) for k in top]
        best = T[top[int(np.argmax(exact))]]
        status_out = "optimal" if complete else "feasible"
        return problem.solution(best, status_out, self.name, budget.elapsed_ms(), stats=stats)
