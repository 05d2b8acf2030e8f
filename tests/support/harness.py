"""One harness for every group type: an in-process Coordinator on a manual clock over a record store, requests in,
responses (or Replies) out, no sockets, no sleeping.

    GroupHarness        the coordinator, its ManualClock and its records; `advance` (stopping at each timer on the
                        way), `group`, `restarted` / `restart` (a coordinator replaying the records, as a restart does)
    ClassicHarness      JoinGroup, SyncGroup, Heartbeat, LeaveGroup; `form` makes a Stable group
    ConsumerHarness     ConsumerGroupHeartbeat (`hb`, `join`), partitions by topic name
    ConnectHarness      ConnectGroupHeartbeat, PrepareAssignment, InstallAssignment, Describe
    MigrationHarness    classic and consumer-protocol members of one group (KIP-848 online migration)
    owners(group)       partition (or connect unit) -> member, failing on one held twice
    rebuild(live, records)  a fresh coordinator with the live one's settings and clock that replayed `records`
"""

from __future__ import annotations

from kcoord import errors as E
from kcoord import wire
from kcoord.assignors import decode_assignment, encode_assignment, encode_subscription
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.reply import Reply
from kcoord.store import GroupStore, MemoryRecords, Records
from kcoord.timers import ManualClock
from kcoord.topics import TopicCatalogue

START_MS = 1_000_000  # every harness's clock starts here
SESSION = 10_000  # the classic harness's session.timeout.ms, rebalance.timeout.ms and initial rebalance delay
REBALANCE = 30_000
DELAY = 3_000
# The consumer, migration and connect harnesses pin the reconciliation step by step, each change computing its target
# (or asking a worker for one) at once (group.consumer/connect.assignment.interval.ms=0, as Kafka's own
# WithAssignmentBatchingDisabled tests do); the batched computation (KIP-1263) has its own tests, which give the
# interval.
UNBATCHED = 0
# The topics a classic harness starts with (name -> partitions): offsets are committed only to partitions the
# catalogue has (else UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers), as real clients only commit what Metadata showed.
TOPICS = {"t": 8, "u": 8}


def rebuild(live: Coordinator, records: Records) -> Coordinator:
    """A fresh coordinator (the live one's settings and clock) that has replayed `records`, as a restart does."""
    c = Coordinator(live.config, live.clock, store=GroupStore(records, live.clock.wall_ms))
    c.load()
    return c


def owners(g) -> dict[int, str]:
    """What a consumer or connect group's members hold (partition or unit id -> member id), over every member's
    assigned and pending ones; fails on one held twice."""
    out: dict[int, str] = {}
    for m in g.members.values():
        for p in [*m.assigned.tolist(), *m.pending.tolist()]:
            assert p not in out, f"{p} held by {out[p]} and {m.member_id}"
            out[p] = m.member_id
    return out


class GroupHarness:
    """A Coordinator on a ManualClock, writing Kafka-format records (committed per request) to `records` (a
    MemoryRecords unless given). `write_topics`: the catalogue's changes are written to the store too."""

    def __init__(self, config: GroupConfig, topics: dict[str, int], *, records: Records | None = None,
                 catalogue: TopicCatalogue | None = None, write_topics: bool = False) -> None:
        self.clock = ManualClock(START_MS)
        self.config = config
        self.records = MemoryRecords() if records is None else records
        self.c = Coordinator(self.config, self.clock, store=GroupStore(self.records, self.clock.wall_ms),
                             topics=catalogue)
        if write_topics:
            self.c.topics.on_change = self.c.store.write_topic
        for name, n in topics.items():
            self.c.topics.create(name, n)
        if write_topics:
            self.c.store.commit()

    def group(self, gid: str = "g"):
        return self.c.groups[gid]

    def advance(self, ms: int) -> int:
        """Move the clock forward, stopping at each timer deadline on the way (as the server's timer task
        wakes at each one); returns how many timers fired."""
        target = self.clock.ms + ms
        fired = 0
        while (d := self.c.next_deadline()) is not None and d <= target:
            self.clock.ms = max(self.clock.ms, d)
            fired += self.c.poll()
        self.clock.ms = target
        return fired

    def restarted(self, records: Records | None = None) -> Coordinator:
        """A second coordinator replaying this one's records (or `records`), as a restart on the same store does."""
        return rebuild(self.c, self.records if records is None else records)

    def restart(self, records: Records | None = None) -> Coordinator:
        """`restarted`, and the harness drives the new coordinator from then on."""
        if records is not None:
            self.records = records
        self.c = self.restarted()
        return self.c


# ---- classic groups ---------------------------------------------------------------------------------------------

class ClassicHarness(GroupHarness):
    def __init__(self, topics: dict[str, int] | None = None, *, records: Records | None = None,
                 catalogue: TopicCatalogue | None = None, **config) -> None:
        super().__init__(GroupConfig(**{"group_initial_rebalance_delay_ms": DELAY, **config}),
                         TOPICS if topics is None else topics, records=records, catalogue=catalogue)

    def join(self, member_id: str = "", iid: str | None = None, *, gid: str = "g", v: int = 9,
             protocols=(("range", b"r"),), ptype: str = "consumer", session: int = SESSION,
             rebalance: int = REBALANCE, reason: str | None = None, client_id: str = "client") -> Reply:
        req = wire.JoinGroupRequest(
            group_id=gid, session_timeout_ms=session, rebalance_timeout_ms=rebalance if v >= 1 else -1,
            member_id=member_id, group_instance_id=iid if v >= 5 else None, protocol_type=ptype,
            protocols=[wire.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
            reason=reason if v >= 8 else None)
        return self.c.handle(req, v, client_id, "/127.0.0.1")

    def sync(self, member_id: str, generation: int, iid: str | None = None, *, gid: str = "g", v: int = 5,
             assignments: dict[str, bytes] | None = None, ptype: str | None = "consumer",
             pname: str | None = "range") -> Reply:
        req = wire.SyncGroupRequest(
            group_id=gid, generation_id=generation, member_id=member_id, group_instance_id=iid if v >= 3 else None,
            protocol_type=ptype if v >= 5 else None, protocol_name=pname if v >= 5 else None,
            assignments=[wire.SyncGroupRequestAssignment(member_id=k, assignment=a)
                         for k, a in (assignments or {}).items()])
        return self.c.handle(req, v)

    def heartbeat(self, member_id: str, generation: int, iid: str | None = None, *, gid: str = "g",
                  v: int = 4) -> int:
        req = wire.HeartbeatRequest(group_id=gid, generation_id=generation, member_id=member_id,
                                    group_instance_id=iid if v >= 3 else None)
        return self.c.handle(req, v).error_code

    def leave(self, *members: tuple[str, str | None] | tuple[str, str | None, str | None], gid: str = "g",
              v: int = 5) -> wire.LeaveGroupResponse:
        if v <= 2:
            req = wire.LeaveGroupRequest(group_id=gid, member_id=members[0][0])
        else:
            req = wire.LeaveGroupRequest(group_id=gid, members=[
                wire.LeaveGroupRequestMemberIdentity(member_id=m[0], group_instance_id=m[1],
                                                     reason=m[2] if len(m) > 2 and v >= 5 else None)
                for m in members])
        return self.c.handle(req, v)

    def advance_alive(self, ms: int, members: dict[str, str | None], step: int = SESSION // 3) -> None:
        """Advance while the given members (member id -> instance id) keep heartbeating."""
        gen = self.group().generation
        left = ms
        while left > 0:
            d = min(step, left)
            self.advance(d)
            left -= d
            for mid, iid in members.items():
                self.heartbeat(mid, gen, iid)

    # ---- composite steps ---------------------------------------------------------------------------

    def dynamic_member(self, **kw) -> str:
        """A dynamic member's KIP-394 first join: returns the id the coordinator hands out."""
        r = self.join(**kw)
        assert r.response.error_code == 79
        return r.response.member_id

    def form(self, *iids: str | None, v: int = 9, protocols=(("range", b"r"),)) -> dict[str, str]:
        """A Stable group: each entry an instance id (static) or None (dynamic); returns key -> member id.
        Keys are the instance ids, or "d0", "d1"... for dynamic members."""
        replies = {}
        for i, iid in enumerate(iids):
            key = iid if iid is not None else f"d{i}"
            if iid is None:
                mid = self.dynamic_member(v=v, protocols=protocols)
                replies[key] = self.join(mid, v=v, protocols=protocols)
            else:
                replies[key] = self.join(iid=iid, v=v, protocols=protocols)
        g = self.group()
        while any(not r.done for r in replies.values()):
            assert self.advance(DELAY) or g.timers.next_deadline() is not None
        ids = {k: r.response.member_id for k, r in replies.items()}
        leader = replies[next(iter(replies))].response.leader
        gen = g.generation
        syncs = {k: self.sync(mid, gen, k if k in iids else None,
                              assignments={m: f"a-{k2}".encode() for k2, m in ids.items()} if mid == leader else None)
                 for k, mid in ids.items() if mid != leader}
        lk = next(k for k, m in ids.items() if m == leader)
        syncs[lk] = self.sync(leader, gen, lk if lk in iids else None,
                              assignments={m: f"a-{k2}".encode() for k2, m in ids.items()})
        assert all(s.done and s.response.error_code == 0 for s in syncs.values())
        assert g.state.value == "Stable"
        return ids


# ---- consumer groups (KIP-848) ----------------------------------------------------------------------------------

class ConsumerHarness(GroupHarness):
    """A consumer-group harness: heartbeats in, responses out, partitions by (topic, partition). The topics (T with 4
    partitions unless given) are written to the store."""

    REBALANCE = 30_000  # a joining member's rebalance.timeout.ms

    def __init__(self, topics: dict[str, int] | None = None, *, records: Records | None = None, **config) -> None:
        config.setdefault("group_consumer_assignment_interval_ms", UNBATCHED)
        super().__init__(GroupConfig(**config), topics or {"T": 4}, records=records, write_topics=True)

    def tid(self, name: str) -> bytes:
        return self.c.topics.get(name).topic_id

    def name(self, tid: bytes) -> str:
        return self.c.topics.by_id[tid].name

    def hb(self, mid: str, epoch: int, *, owned=None, topics=None, iid=None, rebalance: int = -1,
           assignor=None, gid: str = "g", version: int = 1, c: Coordinator | None = None,
           rack=None, regex=None) -> wire.ConsumerGroupHeartbeatResponse:
        """One heartbeat. owned: {topic: [partitions]} or None (null); topics: subscribed names or None."""
        tps = None if owned is None else [wire.ConsumerGroupHeartbeatRequestTopicPartitions(
            topic_id=self.tid(t), partitions=list(ps)) for t, ps in owned.items()]
        req = wire.ConsumerGroupHeartbeatRequest(
            group_id=gid, member_id=mid, member_epoch=epoch, instance_id=iid, rack_id=rack,
            rebalance_timeout_ms=rebalance, subscribed_topic_names=topics, server_assignor=assignor,
            subscribed_topic_regex=regex, topic_partitions=tps)
        return (c or self.c).handle(req, version, "client", "/127.0.0.1")

    def join(self, mid: str, topics=("T",), *, iid=None, assignor=None, gid: str = "g", version: int = 1,
             c=None, regex=None) -> wire.ConsumerGroupHeartbeatResponse:
        return self.hb(mid, 0, owned={}, topics=None if topics is None else list(topics), iid=iid,
                       rebalance=self.REBALANCE, assignor=assignor, gid=gid, version=version, c=c, regex=regex)

    def parts(self, r: wire.ConsumerGroupHeartbeatResponse) -> dict[str, list[int]] | None:
        if r.assignment is None:
            return None
        return {self.name(tp.topic_id): sorted(tp.partitions) for tp in r.assignment.topic_partitions}


# ---- connect groups ---------------------------------------------------------------------------------------------

W = wire


def cat(cls, task_cls, units: dict | None):
    """{"c": ["a"], "t": {"a": [0, 1]}} as a generated ConnectorsAndTasks."""
    if units is None:
        return None
    return cls(connectors=list(units.get("c", [])),
               tasks=[task_cls(connector=k, task_ids=list(v)) for k, v in units.get("t", {}).items()])


def plain(c) -> dict:
    """A ConnectorsAndTasks as {"c": [...], "t": {...}} (empty parts left out), for comparisons."""
    out: dict = {}
    if c.connectors:
        out["c"] = sorted(c.connectors)
    tasks = {t.connector: sorted(t.task_ids) for t in c.tasks if t.task_ids}
    if tasks:
        out["t"] = tasks
    return out


def req_units(units):
    return cat(W.ConnectGroupHeartbeatRequestConnectorsAndTasks, W.ConnectGroupHeartbeatRequestConnectorTasks, units)


def assignor(lo=1, hi=2, reason=0, metadata=b"url", name="ica", version=None):
    return W.ConnectGroupHeartbeatRequestAssignor(name=name, minimum_version=lo, maximum_version=hi, reason=reason,
                                                  version=hi if version is None else version, metadata=metadata)


class ConnectHarness(GroupHarness):
    """Connect workers of groups on a coordinator with all three group types enabled; `epoch` keeps each member's
    last epoch, which a heartbeat sends when none is given."""

    REBALANCE = 60_000  # a joining worker's rebalance.timeout.ms

    def __init__(self, *, records: Records | None = None, **config) -> None:
        config.setdefault("group_connect_assignment_interval_ms", UNBATCHED)
        super().__init__(GroupConfig(group_coordinator_rebalance_protocols="classic,consumer,connect", **config),
                         {"t": 1}, records=records)  # t: what the tests commit offsets to
        self.epoch: dict[str, int] = {}

    def hb(self, mid: str, epoch: int | None = None, *, owned=None, assignors=None, rebalance: int = -1, iid=None,
           gid: str = "g", server_assignor=None, client: str = "client") -> W.ConnectGroupHeartbeatResponse:
        epoch = self.epoch.get(mid, 0) if epoch is None else epoch
        r = self.c.handle(W.ConnectGroupHeartbeatRequest(
            group_id=gid, member_id=mid, member_epoch=epoch, instance_id=iid, rebalance_timeout_ms=rebalance,
            server_assignor=server_assignor, client_assignors=assignors, connectors_and_tasks=req_units(owned)), 0,
            client, "/127.0.0.1")
        if r.error_code == E.NONE and epoch >= 0:
            self.epoch[mid] = r.member_epoch
        return r

    def join(self, mid: str, *, lo=1, hi=2, iid=None, rebalance=REBALANCE, gid="g", reason=0, metadata=b"url"):
        return self.hb(mid, 0, owned={}, assignors=[assignor(lo, hi, reason, metadata)], rebalance=rebalance,
                       iid=iid, gid=gid)

    def prepare(self, mid: str, epoch: int | None = None, gid: str = "g") -> W.ConnectGroupPrepareAssignmentResponse:
        return self.c.handle(W.ConnectGroupPrepareAssignmentRequest(
            group_id=gid, member_id=mid, member_epoch=self.epoch[mid] if epoch is None else epoch), 0)

    def install(self, mid: str, targets: dict[str, dict], *, group_epoch: int | None = None, epoch=None, error=0,
                delay=0, state=None, meta: dict | None = None, gid="g") -> W.ConnectGroupInstallAssignmentResponse:
        g = self.c.groups[gid]
        members = [W.ConnectGroupInstallAssignmentRequestMember(
            member_id=m, connectors_and_tasks=cat(W.ConnectGroupInstallAssignmentRequestConnectorsAndTasks,
                                                  W.ConnectGroupInstallAssignmentRequestConnectorTasks, u),
            version=2, metadata=(meta or {}).get(m, b"leader=" + mid.encode())) for m, u in targets.items()]
        return self.c.handle(W.ConnectGroupInstallAssignmentRequest(
            group_id=gid, member_id=mid, member_epoch=self.epoch[mid] if epoch is None else epoch,
            group_epoch=g.group_epoch if group_epoch is None else group_epoch, error=error, assignment_delay_ms=delay,
            assignor_state=state, members=members), 0)

    def compute(self, mid: str, targets: dict[str, dict], **kw) -> W.ConnectGroupInstallAssignmentResponse:
        p = self.prepare(mid)
        assert p.error_code == E.NONE, p
        r = self.install(mid, targets, group_epoch=p.group_epoch, **kw)
        assert r.error_code == E.NONE, r
        return r

    def describe(self, gid="g") -> W.ConnectGroupDescribeResponseDescribedGroup:
        return self.c.handle(W.ConnectGroupDescribeRequest(group_ids=[gid],
                                                           include_authorized_operations=False), 0).groups[0]


# ---- migration between classic and consumer groups (KIP-848) ------------------------------------------------------

class MigrationHarness(ClassicHarness):
    """Classic and consumer-protocol members of one group "g" over topic T (6 partitions)."""

    TOPIC = "T"

    def __init__(self, partitions: int = 6, **config) -> None:
        config.setdefault("group_consumer_assignment_interval_ms", UNBATCHED)
        super().__init__(**config)
        self.c.topics.on_change = self.c.store.write_topic
        self.c.topics.create(self.TOPIC, partitions)
        self.c.store.commit()
        self.tid = self.c.topics.get(self.TOPIC).topic_id

    # classic side
    def sub(self, owned: list[int] | None = None, version: int = 3) -> bytes:
        return encode_subscription([self.TOPIC], owned={self.TOPIC: owned} if owned else None,
                                   version=version)

    def cjoin(self, member_id: str = "", iid: str | None = None, owned: list[int] | None = None,
              protocol: str = "cooperative-sticky", version: int = 3, **kw):
        return self.join(member_id, iid, protocols=((protocol, self.sub(owned, version)),), **kw)

    def csync(self, member_id: str, generation: int, iid: str | None = None, assignments=None,
              protocol: str = "cooperative-sticky", **kw):
        return self.sync(member_id, generation, iid, assignments=assignments, pname=protocol, **kw)

    def form_classic(self, n: int, protocol: str = "cooperative-sticky") -> list[str]:
        """n dynamic classic members, Stable at generation 1, the leader's assignment a round robin of T."""
        ids = []
        replies = []
        for _ in range(n):
            mid = self.cjoin(protocol=protocol).response.member_id
            ids.append(mid)
            replies.append(self.cjoin(mid, protocol=protocol))
        self.advance(2 * DELAY)
        assert all(r.done and r.response.error_code == 0 for r in replies)
        leader = replies[0].response.leader
        gen = replies[0].response.generation_id
        parts = {mid: [p for p in range(6) if p % n == i] for i, mid in enumerate(ids)}
        assignments = {mid: encode_assignment({self.TOPIC: ps}) for mid, ps in parts.items()}
        for mid in ids:
            r = self.csync(mid, gen, assignments=assignments if mid == leader else None, protocol=protocol)
            if mid == leader:
                assert r.response.error_code == 0
        assert self.group().state.value == "Stable" and self.group().generation == gen
        return ids

    def follow(self, mid: str, generation: int, held: list[int]) -> tuple[int, list[int]]:
        """A cooperative classic client's heartbeat: when told to rejoin, it rejoins reporting what it holds and
        syncs; returns its generation and partitions afterwards."""
        if self.heartbeat(mid, generation) != E.REBALANCE_IN_PROGRESS:
            return generation, held
        r = self.cjoin(mid, owned=held)
        assert r.done and r.response.error_code == E.NONE, r.response
        generation = r.response.generation_id
        s = self.csync(mid, generation)
        if s.response.error_code == E.REBALANCE_IN_PROGRESS:
            return generation, held
        assert s.response.error_code == E.NONE, s.response
        return generation, sorted(decode_assignment(s.response.assignment).partitions.get(self.TOPIC, []))

    # consumer side
    def chb(self, mid: str, epoch: int, owned: list[int] | None = None, *, join: bool = False,
            iid: str | None = None) -> wire.ConsumerGroupHeartbeatResponse:
        tps = None if owned is None else [wire.ConsumerGroupHeartbeatRequestTopicPartitions(
            topic_id=self.tid, partitions=owned)]
        req = wire.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id=mid, member_epoch=epoch, instance_id=iid,
            rebalance_timeout_ms=30_000 if join else -1, subscribed_topic_names=[self.TOPIC] if join else None,
            topic_partitions=[] if join else tps)
        return self.c.handle(req, 1, "cclient", "/127.0.0.1")

    def parts(self, r) -> list[int] | None:
        if r.assignment is None:
            return None
        return sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)


def commit(h: GroupHarness, gid: str, *, v: int = 9, gen: int = -1, member: str = "", iid: str | None = None,
           parts=(("t", 0, 42, "m", -1),), topic_id: bytes = wire.ZERO_UUID) -> wire.OffsetCommitResponse:
    """An OffsetCommit at version v; parts: (topic, partition, offset, metadata, leader epoch)."""
    topics: dict[str, list] = {}
    for t, p, o, meta, epoch in parts:
        topics.setdefault(t, []).append(wire.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_metadata=meta, committed_leader_epoch=epoch))
    req = wire.OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=iid,
        topics=[wire.OffsetCommitRequestTopic(name=t if v < 10 else "", topic_id=topic_id, partitions=ps)
                for t, ps in topics.items()])
    return h.c.handle(req, v)


def codes(resp: wire.OffsetCommitResponse) -> list[int]:
    """The error code of each partition of an OffsetCommit answer, in order."""
    return [p.error_code for t in resp.topics for p in t.partitions]
