"""Selection search: change who plays, then split the players into teams exactly.

When a pool has more candidates than seats, an answer is two decisions: *which* players play
(the selection) and *how* they split into teams. :func:`~mgmatch.solvers.polish.polish` and
:func:`~mgmatch.solvers.tabu.tabu_search` move one or three players at a time, so every move has to
keep the role slots, skill bound and parties of the teams it touches by itself. On the 5v5
example's pools that is where they stall: MGMatch's answers at 50 ms were 3.0% below the fitted
optimum, their own selection split best was still 2.9% below it, and they shared only 7 of 10
players with the optimum.

Here a move swaps players between the selection and the bench (a benched player for a selected
one; a party for as many selected players; a selected party for as many benched singles), and
every move is scored with the **best split of its new selection** over all team patterns
(``multinomial(sizes)``: 252 for 5v5, 20 for 3v3), so a move is feasible whenever *some* split of
its selection is. One iteration scores every (move, split) pair at once without building an
assignment, by linearity of the head's first layer and of the rules' linear rows:

- the head's first layer is ``W₁·concat_j(Σ_{i∈team j} e_i) + b₁ = b₁ + Σ_i W₁[team(i)]·e_i``, so
  with ``L[i, j] = W₁[:, block j]·e_i`` the pre-activation of a split of the selection is a sum
  over its players, and a swap changes one term per moved player;
- the compiled rows over x only (:class:`~mgmatch.solvers.enumerate.RowFilter`) are sums over
  players the same way, so they ride along as extra columns of ``L`` and filter the pairs exactly
  (with RowFilter's tolerance) before any checker call.

The pairs are then handed to the checker best value first, in chunks, and the first it accepts
is the iteration's move (the best feasible one). Tabu search on the selection: a player who left
may not come back, and one who came may not leave, for a seeded random tenure (aspiration for a
new best); after ``restart_after`` iterations without a new best the walk restarts from the best.
Only feasible assignments are visited, so the answer is never worse than the start and never
breaks a rule. No iteration is started that, at the measured pace, would end past the deadline;
when a whole one no longer fits, one over a random share of the bench that does (down to
:data:`MIN_PARTIAL_SHARE`) is run instead.

Used by MGMatch when the team patterns are few (:func:`applicable`), from the predicted players'
best split (:func:`start_from_scores`), and on 3v3 pools from a partial enumeration's best (see
:mod:`mgmatch.solvers.mgmatch`). Measured, quiet 2-core machine:

- the 5v5 example, 100 held-out pools at 50 ms
  (``python examples/5v5/measure.py --pools … --count 100 --budget-ms 50``): MGMatch's mean gap to
  the fitted optimum 2.99% (tabu search and SCIP's search, the last release) → 0.37% (86% of the
  pools within 1%, p99 48.9 ms; 0.46% in another run, 0.48–0.71% before the partial iterations);
- 3v3 at 20 ms (``mgmatch bench quality --preset 3v3 --budgets 20 --count 40``): 0.15% (a partial
  enumeration's best) → 0.05–0.07% in three runs.

One iteration of a 40-candidate 5v5 pool scores ~75 000 (move, split) pairs in 3–10 ms; a 3v3
iteration costs ~2 ms, most of it one checker call over the pool's 17 rules.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem

from .enumerate import RowFilter, multinomial, patterns
from .mip import BuildClock
from .polish import MIN_GAIN

#: selections with more team patterns than this are left to the other stages (6v6: 924, 3×3: 1680;
#: 12v12 has 2.7 million)
MAX_SPLITS = 2048
#: one-for-one (move, split) pairs scored per iteration at most: beyond, a seeded random share of
#: the bench (a 5v5 pool of 40 has ~75 000; the pairs that pass the rows hold a head's first layer each)
MAX_PAIRS = 250_000
#: party moves scored per party and iteration at most (a seeded random subset beyond: a party
#: leaving has C(benched singles, 2) partners, ~350 in a pool of 37)
PARTY_MOVES_MAX = 16
#: pairs handed to the checker at once, best value first (a call's cost is mostly per rule: ~0.7 ms
#: for a 3v3 pool's 17 rules at 32 candidates, 1.1 ms at 512; the 5v5 example's 3 rules cost far less)
CHECK_CHUNK = 128
#: tabu tenure (iterations) of a player who joined or left the selection
TENURE = (2, 5)
#: iterations without a new best before the walk restarts from the best
RESTART_AFTER = 8
#: selections drawn by score for a start when the top-scored players have no feasible split; they
#: are split and checked about START_ROWS assignments at a time
START_SAMPLES = 64
START_ROWS = 512
#: measured iterations (seconds per scored pair): no iteration is started that cannot finish
SELECTION_ROUNDS = BuildClock()
#: ... times this, for the spread of one iteration's time
PACE_SAFETY = 1.5
#: when a whole iteration no longer fits, one over a random share of the bench that does is run,
#: down to this share
MIN_PARTIAL_SHARE = 0.2


def applicable(problem: Problem) -> bool:
    """Whether a selection search has anything to do here: some candidates sit out, and the
    selected players have at most :data:`MAX_SPLITS` team patterns."""
    sizes = tuple(problem.instance.sizes)
    return problem.instance.n > sum(sizes) and multinomial(sizes) <= MAX_SPLITS


@dataclass
class SelectionResult:
    team_of: np.ndarray
    objective: float
    iterations: int
    improved: bool      # a better assignment than the start was found
    restarts: int
    round_s: float      # the longest iteration seen (seconds)


class _Scorer:
    """Per problem: the team patterns and the per-(player, team) linear terms of the head's first
    layer and of the x-only rows."""

    def __init__(self, problem: Problem) -> None:
        inst = problem.instance
        self.D = inst.teams
        self.P = np.concatenate(list(patterns(tuple(inst.sizes))), axis=0).astype(np.int64)  # [M, S]
        # (position, split) pairs by the team the position gets: [(positions, splits)] per team
        self.by_team = [np.nonzero(self.P.T == j) for j in range(self.D)]
        layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in problem.model.head_weights]
        (w1, b1), self.rest = layers[0], layers[1:]
        E = problem.embeddings.astype(np.float32)                      # [N, E]
        e = E.shape[1]
        H = w1.shape[0]
        rows = RowFilter(problem)
        R = rows.hi.size
        L = np.zeros((inst.n, self.D, H + R), dtype=np.float32)
        for j in range(self.D):
            L[:, j, :H] = E @ w1[:, j * e:(j + 1) * e].T
            if R:
                L[:, j, H:] = rows.A_team[j]
        self.L = L                                                     # [N, D, K]
        self.b1, self.H, self.R = b1, H, R
        self.lo, self.hi = rows.lo, rows.hi

    def base(self, sel: np.ndarray) -> np.ndarray:
        """[M, K]: first-layer pre-activation (b₁ included) and row activities of every split."""
        out = self.L[sel[None, :], self.P].sum(axis=1)
        out[:, :self.H] += self.b1
        return out

    def head(self, act_h: np.ndarray) -> np.ndarray:
        """Values of first-layer pre-activations [..., H] → [...] (a one-layer head is linear)."""
        if not self.rest:
            return act_h[..., 0]
        h = np.maximum(act_h, 0.0)
        for k, (w, b) in enumerate(self.rest):
            h = h @ w.T + b
            if k < len(self.rest) - 1:
                h = np.maximum(h, 0.0)
        return h[..., 0]

    def rows_ok(self, act_r: np.ndarray) -> np.ndarray:
        if not self.R:
            return np.ones(act_r.shape[:-1], dtype=bool)
        return ((act_r <= self.hi) & (act_r >= self.lo)).all(axis=-1)

    def singles(self, sel: np.ndarray, bench: np.ndarray, base: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every one-for-one swap (position a leaves, bench[b] comes) with every split m of the new
        selection that passes the rows: (a, b, m, value) arrays.

        The rows are tested first, one row at a time over [pairs, bench] (cheap and contiguous);
        the head is evaluated only on the pairs that pass.
        """
        H = self.H
        C = base[None, :, :] - self.L[sel[:, None], self.P.T]                # [S, M, K]
        Lb = self.L[bench]                                                   # [Nb, D, K]
        if self.R:
            CR = np.ascontiguousarray(C[:, :, H:].transpose(2, 0, 1))        # [R, S, M]
            LbR = np.ascontiguousarray(Lb[:, :, H:].transpose(2, 1, 0))      # [R, D, Nb]
        out_a, out_b, out_m, out_v = [], [], [], []
        for j, (sa, sm) in enumerate(self.by_team):
            if self.R:
                ok = np.ones((sa.size, bench.size), dtype=bool)
                for r in range(self.R):
                    x = CR[r, sa, sm][:, None] + LbR[r, j][None, :]
                    ok &= x <= self.hi[r]
                    ok &= x >= self.lo[r]
                q, b = np.nonzero(ok)
            else:
                q, b = np.divmod(np.arange(sa.size * bench.size), bench.size)
            if not q.size:
                continue
            act = C[sa[q], sm[q], :H] + Lb[b, j, :H]
            out_a.append(sa[q])
            out_b.append(b)
            out_m.append(sm[q])
            out_v.append(self.head(act))
        if not out_a:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, np.zeros(0, dtype=np.float32)
        return (np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_m), np.concatenate(out_v))

    def group(self, sel: np.ndarray, base: np.ndarray, A: np.ndarray, B: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Moves A [n, k] (positions that leave) / B [n, k] (players that come), every split:
        (move, m, value) of the pairs that pass the rows."""
        PA = self.P.T[A]                                                     # [n, k, M]
        H = self.H
        idx_in = B[:, :, None] * self.D + PA                                 # rows of L as [N·D, K]
        idx_out = sel[A][:, :, None] * self.D + PA
        if self.R:  # the rows first, on their own columns
            LR = self.L[:, :, H:].reshape(-1, self.R)
            act_r = np.repeat(base[None, :, H:], A.shape[0], axis=0)
            for kk in range(A.shape[1]):
                act_r += np.take(LR, idx_in[:, kk], axis=0)
                act_r -= np.take(LR, idx_out[:, kk], axis=0)
            u, m = np.nonzero(self.rows_ok(act_r))
        else:
            u, m = np.divmod(np.arange(A.shape[0] * len(self.P)), len(self.P))
        LH = self.L[:, :, :H].reshape(-1, H)
        act_h = base[m, :H] + (np.take(LH, idx_in[u, :, m], axis=0) - np.take(LH, idx_out[u, :, m], axis=0)).sum(axis=1)
        return u, m, self.head(act_h)


def _moves(sel: np.ndarray, bench: np.ndarray, units: list[np.ndarray], in_party: np.ndarray,
           rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Moves other than the one-for-one swaps, as (positions in ``sel`` that leave [n, k], benched
    players that come [n, k]): the same players re-split (k = 0), and the party moves."""
    pos = np.arange(sel.size)
    single_pos = pos[~in_party[sel]]
    single_bench = bench[~in_party[bench]]
    out = [(np.zeros((1, 0), dtype=np.int64), np.zeros((1, 0), dtype=np.int64))]
    where = {int(p): k for k, p in enumerate(sel)}
    benched = set(bench.tolist())
    for u in units:
        k = u.size
        if all(int(p) in benched for p in u):        # a party joins, k selected singles leave
            A = np.asarray(list(combinations(single_pos.tolist(), k)), dtype=np.int64).reshape(-1, k)
            out.append((A, np.repeat(u[None, :], len(A), axis=0)))
        elif all(int(p) in where for p in u):        # a party leaves, k benched singles join
            B = np.asarray(list(combinations(single_bench.tolist(), k)), dtype=np.int64).reshape(-1, k)
            A = np.repeat(np.asarray([where[int(p)] for p in u])[None, :], len(B), axis=0)
            out.append((A, B))
    capped = []
    for A, B in out:
        if len(A) > PARTY_MOVES_MAX:
            pick = np.sort(rng.choice(len(A), size=PARTY_MOVES_MAX, replace=False))
            A, B = A[pick], B[pick]
        if len(A):
            capped.append((A, B))
    return capped


def selection_search(problem: Problem, start: np.ndarray, deadline: float, *, seed: int = 0,
                     tenure: tuple[int, int] = TENURE, restart_after: int = RESTART_AFTER,
                     max_iterations: int | None = None) -> SelectionResult:
    """Walk from the feasible assignment ``start`` until ``deadline`` (a ``perf_counter()`` instant).

    Returns the best assignment visited (``start`` when none beat it) and its exact objective.
    Raises ValueError when ``start`` breaks a rule or :func:`applicable` is false.
    """
    if not applicable(problem):
        raise ValueError("selection search needs benched candidates and at most MAX_SPLITS team patterns")
    cur = np.asarray(start, dtype=np.int64).copy()
    if not bool(problem.checker.feasible(cur[None])[0]):
        raise ValueError("selection search starts from a feasible assignment")
    rng = np.random.default_rng(seed)
    sc = _Scorer(problem)
    P, n = sc.P, problem.instance.n
    units = [np.asarray(m, dtype=np.int64) for m in parties(problem.instance).values()]
    in_party = np.zeros(n, dtype=bool)
    for u in units:
        in_party[u] = True
    cur_obj = problem.objective(cur)
    best, best_obj = cur.copy(), cur_obj
    start_obj = cur_obj
    until = np.zeros(n, dtype=np.int64)  # player i may not change sides while the iteration < until[i]
    pace = 0.0       # the longest iteration of this search (seconds)
    rate = 0.0       # ... and the highest seconds per scored pair
    it = since_best = restarts = 0
    while max_iterations is None or it < max_iterations:
        t0 = time.perf_counter()
        sel = np.flatnonzero(cur >= 0)
        bench = np.flatnonzero(cur < 0)
        size = sel.size * bench.size * len(P)
        if size > MAX_PAIRS:  # a seeded random share of a very large bench (bounded memory)
            bench = np.sort(rng.choice(bench, size=max(1, MAX_PAIRS // (sel.size * len(P))), replace=False))
            size = sel.size * bench.size * len(P)
        expected = PACE_SAFETY * max(SELECTION_ROUNDS.expected_s(size), rate * size)
        partial = t0 + expected >= deadline
        if partial:
            # no time for every move: the one-for-one swaps with a seeded random share of the
            # bench that fits (the last few ms of a 5v5 solve at 50 ms went unused before)
            keep = int(bench.size * (deadline - t0) / max(expected, 1e-9))
            if keep < max(1, MIN_PARTIAL_SHARE * bench.size):
                if it == 0:
                    SELECTION_ROUNDS.skipped(size)  # not one iteration fitted at the measured pace
                break
            bench = np.sort(rng.choice(bench, size=keep, replace=False))
            size = sel.size * bench.size * len(P)
        it += 1
        base = sc.base(sel)
        # candidates: (A positions leaving [c, k], B players coming [c, k], split, value) per group
        groups = []
        a, b, m, v = sc.singles(sel, bench, base)
        groups.append((a[:, None], bench[b][:, None], m, v))
        for k, (A, B) in enumerate([] if partial else _moves(sel, bench, units, in_party, rng)):
            u, m, v = sc.group(sel, base, A, B)
            if k == 0:  # the same players re-split: only when it improves
                keep_ = v > cur_obj + 1e-6 * max(1.0, abs(cur_obj))
                u, m, v = u[keep_], m[keep_], v[keep_]
            groups.append((A[u], B[u], m, v))
        chosen = _first_feasible(problem, groups, sel, P, until, it, best_obj)
        took = time.perf_counter() - t0
        SELECTION_ROUNDS.record(took, size)
        pace, rate = max(pace, took), max(rate, took / max(1, size))
        if chosen is None:
            if not until.any():
                break                                                # no feasible move at all
            until[:] = 0
            continue
        t_new, moved = chosen
        until[moved] = it + rng.integers(tenure[0], tenure[1] + 1)
        cur = t_new
        cur_obj = problem.objective(cur)
        since_best += 1
        if cur_obj > best_obj + MIN_GAIN:
            best, best_obj, since_best = cur.copy(), cur_obj, 0
        if since_best >= restart_after:
            cur, cur_obj, since_best = best.copy(), best_obj, 0
            until[:] = 0
            restarts += 1
    return SelectionResult(best, best_obj, it, best_obj > start_obj + MIN_GAIN, restarts, pace)


def _first_feasible(problem: Problem, groups: list, sel: np.ndarray, P: np.ndarray, until: np.ndarray, it: int,
                    best_obj: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The best-valued open (move, split) pair the checker accepts, as (assignment, players moved).

    Open: no player of the move is tabu, or its value beats the best (aspiration)."""
    n = until.size
    gid = np.concatenate([np.full(len(g[3]), k, dtype=np.int64) for k, g in enumerate(groups)])
    row = np.concatenate([np.arange(len(g[3])) for g in groups])
    val = np.concatenate([g[3] for g in groups]).astype(np.float64)
    tabu = np.concatenate([(until[sel[A]] > it).any(1) | (until[B] > it).any(1) for A, B, _, _ in groups])
    open_ = ~tabu | (val > best_obj + MIN_GAIN)
    gid, row, val = gid[open_], row[open_], val[open_]
    T0 = np.full((len(P), n), -1, dtype=np.int64)
    T0[:, sel] = P
    done = 0
    while done < val.size:
        k = min(val.size - done, 4 * CHECK_CHUNK)
        if done + k < val.size:
            top = np.argpartition(-val, done + k - 1)[:done + k]
        else:
            top = np.arange(val.size)
        top = top[np.argsort(-val[top], kind="stable")][done:done + k]
        for s in range(0, top.size, CHECK_CHUNK):
            part = top[s:s + CHECK_CHUNK]
            cand = np.empty((part.size, n), dtype=np.int64)
            for g in np.unique(gid[part]):
                here = np.flatnonzero(gid[part] == g)
                A, B, m, _ = groups[g]
                r = row[part[here]]
                Ar, Br, mr = A[r], B[r], m[r]
                c = T0[mr]
                rr = np.arange(len(r))[:, None]
                c[rr, Br] = P[mr[:, None], Ar]
                c[rr, sel[Ar]] = -1
                cand[here] = c
            ok = problem.checker.feasible(cand)
            if ok.any():
                h = int(np.argmax(ok))
                A, B, _, _ = groups[gid[part[h]]]
                r = row[part[h]]
                return cand[h], np.concatenate([B[r], sel[A[r]]])
        done += k
    return None


def _top_players(score: np.ndarray, unit_of: dict[int, list[int]], S: int) -> list[int] | None:
    """The players with the highest ``score``, whole units only, S of them (None: no way to fill S)."""
    chosen: list[int] = []
    seen: set[int] = set()
    for i in np.argsort(-score, kind="stable").tolist():
        if i in seen:
            continue
        unit = unit_of[i]
        seen.update(unit)
        if len(chosen) + len(unit) <= S:
            chosen += unit
            if len(chosen) == S:
                return chosen
    return None


def start_from_scores(problem: Problem, score: np.ndarray, deadline: float | None = None, seed: int = 0,
                      samples: int = START_SAMPLES) -> np.ndarray | None:
    """A feasible start from per-player scores (e.g. a prediction's Σ_j p_ij): the best feasible
    split of the top-scored players (a party counts as one unit, whole or not at all); when they
    have none, of up to ``samples`` selections drawn by score (Plackett–Luce: Gumbel noise on the
    log-scores, seeded), START_ROWS assignments at a time until one has a feasible split or ``deadline``.
    None: no feasible split was found."""
    inst = problem.instance
    S = sum(inst.sizes)
    unit_of: dict[int, list[int]] = {i: [i] for i in range(inst.n)}
    for members in parties(inst).values():
        for i in members:
            unit_of[i] = list(members)
    score = np.asarray(score, dtype=np.float64)
    P = np.concatenate(list(patterns(tuple(inst.sizes))), axis=0)
    rows = RowFilter(problem)
    rng = np.random.default_rng(seed)
    logs = np.log(np.clip(score, 1e-3, None))
    tried: set[tuple[int, ...]] = set()
    drawn = 0
    while True:
        sels = []
        while len(sels) < (1 if drawn == 0 else max(1, START_ROWS // len(P))) and drawn <= samples:
            key = score if drawn == 0 else logs + rng.gumbel(size=score.size)
            drawn += 1
            chosen = _top_players(key, unit_of, S)
            if chosen is not None and tuple(sorted(chosen)) not in tried:
                tried.add(tuple(sorted(chosen)))
                sels.append(np.asarray(chosen))
        if not sels:
            return None
        T = np.full((len(sels) * len(P), inst.n), -1, dtype=np.int64)
        for k, chosen in enumerate(sels):
            T[k * len(P):(k + 1) * len(P), chosen] = P
        T = T[rows(T)]
        T = T[problem.checker.feasible(T)] if len(T) else T
        if len(T):
            return T[int(np.argmax(problem.objectives(T)))]
        if drawn > samples or (deadline is not None and time.perf_counter() >= deadline):
            return None
