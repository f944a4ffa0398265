"""Rule compiler: an :class:`Instance` → the paper's standard form.

Variables X̂ = x ∪ auxiliaries, all binary. ``x[i, j]`` (player i on team j) has index
``i * D + j``. Linear rows are A·X̂ (sense) b; logical rows are ``IF cond THEN row`` with the
condition in negation normal form over literals of X̂ (AND / OR, NOT pushed onto literals).

This compiled form is the one source of truth read by the MIP builder (exact and surrogate
solves) and the graph encoder.

Encodings of the high-level rules (each with its own reason):

- ``roles``: a player accepting one slot role counts directly with x; a player accepting several
  gets one auxiliary y[i,j,r] per accepted role with Σ_r y[i,j,r] = x[i,j] (he fills exactly one
  slot); Σ_i (x or y) = count per team and role.
- ``skill_balance``: mean skills per team, both directions per pair; skills are centred first
  (mean differences are translation invariant because team sizes are fixed), which keeps the
  coefficients small.
- ``skill_spread``: a window-start auxiliary w[a] per distinct skill value, Σ w = 1, and each
  selected player must lie in the chosen window: Σ_j x[i,j] ≤ Σ_{a: v_a ≤ s_i ≤ v_a+spread} w[a].
  N+1 rows instead of O(N²) pairwise conflicts, and as tight.
- ``max_ping``: one host-region auxiliary h[r] shared by every max_ping rule (the match has one
  host), Σ h = 1, and Σ_j x[i,j] ≤ Σ_{r: ping_ir ≤ max_ms} h[r].
- ``party_together``: x[a,j] = x[b,j] for every team and every member b of a's party.
- ``avoid``: x[a,j] + x[b,j] ≤ 1 per team (scope team) or Σ_j x[a,j] + Σ_j x[b,j] ≤ 1 (match).
- ``include``: Σ_j x[i,j] = 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .instance import Instance
from .rules import (
    All,
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

ORIGIN_ONE_TEAM = -1   # Σ_j x_ij ≤ 1  (paper Eq. 2)
ORIGIN_TEAM_SIZE = -2  # Σ_i x_ij = K_j (paper Eq. 3)


@dataclass
class Row:
    """Σ coefs·X̂[vars] (sense) rhs."""

    vars: np.ndarray
    coefs: np.ndarray
    sense: str
    rhs: float
    origin: int
    tag: str

    def activity(self, xhat: np.ndarray) -> np.ndarray:
        """Row activity for one [V] or a batch [B, V] of X̂ vectors."""
        return xhat[..., self.vars] @ self.coefs

    def holds(self, xhat: np.ndarray, tol: float = 1e-6) -> np.ndarray:
        a = self.activity(xhat)
        t = tol * max(1.0, abs(self.rhs))
        if self.sense == "<=":
            return a <= self.rhs + t
        if self.sense == ">=":
            return a >= self.rhs - t
        return np.abs(a - self.rhs) <= t


@dataclass(frozen=True)
class CLit:
    var: int
    negated: bool = False


@dataclass(frozen=True)
class CAnd:
    args: tuple


@dataclass(frozen=True)
class COr:
    args: tuple


CCond = CLit | CAnd | COr


def cond_literals(c: CCond) -> list[CLit]:
    if isinstance(c, CLit):
        return [c]
    out: list[CLit] = []
    for a in c.args:
        out.extend(cond_literals(a))
    return out


def cond_eval(c: CCond, xhat: np.ndarray) -> np.ndarray:
    """Truth of a compiled condition on X̂ values (one [V] or a batch [B, V])."""
    if isinstance(c, CLit):
        v = xhat[..., c.var] > 0.5
        return ~v if c.negated else v
    vals = [cond_eval(a, xhat) for a in c.args]
    out = vals[0]
    for v in vals[1:]:
        out = (out & v) if isinstance(c, CAnd) else (out | v)
    return out


@dataclass
class LogicalRow:
    """IF ``cond`` THEN ``then`` (a linear row)."""

    cond: CCond
    then: Row
    origin: int
    tag: str


@dataclass
class Compiled:
    """The standard form of one instance."""

    n_players: int
    n_teams: int
    sizes: tuple[int, ...]
    var_names: list[str]
    var_origin: list[int]
    rows: list[Row]
    logical: list[LogicalRow]
    regions: list[str] = field(default_factory=list)
    region_vars: list[int] = field(default_factory=list)

    @property
    def n_x(self) -> int:
        return self.n_players * self.n_teams

    @property
    def n_vars(self) -> int:
        return len(self.var_names)

    @property
    def n_aux(self) -> int:
        return self.n_vars - self.n_x

    def x(self, i: int, j: int) -> int:
        return i * self.n_teams + j

    def stats(self) -> dict:
        n_lin, n_log = len(self.rows), len(self.logical)
        return {
            "variables": self.n_vars, "x_variables": self.n_x, "aux_variables": self.n_aux,
            "linear_constraints": n_lin, "logical_constraints": n_log,
            "constraints": n_lin + n_log,
            "logical_share": (n_log / (n_lin + n_log)) if n_lin + n_log else 0.0,
        }


class _Builder:
    def __init__(self, inst: Instance):
        self.inst = inst
        self.D = inst.teams
        self.names = [f"x[{p.id},{j}]" for p in inst.players for j in range(self.D)]
        self.origin = [-1] * len(self.names)
        self.rows: list[Row] = []
        self.logical: list[LogicalRow] = []
        self.region_vars: list[int] = []
        self.regions: list[str] = []

    def x(self, i: int, j: int) -> int:
        return i * self.D + j

    def aux(self, name: str, origin: int) -> int:
        self.names.append(name)
        self.origin.append(origin)
        return len(self.names) - 1

    def row(self, terms: dict[int, float] | list[tuple[int, float]], sense: str, rhs: float, origin: int, tag: str) -> Row:
        if isinstance(terms, list):
            merged: dict[int, float] = {}
            for v, c in terms:
                merged[v] = merged.get(v, 0.0) + c
            terms = merged
        keys = sorted(v for v, c in terms.items() if c != 0.0)
        return Row(np.asarray(keys, dtype=np.int64), np.asarray([terms[k] for k in keys], dtype=np.float64),
                   sense, float(rhs), origin, tag)

    def add(self, *args, **kw) -> Row:
        r = self.row(*args, **kw)
        self.rows.append(r)
        return r

    def selected_terms(self, i: int, coef: float = 1.0) -> list[tuple[int, float]]:
        return [(self.x(i, j), coef) for j in range(self.D)]

    def expr_row(self, e: LinearExpr, origin: int, tag: str) -> Row:
        idx = self.inst.index
        return self.row([(self.x(idx[t.player], t.team), t.coef) for t in e.terms], e.sense, e.rhs,
                        origin=origin, tag=tag)

    def nnf(self, c: Cond, neg: bool = False) -> CCond:
        if isinstance(c, Lit):
            return CLit(self.x(self.inst.index[c.player], c.team), neg)
        if isinstance(c, Not):
            return self.nnf(c.arg, not neg)
        args = tuple(self.nnf(a, neg) for a in c.args)
        is_and = isinstance(c, All) != neg  # De Morgan
        flat: list[CCond] = []
        for a in args:  # flatten nested nodes of the same type
            if (is_and and isinstance(a, CAnd)) or (not is_and and isinstance(a, COr)):
                flat.extend(a.args)
            else:
                flat.append(a)
        if len(flat) == 1:
            return flat[0]
        return CAnd(tuple(flat)) if is_and else COr(tuple(flat))


def compile_instance(inst: Instance) -> Compiled:
    """Compile every rule of ``inst`` into the standard form."""
    b = _Builder(inst)
    N, D = inst.n, inst.teams
    ids = inst.ids
    for i in range(N):
        b.add(b.selected_terms(i), "<=", 1, origin=ORIGIN_ONE_TEAM, tag=f"one_team[{ids[i]}]")
    for j in range(D):
        b.add([(b.x(i, j), 1.0) for i in range(N)], "==", inst.sizes[j], origin=ORIGIN_TEAM_SIZE, tag=f"team_size[{j}]")

    ping_rules = [(k, r) for k, r in enumerate(inst.rules) if isinstance(r, MaxPingRule)]
    if ping_rules:
        regions = sorted({reg for p in inst.players for reg in (p.pings or {})})
        k0 = ping_rules[0][0]
        b.regions = regions
        b.region_vars = [b.aux(f"host[{reg}]", k0) for reg in regions]
        b.add([(v, 1.0) for v in b.region_vars], "==", 1, origin=k0, tag=f"rules[{k0}].one_host")

    rows = _RuleRows(b)
    for k, rule in enumerate(inst.rules):
        rows.visit(rule, k, f"rules[{k}]")

    return Compiled(N, D, inst.sizes, b.names, b.origin, b.rows, b.logical, b.regions, b.region_vars)


class _RuleRows(RuleVisitor[None]):
    """Each rule kind's rows (and auxiliary variables) of the standard form, added to the builder; ``k`` is
    the rule's position (each row's origin) and ``tag`` its name in the rows' tags."""

    def __init__(self, b: _Builder) -> None:
        self.b = b
        self.inst = b.inst

    def visit_linear(self, rule: LinearRule, k: int, tag: str) -> None:
        self.b.rows.append(self.b.expr_row(rule.expr, k, tag))

    def visit_if(self, rule: IfRule, k: int, tag: str) -> None:
        b = self.b
        b.logical.append(LogicalRow(b.nnf(rule.when), b.expr_row(rule.then, k, f"{tag}.then"), k, tag))

    def visit_roles(self, rule: RolesRule, k: int, tag: str) -> None:
        _compile_roles(self.b, rule, k)

    def visit_role_min(self, rule: RoleMinRule, k: int, tag: str) -> None:
        self._role_count(rule.role, ">=", rule.min, k, tag)

    def visit_role_max(self, rule: RoleMaxRule, k: int, tag: str) -> None:
        self._role_count(rule.role, "<=", rule.max, k, tag)

    def _role_count(self, role: str, sense: str, bound: int, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        acc = [i for i, p in enumerate(inst.players) if role in (p.roles or ())]
        for j in range(inst.teams):
            b.add([(b.x(i, j), 1.0) for i in acc], sense, bound, origin=k, tag=f"{tag}.team[{j}]")

    def visit_skill_balance(self, rule: SkillBalanceRule, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        N, D = inst.n, inst.teams
        s = inst.skills()
        s = s - s.mean()
        for j in range(D):
            for m in range(j + 1, D):
                terms = [(b.x(i, j), s[i] / inst.sizes[j]) for i in range(N)]
                terms += [(b.x(i, m), -s[i] / inst.sizes[m]) for i in range(N)]
                b.add(terms, "<=", rule.max_diff, origin=k, tag=f"{tag}.teams[{j},{m}].upper")
                b.add(terms, ">=", -rule.max_diff, origin=k, tag=f"{tag}.teams[{j},{m}].lower")

    def visit_skill_spread(self, rule: SkillSpreadRule, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        s = inst.skills()
        starts = np.unique(s)
        w = [b.aux(f"{tag}.window[{v:g}]", k) for v in starts]
        b.add([(v, 1.0) for v in w], "==", 1, origin=k, tag=f"{tag}.one_window")
        for i in range(inst.n):
            cover = [w[a] for a, v in enumerate(starts) if v <= s[i] <= v + rule.max_spread]
            b.add(b.selected_terms(i) + [(v, -1.0) for v in cover], "<=", 0, origin=k,
                  tag=f"{tag}.in_window[{inst.ids[i]}]")

    def visit_party_together(self, rule: PartyTogetherRule, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        for party, members in parties(inst).items():
            head = members[0]
            for m in members[1:]:
                for j in range(inst.teams):
                    b.add([(b.x(head, j), 1.0), (b.x(m, j), -1.0)], "==", 0, origin=k,
                          tag=f"{tag}.party[{party}].{inst.ids[m]}.team[{j}]")

    def visit_avoid(self, rule: AvoidRule, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        a, c = (inst.index[p] for p in rule.players)
        if rule.scope == "team":
            for j in range(inst.teams):
                b.add([(b.x(a, j), 1.0), (b.x(c, j), 1.0)], "<=", 1, origin=k, tag=f"{tag}.team[{j}]")
        else:
            b.add(b.selected_terms(a) + b.selected_terms(c), "<=", 1, origin=k, tag=tag)

    def visit_max_ping(self, rule: MaxPingRule, k: int, tag: str) -> None:
        b, inst = self.b, self.inst
        for i, p in enumerate(inst.players):
            ok = [v for reg, v in zip(b.regions, b.region_vars, strict=True)
                  if reg in p.pings and p.pings[reg] <= rule.max_ms]
            b.add(b.selected_terms(i) + [(v, -1.0) for v in ok], "<=", 0, origin=k, tag=f"{tag}.{inst.ids[i]}")

    def visit_include(self, rule: IncludeRule, k: int, tag: str) -> None:
        for pid in dict.fromkeys(rule.players):
            self.b.add(self.b.selected_terms(self.inst.index[pid]), "==", 1, origin=k, tag=f"{tag}.{pid}")


def _compile_roles(b: _Builder, rule: RolesRule, k: int) -> None:
    inst = b.inst
    roles = [r for r, c in rule.slots.items() if c > 0]
    tag = f"rules[{k}]"
    # slot[j][r] collects the variables that fill role r on team j
    slot: list[dict[str, list[int]]] = [{r: [] for r in roles} for _ in range(inst.teams)]
    for i, p in enumerate(inst.players):
        acc = [r for r in roles if r in (p.roles or ())]
        if not acc:
            b.add(b.selected_terms(i), "<=", 0, origin=k, tag=f"{tag}.no_slot[{p.id}]")
            continue
        for j in range(inst.teams):
            if len(acc) == 1:
                slot[j][acc[0]].append(b.x(i, j))
                continue
            ys = [b.aux(f"{tag}.y[{p.id},{j},{r}]", k) for r in acc]
            for r, y in zip(acc, ys, strict=True):
                slot[j][r].append(y)
            b.add([(y, 1.0) for y in ys] + [(b.x(i, j), -1.0)], "==", 0, origin=k, tag=f"{tag}.one_slot[{p.id},{j}]")
    for j in range(inst.teams):
        for r in roles:
            b.add([(v, 1.0) for v in slot[j][r]], "==", rule.slots[r], origin=k, tag=f"{tag}.slot[{r},{j}]")


def parties(inst: Instance) -> dict[str, list[int]]:
    """Premade groups with at least two members: party id → player indexes."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(inst.players):
        if p.party is not None:
            groups.setdefault(p.party, []).append(i)
    return {g: m for g, m in groups.items() if len(m) > 1}
