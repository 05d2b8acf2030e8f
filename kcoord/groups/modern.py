"""What the modern (KIP-848 style) group types share: every member's target assignment as one CSR over interned
integer unit ids (a consumer group's partitions; a connect group's connectors and tasks), and the vectorized
operations the target computation needs. The member step itself is compiled (kcoord._core._assign.step over the
partition epoch table, PartitionEpochs), and is shared the same way: it only sees integer ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import errors as E
from .. import wire
from .._core import _assign
from .._core._members import EMPTY_IDS
from ..events import NO_EVENTS, GroupEvents

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


TEMPORARY_LEAVE_EPOCH = -2  # a static member away for now (KIP-848)
REBALANCE = "rebalance"  # the member timer kind of the revocation deadline


class ModernGroup:
    """What a consumer group and a connect group answer alike: their state as Kafka names it (from the group and
    assignment epochs and the members' reconciliation states), the listed and classic-described forms, deletion, and
    moving a member's units in and out of the epoch table (`unit_epochs`). A plain mixin beside the compiled core
    (ConsumerGroupCore, ConnectGroupCore), which holds `members`, `group_epoch` and `assignment_epoch`."""

    PROTOCOL_TYPE: ClassVar[str]  # the protocol type ListGroups reports
    GROUP_TYPE: ClassVar[str]
    events: GroupEvents = NO_EVENTS  # the coordinator's (GroupContext.events)
    change: tuple[str, str] | None = None  # (trigger, reason) of the change the next epoch bump is for

    if TYPE_CHECKING:  # what each group type and its compiled core provide, declared for the type checker
        group_id: str
        dead: bool
        members: dict[str, Any]  # member id -> ConsumerMember or ConnectMember
        group_epoch: int
        assignment_epoch: int
        member_timers: Any  # its MemberTimers (kcoord.groups.base, a module of this layer)

        @property
        def unit_epochs(self) -> _assign.PartitionEpochs: ...

        def subscribed_topics(self) -> set[str]: ...

        def stage_current_assignment(self, m: Any) -> None: ...

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

    def leave_for_now(self, m) -> None:
        """A static member's -2: it keeps its assigned units (now held at epoch -2) and its target, gives up what it
        was revoking, and its revocation deadline goes; its session keeps running (no epoch bump)."""
        self._release(m)
        m.previous_member_epoch, m.member_epoch = m.member_epoch, TEMPORARY_LEAVE_EPOCH
        m.pending = EMPTY_IDS
        self._hold(m)
        m.rebalance_armed_epoch = -1
        self.member_timers.cancel(m.member_id, REBALANCE)
        self.stage_current_assignment(m)

    def _release(self, m) -> None:
        """Free the member's units (assigned and pending revocation) in the epoch table."""
        epochs = self.unit_epochs
        if m.assigned.shape[0]:
            epochs.remove(m.assigned, m.member_epoch)
        if m.pending.shape[0]:
            epochs.remove(m.pending, m.member_epoch)

    def _hold(self, m) -> None:
        """Record the member's units at its epoch in the epoch table."""
        epochs = self.unit_epochs
        if m.assigned.shape[0]:
            epochs.add(m.assigned, m.member_epoch)
        if m.pending.shape[0]:
            epochs.add(m.pending, m.member_epoch)


class TargetAssignment:
    """Every member's target as one CSR over the group's partition ids, rows in the order of the last computation,
    so the next computation takes the current targets (the uniform assignor's stickiness) without a loop."""

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
