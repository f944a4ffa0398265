"""Rule relaxation over waiting time (FlexMatch-style expansions).

A pool configures a list of *steps*; each step says "after the candidates have waited
``after_s`` seconds, change rule ``rule`` like this"::

    {"key": "max",                      # which waiting time drives the steps: max | min | avg
     "steps": [
       {"after_s": 30,  "rule": "skill_balance", "set": {"max_diff": 200}},
       {"after_s": 60,  "rule": "skill_balance", "set": {"max_diff": 400}},
       {"after_s": 45,  "rule": "max_ping",      "set": {"max_ms": 150}},
       {"after_s": 20,  "rule": "role_min", "where": {"role": "tank"}, "set": {"min": 0}},
       {"after_s": 120, "rule": "skill_spread",  "drop": true}
     ]}

Every step whose ``after_s`` is ≤ the waiting time applies, in increasing ``after_s`` (ties in
list order), so a later step overrides an earlier one. ``where`` selects among several rules
of the same kind (all listed fields must be equal); ``drop`` removes the matched rules.
Settable fields per kind: ``skill_balance.max_diff``, ``skill_spread.max_spread``,
``max_ping.max_ms``, ``role_min.min``, ``role_max.max``, ``roles.slots``. New values are
validated by the core rule parser, so a relaxation can never produce an invalid instance.

The waiting time comes from the candidates' ``Player.waited_s`` (``key`` = longest, shortest or
mean) unless the caller passes it explicitly (the dispatch policies pass the waiting time of
their candidate tickets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance
from mgmatch.core.rules import parse_rule

WaitKey = Literal["max", "min", "avg"]
WAIT_KEYS = ("max", "min", "avg")

#: rule kind → fields a step may set
SETTABLE: dict[str, tuple[str, ...]] = {
    "skill_balance": ("max_diff",),
    "skill_spread": ("max_spread",),
    "max_ping": ("max_ms",),
    "role_min": ("min",),
    "role_max": ("max",),
    "roles": ("slots",),
}
#: kinds that may be dropped (any high-level soft-ish rule; hard structural ones are excluded)
DROPPABLE = ("skill_balance", "skill_spread", "max_ping", "role_min", "role_max", "roles", "avoid")


@dataclass(frozen=True)
class RelaxStep:
    """One expansion: after ``after_s`` seconds, set fields of (or drop) rules of kind ``rule``."""

    after_s: float
    rule: str
    set: tuple[tuple[str, Any], ...] = ()
    where: tuple[tuple[str, Any], ...] = ()
    drop: bool = False

    def to_json(self) -> dict:
        out: dict[str, Any] = {"after_s": self.after_s, "rule": self.rule}
        if self.where:
            out["where"] = dict(self.where)
        if self.drop:
            out["drop"] = True
        else:
            out["set"] = dict(self.set)
        return out

    def matches(self, rule_json: dict) -> bool:
        if rule_json.get("kind") != self.rule:
            return False
        return all(rule_json.get(k) == v for k, v in self.where)


@dataclass(frozen=True)
class RelaxConfig:
    """A validated list of steps and the waiting-time key. Build with :func:`parse_relax`."""

    steps: tuple[RelaxStep, ...] = ()
    key: WaitKey = "max"

    def to_json(self) -> dict:
        return {"key": self.key, "steps": [s.to_json() for s in self.steps]}

    def active(self, waited_s: float) -> tuple[RelaxStep, ...]:
        """The steps that apply after ``waited_s`` seconds, in application order."""
        order = sorted(range(len(self.steps)), key=lambda i: (self.steps[i].after_s, i))
        return tuple(self.steps[i] for i in order if self.steps[i].after_s <= waited_s)

    def waited(self, waits: list[float]) -> float:
        """Combine candidates' waiting times with this config's key (0 when empty)."""
        if not waits:
            return 0.0
        if self.key == "max":
            return max(waits)
        if self.key == "min":
            return min(waits)
        return sum(waits) / len(waits)

    def relax(self, instance: Instance, waited_s: float | None = None) -> Instance:
        return relax(instance, waited_s, self)


def _num(v: Any, where: str, minimum: float | None = 0.0) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise InvalidInput(where, f"expected a finite number, got {v!r}")
    if minimum is not None and v < minimum:
        raise InvalidInput(where, f"must be ≥ {minimum:g}, got {v!r}")
    return float(v)


def parse_step(obj: Any, where: str = "steps[0]") -> RelaxStep:
    if not isinstance(obj, dict):
        raise InvalidInput(where, "expected an object with after_s, rule and set (or drop)")
    unknown = set(obj) - {"after_s", "rule", "set", "where", "drop"}
    if unknown:
        raise InvalidInput(f"{where}.{sorted(unknown)[0]}", "unknown field")
    if "after_s" not in obj:
        raise InvalidInput(f"{where}.after_s", "field required")
    after = _num(obj["after_s"], f"{where}.after_s")
    rule = obj.get("rule")
    if rule not in DROPPABLE:
        raise InvalidInput(f"{where}.rule", f"cannot relax rule kind {rule!r}; expected one of {', '.join(DROPPABLE)}")
    sel = obj.get("where", {})
    if not isinstance(sel, dict):
        raise InvalidInput(f"{where}.where", "expected an object {field: value}")
    drop = obj.get("drop", False)
    if not isinstance(drop, bool):
        raise InvalidInput(f"{where}.drop", f"expected true or false, got {drop!r}")
    sets = obj.get("set")
    if drop:
        if sets is not None:
            raise InvalidInput(f"{where}.set", "give either set or drop, not both")
        return RelaxStep(after, rule, (), tuple(sorted(sel.items())), True)
    if rule not in SETTABLE:
        raise InvalidInput(f"{where}.rule", f"rule kind {rule!r} can only be dropped")
    if not isinstance(sets, dict) or not sets:
        raise InvalidInput(f"{where}.set", "expected a non-empty object of fields to set")
    for k in sets:
        if k not in SETTABLE[rule]:
            raise InvalidInput(f"{where}.set.{k}", f"cannot set {k!r} on {rule}; settable: {', '.join(SETTABLE[rule])}")
    # validate the new values with the core parser on a template rule
    template = {"skill_balance": {"max_diff": 0}, "skill_spread": {"max_spread": 0}, "max_ping": {"max_ms": 0},
                "role_min": {"role": "r", "min": 0}, "role_max": {"role": "r", "max": 0},
                "roles": {"slots": {"r": 1}}}[rule]
    parse_rule({"kind": rule, **template, **sets}, f"{where}.set")
    return RelaxStep(after, rule, tuple(sorted(sets.items())), tuple(sorted(sel.items())), False)


def parse_relax(obj: Any, where: str = "relax") -> RelaxConfig:
    """Validate a relaxation config: ``{"key": ..., "steps": [...]}`` or a bare list of steps."""
    if obj is None:
        return RelaxConfig()
    if isinstance(obj, RelaxConfig):
        return obj
    if isinstance(obj, list):
        obj = {"steps": obj}
    if not isinstance(obj, dict):
        raise InvalidInput(where, "expected an object with steps (and optional key) or a list of steps")
    unknown = set(obj) - {"steps", "key"}
    if unknown:
        raise InvalidInput(f"{where}.{sorted(unknown)[0]}", "unknown field")
    key = obj.get("key", "max")
    if key not in WAIT_KEYS:
        raise InvalidInput(f"{where}.key", f"expected one of {', '.join(WAIT_KEYS)}, got {key!r}")
    steps = obj.get("steps", [])
    if not isinstance(steps, list):
        raise InvalidInput(f"{where}.steps", "expected a list of steps")
    return RelaxConfig(tuple(parse_step(s, f"{where}.steps[{i}]") for i, s in enumerate(steps)), key)


def candidate_wait(instance: Instance, key: WaitKey = "max") -> float:
    """The candidates' waiting time from ``Player.waited_s`` (missing counts as 0)."""
    waits = [p.waited_s or 0.0 for p in instance.players]
    return RelaxConfig((), key).waited(waits)


def relax(instance: Instance, waited_s: float | None, config: RelaxConfig | dict | list | None) -> Instance:
    """Apply every step of ``config`` active at ``waited_s`` (or the candidates' waiting time).

    Returns a new :class:`Instance` (the input is unchanged); with no active step the same
    instance is returned.
    """
    cfg = parse_relax(config)
    if waited_s is None:
        waited_s = candidate_wait(instance, cfg.key)
    elif isinstance(waited_s, bool) or not isinstance(waited_s, (int, float)) or waited_s < 0:
        raise InvalidInput("waited_s", f"expected a number ≥ 0, got {waited_s!r}")
    steps = cfg.active(float(waited_s))
    if not steps:
        return instance
    rules = [r.to_json() for r in instance.rules]
    for step in steps:
        new: list[dict] = []
        for r in rules:
            if step.matches(r):
                if step.drop:
                    continue
                r = {**r, **dict(step.set)}
            new.append(r)
        rules = new
    parsed = [parse_rule(r, f"rules[{k}]") for k, r in enumerate(rules)]
    return instance.with_rules(parsed)
