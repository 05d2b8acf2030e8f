"""A load generator speaking the Kafka protocol through kcoord's own codec: synthetic members, not clients.

It runs in the benchmark process while the server runs in its own (`ServerProcess`), so each has a core.
Requests are pre-encoded and pipelined per connection; responses are split with the compiled FrameReader.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass

from kcoord import wire


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A classic group's record holds every member (Kafka's GroupMetadataValue), and it must fit message.max.bytes, 1 MiB
# by default as on Kafka: about 7,000 members of the load generator's size. The benches' 10,000-member classic
# groups raise it, as a Kafka operator running groups that large raises the offsets topic's max.message.bytes.
LARGE_CLASSIC_GROUPS = "message.max.bytes=16777216"

class ServerProcess:
    """`kcoord serve` in a subprocess on a free loopback port, its log in a file (a pipe nobody reads would stop
    the server once 64 KiB of log waited in it)."""

    def __init__(self, *settings: str, topics: tuple[str, ...] = ("orders:12",), data_dir: str | None = None,
                 pythonpath: str | None = None, args: tuple[str, ...] = (), log_path: str | None = None,
                 port: int | None = None) -> None:
        """`pythonpath`: run the kcoord found there (another build, e.g. a baseline commit's) instead of this one.
        `args`: more `kcoord serve` options. `log_path`: where its log goes (default: a temporary file). `port`:
        the one to wait for (default: a free one, given as --port; with `listeners=` set, one of theirs)."""
        self.port = port or free_port()
        # -P: with `pythonpath`, the working directory (the repo root, where pytest runs) must not come first on
        # sys.path, or `-m kcoord.cli` would import this tree's kcoord and not the build asked for
        args = [sys.executable, *(("-P",) if pythonpath is not None else ()), "-m", "kcoord.cli", "serve", "--port",
                str(self.port), *args]
        if data_dir is not None:
            args += ["--data-dir", data_dir]
        for t in topics:
            args += ["--topic", t]
        for s in settings:
            args += ["--set", s]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        self.log = open(log_path, "w+b") if log_path is not None else tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.log.seek(0)
                    raise RuntimeError(f"server did not start: {self.log.read().decode(errors='replace')}") \
                        from None
                time.sleep(0.05)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server process has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = wire.FrameReader()
        self.pending: list[bytes] = []
        self.corr = 0

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1", ssl=None, server_hostname: str | None = None) -> Conn:
        """`ssl`: a client SSLContext for a TLS listener (`server_hostname`: the name its certificate is checked
        against)."""
        r, w = await asyncio.open_connection(host, port, ssl=ssl, server_hostname=server_hostname if ssl else None)
        return cls(r, w)

    def frame(self, api_key: int, version: int, body) -> bytes:
        self.corr += 1
        return wire.encode_request(api_key, version, self.corr, "loadgen", body)

    async def responses(self, n: int) -> list[bytes]:
        """The next n response frames (without size prefixes)."""
        out = self.pending
        while len(out) < n:
            data = await self.reader.read(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            out.extend(self.frames.feed(data))
        self.pending = out[n:]
        return out[:n]

    def close(self) -> None:
        self.writer.close()


@dataclass
class Group:
    member_ids: list[str]
    instance_ids: list[str]
    generation: int
    join_s: float  # first JoinGroup sent -> last JoinGroup answered
    stable_s: float  # first JoinGroup sent -> last SyncGroup answered


async def form_group(port: int, group: str, members: int, connections: int) -> Group:
    """`members` static members join over `connections` connections, the leader assigns, everyone syncs."""
    conns = [await Conn.open(port) for _ in range(connections)]
    iids = [f"{group}-instance-{i:05d}" for i in range(members)]
    meta = b"\x00\x00" + wire.ConsumerProtocolSubscription(topics=["orders"]).encode(0)
    by_conn: list[list[int]] = [list(range(c, members, connections)) for c in range(connections)]
    t0 = time.perf_counter()
    for c, idx in zip(conns, by_conn):
        c.writer.write(b"".join(c.frame(11, 9, wire.JoinGroupRequest(
            group_id=group, session_timeout_ms=45_000, rebalance_timeout_ms=60_000, member_id="",
            group_instance_id=iids[i], protocol_type="consumer",
            protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=meta)])) for i in idx))
    joined = await asyncio.gather(*(c.responses(len(idx)) for c, idx in zip(conns, by_conn)))
    t_join = time.perf_counter()
    resp: dict[int, wire.JoinGroupResponse] = {}
    for idx, frames in zip(by_conn, joined):
        for i, f in zip(idx, frames):
            resp[i] = wire.decode_response(11, 9, f)[1]
    member_ids = [resp[i].member_id for i in range(members)]
    gen = resp[0].generation_id
    assert all(r.error_code == 0 and r.generation_id == gen for r in resp.values()), "join failed"
    leader = resp[0].leader
    assignment = b"\x00\x00" + wire.ConsumerProtocolAssignment(assigned_partitions=[]).encode(0)
    for c, idx in zip(conns, by_conn):
        frames = []
        for i in idx:
            assigns = [wire.SyncGroupRequestAssignment(member_id=m, assignment=assignment) for m in member_ids] \
                if member_ids[i] == leader else []
            frames.append(c.frame(14, 5, wire.SyncGroupRequest(
                group_id=group, generation_id=gen, member_id=member_ids[i], group_instance_id=iids[i],
                protocol_type="consumer", protocol_name="range", assignments=assigns)))
        c.writer.write(b"".join(frames))
    synced = await asyncio.gather(*(c.responses(len(idx)) for c, idx in zip(conns, by_conn)))
    t_stable = time.perf_counter()
    for frames in synced:
        for f in frames:
            assert wire.decode_response(14, 5, f)[1].error_code == 0, "sync failed"
    for c in conns:
        c.close()
    return Group(member_ids, iids, gen, t_join - t0, t_stable - t0)


@dataclass
class Load:
    requests: int  # answered
    seconds: float
    latencies_us: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def percentile(self, p: float) -> float:
        s = sorted(self.latencies_us)
        return s[min(len(s) - 1, int(len(s) * p / 100))]


async def heartbeat_load(port: int, group: Group, connections: int, seconds: float,
                         rate: float | None = None, connect=None) -> Load:
    """Every member heartbeats: each connection sends one heartbeat for each of its members in one write,
    waits for all the answers, and repeats for `seconds`; as fast as the server answers, or paced so that
    all connections together send `rate` heartbeats a second (then latency is not queueing behind itself)."""
    gid = group.instance_ids[0].rsplit("-instance-", 1)[0]
    return await request_load(port, [(12, 4, wire.HeartbeatRequest(
        group_id=gid, generation_id=group.generation, member_id=mid, group_instance_id=iid))
        for mid, iid in zip(group.member_ids, group.instance_ids)], connections, seconds, rate, connect)


async def request_load(port: int, requests: list[tuple[int, int, object]], connections: int, seconds: float,
                       rate: float | None = None, connect=None) -> Load:
    """The same requests over and over: request i goes on connection i % connections, each connection writes all
    of its requests at once and waits for their answers, for `seconds` (or paced at `rate` requests a second).
    `connect(port)`: how a connection is opened (default Conn.open; e.g. TLS and a SASL login first)."""
    conns = [await (connect or Conn.open)(port) for _ in range(connections)]
    n = len(requests)
    batches = [b"".join(c.frame(*requests[i]) for i in range(ci, n, connections)) for ci, c in enumerate(conns)]
    sizes = [len(range(ci, n, connections)) for ci in range(connections)]
    count = 0
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def drive(ci: int, c: Conn, batch: bytes, size: int) -> None:
        nonlocal count
        interval = size * connections / rate if rate else 0.0
        next_send = time.perf_counter() + interval * ci / connections  # connections spread over the interval
        while time.perf_counter() < stop:
            if interval:
                await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
                next_send += interval
            t = time.perf_counter()
            c.writer.write(batch)
            got = 0
            while got < size:
                data = await c.reader.read(1 << 20)
                if not data:
                    raise ConnectionError("server closed the connection")
                frames = c.frames.feed(data)
                now = time.perf_counter()
                lat.extend([(now - t) * 1e6] * len(frames))
                got += len(frames)
            count += size

    t0 = time.perf_counter()
    await asyncio.gather(*(drive(ci, c, b, s) for ci, (c, b, s) in enumerate(zip(conns, batches, sizes))))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    return Load(count, elapsed, lat)


@dataclass
class ConsumerGroupMembers:
    group: str
    member_ids: list[str]
    epochs: list[int]
    join_s: float  # every member's join answered
    stable_s: float  # every member at the group epoch with its assignment acknowledged (the last round that moved)


async def form_consumer_group(port: int, group: str, members: int, connections: int,
                              topic: str = "orders", quiet_s: float = 1.2) -> ConsumerGroupMembers:
    """`members` KIP-848 members join (ConsumerGroupHeartbeat v1, epoch 0), then heartbeat in rounds, each reporting
    the partitions it was given, until every one is at the group epoch and nothing moves (form_consumer_groups for
    one group)."""
    return (await form_consumer_groups(port, [group], members, connections, topic, quiet_s=quiet_s))[0]


def consumer_heartbeats(g: ConsumerGroupMembers) -> list[tuple[int, int, object]]:
    """A regular heartbeat of every member (epoch only: what librdkafka sends between reconciliations)."""
    return [(68, 1, wire.ConsumerGroupHeartbeatRequest(group_id=g.group, member_id=mid, member_epoch=epoch))
            for mid, epoch in zip(g.member_ids, g.epochs)]


async def commit_load(port: int, connections: int, seconds: float, partitions: int = 1, depth: int = 1,
                      acked: dict[int, int] | None = None, host: str = "127.0.0.1") -> Load:
    """Each connection is one consumer committing `partitions` offsets per OffsetCommit (its own group,
    `commit-<connection>`, the simple-consumer form) with `depth` requests in flight (pipelined: an answer's arrival
    sends the next), for `seconds`. Every answer is checked. The offsets of a connection count up from 1; with
    `acked`, the highest offset each connection saw acknowledged is kept there (connection -> offset)."""
    conns = [await Conn.open(port, host) for _ in range(connections)]
    count = 0
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def drive(ci: int, c: Conn) -> None:
        nonlocal count
        offset = 0
        sent: deque[tuple[float, int]] = deque()  # (when, offset) of each request in flight, in order

        def frame() -> bytes:
            nonlocal offset
            offset += 1
            sent.append((time.perf_counter(), offset))
            return c.frame(8, 8, wire.OffsetCommitRequest(
                group_id=f"commit-{ci}", generation_id_or_member_epoch=-1, member_id="", topics=[
                    wire.OffsetCommitRequestTopic(name="orders", partitions=[
                        wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
                        for p in range(partitions)])]))

        c.writer.write(b"".join(frame() for _ in range(depth)))
        while sent:
            data = await c.reader.read(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            now = time.perf_counter()
            more = []
            for resp in c.frames.feed(data):
                t, done = sent.popleft()
                lat.append((now - t) * 1e6)
                body = wire.decode_response(8, 8, resp)[1]
                assert all(p.error_code == 0 for t_ in body.topics for p in t_.partitions), "commit failed"
                count += 1
                if acked is not None:
                    acked[ci] = done
                if now < stop:
                    more.append(frame())
            if more:
                c.writer.write(b"".join(more))

    t0 = time.perf_counter()
    await asyncio.gather(*(drive(ci, c) for ci, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    return Load(count, elapsed, lat)


def fsync_latencies(directory: str, n: int = 2_000, size: int = 4096) -> list[float]:
    """The disk's own durable write, in µs: `n` appends of `size` bytes to a new file in `directory`, each followed
    by an fsync (what a commit's write-ahead log append costs the disk, with nothing of SQLite's or kcoord's)."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"\x5a" * size
    out = []
    try:
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, block, i * size)
            os.fsync(fd)
            out.append((time.perf_counter() - t) * 1e6)
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def error_of(api_key: int, version: int, frame: bytes) -> int:
    """The error code of one response frame: the first partition's error for OffsetCommit (0 when every partition
    was accepted), the top-level error_code otherwise."""
    body = wire.decode_response(api_key, version, frame)[1]
    if api_key == wire.OffsetCommitRequest.API_KEY:
        return next((p.error_code for t in body.topics for p in t.partitions if p.error_code), 0)
    return body.error_code


CLOSED = -1  # CheckedLoad.errors' code for a request whose connection the server closed before answering it


@dataclass
class CheckedLoad:
    ok: int  # answered with error code 0
    errors: dict[int, int]  # error code (CLOSED: the connection closed unanswered) -> requests
    seconds: float
    reconnects: int = 0  # connections the server closed (each was opened again)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


async def checked_load(targets: list[tuple[str, int, list[tuple[int, int, object]]]], connections: int,
                       seconds: float) -> CheckedLoad:
    """request_load against several servers at once (a cluster's nodes: each target is (host, port, the requests
    for it)), with every answer decoded and its error code counted. Each target gets up to `connections`
    connections; each connection writes all of its requests at once and waits for their answers, for `seconds`.
    A connection the server closes is counted (its unanswered requests as CLOSED errors) and opened again."""
    plans = []
    for host, port, requests in targets:
        n = min(connections, len(requests))
        for ci in range(n):
            plans.append((host, port, requests[ci::n]))
    ok = reconnects = 0
    errors: dict[int, int] = {}
    stop = time.perf_counter() + seconds
    conns: list[Conn] = []

    async def drive(host: str, port: int, requests: list[tuple[int, int, object]]) -> None:
        nonlocal ok, reconnects
        kinds = [(r[0], r[1]) for r in requests]
        c = None
        while time.perf_counter() < stop:
            if c is None:
                try:
                    c = await Conn.open(port, host)
                except OSError:
                    await asyncio.sleep(0.01)
                    continue
                conns.append(c)
                batch = b"".join(c.frame(*r) for r in requests)
            c.writer.write(batch)
            got = 0
            try:
                while got < len(kinds):
                    data = await c.reader.read(1 << 20)
                    if not data:
                        raise ConnectionError("server closed the connection")
                    for frame in c.frames.feed(data):
                        err = error_of(*kinds[got], frame)
                        got += 1
                        if err:
                            errors[err] = errors.get(err, 0) + 1
                        else:
                            ok += 1
            except OSError:  # ConnectionError included
                errors[CLOSED] = errors.get(CLOSED, 0) + len(kinds) - got
                reconnects += 1
                c.close()
                c = None

    t0 = time.perf_counter()
    await asyncio.gather(*(drive(*plan) for plan in plans))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    return CheckedLoad(ok, errors, elapsed, reconnects)


@dataclass
class ConnectGroupWorkers:
    group: str
    member_ids: list[str]
    epochs: list[int]
    computations: int  # Prepare + Install pairs the workers were asked for and made
    join_s: float
    stable_s: float


async def form_connect_group(port: int, group: str, workers: int, connections: int,
                             quiet_s: float = 1.2) -> ConnectGroupWorkers:
    """`workers` connect workers join at once (ConnectGroupHeartbeat v0 on kcoord's default API keys, epoch 0),
    then heartbeat in rounds reporting what they own; a worker told to compute makes a Prepare and an Install
    giving every member one connector of its own (c<i>). Formed as `form_consumer_group` decides it: a round
    that moves nothing, after `quiet_s` without requests, moves nothing either."""
    hb_key, prep_key, inst_key = 1000, 1001, 1002
    conns = [await Conn.open(port) for _ in range(connections)]
    ids = [f"{group}-worker-{i:05d}" for i in range(workers)]
    by_conn = [list(range(c, workers, connections)) for c in range(connections)]
    epochs = [0] * workers
    owned: list[list[str]] = [[] for _ in range(workers)]
    assignors = [wire.ConnectGroupHeartbeatRequestAssignor(name="ica", minimum_version=1, maximum_version=2, reason=0,
                                                          version=2, metadata=b"url")]
    asked: list[int] = []
    computations = 0

    def units(names: list[str]) -> wire.ConnectGroupHeartbeatRequestConnectorsAndTasks:
        return wire.ConnectGroupHeartbeatRequestConnectorsAndTasks(connectors=names, tasks=[])

    async def round_(make) -> int:
        for c, idx in zip(conns, by_conn):
            c.writer.write(b"".join(c.frame(hb_key, 0, make(i)) for i in idx))
        answers = await asyncio.gather(*(c.responses(len(idx)) for c, idx in zip(conns, by_conn)))
        moved = 0
        asked.clear()
        for idx, frames in zip(by_conn, answers):
            for i, f in zip(idx, frames):
                r = wire.decode_response(hb_key, 0, f)[1]
                assert r.error_code == 0, (ids[i], r.error_code, r.error_message)
                moved += r.member_epoch != epochs[i] or r.assignment is not None
                epochs[i] = r.member_epoch
                if r.assignment is not None:
                    owned[i] = list(r.assignment.connectors_and_tasks.connectors)
                if r.should_compute_assignment:
                    asked.append(i)
        return moved

    async def compute(i: int) -> None:
        nonlocal computations
        c = conns[i % connections]
        c.writer.write(c.frame(prep_key, 0, wire.ConnectGroupPrepareAssignmentRequest(
            group_id=group, member_id=ids[i], member_epoch=epochs[i])))
        (f,) = await c.responses(1)
        p = wire.decode_response(prep_key, 0, f)[1]
        if p.error_code:
            return  # the group moved on: asked again later
        members = [wire.ConnectGroupInstallAssignmentRequestMember(
            member_id=m.member_id, connectors_and_tasks=wire.ConnectGroupInstallAssignmentRequestConnectorsAndTasks(
                connectors=[f"c{k}"], tasks=[]), version=2, metadata=b"")
            for k, m in enumerate(sorted(p.members, key=lambda m: m.member_id))]
        c.writer.write(c.frame(inst_key, 0, wire.ConnectGroupInstallAssignmentRequest(
            group_id=group, member_id=ids[i], member_epoch=epochs[i], group_epoch=p.group_epoch, error=0,
            assignment_delay_ms=0, members=members)))
        (f,) = await c.responses(1)
        if wire.decode_response(inst_key, 0, f)[1].error_code == 0:
            computations += 1

    t0 = time.perf_counter()
    await round_(lambda i: wire.ConnectGroupHeartbeatRequest(
        group_id=group, member_id=ids[i], member_epoch=0, rebalance_timeout_ms=60_000, client_assignors=assignors,
        connectors_and_tasks=units([])))
    t_join = t_stable = time.perf_counter()
    waited = False
    for _ in range(40):
        for i in list(asked):
            await compute(i)
        if await round_(lambda i: wire.ConnectGroupHeartbeatRequest(
                group_id=group, member_id=ids[i], member_epoch=epochs[i], connectors_and_tasks=units(owned[i]))) \
                or asked:
            waited = False
            t_stable = time.perf_counter()
        elif waited:
            break
        else:
            await asyncio.sleep(quiet_s)
            waited = True
    else:
        raise AssertionError("the connect group did not settle")
    assert len(set(epochs)) == 1 and sorted(u for o in owned for u in o) == sorted(f"c{k}" for k in range(workers))
    for c in conns:
        c.close()
    return ConnectGroupWorkers(group, ids, epochs, computations, t_join - t0, t_stable - t0)


# ---- many groups at once, and a whole group's rebalance (benches/bench_large_groups.py) --------------------------

SUBSCRIPTION = b"\x00\x00" + wire.ConsumerProtocolSubscription(topics=["orders"]).encode(0)
EMPTY_ASSIGNMENT = b"\x00\x00" + wire.ConsumerProtocolAssignment(assigned_partitions=[]).encode(0)


def _join(group: str, iid: str, member_id: str = "", session_timeout_ms: int = 45_000) -> tuple[int, int, object]:
    return (11, 9, wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=60_000, member_id=member_id,
        group_instance_id=iid, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]))


def _sync(group: str, generation: int, member_id: str, iid: str, everyone: list[str] | None) -> tuple[int, int, object]:
    """A SyncGroup v5; `everyone`: the leader's, with an (empty) assignment for each of them."""
    assigns = [wire.SyncGroupRequestAssignment(member_id=m, assignment=EMPTY_ASSIGNMENT) for m in everyone or ()]
    return (14, 5, wire.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                         group_instance_id=iid, protocol_type="consumer", protocol_name="range",
                                         assignments=assigns))


async def exchange(conns: list[Conn], requests: list[tuple[int, int, object]]) -> list[bytes]:
    """One round: request i goes on connection i % len(conns), each connection writes its share at once; the answers
    come back in the requests' order."""
    n = len(conns)
    for ci, c in enumerate(conns):
        c.writer.write(b"".join(c.frame(*r) for r in requests[ci::n]))
    answers = await asyncio.gather(*(c.responses(len(requests[ci::n])) for ci, c in enumerate(conns)))
    out: list[bytes] = [b""] * len(requests)
    for ci, frames in enumerate(answers):
        out[ci::n] = frames
    return out


def _decoded(api_key: int, version: int, frames: list[bytes]) -> list:
    return [wire.decode_response(api_key, version, f)[1] for f in frames]


async def form_groups(port: int, groups: list[str], members: int, connections: int,
                      session_timeout_ms: int = 45_000) -> list[Group]:
    """form_group for many groups at once: every static member of every group joins (all pipelined over
    `connections` connections, the groups' members interleaved), then every leader assigns and everyone syncs."""
    conns = [await Conn.open(port) for _ in range(connections)]
    iids = {g: [f"{g}-instance-{i:05d}" for i in range(members)] for g in groups}
    who = [(g, i) for i in range(members) for g in groups]
    t0 = time.perf_counter()
    joined = _decoded(11, 9, await exchange(conns, [_join(g, iids[g][i], "", session_timeout_ms) for g, i in who]))
    t_join = time.perf_counter()
    resp = {gi: r for gi, r in zip(who, joined)}
    assert all(r.error_code == 0 for r in joined), {r.error_code for r in joined}
    ids = {g: [resp[(g, i)].member_id for i in range(members)] for g in groups}
    gens = {g: resp[(g, 0)].generation_id for g in groups}
    assert all(resp[(g, i)].generation_id == gens[g] for g, i in who), "a group formed more than one generation"
    leaders = {g: resp[(g, 0)].leader for g in groups}
    synced = _decoded(14, 5, await exchange(conns, [
        _sync(g, gens[g], ids[g][i], iids[g][i], ids[g] if ids[g][i] == leaders[g] else None) for g, i in who]))
    t_stable = time.perf_counter()
    assert all(r.error_code == 0 for r in synced), {r.error_code for r in synced}
    for c in conns:
        c.close()
    return [Group(ids[g], iids[g], gens[g], t_join - t0, t_stable - t0) for g in groups]


@dataclass
class Rebalance:
    group: Group  # the group after it: every member (the newcomer last) at the new generation
    seconds: float  # the newcomer's JoinGroup sent -> every SyncGroup answered
    heartbeat_rounds: int  # rounds of heartbeats until every member had been told REBALANCE_IN_PROGRESS


async def rebalance_with_newcomer(port: int, group: Group, connections: int) -> Rebalance:
    """One more static member joins a Stable group; every member learns of the rebalance from its heartbeat
    (REBALANCE_IN_PROGRESS), rejoins with its member id, the leader assigns and everyone syncs."""
    gid = group.instance_ids[0].rsplit("-instance-", 1)[0]
    conns = [await Conn.open(port) for _ in range(connections)]
    newcomer = await Conn.open(port)  # its JoinGroup is answered only at the end: on its own connection
    iid = f"{gid}-instance-{len(group.member_ids):05d}"
    t0 = time.perf_counter()
    newcomer.writer.write(newcomer.frame(*_join(gid, iid)))
    told = [False] * len(group.member_ids)
    rounds = 0
    while not all(told):
        rounds += 1
        assert rounds <= 50, "the members were not told of the rebalance"
        todo = [i for i, t in enumerate(told) if not t]
        answers = _decoded(12, 4, await exchange(conns, [(12, 4, wire.HeartbeatRequest(
            group_id=gid, generation_id=group.generation, member_id=group.member_ids[i],
            group_instance_id=group.instance_ids[i])) for i in todo]))
        for i, r in zip(todo, answers):
            assert r.error_code in (0, 27), r.error_code  # NONE before the newcomer's join was read
            told[i] = r.error_code == 27
    joined = _decoded(11, 9, await exchange(conns, [_join(gid, iid_, mid) for mid, iid_ in
                                                    zip(group.member_ids, group.instance_ids)]))
    (first,) = await newcomer.responses(1)
    new = wire.decode_response(11, 9, first)[1]
    t_join = time.perf_counter()
    assert new.error_code == 0 and all(r.error_code == 0 for r in joined), {r.error_code for r in joined}
    gen = new.generation_id
    assert all(r.generation_id == gen for r in joined) and gen > group.generation
    ids, iids = [*group.member_ids, new.member_id], [*group.instance_ids, iid]
    leader = new.leader
    syncs = [_sync(gid, gen, m, i, ids if m == leader else None) for m, i in zip(ids, iids)]
    newcomer.writer.write(newcomer.frame(*syncs[-1]))
    synced = _decoded(14, 5, await exchange(conns, syncs[:-1]))
    (last,) = await newcomer.responses(1)
    t_stable = time.perf_counter()
    assert wire.decode_response(14, 5, last)[1].error_code == 0 and all(r.error_code == 0 for r in synced)
    for c in (*conns, newcomer):
        c.close()
    return Rebalance(Group(ids, iids, gen, t_join - t0, t_stable - t0), t_stable - t0, rounds)


async def form_consumer_groups(port: int, groups: list[str], members: int, connections: int,
                               topic: str = "orders", partitions: int | None = None,
                               timeout: float = 300.0, quiet_s: float = 1.2) -> list[ConsumerGroupMembers]:
    """`members` KIP-848 members of each group join (ConsumerGroupHeartbeat v1, epoch 0), all in one pipelined round,
    then rounds of heartbeats (each member reporting what it was given) until a round changes nothing and, in each
    group, every member is at one epoch and (with `partitions`: the topic's count) the members own all the
    partitions. A round that changes nothing before that is followed by another after 0.1 s, for up to `timeout`
    seconds; one that changes nothing once that holds, by `quiet_s` without requests and one more round: the server
    computes a target at most once per group.consumer.assignment.interval.ms (1 s by default), so a group may look
    settled while its next target is due (its first member holding everything). `stable_s` is the last round that
    moved anything."""
    conns = [await Conn.open(port) for _ in range(connections)]
    who = [(g, f"{g}-member-{i:05d}") for i in range(members) for g in groups]
    epochs = [0] * len(who)
    owned: list[list] = [[] for _ in who]

    async def round_(make) -> int:
        moved = 0
        answers = _decoded(68, 1, await exchange(conns, [(68, 1, make(k)) for k in range(len(who))]))
        for k, r in enumerate(answers):
            assert r.error_code == 0, (who[k], r.error_code, r.error_message)
            moved += r.member_epoch != epochs[k] or r.assignment is not None
            epochs[k] = r.member_epoch
            if r.assignment is not None:
                owned[k] = [wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=tp.topic_id,
                                                                             partitions=tp.partitions)
                            for tp in r.assignment.topic_partitions]
        return moved

    t0 = time.perf_counter()
    await round_(lambda k: wire.ConsumerGroupHeartbeatRequest(
        group_id=who[k][0], member_id=who[k][1], member_epoch=0, rebalance_timeout_ms=300_000,
        subscribed_topic_names=[topic], subscribed_topic_regex="", topic_partitions=[]))
    t_join = time.perf_counter()
    def settled() -> bool:
        by_group: dict[str, tuple[set[int], int]] = {}
        for k, (g, _) in enumerate(who):
            seen, held = by_group.get(g, (set(), 0))
            seen.add(epochs[k])
            by_group[g] = (seen, held + sum(len(tp.partitions) for tp in owned[k]))
        return all(len(seen) == 1 and (partitions is None or held == partitions) for seen, held in by_group.values())

    deadline = time.perf_counter() + timeout
    waited = False
    t_stable = t_join
    while True:
        assert time.perf_counter() < deadline, "the consumer groups did not settle"
        if await round_(lambda k: wire.ConsumerGroupHeartbeatRequest(
                group_id=who[k][0], member_id=who[k][1], member_epoch=epochs[k], topic_partitions=owned[k])):
            waited = False
            t_stable = time.perf_counter()
        elif not settled():
            waited = False
            await asyncio.sleep(0.1)
        elif waited:
            break
        else:
            await asyncio.sleep(quiet_s)
            waited = True
    for c in conns:
        c.close()
    out = []
    for g in groups:
        ks = [k for k, (gg, _) in enumerate(who) if gg == g]
        out.append(ConsumerGroupMembers(g, [who[k][1] for k in ks], [epochs[k] for k in ks], t_join - t0,
                                        t_stable - t0))
    return out


def classic_heartbeats(groups: list[Group]) -> list[tuple[int, int, object]]:
    """A Heartbeat v4 of every member of every group, the groups' members interleaved."""
    out = []
    for i in range(max(len(g.member_ids) for g in groups)):
        for g in groups:
            if i < len(g.member_ids):
                gid = g.instance_ids[0].rsplit("-instance-", 1)[0]
                out.append((12, 4, wire.HeartbeatRequest(group_id=gid, generation_id=g.generation,
                                                         member_id=g.member_ids[i],
                                                         group_instance_id=g.instance_ids[i])))
    return out


def _commit(version: int, group: str, generation: int, member_id: str, iid: str | None, partition: int,
            offset: int, topic: str) -> tuple[int, int, object]:
    return (8, version, wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=iid,
        topics=[wire.OffsetCommitRequestTopic(name=topic, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)])]))


def classic_commits(groups: list[Group], partitions: int, offset: int = 1,
                    topic: str = "orders") -> list[tuple[int, int, object]]:
    """A single-partition OffsetCommit v8 of every member of every classic group (member i commits partition
    i % partitions with its generation, member id and instance id), interleaved as classic_heartbeats."""
    out = []
    for i in range(max(len(g.member_ids) for g in groups)):
        for g in groups:
            if i < len(g.member_ids):
                gid = g.instance_ids[0].rsplit("-instance-", 1)[0]
                out.append(_commit(8, gid, g.generation, g.member_ids[i], g.instance_ids[i], i % partitions,
                                   offset, topic))
    return out


def consumer_commits(groups: list[ConsumerGroupMembers], partitions: int, offset: int = 1,
                     topic: str = "orders") -> list[tuple[int, int, object]]:
    """A single-partition OffsetCommit v9 of every member of every consumer group (member i commits partition
    i % partitions with its member epoch), interleaved."""
    out = []
    for i in range(max(len(g.member_ids) for g in groups)):
        for g in groups:
            if i < len(g.member_ids):
                out.append(_commit(9, g.group, g.epochs[i], g.member_ids[i], None, i % partitions, offset, topic))
    return out


def interleaved_consumer_heartbeats(groups: list[ConsumerGroupMembers]) -> list[tuple[int, int, object]]:
    per = [consumer_heartbeats(g) for g in groups]
    return [p[i] for i in range(max(len(p) for p in per)) for p in per if i < len(p)]


async def checked_round(port: int, requests: list[tuple[int, int, object]], connections: int) -> dict[int, int]:
    """One round of `requests` (as request_load sends them), every answer's error code counted (error_of)."""
    conns = [await Conn.open(port) for _ in range(connections)]
    frames = await exchange(conns, requests)
    for c in conns:
        c.close()
    codes: dict[int, int] = {}
    for (key, version, _), f in zip(requests, frames):
        e = error_of(key, version, f)
        codes[e] = codes.get(e, 0) + 1
    return codes
