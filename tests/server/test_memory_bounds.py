"""Memory is bounded by what peers send, not by what they declare.

A real `kcoord serve` (default socket.request.max.bytes, 100 MiB) takes 100 connections that each declare the
largest frame and dribble bytes, plus oversized and absurd CreateTopics, CreatePartitions, JoinGroup and SyncGroup
requests. Its resident memory stays within a stated bound, a real consumer group still forms beside them, and
the server exits cleanly on SIGTERM with the connections still open. In-process: an id repeated 10,000 times in
one request is answered once by every API that takes a list of them.
"""

from __future__ import annotations

import signal
import socket
import struct
import threading

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client

from ..support.servers import free_port, serve

MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default, kcoord's too
CONNECTIONS = 100
DRIBBLE = 70 * 1024  # what each of them actually sends
BOUND_MIB = 96  # over the idle server's resident size: 100 x 70 KB sent is 7 MB; buffers at most double it


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


def request_frame(api_key: int, version: int, body) -> bytes:
    return wire.encode_request(api_key, version, 1, "hostile", body)


def declared(frame: bytes, at: int, count: int) -> bytes:
    """`frame` with the 4 bytes at `at` (after the size prefix) replaced by a huge count or length."""
    return frame[:at] + struct.pack(">i", count) + frame[at + 4:]


@pytest.mark.interop
def test_declared_frames_and_oversized_requests_stay_within_a_memory_bound(tmp_path) -> None:
    # Found at a195b2b: a client declaring a 100 MB frame and sending 70 KB made the server allocate the whole
    # 100 MB; 20 such connections took it from 147 MiB to 1,983 MiB.
    from kafka import KafkaConsumer

    port = free_port()
    srv = serve(port, tmp_path / "log", "--topic", "mem:4", "--set", "group.initial.rebalance.delay.ms=0")
    socks: list[socket.socket] = []
    try:
        with Client(srv.bootstrap) as c:  # warm: the first requests import and build what serving needs
            c.request(wire.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        idle = rss_mib(srv.proc.pid)
        for _ in range(CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(struct.pack(">i", MAX_FRAME))
            socks.append(s)
        chunk = bytes(1024)
        for _ in range(DRIBBLE // len(chunk)):
            for s in socks:
                s.sendall(chunk)
        with Client(srv.bootstrap) as c:  # served beside them; and the oversized requests, each refused
            r = c.request(wire.CreateTopicsRequest(timeout_ms=1000, topics=[wire.CreateTopicsRequestCreatableTopic(
                name="huge", num_partitions=2**31 - 1, replication_factor=1)]), 5)
            assert r.topics[0].error_code == E.INVALID_PARTITIONS
            r = c.request(wire.CreatePartitionsRequest(timeout_ms=1000, validate_only=False, topics=[
                wire.CreatePartitionsRequestCreatePartitionsTopic(name="mem", count=2**31 - 1, assignments=None)]), 3)
            assert r.results[0].error_code == E.INVALID_PARTITIONS
        join = request_frame(11, 5, wire.JoinGroupRequest(
            group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"m" * 8)]))
        sync = request_frame(14, 3, wire.SyncGroupRequest(  # v3: not flexible, so counts are plain int32s
            group_id="g", generation_id=1, member_id="m", protocol_type="consumer", protocol_name="range",
            assignments=[wire.SyncGroupRequestAssignment(member_id="m", assignment=b"a" * 8)]))
        # The tails: JoinGroup v5 [count][name "range"][metadata length][8 bytes]; SyncGroup v3 [count][member
        # id "m"][assignment length][8 bytes].
        hostile = [
            declared(join, len(join) - 8 - 4, 2**31 - 1),  # the metadata's length: 2 GiB declared, 8 bytes sent
            declared(join, len(join) - 8 - 4 - 5 - 2 - 4, 2**31 - 1),  # the protocol count
            declared(sync, len(sync) - 8 - 4, 2**31 - 1),  # an assignment's length
            declared(sync, len(sync) - 8 - 4 - 1 - 2 - 4, 2**31 - 1),  # the assignment count
            request_frame(11, 5, wire.JoinGroupRequest(  # a real 8 MB metadata: accepted, it was sent
                group_id="big", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="m-big",
                protocol_type="consumer", protocols=[wire.JoinGroupRequestProtocol(name="range",
                                                                                    metadata=b"x" * (8 << 20))])),
        ]
        for frame in hostile:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(frame)
                s.settimeout(10)
                try:
                    s.recv(1 << 16)  # an answer, or the connection closed: either way it was handled
                except TimeoutError:
                    pass
        # A real consumer group forms while all of that is still connected.
        owned: dict[int, set[int]] = {}
        stop = threading.Event()

        def member(i: int) -> None:
            cons = KafkaConsumer("mem", bootstrap_servers=srv.bootstrap, group_id="real", client_id=f"r{i}",
                                 session_timeout_ms=10_000, heartbeat_interval_ms=500)
            try:
                while not stop.is_set():
                    cons.poll(timeout_ms=200)
                    owned[i] = {tp.partition for tp in cons.assignment()}
            finally:
                cons.close()

        threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        formed = threading.Event()
        for _ in range(600):
            if len(owned) == 2 and sorted(p for ps in owned.values() for p in ps) == [0, 1, 2, 3]:
                formed.set()
                break
            stop.wait(0.05)
        stop.set()
        for t in threads:
            t.join(30)
        assert formed.is_set(), f"the real group did not form: {owned}\n{srv.log_tail()}"
        peak = rss_mib(srv.proc.pid)
        print(f"\nmemory: idle {idle:.0f} MiB; with {CONNECTIONS} connections declaring {MAX_FRAME >> 20} MiB frames "
              f"and sending {DRIBBLE >> 10} KiB each, the hostile requests, an 8 MiB JoinGroup and a real group: "
              f"{peak:.0f} MiB (bound: idle + {BOUND_MIB} MiB)")
        assert peak - idle < BOUND_MIB, (idle, peak)
        srv.check_alive()
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0, srv.log_tail()
    finally:
        for s in socks:
            s.close()
        if srv.proc.poll() is None:
            srv.proc.kill()


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        assert chunk, "the server closed the connection"
        buf += chunk
    return bytes(buf)


@pytest.mark.interop
def test_a_peer_that_does_not_read_its_answers_stops_being_read(tmp_path) -> None:
    # 200 pipelined Metadata requests for a 100,000-partition topic ask for 520 MB of answers in 6 KB: the
    # server writes what the peer reads and reads no further meanwhile, and still answers every one, in order.
    port = free_port()
    srv = serve(port, tmp_path / "log", "--topic", "wide:100000")
    try:
        req = wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name="wide")], allow_auto_topic_creation=False)
        n = 200
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(b"".join(wire.encode_request(3, 12, i, "pipeliner", req) for i in range(n)))
            first = recv_exact(s, 4)
            size = struct.unpack(">i", first)[0]
            assert size > 2_500_000  # one answer spells out 100,000 partitions
            recv_exact(s, size)
            # the peer now stalls: the server must not build the other 1,999 answers
            stalled = threading.Event()
            stalled.wait(1.0)
            held = rss_mib(srv.proc.pid)
            for i in range(1, n):
                size = struct.unpack(">i", recv_exact(s, 4))[0]
                body = recv_exact(s, size)
                assert struct.unpack(">i", body[:4])[0] == i  # the correlation id: in order
            corr, resp = wire.decode_response(3, 12, body)
            assert corr == n - 1 and len(resp.topics[0].partitions) == 100_000
        peak = rss_mib(srv.proc.pid)
        print(f"\nmemory with 200 pipelined 2.6 MB answers and a peer that stalls: {held:.0f} MiB while stalled, "
              f"{peak:.0f} MiB after all were read")
        assert held < 200 and peak < 300, (held, peak)
        srv.check_alive()
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0


# ---- repeated ids: each answered once ------------------------------------------------------------------------------

REPEATS = 10_000


def _one_of_each_group():
    """A coordinator (every protocol on) with a consumer group "g" of one member, a connect group "k" of one worker,
    and a simple group "s" with committed offsets; and a broker over its topics ("orders", 4 partitions)."""
    from kcoord.broker import Broker
    from kcoord.config import GroupConfig

    from ..support.harness import GroupHarness

    c = GroupHarness(GroupConfig(group_coordinator_rebalance_protocols="classic,consumer,connect"), {"orders": 4}).c
    r = c.handle(wire.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["orders"],
        topic_partitions=[]), 1)
    assert r.error_code == E.NONE and r.assignment.topic_partitions
    r = c.handle(wire.ConnectGroupHeartbeatRequest(
        group_id="k", member_id="w", member_epoch=0, rebalance_timeout_ms=30_000,
        client_assignors=[wire.ConnectGroupHeartbeatRequestAssignor(name="a", minimum_version=0, maximum_version=0,
                                                                    reason=0, version=0, metadata=b"")],
        connectors_and_tasks=wire.ConnectGroupHeartbeatRequestConnectorsAndTasks(connectors=[], tasks=[])), 0)
    assert r.error_code == E.NONE
    r = c.handle(wire.OffsetCommitRequest(group_id="s", generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name="orders", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=10 + p) for p in range(4)])]), 8)
    assert [p.error_code for p in r.topics[0].partitions] == [E.NONE] * 4
    return c, Broker(c, c.topics, node_id=0, host="h", port=1)


# Each: (api key, version, the request naming the ids given, the answer's items, an item's id).
REPEATED = {
    "DescribeGroups": (15, 5, lambda ids: wire.DescribeGroupsRequest(groups=ids), lambda r: r.groups,
                       lambda x: x.group_id),
    "ConsumerGroupDescribe": (69, 1, lambda ids: wire.ConsumerGroupDescribeRequest(group_ids=ids),
                              lambda r: r.groups, lambda x: x.group_id),
    "ConnectGroupDescribe": (wire.ConnectGroupDescribeRequest.API_KEY, 0,
                             lambda ids: wire.ConnectGroupDescribeRequest(group_ids=ids), lambda r: r.groups,
                             lambda x: x.group_id),
    "OffsetFetch v8": (9, 8, lambda ids: wire.OffsetFetchRequest(groups=[
        wire.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ids]), lambda r: r.groups,
        lambda x: x.group_id),
    "OffsetFetch v10": (9, 10, lambda ids: wire.OffsetFetchRequest(groups=[
        wire.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None) for g in ids]),
        lambda r: r.groups, lambda x: x.group_id),
    "Metadata": (3, 12, lambda ids: wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=t) for t in ids],
                                                         allow_auto_topic_creation=False),
                 lambda r: r.topics, lambda x: x.name),
}
# the group (or topic) each API describes; beside it, one that does not exist
SUBJECT = {"DescribeGroups": "s", "ConsumerGroupDescribe": "g", "ConnectGroupDescribe": "k", "OffsetFetch v8": "s",
           "OffsetFetch v10": "s", "Metadata": "orders"}


@pytest.mark.parametrize("api", list(REPEATED))
def test_an_id_named_10000_times_in_one_request_is_answered_once(api) -> None:
    """README: repeated ids in DescribeGroups, ConsumerGroupDescribe, OffsetFetch and Metadata (and kcoord's
    ConnectGroupDescribe) are answered once each, so a few bytes per repeat cannot multiply a large answer. The
    request goes through the codec as a client's would; the answer is byte for byte the one to a request naming
    each id once (each once, in the order first named)."""
    c, broker = _one_of_each_group()
    key, version, make, items, ident = REPEATED[api]
    ids = [SUBJECT[api], "nobody"]

    def ask(names: list[str]):
        req = make(names)
        sent = type(req).decode(req.encode(version), version)
        return broker.handlers[key](sent, version) if key in broker.handlers else c.handle(sent, version)

    repeated = ask(ids * REPEATS)
    assert [ident(x) for x in items(repeated)] == ids
    assert items(repeated)[0].error_code == E.NONE
    single = ask(ids)
    assert repeated.encode(version) == single.encode(version)
