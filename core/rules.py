"""Rules of the spec (``rules`` entries), parsed into typed objects.

Low level: ``linear`` and ``if`` (the paper's standard form). High level: ``roles``,
``role_min``, ``role_max``, ``skill_balance``, ``skill_spread``, ``party_together``, ``avoid``,
``max_ping`` and ``include``, which :mod:`mgmatch.core.compiler` turns into the standard form.

Every parse error names the rule's position and the field, e.g. ``rules[3].max_diff``. Numbers are
finite with |x| ≤ ``MAX_ABS_RULE_NUMBER``, names at most ``MAX_NAME_CHARS`` long, and a condition
nests at most ``MAX_CONDITION_DEPTH`` deep (:mod:`mgmatch.core.limits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from .errors import InvalidInput
from .limits import (
    MAX_ABS_RULE_NUMBER,
    MAX_CONDITION_DEPTH,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_TEAM_SIZE,
    MAX_TEAMS,
)

Sense = Literal["<=", ">=", "=="]
SENSES = ("<=", ">=", "==")
R = TypeVar("R")


# --------------------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Lit:
    """True when ``player`` is on team ``team``."""

    player: str
    team: int

    def to_json(self) -> Any:
        return [self.player, self.team]


@dataclass(frozen=True)
class Not:
    arg: Cond

    def to_json(self) -> Any:
        return {"not": self.arg.to_json()}


@dataclass(frozen=True)
class All:
    args: tuple[Cond, ...]

    def to_json(self) -> Any:
        return {"all": [a.to_json() for a in self.args]}


@dataclass(frozen=True)
class AnyOf:
    args: tuple[Cond, ...]

    def to_json(self) -> Any:
        return {"any": [a.to_json() for a in self.args]}


Cond = Lit | Not | All | AnyOf


@dataclass(frozen=True)
class Term:
    player: str
    team: int
    coef: float

    def to_json(self) -> Any:
        return [self.player, self.team, self.coef]


@dataclass(frozen=True)
class LinearExpr:
    """Σ coef·x[player, team] (sense) rhs."""

    terms: tuple[Term, ...]
    sense: Sense
    rhs: float

    def to_json(self) -> dict:
        return {"terms": [t.to_json() for t in self.terms], "sense": self.sense, "rhs": self.rhs}


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class LinearRule:
    expr: LinearExpr
    kind: Literal["linear"] = "linear"

    def to_json(self) -> dict:
        return {"kind": self.kind, **self.expr.to_json()}


@dataclass(frozen=True)
class IfRule:
    when: Cond
    then: LinearExpr
    kind: Literal["if"] = "if"

    def to_json(self) -> dict:
        return {"kind": self.kind, "when": self.when.to_json(), "then": self.then.to_json()}


@dataclass(frozen=True)
class RolesRule:
    slots: dict[str, int]
    kind: Literal["roles"] = "roles"

    def to_json(self) -> dict:
        return {"kind": self.kind, "slots": dict(self.slots)}


@dataclass(frozen=True)
class RoleMinRule:
    role: str
    min: int
    kind: Literal["role_min"] = "role_min"

    def to_json(self) -> dict:
        return {"kind": self.kind, "role": self.role, "min": self.min}


@dataclass(frozen=True)
class RoleMaxRule:
    role: str
    max: int
    kind: Literal["role_max"] = "role_max"

    def to_json(self) -> dict:
        return {"kind": self.kind, "role": self.role, "max": self.max}


@dataclass(frozen=True)
class SkillBalanceRule:
    max_diff: float
    kind: Literal["skill_balance"] = "skill_balance"

    def to_json(self) -> dict:
        return {"kind": self.kind, "max_diff": self.max_diff}


@dataclass(frozen=True)
class SkillSpreadRule:
    max_spread: float
    kind: Literal["skill_spread"] = "skill_spread"

    def to_json(self) -> dict:
        return {"kind": self.kind, "max_spread": self.max_spread}


@dataclass(frozen=True)
class PartyTogetherRule:
    kind: Literal["party_together"] = "party_together"

    def to_json(self) -> dict:
        return {"kind": self.kind}


@dataclass(frozen=True)
class AvoidRule:
    players: tuple[str, str]
    scope: Literal["team", "match"]
    kind: Literal["avoid"] = "avoid"

    def to_json(self) -> dict:
        return {"kind": self.kind, "players": list(self.players), "scope": self.scope}


@dataclass(frozen=True)
class MaxPingRule:
    max_ms: float
    kind: Literal["max_ping"] = "max_ping"

    def to_json(self) -> dict:
        return {"kind": self.kind, "max_ms": self.max_ms}


@dataclass(frozen=True)
class IncludeRule:
    players: tuple[str, ...] = field(default_factory=tuple)
    kind: Literal["include"] = "include"

    def to_json(self) -> dict:
        return {"kind": self.kind, "players": list(self.players)}


Rule = (
    LinearRule | IfRule | RolesRule | RoleMinRule | RoleMaxRule | SkillBalanceRule | SkillSpreadRule
    | PartyTogetherRule | AvoidRule | MaxPingRule | IncludeRule
)

RULE_KINDS = (
    "linear", "if", "roles", "role_min", "role_max", "skill_balance", "skill_spread",
    "party_together", "avoid", "max_ping", "include",
)
LOGICAL_KINDS = ("if",)


# --------------------------------------------------------------------------- visiting


class RuleVisitor(Generic[R]):
    """One method per rule kind, and :meth:`visit` that calls the one for a rule.

    The checker, the compiler, the move scorer and the enumerator each walk the rules with a visitor, so
    a new kind is one method in each, and a visitor that lacks it fails loudly the first time it meets
    one instead of skipping the rule. Extra arguments of :meth:`visit` are passed on to the method. A
    visitor that acts on a few kinds only overrides :meth:`other`, which every kind without its own
    method reaches; by default it raises.
    """

    def visit(self, rule: Rule, *args: Any, **kwargs: Any) -> R:
        """The result of this visitor's method for ``rule``'s kind.

        Raises:
            TypeError: ``rule`` is not one of the rule kinds.
        """
        name = _VISIT.get(type(rule))
        if name is None:
            raise TypeError(f"{type(self).__name__}: not a rule kind: {type(rule).__name__}")
        return getattr(self, name)(rule, *args, **kwargs)

    def other(self, rule: Rule, *args: Any, **kwargs: Any) -> R:
        """What a kind without its own method gets: an error naming the visitor and the kind."""
        raise NotImplementedError(f"{type(self).__name__} does not handle rule kind {rule.kind!r}")

    def visit_linear(self, rule: LinearRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_if(self, rule: IfRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_roles(self, rule: RolesRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_role_min(self, rule: RoleMinRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_role_max(self, rule: RoleMaxRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_skill_balance(self, rule: SkillBalanceRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_skill_spread(self, rule: SkillSpreadRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_party_together(self, rule: PartyTogetherRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_avoid(self, rule: AvoidRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_max_ping(self, rule: MaxPingRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)

    def visit_include(self, rule: IncludeRule, *args: Any, **kwargs: Any) -> R:
        return self.other(rule, *args, **kwargs)


#: the visitor method of each rule class (``visit_`` and its kind)
_VISIT: dict[type, str] = {
    cls: "visit_" + cls.__dataclass_fields__["kind"].default
    for cls in (LinearRule, IfRule, RolesRule, RoleMinRule, RoleMaxRule, SkillBalanceRule, SkillSpreadRule,
                PartyTogetherRule, AvoidRule, MaxPingRule, IncludeRule)
}


# --------------------------------------------------------------------------- parsing


def _need(obj: dict, key: str, where: str) -> Any:
    if key not in obj:
        raise InvalidInput(f"{where}.{key}", "field required")
    return obj[key]


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidInput(where, f"expected a number, got {type(v).__name__}")
    try:
        x = float(v)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise InvalidInput(where, "must be a finite number")
    if abs(x) > MAX_ABS_RULE_NUMBER:
        raise InvalidInput(where, f"must be within ±{MAX_ABS_RULE_NUMBER:g}, got {x:g}")
    return x


def _int(v: Any, where: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise InvalidInput(where, f"expected an integer, got {_short(v)}")
    if minimum is not None and v < minimum:
        raise InvalidInput(where, f"must be ≥ {minimum}, got {_short(v)}")
    if maximum is not None and v > maximum:
        raise InvalidInput(where, f"must be ≤ {maximum}, got {_short(v)}")
    return int(v)


def _short(v: Any, limit: int = 40) -> str:
    """``repr(v)`` cut to ``limit`` characters (error messages never echo a whole hostile value)."""
    if isinstance(v, int) and abs(v) >= 10**limit:
        return f"an integer of about {int(abs(v).bit_length() * 0.30103) + 1} digits"
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "…"


def _str(v: Any, where: str, max_chars: int = MAX_NAME_CHARS) -> str:
    if not isinstance(v, str) or not v:
        raise InvalidInput(where, f"expected a non-empty string, got {_short(v)}")
    if len(v) > max_chars:
        raise InvalidInput(where, f"at most {max_chars} characters, got {len(v)}")
    return v


def _role(v: Any, where: str, stored: bool) -> str:
    """A role name: a non-empty string, not blank (unless read back from storage, see ``parse_rule``)."""
    v = _str(v, where)
    if not stored and not v.strip():
        raise InvalidInput(where, f"expected a non-empty role name, got {_short(v)}")
    return v


def _player_team(pid: Any, team: Any, where: str) -> tuple[str, int]:
    return _str(pid, f"{where}[0]", MAX_ID_CHARS), _int(team, f"{where}[1]", minimum=0, maximum=MAX_TEAMS - 1)


def parse_condition(obj: Any, where: str, depth: int = 1) -> Cond:
    """Parse ``[player, team]``, ``{"not": C}``, ``{"all": [...]}`` or ``{"any": [...]}``.

    ``depth`` is this condition's nesting level (1 at the top); beyond ``MAX_CONDITION_DEPTH`` the
    condition is refused before the parser descends further.
    """
    if depth > MAX_CONDITION_DEPTH:
        raise InvalidInput(where, f"conditions nest at most {MAX_CONDITION_DEPTH} deep")
    if isinstance(obj, list):
        if len(obj) != 2:
            raise InvalidInput(where, "a literal is [player_id, team]")
        p, t = _player_team(obj[0], obj[1], where)
        return Lit(p, t)
    if isinstance(obj, dict) and len(obj) == 1:
        (key, val), = obj.items()
        if key == "not":
            return Not(parse_condition(val, f"{where}.not", depth + 1))
        if key in ("all", "any"):
            if not isinstance(val, list) or not val:
                raise InvalidInput(f"{where}.{key}", "expected a non-empty list of conditions")
            args = tuple(parse_condition(a, f"{where}.{key}[{k}]", depth + 1) for k, a in enumerate(val))
            return All(args) if key == "all" else AnyOf(args)
    raise InvalidInput(where, 'expected [player_id, team], {"not": C}, {"all": [...]} or {"any": [...]}')


def parse_linear(obj: Any, where: str) -> LinearExpr:
    if not isinstance(obj, dict):
        raise InvalidInput(where, "expected an object with terms, sense and rhs")
    terms_raw = _need(obj, "terms", where)
    if not isinstance(terms_raw, list):
        raise InvalidInput(f"{where}.terms", "expected a list of [player_id, team, coef]")
    terms = []
    for k, t in enumerate(terms_raw):
        w = f"{where}.terms[{k}]"
        if not isinstance(t, list) or len(t) != 3:
            raise InvalidInput(w, "expected [player_id, team, coef]")
        p, team = _player_team(t[0], t[1], w)
        terms.append(Term(p, team, _number(t[2], f"{w}[2]")))
    sense = _need(obj, "sense", where)
    if sense not in SENSES:
        raise InvalidInput(f"{where}.sense", f"expected one of {', '.join(SENSES)}, got {_short(sense)}")
    rhs = _number(_need(obj, "rhs", where), f"{where}.rhs")
    return LinearExpr(tuple(terms), sense, rhs)


def parse_rule(obj: Any, where: str, stored: bool = False) -> Rule:
    """Parse one ``rules`` entry; ``where`` is its location, e.g. ``rules[3]``.

    ``stored=True`` for a rule read back from data accepted earlier: a blank (whitespace) role name,
    refused since, is kept there.
    """
    if not isinstance(obj, dict):
        raise InvalidInput(where, "expected an object with a 'kind'")
    kind = _need(obj, "kind", where)
    if kind not in RULE_KINDS:
        raise InvalidInput(f"{where}.kind", f"unknown rule kind {_short(kind)}; expected one of {', '.join(RULE_KINDS)}")
    if kind == "linear":
        return LinearRule(parse_linear(obj, where))
    if kind == "if":
        return IfRule(parse_condition(_need(obj, "when", where), f"{where}.when"),
                      parse_linear(_need(obj, "then", where), f"{where}.then"))
    if kind == "roles":
        slots = _need(obj, "slots", where)
        if not isinstance(slots, dict) or not slots:
            raise InvalidInput(f"{where}.slots", "expected a non-empty object {role: count}")
        parsed = {_role(r, f"{where}.slots", stored): _int(c, f"{where}.slots.{r}", minimum=0, maximum=MAX_TEAM_SIZE)
                  for r, c in slots.items()}
        return RolesRule(parsed)
    if kind == "role_min":
        return RoleMinRule(_role(_need(obj, "role", where), f"{where}.role", stored),
                           _int(_need(obj, "min", where), f"{where}.min", minimum=0, maximum=MAX_TEAM_SIZE))
    if kind == "role_max":
        return RoleMaxRule(_role(_need(obj, "role", where), f"{where}.role", stored),
                           _int(_need(obj, "max", where), f"{where}.max", minimum=0, maximum=MAX_TEAM_SIZE))
    if kind == "skill_balance":
        v = _number(_need(obj, "max_diff", where), f"{where}.max_diff")
        if v < 0:
            raise InvalidInput(f"{where}.max_diff", "must be ≥ 0")
        return SkillBalanceRule(v)
    if kind == "skill_spread":
        v = _number(_need(obj, "max_spread", where), f"{where}.max_spread")
        if v < 0:
            raise InvalidInput(f"{where}.max_spread", "must be ≥ 0")
        return SkillSpreadRule(v)
    if kind == "party_together":
        return PartyTogetherRule()
    if kind == "avoid":
        ps = _need(obj, "players", where)
        if not isinstance(ps, list) or len(ps) != 2:
            raise InvalidInput(f"{where}.players", "expected two player ids")
        a, b = (_str(p, f"{where}.players[{k}]", MAX_ID_CHARS) for k, p in enumerate(ps))
        if a == b:
            raise InvalidInput(f"{where}.players", "the two players must differ")
        scope = _need(obj, "scope", where)
        if scope not in ("team", "match"):
            raise InvalidInput(f"{where}.scope", f"expected 'team' or 'match', got {_short(scope)}")
        return AvoidRule((a, b), scope)
    if kind == "max_ping":
        v = _number(_need(obj, "max_ms", where), f"{where}.max_ms")
        if v < 0:
            raise InvalidInput(f"{where}.max_ms", "must be ≥ 0")
        return MaxPingRule(v)
    # include
    ps = _need(obj, "players", where)
    if not isinstance(ps, list):
        raise InvalidInput(f"{where}.players", "expected a list of player ids")
    return IncludeRule(tuple(_str(p, f"{where}.players[{k}]", MAX_ID_CHARS) for k, p in enumerate(ps)))


def condition_literals(c: Cond) -> list[Lit]:
    """All literals of a condition, in order."""
    if isinstance(c, Lit):
        return [c]
    if isinstance(c, Not):
        return condition_literals(c.arg)
    out: list[Lit] = []
    for a in c.args:
        out.extend(condition_literals(a))
    return out
