"""Dispatch policies: *when* to run a solve for a pool, and *on which waiting tickets*.

The service's matchmaker loop owns one :class:`Policy` object per pool (policies may keep
state between calls, e.g. the next batch round or the observed skill mix) and calls
:meth:`Policy.decide` every tick::

    from mgmatch.solvers.dispatch import PoolShape, Waiting, make_policy

    policy = make_policy("batch", interval_s=60, max_candidates=300,
                         relax={"steps": [{"after_s": 30, "rule": "skill_balance",
                                           "set": {"max_diff": 400}}]})
    shape = PoolShape(teams=2, sizes=(5, 5))
    d = policy.decide(waiting, shape, now=time.time())   # waiting: list[Waiting]
    if d.solve:
        cands = [t for t in waiting if t.ticket_id in set(d.tickets)]   # ordered by priority: d.tickets
        inst = d.apply(build_instance(cands, shape, pool_rules))        # applies d.relax_steps
        for _ in range(d.max_matches):                                  # solve, claim, drop matched …
            ...
    # tickets not in d.tickets (or not matched): d.eta_s.get(ticket_id) → seconds, or None
    # call decide again after d.next_check_s seconds (None: on the next tick / next arrival)

Types (all frozen dataclasses, JSON-friendly via ``to_json``):

- :class:`Waiting` — one ticket: ``ticket_id``, ``players`` (core :class:`Player` objects; a
  party ticket has several and is never split), ``enqueued_at`` (seconds, same clock as
  ``now``), ``pool``.
- :class:`PoolShape` — ``teams`` and ``sizes`` of a match in the pool.
- :class:`Decision` — ``solve`` (run a solve now?), ``tickets`` (candidate ticket ids in
  priority order, at most ``max_candidates`` players in all; empty when ``solve`` is false),
  ``max_matches`` (how many matches the loop may form from these candidates, one after the
  other), ``relax_steps`` (the :class:`~mgmatch.solvers.relax.RelaxStep` list active now;
  :meth:`Decision.apply` applies them to an instance), ``waited_s`` (the waiting time that
  selected them), ``eta_s`` (ticket id → estimated seconds until that ticket is next
  considered, for tickets left waiting; set by fixed-round policies), ``next_check_s`` and a
  human-readable ``reason``.

Policies (``make_policy(name, **params)``; every policy also takes ``max_candidates`` (default
200), ``relax`` (a relaxation config, see :mod:`mgmatch.solvers.relax`), ``skill_scale``
(default 100) and ``wait_scale`` (default 30 s), the last two weighting skill distance
against waiting time when candidates are chosen):

- ``immediate`` — solve as soon as enough players wait to fill one match.
- ``batch`` (Awesomenauts) — fixed rounds every ``interval_s`` seconds (``offset_s`` phase);
  at a round everything waiting (up to ``max_candidates``, default 300) is matched at once;
  between rounds every ticket gets the exact ETA of the next round.
- ``quality_threshold`` (Heroes of the Storm) — the longest waiter is top priority; a match is
  started as soon as a group of good enough quality exists (skill spread ≤ ``max_spread`` +
  ``spread_growth_per_s`` × waited, capped at ``spread_cap``).
- ``wu`` (Wu, dynamic matching with teams) — greedy (match as soon as 2n wait) or patient
  (with 2n waiting match only if a zero-imbalance split exists, else wait for one more arrival),
  chosen by Wu's threshold rule from the observed fraction q of high-skill arrivals (skill ≥
  ``high_skill``), team size n and the configured ``alpha``.
- ``game_queue`` (Alman–McKay) — an incremental game queue over the waiting players; the
  players of the ``games`` best games (imbalance α·d_p + v_q + β·entry time) form the pool,
  solved when the best game's imbalance is ≤ ``max_imbalance``.

Bad parameters raise :class:`~mgmatch.core.errors.InvalidInput` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, Player

from .relax import RelaxConfig, RelaxStep, parse_relax

# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Waiting:
    """A waiting ticket. ``players`` has one entry for a solo ticket, several for a party."""

    ticket_id: str
    players: tuple[Player, ...]
    enqueued_at: float
    pool: str = "default"

    def __post_init__(self) -> None:
        if not self.players:
            raise InvalidInput("players", f"ticket {self.ticket_id!r} has no players")
        if not isinstance(self.players, tuple):
            object.__setattr__(self, "players", tuple(self.players))

    @property
    def size(self) -> int:
        return len(self.players)

    @property
    def skill(self) -> float:
        """Mean skill of the ticket's players (missing skills count as 0)."""
        return sum(_skill(p) for p in self.players) / len(self.players)

    def waited(self, now: float) -> float:
        return max(0.0, now - self.enqueued_at)

    def to_json(self) -> dict:
        return {"ticket_id": self.ticket_id, "players": [p.to_json() for p in self.players],
                "enqueued_at": self.enqueued_at, "pool": self.pool}


@dataclass(frozen=True)
class PoolShape:
    """The match shape of a pool: ``teams`` teams with ``sizes[j]`` players each."""

    teams: int
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.sizes, tuple):
            object.__setattr__(self, "sizes", tuple(self.sizes))
        if self.teams < 2 or len(self.sizes) != self.teams or any(s < 1 for s in self.sizes):
            raise InvalidInput("sizes", f"need ≥ 2 teams with one size ≥ 1 each, got teams={self.teams} sizes={list(self.sizes)}")

    @staticmethod
    def uniform(teams: int, team_size: int) -> PoolShape:
        return PoolShape(teams, (team_size,) * teams)

    @property
    def match_players(self) -> int:
        return sum(self.sizes)


@dataclass(frozen=True)
class Decision:
    """What the matchmaker loop should do now (see the module docstring)."""

    solve: bool
    tickets: tuple[str, ...] = ()
    max_matches: int = 0
    relax_steps: tuple[RelaxStep, ...] = ()
    waited_s: float = 0.0
    eta_s: dict[str, float] = field(default_factory=dict)
    next_check_s: float | None = None
    reason: str = ""

    def apply(self, instance: Instance) -> Instance:
        """Apply this decision's relaxations to the instance built from ``tickets``."""
        if not self.relax_steps:
            return instance
        from .relax import relax

        return relax(instance, self.waited_s, RelaxConfig(self.relax_steps, "max"))

    def to_json(self) -> dict:
        return {"solve": self.solve, "tickets": list(self.tickets), "max_matches": self.max_matches,
                "relax_steps": [s.to_json() for s in self.relax_steps], "waited_s": self.waited_s,
                "eta_s": dict(self.eta_s), "next_check_s": self.next_check_s, "reason": self.reason}


class Policy(Protocol):
    """A dispatch policy; one object per pool, called repeatedly with the current waiting list."""

    name: str

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision: ...


# --------------------------------------------------------------------------- helpers


def _skill(p: Player) -> float:
    return float(p.skill) if p.skill is not None else 0.0


def _num(params: dict, name: str, default: float, *, minimum: float | None = 0.0, strict: bool = False,
         allow_inf: bool = False) -> float:
    v = params.pop(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(float(v)):
        raise InvalidInput(name, f"expected a number, got {v!r}")
    v = float(v)
    if math.isinf(v) and not allow_inf:
        raise InvalidInput(name, "must be finite")
    if minimum is not None and (v < minimum or (strict and v == minimum)):
        raise InvalidInput(name, f"must be {'>' if strict else '≥'} {minimum:g}, got {v:g}")
    return v


def _int(params: dict, name: str, default: int, minimum: int = 1) -> int:
    v = params.pop(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise InvalidInput(name, f"expected an integer, got {v!r}")
    if v < minimum:
        raise InvalidInput(name, f"must be ≥ {minimum}, got {v}")
    return int(v)


def total_players(tickets: Sequence[Waiting]) -> int:
    return sum(t.size for t in tickets)


@dataclass
class _Base:
    """Shared parameters and candidate selection."""

    max_candidates: int = 200
    relax: RelaxConfig = field(default_factory=RelaxConfig)
    skill_scale: float = 100.0
    wait_scale: float = 30.0
    name: str = "base"

    def select(self, waiting: Sequence[Waiting], now: float, anchor: Waiting | None = None) -> list[Waiting]:
        """Candidates by waiting time and skill proximity, at most ``max_candidates`` players.

        The anchor (default: the longest waiter) always comes first; the others are ranked by
        ``|skill − anchor skill| / skill_scale − waited / wait_scale`` (lower first). Tickets
        that would overflow the player cap are skipped (smaller ones may still fit).
        """
        if not waiting:
            return []
        if anchor is None:
            anchor = min(waiting, key=lambda t: (t.enqueued_at, t.ticket_id))
        a_skill = anchor.skill
        rest = [t for t in waiting if t.ticket_id != anchor.ticket_id]
        rest.sort(key=lambda t: (abs(t.skill - a_skill) / self.skill_scale - t.waited(now) / self.wait_scale,
                                 t.enqueued_at, t.ticket_id))
        out, used = [anchor], anchor.size
        for t in rest:
            if used + t.size <= self.max_candidates:
                out.append(t)
                used += t.size
            if used >= self.max_candidates:
                break
        return out

    def decision(self, cands: list[Waiting], shape: PoolShape, now: float, reason: str,
                 max_matches: int | None = None, eta: dict[str, float] | None = None,
                 next_check_s: float | None = None) -> Decision:
        waits = [t.waited(now) for t in cands]
        waited = self.relax.waited(waits)
        n = total_players(cands)
        mm = max_matches if max_matches is not None else max(1, n // shape.match_players)
        return Decision(True, tuple(t.ticket_id for t in cands), mm, self.relax.active(waited), waited,
                        eta or {}, next_check_s, reason)


def _base_params(params: dict, default_cap: int = 200) -> dict:
    return {
        "max_candidates": _int(params, "max_candidates", default_cap, minimum=2),
        "relax": parse_relax(params.pop("relax", None), "relax"),
        "skill_scale": _num(params, "skill_scale", 100.0, strict=True),
        "wait_scale": _num(params, "wait_scale", 30.0, strict=True),
    }


def _check_fits(shape: PoolShape, cap: int) -> None:
    if cap < shape.match_players:
        raise InvalidInput("max_candidates", f"{cap} players cannot fill a match of {shape.match_players}")


# --------------------------------------------------------------------------- policies


@dataclass
class Immediate(_Base):
    """Solve as soon as the waiting players can fill one match."""

    name: str = "immediate"

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        _check_fits(shape, self.max_candidates)
        have = total_players(waiting)
        if have < shape.match_players:
            return Decision(False, reason=f"{have} of {shape.match_players} players waiting")
        cands = self.select(waiting, now)
        return self.decision(cands, shape, now, f"{have} players waiting ≥ {shape.match_players}")


@dataclass
class Batch(_Base):
    """Fixed rounds every ``interval_s`` seconds at ``offset_s + m·interval_s`` (Awesomenauts)."""

    interval_s: float = 60.0
    offset_s: float = 0.0
    name: str = "batch"
    _done_round: int | None = None

    def round_index(self, now: float) -> int:
        return math.floor((now - self.offset_s) / self.interval_s)

    def next_round_at(self, now: float) -> float:
        return self.offset_s + (self.round_index(now) + 1) * self.interval_s

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        _check_fits(shape, self.max_candidates)
        r = self.round_index(now)
        nxt = self.next_round_at(now)
        eta = {t.ticket_id: nxt - now for t in waiting}
        if self._done_round is None:
            # first call: the current round boundary has passed already; wait for the next one
            self._done_round = r
        if r <= self._done_round:
            return Decision(False, eta_s=eta, next_check_s=nxt - now, reason=f"next round in {nxt - now:.3g}s")
        self._done_round = r
        have = total_players(waiting)
        if have < shape.match_players:
            return Decision(False, eta_s=eta, next_check_s=nxt - now,
                            reason=f"round {r}: {have} of {shape.match_players} players; next round in {nxt - now:.3g}s")
        cands = self.select(waiting, now)
        chosen = {t.ticket_id for t in cands}
        # tickets left out of this round wait for the next one
        left = {tid: v for tid, v in eta.items() if tid not in chosen}
        # candidates that end up unmatched also wait for the next round: give the loop their ETA too
        eta_all = {**{t.ticket_id: nxt - now for t in cands}, **left}
        return self.decision(cands, shape, now, f"round {r}: {have} players", eta=eta_all, next_check_s=nxt - now)


def _group_around(anchor: Waiting, waiting: Sequence[Waiting], need: int) -> list[Waiting] | None:
    """The tickets nearest in skill to ``anchor`` that together hold ≥ ``need`` players."""
    others = sorted((t for t in waiting if t.ticket_id != anchor.ticket_id),
                    key=lambda t: (abs(t.skill - anchor.skill), t.enqueued_at, t.ticket_id))
    group, have = [anchor], anchor.size
    for t in others:
        if have >= need:
            break
        group.append(t)
        have += t.size
    return group if have >= need else None


def _spread(group: Sequence[Waiting]) -> float:
    skills = [_skill(p) for t in group for p in t.players]
    return max(skills) - min(skills)


@dataclass
class QualityThreshold(_Base):
    """Heroes of the Storm: longest waiter first; match once a group is good enough.

    For each ticket in waiting order (longest first, at most ``scan`` of them) the group of
    tickets nearest to it in skill that fills one match is scored by its skill spread
    (max − min player skill). The threshold for that ticket is ``max_spread +
    spread_growth_per_s × waited`` (capped at ``spread_cap``); the first ticket whose group
    passes anchors the candidate pool.
    """

    max_spread: float = 100.0
    spread_growth_per_s: float = 10.0
    spread_cap: float = math.inf
    scan: int = 50
    name: str = "quality_threshold"

    def threshold(self, waited_s: float) -> float:
        return min(self.spread_cap, self.max_spread + self.spread_growth_per_s * waited_s)

    def decide(self, waiting: Sequence[Waiting], shape: PoolShape, now: float) -> Decision:
        _check_fits(shape, self.max_candidates)
        have = total_players(waiting)
        need = shape.match_players
        if have < need:
            return Decision(False, reason=f"{have} of {need} players waiting")
        order = sorted(waiting, key=lambda t: (t.enqueued_at, t.ticket_id))
        best_gap = math.inf
        for t in order[: self.scan]:
            group = _group_around(t, waiting, need)
            if group is None:
                continue
            spread, thr = _spread(group), self.threshold(t.waited(now))
            if spread <= thr:
                cands = self.select(waiting, now, anchor=t)
                # make sure the good-enough group itself is in the pool (it is near the anchor)
                ids = {c.ticket_id for c in cands}
                extra = [g for g in group if g.ticket_id not in ids]
                if extra:
                    cands = group + [c for c in cands if c.ticket_id not in {g.ticket_id for g in group}]
                    cands = _cap(cands, self.max_candidates)
                return self.decision(cands, shape, now,
                                     f"ticket {t.ticket_id} waited {t.waited(now):.3g}s: spread {spread:.4g} ≤ {thr:.4g}",
                                     max_matches=1)
            best_gap = min(best_gap, spread - thr)
        # time until the longest waiter's threshold could cover its group's spread
        nxt = None
        if self.spread_growth_per_s > 0 and math.isfinite(best_gap):
            nxt = best_gap / self.spread_growth_per_s
        return Decision(False, next_check_s=nxt, reason="no group of good enough quality yet")


def _cap(cands: list[Waiting], cap: int) -> list[Waiting]:
    out, used = [], 0
    for t in cands:
        if used + t.size <= cap:
            out.append(t)
            used += t.size
    return out


def _params_ok(name: str, params: dict) -> None:
    if params:
        bad = sorted(params)[0]
        raise InvalidInput(bad, f"unknown parameter for policy {name!r}")


# --------------------------------------------------------------------------- factory

POLICIES = ("immediate", "batch", "quality_threshold", "wu", "game_queue")


def make_policy(name: str, **params: Any) -> Policy:
    """Build a policy by name; every parameter is validated (InvalidInput names the bad one)."""
    params = dict(params)
    if name == "immediate":
        base = _base_params(params)
        _params_ok(name, params)
        return Immediate(**base)
    if name == "batch":
        base = _base_params(params, default_cap=300)
        interval = _num(params, "interval_s", 60.0, strict=True)
        offset = _num(params, "offset_s", 0.0, minimum=None)
        _params_ok(name, params)
        return Batch(**base, interval_s=interval, offset_s=offset)
    if name == "quality_threshold":
        base = _base_params(params)
        ms = _num(params, "max_spread", 100.0)
        g = _num(params, "spread_growth_per_s", 10.0)
        cap = _num(params, "spread_cap", math.inf, allow_inf=True)
        scan = _int(params, "scan", 50)
        _params_ok(name, params)
        if cap < ms:
            raise InvalidInput("spread_cap", f"must be ≥ max_spread ({ms:g}), got {cap:g}")
        return QualityThreshold(**base, max_spread=ms, spread_growth_per_s=g, spread_cap=cap, scan=scan)
    if name == "wu":
        from .wu import WuPolicy

        base = _base_params(params)
        alpha = _num(params, "alpha", 1.0)
        high = params.pop("high_skill", None)
        if high is not None:
            high = _num({"high_skill": high}, "high_skill", 0.0, minimum=None)
        prior_q = _num(params, "prior_q", 0.5)
        if prior_q > 1:
            raise InvalidInput("prior_q", f"must be ≤ 1, got {prior_q:g}")
        mode = params.pop("mode", "auto")
        if mode not in ("auto", "greedy", "patient"):
            raise InvalidInput("mode", f"expected auto, greedy or patient, got {mode!r}")
        _params_ok(name, params)
        return WuPolicy(**base, alpha=alpha, high_skill=high, prior_q=prior_q, mode=mode)
    if name == "game_queue":
        from .game_queue import GameQueuePolicy

        base = _base_params(params)
        alpha = _num(params, "alpha", 1.0)
        p = _num(params, "p", 1.0, minimum=1.0, allow_inf=True)
        q = _num(params, "q", 2.0, minimum=1.0, allow_inf=True)
        beta = _num(params, "beta", 0.0)
        games = _int(params, "games", 1)
        maxi = _num(params, "max_imbalance", math.inf, allow_inf=True)
        _params_ok(name, params)
        return GameQueuePolicy(**base, alpha=alpha, p=p, q=q, beta=beta, games=games, max_imbalance=maxi)
    raise InvalidInput("policy", f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}")
