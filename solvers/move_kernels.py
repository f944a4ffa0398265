"""The compiled (numba) kernels of the move scorer (:mod:`mgmatch.solvers.moves`): scoring a batch of
moves from the few players each changes, choosing a tabu move, and writing a neighbourhood's moves
(:func:`~mgmatch.solvers.moves.neighbourhood`).

They take plain arrays only; :class:`~mgmatch.solvers.moves.MoveScorer` builds those arrays from a
problem, and :func:`~mgmatch.solvers.moves.warm` compiles the kernels before a timed solve.
"""

from __future__ import annotations

import os
import tempfile

import numba
import numpy as np
from numba import njit

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
