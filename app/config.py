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
    partition: auto           # several matches per job: sequential | joint | auto
    dispatch: {policy: immediate, params: {}}
    max_candidates: 48        # ≤ 300 players per solve (default 100)
experiments:
  - name: predictor-vs-exact
    pools: [3v3]
    key: player               # player | match | header
    arms: [{name: control, weight: 1, method: exact}, {name: mgmatch, weight: 1, method: mgmatch}]
models:
  predictors: [{name: 3v3, path: models/3v3.onnx, sha256: "…"}]
  engagement: [{name: custom, path: models/custom.json, sha256: "…"}]
capture: {dir: captures, sample_rate: 0.05, salt: "…"}    # opt-in; a pool may carry its own
```

A pool may instead name its files directly, each pinned by its SHA-256 (paths relative to the
config file's folder when read with :func:`load_config`)::

    engagement_model: {path: eng.json, sha256: "…"}
    predictor: {path: model.onnx, sha256: "…"}

They become ``models.engagement`` / ``models.predictors`` entries named after the pool (so
``/v1/solve`` instances naming ``engagement_model: <pool>`` use them too); a wrong digest or a
missing file stops start-up with the field's path (``pools[k].engagement_model.sha256``).

Everything is validated when the file is read; a bad value stops the process with the field's path.
Numbers are strict as in the JSON formats (:mod:`mgmatch.core.jsontypes`): ``teams: '2'`` or
``teams: true`` is an error naming ``pools[k].teams``, not 2 or 1 (``3.0`` reads as 3); a flag is a
YAML boolean, not a string.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from mgmatch.core.errors import InvalidInput, from_pydantic
from mgmatch.core.files import read_text
from mgmatch.core.instance import Instance
from mgmatch.core.jsontypes import Integer, Number
from mgmatch.core.limits import MAX_TEAM_SIZE, MAX_TEAMS
from mgmatch.core.rules import parse_rule

POOL_NAME = r"^[a-z0-9][a-z0-9-]{0,31}$"
HARD_MAX_CANDIDATES = 300   # a battle royale's queue (25 squads of 4 from 150–300 candidates, docs/guides/large-lobbies.md)
DEFAULT_MAX_CANDIDATES = 100
#: the pool label of /v1/solve requests (metrics, experiments)
SOLVE_POOL = "solve"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class AcceptConfig(_Strict):
    """A pool's ready check: a formed match is proposed to its players, who accept or decline it."""

    timeout_s: Number = Field(default=20.0, gt=0, le=600,
                              description="Players who have not accepted by then: their tickets expire, the others "
                                          "go back to the queue at their place.")


class AllocatorConfig(_Strict):
    """Where a committed match is sent to get a game server (:mod:`mgmatch.app.allocator`)."""

    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048,
                     description="The allocator's HTTP endpoint; the match is POSTed to it as JSON.")
    timeout_ms: Number = Field(default=2000.0, gt=0, le=60_000, description="Per attempt.")
    retries: Integer = Field(default=2, ge=0, le=10, description="Attempts after the first, with a short backoff.")


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


class PinnedFile(_Strict):
    """A model file named by a pool: its path and its required SHA-256 pin."""

    path: Path
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The file's SHA-256 (lower-case hex).")


class CaptureConfig(_Strict):
    """Opt-in recording of solved candidate pools as spec instance files (:mod:`mgmatch.app.capture`)."""

    dir: Path = Field(description="Folder the instance files go to (created when missing).")
    sample_rate: Number = Field(default=1.0, ge=0.0, le=1.0, description="Share of solves recorded (seeded draw).")
    salt: str = Field(min_length=8, max_length=256,
                      description="Key of the HMAC-SHA-256 that pseudonymizes player ids (keep it secret, keep it "
                                  "stable: the same player gets the same pseudonym across captures).")
    seed: Integer = Field(default=0, description="Seed of the sampling draw (a solve's draw depends on seed and pool).")
    max_files: Integer = Field(default=10_000, ge=1, le=10_000_000, description="Stop recording after this many files.")
    max_bytes: Integer = Field(default=1 << 30, ge=1024, description="Stop recording after this many bytes in all.")
    queue: Integer = Field(default=256, ge=1, le=100_000,
                       description="Solves waiting for the writer thread; beyond it a capture is dropped (counted).")
    solve_requests: StrictBool = Field(default=False, description="Global capture only: also record /v1/solve instances.")


class LearningConfig(_Strict):
    """A pool that learns from its own results (spec §7; :mod:`mgmatch.app.learning`).

    Every default is meant to work on a game the project has never seen; docs/guides/learning.md says
    what each trades.
    """

    seed_log: Path | None = Field(default=None, description="The studio's match log (spec §5), part of every "
                                                              "refit's data (relative to the config's folder).")
    dir: Path = Field(default=Path("learned"),
                      description="Folder of the learned model versions (<sha256>.json) and of the live pointer "
                                  "(<pool>.live.json), relative to the config's folder.")
    refit_every: Integer = Field(default=100, ge=10, le=1_000_000,
                                 description="Refit once this many new results arrived since the last refit (sooner while "
                                             "the pool is young: once its results grew by half).")
    min_results: Integer = Field(default=100, ge=10, le=1_000_000,
                                 description="No refit before the pool has this many results.")
    max_results: Integer = Field(default=50_000, ge=100, le=10_000_000,
                                 description="A refit trains on at most this many of the newest results "
                                             "(plus the seed log).")
    holdout_share: Number = Field(default=0.2, gt=0, lt=1,
                                  description="Share of the results (by a hash of the match id) never trained on: "
                                              "a refit goes live only if it predicts them better than the live model.")
    min_holdout: Integer = Field(default=20, ge=1, le=1_000_000,
                                 description="A refit is checked on at least this many unseen results, else it waits.")
    tolerance: Number = Field(default=0.0, ge=0, le=1,
                              description="A refit goes live when its held-out MSE ≤ the live model's × (1 + tolerance).")
    explore: Number = Field(default=0.05, ge=0, le=1,
                            description="Share of matches formed to learn (policy explore) while the pool is new.")
    explore_min: Number = Field(default=0.01, ge=0, le=1,
                                description="The explore share never decays below this.")
    explore_half_life: Integer = Field(default=1000, ge=1, le=100_000_000,
                                       description="Results after which the explore share above explore_min halves.")
    explorers: Integer = Field(default=0, ge=0, le=16,
                               description="Explorer models trained beside each refit (each a lineage on a bootstrap of the "
                                           "data); explore matches are formed by one of them drawn at random (Thompson "
                                           "sampling). 0: explore matches are random draws.")
    balance_units: StrictBool = Field(default=True,
                                      description="The first refit widens the model with a unit per feature's imbalance "
                                                  "between teams (exactly, the function unchanged), which the refits then "
                                                  "weigh; false: refits keep the model's shape.")
    epochs: Integer = Field(default=300, ge=1, le=1000,
                            description="Most epochs of a refit (early stopping on; cut to at most 4,000 optimizer "
                                        "steps, 1,500 from 50,000 training matches on).")
    seed: Integer = Field(default=0, description="Seed of the refits and of the explore draws.")
    interval_s: Number = Field(default=5.0, gt=0, le=86_400,
                               description="How often the learner checks for new results (service).")

    @model_validator(mode="after")
    def _check(self) -> LearningConfig:
        if self.explore_min > self.explore:
            raise InvalidInput("explore_min", f"{self.explore_min} > explore {self.explore}")
        return self


class PoolConfig(_Strict):
    name: str = Field(pattern=POOL_NAME)
    teams: Integer = Field(default=2, ge=2, le=MAX_TEAMS)
    team_size: Integer | None = Field(default=None, ge=1, le=MAX_TEAM_SIZE)
    team_sizes: list[Integer] | None = None
    rules: list[dict[str, Any]] = Field(default_factory=list)
    engagement_model: str | PinnedFile | None = Field(
        default=None, description="A preset or models.engagement name, or {path, sha256} of the pool's own file.")
    method: str = "exact"
    fallback_method: str = "surrogate"
    predictor: str | PinnedFile | None = Field(
        default=None, description="Predictor name for mgmatch/bgcn (default: the model's), or {path, sha256}.")
    capture: CaptureConfig | None = Field(default=None, description="Record this pool's solves (overrides the "
                                                                      "global capture for this pool).")
    time_budget_ms: Number = Field(default=100.0, gt=0, le=60_000)
    partition: Literal["sequential", "joint", "auto"] = Field(
        default="auto", description="A job with room for ≥ 2 matches: solved one match after another (each with "
                                    "time_budget_ms), jointly in one solve (mgmatch.solvers.batch, matches × "
                                    "time_budget_ms), or auto: joint where `mgmatch bench batch` measured it better "
                                    "(mgmatch.solvers.batch.prefer_joint), for a model-free method only (a "
                                    "predictor method keeps the one-at-a-time path under auto).")
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)
    max_candidates: Integer = Field(default=DEFAULT_MAX_CANDIDATES, ge=2, le=HARD_MAX_CANDIDATES)
    ticket_ttl_s: Number = Field(default=300.0, gt=0, le=86_400)
    lease_s: Number = Field(default=30.0, gt=0, le=3600, description="A claimed match returns to the queue after this.")
    scan_window: Integer | None = Field(default=None, ge=2, le=100_000,
                                    description="The matchmaker considers only this many longest-waiting tickets per "
                                                "tick (default 10 × max_candidates, at least 200), so a tick costs the "
                                                "same whatever the queue's length.")
    max_inflight_jobs: Integer = Field(default=4, ge=1, le=1000,
                                   description="With separate solver workers: claim no more candidates while this "
                                               "many of the pool's solve jobs wait or run (backpressure).")
    accept: AcceptConfig | None = Field(
        default=None, description="Ready check: a formed match is proposed; every player must accept it "
                                  "(POST /v1/matches/{id}/accept) within timeout_s before it is matched.")
    allocator: AllocatorConfig | None = Field(
        default=None, description="Server handoff: a committed match is POSTed here; its answer's connection "
                                  "goes into the tickets' match. On failure the players return to the queue at "
                                  "their place.")
    skill_from: Literal["ticket", "ratings"] = Field(
        default="ticket", description="Where a player's skill comes from: the ticket's skill only, or (ratings) "
                                      "the player's stored rating mu when the ticket gives none (openskill "
                                      "scale: a new player is 25).")
    feature_dim: Integer | None = Field(default=None, ge=1, description="Filled from the engagement model at start-up.")
    learning: LearningConfig | None = Field(default=None, description="Learn from this pool's results (spec §7).")

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
            raise InvalidInput("team_sizes", f"needs {self.teams} entries (teams), got {len(self.team_sizes)}")
        if self.match_size > self.max_candidates:
            raise InvalidInput("max_candidates", f"{self.max_candidates} < players per match {self.match_size}")
        if self.learning is not None and self.engagement_model is None:
            raise InvalidInput("learning", "a learning pool needs its starting engagement_model")
        if self.scan_window is not None and self.scan_window < self.match_size:
            raise InvalidInput("scan_window", f"{self.scan_window} < players per match {self.match_size}")
        rules = []
        for k, r in enumerate(self.rules):
            if isinstance(r, dict) and r.get("kind") in ("linear", "if", "avoid", "include"):
                raise InvalidInput(f"rules[{k}].kind",
                                   f"kind {r.get('kind')!r} names players; pools take player-free rules only")
            rules.append(parse_rule(r, f"rules[{k}]"))
        # the instance reader's rule checks that need no players (a roles rule's Σ slots = each team's size)
        match = self._empty_match().with_rules(rules)
        if "max_candidates" in self.dispatch.params:
            raise InvalidInput("dispatch.params.max_candidates", "set max_candidates on the pool instead")
        try:
            policy = self.dispatch.build(self.max_candidates)
        except InvalidInput as err:
            raise InvalidInput(f"dispatch.params.{err.field}" if err.field else "dispatch.params", err.message) from None
        self._check_relax(getattr(policy, "relax", None), match)
        return self

    def _empty_match(self) -> Instance:
        """A match of this pool without players: what the rule checks that depend on teams alone run on."""
        return Instance(self.teams, self.sizes, (), (), None, self.team_sizes is None, {})

    @staticmethod
    def _check_relax(cfg: Any, match: Instance) -> None:
        """Every state the dispatch policy's rule relaxations reach passes the same checks as the
        pool's own rules (a relaxed ``roles.slots`` still sums to the team size)."""
        from mgmatch.solvers.relax import relax

        steps = getattr(cfg, "steps", ())
        for t in sorted({s.after_s for s in steps}):
            try:
                relax(match, t, cfg)
            except InvalidInput as err:
                k = max(i for i, s in enumerate(steps) if s.after_s == t)
                raise InvalidInput(f"dispatch.params.relax.steps[{k}]", f"after {t:g} s, {err}") from None

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.team_sizes) if self.team_sizes is not None else (self.team_size,) * self.teams

    @property
    def match_size(self) -> int:
        return sum(self.sizes)

    @property
    def max_party(self) -> int:
        return min(self.sizes)

    def check_fit(self, players: list[dict[str, Any]]) -> None:
        """Raise InvalidInput naming the field unless one ticket's players (a solo player or a party,
        as stored) can be part of a match of this pool: the party fits a team, and every player has
        the model's number of features and the fields the pool's rules read. The API checks a new
        ticket with it; the matchmaker checks stored tickets (the pool's config may have changed)."""
        if len(players) > self.max_party:
            raise InvalidInput("players", f"a party of {len(players)} does not fit a team of {self.max_party}")
        kinds = {r.get("kind") for r in self.rules}
        for i, p in enumerate(players):
            feats = p.get("features")
            if not isinstance(feats, list | tuple):
                raise InvalidInput(f"players[{i}].features", "missing")
            if self.feature_dim is not None and len(feats) != self.feature_dim:
                raise InvalidInput(f"players[{i}].features",
                                   f"expected {self.feature_dim} numbers (pool {self.name}'s model), got {len(feats)}")
            for need, attr in (({"skill_balance", "skill_spread"}, "skill"),
                               ({"roles", "role_min", "role_max"}, "roles"), ({"max_ping"}, "pings")):
                if kinds & need and p.get(attr) is None:
                    raise InvalidInput(f"players[{i}].{attr}", f"required by pool {self.name}'s rules")

    @property
    def window(self) -> int:
        """How many longest-waiting tickets a matchmaker tick reads (see ``scan_window``)."""
        return self.scan_window if self.scan_window is not None else max(200, 10 * self.max_candidates)


class ArmConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    weight: Number = Field(default=1.0, gt=0)
    method: str | None = None
    engagement_model: str | None = None
    predictor: str | None = None
    dispatch: DispatchConfig | None = None
    time_budget_ms: Number | None = Field(default=None, gt=0, le=60_000)


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
        for k, name in enumerate(names):
            if name in names[:k]:
                raise InvalidInput(f"arms[{k}].name", f"arm names must be unique: {name!r} is arms[{names.index(name)}] too")
        return self


class ModelFile(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    path: Path
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                               description="Pinned digest; None = read the digest from PATH.sha256 (written by export).")
    #: the config field that named the file when a pool did (``pools[k].predictor``), else None
    _where: str | None = PrivateAttr(default=None)

    @property
    def where(self) -> str | None:
        return self._where


class ModelsConfig(_Strict):
    predictors: list[ModelFile] = Field(default_factory=list)
    engagement: list[ModelFile] = Field(default_factory=list)
    reload_interval_s: Number = Field(default=5.0, gt=0, description="How often files are checked for a new version.")


class SolveDefaults(_Strict):
    """What ``POST /v1/solve`` runs when the request names no method / budget."""

    method: str = "exact"
    fallback_method: str = "surrogate"
    time_budget_ms: Number = Field(default=100.0, gt=0, le=60_000)


def _event_name(v: str) -> str:
    from .events import PUBLIC_TYPES  # the one table of public event types

    if v not in PUBLIC_TYPES:
        raise ValueError(f"unknown event type {v[:64]!r} (one of {', '.join(PUBLIC_TYPES)})")
    return v


_EventName = Annotated[str, AfterValidator(_event_name)]


class WebhookConfig(_Strict):
    """A receiver of ticket events (top-level ``webhooks:``; delivery in :mod:`mgmatch.app.webhooks`)."""

    url: str = Field(max_length=2048, description="http:// or https:// URL the events are POSTed to.")
    secret: str = Field(min_length=16, max_length=512,
                        description="HMAC-SHA-256 key of the X-Mgmatch-Signature header (at least 16 characters).")
    events: list[_EventName] | None = Field(default=None, min_length=1,
                                     description="Public event types to send (default: all of them).")
    pools: list[str] | None = Field(default=None, min_length=1, description="Pools whose events to send (default: all).")
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                             description="Stable id of the webhook's delivery state (default: from the URL).")
    max_attempts: int = Field(default=8, ge=1, le=50, description="Deliveries tried before the dead letter.")
    backoff_s: Number = Field(default=0.5, gt=0, le=600, description="Wait before the first retry; doubles each time.")
    max_backoff_s: Number = Field(default=60.0, gt=0, le=3600, description="Longest wait between two retries.")
    timeout_s: Number = Field(default=5.0, gt=0, le=60, description="HTTP timeout of one delivery.")
    max_in_flight: int = Field(default=64, ge=1, le=10_000,
                               description="Deliveries waiting or running for this receiver; past it the deliverer "
                                           "reads no more for it (a slow receiver holds back only its own events).")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        from urllib.parse import urlsplit

        u = urlsplit(v)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return v


    @property
    def id(self) -> str:
        import hashlib

        return self.name or hashlib.sha256(self.url.encode()).hexdigest()[:12]


class ServiceConfig(_Strict):
    pools: list[PoolConfig] = Field(min_length=1)
    solve: SolveDefaults = Field(default_factory=SolveDefaults)
    experiments: list[ExperimentConfig] = Field(default_factory=list)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    default_engagement_model: str | None = Field(default=None, description="Model for /v1/solve instances that name none.")
    capture: CaptureConfig | None = Field(default=None, description="Record solved pools as instance files.")
    webhooks: list[WebhookConfig] = Field(default_factory=list, description="Receivers of ticket events (POST, signed).")

    @model_validator(mode="after")
    def _refs(self) -> ServiceConfig:
        names = [p.name for p in self.pools]
        self._webhook_refs(names)
        for k, name in enumerate(names):
            if name in names[:k]:
                raise InvalidInput(f"pools[{k}].name",
                                   f"pool names must be unique: {name!r} is pools[{names.index(name)}] too")
        self._pool_files()
        if SOLVE_POOL in names:
            raise InvalidInput(f"pools[{names.index(SOLVE_POOL)}].name",
                               f"pool name {SOLVE_POOL!r} is reserved for /v1/solve")
        for i, e in enumerate(self.experiments):
            for j, p in enumerate(e.pools):
                if p not in names and p != SOLVE_POOL:
                    raise InvalidInput(f"experiments[{i}].pools[{j}]", f"experiment {e.name!r} names unknown pool {p!r}")
        return self

    def _webhook_refs(self, names: list[str]) -> None:
        seen: dict[str, int] = {}
        for k, w in enumerate(self.webhooks):
            for j, p in enumerate(w.pools or []):
                if p not in names:
                    raise InvalidInput(f"webhooks[{k}].pools[{j}]", f"unknown pool {p!r}")
            if w.id in seen:
                raise InvalidInput(f"webhooks[{k}].name", f"webhooks[{seen[w.id]}] has the same id {w.id!r} (the same "
                                                          "url): give one of them a name")
            seen[w.id] = k

    def _pool_files(self) -> None:
        """Turn pools' ``{path, sha256}`` model files into named ``models`` entries (named after the pool)."""
        for k, p in enumerate(self.pools):
            for attr, entries in (("engagement_model", self.models.engagement), ("predictor", self.models.predictors)):
                f = getattr(p, attr)
                if not isinstance(f, PinnedFile):
                    continue
                if any(m.name == p.name for m in entries):
                    section = "engagement" if attr == "engagement_model" else "predictors"
                    raise InvalidInput(f"pools[{k}].{attr}", f"models.{section} already has an entry named {p.name!r} "
                                                             "(a pool's own file takes the pool's name)")
                entry = ModelFile(name=p.name, path=f.path, sha256=f.sha256)
                entry._where = f"pools[{k}].{attr}"
                entries.append(entry)
                setattr(p, attr, p.name)

    def capture_for(self, pool: str) -> CaptureConfig | None:
        """The capture settings of a pool (its own, else the global ones), or of /v1/solve (``solve``)."""
        if pool == SOLVE_POOL:
            return self.capture if self.capture is not None and self.capture.solve_requests else None
        p = self.pool(pool)
        if p is not None and p.capture is not None:
            return p.capture
        return self.capture

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


def _relative_to(obj: Any, base: Path) -> Any:
    """The config object with pools' own model-file paths and capture folders made relative to ``base``."""
    if not isinstance(obj, dict):
        return obj

    def fix(d: Any, key: str) -> None:
        if isinstance(d, dict) and isinstance(d.get(key), str) and not Path(d[key]).is_absolute():
            d[key] = str(base / d[key])

    obj = dict(obj)
    if isinstance(obj.get("pools"), list):
        pools = []
        for p in obj["pools"]:
            if isinstance(p, dict):
                p = dict(p)
                for attr in ("engagement_model", "predictor", "capture"):
                    if isinstance(p.get(attr), dict):
                        p[attr] = dict(p[attr])
                        fix(p[attr], "dir" if attr == "capture" else "path")
                if isinstance(p.get("learning"), dict):
                    p["learning"] = dict(p["learning"])
                    p["learning"].setdefault("dir", "learned")
                    fix(p["learning"], "seed_log")
                    fix(p["learning"], "dir")
            pools.append(p)
        obj["pools"] = pools
    if isinstance(obj.get("capture"), dict):
        obj["capture"] = dict(obj["capture"])
        fix(obj["capture"], "dir")
    return obj


def load_config(path: str | Path | None) -> ServiceConfig:
    """Read the YAML config (or the built-in default when ``path`` is None).

    A pool's own model files (``{path, sha256}``), capture folders and ``learning`` paths (``seed_log``,
    ``dir``) given as relative paths are taken relative to the config file's folder; ``models:`` entries keep the working directory.
    """
    if path is None:
        return parse_config(DEFAULT_CONFIG, "default config")
    p = Path(path)
    try:
        obj = yaml.safe_load(read_text(p))
    except FileNotFoundError:
        raise InvalidInput(str(p), "no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInput(str(p), f"cannot read: {err}") from None
    except yaml.YAMLError as err:
        raise InvalidInput(str(p), f"not valid YAML: {str(err).splitlines()[0]}") from None
    return parse_config(_relative_to(obj, p.parent), str(p))

