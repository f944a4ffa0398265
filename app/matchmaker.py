"""The matchmaker loop of one pool, and the solve job it hands to a solver.

Every tick: expire and recover (reaper), read the queue, ask the pool's dispatch policy
(:mod:`mgmatch.solvers.dispatch`) whether and on which tickets to solve, claim those tickets
atomically (all or none), then run the job: build the instance (parties kept whole, waiting-time
relaxations applied), solve up to ``max_matches`` matches one after the other (or, per the pool's
``partition``, all of them in one joint solve: :mod:`mgmatch.solvers.batch`), commit each match,
return the rest to the queue. Embedded, the job runs in the matchmaker's thread; in production
it goes on the pool's jobs stream to a solver worker (:mod:`mgmatch.app.workers`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from mgmatch.core.errors import InvalidInput, from_pydantic
from mgmatch.core.instance import STORED, Player, parse_instance
from mgmatch.solvers.base import method_info
from mgmatch.solvers.batch import prefer_joint
from mgmatch.solvers.dispatch import PoolShape, Waiting
from mgmatch.solvers.relax import RelaxConfig, parse_step, relax

from . import metrics
from .ab import Experiments, plan_for
from .allocator import AllocationFailed, allocate
from .backfill import Backfiller
from .config import PoolConfig
from .engine import Engine, seed_of
from .instances import instance_object
from .store import MatchRecord, MatchResult, Store, StoreUnavailable, Ticket
from .waits import diagnose

log = logging.getLogger("mgmatch.matchmaker")

#: the longest wait between two tries while the store is unavailable
MAX_BACKOFF_S = 2.0
#: errors that mean the store cannot answer now (Redis down, restarting, failing over), not a bug: backed
#: off and logged once per outage. The Redis store turns its client's errors into StoreUnavailable; a
#: socket error that escapes it counts too.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (StoreUnavailable, ConnectionError, TimeoutError)


class Outage:
    """Exponential back-off while the store is unavailable, logged once when it starts and once
    when it ends (not per attempt). Shared by the embedded matchmaker loop and the separate workers."""

    def __init__(self, what: str, first_s: float = 0.05, cap_s: float = MAX_BACKOFF_S,
                 logger: logging.Logger | None = None):
        self.what, self.first_s, self.cap_s = what, first_s, cap_s
        self.log = logger if logger is not None else log
        self.since: float | None = None
        self.delay = 0.0
        self.attempts = 0

    def failed(self, err: Exception) -> float:
        """Record one failure; returns how long to wait before the next attempt."""
        if self.since is None:
            self.since, self.delay, self.attempts = time.monotonic(), self.first_s, 0
            self.log.warning("%s: store unavailable (%s); retrying with back-off up to %.1f s", self.what, err,
                             self.cap_s)
        else:
            self.delay = min(self.cap_s, self.delay * 2)
        self.attempts += 1
        return self.delay

    def ok(self) -> None:
        if self.since is not None:
            self.log.info("%s: store back after %.1f s (%d failed attempts)", self.what,
                          time.monotonic() - self.since, self.attempts)
            self.since = None


def waiting_of(t: Ticket) -> Waiting:
    """The dispatch policy's view of a ticket; InvalidInput (naming the player) if a stored player
    no longer parses."""
    try:
        players = tuple(Player.model_validate(p, context=STORED) for p in t.players)
    except ValidationError as err:
        raise from_pydantic(err, "players") from None
    return Waiting(t.id, players, t.created_at, t.pool)


def ticket_problem(pool: PoolConfig, t: Ticket) -> str | None:
    """Why a stored ticket can never be part of a match of ``pool`` (the pool's config changed since
    it was queued, or it was written by another version), or None when it fits."""
    try:
        waiting_of(t)  # every stored player still parses (a non-object player included)
        pool.check_fit(t.players)
    except InvalidInput as err:
        return str(err)
    return None


_PLAYER_AT = re.compile(r"^players\[(\d+)\]")


@dataclass
class Job:
    """A claimed candidate pool: what a solver needs, JSON between processes."""

    claim_id: str
    pool: str
    tickets: list[str]
    max_matches: int
    relax_steps: list[dict]
    waited_s: float
    arm: str | None
    lease_until: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @staticmethod
    def from_json(obj: dict[str, Any]) -> Job:
        return Job(**obj)


def build_instance(pool: PoolConfig, tickets: list[Ticket], now: float) -> tuple[Any, dict[str, str]]:
    """Instance from tickets, and the player → ticket map."""
    obj, owner = instance_object(pool, tickets, now)
    return parse_instance(obj, stored=True), owner


def ticket_at_fault(err: InvalidInput, owner: dict[str, str]) -> str | None:
    """The ticket an instance error names (``players[i]…`` → the ticket of player i), else None."""
    m = _PLAYER_AT.match(err.field or "")
    if m is None:
        return None
    ids = list(owner.values())
    i = int(m.group(1))
    return ids[i] if i < len(ids) else None


def match_record(pool: str, result: MatchResult, players: list[dict[str, Any]], tickets: list[Ticket]) -> MatchRecord:
    """What the match log needs of a match about to be committed: its teams as the spec players the solver saw
    (features, ``waited_s``, ``party`` … at match time), and the owners of its tickets (who may post its result)."""
    by_id = {p["id"]: p for p in players}
    owners = sorted({t.owner for t in tickets if t.id in result.team_of_ticket and t.owner is not None})
    return MatchRecord(match_id=result.match_id, pool=pool, teams=[[by_id[pid] for pid in team] for team in result.teams],
                       method=result.method, arm=result.arm, model_version=result.model_version,
                       objective=result.objective, owners=owners)


class JobRunner:
    """Runs claimed jobs: solve, commit, release. Shared by the embedded loop and solver workers.

    A ticket that can no longer be part of a match of its pool (its pool's model or rules changed
    since it was queued, or an error of the instance names its player) is expired with the reason
    and left out, so one bad ticket never stalls its pool.
    """

    def __init__(self, pools: dict[str, PoolConfig], store: Store, engine: Engine, experiments: Experiments,
                 clock=time.time, learning=None):
        self.pools, self.store, self.engine, self.experiments = pools, store, engine, experiments
        self.learning = learning  # mgmatch.app.learning.Learning: the policy of a learning pool's matches
        self._logged: dict[str, float] = {}
        self.clock = clock  # wall clock; the replay driver injects a simulated one

    def _reject(self, job: Job, tid: str, reason: str) -> None:
        if self.store.expire_ticket(job.pool, tid, job.claim_id, reason):
            metrics.TICKET_EVENTS.labels(job.pool, "rejected").inc()
            log.warning("pool %s: ticket %s expired: %s", job.pool, tid, reason)

    def _record_matched(self, pool: str, players: int, now: float) -> None:
        """Feed the pool's throughput record (wait estimates); advisory, so an unreachable store only logs."""
        try:
            self.store.record_matched(pool, players, now)
        except StoreUnavailable as err:
            log.warning("pool %s: throughput not recorded: %s", pool, err)

    def run(self, job: Job) -> int:
        """Returns the number of matches committed. Every claimed ticket ends matched, queued, or
        expired with a reason."""
        pool = self.pools[job.pool]
        remaining: list[Ticket] = []
        for t in self.store.get_many(job.pool, job.tickets):
            if t is None or t.status != "proposed" or t.match_id != job.claim_id:
                continue
            why = ticket_problem(pool, t)
            if why is not None:
                self._reject(job, t.id, why)
            else:
                remaining.append(t)
        formed = 0
        run_token = uuid.uuid4().hex[:8]
        try:
            steps = tuple(parse_step(s, f"relax_steps[{k}]") for k, s in enumerate(job.relax_steps))
            exp = self.experiments.for_pool(job.pool)
            k = 0
            joint = self._joint(job, pool, remaining, steps, exp, run_token)
            if joint is not None:  # the joint solve used the job's room: no one-at-a-time solves after it
                formed, remaining = joint
                k = max(1, job.max_matches)
            while k < max(1, job.max_matches):
                if sum(len(t.players) for t in remaining) < pool.match_size:
                    break
                now = self.clock()
                # the key is deterministic (arm and seed); the id also carries this run's token. A takeover
                # fences the claim (new id), so after it only the new runner commits; matches the slow
                # runner committed before it stand, and the token keeps their ids apart in any case
                key = f"{job.claim_id}-{k}"
                # "<pool>." first: a result posted for the match finds its pool (one shard) from the id alone
                match_id = f"{job.pool}.{key}-{run_token}"
                arm_cfg = None
                if exp is not None:
                    if exp.config.key == "match":
                        arm_cfg = exp.arm_for(key)
                    elif job.arm is not None:
                        arm_cfg = next((a for a in exp.config.arms if a.name == job.arm), None)
                plan = plan_for(pool, arm_cfg)
                learner = self.learning.get(job.pool) if self.learning is not None else None
                decision = learner.decide(plan) if learner is not None else None
                if decision is not None:
                    plan = decision.plan
                owner: dict[str, str] = {}
                try:
                    obj, owner = instance_object(pool, remaining, now)
                    inst = parse_instance(obj, stored=True)
                    if steps:
                        inst = relax(inst, job.waited_s, RelaxConfig(steps, "max"))
                    t0 = time.perf_counter()
                    seed = decision.seed if decision is not None else seed_of(key)
                    sol = self.engine.solve(inst, plan, job.pool, seed=seed, start=t0)
                    if decision is not None and not sol.has_assignment and decision.policy == "explore":
                        # no random candidate match was feasible: the pool's own method forms it
                        decision = learner.exploit(plan_for(pool, arm_cfg), decision.propensity, seed)
                        sol = self.engine.solve(inst, decision.plan, job.pool, seed=seed, start=time.perf_counter())
                    if decision is not None:
                        sol = sol.model_copy(update={"policy": decision.policy, "propensity": decision.propensity})
                except InvalidInput as err:
                    bad = ticket_at_fault(err, owner)
                    if bad is None:
                        raise
                    self._reject(job, bad, str(err))
                    remaining = [t for t in remaining if t.id != bad]
                    continue
                k += 1
                if not sol.has_assignment:
                    break
                ok, remaining = self._commit(job, plan, sol, owner, remaining, obj["players"], match_id, now)
                formed += ok
        except InvalidInput as err:
            # not one ticket's fault: the pool's own config (model, rules) cannot be solved; say so once a minute
            last = self._logged.get(job.pool, -1e9)
            if time.monotonic() - last > 60:
                self._logged[job.pool] = time.monotonic()
                log.error("pool %s: job %s cannot be solved: %s", job.pool, job.claim_id, err)
        finally:
            back = self.store.release(job.pool, job.claim_id, [t.id for t in remaining])
            if back:
                metrics.TICKET_EVENTS.labels(job.pool, "requeued").inc(back)
        return formed

    def _joint(self, job: Job, pool: PoolConfig, remaining: list[Ticket], steps: tuple, exp,
               run_token: str) -> tuple[int, list[Ticket]] | None:
        """Several matches from one joint solve (:meth:`Engine.solve_batch`) when the pool's ``partition``
        asks for it and the job has room for ≥ 2 matches: ``joint`` always, ``auto`` where
        :func:`~mgmatch.solvers.batch.prefer_joint` says the bench measured it better; never while the pool
        runs an A/B experiment (the joint solve is model-free: it would replace the arms' methods). Returns
        (matches committed, tickets left), or None for the one-at-a-time loop (also when a ticket's data
        fails: the loop names and expires it)."""
        players = sum(len(t.players) for t in remaining)
        M = min(job.max_matches, players // pool.match_size)
        if M < 2 or pool.partition == "sequential" or exp is not None:
            return None
        if self.learning is not None and self.learning.get(job.pool) is not None:
            return None  # a learning pool draws each match's policy (mgmatch.app.learning)
        if pool.partition == "auto" and (method_info(pool.method).needs_predictor
                                          or not prefer_joint(pool.match_size, players, M)):
            return None  # auto: only where the bench measured joint ahead (against model-free one-at-a-time)
        plan = plan_for(pool, None)
        now = self.clock()
        try:
            obj, owner = instance_object(pool, remaining, now)
            inst = parse_instance(obj, stored=True)
            if steps:
                inst = relax(inst, job.waited_s, RelaxConfig(steps, "max"))
            sols = self.engine.solve_batch(inst, plan, job.pool, M, seed=seed_of(f"{job.claim_id}-0"),
                                           start=time.perf_counter())
        except InvalidInput:
            return None
        formed = 0
        for k, sol in enumerate(sols):
            match_id = f"{job.pool}.{job.claim_id}-{k}-{run_token}"
            ok, remaining = self._commit(job, plan, sol, owner, remaining, obj["players"], match_id, now)
            formed += ok
        return formed, remaining

    def _commit(self, job: Job, plan, sol, owner: dict[str, str], remaining: list[Ticket],
                players: list[dict[str, Any]], match_id: str, now: float) -> tuple[bool, list[Ticket]]:
        """Commit one solved match with its record (one-at-a-time or one of a joint solve's); returns
        (committed, the tickets not in it)."""
        selected = sorted({owner[pid] for team in sol.teams for pid in team})
        team_of_ticket = {owner[pid]: j for j, team in enumerate(sol.teams) for pid in team}
        result = MatchResult(match_id=match_id, teams=sol.teams, team_of_ticket=team_of_ticket, region=sol.region,
                             method=sol.method, arm=plan.arm, model_version=getattr(sol, "model_version", None),
                             objective=sol.objective, status=sol.status)
        sel = set(selected)
        rest = [t for t in remaining if t.id not in sel]
        allocator = getattr(self.pools[job.pool], "allocator", None)
        if allocator is not None:  # server handoff: where the match is played, before it is committed
            try:
                result.assignment = allocate(allocator, {"match_id": match_id, "pool": job.pool, "teams": sol.teams,
                                                         "region": sol.region})
            except AllocationFailed as err:
                back = self.store.release(job.pool, job.claim_id, selected)  # at their place: the queue's head
                for tid in selected:
                    self.store.set_unmatched_reason(job.pool, tid, f"no game server: the allocator failed: {err}")
                metrics.TICKET_EVENTS.labels(job.pool, "requeued").inc(back)
                log.warning("pool %s: match %s not allocated: %s", job.pool, match_id, err)
                return False, rest
        record = match_record(job.pool, result, players, remaining)
        record.policy, record.propensity = getattr(sol, "policy", None), getattr(sol, "propensity", None)
        accept = getattr(self.pools[job.pool], "accept", None)
        if accept is not None:  # a ready check: proposed now, matched once every player accepts
            done = self.store.propose_match(job.pool, job.claim_id, selected, result, record, now + accept.timeout_s)
        else:
            done = self.store.commit(job.pool, job.claim_id, selected, [], result, record)
        if not done:
            metrics.CLAIM_CONFLICTS.labels(job.pool, "commit").inc()
            return False, rest
        self._record_matched(job.pool, sum(len(team) for team in sol.teams), now)
        method, arm = sol.method or plan.method, plan.arm or metrics.NO_ARM
        metrics.MATCHES.labels(job.pool, method, arm).inc()
        metrics.PLAYERS_MATCHED.labels(job.pool, method, arm).inc(sum(len(team) for team in sol.teams))
        for t in remaining:
            if t.id in sel:
                metrics.TICKET_WAIT.labels(job.pool, arm).observe(max(0.0, now - t.created_at))
        return True, rest


class Matchmaker:
    """The loop of one pool: reap, decide, claim, hand the job on (run it here or publish it)."""

    def __init__(self, pool: PoolConfig, store: Store, runner: JobRunner | None, experiments: Experiments,
                 publish=None, backlog=None, tick_s: float = 0.05, engine: Engine | None = None,
                 reason_after_ticks: int = 20):
        self.pool, self.store, self.runner, self.experiments = pool, store, runner, experiments
        # unmatched reasons: ticks each window ticket has spent unmatched, and the reason last stored
        self.reason_after_ticks = reason_after_ticks
        self._unmatched: dict[str, int] = {}
        self._reasons: dict[str, str] = {}
        # callable(pool, ticket_ids, claim_id, lease_until, job_json) → bool: claims the tickets and publishes
        # the job in one atomic step (False: a ticket was not free, nothing changed); None = claim here
        # and run jobs in this thread
        self.publish = publish
        self.backlog = backlog  # callable(pool) → the pool's jobs waiting or running; None = no backpressure
        self.tick_s = tick_s
        self.shape = PoolShape(pool.teams, pool.sizes)
        self._policies: dict[str | None, Any] = {}
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.last_tick = 0.0
        # candidate sets that formed no match: not retried until the waiting set changes or a while passed
        self._barren: dict[str | None, tuple[frozenset[str], float]] = {}
        self.retry_s = 2.0
        # the reaper runs at most this often (expiries and leases are seconds long; every 50 ms tick
        # would spend Redis calls on nothing)
        self.reap_every_s = 0.25
        self._reaped_at = float("-inf")
        # ticket id → (ticket, its Waiting) for the tickets of the current window: a ticket's data never
        # changes, so each body is read and parsed once, not on every tick
        self._seen: dict[str, tuple[Ticket, Waiting]] = {}
        # open backfills are filled from the queue before new matches form (solved here, in the tick,
        # with the runner's engine or the one given: see mgmatch.app.backfill)
        engine = engine if engine is not None else (runner.engine if runner is not None else None)
        self.backfiller = Backfiller(pool, store, engine) if engine is not None else None
        # run_forever: a store outage backs off (logged once when it starts, once when it ends); any other
        # error of a tick is logged with its traceback at most once every error_log_every_s
        self.outage = Outage(f"matchmaker pool {pool.name}")
        self.error_wait_s = 0.5
        self.error_log_every_s = 60.0
        self._error_logged_at = float("-inf")
        self._errors_unlogged = 0

    def _policy(self, arm: str | None):
        """The dispatch policy of the pool, or of the A/B arm whose tickets ``arm`` groups when that arm
        sets its own ``dispatch`` (``key: player`` experiments only: start-up refuses it elsewhere)."""
        if arm not in self._policies:
            cfg = self.pool.dispatch
            exp = self.experiments.for_pool(self.pool.name)
            if arm is not None and exp is not None and exp.config.key == "player":
                own = next((a.dispatch for a in exp.config.arms if a.name == arm), None)
                cfg = own if own is not None else cfg
            self._policies[arm] = cfg.build(self.pool.max_candidates)
        return self._policies[arm]

    def _reject(self, t: Ticket, reason: str, now: float) -> None:
        """Expire a queued ticket that can never be part of a match of this pool, with the reason."""
        claim_id = uuid.uuid4().hex
        if self.store.claim(self.pool.name, [t.id], claim_id, now + self.pool.lease_s):
            if self.store.expire_ticket(self.pool.name, t.id, claim_id, reason):
                metrics.TICKET_EVENTS.labels(self.pool.name, "rejected").inc()
                log.warning("pool %s: ticket %s expired: %s", self.pool.name, t.id, reason)

    def window(self, now: float) -> list[tuple[Ticket, Waiting]]:
        """The pool's ``window`` longest-waiting queued tickets (live ids, cached bodies): what one
        tick reads no longer grows with the queue."""
        pool = self.pool.name
        ids = self.store.queued_ids(pool, self.pool.window)
        missing = [tid for tid in ids if tid not in self._seen]
        if missing:
            for tid, t in zip(missing, self.store.get_many(pool, missing), strict=True):
                if t is None:
                    continue
                why = ticket_problem(self.pool, t)
                if why is not None:
                    self._reject(t, why, now)
                    continue
                self._seen[tid] = (t, waiting_of(t))
        live = set(ids)
        for tid in [k for k in self._seen if k not in live]:
            del self._seen[tid]
        return [self._seen[tid] for tid in ids if tid in self._seen and self._seen[tid][0].expires_at > now]

    def backlogged(self) -> bool:
        """With solver workers: are ``max_inflight_jobs`` of this pool's jobs already waiting or running?
        Then the tickets stay queued (later candidates see them) instead of waiting in a job whose
        lease may run out."""
        return self.backlog is not None and self.backlog(self.pool.name) >= self.pool.max_inflight_jobs

    def tick(self, now: float | None = None) -> int:
        """One round; returns the number of matches formed (or jobs published)."""
        now = time.time() if now is None else now
        self.last_tick = now
        if abs(now - self._reaped_at) >= self.reap_every_s:
            self._reaped_at = now
            expired, released = self.store.reap(self.pool.name, now)
            if expired:
                metrics.TICKET_EVENTS.labels(self.pool.name, "expired").inc(expired)
            if released:
                metrics.TICKET_EVENTS.labels(self.pool.name, "requeued").inc(released)
            if self.backfiller is not None:
                self.backfiller.reap(now)
            if getattr(self.pool, "accept", None) is not None and self.store.reap_checks(self.pool.name, now):
                metrics.TICKET_EVENTS.labels(self.pool.name, "ready_check_ended").inc()
        metrics.QUEUE_DEPTH.labels(self.pool.name).set(self.store.queue_depth(self.pool.name))
        done = 0
        if self.backfiller is not None:  # backfills first: the tickets they take are in no match of this tick
            # (the window is read only when a backfill is open)
            done += bool(self.backfiller.step(lambda: [t for t, _ in self.window(now)], now))
        if self.backlogged():
            return done
        groups: dict[str | None, list[tuple[Ticket, Waiting]]] = {}
        exp = self.experiments.for_pool(self.pool.name)
        split = exp is not None and exp.config.key == "player"
        for t, w in self.window(now):
            groups.setdefault(t.arm if split else None, []).append((t, w))
        self._explain(groups, now)
        for arm, group in groups.items():
            ids = frozenset(t.id for t, _ in group)
            barren = self._barren.get(arm)
            if barren is not None and barren[0] == ids and now - barren[1] < self.retry_s:
                continue
            decision = self._policy(arm).decide([w for _, w in group], self.shape, now)
            if not decision.solve or not decision.tickets:
                continue
            job = Job(uuid.uuid4().hex, self.pool.name, list(decision.tickets), decision.max_matches,
                      [s.to_json() for s in decision.relax_steps], decision.waited_s, arm,
                      now + self.pool.lease_s)
            if self.publish is not None:
                if self.publish(self.pool.name, job.tickets, job.claim_id, job.lease_until, job.to_json()):
                    done += 1
                else:
                    metrics.CLAIM_CONFLICTS.labels(self.pool.name, "claim").inc()
                continue
            if not self.store.claim(self.pool.name, job.tickets, job.claim_id, job.lease_until):
                metrics.CLAIM_CONFLICTS.labels(self.pool.name, "claim").inc()
                continue
            formed = self.runner.run(job)
            done += formed
            if formed:
                self._barren.pop(arm, None)
            else:
                self._barren[arm] = (ids, now)
        return done

    #: at most this many tickets are diagnosed per tick (the rest on later ticks)
    max_diagnoses_per_tick = 32

    def _explain(self, groups: dict[str | None, list[tuple[Ticket, Waiting]]], now: float) -> None:
        """Count one more unmatched tick for every ticket of the window; a ticket at a multiple of
        ``reason_after_ticks`` gets its reason diagnosed against its group and stored when it changed."""
        if self.reason_after_ticks <= 0:
            return
        live: set[str] = set()
        due: list[tuple[Ticket, list[Ticket], str | None]] = []
        for arm, group in groups.items():
            tickets = [t for t, _ in group]
            for t in tickets:
                live.add(t.id)
                n = self._unmatched.get(t.id, 0) + 1
                self._unmatched[t.id] = n
                if n % self.reason_after_ticks == 0:
                    due.append((t, tickets, arm))
        for tid in [k for k in self._unmatched if k not in live]:
            del self._unmatched[tid]
            self._reasons.pop(tid, None)
        candidates: dict[str | None, set[str] | None] = {}
        for t, tickets, arm in due[: self.max_diagnoses_per_tick]:
            if arm not in candidates:  # what a solve would consider now (the policy's selection), once per group
                select = getattr(self._policy(arm), "select", None)
                candidates[arm] = (None if select is None else
                                   {w.ticket_id for w in select([w for _, w in groups[arm]], now)})
            try:
                barren = self._barren.get(arm)
                why = diagnose(self.pool, t, [o for o in tickets if o.id != t.id], candidates[arm],
                               solved_empty=barren is not None and t.id in barren[0])
            except (KeyError, TypeError, ValueError) as err:  # a malformed stored field: say so, keep the loop going
                why = f"cannot diagnose: {type(err).__name__}: {err}"
            if self._reasons.get(t.id) != why and self.store.set_unmatched_reason(self.pool.name, t.id, why):
                self._reasons[t.id] = why
        for t, _, _ in due[self.max_diagnoses_per_tick:]:  # not diagnosed this tick: try again on the next one
            self._unmatched[t.id] -= 1

    def step(self) -> float:
        """One iteration of :meth:`run_forever`: a tick; returns how long to wait before the next one (0
        after a tick that formed something). Never raises: a store outage backs off (``self.outage``: 50 ms
        doubling to 2 s, one warning when it starts, one line when it ends) and matching resumes once the
        store answers; the store recovers claims of an interrupted tick by their lease. Any other error is
        logged with its traceback at most once every ``error_log_every_s`` and retried after
        ``error_wait_s``."""
        try:
            formed = self.tick()
        except OUTAGE_ERRORS as err:
            return self.outage.failed(err)
        except Exception:  # a bug or bad data: keep the loop alive, without a traceback per tick
            now = time.monotonic()
            if now - self._error_logged_at >= self.error_log_every_s:
                more = (f" ({self._errors_unlogged} more failed ticks were not logged)"
                        if self._errors_unlogged else "")
                log.exception("pool %s: tick failed%s; the same is logged at most once every %g s",
                              self.pool.name, more, self.error_log_every_s)
                self._error_logged_at, self._errors_unlogged = now, 0
            else:
                self._errors_unlogged += 1
            return max(self.tick_s, self.error_wait_s)
        self.outage.ok()
        return 0.0 if formed else self.tick_s

    def run_forever(self) -> None:
        metrics.WORKER_UP.labels(f"matchmaker-{self.pool.name}").set(1)
        try:
            while not self._stop.is_set():
                wait = self.step()
                if wait > 0:
                    self._stop.wait(wait)
        finally:
            metrics.WORKER_UP.labels(f"matchmaker-{self.pool.name}").set(0)

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run_forever, name=f"matchmaker-{self.pool.name}", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()
