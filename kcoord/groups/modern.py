"""The modern (KIP-848 style) group types' abstract base, ModernGroup (Kafka's ModernGroup<T>), which the consumer and
connect types extend, and what they share below it: every member's target assignment as one CSR over interned
integer unit ids (a consumer group's partitions; a connect group's connectors and tasks), and the vectorized
operations the target computation needs. The member step itself is compiled (kcoord._core._assign.step over the
epoch table, PartitionEpochs), and is shared the same way: it only sees integer ids.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from .. import errors as E
from .. import records as R
from .. import wire
from .._core import _assign
from .._core._members import EMPTY_IDS, ModernMember
from .base import Group, GroupBase, GroupContext, GroupTimers, MemberTimers

_NONE = EMPTY_IDS


def csr_take(indptr: np.ndarray, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the given rows, in that order; a row of -1 is empty. Vectorized: no loop over rows."""
    valid = rows >= 0
    starts = np.zeros(rows.shape[0], dtype=np.int64)
    lens = np.zeros(rows.shape[0], dtype=np.int64)
    starts[valid] = indptr[rows[valid]]
    lens[valid] = indptr[rows[valid] + 1] - starts[valid]
    out_indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lens, out=out_indptr[1:])
    total = int(out_indptr[-1])
    if total == 0:
        return out_indptr, _NONE
    idx = np.repeat(starts - out_indptr[:-1], lens) + np.arange(total, dtype=np.int64)
    return out_indptr, flat[idx]


def csr_changed(a_indptr: np.ndarray, a: np.ndarray, b_indptr: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which rows differ between two CSRs with the same rows (a bool per row)."""
    a_len, b_len = np.diff(a_indptr), np.diff(b_indptr)
    changed = a_len != b_len
    same = np.flatnonzero(~changed & (a_len > 0))
    if same.shape[0]:
        lens = a_len[same]
        rel = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        differ = a[np.repeat(a_indptr[same], lens) + rel] != b[np.repeat(b_indptr[same], lens) + rel]
        if differ.any():
            changed[same[np.unique(np.repeat(np.arange(same.shape[0]), lens)[differ])]] = True
    return changed


class TargetAssignment:
    """Every member's target as one CSR over the group's unit ids, rows in the order of the last computation, so the
    next computation takes the current targets (the uniform assignor's stickiness) without a loop."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []
        self.row: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.flat = _NONE

    def get(self, member_id: str, default: np.ndarray = _NONE) -> np.ndarray:
        r = self.row.get(member_id)
        return default if r is None else self.flat[self.indptr[r]:self.indptr[r + 1]]

    def __getitem__(self, member_id: str) -> np.ndarray:
        r = self.row[member_id]
        return self.flat[self.indptr[r]:self.indptr[r + 1]]

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.row

    def __iter__(self):
        return iter(list(self.row))

    def pop(self, member_id: str) -> None:
        r = self.row.pop(member_id, None)
        if r is not None:
            self.ids[r] = None

    def rename(self, old: str, new: str) -> None:
        r = self.row.pop(old, None)
        if r is not None:
            self.row[new] = r
            self.ids[r] = new

    def rows_for(self, member_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The targets of these members, in this order, as a CSR (an empty row for a member without one)."""
        if member_ids == self.ids:
            return self.indptr, self.flat
        n = len(self.ids)
        if member_ids[:n] == self.ids:  # members only joined since: append empty rows
            indptr = np.concatenate([self.indptr, np.full(len(member_ids) - n, self.indptr[-1], dtype=np.int64)])
            return indptr, self.flat
        get = self.row.get
        rows = np.fromiter((get(m, -1) for m in member_ids), dtype=np.int64, count=len(member_ids))
        return csr_take(self.indptr, self.flat, rows)

    def set(self, member_ids: list[str], indptr: np.ndarray, flat: np.ndarray) -> None:
        if member_ids != self.ids:
            self.ids = list(member_ids)
            self.row = {m: i for i, m in enumerate(member_ids)}
        self.indptr, self.flat = indptr, flat

    def load(self, targets: dict[str, np.ndarray]) -> None:
        ids = list(targets)
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([targets[m].shape[0] for m in ids], out=indptr[1:])
        self.set(ids, indptr, np.concatenate([targets[m] for m in ids]).astype(np.int32) if ids else _NONE)


JOIN_EPOCH, LEAVE_EPOCH, TEMPORARY_LEAVE_EPOCH = 0, -1, -2  # a heartbeat's epoch: join; leave; away for now (-2)
SESSION, REBALANCE = "session", "rebalance"  # the member timer kinds of the session and the revocation deadline


# A member of either type (Kafka's ModernGroupMember): the compiled ModernMember, ConsumerMember or ConnectMember.
M = TypeVar("M", bound=ModernMember)


class ModernGroup(GroupBase, Generic[M], metaclass=ABCMeta):
    """The abstract base of the consumer and connect group types (Kafka's ModernGroup<T>): a group epoch moved by
    membership changes, a target assignment per member, each member reconciled towards its target by the compiled
    step over an epoch table of integer unit ids (a consumer group's partitions; a connect group's connectors and
    tasks), static members, and Kafka's record layout. Here is what the types do alike: their state as Kafka names
    it, the listed and classic-described forms, deletion; finding the member a heartbeat is for (static members
    included), the -1 and -2 leaves and LeaveGroup, a static member's replacement, a member's removal; the
    reconciliation step and its bookkeeping; sessions and member timers; record keys, replay and unload.

    Each type provides what differs (the abstract methods below: its error answer, how it fences, its records, the
    inputs of the step) beside its compiled core (ConsumerGroupCore, ConnectGroupCore: the regular heartbeat), which
    holds `members`, `group_epoch` and `assignment_epoch`; a type is declared `class T(ModernGroup[Member], Core)`.
    The attributes declared here are every one the shared logic reads."""

    GROUP_TYPE: ClassVar[str]
    PROTOCOL_TYPE: ClassVar[str]  # the protocol type ListGroups reports
    KEYS: ClassVar[R.ModernRecordKeys]  # its record keys
    MEMBER_TIMERS: ClassVar[tuple[str, ...]]  # its member timer kinds, released in this order when a member goes
    change: tuple[str, str] | None = None  # (trigger, reason) of the change the next epoch bump is for

    # held by the compiled core
    members: dict[str, M]
    group_epoch: int
    assignment_epoch: int
    # made by each type
    unit_epochs: _assign.PartitionEpochs  # the epoch of the member holding each unit, -1 if free
    # made here
    static: dict[str, str]  # instance id -> member id
    target: TargetAssignment
    dead: bool
    member_timers: MemberTimers
    group_timers: GroupTimers
    _loaded: list[R.Record]  # replayed records, applied by on_loaded

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        super().__init__(group_id, ctx)
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members = {}
        self.static = {}
        self.target = TargetAssignment()
        self.dead = False
        self.member_timers = MemberTimers(ctx.timers, self.on_member_timer)
        # the group's own deadlines (each type's kinds: the batched computation's end, a connect group's compute
        # lease and scheduled delay), released with the group
        self.group_timers = GroupTimers(ctx.timers, self.on_group_timer)
        self._loaded = []

    # ---- what each type provides ----------------------------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def fail(error: int, message: str) -> Any:
        """The type's heartbeat answer carrying an error (code and message, nothing else)."""

    @abstractmethod
    def leave_response(self, member_id: str, epoch: int) -> Any:
        """The type's heartbeat answer to a -1 or -2 leave."""

    @abstractmethod
    def heartbeat_too_large(self, req: Any, client_id: str, client_host: str) -> bool:
        """Whether the member's metadata record, with what this heartbeat changes, would pass message.max.bytes."""

    @abstractmethod
    def session_timeout_ms(self, m: M) -> int: ...

    @abstractmethod
    def fence(self, m: M, why: str) -> Group:
        """Remove a member that left or was fenced, and bump the group epoch; `why` in words (for a type that keeps a
        history). Returns the group that holds the group id now (another, when the removal converted it)."""

    @abstractmethod
    def leave_group_member(self, m: M, by_instance_id: bool, instance_id: str | None, reason: str | None) -> Group:
        """LeaveGroup names this member (by its instance id alone, or by its member id): note it and fence it.
        Returns the group that holds the group id now, which answers for the members named after it."""

    @abstractmethod
    def hand_over(self, old: M, m: M) -> None:
        """A static member's replacement (replace_static_member): move the type's own state of `old` to `m`, then
        remove `old` without an epoch bump."""

    @abstractmethod
    def step_inputs(self, m: M, owned: Any) -> tuple[Any, Any, dict[bytes, int] | None]:
        """What the compiled step takes besides the epochs and the target: the member's subscribed topic indices, the
        units it says it owns (None: it does not say), and the topic ids those are named by (None: unit ids)."""

    @abstractmethod
    def stage_member_metadata(self, m: M) -> None: ...

    @abstractmethod
    def stage_target_member(self, member_id: str, ids: np.ndarray) -> None: ...

    @abstractmethod
    def stage_current_assignment(self, m: M) -> None: ...

    @abstractmethod
    def subscribed_topics(self) -> set[str]: ...

    def released(self, holder: M) -> bool:
        """Whether a static member may be replaced at once by a join under a new member id: once it has left
        with -2 (a type may allow more)."""
        return holder.member_epoch == TEMPORARY_LEAVE_EPOCH

    def reconciled(self, m: M) -> None:
        """The step moved the member (a type may keep more of it); before its current assignment is staged."""

    # ---- what the router, the offsets and the store ask of any group --------------------------------------------

    def note(self, trigger: str, member_id: str, instance_id: str | None, reason: str = "") -> None:
        """A member's change (kcoord.events triggers): the trigger of the bump it causes, counted and logged."""
        self.change = (trigger, reason)
        self.events.member_event(self.GROUP_TYPE, self.group_id, self.group_epoch, trigger, member_id, instance_id,
                                 reason)

    @property
    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.state != _assign.STABLE or m.member_epoch != self.assignment_epoch:
                return "Reconciling"
        return "Stable"

    @property
    def is_dead(self) -> bool:
        return self.dead

    def is_empty(self) -> bool:
        return not self.members

    def listed(self) -> wire.ListGroupsResponseListedGroup:
        return wire.ListGroupsResponseListedGroup(group_id=self.group_id, protocol_type=self.PROTOCOL_TYPE,
                                                  group_state=self.state_name, group_type=self.GROUP_TYPE)

    def described(self, version: int) -> wire.DescribeGroupsResponseDescribedGroup:
        # DescribeGroups is the classic API: Kafka answers any other group as not found (GROUP_ID_NOT_FOUND from v6).
        return wire.DescribeGroupsResponseDescribedGroup(
            error_code=E.GROUP_ID_NOT_FOUND if version >= 6 else E.NONE, group_id=self.group_id, group_state="Dead",
            error_message=f"Group {self.group_id} is not a classic group." if version >= 6 else None)

    def validate_delete(self) -> int:
        if self.dead:
            return E.GROUP_ID_NOT_FOUND
        return E.NONE if not self.members else E.NON_EMPTY_GROUP

    def offset_expiration(self) -> tuple[int | None, set[str]] | None:
        """Kafka's ConsumerGroup.offsetExpirationCondition and ModernGroup.isSubscribedToTopic: every offset from its
        commit, except those of the topics a member consumes (none in an Empty group)."""
        return None, self.subscribed_topics()

    def removable(self, now_ms: int, retention_ms: int) -> bool:
        """Kafka's maybeDeleteGroup: an Empty group goes once its offsets have."""
        return not self.members

    def record_keys(self) -> Iterable[bytes]:
        """Kafka's deletion order: every current assignment, every target, the target metadata, every member, the
        units' metadata, the group."""
        g, k = self.group_id, self.KEYS
        keys = [k.current_assignment(g, mid) for mid in self.members]
        keys += [k.target_member(g, mid) for mid in self.target]
        keys.append(k.target_metadata(g))
        keys += [k.member(g, mid) for mid in self.members]
        keys += [k.units(g), k.group(g)]
        return keys

    def replay(self, record: R.Record) -> None:
        """Collect the group's records; on_loaded applies them once every record is read."""
        self._loaded.append(record)

    def unload(self) -> None:
        self.member_timers.clear()
        self.group_timers.clear()
        self.dead = True

    @abstractmethod
    def on_group_timer(self, kind: str) -> None:
        """One of the group's own deadlines (`group_timers`) passed."""

    def interval_wait_ms(self, last: int | None, interval_ms: int) -> int:
        """How long until `interval_ms` has passed since `last` (the timers' clock, ms): 0 when it has, when the
        interval is 0 or when there was no `last` (the batched computation's rule, KIP-1263, for both types)."""
        if not interval_ms or last is None:
            return 0
        return max(last + interval_ms - self.timers.clock.now_ms(), 0)

    # ---- which member a request is for ------------------------------------------------------------------------------

    def static_holder(self, instance_id: str) -> M | None:
        holder = self.static.get(instance_id)
        return self.members.get(holder) if holder is not None else None

    def member_or_holder(self, member_id: str, instance_id: str | None) -> M | None:
        """The member by its id, else the one holding the instance id."""
        m = self.members.get(member_id)
        if m is None and instance_id is not None:
            m = self.static_holder(instance_id)
        return m

    def instance_error(self, instance_id: str, member_id: str, holder_id: str | None) -> Any:
        """The error answer to a request that names an instance id held by another member, or by none; None if
        `member_id` holds it."""
        if holder_id is None:
            return self.fail(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if holder_id != member_id:
            return self.fail(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was "
                             f"fenced by member {holder_id}.")
        return None

    def find_member(self, member_id: str, instance_id: str | None, epoch: int) -> tuple[M | None, M | None, Any]:
        """The member a heartbeat is for, with Kafka's static-member checks (throwIfStaticMemberIsUnknown,
        throwIfInstanceIdIsFenced, throwIfInstanceIdIsUnreleased): (member, None, None); (None, None, None) for a
        join by a member the group does not have; (None, holder, None) when a static member joins under a new id and
        replaces `holder` (`released`); or (None, None, the error answer)."""
        if instance_id is None:
            m = self.members.get(member_id)
            if m is None and epoch != JOIN_EPOCH:
                return None, None, self.fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                             f"{self.group_id}.")
            return m, None, None
        holder = self.static_holder(instance_id)
        if epoch != JOIN_EPOCH:
            failure = self.instance_error(instance_id, member_id, holder.member_id if holder is not None else None)
            return (None, None, failure) if failure is not None else (holder, None, None)
        if holder is None:
            return self.members.get(member_id), None, None
        if holder.member_id == member_id:
            return holder, None, None  # the same instance rejoins with its own id
        if not self.released(holder):
            return None, None, self.fail(E.UNRELEASED_INSTANCE_ID, f"Static member {holder.member_id} with instance "
                                         f"id {instance_id} is not released yet.")
        return None, holder, None

    def update_member_fields(self, m: M, req: Any, client_id: str, client_host: str, new: bool) -> bool:
        """A heartbeat's fields that every member has (its non-null ones; a new member joins the group here):
        whether any changed."""
        changed = new or m.client_id != client_id or m.client_host != client_host
        m.client_id, m.client_host = client_id, client_host
        if new:
            self.members[m.member_id] = m
            m.session_key = self.member_timers.key(m.member_id, SESSION)
        if req.instance_id is not None and m.instance_id != req.instance_id:
            m.instance_id, changed = req.instance_id, True
            self.static[req.instance_id] = m.member_id
        if req.rebalance_timeout_ms != -1 and m.rebalance_timeout_ms != req.rebalance_timeout_ms:
            m.rebalance_timeout_ms, changed = req.rebalance_timeout_ms, True
        return changed

    # ---- membership changes -----------------------------------------------------------------------------------------

    def leave(self, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup: each member named by instance id (member id "") or by member id is removed as the type
        removes one (leave_group_member); if that hands the group id to another group, it answers for the rest."""
        results: list[int] = []
        for member_id, iid, reason in members:
            if member_id == "":
                mid = self.static.get(iid) if iid is not None else None
                m = self.members.get(mid) if mid is not None else None
            else:
                m = self.members.get(member_id)
                if m is not None and iid is not None and m.instance_id != iid:
                    results.append(E.FENCED_INSTANCE_ID)
                    continue
            if m is None:
                results.append(E.UNKNOWN_MEMBER_ID)
                continue
            successor = self.leave_group_member(m, member_id == "", iid, reason)
            results.append(E.NONE)
            if successor is not self:
                top, rest = successor.leave(members[len(results):])
                return top, results + rest
        return E.NONE, results

    def answered_first(self, req: Any, client_id: str, client_host: str) -> Any:
        """What a heartbeat gets before its member is looked at (None: nothing): the -1 or -2 leave's answer, or an
        error if the member's metadata record, with what the heartbeat changes, would pass message.max.bytes (Kafka:
        the record's write fails, answered UNKNOWN_SERVER_ERROR)."""
        if req.member_epoch == LEAVE_EPOCH or req.member_epoch == TEMPORARY_LEAVE_EPOCH:
            return self.member_leave(req)
        if self.heartbeat_too_large(req, client_id, client_host):
            return self.fail(E.UNKNOWN_SERVER_ERROR, "The member's metadata record would be larger than "
                             f"message.max.bytes ({self.config.message_max_bytes}).")
        return None

    def member_leave(self, req: Any) -> Any:
        """A heartbeat at epoch -1 (the member leaves: fenced) or -2 (a static member leaves for now)."""
        epoch = req.member_epoch
        if req.instance_id is not None:
            failure = self.instance_error(req.instance_id, req.member_id, self.static.get(req.instance_id))
            if failure is not None:
                return failure
        m = self.members.get(req.member_id)
        if m is None:
            return self.fail(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {self.group_id}.")
        if epoch == TEMPORARY_LEAVE_EPOCH:
            self.leave_for_now(m)
        else:
            self.note("leave", m.member_id, m.instance_id)
            self.fence(m, f"member {m.member_id} left the group")
        return self.leave_response(req.member_id, epoch)

    def leave_for_now(self, m: M) -> None:
        """A static member's -2: it keeps its assigned units (now held at epoch -2) and its target, gives up what it
        was revoking, and its revocation deadline goes; its session keeps running (no epoch bump)."""
        self._release(m)
        m.previous_member_epoch, m.member_epoch = m.member_epoch, TEMPORARY_LEAVE_EPOCH
        m.pending = EMPTY_IDS
        self._hold(m)
        m.rebalance_armed_epoch = -1
        self.member_timers.cancel(m.member_id, REBALANCE)
        self.stage_current_assignment(m)

    def replace_static_member(self, old: M, member_id: str, **fields: Any) -> M:
        """A static member back under a new member id (after its -2, or as `released` allows): it takes over the old
        member's units and target at epoch 0, without a group epoch bump (Kafka's static member replacement).
        `fields`: the new member's own values where they are not the old member's."""
        m = old.copy_as(member_id)
        m.member_epoch = m.previous_member_epoch = 0
        for name, value in fields.items():
            setattr(m, name, value)
        self.events.member_event(self.GROUP_TYPE, self.group_id, self.group_epoch, "static-rejoin", member_id,
                                 old.instance_id, "")
        target = self.target.get(old.member_id)
        self.target.rename(old.member_id, member_id)
        self.hand_over(old, m)
        self.members[member_id] = m
        self.static[m.instance_id] = member_id  # type: ignore[index]  # a static member: its instance id is set
        m.session_key = self.member_timers.key(member_id, SESSION)
        self._hold(m)
        self.stage_member_metadata(m)
        self.stage_target_member(member_id, target)
        self.stage_current_assignment(m)
        return m

    def forget_member(self, m: M) -> None:
        """A member leaves the group's state: its units freed, tombstones in Kafka's order (current assignment,
        target, metadata), its target, static entry and timers gone."""
        self._release(m)
        store = self.store
        if store.persistent:
            g, k = self.group_id, self.KEYS
            store.stage(k.current_assignment(g, m.member_id), None)
            store.stage(k.target_member(g, m.member_id), None)
            store.stage(k.member(g, m.member_id), None)
        del self.members[m.member_id]
        self.target.pop(m.member_id)
        if m.instance_id is not None and self.static.get(m.instance_id) == m.member_id:
            del self.static[m.instance_id]
        for kind in self.MEMBER_TIMERS:
            self.member_timers.release(m.member_id, kind)

    # ---- reconciliation -----------------------------------------------------------------------------------------

    def reconcile(self, m: M, owned: Any, subscription_changed: bool = False) -> None:
        """One CurrentAssignmentBuilder step, compiled with the epoch table's move (`_assign.step`), over the
        inputs the type gives (step_inputs): `owned` is what the member says it owns as the request carries it, or
        None. The revocation deadline is armed while the member must revoke and cancelled otherwise (Kafka arms it
        with the write)."""
        target = self.target
        topics, owned_ids, by_topic_id = self.step_inputs(m, owned)
        r = _assign.step(self.unit_epochs, m.state, m.member_epoch, m.previous_member_epoch, self.assignment_epoch,
                         m.assigned, m.pending, target.indptr, target.flat, target.row.get(m.member_id, -1),
                         topics, owned_ids, by_topic_id, subscription_changed)
        if not r.changed or r.error:
            return
        m.state, m.member_epoch, m.previous_member_epoch = r.state, r.member_epoch, r.previous_member_epoch
        m.assigned, m.pending = r.assigned, r.pending_revocation
        self.reconciled(m)
        self.stage_current_assignment(m)
        if m.state == _assign.UNREVOKED_PARTITIONS:
            m.rebalance_armed_epoch = m.member_epoch
            self.member_timers.arm(m.member_id, REBALANCE, max(m.rebalance_timeout_ms, 0))
        elif m.rebalance_armed_epoch != -1:
            m.rebalance_armed_epoch = -1
            self.member_timers.cancel(m.member_id, REBALANCE)

    def _release(self, m: M) -> None:
        """Free the member's units (assigned and pending revocation) in the epoch table."""
        remove = self.unit_epochs.remove
        for ids in (m.assigned, m.pending):
            if ids.shape[0]:
                remove(ids, m.member_epoch)

    def _hold(self, m: M) -> None:
        """Record the member's units (assigned and pending revocation) at its epoch in the epoch table."""
        add = self.unit_epochs.add
        for ids in (m.assigned, m.pending):
            if ids.shape[0]:
                add(ids, m.member_epoch)

    # ---- timers -----------------------------------------------------------------------------------------------------

    def arm_session(self, m: M) -> None:
        self.timers.arm(m.session_key, self.session_timeout_ms(m))

    def on_member_timer(self, member_id: str, kind: str) -> None:
        """A member's deadline passed: its session (or a type's other member deadline), fenced; its revocation
        deadline, fenced if it is still revoking at the epoch the deadline was armed at."""
        m = self.members.get(member_id)
        if m is None:
            return
        if kind != REBALANCE:
            self.note(f"{kind}-timeout", member_id, m.instance_id)
            self.fence(m, f"member {member_id} was fenced: its {kind} timed out")
        elif m.state == _assign.UNREVOKED_PARTITIONS and m.member_epoch == m.rebalance_armed_epoch:
            self.note("rebalance-timeout", member_id, m.instance_id)
            self.fence(m, f"member {member_id} was fenced: it did not revoke its units within its rebalance "
                          "timeout")

    def load_current(self, m: M, current: Any, assigned: np.ndarray, pending: np.ndarray) -> None:
        """A member's CurrentMemberAssignment record, replayed: its epochs and state, its units held in the epoch
        table (PartitionEpochError, a ValueError, if another member holds one)."""
        m.member_epoch, m.previous_member_epoch, m.state = current.member_epoch, current.previous_member_epoch, \
            current.state
        m.assigned, m.pending = assigned, pending
        self._hold(m)

    def arm_loaded(self, m: M) -> None:
        """A loaded member's timers (Kafka's onLoaded): its session in full, its revocation deadline in full if it is
        revoking."""
        m.session_key = self.member_timers.arm(m.member_id, SESSION, self.session_timeout_ms(m))
        if m.state == _assign.UNREVOKED_PARTITIONS:
            m.rebalance_armed_epoch = m.member_epoch
            self.member_timers.arm(m.member_id, REBALANCE, max(m.rebalance_timeout_ms, 0))
