"""``mgmatch bench ready --kill-every-s S``: ready checks while matchmaker and solver processes are killed.

A redis-server of the run's own, a ``mgmatch worker matchmaker`` process and ``--solvers`` ``mgmatch worker
solver`` processes, the pool given a ready check (``accept``). Solo tickets are queued in the store. This
process plays the players: each proposed check gets one answer per round (about every 50 ms), so a check
stays open for several rounds while its players answer one after the other; each player declines with
probability ``decline_share`` (seeded), and the first decline ends the check. Every ``kill_every_s``
seconds after the last one is back up, one worker process, drawn with the seed, gets SIGKILL and is started
again at once; the run counts the kills that hit while a check was open, and those while a solve's claim
was open.

Checked at the end (the run ends when no ticket is claimed or in a check and fewer players than one
match are queued, or after ``max_s``):

- **nothing lost**: every ticket ends ``matched``, ``declined``, or ``queued`` as a leftover smaller than one
  match; in particular every player who accepted a check ends in a match or back in the queue;
- **at its head**: a ticket back in the queue keeps its creation time, and the queue is in creation order;
- **no one twice**: no player is in two matches (``check_matches``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mgmatch.core.errors import InvalidInput

_UP = re.compile(rb"worker \S+ up")


@dataclass
class ReadyKillsResult:
    pool: str
    tickets: int
    decline_share: float
    seed: int
    kill_every_s: float
    solvers: int
    checks: int = 0
    confirmed: int = 0
    declined_checks: int = 0
    kills: int = 0
    kills_mid_check: int = 0
    kills_mid_claim: int = 0
    kills_by_process: dict[str, int] = field(default_factory=dict)
    accepting_players: int = 0
    accepting_lost: int = 0
    requeued_then_matched: int = 0
    leftover: int = 0
    lost: int = 0
    not_at_head: int = 0
    double_booked: int = 0
    finished: bool = False
    elapsed_s: float = 0.0
    by_status: dict[str, int] = field(default_factory=dict)
    processes: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.finished and self.lost == 0 and self.accepting_lost == 0 and self.not_at_head == 0 \
            and self.double_booked == 0

    def markdown(self) -> str:
        rows = [("ready checks proposed", self.checks), ("confirmed (everyone accepted)", self.confirmed),
                ("declined checks", self.declined_checks), ("SIGKILLs", f"{self.kills} {self.kills_by_process}"),
                ("… while a check was open", self.kills_mid_check),
                ("… while a solve's claim was open", self.kills_mid_claim),
                ("players whose last answer was an accept", self.accepting_players),
                ("… neither matched nor queued (lost)", self.accepting_lost),
                ("requeued tickets matched later", self.requeued_then_matched),
                ("final ticket states", self.by_status), ("leftover (< one match)", self.leftover),
                ("lost", self.lost), ("queued out of creation order", self.not_at_head),
                ("players in two matches", self.double_booked), ("settled before max-s", self.finished),
                ("elapsed (s)", self.elapsed_s)]
        head = (f"pool={self.pool} tickets={self.tickets} decline_share={self.decline_share} seed={self.seed} "
                f"kill_every_s={self.kill_every_s} solvers={self.solvers}\n\n| metric | value |\n|---|---|\n")
        return head + "".join(f"| {k} | {v} |\n" for k, v in rows)


def run_ready_kills(pool: str = "3v3", tickets: int = 300, decline_share: float = 0.1, seed: int = 0,
                    kill_every_s: float = 2.0, solvers: int = 2, max_s: float = 300.0,
                    min_idle_ms: int = 2000, say=None) -> ReadyKillsResult:
    """Run it (see the module doc). InvalidInput names a bad argument; ChaosError a process that did not start."""
    import yaml

    from mgmatch.app.config import DEFAULT_CONFIG
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.service import ticket_out
    from mgmatch.app.settings import Settings
    from mgmatch.app.store import Ticket, new_ticket_id

    from .chaos import ChaosError, Procs, RedisServer, make_tickets, service_env
    from .chaos_checks import check_matches

    say = say or (lambda _m: None)
    if not 6 <= tickets <= 20_000:
        raise InvalidInput("tickets", f"must be in 6..20000, got {tickets}")
    if not 0 <= decline_share < 1:
        raise InvalidInput("decline_share", f"must be in [0, 1), got {decline_share}")
    if not 0.2 <= kill_every_s <= 3600:
        raise InvalidInput("kill_every_s", f"must be in [0.2, 3600], got {kill_every_s}")
    if not 1 <= solvers <= 8:
        raise InvalidInput("solvers", f"must be in 1..8, got {solvers}")
    base = next((p for p in DEFAULT_CONFIG["pools"] if p["name"] == pool), None)
    if base is None:
        raise InvalidInput("pool", f"expected a built-in pool: {', '.join(p['name'] for p in DEFAULT_CONFIG['pools'])}")
    binary = shutil.which("redis-server")
    if binary is None:
        raise ChaosError("redis-server not found on PATH (the run starts its own)")
    out = ReadyKillsResult(pool, tickets, decline_share, seed, kill_every_s, solvers)
    rng = np.random.default_rng(seed)
    work = Path(tempfile.mkdtemp(prefix="mgmatch-ready-kills-"))
    # a short lease: a claim whose solver was killed returns to the queue within seconds
    cfg_pool = {**base, "accept": {"timeout_s": 60}, "lease_s": 5}
    (work / "config.yaml").write_text(yaml.safe_dump({"pools": [cfg_pool]}))
    redis = RedisServer(binary, work, "everysec")
    prefix = f"rk{uuid.uuid4().hex[:8]}"
    procs: Procs | None = None
    rt = None
    try:
        redis.start()
        redis.wait_ready()
        env = {**service_env(redis.url, prefix), "MGMATCH_CONFIG": str(work / "config.yaml")}
        procs = Procs(work, env)
        names = ["matchmaker", *(f"solver-{k}" for k in range(solvers))]
        procs.start("matchmaker", ["worker", "matchmaker"])
        for k in range(solvers):
            procs.start(f"solver-{k}", ["worker", "solver", "--local-predictor", "--min-idle-ms", str(min_idle_ms)])
        deadline = time.monotonic() + 120
        for name in names:
            procs.wait_worker_up(name, deadline)
        rt = Runtime.build(Settings(config=work / "config.yaml", store="redis", redis_url=redis.url,
                                    key_prefix=prefix, embedded_workers=False))
        match_size = rt.pools[pool].match_size
        now = time.time()
        bodies = make_tickets(pool, tickets, seed, party_share=0.0)
        items = [(Ticket(new_ticket_id(pool), pool, b["players"], now + k * 1e-4, now + 3600), None)
                 for k, b in enumerate(bodies)]
        for k in range(0, len(items), 500):
            rt.store.create_many(items[k:k + 500])
        ids = [t.id for t, _ in items]
        # as the store keeps it (its clock): a ticket back in the queue must still have it
        created = {t.id: t.created_at for k in range(0, len(ids), 500) for t in rt.store.get_many(pool, ids[k:k + 500])}
        say(f"{len(ids)} tickets queued; workers {', '.join(names)} up; a SIGKILL every {kill_every_s:g} s")
        plans: dict[str, list[tuple[str, bool]]] = {}  # open check → its answers still to send (player, accept)
        last_answer: dict[str, bool] = {}  # player → their last answer (a player may answer several checks)
        requeued: set[str] = set()
        t0 = time.monotonic()
        next_kill = t0 + kill_every_s
        restarting: tuple[str, int] | None = None  # the process killed last and its log's size then
        while time.monotonic() - t0 < max_s:
            views = [t for k in range(0, len(ids), 500) for t in rt.store.get_many(pool, ids[k:k + 500])]
            checks: dict[str, list] = {}
            claimed = False
            for t in views:
                r = t.result or {}
                if t.status == "proposed" and "accept_deadline" in r:
                    checks.setdefault(r["match_id"], []).append(t)
                elif t.status == "proposed":
                    claimed = True
            if restarting is not None and _UP.search(procs.log(restarting[0]).read_bytes()[restarting[1]:]):
                restarting = None  # back up: the next kill is due kill_every_s from now
                next_kill = time.monotonic() + kill_every_s
            if restarting is None and time.monotonic() >= next_kill:
                victim = names[int(rng.integers(len(names)))]
                procs.kill(victim)
                restarting = (victim, procs.log(victim).stat().st_size)
                procs.start(victim)
                out.kills += 1
                out.kills_by_process[victim] = out.kills_by_process.get(victim, 0) + 1
                out.kills_mid_check += bool(checks)
                out.kills_mid_claim += claimed
            for mid, ts in checks.items():
                if mid not in plans:
                    out.checks += 1
                    # every player of the match (the teams), not only those of the tickets read so far: the
                    # tickets are read in chunks while solvers propose
                    players = [pid for team in ts[0].result["teams"] for pid in team]
                    plans[mid] = [(players[i], bool(rng.random() >= decline_share))
                                  for i in rng.permutation(len(players))]
                if not plans[mid]:
                    continue
                pid, yes = plans[mid].pop(0)
                state = rt.store.answer_check(pool, mid, pid, yes)
                if state in ("pending", "matched", "declined"):  # counted by the check
                    last_answer[pid] = yes
                if state == "matched":
                    out.confirmed += 1
                    plans[mid] = []
                elif state in ("declined", "expired"):
                    out.declined_checks += state == "declined"
                    requeued.update(t.id for t in ts if all(p["id"] != pid for p in t.players))
                    plans[mid] = []
            queued = sum(len(t.players) for t in views if t.status == "queued")
            if not checks and not claimed and queued < match_size and restarting is None:
                out.finished = True
                break
            time.sleep(0.05)
        out.elapsed_s = round(time.monotonic() - t0, 2)
        final = [t for k in range(0, len(ids), 500) for t in rt.store.get_many(pool, ids[k:k + 500])]
        for t in final:
            out.by_status[t.status] = out.by_status.get(t.status, 0) + 1
        out.leftover = out.by_status.get("queued", 0)
        out.lost = sum(1 for t in final if t.status not in ("matched", "declined", "queued")) + (
            out.leftover if out.leftover >= match_size else 0)
        status_of = {p["id"]: t.status for t in final for p in t.players}
        accepted = [pid for pid, yes in last_answer.items() if yes]
        out.accepting_players = len(accepted)
        out.accepting_lost = sum(1 for pid in accepted if status_of.get(pid) not in ("matched", "queued"))
        out.requeued_then_matched = sum(1 for t in final if t.id in requeued and t.status == "matched")
        queue = rt.store.queued_ids(pool, 100_000)
        out.not_at_head = sum(1 for t in final if abs(t.created_at - created[t.id]) > 1e-3) + sum(
            1 for a, b in zip(queue, queue[1:], strict=False) if created.get(a, 0) > created.get(b, 0))
        out.double_booked = len(check_matches([ticket_out(t) for t in final], rt.pools[pool].sizes).double_booked)
        out.processes = procs.summary()
    finally:
        if rt is not None:
            rt.stop()
        if procs is not None:
            procs.stop_all()
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out
