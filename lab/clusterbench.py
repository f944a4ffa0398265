"""What one pool costs its Redis Cluster master: ``mgmatch bench cluster``.

Every key of a pool carries the hash tag ``{pool}``, so a pool is one hash slot, served by one
master, whose single thread runs every Lua script of that pool one after the other. This benchmark
drives the store's two hot paths on ``pools`` pools at once (one client thread per pool):

1. **create**: ``tickets`` tickets per pool through ``create_many`` (pipelined create scripts, each after
   its player's cross-pool lock script, which runs on the player's own slot, so on any master);
2. **match**: the queued tickets claimed and committed in matches of ``match_size`` (one claim and
   one commit script per match, as a solver does).

Around each phase it reads ``INFO commandstats`` of every master: the scripts each master ran and
the microseconds its thread spent in them. It reports, per phase, what the clients achieved, and
per master its pools, scripts, µs per script and busy share (script time / phase wall time), and
the ceiling this puts on one pool: ``1e6 / (create µs + (claim µs + commit µs) / match_size)``
tickets per second, the most one master's thread can create and match for one pool whatever the
number of API processes and solvers. Pools on different masters add up; pools on one master share it.
The ceiling is optimistic: ``commandstats`` counts a script's execution only, not the master's work
reading and answering the socket, nor the matchmaker's reads (ticket bodies, queue windows), the
reaper and the job stream, which run on the same thread.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from mgmatch.app.store import MatchResult, RedisStore, Ticket, new_ticket_id
from mgmatch.app.store.redis import _SOURCES, cluster_node_url
from mgmatch.core.errors import InvalidInput


@dataclass
class ClusterBenchPlan:
    tickets: int = 20_000      # per pool
    pools: int = 1
    batch: int = 50            # tickets per create_many call
    match_size: int = 6
    url: str | None = None     # an existing cluster (redis+cluster://…); None: start a LocalCluster
    appendfsync: str = "everysec"

    def validate(self) -> None:
        checks = [
            ("tickets", 12 <= self.tickets <= 1_000_000, "must be in 12..1000000"),
            ("pools", 1 <= self.pools <= 64, "must be in 1..64"),
            ("batch", 1 <= self.batch <= 1000, "must be in 1..1000"),
            ("match_size", 2 <= self.match_size <= 200, "must be in 2..200"),
            ("url", self.url is None or cluster_node_url(self.url) is not None,
             "expected a redis+cluster:// or rediss+cluster:// URL"),
            ("appendfsync", self.appendfsync in ("always", "everysec"), "expected always or everysec"),
        ]
        for name, ok, msg in checks:
            if not ok:
                raise InvalidInput(name, f"{msg}, got {getattr(self, name)!r}")


def _script_stats(rc) -> dict[str, tuple[int, int]]:
    """Per master (host:port): (EVALSHA calls, µs spent in them) since its start."""
    out = {}
    for node in rc.get_primaries():
        stats = rc.info("commandstats", target_nodes=node)
        ev = stats.get("cmdstat_evalsha") or {}
        out[node.name] = (int(ev.get("calls", 0)), int(ev.get("usec", 0)))
    return out


def _in_threads(pools: list[str], fn) -> float:
    """Run fn(pool) in one thread per pool, started together; the wall time; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(pools) + 1)

    def run(pool: str) -> None:
        start.wait()
        try:
            fn(pool)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller
            errors.append(err)

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in pools]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall


def _phase(name: str, rc, pools: list[str], masters: dict[str, str], fn, calls_per_pool: int) -> dict:
    before = _script_stats(rc)
    wall = _in_threads(pools, fn)
    after = _script_stats(rc)
    per_master = {}
    for node, (calls, usec) in after.items():
        d_calls, d_usec = calls - before.get(node, (0, 0))[0], usec - before.get(node, (0, 0))[1]
        served = sorted(p for p, m in masters.items() if m == node)
        per_master[node] = {"pools": served, "scripts": d_calls,
                            "usec_per_script": round(d_usec / d_calls, 2) if d_calls else None,
                            "busy_share": round(d_usec / 1e6 / wall, 3)}
    total = calls_per_pool * len(pools)
    return {"phase": name, "wall_s": round(wall, 3), "scripts": total,
            "scripts_per_s": round(total / wall, 1), "masters": per_master}


def unreachable(url: str) -> str | None:
    """Why the cluster at ``url`` cannot be reached (one line), or None when it answers a PING."""
    import redis.cluster

    try:
        rc = redis.cluster.RedisCluster.from_url(cluster_node_url(url), socket_connect_timeout=3, socket_timeout=3)
        try:
            rc.ping()
        finally:
            rc.close()
    except Exception as err:  # noqa: BLE001 - any failure to connect is reported by its reason
        text = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {text}" if text else type(err).__name__
    return None


def run_cluster_bench(plan: ClusterBenchPlan, say=None) -> dict:
    """Run the benchmark (see the module doc) and return its report."""
    import redis.cluster

    from .localcluster import LocalCluster

    plan.validate()
    say = say or (lambda _m: None)
    cluster = None
    workdir = None
    if plan.url is None:
        workdir = tempfile.mkdtemp(prefix="mgmatch-clusterbench-")
        cluster = LocalCluster(Path(workdir), appendfsync=plan.appendfsync)
        cluster.start()
        say(f"cluster up at {cluster.url} (3 masters, 3 replicas, appendfsync {plan.appendfsync})")
    url = plan.url or cluster.url
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    store = RedisStore.from_url(url, prefix=prefix)
    rc = redis.cluster.RedisCluster.from_url(cluster_node_url(url), decode_responses=True)
    pools = [f"bench{k}" for k in range(plan.pools)]
    try:
        masters = {p: rc.get_node_from_key(store.keys.queue(p)).name for p in pools}
        for src in _SOURCES.values():  # loaded on every master first: no NOSCRIPT replay in the counts
            rc.script_load(src)
        ids: dict[str, list[str]] = {p: [] for p in pools}

        def create(pool: str) -> None:
            now = time.time()
            for lo in range(0, plan.tickets, plan.batch):
                batch = [Ticket(new_ticket_id(pool), pool, [{"id": f"{pool}-{i}", "features": [1.0]}], now, now + 600)
                         for i in range(lo, min(plan.tickets, lo + plan.batch))]
                for out in store.create_many([(t, None) for t in batch]):
                    if not isinstance(out, tuple):
                        raise RuntimeError(f"create refused: {out}")
                    ids[pool].append(out[0].id)

        n_matches = plan.tickets // plan.match_size

        def match(pool: str) -> None:
            for k in range(n_matches):
                group = ids[pool][k * plan.match_size:(k + 1) * plan.match_size]
                mid = f"{pool}-m{k}"
                if not store.claim(pool, group, mid, time.time() + 60):
                    raise RuntimeError(f"claim {mid} refused")
                result = MatchResult(f"{mid}-0", [group], {t: 0 for t in group})
                if not store.commit(pool, mid, group, [], result):
                    raise RuntimeError(f"commit {mid} refused")

        say(f"create: {plan.tickets} tickets in each of {plan.pools} pools")
        created = _phase("create", rc, pools, masters, create, 2 * plan.tickets)  # a lock and a create each
        say(f"match: {n_matches} claims + commits of {plan.match_size} in each pool")
        matched = _phase("match", rc, pools, masters, match, 2 * n_matches)
        report = {"tickets_per_pool": plan.tickets, "pools": plan.pools, "batch": plan.batch,
                  "match_size": plan.match_size, "pool_masters": masters, "phases": [created, matched],
                  "appendfsync": plan.appendfsync if cluster is not None else None}
        report["one_pool_ceiling"] = _ceiling(created, matched, plan.match_size)
        return report
    finally:
        for key in rc.scan_iter(f"{prefix}:*", count=1000):
            rc.delete(key)
        rc.close()
        store.close()
        if cluster is not None:
            cluster.stop()
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def _ceiling(created: dict, matched: dict, match_size: int) -> dict | None:
    """µs per create and per claim/commit script (over every master that ran them), and the tickets
    per second one master's thread could create and match for one pool at those costs."""
    def usec(phase: dict) -> float | None:
        rows = [m for m in phase["masters"].values() if m["scripts"]]
        calls = sum(m["scripts"] for m in rows)
        return round(sum(m["usec_per_script"] * m["scripts"] for m in rows) / calls, 2) if calls else None

    create_us, match_us = usec(created), usec(matched)
    if create_us is None or match_us is None:
        return None
    per_ticket = create_us + 2 * match_us / match_size
    return {"create_usec": create_us, "claim_or_commit_usec": match_us, "usec_per_ticket": round(per_ticket, 2),
            "tickets_per_s": round(1e6 / per_ticket)}


def markdown(r: dict) -> str:
    lines = [f"pools={r['pools']} tickets/pool={r['tickets_per_pool']} batch={r['batch']} "
             f"match_size={r['match_size']}", "",
             "| phase | wall s | scripts | scripts/s (clients) | master | pools | scripts | µs/script | busy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for ph in r["phases"]:
        for node, m in sorted(ph["masters"].items()):
            lines.append(f"| {ph['phase']} | {ph['wall_s']} | {ph['scripts']} | {ph['scripts_per_s']} | {node} | "
                         f"{', '.join(m['pools']) or '—'} | {m['scripts']} | {m['usec_per_script'] or '—'} | "
                         f"{m['busy_share']:.1%} |")
    c = r.get("one_pool_ceiling")
    if c:
        lines += ["", f"one pool's ceiling on its master: {c['create_usec']} µs per create script + "
                      f"2 × {c['claim_or_commit_usec']} µs per match of {r['match_size']} = {c['usec_per_ticket']} µs "
                      f"per ticket → ≈ {c['tickets_per_s']:,} tickets/s created and matched"]
    return "\n".join(lines) + "\n"


def dumps(r: dict) -> str:
    return json.dumps(r, indent=1)
