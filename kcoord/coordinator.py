"""The router: finds each request's group by id and type, calls it, and owns the clock, the timers, the offsets
and the store. No sockets: `handle()` takes a decoded request and returns a response or a Reply (answered, or
parked until the group answers it). The server (kcoord.server) and the tests drive it the same way.

Handlers are keyed by `wire.<Message>.API_KEY`. Group logic lives in the group types (kcoord/groups/), offsets in
kcoord.offsets; on start, `load()` replays the store's records by record type, as Kafka's
GroupCoordinatorShard.replay does. A new group type is a class under kcoord/groups/ named in GROUP_TYPES.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, TypeVar, cast

import re2

from . import errors as E
from . import records as R
from . import wire
from .config import GroupConfig
from .events import GroupEvents
from .groups.base import KCOORD_DESCRIBE_TAG, Group, GroupContext
from .groups.classic import ClassicGroup
from .groups.connect import ConnectGroup
from .groups.connect import validate_heartbeat as validate_connect_heartbeat
from .groups.consumer import ConsumerGroup, compile_regex, validate_heartbeat
from .groups.migration import downgrade, upgrade, validate_upgrade
from .offsets import Offsets
from .reply import Deferred, Reply
from .security.acls import Acls
from .security.credentials import Credentials
from .store import GroupStore, NullStore, StoreError
from .timers import Clock, Timers
from .topics import Topic, TopicCatalogue

G = TypeVar("G", bound=Group)  # a group type
From = TypeVar("From", bound=Group)  # the type a group is converted from

# Every group type, and the record types each one replays.
# Typed as Group classes, so the type checker holds each group type to the Group protocol.
GROUP_TYPES: tuple[type[Group], ...] = (ClassicGroup, ConsumerGroup, ConnectGroup)
GROUP_TYPE_BY_RECORD: dict[int, type[Group]] = {t: cls for cls in GROUP_TYPES for t in cls.RECORD_TYPES}

# The retention check (Kafka's GroupCoordinatorShard.cleanupGroupMetadata) runs in slices: one timer fire does up to
# this many units of work (`expire_slice`), then yields to the event loop (the next slice is 1 ms later), so 100,000
# groups never hold the loop for more than a few milliseconds at a time.
EXPIRY_SLICE = 2_000
EXPIRY_SLICE_MS = 2.0  # and no slice runs longer than this
# DeleteGroups and ListGroups of many groups (issue 30: 100,000 held the loop for a second) run in slices too, in the
# server (`slice_long_requests`): a slice does up to LONG_SLICE units (a group listed 1, a group deleted 8 plus its
# offsets and members) and at most LONG_SLICE_MS, the answer parked until the last; requests of other connections
# are served between slices. Each group is deleted whole, in one slice (Kafka deletes a group in one write).
LONG_SLICE = 2_000
LONG_SLICE_MS = 2.0
# Freed store pages go back to the filesystem in steps (SQLite's incremental vacuum moves pages, about 0.1 ms each):
# the number of pages per step adapts so that a step takes about RECLAIM_STEP_TARGET_MS, one step per RECLAIM_STEP_MS,
# starting RECLAIM_DELAY_MS after a deletion (its records are committed by then).
RECLAIM_PAGES = 32
RECLAIM_PAGES_RANGE = (4, 2048)
RECLAIM_STEP_TARGET_MS = 2.0
RECLAIM_STEP_MS = 10
RECLAIM_DELAY_MS = 1_000
# After this many groups are deleted (DeleteGroups, retention), the memory they held is given back to the OS.
TRIM_AFTER_GROUPS = 10_000

log = logging.getLogger("kcoord.coordinator")


def _libc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None (another C library). Python returns a freed object's small blocks to its own
    arenas and larger ones to malloc, which keeps freed memory for reuse; malloc_trim(0) gives its free pages back."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _libc_malloc_trim()


def compact_dict(d: dict) -> None:
    """Shrink a dict whose table is far larger than its entries need (a dict never shrinks as entries go): the same
    dict object, rebuilt, so every holder of it sees the change."""
    if sys.getsizeof(d) > 1 << 20 and sys.getsizeof(d) > 256 * (len(d) + 1):
        items = list(d.items())
        d.clear()
        d.update(items)


def release_memory(*tables: dict) -> None:
    """After a mass deletion: shrink the coordinator's big tables, then give malloc's free pages back."""
    for d in tables:
        compact_dict(d)
    if _malloc_trim is not None:
        _malloc_trim(0)


@dataclass
class LoadStats:
    groups: int = 0
    members: int = 0
    offsets: int = 0
    topics: int = 0
    acls: int = 0
    seconds: float = 0.0


class Coordinator:
    def __init__(self, config: GroupConfig | None = None, clock: Clock | None = None,
                 store: GroupStore | NullStore | None = None, topics: TopicCatalogue | None = None) -> None:
        self.config = config or GroupConfig()
        self.clock = clock or Clock()
        self.timers = Timers(self.clock)
        self.events = GroupEvents()  # what happens to groups, for the metrics endpoint and the log
        self._store = store if store is not None else NullStore()
        # In-process, each handle()/poll() commits what it staged before returning. The server turns this off
        # and commits once per event-loop turn, holding every response until then (kcoord.server).
        self.autocommit = True
        self.groups: dict[str, Group] = {}
        # A cluster node's test of whether it serves a group now (kcoord.cluster: its lease deadline has not
        # passed); ListGroups lists only those. None: every group here is served.
        self.serves: Callable[[str], bool] | None = None
        self.topics = topics if topics is not None else TopicCatalogue()
        self.offsets = Offsets(self.groups, self.classic_group, self._store, self.topics, self.clock,
                               self.config.offset_metadata_max_bytes, self.config.message_max_bytes)
        self.credentials = Credentials(self._store)  # SCRAM credentials and their admin APIs (KIP-554)
        self.acls = Acls(self._store)  # the ACLs, their authorizer and their admin APIs
        self.acls.long_request = self._long_request  # (many ACLs are listed, made or removed in slices)
        self.handlers: dict[int, Callable[..., Reply | Deferred | wire.Message]] = {
            wire.JoinGroupRequest.API_KEY: self.join_group,
            wire.SyncGroupRequest.API_KEY: self.sync_group,
            wire.HeartbeatRequest.API_KEY: self.heartbeat,
            wire.LeaveGroupRequest.API_KEY: self.leave_group,
            wire.DescribeGroupsRequest.API_KEY: self.describe_groups,
            wire.ListGroupsRequest.API_KEY: self.list_groups,
            wire.DeleteGroupsRequest.API_KEY: self.delete_groups,
            wire.ConsumerGroupHeartbeatRequest.API_KEY: self.consumer_group_heartbeat,
            wire.ConsumerGroupDescribeRequest.API_KEY: self.consumer_group_describe,
            wire.ConnectGroupHeartbeatRequest.API_KEY: self.connect_group_heartbeat,
            wire.ConnectGroupPrepareAssignmentRequest.API_KEY: self.connect_group_prepare,
            wire.ConnectGroupInstallAssignmentRequest.API_KEY: self.connect_group_install,
            wire.ConnectGroupDescribeRequest.API_KEY: self.connect_group_describe,
            **self.offsets.handlers,
            **self.credentials.handlers,
            **self.acls.handlers,
        }
        # Offset retention: a check every offsets.retention.check.interval.ms (from now, as Kafka schedules it when
        # the coordinator is loaded), each in slices (`expire_slice`).
        self.retention_ms = self.config.offsets_retention_minutes * 60_000
        self.groups_expired = 0  # Empty groups deleted by the retention check since start
        self._sweep: deque[str] = deque()  # group ids the check in progress has yet to visit
        self._sweep_group: tuple[str, list[tuple[str, int]], int] | None = None  # (id, its offsets' keys, position)
        self._sweep_tombstones = 0
        self.expiry_timer = self.timers.new(self._on_expiry_timer)
        self.timers.arm(self.expiry_timer, self.config.offsets_retention_check_interval_ms)
        self.reclaim_timer = self.timers.new(self._on_reclaim_timer)
        self._freed_groups = 0  # groups deleted since memory was last given back
        self._reclaim_pages = RECLAIM_PAGES  # pages per reclaim step, adapted to RECLAIM_STEP_TARGET_MS
        # Long requests in slices (the server turns it on; in-process, each is answered at once): queued in arrival
        # order, each a generator yielding the units of work it just did, its answer resolved when it is exhausted.
        self.slice_long_requests = False
        self._long: deque[tuple[Iterator[float], Callable[[], None]]] = deque()
        self.long_timer = self.timers.new(self._on_long_timer)
        # Served but not advertised: with the consumer protocol off, Kafka answers its APIs UNSUPPORTED_VERSION.
        self.consumer_protocol = "consumer" in self.config.rebalance_protocols()
        self.consumer_assignors = self.config.consumer_assignors()
        self.hidden_apis: set[int] = set() if self.consumer_protocol else {
            wire.ConsumerGroupHeartbeatRequest.API_KEY, wire.ConsumerGroupDescribeRequest.API_KEY}
        # Connect groups are kcoord's own: their private APIs are advertised only when enabled (answered
        # UNSUPPORTED_VERSION otherwise, as Kafka answers an API it has turned off).
        self.connect_protocol = "connect" in self.config.rebalance_protocols()
        if not self.connect_protocol:
            self.hidden_apis |= {wire.ConnectGroupHeartbeatRequest.API_KEY,
                                 wire.ConnectGroupPrepareAssignmentRequest.API_KEY,
                                 wire.ConnectGroupInstallAssignmentRequest.API_KEY,
                                 wire.ConnectGroupDescribeRequest.API_KEY}

    # ---- plumbing ----------------------------------------------------------------------------------

    @property
    def store(self) -> GroupStore | NullStore:
        return self._store

    @store.setter
    def store(self, store: GroupStore | NullStore) -> None:
        """Where groups created from now on, and the offsets, stage their records."""
        self._store = self.offsets.store = self.credentials.store = self.acls.store = store

    def write_refusals(self, error: int) -> dict[int, Callable[..., wire.Message]]:
        """Handlers for the APIs that write, answering `error` without touching any group: what the server serves
        while its store cannot write (a full disk). A consumer or connect group's heartbeat that changes nothing
        of its own (the quick path) is still served; any other, a join or a leave among them, is refused."""
        message = "The coordinator cannot write its state now; retry."

        def commit(req, version, client_id="", client_host=""):
            return wire.OffsetCommitResponse(topics=[wire.OffsetCommitResponseTopic(
                name=t.name, topic_id=t.topic_id, partitions=[
                    wire.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
                    for p in t.partitions]) for t in req.topics])

        def delete_groups(req, version, client_id="", client_host=""):
            return wire.DeleteGroupsResponse(results=[
                wire.DeleteGroupsResponseDeletableGroupResult(group_id=g, error_code=error)
                for g in dict.fromkeys(req.groups_names)])

        def steady_heartbeat(cls, enabled: str):
            # a modern group's heartbeat that changes nothing is answered; any other is refused
            def heartbeat(req, version, client_id="", client_host=""):
                g = self.groups.get(req.group_id)
                if type(g) is cls and getattr(self, enabled):
                    quick = g.quick_heartbeat(req, client_id, client_host)
                    if quick is not None:
                        return quick
                return cls.fail(error, message)
            return heartbeat

        consumer_heartbeat = steady_heartbeat(ConsumerGroup, "consumer_protocol")
        connect_heartbeat = steady_heartbeat(ConnectGroup, "connect_protocol")

        return {
            wire.JoinGroupRequest.API_KEY: lambda req, v, *_: wire.JoinGroupResponse(
                error_code=error, member_id=req.member_id, protocol_name="" if v < 7 else None),
            wire.SyncGroupRequest.API_KEY: lambda req, v, *_: wire.SyncGroupResponse(error_code=error),
            wire.LeaveGroupRequest.API_KEY: lambda req, v, *_: wire.LeaveGroupResponse(error_code=error, members=[]),
            wire.DeleteGroupsRequest.API_KEY: delete_groups,
            wire.OffsetCommitRequest.API_KEY: commit,
            wire.OffsetDeleteRequest.API_KEY: lambda req, v, *_: wire.OffsetDeleteResponse(error_code=error,
                                                                                           topics=[]),
            wire.ConsumerGroupHeartbeatRequest.API_KEY: consumer_heartbeat,
            wire.ConnectGroupHeartbeatRequest.API_KEY: connect_heartbeat,
            wire.ConnectGroupPrepareAssignmentRequest.API_KEY: lambda req, v, *_:
                wire.ConnectGroupPrepareAssignmentResponse(error_code=error, error_message=message),
            wire.ConnectGroupInstallAssignmentRequest.API_KEY: lambda req, v, *_:
                wire.ConnectGroupInstallAssignmentResponse(error_code=error, error_message=message),
            wire.AlterUserScramCredentialsRequest.API_KEY: lambda req, v, *_: self.credentials.refuse(req, error,
                                                                                                     message),
            wire.CreateAclsRequest.API_KEY: lambda req, v, *_: self.acls.refuse(req, wire.CreateAclsRequest.API_KEY,
                                                                                error, message),
            wire.DeleteAclsRequest.API_KEY: lambda req, v, *_: self.acls.refuse(req, wire.DeleteAclsRequest.API_KEY,
                                                                                error, message),
        }

    def handle(self, body: Any, version: int, client_id: str = "", client_host: str = "") -> Any:
        """Answer one decoded request, at the API its message type names (the caller has checked the API and
        version are supported).

        Returns the response message, or a Reply for JoinGroup and SyncGroup, which may be parked (and, with
        `slice_long_requests`, for a DeleteGroups or ListGroups longer than a slice). What the
        response acknowledges is durable when this returns. A StoreError means it is not: the response must not
        be sent, and the coordinator (whose memory is now ahead of its store) must be replaced by one loaded
        from the store, as the server does by stopping."""
        response = self.handlers[type(body).API_KEY](body, version, client_id or "", client_host)
        if type(response) is Deferred:  # the server makes these on its worker; a direct caller gets the response
            response = response.finish()
        store = self._store
        if store.dirty and self.autocommit:
            store.commit()
        return response

    def poll(self) -> int:
        """Fire every timer that is due by the clock; returns how many fired."""
        fired = self.timers.fire_due()
        store = self._store
        if store.dirty and self.autocommit:
            store.commit()
        return fired

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def group_context(self) -> GroupContext:
        """What a group is made with (read at each group's making: the store and settings as they are now)."""
        return GroupContext(self.config, self.timers, self._store, self.topics, self.events, self._downgrade)

    def new_group(self, cls: type[G], group_id: str) -> G:
        g = self.groups[group_id] = cls(group_id, self.group_context())
        return g

    def convert(self, old: From, cls: type[G], fill: Callable[[From, G], None]) -> G:
        """Online migration: a non-empty group becomes one of the other type, filled from it by `fill` (which
        stages the old group's tombstones and the new group's records); its offsets stay."""
        new = cls(old.group_id, self.group_context())
        fill(old, new)
        old.unload()
        self.groups[old.group_id] = new
        return new

    def _downgrade(self, g: ConsumerGroup, member_left: bool) -> ClassicGroup:
        return self.convert(g, ClassicGroup, lambda old, new: downgrade(old, new, member_left))

    def replace_group(self, old: Group, cls: type[G]) -> G:
        """An empty group of one type gives way to a group of another when a member of the other protocol arrives
        (Kafka's maybeDeleteEmptyClassicGroup and its converse): its records are tombstoned; its offsets stay."""
        if self._store.persistent:
            for key in old.record_keys():
                self._store.stage(key, None)
        old.unload()
        del self.groups[old.group_id]
        return self.new_group(cls, old.group_id)

    def classic_group(self, group_id: str) -> ClassicGroup:
        """The group a classic-protocol request or a simple consumer's commit creates (Kafka's
        getOrMaybeCreateClassicGroup)."""
        return self.new_group(ClassicGroup, group_id)

    def group(self, group_id: str, create: bool = False) -> Group | None:
        g = self.groups.get(group_id)
        if g is None and create:
            g = self.classic_group(group_id)
        return g

    # ---- replay ------------------------------------------------------------------------------------

    def load(self, records: Iterable[tuple[bytes, bytes]] | None = None) -> LoadStats:
        """Replay every stored record (or `records`: a cluster node's newly taken coordinator partitions) into
        this coordinator, dispatching on the record type: offsets to kcoord.offsets, topics to the catalogue,
        group records to their group type (creating the group on its first record). Then every group the records
        made is told it is loaded (timers, Kafka's onLoaded checks), and a group id that has offsets but no group
        record gets an Empty classic group, as Kafka's offset replay makes one. A record that cannot be read, or
        a group that is inconsistent, is a StoreError naming it."""
        t0 = time.perf_counter()
        stats = LoadStats()
        before = set(self.groups)
        offsets_before = self.offsets.count() if records is not None else 0
        offsets_replay = self.offsets.replay
        offset_types = (R.OFFSET_COMMIT_V0, R.OFFSET_COMMIT)
        by_record = GROUP_TYPE_BY_RECORD
        try:
            for key, value in self.store.scan() if records is None else records:
                rtype = (key[0] << 8 | key[1]) if len(key) >= 2 else -1
                if rtype in offset_types:
                    offsets_replay(key, value)
                    continue
                rec = R.decode(key, value)
                cls = by_record.get(rtype)
                if cls is not None:
                    issue = R.problem(rec)
                    if issue:
                        raise StoreError(issue)
                    group_id = cast(str, rec.group)  # a group type's record always names its group
                    g = self.groups.get(group_id)
                    if g is None:
                        g = self.new_group(cls, group_id)
                    elif type(g) is not cls:
                        raise StoreError(f"group {rec.group!r} has records of two group types "
                                         f"({g.GROUP_TYPE} and {cls.GROUP_TYPE})")
                    g.replay(rec)
                    groups, members = R.tally(rec)
                    stats.groups += groups
                    stats.members += members
                elif rtype == R.KCOORD_TOPIC:
                    t = cast(R.TopicRecord, rec.value)
                    self.topics.restore(Topic(t.name, t.topic_id, t.partitions))
                    stats.topics += 1
                elif rtype == R.KCOORD_SCRAM_CREDENTIAL:
                    self.credentials.replay(rec)
                elif rtype == R.KCOORD_ACL:
                    self.acls.replay(rec)
                    stats.acls += 1
        except R.RecordError as e:
            raise StoreError(str(e)) from None
        finally:
            self.offsets.replay_done()
            self.acls.loaded()
        for g in [g for gid, g in self.groups.items() if gid not in before]:
            try:
                g.on_loaded()
            except (ValueError, KeyError) as e:  # records that are each readable but together inconsistent
                raise StoreError(f"group {g.group_id!r} cannot be loaded: {e}") from None
        for group_id in self.offsets.by_group:
            if group_id not in self.groups:
                self.classic_group(group_id)
        stats.offsets = self.offsets.count() - offsets_before
        stats.seconds = time.perf_counter() - t0
        return stats

    def unload_groups(self, which: Callable[[str], bool]) -> int:
        """Forget every group (and its offsets) whose id `which` picks: a cluster node whose coordinator
        partition moved away. Parked requests are answered NOT_COORDINATOR. Returns how many groups went."""
        gone = [gid for gid in self.groups if which(gid)]
        for gid in gone:
            self.groups.pop(gid).unload()
        for gid in [gid for gid in self.offsets.by_group if which(gid)]:
            del self.offsets.by_group[gid]
        return len(gone)

    # ---- offset retention and reclaim --------------------------------------------------------------

    def _on_expiry_timer(self, key: int) -> None:
        if self._sweep_group is None and not self._sweep:
            self._sweep.extend(self.groups)  # a new check: every group there is now
            self._sweep_tombstones = 0
        if self.expire_slice(EXPIRY_SLICE):
            self.timers.arm(key, self.config.offsets_retention_check_interval_ms)
            if self._sweep_tombstones:  # as Kafka logs each cleanup
                log.info("offset retention check: %d tombstone(s) (expired offsets and deleted Empty groups)",
                         self._sweep_tombstones)
                self.schedule_reclaim()
        else:
            self.timers.arm(key, 1)  # the next slice, after the event loop has had a turn

    def expire_offsets(self) -> None:
        """One whole retention check now, in one go (Kafka's cleanupGroupMetadata): what the timer does in slices."""
        self._sweep.extend(self.groups)
        while not self.expire_slice(EXPIRY_SLICE):
            pass
        self.timers.arm(self.expiry_timer, self.config.offsets_retention_check_interval_ms)
        self.schedule_reclaim()
        store = self._store
        if store.dirty and self.autocommit:
            store.commit()

    def expire_slice(self, budget: int) -> bool:
        """Go on with the retention check for up to `budget` units of work (a group visited or an offset examined 1,
        an offset expired 4 more, a group deleted 8 more) or EXPIRY_SLICE_MS, whichever comes first; True when every
        group has been visited. For each group, Kafka's cleanupExpiredOffsets (kcoord.offsets.Offsets.expire) with
        the group's condition as it is at that moment, then maybeDeleteGroup: a group with no offsets left that
        may go (`removable`: Empty) is deleted, tombstones and all."""
        now = self.clock.wall_ms()
        retention = self.retention_ms
        by_group = self.offsets.by_group
        clock = time.perf_counter
        deadline = clock() + EXPIRY_SLICE_MS / 1000
        while budget > 0 and clock() < deadline:
            if self._sweep_group is None:
                if not self._sweep:
                    return True
                gid = self._sweep.popleft()
                budget -= 1
                if gid not in self.groups:
                    continue
                mine = by_group.get(gid)
                self._sweep_group = (gid, list(mine) if mine else [], 0)
            gid, keys, pos = self._sweep_group
            g = self.groups.get(gid)
            if g is None or g.is_dead:
                self._sweep_group = None
                continue
            if pos < len(keys):
                condition = g.offset_expiration()
                if condition is not None:
                    n = max(min(budget, len(keys) - pos, 1000), 1)
                    expired = self.offsets.expire(gid, islice(keys, pos, pos + n), *condition, now, retention)
                    self._sweep_tombstones += expired
                    budget -= n + 4 * expired
                    if pos + n < len(keys):
                        self._sweep_group = (gid, keys, pos + n)
                        continue
            self._sweep_group = None
            if gid not in by_group and g.removable(now, retention):
                self._delete_group(g)
                self.groups_expired += 1
                self._sweep_tombstones += 1
                budget -= 8
        return not self._sweep and self._sweep_group is None

    def _delete_group(self, g: Group) -> None:
        """The group goes: its offsets' and its own records' tombstones, its timers; parked requests answered."""
        self.offsets.delete_group(g.group_id)
        if self.store.persistent:
            for key in g.record_keys():
                self.store.stage(key, None)
        g.unload()
        del self.groups[g.group_id]
        self._freed_groups += 1

    def schedule_reclaim(self, delay_ms: int = RECLAIM_DELAY_MS) -> None:
        """After deletions: once what was deleted is committed, give the memory of many deleted groups back to the
        OS, and the store's freed pages back to the filesystem, a step at a time (a store that cannot, or has none,
        ends it at the first step)."""
        if not self.timers.is_armed(self.reclaim_timer):
            self.timers.arm(self.reclaim_timer, delay_ms)

    def _on_reclaim_timer(self, key: int) -> None:
        if self._freed_groups >= TRIM_AFTER_GROUPS:
            self._freed_groups = 0
            t0 = time.perf_counter()
            release_memory(self.groups, self.offsets.by_group)
            log.debug("gave the memory of deleted groups back in %.1f ms", (time.perf_counter() - t0) * 1e3)
        reclaim = getattr(self._store, "reclaim", None)
        if reclaim is None:
            return
        t0 = time.perf_counter()
        left = reclaim(self._reclaim_pages)
        took_ms = (time.perf_counter() - t0) * 1e3
        lo, hi = RECLAIM_PAGES_RANGE
        if took_ms < RECLAIM_STEP_TARGET_MS / 4:  # doubling more than doubles a step at times: grow cautiously
            self._reclaim_pages = min(self._reclaim_pages * 2, hi)
        elif took_ms > RECLAIM_STEP_TARGET_MS:
            self._reclaim_pages = max(self._reclaim_pages // 2, lo)
        if left > 0:
            self.timers.arm(key, RECLAIM_STEP_MS)

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
        if not isinstance(g, ClassicGroup) and g.is_empty() and req.member_id == "":
            g = self.replace_group(g, ClassicGroup)
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
                    client_host: str = "") -> wire.LeaveGroupResponse:
        members: list[tuple[str, str | None, str | None]]
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
            return wire.LeaveGroupResponse(error_code=top or errors[0])
        return wire.LeaveGroupResponse(error_code=top, members=[
            wire.LeaveGroupResponseMemberResponse(member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid, _), err in zip(members, errors, strict=True)])

    # ---- KIP-848: ConsumerGroupHeartbeat / ConsumerGroupDescribe ------------------------------------

    def consumer_group_heartbeat(self, req: wire.ConsumerGroupHeartbeatRequest, version: int, client_id: str = "",
                                 client_host: str = "") -> wire.ConsumerGroupHeartbeatResponse:
        g = self.groups.get(req.group_id)
        if type(g) is ConsumerGroup and self.consumer_protocol:
            quick = g.quick_heartbeat(req, client_id, client_host)  # a member at its epoch changing nothing of its own
            if quick is not None:
                return quick
        return self._consumer_group_heartbeat(req, version, client_id, client_host, g)

    def _consumer_group_heartbeat(self, req: wire.ConsumerGroupHeartbeatRequest, version: int, client_id: str,
                                  client_host: str, g: Group | None) -> wire.ConsumerGroupHeartbeatResponse:
        fail = ConsumerGroup.fail
        if not self.consumer_protocol:
            return fail(E.UNSUPPORTED_VERSION, "The consumer rebalance protocol is not enabled "
                        "(group.coordinator.rebalance.protocols).")
        problem = validate_heartbeat(req, version, self.consumer_assignors)
        if problem is not None:
            return fail(*problem)
        joining = req.member_epoch == 0
        if g is not None and not isinstance(g, ConsumerGroup):
            if not joining:
                return fail(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            if g.is_empty():
                g = self.replace_group(g, ConsumerGroup)
            elif not isinstance(g, ClassicGroup):  # a connect group: only a classic group can be upgraded
                return fail(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            else:  # the first consumer-protocol member of a live classic group: online upgrade
                refused = validate_upgrade(g, self.config)
                if refused is not None:
                    return fail(E.GROUP_ID_NOT_FOUND, refused)
                # Kafka converts and joins in one write: a join that fails leaves the group classic. The two
                # ways a join into a group of classic members can fail are checked before converting.
                if len(g.members) >= self.config.group_consumer_max_size:
                    return fail(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                f"{self.config.group_consumer_max_size} members.")
                if req.subscribed_topic_regex:
                    try:
                        compile_regex(req.subscribed_topic_regex)
                    except re2.error as e:
                        return fail(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex "
                                    f"{req.subscribed_topic_regex!r} is not a valid regular expression: {e}")
                g = self.convert(g, ConsumerGroup, upgrade)
        created = g is None
        if g is None:
            if not joining:
                return fail(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            g = self.new_group(ConsumerGroup, req.group_id)
        response = g.consumer_heartbeat(req, version, client_id, client_host)
        if created and g.is_empty():
            del self.groups[req.group_id]  # the join failed: the group never came to be (Kafka writes nothing)
        return response

    # ---- who the members are (authenticated principals) ---------------------------------------------------

    def note_principal(self, group_id: str, member_id: str, principal: str) -> None:
        """The member `member_id` of `group_id` sent a request as `principal` (a listener that authenticates):
        `describe` shows it. Kept on the group, pruned to its members as it grows, gone with the group."""
        g = self.groups.get(group_id)
        if g is None or not member_id:
            return
        # The router's own note on the group, in its __dict__ (no group type declares it)
        seen = g.__dict__.get("principals")
        if seen is None:
            seen = g.__dict__["principals"] = {}
        seen[member_id] = principal
        if len(seen) > 2 * len(g.members) + 16:
            g.__dict__["principals"] = {m: p for m, p in seen.items() if m in g.members}

    @staticmethod
    def principals(g) -> dict[str, str]:
        """The principal of each member of `g` that authenticated."""
        seen = g.__dict__.get("principals") or {}
        return {m: p for m, p in seen.items() if m in g.members}

    def _with_extension(self, req, described, g, per_member: bool):
        """`described` (a group's describe answer) with kcoord's extension when the request asked for it (tagged
        field KCOORD_DESCRIBE_TAG, whatever its value): the group's `describe_extension()` and its members'
        principals, as JSON. Without the ask the answer is Kafka's alone, which strict decoders read."""
        if not any(tag == KCOORD_DESCRIBE_TAG for tag, _ in req.unknown_tags or ()):
            return described
        doc = g.describe_extension()
        seen = self.principals(g)
        if per_member:
            for mid, p in seen.items():
                if isinstance(doc.get(mid), dict):
                    doc[mid]["principal"] = p
        elif seen:
            doc["principals"] = seen
        described.unknown_tags = [(KCOORD_DESCRIBE_TAG, json.dumps(doc, separators=(",", ":")).encode())]
        return described

    def consumer_group_describe(self, req: wire.ConsumerGroupDescribeRequest, version: int, client_id: str = "",
                                client_host: str = "") -> wire.ConsumerGroupDescribeResponse:
        out = []
        for gid in dict.fromkeys(req.group_ids):  # each once: a repeated id cannot multiply the answer
            g = self.groups.get(gid)
            if not self.consumer_protocol:  # Kafka: the whole request fails when consumer groups are off
                out.append(wire.ConsumerGroupDescribeResponseDescribedGroup(
                    error_code=E.UNSUPPORTED_VERSION, group_id=gid))
            elif isinstance(g, ConsumerGroup) and not g.is_dead:
                out.append(self._with_extension(req, g.consumer_described(), g, True))
            else:
                msg = f"Group {gid} is not a consumer group." if g is not None and not g.is_dead else \
                    f"Group {gid} not found."
                out.append(wire.ConsumerGroupDescribeResponseDescribedGroup(
                    error_code=E.GROUP_ID_NOT_FOUND, error_message=msg, group_id=gid))
        return wire.ConsumerGroupDescribeResponse(groups=out)

    # ---- connect groups: ConnectGroupHeartbeat / PrepareAssignment / InstallAssignment / Describe ----

    def connect_group_heartbeat(self, req: wire.ConnectGroupHeartbeatRequest, version: int, client_id: str = "",
                                client_host: str = "") -> wire.ConnectGroupHeartbeatResponse:
        g = self.groups.get(req.group_id)
        if type(g) is ConnectGroup and self.connect_protocol:
            quick = g.quick_heartbeat(req, client_id, client_host)
            if quick is not None:
                return quick
        fail = ConnectGroup.fail
        if not self.connect_protocol:
            return fail(E.UNSUPPORTED_VERSION, "Connect groups are not enabled (group.coordinator.rebalance.protocols).")
        problem = validate_connect_heartbeat(req)
        if problem is not None:
            return fail(*problem)
        if g is not None and not isinstance(g, ConnectGroup):
            if req.member_epoch != 0 or not g.is_empty():
                # Offline migration only (docs/connect-protocol.md D21): an empty group of another type gives way, a live one does not.
                return fail(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a connect group.")
            g = self.replace_group(g, ConnectGroup)
        created = g is None
        if g is None:
            if req.member_epoch != 0:
                return fail(E.GROUP_ID_NOT_FOUND, f"Connect group {req.group_id} not found.")
            g = self.new_group(ConnectGroup, req.group_id)
        response = g.connect_heartbeat(req, client_id, client_host)
        if created and g.is_empty():
            del self.groups[req.group_id]  # the join failed: the group never came to be
        return response

    def _connect_group_for(self, group_id: str, member_id: str, member_epoch: int) -> tuple[ConnectGroup | None, int,
                                                                                              str]:
        if not self.connect_protocol:
            return None, E.UNSUPPORTED_VERSION, "Connect groups are not enabled."
        if not group_id or not member_id or member_epoch < 0:
            return None, E.INVALID_REQUEST, "GroupId and MemberId can't be empty; MemberEpoch must be at least 0."
        g = self.groups.get(group_id)
        if not isinstance(g, ConnectGroup) or g.is_dead:
            return None, E.GROUP_ID_NOT_FOUND, f"Connect group {group_id} not found."
        return g, E.NONE, ""

    def connect_group_prepare(self, req: wire.ConnectGroupPrepareAssignmentRequest, version: int, client_id: str = "",
                              client_host: str = "") -> wire.ConnectGroupPrepareAssignmentResponse:
        g, error, message = self._connect_group_for(req.group_id, req.member_id, req.member_epoch)
        if g is None:
            return wire.ConnectGroupPrepareAssignmentResponse(error_code=error, error_message=message)
        return g.prepare(req)

    def connect_group_install(self, req: wire.ConnectGroupInstallAssignmentRequest, version: int, client_id: str = "",
                              client_host: str = "") -> wire.ConnectGroupInstallAssignmentResponse:
        g, error, message = self._connect_group_for(req.group_id, req.member_id, req.member_epoch)
        if g is None:
            return wire.ConnectGroupInstallAssignmentResponse(error_code=error, error_message=message)
        return g.install(req)

    def connect_group_describe(self, req: wire.ConnectGroupDescribeRequest, version: int, client_id: str = "",
                               client_host: str = "") -> wire.ConnectGroupDescribeResponse:
        out = []
        for gid in dict.fromkeys(req.group_ids):  # each once: a repeated id cannot multiply the answer
            g = self.groups.get(gid)
            if isinstance(g, ConnectGroup) and not g.is_dead and self.connect_protocol:
                out.append(self._with_extension(req, g.connect_described(), g, False))
            else:
                msg = f"Group {gid} is not a connect group." if g is not None and not g.is_dead else \
                    f"Group {gid} not found."
                out.append(wire.ConnectGroupDescribeResponseDescribedGroup(
                    error_code=E.GROUP_ID_NOT_FOUND, error_message=msg, group_id=gid, group_state="Dead"))
        return wire.ConnectGroupDescribeResponse(groups=out)

    # ---- describe / list / delete -----------------------------------------------------------------

    def describe_groups(self, req: wire.DescribeGroupsRequest, version: int, client_id: str = "",
                        client_host: str = "") -> wire.DescribeGroupsResponse:
        out = []
        for gid in dict.fromkeys(req.groups):  # each once: a repeated id cannot multiply the answer
            g = self.groups.get(gid)
            if g is None or g.is_dead:
                out.append(wire.DescribeGroupsResponseDescribedGroup(
                    error_code=E.NONE, group_id=gid, group_state="Dead"))
            elif version >= 5 and isinstance(g, ClassicGroup):  # v5+: flexible, a tag can carry the extension
                out.append(self._with_extension(req, g.described(version), g, False))
            else:
                out.append(g.described(version))
        return wire.DescribeGroupsResponse(groups=out)

    def list_groups(self, req: wire.ListGroupsRequest, version: int, client_id: str = "",
                    client_host: str = "") -> wire.ListGroupsResponse | Reply:
        """The groups there are when the request arrives (those deleted before their slice is reached are left out,
        as a later listing would), built in slices (`slice_long_requests`)."""
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        out: list = []
        serves = self.serves

        def listing() -> Iterator[int]:
            for g in list(self.groups.values()):
                if g.is_dead or (serves is not None and not serves(g.group_id)):
                    pass
                elif states and g.state_name.lower() not in states:
                    pass
                elif types and g.GROUP_TYPE not in types:
                    pass
                else:
                    out.append(g.listed())
                yield 1

        return self._long_request(listing(), lambda: wire.ListGroupsResponse(error_code=E.NONE, groups=out), version)

    def delete_groups(self, req: wire.DeleteGroupsRequest, version: int, client_id: str = "",
                      client_host: str = "") -> wire.DeleteGroupsResponse | Reply:
        """Each group in the order named, validated when its turn comes (a group that gained a member before its
        slice is NON_EMPTY_GROUP), and deleted whole, in slices (`slice_long_requests`)."""
        results: list = []
        deleted = False

        def deleting() -> Iterator[int]:
            nonlocal deleted
            for gid in req.groups_names:
                g = self.groups.get(gid)
                if not gid:
                    err = E.INVALID_GROUP_ID
                elif g is None:
                    err = E.GROUP_ID_NOT_FOUND
                else:
                    err = g.validate_delete()
                cost = 1
                if not err and g is not None:  # no error: the group exists
                    cost = 8 + len(self.offsets.by_group.get(gid, ())) + len(getattr(g, "members", ()))
                    self._delete_group(g)
                    deleted = True
                results.append(wire.DeleteGroupsResponseDeletableGroupResult(group_id=gid, error_code=err))
                yield cost

        def answer() -> wire.DeleteGroupsResponse:
            if deleted:
                self.schedule_reclaim()
            return wire.DeleteGroupsResponse(results=results)

        return self._long_request(deleting(), answer, version)

    # ---- long requests in slices -------------------------------------------------------------------

    def _long_request(self, work: Iterator[float], answer: Callable[[], wire.Message], version: int):
        """Do `work` and return `answer()`: at once in-process, or (the server) a first slice now and the rest on the
        timers, after the long requests already under way, the answer parked until the last slice (one that fits in
        its first slice is answered at once)."""
        if not self.slice_long_requests:
            for _ in work:
                pass
            return answer()
        budget: float = LONG_SLICE
        for used in work:
            budget -= used
            if budget <= 0:
                break
        else:
            return answer()
        reply = Reply(version=version)
        self._long.append((work, lambda: reply.resolve(answer())))
        if not self.timers.is_armed(self.long_timer):
            self.timers.arm(self.long_timer, 1)  # after the event loop has had a turn
        return reply

    def _on_long_timer(self, key: int) -> None:
        clock = time.perf_counter
        deadline = clock() + LONG_SLICE_MS / 1000
        budget: float = LONG_SLICE
        while self._long and budget > 0 and clock() < deadline:
            work, finish = self._long[0]
            for used in work:
                budget -= used
                if budget <= 0 or clock() >= deadline:
                    break
            else:
                self._long.popleft()
                finish()
        if self._long:
            self.timers.arm(key, 1)
