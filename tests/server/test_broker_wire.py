"""The broker APIs kcoord answers around the group protocol (kcoord/broker.py), over the wire on a real `kcoord serve`,
each at the highest version kcoord serves and an older one:

- Produce is refused, an error code on every partition (never NONE), and acks=0 gets no response at all (Kafka);
- Fetch is held for max_wait_ms and answered empty, error NONE, the high watermark where the consumer is;
- ListOffsets answers an empty log as Kafka does: 0 for earliest and latest, -1 (no record) for a timestamp, and
  UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist;
- Metadata creates an unknown topic when allowed (allow_auto_topic_creation, auto.create.topics.enable's default),
  and a later Metadata lists it with its topic id and partitions; when not allowed, nothing is created.
"""

from __future__ import annotations

import select
import socket
import struct

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.broker import NO_RECORDS
from kcoord.client import Client

from ..support.servers import Server, free_port, recv_exact, serve

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
# The highest version of each that kcoord serves (checked against what it advertises below), and an older one.
HIGHEST = {PRODUCE: 11, FETCH: 17, LIST_OFFSETS: 10, METADATA: 13}
OLDER = {PRODUCE: 3, FETCH: 4, LIST_OFFSETS: 1, METADATA: 4}
TOPIC, PARTITIONS = "orders", 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("broker-wire") / "server.log"
    srv = serve(free_port(), log, "--topic", f"{TOPIC}:{PARTITIONS}")
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


def api_versions_request() -> wire.ApiVersionsRequest:
    return wire.ApiVersionsRequest(client_software_name="kcoord-test", client_software_version="1")


def next_response(sock: socket.socket) -> tuple[int, bytes]:
    """The next response frame to arrive: its correlation id (the header's first field, whatever its version) and
    the frame without its size prefix."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    frame = recv_exact(sock, size)
    return struct.unpack(">i", frame[:4])[0], frame


def metadata(srv: Server, names: list[str] | None, version: int, allow: bool = False) -> wire.MetadataResponse:
    topics = None if names is None else [wire.MetadataRequestTopic(name=n) for n in names]
    # v0-3 carry no allow_auto_topic_creation: it is true for them, and cannot be sent false
    with Client(srv.bootstrap) as c:
        return c.request(wire.MetadataRequest(topics=topics, allow_auto_topic_creation=allow or version < 4), version)


def listed(srv: Server) -> dict[str, wire.MetadataResponseTopic]:
    """Every topic the server has, by a Metadata of all topics (which never creates one)."""
    return {t.name: t for t in metadata(srv, None, HIGHEST[METADATA]).topics}


def topic_id(srv: Server, name: str) -> bytes:
    [t] = metadata(srv, [name], HIGHEST[METADATA]).topics
    assert t.error_code == E.NONE and t.topic_id != wire.ZERO_UUID
    return t.topic_id


def test_the_versions_used_here_are_the_highest_kcoord_advertises(server) -> None:
    with Client(server.bootstrap) as c:
        r = c.request(api_versions_request(), 3)
    advertised = {k.api_key: k.max_version for k in r.api_keys}
    assert {k: advertised[k] for k in HIGHEST} == HIGHEST


# ---- Produce -------------------------------------------------------------------------------------------------------

def produce_request(acks: int) -> wire.ProduceRequest:
    batch = b"\x00" * 61  # never read: kcoord stores no records
    return wire.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
        wire.ProduceRequestTopicProduceData(name=TOPIC, partition_data=[
            wire.ProduceRequestPartitionProduceData(index=p, records=batch) for p in (0, 2)]),
        wire.ProduceRequestTopicProduceData(name="no-such-topic", partition_data=[
            wire.ProduceRequestPartitionProduceData(index=0, records=batch)])])


@pytest.mark.parametrize("version", [HIGHEST[PRODUCE], OLDER[PRODUCE]])
@pytest.mark.parametrize("acks", [1, -1])
def test_produce_is_refused_on_every_partition(server, acks, version) -> None:
    with Client(server.bootstrap) as c:
        r = c.request(produce_request(acks), version)
    got = {(t.name, p.index): p for t in r.responses for p in t.partition_responses}
    assert set(got) == {(TOPIC, 0), (TOPIC, 2), ("no-such-topic", 0)}
    assert all(p.error_code != E.NONE and p.base_offset == -1 for p in got.values())
    # kcoord's documented refusal (kcoord/broker.py): INVALID_REQUEST, saying why from v8 (error_message)
    assert got[(TOPIC, 0)].error_code == got[(TOPIC, 2)].error_code == E.INVALID_REQUEST
    if version >= 8:
        assert got[(TOPIC, 0)].error_message == NO_RECORDS
    # nothing was appended: the log still ends at 0
    [p] = list_offsets(server, [(TOPIC, [(0, -1)])], HIGHEST[LIST_OFFSETS])[TOPIC]
    assert (p.error_code, p.offset) == (E.NONE, 0)


@pytest.mark.parametrize("version", [HIGHEST[PRODUCE], OLDER[PRODUCE]])
def test_produce_with_acks_0_gets_no_response(server, version) -> None:
    with Client(server.bootstrap) as c:
        produced = c.send(PRODUCE, version, produce_request(acks=0))
        asked = c.send(API_VERSIONS, 3, api_versions_request())
        assert asked != produced
        corr, frame = next_response(c.sock)
        assert corr == asked, "the first response on the connection is not the ApiVersions one"
        assert wire.decode_response(API_VERSIONS, 3, frame)[1].error_code == E.NONE
        # and none comes later either: the next answer is the next request's
        again = c.send(API_VERSIONS, 3, api_versions_request())
        assert next_response(c.sock)[0] == again


# ---- Fetch ---------------------------------------------------------------------------------------------------------

def fetch_request(version: int, wait_ms: int, topic: str, tid: bytes, offsets: dict[int, int]) -> wire.FetchRequest:
    by_id = version >= 13
    return wire.FetchRequest(
        replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[wire.FetchRequestFetchTopic(
            topic="" if by_id else topic, topic_id=tid if by_id else wire.ZERO_UUID, partitions=[
                wire.FetchRequestFetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=off,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=1 << 20)
                for p, off in offsets.items()])])


@pytest.mark.parametrize("version", [HIGHEST[FETCH], 12, OLDER[FETCH]])
def test_fetch_is_answered_empty_and_before_the_request_after_it(server, version) -> None:
    offsets = {0: 0, 2: 42}
    with Client(server.bootstrap) as c:
        fetched = c.send(FETCH, version, fetch_request(version, 200, TOPIC, topic_id(server, TOPIC), offsets))
        asked = c.send(API_VERSIONS, 3, api_versions_request())
        corr, frame = next_response(c.sock)
        assert corr == fetched  # answered, and ahead of the request sent after it
        r = wire.decode_response(FETCH, version, frame)[1]
        assert next_response(c.sock)[0] == asked
    assert r.error_code == E.NONE
    [t] = r.responses
    parts = {p.partition_index: p for p in t.partitions}
    assert set(parts) == set(offsets)
    for i, offset in offsets.items():
        p = parts[i]
        assert p.error_code == E.NONE and not p.records  # no records, ever
        # kcoord's documented answer: the log ends where the consumer is, so it neither resets nor spins
        assert p.high_watermark == offset and p.last_stable_offset == offset
        if version >= 5:
            assert p.log_start_offset == 0


def test_a_fetch_is_held_until_its_wait_is_over(server) -> None:
    """Held, not answered at once: a Fetch waiting 20 s, then a Metadata creating a marker topic on the same
    connection. Once another connection sees the marker, the server has handled both; neither answer has left yet
    (the Metadata's waits behind the held Fetch). The client then goes away with its Fetch held, and the server
    serves the next one. (20 s: far longer than this test takes on a loaded machine; the order of the answers
    is test_fetch_is_answered_empty_and_before_the_request_after_it's.)"""
    version = HIGHEST[FETCH]
    marker = "held-fetch-marker"
    with Client(server.bootstrap) as c:
        c.send(FETCH, version, fetch_request(version, 20_000, TOPIC, topic_id(server, TOPIC), {0: 0}))
        c.send(METADATA, 12, wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=marker)],
                                                  allow_auto_topic_creation=True))
        with Client(server.bootstrap) as other:
            for _ in range(10_000):  # until the server has handled the Metadata, so the Fetch before it too
                [t] = other.request(wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=marker)],
                                                         allow_auto_topic_creation=False), 12).topics
                if t.error_code == E.NONE:
                    break
            else:
                pytest.fail("the Metadata sent behind the Fetch never created its topic")
        readable, _, _ = select.select([c.sock], [], [], 0)
        assert readable == [], "the Fetch was answered before its max_wait_ms"
    with Client(server.bootstrap) as after:
        [t] = after.request(wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=marker)],
                                                 allow_auto_topic_creation=False), 12).topics
        assert t.error_code == E.NONE


@pytest.mark.parametrize("version", [HIGHEST[FETCH], OLDER[FETCH]])
def test_fetch_of_an_unknown_topic_or_partition(server, version) -> None:
    with Client(server.bootstrap) as c:
        r = c.request(fetch_request(version, 0, TOPIC, topic_id(server, TOPIC), {PARTITIONS: 0}), version)
        [p] = r.responses[0].partitions
        assert p.error_code == E.UNKNOWN_TOPIC_OR_PARTITION  # a partition the topic does not have
        r = c.request(fetch_request(version, 0, "no-such-topic", b"\x07" * 16, {0: 0}), version)
        [p] = r.responses[0].partitions
        assert p.error_code == (E.UNKNOWN_TOPIC_ID if version >= 13 else E.UNKNOWN_TOPIC_OR_PARTITION)


# ---- ListOffsets ---------------------------------------------------------------------------------------------------

EARLIEST, LATEST = -2, -1
A_TIMESTAMP = 1_700_000_000_000


def list_offsets(srv: Server, wanted: list[tuple[str, list[tuple[int, int]]]], version: int):
    req = wire.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
        wire.ListOffsetsRequestListOffsetsTopic(name=name, partitions=[
            wire.ListOffsetsRequestListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=ts,
                                                        max_num_offsets=1) for p, ts in parts])
        for name, parts in wanted])
    with Client(srv.bootstrap) as c:
        r = c.request(req, version)
    return {t.name: t.partitions for t in r.topics}


@pytest.mark.parametrize("version", [HIGHEST[LIST_OFFSETS], OLDER[LIST_OFFSETS]])
def test_list_offsets_answers_an_empty_log_as_kafka(server, version) -> None:
    got = list_offsets(server, [(TOPIC, [(0, EARLIEST), (1, LATEST), (2, A_TIMESTAMP), (PARTITIONS, LATEST)]),
                                ("no-such-topic", [(0, EARLIEST), (1, A_TIMESTAMP)])], version)
    parts = {p.partition_index: p for p in got[TOPIC]}
    epoch = 0 if version >= 4 else -1  # the leader epoch of an offset found, from v4
    # the log's start and its end are 0 (nothing is ever appended)
    assert (parts[0].error_code, parts[0].offset, parts[0].timestamp, parts[0].leader_epoch) == (E.NONE, 0, -1, epoch)
    assert (parts[1].error_code, parts[1].offset, parts[1].timestamp, parts[1].leader_epoch) == (E.NONE, 0, -1, epoch)
    # no record is at or after any timestamp: Kafka answers NONE with offset -1 and timestamp -1 (a Java consumer's
    # offsetsForTimes then gives null; offset 0 with timestamp -1 makes it throw "Invalid negative timestamp")
    assert (parts[2].error_code, parts[2].offset, parts[2].timestamp) == (E.NONE, -1, -1)
    assert parts[PARTITIONS].error_code == E.UNKNOWN_TOPIC_OR_PARTITION and parts[PARTITIONS].offset == -1
    assert [(p.partition_index, p.error_code, p.offset) for p in got["no-such-topic"]] == \
        [(0, E.UNKNOWN_TOPIC_OR_PARTITION, -1), (1, E.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert "no-such-topic" not in listed(server)  # ListOffsets never creates a topic


def test_list_offsets_max_timestamp_of_an_empty_log_is_no_record(server) -> None:
    # -3 (MAX_TIMESTAMP, v7+): the record with the largest timestamp; an empty log has none
    [p] = list_offsets(server, [(TOPIC, [(0, -3)])], HIGHEST[LIST_OFFSETS])[TOPIC]
    assert (p.error_code, p.offset, p.timestamp) == (E.NONE, -1, -1)


def test_list_offsets_v0_answers_the_log_end_in_old_style_offsets(server) -> None:
    [p] = list_offsets(server, [(TOPIC, [(1, LATEST)])], 0)[TOPIC]
    assert (p.error_code, p.old_style_offsets) == (E.NONE, [0])


# ---- Metadata ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [HIGHEST[METADATA], OLDER[METADATA]])
def test_metadata_creates_an_unknown_topic_when_allowed(server, version) -> None:
    name = f"auto-created-v{version}"
    assert name not in listed(server)
    [t] = metadata(server, [name], version, allow=True).topics
    assert (t.error_code, t.name) == (E.NONE, name)
    assert [p.partition_index for p in t.partitions] == [0]  # num.partitions' default: 1
    if version >= 10:
        assert t.topic_id != wire.ZERO_UUID
    later = listed(server)[name]  # created: a later Metadata of all topics lists it
    assert later.error_code == E.NONE and later.topic_id != wire.ZERO_UUID
    if version >= 10:
        assert later.topic_id == t.topic_id
    assert [(p.partition_index, p.leader_id, p.error_code) for p in later.partitions] == [(0, 0, E.NONE)]
    [again] = metadata(server, [name], version, allow=True).topics  # asked again: the same topic, not a new one
    assert again.error_code == E.NONE and listed(server)[name].topic_id == later.topic_id


@pytest.mark.parametrize("version", [HIGHEST[METADATA], OLDER[METADATA]])
def test_metadata_does_not_create_when_not_allowed(server, version) -> None:
    name = f"not-created-v{version}"
    [t] = metadata(server, [name], version, allow=False).topics
    assert (t.error_code, t.name, t.partitions) == (E.UNKNOWN_TOPIC_OR_PARTITION, name, [])
    assert name not in listed(server)


def test_metadata_before_v4_always_creates(server) -> None:
    # v0-3 carry no allow_auto_topic_creation: every one may create (as Kafka's broker treats them)
    [t] = metadata(server, ["auto-created-v1"], 1).topics
    assert t.error_code == E.NONE and len(t.partitions) == 1
    assert "auto-created-v1" in listed(server)
