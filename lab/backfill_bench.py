"""``mgmatch bench backfill``: how fast open backfills are filled from a queue, tick by tick.

Queues ``tickets`` solo tickets and opens ``backfills`` backfills (running matches missing one or
two players, :func:`mgmatch.lab.chaos.make_backfills`) in a built-in pool, then runs that pool's
matchmaker tick by tick (in this process, the pool's configured solver) until no backfill is open
or a tick fills nothing. Reports the ticks each backfill took (1 = filled by the first tick after
it was opened with fitting tickets waiting), the wall time of one backfill's solve and of a tick,
and checks that no player is in a backfill and a new match at once.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from pydantic import ValidationError

from mgmatch.core.errors import InvalidInput

from .chaos import make_backfills, make_tickets
from .chaos_checks import percentile


@dataclass
class BackfillBenchResult:
    pool: str
    store: str
    tickets: int
    backfills: int
    seed: int
    filled: int = 0
    ticks_to_fill: list[int] = field(default_factory=list)   # per filled backfill
    tick_ms: list[float] = field(default_factory=list)
    fill_ms: list[float] = field(default_factory=list)        # one backfill's solve + atomic fill
    matches: int = 0
    double_booked: int = 0

    def to_json(self) -> dict:
        return {"pool": self.pool, "store": self.store, "tickets": self.tickets, "backfills": self.backfills,
                "seed": self.seed, "filled": self.filled, "filled_in_first_tick": sum(t == 1 for t in self.ticks_to_fill),
                "ticks_to_fill_max": max(self.ticks_to_fill, default=None), "ticks": len(self.tick_ms),
                "fill_ms_p50": percentile(self.fill_ms, 50), "fill_ms_p99": percentile(self.fill_ms, 99),
                "tick_ms_p50": percentile(self.tick_ms, 50), "tick_ms_max": round(max(self.tick_ms, default=0), 3),
                "new_matches": self.matches, "double_booked": self.double_booked}

    def markdown(self) -> str:
        j = self.to_json()
        rows = [("backfills filled", f"{j['filled']} / {self.backfills}"),
                ("filled by the first tick", j["filled_in_first_tick"]), ("ticks to fill, max", j["ticks_to_fill_max"]),
                ("one fill (solve + atomic fill), p50 / p99 ms", f"{j['fill_ms_p50']} / {j['fill_ms_p99']}"),
                ("tick, p50 / max ms", f"{j['tick_ms_p50']} / {j['tick_ms_max']}"),
                ("new matches formed meanwhile", self.matches), ("double-booked players", self.double_booked)]
        head = (f"pool={self.pool} store={self.store} tickets={self.tickets} backfills={self.backfills} "
                f"seed={self.seed}\n\n| metric | value |\n|---|---|\n")
        return head + "".join(f"| {k} | {v} |\n" for k, v in rows)


def run_backfill_bench(pool: str, store: str, tickets: int, backfills: int, seed: int,
                       redis_url: str | None = None) -> BackfillBenchResult:
    """Run it (see the module doc). InvalidInput names a bad argument."""
    from mgmatch.app.matchmaker import Matchmaker
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.service import BackfillIn, prepare_backfill
    from mgmatch.app.settings import Settings
    from mgmatch.app.store import StoreUnavailable, Ticket, new_ticket_id

    if store not in ("memory", "redis"):
        raise InvalidInput("store", f"expected memory or redis, got {store!r}")
    if not 1 <= tickets <= 100_000:
        raise InvalidInput("tickets", f"must be in 1..100000, got {tickets}")
    if not 1 <= backfills <= 10_000:
        raise InvalidInput("backfills", f"must be in 1..10000, got {backfills}")
    prefix = f"bfbench{uuid.uuid4().hex[:8]}"
    kw = {"store": store, "embedded_workers": False}
    if store == "redis":
        kw.update(redis_url=redis_url or "redis://127.0.0.1:6379/0", key_prefix=prefix)
    try:
        settings = Settings(**kw)
    except ValidationError as err:
        first = err.errors()[0]
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise InvalidInput("redis_url" if "redis_url" in first.get("loc", ()) else "store", msg) from None
    rt = Runtime.build(settings)
    if pool not in rt.pools:
        rt.stop()
        raise InvalidInput("pool", f"expected one of {', '.join(rt.pools)}")
    if store == "redis" and not rt.store.ping():  # before any write: one line, not a traceback per retry
        rt.stop()
        raise StoreUnavailable(f"cannot reach Redis at {settings.redis_url}")
    out = BackfillBenchResult(pool, store, tickets, backfills, seed)
    try:
        now = time.time()
        bodies = make_tickets(pool, tickets, seed, party_share=0.0)
        items = [(Ticket(new_ticket_id(pool), pool, b["players"], now + k * 1e-4, now + 600), None)
                 for k, b in enumerate(bodies)]
        for k in range(0, len(items), 500):
            rt.store.create_many(items[k:k + 500])
        opened = {}
        for body in make_backfills(pool, backfills, seed):
            b = rt.store.create_backfill(prepare_backfill(rt, BackfillIn.model_validate({**body, "ttl_s": 600})))
            opened[b.id] = b
        rt.warm()  # predictors loaded now, as `serve` and the workers do at start-up (not inside a solve's budget)
        mm = Matchmaker(rt.pools[pool], rt.store, rt.runner, rt.experiments)
        timed = _TimedFills(mm.backfiller, out.fill_ms)
        open_ids = set(opened)
        tick = 0
        while open_ids:
            tick += 1
            t0 = time.perf_counter()
            mm.tick()
            out.tick_ms.append((time.perf_counter() - t0) * 1e3)
            done = {bid for bid in open_ids if rt.store.get_backfill(bid).status == "filled"}
            out.ticks_to_fill += [tick] * len(done)
            open_ids -= done
            if not done:
                break
        timed.restore()
        out.filled = len(out.ticks_to_fill)
        out.double_booked, out.matches = _check(rt, [t.id for t, _ in items], list(opened))
    finally:
        if store == "redis":
            for key in rt.store.r.scan_iter(f"{prefix}:*", count=1000):
                rt.store.r.delete(key)
        rt.stop()
    return out


class _TimedFills:
    """Times each backfill's solve + fill (Backfiller._fill) into ``into`` while installed."""

    def __init__(self, backfiller, into: list[float]):
        self.b, self.inner = backfiller, backfiller._fill

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return self.inner(*args, **kwargs)
            finally:
                into.append((time.perf_counter() - t0) * 1e3)

        backfiller._fill = timed

    def restore(self) -> None:
        self.b._fill = self.inner


def _check(rt, ticket_ids: list[str], backfill_ids: list[str]) -> tuple[int, int]:
    """(players in two places, new matches) over the final ticket and backfill views."""
    from mgmatch.app.service import backfill_out, ticket_out

    from .chaos_checks import check_backfills, check_matches

    pool = rt.store.get(ticket_ids[0]).pool
    views = []
    for k in range(0, len(ticket_ids), 500):
        views += [ticket_out(t) for t in rt.store.get_many(pool, ticket_ids[k:k + 500]) if t is not None]
    bfs = [backfill_out(rt.store.get_backfill(b)) for b in backfill_ids]
    cfg = rt.pools[pool]
    m = check_matches(views, cfg.sizes)
    b = check_backfills(bfs, views)
    new = len({v["match"]["match_id"] for v in views if v["status"] == "matched" and "backfill_id" not in v["match"]})
    return len(set(m.double_booked) | set(b.double_booked)), new
