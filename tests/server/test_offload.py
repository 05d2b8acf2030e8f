"""Large requests off the event loop (issue 30): a frame above server.OFFLOAD_ABOVE is decoded on the server's worker
thread, an OffsetCommit's catalogue checks are made there too, and a long answer (a Deferred) is made and encoded
there; only the group's part runs on the loop. What the bystander waits meanwhile is measured by
benches/bench_hostile.py; these tests show that the answers, their order and the state are what the loop alone gives.
"""

from __future__ import annotations

import socket
import struct

import pytest

from kcoord import errors as E
from kcoord import server as server_module
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig
from kcoord.offsets import DEFER_ABOVE
from kcoord.reply import Deferred

from ..support.harness import ClassicHarness
from ..support.servers import in_process, recv_exact
from ..support.waits import wait_for

UNKNOWN = 40_000  # partitions of a topic that does not exist: about 560 KB of request, above OFFLOAD_ABOVE


@pytest.fixture(autouse=True)
def server_offloads(monkeypatch) -> None:
    """The server's own bound (the fuzz harness, imported in the same run, turns offloading off)."""
    monkeypatch.setattr(server_module, "OFFLOAD_ABOVE", 256 << 10)


def running(**settings):
    return in_process(ServerConfig(host="127.0.0.1", port=0, topics=["t:3"], **settings))


def commit(group: str, gen: int, valid: dict[int, int], unknown: int = UNKNOWN) -> wire.OffsetCommitRequest:
    return wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name="nope", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=1) for p in range(unknown)]),
        wire.OffsetCommitRequestTopic(name="t", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o) for p, o in valid.items()])])


def fetch(group: str) -> wire.OffsetFetchRequest:
    return wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id=group, topics=[
        wire.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1, 2])])])


def fetched(resp: wire.OffsetFetchResponse) -> list[int]:
    return [p.committed_offset for p in resp.groups[0].topics[0].partitions]


def codes(resp: wire.OffsetCommitResponse) -> dict[str, set[int]]:
    return {t.name: {p.error_code for p in t.partitions} for t in resp.topics}


def test_a_large_commit_is_answered_as_the_loop_would_and_in_request_order() -> None:
    with running() as srv, Client(f"127.0.0.1:{srv.port}") as c:
        big = wire.encode_request(8, 9, 1, "t", commit("g", -1, {0: 5, 2: 7}))
        assert len(big) > server_module.OFFLOAD_ABOVE
        # The large commit, then a fetch and a small commit behind it on the same connection, arriving in the same
        # read as the large commit's last bytes: they wait for it although they are whole.
        c.sock.sendall(big[:-100])
        wait_for(lambda: any(conn.reader.pending == len(big) - 100 for conn in list(srv.connections)),
                 "the frame read up to its last 100 bytes", interval=0.005)
        c.sock.sendall(big[-100:] + wire.encode_request(9, 9, 2, "t", fetch("g"))
                       + wire.encode_request(8, 9, 3, "t", commit("g", -1, {0: 6}, unknown=0))
                       + wire.encode_request(9, 9, 4, "t", fetch("g")))
        first = c.receive(8, 9, 1)
        assert codes(first) == {"nope": {E.UNKNOWN_TOPIC_OR_PARTITION}, "t": {E.NONE}}
        assert [p.partition_index for p in first.topics[0].partitions] == list(range(UNKNOWN))
        assert fetched(c.receive(9, 9, 2)) == [5, -1, 7]  # handled after the large commit, not before
        assert codes(c.receive(8, 9, 3)) == {"nope": set(), "t": {E.NONE}}
        assert fetched(c.receive(9, 9, 4)) == [6, -1, 7]
        assert srv.offloaded == 1  # the large one went to the worker, the small ones did not


def test_a_large_commit_the_group_refuses_stores_nothing() -> None:
    with running() as srv, Client(f"127.0.0.1:{srv.port}") as c:
        # generation 3 of a group that does not exist: ILLEGAL_GENERATION for each partition that reaches the group
        resp = c.call(8, 9, commit("g", 3, {p % 3: p for p in range(3)} | {0: 1}))
        assert codes(resp) == {"nope": {E.UNKNOWN_TOPIC_OR_PARTITION}, "t": {E.ILLEGAL_GENERATION}}
        # more than DEFER_ABOVE partitions reach the group: their answer is made on the worker too
        many = wire.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=3, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name="t", partitions=[
                wire.OffsetCommitRequestPartition(partition_index=p % 3, committed_offset=p)
                for p in range(DEFER_ABOVE * 5)])])
        resp = c.call(8, 9, many)
        assert codes(resp) == {"t": {E.ILLEGAL_GENERATION}} and len(resp.topics[0].partitions) == DEFER_ABOVE * 5
        assert fetched(c.call(9, 9, fetch("g"))) == [-1, -1, -1]
        assert "g" not in srv.coordinator.groups and srv.offloaded == 2


def test_a_malformed_large_request_closes_its_connection_only() -> None:
    with running() as srv, Client(f"127.0.0.1:{srv.port}") as other:
        body = wire.encode_request(8, 9, 1, "t", commit("g", -1, {0: 1}))[4:]
        cut = body[:-9]  # the last partitions cut off: the frame is whole, its request is not
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(struct.pack(">i", len(cut)) + cut)
            s.settimeout(10)
            with pytest.raises(ConnectionError):
                recv_exact(s, 4)
        assert srv.offloaded == 1
        assert other.call(18, 3, wire.ApiVersionsRequest(client_software_name="t",
                                                         client_software_version="1")).error_code == E.NONE


def test_a_topic_deleted_after_the_plan_is_asked_about_again() -> None:
    # The plan is made on the worker; the loop takes it later. A topic deleted between the two is asked about again,
    # so no offset is kept for a topic that is gone.
    h = ClassicHarness()
    h.c.topics.create("gone", 2)
    offsets = h.c.offsets
    req = wire.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name="gone", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=1, committed_offset=9)])])
    plan = offsets.prepare(req, 9)
    assert plan.accepted  # what the catalogue said when the plan was made
    h.c.topics.delete("gone")
    offsets.planned = (req, plan)
    try:
        resp = h.c.handle(req, 9)
    finally:
        offsets.planned = None
    assert codes(resp) == {"gone": {E.UNKNOWN_TOPIC_OR_PARTITION}}
    assert offsets.committed("g") == {}


def test_a_plan_is_taken_only_for_its_own_request() -> None:
    h = ClassicHarness()
    offsets = h.c.offsets
    req = commit("g", -1, {1: 4}, unknown=0)
    other = commit("g", -1, {1: 5}, unknown=0)
    offsets.planned = (other, offsets.prepare(other, 9))
    try:
        h.c.handle(req, 9)
    finally:
        offsets.planned = None
    assert offsets.committed("g")[("t", 1)][0] == 4


def test_many_partitions_make_a_deferred_answer_that_the_coordinator_finishes() -> None:
    h = ClassicHarness()
    req = commit("g", -1, {}, unknown=DEFER_ABOVE + 1)
    assert type(h.c.offsets.offset_commit(req, 9)) is Deferred
    resp = h.c.handle(commit("g", -1, {}, unknown=DEFER_ABOVE + 1), 9)
    assert codes(resp) == {"nope": {E.UNKNOWN_TOPIC_OR_PARTITION}, "t": set()}
