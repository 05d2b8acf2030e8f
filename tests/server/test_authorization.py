"""Authorization of the group APIs on the wire (issue 32), as Kafka's KafkaApis checks each one
(../shared/reference/kafka-security.md §6): an in-process server with StandardAuthorizer configured, users
authenticated with SCRAM on a SASL listener, ACLs made through Kafka's ACL APIs by a super user."""

from __future__ import annotations

import logging
import socket

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig
from kcoord.security.authorizer import GROUP, READ, Authorizer

from ..support.authorized import STANDARD_AUTHORIZER, AuthorizedServer

TOPIC, OTHER = "orders", "payments"
INT32_MIN = -(2**31)


@pytest.fixture(scope="module")
def srv():
    s = AuthorizedServer(topics=[f"{TOPIC}:3", f"{OTHER}:2"], group=_quick_groups())
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_acls(request):
    """Each test starts from no ACL at all on the module's server."""
    if "srv" in request.fixturenames:
        request.getfixturevalue("srv").revoke_all()
    yield


def _quick_groups():
    from kcoord.config import GroupConfig
    return GroupConfig(group_initial_rebalance_delay_ms=0)


def join(c: Client, group: str, member_id: str = "", version: int = 7, instance: str | None = None):
    return c.call(11, version, wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))


def joined(c: Client, group: str, instance: str | None = None):
    """A member of a one-member group, through to its SyncGroup: (member id, generation)."""
    r = join(c, group, instance=instance)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = join(c, group, r.member_id, instance=instance)
    assert r.error_code == E.NONE, r
    s = c.call(14, 5, wire.SyncGroupRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                                            group_instance_id=instance, protocol_type="consumer",
                                            protocol_name="range", assignments=[
                                                wire.SyncGroupRequestAssignment(member_id=r.member_id,
                                                                                assignment=b"")]))
    assert s.error_code == E.NONE, s
    return r.member_id, r.generation_id


def listed(c: Client) -> set[str]:
    return {g.group_id for g in c.call(16, 4, wire.ListGroupsRequest(states_filter=[])).groups}


def commit(c: Client, group: str, topics: dict[str, list[int]], member_id: str = "", generation: int = -1,
           version: int = 8) -> dict[tuple[str, int], int]:
    r = c.call(8, version, wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
            wire.OffsetCommitRequestTopic(name=t, partitions=[wire.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=10 + p, committed_metadata="") for p in ps])
            for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


# ---- the settings -----------------------------------------------------------------------------------------------

def test_without_authorizer_class_name_nothing_is_checked_and_the_acl_apis_answer_security_disabled() -> None:
    s = AuthorizedServer(users=("alice",), authorizer_class_name="", super_users="")
    try:
        with s.user("alice") as c:
            assert joined(c, "anyone-may")[0]
            r = c.call(29, 3, wire.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                       pattern_type_filter=1, principal_filter=None,
                                                       host_filter=None, operation=1, permission_type=1))
            assert (r.error_code, r.error_message, r.resources) == (
                E.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
            r = c.call(30, 3, wire.CreateAclsRequest(creations=[wire.CreateAclsRequestAclCreation(
                resource_type=3, resource_name="g", resource_pattern_type=3, principal="User:alice", host="*",
                operation=3, permission_type=3)]))
            assert [(x.error_code, x.error_message) for x in r.results] == [
                (E.SECURITY_DISABLED, "No Authorizer is configured.")]
            r = c.call(31, 3, wire.DeleteAclsRequest(filters=[_any_filter()]))
            assert [(x.error_code, x.error_message) for x in r.filter_results] == [
                (E.SECURITY_DISABLED, "No Authorizer is configured.")]
    finally:
        s.close()


def test_authorizer_class_name_takes_kafkas_authorizers_only() -> None:
    for name in (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"):
        assert ServerConfig(authorizer_class_name=name).authorizing
    with pytest.raises(ValueError, match="authorizer.class.name: kcoord serves Kafka's StandardAuthorizer"):
        ServerConfig(authorizer_class_name="com.example.MyAuthorizer")
    assert not ServerConfig().authorizing


def test_a_super_user_is_allowed_what_no_acl_grants(srv) -> None:
    srv.deny("GROUP", "*", "ALL", "User:*")  # a deny for everyone stops everyone but a super user
    with srv.user("alice") as c:
        assert join(c, "su-group").error_code == E.GROUP_AUTHORIZATION_FAILED
    with srv.admin() as c:  # User:ANONYMOUS is super.users on this server
        assert joined(c, "su-group")[0]
    with pytest.raises(ValueError, match="super.users: expected a string in format principalType:principalName"):
        ServerConfig(super_users="User:admin;bob")


def test_allow_everyone_if_no_acl_found_admits_only_to_resources_without_acls() -> None:
    s = AuthorizedServer(users=("alice", "bob"), allow_everyone_if_no_acl_found=True, group=_quick_groups())
    try:
        with s.user("bob") as c:
            assert joined(c, "no-acls-here")[0]  # no ACL covers the group: everyone may
        s.grant("GROUP", "guarded", "READ", "alice")
        with s.user("bob") as c:
            assert join(c, "guarded").error_code == E.GROUP_AUTHORIZATION_FAILED  # it has an ACL: bob is not in it
        with s.user("alice") as c:
            assert joined(c, "guarded")[0]
    finally:
        s.close()


# ---- the classic group APIs: GROUP READ ---------------------------------------------------------------------------

def test_a_join_without_read_is_refused_in_kafkas_shape_and_makes_no_group(srv) -> None:
    with srv.user("alice") as c:
        for version in (5, 7):
            r = join(c, "no-read", version=version)
            assert (r.error_code, r.generation_id, r.protocol_name, r.leader, r.member_id, r.members) == (
                E.GROUP_AUTHORIZATION_FAILED, -1, None if version >= 7 else "", "", "", [])
    with srv.admin() as c:
        assert "no-read" not in listed(c)


def test_read_on_the_group_admits_and_taking_it_away_refuses_every_member_api(srv) -> None:
    srv.grant("GROUP", "revoked", "READ", "alice")
    with srv.user("alice") as c:
        member, generation = joined(c, "revoked")
        hb = wire.HeartbeatRequest(group_id="revoked", generation_id=generation, member_id=member)
        assert c.call(12, 4, hb).error_code == E.NONE
        srv.revoke_all()
        assert c.call(12, 4, hb).error_code == E.GROUP_AUTHORIZATION_FAILED
        s = c.call(14, 5, wire.SyncGroupRequest(group_id="revoked", generation_id=generation, member_id=member,
                                                protocol_type="consumer", protocol_name="range", assignments=[]))
        assert (s.error_code, s.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
        # v5+ without the protocol: INCONSISTENT_GROUP_PROTOCOL comes first, as in Kafka
        s = c.call(14, 5, wire.SyncGroupRequest(group_id="revoked", generation_id=generation, member_id=member,
                                                protocol_type=None, protocol_name=None, assignments=[]))
        assert s.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        leave = wire.LeaveGroupRequest(group_id="revoked", members=[wire.LeaveGroupRequestMemberIdentity(
            member_id=member, group_instance_id=None)])
        r = c.call(13, 4, leave)
        assert (r.error_code, r.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    with srv.admin() as c:  # the member is still there: nothing of the group was touched
        d = c.call(15, 5, wire.DescribeGroupsRequest(groups=["revoked"]))
        assert [m.member_id for m in d.groups[0].members] == [member]


def test_removing_static_members_by_instance_id_needs_read_on_the_group(srv) -> None:
    """Seed 004 (KIP-345): `kcoord remove-members` sends a LeaveGroup naming instance ids."""
    srv.grant("GROUP", "statics", "READ", "alice")
    with srv.user("alice") as c:
        member, _ = joined(c, "statics", instance="i-1")
    srv.revoke_all()
    leave = wire.LeaveGroupRequest(group_id="statics", members=[wire.LeaveGroupRequestMemberIdentity(
        member_id="", group_instance_id="i-1")])
    with srv.user("bob") as c:
        r = c.call(13, 4, leave)
        assert (r.error_code, r.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    srv.grant("GROUP", "statics", "READ", "bob")
    with srv.user("bob") as c:
        r = c.call(13, 4, leave)
        assert (r.error_code, [(m.group_instance_id, m.error_code) for m in r.members]) == (E.NONE, [("i-1", E.NONE)])


def test_find_coordinator_needs_describe_on_each_key(srv) -> None:
    srv.grant("GROUP", "seen", "DESCRIBE", "alice")
    with srv.user("alice") as c:
        r = c.call(10, 3, wire.FindCoordinatorRequest(key="hidden", key_type=0))
        assert (r.error_code, r.error_message, r.node_id, r.host, r.port) == (
            E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1)
        assert c.call(10, 3, wire.FindCoordinatorRequest(key="seen", key_type=0)).error_code == E.NONE
        r = c.call(10, 4, wire.FindCoordinatorRequest(key_type=0, coordinator_keys=["hidden", "seen"]))
        got = {x.key: (x.error_code, x.node_id, x.host, x.port) for x in r.coordinators}
        assert got["hidden"] == (E.GROUP_AUTHORIZATION_FAILED, -1, "", -1)
        assert got["seen"][0] == E.NONE and got["seen"][2] == "127.0.0.1"
        assert [x.key for x in r.coordinators] == ["seen", "hidden"]


# ---- offsets ------------------------------------------------------------------------------------------------------

def test_a_commit_needs_read_on_the_group_and_read_on_each_topic(srv) -> None:
    with srv.user("alice") as c:  # no ACL: every partition refused for the group
        assert commit(c, "commits", {TOPIC: [0, 1]}) == {(TOPIC, 0): 30, (TOPIC, 1): 30}
    srv.grant("GROUP", "commits", "READ", "alice")
    srv.grant("TOPIC", TOPIC, "READ", "alice")
    srv.grant("TOPIC", OTHER, "WRITE", "alice")  # WRITE (and the DESCRIBE it implies) is not enough
    with srv.user("alice") as c:
        assert commit(c, "commits", {OTHER: [0], TOPIC: [0, 2]}) == {(OTHER, 0): 29, (TOPIC, 0): 0, (TOPIC, 2): 0}
        assert commit(c, "commits", {OTHER: [1]}) == {(OTHER, 1): 29}
    with srv.admin() as c:
        assert fetched(c, "commits", None) == {(TOPIC, 0): 10, (TOPIC, 2): 12}  # only what was allowed


def test_a_v10_commit_by_topic_id_is_checked_by_the_topics_name(srv) -> None:
    srv.grant("GROUP", "by-id", "READ", "alice")
    srv.grant("TOPIC", TOPIC, "READ", "alice")
    ids = {t.name: t.topic_id for t in srv.server.topics.by_name.values()}
    with srv.user("alice") as c:
        r = c.call(8, 10, wire.OffsetCommitRequest(group_id="by-id", generation_id_or_member_epoch=-1, member_id="",
                                                   topics=[wire.OffsetCommitRequestTopic(
                                                       topic_id=ids[n], partitions=[wire.OffsetCommitRequestPartition(
                                                           partition_index=0, committed_offset=5,
                                                           committed_metadata="")]) for n in (TOPIC, OTHER)]))
        assert {bytes(t.topic_id): t.partitions[0].error_code for t in r.topics} == {ids[TOPIC]: 0, ids[OTHER]: 29}


def fetched(c: Client, group: str, topics: dict[str, list[int]] | None, version: int = 8):
    r = c.call(9, version, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
        group_id=group, topics=None if topics is None else [wire.OffsetFetchRequestTopics(
            name=t, partition_indexes=ps) for t, ps in topics.items()])], require_stable=False))
    g = r.groups[0]
    if g.error_code:
        return g.error_code
    return {(t.name, p.partition_index): p.committed_offset if p.error_code == 0 else ("error", p.error_code)
            for t in g.topics for p in t.partitions}


def test_an_offset_fetch_needs_describe_on_the_group_and_answers_only_describable_topics(srv) -> None:
    with srv.admin() as c:
        assert commit(c, "fetches", {TOPIC: [0], OTHER: [1]}) == {(TOPIC, 0): 0, (OTHER, 1): 0}
    with srv.user("alice") as c:
        assert fetched(c, "fetches", None) == E.GROUP_AUTHORIZATION_FAILED  # v8+: the group's error
        r = c.call(9, 7, wire.OffsetFetchRequest(group_id="fetches", topics=None, require_stable=False))
        assert (r.error_code, r.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])  # v2-7: the top-level error
        r = c.call(9, 1, wire.OffsetFetchRequest(group_id="fetches", topics=[wire.OffsetFetchRequestTopic(
            name=TOPIC, partition_indexes=[0, 1])]))
        assert [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [(0, 30), (1, 30)]
    srv.grant("GROUP", "fetches", "READ", "alice")  # READ implies the DESCRIBE a fetch needs
    with srv.user("alice") as c:
        assert fetched(c, "fetches", None) == {}  # every topic: those not describable are left out
        assert fetched(c, "fetches", {TOPIC: [0], OTHER: [1]}) == {(TOPIC, 0): ("error", 29),
                                                                   (OTHER, 1): ("error", 29)}
    srv.grant("TOPIC", TOPIC, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        assert fetched(c, "fetches", None) == {(TOPIC, 0): 10}
        r = c.call(9, 8, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
            group_id="fetches", topics=[wire.OffsetFetchRequestTopics(name=n, partition_indexes=[i])
                                        for n, i in ((OTHER, 1), (TOPIC, 0))])], require_stable=False))
        # the refused topic comes after the answered ones
        assert [(t.name, t.partitions[0].error_code) for t in r.groups[0].topics] == [(TOPIC, 0), (OTHER, 29)]
        r = c.call(9, 8, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id=g, topics=None)
                                                         for g in ("hidden-1", "fetches")], require_stable=False))
        assert [(g.group_id, g.error_code) for g in r.groups] == [("fetches", 0), ("hidden-1", 30)]


def test_an_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(srv) -> None:
    with srv.admin() as c:
        commit(c, "deletes", {TOPIC: [0], OTHER: [0]})
    srv.grant("GROUP", "deletes", "READ", "alice")
    req = wire.OffsetDeleteRequest(group_id="deletes", topics=[wire.OffsetDeleteRequestTopic(
        name=n, partitions=[wire.OffsetDeleteRequestPartition(partition_index=0)]) for n in (TOPIC, OTHER)])
    with srv.user("alice") as c:
        r = c.call(47, 0, req)
        assert (r.error_code, r.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    srv.grant("GROUP", "deletes", "DELETE", "alice")
    srv.grant("TOPIC", TOPIC, "READ", "alice")
    with srv.user("alice") as c:
        r = c.call(47, 0, req)
        assert (r.error_code, {t.name: t.partitions[0].error_code for t in r.topics}) == (E.NONE, {TOPIC: 0,
                                                                                                  OTHER: 29})
    with srv.admin() as c:
        assert fetched(c, "deletes", None) == {(OTHER, 0): 10}


# ---- describe, list, delete ---------------------------------------------------------------------------------------

def test_describe_groups_refuses_first_reveals_no_member_and_reports_authorized_operations(srv) -> None:
    srv.grant("GROUP", "open", "READ", "alice")
    with srv.user("alice") as c:
        joined(c, "open")
    with srv.admin() as c:
        joined(c, "closed")
    with srv.user("alice") as c:
        r = c.call(15, 5, wire.DescribeGroupsRequest(groups=["open", "closed"], include_authorized_operations=True))
        g = r.groups
        assert [(x.group_id, x.error_code) for x in g] == [("closed", 30), ("open", 0)]
        assert (g[0].members, g[0].group_state, g[0].protocol_type, g[0].authorized_operations) == ([], "", "",
                                                                                                    INT32_MIN)
        assert len(g[1].members) == 1
        assert g[1].authorized_operations == (1 << 3) | (1 << 8)  # READ and the DESCRIBE it implies: 264
        r = c.call(15, 5, wire.DescribeGroupsRequest(groups=["open"], include_authorized_operations=False))
        assert r.groups[0].authorized_operations == INT32_MIN


def test_list_groups_shows_every_group_with_cluster_describe_else_only_the_describable(srv) -> None:
    with srv.admin() as c:
        for g in ("team-a-1", "team-a-2", "team-b-1"):
            joined(c, g)
    with srv.user("alice") as c:
        assert listed(c) == set()  # no ACL: an empty answer, no error
    srv.grant("GROUP", "team-a-", "DESCRIBE", "alice", pattern="PREFIXED")
    with srv.user("alice") as c:
        assert listed(c) == {"team-a-1", "team-a-2"}
    srv.grant("CLUSTER", "kafka-cluster", "DESCRIBE", "alice")
    with srv.user("alice") as c:
        assert {"team-a-1", "team-a-2", "team-b-1"} <= listed(c)


def test_delete_groups_needs_delete_and_lists_the_refused_after_the_rest(srv) -> None:
    with srv.admin() as c:
        for g in ("del-mine", "del-theirs"):
            commit(c, g, {TOPIC: [0]})
    srv.grant("GROUP", "del-mine", "DELETE", "alice")
    srv.grant("GROUP", "del-theirs", "READ", "alice")
    with srv.user("alice") as c:
        r = c.call(42, 2, wire.DeleteGroupsRequest(groups_names=["del-theirs", "del-mine", "del-theirs"]))
        assert [(x.group_id, x.error_code) for x in r.results] == [("del-mine", 0), ("del-theirs", 30)]
    with srv.admin() as c:
        assert "del-mine" not in listed(c) and "del-theirs" in listed(c)
        commit(c, "del-twice", {TOPIC: [0]})
        r = c.call(42, 2, wire.DeleteGroupsRequest(groups_names=["del-twice", "del-twice"]))
        assert [(x.group_id, x.error_code) for x in r.results] == [("del-twice", 0)]  # each name once, as Kafka


# ---- KIP-848 and connect groups -------------------------------------------------------------------------------------

def consumer_heartbeat(c: Client, group: str, topics: list[str]):
    return c.call(68, 1, wire.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="m-" + group, member_epoch=0, rebalance_timeout_ms=10_000,
        subscribed_topic_names=topics, server_assignor="uniform", topic_partitions=[]))


def test_a_consumer_group_heartbeat_needs_read_and_describe_on_every_subscribed_topic(srv) -> None:
    with srv.user("alice") as c:
        r = consumer_heartbeat(c, "kip848", [TOPIC])
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
    srv.grant("GROUP", "kip848", "READ", "alice")
    srv.grant("TOPIC", TOPIC, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        r = consumer_heartbeat(c, "kip848", [TOPIC, OTHER])
        assert r.error_code == E.TOPIC_AUTHORIZATION_FAILED  # one denied name refuses the whole heartbeat
    with srv.admin() as c:
        assert "kip848" not in listed(c)  # and no member (nor group) was made
    with srv.user("alice") as c:
        r = consumer_heartbeat(c, "kip848", [TOPIC])
        assert r.error_code == E.NONE and r.member_epoch > 0


def test_consumer_group_describe_hides_a_group_with_topics_the_caller_may_not_describe(srv) -> None:
    srv.grant("GROUP", "kip848-d", "READ", "alice")
    srv.grant("TOPIC", TOPIC, "DESCRIBE", "alice")
    with srv.user("alice") as c:
        assert consumer_heartbeat(c, "kip848-d", [TOPIC]).error_code == E.NONE
        assert consumer_heartbeat(c, "kip848-d", [TOPIC]).error_code == E.NONE  # the assignment reaches it
    srv.revoke_all()
    srv.grant("GROUP", "kip848-d", "DESCRIBE", "bob")
    with srv.user("bob") as c:
        r = c.call(69, 1, wire.ConsumerGroupDescribeRequest(group_ids=["kip848-d", "secret"],
                                                            include_authorized_operations=True))
        got = [(g.group_id, g.error_code, g.error_message, g.members) for g in r.groups]
        assert got == [("secret", 30, "Group authorization failed.", []),
                       ("kip848-d", 29, "The group has described topic(s) that the client is not authorized to "
                                        "describe.", [])]
    srv.grant("TOPIC", TOPIC, "DESCRIBE", "bob")
    with srv.user("bob") as c:
        g = c.call(69, 1, wire.ConsumerGroupDescribeRequest(group_ids=["kip848-d"],
                                                            include_authorized_operations=True)).groups[0]
        assert (g.error_code, len(g.members), g.authorized_operations) == (E.NONE, 1, 1 << 8)


def test_connect_group_apis_need_read_and_describe_on_the_group() -> None:
    s = AuthorizedServer(users=("alice",), group=_connect_groups())
    try:
        with s.user("alice") as c:
            r = c.call(1000, 0, wire.ConnectGroupHeartbeatRequest(group_id="workers", member_id="w1",
                                                                  member_epoch=0))
            assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
            r = c.call(1003, 0, wire.ConnectGroupDescribeRequest(group_ids=["workers"]))
            assert [(g.group_id, g.error_code, g.members) for g in r.groups] == [("workers", 30, [])]
    finally:
        s.close()


def _connect_groups():
    from kcoord.config import GroupConfig
    return GroupConfig.from_kafka({"group.coordinator.rebalance.protocols": "classic,consumer,connect"})


# ---- the ACL and SCRAM admin APIs -----------------------------------------------------------------------------------

def _describe_all():
    return wire.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                    principal_filter=None, host_filter=None, operation=1, permission_type=1)


def _creation(**kw):
    fields = dict(resource_type=3, resource_name="g", resource_pattern_type=3, principal="User:alice", host="*",
                  operation=3, permission_type=3)
    fields.update(kw)
    return wire.CreateAclsRequestAclCreation(**fields)


def test_the_acl_apis_need_cluster_alter_to_change_and_cluster_describe_to_read(srv) -> None:
    with srv.user("alice") as c:
        r = c.call(30, 3, wire.CreateAclsRequest(creations=[_creation(), _creation(resource_name="h")]))
        assert [x.error_code for x in r.results] == [31, 31]
        r = c.call(29, 3, _describe_all())
        assert (r.error_code, r.resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
        r = c.call(31, 3, wire.DeleteAclsRequest(filters=[_any_filter()]))
        assert [(x.error_code, x.matching_acls) for x in r.filter_results] == [(31, [])]
        r = c.call(50, 0, wire.DescribeUserScramCredentialsRequest(users=None))
        assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and r.results == []
        r = c.call(51, 0, wire.AlterUserScramCredentialsRequest(deletions=[
            wire.AlterUserScramCredentialsRequestScramCredentialDeletion(name="bob", mechanism=1)], upsertions=[]))
        assert [(x.user, x.error_code) for x in r.results] == [("bob", 31)]
    assert srv.acls() == []
    srv.grant("CLUSTER", "kafka-cluster", "ALTER", "alice")  # ALTER implies the DESCRIBE a read needs
    with srv.user("alice") as c:
        r = c.call(30, 3, wire.CreateAclsRequest(creations=[_creation()]))
        assert [x.error_code for x in r.results] == [0]
        assert len(c.call(29, 3, _describe_all()).resources) == 2
    assert ("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW") in srv.acls()


def test_create_acls_validates_each_creation_and_applies_the_rest(srv) -> None:
    with srv.admin() as c:
        r = c.call(30, 3, wire.CreateAclsRequest(creations=[
            _creation(resource_name="a"), _creation(resource_pattern_type=2), _creation(resource_type=4),
            _creation(principal="alice"), _creation(resource_name=""), _creation(resource_name="b", operation=1),
            _creation(resource_name="a")]))
        assert [(x.error_code, x.error_message) for x in r.results] == [
            (0, None), (42, "Invalid patternType MATCH"),
            (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (42, "Invalid principal 'alice': expected principalType:principalName"),
            (42, "Invalid empty resource name"), (42, "Invalid operation ANY"),
            (0, None)]  # an ACL that exists already: a silent success
    assert srv.acls() == [("GROUP", "a", "LITERAL", "User:alice", "*", "READ", "ALLOW")]


def test_an_acl_request_holding_an_unknown_enum_closes_the_connection_unanswered(srv) -> None:
    for key, body in ((30, wire.CreateAclsRequest(creations=[_creation(operation=0)])),
                      (30, wire.CreateAclsRequest(creations=[_creation(permission_type=9)])),
                      (29, wire.DescribeAclsRequest(resource_type_filter=0, resource_name_filter=None,
                                                    pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                    operation=1, permission_type=1)),
                      (31, wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
                          resource_type_filter=1, resource_name_filter=None, pattern_type_filter=0,
                          principal_filter=None, host_filter=None, operation=1, permission_type=1)]))):
        with socket.create_connection(("127.0.0.1", int(srv.bootstrap.rsplit(":", 1)[1])), timeout=10) as s:
            s.sendall(wire.encode_request(key, 3, 7, "t", body))
            assert s.recv(1) == b""
    assert srv.acls() == []
    with srv.admin() as c:  # and the server goes on serving
        assert c.call(29, 3, _describe_all()).error_code == E.NONE


def test_delete_acls_is_atomic_and_removes_each_match_once(srv) -> None:
    srv.grant("GROUP", "x", "READ", "alice")
    srv.grant("GROUP", "pre-", "READ", "bob", pattern="PREFIXED")
    exact = wire.DeleteAclsRequestDeleteAclsFilter(resource_type_filter=3, resource_name_filter="x",
                                                   pattern_type_filter=3, principal_filter="User:alice",
                                                   host_filter="*", operation=3, permission_type=3)
    match = wire.DeleteAclsRequestDeleteAclsFilter(resource_type_filter=3, resource_name_filter="pre-fix",
                                                   pattern_type_filter=2, principal_filter=None, host_filter=None,
                                                   operation=1, permission_type=1)
    nothing = wire.DeleteAclsRequestDeleteAclsFilter(resource_type_filter=2, resource_name_filter=None,
                                                     pattern_type_filter=1, principal_filter=None,
                                                     host_filter=None, operation=1, permission_type=1)
    with srv.admin() as c:
        r = c.call(31, 3, wire.DeleteAclsRequest(filters=[_any_filter(), exact, match, nothing]))
    got = [sorted((m.resource_name, m.principal) for m in f.matching_acls) for f in r.filter_results]
    assert got == [[("pre-", "User:bob"), ("x", "User:alice")], [("x", "User:alice")], [("pre-", "User:bob")], []]
    assert all(f.error_code == 0 for f in r.filter_results)
    assert srv.acls() == []


# ---- audit ----------------------------------------------------------------------------------------------------------

def test_every_refusal_is_a_json_log_event_and_counted(srv, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kcoord.authorizer")
    gates = srv.server.gates
    before = dict(gates.denials)
    with srv.user("eve") as c:
        assert join(c, "audited").error_code == E.GROUP_AUTHORIZATION_FAILED
        assert commit(c, "audited", {TOPIC: [0]}) == {(TOPIC, 0): 30}
        listed(c)  # a silent filter: neither logged nor counted
    events = [r.kcoord for r in caplog.records if getattr(r, "kcoord", {}).get("event") == "authorization-denied"]
    assert [(e["principal"], e["operation"], e["resource_type"], e["resource_name"], e["api"]) for e in events] == [
        ("User:eve", "READ", "GROUP", "audited", "JoinGroup"), ("User:eve", "READ", "GROUP", "audited",
                                                                 "OffsetCommit")]
    assert all(e["host"] == "127.0.0.1" for e in events)
    grew = {k: v - before.get(k, 0) for k, v in gates.denials.items() if v != before.get(k, 0)}
    assert grew == {("JoinGroup", "READ", "GROUP"): 1, ("OffsetCommit", "READ", "GROUP"): 1}


def test_a_client_refused_in_a_loop_is_logged_in_full_up_to_the_limit_then_counted_in_one_line(caplog) -> None:
    from kcoord.security import gates as G

    gates = G.Gates(Authorizer(), topics=None)
    now = [100.0]
    gates.clock = lambda: now[0]
    caplog.set_level(logging.INFO, logger="kcoord.authorizer")
    for i in range(G.LOGGED_PER_SECOND + 250):
        gates.deny("JoinGroup", "User:eve", "10.0.0.9", READ, GROUP, f"g{i % 2}")
    assert sum(getattr(r, "kcoord", {}).get("event") == "authorization-denied" for r in caplog.records) == \
        G.LOGGED_PER_SECOND
    assert not any(getattr(r, "kcoord", {}).get("event") == "authorization-denied-summary" for r in caplog.records)
    now[0] += 1.0  # the next second's first refusal brings the summary of the last, and is logged itself
    gates.deny("Heartbeat", "User:eve", "10.0.0.9", READ, GROUP, "g0")
    summary = [r.kcoord for r in caplog.records if getattr(r, "kcoord", {}).get("event") ==
               "authorization-denied-summary"]
    assert len(summary) == 1 and summary[0]["count"] == 250
    assert sorted((d["resource_name"], d["count"]) for d in summary[0]["denials"]) == [("g0", 125), ("g1", 125)]
    assert caplog.records[-1].kcoord["api"] == "Heartbeat"
    assert gates.denials == {("JoinGroup", "READ", "GROUP"): G.LOGGED_PER_SECOND + 250,
                             ("Heartbeat", "READ", "GROUP"): 1}


# ---- durable, and seen by the metrics ----------------------------------------------------------------------------

def test_acls_survive_a_restart_and_a_deleted_one_stays_deleted(tmp_path) -> None:
    from kcoord.store import SqliteRecords

    data = str(tmp_path / "data")
    s = AuthorizedServer(users=("alice",), records=SqliteRecords(data), group=_quick_groups())
    try:
        s.grant("GROUP", "kept", "READ", "alice")
        s.grant("GROUP", "team-", "READ", "alice", pattern="PREFIXED")
        s.deny("TOPIC", "*", "WRITE", "User:*")
        with s.admin() as c:
            r = c.call(31, 3, wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
                resource_type_filter=3, resource_name_filter="team-", pattern_type_filter=4,
                principal_filter=None, host_filter=None, operation=1, permission_type=1)]))
            assert len(r.filter_results[0].matching_acls) == 1
        before = s.acls()
    finally:
        s.close()
    s = AuthorizedServer(users=(), records=SqliteRecords(data), group=_quick_groups())
    try:
        assert s.acls() == before == [("GROUP", "kept", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                                      ("TOPIC", "*", "LITERAL", "User:*", "*", "WRITE", "DENY")]
        assert s.server.loaded.acls == 2
        with s.user("alice") as c:  # alice's credential was kept too, and her ACL applies at once
            assert joined(c, "kept")[0]
            assert join(c, "team-x").error_code == E.GROUP_AUTHORIZATION_FAILED
    finally:
        s.close()


def test_the_metrics_count_refusals_and_acls() -> None:
    from ..support.metrics import scrape, value
    from ..support.servers import free_port

    port = free_port()
    s = AuthorizedServer(users=("eve",), metrics_port=port)
    try:
        s.grant("GROUP", "x", "READ", "alice")
        with s.user("eve") as c:
            for _ in range(3):
                assert join(c, "x").error_code == E.GROUP_AUTHORIZATION_FAILED
        samples = scrape(port)
        assert value(samples, "kcoord_authorization_denials_total", api="JoinGroup", operation="READ",
                     resource_type="GROUP") == 3
        assert value(samples, "kcoord_acls") == 1
    finally:
        s.close()


def _any_filter():
    return wire.DeleteAclsRequestDeleteAclsFilter(resource_type_filter=1, resource_name_filter=None,
                                                  pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                  operation=1, permission_type=1)


