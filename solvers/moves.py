"""Score a whole neighbourhood at once: every candidate's head pre-activation and rules broken, compiled.

:func:`~mgmatch.solvers.tabu.tabu_search` scores ~2 000 neighbours per iteration on a 12v12 pool
(team swaps, bench swaps, three-player rotations). With the objective batch and the vectorized
checker (:class:`~mgmatch.core.checker.Checker`, one numpy pass per rule) one iteration took
1.5–2.5 ms, so a 20 ms solve walked 4–8 steps. Here one compiled pass (numba) scores them all
from the few players each move changes:

- **objective**: the head's first layer is linear in the team sums,
  ``W₁·concat_j(Σ_{i∈team j} e_i) + b₁ = b₁ + Σ_i L[i, team(i)]`` with ``L[i, j] = W₁[:, block j]·e_i``,
  so a move changes the pre-activation by one ``L`` difference per moved player; the rest of the
  head runs in numpy on the whole batch;
- **rules**, read from the spec as the checker reads them (not from the MIP's compiled form,
  whose auxiliaries are not functions of the assignment): every rule that is linear in
  "player i sits at position p" (team j or the bench) is a row ``lo ≤ Σ_i C[i, pos_i] ≤ hi``
  (linear rules, Hall's condition of ``roles``, ``role_min``/``role_max``, ``skill_balance``,
  ``avoid``, ``include``), with the checker's tolerances; a move updates only the rows its players
  touch. ``if`` rules evaluate their condition (a postfix program of literals, AND and OR) and
  their row; ``skill_spread``, ``max_ping`` (per-region counts of far players), ``party_together``
  and the team sizes are checked directly.

``broken`` counts violated rows and rules (a ``roles`` rule counts each Hall row it breaks), so it
is 0 exactly when the checker accepts the candidate, up to float rounding at a bound; callers
still confirm an answer with the checker and its exact float64 objective before keeping it.
One 12v12 iteration (2 220 candidates) takes ~0.2 ms here instead of ~2 ms.

With few rows (:data:`DENSE_ROWS`) every row is checked per move, branch-free (a row is broken when
``max(lo − a, a − hi) > 0``, and that distance is its excess), and an ``if`` rule reads its row's verdict
from that pass (only its condition is evaluated, and only when the move names one of its players). The
kernel is compiled with float reassociation (not ``fastmath``'s no-inf/no-NaN: the bounds hold infinities):
its sums vectorize; the ranking values may differ from a sequential sum in the last bits, which the
exact float64 objective of an answer does not. Measured with ``python scripts/tabu-pace.py --preset P``
(µs per tabu iteration, with :func:`choose` compiled too and the head's products in place): 12v12
~278 → ~195, 12v12-deep ~1 130 → ~640, 3v3 ~121 → ~84.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import combinations
from typing import NamedTuple

import numpy as np

from mgmatch.core.checker import tolerance
from mgmatch.core.problem import Problem
from mgmatch.core.rules import (
    All,
    AnyOf,
    AvoidRule,
    IfRule,
    IncludeRule,
    LinearExpr,
    LinearRule,
    Lit,
    MaxPingRule,
    Not,
    PartyTogetherRule,
    RoleMaxRule,
    RoleMinRule,
    RolesRule,
    RuleVisitor,
    SkillBalanceRule,
    SkillSpreadRule,
)

from .move_kernels import DENSE_ROWS, OP_AND, OP_LIT, OP_OR, _fill, _score, choose

__all__ = ["Moves", "MoveScorer", "Scored", "choose", "neighbourhood", "scorer_of", "warm"]


class Scored(NamedTuple):
    """A neighbourhood scored by :meth:`MoveScorer.score`, one entry per move."""

    vals: np.ndarray     # objective values [M] (rank with them; report :meth:`Problem.objective`)
    broken: np.ndarray   # rows and rules broken [M] (0: the checker accepts it, up to float rounding)
    tabu: np.ndarray     # a moved player is tabu [M]
    excess: np.ndarray   # how far outside their bounds the broken rows are, each in its scale, plus
                         # the far players of the nearest ping region [M] (0 when feasible)


class _RuleRows(RuleVisitor[None]):
    """Each rule kind as the move scorer's position rows (through ``new_row``, ``add`` and ``linear`` of
    :class:`MoveScorer`'s construction), the condition programs of ``if`` rules, and the tightest skill
    spread; ``party_together`` and ``max_ping`` are scored from the checker's tables instead of rows."""

    def __init__(self, new_row, add, linear, chk, index: dict[str, int], N: int, D: int, sizes: np.ndarray,
                 skill: np.ndarray) -> None:
        self.new_row, self.add, self.linear = new_row, add, linear
        self.chk, self.index, self.N, self.D, self.sizes, self.skill = chk, index, N, D, sizes, skill
        self.if_row: list[int] = []
        self.if_ptr = [0]
        self.ops: list[tuple[int, int, int, bool]] = []
        self.spread = -1.0

    def visit_linear(self, rule: LinearRule) -> None:
        self.linear(rule.expr)

    def visit_if(self, rule: IfRule) -> None:
        f = len(self.if_row)
        self.if_row.append(self.linear(rule.then, cond=f))
        MoveScorer._program(rule.when, self.index, self.D, self.ops)
        self.if_ptr.append(len(self.ops))

    def visit_roles(self, rule: RolesRule) -> None:  # the checker's Hall rows, one per role subset and team
        can, need, none = self.chk.hall(rule)
        for s in range(need.size):
            for j in range(self.D):
                self.add(np.flatnonzero(can[:, s]), j, self.new_row(float(need[s]) - 0.5, np.inf), 1.0)
        for j in range(self.D):
            self.add(np.flatnonzero(none), j, self.new_row(-np.inf, 0.5), 1.0)

    def visit_role_min(self, rule: RoleMinRule) -> None:
        members = np.flatnonzero(self.chk.accepts(rule.role))
        for j in range(self.D):
            self.add(members, j, self.new_row(rule.min - 0.5, np.inf), 1.0)

    def visit_role_max(self, rule: RoleMaxRule) -> None:
        members = np.flatnonzero(self.chk.accepts(rule.role))
        for j in range(self.D):
            self.add(members, j, self.new_row(-np.inf, rule.max + 0.5), 1.0)

    def visit_skill_balance(self, rule: SkillBalanceRule) -> None:
        bound = rule.max_diff + tolerance(rule.max_diff)
        for j, m in combinations(range(self.D), 2):
            r = self.new_row(-bound, bound)
            self.add(np.arange(self.N), j, r, self.skill / self.sizes[j])
            self.add(np.arange(self.N), m, r, -self.skill / self.sizes[m])

    def visit_skill_spread(self, rule: SkillSpreadRule) -> None:
        s = rule.max_spread + tolerance(rule.max_spread)
        self.spread = s if self.spread < 0 else min(self.spread, s)

    def visit_party_together(self, rule: PartyTogetherRule) -> None:
        pass  # scored from the checker's party lists

    def visit_avoid(self, rule: AvoidRule) -> None:
        a_, b_ = (self.index[p] for p in rule.players)
        if rule.scope == "team":
            for j in range(self.D):
                r = self.new_row(-np.inf, 1.5)
                self.add(a_, j, r, 1.0)
                self.add(b_, j, r, 1.0)
        else:
            r = self.new_row(-np.inf, 1.5)
            for j in range(self.D):
                self.add(a_, j, r, 1.0)
                self.add(b_, j, r, 1.0)

    def visit_max_ping(self, rule: MaxPingRule) -> None:
        pass  # scored from the checker's ping table

    def visit_include(self, rule: IncludeRule) -> None:
        for p in rule.players:
            r = self.new_row(0.5, np.inf)
            for j in range(self.D):
                self.add(self.index[p], j, r, 1.0)


class MoveScorer:
    """Per problem: the first-layer terms, the rules as position rows and programs; then
    :meth:`score` scores batches of candidate assignments against a current one."""

    def __init__(self, problem: Problem) -> None:
        inst = problem.instance
        self.problem = problem
        N, D = inst.n, inst.teams
        self.N, self.D = N, D
        P = D + 1
        layers = [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64))
                  for w, b in problem.model.head_weights]
        (w1, b1), self.rest = layers[0], layers[1:]
        self.rest32 = [(np.ascontiguousarray(w, dtype=np.float32), b.astype(np.float32)) for w, b in self.rest]
        # the layers after the first with their ReLUs dropped: one vector [H1] (:meth:`head` with
        # ``proxy``, for walks that have no feasible assignment yet)
        lin = np.eye(w1.shape[0])
        for w, _ in self.rest:
            lin = w @ lin
        self.lin32 = np.ascontiguousarray(lin[0], dtype=np.float32)
        E = np.asarray(problem.embeddings, dtype=np.float64)
        e = E.shape[1]
        L = np.zeros((N, P, w1.shape[0]))
        for j in range(D):
            L[:, j, :] = E @ w1[:, j * e:(j + 1) * e].T
        self.L, self.b1 = L, b1
        index = inst.index
        # rows: entries (player, position, row, coef)
        ent_i: list = []
        ent_p: list = []
        ent_r: list = []
        ent_c: list = []
        lo: list[float] = []
        hi: list[float] = []
        row_if: list[int] = []

        def new_row(low: float, high: float, cond: int = -1) -> int:
            lo.append(low)
            hi.append(high)
            row_if.append(cond)
            return len(lo) - 1

        # entries are gathered in plain lists and become arrays once (four small arrays per call cost
        # ~0.5 ms of a 12v12 pool's ~45 calls: the scorer is built inside each solve's budget)
        def add(i, p, r: int, c) -> None:
            """Entries for players ``i`` at positions ``p`` in row r (scalars or arrays)."""
            if isinstance(i, (int, np.integer)):
                ent_i.append(int(i))
                ent_p.append(int(p))
                ent_r.append(r)
                ent_c.append(float(c))
                return
            i = np.asarray(i, dtype=np.int64).reshape(-1)
            k = i.size
            ent_i.extend(i.tolist())
            ent_p.extend(np.broadcast_to(np.asarray(p, dtype=np.int64), (k,)).tolist())
            ent_r.extend([r] * k)
            ent_c.extend(np.broadcast_to(np.asarray(c, dtype=np.float64), (k,)).tolist())

        def linear(expr: LinearExpr, cond: int = -1) -> int:
            t = tolerance(expr.rhs)
            low = expr.rhs - t if expr.sense in (">=", "==") else -np.inf
            high = expr.rhs + t if expr.sense in ("<=", "==") else np.inf
            r = new_row(low, high, cond)
            for term in expr.terms:
                if term.team < D:  # a term on a team the match does not have is never active
                    ent_i.append(index[term.player])
                    ent_p.append(term.team)
                    ent_r.append(r)
                    ent_c.append(float(term.coef))
            return r

        chk = problem.checker  # its role, Hall, skill, ping and party tables (the pipeline builds it anyway)
        skill = np.ascontiguousarray(chk.skill, dtype=np.float64)
        sizes = np.asarray(inst.sizes, dtype=np.int64)
        rows = _RuleRows(new_row, add, linear, chk, index, N, D, sizes, skill)
        for rule in inst.rules:
            rows.visit(rule)
        if_row, if_ptr, ops, spread = rows.if_row, rows.if_ptr, rows.ops, rows.spread
        # CSR by (player, position)
        def flat(parts: list, dtype) -> np.ndarray:
            return np.asarray(parts, dtype=dtype) if parts else np.zeros(0, dtype=dtype)

        ent_i, ent_p, ent_r, ent_c = (flat(ent_i, np.int64), flat(ent_p, np.int64), flat(ent_r, np.int64),
                                      flat(ent_c, np.float64))
        nz = ent_c != 0.0
        ent_i, ent_p, ent_r, ent_c = ent_i[nz], ent_p[nz], ent_r[nz], ent_c[nz]
        # a row's scale: its largest coefficient (one player's worth), or its width when narrower
        # (skill balance: a band of ±max_diff); how far a broken row is outside, in these units,
        # tells the search which rule-breaking neighbours are nearer to feasible
        R = len(lo)
        scale = np.zeros(R)
        np.maximum.at(scale, ent_r, np.abs(ent_c))
        width = np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64)
        narrow = np.isfinite(width) & (width > 0) & (width < scale)
        scale[narrow] = width[narrow]
        self.rscale = np.where(scale > 0, scale, 1.0)
        key = ent_i * P + ent_p
        order = np.argsort(key, kind="stable")
        self.ptr = np.searchsorted(key[order], np.arange(N * P + 1)).astype(np.int64)
        self.ridx = ent_r[order]
        self.rcoef = ent_c[order]
        # with few rows, their coefficients dense [N, P, R] (one vector update per moved player)
        if 0 < R <= DENSE_ROWS:
            self.Lr = np.bincount(key * R + ent_r, weights=ent_c, minlength=N * P * R).reshape(N, P, R)
        else:
            self.Lr = np.zeros((N, P, 0))
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = np.asarray(hi, dtype=np.float64)
        self.row_if = np.asarray(row_if, dtype=np.int64)
        self.if_row = np.asarray(if_row, dtype=np.int64)
        self.if_ptr = np.asarray(if_ptr, dtype=np.int64)
        self.op_code = np.asarray([o[0] for o in ops], dtype=np.int64)
        self.op_a = np.asarray([o[1] for o in ops], dtype=np.int64)
        self.op_b = np.asarray([o[2] for o in ops], dtype=np.int64)
        self.op_neg = np.asarray([o[3] for o in ops], dtype=np.bool_)
        # player → the if rules whose condition names him
        named = sorted({(int(ops[o][1]), f) for f in range(len(if_row))
                        for o in range(if_ptr[f], if_ptr[f + 1]) if ops[o][0] == OP_LIT})
        self.pif_ptr = np.searchsorted(np.asarray([a for a, _ in named], dtype=np.int64), np.arange(N + 1)).astype(np.int64)
        self.pif = np.asarray([f for _, f in named], dtype=np.int64)
        self.sizes, self.skill, self.spread = sizes, skill, float(spread)
        if chk.max_ping is None:  # the tightest max_ping rule (the match has one host region)
            self.far = np.zeros((N, 0))
            self.has_ping = False
        else:
            self.far = np.ascontiguousarray(chk.far, dtype=np.float64)
            self.has_ping = True
        groups = list(chk.parties.values()) if any(isinstance(r, PartyTogetherRule) for r in inst.rules) else []
        self.party_ptr = np.cumsum([0] + [len(m) for m in groups]).astype(np.int64)
        self.party_members = np.asarray([i for m in groups for i in m], dtype=np.int64)
        self.party_of = np.full(N, -1, dtype=np.int64)
        for k, m in enumerate(groups):
            self.party_of[m] = k

    @staticmethod
    def _program(c, index: dict[str, int], D: int, ops: list, neg: bool = False) -> None:
        """Append the postfix program of condition ``c`` (NOT pushed onto the literals)."""
        if isinstance(c, Lit):
            # a literal on a team the match does not have is never true: position D+1 never occurs
            ops.append((OP_LIT, index[c.player], c.team if c.team < D else D + 1, neg))
            return
        if isinstance(c, Not):
            MoveScorer._program(c.arg, index, D, ops, not neg)
            return
        is_and = isinstance(c, All)
        assert is_and or isinstance(c, AnyOf)
        for a in c.args:
            MoveScorer._program(a, index, D, ops, neg)
        # De Morgan: NOT(AND) = OR of NOTs
        ops.append((OP_AND if is_and != neg else OP_OR, -1, len(c.args), False))

    def score(self, cur: np.ndarray, moves: Moves, until: np.ndarray | None = None, it: int = 0,
              proxy: bool = False) -> Scored:
        """The moves from ``cur`` [N] scored: see :class:`Scored` (tabu: a moved player has ``until > it``).
        ``proxy``: ``vals`` from the first layer and the linearized rest (:meth:`head`)."""
        M = moves.ptr.size - 1
        z = np.empty((M, self.b1.shape[0]), dtype=np.float32)  # ranking values: float32 is enough
        broken = np.empty(M, dtype=np.int64)
        excess = np.empty(M, dtype=np.float64)
        tabu = np.empty(M, dtype=np.bool_)
        if until is None:
            until = np.zeros(self.N, dtype=np.int64)
        _score(np.ascontiguousarray(cur, dtype=np.int64), moves.ptr, moves.player, moves.team,
               np.ascontiguousarray(until, dtype=np.int64), int(it), self.D, self.L, self.Lr, self.b1, self.ptr, self.ridx,
               self.rcoef, self.lo, self.hi, self.row_if, self.if_row, self.if_ptr, self.op_code, self.op_a,
               self.op_b, self.op_neg, self.pif_ptr, self.pif, self.sizes, self.skill, self.spread, self.far, self.has_ping,
               self.party_of, self.party_ptr, self.party_members, self.rscale, z, broken, excess, tabu)
        with np.errstate(over="ignore", invalid="ignore"):
            vals = self.head(z, proxy)
        return Scored(vals, broken, tabu, excess)

    def head(self, z: np.ndarray, proxy: bool = False) -> np.ndarray:
        """Engagement [M] from first-layer pre-activations [M, H]; with ``proxy``, a ranking value
        only: the first layer's ReLU, then the later layers as one linear map (a 64-64 head's second
        layer was a third of a tabu iteration on 12v12-deep pools of 100 candidates)."""
        if not self.rest:
            return z[:, 0].astype(np.float64)
        if proxy:
            return (np.maximum(z, np.float32(0.0)) @ self.lin32).astype(np.float64)
        h = np.maximum(z, np.float32(0.0))
        for k, (w, b) in enumerate(self.rest32):  # float32 (BLAS), as Problem.objectives does
            h = h @ w.T
            h += b  # in place: on pools of 100 candidates the head's temporaries cost as much as its products
            if k < len(self.rest32) - 1:
                np.maximum(h, np.float32(0.0), out=h)
        return h[:, 0].astype(np.float64)


@dataclass
class Moves:
    """A batch of moves as lists of changes: move m sets ``team[ptr[m]:ptr[m+1]]`` (−1: the bench)
    for ``player[ptr[m]:ptr[m+1]]``."""

    ptr: np.ndarray
    player: np.ndarray
    team: np.ndarray

    def __len__(self) -> int:
        return self.ptr.size - 1

    def apply(self, cur: np.ndarray, m: int) -> np.ndarray:
        """The assignment after move ``m`` (a copy)."""
        out = np.array(cur, dtype=np.int64, copy=True)
        s, e = self.ptr[m], self.ptr[m + 1]
        out[self.player[s:e]] = self.team[s:e]
        return out

    def players(self, m: int) -> np.ndarray:
        return self.player[self.ptr[m]:self.ptr[m + 1]]


def neighbourhood(cur: np.ndarray, units: list[np.ndarray], rotations: int = 0,
                  rng: np.random.Generator | None = None, party_draws: int = 0, teams: int | None = None) -> Moves:
    """The polish neighbourhood (team swaps, bench swaps, party swaps: a whole party with another
    of its size elsewhere) and, with ``rotations`` > 0, at most that many three-player rotations (a benched player
    k takes selected i's slot, i takes the slot of q on another team, q goes to the bench; a
    seeded random draw, with repeats, when there are more), and with ``party_draws`` > 0 that many
    **party exchanges** per party and position (``teams`` teams and the bench; for a whole party,
    every other position): the party's members not there yet move there, and as many players of no
    party from there (a seeded draw) take their places. A benched party that a rule needs
    (``include``) or a selected party far from the host region otherwise comes in or goes out only
    one member at a time, through states that split it; and a split party is gathered in one move
    (one member at a time, the count of members away from the party's position does not fall until
    the last one moves: on 2 of 12 12v12 pools of 90–100 candidates tabu search walked 640
    iterations with a split party as the one broken rule)."""
    t = np.ascontiguousarray(cur, dtype=np.int64)
    sel = np.flatnonzero(t >= 0)
    bench = np.flatnonzero(t < 0)
    S, Bn = sel.size, bench.size
    n_pairs = S * S - int((np.bincount(t[sel]) ** 2).sum()) if S else 0
    total = n_pairs * Bn
    if rotations > 0 and total > rotations:
        picks = (rng or np.random.default_rng(0)).integers(0, total, size=rotations).astype(np.int64)
    elif rotations > 0:
        picks = np.arange(total, dtype=np.int64)
    else:
        picks = np.zeros(0, dtype=np.int64)
    sizes = [u.size for u in units]
    unit_ptr = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum(sizes, out=unit_ptr[1:])
    members = np.concatenate(units).astype(np.int64) if units else np.zeros(0, dtype=np.int64)
    D = int(t.max()) + 1 if teams is None else int(teams)
    solo = np.ones(t.size, dtype=np.bool_)
    solo[members] = False
    samples = int(party_draws) if units else 0
    draws = ((rng or np.random.default_rng(0)).integers(0, 1 << 30, size=samples * (D + 1) * int(members.size))
             if samples else np.zeros(1, dtype=np.int64)).astype(np.int64)
    n_moves = S * (S - 1) // 2 + S * Bn + len(units) ** 2 + picks.size + samples * (D + 1) * len(units)
    n_entries = (S * (S - 1) + 2 * S * Bn + 2 * len(units) * int(members.size) + 3 * picks.size
                 + 2 * samples * (D + 1) * int(members.size))
    ptr = np.empty(n_moves + 1, dtype=np.int64)
    pl = np.empty(n_entries, dtype=np.int64)
    tm = np.empty(n_entries, dtype=np.int64)
    m, e = _fill(t, sel, bench, unit_ptr, members, picks, D, solo, samples, draws, ptr, pl, tm)
    return Moves(ptr[:m + 1], pl[:e], tm[:e])


_WARM = threading.Lock()
_warmed = False


def warm() -> None:
    """Compile (or load from numba's cache) the scoring kernel now, not inside a timed solve."""
    global _warmed
    if _warmed:
        return
    with _WARM:
        if _warmed:
            return
        cur = np.asarray([0, -1], dtype=np.int64)
        moves = Moves(np.asarray([0, 2], dtype=np.int64), np.asarray([0, 1], dtype=np.int64),
                      np.asarray([-1, 0], dtype=np.int64))
        i64 = np.zeros(1, dtype=np.int64)
        e64 = np.zeros(0, dtype=np.int64)
        _score(cur, moves.ptr, moves.player, moves.team, np.zeros(2, dtype=np.int64), 0, 1, np.zeros((2, 2, 1)),
               np.zeros((2, 2, 0)),
               np.zeros(1), np.zeros(5, dtype=np.int64), e64, np.zeros(0), np.zeros(0), np.zeros(0), e64,
               e64, i64, e64, e64, e64, np.zeros(0, dtype=np.bool_), np.zeros(3, dtype=np.int64), e64,
               np.ones(1, dtype=np.int64), np.zeros(2), -1.0,
               np.zeros((2, 0)), False, np.full(2, -1, dtype=np.int64), i64, e64, np.zeros(0),
               np.zeros((1, 1), dtype=np.float32), np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1, dtype=np.bool_))
        neighbourhood(cur, [np.asarray([0, 1])], rotations=1, party_draws=1, teams=1)
        choose(np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.bool_), np.zeros(1), 1.0, 0.0)
        _warmed = True


def scorer_of(problem: Problem) -> MoveScorer:
    """The problem's :class:`MoveScorer`, built once per problem (kept in ``problem.extra``)."""
    warm()
    scorer = problem.extra.get("move_scorer")
    if scorer is None:
        scorer = problem.extra["move_scorer"] = MoveScorer(problem)
    return scorer
