"""``mgmatch bench ratings``: ratings written per second from match results.

A seeded population of players plays ``matches`` random matches (two teams of ``team_size``, a random
winner); ``threads`` threads post each match's outcome through :func:`mgmatch.app.ratings.rate_match`
(openskill Plackett–Luce, once per match, compared on each player's version), on the memory store or
a Redis (one server or a cluster, keys under a fresh prefix, deleted after). A ``repeat_share`` of the
matches is posted a second time (a retry), which must change nothing. Reported: players rated per
second, matches per second, per-match latency p50/p99, and the checks that every player's ``games``
equals the matches they played and every retry answered ``done``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from mgmatch.core.errors import InvalidInput

from .chaos_checks import percentile


@dataclass
class RatingsBenchResult:
    store: str
    matches: int
    team_size: int
    players: int
    threads: int
    seed: int
    elapsed_s: float = 0.0
    ratings_per_s: float = 0.0
    matches_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    statuses: dict[str, int] = field(default_factory=dict)
    games_mismatched: int = 0       # players whose stored games differ from the matches they played
    repeats_not_done: int = 0       # retried matches that changed something (must be 0)

    def to_json(self) -> dict:
        return asdict(self)

    def markdown(self) -> str:
        rows = [("ratings written per second", self.ratings_per_s), ("matches rated per second", self.matches_per_s),
                ("per-match update p50 / p99 (ms)", f"{self.p50_ms} / {self.p99_ms}"),
                ("update outcomes", self.statuses), ("players whose games count is wrong", self.games_mismatched),
                ("retried matches that changed ratings", self.repeats_not_done), ("elapsed (s)", self.elapsed_s)]
        head = (f"store={self.store} matches={self.matches} team_size={self.team_size} players={self.players} "
                f"threads={self.threads} seed={self.seed}\n\n| metric | value |\n|---|---|\n")
        return head + "".join(f"| {k} | {v} |\n" for k, v in rows)

    @property
    def ok(self) -> bool:
        return self.games_mismatched == 0 and self.repeats_not_done == 0


def _store(kind: str, redis_url: str, prefix: str):
    from mgmatch.app.store import MemoryStore, RedisStore, StoreUnavailable

    if kind == "memory":
        return MemoryStore()
    s = RedisStore.from_url(redis_url, prefix=prefix)
    if not s.ping():
        raise StoreUnavailable(f"cannot reach Redis at {redis_url}")
    return s


def run_ratings_bench(store: str = "memory", matches: int = 2000, team_size: int = 3, players: int = 2000,
                      threads: int = 4, seed: int = 0, repeat_share: float = 0.1,
                      redis_url: str = "redis://127.0.0.1:6379/0") -> RatingsBenchResult:
    """Run it (see the module doc). InvalidInput names a bad argument; StoreUnavailable an unreachable Redis."""
    from mgmatch.app.ratings import rate_match

    if store not in ("memory", "redis"):
        raise InvalidInput("store", f"expected memory or redis, got {store!r}")
    checks = [("matches", 1 <= matches <= 1_000_000, "must be in 1..1000000"),
              ("team_size", 1 <= team_size <= 64, "must be in 1..64"),
              ("players", 2 * team_size <= players <= 10_000_000, "must be at least 2 × team_size"),
              ("threads", 1 <= threads <= 64, "must be in 1..64"),
              ("repeat_share", 0 <= repeat_share <= 1, "must be in [0, 1]")]
    for name, ok, msg in checks:
        if not ok:
            raise InvalidInput(name, f"{msg}, got {locals()[name]!r}")
    rng = np.random.default_rng(seed)
    prefix = f"rtbench{uuid.uuid4().hex[:8]}"
    ids = [f"{prefix}-p{k}" for k in range(players)]
    plan = []
    for m in range(matches):
        pick = rng.choice(players, size=2 * team_size, replace=False)
        teams = [[ids[k] for k in pick[:team_size]], [ids[k] for k in pick[team_size:]]]
        winner = int(rng.integers(2))
        plan.append((f"bench.{prefix}-m{m}", teams, [0.0 if j == winner else 1.0 for j in range(2)]))
    repeats = [plan[k] for k in sorted(rng.choice(matches, size=int(matches * repeat_share), replace=False))]
    played = Counter(p for _, teams, _ in plan for team in teams for p in team)
    s = _store(store, redis_url, prefix)
    out = RatingsBenchResult(store, matches, team_size, players, threads, seed)
    lat: list[float] = []
    statuses: Counter = Counter()
    lock = threading.Lock()

    def one(item) -> None:
        t0 = time.perf_counter()
        status, _ = rate_match(s, *item)
        dt = (time.perf_counter() - t0) * 1000
        with lock:
            lat.append(dt)
            statuses[status] += 1

    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, plan))
        out.elapsed_s = round(time.perf_counter() - t0, 3)
        for item in repeats:
            st, _ = rate_match(s, *item)
            out.repeats_not_done += st != "done"
        stored = s.get_ratings(list(played))
        out.games_mismatched = sum(1 for p, n in played.items() if stored.get(p) is None or stored[p].games != n)
        out.ratings_per_s = round(matches * 2 * team_size / out.elapsed_s, 1)
        out.matches_per_s = round(matches / out.elapsed_s, 1)
        out.p50_ms, out.p99_ms = percentile(lat, 50), percentile(lat, 99)
        out.statuses = dict(statuses)
    finally:
        if store == "redis":
            for key in s.r.scan_iter(f"{prefix}:*", count=1000):
                s.r.delete(key)
        s.close()
    return out
