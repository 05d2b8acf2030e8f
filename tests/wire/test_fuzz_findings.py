"""What the request fuzzer found, each pinned by a direct test (the inputs themselves are regression seeds in
tests/fuzz/corpus/fuzz_requests/crash-*, replayed by tests/wire/test_fuzz.py)."""

from __future__ import annotations

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.broker import Broker
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.timers import ManualClock
from kcoord.topics import TopicCatalogue

from ..support.harness import ClassicHarness


def broker() -> Broker:
    topics = TopicCatalogue()
    topics.create("t", 2)
    return Broker(Coordinator(topics=topics), topics, node_id=0, host="h", port=1)


def test_list_offsets_v0_answers_in_old_style_offsets_only() -> None:
    r = broker().handlers[2](wire.ListOffsetsRequest(replica_id=-1, topics=[wire.ListOffsetsRequestListOffsetsTopic(
        name="t", partitions=[wire.ListOffsetsRequestListOffsetsPartition(partition_index=1, timestamp=-1)])]), 0)
    frame = wire.encode_response(2, 0, 9, r)  # raised EncodeError: v0 has no `offset` field
    _, back = wire.decode_response(2, 0, frame[4:])
    p = back.topics[0].partitions[0]
    assert (p.error_code, p.old_style_offsets) == (E.NONE, [0])


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_unknown_topic_id_below_v12_answers_an_empty_name(version) -> None:
    tid = b"\x07" * 16
    r = broker().handlers[3](wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=None, topic_id=tid)],
                                                  allow_auto_topic_creation=False), version)
    _, back = wire.decode_response(3, version, wire.encode_response(3, version, 1, r)[4:])
    assert [(t.error_code, t.name, t.topic_id) for t in back.topics] == [(E.UNKNOWN_TOPIC_ID, "", tid)]


def test_a_consumer_heartbeat_join_naming_a_live_connect_group_is_group_id_not_found() -> None:
    c = Coordinator(GroupConfig(group_coordinator_rebalance_protocols="classic,consumer,connect"), ManualClock(0))
    r = c.handle(wire.ConnectGroupHeartbeatRequest(
        group_id="g", member_id="w1", member_epoch=0, rebalance_timeout_ms=30_000,
        client_assignors=[wire.ConnectGroupHeartbeatRequestAssignor(name="incremental", minimum_version=1,
                                                                    maximum_version=2, version=2)]), 0)
    assert r.error_code == E.NONE
    r = c.handle(wire.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
        topic_partitions=[]), 1)
    assert r.error_code == E.GROUP_ID_NOT_FOUND  # raised AttributeError: only a classic group can be upgraded


@pytest.mark.parametrize("timeout", [0, -5])
def test_a_connect_heartbeat_with_a_rebalance_timeout_of_zero_or_below_is_invalid(timeout) -> None:
    c = Coordinator(GroupConfig(group_coordinator_rebalance_protocols="classic,connect"), ManualClock(0))
    assignors = [wire.ConnectGroupHeartbeatRequestAssignor(name="incremental", minimum_version=1, maximum_version=2,
                                                           version=2)]
    r = c.handle(wire.ConnectGroupHeartbeatRequest(group_id="g", member_id="w1", member_epoch=0,
                                                            rebalance_timeout_ms=30_000, client_assignors=assignors), 0)
    assert r.error_code == E.NONE
    r = c.handle(wire.ConnectGroupHeartbeatRequest(group_id="g", member_id="w1", member_epoch=r.member_epoch,
                                                            rebalance_timeout_ms=timeout), 0)
    assert r.error_code == E.INVALID_REQUEST and "RebalanceTimeoutMs" in r.error_message
    g = c.groups["g"]
    assert g.lease_ms(g.members["w1"]) == 30_000


def test_a_classic_rebalance_waiting_for_a_static_member_with_a_zero_rebalance_timeout_does_not_spin() -> None:
    h = ClassicHarness()
    ids = h.form("A", "B")  # two static members
    g = h.group()
    for m in g.members.members.values():
        m.rebalance_timeout_ms = 0  # JoinGroup v1+ takes any value
    assert h.leave((ids["B"], "B")).error_code == E.NONE  # the rebalance that follows waits for A, who stays away
    assert g.state.name == "PREPARING_REBALANCE"
    fired = 0
    for _ in range(50):
        d = h.c.next_deadline()
        if d is None or d > h.clock.ms + 60_000:
            break
        h.clock.ms = max(h.clock.ms, d)
        h.c.poll()
        fired += 1
    # Each wait is at least group.min.session.timeout.ms, so a minute holds a handful of waits, not an endless
    # run of 0 ms timers.
    assert fired <= 60_000 // h.config.group_min_session_timeout_ms + 2, fired


@pytest.mark.parametrize("tags", [b"\x02\x05\x00\x05\x00", b"\x02\x02\x00\x00\x00"], ids=["repeated", "out_of_order"])
def test_tagged_fields_must_strictly_increase(tags) -> None:
    body = wire.ApiVersionsRequest(client_software_name="c", client_software_version="1").encode(3)
    assert body.endswith(b"\x00")
    with pytest.raises(wire.DecodeError):
        wire.ApiVersionsRequest.decode(body[:-1] + tags, 3)  # decoded, then could not be encoded again


def test_a_null_offset_metadata_is_kept_as_kafka_keeps_it_before_and_after_a_restart() -> None:
    from kcoord.store import GroupStore, MemoryRecords

    records = MemoryRecords()
    c = Coordinator(store=GroupStore(records))
    c.topics.create("t", 1)
    req = wire.OffsetCommitRequest(group_id="g", topics=[wire.OffsetCommitRequestTopic(name="t", partitions=[
        wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=100, committed_metadata=None)])])
    assert c.handle(req, 0).topics[0].partitions[0].error_code == E.NONE
    c.store.commit()
    again = Coordinator(store=GroupStore(records))
    again.load()
    fetch = wire.OffsetFetchRequest(group_id="g", topics=[wire.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
    answers = [x.handle(fetch, 1).topics[0].partitions[0] for x in (c, again)]
    assert [(p.committed_offset, p.metadata) for p in answers] == [(100, ""), (100, "")]
