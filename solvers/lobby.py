"""Large-lobby search (``--method lobby``): free-for-all and battle-royale pools within the budget.

At 25 squads from 300 candidates (7 500 binaries) neither the big-M MIP nor MGMatch's compiled
neighbourhood scorer answers in 100 ms (compiling the rules alone takes ~0.5 s, the scorer ~2 s),
and a random rule-aware sample never meets "a support in every squad" and squad balance at once.
This method builds one feasible lobby by construction and then climbs the true objective:

1. **Construct.** Host region: the one whose ping limit admits the most candidates and every
   ``include``d player; skill window (``skill_spread``): the one around the included players
   with the most candidates. Units: whole parties (all members admitted) and solos. Units with an
   included player first, then the rest in seeded random order (bigger parties first), are packed
   into the teams (most free places first, then lowest skill sum); teams are topped up with
   solos. Then role minimums are met by swapping solos with admitted bench players who accept
   the role, and the strongest and weakest teams trade solos while that narrows the gap of team
   mean skills (``skill_balance``).
2. **Repair** what construction does not see (``if`` rules, ``avoid``, a balance still too wide):
   moves that lower the number of broken rules (the vectorized checker's per-rule masks).
3. **Climb.** Every iteration scores a seeded sample of swaps at once — a team member with an
   admitted bench player, two members of different teams, a party with a party of its size or
   with as many solos of another team — on the engagement model, incrementally: only the two
   teams a swap touches change, so with a set-form model (:mod:`mgmatch.core.engagement_sets`)
   a swap costs two passes of the team network (the dense form re-reads the whole head). The best
   improving moves are checked by the checker, best first, and the first feasible one is taken.
   When none improves, a seeded kick of a few feasible swaps moves on, and the best assignment
   visited is the answer.

The answer always passed the checker; ``no_solution`` when no feasible lobby was built in time.

Over 600 lines: construction, repair and the climb share one lobby state (teams, bench, party
units, the per-rule masks) that every stage updates in place; split apart, each stage would pass
that whole state through module boundaries.
"""

from __future__ import annotations

import math
import random
import time

import numpy as np

from mgmatch.core.checker import tolerance
from mgmatch.core.compiler import parties
from mgmatch.core.engagement import engagement_gradient
from mgmatch.core.problem import Problem
from mgmatch.core.rules import (
    All,
    AvoidRule,
    IfRule,
    IncludeRule,
    LinearExpr,
    LinearRule,
    Lit,
    MaxPingRule,
    Not,
    PartyTogetherRule,
    RoleMinRule,
    SkillBalanceRule,
    SkillSpreadRule,
)
from mgmatch.core.solution import Solution

from .interface import Budget, register

#: seconds kept for building the Solution after the last step
RESERVE_S = 0.003
#: the finish (the checker's verdict on the answer, the Solution's region) costs about this many checker calls
FINISH_CHECKS = 2.5
#: most candidate swaps scored per iteration, per kind (members × bench, member × member): smaller
#: samples make more iterations in the budget (measured on br-100 at 80 ms of CPU: 1 000 → 2.9% gap,
#: 500 → 1.5%, with MULTI 16)
SAMPLE = 400
#: repair: candidate moves judged on the rules per step (moves of the broken rules' players first)
REPAIR_TRIES = 48
#: member × bench swaps are all scored (not sampled) when there are at most this many times the sample
ENUMERATE = 3
#: improving candidates (past the cheap filters) handed to the checker per round, and rounds per iteration
CHECK = 8
CHECK_ROUNDS = 3
#: most moves (on distinct teams) taken together in one iteration
MULTI = 16
#: party-for-solos swaps drawn per iteration
PARTY_DRAWS = 64
#: iterations without an improving feasible move before a kick
KICK_AFTER = 2
KICK_MOVES = 3
#: the repair weighs a benched included player this many times a broken rule: trading one for two
#: settled `if` rules is a dead end (nothing brings him back without breaking them again)
INCLUDE_WEIGHT = 10.0
#: construction: weight of a player's engagement value against his distance to the skill centre, and
#: the seeded jitter on both (standard deviations)
VALUE_WEIGHT = 4.0
JITTER = 0.5
#: skill windows per host region tried besides the fullest one (the best by engagement value)
WINDOWS = 2
#: a restart (a new construction and its climb) needs this many times the longest construction left
RESTART_SHARE = 3.0
#: construction attempts (seeded orders) before giving up
ATTEMPTS = 6
EPS = 1e-9


class _Eval:
    """The engagement of team embeddings, whole or with two teams changed (incremental)."""

    def __init__(self, problem: Problem):
        m = problem.model
        self.model = m
        self.D, self.E = problem.instance.teams, m.embed_dim
        self.sets = m.team_layers is not None
        if self.sets:  # float32: the scores only rank moves; the answer's objective is computed exactly
            # weights transposed once into contiguous arrays: `h @ w.T` on a float32 view measured
            # ~50 ms for 3 000 × 16 × 16 on this numpy, `h @ wt` 0.03 ms
            self.tw = [(np.ascontiguousarray(w.T), b) for w, b in m._tw32]
            self.hl = [(np.ascontiguousarray(w.T), b) for w, b in m._hl32]
            self.mean = m.team_pool == "mean"

    def phi(self, T: np.ndarray) -> np.ndarray:
        h = T
        for wt, b in self.tw:
            h = np.maximum(h @ wt + b, 0.0)
        return h

    def head_pooled(self, s: np.ndarray) -> np.ndarray:
        if self.mean:
            s = s / self.D
        for k, (wt, b) in enumerate(self.hl):
            s = s @ wt + b
            if k < len(self.hl) - 1:
                s = np.maximum(s, 0.0)
        return s[..., 0]

    def value(self, T: np.ndarray) -> float:
        """T [D, E] → engagement."""
        return float(self.model.head(T.reshape(-1)))

    def swap_values(self, T: np.ndarray, U: np.ndarray | None, a: np.ndarray, b: np.ndarray,
                    da: np.ndarray, db: np.ndarray) -> np.ndarray:
        """Engagement after moves that add ``da`` to team ``a`` and ``db`` to team ``b`` (−1: the bench).

        Shapes: T [D, E], U [D, H] (set form: φ of each team), a, b [M], da, db [M, E] → [M].
        """
        if self.sets:
            s = U.sum(0)[None, :].repeat(len(a), 0)
            for t, d in ((a, da), (b, db)):
                on = t >= 0
                if on.any():
                    tt = t[on]
                    s[on] += self.phi(T[tt] + d[on]) - U[tt]
            return self.head_pooled(s)
        TT = np.broadcast_to(T, (len(a), *T.shape)).copy()
        rows = np.arange(len(a))
        for t, d in ((a, da), (b, db)):
            on = t >= 0
            TT[rows[on], t[on]] += d[on]
        return self.model.head(TT.reshape(len(a), -1))


#: rules every move keeps by construction: the admitted players (host region, skill window), whole
#: parties, and the filters of :meth:`_Lobby._prefilter` (include, role minimums, squad balance)
KEPT = (MaxPingRule, SkillSpreadRule, PartyTogetherRule, IncludeRule, RoleMinRule, SkillBalanceRule)


class _Residual:
    """The rules a move may still break (avoid, if, linear), checked on one assignment at a time and
    only those that name a moved player; None when the instance has a rule kind it does not know (then
    the checker judges every move)."""

    def __init__(self, problem: Problem):
        inst = problem.instance
        self.index = inst.index
        self.rules: list = []
        touched: dict[int, list[int]] = {}
        self.supported = True
        for r in inst.rules:
            if isinstance(r, KEPT):
                continue
            if not isinstance(r, (AvoidRule, IfRule, LinearRule)):
                self.supported = False
                return
            k = len(self.rules)
            self.rules.append(r)
            for pid in self._players(r):
                touched.setdefault(inst.index[pid], []).append(k)
        self.touched = {i: sorted(set(v)) for i, v in touched.items()}
        self.checks = [self._compile(r) for r in self.rules]

    @staticmethod
    def _players(r) -> set[str]:
        if isinstance(r, AvoidRule):
            return set(r.players)
        out = {t.player for t in (r.expr if isinstance(r, LinearRule) else r.then).terms}
        if isinstance(r, IfRule):
            stack = [r.when]
            while stack:
                c = stack.pop()
                if isinstance(c, Lit):
                    out.add(c.player)
                elif isinstance(c, Not):
                    stack.append(c.arg)
                else:
                    stack.extend(c.args)
        return out

    def _compile_cond(self, c):
        """A condition as a function of the assignment (flat any/all of literals as one numpy test)."""
        if isinstance(c, Lit):
            i, t = self.index[c.player], c.team
            return lambda cur: cur[i] == t
        if isinstance(c, Not):
            f = self._compile_cond(c.arg)
            return lambda cur: not f(cur)
        if all(isinstance(a, Lit) for a in c.args):
            idx = np.asarray([self.index[a.player] for a in c.args], dtype=np.int64)
            tm = np.asarray([a.team for a in c.args])
            if isinstance(c, All):
                return lambda cur: bool((cur[idx] == tm).all())
            return lambda cur: bool((cur[idx] == tm).any())
        fs = [self._compile_cond(a) for a in c.args]
        if isinstance(c, All):
            return lambda cur: all(f(cur) for f in fs)
        return lambda cur: any(f(cur) for f in fs)

    def _compile_expr(self, e: LinearExpr):
        idx = np.asarray([self.index[t.player] for t in e.terms], dtype=np.int64)
        tm = np.asarray([t.team for t in e.terms])
        coef = np.asarray([t.coef for t in e.terms], dtype=np.float64)
        rhs, tol, sense = e.rhs, tolerance(e.rhs), e.sense

        scale = 1.0 + abs(rhs)

        def excess(cur: np.ndarray) -> float:
            """0 when it holds, else 1 + how far the activity lies outside, relative to 1 + |rhs|."""
            act = float(coef[cur[idx] == tm].sum())
            if sense == "<=":
                out = act - rhs - tol
            elif sense == ">=":
                out = rhs - tol - act
            else:
                out = abs(act - rhs) - tol
            return 0.0 if out <= 0 else 1.0 + out / scale
        return excess

    def _compile(self, r):
        """A rule as a function of the assignment: how far it is broken (0: it holds)."""
        if isinstance(r, AvoidRule):
            a, b = self.index[r.players[0]], self.index[r.players[1]]
            match = r.scope == "match"
            return lambda cur: float(cur[a] >= 0 and cur[b] >= 0 and (match or cur[a] == cur[b]))
        if isinstance(r, LinearRule):
            return self._compile_expr(r.expr)
        cond, then = self._compile_cond(r.when), self._compile_expr(r.then)
        return lambda cur: then(cur) if cond(cur) else 0.0

    def rule_holds(self, k: int, cur: np.ndarray) -> bool:
        return self.checks[k](cur) == 0.0

    def excess(self, k: int, cur: np.ndarray) -> float:
        return self.checks[k](cur)

    def key_players(self, k: int) -> set[str]:
        """The players whose move alone can settle rule ``k``: an ``if`` rule's condition players, an
        ``avoid`` pair; for a ``linear`` rule, its terms' players."""
        r = self.rules[k]
        if isinstance(r, IfRule):
            return self._players(IfRule(r.when, LinearExpr((), "<=", 0.0)))
        return self._players(r)

    def touched_by(self, moved) -> list[int]:
        return sorted({k for i in moved for k in self.touched.get(int(i), ())})

    def holds(self, cur: np.ndarray, moved) -> bool:
        return all(self.rule_holds(k, cur) for k in self.touched_by(moved))

    def broken(self, cur: np.ndarray) -> set[int]:
        return {k for k in range(len(self.rules)) if not self.rule_holds(k, cur)}


class _Lobby:
    def __init__(self, problem: Problem, rng: np.random.Generator, available: np.ndarray | None = None):
        self.pb, self.rng = problem, rng
        self.pyrng = random.Random(int(rng.integers(2**63)))  # small draws, cheaper than numpy's
        inst = problem.instance
        self.inst = inst
        self.N, self.D = inst.n, inst.teams
        #: players this lobby may take (a batch's later lobbies: not those of the lobbies before)
        self.available = np.ones(self.N, dtype=bool) if available is None else np.asarray(available, dtype=bool)
        self.sizes = np.asarray(inst.sizes)
        self.emb = problem.embeddings
        self.skill = np.nan_to_num(inst.skills(), nan=0.0)
        self.ev = _Eval(problem)
        party_of = np.full(self.N, -1)
        self.units = [np.asarray(m) for m in parties(inst).values()]
        for u, members in enumerate(self.units):
            party_of[members] = u
        self.party_of = party_of
        # parties as padded member rows, and every pair of parties of one size (their swaps)
        self.unit_len = np.asarray([len(u) for u in self.units], dtype=np.int64)
        width = int(self.unit_len.max()) if self.units else 1
        self.unit_members = np.full((len(self.units), width), -1, dtype=np.int64)
        for u, members in enumerate(self.units):
            self.unit_members[u, :len(members)] = members
        same = self.unit_len[:, None] == self.unit_len[None, :]
        self.pair_u, self.pair_v = np.nonzero(np.triu(same, 1))
        self.include = np.zeros(self.N, dtype=bool)
        self.role_min: list[tuple[np.ndarray, int]] = []
        self.balance = None
        self.spread = None
        # pins: `linear` rules x[p, j] == 1 (a backfill's players already in the match) fix p on team j
        self.pinned = np.full(self.N, -1)
        for r in inst.rules:
            if (isinstance(r, LinearRule) and len(r.expr.terms) == 1 and r.expr.sense == "=="
                    and r.expr.terms[0].coef == 1.0 and r.expr.rhs == 1.0):
                self.pinned[inst.index[r.expr.terms[0].player]] = r.expr.terms[0].team
        self.include[self.pinned >= 0] = True
        #: players a move may take: no party (parties move whole) and no pin
        self.free_solo = (party_of < 0) & (self.pinned < 0)
        for r in inst.rules:
            if isinstance(r, IncludeRule):
                self.include[[inst.index[p] for p in r.players]] = True
            elif isinstance(r, RoleMinRule):
                acc = np.asarray([r.role in (p.roles or ()) for p in inst.players])
                self.role_min.append((acc, r.min))
            elif isinstance(r, SkillBalanceRule):
                self.balance = r.max_diff if self.balance is None else min(self.balance, r.max_diff)
            elif isinstance(r, SkillSpreadRule):
                self.spread = r.max_spread if self.spread is None else min(self.spread, r.max_spread)
        #: construction balances the squads until the gap of team mean skills is this low
        self.balance_target = None if self.balance is None else 0.9 * self.balance
        self.has_ping = any(isinstance(r, MaxPingRule) for r in inst.rules)
        self.residual = _Residual(problem)
        self.index_of = inst.index
        # each player's engagement value: the model's first-order gain of selecting him (the mean over
        # teams of ∂EnG/∂x_ij at the uniform fractional assignment), standardized
        # (over the players this lobby may take: a batch's later lobby values them as a pool of its own)
        av = self.available
        g = np.zeros(self.N)
        if av.any():
            g[av] = engagement_gradient(problem.model, self.emb[av], inst.sizes).mean(1)
            g[av] = (g[av] - g[av].mean()) / (g[av].std() or 1.0)
        self.value = g
        # avoid pairs: never both selected (match) / never on one team (team)
        self.avoid_match: dict[int, set[int]] = {}
        self.avoid_team: dict[int, set[int]] = {}
        for r in inst.rules:
            if isinstance(r, AvoidRule):
                x, y = (inst.index[p] for p in r.players)
                book = self.avoid_match if r.scope == "match" else self.avoid_team
                book.setdefault(x, set()).add(y)
                book.setdefault(y, set()).add(x)

    # ------------------------------------------------------------------ admitted players

    def admitted_sets(self) -> list[np.ndarray]:
        """Boolean masks of the players one host region (and skill window) admits, best first."""
        ch = self.pb.checker
        masks = []
        if self.has_ping and ch.far is not None and ch.far.shape[1]:
            for r in range(ch.far.shape[1]):
                ok = ~ch.far[:, r] & self.available
                if (ok | ~self.include).all():
                    masks.append(ok)
        else:
            masks.append(self.available.copy())
        if self.spread is not None:
            # per region, the skill windows (every start at a candidate's skill) holding the included
            # players and enough candidates: the fullest first, then the ones of the most engagement
            # value (a window of strong players may beat the fullest one)
            need = int(self.sizes.sum())
            windowed = []
            for ok in masks:
                inc = self.skill[self.include]
                lo_min = (inc.max() if len(inc) else -np.inf) - self.spread
                hi_max = (inc.min() if len(inc) else np.inf)
                starts = np.unique(self.skill[ok & (self.skill >= lo_min) & (self.skill <= hi_max)])
                wins = [ok & (self.skill >= s0 - 1e-9) & (self.skill <= s0 + self.spread + 1e-9) for s0 in starts]
                wins = [w for w in wins if w.sum() >= need]
                if not wins:
                    continue
                fullest = max(wins, key=lambda w: int(w.sum()))
                by_value = sorted(wins, key=lambda w: -float(np.sort(self.value[w])[-need:].sum()))
                windowed.append((0, fullest))
                windowed.extend((1, w) for w in by_value[:WINDOWS] if not (w == fullest).all())
            windowed.sort(key=lambda pw: (-pw[0], -int(pw[1].sum())))
            masks = [w for _, w in windowed]
        else:
            masks.sort(key=lambda m: -int(m.sum()))
        # a party is admitted only whole
        out = []
        for ok in masks:
            ok = ok.copy()
            for members in self.units:
                if not ok[members].all():
                    ok[members] = False
            if (ok | ~self.include).all() and ok.sum() >= self.sizes.sum():
                out.append(ok)
        return out

    # ------------------------------------------------------------------ construction

    def construct(self, ok: np.ndarray, jitter: float = 0.5, deadline: float = math.inf) -> np.ndarray | None:
        """A lobby of the players ``ok`` admits; ``jitter`` (standard deviations) spreads the order of
        the candidates (restarts raise it, for other lobbies)."""
        rng, D = self.rng, self.D
        team_of = np.full(self.N, -1)
        free = self.sizes.copy()
        ssum = np.zeros(D)
        have = [np.zeros(D, dtype=np.int64) for _ in self.role_min]
        solos = np.asarray([i for i in np.flatnonzero(ok) if self.free_solo[i]], dtype=np.int64)
        pool = np.flatnonzero(ok)
        center = float(self.skill[self.include].mean()) if self.include.any() else float(np.median(self.skill[pool]))
        groups = [u for u in self.units if ok[u[0]]]
        inc_groups = [u for u in groups if self.include[u].any()]
        other = [groups[k] for k in rng.permutation(len(groups)) if not self.include[groups[k]].any()]
        if self.balance is not None:  # a party far from the lobby's centre cannot sit in a balanced team
            K = float(self.sizes.max())
            other = [u for u in other if abs(self.skill[u].mean() - center) <= 0.4 * self.balance * K / len(u)]
        other.sort(key=lambda u: -len(u))

        def deficit(j: int, add: np.ndarray) -> int:
            return sum(max(0, need - int(h[j]) - int(acc[add].sum())) for (acc, need), h in zip(self.role_min, have, strict=True))

        def clashes(members) -> bool:  # an avoid partner selected, or included (selected for sure)
            return any(team_of[y] >= 0 or self.include[y] for i in members for y in self.avoid_match.get(int(i), ()))

        def shunned(members) -> set[int]:
            return {int(team_of[y]) for i in members for y in self.avoid_team.get(int(i), ()) if team_of[y] >= 0}

        def place(members: np.ndarray, j: int) -> None:
            team_of[members] = j
            free[j] -= len(members)
            ssum[j] += self.skill[members].sum()
            for (acc, _), h in zip(self.role_min, have, strict=True):
                h[j] += int(acc[members].sum())

        for i in np.flatnonzero(self.pinned >= 0):
            place(np.asarray([i]), int(self.pinned[i]))
            if free[int(self.pinned[i])] < 0:
                return None
        # parties: included first, then a seeded share of the rest (bigger first), where the team's
        # places left still hold its missing roles
        share = rng.uniform(0.3, 1.0)
        for u in inc_groups + other[: int(round(share * len(other)))]:
            if not self.include[u].any() and clashes(u):
                continue
            away = shunned(u)
            fits = [j for j in np.flatnonzero(free >= len(u)) if deficit(j, u) <= free[j] - len(u) and j not in away]
            if not fits:
                if self.include[u].any():
                    return None
                continue
            fits = np.asarray(fits)
            place(u, int(fits[np.lexsort((ssum[fits], -free[fits]))[0]]))
        # solos: included ones, then role fillers, then the rest near the lobby's centre (seeded jitter)
        left = [i for i in solos if team_of[i] < 0]
        # the rest by engagement value first (the model's gradient, in standard deviations), nearness to
        # the lobby's skill centre second (in units of the balance bound), a seeded jitter over both
        width = self.balance if self.balance is not None else 200.0
        score = (-VALUE_WEIGHT * self.value + np.abs(self.skill - center) / width
                 + rng.normal(0, jitter, self.N))
        order = sorted(left, key=lambda i: (not self.include[i], score[i]))
        used = np.zeros(self.N, dtype=bool)
        for i in [i for i in order if self.include[i]]:
            open_ = [j for j in np.flatnonzero(free > 0) if deficit(j, np.asarray([i])) <= free[j] - 1]
            if not open_:
                return None
            place(np.asarray([i]), int(min(open_, key=lambda j: ssum[j] / max(1, self.sizes[j] - free[j]))))
            used[i] = True
        for (acc, need), h in zip(self.role_min, have, strict=True):
            fillers = [i for i in order if acc[i]]
            for j in range(D):
                while h[j] < need and free[j] > 0:
                    fillers = [i for i in fillers if not used[i]]
                    cand = []
                    for i in fillers:
                        if not clashes([i]) and j not in shunned([i]):
                            cand.append(i)
                            if len(cand) == 20:
                                break
                    if not cand:
                        return None
                    target = center * self.sizes[j] - ssum[j] if free[j] == 1 else center
                    i = min(cand, key=lambda i: abs(self.skill[i] - target))
                    place(np.asarray([i]), j)
                    used[i] = True
        rest: list[int] = []
        taken = set()
        for i in order:
            if len(rest) == free.sum():
                break
            if used[i] or any(y in taken for y in self.avoid_match.get(int(i), ())) or clashes([i]):
                continue
            rest.append(i)
            taken.add(int(i))
        if len(rest) < free.sum():
            return None
        for i in sorted(rest, key=lambda i: -self.skill[i]):
            away = shunned([i])
            open_ = np.asarray([j for j in np.flatnonzero(free > 0) if j not in away] or np.flatnonzero(free > 0))
            filled = self.sizes - free
            mean = np.where(filled > 0, ssum / np.maximum(filled, 1), center)
            j = open_[np.argmin(mean[open_])] if self.balance is not None else open_[np.argmax(free[open_])]
            place(np.asarray([i]), int(j))
        if self.balance is not None:
            self._balance(team_of, ok, deadline=deadline)
        return team_of

    def _balance(self, team_of: np.ndarray, ok: np.ndarray, steps: int = 200, deadline: float = math.inf) -> None:
        """Narrow the gap of team mean skills below the bound: each step takes the best swap of a solo of
        the strongest or the weakest team with another team's solo or an admitted bench solo (role
        minimums and included players kept). Vectorized per step: the gap after a swap is the spread of
        the two changed means and the extremes of the other teams (the top and bottom three)."""
        solo = self.free_solo
        sizes = self.sizes.astype(float)
        accs = [(acc, need) for acc, need in self.role_min]
        for _ in range(steps):
            if time.perf_counter() > deadline:  # (the balance already met or not: the checker judges)
                return
            sums = np.bincount(team_of[team_of >= 0], weights=self.skill[team_of >= 0], minlength=self.D)
            means = sums / sizes
            order = np.argsort(means)
            hi, lo = int(order[-1]), int(order[0])
            gap = means[hi] - means[lo]
            if gap <= self.balance_target:
                return
            at_ends = ((team_of == hi) | (team_of == lo)) & solo
            ends = np.flatnonzero(at_ends)
            others = np.flatnonzero(solo & ((team_of >= 0) | ok) & ~at_ends)
            if not len(ends) or not len(others):
                return
            i = np.repeat(ends, len(others))
            k = np.tile(others, len(ends))
            a, b = team_of[i], team_of[k]
            keep = ~((b < 0) & self.include[i]) & (a != b)
            for acc, need in accs:  # neither team may drop below a role minimum it meets now
                counts = np.bincount(team_of[(team_of >= 0) & acc], minlength=self.D)
                da = acc[k].astype(int) - acc[i].astype(int)
                keep &= (counts[a] + da >= np.minimum(need, counts[a]))
                keep &= (b < 0) | (counts[np.maximum(b, 0)] - da >= np.minimum(need, counts[np.maximum(b, 0)]))
            i, k, a, b = i[keep], k[keep], a[keep], b[keep]
            if not len(i):
                return
            d = self.skill[k] - self.skill[i]
            new_a = means[a] + d / sizes[a]
            new_b = np.where(b >= 0, means[np.maximum(b, 0)] - d / sizes[np.maximum(b, 0)], np.nan)
            top = np.full(len(i), -np.inf)
            bot = np.full(len(i), np.inf)
            for t in order[-3:][::-1]:  # the strongest other team
                top = np.where(np.isinf(top) & (a != t) & (b != t), means[t], top)
            for t in order[:3]:
                bot = np.where(np.isinf(bot) & (a != t) & (b != t), means[t], bot)
            hi_new = np.fmax(np.fmax(new_a, new_b), top)
            lo_new = np.fmin(np.fmin(new_a, new_b), bot)
            new_gap = hi_new - lo_new
            c = int(np.argmin(new_gap))
            if not new_gap[c] < gap - EPS:
                return
            team_of[i[c]], team_of[k[c]] = b[c], a[c]

    # ------------------------------------------------------------------ moves

    def _moves(self, cur: np.ndarray, ok: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
        """A seeded sample of swaps as (a, b, A, B): players A (padded −1) leave team a (−1 bench) for
        team b, players B leave b for a. Shapes: a, b [M]; A, B [M, W] (W: the largest party, ≥ 1)."""
        rng = self.rng
        W = self.unit_members.shape[1] if self.units else 1
        solo = self.free_solo
        sel_solo = np.flatnonzero((cur >= 0) & solo)
        bench = np.flatnonzero((cur < 0) & ok & solo)
        a_parts, b_parts, A_parts, B_parts = [], [], [], []

        def add(a, b, A, B):
            if not len(a):
                return
            a_parts.append(np.asarray(a, dtype=np.int64))
            b_parts.append(np.asarray(b, dtype=np.int64))
            for parts, X in ((A_parts, A), (B_parts, B)):
                X = np.asarray(X, dtype=np.int64).reshape(len(a_parts[-1]), -1)
                if X.shape[1] < W:
                    X = np.hstack([X, np.full((X.shape[0], W - X.shape[1]), -1, dtype=np.int64)])
                parts.append(X)

        if len(sel_solo) and len(bench):
            if len(sel_solo) * len(bench) <= ENUMERATE * n:  # a small neighbourhood: all of it (ffa-32: ~1 000)
                i, k = np.repeat(sel_solo, len(bench)), np.tile(bench, len(sel_solo))
            else:
                i = sel_solo[rng.integers(0, len(sel_solo), n)]
                k = bench[rng.integers(0, len(bench), n)]
            add(cur[i], np.full(len(i), -1), i, k)
        if len(sel_solo) > 1 and self.D > 1 and self.sizes.max() > 1:  # teams of one: a swap changes nothing
            i = sel_solo[rng.integers(0, len(sel_solo), n)]
            k = sel_solo[rng.integers(0, len(sel_solo), n)]
            diff = cur[i] != cur[k]
            add(cur[i[diff]], cur[k[diff]], i[diff], k[diff])
        if self.units:
            # each party with an admitted party of its size on another team (or the bench) ...
            first = self.unit_members[:, 0]
            pu, pv = self.pair_u, self.pair_v
            keep = ok[first[pu]] & ok[first[pv]] & (cur[first[pu]] != cur[first[pv]])
            pu, pv = pu[keep], pv[keep]
            if len(pu) > n:
                pick = rng.integers(0, len(pu), n)
                pu, pv = pu[pick], pv[pick]
            if len(pu):
                add(cur[first[pu]], cur[first[pv]], self.unit_members[pu], self.unit_members[pv])
            # ... and with as many solos of one team (or of the admitted bench): the solos in a seeded
            # order grouped by team (bench first), m consecutive ones of the team's block from a random
            # start (distinct while the block holds m)
            units = np.flatnonzero(ok[first])
            if len(units):
                movable = np.flatnonzero(solo & ((cur >= 0) | ok))
                movable = movable[rng.permutation(len(movable))]
                movable = movable[np.argsort(cur[movable], kind="stable")]
                count = np.bincount(cur[movable] + 1, minlength=self.D + 1)
                start = np.concatenate([[0], np.cumsum(count)[:-1]])
                k = min(PARTY_DRAWS, 2 * len(units))
                u = units[rng.integers(0, len(units), k)]
                j, t, m = cur[first[u]], rng.integers(-1, self.D, k), self.unit_len[u]
                keep = (t != j) & (count[t + 1] >= m)
                u, j, t, m = u[keep], j[keep], t[keep], m[keep]
                if len(u):
                    off = rng.integers(0, np.iinfo(np.int64).max, len(u)) % count[t + 1]
                    col = np.arange(W)
                    pos = start[t + 1][:, None] + (off[:, None] + col) % count[t + 1][:, None]
                    add(j, t, self.unit_members[u], np.where(col < m[:, None], movable[pos], -1))
        if not a_parts:
            return (np.zeros(0, np.int64),) * 2 + (np.zeros((0, W), np.int64),) * 2
        return (np.concatenate(a_parts), np.concatenate(b_parts), np.concatenate(A_parts),
                np.concatenate(B_parts))

    def _prefilter(self, cur: np.ndarray, a: np.ndarray, b: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Moves that keep the rules construction already meets: no included player benched, role
        minimums, the squad balance (bool [M]); the checker still confirms every move taken."""
        ok = np.ones(len(a), dtype=bool)
        inc = np.append(self.include, False)      # index −1 (padding) → not included
        ok &= ~((b < 0) & inc[A].any(1)) & ~((a < 0) & inc[B].any(1))
        for acc, need in self.role_min:
            acc_x = np.append(acc, False).astype(np.int64)
            counts = np.bincount(cur[(cur >= 0) & acc], minlength=self.D)
            d = acc_x[B].sum(1) - acc_x[A].sum(1)        # team a gains B, loses A
            ok &= np.where(a >= 0, counts[np.maximum(a, 0)] + d >= need, True)
            ok &= np.where(b >= 0, counts[np.maximum(b, 0)] - d >= need, True)
        if self.balance is not None:
            ok &= self._spread_after(cur, a, b, A, B) <= self.balance + 1e-6 * max(1.0, abs(self.balance))
        return ok

    def _apply(self, cur: np.ndarray, a: int, b: int, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        out = cur.copy()
        A, B = A[A >= 0], B[B >= 0]
        out[A], out[B] = b, a
        return out

    def _balanced(self, cur: np.ndarray) -> bool:
        if self.balance is None:
            return True
        sums = np.bincount(cur[cur >= 0], weights=self.skill[cur >= 0], minlength=self.D)
        means = sums / self.sizes
        return bool(means.max() - means.min() <= self.balance + tolerance(self.balance))

    def climb(self, start: np.ndarray, ok: np.ndarray, deadline: float) -> tuple[np.ndarray, float, dict]:
        """Improve ``start`` (feasible) until ``deadline``; returns the best visited, its score, counters.

        An iteration takes the best feasible improving move and, with it, further improving moves on
        other teams and players (each kept only if the assignment stays feasible and the value with
        all of them beats the best move alone)."""
        ev, D = self.ev, self.D
        res = self.residual
        cur = start.copy()
        ext = np.vstack([self.emb, np.zeros((1, self.emb.shape[1]))]).astype(np.float32)  # index −1 → 0
        T = np.stack([ext[:-1][cur == j].sum(0) for j in range(D)])
        U = ev.phi(T) if ev.sets else None
        cur_val = ev.value(T.astype(np.float64))
        best, best_val = cur.copy(), cur_val
        self.bests = [(best_val, best)]  # every new best of the climb with its value (the finish re-checks them)
        iters, taken, kicks, stale, pace = 0, 0, 0, 0, 0.0

        def refresh(teams) -> None:
            for t in teams:
                if t >= 0:
                    T[t] = ext[:-1][cur == t].sum(0)
                    if U is not None:
                        U[t] = ev.phi(T[t])

        while True:
            t0 = time.perf_counter()
            if t0 + pace > deadline:
                break
            iters += 1
            a, b, A, B = self._moves(cur, ok, SAMPLE)
            if not len(a):
                break
            eA, eB = ext[A].sum(1), ext[B].sum(1)
            vals = ev.swap_values(T, U, a, b, eB - eA, eA - eB)
            fine = self._prefilter(cur, a, b, A, B)
            order = np.argsort(-np.where(fine, vals, -np.inf))
            order = order[fine[order]]
            kick = stale >= KICK_AFTER
            if kick:  # out of a local optimum: the best feasible moves, improving or not
                cand = order[: CHECK * 4]
            else:
                cand = order[vals[order] > cur_val + 1e-6 * max(1.0, abs(cur_val))]
            chosen: list[int] = []
            if res.supported:
                busy_t: set[int] = set()
                nxt = cur
                for c in cand[: CHECK * CHECK_ROUNDS * 4]:
                    ta, tb = int(a[c]), int(b[c])
                    if chosen and (ta in busy_t or tb in busy_t or (ta < 0 and tb < 0)):
                        continue
                    trial = self._apply(nxt, ta, tb, A[c], B[c])
                    moved = np.concatenate([A[c][A[c] >= 0], B[c][B[c] >= 0]])
                    if (chosen and (nxt[moved] != cur[moved]).any()) or not res.holds(trial, moved):
                        continue
                    if chosen and not self._balanced(trial):
                        continue
                    chosen.append(int(c))
                    busy_t.update(t for t in (ta, tb) if t >= 0)
                    nxt = trial
                    if kick or len(chosen) >= MULTI:
                        break
            else:
                for r in range(CHECK_ROUNDS):
                    chunk = cand[r * CHECK:(r + 1) * CHECK]
                    if not len(chunk) or time.perf_counter() > deadline:
                        break
                    Ts = np.stack([self._apply(cur, a[c], b[c], A[c], B[c]) for c in chunk])
                    feas = self.pb.checker.feasible(Ts)
                    if feas.any():
                        chosen = [int(chunk[int(np.argmax(feas))])]
                        nxt = Ts[int(np.argmax(feas))]
                        break
            if not chosen:
                stale += 1
                if kick:
                    break
                pace = max(pace * 0.7, time.perf_counter() - t0)
                continue
            teams = {int(t) for c in chosen for t in (a[c], b[c]) if t >= 0}
            prev = cur
            cur = nxt
            refresh(teams)
            new_val = ev.value(T.astype(np.float64))
            if len(chosen) > 1 and new_val < float(vals[chosen[0]]) - 1e-6:
                # together worse than the best alone: keep the best alone
                cur = self._apply(prev, a[chosen[0]], b[chosen[0]], A[chosen[0]], B[chosen[0]])
                refresh(teams)
                new_val = ev.value(T.astype(np.float64))
                chosen = chosen[:1]
            cur_val = new_val
            taken += len(chosen)
            if kick:
                kicks += 1
                if kicks % KICK_MOVES == 0:
                    stale = 0
            if cur_val > best_val + EPS:
                best, best_val = cur.copy(), cur_val
                self.bests.append((best_val, best))
                stale = 0
            pace = max(pace * 0.7, time.perf_counter() - t0)
        return best, best_val, {"iterations": iters, "moves": taken, "kicks": kicks}

    def _spread_after(self, cur, a, b, A, B) -> np.ndarray:
        """The gap of team mean skills (strongest − weakest) after each move (A goes a → b, B goes b → a;
        −1 is the bench) — float [M]. A move changes two means; the other teams' extremes are the
        first of the three strongest (weakest) teams that the move does not touch."""
        sk = np.append(self.skill, 0.0)
        sums = np.bincount(cur[cur >= 0], weights=self.skill[cur >= 0], minlength=self.D)
        size = self.sizes.astype(float)
        means = sums / size
        d = sk[B].sum(1) - sk[A].sum(1)
        new_a = np.where(a >= 0, means[np.maximum(a, 0)] + d / size[np.maximum(a, 0)], np.nan)
        new_b = np.where(b >= 0, means[np.maximum(b, 0)] - d / size[np.maximum(b, 0)], np.nan)
        order = np.argsort(means)
        top = np.full(len(a), -np.inf)
        bot = np.full(len(a), np.inf)
        for t in order[-3:][::-1]:
            top = np.where(np.isinf(top) & (a != t) & (b != t), means[t], top)
        for t in order[:3]:
            bot = np.where(np.isinf(bot) & (a != t) & (b != t), means[t], bot)
        hi = np.fmax(np.fmax(new_a, new_b), top)
        lo = np.fmin(np.fmin(new_a, new_b), bot)
        return hi - lo

    def _role_deficit(self, cur: np.ndarray, a: np.ndarray, b: np.ndarray, A: np.ndarray,
                      B: np.ndarray) -> np.ndarray:
        """Members missing from the role minimums after each move, summed over teams and rules: [M]."""
        out = np.zeros(len(a))
        rows = np.arange(len(a))
        for acc, need in self.role_min:
            acc_x = np.append(acc, False).astype(np.int64)
            counts = np.bincount(cur[(cur >= 0) & acc], minlength=self.D)
            C = np.broadcast_to(counts, (len(a), self.D)).copy()
            d = acc_x[B].sum(1) - acc_x[A].sum(1)
            on = a >= 0
            C[rows[on], a[on]] += d[on]
            on = b >= 0
            C[rows[on], b[on]] -= d[on]
            out += np.clip(need - C, 0, None).sum(1)
        return out

    def _base_violation(self, cur: np.ndarray, a: np.ndarray, b: np.ndarray, A: np.ndarray,
                        B: np.ndarray, include_weight: float = 1.0) -> np.ndarray:
        """How far each move leaves the kept rules broken: benched included players, missing role
        members, the squad balance's excess over its bound (in bounds) — float [M]."""
        out = np.zeros(len(a))
        inc = np.append(self.include, False)
        incl = inc[np.flatnonzero(cur < 0)].sum()
        ia, ib = inc[A].sum(1), inc[B].sum(1)  # A goes a → b, B goes b → a; −1 is the bench
        out += include_weight * (incl + np.where(b < 0, ia - ib, 0) + np.where(a < 0, ib - ia, 0))
        out += self._role_deficit(cur, a, b, A, B)
        if self.balance is not None:
            excess = self._spread_after(cur, a, b, A, B) - self.balance - tolerance(self.balance)
            out += np.where(excess > 0, 1.0 + excess / max(self.balance, 1.0), 0.0)
        return out

    def _targeted(self, cur: np.ndarray, ok: np.ndarray, hot: np.ndarray, draws: int = 12) -> tuple[np.ndarray, ...]:
        """Moves of the players ``hot`` marks: each selected one (or its party) with the admitted bench
        solos and the solos of other teams nearest in skill (so that the squad balance holds), ``draws``
        of each (as :meth:`_moves` returns them)."""
        pr = self.pyrng
        W = self.unit_members.shape[1] if self.units else 1
        solo = self.free_solo
        bench = np.flatnonzero((cur < 0) & ok & solo)
        placed = np.flatnonzero(solo & (cur >= 0))
        a, b, A, B = [], [], [], []
        seen: set[int] = set()
        for p in np.flatnonzero(hot[:-1] & (cur >= 0) & (self.pinned < 0)).tolist():
            u = int(self.party_of[p])
            members = [p] if u < 0 else self.units[u].tolist()
            if members[0] in seen:
                continue
            seen.add(members[0])
            j, m = int(cur[p]), len(members)
            target = float(self.skill[members].mean())
            for pool in (bench, placed[cur[placed] != j]):
                if len(pool) < m:
                    continue
                near = pool[np.argsort(np.abs(self.skill[pool] - target))[: 3 * draws]].tolist()
                for _ in range(draws):
                    if m == 1:
                        pick = [near[pr.randrange(len(near))]]
                    else:  # m solos of one team (or of the bench), nearest first
                        t = int(cur[near[pr.randrange(len(near))]])
                        same = [x for x in near if cur[x] == t] or [x for x in pool.tolist() if cur[x] == t]
                        if len(same) < m:
                            continue
                        pick = pr.sample(same, m)
                    t = int(cur[pick[0]])
                    a.append(j)
                    b.append(t)
                    A.append(members + [-1] * (W - m))
                    B.append(pick + [-1] * (W - m))
        if not a:
            return (np.zeros(0, np.int64),) * 2 + (np.zeros((0, W), np.int64),) * 2
        return (np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64), np.asarray(A, dtype=np.int64),
                np.asarray(B, dtype=np.int64))

    def repair(self, cur: np.ndarray, ok: np.ndarray, deadline: float, patience: int = 6) -> np.ndarray | None:
        """Swaps that lower how far the rules are broken until none is (None: out of time, or
        ``patience`` samples in a row without a better move)."""
        res = self.residual
        if not res.supported:
            return None
        none = np.zeros(1, dtype=np.int64)
        pad = np.full((1, 1), -1, dtype=np.int64)
        out = {k: res.excess(k, cur) for k in range(len(res.rules))}
        broken = {k for k, e in out.items() if e > 0}
        base = float(self._base_violation(cur, none - 1, none - 1, pad, pad, INCLUDE_WEIGHT)[0])
        stuck = 0
        for _ in range(300):
            if base == 0 and not broken:
                return cur
            if time.perf_counter() > deadline or stuck >= patience:
                return None
            hot = np.zeros(self.N + 1, dtype=bool)
            for k in broken:
                hot[[self.index_of[p] for p in res._players(res.rules[k])]] = True
            # targeted moves for the players an `if` rule's condition or an `avoid` names (moving one
            # away settles the rule) and a few of the others the broken rules count
            key = np.zeros(self.N + 1, dtype=bool)
            for k in broken:
                key[[self.index_of[p] for p in res.key_players(k)]] = True
            rest = np.flatnonzero(hot[:-1] & ~key[:-1] & (cur >= 0))
            if len(rest) > 8:
                key[self.rng.choice(rest, 8, replace=False)] = True
            sampled, targeted = self._moves(cur, ok, 200), self._targeted(cur, ok, key)
            W = max(sampled[2].shape[1], targeted[2].shape[1])

            a, b = np.concatenate([targeted[0], sampled[0]]), np.concatenate([targeted[1], sampled[1]])
            A = np.vstack([_widen(targeted[2], W), _widen(sampled[2], W)])
            B = np.vstack([_widen(targeted[3], W), _widen(sampled[3], W)])
            if not len(a):
                return None
            v = self._base_violation(cur, a, b, A, B, INCLUDE_WEIGHT)
            total = sum(out.values())
            best_c, best_score = None, base + total - 1e-9
            touch = hot[A].any(1) | hot[B].any(1)
            tie = self.rng.random(len(a))
            for n_c, c in enumerate(np.lexsort((tie, v, ~touch))[:REPAIR_TRIES]):  # moves of the players of broken rules first
                if n_c % 32 == 31 and time.perf_counter() > deadline:
                    return None
                if v[c] >= best_score:
                    continue
                moved = np.concatenate([A[c][A[c] >= 0], B[c][B[c] >= 0]])
                ks = res.touched_by(moved)
                nxt = self._apply(cur, a[c], b[c], A[c], B[c])
                score = v[c] + total - sum(out[k] for k in ks) + sum(res.excess(k, nxt) for k in ks)
                if score < best_score:
                    best_c, best_score = c, score
            if best_c is None:
                stuck += 1
                continue
            stuck = 0
            c = best_c
            cur = self._apply(cur, a[c], b[c], A[c], B[c])
            out = {k: res.excess(k, cur) for k in range(len(res.rules))}
            broken = {k for k, e in out.items() if e > 0}
            base = float(self._base_violation(cur, none - 1, none - 1, pad, pad, INCLUDE_WEIGHT)[0])
        return None


def _widen(X: np.ndarray, width: int) -> np.ndarray:
    """Member rows padded with −1 to ``width`` columns."""
    return np.hstack([X, np.full((X.shape[0], width - X.shape[1]), -1, dtype=np.int64)])


def skill_lobby(problem: Problem, anchor: int, deadline: float) -> np.ndarray | None:
    """The skill-based matchmaker's lobby at sizes its MIPs cannot answer in a budget (``skill``'s large
    path): the construction with no engagement value and no jitter — the ``anchor`` kept, the
    candidates nearest in skill to the included players first — then the squads balanced by solo swaps
    as far as they go (not just under the bound), and a repair of what construction does not see.
    None when no admitted set yields a feasible lobby by ``deadline``."""
    lobby = _Lobby(problem, np.random.default_rng(0))
    lobby.value = np.zeros(lobby.N)
    lobby.include[anchor] = True
    if lobby.balance is not None:
        lobby.balance_target = 0.0
    for ok in lobby.admitted_sets():
        if time.perf_counter() > deadline:
            return None
        # the squads' balancing past the bound gets at most half of the time left (repair needs the rest)
        built = lobby.construct(ok, 0.0, time.perf_counter() + 0.5 * max(0.0, deadline - time.perf_counter()))
        if built is None:
            continue
        if not problem.checker.feasible(built[None])[0]:
            built = lobby.repair(built, ok, deadline)
        if built is not None and problem.checker.feasible(built[None])[0]:
            return built
    return None


def supports(problem: Problem) -> bool:
    """Whether the lobby search handles every rule of ``problem`` (all kinds but ``roles`` slots and
    ``role_max``, which its construction does not fill)."""
    # the rule kinds alone (what _Residual accepts), without compiling the checks: the policy asks this
    # inside the budget before the lobby search builds its own _Residual
    return all(isinstance(r, (*KEPT, AvoidRule, IfRule, LinearRule)) for r in problem.instance.rules)


def lobby_answer(problem: Problem, budget: Budget, method: str, seed: int = 0) -> Solution:
    """The lobby search's answer under ``method``'s name (MGMatch's policy path ``lobby``)."""
    sol = LobbySolver(seed=seed).solve(problem, budget)
    stats = dict((sol.model_extra or {}).get("stats") or {})
    stats["policy_path"] = "lobby"
    return sol.model_copy(update={"method": method, "stats": stats})


def lobby_search(problem: Problem, end: float, seed: int = 0, available: np.ndarray | None = None,
                 found_by: float | None = None) -> tuple[np.ndarray | None, dict]:
    """The lobby search (module docstring) until ``end`` (a ``time.perf_counter()`` instant): the best
    checker-feasible lobby found (team_of [N]; None: none in time) and its counters. ``available`` (bool
    [N]; None: everyone): the players it may select, the others stay benched (a batch's later lobbies).
    ``found_by``: give up at this instant when no feasible lobby was built by then (a batch tries
    another group of included players)."""
    found_by = end if found_by is None else min(end, found_by)
    rng = np.random.default_rng(seed)
    lobby = _Lobby(problem, rng, available)
    stats: dict = {"restarts": 0}
    if available is not None and (lobby.pinned[~lobby.available] >= 0).any():
        return None, stats  # a pinned player is taken elsewhere: no lobby of this instance holds him
    masks = lobby.admitted_sets()
    check_s = 0.0  # one checker call: what the finish (the answer's check, its region) costs about twice
    found: list[tuple[float, np.ndarray]] = []  # (score, assignment) of every climb's bests
    attempt = 0
    start_s = 0.0  # the longest construction (with its check and repair) so far
    while masks and attempt < ATTEMPTS * (1 + len(found)):
        # a restart only when a construction and a few climbing steps still fit before the finish
        left = end - FINISH_CHECKS * check_s - time.perf_counter()
        if left <= 0 or (found and left < RESTART_SHARE * start_s) or (not found and time.perf_counter() > found_by):
            break
        ok = masks[attempt % len(masks)]
        attempt += 1
        t0 = time.perf_counter()
        built = lobby.construct(ok, JITTER * (1 + stats["restarts"]))
        if built is None:
            continue
        t1 = time.perf_counter()
        feasible = problem.checker.feasible(built[None])[0]
        check_s = max(check_s, time.perf_counter() - t1)
        if not feasible:
            built = lobby.repair(built, ok, end if found else found_by)
            if built is not None and not problem.checker.feasible(built[None])[0]:
                built = None  # pragma: no cover - the repair's rules are the checker's
            stats.setdefault("repair_ms", round((time.perf_counter() - t1) * 1e3, 1))
        start_s = max(start_s, time.perf_counter() - t0)
        if built is None:
            continue
        stats.setdefault("construct_ms", round((t1 - t0) * 1e3, 1))
        stats.setdefault("construct_attempts", attempt)
        _, _, info = lobby.climb(built, ok, end - FINISH_CHECKS * check_s)
        found.extend(lobby.bests)
        for k, v in info.items():
            stats[k] = stats.get(k, 0) + v
        stats["restarts"] += 1
    stats["restarts"] = max(0, stats["restarts"] - 1)
    # the checker has the last word: the best it accepts (every climb's start was accepted)
    for _, cand in sorted(found, key=lambda f: -f[0]):
        if problem.checker.feasible(cand[None])[0]:
            return cand, stats
    return None, stats


@register("lobby", "Large-lobby search (FFA, battle royale): construct a feasible lobby (host region, "
          "skill window, parties packed, role minimums, squad balance), then climb the engagement with "
          "incremental set-form swap scores", seeded=True)
class LobbySolver:
    name = "lobby"

    def __init__(self, seed: int = 0, default_time_limit_ms: float = 100.0):
        self.seed = seed
        self.default_time_limit_ms = default_time_limit_ms

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        deadline = budget.deadline(self.default_time_limit_ms)
        end = (math.inf if deadline is None else deadline) - RESERVE_S
        team_of, stats = lobby_search(problem, end, self.seed)
        if team_of is not None:
            return problem.solution(team_of, "feasible", self.name, budget.elapsed_ms(), stats=stats)
        return problem.solution(None, "no_solution", self.name, budget.elapsed_ms(), stats=stats)
