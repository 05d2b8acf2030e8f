"""Topics a few request bytes cannot blow up, and topics that can be deleted.

`topic.max.partitions` and `max.partitions` (kcoord's own) bound what one topic and all of them together may have:
CreateTopics, CreatePartitions and Metadata's auto-creation answer INVALID_PARTITIONS past them, and a store that
holds more than the bounds allow is refused at start, naming the topic. DeleteTopics (v1-6) deletes a topic, its
record and every group's committed offsets of it, as Kafka does; a consumer group revokes it.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig
from kcoord.coordinator import Coordinator
from kcoord.server import Server
from kcoord.store import GroupStore, MemoryRecords, SqliteRecords, StoreError
from kcoord.topics import PartitionLimitError, TopicCatalogue

from ..support.servers import free_port, serve


def create(broker, name: str, n: int, version: int = 5, validate_only: bool = False):
    r = broker.handlers[19](wire.CreateTopicsRequest(timeout_ms=1000, validate_only=validate_only, topics=[
        wire.CreateTopicsRequestCreatableTopic(name=name, num_partitions=n, replication_factor=1)]), version)
    return r.topics[0]


def grow(broker, name: str, n: int, validate_only: bool = False):
    r = broker.handlers[37](wire.CreatePartitionsRequest(timeout_ms=1000, validate_only=validate_only, topics=[
        wire.CreatePartitionsRequestCreatePartitionsTopic(name=name, count=n, assignments=None)]), 3)
    return r.results[0]


@pytest.fixture
def broker():
    from kcoord.broker import Broker

    topics = TopicCatalogue(True, 1, topic_max_partitions=1000, max_partitions=2500)
    return Broker(Coordinator(topics=topics), topics, node_id=0, host="127.0.0.1", port=9092)


def test_partition_bounds_at_the_boundary(broker) -> None:
    assert create(broker, "a", 1000).error_code == E.NONE  # at topic.max.partitions
    over = create(broker, "b", 1001)
    assert over.error_code == E.INVALID_PARTITIONS and "topic.max.partitions (1000)" in over.error_message
    assert "b" not in broker.topics
    assert create(broker, "b", 1000).error_code == E.NONE
    assert create(broker, "c", 500).error_code == E.NONE  # 2,500 in all: at max.partitions
    full = create(broker, "d", 1)
    assert full.error_code == E.INVALID_PARTITIONS and "max.partitions (2500)" in full.error_message
    assert broker.topics.total_partitions == 2500
    r = broker.handlers[3](wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name="auto")],
                                                allow_auto_topic_creation=True), 12)
    assert r.topics[0].error_code == E.INVALID_PARTITIONS and "auto" not in broker.topics


def test_create_partitions_and_validate_only_are_bounded_too(broker) -> None:
    assert create(broker, "a", 10).error_code == E.NONE
    assert grow(broker, "a", 1000).error_code == E.NONE
    assert grow(broker, "a", 1001).error_code == E.INVALID_PARTITIONS
    assert broker.topics.get("a").partitions == 1000
    assert create(broker, "v", 1001, validate_only=True).error_code == E.INVALID_PARTITIONS
    assert create(broker, "v", 1000, validate_only=True).error_code == E.NONE and "v" not in broker.topics
    assert create(broker, "b", 1000).error_code == E.NONE
    assert grow(broker, "b", 1001, validate_only=True).error_code == E.INVALID_PARTITIONS


def test_catalogue_refuses_past_either_bound_and_keeps_its_total() -> None:
    cat = TopicCatalogue(topic_max_partitions=10, max_partitions=15)
    cat.create("a", 10)
    with pytest.raises(PartitionLimitError, match="max.partitions"):
        cat.create("b", 6)
    cat.create("b", 5)
    cat.delete("a")
    assert cat.total_partitions == 5
    cat.grow("b", 10)
    with pytest.raises(PartitionLimitError, match="topic.max.partitions"):
        cat.grow("b", 11)
    assert cat.total_partitions == 10


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def test_topics_create_of_99999999_partitions_is_refused_and_the_server_stays_small(tmp_path) -> None:
    # Found at a195b2b: the server stopped answering and grew at ~100 MB/s, saved the topic, and blew up again on
    # every restart.
    port = free_port()
    srv = serve(port, tmp_path / "log", "--data-dir", str(tmp_path / "data"))
    try:
        out = subprocess.run([sys.executable, "-m", "kcoord.cli", "topics", "--create", "x:99999999",
                              "--bootstrap", srv.bootstrap], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "INVALID_PARTITIONS" in out.stderr and "topic.max.partitions" in out.stderr
        with Client(srv.bootstrap) as c:
            meta = c.request(wire.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        assert [t.name for t in meta.topics] == []
        assert rss_kib(srv.proc.pid) < 300 * 1024, rss_kib(srv.proc.pid)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0


def test_a_stored_topic_over_the_bound_is_refused_at_start_naming_it(tmp_path) -> None:
    data = tmp_path / "data"
    records = SqliteRecords(str(data))
    records.put({R.topic_key("huge"): R.topic_value(b"\x01" * 16, 99_999_999)})
    records.close()
    r = subprocess.run([sys.executable, "-m", "kcoord.cli", "serve", "--port", str(free_port()), "--data-dir",
                        str(data)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "'huge' has 99999999 partitions" in r.stderr and "topic.max.partitions" in r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(StoreError, match="huge"):
        Server(ServerConfig(data_dir=str(data)))
    srv = Server(ServerConfig(data_dir=str(data), topic_max_partitions=100_000_000, max_partitions=100_000_000))
    assert srv.topics.get("huge").partitions == 99_999_999  # raised bounds serve it (to delete it)
    srv.store.close()


# ---- DeleteTopics ------------------------------------------------------------------------------------------

def commit(c: Coordinator, group: str, topic: str, partition: int, offset: int) -> None:
    r = c.handle(wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                  topics=[wire.OffsetCommitRequestTopic(name=topic, partitions=[
                                                      wire.OffsetCommitRequestPartition(partition_index=partition,
                                                                                        committed_offset=offset)])]), 8)
    assert r.topics[0].partitions[0].error_code == E.NONE


def delete(broker, version: int, *names: str, ids: tuple[bytes, ...] = ()):
    if version >= 6:
        req = wire.DeleteTopicsRequest(timeout_ms=1000, topics=[
            *(wire.DeleteTopicsRequestDeleteTopicState(name=n, topic_id=wire.ZERO_UUID) for n in names),
            *(wire.DeleteTopicsRequestDeleteTopicState(name=None, topic_id=i) for i in ids)])
    else:
        req = wire.DeleteTopicsRequest(timeout_ms=1000, topic_names=list(names))
    return broker.handlers[20](req, version).responses


@pytest.mark.parametrize("version", [1, 4, 5, 6])
def test_delete_topics_deletes_the_topic_its_record_and_its_offsets(version) -> None:
    from kcoord.broker import Broker

    records = MemoryRecords()
    store = GroupStore(records)
    topics = TopicCatalogue()
    topics.on_change, topics.on_delete = store.write_topic, store.delete_topic
    c = Coordinator(store=store, topics=topics)
    b = Broker(c, topics, node_id=0, host="h", port=1)
    topics.create("gone", 3)
    keep = topics.create("kept", 2)
    for g in ("g1", "g2"):
        commit(c, g, "gone", 1, 10)
        commit(c, g, "kept", 0, 20)
    store.commit()
    tid = topics.get("gone").topic_id
    out = delete(b, version, "gone", "never")
    store.commit()
    assert [(r.name, r.error_code) for r in out] == [("gone", E.NONE), ("never", E.UNKNOWN_TOPIC_OR_PARTITION)]
    if version >= 6:
        assert out[0].topic_id == tid
    assert "gone" not in topics and topics.get("kept") is keep
    assert {g: dict(c.offsets.committed(g)) for g in ("g1", "g2")} == {
        g: {("kept", 0): c.offsets.committed(g)[("kept", 0)]} for g in ("g1", "g2")}
    assert R.topic_key("gone") not in records.data and R.offset_key("g1", "gone", 1) not in records.data
    again = Coordinator(store=GroupStore(records))  # a restart: the deletion is durable
    again.load()
    assert "gone" not in again.topics and set(again.offsets.committed("g2")) == {("kept", 0)}
    if version >= 6:  # by id, and a name and id that disagree
        assert [r.error_code for r in delete(b, 6, ids=(tid,))] == [E.UNKNOWN_TOPIC_ID]
        assert [(r.name, r.error_code) for r in delete(b, 6, ids=(keep.topic_id,))] == [("kept", E.NONE)]


def test_a_deleted_topic_is_revoked_from_a_consumer_group_and_a_new_one_by_its_name_is_a_new_topic() -> None:
    from kcoord.broker import Broker

    from ..support.harness import ConsumerHarness

    h = ConsumerHarness({"t": 4, "u": 2})
    b = Broker(h.c, h.c.topics, node_id=0, host="h", port=1)
    r = h.join("m", ("t", "u"))
    assert h.parts(r) == {"t": [0, 1, 2, 3], "u": [0, 1]}
    old_id = h.tid("t")
    assert [x.error_code for x in delete(b, 6, "t")] == [E.NONE]
    r = h.hb("m", r.member_epoch)  # h.parts names every topic id it is given: the deleted id would fail it
    assert r.error_code == E.NONE and h.parts(r) == {"u": [0, 1]}
    r = h.hb("m", r.member_epoch, owned={"u": [0, 1]})
    assert r.error_code == E.NONE
    h.c.topics.create("t", 2)
    assert h.tid("t") != old_id
    r = h.hb("m", r.member_epoch, owned={"u": [0, 1]})
    assert r.error_code == E.NONE and h.parts(r) == {"t": [0, 1], "u": [0, 1]}
    assert h.tid("t") in {tp.topic_id for tp in r.assignment.topic_partitions}


@pytest.mark.interop
def test_real_admin_clients_delete_topics_and_the_deletion_survives_a_restart(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    data = tmp_path / "data"
    port = free_port()
    srv = serve(port, tmp_path / "log", "--data-dir", str(data), "--topic", "a:3", "--topic", "b:2",
                "--topic", "c:1")
    try:
        with Client(srv.bootstrap) as c:
            r = c.request(wire.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                   topics=[wire.OffsetCommitRequestTopic(name=t, partitions=[
                                                       wire.OffsetCommitRequestPartition(partition_index=0,
                                                                                         committed_offset=5)])
                                                       for t in ("a", "c")]), 8)
            assert all(p.error_code == E.NONE for t in r.topics for p in t.partitions)
        admin = AdminClient({"bootstrap.servers": srv.bootstrap})
        for fut in admin.delete_topics(["a"], operation_timeout=10).values():
            assert fut.result(10) is None
        with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
            admin.delete_topics(["never"], operation_timeout=10)["never"].result(10)
        kp = KafkaAdminClient(bootstrap_servers=srv.bootstrap)
        try:
            kp.delete_topics(["b"])
        finally:
            kp.close()
        assert set(admin.list_topics(timeout=10).topics) == {"c"}
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0
    port = free_port()
    srv = serve(port, tmp_path / "log", "--data-dir", str(data))
    try:
        with Client(srv.bootstrap) as c:
            meta = c.request(wire.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
            fetched = c.request(wire.OffsetFetchRequest(groups=[
                wire.OffsetFetchRequestGroup(group_id="g", topics=None)]), 8)
        assert [t.name for t in meta.topics] == ["c"]
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in fetched.groups[0].topics] == [("c", [5])]
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0
