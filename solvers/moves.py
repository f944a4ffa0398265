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

import os
import tempfile
import threading
from dataclasses import dataclass
from itertools import combinations
from typing import NamedTuple

import numba
import numpy as np
from numba import njit

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

# numba caches the compiled kernel beside this file; where that folder is read-only (an installed
# package run by another user) and no cache folder is set, a private one in the temp folder
if not os.environ.get("NUMBA_CACHE_DIR") and not os.access(os.path.dirname(os.path.abspath(__file__)), os.W_OK):
    numba.config.CACHE_DIR = os.path.join(tempfile.gettempdir(), f"mgmatch-numba-{os.getuid()}")

#: with at most this many rows every row is checked per move; with more, only the rows it touches
DENSE_ROWS = 96
#: postfix program opcodes of an ``if`` condition
OP_LIT, OP_AND, OP_OR = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def _if_cond(f, newp, curp, if_ptr, op_code, op_a, op_b, op_neg, stack):  # pragma: no cover - compiled
    """The condition of ``if`` rule f at the positions ``newp`` (−1: ``curp``)."""
    o0 = if_ptr[f]
    if if_ptr[f + 1] - o0 == 1:  # one literal (the common case): no stack
        pl = op_a[o0]
        pos = newp[pl] if newp[pl] >= 0 else curp[pl]
        return (pos == op_b[o0]) != op_neg[o0]
    top = 0
    for o in range(o0, if_ptr[f + 1]):
        code = op_code[o]
        if code == 0:
            pl = op_a[o]
            pos = newp[pl] if newp[pl] >= 0 else curp[pl]
            stack[top] = (pos == op_b[o]) != op_neg[o]
            top += 1
        else:
            n = op_b[o]
            acc = stack[top - n]
            for s in range(top - n + 1, top):
                if code == 1:
                    acc = acc and stack[s]
                else:
                    acc = acc or stack[s]
            top -= n
            stack[top] = acc
            top += 1
    return stack[0]


@njit(cache=True, nogil=True, inline="always")
def _if_broken(f, newp, curp, if_row, if_ptr, op_code, op_a, op_b, op_neg, stack, act, delta, lo, hi):  # pragma: no cover
    """1 when ``if`` rule f is broken at the positions ``newp`` (−1: ``curp``), else 0."""
    if _if_cond(f, newp, curp, if_ptr, op_code, op_a, op_b, op_neg, stack):
        r = if_row[f]
        a = act[r] + delta[r]
        if a < lo[r] or a > hi[r]:
            return 1
    return 0


@njit(cache=True, nogil=True, inline="always")
def _touch(start, end, sign, ridx, rcoef, delta, touched, tl, nt):  # pragma: no cover - compiled
    """Add ``sign`` × the row entries ``start:end`` to ``delta``, listing newly touched rows in
    ``tl``; the new count of touched rows."""
    for k in range(start, end):
        r = ridx[k]
        if not touched[r]:
            touched[r] = True
            tl[nt] = r
            nt += 1
        delta[r] += sign * rcoef[k]
    return nt


@njit(cache=True, nogil=True, inline="always")
def _outside(a, lo, hi, scale):  # pragma: no cover - compiled
    """How far ``a`` lies outside [lo, hi], in units of ``scale``."""
    return ((lo - a) if a < lo else (a - hi)) / scale


@njit(cache=True, nogil=True, inline="always")
def _misplaced(k0, k1, members, newp, curp, pc):  # pragma: no cover - compiled
    """Members ``members[k0:k1]`` of a party not at its most common position (``pc``: zeros [D+1],
    left zeroed)."""
    most = 0
    for k in range(k0, k1):
        i = members[k]
        p = newp[i] if newp[i] >= 0 else curp[i]
        pc[p] += 1
        if pc[p] > most:
            most = pc[p]
    for k in range(k0, k1):
        i = members[k]
        pc[newp[i] if newp[i] >= 0 else curp[i]] = 0
    return k1 - k0 - most


@njit(cache=True, nogil=True, fastmath={'reassoc', 'nsz', 'contract', 'arcp'})
def _score(curt, ptr_m, ch_i, ch_p, until, it, D, L, Lr, b1, ptr, ridx, rcoef, lo, hi, row_if,
           if_row, if_ptr, op_code, op_a, op_b, op_neg, pif_ptr, pif, sizes, skill, spread, far, has_ping,
           party_of, party_ptr, party_members, rscale, z, broken, excess, tabu):  # pragma: no cover - compiled
    N = curt.shape[0]
    M = ptr_m.shape[0] - 1
    H = b1.shape[0]
    R = lo.shape[0]
    G = far.shape[1]
    P = D + 1
    # the current state: positions (bench = D), pre-activation, row activities, far counts, team
    # counts, broken parties, the selected players by skill
    curp = np.empty(N, np.int64)
    for i in range(N):
        curp[i] = curt[i] if curt[i] >= 0 else D
    z0 = b1.copy()
    act = np.zeros(R)
    bad0 = np.zeros(G)
    cnt0 = np.zeros(P, np.int64)
    nsel = 0
    for i in range(N):
        p = curp[i]
        cnt0[p] += 1
        for h in range(H):
            z0[h] += L[i, p, h]
        for k in range(ptr[i * P + p], ptr[i * P + p + 1]):
            act[ridx[k]] += rcoef[k]
        if p < D:
            nsel += 1
            for g in range(G):
                bad0[g] += far[i, g]
    # what moving player i to position p changes: one vector add per moved player below
    DZ = np.empty((N, P, H))
    for i in range(N):
        for p in range(P):
            for h in range(H):
                DZ[i, p, h] = L[i, p, h] - L[i, curp[i], h]
    RD = Lr.shape[2]
    DR = np.empty((N, P, RD))
    for i in range(N):
        for p in range(P):
            for r in range(RD):
                DR[i, p, r] = Lr[i, p, r] - Lr[i, curp[i], r]
    zacc = np.empty(H)
    by_skill = np.empty(nsel, np.int64)
    s_ = 0
    for i in np.argsort(skill):
        if curp[i] < D:
            by_skill[s_] = i
            s_ += 1
    cviol = np.zeros(R, np.int64)
    cexc = np.zeros(R)  # how far each plain row is outside its bounds, in its scale
    base = 0
    exc0 = 0.0
    for r in range(R):
        if act[r] < lo[r] or act[r] > hi[r]:
            cviol[r] = 1
            if row_if[r] < 0:
                base += 1
                cexc[r] = _outside(act[r], lo[r], hi[r], rscale[r])
                exc0 += cexc[r]
    n_if = if_row.shape[0]
    stack = np.zeros(max(op_code.shape[0], 1), np.bool_)
    newp = np.full(N, -1, np.int64)   # the move's position of a changed player, -1: unchanged
    fbroken = np.zeros(max(n_if, 1), np.int64)
    cond0 = np.zeros(max(n_if, 1), np.bool_)
    for f in range(n_if):
        cond0[f] = _if_cond(f, newp, curp, if_ptr, op_code, op_a, op_b, op_neg, stack)
        r = if_row[f]
        fbroken[f] = 1 if cond0[f] and (act[r] < lo[r] or act[r] > hi[r]) else 0
        base += fbroken[f]
    on = np.flatnonzero(cond0[:n_if])
    n_on = on.shape[0]
    fseen = np.zeros(max(n_if, 1), np.bool_)
    fl = np.empty(max(n_if, 1), np.int64)
    n_party = party_ptr.shape[0] - 1
    pbroken = np.zeros(n_party, np.int64)
    pexc = np.zeros(n_party, np.int64)  # members away from their party's most common position
    pc = np.zeros(P, np.int64)
    for m in range(n_party):
        pexc[m] = _misplaced(party_ptr[m], party_ptr[m + 1], party_members, newp, curp, pc)
        if pexc[m] > 0:
            pbroken[m] = 1
            base += 1
            exc0 += pexc[m]
    dense = Lr.shape[2] == R and R > 0
    plain = np.zeros(R, np.int64)
    pviol = np.zeros(R, np.int64)
    for r in range(R):
        if row_if[r] < 0:
            plain[r] = 1
            pviol[r] = cviol[r]
    # the dense check, branch-free: broken plain rows and their excess from each row's distance
    # outside, max(lo − a, a − hi) > 0 (the rows of if rules weigh 0)
    base_d = base
    exc_d = exc0
    invs = np.zeros(R)
    for r in range(R):
        base_d -= pviol[r]
        exc_d -= cexc[r]
        if plain[r]:
            invs[r] = 1.0 / rscale[r]
    wide = 1
    for m in range(M):
        if ptr_m[m + 1] - ptr_m[m] > wide:
            wide = ptr_m[m + 1] - ptr_m[m]
    chi = np.empty(wide, np.int64)   # the players a move changes, and their new positions
    chp = np.empty(wide, np.int64)
    delta = np.zeros(R)
    rowout = np.zeros(R, np.bool_)  # dense: each row outside its bounds after the move
    touched = np.zeros(R, np.bool_)
    tl = np.empty(R, np.int64)
    dbad = np.zeros(G)
    dcnt = np.zeros(P, np.int64)
    pseen = np.zeros(max(n_party, 1), np.bool_)
    for m in range(M):
        nt = 0
        nc = 0
        for g in range(G):
            dbad[g] = 0.0
        is_tabu = False
        valid = True
        for c in range(ptr_m[m], ptr_m[m + 1]):
            i = ch_i[c]
            q = ch_p[c]
            if q < -1 or q >= D or i < 0 or i >= N:
                valid = False
                continue
            p1 = q if q >= 0 else D
            newp[i] = p1
            if until[i] > it:
                is_tabu = True
            p0 = curp[i]
            if p1 == p0:
                continue
            dcnt[p0] -= 1
            dcnt[p1] += 1
            chi[nc] = i
            chp[nc] = p1
            nc += 1
            if not dense:
                nt = _touch(ptr[i * P + p0], ptr[i * P + p0 + 1], -1.0, ridx, rcoef, delta, touched, tl, nt)
                nt = _touch(ptr[i * P + p1], ptr[i * P + p1 + 1], 1.0, ridx, rcoef, delta, touched, tl, nt)
            if has_ping and (p0 < D) != (p1 < D):
                sgn = 1.0 if p1 < D else -1.0
                for g in range(G):
                    dbad[g] += sgn * far[i, g]
        tabu[m] = is_tabu
        # one vector add per changed player (contiguous rows of DZ and DR: the loops vectorize)
        for h in range(H):
            zacc[h] = z0[h]
        for u in range(nc):
            dz = DZ[chi[u], chp[u]]
            for h in range(H):
                zacc[h] += dz[h]
        for h in range(H):
            z[m, h] = zacc[h]
        nb = base
        ex = exc0
        if not valid:
            nb += 1 << 20
        if dense:  # few rows: every one is checked (cheaper than tracking the touched ones)
            if nc == 0:
                for r in range(R):
                    delta[r] = 0.0
            else:
                dr = DR[chi[0], chp[0]]
                for r in range(R):
                    delta[r] = dr[r]
                for u in range(1, nc):
                    dr = DR[chi[u], chp[u]]
                    for r in range(R):
                        delta[r] += dr[r]
            nout = 0
            exs = 0.0
            for r in range(R):
                a = act[r] + delta[r]
                o = max(lo[r] - a, a - hi[r])
                o = o if o > 0.0 else 0.0
                rowout[r] = o > 0.0
                nout += plain[r] * (o > 0.0)
                exs += o * invs[r]
            nb = base_d + nout
            ex = exc_d + exs
            if not valid:
                nb += 1 << 20
        else:
            for t in range(nt):
                r = tl[t]
                if row_if[r] < 0:
                    a = act[r] + delta[r]
                    out = a < lo[r] or a > hi[r]
                    nb += (1 if out else 0) - cviol[r]
                    ex += (_outside(a, lo[r], hi[r], rscale[r]) if out else 0.0) - cexc[r]
        # if rules whose condition names a moved player: evaluated again; those whose row moved
        # while their condition (unchanged) holds: the row checked again
        nf = 0
        for c in range(ptr_m[m], ptr_m[m + 1]):
            i = ch_i[c]
            if 0 <= i < N:
                for k in range(pif_ptr[i], pif_ptr[i + 1]):
                    f = pif[k]
                    if not fseen[f]:
                        fseen[f] = True
                        fl[nf] = f
                        nf += 1
                        if dense:
                            nb += (1 if rowout[if_row[f]] and _if_cond(f, newp, curp, if_ptr, op_code, op_a, op_b,
                                                                        op_neg, stack) else 0) - fbroken[f]
                        else:
                            nb += _if_broken(f, newp, curp, if_row, if_ptr, op_code, op_a, op_b, op_neg, stack, act,
                                             delta, lo, hi) - fbroken[f]
        if dense:
            for u in range(n_on):  # the if rules whose condition holds now
                f = on[u]
                if not fseen[f]:
                    nb += (1 if rowout[if_row[f]] else 0) - fbroken[f]
        else:
            for t in range(nt):
                r = tl[t]
                f = row_if[r]
                if f >= 0 and cond0[f] and not fseen[f]:
                    a = act[r] + delta[r]
                    nb += (1 if (a < lo[r] or a > hi[r]) else 0) - fbroken[f]
        for u in range(nf):
            fseen[fl[u]] = False
        for t in range(nt):
            delta[tl[t]] = 0.0
            touched[tl[t]] = False
        anysel = False
        for j in range(D):
            if cnt0[j] + dcnt[j] != sizes[j]:
                nb += 1
                break
        for j in range(D):
            if cnt0[j] + dcnt[j] > 0:
                anysel = True
        if spread >= 0.0:
            mn = np.inf
            mx = -np.inf
            for s_ in range(nsel):  # the lowest selected player who stays
                i = by_skill[s_]
                if newp[i] < D:  # unchanged (−1) or still on a team
                    mn = skill[i]
                    break
            for s_ in range(nsel - 1, -1, -1):
                i = by_skill[s_]
                if newp[i] < D:  # unchanged (−1) or still on a team
                    mx = skill[i]
                    break
            for c in range(ptr_m[m], ptr_m[m + 1]):
                i = ch_i[c]
                if 0 <= i < N and newp[i] >= 0 and newp[i] < D and curp[i] == D:
                    if skill[i] < mn:
                        mn = skill[i]
                    if skill[i] > mx:
                        mx = skill[i]
            if mx > mn and mx - mn > spread:
                nb += 1
        if has_ping:
            fewest = np.inf
            for g in range(G):
                if bad0[g] + dbad[g] < fewest:
                    fewest = bad0[g] + dbad[g]
            if fewest >= 0.5 and anysel:
                nb += 1
                ex += fewest if fewest < np.inf else 1.0  # the far players of the nearest region
        for c in range(ptr_m[m], ptr_m[m + 1]):
            i = ch_i[c]
            if i < 0 or i >= N:
                continue
            pm = party_of[i]
            if pm < 0 or pseen[pm]:
                continue
            pseen[pm] = True
            away = _misplaced(party_ptr[pm], party_ptr[pm + 1], party_members, newp, curp, pc)
            nb += (1 if away > 0 else 0) - pbroken[pm]
            ex += away - pexc[pm]
        for c in range(ptr_m[m], ptr_m[m + 1]):
            i = ch_i[c]
            if 0 <= i < N:
                newp[i] = -1
                if party_of[i] >= 0:
                    pseen[party_of[i]] = False
        for j in range(P):
            dcnt[j] = 0
        broken[m] = nb
        excess[m] = ex if ex > 0.0 else 0.0


@njit(cache=True, nogil=True)
def choose(vals, broken, tabu, excess, penalty, aspire):  # pragma: no cover - compiled
    """The move a tabu iteration takes: the first argmax of ``vals − penalty·(broken + excess)`` over
    the moves with a finite value that are not tabu, or are feasible and beat ``aspire``
    (aspiration); −1 when there is none. One pass (the numpy form cost ~90 µs an iteration on
    pools of 100 candidates)."""
    chosen = -1
    top = -np.inf
    for m in range(vals.shape[0]):
        v = vals[m]
        if not np.isfinite(v):
            continue
        if tabu[m] and not (broken[m] == 0 and v > aspire):
            continue
        s = v - penalty * (broken[m] + excess[m])
        if s > top:
            top = s
            chosen = m
    return chosen


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


@njit(cache=True, nogil=True)
def _fill(t, sel, bench, unit_ptr, unit_members, picks, D, solo, samples, draws, ptr, pl, tm):  # pragma: no cover - compiled
    """Write the moves of :func:`neighbourhood` into ``ptr``/``pl``/``tm``; (moves, entries)."""
    S = sel.shape[0]
    Bn = bench.shape[0]
    m = 0
    e = 0
    ptr[0] = 0
    for a in range(S):  # team swaps
        i = sel[a]
        for b in range(a + 1, S):
            k = sel[b]
            if t[i] != t[k]:
                pl[e] = i
                tm[e] = t[k]
                pl[e + 1] = k
                tm[e + 1] = t[i]
                e += 2
                m += 1
                ptr[m] = e
    for a in range(S):  # bench swaps
        i = sel[a]
        for b in range(Bn):
            pl[e] = i
            tm[e] = -1
            pl[e + 1] = bench[b]
            tm[e + 1] = t[i]
            e += 2
            m += 1
            ptr[m] = e
    U = unit_ptr.shape[0] - 1
    for u in range(U):  # party swaps: a whole party with another of its size elsewhere
        u0, u1 = unit_ptr[u], unit_ptr[u + 1]
        team_u = t[unit_members[u0]]
        whole = True
        for x in range(u0, u1):
            if t[unit_members[x]] != team_u:
                whole = False
        if not whole:
            continue
        for v in range(U):
            v0, v1 = unit_ptr[v], unit_ptr[v + 1]
            if v == u or v1 - v0 != u1 - u0:
                continue
            team_v = t[unit_members[v0]]
            ok = team_v != team_u and not (team_u < 0 and team_v < 0)
            for x in range(v0, v1):
                if t[unit_members[x]] != team_v:
                    ok = False
            if not ok:
                continue
            for x in range(u0, u1):
                pl[e] = unit_members[x]
                tm[e] = team_v
                e += 1
            for x in range(v0, v1):
                pl[e] = unit_members[x]
                tm[e] = team_u
                e += 1
            m += 1
            ptr[m] = e
    if samples > 0:  # a party gathered at a position, as many solo players (seeded draws) from there taking
        buf = np.empty(t.shape[0], np.int64)  # the places of its members that came
        d = 0
        for u in range(U):
            u0, u1 = unit_ptr[u], unit_ptr[u + 1]
            a = t[unit_members[u0]]
            whole = True
            for x in range(u0, u1):
                if t[unit_members[x]] != a:
                    whole = False
            for b in range(-1, D):
                if whole and b == a:
                    continue
                k = 0  # the members not at b yet (all of a whole party)
                for x in range(u0, u1):
                    if t[unit_members[x]] != b:
                        k += 1
                n_c = 0
                for i in range(t.shape[0]):
                    if solo[i] and t[i] == b:
                        buf[n_c] = i
                        n_c += 1
                if n_c < k:
                    continue
                for _ in range(samples):
                    for x in range(k):  # a partial Fisher-Yates shuffle: buf[:k] is the draw
                        r = x + draws[d % draws.shape[0]] % (n_c - x)
                        d += 1
                        buf[x], buf[r] = buf[r], buf[x]
                    for x in range(u0, u1):
                        if t[unit_members[x]] != b:
                            pl[e] = unit_members[x]
                            tm[e] = b
                            e += 1
                    y = 0
                    for x in range(u0, u1):
                        if t[unit_members[x]] != b:
                            pl[e] = buf[y]
                            tm[e] = t[unit_members[x]]
                            e += 1
                            y += 1
                    m += 1
                    ptr[m] = e
    if picks.shape[0] > 0:  # rotations: bench k → i's slot, i → q's slot (another team), q → bench
        pi = np.empty(S * S, np.int64)
        pq = np.empty(S * S, np.int64)
        n_pairs = 0
        for a in range(S):
            for b in range(S):
                if t[sel[a]] != t[sel[b]]:
                    pi[n_pairs] = sel[a]
                    pq[n_pairs] = sel[b]
                    n_pairs += 1
        for x in range(picks.shape[0]):
            k = bench[picks[x] // n_pairs]
            pr = picks[x] % n_pairs
            i = pi[pr]
            q = pq[pr]
            pl[e] = k
            tm[e] = t[i]
            pl[e + 1] = i
            tm[e + 1] = t[q]
            pl[e + 2] = q
            tm[e + 2] = -1
            e += 3
            m += 1
            ptr[m] = e
    return m, e


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
