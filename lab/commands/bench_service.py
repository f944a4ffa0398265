"""``mgmatch bench service``: throughput and latency of a real ``mgmatch serve`` over HTTP.

Starts the server in a subprocess (``--no-workers``: the API alone, no matchmaker competing for
the CPU) on each requested store, then measures

- ``/v1/solve`` on generated 3v3 and 12v12 candidate pools, open loop at ``--solve-rate``
  requests/s (latency as a game server sees it at that load; in-flight capped by ``--concurrency``);
- ticket ingest (``POST /v1/tickets``), closed loop with ``--concurrency`` clients.

Reports per row: requests, errors, achieved req/s, p50/p99/max latency (ms), and for solves the
solution statuses. The load generator runs on the same machine and shares its CPU.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from mgmatch.app.cli import bench_app, emit, fail, seed_option
from mgmatch.lab import loadgen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def _stats(lat_ms: list[float], errors: int, elapsed: float) -> dict:
    a = np.asarray(lat_ms) if lat_ms else np.asarray([np.nan])
    return {"requests": len(lat_ms) + errors, "errors": errors, "rps": round(len(lat_ms) / elapsed, 1),
            "p50_ms": round(float(np.nanpercentile(a, 50)), 2), "p99_ms": round(float(np.nanpercentile(a, 99)), 2),
            "max_ms": round(float(np.nanmax(a)), 2)}


async def _solve_load(url: str, bodies: list[dict], rate: float, duration_s: float, concurrency: int) -> dict:
    lat, errors, statuses = [], 0, {}
    payloads = [json.dumps(b).encode() for b in bodies]
    client = loadgen.Client(url, size=concurrency)  # at most `concurrency` in flight

    async def one(k: int) -> None:
        nonlocal errors
        t0 = time.perf_counter()
        try:
            r = await client.post("/v1/solve", payloads[k % len(payloads)])
        except loadgen.TransportError:
            errors += 1
            return
        if r.status_code == 200:
            lat.append((time.perf_counter() - t0) * 1e3)
            sol = r.json()
            st = sol.get("status") + (f"/fallback:{sol['fallback']}" if sol.get("fallback") else "")
            statuses[st] = statuses.get(st, 0) + 1
        else:
            errors += 1

    for k in range(3):  # warm-up (models, predictor sessions)
        await one(k)
    lat.clear()
    statuses.clear()
    errors = 0
    start = time.perf_counter()
    tasks, k = [], 0
    while time.perf_counter() - start < duration_s:
        tasks.append(asyncio.create_task(one(k)))
        k += 1
        await asyncio.sleep(max(0.0, start + k / rate - time.perf_counter()))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    client.close()
    out = _stats(lat, errors, elapsed)
    out["offered_rps"] = rate
    out["statuses"] = statuses
    return out


async def _ingest_load(url: str, pool: str, dim: int, duration_s: float, concurrency: int, seed: int,
                       batch: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    feats = [json.dumps([round(float(x), 4) for x in rng.normal(size=dim)]) for _ in range(64)]
    run = uuid.uuid4().hex[:8]
    lat, errors = [], 0
    counter = 0
    path = "/v1/tickets" if batch == 1 else "/v1/tickets/batch"
    want = 201 if batch == 1 else 200

    host, port = _host_port(url)

    async def client(stop_at: float) -> None:
        nonlocal errors, counter
        conn = loadgen.Conn(host, port)
        while time.perf_counter() < stop_at:
            items = []
            for _ in range(batch):
                counter += 1
                n = counter
                items.append(f'{{"pool": "{pool}", "players": [{{"id": "b{run}-{n}", "features": {feats[n % 64]}, '
                             f'"skill": {1500 + n % 400}}}]}}')
            body = (items[0] if batch == 1 else '{"tickets": [' + ", ".join(items) + "]}").encode()
            t0 = time.perf_counter()
            try:
                code = (await conn.request("POST", path, body, {"content-type": "application/json"})).status_code
            except loadgen.TransportError:
                code = 0
            if code == want:
                lat.append((time.perf_counter() - t0) * 1e3)
            else:
                errors += 1
        conn.close()

    await asyncio.gather(*(client(time.perf_counter() + 1.0) for _ in range(concurrency)))  # warm-up
    lat.clear()
    errors = 0
    start = time.perf_counter()
    await asyncio.gather(*(client(start + duration_s) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    out = _stats(lat, errors, elapsed)
    out["concurrency"] = concurrency
    out["batch"] = batch
    out["tickets_per_s"] = round(out["rps"] * batch, 1)
    return out


def _start_server(store: str, redis_url: str, prefix: str, config: Path | None) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "MGMATCH_STORE": store, "MGMATCH_REDIS_URL": redis_url, "MGMATCH_KEY_PREFIX": prefix,
           "OMP_NUM_THREADS": "1", "MGMATCH_MAX_BODY_BYTES": "4000000"}
    cmd = [sys.executable, "-c", "from mgmatch.app.cli import main; main()", "serve", "--port", str(port),
           "--no-workers"]
    if config is not None:
        cmd += ["--config", str(config)]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            fail(f"server exited: {log.read().decode(errors='replace').strip().splitlines()[-1:]}")
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    fail("server did not become ready within 90 s")


def _cleanup_redis(redis_url: str, prefix: str) -> None:
    import redis
    import redis.cluster

    from mgmatch.app.store.redis import cluster_node_url

    node_url = cluster_node_url(redis_url)  # a cluster: SCAN every master
    r = redis.cluster.RedisCluster.from_url(node_url) if node_url else redis.Redis.from_url(redis_url)
    for key in r.scan_iter(f"{prefix}:*", count=1000):
        r.delete(key)
    r.close()


#: largest offered /v1/solve load (req/s) and seconds of load per row: far above any useful run, never unbounded
MAX_SOLVE_RATE = 100_000
MAX_LOAD_S = 86_400


def _check_request(method: str, time_limit_ms: float) -> None:
    """``--method`` registered and ``--time-limit-ms`` within what the server takes (else exit 2 naming it)."""
    from mgmatch.app.settings import Settings
    from mgmatch.core.errors import InvalidInput
    from mgmatch.solvers.base import method_info

    try:
        method_info(method, "--method")
    except InvalidInput as err:
        fail(str(err))
    if not (time_limit_ms > 0 and math.isfinite(time_limit_ms)):
        fail(f"--time-limit-ms must be a finite number > 0, got {time_limit_ms}")
    try:  # the server reads the same environment (MGMATCH_MAX_TIME_LIMIT_MS)
        cap = Settings().max_time_limit_ms
    except Exception:  # noqa: BLE001 - a bad environment is the server's to report; use the default cap
        cap = Settings.model_fields["max_time_limit_ms"].default
    if time_limit_ms > cap:
        fail(f"--time-limit-ms must be ≤ {cap:g}, the server's largest budget per request "
             f"(MGMATCH_MAX_TIME_LIMIT_MS), got {time_limit_ms:g}")


def _check_ingest_pool(pool: str, config: Path | None) -> None:
    """``--ingest-pool`` names a pool of the config the server runs (else exit 2 naming it)."""
    from mgmatch.app.config import load_config

    try:
        names = [p.name for p in load_config(config).pools]
    except Exception as err:  # noqa: BLE001 - the config is the user's file: report, don't trace
        fail(f"--config: {str(err).splitlines()[0] if str(err) else type(err).__name__}")
    if pool not in names:
        fail(f"--ingest-pool: {pool!r} is not a pool of the {'config' if config else 'built-in config'}; "
             f"expected one of {', '.join(names) or 'no pools'}")


@bench_app.command("service", help="HTTP throughput and p50/p99 latency of /v1/solve and ticket ingest, per store.")
def bench_service_cmd(
    stores: Annotated[str, typer.Option(help="Comma-separated: memory, redis.")] = "memory,redis",
    redis_url: Annotated[str, typer.Option(help="Redis for store=redis.")] = "redis://127.0.0.1:6379/14",
    presets: Annotated[str, typer.Option(help="Solve pools to generate: 3v3, 12v12.")] = "3v3,12v12",
    method: Annotated[str, typer.Option(help="Solver method for /v1/solve.")] = "mgmatch",
    time_limit_ms: Annotated[float, typer.Option(help="Budget per /v1/solve request (ms), reply included.")] = 100.0,
    solve_rate: Annotated[float, typer.Option(help="Offered /v1/solve load (req/s, open loop).")] = 20.0,
    solve_s: Annotated[float, typer.Option(help="Seconds of solve load per preset and store.")] = 10.0,
    ingest_s: Annotated[float, typer.Option(help="Seconds of ticket ingest per store.")] = 5.0,
    ingest_pool: Annotated[str, typer.Option(help="Pool of the built-in config to queue tickets for.")] = "12v12",
    concurrency: Annotated[int, typer.Option(help="Concurrent clients (ingest) / in-flight cap (solve).")] = 16,
    batch: Annotated[str, typer.Option(help="Tickets per ingest request, comma-separated (1 = POST /v1/tickets, "
                                            ">1 = POST /v1/tickets/batch).")] = "1,20",
    config: Annotated[Path | None, typer.Option(help="Service config for the server (default: built-in).")] = None,
    seed: Annotated[int, seed_option(help="Seed for generated pools and features.")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="md or json")] = "md",
) -> None:
    from mgmatch.core.presets import generate_instances, load_model

    store_list = [s.strip() for s in stores.split(",") if s.strip()]
    preset_list = [p.strip() for p in presets.split(",") if p.strip()]
    if not store_list or any(s not in ("memory", "redis") for s in store_list):
        fail(f"--stores: expected memory and/or redis, got {stores!r}")
    if any(p not in ("3v3", "12v12") for p in preset_list):
        fail(f"--presets: expected 3v3 and/or 12v12, got {presets!r}")
    if fmt not in ("md", "json"):
        fail(f"--format: expected md or json, got {fmt!r}")
    for name, v, hi in (("--solve-rate", solve_rate, MAX_SOLVE_RATE), ("--solve-s", solve_s, MAX_LOAD_S),
                        ("--ingest-s", ingest_s, MAX_LOAD_S)):
        if not (v > 0 and math.isfinite(v)):
            fail(f"{name} must be a finite number > 0, got {v}")
        if v > hi:
            fail(f"{name} must be ≤ {hi:,}, got {v:g}")
    _check_request(method, time_limit_ms)
    _check_ingest_pool(ingest_pool, config)
    if not 1 <= concurrency <= 1024:
        fail(f"--concurrency must be in 1..1024, got {concurrency}")
    try:
        batches = [int(b) for b in batch.split(",") if b.strip()]
    except ValueError:
        fail(f"--batch: expected integers, got {batch!r}")
    if not batches or any(not 1 <= b <= 100 for b in batches):
        fail(f"--batch: each value must be in 1..100, got {batch!r}")
    bodies = {p: [{**inst.to_json(), "method": method, "time_limit_ms": time_limit_ms}
                  for inst in generate_instances(p, 24, seed)] for p in preset_list}
    dim = load_model(ingest_pool).feature_dim if ingest_pool in ("3v3", "12v12") else 66
    rows = []
    for store in store_list:
        prefix = f"mgmbench{uuid.uuid4().hex[:8]}"
        proc, url = _start_server(store, redis_url, prefix, config)
        try:
            for p in preset_list:
                r = asyncio.run(_solve_load(url, bodies[p], solve_rate, solve_s, concurrency))
                rows.append({"store": store, "workload": f"solve {p}", "method": method,
                             "time_limit_ms": time_limit_ms, **r})
            for b in batches:
                r = asyncio.run(_ingest_load(url, ingest_pool, dim, ingest_s, concurrency, seed, b))
                rows.append({"store": store, "workload": f"ingest {ingest_pool} ×{b}", **r})
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            if store == "redis":
                _cleanup_redis(redis_url, prefix)
    if fmt == "json":
        emit({"bench": "service", "cpu_count": os.cpu_count(), "rows": rows})
        return
    sys.stdout.write(f"cpu_count={os.cpu_count()} load_average={os.getloadavg()[0]:.2f}\n\n")
    sys.stdout.write("| store | workload | req/s (offered or clients) | tickets/s | requests | errors | p50 ms | p99 ms "
                     "| max ms | statuses |\n")
    sys.stdout.write("|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        offered = f" ({r['offered_rps']:g}/s)" if "offered_rps" in r else f" (c={r.get('concurrency')})"
        name = r["workload"] + (f" {r['method']} {r['time_limit_ms']:g} ms" if "method" in r else "")
        stats = ", ".join(f"{k}: {v}" for k, v in r.get("statuses", {}).items())
        sys.stdout.write(f"| {r['store']} | {name} | {r['rps']}{offered} | {r.get('tickets_per_s', '')} | "
                         f"{r['requests']} | {r['errors']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} | {stats} |\n")
