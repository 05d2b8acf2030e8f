"""What the router needs from any group type, what every group type is made with, and the timers they share.

A group type (classic, consumer, connect) is a class under kcoord/groups/ that satisfies `Group`
and names the record types it replays. The router (kcoord.coordinator) finds a group by id, calls it, and
dispatches stored records to it by record type; committed offsets are not the group's (kcoord.offsets keeps them
by group id, whatever the group's type), but the group decides whether a member may commit or fetch them. This
mirrors Kafka's `Group` interface and `GroupCoordinatorShard.replay`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from .. import records as R
from .. import wire
from ..config import GroupConfig
from ..events import NO_EVENTS, GroupEvents
from ..reply import Reply
from ..timers import Timers
from ..topics import TopicCatalogue

# The describe APIs (DescribeGroups v5+, ConsumerGroupDescribe, ConnectGroupDescribe) carry kcoord's own view of a
# group (generation and history, or member states and pending revocations) as JSON in a tagged field with this tag,
# only to a request that carries the same tag (Coordinator._with_extension): `kcoord describe` asks and reads it.
# Other callers get Kafka's answer alone (Kafka's readers skip an unknown tag, but strict decoders refuse it).
KCOORD_DESCRIBE_TAG = 10_000


@dataclass(eq=False)
class GroupContext:
    """What every group is made with, in one piece (Coordinator.new_group): its settings, the coordinator's
    timers, where it stages its records, the topic catalogue (which the modern types read), the coordinator's
    group events, and the conversion hook a consumer group calls to go back to the classic protocol when its last
    consumer-protocol member leaves (kcoord.groups.migration.downgrade; None: a group made outside a coordinator)."""

    config: GroupConfig
    timers: Timers
    store: RecordSink
    topics: TopicCatalogue | None = None
    events: GroupEvents = NO_EVENTS
    downgrade: Callable[[Any, bool], Any] | None = None


class GroupBase:
    """What every group type keeps of its GroupContext, made in one place: `Group` is what the router asks of a
    group; this is the construction the group types share (ClassicGroup, and ModernGroup for the consumer and
    connect types)."""

    events: GroupEvents = NO_EVENTS  # the coordinator's (GroupContext.events)
    group_id: str
    config: GroupConfig
    timers: Timers
    store: RecordSink

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        self.group_id = group_id
        self.events = ctx.events
        self.config = ctx.config
        self.timers = ctx.timers
        self.store = ctx.store


class RecordSink(Protocol):
    """Where a group stages its records (kcoord.store.GroupStore, or NullStore when nothing is kept)."""

    persistent: bool  # False: nothing is kept, so a group need not even build its records

    def stage(self, key: bytes, value: bytes | None) -> None:
        """Write with the next commit (None: a tombstone); the commit happens before any response leaves."""

    def wall_ms(self) -> int:
        """The wall clock records carry (commit and state timestamps)."""


class Group(Protocol):
    """A group as the router, the offsets and the store see it: every method the router (kcoord.coordinator) calls
    on a group whatever its type, declared here so the type checker holds each group type to it. A request of
    another protocol than the group's own (a classic JoinGroup to a connect group) is answered by the group: with
    its classic members (a consumer group's migration), or with the error Kafka gives."""

    GROUP_TYPE: ClassVar[str]  # "classic", "consumer", "connect": ListGroups' group_type and the types filter
    RECORD_TYPES: ClassVar[tuple[int, ...]]  # the record types (kcoord.records) this type stages and replays

    group_id: str
    events: GroupEvents  # the coordinator's (GroupContext.events)

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        """How the router makes a group: its id and the one GroupContext every group shares."""

    @property
    def members(self) -> Collection[str]:
        """The member ids (the router prunes what it keeps per member to them, and counts them)."""

    # The classic protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), on a group of any type.

    def join(self, req: wire.JoinGroupRequest, version: int, client_id: str, client_host: str) -> Reply:
        """JoinGroup: the Reply may be parked until the rebalance completes."""

    def sync(self, req: wire.SyncGroupRequest, version: int) -> Reply:
        """SyncGroup: the Reply may be parked until the leader's assignment arrives."""

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> int:
        """Heartbeat: 0, or the Kafka error code of the answer."""

    def leave(self, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of (member id, instance id, reason) each: the top-level error and one error per member."""

    def describe_extension(self) -> dict[str, Any]:
        """kcoord's own view of the group (KCOORD_DESCRIBE_TAG), as JSON-ready data."""

    @property
    def state_name(self) -> str:
        """The state as Kafka names it in ListGroups and the describe APIs ("Stable", "Empty", "Dead", ...)."""

    @property
    def is_dead(self) -> bool:
        """Deleted or unloaded: answered as if it did not exist."""

    def is_empty(self) -> bool:
        """No members: the group may be deleted, and replaced by another type when a member of it arrives."""

    def listed(self) -> wire.ListGroupsResponseListedGroup: ...

    def described(self, version: int) -> wire.DescribeGroupsResponseDescribedGroup: ...

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_or_epoch: int,
                               version: int) -> int:
        """0, or the Kafka error code that refuses an OffsetCommit from this member."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """0, or the Kafka error code that refuses an OffsetFetch from this member."""

    def validate_offset_delete(self) -> int:
        """0, or the Kafka error code that refuses an OffsetDelete on this group."""

    def validate_delete(self) -> int:
        """0, or the Kafka error code that refuses DeleteGroups on this group."""

    def subscribed_topics(self) -> set[str]:
        """The topics its members consume (OffsetDelete refuses their partitions)."""

    def offset_expiration(self) -> tuple[int | None, set[str]] | None:
        """Kafka's offsetExpirationCondition and isSubscribedToTopic: None when none of the group's offsets may
        expire now; else (base, kept): an offset expires offsets.retention.minutes after `base` (None: after its own
        commit timestamp), unless its topic is in `kept`."""

    def removable(self, now_ms: int, retention_ms: int) -> bool:
        """Whether the group goes when it has no offsets left (Kafka's maybeDeleteGroup: when it is Empty)."""

    def replay(self, record: R.Record) -> None:
        """Apply one stored record of one of RECORD_TYPES (the router creates the group first)."""

    def on_loaded(self) -> None:
        """Every record is replayed: arm timers, and start what Kafka starts on load."""

    def record_keys(self) -> Iterable[bytes]:
        """The keys of the group's own records, tombstoned when the group is deleted."""

    def unload(self) -> None:
        """The group moves away or is deleted: answer what is parked, release timers."""


def _unloaded(member_id: str, kind: str) -> None:
    """What a cleared MemberTimers calls: nothing (its keys are released, so nothing fires)."""


class MemberTimers:
    """Per-member deadlines keyed by (member id, kind) over the coordinator's one deadline heap.

    A kind is a name the group type chooses (a classic group's "session" and "pending"; a modern group's "session"
    and "rebalance", and a consumer group's "join" and "sync" for its classic members); every key fires
    `expired(member_id, kind)`. A deadline of the whole group is not a member's: it goes in `GroupTimers`, never
    under an empty member id. `key()` hands out the heap key so a hot path (a compiled heartbeat) can cache it on
    the member and move its deadline with one `Timers.arm`, which does not allocate. Keys are taken and given back
    in the order the group asks, so firing order among equal deadlines (the heap breaks ties by key) is the
    group's own.
    """

    __slots__ = ("expired", "keys", "owner", "timers")

    def __init__(self, timers: Timers, expired: Callable[[str, str], None]) -> None:
        self.timers = timers
        self.expired = expired
        self.keys: dict[tuple[str, str], int] = {}
        self.owner: dict[int, tuple[str, str]] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def key(self, member_id: str, kind: str) -> int:
        """The heap key of (member, kind), made (not armed) if it has none yet."""
        mk = (member_id, kind)
        k = self.keys.get(mk)
        if k is None:
            k = self.timers.new(self._on_fire)
            self.keys[mk] = k
            self.owner[k] = mk
        return k

    def arm(self, member_id: str, kind: str, delay_ms: int) -> int:
        """(Re)arm `delay_ms` from now; returns the key."""
        k = self.key(member_id, kind)
        self.timers.arm(k, delay_ms)
        return k

    def is_armed(self, member_id: str, kind: str) -> bool:
        k = self.keys.get((member_id, kind))
        return k is not None and self.timers.is_armed(k)

    def cancel(self, member_id: str, kind: str) -> None:
        k = self.keys.get((member_id, kind))
        if k is not None:
            self.timers.cancel(k)

    def release(self, member_id: str, kind: str) -> None:
        """Cancel and forget (member, kind); the key goes back to the heap for reuse."""
        k = self.keys.pop((member_id, kind), None)
        if k is not None:
            del self.owner[k]
            self.timers.release(k)

    def rename(self, old_id: str, new_id: str, kinds: Iterable[str]) -> None:
        """A member continues under a new id (a static member's replacement): its timers carry on unchanged."""
        for kind in kinds:
            k = self.keys.pop((old_id, kind), None)
            if k is not None:
                self.keys[(new_id, kind)] = k
                self.owner[k] = (new_id, kind)

    def clear(self) -> None:
        """Release every key (the group is unloaded), and let go of the group: without the cycle group -> timers ->
        group, a deleted group's memory is freed at once, not at the next full garbage collection."""
        for k in self.owner:
            self.timers.release(k)
        self.keys.clear()
        self.owner.clear()
        self.expired = _unloaded

    def _on_fire(self, key: int) -> None:
        member_id, kind = self.owner[key]
        self.expired(member_id, kind)


class GroupTimers:
    """A group's own deadlines, not any member's (a connect group's compute lease and scheduled delay), by kind,
    over the coordinator's deadline heap: each fires `expired(kind)`. Keys are made on first use, in the order
    the group asks, as MemberTimers makes its own."""

    __slots__ = ("expired", "keys", "owner", "timers")

    def __init__(self, timers: Timers, expired: Callable[[str], None]) -> None:
        self.timers = timers
        self.expired = expired
        self.keys: dict[str, int] = {}
        self.owner: dict[int, str] = {}

    def key(self, kind: str) -> int:
        k = self.keys.get(kind)
        if k is None:
            k = self.keys[kind] = self.timers.new(self._on_fire)
            self.owner[k] = kind
        return k

    def arm(self, kind: str, delay_ms: int) -> int:
        """(Re)arm `delay_ms` from now; returns the key."""
        k = self.key(kind)
        self.timers.arm(k, delay_ms)
        return k

    def is_armed(self, kind: str) -> bool:
        k = self.keys.get(kind)
        return k is not None and self.timers.is_armed(k)

    def cancel(self, kind: str) -> None:
        k = self.keys.get(kind)
        if k is not None:
            self.timers.cancel(k)

    def clear(self) -> None:
        """Release every key (the group is unloaded) and let go of the group (no cycle through the timers)."""
        for k in self.owner:
            self.timers.release(k)
        self.keys.clear()
        self.owner.clear()
        self.expired = _unloaded_group

    def _on_fire(self, key: int) -> None:
        self.expired(self.owner[key])


def _unloaded_group(kind: str) -> None:
    """What an unloaded group's timers call, should one still fire: nothing."""
