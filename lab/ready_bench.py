"""``mgmatch bench ready``: ready-check throughput with a share of declines.

Solo tickets of a built-in pool are queued; the pool gets a ready check (``accept``). Matchmaker ticks
run in this process; after each, every newly proposed match is answered by its players through the
store (:meth:`~mgmatch.app.store.ReadyCheckStore.answer_check`, what the accept/decline routes call):
each player declines with probability ``decline_share`` (seeded), the others accept, in a random
order. Tickets that were requeued by a decline are matched again later. The run ends when fewer
players than one match are queued and no check is pending.

Reported: matches confirmed per second (first tick → last confirmation; the solves are part of it),
checks declined, requeued tickets that were later matched, and the checks that nothing was lost (every ticket
ends matched, declined, or queued as a leftover smaller than one match) and no player is in two matches.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

import numpy as np

from mgmatch.core.errors import InvalidInput


@dataclass
class ReadyBenchResult:
    pool: str
    store: str
    tickets: int
    decline_share: float
    seed: int
    checks: int = 0
    confirmed: int = 0
    declined_checks: int = 0
    requeued_then_matched: int = 0
    leftover: int = 0
    lost: int = 0
    double_booked: int = 0
    elapsed_s: float = 0.0
    matches_per_s: float = 0.0
    players_per_s: float = 0.0
    by_status: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.double_booked == 0

    def markdown(self) -> str:
        rows = [("ready checks proposed", self.checks), ("confirmed (everyone accepted)", self.confirmed),
                ("declined checks (the first decline ends one)", self.declined_checks),
                ("requeued tickets matched later", self.requeued_then_matched),
                ("matches confirmed per second", self.matches_per_s),
                ("players confirmed per second", self.players_per_s),
                ("final ticket states", self.by_status), ("leftover (< one match)", self.leftover),
                ("lost", self.lost), ("players in two matches", self.double_booked), ("elapsed (s)", self.elapsed_s)]
        head = (f"pool={self.pool} store={self.store} tickets={self.tickets} decline_share={self.decline_share} "
                f"seed={self.seed}\n\n| metric | value |\n|---|---|\n")
        return head + "".join(f"| {k} | {v} |\n" for k, v in rows)


def run_ready_bench(pool: str = "3v3", store: str = "memory", tickets: int = 600, decline_share: float = 0.1,
                    seed: int = 0, redis_url: str = "redis://127.0.0.1:6379/0",
                    max_s: float = 300.0) -> ReadyBenchResult:
    """Run it (see the module doc). InvalidInput names a bad argument; StoreUnavailable an unreachable Redis."""
    from pydantic import ValidationError

    from mgmatch.app.config import AcceptConfig
    from mgmatch.app.matchmaker import Matchmaker
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.service import ticket_out
    from mgmatch.app.settings import Settings
    from mgmatch.app.store import StoreUnavailable, Ticket, new_ticket_id

    from .chaos import make_tickets
    from .chaos_checks import check_matches

    if store not in ("memory", "redis"):
        raise InvalidInput("store", f"expected memory or redis, got {store!r}")
    if not 6 <= tickets <= 100_000:
        raise InvalidInput("tickets", f"must be in 6..100000, got {tickets}")
    if not 0 <= decline_share < 1:
        raise InvalidInput("decline_share", f"must be in [0, 1), got {decline_share}")
    prefix = f"rcbench{uuid.uuid4().hex[:8]}"
    kw = {"store": store, "embedded_workers": False}
    if store == "redis":
        kw.update(redis_url=redis_url, key_prefix=prefix)
    try:
        settings = Settings(**kw)
    except ValidationError as err:
        raise InvalidInput("redis_url", str(err.errors()[0].get("msg", "invalid value"))) from None
    rt = Runtime.build(settings)
    if pool not in rt.pools:
        rt.stop()
        raise InvalidInput("pool", f"expected one of {', '.join(rt.pools)}")
    if store == "redis" and not rt.store.ping():
        rt.stop()
        raise StoreUnavailable(f"cannot reach Redis at {redis_url}")
    cfg = rt.pools[pool].model_copy(update={"accept": AcceptConfig(timeout_s=60)})
    rt.pools[pool] = rt.runner.pools[pool] = cfg
    out = ReadyBenchResult(pool, store, tickets, decline_share, seed)
    rng = np.random.default_rng(seed)
    try:
        now = time.time()
        bodies = make_tickets(pool, tickets, seed, party_share=0.0)
        items = [(Ticket(new_ticket_id(pool), pool, b["players"], now + k * 1e-4, now + 3600), None)
                 for k, b in enumerate(bodies)]
        for k in range(0, len(items), 500):
            rt.store.create_many(items[k:k + 500])
        ids = [t.id for t, _ in items]
        rt.warm()
        mm = Matchmaker(cfg, rt.store, rt.runner, rt.experiments)
        answered: set[str] = set()
        requeued: set[str] = set()
        t0 = time.perf_counter()
        last = t0
        while time.perf_counter() - t0 < max_s:
            mm.tick()
            views = [t for k in range(0, len(ids), 500) for t in rt.store.get_many(pool, ids[k:k + 500])]
            fresh: dict[str, list] = {}
            for t in views:
                r = t.result or {}
                if t.status == "proposed" and "accept_deadline" in r and r["match_id"] not in answered:
                    fresh.setdefault(r["match_id"], []).append(t)
            for mid, ts in fresh.items():
                answered.add(mid)
                out.checks += 1
                players = [p["id"] for t in ts for p in t.players]
                order = rng.permutation(len(players))
                decliners = {players[i] for i in range(len(players)) if rng.random() < decline_share}
                state, pid = "pending", None
                for i in order:  # answers stop once the check ended (the first decline ends it)
                    pid = players[i]
                    state = rt.store.answer_check(pool, mid, pid, pid not in decliners)
                    if state != "pending":
                        break
                if state == "matched":
                    out.confirmed += 1
                    last = time.perf_counter()
                elif state == "declined":
                    out.declined_checks += 1
                    requeued.update(t.id for t in ts if all(p["id"] != pid for p in t.players))
            queued = sum(len(t.players) for t in views if t.status == "queued")
            if not fresh and queued < cfg.match_size and not any(t.status == "proposed" for t in views):
                break
        out.elapsed_s = round(last - t0, 3)
        final = [t for k in range(0, len(ids), 500) for t in rt.store.get_many(pool, ids[k:k + 500])]
        for t in final:
            out.by_status[t.status] = out.by_status.get(t.status, 0) + 1
        out.leftover = out.by_status.get("queued", 0)
        out.lost = sum(1 for t in final if t.status not in ("matched", "declined", "queued")) + (
            out.leftover if out.leftover >= cfg.match_size else 0)
        out.requeued_then_matched = sum(1 for t in final if t.id in requeued and t.status == "matched")
        out.double_booked = len(check_matches([ticket_out(t) for t in final], cfg.sizes).double_booked)
        if out.elapsed_s > 0:
            out.matches_per_s = round(out.confirmed / out.elapsed_s, 1)
            out.players_per_s = round(out.confirmed * cfg.match_size / out.elapsed_s, 1)
    finally:
        if store == "redis":
            for key in rt.store.r.scan_iter(f"{prefix}:*", count=1000):
                rt.store.r.delete(key)
        rt.stop()
    return out
