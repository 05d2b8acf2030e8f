"""Assignor behaviour on named cases: the KIP-345 and KIP-54 examples, Kafka's documented examples and its assignor
test cases (expected outputs written down as data), bad input, the consumer protocol bytes and real-client interop.

Where Kafka's expected output depends on Java hash-map iteration order rather than on the algorithm (which of two
equally loaded members gets the extra partition), the test asserts what the algorithm guarantees instead and says so.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from kcoord import assignors as A
from kcoord import wire
from kcoord.assignors import AssignmentError, Member

from ..support.assignments import (
    check_valid,
    flatten,
    is_java_balanced,
    loads,
    min_moves_homogeneous,
    moves,
    valid_claims,
    with_owned,
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KPAssignment
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KPSubscription
    from kafka.structs import TopicPartition


def parts(spec: str) -> dict[str, list[int]]:
    """"t1-0, t1-3, t2-1" → {"t1": [0, 3], "t2": [1]} (the notation of Kafka's tests)."""
    out: dict[str, list[int]] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        topic, _, p = item.rpartition("-")
        out.setdefault(topic, []).append(int(p))
    return {t: sorted(ps) for t, ps in out.items()}


def members(*specs, owned=None, generation=-1) -> list[Member]:
    """members(("c1", ["t1", "t2"]), ("c2", ["t1"], "instance2")) → Member records."""
    out = []
    for spec in specs:
        mid, topics, *rest = spec
        iid = rest[0] if rest else None
        out.append(Member(mid, iid, tuple(topics), owned=(owned or {}).get(mid), generation=generation))
    return out


ALL_ASSIGNORS = [A.range_assign, A.roundrobin_assign, A.sticky_assign, A.cooperative_sticky_assign,
                 A.uniform_assign, A.server_range_assign]


# ---------------------------------------------------------------------------------------------------------------
# KIP-345: static membership keeps assignments across restarts


@pytest.mark.parametrize("assign", ALL_ASSIGNORS, ids=lambda f: f.__name__)
def test_kip345_static_member_restart_keeps_its_partitions(assign):
    # 9 partitions over instance ids A, B, C with member ids 1, 2, 3; A restarts and comes back as member 4
    before = [Member("1", "A", ("t",)), Member("2", "B", ("t",)), Member("3", "C", ("t",))]
    first = assign(before, {"t": 9})
    restarted = [Member("4", "A", ("t",)), Member("2", "B", ("t",), owned=first["2"], generation=1),
                 Member("3", "C", ("t",), owned=first["3"], generation=1)]
    second = assign(restarted, {"t": 9})
    assert second["4"] == first["1"]
    assert second["2"] == first["2"] and second["3"] == first["3"]


def test_kip345_example_range():
    before = [Member("1", "A", ("t",)), Member("2", "B", ("t",)), Member("3", "C", ("t",))]
    after = [Member("4", "A", ("t",)), Member("2", "B", ("t",)), Member("3", "C", ("t",))]
    assert A.range_assign(before, {"t": 9}) == {"1": {"t": [0, 1, 2]}, "2": {"t": [3, 4, 5]}, "3": {"t": [6, 7, 8]}}
    assert A.range_assign(after, {"t": 9}) == {"4": {"t": [0, 1, 2]}, "2": {"t": [3, 4, 5]}, "3": {"t": [6, 7, 8]}}


# ---------------------------------------------------------------------------------------------------------------
# Kafka's member order (AbstractPartitionAssignorTest.testMemberInfoSorting*)


@pytest.mark.parametrize(("given", "expected"), [
    ([("a", None), ("b", None), ("c", None)], ["a", "b", "c"]),  # WithoutGroupInstanceId
    ([("a", "y"), ("b", "z"), ("c", "x")], ["c", "a", "b"]),  # WithAllGroupInstanceId
    ([("a", None), ("b", "y"), ("c", "x")], ["c", "b", "a"]),  # SomeGroupInstanceId
    ([("m1", "z"), ("m2", None), ("m3", "a"), ("m0", None)], ["m3", "m1", "m0", "m2"]),
])
def test_member_order(given, expected):
    ms = [Member(mid, iid) for mid, iid in given]
    assert [m.member_id for m in A.member_order(ms)] == expected
    assert [m.member_id for m in A.member_order(reversed(ms))] == expected


def test_member_order_compares_like_java_strings():
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts before U+FF5E; by code point it sorts after
    ms = [Member("\uff5e"), Member("\U0001f600")]
    assert [m.member_id for m in A.member_order(ms)] == ["\U0001f600", "\uff5e"]
    assert list(A.kafka_order(["\uff5e", "\U0001f600"])) == [1, 0]


# ---------------------------------------------------------------------------------------------------------------
# RangeAssignor: Kafka's javadoc and RangeAssignorTest (client) / RangeAssignorTest (server)


def test_range_javadoc_example():
    ms = members(("C0", ["t0", "t1"]), ("C1", ["t0", "t1"]))
    assert A.range_assign(ms, {"t0": 3, "t1": 3}) == {"C0": parts("t0-0, t0-1, t1-0, t1-1"),
                                                       "C1": parts("t0-2, t1-2")}


RANGE_CASES = {
    "testOneConsumerNoTopic": ({"topic": 3}, [("consumer", [])], {"consumer": ""}),
    "testOneConsumerOneTopic": ({"topic": 3}, [("consumer", ["topic"])], {"consumer": "topic-0, topic-1, topic-2"}),
    "testOnlyAssignsPartitionsFromSubscribedTopics": (
        {"topic": 3, "other": 3}, [("consumer", ["topic"])], {"consumer": "topic-0, topic-1, topic-2"}),
    "testOneConsumerMultipleTopics": (
        {"topic1": 1, "topic2": 2}, [("consumer", ["topic1", "topic2"])], {"consumer": "topic1-0, topic2-0, topic2-1"}),
    "testTwoConsumersOneTopicOnePartition": (
        {"topic": 1}, [("consumer1", ["topic"]), ("consumer2", ["topic"])], {"consumer1": "topic-0", "consumer2": ""}),
    "testTwoConsumersOneTopicTwoPartitions": (
        {"topic": 2}, [("consumer1", ["topic"]), ("consumer2", ["topic"])],
        {"consumer1": "topic-0", "consumer2": "topic-1"}),
    "testMultipleConsumersMixedTopics": (
        {"topic1": 3, "topic2": 2},
        [("consumer1", ["topic1"]), ("consumer2", ["topic1", "topic2"]), ("consumer3", ["topic1"])],
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"}),
    "testTwoConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3}, [("consumer1", ["topic1", "topic2"]), ("consumer2", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer2": "topic1-2, topic2-2"}),
    "testTwoStaticConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        [("consumer-b", ["topic1", "topic2"], "instance1"), ("consumer-a", ["topic1", "topic2"], "instance2")],
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"}),
    "testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        [("consumer-b", ["topic1", "topic2"], "instance1"), ("consumer-a", ["topic1", "topic2"])],
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"}),
    "testStaticMemberRangeAssignmentPersistent": (
        {"topic1": 5, "topic2": 4},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer2", ["topic1", "topic2"], "instance2"),
         ("consumer3", ["topic1", "topic2"], "instance3"), ("consumer4", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic1-1, topic2-0", "consumer2": "topic1-2, topic2-1",
         "consumer3": "topic1-3, topic2-2", "consumer4": "topic1-4, topic2-3"}),
    "testStaticMemberRangeAssignmentPersistent (consumer4 replaced by consumer5)": (
        {"topic1": 5, "topic2": 4},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer2", ["topic1", "topic2"], "instance2"),
         ("consumer3", ["topic1", "topic2"], "instance3"), ("consumer5", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic1-1, topic2-0", "consumer2": "topic1-2, topic2-1",
         "consumer3": "topic1-3, topic2-2", "consumer5": "topic1-4, topic2-3"}),
    "testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges": (
        {"topic1": 5, "topic2": 5},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer5", ["topic1", "topic2"], "instance2"),
         ("consumer4", ["topic1", "topic2"], "instance3")],
        {"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer5": "topic1-2, topic1-3, topic2-2, topic2-3",
         "consumer4": "topic1-4, topic2-4"}),
    # server-side RangeAssignorTest
    "testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions": (
        {"topic1": 3, "topic2": 3, "topic3": 2},
        [("A", ["topic1", "topic2"]), ("B", ["topic3"]), ("C", ["topic2", "topic3"])],
        {"A": "topic1-0, topic1-1, topic1-2, topic2-0, topic2-1", "B": "topic3-0", "C": "topic2-2, topic3-1"}),
    "testFirstAssignmentNumMembersGreaterThanNumPartitions": (
        {"topic1": 3, "topic2": 2},
        [("A", ["topic1", "topic2"]), ("B", ["topic1", "topic2"]), ("C", ["topic1", "topic2"])],
        {"A": "topic1-0, topic2-0", "B": "topic1-1, topic2-1", "C": "topic1-2"}),
}


@pytest.mark.parametrize("case", list(RANGE_CASES))
def test_range_kafka_cases(case):
    topics, specs, expected = RANGE_CASES[case]
    ms = members(*specs)
    result = A.range_assign(ms, topics)
    assert result == {mid: parts(spec) for mid, spec in expected.items()}
    assert A.server_range_assign(ms, topics) == result


def test_range_static_membership_server_cases():
    # testStaticMembership / testMixedStaticMembership: a static member back with a new member id keeps its place
    one = [Member("A", "instanceA", ("t",)), Member("B", "instanceB", ("t",))]
    two = [Member("A1", "instanceA", ("t",)), Member("B", "instanceB", ("t",))]
    a, b = A.server_range_assign(one, {"t": 3}), A.server_range_assign(two, {"t": 3})
    assert (a["A"], a["B"]) == (b["A1"], b["B"])
    one = [Member("A", "instanceA", ("t",)), Member("C", "instanceC", ("t",)), Member("B", None, ("t",))]
    two = [Member("A1", "instanceA", ("t",)), Member("C", "instanceC", ("t",)), Member("B", None, ("t",))]
    a, b = A.server_range_assign(one, {"t": 5}), A.server_range_assign(two, {"t": 5})
    assert (a["A"], a["B"], a["C"]) == (b["A1"], b["B"], b["C"])
    assert a == {"A": {"t": [0, 1]}, "C": {"t": [2, 3]}, "B": {"t": [4]}}


# KIP-881 rack-aware range: RangeAssignorTest.testRackAware*. Replica placement as in Kafka's test helper: partition
# i of a topic whose partitions start at global index `o` has replicas on brokers (i + j + o) % len(brokers) for
# j < replication factor; topics are laid out in the order given (the test's maps keep insertion order).

ABC = ["a", "b", "c", "d", "e", "f"]


def java_rack_layout(topics: dict[str, int], rf: int, broker_racks: list[str | None]) -> dict[str, list[set]]:
    out, offset = {}, 0
    for topic, n in topics.items():
        out[topic] = [{broker_racks[(i + j + offset) % len(broker_racks)] for j in range(rf)} - {None}
                      for i in range(n)]
        offset += n
    return out


def racks(n: int) -> list[str]:
    return [ABC[i % len(ABC)] for i in range(n)]


T3 = {"t1": 6, "t2": 7, "t3": 2}
T5 = {"t1": 5, "t2": 5, "t3": 5}
ALL3 = ["t1", "t2", "t3"]
RACK_CASES = [
    # (case, topics, consumer topics, rf, broker racks, consumer racks, expected assignments, expected mismatches)
    ("UniformSubscription, non-rack-aware", T3, [ALL3] * 3, 3, [None] * 3, racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], None),
    ("UniformSubscription, all partitions on all racks", T3, [ALL3] * 3, 3, racks(3), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 0),
    ("UniformSubscription, consumer racks disjoint", T3, [ALL3] * 3, 3, racks(3), ["d", "e", "f"],
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], None),
    ("UniformSubscription, rf 1", T3, [ALL3] * 3, 1, racks(3), racks(3),
     ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0),
    ("UniformSubscription, rf 2", T3, [ALL3] * 3, 2, racks(3), racks(3),
     ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1),
    ("UniformSubscription, one consumer on a rack with no partitions", T3, [ALL3] * 3, 3, racks(2), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 4),
    ("NonEqualSubscription, non-rack-aware", T3, [ALL3, ALL3, ["t1", "t3"]], 3, racks(3), [None, "e", "f"],
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], None),
    ("NonEqualSubscription, rf 1", T3, [ALL3, ALL3, ["t1", "t3"]], 1, racks(3), racks(3),
     ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2),
    ("NonEqualSubscription, rf 2", T3, [ALL3, ALL3, ["t1", "t3"]], 2, racks(3), racks(3),
     ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0),
    ("NonEqualSubscription, one consumer on a rack with no partitions", T3, [ALL3, ALL3, ["t1", "t3"]], 3,
     racks(2), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], 2),
    ("UniformPartitions (co-partitioning over racks), rf 1", T5, [ALL3] * 3, 1, racks(3), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"], 10),
    ("UniformPartitions, rf 2", T5, [ALL3] * 3, 2, racks(3), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"], 5),
    ("UniformPartitions, rf 3 over 2 racks", T5, [ALL3] * 3, 3, racks(2), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"], 3),
    ("UniformPartitionsNonEqualSubscription, rf 1", T5, [ALL3, ALL3, ["t1", "t3"]], 1, racks(3), racks(3),
     ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9),
    ("UniformPartitionsNonEqualSubscription, rf 2", T5, [ALL3, ALL3, ["t1", "t3"]], 2, racks(3), racks(3),
     ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0),
    ("CoPartitioning, separate groups, rf 1", {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
     [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]], 1, racks(2), ["a", "b", "b", "a"],
     ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"], 0),
    ("CoPartitioning, separate groups, rf 2", {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
     [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]], 2, racks(2), ["a", "b", "b", "a"],
     ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"], 0),
    ("CoPartitioning, all topics, rf 1 over 2 racks", {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
     [["t1", "t2", "t3", "t4"]] * 4, 1, racks(2), ["a", "b", "b", "a"],
     ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"], 0),
    ("CoPartitioning, all topics, rf 1 over 3 racks", {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
     [["t1", "t2", "t3", "t4"]] * 4, 1, racks(3), ["a", "b", "b", "a"],
     ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"], 6),
    ("CoPartitionedAssignmentWithSameSubscription, rf 2", {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4},
     [[f"t{i}" for i in range(1, 10)]] * 3, 2, racks(3), racks(3),
     ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
      "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3"], 0),
]


@pytest.mark.parametrize("case", RACK_CASES, ids=[c[0] for c in RACK_CASES])
def test_range_rack_aware_kafka_cases(case):
    _, topics, consumer_topics, rf, broker_racks, consumer_racks, expected, mismatches = case
    layout = java_rack_layout(topics, rf, broker_racks)
    ms = [Member(f"consumer{i}", None, tuple(ts), rack=r)
          for i, (ts, r) in enumerate(zip(consumer_topics, consumer_racks, strict=True))]
    result = A.range_assign(ms, topics, partition_racks=layout, unknown_topics="ignore")
    assert result == {f"consumer{i}": parts(e) for i, e in enumerate(expected)}
    if mismatches is not None:
        off_rack = sum(1 for m in ms if m.rack for t, ps in result[m.member_id].items() for p in ps
                       if m.rack not in layout[t][p])
        assert off_rack == mismatches


def test_range_rack_aware_static_members_keep_partitions_after_member_id_changes():
    # testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges: 6 brokers on racks a b c a b c,
    # replication factor 2, both topics laid out from broker 0
    layout = {t: [{ABC[p % 3], ABC[(p + 1) % 3]} for p in range(5)] for t in ("topic1", "topic2")}
    topics = {"topic1": 5, "topic2": 5}
    both = ("topic1", "topic2")
    expected = {"instance1": parts("topic1-0, topic1-2, topic2-0, topic2-2"),
                "instance2": parts("topic1-1, topic1-3, topic2-1, topic2-3"),
                "instance3": parts("topic1-4, topic2-4")}
    for ids in (("consumer1", "consumer2", "consumer3"), ("consumer1", "consumer5", "consumer4")):
        ms = [Member(mid, f"instance{i + 1}", both, rack=ABC[i]) for i, mid in enumerate(ids)]
        result = A.range_assign(ms, topics, partition_racks=layout)
        assert {m.instance_id: result[m.member_id] for m in ms} == expected


def test_range_racks_require_matching_partition_counts():
    ms = [Member("c", None, ("t",), rack="a")]
    with pytest.raises(AssignmentError, match="has 2 entries; the topic has 3 partitions"):
        A.range_assign(ms, {"t": 3}, partition_racks={"t": [{"a"}, {"b"}]})
    with pytest.raises(AssignmentError, match="unknown topic 'u'"):
        A.range_assign(ms, {"t": 3}, partition_racks={"u": []})


# ---------------------------------------------------------------------------------------------------------------
# RoundRobinAssignor: Kafka's javadoc and RoundRobinAssignorTest


ROUNDROBIN_CASES = {
    "javadoc: identical subscriptions": (
        {"t0": 3, "t1": 3}, [("C0", ["t0", "t1"]), ("C1", ["t0", "t1"])],
        {"C0": "t0-0, t0-2, t1-1", "C1": "t0-1, t1-0, t1-2"}),
    "javadoc: differing subscriptions": (
        {"t0": 1, "t1": 2, "t2": 3}, [("C0", ["t0"]), ("C1", ["t0", "t1"]), ("C2", ["t0", "t1", "t2"])],
        {"C0": "t0-0", "C1": "t1-0", "C2": "t1-1, t2-0, t2-1, t2-2"}),
    "testOneConsumerOneTopic": ({"topic": 3}, [("consumer", ["topic"])], {"consumer": "topic-0, topic-1, topic-2"}),
    "testTwoConsumersOneTopicOnePartition": (
        {"topic": 1}, [("consumer1", ["topic"]), ("consumer2", ["topic"])], {"consumer1": "topic-0", "consumer2": ""}),
    "testMultipleConsumersMixedTopics": (
        {"topic1": 3, "topic2": 2},
        [("consumer1", ["topic1"]), ("consumer2", ["topic1", "topic2"]), ("consumer3", ["topic1"])],
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"}),
    "testTwoDynamicConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3}, [("consumer1", ["topic1", "topic2"]), ("consumer2", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"}),
    "testTwoStaticConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        [("consumer-b", ["topic1", "topic2"], "instance1"), ("consumer-a", ["topic1", "topic2"], "instance2")],
        {"consumer-b": "topic1-0, topic1-2, topic2-1", "consumer-a": "topic1-1, topic2-0, topic2-2"}),
    "testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        [("consumer-b", ["topic1", "topic2"], "instance1"), ("consumer-a", ["topic1", "topic2"])],
        {"consumer-b": "topic1-0, topic1-2, topic2-1", "consumer-a": "topic1-1, topic2-0, topic2-2"}),
    "testStaticMemberRoundRobinAssignmentPersistent": (
        {"topic1": 3, "topic2": 3},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer2", ["topic1", "topic2"], "instance2"),
         ("consumer3", ["topic1", "topic2"], "instance3"), ("consumer4", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2", "consumer3": "topic1-2",
         "consumer4": "topic2-0"}),
    "testStaticMemberRoundRobinAssignmentPersistent (consumer4 replaced by consumer5)": (
        {"topic1": 3, "topic2": 3},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer2", ["topic1", "topic2"], "instance2"),
         ("consumer3", ["topic1", "topic2"], "instance3"), ("consumer5", ["topic1", "topic2"])],
        {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2", "consumer3": "topic1-2",
         "consumer5": "topic2-0"}),
    "testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges": (
        {"topic1": 5, "topic2": 5},
        [("consumer1", ["topic1", "topic2"], "instance1"), ("consumer5", ["topic1", "topic2"], "instance2"),
         ("consumer4", ["topic1", "topic2"], "instance3")],
        {"consumer1": "topic1-0, topic1-3, topic2-1, topic2-4", "consumer5": "topic1-1, topic1-4, topic2-2",
         "consumer4": "topic1-2, topic2-0, topic2-3"}),
}


@pytest.mark.parametrize("case", list(ROUNDROBIN_CASES))
def test_roundrobin_kafka_cases(case):
    topics, specs, expected = ROUNDROBIN_CASES[case]
    assert A.roundrobin_assign(members(*specs), topics) == {mid: parts(spec) for mid, spec in expected.items()}


# ---------------------------------------------------------------------------------------------------------------
# Sticky: KIP-54's examples and Kafka's AbstractStickyAssignorTest


FOUR_TOPICS = {f"t{i}": 2 for i in range(4)}


def test_kip54_example_one():
    # C0, C1, C2 all subscribe to t0..t3 (2 partitions each); the first assignment is round-robin's
    ms = members(*[(c, list(FOUR_TOPICS)) for c in ("C0", "C1", "C2")])
    first = A.sticky_assign(ms, FOUR_TOPICS)
    assert first == {"C0": parts("t0-0, t1-1, t3-0"), "C1": parts("t0-1, t2-0, t3-1"), "C2": parts("t1-0, t2-1")}
    # C1 leaves: C0 and C2 keep everything and share C1's three partitions, four each
    second = A.sticky_assign(with_owned([ms[0], ms[2]], first), FOUR_TOPICS)
    assert loads(second) == {"C0": 4, "C2": 4}
    for c in ("C0", "C2"):
        assert flatten({c: first[c]}).keys() <= flatten({c: second[c]}).keys()


def test_kip54_example_two():
    topics = {"t0": 1, "t1": 2, "t2": 3}
    ms = members(("C0", ["t0"]), ("C1", ["t0", "t1"]), ("C2", ["t0", "t1", "t2"]))
    first = A.sticky_assign(ms, topics)
    assert first == {"C0": parts("t0-0"), "C1": parts("t1-0, t1-1"), "C2": parts("t2-0, t2-1, t2-2")}
    # round-robin leaves C2 with four partitions and C0 with one
    assert loads(A.roundrobin_assign(ms, topics)) == {"C0": 1, "C1": 1, "C2": 4}
    second = A.sticky_assign(with_owned(ms[1:], first), topics)  # C0 leaves
    assert second == {"C1": parts("t0-0, t1-0, t1-1"), "C2": parts("t2-0, t2-1, t2-2")}


def test_kip54_example_three():
    topics = {"t0": 2, "t1": 2}
    first = {"C0": parts("t0-0, t1-0"), "C1": parts("t0-1, t1-1")}
    ms = with_owned(members(("C0", ["t0", "t1"]), ("C1", ["t0", "t1"]), ("C2", ["t0", "t1"])), first)
    second = A.sticky_assign(ms, topics)
    assert second == {"C0": parts("t0-0, t1-0"), "C1": parts("t0-1"), "C2": parts("t1-1")}


STICKY_CASES = {
    # (topics, members as (id, topics, owned, generation), expected)
    "testOneConsumerOneTopic": (
        {"topic": 3}, [("consumer", ["topic"], "", -1)], {"consumer": "topic-0, topic-1, topic-2"}),
    "testOnlyAssignsPartitionsFromSubscribedTopics": (
        {"topic": 2}, [("consumer", ["topic"], "topic-0, topic-1, other-0, other-1", 1)],
        {"consumer": "topic-0, topic-1"}),
    "testOneConsumerMultipleTopics": (
        {"topic1": 1, "topic2": 2}, [("consumer", ["topic1", "topic2"], "", -1)],
        {"consumer": "topic1-0, topic2-0, topic2-1"}),
    "testTwoConsumersOneTopicTwoPartitions": (
        {"topic": 2}, [("consumer1", ["topic"], "", -1), ("consumer2", ["topic"], "", -1)],
        {"consumer1": "topic-0", "consumer2": "topic-1"}),
    "testMultipleConsumersMixedTopicSubscriptions": (
        {"topic1": 3, "topic2": 2},
        [("consumer1", ["topic1"], "", -1), ("consumer2", ["topic1", "topic2"], "", -1),
         ("consumer3", ["topic1"], "", -1)],
        {"consumer1": "topic1-0, topic1-2", "consumer2": "topic2-0, topic2-1", "consumer3": "topic1-1"}),
    "testTwoConsumersTwoTopicsSixPartitions": (
        {"topic1": 3, "topic2": 3},
        [("consumer1", ["topic1", "topic2"], "", -1), ("consumer2", ["topic1", "topic2"], "", -1)],
        {"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"}),
    "testConsumerOwningMinQuotaExpectedMaxQuota": (
        {"topic1": 2, "topic2": 3},
        [("consumer1", ["topic1", "topic2"], "topic1-0, topic2-1", 1),
         ("consumer2", ["topic1", "topic2"], "topic1-1, topic2-2", 1)],
        {"consumer1": "topic1-0, topic2-1, topic2-0", "consumer2": "topic1-1, topic2-2"}),
    "testAllConsumersAreUnderMinQuota": (
        {"topic1": 2, "topic2": 3},
        [("consumer1", ["topic1", "topic2"], "topic1-0", 1), ("consumer2", ["topic1", "topic2"], "topic1-1", 1),
         ("consumer3", ["topic1", "topic2"], "", 1)],
        {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2", "consumer3": "topic2-0"}),
    "testAllConsumersReachExpectedQuotaAndAreConsideredFilled": (
        {"topic": 4},
        [("consumer1", ["topic"], "topic-0, topic-1", 1), ("consumer2", ["topic"], "topic-2", 1),
         ("consumer3", ["topic"], "", 1)],
        {"consumer1": "topic-0, topic-1", "consumer2": "topic-2", "consumer3": "topic-3"}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", ["topic", "topic2"], "topic-0, topic-2, topic2-1", 10),
         ("consumer2", ["topic", "topic2"], "topic-0, topic-2, topic2-1", 9)],
        {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", ["topic", "topic2"], "topic-0, topic-2, topic2-1", 10),
         ("consumer2", ["topic", "topic2"], "topic-0, topic-2, topic2-1", -1)],
        {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}),
    "testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration": (
        {"topic": 3},
        [("consumer1", ["topic"], "topic-0, topic-1", 1), ("consumer2", ["topic"], "topic-0, topic-2", 1),
         ("consumer3", ["topic"], "", 1)],
        {"consumer1": "topic-1", "consumer2": "topic-2", "consumer3": "topic-0"}),
    "testEnsurePartitionsAssignedToHighestGeneration": (
        {"topic": 3, "topic2": 3, "topic3": 3},
        [("consumer1", ["topic", "topic2", "topic3"], "topic-0, topic2-0, topic3-0", 10),
         ("consumer2", ["topic", "topic2", "topic3"], "topic-1, topic2-1, topic3-1", 9),
         ("consumer3", ["topic", "topic2", "topic3"], "topic2-1, topic3-0, topic3-2", 8)],
        {"consumer1": "topic-0, topic2-0, topic3-0", "consumer2": "topic-1, topic2-1, topic3-1",
         "consumer3": "topic-2, topic2-2, topic3-2"}),
    "testNoReassignmentOnCurrentMembers": (
        {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3},
        [("consumer1", ["topic", "topic2", "topic3", "topic1"], "", -1),
         ("consumer2", ["topic", "topic2", "topic3", "topic1"], "topic-0, topic2-0, topic1-0", 9),
         ("consumer3", ["topic", "topic2", "topic3", "topic1"], "topic3-2, topic2-2, topic1-1", 8),
         ("consumer4", ["topic", "topic2", "topic3", "topic1"], "topic3-1, topic-1, topic-2", 7)],
        {"consumer1": "topic1-2, topic2-1, topic3-0", "consumer2": "topic-0, topic2-0, topic1-0",
         "consumer3": "topic3-2, topic2-2, topic1-1", "consumer4": "topic3-1, topic-1, topic-2"}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", ["topic", "topic2"], "topic-0, topic2-1, topic-1", 10),
         ("consumer2", ["topic", "topic2"], "topic-0, topic2-1, topic2-2", 8)],
        {"consumer1": "topic-0, topic2-1, topic-1", "consumer2": "topic-2, topic2-2, topic2-0"}),
}


def _sticky_members(specs) -> list[Member]:
    return [Member(mid, None, tuple(ts), owned=parts(owned), generation=gen) for mid, ts, owned, gen in specs]


@pytest.mark.parametrize("case", list(STICKY_CASES))
def test_sticky_kafka_cases(case):
    topics, specs, expected = STICKY_CASES[case]
    ms = _sticky_members(specs)
    result = A.sticky_assign(ms, topics)
    assert result == {mid: parts(spec) for mid, spec in expected.items()}
    assert is_java_balanced(result, ms)


def test_sticky_max_quota_consumer_more_than_num_expected_max_capacity_members():
    # testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers: which of consumer1 and consumer2 keeps two
    # partitions is Java hash-map order; kcoord gives the extra slot by rank. Either way exactly one partition
    # moves, to consumer3, and cooperative-sticky withholds it for one round.
    ms = _sticky_members([("consumer1", ["topic1", "topic2"], "topic1-0, topic2-0", 1),
                          ("consumer2", ["topic1", "topic2"], "topic1-1, topic2-1", 1),
                          ("consumer3", ["topic1", "topic2"], "", 1)])
    topics = {"topic1": 2, "topic2": 2}
    result = A.sticky_assign(ms, topics)
    assert result == {"consumer1": parts("topic1-0, topic2-0"), "consumer2": parts("topic1-1"),
                      "consumer3": parts("topic2-1")}
    coop = A.cooperative_sticky_assign(ms, topics)
    assert coop == {"consumer1": parts("topic1-0, topic2-0"), "consumer2": parts("topic1-1"), "consumer3": {}}


def test_sticky_add_remove_consumer_one_topic():
    # testAddRemoveConsumerOneTopic, sticky and cooperative
    topics = {"topic": 3}
    first = A.sticky_assign([Member("consumer1", None, ("topic",))], topics)
    assert first == {"consumer1": parts("topic-0, topic-1, topic-2")}
    ms = with_owned([Member("consumer1", None, ("topic",)), Member("consumer2", None, ("topic",))], first)
    assert A.sticky_assign(ms, topics) == {"consumer1": parts("topic-0, topic-1"), "consumer2": parts("topic-2")}
    # cooperative: topic-2 moves from consumer1 to consumer2, so it is withheld until consumer1 revokes it
    round1 = A.cooperative_sticky_assign(ms, topics)
    assert round1 == {"consumer1": parts("topic-0, topic-1"), "consumer2": {}}
    round2 = A.cooperative_sticky_assign(with_owned(ms, round1, generation=2), topics)
    assert round2 == {"consumer1": parts("topic-0, topic-1"), "consumer2": parts("topic-2")}
    alone = A.sticky_assign(with_owned([ms[1]], round2, generation=3), topics)
    assert alone == {"consumer2": parts("topic-0, topic-1, topic-2")}


def test_sticky_add_remove_two_consumers_two_topics():
    # testAddRemoveTwoConsumersTwoTopics: every step matches Kafka's expected assignments
    topics = {"topic1": 3, "topic2": 4}
    both = ("topic1", "topic2")
    first = A.sticky_assign([Member("consumer1", None, both), Member("consumer2", None, both)], topics)
    assert first == {"consumer1": parts("topic1-0, topic1-2, topic2-1, topic2-3"),
                     "consumer2": parts("topic1-1, topic2-0, topic2-2")}
    four = with_owned([Member(f"consumer{i}", None, both) for i in range(1, 5)], first)
    second = A.sticky_assign(four, topics)
    assert second == {"consumer1": parts("topic1-0, topic2-1"), "consumer2": parts("topic2-0, topic1-1"),
                      "consumer3": parts("topic1-2, topic2-3"), "consumer4": parts("topic2-2")}
    # Kafka's partitionsTransferringOwnership: topic1-2 and topic2-3 to consumer3, topic2-2 to consumer4
    coop = A.cooperative_sticky_assign(four, topics)
    assert coop == {"consumer1": parts("topic1-0, topic2-1"), "consumer2": parts("topic2-0, topic1-1"),
                    "consumer3": {}, "consumer4": {}}
    third = A.sticky_assign(with_owned(four[2:], second), topics)
    assert third == {"consumer3": parts("topic1-2, topic2-3, topic1-0, topic2-1"),
                     "consumer4": parts("topic2-2, topic1-1, topic2-0")}


def test_sticky_cooperative_withholds_partition_claimed_twice_in_one_generation():
    # testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration
    topics, specs, _ = STICKY_CASES[
        "testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration"]
    coop = A.cooperative_sticky_assign(_sticky_members(specs), topics)
    assert coop == {"consumer1": parts("topic-1"), "consumer2": parts("topic-2"), "consumer3": {}}


def test_sticky_poor_round_robin_assignment_scenario():
    # testPoorRoundRobinAssignmentScenario
    topics = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    every = tuple(topics)
    odd = ("topic1", "topic3", "topic5")
    ms = [Member("consumer1", None, every), Member("consumer2", None, odd), Member("consumer3", None, odd),
          Member("consumer4", None, every)]
    result = A.sticky_assign(ms, topics)
    check_valid(result, ms, topics)
    assert is_java_balanced(result, ms)
    assert sorted(loads(result).values()) == [2, 2, 2, 2]


def test_sticky_add_remove_topic_two_consumers():
    # testAddRemoveTopicTwoConsumers
    one = {"topic": 3}
    ms = [Member("consumer1", None, ("topic",)), Member("consumer2", None, ("topic",))]
    first = A.sticky_assign(ms, one)
    two = {"topic": 3, "topic2": 3}
    ms2 = with_owned([Member(m.member_id, None, ("topic", "topic2")) for m in ms], first)
    second = A.sticky_assign(ms2, two)
    assert sorted(loads(second).values()) == [3, 3]
    for m in ms:
        assert flatten({m.member_id: first[m.member_id]}).keys() <= flatten({m.member_id: second[m.member_id]}).keys()
    third = A.sticky_assign(with_owned([Member(m.member_id, None, ("topic2",)) for m in ms], second), {"topic2": 3})
    assert sorted(loads(third).values()) == [1, 2]
    for m in ms:
        kept = {tp for tp in flatten({m.member_id: second[m.member_id]}) if tp[0] == "topic2"}
        assert kept == set(flatten({m.member_id: third[m.member_id]}))


@pytest.mark.parametrize("leave", ["consumer10", None])
def test_sticky_reassignment_after_one_consumer_leaves_or_is_added(leave):
    # testReassignmentAfterOneConsumerLeaves (19 nested subscriptions) and testReassignmentAfterOneConsumerAdded
    if leave:
        topics = {f"topic{i:02d}": i for i in range(1, 20)}
        names = list(topics)
        ms = [Member(f"consumer{i:02d}".replace("consumer0", "consumer"), None, tuple(names[:i])) for i in range(1, 20)]
    else:
        topics = {"topic": 20}
        ms = [Member(f"consumer{i}", None, ("topic",)) for i in range(1, 10)]
    first = A.sticky_assign(ms, topics)
    assert is_java_balanced(first, ms)
    after = [m for m in ms if m.member_id != leave] if leave else [*ms, Member("consumer10", None, ("topic",))]
    claims = valid_claims(flatten(first), after)
    second = A.sticky_assign(with_owned(after, first), topics)
    check_valid(second, after, topics)
    assert is_java_balanced(second, after)
    if not leave:
        assert moves(claims, flatten(second)) == min_moves_homogeneous(claims, after, topics) == 2


def test_sticky_same_subscriptions():
    # testSameSubscriptions: 14 topics with 1..14 partitions, 8 consumers, consumer5 leaves
    topics = {f"topic{i:02d}": i for i in range(1, 15)}
    ms = [Member(f"consumer{i}", None, tuple(topics)) for i in range(1, 9)]
    first = A.sticky_assign(ms, topics)
    after = [m for m in ms if m.member_id != "consumer5"]
    claims = valid_claims(flatten(first), after)
    second = A.sticky_assign(with_owned(after, first), topics)
    check_valid(second, after, topics)
    assert moves(claims, flatten(second)) == 0  # only consumer5's partitions move
    assert max(loads(second).values()) - min(loads(second).values()) <= 1


def test_sticky_subscription_not_equal_and_same_partition_with_three_generations():
    # testSubscriptionNotEqualAndAssignSamePartitionWith3Generation
    topics = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        ms = [Member("consumer1", None, ("topic",), parts("topic-0, topic-2"), g1),
              Member("consumer2", None, ("topic",), parts("topic-1, topic-2, topic-3"), g2),
              Member("consumer3", None, ("topic",), parts("topic-2, topic-4, topic-5"), g3),
              Member("consumer4", None, ("topic1",), parts("topic1-0"), 2)]
        result = A.sticky_assign(ms, topics)
        check_valid(result, ms, topics)
        assert all(1 <= n <= 2 for n in loads(result).values())
        # topic-2 stays with its highest-generation claimant
        assert flatten(result)[("topic", 2)] == f"consumer{(g1, g2, g3).index(3) + 1}"


def test_sticky_large_group_stays_sticky_when_a_member_loses_its_partitions():
    # the shape of testLargeAssignmentAndGroupWithUniformSubscription at 1/100 scale (slow test below: 1M)
    topics = {f"topic-{i:03d}": 200 for i in range(50)}
    ms = [Member(f"consumer-{i:04d}", None, tuple(topics)) for i in range(200)]
    first = A.sticky_assign(ms, topics)
    again = [Member(m.member_id, None, m.topics, owned=first[m.member_id] if i else None, generation=1)
             for i, m in enumerate(ms)]
    second = A.sticky_assign(again, topics)
    assert second == first  # consumer 0's partitions are free again and no one else had room for them


@pytest.mark.slow
def test_sticky_large_assignment_and_group_with_uniform_subscription():
    # testLargeAssignmentAndGroupWithUniformSubscription: 500 topics × 2000 partitions, 2000 consumers
    topics = {f"topic-{i:03d}": 2000 for i in range(500)}
    names = tuple(topics)
    ms = [Member(f"consumer-{i:04d}", None, names) for i in range(2000)]
    first = A.sticky_assign(ms, topics)
    assert set(loads(first).values()) == {500}
    again = [Member(m.member_id, None, names, owned=first[m.member_id] if i else None, generation=1)
             for i, m in enumerate(ms)]
    assert A.sticky_assign(again, topics) == first


@pytest.mark.slow
def test_sticky_large_assignment_and_group_with_non_equal_subscription():
    # testLargeAssignmentAndGroupWithNonEqualSubscription: the last consumer subscribes to the first topic only
    topics = {f"topic-{i:03d}": 2000 for i in range(500)}
    names = tuple(topics)
    ms = [Member(f"consumer-{i:04d}", None, names if i < 1999 else names[:1]) for i in range(2000)]
    first = A.sticky_assign(ms, topics)
    assert is_java_balanced(first, ms)
    again = [Member(m.member_id, None, m.topics, owned=first[m.member_id] if i else None, generation=1)
             for i, m in enumerate(ms)]
    second = A.sticky_assign(again, topics)
    assert is_java_balanced(second, ms)
    assert moves(valid_claims(flatten(first), ms), flatten(second)) == 0


def test_sticky_deleted_topic():
    # testAssignmentUpdatedForDeletedTopic / testNoExceptionThrownWhenOnlySubscribedTopicDeleted: a Java client
    # leader skips a topic missing from its metadata; kcoord does with unknown_topics="ignore", else it says so
    ms = [Member("consumer", None, ("topic1", "topic2", "topic3"), parts("topic2-0"), 1)]
    topics = {"topic1": 1, "topic3": 100}
    result = A.sticky_assign(ms, topics, unknown_topics="ignore")
    assert loads(result) == {"consumer": 101} and "topic2" not in result["consumer"]
    with pytest.raises(AssignmentError, match="unknown topic 'topic2'"):
        A.sticky_assign(ms, topics)
    only = [Member("consumer", None, ("topic",), parts("topic-0"), 1)]
    assert A.sticky_assign(only, {}, unknown_topics="ignore") == {"consumer": {}}


# ---------------------------------------------------------------------------------------------------------------
# Server-side uniform: OptimizedUniformAssignmentBuilderTest / UniformHeterogeneousAssignmentBuilderTest


def test_uniform_one_member_no_topic_subscription():
    assert A.uniform_assign([Member("A", None, ())], {"topic1": 3}) == {"A": {}}


def test_uniform_one_member_subscribed_to_nonexistent_topic():
    with pytest.raises(AssignmentError, match="unknown topic 'topic3'"):
        A.uniform_assign([Member("A", None, ("topic3",))], {"topic1": 3})


def test_uniform_first_assignment_num_members_greater_than_total_num_partitions():
    ms = [Member(x, None, ("topic1", "topic3")) for x in "ABC"]
    result = A.uniform_assign(ms, {"topic1": 1, "topic3": 1})
    check_valid(result, ms, {"topic1": 1, "topic3": 1})
    assert sorted(loads(result).values()) == [0, 1, 1]


def test_uniform_reassignment_given_unbalanced_prev_assignment():
    # testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment: matches Kafka's expected result
    topics = {"topic1": 3, "topic2": 3}
    ms = [Member("A", None, tuple(topics), parts("topic1-0, topic1-1, topic2-0, topic2-1")),
          Member("B", None, tuple(topics), parts("topic1-2, topic2-2"))]
    assert A.uniform_assign(ms, topics) == {"A": parts("topic1-0, topic1-1, topic2-0"),
                                            "B": parts("topic1-2, topic2-1, topic2-2")}


@pytest.mark.parametrize(("case", "topics", "before", "after_ids"), [
    ("testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics", {"topic1": 6, "topic2": 5},
     {"A": "topic1-0, topic1-2, topic2-0", "B": "topic1-1, topic2-1, topic2-2"}, "AB"),
    ("testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics", {"topic1": 3, "topic2": 3},
     {"A": "topic1-0, topic1-2, topic2-0", "B": "topic1-1, topic2-1, topic2-2"}, "ABC"),
    ("testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
     {"topic1": 3, "topic2": 3}, {"A": "topic1-0, topic2-0", "B": "topic1-1, topic2-1"}, "AB"),
])
def test_uniform_reassignment_kafka_cases(case, topics, before, after_ids):
    # which member takes which freed partition follows Kafka's hash order there; kcoord's result is just as
    # balanced and moves exactly the theoretical minimum
    ms = [Member(x, None, tuple(topics), parts(before.get(x, ""))) for x in after_ids]
    result = A.uniform_assign(ms, topics)
    check_valid(result, ms, topics)
    assert max(loads(result).values()) - min(loads(result).values()) <= 1
    claims = {(t, p): x for x, spec in before.items() for t, ps in parts(spec).items() for p in ps}
    assert moves(claims, flatten(result)) == min_moves_homogeneous(claims, ms, topics)


def test_uniform_reassignment_when_one_subscription_removed():
    # testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics
    topics = {"topic1": 2, "topic2": 2}
    ms = [Member("A", None, ("topic2",), parts("topic1-0, topic2-0")),
          Member("B", None, ("topic2",), parts("topic1-1, topic2-1"))]
    assert A.uniform_assign(ms, topics) == {"A": parts("topic2-0"), "B": parts("topic2-1")}


def test_uniform_heterogeneous_javadoc_shape_is_near_balanced():
    # UniformHeterogeneousAssignmentBuilder's javadoc case of overlapping subscriptions: near-balanced, valid
    topics = {"T1": 3, "T2": 3, "T3": 3, "T4": 3}
    ms = [Member("A", None, ("T1", "T2")), Member("B", None, ("T2", "T3", "T4")), Member("C", None, ("T1", "T4")),
          Member("D", None, ("T3",))]
    result = A.uniform_assign(ms, topics)
    check_valid(result, ms, topics)
    assert is_java_balanced(result, ms)


def test_uniform_rejects_a_partition_in_two_current_assignments():
    ms = [Member("A", None, ("t",), parts("t-0")), Member("B", None, ("t",), parts("t-0, t-1"))]
    with pytest.raises(AssignmentError, match="partition t-0 is in the current assignment of more than one member"):
        A.uniform_assign(ms, {"t": 2})


# ---------------------------------------------------------------------------------------------------------------
# Bad input


def test_bad_input_raises_assignment_error():
    t = ("t",)
    with pytest.raises(AssignmentError, match="duplicate member id 'a'"):
        A.range_assign([Member("a", None, t), Member("a", None, t)], {"t": 1})
    with pytest.raises(AssignmentError, match="instance id 'i' is used by members 'a' and 'b'"):
        A.sticky_assign([Member("a", "i", t), Member("b", "i", t)], {"t": 1})
    with pytest.raises(AssignmentError, match="topic 't' has a negative partition count"):
        A.roundrobin_assign([Member("a", None, t)], {"t": -1})
    with pytest.raises(AssignmentError, match="not an integer"):
        A.range_assign([Member("a", None, t)], {"t": 1.5})
    with pytest.raises(AssignmentError, match="member 'a' subscribes to unknown topic 'u'"):
        A.cooperative_sticky_assign([Member("a", None, ("u",))], {"t": 1})
    with pytest.raises(AssignmentError, match="not a str"):
        A.range_assign([Member("a", None, "t")], {"t": 1})
    with pytest.raises(AssignmentError, match="unknown_topics"):
        A.range_assign([Member("a", None, t)], {"t": 1}, unknown_topics="skip")
    with pytest.raises(AssignmentError, match="unknown assignor 'fair'"):
        A.assign("fair", [Member("a", None, t)], {"t": 1})
    with pytest.raises(AssignmentError, match="generations must fit"):
        A.sticky_assign([Member("a", None, t, generation=2**40)], {"t": 1})
    with pytest.raises(TypeError):
        A.sticky_assign([Member("a", None, t, owned={"t": ["0"]})], {"t": 1})
    with pytest.raises(AssignmentError, match="member ids must be strings"):
        A.range_assign([Member(None, None, t)], {"t": 1})  # type: ignore[arg-type]
    with pytest.raises(AssignmentError, match="instance id must be a string"):
        A.range_assign([Member("a", 7, t)], {"t": 1})  # type: ignore[arg-type]
    with pytest.raises(AssignmentError, match="generation must be an integer"):
        A.sticky_assign([Member("a", None, t, generation="1")], {"t": 1})  # type: ignore[arg-type]
    assert issubclass(AssignmentError, ValueError)


def test_unusable_claims_are_ignored():
    # owned partitions of unknown topics, out of range or negative are not claims
    ms = [Member("a", None, ("t",), {"t": [-1, 5, 0, 0], "gone": [0]}, 1), Member("b", None, ("t",))]
    assert A.sticky_assign(ms, {"t": 2}) == {"a": {"t": [0]}, "b": {"t": [1]}}


def test_empty_groups():
    for assign in ALL_ASSIGNORS:
        assert assign([], {"t": 3}) == {}
        assert assign([Member("a", None, ("t",))], {"t": 0}) == {"a": {}}


# ---------------------------------------------------------------------------------------------------------------
# The consumer protocol, against kafka-python's codec


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_kafka_python(version):
    owned = {"b": [2, 0], "a": [1]}
    mine = A.encode_subscription(["y", "x"], owned=owned, generation_id=7, rack_id="r1", user_data=b"ud",
                                 version=version)
    theirs = KPSubscription(version=version, topics=["x", "y"], user_data=b"ud",
                            owned_partitions=[KPSubscription.TopicPartition(topic="a", partitions=[1]),
                                              KPSubscription.TopicPartition(topic="b", partitions=[0, 2])],
                            generation_id=7, rack_id="r1").encode()
    assert mine == theirs
    sub = A.decode_subscription(mine)
    assert sub.topics == ["x", "y"] and sub.user_data == b"ud" and sub.version == version
    assert sub.owned_partitions == ({"a": [1], "b": [0, 2]} if version >= 1 else {})
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)


def test_assignment_bytes_decode_with_kafka_python():
    data = A.encode_assignment({"t2": [3, 1], "t1": [0], "empty": []}, user_data=None)
    theirs = KPAssignment.decode(data)
    assert theirs.version == 3
    assert [(tp.topic, tp.partitions) for tp in theirs.assigned_partitions] == [("t1", [0]), ("t2", [1, 3])]
    assert A.decode_assignment(data) == A.ProtocolAssignment({"t1": [0], "t2": [1, 3]}, None, 3)
    assert A.decode_assignment(A.encode_assignment({"t": [0]}, version=0)).version == 0


def test_newer_versions_read_as_the_latest_known():
    body = A.encode_subscription(["t"], owned={"t": [0]}, generation_id=3, rack_id="r")[2:]
    newer = (9).to_bytes(2, "big") + body + b"\x00\x00\x00\x2a future fields"
    sub = A.decode_subscription(newer)
    assert (sub.version, sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id) == (9, ["t"], {"t": [0]},
                                                                                           3, "r")
    assert A.decode_subscription(A.encode_subscription(["t"], rack_id="")).rack_id is None


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff", b"\x00\x01\x00\x00\x00\x05", b"\x00\x00\x7f\xff\xff\xff"])
def test_malformed_protocol_bytes_raise_assignment_error(data):
    with pytest.raises(AssignmentError):
        A.decode_subscription(data)
    with pytest.raises(AssignmentError):
        A.decode_assignment(data)


# StickyAssignorUserData v1 as Java's StickyAssignor writes it (no version prefix): [topic, [partitions]], generation
JAVA_STICKY_USER_DATA = (b"\x00\x00\x00\x02" b"\x00\x02t1" b"\x00\x00\x00\x02" b"\x00\x00\x00\x00" b"\x00\x00\x00\x02"
                         b"\x00\x02t2" b"\x00\x00\x00\x01" b"\x00\x00\x00\x01" b"\x00\x00\x00\x04")


def test_sticky_user_data_java_layout_and_kafka_python_layout():
    assert A.encode_sticky_user_data({"t1": [0, 2], "t2": [1]}, 4) == JAVA_STICKY_USER_DATA
    assert A.decode_sticky_user_data(JAVA_STICKY_USER_DATA) == ({"t1": [0, 2], "t2": [1]}, 4)
    # kafka-python 3.0.12 writes the same struct behind a 2-byte version
    tps = [TopicPartition("t1", 0), TopicPartition("t1", 2), TopicPartition("t2", 1)]
    theirs = StickyPartitionAssignor._metadata(["t1", "t2"], tps, generation=4).encode()
    sub = A.decode_subscription(theirs)
    assert sub.user_data == b"\x00\x01" + JAVA_STICKY_USER_DATA
    assert A.decode_sticky_user_data(sub.user_data) == ({"t1": [0, 2], "t2": [1]}, 4)
    v0 = A.encode_sticky_user_data({"t": [1]}, None)
    assert A.decode_sticky_user_data(v0) == ({"t": [1]}, None)
    for junk in (b"\x00", b"\x00\x00\x00\x05abc", b"\x00\x00\x00\x01\xff\xff"):
        assert A.decode_sticky_user_data(junk) is None


def _join(member_id, instance_id, metadata):
    return wire.JoinGroupResponseMember(member_id=member_id, group_instance_id=instance_id, metadata=metadata)


def test_join_group_leader_with_kafka_python_cooperative_members():
    topics = {"events": 6, "audit": 2}
    first = {"m1": {"events": [0, 1, 2], "audit": [0]}, "m2": {"events": [3, 4, 5], "audit": [1]}}
    join = []
    for mid, iid in (("m1", "host-1"), ("m2", None), ("m3", "host-3")):
        owned = [KPSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in first.get(mid, {}).items()]
        meta = KPSubscription(version=1, topics=["audit", "events"], user_data=b"", owned_partitions=owned)
        join.append(_join(mid, iid, meta.encode()))
    out = A.assign_join_group("cooperative-sticky", join, topics)
    decoded = {mid: KPAssignment.decode(data) for mid, data in out.items()}
    got = {mid: {tp.topic: tp.partitions for tp in a.assigned_partitions} for mid, a in decoded.items()}
    # m3 (static, ranks first) joins: two partitions must move to it, and both are withheld for one round
    assert got["m3"] == {}
    assert sum(len(ps) for d in got.values() for ps in d.values()) == 6
    for mid in ("m1", "m2"):
        assert flatten({mid: got[mid]}).keys() <= flatten({mid: first[mid]}).keys()


def test_join_group_leader_with_eager_sticky_user_data_and_range():
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    join = [_join("a", None, StickyPartitionAssignor._metadata(["t"], tps, generation=3).encode()),
            _join("b", None, StickyPartitionAssignor._metadata(["t"], [], generation=3).encode())]
    out = A.assign_join_group("sticky", join, {"t": 4})
    assert {mid: A.decode_assignment(b).partitions for mid, b in out.items()} == {"a": {"t": [0, 1]},
                                                                                   "b": {"t": [2, 3]}}
    ms = A.members_from_join("sticky", [("a", None, join[0].metadata)])
    assert ms[0].owned == {"t": [0, 1]} and ms[0].generation == 3
    meta = A.encode_subscription(["t"], rack_id="rack-a")
    racked = A.assign_join_group("range", [("x", None, meta)], {"t": 2}, partition_racks={"t": [{"rack-a"}, {"b"}]})
    assert A.decode_assignment(racked["x"]).partitions == {"t": [0, 1]}


def test_cooperative_generation_from_user_data_before_v2():
    # CooperativeStickyAssignor's user data (v0/v1 subscriptions) carries the generation as an int32
    meta = A.encode_subscription(["t"], owned={"t": [0]}, user_data=(5).to_bytes(4, "big"), version=1)
    (m,) = A.members_from_join("cooperative-sticky", [("a", None, meta)])
    assert m.generation == 5 and m.owned == {"t": [0]}
    meta = A.encode_subscription(["t"], owned={"t": [0]}, generation_id=8, user_data=(5).to_bytes(4, "big"))
    assert A.members_from_join("cooperative-sticky", [("a", None, meta)])[0].generation == 8


def test_join_group_with_malformed_metadata_names_the_member():
    with pytest.raises(AssignmentError, match="member 'bad'"):
        A.assign_join_group("range", [("bad", None, b"\x00")], {"t": 1})


# ---------------------------------------------------------------------------------------------------------------
# Kernels run without the GIL and are reentrant


def test_kernels_are_reentrant_across_threads():
    rng = np.random.default_rng(7)
    groups = []
    for _ in range(8):
        n_topics = int(rng.integers(5, 40))
        counts = rng.integers(0, 60, n_topics)
        n_members = int(rng.integers(5, 80))
        member_sets = rng.integers(0, 3, n_members)
        rows = [sorted(rng.choice(n_topics, size=int(rng.integers(1, n_topics)), replace=False)) for _ in range(3)]
        indptr = np.cumsum([0] + [len(r) for r in rows])
        groups.append((counts, member_sets, indptr, np.concatenate(rows)))
    names = ["range", "roundrobin", "sticky", "cooperative-sticky", "uniform"]
    expected = {(i, n): A.assign_arrays(n, *g) for i, g in enumerate(groups) for n in names}
    errors = []

    def work(seed):
        order = list(expected)
        random = np.random.default_rng(seed)
        random.shuffle(order)
        for _ in range(3):
            for i, n in order:
                got = A.assign_arrays(n, *groups[i])
                if not np.array_equal(got.owners, expected[(i, n)].owners):
                    errors.append((i, n))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
