"""KIP-848 consumer groups (kcoord.groups.consumer) on the in-process coordinator with a manual clock.

Named after the behaviours of Kafka's GroupMetadataManager (consumerGroupHeartbeat) and the GroupMetadataManagerTest
cases that pin them. Every test also writes Kafka-format records, and the restart tests replay them.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.assignors import encode_subscription
from kcoord.coordinator import Coordinator
from kcoord.groups.consumer import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from kcoord.store import GroupStore

from ..support.harness import ConsumerHarness, owners
from ..support.snapshots import check_rebuild

SESSION = 45_000
REBALANCE = 30_000
INTERVAL = 1_000  # group.consumer.assignment.interval.ms: Kafka 4.3's default


def settle(h: ConsumerHarness, members: dict[str, dict], rounds: int = 10) -> None:
    """Every member heartbeats in turn, reporting what it was told, until nothing changes."""
    for _ in range(rounds):
        changed = False
        for mid, st in members.items():
            if st.pop("full", False):
                r = h.hb(mid, st["epoch"], owned=st["owned"] or {}, topics=list(st["topics"]), iid=st["iid"],
                         rebalance=REBALANCE)
            else:
                r = h.hb(mid, st["epoch"], owned=st["owned"])
            assert r.error_code == E.NONE, (mid, r)
            if r.assignment is not None:
                new = h.parts(r)
                changed |= new != st["owned"]
                st["owned"] = new
            changed |= r.member_epoch != st["epoch"]
            st["epoch"] = r.member_epoch
        if not changed:
            return
    raise AssertionError("the group did not settle")


# ---- validation and errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, words", [
    ({"group_id": ""}, "GroupId"),
    ({"instance_id": " "}, "InstanceId"),
    ({"rack_id": ""}, "RackId"),
    ({"member_id": ""}, "MemberId"),
    ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    ({"topic_partitions": None}, "TopicPartitions"),
    ({"topic_partitions": [wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=b"\1" * 16, partitions=[0])]},
     "TopicPartitions"),
    ({"subscribed_topic_names": None}, "SubscribedTopicNames"),
    ({"member_epoch": -3}, "MemberEpoch"),
    ({"member_epoch": -2, "instance_id": None}, "InstanceId"),
])
def test_consumer_heartbeat_request_validation(fields, words) -> None:
    h = ConsumerHarness()
    req = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
               rebalance_timeout_ms=REBALANCE, subscribed_topic_names=["T"], subscribed_topic_regex=None,
               server_assignor=None, topic_partitions=[])
    req.update(fields)
    r = h.c.handle(wire.ConsumerGroupHeartbeatRequest(**req), 1)
    assert r.error_code == E.INVALID_REQUEST and words in r.error_message
    assert "g" not in h.c.groups  # nothing was created


def test_unknown_server_assignor_is_unsupported_assignor() -> None:
    h = ConsumerHarness()
    r = h.join("m", assignor="sticky")
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR
    h2 = ConsumerHarness(group_consumer_assignors="range")
    assert h2.join("m", assignor="uniform").error_code == E.UNSUPPORTED_ASSIGNOR
    assert h2.join("m", assignor="range").error_code == E.NONE


def test_member_id_generation_v0_makes_one_and_v1_requires_it() -> None:
    h = ConsumerHarness()
    r = h.join("", version=0)
    assert r.error_code == E.NONE and len(r.member_id) == 22 and r.member_epoch == 1
    assert h.join("", version=1).error_code == E.INVALID_REQUEST


def test_unknown_member_joins_consumer_group() -> None:
    h = ConsumerHarness()
    h.join("a")
    assert h.hb("ghost", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert h.hb("a", 1, gid="nope").error_code == E.GROUP_ID_NOT_FOUND
    assert h.hb("a", -1, gid="nope").error_code == E.GROUP_ID_NOT_FOUND


# ---- message.max.bytes: a member's record ---------------------------------------------------------------------

LONG_NAMES = [f"{i:05d}" + "n" * 244 for i in range(8)]  # 249 characters each, Kafka's longest topic name


def member_record(h: ConsumerHarness, mid: str) -> bytes | None:
    return h.records.data.get(R.consumer_member_key("g", mid))


def test_a_subscription_whose_member_record_would_pass_message_max_bytes_is_refused_to_the_byte() -> None:
    # Kafka writes one record per member; one above message.max.bytes fails (MESSAGE_TOO_LARGE), answered
    # UNKNOWN_SERVER_ERROR. kcoord refuses the heartbeat before keeping anything of it. The size counted is the
    # record's (R.consumer_member_size: exact but for up to 10 bytes of tag counts, never below it).
    size = R.consumer_member_size("g", "b", None, None, "client", "/127.0.0.1", LONG_NAMES, None, None, None)
    refuse, take = ConsumerHarness(message_max_bytes=size - 1), ConsumerHarness(message_max_bytes=size)
    for h in (refuse, take):
        assert h.join("a").error_code == E.NONE
    r = refuse.join("b", topics=LONG_NAMES)
    assert r.error_code == E.UNKNOWN_SERVER_ERROR and "message.max.bytes" in r.error_message
    g = refuse.group()
    assert "b" not in g.members and g.group_epoch == 1 and member_record(refuse, "b") is None
    assert take.join("b", topics=LONG_NAMES).error_code == E.NONE
    assert len(member_record(take, "b")) + len(R.consumer_member_key("g", "b")) <= size
    # a member that grows its subscription past the bound keeps the one it had
    a = refuse.group().members["a"]
    r = refuse.hb("a", a.member_epoch, topics=LONG_NAMES)
    assert r.error_code == E.UNKNOWN_SERVER_ERROR and a.subscribed == ("T",) and g.group_epoch == 1
    assert refuse.hb("a", a.member_epoch).error_code == E.NONE  # and heartbeats on


def test_a_huge_subscription_is_refused_under_the_default_bound() -> None:
    # 5,000 names of 249 characters: 1.25 MB, above message.max.bytes' 1048588
    h = ConsumerHarness()
    names = [f"{i:05d}" + "n" * 244 for i in range(5_000)]
    assert h.join("a", topics=names).error_code == E.UNKNOWN_SERVER_ERROR
    assert "g" not in h.c.groups or "a" not in h.group().members


def test_a_classic_join_whose_metadata_would_pass_message_max_bytes_is_refused_by_a_consumer_group() -> None:
    # A classic member of a consumer group keeps every protocol's metadata in its member record
    # (ClassicMemberMetadata): 2 MiB of it is refused, nothing kept; the same join with little metadata is taken.
    h = ConsumerHarness()
    assert h.join("a").error_code == E.NONE

    def classic_join(extra: bytes) -> wire.JoinGroupResponse:
        return h.c.handle(wire.JoinGroupRequest(
            group_id="g", session_timeout_ms=45_000, rebalance_timeout_ms=REBALANCE, member_id="",
            group_instance_id="S", protocol_type="consumer", protocols=[
                wire.JoinGroupRequestProtocol(name="range", metadata=encode_subscription(["T"])),
                wire.JoinGroupRequestProtocol(name="big", metadata=extra)]), 9, "client", "/127.0.0.1").response

    assert classic_join(b"x" * (2 << 20)).error_code == E.UNKNOWN_SERVER_ERROR
    g = h.group()
    assert list(g.members) == ["a"] and "S" not in g.static and g.group_epoch == 1
    assert classic_join(b"x").error_code == E.NONE and "S" in g.static


@pytest.mark.parametrize("seed", range(5))
def test_member_record_sizes_bound_the_records_by_at_most_ten_bytes(seed) -> None:
    rng = random.Random(seed)

    def text(n: int) -> str:
        return "".join(rng.choice("ab\u00e9\U0001F600") for _ in range(rng.randint(0, n)))

    topics = [text(20) for _ in range(rng.randint(0, 300))]
    classic = [(text(10), bytes(rng.randint(0, 300))) for _ in range(rng.randint(0, 3))]
    fields = dict(instance_id=text(5) or None, rack_id=text(5) or None, client_id=text(200), client_host=text(10))
    regex, assignor = text(5) or None, text(5) or None
    value = wire.ConsumerGroupMemberMetadataValue(
        subscribed_topic_names=topics, subscribed_topic_regex=regex, rebalance_timeout_ms=5, server_assignor=assignor,
        classic_member_metadata=wire.ConsumerGroupMemberMetadataValueClassicMemberMetadata(
            session_timeout_ms=1, supported_protocols=[wire.ConsumerGroupMemberMetadataValueClassicProtocol(
                name=n, metadata=m) for n, m in classic]), **fields)
    actual = len(R.consumer_member_key("g\u00e9", "m")) + len(R.consumer_member_value(value))
    bound = R.consumer_member_size("g\u00e9", "m", *fields.values(), topics, regex, assignor, classic)
    assert actual <= bound <= actual + 10
    assignors = [(text(10), bytes(rng.randint(0, 30_000))) for _ in range(rng.randint(0, 4))]
    value = wire.ConnectGroupMemberMetadataValue(
        instance_id=fields["instance_id"], client_id=fields["client_id"], client_host=fields["client_host"],
        rebalance_timeout_ms=1, joined=5, client_assignors=[wire.ConnectGroupMemberMetadataValueAssignor(
            name=n, minimum_version=0, maximum_version=1, reason=0, version=0, metadata=m) for n, m in assignors])
    actual = len(R.connect_member_key("g", "m")) + len(R.connect_value(value))
    bound = R.connect_member_size("g", "m", fields["instance_id"], fields["client_id"], fields["client_host"],
                                  assignors)
    assert actual <= bound <= actual + 10


def test_new_member_is_rejected_when_maximum_members_is_reached() -> None:
    h = ConsumerHarness(group_consumer_max_size=2)
    assert h.join("a").error_code == E.NONE and h.join("b").error_code == E.NONE
    r = h.join("c")
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED and "c" not in h.group().members
    assert h.hb("a", 1).error_code == E.NONE  # the members keep being served


def test_consumer_protocol_off_answers_unsupported_version_and_is_not_advertised() -> None:
    h = ConsumerHarness(group_coordinator_rebalance_protocols="classic")
    assert h.join("a").error_code == E.UNSUPPORTED_VERSION
    assert {68, 69} <= h.c.hidden_apis
    assert not {68, 69} & ConsumerHarness().c.hidden_apis


# ---- epochs and reconciliation -----------------------------------------------------------------------------------

def test_member_joins_empty_consumer_group() -> None:
    h = ConsumerHarness({"T": 4, "U": 2})
    r = h.join("a", ("T", "U"))
    assert (r.error_code, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, 1, 5_000)
    assert h.parts(r) == {"T": [0, 1, 2, 3], "U": [0, 1]}
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (1, 1, "Stable")
    assert g.members["a"].state == STABLE


def test_worked_example_revoke_then_assign() -> None:
    """A worked example, step by step: A holds T0-3; B joins; A revokes T2-3; B gets them after."""
    h = ConsumerHarness()
    assert h.parts(h.join("a")) == {"T": [0, 1, 2, 3]}
    rb = h.join("b")
    assert (rb.member_epoch, h.parts(rb)) == (2, {})  # 2 and 3 are still A's: withheld
    g = h.group()
    assert g.members["b"].state == UNRELEASED_PARTITIONS and g.state_name == "Reconciling"
    ra = h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    assert (ra.member_epoch, h.parts(ra)) == (1, {"T": [0, 1]})
    assert g.members["a"].state == UNREVOKED_PARTITIONS and g.members["a"].pending.tolist() == [2, 3]
    rb = h.hb("b", 2)
    assert (rb.member_epoch, rb.assignment) == (2, None)  # still pending at A
    ra = h.hb("a", 1, owned={"T": [0, 1]})
    assert (ra.member_epoch, ra.assignment) == (2, None)  # the epoch advances, the set is unchanged
    assert g.members["a"].previous_member_epoch == 1
    rb = h.hb("b", 2)
    assert (rb.member_epoch, h.parts(rb)) == (2, {"T": [2, 3]})
    assert g.state_name == "Stable"
    owners(g)


def test_new_joining_member_and_subscription_change_trigger_new_target_assignment() -> None:
    h = ConsumerHarness({"T": 4, "U": 4})
    h.join("a", ("T",))
    h.join("b", ("T",))
    g = h.group()
    assert g.group_epoch == 2 and g.target["b"].shape[0] == 2
    r = h.hb("b", 2, topics=["T", "U"])
    assert g.group_epoch == 3 and r.member_epoch == 3
    assert sorted(h.parts(r)["U"]) == [0, 1, 2, 3]  # U is free: given at once


def test_remains_in_unrevoked_partitions_while_it_reports_them_or_reports_nothing() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    for owned in (None, {"T": [0, 1, 2]}, None):
        r = h.hb("a", 1, owned=owned)
        assert r.member_epoch == 1 and h.group().members["a"].state == UNREVOKED_PARTITIONS
    assert h.parts(h.hb("b", 2)) is None


def test_consumer_group_member_epoch_validation() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    h.hb("a", 1, owned={"T": [0, 1]})  # now at epoch 2, previous 1
    assert h.hb("a", 3).error_code == E.FENCED_MEMBER_EPOCH  # greater
    assert h.hb("a", 1, owned={"T": [0, 1]}).error_code == E.NONE  # the previous epoch, a lost response
    assert h.hb("a", 1, owned={"T": [0, 1, 2]}).error_code == E.FENCED_MEMBER_EPOCH  # owns more than assigned
    assert h.hb("a", 1, owned=None).error_code == E.FENCED_MEMBER_EPOCH  # a null list fails


@pytest.mark.parametrize("state", ["stable", "unrevoked", "unreleased"])
def test_epoch_zero_rejoin_returns_state_and_full_assignment(state) -> None:
    h = ConsumerHarness()
    h.join("a")
    if state != "stable":
        h.join("b")
    if state == "unrevoked":
        h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
        mid, before = "a", [0, 1]
    elif state == "unreleased":
        mid, before = "b", []
    else:
        mid, before = "a", [0, 1, 2, 3]
    r = h.join(mid)
    assert r.error_code == E.NONE and h.parts(r) == ({"T": before} if before else {})
    owners(h.group())


def test_consumer_group_heartbeat_full_response() -> None:
    h = ConsumerHarness()
    h.join("a")
    assert h.hb("a", 1).assignment is None  # nothing changed: null, not empty
    full = h.hb("a", 1, owned={"T": [0, 1, 2, 3]}, topics=["T"], rebalance=REBALANCE)
    assert h.parts(full) == {"T": [0, 1, 2, 3]}  # a full request gets the assignment
    assert h.parts(ConsumerHarness().join("idle", ("Missing",))) == {}  # an idle joiner: an empty list


def test_consumer_group_states() -> None:
    h = ConsumerHarness()
    g = h.c.groups
    h.join("a")
    assert g["g"].state_name == "Stable"
    h.join("b")
    assert g["g"].state_name == "Reconciling"
    g["g"].group_epoch += 1  # what a bump without a heartbeat looks like (a fence by timer)
    assert g["g"].state_name == "Assigning"
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})  # the next heartbeat computes the target
    assert g["g"].assignment_epoch == g["g"].group_epoch
    assert h.hb("a", -1).member_epoch == -1
    assert h.hb("b", -1).error_code == E.NONE
    assert g["g"].state_name == "Empty"


# ---- leaving, timers, static members ----------------------------------------------------------------------------

def test_leaving_member_bumps_group_epoch_and_frees_its_partitions() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    epoch = h.group().group_epoch
    r = h.hb("a", -1)
    assert (r.error_code, r.member_epoch) == (E.NONE, -1)
    assert h.group().group_epoch == epoch + 1 and "a" not in h.group().members
    assert h.parts(h.hb("b", 2)) == {"T": [0, 1, 2, 3]}


def test_no_group_epoch_bump_when_static_member_temporarily_leaves() -> None:
    h = ConsumerHarness()
    h.join("a", iid="ia")
    h.join("b", iid="ib")
    settle(h, {"a": {"epoch": 1, "owned": {"T": [0, 1, 2, 3]}}, "b": {"epoch": 2, "owned": {}}})
    g = h.group()
    epoch, mine = g.group_epoch, g.members["a"].assigned.tolist()
    r = h.hb("a", -2, iid="ia")
    assert (r.error_code, r.member_epoch, g.group_epoch) == (E.NONE, -2, epoch)
    # The static member gets back the same partitions under a new member id, with no bump; b loses nothing.
    r = h.join("a2", iid="ia")
    assert r.error_code == E.NONE and g.group_epoch == epoch and "a" not in g.members
    assert [p for ps in h.parts(r).values() for p in ps] == mine
    assert h.hb("b", epoch).assignment is None


def test_a_static_member_leaving_with_minus_2_mid_revocation_frees_what_it_was_revoking() -> None:
    """Kafka's consumerGroupStaticMemberGroupLeave: the member is kept at epoch -2 with its assigned partitions but
    none pending revocation; the new owner of those gets them on its next heartbeat, and the -2 member's return
    gets back only what it kept."""
    h = ConsumerHarness()
    h.join("a", iid="ia")
    h.join("b")
    ra = h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    assert h.parts(ra) == {"T": [0, 1]}  # a must revoke 2 and 3, which b's target holds
    g = h.group()
    assert g.members["a"].state == UNREVOKED_PARTITIONS and g.members["a"].pending.tolist() == [2, 3]
    rb = h.hb("b", 2)
    assert (rb.error_code, rb.assignment) == (E.NONE, None)  # still a's
    epoch = g.group_epoch
    r = h.hb("a", -2, iid="ia")  # leaves for now, without acknowledging the revocation
    assert (r.error_code, r.member_epoch, g.group_epoch) == (E.NONE, -2, epoch)
    assert g.members["a"].pending.tolist() == [] and g.members["a"].assigned.tolist() == [0, 1]
    rb = h.hb("b", 2)
    assert (rb.error_code, rb.member_epoch, h.parts(rb)) == (E.NONE, 2, {"T": [2, 3]})
    assert g.members["b"].state == STABLE
    owners(g)
    back = h.join("a2", iid="ia")
    assert (back.error_code, h.parts(back)) == (E.NONE, {"T": [0, 1]})
    assert owners(g) == {0: "a2", 1: "a2", 2: "b", 3: "b"}


def test_static_member_rejoins_with_new_subscribed_topics_bumps() -> None:
    h = ConsumerHarness({"T": 4, "U": 2})
    h.join("a", iid="ia")
    h.hb("a", -2, iid="ia")
    r = h.join("a2", ("T", "U"), iid="ia")
    assert h.group().group_epoch == 2 and h.parts(r) == {"T": [0, 1, 2, 3], "U": [0, 1]}


def test_static_member_errors_unreleased_unknown_and_fenced_instance() -> None:
    h = ConsumerHarness()
    h.join("a", iid="ia")
    assert h.join("a2", iid="ia").error_code == E.UNRELEASED_INSTANCE_ID
    assert h.hb("a", 1, iid="nobody").error_code == E.UNKNOWN_MEMBER_ID
    h.join("b", iid="ib")
    assert h.hb("b", 2, iid="ia").error_code == E.FENCED_INSTANCE_ID
    assert h.hb("b", -2, iid="ia").error_code == E.FENCED_INSTANCE_ID
    assert h.hb("x", -1, iid="nobody").error_code == E.UNKNOWN_MEMBER_ID


def test_session_timeout_expiration_fences_dynamic_and_away_static_members() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.join("s", iid="is")
    h.hb("s", -2, iid="is")
    epoch = h.group().group_epoch
    h.advance(SESSION - 1)
    assert set(h.group().members) == {"a", "s"}
    h.advance(1)
    assert not h.group().members and h.group().group_epoch == epoch + 2


def test_session_timeout_lifecycle_heartbeats_postpone_it() -> None:
    h = ConsumerHarness()
    h.join("a")
    for _ in range(5):
        h.advance(SESSION - 1)
        assert h.hb("a", 1).error_code == E.NONE
    h.advance(SESSION)
    assert h.hb("a", 1).error_code == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_only_a_member_still_revoking_at_the_armed_epoch() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})  # a must revoke 2, 3: the rebalance timer is armed
    h.advance(REBALANCE - 1)
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})  # still holding on; heartbeats do not postpone the rebalance timeout
    h.hb("b", 2)
    h.advance(1)
    assert "a" not in h.group().members
    assert h.parts(h.hb("b", 2)) == {"T": [0, 1, 2, 3]}
    # A member that revokes in time is not fenced.
    h2 = ConsumerHarness()
    h2.join("a")
    h2.join("b")
    h2.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    h2.hb("a", 1, owned={"T": [0, 1]})
    h2.advance(REBALANCE)
    assert "a" in h2.group().members


# ---- metadata and durability -------------------------------------------------------------------------------------

def test_partition_growth_bumps_the_epoch_at_the_next_heartbeat() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.c.topics.grow("T", 6)
    r = h.hb("a", 1)
    assert h.group().group_epoch == 2 and h.parts(r) == {"T": [0, 1, 2, 3, 4, 5]}


def test_topic_created_after_the_subscription_reaches_the_member() -> None:
    h = ConsumerHarness({"T": 2})
    r = h.join("a", ("T", "Later"))
    assert h.parts(r) == {"T": [0, 1]}
    h.c.topics.create("Later", 3)
    r = h.hb("a", 1)
    assert r.member_epoch == 2 and h.parts(r) == {"T": [0, 1], "Later": [0, 1, 2]}


def test_growth_of_an_earlier_topic_renumbers_without_moving_anything() -> None:
    h = ConsumerHarness({"T": 2, "U": 2})
    h.join("a", ("T", "U"))
    h.join("b", ("T", "U"))
    settle(h, {"a": {"epoch": 1, "owned": {"T": [0, 1], "U": [0, 1]}}, "b": {"epoch": 2, "owned": {}}})
    before = {m: h.group().members[m].assigned.tolist() for m in ("a", "b")}
    h.c.topics.grow("T", 4)  # every id of U moves by two
    settle(h, {"a": {"epoch": 2, "owned": None}, "b": {"epoch": 2, "owned": None}})
    owner = owners(h.group())
    assert len(owner) == 6 and before  # all six partitions held, once each


def test_replay_after_restart_gives_the_same_answers() -> None:
    h = ConsumerHarness({"T": 4, "U": 2})
    h.join("a", ("T", "U"), iid="ia")
    h.join("b", ("T",))
    h.hb("a", 1, owned={"T": [0, 1, 2, 3], "U": [0, 1]})  # a revoking: UNREVOKED, timer armed
    g = h.group()
    c2 = h.restarted()
    g2 = c2.groups["g"]
    assert (g2.group_epoch, g2.assignment_epoch, g2.state_name) == (g.group_epoch, g.assignment_epoch, g.state_name)
    for mid, m in g.members.items():
        m2 = g2.members[mid]
        assert (m2.member_epoch, m2.previous_member_epoch, m2.state, m2.instance_id, m2.subscribed) == \
            (m.member_epoch, m.previous_member_epoch, m.state, m.instance_id, m.subscribed)
        assert m2.assigned.tolist() == m.assigned.tolist() and m2.pending.tolist() == m.pending.tolist()
        assert g2.target[mid].tolist() == g.target[mid].tolist()
    # The same heartbeats give the same answers on both: a reports its revocation done, b gets the rest.
    told = {h.name(h.c.topics.by_name[g.space.names[t]].topic_id): ps for t, ps in g.space.split(g.members["a"].assigned)}
    answers = []
    for c in (h.c, c2):
        ra = h.hb("a", 1, owned=told, c=c)
        rb = h.hb("b", 2, c=c)
        answers.append((ra.error_code, ra.member_epoch, h.parts(ra), rb.error_code, rb.member_epoch, h.parts(rb)))
    assert answers[0] == answers[1] and answers[0][:2] == (E.NONE, 2) and answers[0][5]
    owners(g2)
    # Timers came back: the session of b runs out on the restarted coordinator too.
    h.c = c2
    h.advance(SESSION)
    assert not c2.groups["g"].members


def test_deleting_an_empty_consumer_group_tombstones_every_record() -> None:
    h = ConsumerHarness()
    h.join("a")
    assert h.c.handle(wire.DeleteGroupsRequest(groups_names=["g"]), 2).results[0].error_code == E.NON_EMPTY_GROUP
    h.hb("a", -1)
    assert h.c.handle(wire.DeleteGroupsRequest(groups_names=["g"]), 2).results[0].error_code == E.NONE
    assert all(k[:2] == b"\x03\xe8" for k in h.records.data)  # only the topic records are left
    assert "g" not in h.restarted().groups


# ---- the group beside the other APIs ----------------------------------------------------------------------------

def commit(h: ConsumerHarness, mid: str, epoch: int, version: int = 9):
    return h.c.handle(wire.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=epoch, member_id=mid, group_instance_id=None,
        topics=[wire.OffsetCommitRequestTopic(name="T", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                                              committed_metadata="")])]), version).topics[0].partitions[0].error_code


def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    h = ConsumerHarness()
    h.join("a")
    assert commit(h, "a", 1) == E.NONE
    assert commit(h, "a", 0) == E.STALE_MEMBER_EPOCH
    assert commit(h, "ghost", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(h, "a", 1, version=8) == E.UNSUPPORTED_VERSION
    assert commit(h, "", -1) == E.UNKNOWN_MEMBER_ID  # an admin commit needs an empty group

    def fetch(mid, epoch):
        return h.c.handle(wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
            group_id="g", member_id=mid, member_epoch=epoch, topics=None)]), 9).groups[0]

    assert fetch("a", 1).topics[0].partitions[0].committed_offset == 7
    assert fetch(None, -1).error_code == E.NONE
    assert fetch("a", 5).error_code == E.STALE_MEMBER_EPOCH
    assert fetch("ghost", 1).error_code == E.UNKNOWN_MEMBER_ID
    h.hb("a", -1)
    assert commit(h, "", -1) == E.NONE


def test_list_describe_and_types_filter() -> None:
    h = ConsumerHarness()
    h.join("a")
    h.c.handle(wire.OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1, member_id="",
                                              topics=[]), 8)
    h.c.group("classic", create=True)
    listed = {g.group_id: (g.group_type, g.group_state, g.protocol_type)
              for g in h.c.handle(wire.ListGroupsRequest(), 5).groups}
    assert listed["g"] == ("consumer", "Stable", "consumer") and listed["classic"][0] == "classic"
    only = h.c.handle(wire.ListGroupsRequest(types_filter=["Consumer"]), 5).groups
    assert [g.group_id for g in only] == ["g"]
    d = h.c.handle(wire.DescribeGroupsRequest(groups=["g"]), 6).groups[0]
    assert (d.error_code, d.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    cd = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g", "classic", "nope"]), 0).groups
    assert [x.error_code for x in cd] == [E.NONE, E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND]
    assert (cd[0].group_epoch, cd[0].assignor_name, cd[0].members[0].member_id) == (1, "uniform", "a")
    assert cd[0].members[0].assignment.topic_partitions[0].topic_name == "T"


def test_consumer_group_describe_v1_adds_the_member_type_and_v0_drops_it() -> None:
    """ConsumerGroupDescribe v1 (KIP-1099): MemberType, an int8 after TargetAssignment, 1 for a consumer-protocol
    member; v0 carries the same member without it (the field is ignorable), and is what librdkafka asks."""
    h = ConsumerHarness()
    h.join("a")
    req = wire.ConsumerGroupDescribeRequest(group_ids=["g"])
    v0, v1 = h.c.handle(req, 0), h.c.handle(req, 1)
    assert [m.member_type for m in v1.groups[0].members] == [1]
    one = wire.ConsumerGroupDescribeResponse(groups=[wire.ConsumerGroupDescribeResponseDescribedGroup(
        group_id="g", members=v1.groups[0].members)])
    b0, b1 = (wire.encode_response(69, v, 7, one)[4:] for v in (0, 1))
    # after the member: its tagged fields (1), the group's AuthorizedOperations (4) and tags (1), the response's (1)
    k = len(b0) - 7
    assert b1 == b0[:k] + b"\x01" + b0[k:], "one int8 (1) right after TargetAssignment"
    r0 = wire.decode_response(69, 0, wire.encode_response(69, 0, 7, v0)[4:])[1]
    r1 = wire.decode_response(69, 1, wire.encode_response(69, 1, 7, v1)[4:])[1]
    assert r0.groups[0].members[0].member_type == -1 and r1.groups[0].members[0].member_type == 1
    assert r0.groups[0].members[0].assignment == r1.groups[0].members[0].assignment
    assert wire.API_VERSIONS[69] == (0, 1)


def test_empty_groups_are_replaced_by_the_other_type_and_keep_their_offsets() -> None:
    h = ConsumerHarness()
    assert commit(h, "", -1) == E.NONE  # an Empty classic group holding offsets
    assert h.c.groups["g"].GROUP_TYPE == "classic"
    assert h.join("a").error_code == E.NONE
    assert h.c.groups["g"].GROUP_TYPE == "consumer"
    h.hb("a", -1)
    join = h.c.handle(wire.JoinGroupRequest(
        group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
    assert not join.done and h.c.groups["g"].GROUP_TYPE == "classic"  # parked for the initial rebalance delay
    assert h.c.offsets.committed("g")[("T", 0)][0] == 7
    # A non-empty classic group is not converted (online migration is not there yet).
    assert h.join("b").error_code == E.GROUP_ID_NOT_FOUND
    r = h.restarted()
    assert r.groups["g"].GROUP_TYPE == "classic"


# ---- the whole group at random: never two owners, and convergence -------------------------------------------------

REBUILD_EVERY = 30  # steps between two comparisons of the live group with one rebuilt from its records


def random_group(seed: int, transcript: list | None = None, rebuild: bool = True,
                 interval: int = 0) -> tuple[ConsumerHarness, dict[str, dict]]:
    """150 random steps on one group: joins (some static), leaves and -2 bounces, everyone's session running out,
    partition growth, heartbeats with or without the owned list, lost responses followed by full requests; with an
assignment `interval`, also the clock moving on by parts of it (targets computed late, by the group's timer). After
    every step no partition has two holders and the per-topic subscriber counts are right; every REBUILD_EVERY
    steps (unless `rebuild` is False) the group rebuilt from the records written so far is the live one. Each
    response goes to `transcript`."""
    rng = random.Random(seed)
    h = ConsumerHarness({"T": rng.randint(1, 12), "U": rng.randint(1, 6)},
                        group_consumer_assignment_interval_ms=interval)
    if transcript is not None:
        hb = h.hb

        def recorded(*args, **kwargs) -> wire.ConsumerGroupHeartbeatResponse:
            r = hb(*args, **kwargs)
            transcript.append((r.error_code, r.error_message, r.member_id, r.member_epoch, r.heartbeat_interval_ms,
                               h.parts(r)))
            return r
        h.hb = recorded
    clients: dict[str, dict] = {}  # member id -> what the client believes: epoch, owned, iid, topics
    n = 0
    for step in range(150):
        if rebuild and step % REBUILD_EVERY == 0:
            check_rebuild(h.c, h.records, f"seed {seed}, before step {step}")
        op = rng.random()
        if op < 0.15 or not clients:
            n += 1
            mid, iid = f"m{n}", (f"i{n}" if rng.random() < 0.4 else None)
            topics = rng.choice([("T",), ("U",), ("T", "U")])
            r = h.join(mid, topics, iid=iid)
            if r.error_code == E.NONE:
                clients[mid] = {"epoch": r.member_epoch, "owned": h.parts(r), "iid": iid, "topics": topics}
        elif op < 0.22:
            mid = rng.choice(list(clients))
            st = clients.pop(mid)
            h.hb(mid, -2 if st["iid"] else -1, iid=st["iid"])
        elif op < 0.25:
            h.advance(SESSION)  # everyone silent: all fenced
            clients.clear()
        elif op < 0.28:
            h.c.topics.grow("T", h.c.topics.get("T").partitions + 1)
        elif interval and rng.random() < 0.15:  # (drawn only when batching: the unbatched seeds stay as they were)
            if rng.random() < 0.6:
                h.advance(rng.choice((interval // 4, interval // 2, interval)))
            else:  # a subscription change, most likely while a target is pending
                mid = rng.choice(list(clients))
                st = clients[mid]
                topics = rng.choice([("T",), ("U",), ("T", "U")])
                r = h.hb(mid, st["epoch"], topics=list(topics), owned=st["owned"])
                if r.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
                    clients.pop(mid)
                else:
                    assert r.error_code == E.NONE, r
                    st["epoch"], st["topics"] = r.member_epoch, topics
                    if r.assignment is not None:
                        st["owned"] = h.parts(r)
        else:
            mid = rng.choice(list(clients))
            st = clients[mid]
            lost = rng.random() < 0.1  # the response is lost: the client keeps its old view
            if st.get("full"):  # after a lost response a client sends a full request (librdkafka does)
                r = h.hb(mid, st["epoch"], owned=st["owned"] or {}, topics=list(st["topics"]), iid=st["iid"],
                         rebalance=REBALANCE)
            else:
                r = h.hb(mid, st["epoch"], owned=st["owned"] if rng.random() < 0.8 else None)
            st["full"] = lost
            if r.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
                clients.pop(mid)  # it would rejoin with epoch 0; here it just goes
            elif not lost:
                assert r.error_code == E.NONE, r
                st["epoch"] = r.member_epoch
                if r.assignment is not None:
                    st["owned"] = h.parts(r)
        if "g" in h.c.groups:
            owners(h.group())
            g = h.group()
            counted = Counter(t for m in g.members.values() for t in m.topic_names)
            assert dict(g.subscribers) == dict(counted), (dict(g.subscribers), dict(counted))
            # No client believes it owns a partition another client also believes it owns... once both have
            # acknowledged: what the coordinator hands out it has freed first.
    if rebuild:
        check_rebuild(h.c, h.records, f"seed {seed}, after the last step")
    return h, clients


@pytest.mark.parametrize("interval", [0, INTERVAL])
@pytest.mark.parametrize("seed", range(30))
def test_random_groups_never_assign_a_partition_twice_and_converge(seed: int, interval: int) -> None:
    """With the target computed at every change, and batched (KIP-1263): every invariant the step by step tests pin
    holds at every step, and the group converges once its members settle."""
    h, clients = random_group(seed, interval=interval)
    if clients:
        # Static members that left with -2 keep their partitions until their session runs out: let it run out,
        # with the others heartbeating meanwhile.
        for _ in range(4):
            h.advance(SESSION // 3)
            settle(h, clients, rounds=20)
        g = h.group()
        assert g.state_name == "Stable", g.state_name
        owner = owners(g)
        subscribed = {t for st in clients.values() for t in st["topics"]}
        total = sum(h.c.topics.get(t).partitions for t in subscribed)
        assert len(owner) == total
        believed = [p for st in clients.values() for ps in (st["owned"] or {}).items() for p in
                    [(ps[0], x) for x in ps[1]]]
        assert len(believed) == len(set(believed)) == total


def test_the_rebuild_check_names_each_field_the_records_hold_otherwise() -> None:
    """tests/snapshots.check_rebuild, which the random models run: a group rebuilt from records that say other
    than memory (here a member's previous epoch, rewritten in the store behind the group's back) fails the check,
    the message naming the field with both values."""
    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})  # a revokes 2 and 3: epoch 2, previous epoch 1
    assert check_rebuild(h.c, h.records) == 1
    key = R.consumer_current_assignment_key("g", "a")
    value = R.decode(key, h.records.data[key]).value
    assert value.previous_member_epoch == 1
    value.previous_member_epoch = 7
    h.records.put({key: R.consumer_current_assignment_value(value)})
    with pytest.raises(AssertionError, match=r"group 'g': members\.a\.previous_member_epoch: live 1, rebuilt 7$"):
        check_rebuild(h.c, h.records, "the test")


@pytest.mark.parametrize("interval", [0, INTERVAL])
@pytest.mark.parametrize("seed", range(12))
def test_the_hot_path_answers_as_the_full_path(seed: int, interval: int, monkeypatch) -> None:
    """quick_heartbeat (the router's first try: the stable answer, or one compiled step) changes nothing but the
    speed: the same random group run without it gives byte-identical responses and the same records."""
    from kcoord.groups.consumer import ConsumerGroup

    def records(h: ConsumerHarness) -> dict[bytes, bytes]:  # topic ids are random: named instead
        def named(b: bytes) -> bytes:
            for t in h.c.topics.by_name.values():
                b = b.replace(t.topic_id, t.name.encode().ljust(16, b"_"))
            return b
        return {named(k): named(v) for k, v in h.records.scan()}

    fast: list = []
    h_fast, _ = random_group(seed, fast, rebuild=False, interval=interval)  # (random_groups_... checks rebuilds)
    with monkeypatch.context() as m:
        m.setattr(ConsumerGroup, "quick_heartbeat", lambda self, req, client_id, client_host: None)
        slow: list = []
        h_slow, _ = random_group(seed, slow, interval=interval)
    assert len(fast) > 100 and fast == slow
    assert records(h_fast) == records(h_slow)


def test_a_heartbeat_from_another_client_id_or_with_the_instance_id_is_served_right() -> None:
    """The hot path takes a static member's heartbeat that repeats its own instance id; a new client id (the
    member's metadata changes) or another member's instance id is for the full path."""
    h = ConsumerHarness()
    assert h.join("a", iid="ia").error_code == E.NONE
    g = h.group()
    r = h.hb("a", 1, iid="ia", owned={"T": [0, 1, 2, 3]})
    assert (r.error_code, r.member_epoch) == (E.NONE, 1)
    req = wire.ConsumerGroupHeartbeatRequest(group_id="g", member_id="a", member_epoch=1)
    assert h.c.handle(req, 1, "renamed", "/127.0.0.1").error_code == E.NONE
    assert g.members["a"].client_id == "renamed"
    described = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
    assert [m.client_id for m in described.groups[0].members] == ["renamed"]
    assert h.join("b", iid="ib").error_code == E.NONE
    r = h.hb("a", 1, iid="ib")  # b's instance id from a: fenced, as the full path says
    assert r.error_code == E.FENCED_INSTANCE_ID


def test_store_check_and_serve_know_the_consumer_group_records(tmp_path) -> None:
    from kcoord.store import SqliteRecords, check_store

    h = ConsumerHarness()
    h.c.store = GroupStore(SqliteRecords(str(tmp_path)), h.clock.wall_ms)
    h.c.topics.on_change = h.c.store.write_topic
    h.c.topics.create("S", 3)
    h.join("a", ("S",), iid="ia")
    h.join("b", ("S",))
    h.c.store.commit()
    h.c.store.close()
    report = check_store(str(tmp_path))
    assert report.ok and (report.groups, report.members, report.topics) == (1, 2, 1), report
    c = Coordinator(h.config, h.clock, store=GroupStore(SqliteRecords(str(tmp_path)), h.clock.wall_ms))
    stats = c.load()
    assert (stats.groups, stats.members) == (1, 2)
    g = c.groups["g"]
    assert set(g.members) == {"a", "b"} and g.static == {"ia": "a"} and g.group_epoch == 2
    c.store.close()


def _rows(data, n_rows: int) -> list[list[int]]:
    from hypothesis import strategies as st

    return data.draw(st.lists(st.lists(st.integers(0, 50), max_size=6).map(sorted), min_size=n_rows,
                              max_size=n_rows))


def _csr(rows: list[list[int]]):
    import numpy as np

    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    return indptr, np.array([p for r in rows for p in r], dtype=np.int32)


def test_csr_take_and_csr_changed_agree_with_row_by_row() -> None:
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kcoord.groups.modern import csr_changed, csr_take

    @settings(max_examples=300, deadline=None)
    @given(st.data(), st.integers(0, 8), st.integers(0, 8))
    def check(data, n, k) -> None:
        rows = _rows(data, n)
        pick = data.draw(st.lists(st.integers(-1, n - 1) if n else st.just(-1), min_size=k, max_size=k))
        ip, flat = _csr(rows)
        tip, tflat = csr_take(ip, flat, np.array(pick, dtype=np.int64))
        assert [tflat[tip[i]:tip[i + 1]].tolist() for i in range(k)] == [rows[r] if r >= 0 else [] for r in pick]
        other = _rows(data, n)
        oip, oflat = _csr(other)
        assert csr_changed(ip, flat, oip, oflat).tolist() == [a != b for a, b in zip(rows, other, strict=True)]

    check()


# ---- regular-expression subscriptions (RE2, whole names) ----------------------------------------------------------

def test_regex_subscription_matches_whole_topic_names_with_re2_syntax() -> None:
    h = ConsumerHarness({"orders": 2, "orders-eu": 2, "x-orders": 1, "payments": 1})
    r = h.join("a", None, regex="orders.*")
    assert r.error_code == E.NONE and h.parts(r) == {"orders": [0, 1], "orders-eu": [0, 1]}
    assert h.parts(h.join("b", None, regex="ord", gid="g2")) == {}  # a prefix does not match the whole name
    r = h.join("c", ("payments",), regex="x-.*", gid="g3")  # names and regex together: the union
    assert h.parts(r) == {"payments": [0], "x-orders": [0]}
    cd = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g3"]), 0).groups[0].members[0]
    assert (cd.subscribed_topic_names, cd.subscribed_topic_regex) == (["payments"], "x-.*")


@pytest.mark.parametrize("pattern", ["(", "[a-", "(?<=x)y", "a{2,1}"])
def test_invalid_regex_is_invalid_regular_expression_and_nothing_changes(pattern) -> None:
    h = ConsumerHarness()
    h.join("a")
    r = h.join("b", None, regex=pattern)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION and pattern in r.error_message
    assert set(h.group().members) == {"a"} and h.group().group_epoch == 1
    assert h.hb("a", 1, regex=pattern).error_code == E.INVALID_REGULAR_EXPRESSION
    assert h.group().members["a"].regex is None


def test_empty_regex_means_no_regex_and_a_regex_can_be_dropped() -> None:
    h = ConsumerHarness({"T": 2, "U": 1})
    r = h.join("a", ("T",), regex="")
    assert h.parts(r) == {"T": [0, 1]} and h.group().members["a"].regex is None
    r = h.hb("a", 1, regex="U")
    assert h.group().group_epoch == 2 and r.member_epoch == 2 and h.parts(r) == {"T": [0, 1], "U": [0]}
    r = h.hb("a", 2, regex="", owned={"T": [0, 1], "U": [0]})
    m = h.group().members["a"]
    assert h.group().group_epoch == 3 and m.state == UNREVOKED_PARTITIONS and len(m.pending) == 1
    assert h.parts(r) == {"T": [0, 1]}  # U is revoked: the client still has it
    r = h.hb("a", 2, owned={"T": [0, 1]})
    assert (r.member_epoch, m.state, len(m.pending)) == (3, STABLE, 0)


def test_regex_picks_up_a_topic_created_later() -> None:
    h = ConsumerHarness({"T": 1})
    r = h.join("a", None, regex="events-.*")
    assert h.parts(r) == {}
    h.c.topics.create("events-1", 3)
    r = h.hb("a", 1)
    assert (r.member_epoch, h.parts(r)) == (2, {"events-1": [0, 1, 2]})
    h.c.topics.create("events-2", 1)
    h.c.topics.create("other", 1)
    r = h.hb("a", 2)
    assert (r.member_epoch, h.parts(r)) == (3, {"events-1": [0, 1, 2], "events-2": [0]})


def test_a_pathological_regex_is_linear_under_re2() -> None:
    h = ConsumerHarness({"a" * 249: 1, "b": 1})
    # Catastrophic for a backtracking engine (Python's re never returns on this); RE2 answers at once.
    r = h.join("a", None, regex="(a*)*b")
    assert r.error_code == E.NONE and h.parts(r) == {"b": [0]}


def test_regex_subscriptions_replay_after_restart() -> None:
    h = ConsumerHarness({"T": 2, "events-1": 2})
    h.join("a", None, regex="events-.*")
    c2 = h.restarted()
    m = c2.groups["g"].members["a"]
    assert m.regex == "events-.*" and m.topic_names == ("events-1",)
    h.c = c2
    c2.topics.create("events-2", 1)
    r = h.hb("a", 1)
    assert h.parts(r) == {"events-1": [0, 1], "events-2": [0]}


def test_records_that_give_a_partition_two_holders_are_refused_on_load() -> None:
    from kcoord import records as R
    from kcoord.store import StoreError

    h = ConsumerHarness()
    h.join("a")
    h.join("b")
    h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    h.hb("a", 1, owned={"T": [0, 1]})
    h.hb("b", 2)
    # Damage: b's current assignment also claims a's partitions (each record still decodes).
    key = R.consumer_current_assignment_key("g", "b")
    tid = h.tid("T")
    h.records.data[key] = R.consumer_current_assignment_value(wire.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=2, previous_member_epoch=1, state=0, partitions_pending_revocation=[],
        assigned_partitions=[wire.ConsumerGroupCurrentMemberAssignmentValueTopicPartitions(
            topic_id=tid, partitions=[0, 1, 2, 3])]))
    with pytest.raises(StoreError, match="'g' cannot be loaded"):
        h.restarted()


def test_static_replacement_keeps_the_topic_counts_and_regex_users() -> None:
    h = ConsumerHarness({"T": 2, "events-1": 1})
    h.join("a", ("T",), iid="ia", regex="events-.*")
    h.hb("a", -2, iid="ia")
    h.join("a2", ("T",), iid="ia", regex="events-.*")
    g = h.group()
    assert dict(g.subscribers) == {"T": 1, "events-1": 1} and dict(g.regex_users) == {"events-.*": 1}
    assert g.subscribed_topics() == {"T", "events-1"}
    h.hb("a2", 1, regex="")  # the regex goes: its cache entry too
    assert dict(g.regex_users) == {} and g.regexes == {} and dict(g.subscribers) == {"T": 1}
    assert h.hb("a2", -1).error_code == E.NONE
    assert dict(g.subscribers) == {} and dict(g.regex_users) == {}


def test_the_regex_cache_follows_its_users_under_many_distinct_patterns() -> None:
    h = ConsumerHarness({"T": 1})
    for i in range(50):
        assert h.join(f"m{i}", None, regex=f"t{i}-.*").error_code == E.NONE
    g = h.group()
    assert len(g.regexes) == len(g.regex_users) == 50
    for i in range(50):
        h.hb(f"m{i}", g.members[f"m{i}"].member_epoch and -1)
    assert g.regexes == {} and dict(g.regex_users) == {}


# ---- the compiled pieces of the hot path ----------------------------------------------------------------------------

@pytest.mark.parametrize("fields, shape", [
    ({}, 0),
    ({"instance_id": "i"}, wire.HEARTBEAT_HAS_INSTANCE_ID),
    ({"topic_partitions": []}, wire.HEARTBEAT_HAS_TOPIC_PARTITIONS),
    ({"instance_id": "i", "topic_partitions": []}, 3),
    ({"subscribed_topic_names": []}, wire.HEARTBEAT_CHANGES_MEMBER),
    ({"subscribed_topic_regex": ""}, wire.HEARTBEAT_CHANGES_MEMBER),
    ({"rebalance_timeout_ms": 0}, wire.HEARTBEAT_CHANGES_MEMBER),
    ({"rack_id": "r"}, wire.HEARTBEAT_CHANGES_MEMBER),
    ({"server_assignor": "range", "instance_id": "i"}, wire.HEARTBEAT_CHANGES_MEMBER),
])
def test_heartbeat_shape_names_what_the_request_carries(fields, shape) -> None:
    req = wire.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=3, **fields)
    assert wire.consumer_heartbeat_shape(req) == shape


def test_a_member_copy_keeps_its_state_and_drops_its_timers_and_cached_answer() -> None:
    h = ConsumerHarness()
    h.join("a", iid="ia")
    h.hb("a", 1)  # caches the quiet answer
    m = h.group().members["a"]
    assert m.quiet_response is not None and m.session_key >= 0
    c = m.copy_as("b")
    assert (c.member_id, c.instance_id, c.member_epoch, c.state, c.subscribed, c.client_id) == \
        ("b", "ia", m.member_epoch, m.state, m.subscribed, "client")
    assert c.assigned is m.assigned and c.topics is m.topics
    assert (c.session_key, c.rebalance_armed_epoch, c.quiet_response, c.quiet_epoch) == (-1, -1, None, -1)


def test_the_real_clock_is_monotonic_milliseconds() -> None:
    import time

    from kcoord.timers import Clock

    before = time.monotonic_ns() // 1_000_000
    now = Clock().now_ms()
    assert before <= now <= time.monotonic_ns() // 1_000_000


def test_topic_space_split_agrees_with_a_plain_loop() -> None:
    """split() (one bisection when the ids lie in one topic, a vectorized cut otherwise) against the obvious loop,
    over catalogues with empty topics and lists in one topic, across topics, at the edges."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kcoord.groups.consumer import TopicSpace

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.integers(0, 5), min_size=1, max_size=6), st.data())
    def check(counts, data) -> None:
        space = TopicSpace()
        from kcoord.topics import TopicCatalogue
        cat = TopicCatalogue()
        names = [f"t{i}" for i in range(len(counts))]
        for name, n in zip(names, counts, strict=True):
            cat.create(name, max(n, 1))
        space.refresh(cat, names)
        total = int(space.start[-1])
        ids = sorted(data.draw(st.sets(st.integers(0, total - 1), max_size=total)))
        got = space.split(np.array(ids, dtype=np.int32))
        want: list[tuple[int, list[int]]] = []
        for p in ids:
            t = max(i for i in range(len(space.counts)) if space.start[i] <= p)
            if not want or want[-1][0] != t:
                want.append((t, []))
            want[-1][1].append(p - int(space.start[t]))
        assert got == want

    check()


# ---- the batched target computation (KIP-1263, group.consumer.assignment.interval.ms) ---------------------------



def counted_computations(h: ConsumerHarness, monkeypatch) -> list[int]:
    """The group epochs each target computation was made for, in order (ConsumerGroup.compute_target wrapped)."""
    from kcoord.groups.consumer import ConsumerGroup
    seen: list[int] = []
    real = ConsumerGroup.compute_target

    def counting(self) -> None:
        seen.append(self.group_epoch)
        real(self)
    monkeypatch.setattr(ConsumerGroup, "compute_target", counting)
    return seen


def test_a_thousand_joins_within_one_interval_cause_one_target_computation(monkeypatch) -> None:
    h = ConsumerHarness({"T": 1_000}, group_consumer_assignment_interval_ms=INTERVAL)
    seen = counted_computations(h, monkeypatch)
    h.join("first")  # a quiet group: computed at once, as before 4.3
    assert seen == [1]
    answers = {f"m{i}": h.join(f"m{i}") for i in range(1_000)}
    g = h.group()
    assert seen == [1] and g.group_epoch == 1_001 and g.state_name == "Assigning"
    # meanwhile each new member is at the last target's epoch, with nothing: that target does not name it
    assert {(r.error_code, r.member_epoch, str(h.parts(r))) for r in answers.values()} == {(E.NONE, 1, "{}")}
    h.advance(INTERVAL - 1)
    assert seen == [1]
    h.advance(1)  # the interval since the first join's computation is over: the timer computes, once
    assert seen == [1, 1_001] and g.assignment_epoch == 1_001
    sizes = Counter(g.target.get(m).shape[0] for m in g.members)
    assert sizes == {1: 1_000, 0: 1}  # 1,001 members over 1,000 partitions


def test_with_the_interval_zero_every_change_computes(monkeypatch) -> None:
    h = ConsumerHarness({"T": 10}, group_consumer_assignment_interval_ms=0)
    seen = counted_computations(h, monkeypatch)
    for i in range(5):
        h.join(f"m{i}")
    assert seen == [1, 2, 3, 4, 5]


def test_a_pending_computation_leaves_the_previous_target_in_force_then_revokes_before_assigning() -> None:
    """The worked example with batching: B joins within A's interval and gets nothing yet, A keeps all four
    (nothing is revoked for a target not yet computed); at the interval's end A revokes T2-3 and only then B
    gets them."""
    h = ConsumerHarness(group_consumer_assignment_interval_ms=INTERVAL)
    assert h.parts(h.join("a")) == {"T": [0, 1, 2, 3]}
    g = h.group()
    rb = h.join("b")
    assert (rb.error_code, rb.member_epoch, h.parts(rb)) == (E.NONE, 1, {})
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (2, 1, "Assigning")
    ra = h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    assert (ra.member_epoch, ra.assignment) == (1, None)
    assert h.hb("b", 1, owned={}).assignment is None
    h.advance(INTERVAL)
    assert g.assignment_epoch == 2 and g.state_name == "Reconciling"
    rb = h.hb("b", 1, owned={})
    assert (rb.member_epoch, h.parts(rb)) == (2, None)  # at the new epoch, its partitions still A's: withheld
    assert g.members["b"].state == UNRELEASED_PARTITIONS
    ra = h.hb("a", 1, owned={"T": [0, 1, 2, 3]})
    assert (ra.member_epoch, h.parts(ra)) == (1, {"T": [0, 1]})
    owners(g)
    ra = h.hb("a", 1, owned={"T": [0, 1]})
    assert ra.member_epoch == 2
    rb = h.hb("b", 2)
    assert (rb.member_epoch, h.parts(rb)) == (2, {"T": [2, 3]})
    assert g.state_name == "Stable"
    owners(g)


def test_the_timer_computes_and_writes_the_target_without_any_heartbeat() -> None:
    h = ConsumerHarness(group_consumer_assignment_interval_ms=INTERVAL)
    h.join("a")
    h.join("b")
    g = h.group()
    before = dict(h.records.scan())
    assert R.consumer_target_member_key("g", "b") not in before
    h.advance(INTERVAL)
    h.c.store.commit()
    assert g.assignment_epoch == g.group_epoch == 2
    restarted = h.restarted().groups["g"]  # what the timer computed is in the records
    assert restarted.assignment_epoch == 2 and restarted.target["b"].tolist() == g.target["b"].tolist() != []


def test_a_restart_while_a_computation_is_pending_computes_at_the_next_heartbeat() -> None:
    h = ConsumerHarness(group_consumer_assignment_interval_ms=INTERVAL)
    h.join("a")
    h.join("b")
    c = h.restart()
    g = c.groups["g"]
    assert (g.group_epoch, g.assignment_epoch) == (2, 1)
    r = h.hb("b", 1, owned={})
    assert g.assignment_epoch == 2 and r.member_epoch == 2  # no interval owed to a computation made before the restart


def test_a_leave_during_a_pending_computation_is_in_the_target_when_it_comes() -> None:
    h = ConsumerHarness({"T": 6}, group_consumer_assignment_interval_ms=INTERVAL)
    h.join("a")
    h.join("b")
    h.join("c")
    assert h.hb("b", -1).member_epoch == -1
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch) == (4, 1)
    h.advance(INTERVAL)
    assert sorted(g.target) == ["a", "c"] and g.target["c"].shape[0] == 3


def test_a_classic_member_is_not_sent_back_to_join_while_the_target_is_pending() -> None:
    """A classic member at the current target's epoch has nothing to collect: its heartbeat answers NONE while the
    computation is pending, and REBALANCE_IN_PROGRESS once the new target is out (it rejoins to collect it)."""
    from ..support.harness import MigrationHarness
    h = MigrationHarness(partitions=4, group_consumer_assignment_interval_ms=INTERVAL)
    r = h.chb("c1", 0, join=True)
    assert r.error_code == E.NONE and h.parts(r) == [0, 1, 2, 3]
    j = h.cjoin(h.cjoin("").response.member_id).response
    assert j.error_code == E.NONE
    g = h.c.groups["g"]
    gen = j.generation_id
    assert gen == g.assignment_epoch < g.group_epoch
    assert h.heartbeat(j.member_id, gen) == E.NONE
    assert h.csync(j.member_id, gen).response.error_code == E.NONE
    h.advance(INTERVAL)
    assert h.heartbeat(j.member_id, gen) == E.REBALANCE_IN_PROGRESS


def test_the_assignment_timer_goes_with_its_group(monkeypatch) -> None:
    h = ConsumerHarness(group_consumer_assignment_interval_ms=INTERVAL)
    seen = counted_computations(h, monkeypatch)
    h.join("a")
    h.join("b")
    g = h.group()
    assert g.group_timers.is_armed("assign")
    g.unload()  # as a deletion, a conversion to a classic group or a cluster node giving the group up do
    h.advance(INTERVAL)
    assert seen == [1] and not g.group_timers.keys


@pytest.mark.parametrize("seed", range(10))
def test_target_records_made_at_once_are_the_general_encoders_bytes(seed: int) -> None:
    """ConsumerGroup.target_member_records (a computed target's records without a message object each) writes, for
    random targets over one topic, several, none, with member ids of any length and script, exactly what
    stage_target_member writes."""
    import numpy as np

    rng = random.Random(seed)
    h = ConsumerHarness({"T": rng.randint(1, 300), "U": rng.randint(1, 5), "V": 200})
    h.join("seed", ("T", "U", "V"))
    g = h.group()
    total = int(g.space.start[-1])
    ids, rows = [], []
    for i in range(rng.randint(1, 40)):
        ids.append(rng.choice(["m", "é-ü", "成员", "x" * rng.randint(1, 300)]) + str(i))
        rows.append(sorted(rng.sample(range(total), rng.randint(0, min(total, 150)))))
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    flat = np.array([p for r in rows for p in r], dtype=np.int32)
    made = list(g.target_member_records(ids, indptr, flat))
    staged: dict[bytes, bytes | None] = {}

    class Sink:
        persistent = True

        def stage(self, key: bytes, value: bytes | None) -> None:
            staged[key] = value
    g.store = Sink()
    for mid, r in zip(ids, rows):
        g.stage_target_member(mid, np.array(r, dtype=np.int32))
    assert made == list(staged.items())


def test_a_subscription_change_while_a_target_is_pending_revokes_the_topic_dropped_at_once() -> None:
    """a holds T and U; b joins (the target is pending); a drops U within the interval: a is told to revoke U at
    once (the previous target still names U for it: Kafka's CurrentAssignmentBuilder revokes what the member no
    longer subscribes to); nobody gets U's partitions before a has let them go, and once the target comes everyone
    settles with a on T only and every partition held once."""
    h = ConsumerHarness({"T": 2, "U": 2}, group_consumer_assignment_interval_ms=INTERVAL)
    assert h.parts(h.join("a", ("T", "U"))) == {"T": [0, 1], "U": [0, 1]}
    g = h.group()
    h.join("b", ("T", "U"))
    r = h.hb("a", 1, topics=["T"], owned={"T": [0, 1], "U": [0, 1]})
    assert (r.error_code, h.parts(r)) == (E.NONE, {"T": [0, 1]})  # U revoked at once
    assert g.assignment_epoch == 1 < g.group_epoch
    owners(g)
    h.advance(INTERVAL)
    clients = {"a": {"epoch": r.member_epoch, "owned": {"T": [0, 1]}, "iid": None, "topics": ("T",)},
               "b": {"epoch": 1, "owned": {}, "iid": None, "topics": ("T", "U")}}
    settle(h, clients)
    assert g.state_name == "Stable" and set(clients["a"]["owned"]) <= {"T"}
    held = [(t, p) for st in clients.values() for t, ps in (st["owned"] or {}).items() for p in ps]
    assert sorted(held) == [("T", 0), ("T", 1), ("U", 0), ("U", 1)]
    owners(g)
