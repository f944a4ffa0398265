"""Awesomenauts-style best-swap local search (``--method local-search``) and batch rounds.

One instance (one match): start from a block of players sorted by skill, split into teams by
brute force, then repeatedly apply the best single swap — between two teams, or between a
selected player and the bench — until no swap improves (a local optimum); restart from
semi-random starts while the budget lasts and keep the best. Every candidate swap of a step is
scored at once (numpy batch) and checked at once with the vectorized checker; an accepted state
always passes the checker. When a start violates rules, a penalty phase first minimizes the
number of violated rules.

:func:`batch_rounds` is the blog's setting: a pool of 100–300 players cut into many matches at
once, improved by the best swap between matches (each match re-split by brute force).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from math import comb

import numpy as np

from mgmatch.core.compiler import parties
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Player
from mgmatch.core.problem import Problem
from mgmatch.core.solution import Solution

from .awesomenauts import MatchScorer, canonical_splits
from .interface import Budget, register

Objective = Callable[[np.ndarray], np.ndarray]
EPS = 1e-9
MAX_SPLITS = 2000
#: random combinations of displaced players tried per party and destination
PARTY_COMBOS = 64
#: candidate assignments scored per batch between two reads of the clock
CHUNK = 128


def configs(team_of: np.ndarray, n_sel: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch of assignments [B, N] (each with n_sel selected) → (idx, lab) [B, n_sel]."""
    T = np.asarray(team_of)
    idx = np.argsort(T < 0, axis=1, kind="stable")[:, :n_sel]
    return idx, np.take_along_axis(T, idx, 1)


def _n_labelings(sizes: Sequence[int]) -> int:
    total, rest = 1, sum(sizes)
    for s in sizes:
        total *= comb(rest, s)
        rest -= s
    return total


def _all_labelings(sizes: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    base = np.repeat(np.arange(len(sizes)), sizes)
    if _n_labelings(sizes) <= MAX_SPLITS:
        return np.asarray(sorted(set(itertools.permutations(base.tolist()))), dtype=np.int64)
    return rng.permuted(np.tile(base, (MAX_SPLITS, 1)), axis=1)  # one draw for all: 2 000 rows of 100 in ~1 ms


class SwapSearch:
    """Best-swap local search with restarts for one instance under its hard rules."""

    def __init__(self, problem: Problem, objective: Objective, seed: int = 0, restarts: int | None = None):
        self.p = problem
        self.inst = problem.instance
        self.obj = objective
        self.rng = np.random.default_rng(seed)
        self.restarts = restarts
        self.N, self.D = self.inst.n, self.inst.teams
        self.sizes = list(self.inst.sizes)
        self.n_sel = sum(self.sizes)
        sk = self.inst.skills()
        self.order = np.argsort(np.where(np.isfinite(sk), sk, 0.0), kind="stable")
        self.labels = _all_labelings(self.sizes, self.rng)
        self.moves = 0
        self.starts = 0
        self.row_s = 0.0  # seconds one candidate assignment took to score, in the last chunk
        has_party_rule = any(r.kind == "party_together" for r in self.inst.rules)
        self.parties = [np.asarray(m) for m in parties(self.inst).values()] if has_party_rule else []

    def _eval(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        viol = (~self.p.checker.rule_masks(T)).sum(0)
        return viol, np.asarray(self.obj(T), dtype=float)

    def _split(self, block: np.ndarray, budget: Budget) -> np.ndarray | None:
        """Brute-force split of a block of players into teams: best (violations, −objective) of the
        splits scored before the deadline; None when the deadline passed before the first chunk."""
        def chunks():
            for c in range(0, len(self.labels), CHUNK):
                T = np.full((min(CHUNK, len(self.labels) - c), self.N), -1, dtype=np.int64)
                T[:, block] = self.labels[c:c + CHUNK]
                yield T
        C, viol, obj = self._eval_chunks(chunks(), budget)
        if not len(C):
            return None
        return C[np.lexsort((-obj, viol))[0]]

    def _eval_chunks(self, chunks, budget: Budget) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Score candidate assignments chunk by chunk until the deadline: the ones scored (C, viol, obj).

        At 25 squads from 300 candidates a step's neighbourhood holds ~10⁵ assignments, many times a
        100 ms budget; the clock is read between chunks so that the search overruns by one chunk at most."""
        Cs, vs, os_ = [], [], []
        for T in chunks:
            left = budget.remaining()
            # stop when the chunk would not finish in time at the pace of the last one (per row)
            if left is not None and (left <= 0 or len(T) * self.row_s > left):
                break
            if not len(T):
                continue
            t0 = time.perf_counter()
            v, o = self._eval(T)
            self.row_s = (time.perf_counter() - t0) / len(T)
            Cs.append(T)
            vs.append(v)
            os_.append(o)
        if not Cs:
            return np.zeros((0, self.N), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(Cs), np.concatenate(vs), np.concatenate(os_)

    def _start(self, r: int, budget: Budget | None = None) -> np.ndarray | None:
        if r == 0:
            lo = max(0, (self.N - self.n_sel) // 2) if self.N > self.n_sel else 0
            # the block of sorted players with the smallest skill range
            sk = self.inst.skills()[self.order]
            if np.isfinite(sk).all() and self.N > self.n_sel:
                spans = sk[self.n_sel - 1:] - sk[:self.N - self.n_sel + 1]
                lo = int(np.argmin(spans))
            block = self.order[lo:lo + self.n_sel]
        else:
            # semi-random: a random sorted block with a few members replaced by random players
            lo = int(self.rng.integers(0, self.N - self.n_sel + 1))
            block = self.order[lo:lo + self.n_sel].copy()
            others = np.setdiff1d(np.arange(self.N), block)
            k = min(len(others), int(self.rng.integers(0, self.n_sel // 2 + 1)))
            if k:
                block[self.rng.choice(self.n_sel, k, replace=False)] = self.rng.choice(others, k, replace=False)
        return self._split(block, budget or Budget.of(None))

    def _neighbours(self, t: np.ndarray):
        """The step's candidate assignments, in chunks of at most :data:`CHUNK` rows (a generator: a
        chunk is built only when the clock allows scoring it)."""
        sel = np.flatnonzero(t >= 0)
        bench = np.flatnonzero(t < 0)
        a, b = np.triu_indices(len(sel), 1)
        a, b = sel[a], sel[b]
        keep = t[a] != t[b]
        a, b = a[keep], b[keep]
        for c in range(0, len(a), CHUNK):
            ca, cb = a[c:c + CHUNK], b[c:c + CHUNK]
            T1 = np.repeat(t[None], len(ca), 0)
            r = np.arange(len(ca))
            T1[r, ca], T1[r, cb] = t[cb], t[ca]
            yield T1
        sa = np.repeat(sel, len(bench))
        sb = np.tile(bench, len(sel))
        for c in range(0, len(sa), CHUNK):
            ca, cb = sa[c:c + CHUNK], sb[c:c + CHUNK]
            T2 = np.repeat(t[None], len(ca), 0)
            r = np.arange(len(ca))
            T2[r, cb], T2[r, ca] = t[ca], -1
            yield T2
        yield from self._iter_party_moves(t)

    def _party_moves(self, t: np.ndarray) -> list[np.ndarray]:
        """Every batch of :meth:`_iter_party_moves` at once."""
        return list(self._iter_party_moves(t))

    def _iter_party_moves(self, t: np.ndarray):
        """Moves that gather a whole premade party on one team (or on the bench).

        Single swaps can never repair a split party (the rule stays violated until every member
        moves), so for each party and destination the members elsewhere trade places with as many
        players of the destination, chosen among at most ``PARTY_COMBOS`` random combinations
        (one batch per party and destination).
        """
        for members in self.parties:
            for dest in range(-1, self.D):
                movers = members[t[members] != dest]
                if len(movers) == 0 or (dest >= 0 and len(members) > self.sizes[dest]):
                    continue
                pool = np.setdiff1d(np.flatnonzero(t == dest), members)
                m = len(movers)
                if len(pool) < m:
                    continue
                if comb(len(pool), m) <= PARTY_COMBOS:
                    outs = np.asarray(list(itertools.combinations(pool, m)), dtype=np.int64)
                else:
                    outs = np.stack([self.rng.choice(pool, m, replace=False) for _ in range(PARTY_COMBOS)])
                T = np.repeat(t[None], len(outs), 0)
                T[:, movers] = dest
                T[np.arange(len(outs))[:, None], outs] = t[movers][None, :]
                yield T

    def _descend(self, t: np.ndarray, budget: Budget) -> tuple[np.ndarray, int, float]:
        v, o = self._eval(t[None])
        cv, co = int(v[0]), float(o[0])
        while not budget.expired():
            # the neighbourhood scored before the deadline (all of it when the budget allows): the best
            # move of what was scored is still an improving move
            C, viol, obj = self._eval_chunks(self._neighbours(t), budget)
            if len(C) == 0:
                break
            if cv > 0:  # penalty phase: fewer violated rules first, then objective
                k = int(np.lexsort((-obj, viol))[0])
                better = viol[k] < cv or (viol[k] == cv and obj[k] > co + EPS)
            else:
                obj = np.where(viol == 0, obj, -np.inf)
                k = int(np.argmax(obj))
                better = obj[k] > co + EPS
            if not better:
                break
            t, cv, co = C[k], int(viol[k]), float(obj[k])
            self.moves += 1
        return t, cv, co

    def run(self, budget: Budget) -> tuple[np.ndarray | None, float]:
        best, best_obj = None, -np.inf
        limit = self.restarts if self.restarts is not None else (8 if budget.unlimited else None)
        r = 0
        while limit is None or r < limit:
            if r > 0 and budget.expired():
                break
            start = self._start(r, budget)
            if start is None:
                break
            t, v, o = self._descend(start, budget)
            self.starts += 1
            if v == 0 and o > best_obj and self.p.checker.feasible(t[None])[0]:
                best, best_obj = t.copy(), o
            r += 1
            if budget.expired():
                break
        return best, best_obj


def awesomenauts_objective(problem: Problem, **scorer_opts) -> Objective:
    """The blog's match score of a batch of assignments of this instance."""
    scorer = MatchScorer(problem.instance.players, **scorer_opts)
    n_sel, D = problem.instance.n_selected, problem.instance.teams

    def f(T: np.ndarray) -> np.ndarray:
        idx, lab = configs(T, n_sel)
        return scorer.score(idx, lab, D)

    return f


@register("local-search", "Awesomenauts best-swap local search with restarts (objective: engagement or the blog's score)", seeded=True)
class LocalSearchSolver:
    name = "local-search"

    def __init__(self, seed: int = 0, objective: str = "engagement", restarts: int | None = None,
                 weights: dict[str, float] | None = None):
        if objective not in ("engagement", "awesomenauts"):
            raise InvalidInput("objective", f"must be 'engagement' or 'awesomenauts', got {objective!r}")
        self.seed, self.objective, self.restarts, self.weights = seed, objective, restarts, weights

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        if self.objective == "engagement":
            obj = problem.objectives
        else:
            obj = awesomenauts_objective(problem, weights=self.weights)
        search = SwapSearch(problem, obj, seed=self.seed, restarts=self.restarts)
        best, _ = search.run(budget)
        ms = budget.elapsed_ms()
        if best is None:
            return problem.solution(None, "no_solution", self.name, ms)
        return problem.solution(best, "feasible", self.name, ms)


# --------------------------------------------------------------------------- batch rounds


def batch_rounds(players: Sequence[Player], team_size: int, teams: int = 2, budget: Budget | None = None,
                 seed: int = 0, restarts: int | None = None, weights: dict[str, float] | None = None,
                 window: int | None = 60) -> list[list[list[str]]]:
    """Cut a pool into as many matches of ``teams`` × ``team_size`` as fit, maximizing the mean
    Awesomenauts match score (leftover players stay benched for the next round).

    Candidate swaps are pairs of players at most ``window`` places apart in skill order (None:
    all pairs, as the blog). Returns a list of matches, each a list of teams of player ids.
    """
    players = list(players)
    m = teams * team_size
    n = len(players)
    if n < m:
        return []
    budget = budget or Budget.of(None)
    rng = np.random.default_rng(seed)
    scorer = MatchScorer(players, weights=weights)
    splits = canonical_splits(teams, team_size)
    S = len(splits)
    n_matches = n // m
    skill = np.asarray([p.skill if p.skill is not None else 0.0 for p in players], dtype=float)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(skill, kind="stable")] = np.arange(n)

    def best_split(members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """members [C, m] → (best score [C], best split index [C])."""
        C = members.shape[0]
        idx = np.repeat(members, S, 0)
        lab = np.tile(splits, (C, 1))
        sc = scorer.score(idx, lab, teams).reshape(C, S)
        k = sc.argmax(1)
        return sc[np.arange(C), k], k

    def descend(match_of: np.ndarray) -> tuple[np.ndarray, float]:
        members = np.stack([np.flatnonzero(match_of == g) for g in range(n_matches)])
        score, _ = best_split(members)
        pos = np.empty(n, dtype=np.int64)
        for g in range(n_matches):
            pos[members[g]] = np.arange(m)

        def delta_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            ga, gb = match_of[a], match_of[b]
            ok = ga != gb
            out = np.full(len(a), -np.inf)
            a, b, ga, gb = a[ok], b[ok], ga[ok], gb[ok]
            if len(a) == 0:
                return out
            gain = np.zeros(len(a))
            for x, y, sign_old in ((a, b, ga), (b, a, gb)):
                inm = sign_old >= 0  # x's match gets y instead of x
                if inm.any():
                    mem = members[sign_old[inm]].copy()
                    mem[np.arange(inm.sum()), pos[x[inm]]] = y[inm]
                    new, _ = best_split(mem)
                    gain[inm] += new - score[sign_old[inm]]
            out[ok] = gain
            return out

        ai, bi = np.triu_indices(n, 1)
        keep = ~((match_of[ai] < 0) & (match_of[bi] < 0))
        if window is not None:
            keep &= np.abs(rank[ai] - rank[bi]) <= window
        ai, bi = ai[keep], bi[keep]
        delta = np.full(len(ai), -np.inf)
        for c in range(0, len(ai), 4096):  # chunked so that the deadline is checked
            if budget.expired():
                break
            delta[c:c + 4096] = delta_pairs(ai[c:c + 4096], bi[c:c + 4096])
        while not budget.expired():
            k = int(np.argmax(delta))
            if not delta[k] > EPS:
                break
            a, b = ai[k], bi[k]
            ga, gb = match_of[a], match_of[b]
            match_of[a], match_of[b] = gb, ga
            pa, pb = pos[a], pos[b]
            pos[a], pos[b] = pb, pa
            for g, who, slot in ((ga, b, pa), (gb, a, pb)):
                if g >= 0:
                    members[g, slot] = who
                    score[g] = best_split(members[g][None])[0][0]
            touched = np.isin(ai, [a, b]) | np.isin(bi, [a, b])
            for g in (ga, gb):
                if g >= 0:
                    touched |= np.isin(ai, members[g]) | np.isin(bi, members[g])
            delta[touched] = delta_pairs(ai[touched], bi[touched])
        return match_of, float(score.mean())

    def start(r: int) -> np.ndarray:
        noise = 0.0 if r == 0 else rng.normal(0, 1, n) * (skill.std() + 1e-9) * rng.uniform(0.2, 1.0)
        order = np.argsort(skill + noise, kind="stable")
        if r > 0 and n > n_matches * m:  # semi-random: a random set of players sits out
            keep = np.sort(rng.choice(n, n_matches * m, replace=False))
            order = order[np.isin(order, order[keep])]
        match_of = np.full(n, -1, dtype=np.int64)
        lo = (n - n_matches * m) // 2 if r == 0 else 0
        for g in range(n_matches):
            match_of[order[lo + g * m: lo + (g + 1) * m]] = g
        return match_of

    limit = restarts if restarts is not None else (3 if budget.unlimited else None)
    best, best_score, r = None, -np.inf, 0
    while limit is None or r < limit:
        match_of, sc = descend(start(r))
        if sc > best_score:
            best, best_score = match_of.copy(), sc
        r += 1
        if budget.expired():
            break
    assert best is not None
    ids = [p.id for p in players]
    out = []
    for g in range(n_matches):
        mem = np.flatnonzero(best == g)
        _, k = best_split(mem[None])
        lab = splits[k[0]]
        out.append([[ids[i] for i in mem[lab == j]] for j in range(teams)])
    return out
