"""The in-process coordinator: routes each decoded request to its group and owns the clock, the timers and
the store. No sockets: `handle()` takes a decoded request and returns a Reply (answered, or parked until the
group answers it). The server (kcoord.server) and the tests drive it the same way.
"""

from __future__ import annotations

import json
from typing import Callable

from . import errors as E
from . import wire
from .assignors import AssignmentError, decode_subscription
from .classic import ClassicGroup, State
from .config import GroupConfig
from .reply import Reply
from .store import GroupStore, NullStore
from .timers import Clock, Timers
from .topics import TopicCatalogue

NO_OFFSET = -1
ZERO_UUID = b"\x00" * 16
# DescribeGroups v5+ carries kcoord's own view of a group (generation, leader, the KIP-800 rebalance history)
# as a tagged field with this tag. Kafka clients skip tagged fields they do not know, so this is invisible to
# them; `kcoord describe` reads it.
KCOORD_DESCRIBE_TAG = 10_000


class Coordinator:
    def __init__(self, config: GroupConfig | None = None, clock: Clock | None = None,
                 store: GroupStore | NullStore | None = None, topics: TopicCatalogue | None = None) -> None:
        self.config = config or GroupConfig()
        self.clock = clock or Clock()
        self.timers = Timers(self.clock)
        self.store = store if store is not None else NullStore()
        # In-process, each handle()/poll() commits what it staged before returning. The server turns this off
        # and commits once per event-loop turn, holding every response until then (kcoord.server).
        self.autocommit = True
        self.groups: dict[str, ClassicGroup] = {}
        self.topics = topics if topics is not None else TopicCatalogue()
        self.handlers: dict[int, Callable[..., Reply]] = {
            11: self.join_group, 14: self.sync_group, 12: self.heartbeat, 13: self.leave_group,
            15: self.describe_groups, 16: self.list_groups, 42: self.delete_groups,
            8: self.offset_commit, 9: self.offset_fetch, 47: self.offset_delete,
        }

    # ---- plumbing ----------------------------------------------------------------------------------

    def handle(self, api_key: int, version: int, body, client_id: str = "", client_host: str = ""):
        """Answer one decoded request (the caller has checked the API and version are supported).

        Returns the response message, or a Reply for JoinGroup and SyncGroup, which may be parked. What the
        response acknowledges is durable when this returns. A StoreError means it is not: the response must not
        be sent, and the coordinator (whose memory is now ahead of its store) must be replaced by one loaded
        from the store, as the server does by stopping."""
        response = self.handlers[api_key](body, version, client_id or "", client_host)
        if self.store.dirty and self.autocommit:
            self.store.commit()
        return response

    def poll(self) -> int:
        """Fire every timer that is due by the clock; returns how many fired."""
        fired = self.timers.fire_due()
        if self.store.dirty and self.autocommit:
            self.store.commit()
        return fired

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def group(self, group_id: str, create: bool = False) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        if g is None and create:
            g = self.groups[group_id] = ClassicGroup(group_id, self.config, self.timers, self.store)
        return g

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------------------

    def join_group(self, req: wire.JoinGroupRequest, version: int, client_id: str, client_host: str) -> Reply:
        def fail(error: int) -> Reply:
            return Reply(wire.JoinGroupResponse(error_code=error, member_id=req.member_id,
                                                    protocol_name="" if version < 7 else None))

        if not req.group_id:
            return fail(E.INVALID_GROUP_ID)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        g = self.group(req.group_id, create=req.member_id == "")
        if g is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        return g.join(req, version, client_id, client_host)

    def sync_group(self, req: wire.SyncGroupRequest, version: int, client_id: str, client_host: str) -> Reply:
        def fail(error: int) -> Reply:
            return Reply(wire.SyncGroupResponse(error_code=error))

        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if not req.group_id:
            return fail(E.INVALID_GROUP_ID)
        g = self.groups.get(req.group_id)
        if g is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        return g.sync(req, version)

    def heartbeat(self, req: wire.HeartbeatRequest, version: int, client_id: str = "",
                  client_host: str = "") -> wire.HeartbeatResponse:
        g = self.groups.get(req.group_id)
        if g is not None:
            error = g.heartbeat(req.member_id, req.group_instance_id, req.generation_id)
        else:
            error = E.INVALID_GROUP_ID if not req.group_id else E.UNKNOWN_MEMBER_ID
        return wire.HeartbeatResponse(error_code=error)

    def leave_group(self, req: wire.LeaveGroupRequest, version: int, client_id: str = "",
                    client_host: str = ""):
        if version <= 2:
            members = [(req.member_id, None, None)]
        else:
            members = [(m.member_id, m.group_instance_id, m.reason) for m in req.members]
        if not req.group_id:
            top, errors = E.INVALID_GROUP_ID, [E.INVALID_GROUP_ID] * len(members)
        else:
            g = self.groups.get(req.group_id)
            if g is None:
                top, errors = E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
            else:
                top, errors = g.leave(members)
        if version <= 2:
            # v0-2 have one member: its error becomes the top-level error unless there already is one.
            return (wire.LeaveGroupResponse(error_code=top or errors[0]))
        return (wire.LeaveGroupResponse(error_code=top, members=[
            wire.LeaveGroupResponseMemberResponse(member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid, _), err in zip(members, errors)]))

    # ---- describe / list / delete -----------------------------------------------------------------

    def describe_groups(self, req: wire.DescribeGroupsRequest, version: int, client_id: str = "",
                        client_host: str = ""):
        out = []
        for gid in req.groups:
            g = self.groups.get(gid)
            if g is None or g.state == State.DEAD:
                out.append(wire.DescribeGroupsResponseDescribedGroup(
                    error_code=E.NONE, group_id=gid, group_state=State.DEAD.value))
                continue
            stable = g.state == State.STABLE
            extra = [(KCOORD_DESCRIBE_TAG, describe_extension(g))] if version >= 5 else None
            out.append(wire.DescribeGroupsResponseDescribedGroup(
                unknown_tags=extra,
                error_code=E.NONE, group_id=gid, group_state=g.state.value, protocol_type=g.protocol_type or "",
                protocol_data=(g.protocol_name or "") if stable else "",
                members=[wire.DescribeGroupsResponseDescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=(m.metadata_for(g.protocol_name) or b"") if stable else b"",
                    member_assignment=m.assignment if stable else b"") for m in g.members]))
        return (wire.DescribeGroupsResponse(groups=out))

    def list_groups(self, req: wire.ListGroupsRequest, version: int, client_id: str = "",
                    client_host: str = ""):
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        out = []
        for gid, g in self.groups.items():
            if g.state == State.DEAD:
                continue
            if states and g.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(wire.ListGroupsResponseListedGroup(group_id=gid, protocol_type=g.protocol_type or "",
                                                          group_state=g.state.value, group_type="classic"))
        return (wire.ListGroupsResponse(error_code=E.NONE, groups=out))

    def delete_groups(self, req: wire.DeleteGroupsRequest, version: int, client_id: str = "",
                      client_host: str = ""):
        results = []
        for gid in req.groups_names:
            g = self.groups.get(gid)
            if not gid:
                err = E.INVALID_GROUP_ID
            elif g is None or g.state == State.DEAD:
                err = E.GROUP_ID_NOT_FOUND
            elif g.state != State.EMPTY:
                err = E.NON_EMPTY_GROUP
            else:
                self.store.delete_group(gid, g.offsets.keys())
                g.unload()
                del self.groups[gid]
                err = E.NONE
            results.append(wire.DeleteGroupsResponseDeletableGroupResult(group_id=gid, error_code=err))
        return (wire.DeleteGroupsResponse(results=results))

    # ---- offsets ----------------------------------------------------------------------------------

    def _topic_key(self, name: str, topic_id: bytes, version: int, id_version: int) -> str | None:
        if version >= id_version:
            t = self.topics.by_id.get(topic_id)
            return t.name if t is not None else None
        return name

    def offset_commit(self, req: wire.OffsetCommitRequest, version: int, client_id: str = "",
                      client_host: str = ""):
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        g = None
        if not req.group_id:
            error = E.INVALID_GROUP_ID
        else:
            g = self.group(req.group_id, create=generation < 0)
            if g is None:
                error = E.ILLEGAL_GENERATION
            else:
                error = g.validate_offset_commit(req.member_id if version >= 1 else "",
                                                 req.group_instance_id, generation)
        topics = []
        accepted: dict[tuple[str, int], tuple] = {}
        now = self.clock.wall_ms()  # the commit timestamp Kafka records
        for t in req.topics:
            name = self._topic_key(t.name, t.topic_id, version, 10)
            parts = []
            for p in t.partitions:
                err = error
                if not err and name is None:
                    err = E.UNKNOWN_TOPIC_ID
                elif not err and p.committed_metadata is not None and \
                        len(p.committed_metadata.encode()) > self.config.offset_metadata_max_bytes:
                    err = E.OFFSET_METADATA_TOO_LARGE
                if not err:
                    accepted[(name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch,
                                                          p.committed_metadata, now)
                parts.append(wire.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=err))
            topics.append(wire.OffsetCommitResponseTopic(
                name=t.name, topic_id=t.topic_id, partitions=parts))
        if accepted:
            self.store.write_offsets(g.group_id, accepted)  # stored before the response confirms it
            g.offsets.update(accepted)
        return (wire.OffsetCommitResponse(topics=topics))

    def _fetch_partitions(self, g: ClassicGroup | None, name: str | None, partitions, partition_cls):
        out = []
        for idx in partitions:
            off = g.offsets.get((name, idx)) if g is not None and name is not None else None
            if off is None:
                out.append(partition_cls(partition_index=idx, committed_offset=NO_OFFSET, committed_leader_epoch=-1,
                                         metadata="", error_code=E.NONE))
            else:
                out.append(partition_cls(partition_index=idx, committed_offset=off[0], committed_leader_epoch=off[1],
                                         metadata=off[2], error_code=E.NONE))
        return out

    def _all_committed(self, g: ClassicGroup | None) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for (name, idx) in sorted(g.offsets) if g is not None else ():
            topics.setdefault(name, []).append(idx)
        return topics

    def offset_fetch(self, req: wire.OffsetFetchRequest, version: int, client_id: str = "",
                     client_host: str = ""):
        if version <= 7:
            g = self.groups.get(req.group_id)
            if req.topics is None:
                wanted = list(self._all_committed(g).items())
            else:
                wanted = [(t.name, t.partition_indexes) for t in req.topics]
            topics = [wire.OffsetFetchResponseTopic(
                name=name, partitions=self._fetch_partitions(
                    g, name, parts, wire.OffsetFetchResponsePartition))
                for name, parts in wanted]
            error = E.INVALID_GROUP_ID if not req.group_id else E.NONE
            return (wire.OffsetFetchResponse(topics=topics, error_code=error))
        groups = []
        for rg in req.groups:
            g = self.groups.get(rg.group_id)
            if rg.topics is None:
                wanted = [(name, b"", parts) for name, parts in self._all_committed(g).items()]
                wanted = [(name, t.topic_id if (t := self.topics.get(name)) else ZERO_UUID, parts)
                          for name, _, parts in wanted]
            else:
                wanted = [(self._topic_key(t.name, t.topic_id, version, 10), t.topic_id, t.partition_indexes)
                          for t in rg.topics]
            topics = [wire.OffsetFetchResponseTopics(
                name=name or "", topic_id=tid, partitions=self._fetch_partitions(
                    g, name, parts, wire.OffsetFetchResponsePartitions))
                for name, tid, parts in wanted]
            groups.append(wire.OffsetFetchResponseGroup(
                group_id=rg.group_id, topics=topics, error_code=E.INVALID_GROUP_ID if not rg.group_id else E.NONE))
        return (wire.OffsetFetchResponse(groups=groups))

    def offset_delete(self, req: wire.OffsetDeleteRequest, version: int, client_id: str = "",
                      client_host: str = ""):
        g = self.groups.get(req.group_id)
        if not req.group_id:
            return (wire.OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID))
        if g is None or g.state == State.DEAD:
            return (wire.OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND))
        subscribed = subscribed_topics(g) if g.state != State.EMPTY else set()
        topics = []
        removed: dict[tuple[str, int], None] = {}
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.name in subscribed:
                    err = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    err = E.NONE
                    if (t.name, p.partition_index) in g.offsets:
                        removed[(t.name, p.partition_index)] = None
                parts.append(wire.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=err))
            topics.append(wire.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        if removed:
            self.store.write_offsets(g.group_id, removed)  # None values are tombstones
            for key in removed:
                del g.offsets[key]
        return (wire.OffsetDeleteResponse(error_code=E.NONE, topics=topics))


def subscribed_topics(g: ClassicGroup) -> set[str]:
    """Topics the members of a "consumer" group subscribe to, read from their JoinGroup metadata."""
    if g.protocol_type != "consumer" or g.protocol_name is None:
        return set()
    topics: set[str] = set()
    for m in g.members:
        try:  # newer versions than we know are read as the newest we know (Kafka does the same)
            topics.update(decode_subscription(m.metadata_for(g.protocol_name) or b"").topics)
        except AssignmentError:
            continue
    return topics


def describe_extension(g: ClassicGroup) -> bytes:
    doc = {
        "generation": g.generation,
        "leader": g.leader_id,
        "protocol": g.protocol_name,
        "history": [{"time_ms": e.time_ms, "generation": e.generation, "trigger": e.trigger, "member_id": e.member_id,
                     "group_instance_id": e.group_instance_id, "reason": e.reason} for e in g.history],
    }
    return json.dumps(doc, separators=(",", ":")).encode()
