"""A Jepsen-style history of the cluster fault harness and its checker (issue #35). The harness's client threads
record every OffsetCommit and OffsetFetch (`Op`) with its send time, answer time, node and outcome; real consumers'
rebalance callbacks record who owned which partition (`Ownership`); the nemesis records each fault it injected
(`Fault`). `check` then holds the history to the promises:

1. no stale or lost read: a fetch never answers an offset older than one acknowledged before it was sent (nor older
   than one another fetch had already answered before it was sent);
2. no phantom or refused value: a fetch answers only what some commit, not certainly refused, had sent by then;
3. one writer at a time per coordinator partition (the database's write log, kcoord_writes);
4. no partition owned by two members of one group at once;
5. every group served again within lease + bound after a fault heals;

and measures, per fault kind, the longest unavailability of any group. Pure Python: no server, no database."""

from __future__ import annotations

import bisect
import itertools
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

Key = tuple[str, str, int]  # (group, topic, partition)


@dataclass
class Op:
    """One OffsetCommit or OffsetFetch of one (group, topic, partition)."""

    kind: str  # "commit" | "fetch"
    client: str  # the workload client that sent it
    node: int  # the node id it was sent to (0: read from the database directly, at the end)
    group: str
    topic: str
    partition: int
    value: int | None  # commit: the offset sent; fetch: the offset answered (-1: nothing committed); None: no answer
    sent: float  # time.monotonic() when sent
    answered: float | None  # when answered; None when no answer came (timeout, closed connection)
    outcome: str  # "ok" | "fail" (a Kafka error: certainly not applied) | "info" (no answer: maybe applied, any time)
    error: str = ""  # the Kafka error name or the exception, for failed/info ops

    @property
    def key(self) -> Key:
        return (self.group, self.topic, self.partition)


@dataclass
class Ownership:
    """One rebalance callback of a real consumer."""

    member: str
    group: str
    topic: str
    partition: int
    event: str  # "assigned" | "revoked" (revoked, lost or the member closed: it no longer owns it)
    at: float  # time.monotonic()


@dataclass
class Fault:
    kind: str  # "pause-short", "pause-past-lease", "pg-stall", "pg-drop", "pg-reset", "same-id-restart", ...
    nodes: tuple[int, ...]  # the nodes it hit (empty for pg-restart)
    start: float
    healed: float


class History:
    """What the harness saw. Thread-safe: many client threads append at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ops: list[Op] = []
        self.ownership: list[Ownership] = []
        self.faults: list[Fault] = []

    def record(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def own(self, o: Ownership) -> None:
        with self._lock:
            self.ownership.append(o)

    def fault(self, f: Fault) -> None:
        with self._lock:
            self.faults.append(f)

    def snapshot(self) -> tuple[list[Op], list[Ownership], list[Fault]]:
        """Copies of the three lists, taken under the lock (for checking while clients may still append)."""
        with self._lock:
            return list(self.ops), list(self.ownership), list(self.faults)


@dataclass
class Report:
    ops: int
    ok: int
    failed: int
    indeterminate: int
    faults: dict[str, int]  # kind -> how many
    violations: list[str]  # one readable line each
    unavailable: dict[str, float]  # fault kind -> longest unavailability of any group during such a fault (s)

    def text(self) -> str:
        lines = [f"operations: {self.ops} (ok {self.ok}, failed {self.failed}, indeterminate {self.indeterminate})",
                 f"faults: {sum(self.faults.values())}"
                 + "".join(f"\n  {kind}: {n}" for kind, n in sorted(self.faults.items()))]
        if self.unavailable:
            lines.append("longest unavailability per fault kind:"
                         + "".join(f"\n  {kind}: {s:.3f} s" for kind, s in sorted(self.unavailable.items())))
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(f"  {v}" for v in self.violations)
        return "\n".join(lines)


@dataclass
class Clock:
    """Times as they are printed: seconds since the history's first op."""

    t0: float

    def __call__(self, t: float | None) -> str:
        return "never" if t is None else f"{t - self.t0:.3f}"


def _node(n: int) -> str:
    return "the database" if n == 0 else f"node {n}"


def _where(k: Key) -> str:
    return f"group {k[0]} {k[1]}/{k[2]}"


def _value(v: int | None) -> str:
    return "-1 (nothing committed)" if v == -1 else str(v)


@dataclass
class _Prefix:
    """The largest value (and the op that gave it) among events answered before a time: sorted answer times and the
    running maximum."""

    times: list[float] = field(default_factory=list)
    best: list[tuple[int, Op]] = field(default_factory=list)

    @classmethod
    def of(cls, events: Iterable[tuple[float, int, Op]]) -> _Prefix:
        p = cls()
        for at, value, op in sorted(events, key=lambda e: e[0]):
            p.times.append(at)
            p.best.append((value, op) if not p.best or value > p.best[-1][0] else p.best[-1])
        return p

    def before(self, t: float) -> tuple[int, Op] | None:
        """The largest value among events answered strictly before t."""
        i = bisect.bisect_left(self.times, t)
        return self.best[i - 1] if i else None


def reads(ops: Iterable[Op], clock: Clock) -> list[str]:
    """Promises 1 and 2, per key. At most one line per fetch: a phantom, refused or future value first (its value
    is then not compared), else a stale read against acknowledged commits, else against earlier reads."""
    commits: dict[Key, list[Op]] = defaultdict(list)
    fetches: dict[Key, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind == "commit" and op.value is not None:
            commits[op.key].append(op)
        elif op.kind == "fetch" and op.outcome == "ok" and op.value is not None:
            fetches[op.key].append(op)
    out = []
    for key in sorted(fetches, key=str):
        by_value: dict[int, list[Op]] = defaultdict(list)
        for c in commits.get(key, []):
            assert c.value is not None
            by_value[c.value].append(c)
        acked = _Prefix.of((c.answered, c.value, c) for c in commits.get(key, [])
                           if c.outcome == "ok" and c.answered is not None and c.value is not None)
        legit, problems = [], []
        for f in sorted(fetches[key], key=lambda f: f.sent):
            problem = _invented(f, by_value.get(f.value, []) if f.value != -1 else None, clock)
            if problem:
                problems.append((f, problem))
            else:
                legit.append(f)
        seen = _Prefix.of((f.answered, f.value, f) for f in legit if f.answered is not None and f.value is not None)
        for f in legit:
            assert f.value is not None
            newest = acked.before(f.sent)
            if newest and f.value < newest[0]:
                c = newest[1]
                problems.append((f, f"stale read: {_fetched(f, clock)}, but {c.value} was "
                                    f"acknowledged to {c.client} by {_node(c.node)} at {clock(c.answered)} "
                                    f"(sent {clock(c.sent)}) before the fetch was sent"))
                continue
            read = seen.before(f.sent)
            if read and f.value < read[0]:
                r = read[1]
                problems.append((f, f"stale read: {_fetched(f, clock)}, but {r.value} "
                                    f"had been answered to {r.client} by {_node(r.node)} at {clock(r.answered)} "
                                    f"(a read went back)"))
        out.extend(p for _, p in sorted(problems, key=lambda fp: fp[0].sent))
    return out


def _invented(f: Op, sources: list[Op] | None, clock: Clock) -> str:
    """Why fetch f's value could not have been read (promise 2), or "". sources: the commits that sent its value
    (None when it answered -1, which any fetch may before a commit is acknowledged)."""
    if sources is None:
        return ""
    if not sources:
        return f"phantom read: {_fetched(f, clock)}, which no commit sent"
    end = f.answered if f.answered is not None else float("inf")
    live = [c for c in sources if c.outcome != "fail"]
    if live and any(c.sent <= end for c in live):
        return ""
    who = _fetched(f, clock)
    if not live:
        c = sources[0]
        return (f"refused value read: {who}, sent only by {c.client}'s commit to {_node(c.node)} at {clock(c.sent)}, "
                f"which failed ({c.error or 'no error name'})")
    c = live[0]
    return (f"future value read: {who}, sent by {c.client}'s commit to {_node(c.node)} only at {clock(c.sent)}, "
            f"after the fetch was answered")


def _fetched(f: Op, clock: Clock) -> str:
    return (f"{_where(f.key)}: fetch by {f.client} at {_node(f.node)} (sent {clock(f.sent)}, answered "
            f"{clock(f.answered)}) answered {_value(f.value)}")


def two_writers(write_log: Iterable[tuple[int, int, int, int]]) -> list[str]:
    """Promise 3, from the write log's rows (partition, seq, epoch, node_id) in any order: per partition in seq
    order, no write at an epoch older than one already written, and no epoch written by two nodes."""
    problems = []
    last: dict[int, int] = {}
    writer: dict[tuple[int, int], int] = {}
    for p, seq, epoch, node in sorted(write_log):
        if p in last and epoch < last[p]:
            problems.append(f"two writers: partition {p}: write {seq} by node {node} at epoch {epoch} after epoch "
                            f"{last[p]}")
        last[p] = max(epoch, last.get(p, epoch))
        if writer.setdefault((p, epoch), node) != node:
            problems.append(f"two writers: partition {p}: epoch {epoch} written by nodes {writer[(p, epoch)]} and "
                            f"{node} (write {seq})")
    return problems


def owned(events: Iterable[Ownership], end: float) -> dict[Key, list[tuple[str, float, float]]]:
    """Per (group, topic, partition), each member's ownership intervals (member, from, to): from "assigned" to the
    member's next "revoked" (a repeated "assigned" is the same interval; a stray "revoked" is ignored); an interval
    never closed lasts to `end`."""
    ordered = sorted(enumerate(events), key=lambda ie: (ie[1].at, ie[0]))
    open_: dict[tuple[Key, str], float] = {}
    out: dict[Key, list[tuple[str, float, float]]] = defaultdict(list)
    for _, e in ordered:
        k = (e.group, e.topic, e.partition)
        if e.event == "assigned":
            open_.setdefault((k, e.member), e.at)
        elif e.event == "revoked" and (k, e.member) in open_:
            out[k].append((e.member, open_.pop((k, e.member)), e.at))
    for (k, member), at in open_.items():
        out[k].append((member, at, max(end, at)))
    return out


def two_owners(events: Iterable[Ownership], end: float, clock: Clock) -> list[str]:
    """Promise 4: two members' intervals of one partition never overlap (one's revoke at the instant of the other's
    assign is a handoff, not an overlap)."""
    problems = []
    for k, intervals in sorted(owned(events, end).items(), key=lambda kv: str(kv[0])):
        intervals.sort(key=lambda i: (i[1], i[2]))
        active: list[tuple[str, float, float]] = []
        for m, a, r in intervals:
            active = [i for i in active if i[2] > a]
            for m2, a2, r2 in active:
                if m2 != m and a2 < r:
                    problems.append(f"two owners: {_where(k)}: member {m2} from {clock(a2)} to {clock(r2)} and member "
                                    f"{m} from {clock(a)} to {clock(r)}")
            active.append((m, a, r))
    return problems


def recovery(ops: list[Op], faults: list[Fault], *, lease_s: float, bound_s: float, end: float,
             clock: Clock) -> tuple[list[str], dict[str, float]]:
    """Promise 5 and the unavailability figures. Ops at node 0 (read from the database at the end) are not service.
    The figure for a fault kind is the longest gap between two ok answers of any group charged to a fault of that
    kind (each gap is charged to the latest fault that started before it ended and whose window reaches its start).

    A group is judged for a fault when its clients were trying in the window [healed, healed + lease + bound]: an op
    sent in it, or sent before and answered in or after it. A fault another one overlaps (the other starts before
    this one's deadline and heals after it) is judged through that other one, whose heal comes later. A group never
    served again after the heal is a violation only if the history goes on past the deadline."""
    served: dict[str, list[float]] = defaultdict(list)  # per group, its ok answers' times, sorted
    tried: dict[str, list[tuple[float, float]]] = defaultdict(list)  # per group, (sent, last seen) of each op
    for op in ops:
        if op.node == 0:
            continue
        tried[op.group].append((op.sent, op.sent if op.answered is None else max(op.sent, op.answered)))
        if op.outcome == "ok" and op.answered is not None:
            served[op.group].append(op.answered)
    for times in served.values():
        times.sort()
    sends: dict[str, list[float]] = {}
    reach: dict[str, list[float]] = {}  # the latest "last seen" among the group's ops sent up to each send, in order
    for group, pairs in tried.items():
        pairs.sort()
        sends[group] = [s for s, _ in pairs]
        reach[group] = list(itertools.accumulate((seen for _, seen in pairs), max))
    problems = []
    unavailable: dict[str, float] = {}
    ordered = sorted(faults, key=lambda f: (f.start, f.healed))
    for f in ordered:
        unavailable.setdefault(f.kind, 0.0)
    # Each gap between two ok answers of a group is charged to the latest fault that started before the gap ended
    # and whose window [start, healed + lease + bound] reaches the gap's start: the fault the group was last hit by.
    starts = [f.start for f in ordered]
    for times in served.values():
        for a, b in itertools.pairwise(times):
            for i in range(bisect.bisect_right(starts, b) - 1, -1, -1):
                f = ordered[i]
                if a <= f.healed + lease_s + bound_s:
                    unavailable[f.kind] = max(unavailable[f.kind], b - a)
                    break
    for f in ordered:
        deadline = f.healed + lease_s + bound_s
        superseded = any(g is not f and g.start <= deadline and g.healed > f.healed for g in faults)
        nodes = ",".join(map(str, f.nodes)) or "-"
        for group in sorted(tried):
            times = served.get(group, [])
            if superseded:
                continue
            i = bisect.bisect_left(times, f.healed)
            first = times[i] if i < len(times) else None
            if first is not None and first <= deadline:
                continue
            n = bisect.bisect_right(sends[group], deadline)  # trying: an op sent by the deadline, seen at/after heal
            if not n or reach[group][n - 1] < f.healed:
                continue
            what = (f"not served again: {f.kind} of nodes {nodes} (from {clock(f.start)}, healed {clock(f.healed)}): "
                    f"group {group}")
            if first is not None:
                problems.append(f"{what} first answered ok at {clock(first)}, {first - f.healed:.3f} s after the heal "
                                f"(lease {lease_s} s + bound {bound_s} s)")
            elif end > deadline:
                problems.append(f"{what} never answered ok after the heal (history ends {clock(end)}; lease "
                                f"{lease_s} s + bound {bound_s} s)")
    return problems, unavailable


def check(history: History, *, write_log: Iterable[tuple[int, int, int, int]] = (), lease_s: float,
          bound_s: float) -> Report:
    """The history against the five promises (see the module's docstring), one line per violation."""
    ops, ownership, faults = history.snapshot()
    times = [t for op in ops for t in (op.sent, op.answered) if t is not None]
    times += [o.at for o in ownership] + [t for f in faults for t in (f.start, f.healed)]
    t0 = min((op.sent for op in ops), default=min(times, default=0.0))
    end = max(times, default=0.0)
    clock = Clock(t0)
    violations = reads(ops, clock) + two_writers(write_log) + two_owners(ownership, end, clock)
    late, unavailable = recovery(ops, faults, lease_s=lease_s, bound_s=bound_s, end=end, clock=clock)
    outcomes = Counter(op.outcome for op in ops)
    return Report(ops=len(ops), ok=outcomes["ok"], failed=outcomes["fail"], indeterminate=outcomes["info"],
                  faults=dict(Counter(f.kind for f in faults)), violations=violations + late,
                  unavailable=unavailable)
