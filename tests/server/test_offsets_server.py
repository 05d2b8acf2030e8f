"""Committed offsets against `kcoord serve`: a hostile commit on the wire (the in-process cases are
tests/unit/test_offsets.py)."""

from __future__ import annotations

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.client import Client
from kcoord.store import SqliteRecords

from ..support.harness import codes
from ..support.servers import free_port, serve


def test_a_two_million_partition_commit_is_refused_on_the_wire_and_stores_nothing(tmp_path) -> None:
    # The hostile commit of issue 30: generation -1, 2,000,000 partitions, half of a topic that does not exist and
    # half past the end of a 3-partition topic (34 MiB). Every partition is answered UNKNOWN_TOPIC_OR_PARTITION,
    # and neither offsets nor a group are kept, in memory or in the store.
    data = tmp_path / "data"
    s = serve(free_port(), tmp_path / "server.log", "--data-dir", str(data), "--topic", "orders:3")
    try:
        n = 1_000_000
        part = wire.OffsetCommitRequestPartition
        req = wire.OffsetCommitRequest(group_id="hostile", generation_id_or_member_epoch=-1, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name="no-such-topic", partitions=[
                part(partition_index=i, committed_offset=i) for i in range(n)]),
            wire.OffsetCommitRequestTopic(name="orders", partitions=[
                part(partition_index=3 + i, committed_offset=i) for i in range(n)])])
        with Client(s.bootstrap, timeout=120) as c:
            resp = c.request(req, 8)
            assert [(t.name, len(t.partitions)) for t in resp.topics] == [("no-such-topic", n), ("orders", n)]
            assert {p.error_code for t in resp.topics for p in t.partitions} == {E.UNKNOWN_TOPIC_OR_PARTITION}
            assert resp.topics[1].partitions[-1].partition_index == n + 2
            del req, resp
            fetched = c.request(wire.OffsetFetchRequest(groups=[
                wire.OffsetFetchRequestGroup(group_id="hostile", topics=None)]), 8)
            assert fetched.groups[0].topics == []
            assert "hostile" not in {g.group_id for g in c.request(wire.ListGroupsRequest(), 4).groups}
            # the same client's commit of a partition the topic has is taken
            ok = c.request(wire.OffsetCommitRequest(group_id="fine", generation_id_or_member_epoch=-1, topics=[
                wire.OffsetCommitRequestTopic(name="orders", partitions=[part(partition_index=2, committed_offset=5)])]),
                8)
            assert codes(ok) == [E.NONE]
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=30) == 0, s.log_tail()
    records = SqliteRecords(str(data))
    try:
        stored = [R.decode(k, v) for k, v in records.scan()]
    finally:
        records.close()
    assert [(r.kind, r.group) for r in stored if r.kind != "topic"] == [("offset", "fine")]
