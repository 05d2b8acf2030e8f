"""The store under the server: one commit per event-loop turn, responses held until it is durable, fail-stop on
a failed write, restarts on the same data directory, and the crash test (SIGKILL at random moments under load).
"""

from __future__ import annotations

import logging
import random
import select
import signal
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.store import GroupStore, MemoryRecords, SqliteRecords, StoreError, check_store

from ..support.servers import (
    Ledger,
    ThreadServer,
    Worker,
    commit_frame,
    form_group,
    free_port,
    heartbeat,
    serve_dir,
)


class Frames:
    """Reads whole response frames off a socket; None when the server closed the connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def next(self) -> bytes | None:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">i", self.buf[:4])[0]:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        size = struct.unpack(">i", self.buf[:4])[0]
        frame, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
        return frame


class CountingRecords(MemoryRecords):
    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.fail_after = fail_after

    def put(self, batch) -> None:
        if self.fail_after is not None and len(self.batches) >= self.fail_after:
            raise StoreError("simulated I/O error")
        self.batches.append(len(batch))
        super().put(batch)


def test_pipelined_commits_share_transactions_and_are_answered_in_order() -> None:
    records = CountingRecords()
    srv = ThreadServer(records, topics=["t:201"])
    at_start = len(records.batches)  # the topic's record
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"".join(commit_frame(i, "pipe", i, 1000 + i) for i in range(1, 201)))
            frames = Frames(s)
            for i in range(1, 201):
                corr, resp = wire.decode_response(8, 8, frames.next())
                assert corr == i and resp.topics[0].partitions[0].error_code == E.NONE
        batches = records.batches[at_start:]
        assert sum(batches) == 200 and len(batches) < 50, batches
        stored = GroupStore(records)
        c = Coordinator(store=stored)
        c.load()
        assert {p: v[0] for (_, p), v in c.offsets.committed("pipe").items()} == {p: 1000 + p for p in range(1, 201)}
    finally:
        srv.close()
    assert srv.error is None


class FailingSqlite(SqliteRecords):
    """The embedded store (written on the server's writer thread), failing with an I/O error after `fail_after`
    writes."""

    def __init__(self, data_dir: str, fail_after: int) -> None:
        super().__init__(data_dir)
        self.fail_after = fail_after

    def put(self, batch) -> None:
        if self.commits >= self.fail_after:
            raise StoreError("simulated I/O error")
        super().put(batch)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_failed_commit_stops_the_server_without_answering(caplog, tmp_path, backend) -> None:
    caplog.set_level(logging.INFO)
    # the topic catalogue's first commit succeeds... nothing else does
    records = CountingRecords(fail_after=1) if backend == "memory" else FailingSqlite(str(tmp_path), fail_after=1)
    srv = ThreadServer(records, topics=["t:4"])
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as other:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(commit_frame(1, "g", 0, 5))
                assert Frames(s).next() is None  # the connection drops: nothing was acknowledged
            assert Frames(other).next() is None  # the server stopped serving everyone
        srv.thread.join(10)
        assert not srv.thread.is_alive()
        assert isinstance(srv.error, StoreError) or isinstance(srv.server.failed, StoreError)
        # one CRITICAL line says so, with the store's error (what the JSON log format writes as fields)
        failures = [r for r in caplog.records if getattr(r, "kcoord", {}).get("event") == "store-failure"]
        assert len(failures) == 1 and failures[0].levelname == "CRITICAL"
        assert failures[0].kcoord["error"] == str(srv.server.failed) and "simulated I/O error" in failures[0].kcoord["error"]
    finally:
        srv.close()


def test_heartbeats_do_not_touch_the_store() -> None:
    records = CountingRecords()
    srv = ThreadServer(records, group=GroupConfig(group_initial_rebalance_delay_ms=0))
    try:
        with Client(f"127.0.0.1:{srv.port}") as c:
            j = form_group(c, "hb")
            before = list(records.batches)
            for _ in range(500):
                assert heartbeat(c, "hb", j) == E.NONE
            assert records.batches == before
    finally:
        srv.close()


class Gate:
    """The store's test hold (GroupStore.hold): a write that reaches it says so (`reached`) and waits until the
    test opens it."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()

    def wait(self) -> None:
        self.reached.set()
        self.opened.wait()


def readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def test_a_commit_being_written_delays_no_other_clients_heartbeat(tmp_path) -> None:
    """While one client's commit is being written (held in the writer thread by the store's test hold), another
    connection's heartbeat is answered; the commit's own answer, and an ApiVersions pipelined behind it on its
    connection, leave only once the write is done, in request order."""
    records = SqliteRecords(str(tmp_path))
    srv = ThreadServer(records, topics=["t:4"], group=GroupConfig(group_initial_rebalance_delay_ms=0))
    store = srv.server.store
    gate = Gate()
    try:
        with Client(f"127.0.0.1:{srv.port}", timeout=10) as member, \
                socket.create_connection(("127.0.0.1", srv.port), timeout=10) as committer:
            j = form_group(member, "bystander")
            commits = records.commits
            store.hold = gate
            committer.sendall(commit_frame(1, "committer", 0, 42)
                              + wire.encode_request(18, 3, 2, "pipeline", wire.ApiVersionsRequest(
                                  client_software_name="t", client_software_version="1")))
            assert gate.reached.wait(10), "the commit's write never started"
            for _ in range(3):  # answered while the write is held (with the write on the loop: a timeout here)
                assert heartbeat(member, "bystander", j) == E.NONE
            assert records.commits == commits and not readable(committer)  # nothing of the committer's left yet
            gate.opened.set()
            frames = Frames(committer)
            corr, resp = wire.decode_response(8, 8, frames.next())
            assert corr == 1 and resp.topics[0].partitions[0].error_code == E.NONE
            assert records.commits == commits + 1  # written before it was answered
            corr, _ = wire.decode_response(18, 3, frames.next())
            assert corr == 2
        stored = {(k, v) for k, v in records.scan()}
        assert any(b"committer" in k for k, _ in stored)
    finally:
        gate.opened.set()
        store.hold = None
        srv.close()
    assert srv.error is None


def test_an_offset_fetch_answers_a_commit_only_once_it_is_written(tmp_path) -> None:
    """A commit's write is held in the writer thread; another client's OffsetFetch of the same group reads the
    offset the commit staged, and is not answered until that write is done (an answer before it would show an offset
    a failed write then loses: found by the cluster fault harness). A heartbeat on a third connection is answered
    meanwhile, and another group's OffsetFetch; with no write under way an OffsetFetch is answered at once."""
    records = SqliteRecords(str(tmp_path))
    srv = ThreadServer(records, topics=["t:4"], group=GroupConfig(group_initial_rebalance_delay_ms=0))
    store = srv.server.store
    gate = Gate()

    def fetch_frame(corr: int) -> bytes:
        return wire.encode_request(9, 7, corr, "reader", wire.OffsetFetchRequest(
            group_id="read-after-write", topics=[wire.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
            require_stable=False))

    def offset(frames: Frames, corr: int) -> int:
        got, resp = wire.decode_response(9, 7, frames.next())
        assert got == corr and resp.error_code == E.NONE
        return resp.topics[0].partitions[0].committed_offset

    try:
        with Client(f"127.0.0.1:{srv.port}", timeout=10) as member, \
                socket.create_connection(("127.0.0.1", srv.port), timeout=10) as committer, \
                socket.create_connection(("127.0.0.1", srv.port), timeout=10) as reader:
            j = form_group(member, "bystander")
            committer.sendall(commit_frame(1, "read-after-write", 0, 41))
            assert wire.decode_response(8, 8, Frames(committer).next())[1].topics[0].partitions[0].error_code == E.NONE
            frames = Frames(reader)
            reader.sendall(fetch_frame(1))
            assert offset(frames, 1) == 41  # nothing being written: at once
            store.hold = gate
            committer.sendall(commit_frame(2, "read-after-write", 0, 42))
            assert gate.reached.wait(10), "the commit's write never started"
            reader.sendall(fetch_frame(2))
            assert heartbeat(member, "bystander", j) == E.NONE  # a round trip through the loop after the fetch
            assert heartbeat(member, "bystander", j) == E.NONE
            assert not readable(reader), "the fetch was answered before the offset it read was written"
            with Client(f"127.0.0.1:{srv.port}", timeout=10) as other:  # another group's fetch waits for nothing
                r = other.request(wire.OffsetFetchRequest(group_id="bystander", topics=None, require_stable=False), 7)
                assert r.error_code == E.NONE
            assert not readable(reader)
            gate.opened.set()
            assert offset(frames, 2) == 42
            assert wire.decode_response(8, 8, Frames(committer).next())[0] == 2
    finally:
        gate.opened.set()
        store.hold = None
        srv.close()
    assert srv.error is None


def test_a_parked_answer_waits_for_the_write_of_what_completed_it(tmp_path) -> None:
    """A follower's parked SyncGroup, answered by the leader's SyncGroup (which stages the group's assignment),
    leaves only once that write is done, as the leader's own answer does."""
    records = SqliteRecords(str(tmp_path))
    srv = ThreadServer(records, topics=["t:4"], group=GroupConfig(group_initial_rebalance_delay_ms=0))
    store = srv.server.store
    gate = Gate()
    protocols = [wire.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join(c: Client, member_id: str = "") -> int:
        return c.send(11, 5, wire.JoinGroupRequest(group_id="pair", session_timeout_ms=10_000,
                                                   rebalance_timeout_ms=10_000, member_id=member_id,
                                                   group_instance_id=f"i-{c.client_id}", protocol_type="consumer",
                                                   protocols=protocols))

    def sync(c: Client, j: wire.JoinGroupResponse, assignments=()) -> int:
        return c.send(14, 5, wire.SyncGroupRequest(group_id="pair", generation_id=j.generation_id,
                                                   member_id=j.member_id, group_instance_id=f"i-{c.client_id}",
                                                   protocol_type="consumer", protocol_name="range",
                                                   assignments=list(assignments)))

    try:
        with Client(f"127.0.0.1:{srv.port}", "leader") as leader, Client(f"127.0.0.1:{srv.port}", "follower") as follower:
            first = leader.receive(11, 5, join(leader))
            assert leader.receive(14, 5, sync(leader, first)).error_code == E.NONE
            parked_join = join(follower)  # a rebalance: parked until the leader rejoins
            jl = leader.receive(11, 5, join(leader, first.member_id))
            jf = follower.receive(11, 5, parked_join)
            assert jl.generation_id == jf.generation_id == first.generation_id + 1 and jl.leader == jl.member_id
            parked_sync = sync(follower, jf)  # parked until the leader's assignment
            store.hold = gate
            leader_sync = sync(leader, jl, [wire.SyncGroupRequestAssignment(member_id=jl.member_id, assignment=b"L"),
                                            wire.SyncGroupRequestAssignment(member_id=jf.member_id, assignment=b"F")])
            assert gate.reached.wait(10), "the assignment's write never started"
            with Client(f"127.0.0.1:{srv.port}") as bystander:  # a round trip through the loop after the leader's
                bystander.call(18, 3, wire.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            assert not readable(follower.sock) and not readable(leader.sock)
            gate.opened.set()
            assert follower.receive(14, 5, parked_sync).assignment == b"F"
            assert leader.receive(14, 5, leader_sync).assignment == b"L"
    finally:
        gate.opened.set()
        store.hold = None
        srv.close()
    assert srv.error is None


def test_a_server_without_a_store_runs_no_writer_thread() -> None:
    srv = ThreadServer(None)
    try:
        with Client(f"127.0.0.1:{srv.port}") as c:
            form_group(c, "memory")
        assert srv.server.writer is None
        assert not [t for t in threading.enumerate() if t.name.startswith("kcoord-store")]
    finally:
        srv.close()


# ---- restarts of `kcoord serve --data-dir` -----------------------------------------------------------------


def stored_offsets(data_dir: Path) -> dict[tuple[str, int], int]:
    records = SqliteRecords(str(data_dir))
    try:
        store = GroupStore(records)
        c = Coordinator(store=store)
        c.load()  # every record decodes and every group is consistent, or this raises
        return {(gid, p): v[0] for gid in c.groups for (_, p), v in c.offsets.committed(gid).items()}
    finally:
        records.close()


def fetched_offsets(port: int, groups: list[str]) -> dict[tuple[str, int], int]:
    with Client(f"127.0.0.1:{port}") as c:
        r = c.call(9, 8, wire.OffsetFetchRequest(groups=[
            wire.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups]))
    return {(g.group_id, p.partition_index): p.committed_offset for g in r.groups for t in g.topics
            for p in t.partitions}


KILLS = 20


def test_crash_sigkill_at_random_moments_loses_no_acknowledged_commit(tmp_path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    ledger = Ledger()
    rng = random.Random(20261122)
    members = [(f"crash-{n % 4}", f"inst-{n}", n) for n in range(12)]  # 4 groups of 3 static members
    for kill in range(KILLS):
        port = free_port()
        proc = serve_dir(data_dir, port, log, "group.initial.rebalance.delay.ms=300")
        # What the restarted server answers, before any new load: every acknowledged commit is there.
        served = fetched_offsets(port, sorted({g for g, _, _ in members}))
        with ledger.lock:
            for key, acked in ledger.acked.items():
                assert acked <= served.get(key, -1) <= ledger.sent[key], (
                    f"restart {kill}: {key} acknowledged {acked}, sent up to {ledger.sent[key]}, "
                    f"served {served.get(key)}")
        workers = [Worker(port, g, iid, p, ledger, seed=kill * 100 + p) for g, iid, p in members]
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        for w in workers:
            w.join(20)
            assert not w.is_alive(), "a worker hung after the server was killed"
        report = check_store(str(data_dir))
        assert report.ok, f"after kill {kill + 1}: {report.problems}"
        stored = stored_offsets(data_dir)
        with ledger.lock:
            for key, acked in ledger.acked.items():
                assert key in stored and acked <= stored[key] <= ledger.sent[key], (
                    f"after kill {kill + 1}: {key} acknowledged {acked}, sent up to {ledger.sent[key]}, "
                    f"stored {stored.get(key)}")
    print(f"crash test: {KILLS} SIGKILLs, {ledger.acks} acknowledged commits, {ledger.rejoins} static rejoins")
    assert ledger.acks >= 200 and ledger.rejoins >= 20, (ledger.acks, ledger.rejoins)


PIPE_CONNECTIONS, PIPE_DEPTH = 40, 8


async def _pipelined_commits(port: int, sent: dict[tuple[str, int], int], acked: dict[tuple[str, int], int],
                             kill_after: float, kill) -> int:
    """PIPE_CONNECTIONS connections, each committing increasing offsets of its own group's partition with
    PIPE_DEPTH commits in flight (an answer sends the next), until `kill()` is called after `kill_after` seconds
    and the server goes. `sent` and `acked` (per (group, partition)) take the highest offset written and the highest
    acknowledged (error 0; answers come in request order, so the last acknowledged is the highest). Answers seen."""
    import asyncio

    answered = 0

    async def drive(ci: int) -> None:
        nonlocal answered
        key = (f"pipe-{ci}", ci % 16)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return
        in_flight: list[int] = []

        def send(n: int) -> None:
            frames = []
            for _ in range(n):
                sent[key] = offset = sent.get(key, 0) + 1
                in_flight.append(offset)
                frames.append(commit_frame(offset & 0x7FFFFFFF, key[0], key[1], offset))
            writer.write(b"".join(frames))

        try:
            send(PIPE_DEPTH)
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                corr, resp = wire.decode_response(8, 8, await reader.readexactly(size))
                offset = in_flight.pop(0)
                assert corr == offset & 0x7FFFFFFF, (key, corr, offset)  # in request order
                assert resp.topics[0].partitions[0].error_code == E.NONE, (key, resp)
                acked[key] = offset
                answered += 1
                send(1)
        except (OSError, asyncio.IncompleteReadError):
            return  # the server was killed
        finally:
            writer.close()

    async def killer() -> None:
        await asyncio.sleep(kill_after)
        kill()

    await asyncio.gather(killer(), *(drive(ci) for ci in range(PIPE_CONNECTIONS)))
    return answered


@pytest.mark.parametrize("kills", [pytest.param(3, id="3-kills"), pytest.param(15, id="15-kills", marks=pytest.mark.slow)])
def test_crash_sigkill_under_pipelined_commits_loses_no_acknowledged_commit(tmp_path, kills) -> None:
    """The group commit with the fsync on the writer thread: many connections pipelining durable commits
    (store.fsync=always, batches gathered while the previous one is fsynced), SIGKILL during the load, a restart on
    the same data directory: every offset acknowledged before the kill is stored, equal or newer (never newer than
    what was sent), and the restarted server serves it."""
    import asyncio

    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    sent: dict[tuple[str, int], int] = {}
    acked: dict[tuple[str, int], int] = {}
    rng = random.Random(20261128)
    groups = [f"pipe-{ci}" for ci in range(PIPE_CONNECTIONS)]
    total = 0
    for kill in range(kills + 1):
        port = free_port()
        proc = serve_dir(data_dir, port, log, "store.fsync=always")
        served = fetched_offsets(port, groups) if acked else {}
        for key, offset in acked.items():
            assert offset <= served.get(key, -1) <= sent[key], (
                f"restart {kill}: {key} acknowledged {offset}, sent up to {sent[key]}, served {served.get(key)}")
        if kill == kills:
            proc.terminate()
            proc.wait(10)
            break
        before = dict(acked)
        total += asyncio.run(_pipelined_commits(port, sent, acked, rng.uniform(0.4, 1.2),
                                                lambda p=proc: p.send_signal(signal.SIGKILL)))
        proc.wait(10)
        assert acked != before, f"round {kill}: nothing was acknowledged before the kill"
        report = check_store(str(data_dir))
        assert report.ok, f"after kill {kill + 1}: {report.problems}"
        stored = stored_offsets(data_dir)
        for key, offset in acked.items():
            assert key in stored and offset <= stored[key] <= sent[key], (
                f"after kill {kill + 1}: {key} acknowledged {offset}, sent up to {sent[key]}, "
                f"stored {stored.get(key)}")
    print(f"pipelined crash test: {kills} SIGKILLs, {total} acknowledged commits on {PIPE_CONNECTIONS} connections "
          f"x {PIPE_DEPTH} in flight")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_static_group_survives_a_server_restart_over_the_wire(tmp_path, how) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    port = free_port()
    proc = serve_dir(data_dir, port, log, "group.initial.rebalance.delay.ms=300")
    ledger = Ledger()
    try:
        with Client(f"127.0.0.1:{port}") as a, Client(f"127.0.0.1:{port}") as b:
            wa, wb = Worker(port, "r", "a", 0, ledger, 1), Worker(port, "r", "b", 1, ledger, 2)
            wa.c, wb.c = a, b
            ta = threading.Thread(target=wa.rejoin)
            ta.start()
            wb.rejoin()
            ta.join(20)
            if wa.generation != wb.generation:  # b's join started a second rebalance: a rejoins
                tb = threading.Thread(target=wb.rejoin)
                tb.start()
                wa.rejoin()
                tb.join(20)
            assert wa.generation == wb.generation > 0
            wa.commit(), wb.commit()
    finally:
        proc.send_signal(how)
        rc = proc.wait(15)
    assert rc == (0 if how == signal.SIGTERM else -signal.SIGKILL)
    proc = serve_dir(data_dir, port, log)
    try:
        # serve() returned on the "listening" line, which the server writes after the "loaded" one
        assert "loaded 1 groups, 2 members, 2 offsets" in log.read_text()
        with Client(f"127.0.0.1:{port}") as c:
            for w in (wa, wb):  # the members carry on with their ids and generation: no rejoin, no rebalance
                hb = c.call(12, 4, wire.HeartbeatRequest(group_id="r", generation_id=w.generation,
                                                         member_id=w.member_id, group_instance_id=w.iid))
                assert hb.error_code == E.NONE
            f = c.call(9, 8, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="r", topics=None)]))
            got = {p.partition_index: p.committed_offset for t in f.groups[0].topics for p in t.partitions}
            assert got == {0: ledger.acked[("r", 0)], 1: ledger.acked[("r", 1)]}
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
