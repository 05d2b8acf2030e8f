"""Authorization of the broker's topic APIs on the wire (issue 32), as KafkaApis and ControllerApis check them
(../shared/reference/kafka-security.md §6, §8 cases 23 and 24): Metadata, ListOffsets, Fetch, Produce,
CreateTopics, DeleteTopics and CreatePartitions, with users authenticated by SCRAM and ACLs made through Kafka's
ACL APIs by a super user (the INTERNAL listener's User:ANONYMOUS)."""

from __future__ import annotations

import logging
import struct

import pytest

from kcoord import errors as E
from kcoord import wire

from ..support.authorized import AuthorizedServer

ORDERS, PAYMENTS = "orders", "payments"  # 3 and 2 partitions
INT32_MIN = -(2**31)
ZERO_ID = wire.ZERO_UUID
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11


@pytest.fixture(scope="module")
def srv():
    s = AuthorizedServer(topics=[f"{ORDERS}:3", f"{PAYMENTS}:2"])
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_acls(srv):
    """Each test starts from no ACL at all on the module's server."""
    srv.revoke_all()
    yield


# ---- helpers ----------------------------------------------------------------------------------------------------

def metadata(c, names=None, *, ids=(), version=12, auto=False, topic_ops=False, cluster_ops=False):
    """(Below v4 a request always allows auto-creation: the field is not carried.)"""
    topics = None if names is None and not ids else [
        *(wire.MetadataRequestTopic(name=n) for n in names or ()),
        *(wire.MetadataRequestTopic(name=None, topic_id=i) for i in ids)]
    return c.call(3, version, wire.MetadataRequest(
        topics=topics, allow_auto_topic_creation=auto or version < 4, include_cluster_authorized_operations=cluster_ops,
        include_topic_authorized_operations=topic_ops))


def shape(t):
    return (t.error_code, t.name, t.topic_id, t.is_internal, len(t.partitions))


def topic_state(srv, name: str):
    """(error, partitions, topic id) of `name` as the administrator sees it, creating nothing."""
    with srv.admin() as c:
        t = metadata(c, [name]).topics[0]
    return t.error_code, len(t.partitions), t.topic_id


def list_offsets(c, topics: dict[str, list[int]], version=7):
    r = c.call(2, version, wire.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        wire.ListOffsetsRequestListOffsetsTopic(name=t, partitions=[
            wire.ListOffsetsRequestListOffsetsPartition(partition_index=p, timestamp=-1, max_num_offsets=1)
            for p in ps]) for t, ps in topics.items()]))
    return r.topics


def fetch(c, topics, version=12, replica_id=-1):
    """`topics`: {name or topic id: [partitions]} (ids from v13)."""
    by_id = version >= 13
    req = wire.FetchRequest(replica_id=replica_id if version < 15 else -1, max_wait_ms=0, min_bytes=1, topics=[
        wire.FetchRequestFetchTopic(topic="" if by_id else t, topic_id=t if by_id else ZERO_ID, partitions=[
            wire.FetchRequestFetchPartition(partition=p, fetch_offset=5, partition_max_bytes=1 << 20) for p in ps])
        for t, ps in topics.items()])
    if version >= 15:
        req.replica_state = wire.FetchRequestReplicaState(replica_id=replica_id, replica_epoch=-1)
    return c.call(1, version, req).responses


def batch(transactional: bool) -> bytes:
    """A v2 record batch's header (no records): base offset, length, leader epoch, magic 2, crc, attributes..."""
    attributes = 0x10 if transactional else 0
    return struct.pack(">qiibIhiqqqhii", 0, 49, 0, 2, 0, attributes, -1, -1, -1, 1, 0, -1, 0)


def produce(c, topics: dict[str, list[int]], *, transactional_id=None, transactional=False, version=9):
    r = c.call(0, version, wire.ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=1000,
                                               topic_data=[wire.ProduceRequestTopicProduceData(name=t, partition_data=[
                                                   wire.ProduceRequestPartitionProduceData(
                                                       index=p, records=batch(transactional)) for p in ps])
                                                   for t, ps in topics.items()]))
    return r.responses


def create_topics(c, names, partitions=2, version=7, validate_only=False):
    return c.call(19, version, wire.CreateTopicsRequest(topics=[
        wire.CreateTopicsRequestCreatableTopic(name=n, num_partitions=partitions, replication_factor=-1,
                                               assignments=[], configs=[]) for n in names],
        timeout_ms=5000, validate_only=validate_only)).topics


def delete_topics(c, names=(), ids=(), version=6):
    if version >= 6:
        req = wire.DeleteTopicsRequest(topics=[
            *(wire.DeleteTopicsRequestDeleteTopicState(name=n, topic_id=ZERO_ID) for n in names),
            *(wire.DeleteTopicsRequestDeleteTopicState(name=None, topic_id=i) for i in ids)], timeout_ms=5000)
    else:
        req = wire.DeleteTopicsRequest(topic_names=list(names), timeout_ms=5000)
    return c.call(20, version, req).responses


def create_partitions(c, counts: list[tuple[str, int]]):
    return c.call(37, 3, wire.CreatePartitionsRequest(topics=[
        wire.CreatePartitionsRequestCreatePartitionsTopic(name=n, count=k, assignments=None) for n, k in counts],
        timeout_ms=5000, validate_only=False)).results


def admin_create(srv, *names, partitions=1):
    with srv.admin() as c:
        assert [t.error_code for t in create_topics(c, names, partitions)] == [E.NONE] * len(names)


def denials(srv) -> dict:
    return dict(srv.server.gates.denials)


# ---- Metadata ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_metadata_of_a_topic_not_describable_answers_29_alike_for_an_existing_and_a_missing_one(srv, version):
    """AIT testMetadataWithNoTopicAccess: 29, the name, topic id 0, no partitions; a missing topic is answered the
    same (decided before the existence check) and is not created, though auto-creation is on and asked for."""
    with srv.user("alice") as c:
        r = metadata(c, [ORDERS, "md-missing"], version=version, auto=True)
    assert [shape(t) for t in r.topics] == [(E.TOPIC_AUTHORIZATION_FAILED, ORDERS, ZERO_ID, False, 0),
                                             (E.TOPIC_AUTHORIZATION_FAILED, "md-missing", ZERO_ID, False, 0)]
    assert r.brokers  # the broker list is not authorized
    assert topic_state(srv, "md-missing")[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_v0_of_named_topics_all_refused_lists_none_other(srv):
    """At v0 an empty topic list asks for every topic: a request whose every name is refused is not turned into
    one."""
    srv.grant("TOPIC", PAYMENTS, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        r = metadata(c, [ORDERS], version=0)
    assert [shape(t) for t in r.topics] == [(E.TOPIC_AUTHORIZATION_FAILED, ORDERS, ZERO_ID, False, 0)]


@pytest.mark.parametrize("version, every", [(12, None), (1, None), (0, [])])
def test_metadata_of_every_topic_lists_only_the_describable_ones_without_error(srv, version, every):
    before = denials(srv)
    with srv.user("alice") as c:
        assert metadata(c, every, version=version).topics == []  # no ACL: nothing listed, nothing refused
    srv.grant("TOPIC", ORDERS, "READ", "alice")  # READ implies DESCRIBE
    with srv.user("alice") as c:
        r = metadata(c, every, version=version)
    assert [(t.error_code, t.name, len(t.partitions)) for t in r.topics] == [(E.NONE, ORDERS, 3)]
    assert denials(srv) == before  # Kafka's silent filter: neither logged nor counted


def test_metadata_lists_refused_topics_after_the_others_and_the_create_refusals_before_the_describe_ones(srv):
    srv.grant("TOPIC", ORDERS, "DESCRIBE", "alice")
    srv.grant("TOPIC", "md-order-", "DESCRIBE", "alice", pattern="PREFIXED")
    with srv.user("alice") as c:
        r = metadata(c, [PAYMENTS, "md-order-new", ORDERS], auto=True)
    assert [(t.error_code, t.name) for t in r.topics] == [
        (E.NONE, ORDERS), (E.TOPIC_AUTHORIZATION_FAILED, "md-order-new"), (E.TOPIC_AUTHORIZATION_FAILED, PAYMENTS)]
    assert r.topics[1].topic_id == ZERO_ID


def test_metadata_auto_creates_only_with_describe_and_create(srv):
    """AIT testCreatePermissionMetadataRequestAutoCreate: READ on the topic is not enough to create it; TOPIC
    CREATE then is. CREATE alone fails the describe check first."""
    srv.grant("TOPIC", "md-auto-a", "READ", "alice")
    with srv.user("alice") as c:
        t = metadata(c, ["md-auto-a"], auto=True).topics[0]
        assert shape(t) == (E.TOPIC_AUTHORIZATION_FAILED, "md-auto-a", ZERO_ID, False, 0)
        assert topic_state(srv, "md-auto-a")[0] == E.UNKNOWN_TOPIC_OR_PARTITION
        # not asking for creation: the describable missing topic is simply unknown
        assert metadata(c, ["md-auto-a"], auto=False).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        srv.grant("TOPIC", "md-auto-a", "CREATE", "alice")
        t = metadata(c, ["md-auto-a"], auto=True).topics[0]
    assert (t.error_code, t.name, len(t.partitions)) == (E.NONE, "md-auto-a", 1) and t.topic_id != ZERO_ID
    assert topic_state(srv, "md-auto-a")[:2] == (E.NONE, 1)

    srv.grant("TOPIC", "md-auto-b", "CREATE", "alice")  # CREATE without DESCRIBE
    with srv.user("alice") as c:
        assert metadata(c, ["md-auto-b"], auto=True).topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert topic_state(srv, "md-auto-b")[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_creates_with_cluster_create_and_topic_describe(srv):
    srv.grant("TOPIC", "md-cluster-", "DESCRIBE", "alice", pattern="PREFIXED")
    srv.grant("CLUSTER", "kafka-cluster", "CREATE", "alice")
    with srv.user("alice") as c:
        t = metadata(c, ["md-cluster-x"], auto=True).topics[0]
    assert (t.error_code, len(t.partitions)) == (E.NONE, 1)
    assert topic_state(srv, "md-cluster-x")[0] == E.NONE


def test_metadata_authorized_operations_of_the_cluster_and_the_topics(srv):
    srv.grant("TOPIC", ORDERS, "READ", "alice")
    with srv.user("alice") as c:
        r = metadata(c, [ORDERS, PAYMENTS], version=10, topic_ops=True, cluster_ops=True)
        assert [(t.name, t.topic_authorized_operations) for t in r.topics] == [
            (ORDERS, (1 << READ) | (1 << DESCRIBE)), (PAYMENTS, INT32_MIN)]  # a refused topic has no field
        assert r.cluster_authorized_operations == 0  # no CLUSTER DESCRIBE
        r = metadata(c, [ORDERS], version=10)
        assert (r.topics[0].topic_authorized_operations, r.cluster_authorized_operations) == (INT32_MIN, INT32_MIN)
        srv.grant("CLUSTER", "kafka-cluster", "DESCRIBE", "alice")
        srv.grant("TOPIC", ORDERS, "ALTER_CONFIGS", "alice")
        r = metadata(c, [ORDERS], version=10, topic_ops=True, cluster_ops=True)
    assert r.cluster_authorized_operations == 1 << DESCRIBE
    assert r.topics[0].topic_authorized_operations == (
        (1 << READ) | (1 << DESCRIBE) | (1 << DESCRIBE_CONFIGS) | (1 << ALTER_CONFIGS))


def test_metadata_by_topic_id_unknown_is_100_and_refused_is_29_with_the_id_and_no_name(srv):
    orders_id = topic_state(srv, ORDERS)[2]
    payments_id = topic_state(srv, PAYMENTS)[2]
    unknown = bytes(range(1, 17))
    srv.grant("TOPIC", PAYMENTS, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        r = metadata(c, ids=[orders_id, payments_id, unknown], version=12)
    assert [shape(t) for t in r.topics] == [(E.UNKNOWN_TOPIC_ID, None, unknown, False, 0),
                                             (E.NONE, PAYMENTS, payments_id, False, 2),
                                             (E.TOPIC_AUTHORIZATION_FAILED, None, orders_id, False, 0)]


def test_refusals_that_make_an_error_are_logged_and_counted_and_kafkas_silent_checks_are_not(srv, caplog):
    caplog.set_level(logging.INFO, logger="kcoord.authorizer")
    before = denials(srv)
    srv.grant("TOPIC", "cnt-", "CREATE", "alice", pattern="PREFIXED")
    with srv.user("alice") as c:
        metadata(c, [ORDERS, PAYMENTS])  # two refusals
        metadata(c)  # every topic: filtered silently
        create_topics(c, ["cnt-a"])  # CLUSTER CREATE, then TOPIC CREATE; DESCRIBE_CONFIGS: only the last is checked
    after = denials(srv)
    changed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert changed == {("Metadata", "DESCRIBE", "TOPIC"): 2}
    events = [r.kcoord for r in caplog.records if getattr(r, "kcoord", {}).get("event") == "authorization-denied"]
    assert [(e["api"], e["operation"], e["resource_type"], e["resource_name"], e["principal"]) for e in events] == [
        ("Metadata", "DESCRIBE", "TOPIC", ORDERS, "User:alice"), ("Metadata", "DESCRIBE", "TOPIC", PAYMENTS,
                                                                   "User:alice")]


# ---- ListOffsets ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_needs_describe_and_refuses_per_partition_after_the_rest(srv, version):
    srv.grant("TOPIC", PAYMENTS, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        topics = list_offsets(c, {ORDERS: [0, 1], PAYMENTS: [0], "lo-missing": [0]}, version=version)
    assert [(t.name, [(p.partition_index, p.error_code, p.timestamp, p.offset) for p in t.partitions])
            for t in topics] == [
        (PAYMENTS, [(0, E.NONE, -1, 0)]),
        (ORDERS, [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1), (1, E.TOPIC_AUTHORIZATION_FAILED, -1, -1)]),
        ("lo-missing", [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1)])]  # missing or not: alike


def test_list_offsets_v0_refused_partition_has_no_offsets(srv):
    with srv.user("alice") as c:
        topics = list_offsets(c, {ORDERS: [2]}, version=0)
    assert [(t.name, [(p.partition_index, p.error_code, p.old_style_offsets) for p in t.partitions])
            for t in topics] == [(ORDERS, [(2, E.TOPIC_AUTHORIZATION_FAILED, [])])]


# ---- Fetch ----------------------------------------------------------------------------------------------------------

def fetched(responses, by_id=False):
    return [(t.topic_id if by_id else t.topic,
             [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
               p.records) for p in t.partitions]) for t in responses]


def test_fetch_needs_read_on_the_topic_describe_is_not_enough(srv):
    srv.grant("TOPIC", ORDERS, "READ", "alice")
    srv.grant("TOPIC", PAYMENTS, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        r = fetch(c, {PAYMENTS: [0, 1], ORDERS: [0], "fe-missing": [0]})
    assert fetched(r) == [
        (ORDERS, [(0, E.NONE, 5, 5, 0, b"")]),
        (PAYMENTS, [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, b""),
                    (1, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, b"")]),
        ("fe-missing", [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, b"")])]


def test_fetch_by_topic_id_unknown_is_100_and_refused_is_29(srv):
    orders_id = topic_state(srv, ORDERS)[2]
    payments_id = topic_state(srv, PAYMENTS)[2]
    unknown = bytes(range(2, 18))
    srv.grant("TOPIC", PAYMENTS, "READ", "alice")
    with srv.user("alice") as c:
        r = fetch(c, {orders_id: [0], payments_id: [1], unknown: [0]}, version=13)
    assert [(t, [p[:2] for p in ps]) for t, ps in fetched(r, by_id=True)] == [
        (payments_id, [(1, E.NONE)]), (unknown, [(0, E.UNKNOWN_TOPIC_ID)]),
        (orders_id, [(0, E.TOPIC_AUTHORIZATION_FAILED)])]


@pytest.mark.parametrize("version", [12, 15])
def test_a_follower_fetch_needs_cluster_action(srv, version):
    orders, payments = (n if version < 13 else topic_state(srv, n)[2] for n in (ORDERS, PAYMENTS))
    srv.grant("TOPIC", ORDERS, "READ", "alice")  # a consumer's right is not a follower's
    with srv.user("alice") as c:
        r = fetch(c, {orders: [0, 1]}, version=version, replica_id=7)
        assert [p[:2] for _, ps in fetched(r) for p in ps] == [(0, E.TOPIC_AUTHORIZATION_FAILED),
                                                                (1, E.TOPIC_AUTHORIZATION_FAILED)]
        assert [p[:2] for _, ps in fetched(fetch(c, {orders: [0]}, version=version)) for p in ps] == [(0, E.NONE)]
        srv.grant("CLUSTER", "kafka-cluster", "CLUSTER_ACTION", "alice")
        r = fetch(c, {payments: [0]}, version=version, replica_id=7)  # no topic ACL is asked of a follower
    assert [p[:2] for _, ps in fetched(r) for p in ps] == [(0, E.NONE)]


# ---- Produce --------------------------------------------------------------------------------------------------------

def produced(responses):
    return [(t.name, [(p.index, p.error_code, p.base_offset, p.error_message) for p in t.partition_responses])
            for t in responses]


def test_produce_needs_write_on_the_topic(srv):
    srv.grant("TOPIC", ORDERS, "WRITE", "alice")
    srv.grant("TOPIC", PAYMENTS, "READ", "alice")
    with srv.user("alice") as c:
        r = produce(c, {PAYMENTS: [0], ORDERS: [1]})
    (name, [(index, code, _, _)]), refused = produced(r)[0], produced(r)[1:]
    assert (name, index, code) == (ORDERS, 1, E.INVALID_REQUEST)  # allowed: kcoord stores no records
    assert refused == [(PAYMENTS, [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, None)])]


def test_transactional_records_need_write_on_the_transactional_id(srv):
    srv.grant("TOPIC", ORDERS, "WRITE", "alice")
    with srv.user("alice") as c:
        r = produce(c, {ORDERS: [0, 1]}, transactional_id="tx-1", transactional=True)
        assert produced(r) == [(ORDERS, [(0, 53, -1, "Transactional Id authorization failed."),
                                         (1, 53, -1, "Transactional Id authorization failed.")])]
        r = produce(c, {ORDERS: [0]}, transactional_id=None, transactional=True)  # no id: refused as well
        assert [p[1] for _, ps in produced(r) for p in ps] == [53]
        r = produce(c, {ORDERS: [0]}, transactional_id="tx-1", transactional=False)  # not transactional: no check
        assert [p[1] for _, ps in produced(r) for p in ps] == [E.INVALID_REQUEST]
        srv.grant("TRANSACTIONAL_ID", "tx-1", "WRITE", "alice")
        r = produce(c, {ORDERS: [0]}, transactional_id="tx-1", transactional=True)
    assert [p[1] for _, ps in produced(r) for p in ps] == [E.INVALID_REQUEST]


# ---- CreateTopics ---------------------------------------------------------------------------------------------------

def created(results):
    return [(r.name, r.error_code, r.error_message, r.topic_config_error_code, r.num_partitions,
             r.replication_factor, r.configs) for r in results]


def test_create_topics_without_create_is_refused_for_a_new_and_an_existing_topic_alike(srv):
    with srv.user("alice") as c:
        r = create_topics(c, ["ct-denied", ORDERS])
    assert created(r) == [("ct-denied", E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", 0, -1, -1, []),
                          (ORDERS, E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", 0, -1, -1, [])]
    assert topic_state(srv, "ct-denied")[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_create_topics_with_topic_create_hides_the_configs_without_describe_configs(srv):
    srv.grant("TOPIC", "ct-a", "CREATE", "alice")
    srv.grant("TOPIC", "ct-b", "CREATE", "alice")
    srv.grant("TOPIC", "ct-b", "ALTER_CONFIGS", "alice")  # implies DESCRIBE_CONFIGS
    with srv.user("alice") as c:
        r = create_topics(c, ["ct-a", "ct-b", "ct-c", "ct-dup", "ct-dup"], partitions=2)
    rows = created(r)
    assert rows == [("ct-a", E.NONE, None, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, []),
                    ("ct-b", E.NONE, None, 0, 2, 1, []),
                    ("ct-dup", E.INVALID_REQUEST, "Duplicate topic name.", 0, -1, -1, []),
                    ("ct-c", E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", 0, -1, -1, [])]
    assert r[0].topic_id != ZERO_ID  # created: its id is given all the same
    assert topic_state(srv, "ct-a")[:2] == topic_state(srv, "ct-b")[:2] == (E.NONE, 2)
    assert topic_state(srv, "ct-dup")[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_create_topics_with_cluster_create_creates_any_and_validate_only_is_checked_too(srv):
    with srv.user("alice") as c:
        r = create_topics(c, ["ct-v"], validate_only=True)
        assert [(x.error_code, x.error_message) for x in r] == [(E.TOPIC_AUTHORIZATION_FAILED,
                                                                 "Authorization failed.")]
        internal = [("__cluster_metadata", E.INVALID_REQUEST,
                     "Creation of internal topic __cluster_metadata is prohibited.")]  # refused before any check
        assert [(x.name, x.error_code, x.error_message) for x in create_topics(c, ["__cluster_metadata"])] == internal
        srv.grant("CLUSTER", "kafka-cluster", "CREATE", "alice")
        r = create_topics(c, ["ct-x", "ct-y"], partitions=3)
        assert [(x.name, x.error_code, x.error_message) for x in create_topics(c, ["__cluster_metadata"])] == internal
    assert [(x.name, x.error_code) for x in r] == [("ct-x", E.NONE), ("ct-y", E.NONE)]
    assert topic_state(srv, "ct-y")[:2] == (E.NONE, 3)


# ---- DeleteTopics ---------------------------------------------------------------------------------------------------

def deleted(results):
    return sorted((r.name or "", r.topic_id, r.error_code, r.error_message) for r in results)


@pytest.mark.parametrize("version", [5, 6])
def test_delete_topics_by_name_refuses_an_existing_and_a_missing_topic_alike(srv, version):
    name = f"dt-name-{version}"
    admin_create(srv, name)
    with srv.user("alice") as c:
        r = delete_topics(c, [name, f"dt-missing-{version}"], version=version)
        assert deleted(r) == sorted([(name, ZERO_ID, E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                                     (f"dt-missing-{version}", ZERO_ID, E.TOPIC_AUTHORIZATION_FAILED,
                                      "Topic authorization failed.")])
        assert topic_state(srv, name)[0] == E.NONE
        srv.grant("TOPIC", "dt-", "DESCRIBE", "alice", pattern="PREFIXED")  # describable: but not deletable
        r = delete_topics(c, [name, f"dt-missing-{version}"], version=version)
        assert deleted(r) == sorted([(name, ZERO_ID, E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                                     (f"dt-missing-{version}", ZERO_ID, E.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition.")])
        srv.grant("TOPIC", name, "DELETE", "alice")
        r = delete_topics(c, [name], version=version)
    assert [(x.name, x.error_code) for x in r] == [(name, E.NONE)]
    assert topic_state(srv, name)[0] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics_by_id_names_a_refused_topic_only_when_describable(srv):
    admin_create(srv, "dt-id-a", "dt-id-b", "dt-id-c")
    a, b, cid = (topic_state(srv, n)[2] for n in ("dt-id-a", "dt-id-b", "dt-id-c"))
    unknown = bytes(range(3, 19))
    srv.grant("TOPIC", "dt-id-b", "DESCRIBE", "alice")
    srv.grant("TOPIC", "dt-id-c", "DELETE", "alice")
    with srv.user("alice") as c:
        r = delete_topics(c, ids=[a, b, cid, unknown])
    assert deleted(r) == sorted([("", a, E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                                 ("dt-id-b", b, E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                                 ("dt-id-c", cid, E.NONE, None),
                                 ("", unknown, E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")])
    assert [topic_state(srv, n)[0] for n in ("dt-id-a", "dt-id-b", "dt-id-c")] == [
        E.NONE, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]


def test_delete_topics_with_cluster_delete_and_kafkas_checks_before_authorization(srv):
    admin_create(srv, "dt-cl-a")
    with srv.user("alice") as c:
        r = delete_topics(c, ["dt-dup", "dt-dup"])  # a duplicate is refused before any check
        assert deleted(r) == [("dt-dup", ZERO_ID, E.INVALID_REQUEST, "Duplicate topic name.")]
        r = c.call(20, 6, wire.DeleteTopicsRequest(topics=[wire.DeleteTopicsRequestDeleteTopicState(
            name=ORDERS, topic_id=topic_state(srv, ORDERS)[2])], timeout_ms=5000)).responses
        assert [(x.error_code, x.error_message) for x in r] == [
            (E.INVALID_REQUEST, "You may not specify both topic name and topic id.")]
        r = c.call(20, 6, wire.DeleteTopicsRequest(topics=[wire.DeleteTopicsRequestDeleteTopicState(
            name=None, topic_id=ZERO_ID)], timeout_ms=5000)).responses
        assert [(x.name, x.error_code, x.error_message) for x in r] == [
            (None, E.INVALID_REQUEST, "Neither topic name nor id were specified.")]
        srv.grant("CLUSTER", "kafka-cluster", "DELETE", "alice")
        r = delete_topics(c, ["dt-cl-a"])
    assert [(x.name, x.error_code) for x in r] == [("dt-cl-a", E.NONE)]
    assert topic_state(srv, ORDERS)[0] == E.NONE


def test_delete_topics_answers_in_no_fixed_order(srv):
    """ControllerApis shuffles the results, so that absent and refused topics are not told apart by position."""
    names = [f"dt-shuffle-{i}" for i in range(8)]
    orders = set()
    with srv.user("alice") as c:
        for _ in range(10):
            orders.add(tuple(x.name for x in delete_topics(c, names)))
    assert all(sorted(o) == sorted(names) for o in orders)
    assert len(orders) > 1


# ---- CreatePartitions -----------------------------------------------------------------------------------------------

def test_create_partitions_needs_alter_and_lists_duplicates_then_refusals_first(srv):
    admin_create(srv, "cp-a", "cp-b")
    srv.grant("TOPIC", "cp-a", "ALTER", "alice")
    with srv.user("alice") as c:
        r = create_partitions(c, [("cp-a", 4), ("cp-b", 3), ("cp-dup", 2), ("cp-dup", 3), ("cp-missing", 2)])
    assert [(x.name, x.error_code, x.error_message) for x in r] == [
        ("cp-dup", E.INVALID_REQUEST, "Duplicate topic name."),
        ("cp-b", E.TOPIC_AUTHORIZATION_FAILED, None),
        ("cp-missing", E.TOPIC_AUTHORIZATION_FAILED, None),  # missing or not: alike
        ("cp-a", E.NONE, None)]
    assert topic_state(srv, "cp-a")[:2] == (E.NONE, 4)
    assert topic_state(srv, "cp-b")[:2] == (E.NONE, 1)


def test_a_super_user_is_refused_nothing(srv):
    srv.deny("TOPIC", "*", "ALL", "User:*")
    with srv.admin() as c:
        assert [t.error_code for t in metadata(c, [ORDERS, PAYMENTS]).topics] == [E.NONE, E.NONE]
        assert [p.error_code for t in fetch(c, {ORDERS: [0]}) for p in t.partitions] == [E.NONE]
    with srv.user("alice") as c:
        assert [t.error_code for t in metadata(c, [ORDERS]).topics] == [E.TOPIC_AUTHORIZATION_FAILED]
