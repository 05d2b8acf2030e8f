"""A kcoord cluster for the tests and benches: `kcoord serve --store postgresql://...` nodes as subprocesses, node N
on 127.0.0.N, over one real PostgreSQL database (tests/support/postgres.py). Nodes can be killed, paused, resumed and
restarted; who owns what is read from the database itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from kcoord import wire
from kcoord.client import Client
from kcoord.pgstore import partition_for

from .faketime import WallClock
from .pgproxy import PgProxy, address
from .waits import poll_value

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--set", "broker.session.timeout.ms=3000", "--set", "broker.heartbeat.interval.ms=500")


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_until(what, timeout: float, message: str, interval: float = 0.05):
    """what() until it is truthy; that value, or AssertionError naming `message` after `timeout` seconds."""
    done, value = poll_value(what, timeout, interval)
    if not done:
        raise AssertionError(f"{message} (after {timeout} s)")
    return value


class Node:
    """One `kcoord serve` process. With `proxied`, it reaches PostgreSQL through a PgProxy of its own (to cut,
    stall or reset it alone); with `clocked`, its wall clock runs under libfaketime (to shift it)."""

    def __init__(self, cluster: KCluster, node_id: int, args: tuple[str, ...], *, proxied: bool = False,
                 clocked: bool = False, incarnation: int = 0) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.host = f"127.0.0.{node_id}"
        self.port = free_port(self.host)
        self.args = args
        name = f"node{node_id}" + (f"-{incarnation}" if incarnation else "")
        self.log = cluster.workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.proxy: PgProxy | None = None
        if proxied:
            self.proxy = PgProxy(address(cluster.dsn)).start()
        self.clock: WallClock | None = None
        if clocked:
            (cluster.workdir / f"{name}.clock").mkdir(exist_ok=True)
            self.clock = WallClock(cluster.workdir / f"{name}.clock")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> Node:
        dsn = self.proxy.dsn(self.cluster.dsn) if self.proxy is not None else self.cluster.dsn
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kcoord.cli", "serve", "--host", self.host, "--port", str(self.port),
                 "--store", dsn, "--set", f"node.id={self.node_id}", "--log-format", "json",
                 *self.args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.clock.env() if self.clock else {})})
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise AssertionError(f"node {self.node_id} did not listen:\n{self.log_tail()}") from None
                time.sleep(0.02)

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def close(self) -> None:
        """Kill the process if it runs (resumed first: a stopped process takes no SIGKILL until continued) and close
        its proxy."""
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.kill()
            self.proc.wait()
        if self.proxy is not None:
            self.proxy.close()

    def events(self) -> list[dict]:
        """Its JSON log lines."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(errors="replace").splitlines()
                if line.startswith("{")]


class KCluster:
    """`nodes` kcoord nodes over the database at `dsn`; `args` are given to every node."""

    def __init__(self, dsn: str, workdir: Path, nodes: int = 3, args: tuple[str, ...] = FAST, *,
                 proxied: bool = False, clocked: bool = False) -> None:
        self.dsn = dsn
        self.workdir = workdir
        self.args = args
        self.proxied, self.clocked = proxied, clocked
        self.nodes = [Node(self, i + 1, args, proxied=proxied, clocked=clocked) for i in range(nodes)]
        self.replaced: list[Node] = []  # processes a same-node.id restart took the place of
        self.db = psycopg.connect(dsn, autocommit=True)

    def __enter__(self) -> KCluster:
        for n in self.nodes:
            n.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for n in self.nodes + self.replaced:
            n.close()
        self.db.close()

    def restart_as_new_process(self, node_id: int, timeout: float = 30.0) -> Node:
        """Start another process with `node_id` while the current one goes on (paused, say), on a port of its own;
        kcoord refuses it while the first one's registration is live, so it is started again until it is taken.
        It takes the old one's place in `nodes`; the old one stays in `replaced`."""
        old = self.node(node_id)
        n = len([x for x in self.replaced if x.node_id == node_id]) + 1
        new = Node(self, node_id, self.args, proxied=self.proxied, clocked=self.clocked, incarnation=n)
        deadline = time.monotonic() + timeout
        while True:
            try:
                new.start(timeout=max(1.0, deadline - time.monotonic()))
                break
            except AssertionError:
                if "is in use by a live node" not in new.log_tail() or time.monotonic() > deadline:
                    new.close()
                    raise
                time.sleep(0.2)
        self.nodes[node_id - 1] = new
        self.replaced.append(old)
        return new

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.alive)

    def partitions(self) -> int:
        return int(self.db.execute("SELECT value FROM kcoord_meta WHERE name = 'partitions'").fetchone()[0])

    def owners(self) -> dict[int, int | None]:
        """partition -> the node whose lease on it is live (None: free or run out), by the database's clock."""
        return {p: (n if live else None) for p, n, live in self.db.execute(
            "SELECT partition, node_id, expires_at > clock_timestamp() FROM kcoord_leases").fetchall()}

    def owner_of(self, group: str) -> int | None:
        return self.owners().get(partition_for(group, self.partitions()))

    def balanced(self, live: list[int]) -> bool:
        """Every partition held by one of `live`, each holding its share (ceil or floor of partitions / nodes)."""
        owners = self.owners()
        counts = {n: 0 for n in live}
        for o in owners.values():
            if o not in counts:
                return False
            counts[o] += 1
        share = len(owners) / len(live)
        return all(int(share) <= c <= -(-len(owners) // len(live)) for c in counts.values())

    def committed(self) -> dict[tuple[str, str, int], int]:
        """Every committed offset in the database: (group, topic, partition) -> offset."""
        from kcoord import records as R
        out = {}
        for key, value in self.db.execute("SELECT key, value FROM kcoord_records WHERE partition >= 0").fetchall():
            rec = R.decode(bytes(key), bytes(value))
            if rec.kind == "offset":
                out[(rec.key.group, rec.key.topic, rec.key.partition)] = rec.value.offset
        return out

    def two_writers(self) -> list[str]:
        """From the write log: every partition whose writes (in sequence order) went back to an older epoch, or
        whose one epoch was written by two nodes. [] when each partition had one writer at a time."""
        problems = []
        rows = self.db.execute("SELECT partition, seq, epoch, node_id FROM kcoord_writes ORDER BY partition, seq")
        last: dict[int, int] = {}
        writer: dict[tuple[int, int], int] = {}
        for p, seq, epoch, node in rows.fetchall():
            if epoch < last.get(p, 0):
                problems.append(f"partition {p}: write {seq} at epoch {epoch} after epoch {last[p]}")
            last[p] = max(epoch, last.get(p, 0))
            if writer.setdefault((p, epoch), node) != node:
                problems.append(f"partition {p}: epoch {epoch} written by nodes {writer[(p, epoch)]} and {node}")
        return problems


def group_on(cluster: KCluster, node_id: int, prefix: str) -> str:
    """A group id whose coordinator partition `node_id` holds."""
    owners = cluster.owners()
    parts = cluster.partitions()
    for i in range(10_000):
        name = f"{prefix}-{i}"
        if owners.get(partition_for(name, parts)) == node_id:
            return name
    raise AssertionError(f"no group of node {node_id} among 10,000 names")


def find_coordinator(bootstrap: str, group: str) -> wire.FindCoordinatorResponse:
    with Client(bootstrap) as c:
        return c.request(wire.FindCoordinatorRequest(key=group, key_type=0), 3)
