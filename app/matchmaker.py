"""The matchmaker loop of one pool, and the solve job it hands to a solver.

Every tick: expire and recover (reaper), read the queue, ask the pool's dispatch policy
(:mod:`mgmatch.solvers.dispatch`) whether and on which tickets to solve, claim those tickets
atomically (all or none), then run the job: build the instance (parties kept whole, waiting-time
relaxations applied), solve up to ``max_matches`` matches one after the other, commit each match,
return the rest to the queue. Embedded, the job runs in the matchmaker's thread; in production
it goes on the pool's jobs stream to a solver worker (:mod:`mgmatch.app.workers`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.solvers.dispatch import PoolShape, Waiting
from mgmatch.solvers.relax import RelaxConfig, parse_step, relax

from . import metrics
from .ab import Experiments, plan_for
from .config import PoolConfig
from .engine import Engine, seed_of
from .store import MatchResult, Store, Ticket

log = logging.getLogger("mgmatch.matchmaker")


def waiting_of(t: Ticket) -> Waiting:
    from mgmatch.core.instance import Player

    return Waiting(t.id, tuple(Player.model_validate(p) for p in t.players), t.created_at, t.pool)


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


def build_instance(pool: PoolConfig, tickets: list[Ticket], now: float) -> tuple[Any, dict[str, str], list[str]]:
    """Instance from tickets: player → ticket map, and tickets skipped (a player id seen twice)."""
    players, owner, skipped = [], {}, []
    parties = False
    for t in tickets:
        if any(p["id"] in owner for p in t.players):
            skipped.append(t.id)
            continue
        for p in t.players:
            q = {k: v for k, v in p.items() if k != "party"}
            q["waited_s"] = max(0.0, now - t.created_at)
            if len(t.players) > 1:
                q["party"] = t.id
                parties = True
            players.append(q)
            owner[p["id"]] = t.id
    rules = list(pool.rules)
    if parties and not any(r.get("kind") == "party_together" for r in rules):
        rules.append({"kind": "party_together"})
    obj = {"teams": pool.teams, "players": players, "rules": rules}
    if pool.team_sizes is not None:
        obj["team_sizes"] = list(pool.team_sizes)
    else:
        obj["team_size"] = pool.team_size
    if pool.engagement_model:
        obj["engagement_model"] = pool.engagement_model
    return parse_instance(obj), owner, skipped


class JobRunner:
    """Runs claimed jobs: solve, commit, release. Shared by the embedded loop and solver workers."""

    def __init__(self, pools: dict[str, PoolConfig], store: Store, engine: Engine, experiments: Experiments):
        self.pools, self.store, self.engine, self.experiments = pools, store, engine, experiments

    def run(self, job: Job) -> int:
        """Returns the number of matches committed. Every claimed ticket ends matched or queued."""
        pool = self.pools[job.pool]
        remaining: list[Ticket] = []
        for tid in job.tickets:
            t = self.store.get(tid)
            if t is not None and t.status == "proposed" and t.match_id == job.claim_id:
                remaining.append(t)
        formed = 0
        run_token = uuid.uuid4().hex[:8]
        try:
            steps = tuple(parse_step(s, f"relax_steps[{k}]") for k, s in enumerate(job.relax_steps))
            exp = self.experiments.for_pool(job.pool)
            for k in range(max(1, job.max_matches)):
                if sum(len(t.players) for t in remaining) < pool.match_size:
                    break
                now = time.time()
                inst, owner, _ = build_instance(pool, remaining, now)
                if steps:
                    inst = relax(inst, job.waited_s, RelaxConfig(steps, "max"))
                # the key is deterministic (arm and seed); the id also carries this run's token. A takeover
                # fences the claim (new id), so after it only the new runner commits; matches the slow
                # runner committed before it stand, and the token keeps their ids apart in any case
                key = f"{job.claim_id}-{k}"
                match_id = f"{key}-{run_token}"
                arm_cfg = None
                if exp is not None:
                    if exp.config.key == "match":
                        arm_cfg = exp.arm_for(key)
                    elif job.arm is not None:
                        arm_cfg = next((a for a in exp.config.arms if a.name == job.arm), None)
                plan = plan_for(pool, arm_cfg)
                t0 = time.perf_counter()
                sol = self.engine.solve(inst, plan, job.pool, seed=seed_of(key), start=t0)
                if not sol.has_assignment:
                    break
                selected = sorted({owner[pid] for team in sol.teams for pid in team})
                team_of_ticket = {owner[pid]: j for j, team in enumerate(sol.teams) for pid in team}
                result = MatchResult(match_id=match_id, teams=sol.teams, team_of_ticket=team_of_ticket,
                                     region=sol.region, method=sol.method, arm=plan.arm,
                                     model_version=getattr(sol, "model_version", None), objective=sol.objective,
                                     status=sol.status)
                if not self.store.commit(job.pool, job.claim_id, selected, [], result):
                    metrics.CLAIM_CONFLICTS.labels(job.pool, "commit").inc()
                    remaining = [t for t in remaining if t.id not in set(selected)]
                    continue
                formed += 1
                method = sol.method or plan.method
                arm = plan.arm or metrics.NO_ARM
                metrics.MATCHES.labels(job.pool, method, arm).inc()
                metrics.PLAYERS_MATCHED.labels(job.pool, method, arm).inc(sum(len(team) for team in sol.teams))
                by_id = {t.id: t for t in remaining}
                for tid in selected:
                    metrics.TICKET_WAIT.labels(job.pool, arm).observe(max(0.0, now - by_id[tid].created_at))
                sel = set(selected)
                remaining = [t for t in remaining if t.id not in sel]
        except InvalidInput as err:
            log.error("pool %s: job %s cannot be solved: %s", job.pool, job.claim_id, err)
        finally:
            back = self.store.release(job.pool, job.claim_id, [t.id for t in remaining])
            if back:
                metrics.TICKET_EVENTS.labels(job.pool, "requeued").inc(back)
        return formed


class Matchmaker:
    """The loop of one pool: reap, decide, claim, hand the job on (run it here or publish it)."""

    def __init__(self, pool: PoolConfig, store: Store, runner: JobRunner | None, experiments: Experiments,
                 publish=None, tick_s: float = 0.05):
        self.pool, self.store, self.runner, self.experiments = pool, store, runner, experiments
        self.publish = publish  # callable(pool, job_json) → None; None = run jobs in this thread
        self.tick_s = tick_s
        self.shape = PoolShape(pool.teams, pool.sizes)
        self._policies: dict[str | None, Any] = {}
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.last_tick = 0.0
        # candidate sets that formed no match: not retried until the waiting set changes or a while passed
        self._barren: dict[str | None, tuple[frozenset[str], float]] = {}
        self.retry_s = 2.0

    def _policy(self, arm: str | None):
        if arm not in self._policies:
            self._policies[arm] = self.pool.dispatch.build(self.pool.max_candidates)
        return self._policies[arm]

    def tick(self, now: float | None = None) -> int:
        """One round; returns the number of matches formed (or jobs published)."""
        now = time.time() if now is None else now
        self.last_tick = now
        expired, released = self.store.reap(self.pool.name, now)
        if expired:
            metrics.TICKET_EVENTS.labels(self.pool.name, "expired").inc(expired)
        if released:
            metrics.TICKET_EVENTS.labels(self.pool.name, "requeued").inc(released)
        tickets = self.store.queued(self.pool.name, limit=2000)
        metrics.QUEUE_DEPTH.labels(self.pool.name).set(self.store.queue_depth(self.pool.name))
        groups: dict[str | None, list[Ticket]] = {}
        exp = self.experiments.for_pool(self.pool.name)
        split = exp is not None and exp.config.key == "player"
        for t in tickets:
            groups.setdefault(t.arm if split else None, []).append(t)
        done = 0
        for arm, group in groups.items():
            ids = frozenset(t.id for t in group)
            barren = self._barren.get(arm)
            if barren is not None and barren[0] == ids and now - barren[1] < self.retry_s:
                continue
            decision = self._policy(arm).decide([waiting_of(t) for t in group], self.shape, now)
            if not decision.solve or not decision.tickets:
                continue
            job = Job(uuid.uuid4().hex, self.pool.name, list(decision.tickets), decision.max_matches,
                      [s.to_json() for s in decision.relax_steps], decision.waited_s, arm,
                      now + self.pool.lease_s)
            if not self.store.claim(self.pool.name, job.tickets, job.claim_id, job.lease_until):
                metrics.CLAIM_CONFLICTS.labels(self.pool.name, "claim").inc()
                continue
            if self.publish is not None:
                self.publish(self.pool.name, job.to_json())
                done += 1
                continue
            formed = self.runner.run(job)
            done += formed
            if formed:
                self._barren.pop(arm, None)
            else:
                self._barren[arm] = (ids, now)
        return done

    def run_forever(self) -> None:
        metrics.WORKER_UP.labels(f"matchmaker-{self.pool.name}").set(1)
        try:
            while not self._stop.is_set():
                try:
                    formed = self.tick()
                except Exception:  # keep the loop alive; the store recovers claims by lease
                    log.exception("pool %s: tick failed", self.pool.name)
                    formed = 0
                if not formed:
                    self._stop.wait(self.tick_s)
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
