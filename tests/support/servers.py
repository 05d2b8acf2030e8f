"""`kcoord serve` as a subprocess on a free loopback port, for the tests that need the real server process."""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.cli import describe_group
from kcoord.client import Client, KafkaError

ROOT = Path(__file__).resolve().parents[2]
# A server that serves connect groups, with sessions short enough for tests: a killed worker's units move on within
# seconds.
CONNECT_SESSION_MS, CONNECT_HEARTBEAT_MS = 3000, 300
CONNECT_SETTINGS = ("group.coordinator.rebalance.protocols=classic,consumer,connect",
                    "group.connect.min.session.timeout.ms=1000", f"group.connect.session.timeout.ms={CONNECT_SESSION_MS}",
                    "group.connect.min.heartbeat.interval.ms=100",
                    f"group.connect.heartbeat.interval.ms={CONNECT_HEARTBEAT_MS}")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from `sock`; ConnectionError if the server closes the connection first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    return buf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.log = log

    def describe(self, group: str) -> dict:
        with Client(self.bootstrap, timeout=10) as c:
            return describe_group(c, group)

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def check_alive(self) -> None:
        assert self.proc.poll() is None, f"the server exited with {self.proc.returncode}:\n{self.log_tail()}"


def serve(port: int, log: Path, *args: str, timeout: float = 30.0, preexec_fn=None) -> Server:
    """`kcoord serve --port PORT ARGS...`, output appended to `log`; returns once it serves. That is when its
    "kcoord listening on" line is in the log (written after the server accepts, and after what it loaded is logged), or,
    with the INFO lines turned off (--log-level above INFO), once a connection is accepted.
    `preexec_fn` runs in the child before kcoord starts (resource limits)."""
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kcoord.cli", "serve", "--port", str(port), *args],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=preexec_fn)
    srv = Server(proc, port, log)
    level = next((b for a, b in zip(args, args[1:]) if a == "--log-level"), "INFO").upper()
    deadline = time.monotonic() + timeout
    while True:
        if level in ("DEBUG", "INFO"):
            with open(log, "rb") as f:
                f.seek(start)
                if b"kcoord listening on " in f.read():
                    return srv
        else:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return srv
            except OSError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"kcoord serve did not listen on {port}:\n{srv.log_tail()}")
        time.sleep(0.02)


@contextmanager
def in_process(config) -> Iterator:
    """The real server (kcoord.server.Server for `config`), in this process on its own thread and event loop, so
    a test can read its counters; stopped on exit."""
    import asyncio
    import threading

    from kcoord.server import Server as KcoordServer

    srv = KcoordServer(config)
    started = threading.Event()
    box: dict = {}

    def run() -> None:
        async def main() -> None:
            box["stop"] = asyncio.Event()
            box["loop"] = asyncio.get_running_loop()
            try:
                await srv.start()
            except BaseException as e:
                box["error"] = e
                started.set()
                return
            started.set()
            await box["stop"].wait()
            await srv.close()
        asyncio.run(main())

    th = threading.Thread(target=run, daemon=True)
    th.start()
    assert started.wait(30), "the server did not start"
    if "error" in box:
        raise box["error"]
    try:
        yield srv
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        th.join(30)


class ThreadServer:
    """An in-process server on its own event loop thread, with a store backend the test controls (`in_process` is
    the same for a server with its own store)."""

    def __init__(self, records, **config) -> None:
        from kcoord.config import ServerConfig
        from kcoord.server import Server as KcoordServer

        self.server = KcoordServer(ServerConfig(port=0, **config), records=records)
        self.error: BaseException | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self.started.wait(10)

    def _main(self) -> None:
        import asyncio

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            await self.server.start()
            self.server._stop = self.stop
            self.started.set()
            await self.stop.wait()
            await self.server.close()

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e
            self.started.set()

    @property
    def port(self) -> int:
        return self.server.port

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


def commit_frame(corr: int, group: str, partition: int, offset: int) -> bytes:
    """An OffsetCommit v8 frame of one offset of topic t, outside any generation."""
    return wire.encode_request(8, 8, corr, "pipeline", wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name="t", partitions=[wire.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset)])]))


def start(*settings: str, loop: str = "auto") -> tuple[subprocess.Popen, int]:
    """`kcoord serve` on a free loopback port with Kafka-named settings, its output to a log file (never an unread
    pipe, which a talkative server would fill); returns once it serves (`serve`)."""
    args = ["--loop", loop]
    for s in settings:
        args += ["--set", s]
    srv = serve(free_port(), Path(tempfile.mkdtemp(prefix="kcoord-test-server-")) / "server.log", *args)
    return srv.proc, srv.port


def stop(proc: subprocess.Popen) -> int:
    proc.terminate()
    return proc.wait(timeout=10)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def api_versions(sock: socket.socket, version: int, correlation_id: int = 1) -> wire.ApiVersionsResponse:
    body = wire.ApiVersionsRequest(client_software_name="kcoord-test", client_software_version="1")
    if version < 3:
        body = wire.ApiVersionsRequest()
    sock.sendall(wire.encode_request(18, version, correlation_id, "test", body))
    corr, resp = wire.decode_response(18, version, recv_frame(sock))
    assert corr == correlation_id
    return resp


# ---- a store under a real server: a one-member group, its heartbeat, `kcoord serve --data-dir`, committing workers --

def form_group(c: Client, group: str, instance: str = "i") -> wire.JoinGroupResponse:
    """A one-member classic group, Stable: the JoinGroup's answer (member id, generation)."""
    j = c.call(11, 5, wire.JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                            member_id="", group_instance_id=instance, protocol_type="consumer",
                                            protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    s = c.call(14, 5, wire.SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                            group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                                            assignments=[wire.SyncGroupRequestAssignment(member_id=j.member_id,
                                                                                         assignment=b"a")]))
    assert s.error_code == E.NONE
    return j


def heartbeat(c: Client, group: str, j: wire.JoinGroupResponse, instance: str = "i") -> int:
    return c.call(12, 4, wire.HeartbeatRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                               group_instance_id=instance)).error_code


def serve_dir(data_dir: Path, port: int, log: Path, *settings: str) -> subprocess.Popen:
    args = ["--data-dir", str(data_dir), "--topic", "t:16", "--set", "group.initial.rebalance.delay.ms=0"]
    for s in settings:
        args += ["--set", s]
    return serve(port, log, *args).proc


class Ledger:
    """What each worker sent and what the server acknowledged, per (group, partition)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[str, int], int] = {}
        self.sent: dict[tuple[str, int], int] = {}
        self.acks = 0
        self.rejoins = 0


class Worker(threading.Thread):
    """A static member that commits increasing offsets for its own partition and now and then restarts
    (a static rejoin with a new member id), until the server goes away."""

    def __init__(self, port: int, group: str, iid: str, partition: int, ledger: Ledger, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.group, self.iid, self.partition = port, group, iid, partition
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.member_id = ""
        self.generation = -1

    def run(self) -> None:
        try:
            with Client(f"127.0.0.1:{self.port}", client_id=self.iid, timeout=15) as c:
                self.c = c
                self.rejoin()
                while True:
                    if self.rng.random() < 0.08:
                        self.member_id = ""  # the member's process restarts: same instance id, new member id
                        self.rejoin()
                        with self.ledger.lock:
                            self.ledger.rejoins += 1
                        continue
                    self.commit()
        except (KafkaError, OSError, struct.error):
            return  # the server was killed

    def rejoin(self) -> None:
        while True:
            j = self.c.call(11, 5, wire.JoinGroupRequest(
                group_id=self.group, session_timeout_ms=10_000, rebalance_timeout_ms=5_000, member_id=self.member_id,
                group_instance_id=self.iid, protocol_type="consumer",
                protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            if j.error_code != E.NONE:
                self.member_id = ""
                continue
            self.member_id, self.generation = j.member_id, j.generation_id
            assignments = [wire.SyncGroupRequestAssignment(member_id=m.member_id, assignment=m.member_id.encode())
                           for m in j.members] if j.leader == j.member_id else []
            s = self.c.call(14, 5, wire.SyncGroupRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=self.iid, protocol_type="consumer", protocol_name="range", assignments=assignments))
            if s.error_code == E.NONE:
                return

    def commit(self) -> None:
        key = (self.group, self.partition)
        with self.ledger.lock:
            value = self.ledger.sent.get(key, 0) + 1
            self.ledger.sent[key] = value
        r = self.c.call(8, 8, wire.OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.generation, member_id=self.member_id,
            group_instance_id=self.iid, topics=[wire.OffsetCommitRequestTopic(name="t", partitions=[
                wire.OffsetCommitRequestPartition(partition_index=self.partition, committed_offset=value)])]))
        if r.topics[0].partitions[0].error_code == E.NONE:
            with self.ledger.lock:
                self.ledger.acked[key] = value
                self.ledger.acks += 1
        else:
            self.rejoin()
