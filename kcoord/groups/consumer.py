"""KIP-848 consumer groups: ConsumerGroupHeartbeat, server-side assignment and per-member reconciliation.

Following Apache Kafka 4.x's GroupMetadataManager (consumerGroupHeartbeat) and ConsumerGroup: a group epoch bumped by joins, leaves, fencing, subscription and metadata changes; a target assignment computed by
a server-side assignor (`uniform` or `range`, kcoord.assignors) when the group epoch moves past the assignment
epoch; and each member reconciled towards its target on its own heartbeats, revoke first and assign later, by the
compiled CurrentAssignmentBuilder step (kcoord._core._assign.reconcile) over the group's partition epoch table.

Partitions are numbered within the group's topic space: the topics its members subscribe to, in the order the
group first met them, each owning consecutive global ids (as the assignors and the kernel want). A member's
assigned, pending and target partitions are sorted int32 arrays of those ids.

The group stages Kafka's records (ConsumerGroupMetadata, PartitionMetadata, MemberMetadata, TargetAssignment*,
CurrentMemberAssignment) ahead of the responses that acknowledge them, in Kafka's write order, and replays them.
What it does as a connect group does (static members, the -1/-2 leaves, the step's bookkeeping, sessions, member
removal) is ModernGroup's (kcoord.groups.modern); this module holds what is a consumer group's own.
"""

from __future__ import annotations

import base64
import os
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import re2

from .. import errors as E
from .. import records as R
from .. import wire
from .._core import _assign
from .._core._assign import PartitionEpochs
from .._core._members import EMPTY_IDS, ConsumerGroupCore, ConsumerMember
from ..assignors import (
    CONSUMER_PROTOCOL_VERSION,
    AssignmentError,
    assign_arrays,
    decode_subscription,
    encode_assignment,
    kafka_order,
)
from ..events import ADMIN_REMOVAL_REASON, join_reason
from ..reply import Reply
from ..topics import TopicCatalogue
from .base import Group, GroupContext
from .modern import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    REBALANCE,
    SESSION,
    TEMPORARY_LEAVE_EPOCH,
    ModernGroup,
    csr_changed,
    csr_take,
)

STABLE = _assign.STABLE
UNREVOKED_PARTITIONS = _assign.UNREVOKED_PARTITIONS
UNRELEASED_PARTITIONS = _assign.UNRELEASED_PARTITIONS
UNKNOWN_STATE = _assign.UNKNOWN
MEMBER_STATES = _assign.MEMBER_STATES

# ConsumerGroupDescribe v1 MemberType: 0 a classic-protocol member (KIP-848 migration), 1 a consumer-protocol one
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1
# member timer kinds besides SESSION and REBALANCE (groups.modern): a classic member's rejoin and sync deadlines
JOIN, SYNC = "join", "sync"
# the group's own timer (GroupTimers): the batched target computation (KIP-1263) is due
ASSIGN = "assign"
CONSUMER_PROTOCOL_TYPE = "consumer"  # the classic protocol type of consumers
SERVER_ASSIGNORS = ("uniform", "range")

_NONE = EMPTY_IDS
# A ConsumerGroupTargetAssignmentMember value (version 0, flexible) with no partition, and the head of one over one
# topic (the version, then a compact array of one element)
EMPTY_TARGET_VALUE = b"\x00\x00\x01\x00"
TARGET_VALUE_ONE_TOPIC = b"\x00\x00\x02"


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (a compact array's length + 1)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def new_member_id() -> str:
    """A member id as a KIP-1082 client makes one (22 characters of URL-safe base64 over a random UUID)."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def subscription_version(metadata: bytes) -> int:
    """The ConsumerProtocol version a classic member's subscription is written in (its SyncGroup assignment is
    written in the same one, as Kafka's GroupMetadataManager.prepareAssignment does)."""
    return min(int.from_bytes(metadata[:2], "big", signed=True), CONSUMER_PROTOCOL_VERSION) if len(metadata) >= 2 \
        else 0


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate_heartbeat(req: wire.ConsumerGroupHeartbeatRequest, version: int, assignors: tuple[str, ...]) \
        -> tuple[int, str] | None:
    """The stateless checks Kafka makes before the group is looked at (GroupCoordinatorService,
    throwIfConsumerGroupHeartbeatRequestIsInvalid, trunk): (error code, message), or None."""
    epoch = req.member_epoch
    if _blank(req.group_id) or not req.group_id:
        return E.INVALID_REQUEST, "GroupId can't be empty."
    if _blank(req.instance_id):
        return E.INVALID_REQUEST, "InstanceId can't be empty."
    if _blank(req.rack_id):
        return E.INVALID_REQUEST, "RackId can't be empty."
    if not req.member_id.strip() and (version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH):
        return E.INVALID_REQUEST, "MemberId can't be empty."
    if epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            return E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
        if req.topic_partitions is None or req.topic_partitions:
            return E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif epoch == TEMPORARY_LEAVE_EPOCH:
        if req.instance_id is None:
            return E.INVALID_REQUEST, "InstanceId can't be null."
    elif epoch < TEMPORARY_LEAVE_EPOCH:
        return E.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be greater than or equal to -2."
    if req.server_assignor is not None and req.server_assignor not in assignors:
        return E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. " \
                                       f"Supported assignors: {', '.join(assignors)}."
    return None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered with 128, not logged by RE2


def compile_regex(pattern: str):
    """A SubscribedTopicRegex compiled as Kafka's RE2J reads it (RE2 syntax, matched against the whole topic name);
    re2.error if it does not compile. RE2 runs in time linear in the name, whatever the pattern."""
    return re2.compile(pattern, options=_RE2_OPTIONS)


class TopicSpace:
    """The topics a group's members subscribe to, numbered as consecutive global partition ids, with the partition
    epoch table over them. Topics are appended in the order the group meets them and only ever grow, so an id
    changes only when a topic before it gains partitions (`refresh` returns the old numbering to remap from)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.topic_ids: list[bytes] = []
        self.counts: list[int] = []
        self.index: dict[str, int] = {}
        self.by_topic_id: dict[bytes, int] = {}
        self.start = np.zeros(1, dtype=np.int64)
        self._starts = [0]  # the same as a list, for bisection
        self.epochs = PartitionEpochs(self.start)

    def refresh(self, catalogue: TopicCatalogue, names: Iterable[str]) -> np.ndarray | None:
        """Take in the subscribed topics that exist now and their partition counts. Returns the previous topic
        starts when the numbering changed (the caller remaps its arrays with `remap`), else None."""
        changed = False
        for name in names:
            t = catalogue.get(name)
            if t is None:
                continue
            i = self.index.get(name)
            if i is not None and self.topic_ids[i] != t.topic_id:
                i = None  # deleted and created again: a new topic by the old name; the old one's ids stay, unassigned
            if i is None:
                self.index[name] = len(self.names)
                self.by_topic_id[t.topic_id] = len(self.names)
                self.names.append(name)
                self.topic_ids.append(t.topic_id)
                self.counts.append(t.partitions)
                changed = True
            elif t.partitions > self.counts[i]:
                self.counts[i] = t.partitions
                changed = True
        if not changed:
            return None
        old = self.start
        start = np.zeros(len(self.counts) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=start[1:])
        self.epochs.grow(start)
        self.start = start
        self._starts = start.tolist()
        return old

    def remap(self, ids: np.ndarray, old_start: np.ndarray) -> np.ndarray:
        if ids.shape[0] == 0:
            return ids
        t = np.searchsorted(old_start, ids, side="right") - 1
        return (self.start[t] + (ids - old_start[t])).astype(np.int32)

    def topic_indices(self, names: Iterable[str]) -> np.ndarray:
        """The subscribed topics that exist, as ascending topic indices."""
        index = self.index
        return np.array(sorted(index[n] for n in names if n in index), dtype=np.int32)

    def from_wire(self, topic_partitions) -> np.ndarray:
        """TopicPartitions (topic id, partitions) as sorted unique global ids; unknown topics and partitions out of
        range are left out (they cannot match anything the group assigned)."""
        out: list[int] = []
        start, counts, by_id = self.start, self.counts, self.by_topic_id
        for tp in topic_partitions:
            t = by_id.get(tp.topic_id)
            if t is None or not tp.partitions:
                continue
            ps = sorted(set(tp.partitions))
            n = counts[t]
            if ps[0] < 0 or ps[-1] >= n:
                ps = [p for p in ps if 0 <= p < n]
            base = int(start[t])
            out.extend([base + p for p in ps] if base else ps)
        if not out:
            return _NONE
        if len(topic_partitions) > 1:
            out.sort()  # topics in any order: a sort of the already sorted runs
        return np.array(out, dtype=np.int32)

    def from_names(self, partitions: Mapping[str, Iterable[int]]) -> np.ndarray:
        """{topic name: partitions} as sorted unique global ids (unknown topics and partitions left out)."""
        out: list[int] = []
        for name, ps in partitions.items():
            t = self.index.get(name)
            if t is None:
                continue
            n, base = self.counts[t], int(self.start[t])
            out.extend(base + p for p in set(ps) if 0 <= p < n)
        return np.array(sorted(out), dtype=np.int32) if out else _NONE

    def by_name(self, ids: np.ndarray) -> dict[str, list[int]]:
        return {self.names[t]: ps for t, ps in self.split(ids)}

    def split(self, ids: np.ndarray) -> list[tuple[int, list[int]]]:
        """Global ids as (topic index, partitions) in topic index order. Most lists lie in one topic: that case
        is one bisection and one subtraction (this runs for every record and every assignment sent)."""
        n = ids.shape[0]
        if n == 0:
            return []
        starts = self._starts
        t = bisect_right(starts, int(ids[0])) - 1
        if int(ids[n - 1]) < starts[t + 1]:
            return [(t, (ids - starts[t]).tolist() if starts[t] else ids.tolist())]
        topic = np.searchsorted(self.start, ids, side="right") - 1
        bounds = (np.flatnonzero(topic[1:] != topic[:-1]) + 1).tolist()
        out, prev = [], 0
        for b in [*bounds, n]:
            t = int(topic[prev])
            out.append((t, (ids[prev:b] - starts[t]).tolist()))
            prev = b
        return out

    def to_heartbeat(self, ids: np.ndarray) -> list:
        return [wire.ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=self.topic_ids[t], partitions=ps)
                for t, ps in self.split(ids)]


class ConsumerGroup(ModernGroup[ConsumerMember], ConsumerGroupCore):
    GROUP_TYPE: ClassVar[str] = "consumer"
    PROTOCOL_TYPE: ClassVar[str] = CONSUMER_PROTOCOL_TYPE
    RECORD_TYPES: ClassVar[tuple[int, ...]] = tuple(R.CONSUMER_RECORDS)
    KEYS: ClassVar[R.ModernRecordKeys] = R.CONSUMER_KEYS
    MEMBER_TIMERS: ClassVar[tuple[str, ...]] = (SESSION, REBALANCE, JOIN, SYNC)
    members: dict[str, ConsumerMember]  # (again: mypy does not map ModernGroup's type variable to compare the bases)

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        super().__init__(group_id, ctx)
        config, timers = ctx.config, ctx.timers
        self.catalogue = ctx.topics if ctx.topics is not None else TopicCatalogue()
        self.space = TopicSpace()
        self.unit_epochs = self.space.epochs  # the epoch table over the topic space's partition ids
        self.subscribers: Counter[str] = Counter()  # topic name -> members consuming it (names or regex)
        self.regexes: dict[str, tuple[Any, int, tuple[str, ...]]] = {}  # pattern -> (compiled, version, matches)
        self.regex_users: Counter[str] = Counter()  # pattern -> members using it (its cache entry goes with the last)
        self.regex_members: dict[str, ConsumerMember] = {}  # the members with a regex, by id: what a bump resolves
        self.metadata: dict[str, tuple[bytes, int]] = {}  # subscribed topics as the last target saw them
        self.catalogue_version = -1
        self.assignors = config.consumer_assignors()
        # The coordinator's: converts this group back to a classic one (the last consumer-protocol member went);
        # called with (group, whether a member left), returns the classic group that took its place.
        self.downgrade: Callable[[ConsumerGroup, bool], Group] | None = ctx.downgrade
        self.init_core(timers, config.group_consumer_session_timeout_ms,
                       config.group_consumer_heartbeat_interval_ms, wire.ConsumerGroupHeartbeatResponse)
        # The batched target computation (KIP-1263): when the last one ran (the timers' clock, ms; None: not since
        # the group was made or loaded); the group's ASSIGN timer runs the next one when a change came too soon.
        self.computed_at: int | None = None

    # ---- what the router, the offsets and the store ask of any group --------------------------------------------

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               version: int = 9) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: an epoch below zero (an admin, a simple consumer) only for
        an empty group; otherwise the member must exist, use OffsetCommit v9+, and send its current epoch."""
        if member_epoch < 0:
            return E.UNKNOWN_MEMBER_ID if self.members else E.NONE
        m = self.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if m.classic is not None:  # a classic member commits with its generation, which is its member epoch
            if instance_id is not None and m.instance_id != instance_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE if member_epoch == m.member_epoch else E.ILLEGAL_GENERATION
        if version < 9:
            return E.UNSUPPORTED_VERSION
        return E.NONE if member_epoch == m.member_epoch else E.STALE_MEMBER_EPOCH

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return E.NONE  # an admin or a client that does not say
        m = self.members.get(member_id) if member_id is not None else None
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE if member_epoch == m.member_epoch else E.STALE_MEMBER_EPOCH

    def validate_offset_delete(self) -> int:
        return E.GROUP_ID_NOT_FOUND if self.dead else E.NONE

    def subscribed_topics(self) -> set[str]:
        return set(self.subscribers)

    # ---- classic members inside a consumer group (KIP-848 online migration) ----------------------------------------
    # A classic-protocol member (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) is a member like any other: its
    # subscription comes from its JoinGroup metadata, its partitions from the same target and reconciliation, and its
    # SyncGroup answer is its assigned partitions. Every classic member is a follower: the group computes the
    # assignment. Kafka's GroupMetadataManager.classicGroup{Join,Sync,Heartbeat}ToConsumerGroup.

    def _join_failed(self, version: int, error: int, member_id: str = "") -> Reply:
        return Reply(wire.JoinGroupResponse(error_code=error, member_id=member_id, generation_id=-1,
                                            protocol_name="" if version < 7 else None))

    def supports_classic_protocols(self, protocol_type: str, names: set[str], exclude: str = "") -> bool:
        """Protocol type "consumer", and a protocol name every other classic member also supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        common: set[str] | None = None
        for m in self.members.values():
            if m.classic is None or m.member_id == exclude:
                continue
            theirs = {p.name for p in m.classic.supported_protocols}
            common = theirs if common is None else common & theirs
        return common is None or bool(common & names)

    def join(self, req: wire.JoinGroupRequest, version: int, client_id: str, client_host: str) -> Reply:
        protocols = list(req.protocols)
        names = {p.name for p in protocols}
        mid, iid = req.member_id, req.group_instance_id
        if mid not in self.members and len(self.members) >= self.config.group_consumer_max_size:
            return self._join_failed(version, E.GROUP_MAX_SIZE_REACHED, mid)  # first, as Kafka checks it
        if not self.supports_classic_protocols(req.protocol_type, names, exclude=mid):
            return self._join_failed(version, E.INCONSISTENT_GROUP_PROTOCOL, mid)
        try:
            sub = decode_subscription(protocols[0].metadata)
        except AssignmentError:
            return self._join_failed(version, E.INCONSISTENT_GROUP_PROTOCOL, mid)
        # the member's record keeps every protocol's metadata (ClassicMemberMetadata): Kafka's write of a record
        # above message.max.bytes fails, answered UNKNOWN_SERVER_ERROR; kcoord refuses before keeping anything
        old = self.member_or_holder(mid, iid)
        if R.consumer_member_size(self.group_id, mid or "x" * 22, iid, sub.rack_id, client_id, client_host,
                                  list(sub.topics), old.regex if old is not None else None,
                                  old.server_assignor if old is not None else None,
                                  [(p.name, p.metadata) for p in protocols]) > self.config.message_max_bytes:
            return self._join_failed(version, E.UNKNOWN_SERVER_ERROR, mid)
        new = False
        replaced: ConsumerMember | None = None
        if iid is None:
            if mid == "":
                if version >= 4:  # KIP-394: the member is given its id and must join again with it
                    return self._join_failed(version, E.MEMBER_ID_REQUIRED, new_member_id())
                m, new = ConsumerMember(new_member_id()), True
            else:
                known = self.members.get(mid)
                if known is None:  # the id MEMBER_ID_REQUIRED handed out (or any): Kafka creates the member
                    m, new = ConsumerMember(mid), True
                elif known.classic is None:  # a consumer-protocol member's id
                    return self._join_failed(version, E.UNKNOWN_MEMBER_ID, mid)
                else:
                    m = known
        else:
            holder_id = self.static.get(iid)
            holder = self.members.get(holder_id) if holder_id is not None else None
            if mid == "":
                if holder is None:
                    m, new = ConsumerMember(new_member_id()), True
                else:
                    replaced = holder  # a static member back under a new id: it takes over the old one (m below)
            elif holder is None:
                return self._join_failed(version, E.UNKNOWN_MEMBER_ID, mid)
            elif holder.member_id != mid:
                return self._join_failed(version, E.FENCED_INSTANCE_ID, mid)
            else:
                m = holder
                if m.classic is None:
                    return self._join_failed(version, E.UNKNOWN_MEMBER_ID, mid)
        downgrade = False
        if replaced is not None:
            # A classic static member replacing the last consumer-protocol member takes the group back to the
            # classic protocol once its join is done (Kafka's validateOnlineDowngradeWithReplacedMemberId).
            downgrade = (replaced.classic is None and self.downgrade is not None and self.config.downgrade_enabled()
                         and len(self.members) <= self.config.group_max_size
                         and all(x.classic is not None for x in self.members.values() if x is not replaced))
            m = self.replace_static_member(replaced, new_member_id())
        classic = wire.ConsumerGroupMemberMetadataValueClassicMemberMetadata(
            session_timeout_ms=req.session_timeout_ms, supported_protocols=[
                wire.ConsumerGroupMemberMetadataValueClassicProtocol(name=p.name, metadata=p.metadata)
                for p in protocols])
        as_heartbeat = wire.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=m.member_id, member_epoch=m.member_epoch, instance_id=iid,
            rack_id=sub.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else
            req.session_timeout_ms, subscribed_topic_names=list(sub.topics), server_assignor=None)
        changed_classic = m.classic is None or m.classic.session_timeout_ms != classic.session_timeout_ms or \
            [(p.name, p.metadata) for p in m.classic.supported_protocols] != [(p.name, p.metadata) for p in protocols]
        m.classic = classic
        subscription_changed = self.update_member(m, as_heartbeat, client_id, client_host, new)
        if changed_classic and not (new or subscription_changed):
            self.stage_member_metadata(m)
        if new or subscription_changed:
            self.change = ("join", join_reason(req.reason)) if new else ("subscription-change", "")
        self.catch_up(new or subscription_changed or self.group_epoch == 0)
        self.reconcile(m, self.space.from_names(sub.owned_partitions), subscription_changed)
        self.member_timers.cancel(m.member_id, JOIN)
        if downgrade and self.downgrade is not None:  # (downgrade is only True when it is set)
            self.downgrade(self, False)  # the classic group arms its members' heartbeats; no rebalance
        else:
            self.arm_session(m)
            self.member_timers.arm(m.member_id, SYNC, max(m.rebalance_timeout_ms, 0))
        return Reply(wire.JoinGroupResponse(
            error_code=E.NONE, generation_id=m.member_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0].name, leader="", member_id=m.member_id, members=[]))

    def _classic_member(self, member_id: str, instance_id: str | None) -> tuple[ConsumerMember | None, int]:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            m = self.members.get(member_id)
        else:
            holder = self.static.get(instance_id)
            m = self.members.get(holder) if holder is not None else None
            if m is not None and m.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        if m is None or m.classic is None:
            return None, E.UNKNOWN_MEMBER_ID
        return m, E.NONE

    def sync(self, req: wire.SyncGroupRequest, version: int) -> Reply:
        def fail(error: int) -> Reply:
            return Reply(wire.SyncGroupResponse(error_code=error))

        m, error = self._classic_member(req.member_id, req.group_instance_id)
        if m is None:
            return fail(error)
        if req.generation_id != m.member_epoch:
            return fail(E.ILLEGAL_GENERATION)
        name = m.classic.supported_protocols[0].name
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (req.protocol_name is not None and req.protocol_name != name):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if self.assignment_epoch > m.member_epoch and m.state != UNREVOKED_PARTITIONS:
            return fail(E.REBALANCE_IN_PROGRESS)
        self.member_timers.cancel(m.member_id, SYNC)
        self.arm_session(m)
        version_of = subscription_version(m.classic.supported_protocols[0].metadata)
        assignment = encode_assignment(self.space.by_name(m.assigned), version=version_of)
        return Reply(wire.SyncGroupResponse(error_code=E.NONE, protocol_type=req.protocol_type,
                                            protocol_name=req.protocol_name, assignment=assignment))

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> int:
        m, error = self._classic_member(member_id, instance_id)
        if m is None:
            return error
        if generation != m.member_epoch:
            return E.ILLEGAL_GENERATION
        self.arm_session(m)
        if self.assignment_epoch > m.member_epoch or m.state == UNREVOKED_PARTITIONS or \
                (m.state == UNRELEASED_PARTITIONS and self._released_for(m)):
            if not self.member_timers.is_armed(m.member_id, JOIN):
                self.member_timers.arm(m.member_id, JOIN, max(m.rebalance_timeout_ms, 0))
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def _released_for(self, m: ConsumerMember) -> bool:
        """Whether every partition of the member's target that it does not hold yet is free now (Kafka's
        !waitingOnUnreleasedPartition): it may rejoin to collect them."""
        epochs = self.space.epochs
        missing = np.setdiff1d(self.target.get(m.member_id, _NONE), m.assigned, assume_unique=True)
        return all(epochs[int(p)] == -1 for p in missing.tolist())

    def leave_group_member(self, m: ConsumerMember, by_instance_id: bool, instance_id: str | None,
                           reason: str | None) -> Group:
        """LeaveGroup: a classic member leaving, or Kafka's admin client removing a member of either protocol (by
        instance id, member id ""); fenced as a -1 leave is."""
        if by_instance_id:
            self.note("admin-removal", m.member_id, instance_id, reason or ADMIN_REMOVAL_REASON)
        else:
            self.note("leave", m.member_id, instance_id, join_reason(reason))
        return self.fence(m)

    # ---- ConsumerGroupHeartbeat -----------------------------------------------------------------------------------

    @staticmethod
    def fail(error: int, message: str) -> wire.ConsumerGroupHeartbeatResponse:
        """An error answer, as Kafka makes one from an exception: code and message, nothing else."""
        return wire.ConsumerGroupHeartbeatResponse(error_code=error, error_message=message)

    def response(self, member_id: str, epoch: int, assignment=None) -> wire.ConsumerGroupHeartbeatResponse:
        return wire.ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms, assignment=assignment)

    def leave_response(self, member_id: str, epoch: int) -> wire.ConsumerGroupHeartbeatResponse:
        return self.response(member_id=member_id, epoch=epoch)

    def consumer_heartbeat(self, req: wire.ConsumerGroupHeartbeatRequest, version: int, client_id: str,
                           client_host: str) -> wire.ConsumerGroupHeartbeatResponse:
        """One heartbeat, as Kafka's GroupMetadataManager.consumerGroupHeartbeat: leave, or find (or make) the member,
        apply what changed, bump the group epoch if needed, compute the target if it is owed, reconcile, re-arm the
        session, answer. The request passed validate_heartbeat, and quick_heartbeat (which the router tries first)
        did not answer it."""
        first = self.answered_first(req, client_id, client_host)
        if first is not None:
            return first
        epoch = req.member_epoch
        member_id = req.member_id or new_member_id()  # v0 joins may leave the id to the coordinator
        owned = req.topic_partitions  # converted where it is read, in the group's numbering of that moment
        m, replaced, failure = self.find_member(member_id, req.instance_id, epoch)
        if failure is not None:
            return failure
        new = False
        if replaced is not None:
            m = self.replace_static_member(replaced, member_id, classic=None)  # it speaks the consumer protocol
        elif m is None:
            if len(self.members) >= self.config.group_consumer_max_size:
                return self.fail(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                 f"{self.config.group_consumer_max_size} members.")
            m, new = ConsumerMember(member_id), True
        if not new and m.classic is not None:
            return self.fail(E.UNKNOWN_MEMBER_ID, f"Member {m.member_id} uses the classic protocol; it cannot "
                             "heartbeat with the consumer protocol.")
        if not new:
            error = self._check_epoch(m, epoch, owned)
            if error:
                return self.fail(error, f"The member epoch {epoch} is fenced; the member is at epoch "
                                 f"{m.member_epoch}.")
        if req.subscribed_topic_regex:
            try:
                self.resolve(req.subscribed_topic_regex)
            except re2.error as e:
                if new:
                    self.members.pop(m.member_id, None)
                return self.fail(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {req.subscribed_topic_regex!r} "
                                 f"is not a valid regular expression: {e}")
        if (not new and req.subscribed_topic_names is None and req.subscribed_topic_regex is None
                and req.instance_id is None and req.rack_id is None and req.rebalance_timeout_ms == -1
                and req.server_assignor is None and client_id == m.client_id and client_host == m.client_host):
            subscription_changed = False  # a regular heartbeat: nothing of the member's to update
        else:
            subscription_changed = self.update_member(m, req, client_id, client_host, new)
        if new or subscription_changed:
            self.change = ("join", "") if new else ("subscription-change", "")
        self.catch_up(new or subscription_changed or self.group_epoch == 0)
        before = m.assigned  # reconcile keeps the same array object when the assignment does not change
        if not (m.state == STABLE and m.member_epoch == self.assignment_epoch and not subscription_changed):
            self.reconcile(m, owned, subscription_changed)
        self.arm_session(m)
        full = (epoch == JOIN_EPOCH or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None and
                                        (req.subscribed_topic_names is not None or
                                         req.subscribed_topic_regex is not None)))
        assignment = None
        if full or (before is not m.assigned and not np.array_equal(before, m.assigned)):
            assignment = wire.ConsumerGroupHeartbeatResponseAssignment(
                topic_partitions=self.space.to_heartbeat(m.assigned))
        return self.response(member_id=m.member_id, epoch=m.member_epoch, assignment=assignment)

    def heartbeat_too_large(self, req: wire.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str) -> bool:
        """Whether the member's metadata record, with what this heartbeat changes, would pass message.max.bytes
        (Kafka: its write fails with MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR). Checked before anything
        of the request is kept; a heartbeat that changes none of the record's fields costs a few comparisons."""
        old = self.member_or_holder(req.member_id, req.instance_id)
        names, regex = req.subscribed_topic_names, req.subscribed_topic_regex
        if old is not None and names is None and regex is None and req.instance_id is None and \
                req.rack_id is None and req.server_assignor is None and client_id == old.client_id and \
                client_host == old.client_host:
            return False
        topics: Sequence[str]
        if old is None:
            instance_id, rack_id, topics, old_regex, assignor, classic = None, None, [], None, None, None
        else:
            instance_id, rack_id, topics, old_regex = old.instance_id, old.rack_id, old.subscribed, old.regex
            assignor = old.server_assignor
            classic = None if old.classic is None else [(p.name, p.metadata) for p in old.classic.supported_protocols]
        return R.consumer_member_size(
            self.group_id, req.member_id or "x" * 22, req.instance_id if req.instance_id is not None else instance_id,
            req.rack_id if req.rack_id is not None else rack_id, client_id, client_host,
            list(names if names is not None else topics), (regex or None) if regex is not None else old_regex,
            req.server_assignor if req.server_assignor is not None else assignor, classic) \
            > self.config.message_max_bytes

    # quick_heartbeat, the hot path, is compiled (kcoord._core._members.ConsumerGroupCore); it calls this for a
    # member that still has a step to make.

    def reconcile_heartbeat(self, m: ConsumerMember, req: wire.ConsumerGroupHeartbeatRequest) \
            -> wire.ConsumerGroupHeartbeatResponse:
        before = m.assigned
        self.reconcile(m, req.topic_partitions, False)
        return wire.ConsumerGroupHeartbeatResponse(
            member_id=m.member_id, member_epoch=m.member_epoch, heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=None if m.assigned is before else wire.ConsumerGroupHeartbeatResponseAssignment(
                topic_partitions=self.space.to_heartbeat(m.assigned)))

    def _check_epoch(self, m: ConsumerMember, epoch: int, owned: list | None) -> int:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid (trunk: epoch 0 is always a valid rejoin)."""
        if epoch == JOIN_EPOCH or epoch == m.member_epoch:
            return E.NONE
        if epoch > m.member_epoch:
            return E.FENCED_MEMBER_EPOCH
        # A lost response: the client still has the previous epoch and owns no more than it was given.
        if epoch == m.previous_member_epoch and owned is not None and \
                np.isin(self.space.from_wire(owned), m.assigned, assume_unique=True).all():
            return E.NONE
        return E.FENCED_MEMBER_EPOCH

    def update_member(self, m: ConsumerMember, req: wire.ConsumerGroupHeartbeatRequest, client_id: str,
                      client_host: str, new: bool) -> bool:
        """Apply the request's non-null fields; stage the member's metadata if it changed. Returns whether its
        subscription changed (names, or regex)."""
        changed = self.update_member_fields(m, req, client_id, client_host, new)
        if req.rack_id is not None and m.rack_id != req.rack_id:
            m.rack_id, changed = req.rack_id, True
        if req.server_assignor is not None and m.server_assignor != req.server_assignor:
            m.server_assignor, changed = req.server_assignor, True
        subscription = new
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != m.subscribed:
                m.subscribed = names
                subscription = changed = True
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None  # "" means no regex (librdkafka sends it so)
            if regex != m.regex:
                self._set_regex(m, regex)
                subscription = changed = True
        if subscription:
            self._consume(m, self._effective(m))
            old = self.space.refresh(self.catalogue, m.topic_names)
            if old is not None:
                self._remap(old)
            self._set_topics(m)
        if changed:
            self.stage_member_metadata(m)
        return subscription

    # ---- membership changes ---------------------------------------------------------------------------------------

    def released(self, holder: ConsumerMember) -> bool:
        """Released with -2, or a classic member (it never sends -2): replaced at once, as in Kafka."""
        return holder.member_epoch == TEMPORARY_LEAVE_EPOCH or holder.classic is not None

    def hand_over(self, old: ConsumerMember, m: ConsumerMember) -> None:
        """The replacement consumes what the old member did, and uses its regex (counted again: the old member's
        are uncounted as it goes)."""
        m.topic_names, m.regex = (), None
        self._set_regex(m, old.regex)
        names = old.topic_names
        self.remove_member(old, bump=False)
        self._consume(m, names)

    def fence(self, m: ConsumerMember, why: str = "") -> Group:
        """A member leaves or is fenced: removed, the epoch bumped; or, when it is the last consumer-protocol member
        beside classic ones and downgrades are allowed, the group goes back to the classic protocol (Kafka's
        validateOnlineDowngradeWithFencedMembers / convertToClassicGroup), which then rebalances. (`why` is for a
        history, which a consumer group does not keep: its events carry the trigger.)"""
        # `any` stops at the first other consumer-protocol member: in a group of them this costs one or two
        # looks, not a pass over the members at every fence (a session-expiry storm would be quadratic).
        if (m.classic is None and self.downgrade is not None and self.config.downgrade_enabled()
                and 1 < len(self.members) <= self.config.group_max_size + 1
                and not any(x.classic is None for x in self.members.values() if x is not m)):
            self.remove_member(m, bump=False)
            return self.downgrade(self, True)
        self.remove_member(m, bump=True)
        return self

    def remove_member(self, m: ConsumerMember, *, bump: bool) -> None:
        """Fence or remove a member (forget_member), what it consumed uncounted, and (unless it is being replaced) the
        group epoch bumped."""
        self.forget_member(m)
        self._consume(m, ())
        self._set_regex(m, None)
        if bump:
            self.bump()

    def catch_up(self, bump: bool) -> None:
        """After a member's change: bump the group epoch if it (or a change in the topics) calls for it, and
        see to the target the group then owes (owe_target)."""
        if bump or self.catalogue_version != self.catalogue.version:
            bump = self.refresh_metadata() or bump
        if bump:
            self.bump()
        if self.group_epoch > self.assignment_epoch:
            self.owe_target()

    def owe_target(self) -> None:
        """The group epoch is past the assignment epoch: compute the target now if the last computation is at least
        group.consumer.assignment.interval.ms old (or there was none since the group was made or loaded, or the
        interval is 0); else once that interval is over, on the group's timer, so that every change in between
        (a thousand joins) costs one computation (Kafka 4.3, KIP-1263). Meanwhile each member reconciles towards
        the previous target: a member that joins gets the assignment epoch and nothing yet."""
        wait = self.interval_wait_ms(self.computed_at, self.config.group_consumer_assignment_interval_ms)
        if wait and self.assignment_epoch:
            if not self.group_timers.is_armed(ASSIGN):
                self.group_timers.arm(ASSIGN, wait)
            return
        self.group_timers.cancel(ASSIGN)
        self.compute_target()

    def on_group_timer(self, kind: str) -> None:
        """The assignment interval is over: the target a change made owed is computed (the topics looked at again
        first, as a heartbeat's catch_up does)."""
        if kind == ASSIGN and not self.dead:
            self.catch_up(False)

    def bump(self) -> None:
        self.group_epoch += 1
        if self.store.persistent:
            self.store.stage(R.consumer_group_key(self.group_id),
                             R.consumer_group_value(wire.ConsumerGroupMetadataValue(epoch=self.group_epoch)))
        trigger, reason = self.change or ("metadata-change", "")
        self.change = None
        self.events.rebalance_started("consumer", self.group_id, self.group_epoch, len(self.members), trigger, reason)

    def refresh_metadata(self) -> bool:
        """Resolve the members' regexes again and compare the subscribed topics with the catalogue; True (and the
        metadata record staged) if what a member consumes, or the partition counts the target was computed from,
        changed: the epoch must move. (Kafka resolves regexes in the background and bumps when the result differs;
        the catalogue is local here, so kcoord resolves at once.)"""
        self.catalogue_version = self.catalogue.version
        resolved = False
        for m in self.regex_members.values():  # not every member: a join into 10,000 would pass over them all
            if self._consume(m, self._effective(m)):
                resolved = True
        now: dict[str, tuple[bytes, int]] = {}
        for name in self.subscribers:
            t = self.catalogue.get(name)
            if t is not None:
                now[name] = (t.topic_id, t.partitions)
        if now == self.metadata and not resolved:
            return False
        self.metadata = now
        old = self.space.refresh(self.catalogue, now)
        if old is not None:
            self._remap(old)
        for m in self.members.values():
            self._set_topics(m)
        if self.store.persistent:
            self.store.stage(R.consumer_partition_metadata_key(self.group_id), R.consumer_partition_metadata_value(
                wire.ConsumerGroupPartitionMetadataValue(topics=[
                    wire.ConsumerGroupPartitionMetadataValueTopicMetadata(
                        topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
                    for name, (tid, n) in sorted(now.items())])))
        return True

    def resolve(self, pattern: str) -> tuple[str, ...]:
        """The topics of the catalogue a regex matches, whole names (cached until the catalogue changes)."""
        hit = self.regexes.get(pattern)
        if hit is not None and hit[1] == self.catalogue.version:
            return hit[2]
        compiled = hit[0] if hit is not None else compile_regex(pattern)
        matches = tuple(sorted(n for n in self.catalogue.by_name if compiled.fullmatch(n)))
        self.regexes[pattern] = (compiled, self.catalogue.version, matches)
        return matches

    def _set_regex(self, m: ConsumerMember, regex: str | None) -> None:
        """Change the member's regex, counting the members of each pattern; a pattern nobody uses leaves the cache."""
        old = m.regex
        if old is not None:
            self.regex_users[old] -= 1
            if self.regex_users[old] <= 0:
                del self.regex_users[old]
                self.regexes.pop(old, None)
        m.regex = regex
        if regex is not None:
            self.regex_users[regex] += 1
            self.regex_members[m.member_id] = m
        else:
            self.regex_members.pop(m.member_id, None)

    def _effective(self, m: ConsumerMember) -> tuple[str, ...]:
        if m.regex is None:
            return m.subscribed
        return tuple(sorted(set(m.subscribed).union(self.resolve(m.regex))))

    def _consume(self, m: ConsumerMember, names: tuple[str, ...]) -> bool:
        """Set what the member consumes (counted per topic); True if it changed."""
        if names == m.topic_names:
            return False
        self.subscribers.subtract(m.topic_names)
        self.subscribers.update(names)
        self.subscribers += Counter()  # drop zero counts
        m.topic_names = names
        return True

    def _set_topics(self, m: ConsumerMember) -> None:
        catalogue = self.catalogue  # a deleted topic keeps its place in the space, but no member consumes it
        m.topics = self.space.topic_indices(n for n in m.topic_names if n in catalogue)
        m.topics_key = tuple(m.topics.tolist())

    def _remap(self, old_start: np.ndarray) -> None:
        """The topic numbering moved (a topic gained partitions): every array follows."""
        space = self.space
        for m in self.members.values():
            m.assigned = space.remap(m.assigned, old_start)
            m.pending = space.remap(m.pending, old_start)
        self.target.flat = space.remap(self.target.flat, old_start)

    # ---- the target assignment ------------------------------------------------------------------------------------

    def preferred_assignor(self) -> str:
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor is not None)
        return votes.most_common(1)[0][0] if votes else self.assignors[0]

    def compute_target(self) -> None:
        """Run the group's assignor over every member's subscription (Kafka's TargetAssignmentBuilder); stage the
        targets that changed, then the assignment epoch. Vectorized over members: the only loops are the subscription
        sets and the records of the members whose target moved."""
        members = list(self.members.values())
        space = self.space
        if members:
            assignor = self.preferred_assignor()
            if assignor == "range":  # range deals in Kafka's member order
                order = kafka_order([m.member_id for m in members], [m.instance_id for m in members])
                members = [members[i] for i in order]
            ids = [m.member_id for m in members]
            sets: dict[tuple[int, ...], int] = {}
            member_sets = np.fromiter((sets.setdefault(m.topics_key, len(sets)) for m in members), dtype=np.int32,
                                      count=len(members))
            set_indptr = np.zeros(len(sets) + 1, dtype=np.int64)
            np.cumsum([len(k) for k in sets], out=set_indptr[1:])
            set_topics = np.fromiter((t for k in sets for t in k), dtype=np.int32, count=int(set_indptr[-1]))
            old_indptr, old = self.target.rows_for(ids)
            csr = assign_arrays(assignor, np.asarray(space.counts, dtype=np.int64), member_sets, set_indptr, set_topics,
                                owned_indptr=old_indptr if assignor == "uniform" else None,
                                owned_partitions=old if assignor == "uniform" else None)
            new_indptr, new = csr.indptr, csr.partitions.astype(np.int32, copy=False)
            self.target.set(ids, new_indptr, new)
            if self.store.persistent:
                rows = np.flatnonzero(csr_changed(old_indptr, old, new_indptr, new))
                stage = self.store.stage
                for key, value in self.target_member_records([ids[i] for i in rows.tolist()],
                                                             *csr_take(new_indptr, new, rows)):
                    stage(key, value)
        self.assignment_epoch = self.group_epoch
        self.computed_at = self.timers.clock.now_ms()
        if self.store.persistent:
            self.store.stage(R.consumer_target_metadata_key(self.group_id), R.consumer_target_metadata_value(
                wire.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=self.assignment_epoch)))

    # ---- reconciliation -------------------------------------------------------------------------------------------

    def step_inputs(self, m: ConsumerMember, owned) -> tuple[np.ndarray, object, dict[bytes, int]]:
        """`owned`: None, an id array, or the request's TopicPartitions as they came (the step reads their topic
        ids)."""
        return m.topics, owned, self.space.by_topic_id

    # ---- timers ---------------------------------------------------------------------------------------------------

    def session_timeout_ms(self, m: ConsumerMember) -> int:
        return m.classic.session_timeout_ms if m.classic is not None else self.config.group_consumer_session_timeout_ms

    # ---- records --------------------------------------------------------------------------------------------------

    def stage_member_metadata(self, m: ConsumerMember) -> None:
        if self.store.persistent:
            self.store.stage(R.consumer_member_key(self.group_id, m.member_id), R.consumer_member_value(
                wire.ConsumerGroupMemberMetadataValue(
                    instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed), subscribed_topic_regex=m.regex,
                    rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
                    classic_member_metadata=m.classic)))

    def _record_partitions(self, ids: np.ndarray, cls) -> list:
        return [cls(topic_id=self.space.topic_ids[t], partitions=ps) for t, ps in self.space.split(ids)]

    def target_member_records(self, member_ids: list[str], indptr: np.ndarray, flat: np.ndarray) \
            -> Iterator[tuple[bytes, bytes]]:
        """The ConsumerGroupTargetAssignmentMember records of these members' targets (a CSR over the topic space),
        byte for byte what stage_target_member writes, made without a message object each: a target computed for
        50,000 members writes 50,000 of them in one turn of the loop. A target over several topics takes the
        general encoder."""
        if not member_ids:
            return
        space = self.space
        prefix = R.consumer_target_member_key(self.group_id, "")[:-2]  # the type and the group id (keys: not flexible)
        topic = np.searchsorted(space.start, flat, side="right") - 1
        local = (flat - space.start[topic]).astype(">i4").tobytes()  # each partition within its topic, big-endian
        tids = space.topic_ids
        bounds = indptr.tolist()
        if flat.shape[0]:  # each row's first and last partition's topic (an empty row's are not read)
            first = topic[np.minimum(indptr[:-1], flat.shape[0] - 1)].tolist()
            last = topic[np.maximum(indptr[1:] - 1, 0)].tolist()
        else:
            first = last = [0] * len(member_ids)
        for i, mid in enumerate(member_ids):
            name = mid.encode()
            key = prefix + len(name).to_bytes(2, "big") + name
            a, b = bounds[i], bounds[i + 1]
            if a == b:
                yield key, EMPTY_TARGET_VALUE
            elif first[i] == last[i]:  # one topic: [TopicId, Partitions] once (compact arrays, no tagged fields)
                yield key, b"".join((TARGET_VALUE_ONE_TOPIC, tids[first[i]], uvarint(b - a + 1), local[4 * a:4 * b],
                                     b"\x00\x00"))
            else:
                yield key, R.consumer_target_member_value(wire.ConsumerGroupTargetAssignmentMemberValue(
                    topic_partitions=self._record_partitions(
                        flat[a:b], wire.ConsumerGroupTargetAssignmentMemberValueTopicPartition)))

    def stage_target_member(self, member_id: str, ids: np.ndarray) -> None:
        if self.store.persistent:
            self.store.stage(R.consumer_target_member_key(self.group_id, member_id), R.consumer_target_member_value(
                wire.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=self._record_partitions(
                    ids, wire.ConsumerGroupTargetAssignmentMemberValueTopicPartition))))

    def stage_current_assignment(self, m: ConsumerMember) -> None:
        if self.store.persistent:
            cls = wire.ConsumerGroupCurrentMemberAssignmentValueTopicPartitions
            self.store.stage(R.consumer_current_assignment_key(self.group_id, m.member_id),
                             R.consumer_current_assignment_value(wire.ConsumerGroupCurrentMemberAssignmentValue(
                                 member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                                 state=m.state, assigned_partitions=self._record_partitions(m.assigned, cls),
                                 partitions_pending_revocation=self._record_partitions(m.pending, cls))))

    def on_loaded(self) -> None:
        """Apply the replayed records, now that the topic catalogue (whose records sort after the groups') is
        loaded, so topic ids can be placed in the group's topic space."""
        records, self._loaded = self._loaded, []
        by_topic_id = {t.topic_id: t.name for t in self.catalogue.by_name.values()}
        assigned: dict[str, wire.ConsumerGroupCurrentMemberAssignmentValue] = {}
        targets: dict[str, list] = {}
        for rec in records:
            v = rec.value
            if rec.type == R.CONSUMER_GROUP_METADATA:
                self.group_epoch = v.epoch
            elif rec.type == R.CONSUMER_GROUP_PARTITION_METADATA:
                self.metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
            elif rec.type == R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                self.assignment_epoch = v.assignment_epoch
            elif rec.type == R.CONSUMER_GROUP_MEMBER_METADATA:
                m = self.members.get(rec.key.member_id) or ConsumerMember(rec.key.member_id)
                self.members[m.member_id] = m
                m.instance_id, m.rack_id, m.client_id, m.client_host = v.instance_id, v.rack_id, v.client_id, \
                    v.client_host
                m.subscribed = tuple(sorted(set(v.subscribed_topic_names)))
                m.regex, m.rebalance_timeout_ms, m.server_assignor = v.subscribed_topic_regex or None, \
                    v.rebalance_timeout_ms, v.server_assignor
                m.classic = v.classic_member_metadata
            elif rec.type == R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
                targets[rec.key.member_id] = v.topic_partitions
            elif rec.type == R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                assigned[rec.key.member_id] = v
        names = set(self.metadata)
        for m in self.members.values():
            if m.regex is not None:
                try:
                    self.resolve(m.regex)
                except re2.error:
                    m.regex = None  # accepted when it was written; a different RE2 may refuse it: names only
                else:
                    self.regex_users[m.regex] += 1
                    self.regex_members[m.member_id] = m
            self._consume(m, self._effective(m))
            names.update(m.topic_names)
            if m.instance_id is not None:
                self.static[m.instance_id] = m.member_id
        for tps in [*targets.values(), *(a.assigned_partitions for a in assigned.values()),
                    *(a.partitions_pending_revocation for a in assigned.values())]:
            names.update(by_topic_id[tp.topic_id] for tp in tps if tp.topic_id in by_topic_id)
        self.space.refresh(self.catalogue, sorted(names))
        self.catalogue_version = -1  # compare the catalogue with the stored metadata at the next heartbeat
        self.target.load({mid: self.space.from_wire(tps) for mid, tps in targets.items()})
        for m in self.members.values():
            self._set_topics(m)
            a = assigned.get(m.member_id)
            if a is not None:
                self.load_current(m, a, self.space.from_wire(a.assigned_partitions),
                                  self.space.from_wire(a.partitions_pending_revocation))
            self.arm_loaded(m)

    # ---- ConsumerGroupDescribe ------------------------------------------------------------------------------------

    def _describe_assignment(self, ids: np.ndarray) -> wire.ConsumerGroupDescribeResponseAssignment:
        return wire.ConsumerGroupDescribeResponseAssignment(topic_partitions=[
            wire.ConsumerGroupDescribeResponseTopicPartitions(topic_id=self.space.topic_ids[t],
                                                              topic_name=self.space.names[t], partitions=ps)
            for t, ps in self.space.split(ids)])

    def consumer_described(self) -> wire.ConsumerGroupDescribeResponseDescribedGroup:
        return wire.ConsumerGroupDescribeResponseDescribedGroup(
            error_code=E.NONE, group_id=self.group_id, group_state=self.state_name, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=self.preferred_assignor(),
            members=[wire.ConsumerGroupDescribeResponseMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                subscribed_topic_regex=m.regex, assignment=self._describe_assignment(m.assigned),
                target_assignment=self._describe_assignment(self.target.get(m.member_id, _NONE)),
                member_type=CONSUMER_MEMBER_TYPE if m.classic is None else CLASSIC_MEMBER_TYPE)
                for m in self.members.values()])

    def describe_extension(self) -> dict:
        """What `kcoord describe` shows beyond ConsumerGroupDescribe: each member's state and pending revocation."""
        return {m.member_id: {"state": MEMBER_STATES.get(m.state, str(m.state)),
                              "previous_member_epoch": m.previous_member_epoch,
                              "pending_revocation": {self.space.names[t]: ps for t, ps in self.space.split(m.pending)}}
                for m in self.members.values()}
