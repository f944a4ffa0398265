"""Exhaustive, vectorized search over every team formation of an instance.

An assignment is generated as (bench set, team pattern): the bench is chosen among the players
that may sit out, then the selected players (in index order) get a team pattern, a sequence of
team labels with ``sizes[j]`` copies of j. Teams are ordered (the engagement head is not
symmetric), so every pattern is distinct. Chunks of assignments are filtered by the one checker
and scored by the numpy evaluator.

Free pruning, each only removing assignments the checker would reject:

- players that can never be selected (``roles`` without an accepted slot role, ``role_max`` 0 of
  an accepted role, ``max_ping`` with no region within the limit) stay on the bench;
- players named by ``include`` are never benched;
- with ``party_together``, bench sets that split a party are skipped.

:func:`count_assignments` is the exact number of assignments the search generates (party filter
included): (bench sets) · S! / Π_j K_j!, where without parties the bench sets are C(|free|, |pool| − S).

Each batch first goes through the compiled linear rows that involve only x (one matrix product;
they encode their rules exactly, see :mod:`mgmatch.core.compiler`), and only the survivors are
judged by the checker, whose verdict alone decides feasibility.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, islice

import numpy as np

from mgmatch.core.compiler import ORIGIN_ONE_TEAM, ORIGIN_TEAM_SIZE, parties
from mgmatch.core.problem import Problem
from mgmatch.core.rules import (
    IncludeRule,
    MaxPingRule,
    PartyTogetherRule,
    RoleMaxRule,
    RolesRule,
    RuleVisitor,
)

#: assignments per checker/evaluator batch (≈ 2–4 MB of int8 per batch at N ≈ 10–40)
CHUNK = 65536
#: candidates within this (relative) distance of a batch's float32 best are re-scored in float64
_RESCORE = 1e-5


@dataclass
class Space:
    """The search space after free pruning."""

    n: int
    sizes: tuple[int, ...]
    pool: np.ndarray       # players that may be selected
    free: np.ndarray       # pool players that may also be benched (pool minus include)
    n_bench: int           # how many pool players sit out
    parties: list[np.ndarray]

    @property
    def n_selected(self) -> int:
        return sum(self.sizes)

    def count(self) -> int:
        """Exact number of assignments generated (0 when the pruning proves infeasibility).

        Bench sets: ways to bench ``n_bench`` of the free players with every party wholly in or
        out (a party with a never-selectable member is benched whole, one with an included
        member selected whole): the coefficient of z^n_bench in Π_party (1 + z^size)·(1 + z)^singles.
        Times the team patterns of the selected players.
        """
        if self.n_bench < 0 or self.n_bench > len(self.free):
            return 0
        in_free = np.zeros(self.n, dtype=bool)
        in_free[self.free] = True
        in_pool = np.zeros(self.n, dtype=bool)
        in_pool[self.pool] = True
        need, singles = self.n_bench, int(in_free.sum())
        blocks = []
        for members in self.parties:
            if not in_pool[members].all():    # benched whole: its pool members take bench seats
                forced = int(in_pool[members].sum())
                if not in_free[members][in_pool[members]].all():
                    return 0                  # … but one of them is included: never feasible
                need -= forced
                singles -= forced
            elif not in_free[members].all():  # selected whole
                singles -= int(in_free[members].sum())
            else:
                blocks.append(len(members))
                singles -= len(members)
        total = sum(blocks) + singles
        if need < 0 or need > total:
            return 0
        # Π(1 + z^size) is palindromic: benching `need` of them ≡ keeping the other total − need, so
        # the smaller side is counted (a 9,600-candidate pool took 31 s over the bench side, whose
        # degree grows with the pool; the kept side is about the team slots)
        need = min(need, total - need)
        poly = np.zeros(need + 1, dtype=object)
        poly[0] = 1
        for size in blocks:
            if size <= need:
                poly[size:] = poly[size:] + poly[:need + 1 - size]
        # the singles at once: z^k from (1 + z)^singles comes C(singles, k) ways
        return sum(int(poly[need - k]) * math.comb(singles, k) for k in range(need + 1)) * multinomial(self.sizes)


def multinomial(sizes: tuple[int, ...] | list[int]) -> int:
    """Number of team patterns: (Σ K)! / Π K!."""
    out, total = 1, 0
    for k in sizes:
        total += k
        out *= math.comb(total, k)
    return out


class _Excluded(RuleVisitor[None]):
    """The players the rules keep off every team (``never``) or on one (``must``), from the kinds that
    decide it on their own; every other kind leaves the search space as it is."""

    def __init__(self, problem: Problem) -> None:
        inst = problem.instance
        self.problem = problem
        self.index = inst.index
        self.roles = [tuple(p.roles or ()) for p in inst.players]
        self.never = np.zeros(inst.n, dtype=bool)
        self.must = np.zeros(inst.n, dtype=bool)

    def other(self, rule, *args, **kwargs) -> None:
        return None

    def visit_roles(self, rule: RolesRule) -> None:
        slot_roles = {r for r, c in rule.slots.items() if c > 0}
        self.never |= np.asarray([not (slot_roles & set(rs)) for rs in self.roles])

    def visit_role_max(self, rule: RoleMaxRule) -> None:
        if rule.max == 0:
            self.never |= np.asarray([rule.role in rs for rs in self.roles])

    def visit_max_ping(self, rule: MaxPingRule) -> None:
        ck = self.problem.checker
        if ck.ping.shape[1] == 0:
            self.never[:] = True
        else:
            self.never |= ~(ck.ping <= ck.max_ping + 1e-6 * max(1.0, abs(ck.max_ping))).any(1)

    def visit_include(self, rule: IncludeRule) -> None:
        for pid in rule.players:
            self.must[self.index[pid]] = True


def search_space(problem: Problem) -> Space:
    inst = problem.instance
    N = inst.n
    out = _Excluded(problem)
    for rule in inst.rules:
        out.visit(rule)
    never, must = out.never, out.must
    pool = np.flatnonzero(~never)
    free = np.flatnonzero(~never & ~must)
    n_bench = len(pool) - inst.n_selected
    if (must & never).any():
        n_bench = -1  # a required player can never play: nothing is feasible
    groups = []
    if any(isinstance(r, PartyTogetherRule) for r in inst.rules):
        groups = [np.asarray(m) for m in parties(inst).values()]
    return Space(N, tuple(inst.sizes), pool, free, n_bench, groups)


def count_assignments(problem: Problem) -> int:
    """Exact number of assignments :func:`assignments` generates for this problem."""
    return search_space(problem).count()


@lru_cache(maxsize=256)
def _combos(r: int, k: int) -> np.ndarray:
    return np.asarray(list(combinations(range(r), k)), dtype=np.int64).reshape(-1, k)


def _expand(T: np.ndarray, k: int, label: int) -> np.ndarray:
    """Give ``label`` to k of the unlabelled (−1) positions of every row, in every way."""
    B = T.shape[0]
    R = int((T[0] == -1).sum())
    combos = _combos(R, k)
    C = len(combos)
    free = np.argsort(T != -1, axis=1, kind="stable")[:, :R]  # [B, R] unlabelled positions
    out = np.repeat(T, C, axis=0)
    chosen = free[:, combos].reshape(B * C, k)
    out[np.arange(B * C)[:, None], chosen] = label
    return out


def patterns(sizes: tuple[int, ...], chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """Every team pattern of Σ sizes positions, in chunks of at most ~``chunk`` rows.

    Shapes: yields int8 [m, S]; entry s is the team of the s-th selected player.
    """
    S = sum(sizes)

    def rec(T: np.ndarray, j: int) -> Iterator[np.ndarray]:
        if j == len(sizes):
            yield T
            return
        rest = multinomial(sizes[j:])
        if T.shape[0] * rest <= chunk:
            for jj in range(j, len(sizes)):
                T = _expand(T, sizes[jj], jj)
            yield T
            return
        if T.shape[0] > 1:
            for r in range(T.shape[0]):
                yield from rec(T[r:r + 1], j)
            return
        T2 = _expand(T, sizes[j], j)
        step = max(1, chunk // max(1, multinomial(sizes[j + 1:])))
        for s in range(0, T2.shape[0], step):
            yield from rec(T2[s:s + step], j + 1)

    yield from rec(np.full((1, S), -1, dtype=np.int8), 0)


def assignments(space: Space, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """Every candidate assignment, in chunks. Shapes: yields int8 team_of [B, N]."""
    if space.count() == 0:
        return
    S = space.n_selected
    M = multinomial(space.sizes)
    in_pool = np.zeros(space.n, dtype=bool)
    in_pool[space.pool] = True
    bench_iter = combinations(space.free.tolist(), space.n_bench)
    pats = next(patterns(space.sizes, chunk)) if M <= chunk else None
    per = max(1, chunk // M) if pats is not None else 1
    while True:
        block = list(islice(bench_iter, per))
        if not block:
            return
        bench = np.asarray(block, dtype=np.int64).reshape(len(block), space.n_bench)
        selected = np.ones((bench.shape[0], space.n), dtype=bool)
        selected[:, ~in_pool] = False
        selected[np.arange(bench.shape[0])[:, None], bench] = False
        for members in space.parties:  # a party is wholly selected or wholly benched
            k = selected[:, members].sum(1)
            selected = selected[(k == 0) | (k == len(members))]
        if selected.shape[0] == 0:
            continue
        sel = np.nonzero(selected)[1].reshape(-1, S)  # [b, S] selected players, index order
        b = sel.shape[0]
        for P in ([pats] if pats is not None else patterns(space.sizes, chunk)):
            m = P.shape[0]
            T = np.full((b, m, space.n), -1, dtype=np.int8)
            T[np.arange(b)[:, None, None], np.arange(m)[None, :, None], sel[:, None, :]] = P[None]
            yield T.reshape(b * m, space.n)


def objectives64(problem: Problem, T: np.ndarray) -> np.ndarray:
    """Engagement of a batch in float64 (the batch evaluator is float32). Shapes: [B, N] → [B]."""
    E = problem.embeddings
    team_emb = np.concatenate([(T == j).astype(np.float64) @ E for j in range(problem.instance.teams)], axis=1)
    return problem.model.head(team_emb)


@dataclass
class SearchResult:
    team_of: np.ndarray | None
    objective: float | None
    complete: bool      # every assignment was examined
    examined: int
    feasible: int


class RowFilter:
    """The compiled linear rows over x only, as one dense matrix: a cheap necessary test.

    The structural rows (one team per player, team sizes) hold by construction and are left
    out. Evaluated in float32 with a tolerance above float32's rounding, so it never rejects
    an assignment the checker would accept; the checker then judges the survivors.
    """

    def __init__(self, problem: Problem) -> None:
        c = problem.compiled
        rows = [r for r in c.rows if r.vars.size and int(r.vars.max()) < c.n_x
                and r.origin not in (ORIGIN_ONE_TEAM, ORIGIN_TEAM_SIZE)]
        self.D = c.n_teams
        A = np.zeros((len(rows), c.n_x), dtype=np.float64)
        for k, r in enumerate(rows):
            A[k, r.vars] = r.coefs
        # per team: A_j [N, rows] (x_ij is column i·D + j), so act = Σ_j (T == j) @ A_j without a
        # [B, N, D] one-hot
        At = A.T.astype(np.float32)
        self.A_team = [np.ascontiguousarray(At[j::self.D]) for j in range(self.D)]
        rhs = np.asarray([r.rhs for r in rows])
        tol = 1e-6 * np.maximum(1.0, np.abs(rhs)) + 1e-5 * np.abs(A).sum(1)
        sense = [r.sense for r in rows]
        self.hi = np.where([s_ in ("<=", "==") for s_ in sense], rhs + tol, np.inf).astype(np.float32)
        self.lo = np.where([s_ in (">=", "==") for s_ in sense], rhs - tol, -np.inf).astype(np.float32)

    def __call__(self, T: np.ndarray) -> np.ndarray:
        """bool [B]: which assignments pass every x-only row."""
        if self.hi.size == 0:
            return np.ones(T.shape[0], dtype=bool)
        act = (T == 0).astype(np.float32) @ self.A_team[0]
        for j in range(1, self.D):
            act += (T == j).astype(np.float32) @ self.A_team[j]
        return ((act <= self.hi) & (act >= self.lo)).all(1)


def best_assignment(problem: Problem, deadline: float | None = None, chunk: int = CHUNK,
                    handover: float | None = None, empty_handover: bool = False) -> SearchResult:
    """Max engagement over every feasible assignment; stops early at ``deadline`` (perf_counter),
    or at ``handover`` once it has found a feasible one (for a caller that goes on from it), or at
    ``handover`` whatever it found with ``empty_handover`` (a caller with another way to find one).

    Batches are scored in float32; the candidates near a batch's best are re-scored in float64,
    so the returned objective is the exact evaluator's.
    """
    import time

    space = search_space(problem)
    prefilter = RowFilter(problem)
    best_t, best_v = None, -np.inf
    examined = n_feas = 0
    for T in assignments(space, chunk):
        now = time.perf_counter()
        if (deadline is not None and now >= deadline) or (handover is not None and now >= handover
                                                         and (best_t is not None or empty_handover)):
            return SearchResult(best_t, None if best_t is None else best_v, False, examined, n_feas)
        examined += T.shape[0]
        T = T[prefilter(T)]
        if T.shape[0] == 0:
            continue
        ok = problem.checker.feasible(T)
        if not ok.any():
            continue
        F = T[ok]
        n_feas += F.shape[0]
        v = problem.objectives(F)
        top = v.max()
        near = F[v >= top - _RESCORE * max(1.0, abs(top))]
        exact = objectives64(problem, near)
        r = int(np.argmax(exact))
        if exact[r] > best_v:
            best_t, best_v = near[r].astype(np.int64), float(exact[r])
    return SearchResult(best_t, None if best_t is None else float(best_v), True, examined, n_feas)
