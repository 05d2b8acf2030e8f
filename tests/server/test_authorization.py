"""Authorization of the group APIs on the wire (issue 32), as Kafka's KafkaApis checks each one
(../shared/reference/kafka-security.md §6): an in-process server with StandardAuthorizer configured, users
authenticated with SCRAM on a SASL listener, ACLs made through Kafka's ACL APIs by a super user."""

from __future__ import annotations

import logging
import socket
import struct

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig

from ..support.authorized import STANDARD_AUTHORIZER, AuthorizedServer
from ..support.servers import ThreadServer, free_port, recv_exact

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


def _any_filter():
    return wire.DeleteAclsRequestDeleteAclsFilter(resource_type_filter=1, resource_name_filter=None,
                                                  pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                  operation=1, permission_type=1)


__all__ = ["commit", "joined", "listed", "logging", "socket", "struct", "recv_exact", "ThreadServer", "free_port",
           "INT32_MIN", "OTHER", "TOPIC"]
