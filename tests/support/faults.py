"""The cluster fault harness (issue 35), the way Jepsen tests a database: real clients work against a kcoord cluster
while a nemesis injects faults, every operation is recorded with its outcome, and the history is checked against
what the cluster promises (tests/support/history.py).

The cluster: three `kcoord serve` nodes over the suite's real PostgreSQL, each reaching it through a TCP proxy of
its own (tests/support/pgproxy.py) and running under libfaketime (tests/support/faketime.py), so one node can be cut
from PostgreSQL, or have its wall clock shifted, while its clients still reach it.

The clients:
- probers, one per probe group: a sequential client that commits (OffsetCommit v7, as an admin: no member) and reads
  (OffsetFetch v7) the group's three partitions, sending each request to the node it last found coordinating the
  group or, one time in three, to any node (Jepsen's clients talk to every node: a node that should no longer answer
  is asked too). It is the only writer of its keys, and each commit carries a value higher than any sent before.
- real consumers (confluent-kafka, librdkafka), two per client group, that commit the partitions librdkafka has
  assigned to them at that moment and read the group's committed offsets back; their rebalance callbacks give the
  ownership history. In the long run one member of a group is replaced now and then, so ownership moves under faults.

The nemesis, one fault at a time with quiet gaps between, each on the coordinator of a random group:
- pause-short / pause-past-lease: SIGSTOP, then SIGCONT short of the lease or well past it;
- pg-stall / pg-drop / pg-reset: the node's PostgreSQL proxy holds every byte, closes and refuses connections, or
  resets them, while clients still reach the node;
- same-id-restart: the node is cut from PostgreSQL with its writes in flight and stopped; another process is started
  with its node.id (refused until the first one's registration runs out), takes its partitions, and serves; then
  the first is resumed and its connection healed, so its held writes reach the database at the old epoch;
- pg-restart: PostgreSQL itself is stopped and started again under every node;
- clock-jump: the node's wall clock is stepped an hour back (or forward) and the node cut from PostgreSQL past its
  lease, which a lease kept by the node's own wall clock would outlive by that hour.
"""

from __future__ import annotations

import collections
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError
from kcoord.pgstore import partition_for

from .cluster_nodes import KCluster
from .history import Clock, Fault, History, Op, Ownership, Report, check, recovery
from .interop_member import ConfluentMember

TOPIC = "orders"
PARTITIONS = 3
KINDS = ("pause-short", "pause-past-lease", "pg-stall", "pg-drop", "pg-reset", "same-id-restart", "pg-restart",
         "clock-jump")
CLIENT_SESSION_MS = 45_000  # librdkafka's default: longer than any outage here


@dataclass
class Settings:
    lease_s: float = 3.0  # the cluster's broker.session.timeout.ms
    bound_s: float = 10.0  # served again within lease + this after a fault heals
    request_timeout_s: float = 1.0  # a writer's wait for one answer: no answer is an indeterminate outcome
    probe_groups: int = 4
    client_groups: int = 2
    members: int = 2
    churn_every_s: float = 0.0  # replace one real member of a client group this often (0: never)


def commit_request(group: str, p: int, value: int) -> wire.OffsetCommitRequest:
    """An OffsetCommit (v7, as an admin: no member) of one partition of TOPIC."""
    return wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=value, committed_leader_epoch=-1, committed_metadata="")])])


def fetch_request(group: str, p: int) -> wire.OffsetFetchRequest:
    """An OffsetFetch (v7) of one partition of TOPIC."""
    return wire.OffsetFetchRequest(group_id=group, topics=[wire.OffsetFetchRequestTopic(
        name=TOPIC, partition_indexes=[p])], require_stable=False)


def fetch_op(client: str, node_id: int, group: str, p: int, sent: float, answered: float,
             r: wire.OffsetFetchResponse) -> Op:
    """The history's record of an answered OffsetFetch v7 of one partition."""
    code = r.error_code or (r.topics[0].partitions[0].error_code if r.topics else E.NONE)
    value = r.topics[0].partitions[0].committed_offset if code == E.NONE else None
    return Op("fetch", client, node_id, group, TOPIC, p, value, sent, answered, "ok" if code == E.NONE else "fail",
              "" if code == E.NONE else E.name(code))


class Values:
    """Per key, values that only grow in the order they are handed out (one writer per key sends them in order)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[tuple[str, str, int], int] = {}

    def next(self, key: tuple[str, str, int]) -> int:
        with self.lock:
            v = self.last[key] = self.last.get(key, 0) + 1
            return v


class Prober:
    """A sequential client of one probe group (see the module docstring)."""

    def __init__(self, cl: KCluster, history: History, group: str, values: Values, seed: int,
                 settings: Settings, stop: threading.Event, reader: bool = False, pause_s: float = 0.02) -> None:
        self.cl, self.history, self.group, self.values = cl, history, group, values
        # A reader only fetches, each request on a connection of its own to a random node, several at a time, and
        # waits long for each answer: the requests sent to a stopped node all through its pause are read when it
        # resumes, before its next lease round can tell it anything (what a node answers then is exactly what its
        # lease deadline decides), some sent after another node took its partitions and acknowledged commits there.
        self.reader = reader
        self.reads: list[threading.Thread] = []
        self.pause_s = pause_s  # a writer's mean pause between two operations
        self.idle = threading.Event()  # set while a writer waits between two operations (none under way)
        self.name = f"{'reader' if reader else 'prober'}-{group}"
        self.timeout = 3 * settings.lease_s + 5 if reader else settings.request_timeout_s
        self.rng = random.Random(seed)
        self.settings = settings
        self.stop = stop
        self.coordinator: int | None = None
        self.clients: dict[tuple[int, int], Client] = {}
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> Prober:
        self.thread.start()
        return self

    def join(self) -> None:
        self.thread.join(30)
        for t in self.reads:
            t.join(10)
        for c in self.clients.values():
            c.close()

    def _client(self, node_id: int) -> Client:
        node = self.cl.node(node_id)
        key = (node_id, node.port)
        c = self.clients.get(key)
        if c is None:
            c = self.clients[key] = Client(node.bootstrap, client_id=self.name, timeout=self.timeout)
        return c

    def _drop(self, node_id: int) -> None:
        node = self.cl.node(node_id)
        c = self.clients.pop((node_id, node.port), None)
        if c is not None:
            c.close()

    def _call(self, node_id: int, req, version: int):
        """The answer, or None when none came (timeout, closed connection, refused connect)."""
        try:
            return self._client(node_id).request(req, version)
        except (OSError, KafkaError, ValueError):
            self._drop(node_id)
            return None

    def _find(self) -> None:
        node_id = self.rng.randint(1, len(self.cl.nodes))
        r = self._call(node_id, wire.FindCoordinatorRequest(key=self.group, key_type=0), 3)
        self.coordinator = r.node_id if r is not None and r.error_code == E.NONE else None

    def _run(self) -> None:
        try:
            if self.reader:
                self._read_forever()
                return
            while not self.stop.is_set():
                served = self._one()
                self.idle.set()  # (a failed operation is retried soon, as clients do)
                time.sleep(self.rng.uniform(0.25, 1.75) * (self.pause_s if served else 0.02))
                self.idle.clear()
        except BaseException as e:  # noqa: BLE001 - reported by the harness
            self.failure = e

    def _read_forever(self) -> None:
        """Fetches pipelined on one open connection per node (Kafka answers in request order): sent without
        waiting, so requests keep reaching a stopped node, already read off their connection when it resumes."""
        lines: dict[int, _Line] = {}
        while not self.stop.is_set():
            node_id, p = self.rng.randint(1, len(self.cl.nodes)), self.rng.randrange(PARTITIONS)
            node = self.cl.node(node_id)
            line = lines.get(node_id)
            if line is None or line.closed or line.port != node.port:
                if line is not None:
                    line.close()
                try:
                    line = lines[node_id] = _Line(self, node_id, node.host, node.port)
                except OSError:
                    lines.pop(node_id, None)
                    time.sleep(0.05)
                    continue
            line.fetch(p)
            time.sleep(self.rng.uniform(0.03, 0.08))
        for line in lines.values():
            line.close()
        self.reads = [line.thread for line in lines.values()]

    def _one(self) -> bool:
        """One operation; whether it was answered without error."""
        p = self.rng.randrange(PARTITIONS)
        if self.coordinator is None or self.rng.random() < 1 / 3:
            if self.coordinator is None:
                self._find()
            node_id = self.coordinator if self.coordinator is not None and self.rng.random() < 0.5 \
                else self.rng.randint(1, len(self.cl.nodes))
        else:
            node_id = self.coordinator
        return (self._commit if self.rng.random() < 0.5 else self._fetch)(node_id, p)

    def _commit(self, node_id: int, p: int) -> bool:
        value = self.values.next((self.group, TOPIC, p))
        sent = time.monotonic()
        r = self._call(node_id, commit_request(self.group, p, value), 7)
        answered = time.monotonic()
        if r is None:
            self._lost(node_id)
            op = Op("commit", self.name, node_id, self.group, TOPIC, p, value, sent, None, "info", "no answer")
        else:
            code = r.topics[0].partitions[0].error_code
            op = Op("commit", self.name, node_id, self.group, TOPIC, p, value, sent, answered,
                    "ok" if code == E.NONE else "fail", "" if code == E.NONE else E.name(code))
            self._follow(node_id, op)
        self.history.record(op)
        return op.outcome == "ok"

    def _fetch(self, node_id: int, p: int) -> bool:
        sent = time.monotonic()
        r = self._call(node_id, fetch_request(self.group, p), 7)
        answered = time.monotonic()
        if r is None:
            self._lost(node_id)
            op = Op("fetch", self.name, node_id, self.group, TOPIC, p, None, sent, None, "info", "no answer")
        else:
            op = fetch_op(self.name, node_id, self.group, p, sent, answered, r)
            self._follow(node_id, op)
        self.history.record(op)
        return op.outcome == "ok"

    def _lost(self, node_id: int) -> None:
        if node_id == self.coordinator:
            self.coordinator = None

    def _follow(self, node_id: int, op: Op) -> None:
        """An answer from `node_id`: served, it is the coordinator if none was known; refused as not (or not yet)
        the coordinator, the coordinator is looked for again."""
        if op.outcome == "ok":
            if self.coordinator is None:
                self.coordinator = node_id
        elif op.error in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS") \
                and node_id == self.coordinator:
            self.coordinator = None


class _Line:
    """A reader's open connection to one node: fetches sent on it without waiting, answers read in order by a
    thread of its own; whatever is unanswered when it fails (or after the reader's timeout) is indeterminate."""

    def __init__(self, reader: Prober, node_id: int, host: str, port: int) -> None:
        self.reader, self.node_id, self.port = reader, node_id, port
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.settimeout(reader.timeout)
        self.lock = threading.Lock()
        self.waiting: collections.deque[tuple[int, int, float]] = collections.deque()  # (correlation id, p, sent)
        self.corr = 0
        self.closed = False
        self.thread = threading.Thread(target=self._answers, name=f"{reader.name}:{node_id}", daemon=True)
        self.thread.start()

    def fetch(self, p: int) -> None:
        r = self.reader
        with self.lock:
            if self.closed or len(self.waiting) >= 256:
                return
            self.corr += 1
            frame = wire.encode_request(wire.OffsetFetchRequest.API_KEY, 7, self.corr, r.name,
                                        fetch_request(r.group, p))
            self.waiting.append((self.corr, p, time.monotonic()))
            try:
                self.sock.sendall(frame)
            except OSError:
                self.closed = True

    def close(self) -> None:
        with self.lock:
            self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def _answers(self) -> None:
        r = self.reader
        why = ""
        try:
            while True:
                (size,) = struct.unpack(">i", self._exact(4))
                corr, resp = wire.decode_response(wire.OffsetFetchRequest.API_KEY, 7, self._exact(size))
                answered = time.monotonic()
                with self.lock:
                    want, p, sent = self.waiting.popleft()
                assert corr == want, (corr, want)
                r.history.record(fetch_op(r.name, self.node_id, r.group, p, sent, answered, resp))
        except (OSError, ConnectionError, IndexError, ValueError) as e:
            why = str(e)[:100] or type(e).__name__
        with self.lock:
            self.closed = True
            left, self.waiting = list(self.waiting), collections.deque()
        for _, p, sent in left:
            r.history.record(Op("fetch", r.name, self.node_id, r.group, TOPIC, p, None, sent, None, "info", why))
        self.sock.close()


class RealMember:
    """A confluent-kafka consumer of a client group, committing what it holds and reading the group's offsets."""

    def __init__(self, cl: KCluster, history: History, group: str, name: str, values: Values, seed: int,
                 settings: Settings, stop: threading.Event) -> None:
        self.history, self.group, self.name, self.values = history, group, name, values
        self.settings = settings
        self.rng = random.Random(seed)
        self.member = ConfluentMember(cl.bootstrap, group, TOPIC, client_id=name, session_timeout_ms=CLIENT_SESSION_MS,
                                      client_config={"topic.metadata.refresh.interval.ms": 5_000})
        self.stop = threading.Event()
        self.all_stop = stop
        self.thread = threading.Thread(target=self._run, name=f"driver:{name}", daemon=True)
        self.closed_at: float | None = None

    def start(self) -> RealMember:
        self.member.start()
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        try:
            self.member.close(60)
        finally:
            self.closed_at = time.monotonic()
            self._ownership()

    def _ownership(self) -> None:
        held: set[int] = set()
        with self.member._lock:
            calls = list(self.member._callbacks)
        for at, name, ps in calls:
            if name == "assigned":
                held |= set(ps)
                for p in ps:
                    self.history.own(Ownership(self.name, self.group, TOPIC, p, "assigned", at))
            else:
                held -= set(ps)
                for p in ps:
                    self.history.own(Ownership(self.name, self.group, TOPIC, p, "revoked", at))
        for p in held:  # closed holding them: it owns nothing from here on
            self.history.own(Ownership(self.name, self.group, TOPIC, p, "revoked", self.closed_at or time.monotonic()))

    def _run(self) -> None:
        while not self.stop.is_set() and not self.all_stop.is_set():
            try:
                if self.rng.random() < 0.5:
                    self.member.run(self._commit, timeout=60)
                else:
                    self.member.run(self._fetch, timeout=60)
            except Exception:  # noqa: BLE001 - the member stopped: nothing more to drive
                if self.member.error is not None:
                    return
            time.sleep(self.rng.uniform(0.05, 0.2))

    def _commit(self, c) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        owned = sorted(tp.partition for tp in c.assignment() if tp.topic == TOPIC)
        if not owned:
            return
        offsets = {p: self.values.next((self.group, TOPIC, p)) for p in owned}
        sent = time.monotonic()
        try:
            res = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
            errors = {tp.partition: str(tp.error) for tp in res or () if tp.error}
        except KafkaException as e:
            errors = dict.fromkeys(offsets, str(e.args[0]) if e.args else repr(e))
        answered = time.monotonic()
        for p, v in offsets.items():
            # librdkafka retries inside one commit call: a failure may follow an attempt that was applied
            ok = p not in errors
            self.history.record(Op("commit", self.name, -1, self.group, TOPIC, p, v, sent,
                                   answered if ok else None, "ok" if ok else "info", errors.get(p, "")))

    def _fetch(self, c) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        sent = time.monotonic()
        try:
            res = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                              timeout=self.settings.request_timeout_s)
        except KafkaException as e:
            answered = time.monotonic()
            for p in range(PARTITIONS):
                self.history.record(Op("fetch", self.name, -1, self.group, TOPIC, p, None, sent, answered, "fail",
                                       str(e.args[0]) if e.args else repr(e)))
            return
        answered = time.monotonic()
        for tp in res:
            if tp.error:
                self.history.record(Op("fetch", self.name, -1, self.group, TOPIC, tp.partition, None, sent, answered,
                                       "fail", str(tp.error)))
            else:
                self.history.record(Op("fetch", self.name, -1, self.group, TOPIC, tp.partition,
                                       tp.offset if tp.offset >= 0 else -1, sent, answered, "ok"))


@dataclass
class Run:
    """One run of the harness: its history, the faults it made, and the check's report."""
    history: History
    report: Report | None = None
    notes: list[str] = field(default_factory=list)  # what the nemesis saw that is no promise's (a process that failed)
    # fault kind -> longest unavailability, seen by the probers (the server's: they retry at once) and by the real
    # consumers (librdkafka's own backoffs and rediscovery added)
    unavailable: dict[str, dict[str, float]] = field(default_factory=dict)

    def text(self) -> str:
        assert self.report is not None
        lines = [self.report.text()]
        if self.unavailable:
            lines.append("longest unavailability per fault kind, probers / librdkafka consumers:")
            for kind in sorted(self.unavailable.get("probers", {})):
                lines.append(f"  {kind}: {self.unavailable['probers'][kind]:.2f} s / "
                             f"{self.unavailable.get('librdkafka', {}).get(kind, 0.0):.2f} s")
        if self.notes:
            lines.append("notes:")
            lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)


class Nemesis:
    def __init__(self, cl: KCluster, postgres, history: History, settings: Settings, rng: random.Random,
                 groups: list[str], log: Callable[[str], None], values: Values, seed: int,
                 writers: dict[str, Prober] | None = None) -> None:
        self.cl, self.postgres, self.history, self.settings = cl, postgres, history, settings
        self.rng = rng
        self.values, self.seed = values, seed
        self.writers = writers or {}
        self.all_groups = list(groups)  # every workload group (the runner adds the client groups)
        self.restarts = 0
        self.groups = groups
        self.log = log
        self.notes: list[str] = []

    def target(self, slow: bool = False) -> int:
        """The node coordinating a random probe group (a fault there is felt, and read: the readers read those);
        with `slow`, one of the slowly written groups, once its writer is between two operations (so the node
        has no write of that group under way, whose failure would drop the answers its readers wait for)."""
        owners = self.cl.owners()
        parts = self.cl.partitions()
        groups = self.groups[1::2] if slow else self.groups
        for _ in range(20):
            g = self.rng.choice(groups)
            n = owners.get(partition_for(g, parts))
            if n is not None:
                if slow and g in self.writers:
                    self.writers[g].idle.wait(5)
                return n
        return self.rng.randint(1, len(self.cl.nodes))

    def run(self, kind: str, **how) -> Fault:
        lease = self.settings.lease_s
        n = self.target(slow=how.pop("slow", False))
        node = self.cl.node(n)
        start = time.monotonic()
        detail = ""
        if kind in ("pause-short", "pause-past-lease"):
            hold = how.get("hold") or (self.rng.uniform(0.15, 0.5) * lease if kind == "pause-short"
                                       else self.rng.uniform(1.3, 2.0) * lease)
            node.pause()
            time.sleep(hold)
            node.resume()
            detail = f"{hold:.1f} s"
        elif kind in ("pg-stall", "pg-drop"):
            hold = how.get("hold") or self.rng.uniform(0.3, 2.5) * lease
            (node.proxy.stall if kind == "pg-stall" else node.proxy.drop)()
            time.sleep(hold)
            node.proxy.heal()
            detail = f"{hold:.1f} s"
        elif kind == "pg-reset":
            node.proxy.reset()
        elif kind == "clock-jump":
            # The wall clock steps, and at once the node is stopped or cut from PostgreSQL past its lease: a
            # deadline kept on the wall clock would now look an hour away (or be gone an hour early).
            shift = how.get("shift") or self.rng.choice((-3600.0, 3600.0))
            cut = how.get("cut") or self.rng.choice(("pause", "pg-stall"))
            hold = how.get("hold") or self.rng.uniform(1.5, 2.5) * lease
            node.clock.shift(shift)
            if cut == "pause":
                node.pause()
                time.sleep(hold)
                node.resume()
            else:
                node.proxy.stall()
                time.sleep(hold)
                node.proxy.heal()
            time.sleep(0.5)
            node.clock.shift(0)
            detail = f"{shift:+.0f} s, {cut} {hold:.1f} s"
        elif kind == "same-id-restart":
            # The nemesis's own key: a fresh group on a partition of node n's that its new process will hold again
            # (the share is a function of the lease table: kcoord.cluster.share), so that the old process's held
            # write of it reaches the database after the new process wrote it at the next epoch.
            # The prediction below holds from a settled table: after the previous fault the partitions may still be
            # moving back to the node that had them.
            self._wait(lambda: self.cl.balanced([x.node_id for x in self.cl.nodes]), 20)
            # The node with the fewest workload groups first: its write in flight is then most often the nemesis's
            # alone, which a loose fence would let through whole.
            owners, parts = self.cl.owners(), self.cl.partitions()
            load = {x.node_id: 0 for x in self.cl.nodes}
            for g in self.all_groups:
                o = owners.get(partition_for(g, parts))
                if o in load:
                    load[o] += 1
            group = None
            for m in sorted(load, key=lambda x: (load[x], self.rng.random())):
                group = self._returning_group(m)
                if group is not None:
                    n, node = m, self.cl.node(m)
                    break
            node.proxy.stall()  # its writes in flight are held, to reach the database after its successor's
            held = threading.Thread(target=self._commit, args=(n, group), daemon=True)
            if group is not None:
                held.start()
            time.sleep(0.3)
            node.pause()
            new = self.cl.restart_as_new_process(n, timeout=4 * lease + 30)
            # written by the new process at its epoch (it answers NOT_COORDINATOR until it holds the partition)
            raced = group is not None and self._wait(lambda: self._commit(n, group) == "ok", 3 * lease + 10)
            if not raced:
                self.log(f"same-id-restart: node {n}'s new process did not take {group}'s partition back in time"
                         if group else "same-id-restart: no node's new process would take back a partition it holds")
            time.sleep(0.2)
            node.proxy.heal()
            node.resume()
            healed = time.monotonic()
            if group is not None:
                held.join(2 * lease + 10)
            try:
                code = node.proc.wait(2 * lease + 10)
            except Exception:  # noqa: BLE001 - it went on answering as node n: a finding
                code = None
                node.close()
            if code != 1 or not any(e.get("event") == "halted" for e in node.events()):
                self.notes.append(f"same-id-restart: the replaced process of node {n} did not stop as superseded "
                                  f"(exit {code})")
            detail = f"new process on port {new.port}" + (f", {group} written by both" if raced else "")
            f = Fault(kind, (n,), start, healed)
            self.history.fault(f)
            self.log(f"{kind} on node {n} ({detail})")
            return f
        elif kind == "pg-restart":
            self.cl.db.close()
            self.postgres.stop("fast")
            time.sleep(how.get("hold") or self.rng.uniform(0.3, 1.5))
            self.postgres.start()
            self.cl.db = psycopg.connect(self.cl.dsn, autocommit=True)
            n = 0
        else:
            raise ValueError(kind)
        f = Fault(kind, (n,) if n else (), start, time.monotonic())
        self.history.fault(f)
        self.log(f"{kind} on {f'node {n}' if n else 'PostgreSQL'} {detail}".rstrip())
        return f

    def _returning_group(self, n: int) -> str | None:
        """A new group id on a partition node n holds now and will hold again after its lease runs out, the others
        take its partitions, and its new process registers (each step's share computed as every node computes it)."""
        from kcoord.cluster import View, share
        owners = self.cl.owners()
        parts = self.cl.partitions()
        live = [x.node_id for x in self.cl.nodes]
        others = View(nodes=dict.fromkeys(i for i in live if i != n), owners={
            p: (o if o != n else None) for p, o in owners.items()})  # type: ignore[arg-type]  # (ids suffice)
        after = {p: o for o in others.nodes for p in share(others, parts, o)}
        back = share(View(nodes=dict.fromkeys(live), owners=after), parts, n)  # type: ignore[arg-type]
        wanted = {p for p in back if owners.get(p) == n}
        self.restarts += 1
        for i in range(100_000):
            name = f"restart-{self.seed}-{self.restarts}-{i}"
            if partition_for(name, parts) in wanted:
                return name
        return None

    def _commit(self, node_id: int, group: str) -> str:
        """One OffsetCommit of the nemesis's key (partition 0 of `group`) at `node_id`, recorded; its outcome."""
        value = self.values.next((group, TOPIC, 0))
        req = commit_request(group, 0, value)
        sent = time.monotonic()
        try:
            with Client(self.cl.node(node_id).bootstrap, client_id="nemesis", timeout=4 * self.settings.lease_s + 30) \
                    as c:
                code = c.request(req, 7).topics[0].partitions[0].error_code
        except (OSError, KafkaError, ValueError) as e:
            self.history.record(Op("commit", "nemesis", node_id, group, TOPIC, 0, value, sent, None, "info",
                                   str(e)[:100]))
            return "info"
        outcome = "ok" if code == E.NONE else "fail"
        self.history.record(Op("commit", "nemesis", node_id, group, TOPIC, 0, value, sent, time.monotonic(),
                               outcome, "" if code == E.NONE else E.name(code)))
        return outcome

    @staticmethod
    def _wait(what: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if what():
                    return True
            except psycopg.Error:
                pass
            time.sleep(0.1)
        return False


def cluster_args(lease_s: float) -> tuple[str, ...]:
    return ("--set", f"broker.session.timeout.ms={int(lease_s * 1000)}",
            "--set", f"broker.heartbeat.interval.ms={int(lease_s * 1000 / 6)}",
            "--topic", f"{TOPIC}:{PARTITIONS}", "--set", "group.initial.rebalance.delay.ms=0")


def run_faults(dsn: str, postgres, workdir, *, schedule: list[tuple[str, dict]] | None = None,
               duration_s: float = 0.0, seed: int = 1, settings: Settings | None = None,
               log: Callable[[str], None] = print) -> Run:
    """Start the cluster and the clients, run the faults (`schedule` in order, or random ones for `duration_s`),
    heal, read every key at the end from the database, and check the history."""
    settings = settings or Settings()
    rng = random.Random(seed)
    history = History()
    run = Run(history)
    stop = threading.Event()
    values = Values()
    with KCluster(dsn, workdir, nodes=3, args=cluster_args(settings.lease_s), proxied=True, clocked=True) as cl:
        deadline = time.monotonic() + 30
        while not cl.balanced([1, 2, 3]):
            if time.monotonic() > deadline:
                raise AssertionError("the three nodes never shared the partitions")
            time.sleep(0.1)
        probe_groups = [f"probe-{seed}-{i}" for i in range(settings.probe_groups)]
        client_groups = [f"clients-{seed}-{i}" for i in range(settings.client_groups)]
        # Half the probe groups are written slowly: a stopped node seldom has a write of theirs under way, so what it
        # answers their readers on resuming is decided by its lease deadline alone (an answer waiting for a write
        # that then fails is never sent).
        probers = [Prober(cl, history, g, values, seed * 1000 + 2 * i + reader, settings, stop, reader=reader,
                          pause_s=0.4 if i % 2 else 0.02).start()
                   for i, g in enumerate(probe_groups) for reader in (False, True)]
        members: dict[str, list[RealMember]] = {
            g: [RealMember(cl, history, g, f"{g}-m{j}", values, seed * 1000 + 100 + 10 * i + j, settings,
                           stop).start() for j in range(settings.members)] for i, g in enumerate(client_groups)}
        retired: list[RealMember] = []
        nemesis = Nemesis(cl, postgres, history, settings, rng, probe_groups, log, values, seed,
                          {p.group: p for p in probers if not p.reader})
        nemesis.all_groups += client_groups
        try:
            wait_s = 60.0
            t0 = time.monotonic()
            while not all(sum(len(m.member.assigned) for m in ms) == PARTITIONS for ms in members.values()):
                if time.monotonic() - t0 > wait_s:
                    raise AssertionError(f"the client groups were not assigned: {members}")
                time.sleep(0.1)
            time.sleep(1.0)  # some history before the first fault
            started = time.monotonic()
            last_churn = started
            steps = list(schedule or [])
            count = 0
            while True:
                if steps:
                    kind, how = steps.pop(0)
                elif schedule is None and time.monotonic() - started < duration_s:
                    kind, how = rng.choice(KINDS), {}
                else:
                    break
                nemesis.run(kind, **how)
                count += 1
                time.sleep(rng.uniform(2.0, 4.0))  # quiet between faults
                if settings.churn_every_s and time.monotonic() - last_churn > settings.churn_every_s:
                    last_churn = time.monotonic()
                    g = rng.choice(client_groups)
                    old = members[g].pop(0)
                    old.close()
                    retired.append(old)
                    members[g].append(RealMember(cl, history, g, f"{g}-m{count}", values, rng.randrange(1 << 30),
                                                 settings, stop).start())
                    log(f"churn: {old.name} left {g}, {members[g][-1].name} joined")
            time.sleep(settings.lease_s + 2)  # everything served again before the end
        finally:
            stop.set()
            for p in probers:
                p.join()
            for ms in members.values():
                for m in ms:
                    try:
                        m.close()
                    except AssertionError as e:
                        run.notes.append(str(e))
        for p in probers:
            if p.failure is not None:
                run.notes.append(f"prober {p.group} failed: {p.failure!r}")
        # The end: what the database holds, read as one more fetch of every key.
        at = time.monotonic()
        for (group, topic, p), v in cl.committed().items():
            history.record(Op("fetch", "database", 0, group, topic, p, v, at, at, "ok"))
        write_log = [tuple(r) for r in cl.db.execute(
            "SELECT partition, seq, epoch, node_id FROM kcoord_writes").fetchall()]
        run.notes += nemesis.notes
        for n in cl.nodes:
            if not n.alive:
                run.notes.append(f"node {n.node_id} is not running at the end:\n{n.log_tail(10)}")
    run.report = check(history, write_log=write_log, lease_s=settings.lease_s, bound_s=settings.bound_s)
    ops, _, faults = history.snapshot()
    end = max((op.answered or op.sent for op in ops), default=0.0)
    for name, prefix in (("probers", "probe-"), ("librdkafka", "clients-")):
        _, run.unavailable[name] = recovery([op for op in ops if op.group.startswith(prefix)], faults,
                                            lease_s=settings.lease_s, bound_s=settings.bound_s, end=end,
                                            clock=Clock(0.0))
    return run
