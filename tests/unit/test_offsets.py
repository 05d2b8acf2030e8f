"""Committed offsets in-process (kcoord.offsets): OffsetCommit, OffsetFetch and OffsetDelete edge cases by API
version, offset.metadata.max.bytes counted as Java counts it, and the replay of stored offset records."""

from __future__ import annotations

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.config import GroupConfig

from ..support.harness import ClassicHarness, ConsumerHarness, codes, commit


@pytest.fixture
def h() -> ClassicHarness:
    return ClassicHarness()


def fetch_old(h: ClassicHarness, gid: str, topics=(("t", [0]),), v: int = 7) -> wire.OffsetFetchResponse:
    req = wire.OffsetFetchRequest(group_id=gid, topics=None if topics is None else [
        wire.OffsetFetchRequestTopic(name=t, partition_indexes=list(ps)) for t, ps in topics])
    return h.c.handle(req, v)


def fetch_groups(h: ClassicHarness, *groups, v: int = 8) -> wire.OffsetFetchResponse:
    """groups: (group id, topics or None[, member id, member epoch]); topics: (name, topic id, [partitions])."""
    req = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
        group_id=g[0], member_id=g[2] if len(g) > 2 else None, member_epoch=g[3] if len(g) > 3 else -1,
        topics=None if g[1] is None else [wire.OffsetFetchRequestTopics(name=n, topic_id=tid, partition_indexes=ps)
                                           for n, tid, ps in g[1]]) for g in groups])
    return h.c.handle(req, v)


def delete(h: ClassicHarness, gid: str, topics=(("t", [0]),)) -> wire.OffsetDeleteResponse:
    req = wire.OffsetDeleteRequest(group_id=gid, topics=[wire.OffsetDeleteRequestTopic(
        name=t, partitions=[wire.OffsetDeleteRequestPartition(partition_index=p) for p in ps]) for t, ps in topics])
    return h.c.handle(req, 0)


# ---- OffsetCommit -------------------------------------------------------------------------------------------

def test_commit_with_empty_group_id_is_invalid_group_id_and_keeps_nothing(h) -> None:
    assert codes(commit(h, "", parts=(("t", 0, 5, "x" * 5000, -1),))) == [E.INVALID_GROUP_ID]
    assert h.c.offsets.committed("") == {}


def test_v0_commit_is_a_simple_consumer_commit_and_v1_carries_the_generation(h) -> None:
    assert codes(commit(h, "simple", v=0, gen=-1)) == [E.NONE]  # v0 has no generation: a simple consumer
    assert h.c.offsets.committed("simple")[("t", 0)][0] == 42
    assert codes(commit(h, "other", v=1, gen=3, member="m")) == [E.ILLEGAL_GENERATION]
    assert "other" not in h.c.groups and h.c.offsets.committed("other") == {}


def test_commit_with_generation_zero_to_unknown_group_is_illegal_generation(h) -> None:
    assert codes(commit(h, "nope", gen=0, member="m")) == [E.ILLEGAL_GENERATION]
    assert "nope" not in h.c.groups


def test_v1_member_commit_is_checked_against_its_member_id(h) -> None:
    ids = h.form("A")
    assert codes(commit(h, "g", v=1, gen=1, member=ids["A"])) == [E.NONE]
    assert codes(commit(h, "g", v=1, gen=1, member="stranger")) == [E.UNKNOWN_MEMBER_ID]


def test_static_member_with_stale_member_id_is_fenced(h) -> None:
    h.form("A")
    assert codes(commit(h, "g", gen=1, member="stale-id", iid="A")) == [E.FENCED_INSTANCE_ID]


def test_commit_response_echoes_names_and_partition_indexes(h) -> None:
    resp = commit(h, "s", parts=(("t", 3, 1, "", -1), ("t", 7, 2, "", -1), ("u", 5, 3, "", -1)))
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(3, E.NONE), (7, E.NONE)]), ("u", [(5, E.NONE)])]


def test_v10_commit_by_topic_id_echoes_the_id_and_is_fetched_by_id(h) -> None:
    tid = h.c.topics.get("t").topic_id
    resp = commit(h, "s", v=10, topic_id=tid, parts=(("t", 1, 77, "meta", 4),))
    assert [(t.topic_id, codes(resp)) for t in resp.topics] == [(tid, [E.NONE])]
    assert h.c.offsets.committed("s")[("t", 1)][:3] == (77, 4, "meta")
    got = fetch_groups(h, ("s", [("", tid, [1])]), v=10).groups[0].topics[0]
    assert (got.name, got.topic_id) == ("t", tid)
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata) for p in got.partitions] == [(77, 4, "meta")]
    unknown = b"\x01" * 16
    assert codes(commit(h, "s", v=10, topic_id=unknown)) == [E.UNKNOWN_TOPIC_ID]
    got = fetch_groups(h, ("s", [("", unknown, [1])]), v=10).groups[0].topics[0]
    assert (got.name, got.topic_id, got.partitions[0].committed_offset) == ("", unknown, -1)


def test_null_metadata_is_kept_and_fetched_as_empty(h) -> None:
    assert codes(commit(h, "s", parts=(("t", 0, 9, None, -1),))) == [E.NONE]
    assert fetch_groups(h, ("s", [("t", wire.ZERO_UUID, [0])])).groups[0].topics[0].partitions[0].metadata == ""


@pytest.mark.parametrize("metadata, ok", [
    ("x" * 4, True), ("x" * 5, False),
    ("é" * 4, True),  # Latin-1 but one UTF-16 unit each: Java's String.length() is 4
    ("\U0001F600" * 2, True), ("\U0001F600" * 2 + "a", False), ("\U0001F600" * 3, False),  # 2 units each
    ("\U00010000" * 2, True), ("\U00010000" * 2 + "a", False),  # the first code point outside the BMP: 2 units
    ("\uffff" * 4, True),  # the last BMP code point: 1 unit
])
def test_offset_metadata_max_bytes_counts_utf16_units(metadata, ok) -> None:
    h = ClassicHarness(offset_metadata_max_bytes=4)
    want = E.NONE if ok else E.OFFSET_METADATA_TOO_LARGE
    assert codes(commit(h, "s", parts=(("t", 0, 1, metadata, -1),))) == [want]
    assert (("t", 0) in h.c.offsets.committed("s")) is ok


def test_too_large_metadata_refuses_only_its_partition(h) -> None:
    h = ClassicHarness(offset_metadata_max_bytes=3)
    resp = commit(h, "s", parts=(("t", 0, 1, "abc", -1), ("t", 1, 2, "abcd", -1)))
    assert codes(resp) == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    assert set(h.c.offsets.committed("s")) == {("t", 0)}


def test_group_error_wins_over_too_large_metadata(h) -> None:
    h = ClassicHarness(offset_metadata_max_bytes=3)
    assert codes(commit(h, "nope", gen=2, member="m", parts=(("t", 0, 1, "abcd", -1),))) == [E.ILLEGAL_GENERATION]


def test_commit_count_counts_accepted_offsets(h) -> None:
    assert h.c.offsets.commit_count == 0
    commit(h, "s", parts=(("t", 0, 1, "", -1), ("t", 1, 1, "", -1)))
    commit(h, "s", parts=(("t", 0, 2, "", -1),))
    commit(h, "nope", gen=5, member="m")  # refused: not counted
    assert h.c.offsets.commit_count == 3


def test_forget_topic_removes_its_offsets_from_every_group_and_counts_them(h) -> None:
    commit(h, "a", parts=(("t", 0, 1, "", -1), ("t", 1, 1, "", -1), ("u", 0, 1, "", -1)))
    commit(h, "b", parts=(("t", 0, 1, "", -1),))
    assert h.c.offsets.forget_topic("t") == 3
    assert set(h.c.offsets.committed("a")) == {("u", 0)} and h.c.offsets.committed("b") == {}
    assert h.c.offsets.forget_topic("t") == 0


# ---- unknown topics and partitions; the size of a commit's records ------------------------------------------

def test_a_topic_the_catalogue_does_not_have_is_refused_and_makes_nothing(h) -> None:
    # Kafka's KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION for a topic not in its metadata: nothing is stored, and
    # neither the topic (auto.create.topics.enable is on here, as by default) nor the group is created.
    resp = commit(h, "s", parts=tuple(("nope", p, 1, "", -1) for p in range(5)))
    assert codes(resp) == [E.UNKNOWN_TOPIC_OR_PARTITION] * 5
    assert h.c.topics.auto_create and "nope" not in h.c.topics
    assert "s" not in h.c.groups and h.c.offsets.committed("s") == {} and h.c.offsets.commit_count == 0
    assert h.records.data == {}


def test_a_partition_outside_the_topic_is_refused_and_the_others_are_kept(h) -> None:
    # "t" has 8 partitions: -1, 8 and 2^31-1 are not among them; 0 and 7 are
    parts = (("t", -1, 1, "", -1), ("t", 0, 2, "", -1), ("t", 8, 3, "", -1), ("t", 7, 4, "", -1),
             ("t", 2**31 - 1, 5, "", -1), ("u", 3, 6, "", -1))
    assert codes(commit(h, "s", parts=parts)) == [E.UNKNOWN_TOPIC_OR_PARTITION, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION,
                                                  E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.NONE]
    assert set(h.c.offsets.committed("s")) == {("t", 0), ("t", 7), ("u", 3)}


def test_a_grown_topic_takes_commits_to_its_new_partitions(h) -> None:
    assert codes(commit(h, "s", parts=(("t", 8, 1, "", -1),))) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    h.c.topics.grow("t", 9)
    assert codes(commit(h, "s", parts=(("t", 8, 1, "", -1),))) == [E.NONE]


def test_the_unknown_topic_answer_comes_before_the_groups(h) -> None:
    # Kafka's API layer answers unknown partitions before the group is asked; the rest get the group's error
    ids = h.form("A")
    resp = commit(h, "g", gen=7, member=ids["A"], iid="A", parts=(("nope", 0, 1, "", -1), ("t", 9, 1, "", -1),
                                                                  ("t", 0, 1, "", -1)))
    assert codes(resp) == [E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION, E.ILLEGAL_GENERATION]


def test_offset_delete_refuses_unknown_topics_and_partitions(h) -> None:
    commit(h, "s", parts=(("t", 0, 1, "", -1), ("t", 1, 1, "", -1)))
    resp = delete(h, "s", topics=(("t", [0, 8, -1]), ("nope", [0])))
    assert resp.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(0, E.NONE), (8, E.UNKNOWN_TOPIC_OR_PARTITION), (-1, E.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert set(h.c.offsets.committed("s")) == {("t", 1)}


@pytest.mark.parametrize("group, topic, metadata", [("s", "t", ""), ("gé", "t", "ü€😀"), ("s", "u", None)])
def test_offset_record_size_is_the_records_key_and_value_bytes(group, topic, metadata) -> None:
    size = R.OFFSET_RECORD_FIXED + R.utf8_len(group) + R.utf8_len(topic) + R.utf8_len(metadata or "")
    assert size == len(R.offset_key(group, topic, 3)) + len(R.offset_value(1, 2, metadata, 3))


def offset_parts(n: int, meta: str = "") -> tuple:
    return tuple(("t" if i < 8 else "u", i % 8, i, meta, -1) for i in range(n))


def test_a_commit_whose_records_pass_message_max_bytes_is_refused_whole() -> None:
    # A commit's records are one batch in Kafka; above message.max.bytes (the offsets topic's max.message.bytes)
    # the whole commit fails and Kafka 4 answers every partition of it UNKNOWN_SERVER_ERROR. Here each record is
    # 34 + 1 ("s") + 1 (topic) + 10 (metadata) = 46 bytes: 10 records are 460 bytes.
    record = R.OFFSET_RECORD_FIXED + 1 + 1 + 10
    h = ClassicHarness(message_max_bytes=10 * record)
    assert codes(commit(h, "s", parts=offset_parts(10, "m" * 10))) == [E.NONE] * 10
    assert len(h.c.offsets.committed("s")) == 10
    small = ClassicHarness(message_max_bytes=10 * record - 1)
    assert codes(commit(small, "s", parts=offset_parts(10, "m" * 10))) == [E.UNKNOWN_SERVER_ERROR] * 10
    assert small.c.offsets.committed("s") == {} and "s" not in small.c.groups and small.records.data == {}
    assert small.c.offsets.commit_count == 0
    # what is refused before the group, and what the group refuses, is not counted; a metadata too large for
    # offset.metadata.max.bytes is not written either, so it does not count, though its partition gets the error
    # of the whole when the rest is too large
    assert codes(commit(small, "s", parts=(*offset_parts(9, "m" * 10), ("nope", 0, 1, "", -1)))) == \
        [E.NONE] * 9 + [E.UNKNOWN_TOPIC_OR_PARTITION]
    tight = ClassicHarness(message_max_bytes=2 * record, offset_metadata_max_bytes=10)
    assert codes(commit(tight, "s", parts=(*offset_parts(2, "m" * 10), ("u", 0, 1, "m" * 11, -1)))) == \
        [E.NONE, E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    assert codes(commit(tight, "s", parts=(*offset_parts(3, "m" * 10), ("u", 0, 1, "m" * 11, -1)))) == \
        [E.UNKNOWN_SERVER_ERROR] * 4


def test_the_default_message_max_bytes_refuses_a_commit_of_a_whole_big_topic() -> None:
    # message.max.bytes is Kafka's 1048588 by default: an offset of a 14-character topic under a 14-character group
    # id is a 62-byte record, so 16,912 of them fit (1,048,544 bytes) and 16,913 do not (1,048,606)
    assert GroupConfig().message_max_bytes == 1_048_588
    h = ClassicHarness(topics={"events-topic-a": 30_000})
    parts = tuple(("events-topic-a", p, p, "", -1) for p in range(30_000))
    assert set(codes(commit(h, "consumer-group", parts=parts))) == {E.UNKNOWN_SERVER_ERROR}
    assert set(codes(commit(h, "consumer-group", parts=parts[:16_913]))) == {E.UNKNOWN_SERVER_ERROR}
    assert codes(commit(h, "consumer-group", parts=parts[:16_912])) == [E.NONE] * 16_912


# ---- OffsetFetch ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [1, 5, 7])
def test_old_fetch_by_topic_and_all(h, v) -> None:
    commit(h, "s", parts=(("t", 0, 42, "m", 6), ("u", 2, 8, "", -1)))
    resp = fetch_old(h, "s", topics=(("t", [0, 1]),), v=v)
    assert resp.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                      for p in t.partitions]) for t in resp.topics] == [
        ("t", [(0, 42, 6, "m", E.NONE), (1, -1, -1, "", E.NONE)])]
    resp = fetch_old(h, "s", topics=None, v=v)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(0, 42)]), ("u", [(2, 8)])]
    assert fetch_old(h, "other", v=v).topics[0].partitions[0].committed_offset == -1


def test_old_fetch_with_empty_group_id_is_invalid_group_id(h) -> None:
    assert fetch_old(h, "").error_code == E.INVALID_GROUP_ID


def test_fetch_of_uncommitted_partition_has_no_offset_no_epoch_no_metadata(h) -> None:
    p = fetch_groups(h, ("s", [("t", wire.ZERO_UUID, [4])])).groups[0].topics[0].partitions[0]
    assert (p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) == (
        4, -1, -1, "", E.NONE)


def test_fetch_of_committed_partition_has_offset_epoch_metadata(h) -> None:
    commit(h, "s", parts=(("t", 0, 42, "meta", 6),))
    p = fetch_groups(h, ("s", [("t", wire.ZERO_UUID, [0])])).groups[0].topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) == (42, 6, "meta", E.NONE)


def test_fetch_groups_each_once_in_order_and_empty_id_invalid(h) -> None:
    commit(h, "a", parts=(("t", 0, 1, "", -1),))
    commit(h, "b", parts=(("t", 0, 2, "", -1),))
    resp = fetch_groups(h, ("a", None), ("a", None), ("", None), ("b", None))
    assert [(g.group_id, g.error_code, [(t.name, [p.committed_offset for p in t.partitions]) for t in g.topics])
            for g in resp.groups] == [("a", E.NONE, [("t", [1])]), ("", E.INVALID_GROUP_ID, []),
                                      ("b", E.NONE, [("t", [2])])]


def test_v9_fetch_of_unknown_group_answers_no_offsets(h) -> None:
    g = fetch_groups(h, ("nope", [("t", wire.ZERO_UUID, [0])], "m", 3), v=9).groups[0]
    assert (g.group_id, g.error_code, g.topics[0].partitions[0].committed_offset) == ("nope", E.NONE, -1)


def test_v9_fetch_refused_by_consumer_group_then_next_group_answered() -> None:
    c = ConsumerHarness()
    c.join("m1")
    commit(c, "s", parts=(("T", 0, 5, "", -1),))
    resp = fetch_groups(c, ("g", None, "stranger", 1), ("s", None), v=9)
    assert [(g.group_id, g.error_code, g.topics) for g in resp.groups[:1]] == [("g", E.UNKNOWN_MEMBER_ID, [])]
    assert [(g.group_id, [t.name for t in g.topics]) for g in resp.groups[1:]] == [("s", ["T"])]


# ---- OffsetDelete ---------------------------------------------------------------------------------------------

def test_offset_delete_group_errors(h) -> None:
    assert delete(h, "").error_code == E.INVALID_GROUP_ID
    assert delete(h, "nope").error_code == E.GROUP_ID_NOT_FOUND
    h.form("A")
    h.group().unload()  # moved away: Dead
    assert delete(h, "g").error_code == E.GROUP_ID_NOT_FOUND


def test_offset_delete_response_echoes_topics_and_partitions(h) -> None:
    commit(h, "s", parts=(("t", 2, 1, "", -1), ("t", 3, 1, "", -1)))
    resp = delete(h, "s", topics=(("t", [2, 7]), ("u", [1])))
    assert resp.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(2, E.NONE), (7, E.NONE)]), ("u", [(1, E.NONE)])]
    assert set(h.c.offsets.committed("s")) == {("t", 3)}


# ---- replay of stored records ---------------------------------------------------------------------------------

def key_v0(group: str, topic: str, partition: int) -> bytes:
    return b"\x00\x00" + wire.OffsetCommitKey(group=group, topic=topic, partition=partition).encode(0)


def value_v1(offset: int, metadata: str, ts: int) -> bytes:
    """OffsetCommitValue v1, as Kafka brokers before KIP-211 wrote it (with an expire timestamp)."""
    return b"\x00\x01" + wire.OffsetCommitValue(offset=offset, metadata=metadata, commit_timestamp=ts,
                                                expire_timestamp=ts + 1000).encode(1)


@pytest.mark.parametrize("key", [key_v0("g", "t", 3), R.offset_key("g", "t", 3)])
def test_replay_reads_kafka_v1_values_with_either_key_version(h, key) -> None:
    h.c.offsets.replay(key, value_v1(123, "meta", 55))
    h.c.offsets.replay_done()
    assert h.c.offsets.committed("g") == {("t", 3): (123, -1, "meta", 55)}


def test_replay_reads_v0_key_with_current_value(h) -> None:
    h.c.offsets.replay(key_v0("g", "t", 1), R.offset_value(7, 2, "x", 9))
    h.c.offsets.replay(R.offset_key("g", "t", 2), R.offset_value(8, 3, "y", 10))
    h.c.offsets.replay(R.offset_key("h", "t", 2), R.offset_value(9, 4, "", 11))
    h.c.offsets.replay_done()
    assert h.c.offsets.committed("g") == {("t", 1): (7, 2, "x", 9), ("t", 2): (8, 3, "y", 10)}
    assert h.c.offsets.committed("h") == {("t", 2): (9, 4, "", 11)}


@pytest.mark.parametrize("key, value", [
    (R.offset_key("g", "t", 1) + b"\x00", R.offset_value(7, 2, "x", 9)),
    (R.offset_key("g", "t", 1), R.offset_value(7, 2, "x", 9) + b"\x00"),
    (R.offset_key("g", "t", 1), R.offset_value(7, 2, "x", 9)[:-3]),
])
def test_replay_of_damaged_offset_record_is_refused(h, key, value) -> None:
    with pytest.raises(R.RecordError):
        h.c.offsets.replay(key, value)
    assert h.c.offsets.committed("g") == {}
