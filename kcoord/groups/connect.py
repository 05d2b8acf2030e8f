"""Connect groups: workers share connectors and tasks, assigned by one of them (kcoord's own group type).

kcoord's connect protocol (docs/connect-protocol.md, whose numbered decisions D1-D21 the comments here cite; the
README's "Connect groups" section): the KIP-848 machinery of consumer groups (group epoch, target assignment, member epochs, the compiled
revoke-then-assign step over an epoch table, member timers, write-ahead records), with the target computed by a
worker rather than by the coordinator:

1. an assignment input changes (a worker joins, leaves or is fenced; its ClientAssignors change; the selected
   assignor's Reason, Version or Metadata change; the scheduled delay ends) and the group epoch is bumped;
2. the coordinator picks one worker by its assignor version range (`select`) and sets ShouldComputeAssignment in its
   heartbeat responses until it calls ConnectGroupPrepareAssignment; the worker holds a lease of its rebalance
   timeout, after which (or when it leaves) another worker is picked: it is not fenced for being slow;
3. the worker installs a complete target (ConnectGroupInstallAssignment), validated here (epochs; every unit owned
   at most once; every member known), with an optional scheduled delay after which the coordinator asks again;
4. each worker reconciles to its target on its own heartbeats, revoke first, as a consumer does to partitions.

Units are interned to int32 ids in a per-group unit table (connectors, then (connector, task) pairs, append-only),
so the target, the epoch table and the records hold integer arrays, as partitions are in consumer groups. What a
connect group does as a consumer group does (static members, the -1/-2 leaves, the step's bookkeeping, sessions,
member removal) is ModernGroup's (kcoord.groups.modern); this module holds what is a connect group's own.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import errors as E
from .. import records as R
from .. import wire
from .._core import _assign
from .._core._assign import PartitionEpochs
from .._core._members import EMPTY_IDS, ConnectGroupCore, ConnectMember, intern_known_tasks
from ..reply import Reply
from .base import Group, GroupContext
from .modern import (
    JOIN_EPOCH,
    REBALANCE,
    SESSION,
    TEMPORARY_LEAVE_EPOCH,
    ModernGroup,
    csr_changed,
    csr_take,
)

STABLE = _assign.STABLE
UNREVOKED = _assign.UNREVOKED_PARTITIONS
MEMBER_STATES = _assign.MEMBER_STATES

CONNECT_PROTOCOL_TYPE = "connect"
CONFIG_MISMATCH = 1  # Install's Error: the computing worker's config is behind another worker's (D12)
# the group's timer kinds (GroupTimers): the compute lease and the scheduled delay; its members' are SESSION and
# REBALANCE (groups.modern)
COMPUTE, DELAY = "compute", "delay"
# and the end of group.connect.assignment.interval.ms since the last ask, when a computation waits for it
ASSIGN = "assign"
_ONE_TOPIC = np.zeros(1, dtype=np.int32)  # every unit lies in "topic" 0 of the epoch table
_NONE = EMPTY_IDS


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate_heartbeat(req: wire.ConnectGroupHeartbeatRequest) -> tuple[int, str] | None:
    """The checks made before the group is looked at: (error code, message), or None."""
    epoch = req.member_epoch
    if not req.group_id or _blank(req.group_id):
        return E.INVALID_REQUEST, "GroupId can't be empty."
    if not req.member_id or _blank(req.member_id):
        return E.INVALID_REQUEST, "MemberId can't be empty."
    if _blank(req.instance_id):
        return E.INVALID_REQUEST, "InstanceId can't be empty."
    if epoch < TEMPORARY_LEAVE_EPOCH:
        return E.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be greater than or equal to -2."
    if epoch == TEMPORARY_LEAVE_EPOCH and req.instance_id is None:
        return E.INVALID_REQUEST, "InstanceId can't be null when MemberEpoch is -2."
    if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms <= 0:
        return E.INVALID_REQUEST, "RebalanceTimeoutMs must be -1 (unchanged) or positive."
    if req.server_assignor is not None:
        return E.INVALID_REQUEST, "Connect groups require ClientAssignors; ServerAssignor must be null."
    if epoch == JOIN_EPOCH and req.client_assignors is not None and not req.client_assignors:
        return E.INVALID_REQUEST, "ClientAssignors can't be empty."
    if req.client_assignors is not None:
        names = set()
        for a in req.client_assignors:
            if not a.name or _blank(a.name):
                return E.INVALID_REQUEST, "Assignor name can't be empty."
            if a.name in names:
                return E.INVALID_REQUEST, f"Assignor {a.name} is listed twice."
            names.add(a.name)
            if a.minimum_version < -1:
                return E.INVALID_REQUEST, f"Assignor {a.name}: MinimumVersion must be at least -1."
            if a.maximum_version < 0 or a.maximum_version < a.minimum_version:
                return E.INVALID_REQUEST, f"Assignor {a.name}: MaximumVersion must be at least 0 and at least " \
                                          "MinimumVersion."
            if not a.minimum_version <= a.version <= a.maximum_version:
                return E.INVALID_REQUEST, f"Assignor {a.name}: Version must lie within [MinimumVersion, " \
                                          "MaximumVersion]."
    return None


def join_problem(req: wire.ConnectGroupHeartbeatRequest) -> str | None:
    """What a (re-)join must carry. Checked for a worker the group does not know, and for a known worker whose
    epoch is past 0 (a rejoin): a worker that joined before any target was installed is still at epoch 0, and its
    regular heartbeats say so."""
    if req.rebalance_timeout_ms <= 0:
        return "RebalanceTimeoutMs must be provided in first request."
    if not req.client_assignors:
        return "ClientAssignors must be provided in first request."
    cat = req.connectors_and_tasks
    if cat is not None and (cat.connectors or cat.tasks):
        return "ConnectorsAndTasks must be empty when (re-)joining."
    return None


class UnitTable:
    """The group's units as int32 ids: connector names and (connector, task) pairs, appended in the order the
    group meets them (ids never change). `unit_conn[i]` is the connector index of unit i, `unit_task[i]` its task
    (-1: the connector itself)."""

    def __init__(self) -> None:
        self.connectors: list[str] = []
        self.conn_index: dict[str, int] = {}
        self.conn_unit: list[int] = []  # connector index -> unit id of the connector itself (-1 until met)
        self.task_units: list[dict[int, int]] = []  # connector index -> {task: unit id}
        self.tasks_by_name: dict[str, dict[int, int]] = {}  # connector name -> the same dict
        self.unit_conn: list[int] = []
        self.unit_task: list[int] = []
        self._conn = np.zeros(0, dtype=np.int32)  # unit_conn / unit_task as arrays, rebuilt when the table grows
        self._task = np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.unit_conn)

    def _connector(self, name: str) -> int:
        c = self.conn_index.get(name)
        if c is None:
            c = self.conn_index[name] = len(self.connectors)
            self.connectors.append(name)
            self.conn_unit.append(-1)
            self.task_units.append({})
            self.tasks_by_name[name] = self.task_units[c]
        return c

    def _new(self, c: int, task: int) -> int:
        u = len(self.unit_conn)
        self.unit_conn.append(c)
        self.unit_task.append(task)
        return u

    def intern(self, cat, out: list[int]) -> None:
        """Append the ids of a ConnectorsAndTasks to `out`, made where new (in the order listed; duplicates kept,
        for the caller to find). The common case, units the table knows, is compiled (intern_known_tasks)."""
        append, extend = out.append, out.extend
        for name in cat.connectors:
            c = self._connector(name)
            u = self.conn_unit[c]
            if u < 0:
                u = self.conn_unit[c] = self._new(c, -1)
            append(u)
        tasks = cat.tasks if type(cat.tasks) is list else list(cat.tasks)
        i, n = 0, len(tasks)
        while i < n:
            i = intern_known_tasks(tasks, i, self.tasks_by_name, out)  # compiled: stops at a unit not met yet
            if i < n:
                extend(self._intern_tasks(tasks[i].connector, tasks[i].task_ids))
                i += 1

    def _intern_tasks(self, connector: str, task_ids: list[int]) -> list[int]:
        c = self._connector(connector)
        tasks = self.task_units[c]
        out = []
        for x in task_ids:
            u = tasks.get(x)
            if u is None:
                if x < 0:
                    raise ValueError(f"task {x} of connector {connector!r} is negative")
                u = tasks[x] = self._new(c, x)
            out.append(u)
        return out

    def lookup(self, cat) -> np.ndarray:
        """The ids of a ConnectorsAndTasks as a sorted unique array; units the table does not know are left out
        (nobody can have been given them)."""
        out: list[int] = []
        for name in cat.connectors:
            c = self.conn_index.get(name)
            if c is not None and self.conn_unit[c] >= 0:
                out.append(self.conn_unit[c])
        for t in cat.tasks:
            c = self.conn_index.get(t.connector)
            if c is None:
                continue
            get = self.task_units[c].get
            out.extend(u for u in map(get, t.task_ids) if u is not None)
        if not out:
            return _NONE
        return np.unique(np.array(out, dtype=np.int32))

    def mark(self) -> tuple[int, int]:
        return len(self.connectors), len(self.unit_conn)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget what was interned since `mark` (an Install that was refused), in the lists and in every cache
        made from them: the id arrays may have been built while the refused units were in the table (its refusal
        names a unit through them), and ids past the mark will name other units once interned again. Ids below
        the mark never change, so the arrays' prefix stays valid."""
        n_conn, n_units = mark
        self._conn, self._task = self._conn[:n_units], self._task[:n_units]
        for u in range(len(self.unit_conn) - 1, n_units - 1, -1):
            c, task = self.unit_conn[u], self.unit_task[u]
            if task < 0:
                self.conn_unit[c] = -1
            else:
                del self.task_units[c][task]
        del self.unit_conn[n_units:], self.unit_task[n_units:]
        for name in self.connectors[n_conn:]:
            del self.conn_index[name], self.tasks_by_name[name]
        del self.connectors[n_conn:], self.conn_unit[n_conn:], self.task_units[n_conn:]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._conn.shape[0] != len(self.unit_conn):
            self._conn = np.array(self.unit_conn, dtype=np.int32)
            self._task = np.array(self.unit_task, dtype=np.int32)
        return self._conn, self._task

    def to_wire(self, ids: np.ndarray, cat_cls, tasks_cls):
        """Unit ids as a ConnectorsAndTasks of the given generated classes: connectors, then tasks grouped by
        connector (connectors in table order, tasks ascending)."""
        if ids.shape[0] == 0:
            return cat_cls(connectors=[], tasks=[])
        conn, task = self.arrays()
        c, t = conn[ids], task[ids]
        is_conn = t < 0
        names = self.connectors
        connectors = [names[i] for i in np.sort(c[is_conn]).tolist()]
        c, t = c[~is_conn], t[~is_conn]
        tasks = []
        if c.shape[0]:
            order = np.lexsort((t, c))
            c, t = c[order], t[order]
            bounds = (np.flatnonzero(c[1:] != c[:-1]) + 1).tolist()
            prev = 0
            for b in [*bounds, c.shape[0]]:
                tasks.append(tasks_cls(connector=names[int(c[prev])], task_ids=t[prev:b].tolist()))
                prev = b
        return cat_cls(connectors=connectors, tasks=tasks)

    def to_dict(self, ids: np.ndarray) -> dict:
        """{"connectors": [...], "tasks": {connector: [tasks]}} for describe."""
        cat = self.to_wire(ids, _Plain, _PlainTasks)
        return {"connectors": cat.connectors, "tasks": {t.connector: t.task_ids for t in cat.tasks}}

    def record(self) -> wire.ConnectGroupUnitsValue:
        return wire.ConnectGroupUnitsValue(connectors=list(self.connectors), units_connector=list(self.unit_conn),
                                           units_task=list(self.unit_task))

    def restore(self, v: wire.ConnectGroupUnitsValue) -> None:
        if len(v.units_connector) != len(v.units_task):
            raise ValueError("the unit table's arrays differ in length")
        for name in v.connectors:
            self._connector(name)
        if len(self.connectors) != len(v.connectors):
            raise ValueError("a connector appears twice in the unit table")
        for c, task in zip(v.units_connector, v.units_task, strict=True):
            if not 0 <= c < len(self.connectors):
                raise ValueError(f"unit {len(self.unit_conn)} names connector {c}, outside the table")
            if task < 0:
                if self.conn_unit[c] >= 0:
                    raise ValueError(f"connector {self.connectors[c]!r} appears twice in the unit table")
                self.conn_unit[c] = self._new(c, -1)
            else:
                if task in self.task_units[c]:
                    raise ValueError(f"task {task} of {self.connectors[c]!r} appears twice in the unit table")
                self.task_units[c][task] = self._new(c, task)


@dataclass
class _Plain:
    connectors: list
    tasks: list


@dataclass
class _PlainTasks:
    connector: str
    task_ids: list


@dataclass
class Rebalance:
    """One group epoch bump and its reason (KIP-800), for describe."""

    group_epoch: int
    time_ms: int
    reason: str


def _assignor_tuple(a) -> tuple:
    return a.name, a.minimum_version, a.maximum_version, a.reason, a.version, bytes(a.metadata)


class ConnectGroup(ModernGroup[ConnectMember], ConnectGroupCore):
    GROUP_TYPE: ClassVar[str] = "connect"
    PROTOCOL_TYPE: ClassVar[str] = CONNECT_PROTOCOL_TYPE
    RECORD_TYPES: ClassVar[tuple[int, ...]] = tuple(R.CONNECT_RECORDS)
    KEYS: ClassVar[R.ModernRecordKeys] = R.CONNECT_KEYS
    MEMBER_TIMERS: ClassVar[tuple[str, ...]] = (SESSION, REBALANCE)
    members: dict[str, ConnectMember]  # (again: mypy does not map ModernGroup's type variable to compare the bases)

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        super().__init__(group_id, ctx)
        config, timers = ctx.config, ctx.timers
        self.units = UnitTable()
        self.unit_epochs = PartitionEpochs(np.zeros(2, dtype=np.int64))  # one "topic" holding every unit id
        self.target_meta: dict[str, tuple[int, bytes]] = {}  # member -> (version, metadata) of its target
        self.assignor_name: str | None = None  # the assignor the installed target was computed with
        self.assignor_state: bytes | None = None
        self.delay_deadline_ms = -1  # wall clock ms of the scheduled delay's end, -1: none
        # wall clock ms since when the group has had no worker (its creation, or load, or its last worker's removal)
        self.empty_since_ms = timers.clock.wall_ms()
        self.departed: dict[str, tuple[str | None, np.ndarray]] = {}  # since the last Install: (instance, units)
        self.computing: str | None = None  # the member asked to compute
        self.prepared = False  # it called Prepare (stop setting ShouldComputeAssignment)
        self.last_computing: str | None = None
        self.asked_at: int | None = None  # the timers' clock (ms) when a worker was last asked; None: not since load
        self.mismatches: dict[str, int] = {}  # member -> CONFIG_MISMATCH installs since it was chosen
        self.excluded: set[str] = set()  # members passed over after a lease expired or two mismatches
        self.joins = 0  # arrival counter
        self._negotiated: tuple[str | None, int, int, int] | None = None  # cache of negotiated()
        # What negotiation reads, kept as members come, go and change assignors, so that a join into 1,000 workers
        # does not pass over them: per assignor name, [members listing it, their minimum versions, their maximum
        # versions] (built from the members on first use); and the longest-standing member.
        self._support: dict[str, list] | None = None
        self._eldest: ConnectMember | None = None
        self.history: deque[Rebalance] = deque(maxlen=config.group_rebalance_history_size)
        self.init_core(timers, config.group_connect_session_timeout_ms,
                       config.group_connect_heartbeat_interval_ms, wire.ConnectGroupHeartbeatResponse)

    # ---- what the router, the offsets and the store ask of any group --------------------------------------------

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               version: int = 9) -> int:
        return E.GROUP_ID_NOT_FOUND  # workers commit no group offsets (D20)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_delete(self) -> int:
        return E.GROUP_ID_NOT_FOUND

    def subscribed_topics(self) -> set[str]:
        return set()

    def removable(self, now_ms: int, retention_ms: int) -> bool:
        """kcoord's own rule (a connect group holds its units and assignor state, and workers commit no offsets): an
        Empty group goes once it has been Empty for offsets.retention.minutes, as a classic group's offsets do."""
        return not self.members and now_ms - self.empty_since_ms >= retention_ms

    # classic APIs addressed to a connect group: its members are not classic members
    def join(self, req, version: int, client_id: str, client_host: str):
        return Reply(wire.JoinGroupResponse(error_code=E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id,
                                            generation_id=-1, protocol_name="" if version < 7 else None))

    def sync(self, req, version: int):
        return Reply(wire.SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> int:
        return E.UNKNOWN_MEMBER_ID

    def leave_group_member(self, m: ConnectMember, by_instance_id: bool, instance_id: str | None,
                           reason: str | None) -> Group:
        """LeaveGroup from an admin (kcoord remove-members, Kafka's admin client): the named worker is fenced."""
        self.note("admin-removal", m.member_id, m.instance_id, reason or "")
        return self.fence(m, f"member {m.member_id} was removed by an admin" + (f": {reason}" if reason else ""))

    # ---- ConnectGroupHeartbeat -----------------------------------------------------------------------------------

    @staticmethod
    def fail(error: int, message: str) -> wire.ConnectGroupHeartbeatResponse:
        return wire.ConnectGroupHeartbeatResponse(error_code=error, error_message=message)

    def leave_response(self, member_id: str, epoch: int) -> wire.ConnectGroupHeartbeatResponse:
        return wire.ConnectGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch,
                                                  heartbeat_interval_ms=self.heartbeat_interval_ms)

    def connect_heartbeat(self, req: wire.ConnectGroupHeartbeatRequest, client_id: str, client_host: str) \
            -> wire.ConnectGroupHeartbeatResponse:
        """One heartbeat (the request passed validate_heartbeat and quick_heartbeat did not answer it): leave, or
        find (or make) the worker, apply what changed, bump the group epoch if an assignment input moved, make sure
        a worker is computing if one is owed, reconcile, re-arm the session, answer."""
        first = self.answered_first(req, client_id, client_host)
        if first is not None:
            return first
        epoch = req.member_epoch
        member_id = req.member_id
        new = False
        m, replaced, failure = self.find_member(member_id, req.instance_id, epoch)
        if failure is not None:
            return failure
        if replaced is not None:
            problem = join_problem(req)
            if problem is not None:
                return self.fail(E.INVALID_REQUEST, problem)
            problem = self._negotiation_problem(req.client_assignors, exclude=replaced.member_id)
            if problem is not None:
                return self.fail(E.UNSUPPORTED_ASSIGNOR, problem)
            m = self.replace_static_member(replaced, member_id)
        if (m is None or (epoch == JOIN_EPOCH and m.member_epoch != JOIN_EPOCH)) and \
                (problem := join_problem(req)) is not None:
            return self.fail(E.INVALID_REQUEST, problem)
        if m is None:
            if len(self.members) >= self.config.group_connect_max_size:
                return self.fail(E.GROUP_MAX_SIZE_REACHED, "The connect group has reached its maximum capacity of "
                                 f"{self.config.group_connect_max_size} members.")
            m, new = ConnectMember(member_id), True
        elif epoch != JOIN_EPOCH and epoch != m.member_epoch:
            if not (epoch == m.previous_member_epoch and req.connectors_and_tasks is not None and
                    np.isin(self.units.lookup(req.connectors_and_tasks), m.assigned, assume_unique=True).all()):
                return self.fail(E.FENCED_MEMBER_EPOCH, f"The member epoch {epoch} is fenced; the member is at epoch "
                                 f"{m.member_epoch}.")
        if req.client_assignors is not None:
            problem = self._negotiation_problem(req.client_assignors, exclude=m.member_id)
            if problem is not None:
                return self.fail(E.UNSUPPORTED_ASSIGNOR, problem)
        # Epoch 0 from a known member is a rejoin (KAFKA-19233): it is answered in full, its units as they are.
        reason = self.update_member(m, req, client_id, client_host, new)
        if reason is not None:
            self.change = ("join" if new else "member-change", "")
            self.bump(reason)
        self.owe_computation()
        before, delivered = m.assigned, m.delivered
        if not (m.state == STABLE and m.member_epoch == self.assignment_epoch):
            self.reconcile(m, req.connectors_and_tasks)
        self.arm_session(m)
        full = epoch == JOIN_EPOCH or (req.rebalance_timeout_ms != -1 and req.client_assignors is not None and
                                       req.connectors_and_tasks is not None)
        return self.response(m, full or m.assigned is not before or m.delivered is not delivered)

    def heartbeat_too_large(self, req: wire.ConnectGroupHeartbeatRequest, client_id: str, client_host: str) -> bool:
        """Whether the worker's metadata record (its assignors' metadata above all), with what this heartbeat
        changes, would pass message.max.bytes: refused with UNKNOWN_SERVER_ERROR before anything of it is kept, as
        the consumer group does (Kafka's answer to a record write that fails so). A heartbeat that changes none of
        the record's fields costs a few comparisons."""
        old = self.member_or_holder(req.member_id, req.instance_id)
        assignors = req.client_assignors
        if old is not None and assignors is None and req.instance_id is None and client_id == old.client_id and \
                client_host == old.client_host:
            return False
        if assignors is not None:
            pairs = [(a.name, a.metadata) for a in assignors]
        else:
            pairs = [(a[0], a[5]) for a in old.assignors] if old is not None else []
        instance_id = req.instance_id if req.instance_id is not None else old.instance_id if old is not None else None
        return R.connect_member_size(self.group_id, req.member_id, instance_id, client_id, client_host, pairs) \
            > self.config.message_max_bytes

    def reconcile_heartbeat(self, m: ConnectMember, req: wire.ConnectGroupHeartbeatRequest) \
            -> wire.ConnectGroupHeartbeatResponse:
        """quick_heartbeat's way out for a member with a step to make."""
        before, delivered = m.assigned, m.delivered
        self.reconcile(m, req.connectors_and_tasks)
        return self.response(m, m.assigned is not before or m.delivered is not delivered)

    def response(self, m: ConnectMember, with_assignment: bool) -> wire.ConnectGroupHeartbeatResponse:
        assignment = None
        if with_assignment:
            version, metadata = m.delivered if m.delivered is not None else (-1, b"")
            assignment = wire.ConnectGroupHeartbeatResponseAssignment(
                error=0, connectors_and_tasks=self.units.to_wire(
                    m.assigned, wire.ConnectGroupHeartbeatResponseConnectorsAndTasks,
                    wire.ConnectGroupHeartbeatResponseConnectorTasks), version=version, metadata=metadata)
        return wire.ConnectGroupHeartbeatResponse(
            member_id=m.member_id, member_epoch=m.member_epoch, heartbeat_interval_ms=self.heartbeat_interval_ms,
            should_compute_assignment=self.computing == m.member_id and not self.prepared,
            assignor_version=self.negotiated()[1], assignment=assignment)

    def update_member(self, m: ConnectMember, req: wire.ConnectGroupHeartbeatRequest, client_id: str,
                      client_host: str, new: bool) -> str | None:
        """Apply the request's non-null fields and stage the member's metadata if it changed. Returns the reason
        the group epoch must move (an assignment input changed, D7), or None."""
        changed = self.update_member_fields(m, req, client_id, client_host, new)
        reason = None
        if new:
            self._negotiated = None
            self.joins += 1
            m.joined = self.joins
            reason = f"member {m.member_id} joined"
        if req.client_assignors is not None:
            assignors = tuple(_assignor_tuple(a) for a in req.client_assignors)
            if assignors != m.assignors:
                old_ranges = [(a[0], a[1], a[2]) for a in m.assignors]
                selected = self.negotiated()[0]
                old_sel = next((a for a in m.assignors if a[0] == selected), None)
                self._count_assignors(m.assignors, -1)
                m.assignors, changed = assignors, True
                self._count_assignors(assignors, 1)
                self._negotiated = None
                new_sel = next((a for a in assignors if a[0] == selected), None)
                if reason is None:
                    if old_ranges != [(a[0], a[1], a[2]) for a in assignors]:
                        reason = f"member {m.member_id} changed its assignors"
                    elif old_sel != new_sel:
                        reason = f"member {m.member_id} updated its assignor's reason or metadata"
        if changed:
            self.stage_member_metadata(m)
        return reason

    # ---- the assignor and the version range (D9, D18) -------------------------------------------------------

    def support(self) -> dict[str, list]:
        """Per assignor name: [how many members list it, Counter of their minimum versions, of their maximum
        versions]."""
        if self._support is None:
            self._support = {}
            for x in self.members.values():
                self._count_assignors(x.assignors, 1)
        return self._support

    def _count_assignors(self, assignors: tuple, sign: int) -> None:
        """A member's ClientAssignors counted in (1) or out (-1) of `support` (nothing to do before it is built)."""
        support = self._support
        if support is None:
            return
        for a in assignors:
            e = support.get(a[0])
            if e is None:
                e = support[a[0]] = [0, Counter(), Counter()]
            e[0] += sign
            e[1][a[1]] += sign
            e[2][a[2]] += sign
            if not e[0]:
                del support[a[0]]

    def eldest(self, exclude: ConnectMember | None = None) -> ConnectMember | None:
        """The longest-standing member (but `exclude`): kept, found again only when it goes."""
        e = self._eldest
        if e is None or self.members.get(e.member_id) is not e:
            e = self._eldest = min(self.members.values(), key=lambda x: x.joined) if self.members else None
        if e is not None and e is exclude:
            others = [x for x in self.members.values() if x is not exclude]
            return min(others, key=lambda x: x.joined) if others else None
        return e

    def negotiated(self) -> tuple[str | None, int, int, int]:
        """(assignor name, V, lo, hi): the selected assignor (the first of the longest-standing member's list that
        every member supports) and its version V, the highest of the intersection [lo, hi] of every member's range;
        V is -1 when there is no member or no common assignor."""
        if self._negotiated is not None:
            return self._negotiated
        eldest = self.eldest()
        support = self.support()
        n = len(self.members)
        name = next((a[0] for a in eldest.assignors if support[a[0]][0] == n), None) if eldest is not None else None
        if name is None:
            return None, -1, -1, -1
        _, los, his = support[name]
        lo, hi = max(v for v, k in los.items() if k), min(v for v, k in his.items() if k)
        self._negotiated = (name, hi if lo <= hi else -1, lo, hi)
        return self._negotiated

    def _negotiation_problem(self, assignors, exclude: str) -> str | None:
        """Why a worker with these ClientAssignors cannot be in this group (None if it can): no assignor in common
        with the others, or a range that misses the intersection of theirs (UNSUPPORTED_ASSIGNOR). Read from
        `support` less the excluded member's own assignors."""
        ex = self.members.get(exclude)
        if len(self.members) - (ex is not None) == 0 or assignors is None:
            return None
        others = len(self.members) - (ex is not None)
        support = self.support()
        theirs = {a[0]: a for a in ex.assignors} if ex is not None else {}
        mine = {a.name: a for a in assignors}
        eldest = self.eldest(exclude=ex)
        assert eldest is not None  # (there are others)
        for cand in eldest.assignors:
            name = cand[0]
            own = theirs.get(name)
            if name not in mine or support[name][0] - (own is not None) != others:
                continue
            _, los, his = support[name]
            lo = max(v for v, k in los.items() if k - (own is not None and own[1] == v))
            hi = min(v for v, k in his.items() if k - (own is not None and own[2] == v))
            a = mine[name]
            if max(lo, a.minimum_version) <= min(hi, a.maximum_version):
                return None
            return f"Assignor {name} versions [{a.minimum_version}, {a.maximum_version}] do not overlap the " \
                   f"group's [{lo}, {hi}]."
        names = ", ".join(a[0] for a in eldest.assignors)
        return f"None of the ClientAssignors is supported by every member of the group (the group uses: {names})."

    def select(self) -> ConnectMember | None:
        """The worker to compute (D9): among members whose range contains V, one whose range covers every other
        member's; else the one with the highest maximum; ties go to the last worker that computed, then to the
        longest-standing. Members passed over (a lease expired, two mismatches) are chosen only if nobody else is
        left."""
        name, v, _, _ = self.negotiated()
        if name is None or v < 0:
            return None
        ranges = {}
        for x in self.members.values():
            if x.member_epoch == TEMPORARY_LEAVE_EPOCH:
                continue
            a = next(b for b in x.assignors if b[0] == name)
            ranges[x.member_id] = (a[1], a[2])
        if not ranges:
            return None
        union = (min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values()))
        pool = [mid for mid in ranges if mid not in self.excluded] or list(ranges)
        if self.excluded and len(pool) == len(ranges):
            self.excluded.clear()

        def rank(mid: str) -> tuple:
            lo, hi = ranges[mid]
            return (not (lo <= union[0] and hi >= union[1]), -hi, mid != self.last_computing,
                    self.members[mid].joined)
        return self.members[min(pool, key=rank)]

    def lease_ms(self, m) -> int:
        """The computing worker's lease: its rebalance timeout, but never shorter than a heartbeat interval (it
        learns that it computes at a heartbeat; a shorter lease would only pass it over, or re-ask it, in a loop)."""
        return max(m.rebalance_timeout_ms, self.heartbeat_interval_ms)

    def ask_wait_ms(self) -> int:
        """How long until a worker may be asked to compute again: group.connect.assignment.interval.ms after the
        last ask (the consumer group's batching, KIP-1263: a thousand workers joining within it cost one
        computation, not one each); 0 when the interval is 0 or nobody was asked since the group was made or
        loaded."""
        return self.interval_wait_ms(self.asked_at, self.config.group_connect_assignment_interval_ms)

    def owe_computation(self) -> None:
        """If the group epoch is past the assignment epoch and no worker is computing, choose one and start its
        lease (its rebalance timeout); within the assignment interval of the last ask, once it is over (the group's
        ASSIGN timer)."""
        if self.group_epoch <= self.assignment_epoch or (self.computing is not None and
                                                           self.computing in self.members):
            return
        wait = self.ask_wait_ms()
        if wait:
            self.computing, self.prepared = None, False
            self.group_timers.cancel(COMPUTE)
            if not self.group_timers.is_armed(ASSIGN):
                self.group_timers.arm(ASSIGN, wait)
            return
        m = self.select()
        self.computing, self.prepared = (m.member_id, False) if m is not None else (None, False)
        if m is not None:
            self.last_computing = m.member_id
            self.asked_at = self.timers.clock.now_ms()
            self.group_timers.arm(COMPUTE, self.lease_ms(m))
        else:
            self.group_timers.cancel(COMPUTE)

    def _rotate(self, reason: str) -> None:
        """The computing worker is passed over (lease expired, mismatches) or gone: pick another at once."""
        if self.computing is not None:
            self.excluded.add(self.computing)
        self.computing, self.prepared = None, False
        self.mismatches.clear()
        self.owe_computation()

    # ---- Prepare / Install --------------------------------------------------------------------------------------

    def _compute_member(self, member_id: str, member_epoch: int, install: bool = False) \
            -> tuple[ConnectMember | None, int, str]:
        """The computing worker, checked: a member (else UNKNOWN_MEMBER_ID), at its epoch (else STALE_MEMBER_EPOCH;
        an Install may also carry the previous epoch: the worker's own heartbeats move it on while it computes),
        the one asked (else UNKNOWN_MEMBER_ID)."""
        m = self.members.get(member_id)
        if m is None:
            return None, E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}."
        if member_epoch != m.member_epoch and not (install and member_epoch == m.previous_member_epoch):
            if install and self.computing == member_id:
                self.prepared = False  # its computation is lost: ask again at its next heartbeat
            return None, E.STALE_MEMBER_EPOCH, f"The member epoch {member_epoch} is stale; the member is at epoch " \
                                               f"{m.member_epoch}."
        if self.computing != member_id:
            return None, E.UNKNOWN_MEMBER_ID, f"Member {member_id} was not asked to compute the assignment."
        return m, E.NONE, ""

    def prepare(self, req: wire.ConnectGroupPrepareAssignmentRequest) -> wire.ConnectGroupPrepareAssignmentResponse:
        m, error, message = self._compute_member(req.member_id, req.member_epoch)
        if m is None:
            return wire.ConnectGroupPrepareAssignmentResponse(error_code=error, error_message=message)
        self.prepared = True
        name, v, _, _ = self.negotiated()
        units = self.units
        cat, tasks = wire.ConnectGroupPrepareAssignmentResponseConnectorsAndTasks, \
            wire.ConnectGroupPrepareAssignmentResponseConnectorTasks
        members = []
        for x in self.members.values():
            a = next(b for b in x.assignors if b[0] == name)
            tv, tm = self.target_meta.get(x.member_id, (-1, b""))
            members.append(wire.ConnectGroupPrepareAssignmentResponseMember(
                member_id=x.member_id, member_epoch=x.member_epoch, instance_id=x.instance_id, minimum_version=a[1],
                maximum_version=a[2], reason=a[3], metadata=a[5],
                target=units.to_wire(self.target.get(x.member_id), cat, tasks), target_version=tv,
                target_metadata=tm))
        departed = [wire.ConnectGroupPrepareAssignmentResponseDepartedMember(
            member_id=mid, instance_id=iid, target=units.to_wire(ids, cat, tasks))
            for mid, (iid, ids) in self.departed.items()]
        return wire.ConnectGroupPrepareAssignmentResponse(
            group_epoch=self.group_epoch, assignor_name=name or "", assignor_version=v,
            assignor_state=self.assignor_state, delay_remaining_ms=self.delay_remaining_ms(), members=members,
            departed_members=departed)

    def delay_remaining_ms(self) -> int:
        if self.delay_deadline_ms < 0:
            return -1
        return int(min(max(self.delay_deadline_ms - self.timers.clock.wall_ms(), 0), 2**31 - 1))

    def install(self, req: wire.ConnectGroupInstallAssignmentRequest) -> wire.ConnectGroupInstallAssignmentResponse:
        def fail(error: int, message: str | None) -> wire.ConnectGroupInstallAssignmentResponse:
            return wire.ConnectGroupInstallAssignmentResponse(error_code=error, error_message=message)

        m, error, message = self._compute_member(req.member_id, req.member_epoch, install=True)
        if m is None:
            return fail(error, message)
        if req.group_epoch != self.group_epoch:
            return fail(E.REBALANCE_IN_PROGRESS, f"The assignment was computed for group epoch {req.group_epoch}; "
                        f"the group is at epoch {self.group_epoch}.")
        if req.error == CONFIG_MISMATCH:
            # The worker's config is behind: keep the current target, ask again at its next heartbeat, and after a
            # second mismatch ask another worker (D12).
            self.mismatches[m.member_id] = self.mismatches.get(m.member_id, 0) + 1
            self.prepared = False
            if self.mismatches[m.member_id] >= 2:
                self._rotate("config mismatch")
            return fail(E.NONE, None)
        if req.error != 0:
            return fail(E.INVALID_REQUEST, f"Error {req.error} is not a known Install error (0, or 1 CONFIG_MISMATCH).")
        if req.assignment_delay_ms < 0:
            return fail(E.INVALID_REQUEST, "AssignmentDelayMs can't be negative.")
        rows: dict[str, int] = {}
        for i, x in enumerate(req.members):
            if x.member_id not in self.members:
                return fail(E.INVALID_REQUEST, f"Member {x.member_id} is not a member of group {self.group_id}.")
            if x.member_id in rows:
                return fail(E.INVALID_REQUEST, f"Member {x.member_id} is listed twice.")
            rows[x.member_id] = i
        units = self.units
        mark = units.mark()
        try:
            all_units: list[int] = []
            lens_list = []
            for x in req.members:
                n = len(all_units)
                units.intern(x.connectors_and_tasks, all_units)
                lens_list.append(len(all_units) - n)
        except ValueError as e:
            units.rollback(mark)
            return fail(E.INVALID_REQUEST, f"Invalid unit: {e}.")
        lens = np.array(lens_list, dtype=np.int64)
        flat = np.array(all_units, dtype=np.int32) if all_units else _NONE
        row_of = np.repeat(np.arange(lens.shape[0], dtype=np.int64), lens)
        order = np.lexsort((flat, row_of))  # each member's units ascending, members in request order
        flat = flat[order]
        dup = np.flatnonzero((flat[1:] == flat[:-1]) & (row_of[1:] == row_of[:-1]))  # twice for one member
        counts = np.bincount(flat) if flat.shape[0] else flat
        if dup.shape[0] or (counts.shape[0] and counts.max() > 1):
            twice = int(flat[dup[0]]) if dup.shape[0] else int(np.flatnonzero(counts > 1)[0])
            owner_rows = np.unique(row_of[flat == twice])
            names = units.to_dict(np.array([twice], dtype=np.int32))
            units.rollback(mark)
            return fail(E.INVALID_REQUEST, f"Unit {names} is assigned more than once "
                        f"({', '.join(req.members[int(r)].member_id for r in owner_rows[:2])}).")
        # Valid: from here on nothing fails. The unit table grows, the target is replaced.
        grown = len(units) > mark[1]
        if grown:
            self.unit_epochs.grow(np.array([0, len(units)], dtype=np.int64))
        listed_indptr = np.zeros(lens.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=listed_indptr[1:])
        ids = list(self.members)
        get = rows.get
        indptr, new_flat = csr_take(listed_indptr, flat, np.fromiter((get(m, -1) for m in ids), dtype=np.int64,
                                                                     count=len(ids)))
        new_flat = new_flat.astype(np.int32, copy=False)
        old_indptr, old = self.target.rows_for(ids)
        self.target.set(ids, indptr, new_flat)
        meta = {x.member_id: (x.version, bytes(x.metadata)) for x in req.members}
        changed = csr_changed(old_indptr, old, indptr, new_flat)
        store = self.store
        if store.persistent and grown:
            store.stage(R.connect_units_key(self.group_id), R.connect_value(units.record()))
        for i, mid in enumerate(ids):
            mv = meta.get(mid, (-1, b""))
            if changed[i] or self.target_meta.get(mid) != mv:
                self.target_meta[mid] = mv
                self.stage_target_member(mid, new_flat[indptr[i]:indptr[i + 1]], mv)
        self.assignment_epoch = self.group_epoch
        self.assignor_name, v = self.negotiated()[:2]
        self.assignor_version = v
        self.assignor_state = bytes(req.assignor_state) if req.assignor_state is not None else None
        self.departed.clear()
        delay = min(req.assignment_delay_ms, self.config.group_connect_max_assignment_delay_ms)
        if delay > 0:
            self.delay_deadline_ms = self.timers.clock.wall_ms() + delay
            self.group_timers.arm(DELAY, delay)
        else:
            self.delay_deadline_ms = -1
            self.group_timers.cancel(DELAY)
        self.computing, self.prepared = None, False
        self.mismatches.clear()
        self.excluded.clear()
        self.group_timers.cancel(COMPUTE)
        self.stage_target_metadata()
        self.stage_group()
        return fail(E.NONE, None)

    # ---- membership changes ---------------------------------------------------------------------------------

    def hand_over(self, old: ConnectMember, m: ConnectMember) -> None:
        """The replacement takes the old worker's target version and metadata, and its computation if it was asked
        for one."""
        self._count_assignors(m.assignors, 1)  # the replacement, with the old worker's assignors, counts from now
        if old.member_id in self.target_meta:
            self.target_meta[m.member_id] = self.target_meta.pop(old.member_id)
        if self.computing == old.member_id:
            self.computing, self.prepared = m.member_id, False
        self.remove_member(old, reason=None, departed=False)
        self._negotiated = None  # the replacement joins the members next

    def leave_for_now(self, m: ConnectMember) -> None:
        """Away for now: it keeps its units and target; no bump, no computation (D4); if it was computing, another
        worker is asked."""
        super().leave_for_now(m)
        if self.computing == m.member_id:
            self._rotate("the computing worker left for now")

    def fence(self, m: ConnectMember, why: str) -> Group:
        """A worker left or was fenced: removed, its target remembered as departed, the epoch bumped (`why` in the
        rebalance history)."""
        self.remove_member(m, reason=why, departed=True)
        return self

    def remove_member(self, m: ConnectMember, *, reason: str | None, departed: bool) -> None:
        """A worker leaves, is fenced or is replaced: tombstones (current assignment, target, metadata), its units
        freed, its timers gone; its target is remembered as departed (the next Prepare reports it) and, unless it is
        being replaced, the group epoch is bumped."""
        if departed:
            held = self.target.get(m.member_id)
            if held.shape[0]:
                self.departed[m.member_id] = (m.instance_id, held)
        self.forget_member(m)
        self._count_assignors(m.assignors, -1)
        if not self.members:
            self.empty_since_ms = self.timers.clock.wall_ms()
        self._negotiated = None
        self.target_meta.pop(m.member_id, None)
        self.excluded.discard(m.member_id)
        self.mismatches.pop(m.member_id, None)
        if self.computing == m.member_id:
            self.computing, self.prepared = None, False
        if reason is not None:
            self.bump(reason)
            self.owe_computation()  # the computing worker went, or this departure calls for a computation
        if not self.members:
            self.group_timers.cancel(COMPUTE)
            self.computing = None

    def bump(self, reason: str) -> None:
        """Move the group epoch. A computation under way is now for an old epoch (its Install would get
        REBALANCE_IN_PROGRESS): the computing worker is asked again, with a fresh lease; or, within the assignment
        interval of its ask, nobody computes until the interval is over (its Install then gets UNKNOWN_MEMBER_ID,
        which a worker reads as the group having moved on), and a worker is chosen then (the same one, rank
        permitting)."""
        self.group_epoch += 1
        self.history.append(Rebalance(self.group_epoch, self.timers.clock.wall_ms(), reason))
        self.stage_group()
        trigger = self.change[0] if self.change is not None else "other"
        self.change = None
        self.events.rebalance_started("connect", self.group_id, self.group_epoch, len(self.members), trigger, reason)
        m = self.members.get(self.computing) if self.computing is not None else None
        if m is not None and self.prepared:
            self.prepared = False
            if self.ask_wait_ms():
                self.computing = None
                self.owe_computation()
            else:
                self.asked_at = self.timers.clock.now_ms()
                self.group_timers.arm(COMPUTE, self.lease_ms(m))

    # ---- reconciliation -----------------------------------------------------------------------------------------

    def step_inputs(self, m: ConnectMember, owned) -> tuple[np.ndarray, np.ndarray | None, None]:
        """`owned`: the request's ConnectorsAndTasks, or None; every unit lies in "topic" 0 of the epoch table."""
        return _ONE_TOPIC, None if owned is None else self.units.lookup(owned), None

    def reconciled(self, m: ConnectMember) -> None:
        """At the assignment epoch, the assignment's Version and Metadata are its target's."""
        if m.member_epoch == self.assignment_epoch:
            meta = self.target_meta.get(m.member_id, (-1, b""))
            if m.delivered != meta:
                m.delivered = meta

    # ---- timers -------------------------------------------------------------------------------------------------

    def session_timeout_ms(self, m: ConnectMember) -> int:
        return self.config.group_connect_session_timeout_ms

    def on_group_timer(self, kind: str) -> None:
        if kind == COMPUTE and self.computing is not None and self.group_epoch > self.assignment_epoch:
            self._rotate("the compute lease expired")  # the slow worker is not fenced (D8)
        elif kind == ASSIGN:
            self.owe_computation()
        elif kind == DELAY:
            self.delay_deadline_ms = -1
            self.change = ("scheduled-delay", "")
            self.bump("the scheduled rebalance delay ended")
            self.owe_computation()

    # ---- records ------------------------------------------------------------------------------------------------

    def stage_group(self) -> None:
        if self.store.persistent:
            self.store.stage(R.connect_group_key(self.group_id), R.connect_value(wire.ConnectGroupMetadataValue(
                epoch=self.group_epoch, assignor_state=self.assignor_state, delay_deadline_ms=self.delay_deadline_ms,
                departed_members=[wire.ConnectGroupMetadataValueDepartedMember(
                    member_id=mid, instance_id=iid, units=ids.tolist()) for mid, (iid, ids) in self.departed.items()])))

    def stage_member_metadata(self, m: ConnectMember) -> None:
        if self.store.persistent:
            self.store.stage(R.connect_member_key(self.group_id, m.member_id), R.connect_value(
                wire.ConnectGroupMemberMetadataValue(
                    instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms, joined=m.joined, client_assignors=[
                        wire.ConnectGroupMemberMetadataValueAssignor(
                            name=a[0], minimum_version=a[1], maximum_version=a[2], reason=a[3], version=a[4],
                            metadata=a[5]) for a in m.assignors])))

    def stage_target_member(self, member_id: str, ids: np.ndarray, meta: tuple[int, bytes] | None = None) -> None:
        """`meta`: the target's (version, metadata), if not the one the group has for the member."""
        if self.store.persistent:
            if meta is None:
                meta = self.target_meta.get(member_id, (-1, b""))
            self.store.stage(R.connect_target_member_key(self.group_id, member_id), R.connect_value(
                wire.ConnectGroupTargetAssignmentMemberValue(units=ids.tolist(), version=meta[0], metadata=meta[1])))

    def stage_target_metadata(self) -> None:
        if self.store.persistent:
            self.store.stage(R.connect_target_metadata_key(self.group_id), R.connect_value(
                wire.ConnectGroupTargetAssignmentMetadataValue(
                    assignment_epoch=self.assignment_epoch, assignor_name=self.assignor_name,
                    assignor_version=self.assignor_version)))

    def stage_current_assignment(self, m: ConnectMember) -> None:
        if self.store.persistent:
            self.store.stage(R.connect_current_assignment_key(self.group_id, m.member_id), R.connect_value(
                wire.ConnectGroupCurrentMemberAssignmentValue(
                    member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
                    assigned=m.assigned.tolist(), pending_revocation=m.pending.tolist())))

    def on_loaded(self) -> None:
        """Rebuild the group from its records: the unit table first (every other record names unit ids), then the
        members, their targets and current assignments; check every id against the table and every unit against
        the epoch table (a unit held twice is refused); arm the timers, including the scheduled delay."""
        records, self._loaded = self._loaded, []
        targets: dict[str, wire.ConnectGroupTargetAssignmentMemberValue] = {}
        current: dict[str, wire.ConnectGroupCurrentMemberAssignmentValue] = {}
        group = None
        for rec in records:
            v = rec.value
            if rec.type == R.CONNECT_GROUP_UNITS:
                self.units.restore(v)
            elif rec.type == R.CONNECT_GROUP_METADATA:
                group = v
            elif rec.type == R.CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA:
                self.assignment_epoch, self.assignor_name = v.assignment_epoch, v.assignor_name
                self.assignor_version = v.assignor_version
            elif rec.type == R.CONNECT_GROUP_MEMBER_METADATA:
                m = ConnectMember(rec.key.member_id)
                m.instance_id, m.client_id, m.client_host = v.instance_id, v.client_id, v.client_host
                m.rebalance_timeout_ms, m.joined = v.rebalance_timeout_ms, v.joined
                m.assignors = tuple(_assignor_tuple(a) for a in v.client_assignors)
                self.members[m.member_id] = m
                self.joins = max(self.joins, m.joined)
            elif rec.type == R.CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER:
                targets[rec.key.member_id] = v
            elif rec.type == R.CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                current[rec.key.member_id] = v
        self._negotiated, self._support, self._eldest = None, None, None  # built from the loaded members on use
        n = len(self.units)
        self.unit_epochs.grow(np.array([0, n], dtype=np.int64))

        def ids_of(lst: list[int], what: str) -> np.ndarray:
            a = np.asarray(lst, dtype=np.int32)
            if a.shape[0] and (a.min() < 0 or a.max() >= n):
                raise ValueError(f"{what} names a unit outside the unit table")
            return np.unique(a) if a.shape[0] else _NONE

        if group is not None:
            self.group_epoch = group.epoch
            self.assignor_state = group.assignor_state
            self.delay_deadline_ms = group.delay_deadline_ms
            self.departed = {d.member_id: (d.instance_id, ids_of(d.units, f"departed member {d.member_id}"))
                             for d in group.departed_members}
        elif self.members:
            raise ValueError("members without the group record")
        self.target.load({mid: ids_of(t.units, f"the target of {mid}") for mid, t in targets.items()
                          if mid in self.members})
        self.target_meta = {mid: (t.version, bytes(t.metadata)) for mid, t in targets.items() if mid in self.members}
        for m in self.members.values():
            if m.instance_id is not None:
                self.static[m.instance_id] = m.member_id
            a = current.get(m.member_id)
            if a is not None:
                if a.member_epoch == self.assignment_epoch:
                    m.delivered = self.target_meta.get(m.member_id, (-1, b""))
                self.load_current(m, a, ids_of(a.assigned, f"the assignment of {m.member_id}"),
                                  ids_of(a.pending_revocation, f"the pending revocation of {m.member_id}"))
            self.arm_loaded(m)
        if self.delay_deadline_ms >= 0:
            self.group_timers.arm(DELAY, max(self.delay_remaining_ms(), 0))
        self.owe_computation()

    # ---- ConnectGroupDescribe -----------------------------------------------------------------------------------

    def connect_described(self) -> wire.ConnectGroupDescribeResponseDescribedGroup:
        cat, tasks = wire.ConnectGroupDescribeResponseConnectorsAndTasks, wire.ConnectGroupDescribeResponseConnectorTasks
        units = self.units
        name, v, _, _ = self.negotiated()
        members = []
        for m in self.members.values():
            a = next((b for b in m.assignors if b[0] == name), None)
            members.append(wire.ConnectGroupDescribeResponseMember(
                member_id=m.member_id, instance_id=m.instance_id, member_epoch=m.member_epoch,
                state=MEMBER_STATES.get(m.state, str(m.state)), client_id=m.client_id, client_host=m.client_host,
                minimum_version=a[1] if a else -1, maximum_version=a[2] if a else -1,
                assignment=units.to_wire(m.assigned, cat, tasks),
                target_assignment=units.to_wire(self.target.get(m.member_id), cat, tasks),
                pending_revocation=units.to_wire(m.pending, cat, tasks)))
        lease = -1
        if self.computing is not None and self.group_timers.is_armed(COMPUTE):
            k = self.group_timers.key(COMPUTE)
            lease = max(self.timers.remaining_ms(k), 0)
        return wire.ConnectGroupDescribeResponseDescribedGroup(
            error_code=E.NONE, group_id=self.group_id, group_state=self.state_name, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=name, assignor_version=v,
            computing_member_id=self.computing, compute_remaining_ms=lease,
            delay_remaining_ms=self.delay_remaining_ms(), members=members,
            history=[wire.ConnectGroupDescribeResponseRebalance(group_epoch=h.group_epoch, timestamp_ms=h.time_ms,
                                                                reason=h.reason) for h in self.history])

    def describe_extension(self) -> dict:
        """What `kcoord describe` shows beyond ConnectGroupDescribe: the installed assignor and version, and the
        departed workers whose units wait for the next computation."""
        return {"installed_assignor": self.assignor_name, "installed_version": self.assignor_version,
                "departed": {mid: {"instance_id": iid, **self.units.to_dict(ids)}
                             for mid, (iid, ids) in self.departed.items()}}
