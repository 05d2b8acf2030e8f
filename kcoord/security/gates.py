"""Authorization of every served API, as Kafka's KafkaApis (and AuthHelper) check each one before handling it.

`Gates.wrap(handlers)` returns the server's handlers with each API's check in front: a request the principal may
not make at all is answered with the API's own error response (GROUP_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED, as Kafka shapes it), and nothing of the group is
touched; a request that is partly allowed (some topics of an OffsetCommit, some groups of a DescribeGroups) is
handed on with only its allowed part, and the refused part is put back into the answer where Kafka puts it.
Nothing is revealed of what the caller may not describe (no members, no offsets, no topic's existence).

The principal is the connection's (`events.REQUEST_PRINCIPAL`, set by the server around each request;
`User:ANONYMOUS` on a PLAINTEXT or SSL listener without a client certificate) and the host its peer's address.
Decisions are cached by the Authorizer. Every refusal that makes an error is logged as one JSON event
(`authorization-denied`: principal, host, operation, resource, API), up to LOGGED_PER_SECOND a second and then in
one summary line a second (`authorization-denied-summary`, each kind with its count), and counted (`denials`, by
API, operation and resource type, for the metrics); what Kafka filters silently (ListGroups and Metadata listing only what the caller
may describe) is neither logged nor counted, as Kafka's `logIfDenied = false` checks are not.

With no authorizer configured the server does not wrap its handlers: nothing here runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .. import errors as E
from .. import wire
from ..reply import then
from .authorizer import (
    ALTER,
    CLUSTER,
    CLUSTER_NAME,
    DELETE,
    DESCRIBE,
    GROUP,
    OPERATION_NAMES,
    READ,
    RESOURCE_NAMES,
    TOPIC,
    Authorizer,
)
from .topic_gates import peer_address, principal, topic_table

log = logging.getLogger("kcoord.authorizer")

LOGGED_PER_SECOND = 100  # refusals logged one by one in a second; the rest in one summary line
SUMMARY_KINDS = 20  # kinds of refusal a summary names (its count covers them all)
TRANSACTIONAL_ID = 5
INT32_MIN = -(2**31)
NULL_ID = bytes(16)
GROUP_DENIED = "Group authorization failed."  # Errors.java's default messages
TOPIC_DENIED = "Topic authorization failed."
CLUSTER_DENIED = "Cluster authorization failed."
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
DESCRIBE_TOPICS_DENIED = "The group has described topic(s) that the client is not authorized to describe."

Handler = Callable[..., Any]


class Gates:
    def __init__(self, authorizer: Authorizer, topics) -> None:
        self.authorizer = authorizer
        self.topics = topics  # the catalogue: a topic's name by id (v10 commits, v12 Metadata, v13 Fetch)
        self.denials: dict[tuple[str, str, str], int] = {}  # (API, operation, resource type) -> refusals
        # The log: each refusal as one event, up to LOGGED_PER_SECOND a second; past that, counted by kind and
        # summarized in one line when the next second's first refusal comes (a client refused in a loop cannot
        # fill the log)
        self.clock: Callable[[], float] = time.monotonic
        self.window_ends = 0.0
        self.logged = 0
        self.unlogged: dict[tuple[str, str, str, str, str, str], int] = {}

    # ---- decisions ----------------------------------------------------------------------------------

    def allowed(self, api: str, op: int, rtype: int, name: str, host: str, audit: bool = True) -> bool:
        who = principal()
        if self.authorizer.authorize(who, host, op, rtype, name):
            return True
        if audit:
            self.deny(api, who, host, op, rtype, name)
        return False

    def may_read(self, who: str, client_host: str, group_id: str) -> bool:
        """Whether `who` may READ the group (unaudited: a refusal is then made, and audited, by the gate)."""
        return self.authorizer.authorize(who, peer_address(client_host), READ, GROUP, group_id)

    def deny(self, api: str, who: str, host: str, op: int, rtype: int, name: str) -> None:
        key = (api, OPERATION_NAMES[op], RESOURCE_NAMES[rtype])
        self.denials[key] = self.denials.get(key, 0) + 1
        now = self.clock()
        if now >= self.window_ends:  # a new second: what the last one did not log line by line, in one line
            self._summarize()
            self.window_ends, self.logged = now + 1.0, 0
        if self.logged >= LOGGED_PER_SECOND:
            held = (who, host, key[1], key[2], name, api)
            self.unlogged[held] = self.unlogged.get(held, 0) + 1
            return
        self.logged += 1
        log.info("denied %s %s on %s %r to %s from %s", api, key[1], key[2], name, who, host, extra={"kcoord": {
            "event": "authorization-denied", "principal": who, "host": host, "operation": key[1],
            "resource_type": key[2], "resource_name": name, "api": api}})

    def _summarize(self) -> None:
        """One line for the refusals past LOGGED_PER_SECOND in the last second, each kind with its count (the
        most frequent first, at most SUMMARY_KINDS of them named)."""
        if not self.unlogged:
            return
        kinds = sorted(self.unlogged.items(), key=lambda kv: -kv[1])
        total = sum(n for _, n in kinds)
        log.info("denied %d more requests in a second than are logged one by one: %s", total, "; ".join(
            f"{n} x {api} {op} on {rt} {name!r} to {who} from {host}"
            for (who, host, op, rt, name, api), n in kinds[:SUMMARY_KINDS]), extra={"kcoord": {
                "event": "authorization-denied-summary", "count": total, "kinds": len(kinds), "denials": [
                    {"principal": who, "host": host, "operation": op, "resource_type": rt, "resource_name": name,
                     "api": api, "count": n} for (who, host, op, rt, name, api), n in kinds[:SUMMARY_KINDS]]}})
        self.unlogged = {}

    def topic_names(self, api: str, op: int, names, host: str, audit: bool = True) -> set[str]:
        """The distinct names of `names` the principal may not `op` (checked once each)."""
        return {n for n in set(names) if not self.allowed(api, op, TOPIC, n, host, audit)}

    def cluster(self, api: str, op: int, host: str, audit: bool = True) -> bool:
        return self.allowed(api, op, CLUSTER, CLUSTER_NAME, host, audit)

    def name_of(self, topic_id: bytes) -> str | None:
        t = self.topics.by_id.get(bytes(topic_id))
        return None if t is None else t.name

    # ---- the table ------------------------------------------------------------------------------------

    def wrap(self, handlers: dict[int, Handler]) -> dict[int, Handler]:
        out = dict(handlers)
        for key, gate in self.table().items():
            if key in out:
                out[key] = self._bind(gate, out[key])
        return out

    @staticmethod
    def _bind(gate, handler: Handler) -> Handler:
        def checked(req, version, client_id="", client_host=""):
            return gate(handler, req, version, client_id, client_host)
        return checked

    def table(self) -> dict[int, Callable]:
        w = wire
        group_read = self._group_op(READ)
        return {**topic_table(self),  # the broker's topic APIs: kcoord.security.topic_gates
            w.FindCoordinatorRequest.API_KEY: self.find_coordinator,
            w.JoinGroupRequest.API_KEY: group_read("JoinGroup", _join_denied),
            w.SyncGroupRequest.API_KEY: self.sync_group,
            w.HeartbeatRequest.API_KEY: group_read("Heartbeat", lambda req, v: w.HeartbeatResponse(
                error_code=E.GROUP_AUTHORIZATION_FAILED)),
            w.LeaveGroupRequest.API_KEY: group_read("LeaveGroup", lambda req, v: w.LeaveGroupResponse(
                error_code=E.GROUP_AUTHORIZATION_FAILED, members=[])),
            w.OffsetCommitRequest.API_KEY: self.offset_commit,
            w.OffsetFetchRequest.API_KEY: self.offset_fetch,
            w.OffsetDeleteRequest.API_KEY: self.offset_delete,
            w.DescribeGroupsRequest.API_KEY: self.describe_groups,
            w.ListGroupsRequest.API_KEY: self.list_groups,
            w.DeleteGroupsRequest.API_KEY: self.delete_groups,
            w.ConsumerGroupHeartbeatRequest.API_KEY: self.consumer_group_heartbeat,
            w.ConsumerGroupDescribeRequest.API_KEY: self._describe_gate(
                "ConsumerGroupDescribe", w.ConsumerGroupDescribeResponse, w.ConsumerGroupDescribeResponseDescribedGroup,
                _assigned_topics),
            # kcoord's connect groups (no Kafka counterpart): READ for a member's calls, DESCRIBE to read
            w.ConnectGroupHeartbeatRequest.API_KEY: group_read("ConnectGroupHeartbeat", lambda req, v:
                                                               w.ConnectGroupHeartbeatResponse(
                                                                   error_code=E.GROUP_AUTHORIZATION_FAILED,
                                                                   error_message=GROUP_DENIED, member_epoch=-1)),
            w.ConnectGroupPrepareAssignmentRequest.API_KEY: group_read(
                "ConnectGroupPrepareAssignment", lambda req, v: w.ConnectGroupPrepareAssignmentResponse(
                    error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=GROUP_DENIED)),
            w.ConnectGroupInstallAssignmentRequest.API_KEY: group_read(
                "ConnectGroupInstallAssignment", lambda req, v: w.ConnectGroupInstallAssignmentResponse(
                    error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=GROUP_DENIED)),
            w.ConnectGroupDescribeRequest.API_KEY: self._describe_gate(
                "ConnectGroupDescribe", w.ConnectGroupDescribeResponse, w.ConnectGroupDescribeResponseDescribedGroup),
            # the ACL and SCRAM admin APIs: CLUSTER DESCRIBE to read, CLUSTER ALTER to change
            w.DescribeAclsRequest.API_KEY: self._cluster_op("DescribeAcls", DESCRIBE, lambda req, v:
                                                            w.DescribeAclsResponse(
                                                                error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                                                error_message=CLUSTER_DENIED, resources=[])),
            # (one answer object repeated: a request of a million creations costs the loop nothing more)
            w.CreateAclsRequest.API_KEY: self._cluster_op("CreateAcls", ALTER, lambda req, v: w.CreateAclsResponse(
                results=[w.CreateAclsResponseAclCreationResult(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                                               error_message=CLUSTER_DENIED)] * len(req.creations))),
            w.DeleteAclsRequest.API_KEY: self._cluster_op("DeleteAcls", ALTER, lambda req, v: w.DeleteAclsResponse(
                filter_results=[w.DeleteAclsResponseDeleteAclsFilterResult(
                    error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_DENIED,
                    matching_acls=[])] * len(req.filters))),
            w.DescribeUserScramCredentialsRequest.API_KEY: self._cluster_op(
                "DescribeUserScramCredentials", DESCRIBE, _describe_users_denied),
            w.AlterUserScramCredentialsRequest.API_KEY: self._cluster_op(
                "AlterUserScramCredentials", ALTER, _alter_users_denied),
        }

    def _group_op(self, op: int):
        def make(api: str, denied: Callable):
            def gate(handler, req, version, client_id, client_host):
                if self.allowed(api, op, GROUP, req.group_id, peer_address(client_host)):
                    return handler(req, version, client_id, client_host)
                return denied(req, version)
            return gate
        return make

    def _cluster_op(self, api: str, op: int, denied: Callable):
        def gate(handler, req, version, client_id, client_host):
            if self.cluster(api, op, peer_address(client_host)):
                return handler(req, version, client_id, client_host)
            return denied(req, version)
        return gate

    # ---- FindCoordinator: GROUP (or TRANSACTIONAL_ID) DESCRIBE on each key ----------------------------------

    def find_coordinator(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        rtype, code = ((TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) if req.key_type == 1
                       else (GROUP, E.GROUP_AUTHORIZATION_FAILED))
        if req.key_type not in (0, 1):  # share groups and the like: answered by the handler, which serves none
            return handler(req, version, client_id, client_host)
        message = GROUP_DENIED if rtype == GROUP else "Transactional Id authorization failed."
        if version <= 3:
            if self.allowed("FindCoordinator", DESCRIBE, rtype, req.key, host):
                return handler(req, version, client_id, client_host)
            return wire.FindCoordinatorResponse(error_code=code, error_message=message, node_id=-1, host="",
                                                port=-1)
        keys = req.coordinator_keys
        denied = [k for k in keys if not self.allowed("FindCoordinator", DESCRIBE, rtype, k, host)]
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = set(denied)
        req.coordinator_keys = [k for k in keys if k not in refused]

        def merge(resp):
            resp.coordinators = [*resp.coordinators, *(wire.FindCoordinatorResponseCoordinator(
                key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message) for k in denied)]
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- SyncGroup: the v5+ protocol check first, then GROUP READ --------------------------------------------

    def sync_group(self, handler, req, version, client_id, client_host):
        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return handler(req, version, client_id, client_host)  # the handler answers INCONSISTENT_GROUP_PROTOCOL
        if self.allowed("SyncGroup", READ, GROUP, req.group_id, peer_address(client_host)):
            return handler(req, version, client_id, client_host)
        return wire.SyncGroupResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, assignment=b"")

    # ---- OffsetCommit: GROUP READ, then TOPIC READ on each topic ----------------------------------------------

    def offset_commit(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        if not self.allowed("OffsetCommit", READ, GROUP, req.group_id, host):
            return _commit_answer(req, E.GROUP_AUTHORIZATION_FAILED)
        by_id = version >= 10
        names = [self.name_of(t.topic_id) if by_id else t.name for t in req.topics]
        denied = self.topic_names("OffsetCommit", READ, [n for n in names if n is not None], host)
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = [t for t, n in zip(req.topics, names) if n in denied]
        req.topics = [t for t, n in zip(req.topics, names) if n not in denied]  # (a large plan is made again)
        answer = _commit_topics(refused, E.TOPIC_AUTHORIZATION_FAILED)
        if not req.topics:
            return wire.OffsetCommitResponse(topics=answer)

        def merge(resp):
            resp.topics = [*answer, *resp.topics]
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- OffsetFetch: GROUP DESCRIBE on each group, then TOPIC DESCRIBE on each topic -------------------------

    def offset_fetch(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        if version <= 7:
            return self._offset_fetch_one(handler, req, version, client_id, client_host, host)
        refused_groups = []
        denied_topics: dict[str, list] = {}  # group id -> its requested topics refused
        ask_all: set[str] = set()  # groups asked for every topic: what comes back is filtered
        kept = []
        for g in req.groups:
            if not self.allowed("OffsetFetch", DESCRIBE, GROUP, g.group_id, host):
                refused_groups.append(g.group_id)
                continue
            kept.append(g)
            if g.topics is None:
                ask_all.add(g.group_id)
                continue
            names = [self.name_of(t.topic_id) if version >= 10 else t.name for t in g.topics]
            denied = self.topic_names("OffsetFetch", DESCRIBE, [n for n in names if n is not None], host)
            if denied:
                denied_topics[g.group_id] = [t for t, n in zip(g.topics, names) if n in denied]
                g.topics = [t for t, n in zip(g.topics, names) if n not in denied]
        if not refused_groups and not denied_topics and not ask_all:
            return handler(req, version, client_id, client_host)
        req.groups = kept

        def merge(resp):
            for g in resp.groups:
                if g.group_id in ask_all:
                    g.topics = [t for t in g.topics if self._describable(
                        self.name_of(t.topic_id) if version >= 10 else t.name, host)]
                refused = denied_topics.get(g.group_id)
                if refused:
                    g.topics = [*g.topics, *(wire.OffsetFetchResponseTopics(
                        name=t.name, topic_id=t.topic_id, partitions=[wire.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                            error_code=E.TOPIC_AUTHORIZATION_FAILED) for p in t.partition_indexes])
                        for t in refused)]
            resp.groups = [*resp.groups, *(wire.OffsetFetchResponseGroup(
                group_id=gid, topics=[], error_code=E.GROUP_AUTHORIZATION_FAILED) for gid in refused_groups)]
            return resp
        if not kept:
            return merge(wire.OffsetFetchResponse(groups=[]))
        return then(handler(req, version, client_id, client_host), merge)

    def _describable(self, name: str | None, host: str) -> bool:
        return name is not None and self.allowed("OffsetFetch", DESCRIBE, TOPIC, name, host, audit=False)

    def _offset_fetch_one(self, handler, req, version, client_id, client_host, host):
        if not self.allowed("OffsetFetch", DESCRIBE, GROUP, req.group_id, host):
            if version >= 2:
                return wire.OffsetFetchResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, topics=[])
            return wire.OffsetFetchResponse(topics=[wire.OffsetFetchResponseTopic(name=t.name, partitions=[
                wire.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                                  metadata="", error_code=E.GROUP_AUTHORIZATION_FAILED)
                for p in t.partition_indexes]) for t in req.topics or []])
        if req.topics is None:
            def keep_describable(resp):
                resp.topics = [t for t in resp.topics if self._describable(t.name, host)]
                return resp
            return then(handler(req, version, client_id, client_host), keep_describable)
        denied = self.topic_names("OffsetFetch", DESCRIBE, [t.name for t in req.topics], host)
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = [t for t in req.topics if t.name in denied]
        req.topics = [t for t in req.topics if t.name not in denied]

        def merge(resp):
            resp.topics = [*resp.topics, *(wire.OffsetFetchResponseTopic(name=t.name, partitions=[
                wire.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                                  metadata="", error_code=E.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partition_indexes]) for t in refused)]
            return resp
        if not req.topics:
            return merge(wire.OffsetFetchResponse(error_code=E.NONE, topics=[]))
        return then(handler(req, version, client_id, client_host), merge)

    # ---- OffsetDelete: GROUP DELETE, then TOPIC READ on each topic --------------------------------------------

    def offset_delete(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        if not self.allowed("OffsetDelete", DELETE, GROUP, req.group_id, host):
            return wire.OffsetDeleteResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, topics=[])
        denied = self.topic_names("OffsetDelete", READ, [t.name for t in req.topics], host)
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = [t for t in req.topics if t.name in denied]
        req.topics = [t for t in req.topics if t.name not in denied]

        def merge(resp):
            resp.topics = [*resp.topics, *(wire.OffsetDeleteResponseTopic(name=t.name, partitions=[
                wire.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                                   error_code=E.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions]) for t in refused)]
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- the describe and list APIs ----------------------------------------------------------------------

    def _split_groups(self, api: str, op: int, ids, host: str) -> tuple[list[str], list[str]]:
        allowed: list[str] = []
        denied: list[str] = []
        for gid in ids:
            (allowed if self.allowed(api, op, GROUP, gid, host) else denied).append(gid)
        return allowed, denied

    def describe_groups(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        allowed, denied = self._split_groups("DescribeGroups", DESCRIBE, req.groups, host)
        include = version >= 3 and req.include_authorized_operations
        refused = [wire.DescribeGroupsResponseDescribedGroup(
            error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="", protocol_type="", protocol_data="",
            members=[], authorized_operations=INT32_MIN) for g in denied]
        if not allowed:
            return wire.DescribeGroupsResponse(groups=refused)
        req.groups = allowed

        def merge(resp):
            if include:
                for g in resp.groups:
                    if g.error_code == E.NONE:
                        g.authorized_operations = self.authorizer.operations_bitfield(principal(), host, GROUP,
                                                                                      g.group_id)
            resp.groups = [*refused, *resp.groups]  # Kafka lists the refused first
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    def list_groups(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        if self.cluster("ListGroups", DESCRIBE, host, audit=False):
            return handler(req, version, client_id, client_host)
        who = principal()
        authorize = self.authorizer.authorize

        def keep_describable(resp):
            resp.groups = [g for g in resp.groups if authorize(who, host, DESCRIBE, GROUP, g.group_id)]
            return resp
        return then(handler(req, version, client_id, client_host), keep_describable)

    def delete_groups(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        allowed, denied = self._split_groups("DeleteGroups", DELETE, dict.fromkeys(req.groups_names), host)
        refused = [wire.DeleteGroupsResponseDeletableGroupResult(group_id=g, error_code=E.GROUP_AUTHORIZATION_FAILED)
                   for g in denied]
        if not allowed:
            return wire.DeleteGroupsResponse(results=refused)
        if len(allowed) < len(req.groups_names):  # each name once, as Kafka's distinct names
            req.groups_names = allowed
        if not denied:
            return handler(req, version, client_id, client_host)

        def merge(resp):
            resp.results = [*resp.results, *refused]
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- KIP-848: GROUP READ and TOPIC DESCRIBE on the subscribed names; describe hides denied topics ---------

    def consumer_group_heartbeat(self, handler, req, version, client_id, client_host):
        host = peer_address(client_host)
        if not self.allowed("ConsumerGroupHeartbeat", READ, GROUP, req.group_id, host):
            return wire.ConsumerGroupHeartbeatResponse(error_code=E.GROUP_AUTHORIZATION_FAILED,
                                                       error_message=GROUP_DENIED, member_epoch=-1)
        names = req.subscribed_topic_names
        if names and self.topic_names("ConsumerGroupHeartbeat", DESCRIBE, names, host):
            return wire.ConsumerGroupHeartbeatResponse(error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                                       error_message=TOPIC_DENIED, member_epoch=-1)
        return handler(req, version, client_id, client_host)

    def _describe_gate(self, api: str, response, described, topics_of=None):
        """A describe of groups by id (ConsumerGroupDescribe, ConnectGroupDescribe): the refused groups first, each
        without members; with `topics_of`, a group having topics the caller may not describe is refused whole
        (TOPIC_AUTHORIZATION_FAILED, Kafka 4.x); the authorized-operations field when asked for."""
        def gate(handler, req, version, client_id, client_host):
            host = peer_address(client_host)
            allowed, denied = self._split_groups(api, DESCRIBE, req.group_ids, host)
            refused = [described(group_id=g, error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=GROUP_DENIED,
                                 members=[], authorized_operations=INT32_MIN) for g in denied]
            if not allowed:
                return response(groups=refused)
            req.group_ids = allowed
            include = req.include_authorized_operations
            who = principal()

            def merge(resp):
                groups = []
                for g in resp.groups:
                    if g.error_code == E.NONE:
                        if topics_of is not None and any(not self.allowed(api, DESCRIBE, TOPIC, t, host)
                                                         for t in topics_of(g)):
                            g = described(group_id=g.group_id, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                          error_message=DESCRIBE_TOPICS_DENIED, members=[],
                                          authorized_operations=INT32_MIN)
                        elif include:
                            g.authorized_operations = self.authorizer.operations_bitfield(who, host, GROUP,
                                                                                          g.group_id)
                    groups.append(g)
                resp.groups = [*refused, *groups]
                return resp
            return then(handler(req, version, client_id, client_host), merge)
        return gate


def _assigned_topics(g) -> set[str]:
    """The topics of a described consumer group's members' assignments and target assignments."""
    return {tp.topic_name for m in g.members for a in (m.assignment, m.target_assignment) if a is not None
            for tp in a.topic_partitions}


# ---- error answers --------------------------------------------------------------------------------------------

def _join_denied(req, version):
    return wire.JoinGroupResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                  protocol_name=None if version >= 7 else "", leader="", member_id="", members=[])


def _commit_topics(topics, code: int) -> list:
    return [wire.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        wire.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in topics]


def _commit_answer(req, code: int):
    return wire.OffsetCommitResponse(topics=_commit_topics(req.topics, code))


def _describe_users_denied(req, version):
    return wire.DescribeUserScramCredentialsResponse(
        error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=[
            wire.DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult(
                user="", error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, credential_infos=[])
            for _ in req.users or ()])


def _alter_users_denied(req, version):
    names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return wire.AlterUserScramCredentialsResponse(results=[
        wire.AlterUserScramCredentialsResponseAlterUserScramCredentialsResult(
            user=n, error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for n in names])


__all__ = ["Gates", "peer_address", "principal"]
