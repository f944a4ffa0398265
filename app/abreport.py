"""The A/B report of an experiment: what ``mgmatch ab report`` prints and ``GET /v1/experiments/{name}`` answers.

An experiment (config ``experiments:``, :mod:`mgmatch.app.ab`) splits its pools' tickets or matches into
weighted arms; every match the matchmaker forms records its arm (``MatchRecord.arm``) and, once the game
server posts it, its engagement. The report reads those records — from the store, or from a match log
(spec §5) whose lines carry the optional ``arm`` — and gives per arm: matches formed and results received,
mean engagement with a 95% interval, and for every arm but the control its lift over the control with an
always-valid confidence sequence and p-value (safe to read at every look; :mod:`mgmatch.pipeline.abstats`);
and for the experiment a sample-ratio-mismatch check of the matches per arm against the configured weights.

The control arm is the one named by the caller, else the arm named ``control``, else the first arm.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgmatch.core.errors import InvalidInput
from mgmatch.pipeline import abstats
from mgmatch.pipeline.matchlog import check_line, iter_lines

from .ab import Experiments
from .config import ExperimentConfig, ServiceConfig
from .store import MatchRecord, Store

#: the most model versions / policies listed per arm (the most frequent first)
MAX_LISTED = 10


class UnknownExperiment(LookupError):
    """No experiment of that name in the config (HTTP 404 naming ``name``)."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        listed = ", ".join(known[:20]) or "none configured"
        self.message = f"no experiment {name[:64]!r} (the config has: {listed})"
        super().__init__(f"name: {self.message}")


@dataclass
class ArmData:
    """What the report gathers of one arm."""

    name: str
    weight: float | None
    matches: int = 0
    results: abstats.Accumulator = field(default_factory=abstats.Accumulator)
    model_versions: Counter[str] = field(default_factory=Counter)
    policies: Counter[str] = field(default_factory=Counter)
    propensity_sum: float = 0.0
    propensity_n: int = 0

    def record(self, engagement: float | None, model_version: str | None = None, policy: str | None = None,
               propensity: float | None = None) -> None:
        self.matches += 1
        if engagement is not None:
            self.results.push(float(engagement))
        if model_version is not None:
            self.model_versions[str(model_version)] += 1
        if policy is not None:
            self.policies[str(policy)] += 1
        if propensity is not None:
            self.propensity_sum += float(propensity)
            self.propensity_n += 1


def experiment_config(config: ServiceConfig, name: str) -> ExperimentConfig:
    for e in config.experiments:
        if e.name == name:
            return e
    raise UnknownExperiment(name, [e.name for e in config.experiments])


def experiment_pools(config: ServiceConfig, exp: ExperimentConfig) -> list[str]:
    """The matchmaker pools whose matches ``exp`` splits (a pool is covered by at most one experiment)."""
    experiments = Experiments(config)
    return [p.name for p in config.pools if (x := experiments.for_pool(p.name)) is not None and x.config is exp]


def choose_control(arms: list[str], control: str | None) -> str:
    if control is not None:
        if control not in arms:
            raise InvalidInput("control", f"no arm {control[:64]!r} in the experiment (arms: {', '.join(arms)})")
        return control
    return "control" if "control" in arms else arms[0]


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _check_options(alpha: float, horizon: int | None) -> int:
    """The horizon to use (the default for None); InvalidInput for an α or a horizon out of range."""
    if horizon is None:
        horizon = abstats.DEFAULT_HORIZON
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise InvalidInput("alpha", f"must be in (0, 1), got {alpha}")
    if not (isinstance(horizon, int) and 1 <= horizon <= 10**9):
        raise InvalidInput("horizon", f"must be an integer in 1 … 10^9, got {horizon}")
    return horizon


# --------------------------------------------------------------------------- gathering

#: what the report needs of one match record: arm, engagement (None without a result), model version, policy,
#: propensity
Outcome = tuple[str | None, float | None, str | None, str | None, float | None]


def outcome(rec: MatchRecord) -> Outcome:
    engagement = _finite(rec.result.get("engagement")) if rec.result else None
    return (rec.arm, engagement, rec.model_version, getattr(rec, "policy", None), getattr(rec, "propensity", None))


def _match_ids(store: Store, pool: str, page: int = 5000) -> list[str]:
    """Every match id the store keeps for ``pool``, oldest first (the index alone: ids and times)."""
    out: list[str] = []
    low, seen_at_low = float("-inf"), set()
    while True:
        rows = [(mid, t) for mid, t in store.match_index(pool, low, page + len(seen_at_low))
                if not (t == low and mid in seen_at_low)][:page]
        if not rows:
            return out
        out.extend(mid for mid, _ in rows)
        last = rows[-1][1]
        if last != low:
            low, seen_at_low = last, set()
        seen_at_low |= {mid for mid, t in rows if t == last}


class OutcomeCache:
    """The outcomes of the match records that have a result, kept between reports of a serving process.

    A record's arm and features never change, and its result, once posted, stays (a second, different one is
    refused), so a record with a result is read from the store once; each report reads the pool's index, the
    records not seen with a result yet (matches in play), and forgets those the store no longer keeps. A report
    over 10,000 records of 196 features each reads ~100 MB of JSON without it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[str, dict[str, Outcome]] = {}

    def outcomes(self, store: Store, pool: str, batch: int = 500) -> list[Outcome]:
        ids = _match_ids(store, pool)
        with self._lock:
            known = self._done.get(pool, {})
            kept = {mid: known[mid] for mid in ids if mid in known}
        missing = [mid for mid in ids if mid not in kept]
        fresh: dict[str, Outcome] = {}
        for k in range(0, len(missing), batch):
            part = missing[k:k + batch]
            for mid, rec in zip(part, store.get_matches(pool, part), strict=True):
                if rec is not None:
                    fresh[mid] = outcome(rec)
        with self._lock:
            done = self._done.setdefault(pool, {})
            for mid in list(done):
                if mid not in kept:
                    del done[mid]  # gone from the store (retention)
            done.update({mid: o for mid, o in fresh.items() if o[1] is not None})
        return [o for mid in ids if (o := kept.get(mid) or fresh.get(mid)) is not None]


def gather_store(store: Store, config: ServiceConfig, name: str, cache: OutcomeCache | None = None
                 ) -> tuple[ExperimentConfig, list[str], list[ArmData], dict[str, int]]:
    """Every match record of the experiment's pools, counted into its arms (records of no arm or of an arm the
    config no longer has, formed before the experiment or under an earlier config, count under ``other_arms``)."""
    exp = experiment_config(config, name)
    pools = experiment_pools(config, exp)
    arms = {a.name: ArmData(a.name, float(a.weight)) for a in exp.arms}
    ignored = {"other_arms": 0}
    for pool in pools:
        rows = cache.outcomes(store, pool) if cache is not None else (outcome(r) for r in store.iter_matches(pool))
        for arm_name, engagement, version, policy, propensity in rows:
            arm = arms.get(arm_name) if arm_name is not None else None
            if arm is None:
                ignored["other_arms"] += 1
                continue
            arm.record(engagement, version, policy, propensity)
    return exp, pools, list(arms.values()), ignored


def _optional_str(obj: dict, key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise InvalidInput(f"{where}, {key}", "must be a non-empty string")
    return v


def gather_log(path: str | Path, exp: ExperimentConfig | None) -> tuple[list[ArmData], dict[str, int]]:
    """The lines of a spec §5 match log counted into arms by their optional ``arm`` field. With ``exp`` the arms
    (and their weights) are the experiment's and lines of another arm are counted under ``other_arms``;
    without, the arms are those the log names, in the order they first appear (no weights). A bad line is an
    :class:`InvalidInput` naming the line and the field."""
    path = Path(path)
    arms: dict[str, ArmData] = {a.name: ArmData(a.name, float(a.weight)) for a in exp.arms} if exp else {}
    ignored = {"other_arms": 0, "without_arm": 0}
    teams = dim = None
    first = True
    for n, obj in iter_lines(path):
        sizes, dim, engagement = check_line(obj, path, n, first, teams, dim)
        teams, first = len(sizes), False
        where = f"{path.name} line {n}"
        name = _optional_str(obj, "arm", where)
        version = _optional_str(obj, "model_version", where)
        policy = _optional_str(obj, "policy", where)
        propensity = obj.get("propensity")
        if propensity is not None and not (_finite(propensity) is not None and 0 < propensity <= 1):
            raise InvalidInput(f"{where}, propensity", f"must be a probability in (0, 1], got {str(propensity)[:40]}")
        if name is None:
            ignored["without_arm"] += 1
            continue
        arm = arms.get(name)
        if arm is None:
            if exp is not None:
                ignored["other_arms"] += 1
                continue
            arm = arms[name] = ArmData(name, None)
        arm.record(engagement, version, policy, propensity)
    return list(arms.values()), ignored


# --------------------------------------------------------------------------- the report


def build_report(name: str, arms: list[ArmData], *, source: str, pools: list[str] | None = None,
                 key: str | None = None, control: str | None = None, alpha: float = 0.05,
                 horizon: int | None = None, ignored: dict[str, int] | None = None) -> dict[str, Any]:
    """The report document (the JSON of ``ab report --json`` and ``GET /v1/experiments/{name}``)."""
    horizon = _check_options(alpha, horizon)
    if not arms:
        raise InvalidInput("arm", f"experiment {name!r}: no match names an arm")
    ctl_name = choose_control([a.name for a in arms], control)
    ctl = next(a for a in arms if a.name == ctl_name).results.moments()
    out_arms = []
    for a in arms:
        m = a.results.moments()
        ci = abstats.mean_ci(m)
        row: dict[str, Any] = {
            "name": a.name, "weight": a.weight, "control": a.name == ctl_name,
            "matches": a.matches, "results": m.n,
            "engagement_mean": m.mean if m.n else None,
            "engagement_sd": math.sqrt(m.var) if m.n > 1 else None,
            "engagement_ci95": list(ci) if ci else None,
            "model_versions": dict(a.model_versions.most_common(MAX_LISTED)),
            "policies": dict(a.policies.most_common(MAX_LISTED)),
            "propensity_mean": a.propensity_sum / a.propensity_n if a.propensity_n else None,
            "lift": None,
        }
        if a.name != ctl_name:
            lift = abstats.lift(ctl, m, alpha, horizon)
            row["lift"] = lift.to_json(alpha) if lift else None
        out_arms.append(row)
    weights = [a.weight for a in arms]
    srm = None
    if all(w is not None for w in weights):
        s = abstats.sample_ratio([a.matches for a in arms], weights)
        srm = s.to_json() if s else None
    return {
        "experiment": name, "source": source, "pools": pools, "key": key, "control": ctl_name,
        "alpha": alpha, "confidence": 1 - alpha, "horizon": horizon, "min_results": abstats.MIN_RESULTS,
        "matches": sum(a.matches for a in arms), "results": sum(a.results.n for a in arms),
        "arms": out_arms, "srm": srm, "ignored": ignored or {},
    }


def report_from_store(store: Store, config: ServiceConfig, name: str, *, control: str | None = None,
                      alpha: float = 0.05, horizon: int | None = None,
                      cache: OutcomeCache | None = None) -> dict[str, Any]:
    """The report of experiment ``name`` of ``config`` from the match records in ``store`` (through ``cache``
    when a serving process keeps one).

    Raises:
        UnknownExperiment: ``config`` has no experiment ``name``.
        InvalidInput: ``control`` names no arm of it, or ``alpha``/``horizon`` out of range.
    """
    _check_options(alpha, horizon)
    exp = experiment_config(config, name)
    choose_control([a.name for a in exp.arms], control)  # a bad --control fails before the store is read
    exp, pools, arms, ignored = gather_store(store, config, name, cache)
    return build_report(name, arms, source="store", pools=pools, key=exp.key, control=control, alpha=alpha,
                        horizon=horizon, ignored=ignored)


def report_from_log(path: str | Path, config: ServiceConfig | None = None, name: str | None = None, *,
                    control: str | None = None, alpha: float = 0.05,
                    horizon: int | None = None) -> dict[str, Any]:
    """The report from a match log. With ``config``, experiment ``name`` (or its only experiment) gives the arms
    and their weights; without, the log's arms (no sample-ratio check: no weights)."""
    _check_options(alpha, horizon)
    exp = None
    if config is not None:
        if name is None:
            if len(config.experiments) != 1:
                raise InvalidInput("experiment", "name the experiment: the config has "
                                   + (", ".join(e.name for e in config.experiments) or "no experiments"))
            name = config.experiments[0].name
        exp = experiment_config(config, name)
        choose_control([a.name for a in exp.arms], control)
    arms, ignored = gather_log(path, exp)
    if not arms:
        raise InvalidInput("arm", f"{Path(path).name}: no line names an arm (the optional §5 field `arm`)")
    pools = experiment_pools(config, exp) if exp is not None and config is not None else None
    return build_report(name or Path(path).stem, arms, source="log", pools=pools, key=exp.key if exp else None,
                        control=control, alpha=alpha, horizon=horizon, ignored=ignored)
