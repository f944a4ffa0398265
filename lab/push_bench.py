"""``mgmatch bench push``: how fast ticket events reach an SSE client and a webhook receiver, and how many
a reconnecting client loses across a Redis restart.

A real ``mgmatch serve`` process (the built-in 3v3 pool, matchmaker embedded, a webhook configured) on
the memory store or on a redis-server of the bench's own (append-only file, so a restart keeps the
streams). Tickets arrive over HTTP at a steady seeded rate; one SSE client follows ``/v1/events?pool=3v3``
and reconnects with ``Last-Event-ID`` whenever its stream breaks; a local HTTP server receives the
webhook. With ``--redis-restart`` Redis is stopped for a second halfway through.

Latency is receipt time minus the event's commit time: its id is the store clock's milliseconds at the
change (Redis TIME or the API process's clock, on this host), so the two clocks are one. It is taken over
the events committed before the bench's first replay of the log (below): that replay streams every event
again through the service, the bench's own load, not the ticket load measured (``events_untimed`` counts
the events committed later, such as the last tickets' matches, which are still checked for losses). Ground truth
is the pool's event log read afterwards from the start (``Last-Event-ID: 0-0``); an event of it that
the live client never received is lost.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import yaml

from mgmatch.app.config import DEFAULT_CONFIG
from mgmatch.app.webhooks import verify
from mgmatch.core.presets import load_model

SECRET = "push-bench-secret-0123"
POOL = "3v3"


@dataclass
class PushPlan:
    store: str = "memory"
    rate: float = 30.0  # tickets per second
    duration_s: float = 20.0
    seed: int = 0
    redis_restart: bool = False
    drain_s: float = 15.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(xs: list[float], q: float) -> float | None:
    return None if not xs else round(float(np.percentile(np.asarray(xs) * 1000.0, q)), 2)


def _summary(xs: list[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50_ms": _pct(xs, 50), "p99_ms": _pct(xs, 99), "max_ms": _pct(xs, 100)}


class _Receiver:
    """The webhook receiver: records each event id's first receipt time and checks every signature."""

    def __init__(self):
        self.first: dict[str, float] = {}
        self.calls = 0
        self.bad_signatures = 0
        self.occurred: dict[str, float] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the deliverer's connections are reused, as a real receiver's

            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                at = time.time()
                ok = verify(SECRET, self.headers.get("x-mgmatch-signature", ""), body)
                payload = json.loads(body)
                with outer.lock:
                    outer.calls += 1
                    outer.bad_signatures += 0 if ok else 1
                    outer.first.setdefault(payload["id"], at)
                    outer.occurred[payload["id"]] = payload["occurred_at"]
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _SSE:
    """A client of ``/v1/events`` that reconnects with Last-Event-ID (as EventSource does).

    Lean on purpose (``http.client``, blocks split on the raw bytes): it shares the bench's interpreter with
    the load and the webhook receiver, and an event's receipt time is when its bytes reached this process,
    taken before any parsing, so the bench's own CPU does not count as the service's latency."""

    def __init__(self, url: str):
        u = urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.path = u.path + (f"?{u.query}" if u.query else "")
        self.events: list[tuple[str, str, float]] = []  # (id, type, receipt time)
        self.connections = 0
        self.stop = threading.Event()
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            headers = {"Last-Event-ID": self.events[-1][0]} if self.events else {}
            conn = http.client.HTTPConnection(self.host, self.port, timeout=5)
            try:
                conn.request("GET", self.path, headers=headers)
                r = conn.getresponse()
                if r.status == 200:
                    self.connections += 1
                    self.opened.set()
                    buf = b""
                    while not self.stop.is_set():
                        data = r.read1(65536)
                        if not data:
                            break
                        at = time.time()
                        got, buf = sse_events(buf + data)
                        self.events.extend((eid, kind, at) for eid, kind in got)
            except (OSError, http.client.HTTPException, KeyError):
                pass
            finally:
                conn.close()
            self.stop.wait(0.1)


def sse_events(buf: bytes) -> tuple[list[tuple[str, str]], bytes]:
    """The (id, type) of each whole event in ``buf`` (an SSE stream's bytes so far), and the bytes of the
    block still incomplete. Blocks without an event type (``retry:``, comments) and ``error`` events are
    left out."""
    *blocks, rest = buf.split(b"\n\n")
    out = []
    for block in blocks:
        cur: dict[str, str] = {}
        for line in block.decode("utf-8", "replace").split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                cur[name] = value[1:] if value.startswith(" ") else value
        if cur.get("event") not in (None, "error") and "id" in cur:
            out.append((cur["id"], cur["event"]))
    return out, rest


class _Poster:
    """The load's client: one kept-alive ``http.client`` connection (a fraction of httpx's CPU per request,
    which the bench's receivers would otherwise wait for), opened again after a broken one."""

    def __init__(self, url: str):
        u = urlsplit(url)
        self.conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=10)

    def post(self, path: str, body: dict) -> int | None:
        """The answer's status, or None when the connection broke or timed out (twice)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        for _ in range(2):
            try:
                self.conn.request("POST", path, body=data, headers={"content-type": "application/json"})
                r = self.conn.getresponse()
                r.read()
                return r.status
            except (OSError, http.client.HTTPException):
                self.conn.close()
        return None

    def close(self) -> None:
        self.conn.close()


def _stages(metrics_text: str) -> dict[str, dict[str, Any]]:
    """The service's own split of the push latency (``mgmatch_events_push_seconds``, commit → read from
    the log → sent): per transport and step, the count and the bucket bounds holding p50 and p99."""
    buckets: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for line in metrics_text.splitlines():
        if not line.startswith("mgmatch_events_push_seconds_bucket{"):
            continue
        labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
        labels = {k: v.strip('"') for k, v in labels.items()}
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        buckets.setdefault((labels["transport"], labels["step"]), []).append((le, float(line.rsplit(" ", 1)[1])))
    out: dict[str, dict[str, Any]] = {}
    for (transport, step), rows in sorted(buckets.items()):
        rows.sort()
        total = rows[-1][1]

        def bound(q: float, rows=rows, total=total) -> float | None:
            for le, n in rows:
                if total and n >= q * total:
                    return None if le == float("inf") else round(le * 1000, 1)
            return None

        out.setdefault(transport, {})[step] = {"n": int(total), "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99)}
    return out


def _ms(eid: str) -> float:
    return int(eid.partition("-")[0]) / 1000


def _replay(url: str, idle_s: float = 2.0) -> list[tuple[str, str]]:
    """Every kept event of the pool, read from the start: (id, type)."""
    out: list[tuple[str, str]] = []
    try:
        with httpx.stream("GET", url, headers={"Last-Event-ID": "0-0"}, timeout=httpx.Timeout(idle_s, connect=5)) as r:
            cur: dict[str, str] = {}
            for line in r.iter_lines():
                if line == "":
                    if cur.get("event") not in (None, "error", "resync"):
                        out.append((cur["id"], cur["event"]))
                    cur = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    cur[name] = value[1:] if value.startswith(" ") else value
    except httpx.ReadTimeout:
        pass
    return out


class _Redis:
    """A redis-server of the bench's own with an append-only file (fsync every write)."""

    def __init__(self, folder: Path):
        self.exe = shutil.which("redis-server")
        if self.exe is None:
            raise RuntimeError("--store redis starts its own redis-server: none on PATH")
        self.folder, self.port, self.proc = folder, _free_port(), None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                                      str(self.folder), "--appendonly", "yes", "--appendfsync", "always",
                                      "--save", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None


def run_push_bench(plan: PushPlan, say=None) -> dict[str, Any]:
    say = say or (lambda m: None)
    work = Path(tempfile.mkdtemp(prefix="mgmatch-push-"))
    rds = _Redis(work) if plan.store == "redis" else None
    receiver = _Receiver()
    proc = None
    try:
        if rds is not None:
            rds.start()
        pool = next(p for p in DEFAULT_CONFIG["pools"] if p["name"] == POOL)
        cfg = {"pools": [pool], "webhooks": [{"url": receiver.url, "secret": SECRET, "backoff_s": 0.05}]}
        (work / "service.yaml").write_text(yaml.safe_dump(cfg))
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        args = [sys.executable, "-c", "from mgmatch.cli import main; main()", "serve", "--config",
                str(work / "service.yaml"), "--port", str(port), "--store", plan.store]
        if rds is not None:
            args += ["--redis-url", rds.url]
        serve_log = open(work / "serve.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=serve_log, text=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"mgmatch serve did not become ready: {(work / 'serve.log').read_text()[-500:]}")
            time.sleep(0.2)
        say(f"serve ready on {url} ({plan.store})")
        sse = _SSE(f"{url}/v1/events?pool={POOL}")
        sse.thread.start()
        if not sse.opened.wait(30):
            raise RuntimeError("the SSE stream did not open")
        rng = np.random.default_rng(plan.seed)
        dim = load_model(POOL).feature_dim
        created = refused = 0
        restarted_at = None
        t0 = time.time()
        n = int(plan.rate * plan.duration_s)
        c = _Poster(url)
        try:
            for i in range(n):
                due = t0 + i / plan.rate
                if (wait := due - time.time()) > 0:
                    time.sleep(wait)
                if rds is not None and plan.redis_restart and restarted_at is None and i >= n // 2:
                    say("stopping Redis for 1 s")
                    restarted_at = time.time()
                    rds.stop()
                    time.sleep(1.0)
                    rds.start()
                    say("Redis back")
                feats = np.round(rng.normal(0.0, 1.0, dim), 3).tolist()
                ok = c.post("/v1/tickets", {"pool": POOL, "players": [
                    {"id": f"p{plan.seed}-{i}", "features": feats}], "ttl_s": 120}) == 201
                created += ok
                refused += not ok
        finally:
            c.close()
        load_s = time.time() - t0
        say(f"{created} tickets created ({refused} refused) in {load_s:.1f} s; draining")
        time.sleep(1.5)  # the service's split, before the replays below add their (old) reads to it
        try:
            stages = _stages(httpx.get(f"{url}/metrics", timeout=10).text)
        except httpx.HTTPError:
            stages = {}
        truth: list[tuple[str, str]] = []
        end = time.time() + plan.drain_s
        replay_from = None
        while time.time() < end:
            time.sleep(1.0)
            replay_from = replay_from or time.time()
            truth = _replay(f"{url}/v1/events?pool={POOL}")
            live_ids = {e[0] for e in sse.events}
            hook_ids = set(receiver.first)
            if truth and all(eid in live_ids and f"{POOL}:{eid}" in hook_ids for eid, _ in truth):
                break
        sse.stop.set()
        try:
            dead = httpx.get(f"{url}/v1/webhooks/dead-letters?pool={POOL}&limit=1000", timeout=10).json()["dead_letters"]
        except (httpx.HTTPError, KeyError, ValueError):
            dead = []
        live_first: dict[str, float] = {}
        dupes = 0
        for eid, _, at in sse.events:
            if eid in live_first:
                dupes += 1
            else:
                live_first[eid] = at
        kinds = dict(truth)
        # latency of the events committed before the bench's first replay of the whole log (its own load on
        # the service, which is not the ticket load measured); every event counts for the losses
        timed = [(e, k) for e, k in truth if replay_from is None or _ms(e) < replay_from]
        sse_all = [live_first[e] - _ms(e) for e, _ in timed if e in live_first]
        sse_matched = [live_first[e] - _ms(e) for e, k in timed if e in live_first and k == "matched"]
        hook_all = [receiver.first[f"{POOL}:{e}"] - _ms(e) for e, _ in timed if f"{POOL}:{e}" in receiver.first]
        hook_matched = [receiver.first[f"{POOL}:{e}"] - _ms(e) for e, k in timed
                        if f"{POOL}:{e}" in receiver.first and k == "matched"]
        return {
            "bench": "push", "store": plan.store, "rate_per_s": plan.rate, "duration_s": plan.duration_s,
            "seed": plan.seed, "redis_restart": bool(restarted_at), "cpu_count": os.cpu_count(),
            "load_avg": [round(x, 2) for x in os.getloadavg()],
            "tickets_created": created, "tickets_refused": refused,
            "events": len(truth), "matched_events": sum(k == "matched" for k in kinds.values()),
            "events_untimed": len(truth) - len(timed),  # committed once the bench's replays had begun
            "sse": {"all": _summary(sse_all), "matched": _summary(sse_matched),
                    "lost": sum(e not in live_first for e, _ in truth), "duplicates": dupes,
                    "connections": sse.connections},
            "webhook": {"all": _summary(hook_all), "matched": _summary(hook_matched),
                        "lost": sum(f"{POOL}:{e}" not in receiver.first for e, _ in truth),
                        "lost_types": sorted({k for e, k in truth if f"{POOL}:{e}" not in receiver.first}),
                        "dead_letters": len(dead), "dead_letter_errors": sorted({d.get("error", "") for d in dead}),
                        "deliveries": receiver.calls, "bad_signatures": receiver.bad_signatures},
            "stages": stages,
        }
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        receiver.close()
        if rds is not None:
            rds.stop()
        if (work / "serve.log").exists():
            for line in (work / "serve.log").read_text().splitlines()[-20:]:
                say(f"serve: {line}")
        shutil.rmtree(work, ignore_errors=True)


def markdown(res: dict[str, Any]) -> str:
    rows = ["| receiver | events | p50 ms | p99 ms | max ms | matched p50 | matched p99 | lost |",
            "|---|---|---|---|---|---|---|---|"]
    for name in ("sse", "webhook"):
        r = res[name]
        rows.append(f"| {name} | {r['all']['n']} | {r['all']['p50_ms']} | {r['all']['p99_ms']} | {r['all']['max_ms']} "
                    f"| {r['matched']['p50_ms']} | {r['matched']['p99_ms']} | {r['lost']} |")
    head = (f"push: store {res['store']}, {res['rate_per_s']:g} tickets/s for {res['duration_s']:g} s, "
            f"Redis restart: {res['redis_restart']}; {res['events']} events ({res.get('events_untimed', 0)} "
            f"committed after the replays began: checked for losses, not timed); "
            f"load average {res.get('load_avg')}\n\n")
    steps = ["", "| in the service: commit → step | n | p50 ≤ ms | p99 ≤ ms |", "|---|---|---|---|"]
    for transport, by_step in res.get("stages", {}).items():
        for step, v in by_step.items():
            steps.append(f"| {transport} {step} | {v['n']} | {v['p50_le_ms']} | {v['p99_le_ms']} |")
    return head + "\n".join(rows) + "\n" + ("\n".join(steps) + "\n" if len(steps) > 3 else "")
