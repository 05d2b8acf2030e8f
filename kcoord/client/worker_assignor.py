"""The connect groups' client-side assignor: Kafka Connect's incremental cooperative assignor (``ICA``,
``IncrementalCooperativeAssignor.java``), adapted to kcoord's coordinator-driven reconciliation
(docs/connect-protocol.md §1, D9-D14; the D-numbers in this module are that file's decisions).

The coordinator picks one worker, which calls ConnectGroupPrepareAssignment, runs `IncrementalCooperativeAssignor`
over what it got (`AssignmentInput`) and installs the result (`AssignmentOutput`) with
ConnectGroupInstallAssignment. The result is a **complete target** per member: the coordinator derives the
revocations itself (revoke first, then assign), so there is no revoked list and no second "follow-up" round.

Units. A connector unit per name in ``units`` and task units ``(name, 0..n-1)``. Connector names are sorted, so a
connector has index ``c`` and its tasks the contiguous integer ids ``base[c] .. base[c] + n - 1``; everything below
runs on numpy arrays over those ids (no per-unit Python objects). Units in a member's target that are no longer in
``units`` (a deleted connector, a task index beyond the new count) are dropped. Should two members claim a unit
(the coordinator never installs that), the first in input order keeps it.

Config consistency (ICA ``ensureLeaderConfig``, D12). The computing worker's `WorkerMetadata.config_offset` must
be at least every member's; else the output is ``error = CONFIG_MISMATCH`` with no members, delay 0 and the state
passed in (a fresh empty state if there was none), and the coordinator asks again later. The computing worker must
be one of ``members`` (the coordinator only asks members): otherwise `assign` raises ValueError.

Lost units (ICA ``handleLostAssignments``). A unit is lost when a departed worker (``departed``, or a holder
remembered in ``state``) held it and no current member holds it. Per departed holder:

* a current member with the holder's member id, or else (when not None) its instance id, gets the units back at
  once: a worker that returns within the delay keeps its units and nothing moves;
* otherwise, with ``scheduled_rebalance_max_delay_ms > 0``, the units stay unassigned until the holder's deadline,
  fixed when the units are first seen lost (first-seen + delay; later computations keep it, whatever their own
  delay setting, except that a delay of 0 releases everything at once). The output ``delay_ms`` is the time left
  to the earliest deadline, and the holder's identity, deadline and units (names and task ranges) go into
  ``state``;
* once ``now_ms >= deadline`` (or at once with a delay of 0) the units are assigned like new ones and forgotten.

Deadlines are wall-clock ms of the worker that first saw the loss. When a scheduled delay is still running
(``delay_remaining_ms >= 0``), the coordinator's clock is the reference: the remembered deadlines are shifted so
that the earliest one falls at ``now_ms + delay_remaining_ms`` (the coordinator armed its timer with the delay the
state was installed with, so this cancels the skew between two workers' clocks, and honours a delay the coordinator
clamped). With no delay running (``-1``) the deadlines are compared with ``now_ms`` as stored.

Balance. Connectors and tasks are balanced separately, over the units assigned by this computation (held-back
lost units count in no one's load): with A units and N members every member ends with ``A // N`` or ``A // N + 1``
units of each kind. The ``A % N`` extra quotas go to the members that already hold the most (ties: member id
order), so the fewest units move: only a member above its quota gives units up (its highest ids, so what it keeps
and what it gives stay contiguous runs), and only members under their quota receive. Free units (new, released,
lost past their deadline) are handed out in id order as contiguous chunks, least-loaded members first (ties:
member id order): a member receives runs of a connector's tasks where it can.

Choices that differ from Connect's ICA:

* No revoked list, no two-phase "revoke now, assign next round": the coordinator reconciles each worker from its
  complete target (D14). Hence also no ``consecutiveRevokingRebalancesBackoff``: a balancing move costs one
  revocation handled by the coordinator, not an extra group-wide rebalance.
* The balance above holds in every output, also while lost units wait for their deadline (ICA postpones its
  load-balancing revocations during a scheduled delay): held-back units count in no one's load, and a worker that
  joins during the delay gets its share of the assignable units at once.
* One deadline per departed holder (ICA keeps one scheduled rebalance for every loss that happens before it
  fires).
* The state persisted through the coordinator (D10) holds only the pending lost units, never an assignment: ICA's
  leader keeps its previous assignment in memory, which is gone when another worker computes.

Encodings. `WorkerMetadata` (what each worker advertises as its assignor Metadata) is JSON
``{"url": ..., "config_offset": ...}`` at every version. `AssignmentMetadata` (each member's assignment Metadata)
is JSON ``{"version", "leader", "leader_url"}`` plus ``"config_offset"`` at version 2 and above; it is encoded at
the negotiated version V (``AssignmentInput.version``), and ``MemberAssignment.version`` is V. The leader (D11) is
the one named in the members' current target metadata while it is still a member, else the computing worker;
``config_offset`` is the highest offset among the members. The state is compact JSON
``{"v": 1, "next": <earliest deadline>, "lost": [{"member", "instance", "deadline", "connectors": [...],
"tasks": [[connector, [start, end, start, end, ...]], ...]}]}`` with half-open task id ranges; unreadable state
counts as empty.

Speed. One call at 1,000 workers x 100,000 tasks takes about 10 ms in the steady state (benches/
bench_connect_assignor.py; target < 100 ms), reading the input lists and building the output included: task ids
are read with one `np.fromiter` over all lists, ownership, loss and balance are array operations, and the output
allocates one `ConnectorTasks` per (member, connector) run (slotted dataclasses). The cyclic garbage collector is
paused during a call (it allocates no cycles; collections would only traverse the large input again and again).

The output is a function of the input: members keep input order, connectors are listed in name order, tasks
grouped by connector (name order) with ids ascending, and no decision depends on the order of ``units``.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

__all__ = [
    "CONFIG_MISMATCH",
    "AssignmentInput",
    "AssignmentMetadata",
    "AssignmentOutput",
    "ConnectorTasks",
    "DepartedInput",
    "IncrementalCooperativeAssignor",
    "MemberAssignment",
    "MemberInput",
    "UnitSet",
    "WorkerMetadata",
]

CONFIG_MISMATCH = 1  # Install's top-level Error when the computing worker's config is behind
STATE_VERSION = 1
_INT32_MAX = 2**31 - 1
_HOLD = -2  # owner code of a lost unit held back for its deadline; -1 = free (to be assigned now)


# ---- input and output ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ConnectorTasks:
    """Tasks of one connector (duck-typing: wire objects with .connector and .task_ids also work as input)."""
    connector: str
    task_ids: list[int]


@dataclass
class UnitSet:
    """Connectors and tasks (duck-typing: wire objects with .connectors and .tasks also work as input)."""
    connectors: list[str] = field(default_factory=list)
    tasks: list[ConnectorTasks] = field(default_factory=list)


@dataclass
class MemberInput:
    """One worker as ConnectGroupPrepareAssignment lists it."""
    member_id: str
    instance_id: str | None
    metadata: bytes  # the worker's own assignor metadata (WorkerMetadata)
    target: UnitSet  # its current target assignment
    target_metadata: bytes = b""  # the assignment metadata it was last given (b"" if none)


@dataclass
class DepartedInput:
    """A worker fenced or gone since the last Install, with the target it held."""
    member_id: str
    instance_id: str | None
    target: UnitSet


@dataclass
class AssignmentInput:
    computing_member_id: str
    version: int  # the negotiated assignor version V; assignment metadata is encoded at V
    now_ms: int  # wall clock ms
    units: Mapping[str, int]  # connector name -> number of tasks (tasks 0..n-1; 0 = a connector without tasks)
    members: list[MemberInput]
    departed: list[DepartedInput]
    state: bytes | None  # AssignorState left by the previous Install (None the first time)
    delay_remaining_ms: int = -1  # scheduled delay still running from the previous Install (-1 none)


@dataclass(slots=True)
class MemberAssignment:
    member_id: str
    connectors: list[str]
    tasks: list[ConnectorTasks]  # grouped by connector, task ids ascending
    version: int
    metadata: bytes  # AssignmentMetadata encoded at `version`


@dataclass
class AssignmentOutput:
    error: int  # 0, or CONFIG_MISMATCH (then members is empty)
    members: list[MemberAssignment]  # every input member, in input order
    delay_ms: int  # > 0: the coordinator must ask for a new computation after this long
    state: bytes  # AssignorState to persist (the coordinator returns it on the next Prepare)


# ---- metadata ------------------------------------------------------------------------------------------------------


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


_decode_json = json.JSONDecoder().decode


def _load(data: Any) -> Any:
    """JSON bytes to an object; None when empty or unreadable."""
    if not data:
        return None
    try:
        return _decode_json(bytes(data).decode())
    except (ValueError, TypeError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class WorkerMetadata:
    """What a worker advertises: its REST url and the config-topic offset it has read (JSON, every version)."""
    url: str
    config_offset: int

    def encode(self) -> bytes:
        return _json({"url": self.url, "config_offset": self.config_offset})

    @staticmethod
    def decode(data: bytes) -> WorkerMetadata:
        """Tolerant: empty or unreadable metadata gives url "" and offset -1."""
        obj = _load(data)
        if not isinstance(obj, dict):
            return WorkerMetadata("", -1)
        url = obj.get("url")
        return WorkerMetadata(url if isinstance(url, str) else "", _int(obj.get("config_offset"), -1))


@dataclass
class AssignmentMetadata:
    """What each member's assignment carries: the leader worker and (version >= 2) the config offset."""
    leader: str  # member id of the leader worker
    leader_url: str
    config_offset: int  # carried at version >= 2 only; decoding a version-1 blob gives -1
    version: int

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"version": self.version, "leader": self.leader, "leader_url": self.leader_url}
        if self.version >= 2:
            obj["config_offset"] = self.config_offset
        return _json(obj)

    @staticmethod
    def decode(data: bytes) -> AssignmentMetadata | None:
        """None for empty or unreadable metadata."""
        obj = _load(data)
        if not isinstance(obj, dict) or not isinstance(obj.get("leader"), str):
            return None
        version = _int(obj.get("version"), 1)
        url = obj.get("leader_url")
        offset = _int(obj.get("config_offset"), -1) if version >= 2 else -1
        return AssignmentMetadata(obj["leader"], url if isinstance(url, str) else "", offset, version)


# ---- the unit space --------------------------------------------------------------------------------------------


class _Units:
    """Interned units: connector index c (name order), task unit base[c] + t."""

    def __init__(self, units: Mapping[str, int]) -> None:
        self.names = sorted(units)
        self.index = {n: i for i, n in enumerate(self.names)}
        c = len(self.names)
        self.counts = np.fromiter((max(int(units[n]), 0) for n in self.names), dtype=np.int64, count=c)
        self.base = np.zeros(c + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.base[1:])
        self.n_connectors = c
        self.n_tasks = int(self.base[-1])
        self.conn_of = np.repeat(np.arange(c, dtype=np.int64), self.counts)  # task unit -> connector index

    def read(self, sets: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(connector ids, their rows, task unit ids, their rows) of the unit sets `sets` (row = position in sets);
        unknown connectors and task ids out of range are dropped."""
        get = self.index.get
        c_names: list[str] = []
        c_lens: list[int] = []
        entries: list[Any] = []
        e_rows: list[int] = []
        for row, s in enumerate(sets):
            if s is None:
                c_lens.append(0)
                continue
            names = s.connectors or ()
            c_names.extend(names)
            c_lens.append(len(names))
            ts = s.tasks
            if ts:
                entries.extend(ts)
                e_rows.extend([row] * len(ts))
        conns = np.fromiter((get(n, -1) for n in c_names), dtype=np.int64, count=len(c_names))
        c_rows = np.repeat(np.arange(len(c_lens), dtype=np.int64), np.asarray(c_lens, dtype=np.int64))
        keep = conns >= 0
        conns, c_rows = conns[keep], c_rows[keep]
        t_lists = [ct.task_ids or () for ct in entries]
        lens = np.fromiter(map(len, t_lists), dtype=np.int64, count=len(t_lists))
        total = int(lens.sum())
        if not total:
            return conns, c_rows, np.zeros(0, np.int64), np.zeros(0, np.int64)
        ids = np.fromiter(chain.from_iterable(t_lists), dtype=np.int64, count=total)
        conn = np.repeat(np.fromiter((get(ct.connector, -1) for ct in entries), dtype=np.int64, count=len(entries)),
                         lens)
        rows = np.repeat(np.asarray(e_rows, dtype=np.int64), lens)
        limit = np.where(conn >= 0, self.counts[conn], 0) if self.n_connectors else np.zeros(total, np.int64)
        keep = (conn >= 0) & (ids >= 0) & (ids < limit)
        conn, ids, rows = conn[keep], ids[keep], rows[keep]
        return conns, c_rows, self.base[conn] + ids, rows

    def task_ranges(self, units: np.ndarray) -> list[list[Any]]:
        """Sorted task units as [[connector, [start, end, ...]], ...] with half-open task id ranges."""
        if not units.shape[0]:
            return []
        conn = self.conn_of[units]
        local = units - self.base[conn]
        brk = np.flatnonzero((np.diff(units) != 1) | (np.diff(conn) != 0)) + 1
        starts = np.concatenate(([0], brk))
        ends = np.concatenate((brk, [units.shape[0]]))
        out: list[list[Any]] = []
        for c, a, b in zip(conn[starts].tolist(), local[starts].tolist(), (local[ends - 1] + 1).tolist(),
                           strict=True):
            name = self.names[c]
            if out and out[-1][0] == name:
                out[-1][1].extend((a, b))
            else:
                out.append([name, [a, b]])
        return out

    def from_ranges(self, connectors: Any, tasks: Any) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of task_ranges (plus connector names): units still in the unit set, unknown ones dropped."""
        cs = [self.index[n] for n in connectors if isinstance(n, str) and n in self.index] \
            if isinstance(connectors, list) else []
        parts: list[np.ndarray] = []
        for entry in tasks if isinstance(tasks, list) else ():
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
                continue
            c = self.index.get(entry[0]) if isinstance(entry[0], str) else None
            if c is None:
                continue
            n, base, flat = int(self.counts[c]), int(self.base[c]), entry[1]
            for a, b in zip(flat[0::2], flat[1::2], strict=False):
                a, b = max(_int(a, 0), 0), min(_int(b, 0), n)
                if a < b:
                    parts.append(np.arange(base + a, base + b, dtype=np.int64))
        tasks_out = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        return np.unique(np.asarray(cs, dtype=np.int64)), tasks_out


def _split(values: np.ndarray, rows: np.ndarray, k: int) -> list[np.ndarray]:
    """values grouped by row 0..k-1 (each group in its original order)."""
    order = np.argsort(rows, kind="stable")
    bounds = np.searchsorted(rows[order], np.arange(k + 1)).tolist()
    ordered = values[order]
    return [ordered[bounds[i]:bounds[i + 1]] for i in range(k)]


def _claims(n: int, units: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per unit (n of them): the lowest row claiming it, -1 where none."""
    first = np.full(n, _INT32_MAX, dtype=np.int64)
    if units.shape[0]:
        np.minimum.at(first, units, rows)
    first[first == _INT32_MAX] = -1
    return first


# ---- balance -------------------------------------------------------------------------------------------------------


def _balance(owner: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The balanced, sticky owners of one kind of unit.

    owner: per unit, its member (>= 0), -1 free (to assign now) or _HOLD (held back: stays unassigned). rank: the
    members' tie-break order. Every member ends with floor or ceil of (assignable / members); the extra quotas go
    to those holding the most; only members over quota give units up (their highest ids), only members under it
    receive (least loaded first, free units in id order)."""
    n = rank.shape[0]
    new = owner.copy()
    if n == 0:
        new[new == -1] = _HOLD
        return new
    held_units = np.flatnonzero(owner >= 0)
    held_by = owner[held_units]
    cnt = np.bincount(held_by, minlength=n)
    assignable = held_units.shape[0] + int(np.count_nonzero(owner == -1))
    q, r = divmod(assignable, n)
    quota = np.full(n, q, dtype=np.int64)
    if r:
        quota[np.lexsort((rank, -cnt))[:r]] += 1
    over = cnt > quota
    if over.any():
        order = np.argsort(held_by, kind="stable")  # by member, ids ascending within a member
        units, by = held_units[order], held_by[order]
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(cnt[:-1], out=starts[1:])
        release = (np.arange(units.shape[0]) - starts[by]) >= quota[by]
        new[units[release]] = -1
    deficit = quota - np.minimum(cnt, quota)
    pool = np.flatnonzero(new == -1)
    if pool.shape[0]:
        receivers = np.lexsort((rank, cnt))
        receivers = receivers[deficit[receivers] > 0]
        new[pool] = np.repeat(receivers, deficit[receivers])
    return new


# ---- state ---------------------------------------------------------------------------------------------------------


@dataclass
class _Lost:
    """A departed holder's lost units, waiting for `deadline`."""
    member_id: str
    instance_id: str | None
    deadline: int
    connectors: np.ndarray
    tasks: np.ndarray


def _read_state(state: bytes | None, units: _Units) -> tuple[list[_Lost], int | None]:
    """The lost holders remembered in `state` and the earliest deadline it asked for; unreadable state is empty."""
    obj = _load(state)
    if not isinstance(obj, dict) or obj.get("v") != STATE_VERSION:
        return [], None
    out = []
    for e in obj.get("lost") or ():
        if not isinstance(e, dict) or not isinstance(e.get("member"), str):
            continue
        iid = e.get("instance")
        cs, ts = units.from_ranges(e.get("connectors"), e.get("tasks"))
        out.append(_Lost(e["member"], iid if isinstance(iid, str) else None, _int(e.get("deadline"), 0), cs, ts))
    nxt = obj.get("next")
    return out, nxt if isinstance(nxt, int) else None


def _write_state(lost: list[_Lost], units: _Units) -> bytes:
    entries = [{"member": x.member_id, "instance": x.instance_id, "deadline": x.deadline,
                "connectors": [units.names[c] for c in x.connectors.tolist()],
                "tasks": units.task_ranges(x.tasks)} for x in lost]
    obj: dict[str, Any] = {"v": STATE_VERSION, "lost": entries}
    if lost:
        obj["next"] = min(x.deadline for x in lost)
    return _json(obj)


EMPTY_STATE = _json({"v": STATE_VERSION, "lost": []})


# ---- the assignor --------------------------------------------------------------------------------------------------


class IncrementalCooperativeAssignor:
    """Kafka Connect's incremental cooperative assignor as a kcoord connect-group client assignor (module doc)."""

    name = "incremental-cooperative"

    def __init__(self, minimum_version: int = 1, maximum_version: int = 2,
                 scheduled_rebalance_max_delay_ms: int = 300_000) -> None:
        if not 0 <= minimum_version <= maximum_version:
            raise ValueError(f"invalid version range [{minimum_version}, {maximum_version}]")
        self.minimum_version = minimum_version
        self.maximum_version = maximum_version
        self.scheduled_rebalance_max_delay_ms = scheduled_rebalance_max_delay_ms

    def __repr__(self) -> str:
        return (f"IncrementalCooperativeAssignor(minimum_version={self.minimum_version}, maximum_version="
                f"{self.maximum_version}, scheduled_rebalance_max_delay_ms={self.scheduled_rebalance_max_delay_ms})")

    def assign(self, inp: AssignmentInput) -> AssignmentOutput:
        """The complete target of every member (module doc). The cyclic garbage collector is paused for the call:
        it allocates up to one object per (member, connector) run and no cycles, and collections triggered by those
        allocations would only traverse the (large) input again and again."""
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._assign(inp)
        finally:
            if paused:
                gc.enable()

    def _assign(self, inp: AssignmentInput) -> AssignmentOutput:
        members = inp.members
        n = len(members)
        ids = [m.member_id for m in members]
        row_of: dict[str, int] = {}
        for i, mid in enumerate(ids):
            row_of.setdefault(mid, i)
        me = row_of.get(inp.computing_member_id)
        if me is None:
            raise ValueError(f"the computing worker {inp.computing_member_id!r} is not among the members")

        # Config consistency: the computing worker must have read the config topic as far as any member.
        seen: dict[bytes, WorkerMetadata] = {}
        worker_meta = []
        for m in members:
            key = bytes(m.metadata or b"")
            wm = seen.get(key)
            if wm is None:
                wm = seen[key] = WorkerMetadata.decode(key)
            worker_meta.append(wm)
        max_offset = max(wm.config_offset for wm in worker_meta)
        if worker_meta[me].config_offset < max_offset:
            return AssignmentOutput(CONFIG_MISMATCH, [], 0, bytes(inp.state) if inp.state is not None else EMPTY_STATE)

        units = _Units(inp.units)
        nc, nt = units.n_connectors, units.n_tasks
        now = int(inp.now_ms)
        delay = self.scheduled_rebalance_max_delay_ms

        # Who holds what now.
        c_units, c_rows, t_units, t_rows = units.read([m.target for m in members])
        c_owner = _claims(nc, c_units, c_rows)
        t_owner = _claims(nt, t_units, t_rows)

        # Lost units: remembered holders first (their deadlines stand), then those departed since the last Install.
        lost, asked = _read_state(inp.state, units)
        if lost and asked is not None and inp.delay_remaining_ms >= 0:
            shift = now + int(inp.delay_remaining_ms) - asked  # the coordinator's timer is the reference clock
            for x in lost:
                x.deadline += shift
        by_holder = {x.member_id: x for x in lost}
        departed = inp.departed
        if departed:
            dc, dcr, dt, dtr = units.read([d.target for d in departed])
            for d, cs, ts in zip(departed, _split(dc, dcr, len(departed)), _split(dt, dtr, len(departed)),
                                 strict=True):
                holder = by_holder.get(d.member_id)
                if holder is None:
                    holder = by_holder[d.member_id] = _Lost(d.member_id, d.instance_id, now + max(delay, 0), cs, ts)
                    lost.append(holder)
                else:
                    holder.connectors = np.union1d(holder.connectors, cs)
                    holder.tasks = np.union1d(holder.tasks, ts)
        # Per lost holder: back to its returning worker, held for its deadline, or free.
        by_instance: dict[str, int] = {}
        for i, m in enumerate(members):
            if m.instance_id is not None:
                by_instance.setdefault(m.instance_id, i)
        action = np.empty(len(lost), dtype=np.int64)
        for g, x in enumerate(lost):
            back = row_of.get(x.member_id)
            if back is None and x.instance_id is not None:
                back = by_instance.get(x.instance_id)
            if back is not None:
                action[g] = back
            elif delay > 0 and now < x.deadline:
                action[g] = _HOLD
            else:
                action[g] = -1
        held_c = held_t = None
        if lost:
            group_c = _claims(nc, np.concatenate([x.connectors for x in lost]),
                              np.repeat(np.arange(len(lost)), [x.connectors.shape[0] for x in lost]))
            group_t = _claims(nt, np.concatenate([x.tasks for x in lost]),
                              np.repeat(np.arange(len(lost)), [x.tasks.shape[0] for x in lost]))
            for owner, group in ((c_owner, group_c), (t_owner, group_t)):
                where = np.flatnonzero((owner == -1) & (group >= 0))
                owner[where] = action[group[where]]
            held_c, held_t = group_c, group_t

        # Balance: connectors and tasks separately, ties by member id.
        rank = np.empty(n, dtype=np.int64)
        rank[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
        c_new = _balance(c_owner, rank)
        t_new = _balance(t_owner, rank)

        # What stays lost goes into the state.
        pending: list[_Lost] = []
        if held_c is not None and held_t is not None:
            kc = np.flatnonzero(c_new == _HOLD)
            kt = np.flatnonzero(t_new == _HOLD)
            for g, (x, cs, ts) in enumerate(zip(lost, _split(kc, held_c[kc], len(lost)),
                                                _split(kt, held_t[kt], len(lost)), strict=True)):
                if action[g] == _HOLD and (cs.shape[0] or ts.shape[0]):
                    pending.append(_Lost(x.member_id, x.instance_id, x.deadline, cs, ts))
        delay_ms = 0
        if pending:
            delay_ms = int(min(max(min(x.deadline for x in pending) - now, 1), _INT32_MAX))

        # Leader: the one the members' current targets name while it is a member, else the computing worker.
        leader = None
        tried: set[bytes] = set()
        for m in members:
            tm = bytes(m.target_metadata or b"")
            if not tm or tm in tried:
                continue
            tried.add(tm)
            am = AssignmentMetadata.decode(tm)
            if am is not None and am.leader in row_of:
                leader = row_of[am.leader]
                break
        if leader is None:
            leader = me
        version = int(inp.version)
        metadata = AssignmentMetadata(ids[leader], worker_meta[leader].url, max_offset, version).encode()

        out_members = self._members(members, units, c_new, t_new, version, metadata)
        return AssignmentOutput(0, out_members, delay_ms, _write_state(pending, units))

    @staticmethod
    def _members(members: list[MemberInput], units: _Units, c_new: np.ndarray, t_new: np.ndarray, version: int,
                 metadata: bytes) -> list[MemberAssignment]:
        n = len(members)
        names = units.names
        # connectors: by member, names in order
        cu = np.flatnonzero(c_new >= 0)
        co = c_new[cu]
        order = np.argsort(co, kind="stable")
        c_names = [names[c] for c in cu[order].tolist()]
        c_bounds = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(co, minlength=n), out=c_bounds[1:])
        c_bounds_l = c_bounds.tolist()
        # tasks: segments of one member and one connector, ids ascending
        tu = np.flatnonzero(t_new >= 0)
        to = t_new[tu]
        order = np.argsort(to, kind="stable")
        tu, to = tu[order], to[order]
        conn = units.conn_of[tu]
        local = (tu - units.base[conn]).tolist()
        if tu.shape[0]:
            brk = np.flatnonzero((np.diff(conn) != 0) | (np.diff(to) != 0)) + 1
            seg_start = np.concatenate(([0], brk))
            seg_end = np.concatenate((brk, [tu.shape[0]]))
            segs = [ConnectorTasks(names[c], local[a:b]) for c, a, b in
                    zip(conn[seg_start].tolist(), seg_start.tolist(), seg_end.tolist(), strict=True)]
            s_bounds = np.searchsorted(to[seg_start], np.arange(n + 1)).tolist()
        else:
            segs, s_bounds = [], [0] * (n + 1)
        return [MemberAssignment(m.member_id, c_names[c_bounds_l[i]:c_bounds_l[i + 1]],
                                 segs[s_bounds[i]:s_bounds[i + 1]], version, metadata)
                for i, m in enumerate(members)]
