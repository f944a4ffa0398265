"""Helpers for the service tests: a service config, a real uvicorn server on a free port, polling."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import uvicorn
import yaml

SPEC_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "spec" / "examples"
REDIS_URL = os.environ.get("MGMATCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_config(tmp_path: Path, **pool_overrides) -> Path:
    """Pools: "small" (the spec example's 4-feature model, pinned by SHA-256) and "3v3" (shipped)."""
    model = SPEC_EXAMPLES / "engagement-small.json"
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    small = {"name": "small", "teams": 2, "team_size": 3, "engagement_model": "small",
             "rules": [{"kind": "party_together"}], "method": "exact", "time_budget_ms": 500,
             "max_candidates": 12, "lease_s": 30, **pool_overrides}
    cfg = {
        "pools": [small, {"name": "3v3", "teams": 2, "team_size": 3, "engagement_model": "3v3",
                          "method": "exact", "time_budget_ms": 300, "max_candidates": 12}],
        "models": {"engagement": [{"name": "small", "path": str(model), "sha256": digest}]},
        "default_engagement_model": "small",
    }
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class LiveServer:
    """uvicorn serving an ASGI app in a thread, on a free port."""

    def __init__(self, app):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                   access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def poll(fn, timeout: float = 20.0, every: float = 0.05):
    """Call fn until it returns a truthy value (returned) or the timeout passes (AssertionError)."""
    deadline = time.time() + timeout
    while True:
        out = fn()
        if out:
            return out
        if time.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {out!r})")
        time.sleep(every)


#: ``mgmatch`` through its real entry point, as its own process
MAIN = [sys.executable, "-c", "from mgmatch.cli import main; main()"]


class ServeProcess:
    """``mgmatch serve --port <free> ARGS`` as its own process on the memory store, entered once
    ``/readyz`` answers 200 (a process that exits first fails with its stderr); on exit it is
    terminated and its stderr kept in ``stderr``."""

    def __init__(self, *args: str, ready_s: float = 90.0):
        self.args, self.ready_s = [str(a) for a in args], ready_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr = ""

    def _ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            assert self.proc.poll() is None, self.proc.stderr.read()[-2000:]
            return False

    def __enter__(self) -> ServeProcess:
        self.proc = subprocess.Popen([*MAIN, "serve", "--port", str(self.port), *self.args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "MGMATCH_STORE": "memory"})
        try:
            poll(self._ready, timeout=self.ready_s, every=0.2)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        _, self.stderr = self.proc.communicate(timeout=20)


def features(i: int, dim: int = 4) -> list[float]:
    return [round(((i * 7 + k * 3) % 11) / 5.0 - 1.0, 3) for k in range(dim)]


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30)


def shipped_predictor_problem(name: str = "3v3") -> str | None:
    """Why the shipped predictor ``name`` cannot load in this checkout (None when it can)."""
    try:
        from mgmatch.models.runtime import load_predictor

        load_predictor(name)
    except Exception as err:  # a checkout mid-retraining: encoder and shipped model disagree
        return f"shipped predictor {name!r} does not load here: {err}"
    return None


class SpareRedis:
    """A redis-server of the test's own on a free port: without persistence (a restart loses everything), or
    with ``aof_dir`` an append-only file there, fsynced on every write (a restart keeps every write)."""

    def __init__(self, aof_dir: Path | None = None):
        self.exe = shutil.which("redis-server")
        self.port, self.proc, self.aof_dir = free_port(), None, aof_dir

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = (["--dir", str(self.aof_dir), "--appendonly", "yes", "--appendfsync", "always"]
                       if self.aof_dir is not None else ["--appendonly", "no"])
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      *persistence], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        poll(self.pings, timeout=20)

    def pings(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None


def queued_tickets(store, n, pool="p", ttl=60.0, start=0) -> list[str]:
    """Queue ``n`` one-player tickets (players u<start>…, one feature each, 1 ms apart); their ids."""
    from mgmatch.app.store import Ticket, new_ticket_id

    now = time.time()
    out = []
    for i in range(start, start + n):
        t = Ticket(new_ticket_id(pool), pool, [{"id": f"u{i}", "features": [float(i)]}], now + i * 1e-3, now + ttl)
        stored, created = store.create(t)
        assert created
        out.append(stored.id)
    return out


@contextlib.contextmanager
def served_grpc(tmp_path: Path, **env: str):
    """``mgmatch serve`` with HTTP and gRPC on free ports (in-memory store, embedded workers, ``env`` added):
    yields (the gRPC stub, the HTTP URL) once both answer; the process is stopped afterwards."""
    import grpc

    from mgmatch.app.rpc import matchmaker_pb2_grpc as pb_grpc

    http_port, grpc_port = free_port(), free_port()
    env = {**os.environ, "MGMATCH_CONFIG": str(service_config(tmp_path)), "OMP_NUM_THREADS": "1", **env}
    proc = subprocess.Popen([sys.executable, "-c", "from mgmatch.cli import main; main()", "serve",
                             "--port", str(http_port), "--grpc-port", str(grpc_port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=60)
        url = f"http://127.0.0.1:{http_port}"
        with client(url) as c:  # gRPC can answer before uvicorn has bound its port
            poll(lambda: _healthy(c), timeout=60)
        yield pb_grpc.MatchmakerStub(channel), url
    finally:
        channel.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _healthy(c) -> bool:
    try:
        return c.get("/healthz").status_code == 200
    except httpx.TransportError:
        return False
