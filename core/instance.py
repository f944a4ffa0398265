"""The instance format (``mgmatch-instance/v1``): one matchmaking problem.

:func:`parse_instance` turns a JSON object into an :class:`Instance` and validates everything the
spec demands (unique ids, rule references, optional fields a rule needs) and the documented bounds
of :mod:`mgmatch.core.limits` (team counts and sizes, string lengths, number ranges), raising
:class:`~mgmatch.core.errors.InvalidInput` with the offending field's path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from .errors import InvalidInput, from_pydantic
from .files import read_text
from .jsontypes import Integer, Number
from .limits import (
    MAX_ABS_FEATURE,
    MAX_ABS_SKILL,
    MAX_FEATURES,
    MAX_GAMES_PER_DAY,
    MAX_ID_CHARS,
    MAX_JSON_DEPTH,
    MAX_NAME_CHARS,
    MAX_PING_MS,
    MAX_PLAYER_REFS,
    MAX_RECENT,
    MAX_REGIONS,
    MAX_ROLES,
    MAX_SELECTED,
    MAX_TEAM_SIZE,
    MAX_TEAMS,
    MAX_TEXT_CHARS,
    MAX_WAITED_S,
    json_depth_exceeds,
)
from .rules import (
    AvoidRule,
    IfRule,
    IncludeRule,
    LinearExpr,
    LinearRule,
    MaxPingRule,
    RoleMaxRule,
    RoleMinRule,
    RolesRule,
    Rule,
    SkillBalanceRule,
    SkillSpreadRule,
    condition_literals,
    parse_rule,
)

INSTANCE_FORMAT = "mgmatch-instance/v1"
#: pydantic validation context of players read back from storage (see ``parse_instance(stored=True)``)
STORED = {"stored": True}

Name = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)]
Feature = Annotated[Number, Field(ge=-MAX_ABS_FEATURE, le=MAX_ABS_FEATURE)]
PingMs = Annotated[Number, Field(ge=0, le=MAX_PING_MS)]
PlayerRef = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


class PreviousMatch(BaseModel):
    """``previous``: the player's last match (the Awesomenauts score's ``variation`` factor)."""

    model_config = ConfigDict(extra="ignore")

    teammates: list[PlayerRef] | None = Field(default=None, max_length=MAX_PLAYER_REFS)
    opponents: list[PlayerRef] | None = Field(default=None, max_length=MAX_PLAYER_REFS)


class PlayerExtras(BaseModel):
    """The optional player fields beyond the spec's that solvers read (README: additions).

    Checked here, where the instance is read, so that a solver never meets a value it cannot use;
    the values stay in ``Player.model_extra`` as given. Other extra fields pass unchecked.
    """

    model_config = ConfigDict(allow_inf_nan=False, extra="ignore")

    sigma: Number | None = Field(default=None, ge=0, le=MAX_ABS_SKILL, description="EOMM: skill uncertainty.")
    games_per_day: Number | None = Field(default=None, ge=0, le=MAX_GAMES_PER_DAY, description="EOMM: activity.")
    recent: list[Literal["W", "D", "L"]] | None = Field(default=None, max_length=MAX_RECENT,
                                                         description="EOMM: outcomes, most recent first.")
    previous: PreviousMatch | None = None
    peer_pings: dict[PlayerRef, PingMs] | None = Field(default=None, max_length=MAX_PLAYER_REFS,
                                                       description="Awesomenauts: ms to other players by id.")


class Player(BaseModel):
    """A waiting player. Only ``id`` and ``features`` are required.

    Extra optional fields are kept (the spec lets producers add them): EOMM reads ``sigma``,
    ``recent`` and ``games_per_day``, the Awesomenauts score ``previous`` and ``peer_pings``.
    """

    model_config = ConfigDict(allow_inf_nan=False, extra="allow", frozen=True)

    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="Unique, non-empty player id.")
    features: tuple[Feature, ...] = Field(max_length=MAX_FEATURES,
                                          description="Raw feature vector (the engagement model's feature_dim).")
    skill: Number | None = Field(default=None, ge=-MAX_ABS_SKILL, le=MAX_ABS_SKILL, description="Rating, any scale.")
    roles: tuple[Name, ...] | None = Field(default=None, max_length=MAX_ROLES, description="Roles the player accepts.")
    party: Name | None = Field(default=None, description="Premade group id.")
    pings: dict[Name, PingMs] | None = Field(default=None, max_length=MAX_REGIONS,
                                             description="Round-trip ms per region.")
    waited_s: Number | None = Field(default=None, ge=0, le=MAX_WAITED_S, description="Seconds in queue.")

    @model_validator(mode="after")
    def _names(self, info: ValidationInfo) -> Player:
        """Party, role and region names are not empty or blank (a ``""`` party would be a group of
        strangers, a ``" "`` region a host nobody can name). Not re-checked on players read back from
        storage (context :data:`STORED`): what an older version accepted is never refused later."""
        if info.context and info.context.get("stored"):
            return self
        if self.party is not None and not self.party.strip():
            raise InvalidInput("party", f"must be a non-empty party id, got {self.party!r}")
        for k, role in enumerate(self.roles or ()):
            if not role.strip():
                raise InvalidInput(f"roles[{k}]", f"must be a non-empty role name, got {role!r}")
        for region in self.pings or {}:
            if not region.strip():
                raise InvalidInput("pings", f"key {region!r}: a region name must not be empty or blank")
        return self

    @model_validator(mode="after")
    def _known_extras(self) -> Player:
        extra = self.model_extra
        if extra and not extra.keys().isdisjoint(PlayerExtras.model_fields):
            try:
                PlayerExtras.model_validate(extra)
            except ValidationError as err:
                raise from_pydantic(err) from None
        return self

    def to_json(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "features": list(self.features)}
        for k in ("skill", "party", "waited_s"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.roles is not None:
            out["roles"] = list(self.roles)
        if self.pings is not None:
            out["pings"] = dict(self.pings)
        out.update(self.model_extra or {})
        return out


class _Header(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="ignore")

    format: str = INSTANCE_FORMAT
    teams: Integer = Field(ge=2, le=MAX_TEAMS)
    team_size: Integer | None = Field(default=None, ge=1, le=MAX_TEAM_SIZE)
    team_sizes: list[Integer] | None = Field(default=None, max_length=MAX_TEAMS)
    players: list[Player]
    rules: list[Any] = Field(default_factory=list)
    engagement_model: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)


@dataclass(frozen=True)
class Instance:
    """A validated instance. ``sizes[j]`` is the size of team j (0-based)."""

    teams: int
    sizes: tuple[int, ...]
    players: tuple[Player, ...]
    rules: tuple[Rule, ...]
    engagement_model: str | None = None
    uniform_size: bool = True
    index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def n(self) -> int:
        return len(self.players)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.players]

    @property
    def n_selected(self) -> int:
        return sum(self.sizes)

    def features(self) -> np.ndarray:
        return np.asarray([p.features for p in self.players], dtype=np.float64)

    def skills(self) -> np.ndarray:
        return np.asarray([p.skill if p.skill is not None else np.nan for p in self.players], dtype=np.float64)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"format": INSTANCE_FORMAT, "teams": self.teams}
        if self.uniform_size:
            out["team_size"] = self.sizes[0]
        else:
            out["team_sizes"] = list(self.sizes)
        out["players"] = [p.to_json() for p in self.players]
        out["rules"] = [r.to_json() for r in self.rules]
        if self.engagement_model is not None:
            out["engagement_model"] = self.engagement_model
        return out

    def with_rules(self, rules: list[Rule] | tuple[Rule, ...]) -> Instance:
        inst = Instance(self.teams, self.sizes, self.players, tuple(rules), self.engagement_model,
                        self.uniform_size, dict(self.index))
        _check_references(inst)
        return inst


def parse_instance(obj: Any, stored: bool = False) -> Instance:
    """Validate a JSON object (already decoded) as an instance.

    ``stored=True`` for an instance rebuilt from data accepted earlier (queued tickets, a labelled
    dataset): checks added since (blank party, role and region names) are skipped for it, so that
    an upgrade never turns accepted data into refused data. Input (files, requests) is never stored.
    """
    if not isinstance(obj, dict):
        raise InvalidInput("", "an instance must be a JSON object")
    try:
        head = _Header.model_validate(obj, context=STORED if stored else None)
    except ValidationError as err:
        raise from_pydantic(err) from None
    if head.format != INSTANCE_FORMAT:
        got = head.format if len(head.format) <= 40 else head.format[:40] + "…"
        raise InvalidInput("format", f"expected {INSTANCE_FORMAT!r}, got {got!r}")
    if (head.team_size is None) == (head.team_sizes is None):
        raise InvalidInput("team_size", "give exactly one of team_size or team_sizes")
    if head.team_sizes is not None:
        if len(head.team_sizes) != head.teams:
            raise InvalidInput("team_sizes", f"expected {head.teams} sizes (one per team), got {len(head.team_sizes)}")
        for k, s in enumerate(head.team_sizes):
            if s < 1:
                raise InvalidInput(f"team_sizes[{k}]", "must be ≥ 1")
            if s > MAX_TEAM_SIZE:
                raise InvalidInput(f"team_sizes[{k}]", f"must be ≤ {MAX_TEAM_SIZE}")
        sizes = tuple(head.team_sizes)
    else:
        sizes = (head.team_size,) * head.teams
    if sum(sizes) > MAX_SELECTED:
        raise InvalidInput("team_sizes" if head.team_sizes is not None else "team_size",
                           f"teams select {sum(sizes)} players; a match holds at most {MAX_SELECTED}")
    if not head.players:
        raise InvalidInput("players", "at least one player is required")
    index: dict[str, int] = {}
    dim = len(head.players[0].features)
    for i, p in enumerate(head.players):
        if p.id in index:
            raise InvalidInput(f"players[{i}].id", f"duplicate player id {p.id!r}")
        index[p.id] = i
        if len(p.features) != dim:
            raise InvalidInput(f"players[{i}].features", f"expected {dim} numbers like players[0], got {len(p.features)}")
    if sum(sizes) > len(head.players):
        raise InvalidInput("players", f"{len(head.players)} players cannot fill teams of sizes {list(sizes)}")
    rules = tuple(parse_rule(r, f"rules[{k}]", stored=stored) for k, r in enumerate(head.rules))
    inst = Instance(head.teams, sizes, tuple(head.players), rules, head.engagement_model,
                    head.team_size is not None, index)
    _check_references(inst)
    return inst


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file."""
    return parse_instance(read_json(path))


def read_json(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = read_text(p)
    except FileNotFoundError:
        raise InvalidInput(str(path), "no such file") from None
    except OSError as err:
        raise InvalidInput(str(path), f"cannot read: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise InvalidInput(str(path), f"not valid JSON: not UTF-8 text (byte {err.object[err.start]:#04x} "
                                      f"at offset {err.start})") from None
    if json_depth_exceeds(text):
        raise InvalidInput(str(path), "not valid JSON: nested deeper than the documented limit "
                                      f"({MAX_JSON_DEPTH} levels)")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise InvalidInput(str(path), f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except ValueError as err:
        raise InvalidInput(str(path), str(err)) from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


# --------------------------------------------------------------------------- references


def _check_expr(inst: Instance, expr: LinearExpr, where: str) -> None:
    for k, t in enumerate(expr.terms):
        _check_pt(inst, t.player, t.team, f"{where}.terms[{k}]")


def _check_pt(inst: Instance, pid: str, team: int, where: str) -> None:
    if pid not in inst.index:
        raise InvalidInput(f"{where}[0]", f"unknown player id {pid!r}")
    if not 0 <= team < inst.teams:
        raise InvalidInput(f"{where}[1]", f"team {team} out of range 0..{inst.teams - 1}")


def _need_field(inst: Instance, attr: str, where: str, kind: str) -> None:
    for i, p in enumerate(inst.players):
        if getattr(p, attr) is None:
            raise InvalidInput(f"players[{i}].{attr}", f"required by {where} ({kind}) but missing for player {p.id!r}")


def _check_references(inst: Instance) -> None:
    """Every rule refers to known players and teams, and players carry the fields it needs."""
    for k, rule in enumerate(inst.rules):
        where = f"rules[{k}]"
        if isinstance(rule, LinearRule):
            _check_expr(inst, rule.expr, where)
        elif isinstance(rule, IfRule):
            for lit in condition_literals(rule.when):
                if lit.player not in inst.index:
                    raise InvalidInput(f"{where}.when", f"unknown player id {lit.player!r}")
                if not 0 <= lit.team < inst.teams:
                    raise InvalidInput(f"{where}.when", f"team {lit.team} out of range 0..{inst.teams - 1}")
            _check_expr(inst, rule.then, f"{where}.then")
        elif isinstance(rule, RolesRule):
            _need_field(inst, "roles", where, rule.kind)
            total = sum(rule.slots.values())
            for j, s in enumerate(inst.sizes):
                if total != s:
                    raise InvalidInput(f"{where}.slots", f"slot counts sum to {total} but team {j} has {s} players")
        elif isinstance(rule, (RoleMinRule, RoleMaxRule)):
            _need_field(inst, "roles", where, rule.kind)
        elif isinstance(rule, (SkillBalanceRule, SkillSpreadRule)):
            _need_field(inst, "skill", where, rule.kind)
        elif isinstance(rule, MaxPingRule):
            _need_field(inst, "pings", where, rule.kind)
        elif isinstance(rule, AvoidRule):
            for m, pid in enumerate(rule.players):
                if pid not in inst.index:
                    raise InvalidInput(f"{where}.players[{m}]", f"unknown player id {pid!r}")
        elif isinstance(rule, IncludeRule):
            for m, pid in enumerate(rule.players):
                if pid not in inst.index:
                    raise InvalidInput(f"{where}.players[{m}]", f"unknown player id {pid!r}")
