"""A Redis Cluster on loopback ports, for the chaos run and the tests: started, failed over, stopped.

:class:`LocalCluster` starts ``masters × (1 + replicas)`` ``redis-server`` processes with
``--cluster-enabled yes`` (each its own directory, ``nodes.conf`` and append-only file), joins them
with ``redis-cli --cluster create … --cluster-replicas N --cluster-yes`` and waits until every node
reports ``cluster_state:ok`` and every replica's link to its master is up. It can then move a
master's role to its replica, gracefully (``CLUSTER FAILOVER`` sent to the replica: the master
stops taking writes, the replica catches up with everything the master acknowledged, then takes
over, so nothing acknowledged is lost) or by SIGKILL of the master (the replica is elected after
``cluster-node-timeout``; replication is asynchronous, so writes it had not received are lost),
and start a killed node again (it rejoins as a replica of the new master).

Every process it started is stopped by :meth:`LocalCluster.stop`.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

SLOTS = 16384


class ClusterStartError(RuntimeError):
    """The cluster could not be started or did not settle; the message says why."""


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_node_port(taken: set[int]) -> int:
    """A free loopback port whose cluster bus port (+10000) is free too (so at most 55535)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port <= 55535 and not {port, port + 10000} & taken and _bindable(port + 10000):
            return port
    raise ClusterStartError("no free pair of loopback ports (port, port + 10000) found")


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


@dataclass(frozen=True)
class Node:
    """One line of ``CLUSTER NODES``: the node's id and port, ``master`` or ``replica``, the id of
    its master (replicas), whether the cluster marks it failing, and how many slots it serves."""

    id: str
    port: int
    role: str
    master_id: str | None
    failing: bool
    slots: int


def parse_nodes(reply: dict) -> list[Node]:
    """``CLUSTER NODES`` as redis-py parses it (address → fields) → nodes."""
    out = []
    for addr, f in reply.items():
        flags = f["flags"].split(",")
        slots = sum(int(hi) - int(lo) + 1 for lo, hi in ((r[0], r[-1]) for r in f["slots"]))
        out.append(Node(f["node_id"], int(addr.split("@")[0].rsplit(":", 1)[1]),
                        "master" if "master" in flags else "replica",
                        None if f["master_id"] == "-" else f["master_id"], "fail" in flags or "fail?" in flags, slots))
    return out


class LocalCluster:
    """A Redis Cluster of ``masters`` masters, each with ``replicas`` replicas, on loopback ports in
    ``workdir`` (AOF with ``appendfsync``; no RDB snapshots)."""

    def __init__(self, workdir: Path, masters: int = 3, replicas: int = 1, appendfsync: str = "always",
                 node_timeout_ms: int = 2000, server: str | None = None, cli: str | None = None):
        self.server = server or shutil.which("redis-server")
        self.cli = cli or shutil.which("redis-cli")
        if self.server is None or self.cli is None:
            raise ClusterStartError("redis-server and redis-cli must be on PATH to start a cluster")
        self.dir, self.masters, self.replicas = Path(workdir), masters, replicas
        self.appendfsync, self.node_timeout_ms = appendfsync, node_timeout_ms
        self.ports: list[int] = []
        for _ in range(masters * (1 + replicas)):
            self.ports.append(_free_node_port({q + d for q in self.ports for d in (0, 10000)}))
        self.procs: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        """The store URL (any node will do; the client discovers the rest)."""
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def log(self, port: int) -> Path:
        return self.dir / str(port) / "redis.log"

    # ---------------------------------------------------------------- processes

    def start_node(self, port: int) -> None:
        """Start (or start again) the node on ``port``; its nodes.conf and AOF make it rejoin."""
        d = self.dir / str(port)
        d.mkdir(parents=True, exist_ok=True)
        cmd = [self.server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d), "--daemonize", "no",
               "--logfile", str(d / "redis.log"), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
               "--cluster-node-timeout", str(self.node_timeout_ms), "--appendonly", "yes",
               "--appendfsync", self.appendfsync, "--save", ""]
        self.procs[port] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)

    def client(self, port: int, timeout_s: float = 5.0) -> redis.Redis:
        """A plain client of one node (for administration: CLUSTER …, INFO, FLUSHALL)."""
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout_s, socket_connect_timeout=2,
                           decode_responses=True)

    def _wait_ping(self, port: int, deadline: float) -> None:
        while True:
            p = self.procs.get(port)
            if p is None or p.poll() is not None:
                raise ClusterStartError(f"redis-server on {port} exited: {_tail(self.log(port))}")
            try:
                with self.client(port) as c:
                    if c.ping():
                        return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ClusterStartError(f"redis-server on {port} did not answer: {_tail(self.log(port))}")
            time.sleep(0.05)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start every node, create the cluster, wait until it is healthy."""
        deadline = time.monotonic() + timeout_s
        try:
            for port in self.ports:
                self.start_node(port)
            for port in self.ports:
                self._wait_ping(port, deadline)
            cmd = [self.cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                   "--cluster-replicas", str(self.replicas), "--cluster-yes"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
            if done.returncode != 0:
                raise ClusterStartError(f"redis-cli --cluster create failed: {(done.stdout + done.stderr)[-400:]}")
            self.wait_healthy(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port``."""
        p = self.procs.get(port)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def running(self) -> list[int]:
        return [port for port in self.ports if port in self.procs and self.procs[port].poll() is None]

    # ---------------------------------------------------------------- state

    def nodes(self) -> list[Node]:
        """The cluster as one live node sees it."""
        last: Exception | None = None
        for port in self.running():
            try:
                with self.client(port) as c:
                    return parse_nodes(c.execute_command("CLUSTER NODES"))
            except redis.RedisError as err:
                last = err
        raise ClusterStartError(f"no node of the cluster answers: {last}")

    def _healthy(self) -> str | None:
        """None when healthy, else what is not yet (for the timeout message)."""
        running = set(self.running())
        for port in running:
            try:
                with self.client(port) as c:
                    info = c.cluster("info")
                    if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != SLOTS:
                        return f"node {port}: cluster_state {info.get('cluster_state')}"
                    nodes = parse_nodes(c.execute_command("CLUSTER NODES"))
                    if c.info("replication").get("role") == "slave" and \
                            c.info("replication").get("master_link_status") != "up":
                        return f"node {port}: replica link to its master is down"
            except redis.RedisError as err:
                return f"node {port}: {err}"
            live = [n for n in nodes if n.port in running]
            if any(n.failing for n in live):
                return f"node {port} sees a live node as failing"
            if sum(n.slots for n in nodes if n.role == "master" and n.port in running) != SLOTS:
                return f"node {port}: the live masters do not serve every slot yet"
            if sum(n.role == "master" and n.slots > 0 for n in live) != self.masters:
                return f"node {port}: sees {sum(n.role == 'master' for n in live)} masters"
        return None

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """Until every running node agrees: all slots served by live masters, state ok, replicas linked."""
        deadline = time.monotonic() + timeout_s
        while (why := self._healthy()) is not None:
            if time.monotonic() > deadline:
                raise ClusterStartError(f"the cluster did not settle within {timeout_s:g} s: {why}")
            time.sleep(0.1)

    def master_of(self, key: str) -> Node:
        """The master that serves ``key``'s slot now."""
        with self.client(self.running()[0]) as c:
            slot = int(c.execute_command("CLUSTER KEYSLOT", key))
            for lo, hi, master, *_ in c.execute_command("CLUSTER SLOTS"):
                if int(lo) <= slot <= int(hi):
                    port = int(master[1])
                    return next(n for n in self.nodes() if n.port == port)
        raise ClusterStartError(f"no master serves the slot of {key!r}")

    def replica_of(self, master: Node) -> Node:
        live = set(self.running())
        for n in self.nodes():
            if n.master_id == master.id and n.port in live and not n.failing:
                return n
        raise ClusterStartError(f"master {master.port} has no live replica")

    # ---------------------------------------------------------------- chaos

    def failover(self, master: Node, timeout_s: float = 30.0) -> Node:
        """Gracefully hand ``master``'s slots to its replica (``CLUSTER FAILOVER`` on the replica: it
        catches up with every write the master acknowledged first). Returns the new master."""
        replica = self.replica_of(master)
        with self.client(replica.port) as c:
            c.execute_command("CLUSTER FAILOVER")
        deadline = time.monotonic() + timeout_s
        while True:
            roles = {n.port: n.role for n in self.nodes()}
            if roles.get(replica.port) == "master" and roles.get(master.port) == "replica" and self._healthy() is None:
                return next(n for n in self.nodes() if n.port == replica.port)
            if time.monotonic() > deadline:
                raise ClusterStartError(f"CLUSTER FAILOVER {master.port} → {replica.port} did not finish in "
                                        f"{timeout_s:g} s: {self._healthy()}")
            time.sleep(0.1)

    def kill_master(self, master: Node, timeout_s: float = 60.0) -> Node:
        """SIGKILL ``master`` and wait until its replica was elected (after ``cluster-node-timeout``).
        Writes the replica had not received are lost (replication is asynchronous). Returns the new master."""
        replica = self.replica_of(master)
        self.kill(master.port)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with self.client(replica.port) as c:
                    if c.info("replication").get("role") == "master" and c.cluster("info").get("cluster_state") == "ok":
                        return next(n for n in self.nodes() if n.port == replica.port)
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ClusterStartError(f"replica {replica.port} did not take over from {master.port} in {timeout_s:g} s")
            time.sleep(0.1)

    def restart(self, port: int, timeout_s: float = 60.0) -> None:
        """Start a killed node again and wait until it rejoined (as a replica) and the cluster is healthy."""
        self.start_node(port)
        deadline = time.monotonic() + timeout_s
        self._wait_ping(port, deadline)
        self.wait_healthy(max(1.0, deadline - time.monotonic()))

    def flushall(self) -> None:
        """FLUSHALL on every master (replicas follow)."""
        for n in self.nodes():
            if n.role == "master" and n.port in self.running():
                with self.client(n.port) as c:
                    c.flushall()
