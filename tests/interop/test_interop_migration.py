"""KIP-848 online migration against real clients: a live classic group of confluent-kafka consumers rolled member by
member to `group.protocol=consumer` and back (dynamic and static members), kafka-python and aiokafka classic
members staying in a group that became a consumer group, and a SIGKILL of `kcoord serve --data-dir` in the middle
of a roll. See kcoord/groups/migration.py.

Every member tracks what it holds from its own rebalance listener (assign / revoke / lost), so the watch sees a
partition leave its old owner before the new owner reports it. Throughout every test:
* no partition is held by two members at once (a member told its partitions were lost is excluded, as Kafka
  allows; no test here expects any member to be told so);
* the members keep committing, for each partition they hold, an offset from one counter that only grows, and a
  reader polls the group's committed offsets: none ever goes backwards or behind an acknowledged commit;
* each step ends settled: the coordinator's group Stable (a consumer group: every member at its target), every
  partition held exactly once, and each client holding what the coordinator says it holds.
"""

from __future__ import annotations

import collections
import itertools
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException, TopicPartition

from kcoord import errors as E
from kcoord import wire
from kcoord.cli import main as cli_main
from kcoord.client import Client, KafkaError

from ..support.interop import ALL, PARTITIONS, TOPIC, wait_until
from ..support.interop import Watch as ConsumerWatch
from ..support.interop_consumer import ConsumerMember
from ..support.interop_member import SESSION_TIMEOUT_MS, AiokafkaMember, KafkaPythonMember
from ..support.servers import Server, free_port, serve

# interop, and kafka-python's deprecation warnings ignored, as for the other interop tests (one test here has a
# kafka-python member)
pytestmark = [
    pytest.mark.interop,
    pytest.mark.filterwarnings(r"ignore:(read|open)_text is deprecated:DeprecationWarning"),
]
CONSUMER_SESSION_MS = 4_000  # group.consumer.session.timeout.ms (consumer-protocol members)
CLASSIC_SESSION_MS = SESSION_TIMEOUT_MS  # 6 s, dynamic classic members
CLASSIC_HEARTBEAT_S = 1.0  # heartbeat.interval.ms of a classic member
STATIC_SESSION_MS = 3_000  # static classic members (a closed one would be evicted after this, were it not replaced)
SETTINGS = ("group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.min.session.timeout.ms=2000", f"group.consumer.session.timeout.ms={CONSUMER_SESSION_MS}",
            "group.min.session.timeout.ms=2000", "group.initial.rebalance.delay.ms=300")
SETTLE_S = 60.0
# A commit racing a rebalance may be refused with these (and the client carries on); a commit from a settled group
# may not (see Offsets.commit_round).
RACING_COMMIT_ERRORS = {"REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH"}
_ids = itertools.count()


def server_args(*extra: str) -> list[str]:
    args = ["--topic", f"{TOPIC}:{PARTITIONS}"]
    for s in SETTINGS:
        args += ["--set", s]
    return [*args, *extra]


def stop_server(srv: Server) -> None:
    srv.proc.terminate()
    rc = srv.proc.wait(timeout=15)
    log = srv.log.read_text(errors="replace")
    assert rc == 0, f"the server did not shut down cleanly (rc {rc}):\n{srv.log_tail()}"
    assert "Traceback" not in log, f"the server logged a traceback:\n{log[log.index('Traceback') - 2000:][:6000]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("kcoord") / "server.log"
    srv = serve(free_port(), log, *server_args())
    yield srv
    stop_server(srv)


# ---- members ----------------------------------------------------------------------------------------------------

def classic_conf(strategy: str, session_ms: int = CLASSIC_SESSION_MS) -> dict:
    """librdkafka settings of a classic member (the default protocol, spelled out)."""
    return {"group.protocol": "classic", "partition.assignment.strategy": strategy,
            "session.timeout.ms": session_ms, "heartbeat.interval.ms": int(CLASSIC_HEARTBEAT_S * 1000)}


def protocol_of(m) -> str:
    if isinstance(m, ConsumerMember):
        return m.conf.get("group.protocol", "consumer")
    return "classic"


class Tracked:
    """A kafka-python or aiokafka member (tests/support/interop_member.py) that, like ConsumerMember, keeps what it
    holds from its rebalance listener: its assignment() is only read after a poll, which for these clients runs the
    whole revoke-join-sync-assign cycle, too late for the watch."""

    def __init__(self, *args, **kw) -> None:
        self._held: set[int] = set()
        self.lost = 0
        super().__init__(*args, **kw)

    def _record(self, name, partitions) -> None:
        super()._record(name, partitions)
        ps = {p for t, p in partitions if t == self.topic}
        with self._lock:
            if name == "assigned":
                self._held |= ps
            else:
                self._held -= ps
                if name == "lost":
                    self.lost += 1
        if self.on_change is not None:
            self.on_change(self)

    @property
    def partitions(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._held)

    def stop(self) -> None:
        self.close()


class TrackedKafkaPython(Tracked, KafkaPythonMember):
    pass


class TrackedAiokafka(Tracked, AiokafkaMember):
    pass


def revoked_since(m, t: float) -> list[frozenset[int]]:
    if isinstance(m, ConsumerMember):
        return [frozenset(p for _, p in ps) for when, ps in list(m.revoked) if when >= t]
    return m.revocations_since(t)


# librdkafka's connection errors while the coordinator is down (the restart test): noise, not a member's failure
CONNECTION_NOISE = frozenset({ConfluentError._TRANSPORT, ConfluentError._ALL_BROKERS_DOWN})


def client_errors(m) -> list[str]:
    """Errors a member's client reported (librdkafka's error_cb and poll; a kafka-python or aiokafka thread's
    exception), less connection noise."""
    if isinstance(m, ConsumerMember):
        return [f"{m.client_id}: {e}" for e in list(m.errors) if e.code() not in CONNECTION_NOISE]
    return [f"{m.client_id}: {m.error!r}"] if m.error is not None else []


class Watch(ConsumerWatch):
    """The members of the test's group; samples all their holdings on every listener call and records a partition
    held by two of them at once. A member told it lost its partitions is left out from then on (the coordinator
    may have given them away before the client heard), and so are overlaps it was part of."""

    def __init__(self) -> None:
        super().__init__()
        self.all: list = []  # every member ever started
        self._overlaps: list[tuple[int, str, str]] = []

    def check(self, _m=None) -> None:
        with self._lock:
            seen: dict[int, str] = {}
            for m in self.members:
                if m.lost:
                    continue
                for p in m.partitions:
                    if p in seen:
                        self._overlaps.append((p, seen[p], m.client_id))
                    seen[p] = m.client_id

    def overlaps(self) -> list[str]:
        lost = {m.client_id for m in self.all if m.lost}
        return [f"partition {p} held by {a} and {b} at once" for p, a, b in self._overlaps
                if a not in lost and b not in lost]

    def add(self, m):
        with self._lock:
            self.members.append(m)
        self.all.append(m)
        m.start()
        return m

    def confluent(self, server: Server, group: str, client_id: str, conf: dict | None = None,
                  instance_id: str | None = None) -> ConsumerMember:
        """A confluent-kafka member: the consumer protocol unless `conf` says classic."""
        return self.add(ConsumerMember(server.bootstrap, group, [TOPIC], client_id=client_id, instance_id=instance_id,
                                       on_change=self.check, conf=conf))

    def other(self, cls, server: Server, group: str, client_id: str):
        return self.add(cls(server.bootstrap, group, TOPIC, client_id=client_id, on_change=self.check))

    # stop() and close() are ConsumerWatch's: a member is stopped outside the lock (its listener calls check()).


@pytest.fixture
def watch():
    w = Watch()
    yield w
    w.close()
    assert not w.overlaps(), w.overlaps()[:5]


# ---- committed offsets ------------------------------------------------------------------------------------------

def fetch_offsets(c: Client, group: str) -> dict[int, int] | None:
    r = c.call(9, 8, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id=group, topics=None)]))
    g = r.groups[0]
    if g.error_code:
        return None
    return {p.partition_index: p.committed_offset for t in g.topics if t.name == TOPIC for p in t.partitions
            if p.error_code == E.NONE}


class Offsets:
    """Every confluent member commits, every 300 ms, for each partition it holds, the next value of one counter
    (on its own thread, between polls, so never for a partition its listener has already given up). A reader
    polls OffsetFetch every 100 ms and records any committed offset that went backwards or below a commit that
    had been acknowledged before the fetch was sent."""

    def __init__(self, server: Server, group: str, watch: Watch) -> None:
        self.server, self.group, self.watch = server, group, watch
        self.lock = threading.Lock()  # held by a commit round; the test takes it to stop a member or the server
        self._counter = itertools.count(1)
        self._acked: dict[int, int] = {}
        self._acked_lock = threading.Lock()
        self.last_seen: dict[int, int] = {}
        self.reads = 0
        self.backwards: list[str] = []
        self.behind: list[str] = []
        self.racing: collections.Counter = collections.Counter()  # background commits refused, by error
        self.unexpected: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._committer, daemon=True, name="committer"),
                         threading.Thread(target=self._reader, daemon=True, name="offsets-reader")]

    def __enter__(self) -> Offsets:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        assert not any(t.is_alive() for t in self._threads)

    def acked(self) -> dict[int, int]:
        with self._acked_lock:
            return dict(self._acked)

    def _commit(self, m: ConsumerMember) -> list[str]:
        def commit(c) -> list[str]:
            offsets = {p: next(self._counter) for p in sorted(m.partitions)}
            if not offsets:
                return []
            try:
                res = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
            except KafkaException as e:
                return [e.args[0].name()]
            bad = [tp.error.name() for tp in res if tp.error]
            with self._acked_lock:
                for tp in res:
                    if not tp.error:
                        self._acked[tp.partition] = max(self._acked.get(tp.partition, -1), tp.offset)
            return bad
        return m.run(commit, timeout=60)

    def _classic_join_race(self, error: str) -> bool:
        client_id, _, code = error.rpartition(": ")
        member = next((m for m in self.watch.members if m.client_id == client_id), None)
        return code in ("ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS") and member is not None and \
            protocol_of(member) == "classic"

    def commit_round(self) -> list[str]:
        """One commit from every confluent member, now; returns the errors as 'client: ERROR'."""
        errors = []
        with self.lock:
            for m in list(self.watch.members):
                if isinstance(m, ConsumerMember) and not m.lost:
                    errors += [f"{m.client_id}: {e}" for e in self._commit(m)]
        return errors

    def _committer(self) -> None:
        while not self._stop.wait(0.3):
            try:
                errors = self.commit_round()
            except Exception as e:  # noqa: BLE001 - e.g. a member that no longer runs its commands
                self.unexpected.append(f"commit round: {e!r}")
                return
            for e in errors:
                code = e.rpartition(": ")[2]
                if code in RACING_COMMIT_ERRORS:
                    self.racing[code] += 1
                else:
                    self.unexpected.append(e)

    def _reader(self) -> None:
        c = None
        while not self._stop.wait(0.1):
            try:
                if c is None:
                    c = Client(self.server.bootstrap, timeout=5)
                acked = self.acked()
                served = fetch_offsets(c, self.group)
            except (OSError, KafkaError):  # the server is being restarted
                if c is not None:
                    c.close()
                c = None
                continue
            if served is None:
                continue
            self.reads += 1
            for p in sorted(set(served) | set(self.last_seen)):
                now, before = served.get(p, -1), self.last_seen.get(p, -1)
                if now < before:
                    self.backwards.append(f"partition {p}: committed offset {before} then {now}")
                if now < acked.get(p, -1):
                    self.behind.append(f"partition {p}: committed offset {now} after {acked[p]} was acknowledged")
                self.last_seen[p] = now
        if c is not None:
            c.close()

    def check(self) -> None:
        """Nothing went backwards or was lost, and no background commit failed but for racing a rebalance."""
        assert self.reads > 0, "the offsets reader never read"
        assert not self.backwards, self.backwards[:5]
        assert not self.behind, self.behind[:5]
        assert not self.unexpected, self.unexpected[:10]

    def settled_commit(self) -> dict[int, int]:
        """In a settled group every member's commit succeeds, and all 12 partitions then read back at least as far
        as acknowledged; returns what was read."""
        errors = self.commit_round()
        if errors and all(self._classic_join_race(e) for e in errors):
            # The coordinator gives a classic member its new generation when it answers the member's JoinGroup, and
            # the group reads as settled from then on; the client takes the generation up when it reads that
            # answer. A commit sent between the two carries the old one and is refused, by Kafka as here. Once the
            # client has read it (well within a heartbeat interval) the commit must succeed.
            time.sleep(CLASSIC_HEARTBEAT_S)
            errors = self.commit_round()
        assert not errors, f"commits from a settled group were refused: {errors}"
        acked = self.acked()
        assert set(acked) == ALL, acked
        with Client(self.server.bootstrap) as c:
            served = fetch_offsets(c, self.group)
        assert served is not None and all(served.get(p, -1) >= acked[p] for p in ALL), (served, acked)
        return served


# ---- the coordinator's view -------------------------------------------------------------------------------------

def describe(server: Server, group: str) -> dict:
    """`kcoord describe GROUP --json`'s answer (ConsumerGroupDescribe v1, else DescribeGroups)."""
    return server.describe(group)


def consumer_describe_v1(server: Server, group: str) -> wire.ConsumerGroupDescribeResponseDescribedGroup:
    with Client(server.bootstrap) as c:
        return c.request(wire.ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]


def group_type(server: Server, group: str) -> str | None:
    with Client(server.bootstrap) as c:
        listed = {g.group_id: g.group_type for g in c.request(wire.ListGroupsRequest(), 5).groups}
    return listed.get(group)


def settled(server: Server, group: str, members: list) -> Callable[[], tuple[bool, object]]:
    """Every partition held once by `members`; the group Stable with exactly these members (by client id), a
    consumer group's members all at their target; each client holding what the coordinator says it holds."""
    def check():
        clients = {m.client_id: sorted(m.partitions) for m in members}
        if sorted(p for ps in clients.values() for p in ps) != sorted(ALL):
            return False, {"clients": clients}
        d = describe(server, group)
        # (a classic member's assignment is empty bytes, shown as "", until its rebalance completes)
        coordinator = {m["client_id"]: sorted(m["assignment"].get(TOPIC, []) if isinstance(m["assignment"], dict)
                                              else []) for m in d["members"]}
        at_target = d["type"] == "classic" or all(m["assignment"] == m["target_assignment"] for m in d["members"])
        ok = d["state"] == "Stable" and at_target and coordinator == clients and len(d["members"]) == len(members)
        return ok, {"type": d["type"], "state": d["state"], "clients": clients, "coordinator": coordinator,
                    "at_target": at_target}
    return check


def assert_consumer_group(server: Server, group: str, members: list) -> wire.ConsumerGroupDescribeResponseDescribedGroup:
    """A consumer group (ListGroups and ConsumerGroupDescribe v1) whose members' MemberType is each one's protocol."""
    assert group_type(server, group) == "consumer"
    d = consumer_describe_v1(server, group)
    assert d.error_code == E.NONE and d.group_state == "Stable", d
    types = {m.client_id: m.member_type for m in d.members}
    assert types == {m.client_id: (1 if protocol_of(m) == "consumer" else 0) for m in members}, types
    return d


def assert_classic_group(server: Server, group: str, members: list, protocol: str, capsys) -> dict:
    """A classic group again: ListGroups, ConsumerGroupDescribe (GROUP_ID_NOT_FOUND) and `kcoord describe --json`."""
    import json

    assert group_type(server, group) == "classic"
    assert consumer_describe_v1(server, group).error_code == E.GROUP_ID_NOT_FOUND
    capsys.readouterr()
    assert cli_main(["describe", group, "--bootstrap", server.bootstrap, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["type"], d["state"], d["protocol_type"], d["protocol"]) == ("classic", "Stable", "consumer", protocol), d
    assert {m["client_id"]: sorted(m["assignment"][TOPIC]) for m in d["members"]} == {
        m.client_id: sorted(m.partitions) for m in members}
    return d


def roll(watch: Watch, offsets: Offsets, server: Server, group: str, members: list, i: int,
         start: Callable[[], object], what: str) -> float:
    """Replace members[i] by start()'s member; wait until settled; a commit round must then succeed. Returns the
    time the step began."""
    t = time.monotonic()
    with offsets.lock:
        watch.stop(members[i])
    members[i] = start()
    wait_until(settled(server, group, members), SETTLE_S, what, server)
    offsets.settled_commit()
    return t


def assert_healthy(watch: Watch, offsets: Offsets) -> None:
    assert not watch.overlaps(), watch.overlaps()[:5]
    lost = {m.client_id: m.lost for m in watch.all if m.lost}
    assert not lost, f"members were told they lost their partitions: {lost}"
    errors = [e for m in watch.all for e in client_errors(m)]
    assert not errors, errors[:10]
    offsets.check()


# ---- 1. rolling a live group to the consumer protocol and back ---------------------------------------------------

@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_rolling_upgrade_to_the_consumer_protocol_and_back(server, watch, strategy, capsys) -> None:
    group = f"roll-{strategy}-{next(_ids)}"
    members = [watch.confluent(server, group, f"k{i}", classic_conf(strategy)) for i in range(6)]
    wait_until(settled(server, group, members), SETTLE_S, "6 classic members", server)
    assert group_type(server, group) == "classic"
    with Offsets(server, group, watch) as offsets:
        offsets.settled_commit()
        for i in range(6):
            roll(watch, offsets, server, group, members, i,
                 lambda i=i: watch.confluent(server, group, f"c{i}"), f"member {i} rolled to the consumer protocol")
            assert_consumer_group(server, group, members)
            assert_healthy(watch, offsets)
        d = assert_consumer_group(server, group, members)
        assert {m.member_type for m in d.members} == {1} and d.assignment_epoch == d.group_epoch
        for i in range(6):
            roll(watch, offsets, server, group, members, i,
                 lambda i=i: watch.confluent(server, group, f"k{i}-back", classic_conf(strategy)),
                 f"member {i} rolled back to the classic protocol")
            if i < 5:
                assert_consumer_group(server, group, members)
            assert_healthy(watch, offsets)
        assert_classic_group(server, group, members, strategy, capsys)
        offsets.settled_commit()
    assert_healthy(watch, offsets)
    # The committer has stopped: the last acknowledged commit of each partition is what a member reads back.
    with Client(server.bootstrap) as c:
        assert fetch_offsets(c, group) == offsets.acked()
    assert members[0].committed(sorted(ALL)) == offsets.acked()
    print(f"\n{strategy}: {offsets.reads} offset reads; background commits refused while racing a rebalance: "
          f"{dict(offsets.racing)}")


# ---- 2. static members restarted under the other protocol --------------------------------------------------------

def test_static_members_restarted_under_the_other_protocol(server, watch, capsys) -> None:
    """A static classic member closes without a LeaveGroup; its consumer-protocol successor with the same instance
    id replaces it at once (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember answers UNRELEASED_INSTANCE_ID only
    when both the holder and the newcomer speak the consumer protocol). A static consumer-protocol member leaves with
    epoch -2 and its classic successor takes its place, and the last one turns the group classic again: each
    successor gets its predecessor's partitions, nobody else's move, and going back the group epoch holds."""
    strategy = "cooperative-sticky"
    group = f"roll-static-{next(_ids)}"
    conf = classic_conf(strategy, STATIC_SESSION_MS)
    members = [watch.confluent(server, group, f"k{i}", conf, instance_id=f"i{i}") for i in range(6)]
    wait_until(settled(server, group, members), SETTLE_S, "6 static classic members", server)
    with Offsets(server, group, watch) as offsets:
        offsets.settled_commit()
        for i in range(6):
            before = {m.client_id: m.partitions for m in members}
            old = members[i].client_id
            t = roll(watch, offsets, server, group, members, i,
                     lambda i=i: watch.confluent(server, group, f"c{i}", instance_id=f"i{i}"),
                     f"static member i{i} restarted with the consumer protocol")
            assert_successor(members, i, old, before, t)
            assert_consumer_group(server, group, members)
            assert_healthy(watch, offsets)
        d = assert_consumer_group(server, group, members)
        assert {(m.instance_id, m.member_type) for m in d.members} == {(f"i{i}", 1) for i in range(6)}
        for i in range(6):
            epoch = consumer_describe_v1(server, group).group_epoch
            before = {m.client_id: m.partitions for m in members}
            old = members[i].client_id
            t = roll(watch, offsets, server, group, members, i,
                     lambda i=i: watch.confluent(server, group, f"k{i}-back", conf, instance_id=f"i{i}"),
                     f"static member i{i} restarted with the classic protocol")
            assert_successor(members, i, old, before, t)
            if i < 5:
                d = assert_consumer_group(server, group, members)
                assert d.group_epoch == epoch, (epoch, d.group_epoch)
            assert_healthy(watch, offsets)
        d = assert_classic_group(server, group, members, strategy, capsys)
        assert sorted(m["group_instance_id"] for m in d["members"]) == [f"i{i}" for i in range(6)]
    assert_healthy(watch, offsets)


def assert_successor(members: list, i: int, old: str, before: dict, t: float) -> None:
    """members[i] took its static predecessor's place: its partitions, and nobody else's moved since t."""
    assert members[i].partitions == before[old], (members[i], sorted(before[old]))
    for m in members:
        if m is not members[i]:
            assert m.partitions == before[m.client_id] and not revoked_since(m, t), (m, sorted(before[m.client_id]))


# ---- 3. kafka-python and aiokafka classic members inside a consumer group ---------------------------------------

def test_kafka_python_and_aiokafka_members_stay_in_a_group_that_became_a_consumer_group(server, watch) -> None:
    group = f"mixed-{next(_ids)}"
    members = [watch.other(TrackedKafkaPython, server, group, "kafka-python"),
               watch.other(TrackedAiokafka, server, group, "aiokafka"),
               # librdkafka's default strategies, range and roundrobin; aiokafka only has roundrobin in common
               watch.confluent(server, group, "confluent-classic", {"group.protocol": "classic",
                                                                    "session.timeout.ms": CLASSIC_SESSION_MS,
                                                                    "heartbeat.interval.ms": 1000})]
    wait_until(settled(server, group, members), SETTLE_S, "3 classic members of 3 clients", server)
    assert describe(server, group)["protocol"] == "roundrobin"
    members.append(watch.confluent(server, group, "confluent-consumer"))
    wait_until(settled(server, group, members), SETTLE_S, "the group upgraded by a consumer-protocol member", server)
    d = assert_consumer_group(server, group, members)
    assert all(len(m.partitions) == 3 for m in members), {m.client_id: sorted(m.partitions) for m in members}
    # Longer than the classic members' session: they keep heartbeating, nobody is revoked, the epoch holds.
    t = time.monotonic()
    until = t + CLASSIC_SESSION_MS / 1000 * 1.5
    held = {m.client_id: m.partitions for m in members}
    while time.monotonic() < until:
        ok, seen = settled(server, group, members)()
        assert ok, seen
        assert {m.client_id: m.partitions for m in members} == held
        assert consumer_describe_v1(server, group).group_epoch == d.group_epoch
        time.sleep(0.5)
    assert not any(revoked_since(m, t) for m in members)
    # Each client commits its own partitions and reads them back.
    for i, m in enumerate(members):
        mine = {p: 1000 * (i + 1) + p for p in m.partitions}
        m.commit(mine)
        assert m.committed(sorted(mine)) == mine, m
    for m in members:
        assert not client_errors(m), client_errors(m)
        assert m.lost == 0
    assert not watch.overlaps(), watch.overlaps()


# ---- 4. the server restarted in the middle of a roll ------------------------------------------------------------

def snapshot(server: Server, group: str) -> dict:
    d = consumer_describe_v1(server, group)
    assert d.error_code == E.NONE, d
    return {"state": d.group_state, "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
            "members": {m.client_id: (m.member_id, m.member_epoch, m.member_type,
                                      sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
                        for m in d.members}}


def test_server_sigkill_in_the_middle_of_a_roll_loses_and_rebalances_nothing(watch, tmp_path: Path) -> None:
    port, data, log = free_port(), tmp_path / "data", tmp_path / "server.log"
    args = server_args("--data-dir", str(data))
    srv = serve(port, log, *args)
    group = "roll-restart"
    try:
        members = [watch.confluent(srv, group, f"k{i}", classic_conf("cooperative-sticky")) for i in range(4)]
        wait_until(settled(srv, group, members), SETTLE_S, "4 classic members", srv)
        with Offsets(srv, group, watch) as offsets:
            for i in range(2):
                roll(watch, offsets, srv, group, members, i, lambda i=i: watch.confluent(srv, group, f"c{i}"),
                     f"member {i} rolled to the consumer protocol")
            assert_consumer_group(srv, group, members)
            offsets.settled_commit()
            with offsets.lock:  # no commits across the kill: what is committed now must all come back
                with Client(srv.bootstrap) as c:
                    committed = fetch_offsets(c, group)
                assert committed == offsets.acked()
                before = snapshot(srv, group)
                held = {m.client_id: m.partitions for m in members}
                srv.proc.send_signal(signal.SIGKILL)
                assert srv.proc.wait(10) == -signal.SIGKILL
                t = time.monotonic()
                srv = offsets.server = serve(port, log, *args)
                loaded = [line for line in log.read_text().splitlines() if "kcoord loaded" in line][-1]
                assert "kcoord loaded 1 groups, 4 members, 12 offsets" in loaded, loaded
                with Client(srv.bootstrap) as c:
                    assert fetch_offsets(c, group) == committed  # before any member is back
                assert snapshot(srv, group) == before

                def unchanged() -> tuple[bool, object]:
                    now = snapshot(srv, group)
                    mine = {m.client_id: m.partitions for m in members}
                    return now == before and mine == held, {"coordinator": now, "clients": mine, "before": before}

                # Longer than any session: had the server lost a member it would have been evicted by now, and
                # had it lost the group the members would have been fenced or told to rejoin.
                until = time.monotonic() + CLASSIC_SESSION_MS / 1000 + 2
                while time.monotonic() < until:
                    ok, seen = unchanged()
                    assert ok, f"the group changed after the restart: {seen}"
                    time.sleep(0.25)
                revoked = {m.client_id: revoked_since(m, t) for m in members}
                assert not any(revoked.values()), f"partitions were revoked across the restart: {revoked}"
                assert all(m.lost == 0 for m in members)
                assert {m.client_id: m.partitions for m in members} == held
                for m in members:
                    assert m.committed(sorted(m.partitions)) == {p: committed[p] for p in m.partitions}
            # The roll goes on on the restarted server.
            for i in range(2, 4):
                roll(watch, offsets, srv, group, members, i, lambda i=i: watch.confluent(srv, group, f"c{i}"),
                     f"member {i} rolled to the consumer protocol after the restart")
            d = assert_consumer_group(srv, group, members)
            assert d.group_epoch > before["group_epoch"]
        assert_healthy(watch, offsets)
    finally:
        watch.close()
        stop_server(srv)
