"""The service config (YAML): pools per game mode, A/B experiments, pinned model files.

```yaml
pools:
  - name: 3v3                 # [a-z0-9-]; also the Redis hash tag of the pool's keys
    teams: 2
    team_size: 3
    rules: [{kind: party_together}, {kind: skill_balance, max_diff: 150}]
    engagement_model: 3v3     # a preset name or a name under models.engagement
    method: exact             # any registered solver
    fallback_method: surrogate      # model-free (no network), used when the predictor is down or late
    time_budget_ms: 100
    dispatch: {policy: immediate, params: {}}
    max_candidates: 48        # ≤ 100 players per solve
experiments:
  - name: predictor-vs-exact
    pools: [3v3]
    key: player               # player | match | header
    arms: [{name: control, weight: 1, method: exact}, {name: mgmatch, weight: 1, method: mgmatch}]
models:
  predictors: [{name: 3v3, path: models/3v3.onnx, sha256: "…"}]
  engagement: [{name: custom, path: models/custom.json, sha256: "…"}]
```

Everything is validated when the file is read; a bad value stops the process with the field's path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mgmatch.core.errors import InvalidInput, from_pydantic
from mgmatch.core.limits import MAX_TEAM_SIZE, MAX_TEAMS
from mgmatch.core.rules import parse_rule

POOL_NAME = r"^[a-z0-9][a-z0-9-]{0,31}$"
HARD_MAX_CANDIDATES = 100
#: the pool label of /v1/solve requests (metrics, experiments)
SOLVE_POOL = "solve"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DispatchConfig(_Strict):
    """When the matchmaker runs a solve, on which tickets (:mod:`mgmatch.solvers.dispatch`).

    ``params`` go to ``make_policy`` (e.g. ``interval_s`` for batch, ``relax`` for waiting-time
    rule expansions, see :mod:`mgmatch.solvers.relax`); ``max_candidates`` comes from the pool.
    """

    policy: str = Field(default="immediate", description="immediate | batch | quality_threshold | wu | game_queue")
    params: dict[str, Any] = Field(default_factory=dict)

    def build(self, max_candidates: int):
        from mgmatch.solvers.dispatch import make_policy

        return make_policy(self.policy, **{**self.params, "max_candidates": max_candidates})


class PoolConfig(_Strict):
    name: str = Field(pattern=POOL_NAME)
    teams: int = Field(default=2, ge=2, le=MAX_TEAMS)
    team_size: int | None = Field(default=None, ge=1, le=MAX_TEAM_SIZE)
    team_sizes: list[int] | None = None
    rules: list[dict[str, Any]] = Field(default_factory=list)
    engagement_model: str | None = None
    method: str = "exact"
    fallback_method: str = "surrogate"
    predictor: str | None = Field(default=None, description="Predictor name/path for mgmatch/bgcn; default: the model's.")
    time_budget_ms: float = Field(default=100.0, gt=0, le=60_000)
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)
    max_candidates: int = Field(default=HARD_MAX_CANDIDATES, ge=2, le=HARD_MAX_CANDIDATES)
    ticket_ttl_s: float = Field(default=300.0, gt=0, le=86_400)
    lease_s: float = Field(default=30.0, gt=0, le=3600, description="A claimed match returns to the queue after this.")
    scan_window: int | None = Field(default=None, ge=2, le=100_000,
                                    description="The matchmaker considers only this many longest-waiting tickets per "
                                                "tick (default 10 × max_candidates, at least 200), so a tick costs the "
                                                "same whatever the queue's length.")
    max_inflight_jobs: int = Field(default=4, ge=1, le=1000,
                                   description="With separate solver workers: claim no more candidates while this "
                                               "many of the pool's solve jobs wait or run (backpressure).")
    feature_dim: int | None = Field(default=None, ge=1, description="Filled from the engagement model at start-up.")

    @field_validator("team_sizes")
    @classmethod
    def _sizes(cls, v):
        if v is not None and any(s < 1 or s > MAX_TEAM_SIZE for s in v):
            raise ValueError(f"every team size must be 1–{MAX_TEAM_SIZE}")
        return v

    @model_validator(mode="after")
    def _check(self) -> PoolConfig:
        if (self.team_size is None) == (self.team_sizes is None):
            raise ValueError("give exactly one of team_size or team_sizes")
        if self.team_sizes is not None and len(self.team_sizes) != self.teams:
            raise ValueError(f"team_sizes needs {self.teams} entries")
        if self.match_size > self.max_candidates:
            raise ValueError(f"max_candidates {self.max_candidates} < players per match {self.match_size}")
        if self.scan_window is not None and self.scan_window < self.match_size:
            raise ValueError(f"scan_window {self.scan_window} < players per match {self.match_size}")
        for k, r in enumerate(self.rules):
            if isinstance(r, dict) and r.get("kind") in ("linear", "if", "avoid", "include"):
                raise ValueError(f"rules[{k}]: kind {r.get('kind')!r} names players; pools take player-free rules only")
            try:
                parse_rule(r, f"rules[{k}]")
            except InvalidInput as err:
                raise ValueError(str(err)) from None
        if "max_candidates" in self.dispatch.params:
            raise ValueError("dispatch.params.max_candidates: set max_candidates on the pool instead")
        try:
            self.dispatch.build(self.max_candidates)
        except InvalidInput as err:
            raise ValueError(f"dispatch.params.{err}") from None
        return self

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.team_sizes) if self.team_sizes is not None else (self.team_size,) * self.teams

    @property
    def match_size(self) -> int:
        return sum(self.sizes)

    @property
    def max_party(self) -> int:
        return min(self.sizes)

    @property
    def window(self) -> int:
        """How many longest-waiting tickets a matchmaker tick reads (see ``scan_window``)."""
        return self.scan_window if self.scan_window is not None else max(200, 10 * self.max_candidates)


class ArmConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    weight: float = Field(default=1.0, gt=0)
    method: str | None = None
    engagement_model: str | None = None
    predictor: str | None = None
    dispatch: DispatchConfig | None = None
    time_budget_ms: float | None = Field(default=None, gt=0, le=60_000)


class ExperimentConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    pools: list[str] = Field(default_factory=list,
                             description="Pool names (\"solve\" = /v1/solve requests); empty = all of them.")
    key: Literal["player", "match", "header"] = "player"
    header: str = Field(default="x-mgmatch-ab-key", description="Request header hashed when key=header.")
    salt: str = ""
    arms: list[ArmConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ExperimentConfig:
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            raise ValueError("arm names must be unique")
        return self


class ModelFile(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    path: Path
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                               description="Pinned digest; None = read the digest from PATH.sha256 (written by export).")


class ModelsConfig(_Strict):
    predictors: list[ModelFile] = Field(default_factory=list)
    engagement: list[ModelFile] = Field(default_factory=list)
    reload_interval_s: float = Field(default=5.0, gt=0, description="How often files are checked for a new version.")


class SolveDefaults(_Strict):
    """What ``POST /v1/solve`` runs when the request names no method / budget."""

    method: str = "exact"
    fallback_method: str = "surrogate"
    time_budget_ms: float = Field(default=100.0, gt=0, le=60_000)


class ServiceConfig(_Strict):
    pools: list[PoolConfig] = Field(min_length=1)
    solve: SolveDefaults = Field(default_factory=SolveDefaults)
    experiments: list[ExperimentConfig] = Field(default_factory=list)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    default_engagement_model: str | None = Field(default=None, description="Model for /v1/solve instances that name none.")

    @model_validator(mode="after")
    def _refs(self) -> ServiceConfig:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError("pool names must be unique")
        if SOLVE_POOL in names:
            raise ValueError(f"pool name {SOLVE_POOL!r} is reserved for /v1/solve")
        for e in self.experiments:
            for p in e.pools:
                if p not in names and p != SOLVE_POOL:
                    raise ValueError(f"experiment {e.name!r} names unknown pool {p!r}")
        return self

    def pool(self, name: str) -> PoolConfig | None:
        for p in self.pools:
            if p.name == name:
                return p
        return None


DEFAULT_CONFIG: dict[str, Any] = {
    "pools": [
        {"name": "3v3", "teams": 2, "team_size": 3, "engagement_model": "3v3",
         "rules": [{"kind": "party_together"}],
         "method": "exact", "time_budget_ms": 100, "max_candidates": 24,
         "dispatch": {"policy": "immediate"}},
        {"name": "12v12", "teams": 2, "team_size": 12, "engagement_model": "12v12",
         "rules": [{"kind": "party_together"}],
         "method": "mgmatch", "fallback_method": "surrogate", "time_budget_ms": 100, "max_candidates": 48,
         "dispatch": {"policy": "immediate"}},
    ],
}


def parse_config(obj: Any, where: str = "config") -> ServiceConfig:
    if not isinstance(obj, dict):
        raise InvalidInput(where, "the service config must be a mapping")
    try:
        return ServiceConfig.model_validate(obj)
    except ValidationError as err:
        raise from_pydantic(err, where) from None


def load_config(path: str | Path | None) -> ServiceConfig:
    """Read the YAML config (or the built-in default when ``path`` is None)."""
    if path is None:
        return parse_config(DEFAULT_CONFIG, "default config")
    p = Path(path)
    try:
        obj = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise InvalidInput(str(p), "no such file") from None
    except yaml.YAMLError as err:
        raise InvalidInput(str(p), f"not valid YAML: {str(err).splitlines()[0]}") from None
    return parse_config(obj, str(p))

