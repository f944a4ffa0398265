"""The one feasibility checker, independent of any solver and of the compiler.

It reads the rules' meaning straight from the spec and evaluates them on assignments, one or a
whole batch at once (vectorized in numpy), so exhaustive search, local search and the tests all
use the same judge. An assignment is ``team_of``: the team index per player, −1 for the bench.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import numpy as np

from .compiler import parties
from .instance import Instance
from .rules import (
    All,
    AnyOf,
    AvoidRule,
    Cond,
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

TOL = 1e-6
#: single assignments whose verdict a checker remembers (:meth:`Checker.feasible`)
FEASIBLE_MEMO = 256


def tolerance(rhs: float) -> float:
    """How far past a bound ``rhs`` an activity may go and still count as meeting it."""
    return TOL * max(1.0, abs(rhs))


@dataclass
class Checker:
    """Precomputes per-instance arrays; then checks assignments quickly."""

    inst: Instance

    def __post_init__(self) -> None:
        inst = self.inst
        self.N, self.D = inst.n, inst.teams
        self.sizes = np.asarray(inst.sizes)
        self.skill = inst.skills()
        self.parties = parties(inst)
        # the parties as member rows [P, W], each padded with its first member (None: no party)
        width = max((len(m) for m in self.parties.values()), default=0)
        self.party_rows = (np.asarray([m + [m[0]] * (width - len(m)) for m in self.parties.values()], dtype=np.int64)
                           if self.parties else None)
        regions = sorted({r for p in inst.players for r in (p.pings or {})})
        self.regions = regions
        self.ping = np.asarray([[(p.pings or {}).get(r, np.inf) for r in regions] for p in inst.players]).reshape(self.N, len(regions))
        ping_rules = [r.max_ms for r in inst.rules if isinstance(r, MaxPingRule)]
        self.max_ping = min(ping_rules) if ping_rules else None
        # [N, regions]: the player is farther than the tightest max_ping from the region (None: no rule)
        self.far = None if self.max_ping is None else self.ping > self.max_ping + tolerance(self.max_ping)

    # ------------------------------------------------------------------ batch

    def team_counts(self, T: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Σ of ``weights`` [N] over each team's members, for a batch T [B, N] → [B, D]; one bincount for
        the whole batch (bin 0 holds the bench and any index outside 0..D−1, which no team counts)."""
        B, D = T.shape[0], self.D
        lab = np.where((T >= 0) & (T < D), T + 1, 0) + (D + 1) * np.arange(B)[:, None]
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), T.shape).ravel()
        return np.bincount(lab.ravel(), weights=w, minlength=B * (D + 1)).reshape(B, D + 1)[:, 1:]

    def rule_masks(self, team_of: np.ndarray) -> np.ndarray:
        """Per-rule satisfaction for a batch.

        Shapes: team_of [B, N] → bool [R + 1, B]; row 0 is the team-formation constraints
        (every team has its size), row k+1 is ``rules[k]``.
        """
        T = np.asarray(team_of)
        out = np.empty((len(self.inst.rules) + 1, T.shape[0]), dtype=bool)
        counts = np.stack([(T == j).sum(1) for j in range(self.D)], axis=1)
        out[0] = (counts == self.sizes).all(1) & (T < self.D).all(1) & (T >= -1).all(1)
        for k, rule in enumerate(self.inst.rules):
            out[k + 1] = self._rule(rule, T)
        return out

    def feasible(self, team_of: np.ndarray) -> np.ndarray:
        """bool [B]: which assignments of the batch satisfy everything.

        A single assignment's verdict is remembered (the last :data:`FEASIBLE_MEMO` distinct ones):
        a solve checks its start more than once (the rounding, then the walk from it), and one
        check of a 12v12-deep pool's 28 rules took 1–2 ms of a 20 ms budget on a slow machine."""
        T = np.asarray(team_of)
        if T.ndim == 2 and T.shape[0] == 1:
            key = np.ascontiguousarray(T, dtype=np.int64).tobytes()
            memo = self.__dict__.setdefault("_feasible_memo", {})
            hit = memo.get(key)
            if hit is None:
                hit = bool(self.rule_masks(T).all(0)[0])
                if len(memo) >= FEASIBLE_MEMO:
                    memo.clear()
                memo[key] = hit
            return np.asarray([hit])
        return self.rule_masks(T).all(0)

    def forget_verdicts(self) -> None:
        """Drop the remembered single-assignment verdicts (:meth:`feasible`)."""
        self.__dict__.pop("_feasible_memo", None)

    # ------------------------------------------------------------------ single

    def violations(self, team_of: np.ndarray) -> list[str]:
        """Readable violations of one assignment [N]; empty when feasible."""
        t = np.asarray(team_of).reshape(1, -1)
        masks = self.rule_masks(t)[:, 0]
        out = []
        if not masks[0]:
            counts = [int((t[0] == j).sum()) for j in range(self.D)]
            out.append(f"team sizes are {counts}, required {list(self.inst.sizes)}")
        for k, rule in enumerate(self.inst.rules):
            if not masks[k + 1]:
                out.append(f"rules[{k}] ({rule.kind}): {self._explain(rule, t[0])}")
        return out

    def region(self, team_of: np.ndarray) -> str | None:
        """The host region of a feasible assignment under the max_ping rules (None without them).

        Among the regions every selected player reaches within the limit, the one with the
        lowest worst ping, then lowest mean ping, then name.
        """
        if self.max_ping is None:
            return None
        sel = np.asarray(team_of) >= 0
        p = self.ping[sel]
        best = None
        for r, name in enumerate(self.regions):
            col = p[:, r]
            if np.all(col <= self.max_ping + tolerance(self.max_ping)):
                key = (float(col.max()), float(col.mean()), name)
                if best is None or key < best:
                    best = key
        return None if best is None else best[2]

    # ------------------------------------------------------------------ rules

    def _memo(self, kind: str, obj, make):
        """``make()`` computed once per checker for ``obj``: a role name (by value), or a rule or an
        expression (by identity; the object is kept with its value so its id is never reused)."""
        cache = self.__dict__.setdefault(f"_{kind}_cache", {})
        key = obj if isinstance(obj, str) else id(obj)
        if key not in cache:
            cache[key] = (obj, make())
        return cache[key][1]

    def _terms(self, e: LinearExpr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The expression's terms as arrays (player index, team, coefficient), computed once."""
        return self._memo("terms", e, lambda: (
            np.asarray([self.inst.index[t.player] for t in e.terms], dtype=np.int64),
            np.asarray([t.team for t in e.terms], dtype=np.int64),
            np.asarray([t.coef for t in e.terms], dtype=np.float64)))

    def _linear(self, e: LinearExpr, T: np.ndarray) -> np.ndarray:
        idx, team, coef = self._terms(e)
        # one gather and one product for all terms (a batch of 2 000 candidates against ~20
        # rules of 2–4 terms: the per-term loop was a quarter of a tabu iteration on 12v12)
        act = (T[:, idx] == team).astype(np.float64) @ coef if idx.size else np.zeros(T.shape[0])
        t = tolerance(e.rhs)
        if e.sense == "<=":
            return act <= e.rhs + t
        if e.sense == ">=":
            return act >= e.rhs - t
        return np.abs(act - e.rhs) <= t

    def _cond(self, c: Cond, T: np.ndarray) -> np.ndarray:
        if isinstance(c, Lit):
            return T[:, self.inst.index[c.player]] == c.team
        if isinstance(c, Not):
            return ~self._cond(c.arg, T)
        vals = [self._cond(a, T) for a in c.args]
        if isinstance(c, All):
            return np.logical_and.reduce(vals)
        assert isinstance(c, AnyOf)
        return np.logical_or.reduce(vals)

    def accepts(self, role: str) -> np.ndarray:
        """bool [N]: which players accept ``role`` (computed once per role)."""
        return self._memo("accepts", role, lambda: np.asarray(
            [role in (p.roles or ()) for p in self.inst.players], dtype=bool))

    def hall(self, rule: RolesRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Hall's condition for a roles rule as matrices (computed once per rule): ``can`` [N, S]
        (player accepts a role of subset S, float32), ``need`` [S] (slots of S), ``none`` [N]
        (accepts no slot role, float32), over every non-empty subset S of the slot roles."""
        def make():
            roles = [r for r, c in rule.slots.items() if c > 0]
            acc = (np.stack([self.accepts(r) for r in roles], axis=1) if roles
                   else np.zeros((self.N, 0), dtype=bool))  # [N, R]
            subsets = [S for size in range(1, len(roles) + 1) for S in combinations(range(len(roles)), size)]
            can = np.stack([acc[:, list(S)].any(1) for S in subsets], axis=1) if subsets else np.zeros((self.N, 0))
            need = np.asarray([sum(rule.slots[roles[s]] for s in S) for S in subsets], dtype=np.float32)
            return can.astype(np.float32), need, (~acc.any(1)).astype(np.float32)
        return self._memo("hall", rule, make)

    def _rule(self, rule, T: np.ndarray) -> np.ndarray:
        """bool [B]: which assignments of the batch ``T`` [B, N] meet ``rule``."""
        return self._holds.visit(rule, T)

    def _explain(self, rule, t: np.ndarray) -> str:
        """How the assignment ``t`` [N] breaks ``rule``, in words."""
        return self._explains.visit(rule, t)

    @cached_property
    def _holds(self) -> _Holds:
        return _Holds(self)

    @cached_property
    def _explains(self) -> _Explains:
        return _Explains(self)


class _Holds(RuleVisitor[np.ndarray]):
    """Each rule's meaning from the spec, evaluated on a batch of assignments T [B, N] → bool [B]."""

    def __init__(self, chk: Checker) -> None:
        self.chk = chk

    def visit_linear(self, rule: LinearRule, T: np.ndarray) -> np.ndarray:
        return self.chk._linear(rule.expr, T)

    def visit_if(self, rule: IfRule, T: np.ndarray) -> np.ndarray:
        return ~self.chk._cond(rule.when, T) | self.chk._linear(rule.then, T)

    def visit_roles(self, rule: RolesRule, T: np.ndarray) -> np.ndarray:
        # Hall's condition: a team whose size equals the slot total can fill every slot iff
        # every set S of roles has at least Σ_{r∈S} count_r members accepting a role of S;
        # members accepting none of the slot roles can fill nothing. One product per team.
        can, need, none = self.chk.hall(rule)
        ok = np.ones(T.shape[0], dtype=bool)
        for j in range(self.chk.D):
            member = (T == j).astype(np.float32)
            ok &= (member @ can >= need - 0.5).all(1) & (member @ none < 0.5)
        return ok

    def visit_role_min(self, rule: RoleMinRule, T: np.ndarray) -> np.ndarray:
        return (self.chk.team_counts(T, self.chk.accepts(rule.role)) >= rule.min).all(1)

    def visit_role_max(self, rule: RoleMaxRule, T: np.ndarray) -> np.ndarray:
        acc = self.chk.accepts(rule.role)
        return np.all([((T == j) & acc).sum(1) <= rule.max for j in range(self.chk.D)], axis=0)

    def visit_skill_balance(self, rule: SkillBalanceRule, T: np.ndarray) -> np.ndarray:
        chk = self.chk
        bound = rule.max_diff + tolerance(rule.max_diff)
        if not np.isfinite(chk.skill).all():  # a player without skill: every mean it enters is NaN
            means = np.stack([((T == j) * chk.skill).sum(1) / chk.inst.sizes[j] for j in range(chk.D)], axis=1)
            ok = np.ones(T.shape[0], dtype=bool)
            for j, m in combinations(range(chk.D), 2):
                ok &= np.abs(means[:, j] - means[:, m]) <= bound
            return ok
        # every pair of team means within the bound ⇔ the strongest and the weakest within it (at 25
        # squads ~100× faster than a pass per team and per pair)
        means = chk.team_counts(T, chk.skill) / chk.sizes
        return means.max(1) - means.min(1) <= bound

    def visit_skill_spread(self, rule: SkillSpreadRule, T: np.ndarray) -> np.ndarray:
        sel = T >= 0
        hi = np.where(sel, self.chk.skill, -np.inf).max(1)
        lo = np.where(sel, self.chk.skill, np.inf).min(1)
        return (hi - lo <= rule.max_spread + tolerance(rule.max_spread)) | ~sel.any(1)

    def visit_party_together(self, rule: PartyTogetherRule, T: np.ndarray) -> np.ndarray:
        rows = self.chk.party_rows
        if rows is None:
            return np.ones(T.shape[0], dtype=bool)
        # every party at once: each member's team against the first member's (rows padded with it)
        return (T[:, rows] == T[:, rows[:, :1]]).all((1, 2))

    def visit_avoid(self, rule: AvoidRule, T: np.ndarray) -> np.ndarray:
        sel = T >= 0
        a, b = (self.chk.inst.index[p] for p in rule.players)
        if rule.scope == "team":
            return ~((T[:, a] == T[:, b]) & sel[:, a])
        return ~(sel[:, a] & sel[:, b])

    def visit_max_ping(self, rule: MaxPingRule, T: np.ndarray) -> np.ndarray:
        sel = T >= 0
        if not self.chk.regions:
            return ~sel.any(1)
        far = self.chk.far.astype(np.float32)  # [N, R]
        # some region reached by every selected player: no selected player is far from it (one
        # product, where a [B, N, R] broadcast is slow on large batches)
        return ((sel.astype(np.float32) @ far) < 0.5).any(1)

    def visit_include(self, rule: IncludeRule, T: np.ndarray) -> np.ndarray:
        idx = [self.chk.inst.index[p] for p in rule.players]
        return (T[:, idx] >= 0).all(1) if idx else np.ones(T.shape[0], dtype=bool)


class _Explains(RuleVisitor[str]):
    """How one assignment t [N] breaks each rule, in words (for ``violations``)."""

    def __init__(self, chk: Checker) -> None:
        self.chk = chk

    def visit_linear(self, rule: LinearRule, t: np.ndarray) -> str:
        return self._activity(rule.expr, t, "")

    def visit_if(self, rule: IfRule, t: np.ndarray) -> str:
        return self._activity(rule.then, t, "condition holds and ")

    def _activity(self, e: LinearExpr, t: np.ndarray, pre: str) -> str:
        act = sum(term.coef for term in e.terms if t[self.chk.inst.index[term.player]] == term.team)
        return f"{pre}activity {act:g} violates {e.sense} {e.rhs:g}"

    def visit_roles(self, rule: RolesRule, t: np.ndarray) -> str:
        return f"a team cannot fill the role slots {dict(rule.slots)} with distinct members"

    def visit_role_min(self, rule: RoleMinRule, t: np.ndarray) -> str:
        return f"members accepting {rule.role!r} per team are {self._counts(rule.role, t)}, min {rule.min}"

    def visit_role_max(self, rule: RoleMaxRule, t: np.ndarray) -> str:
        return f"members accepting {rule.role!r} per team are {self._counts(rule.role, t)}, max {rule.max}"

    def _counts(self, role: str, t: np.ndarray) -> list[int]:
        acc = self.chk.accepts(role)
        return [int(((t == j) & acc).sum()) for j in range(self.chk.D)]

    def visit_skill_balance(self, rule: SkillBalanceRule, t: np.ndarray) -> str:
        means = [float(self.chk.skill[t == j].mean()) for j in range(self.chk.D)]
        return f"team mean skills {[round(m, 2) for m in means]} differ by more than {rule.max_diff:g}"

    def visit_skill_spread(self, rule: SkillSpreadRule, t: np.ndarray) -> str:
        s = self.chk.skill[t >= 0]
        return f"skill spread {float(s.max() - s.min()):g} > {rule.max_spread:g}"

    def visit_party_together(self, rule: PartyTogetherRule, t: np.ndarray) -> str:
        bad = [p for p, m in self.chk.parties.items() if len(set(t[m].tolist())) > 1]
        return f"party {bad[0]!r} is split or partly benched"

    def visit_avoid(self, rule: AvoidRule, t: np.ndarray) -> str:
        return f"{rule.players[0]} and {rule.players[1]} are in the same {rule.scope}"

    def visit_max_ping(self, rule: MaxPingRule, t: np.ndarray) -> str:
        return f"no region is within {self.chk.max_ping:g} ms of every selected player"

    def visit_include(self, rule: IncludeRule, t: np.ndarray) -> str:
        missing = [p for p in rule.players if t[self.chk.inst.index[p]] < 0]
        return f"required players not selected: {missing}"


def check(inst: Instance, team_of: np.ndarray) -> list[str]:
    """Violations of one assignment; empty list when it is feasible."""
    return Checker(inst).violations(team_of)
