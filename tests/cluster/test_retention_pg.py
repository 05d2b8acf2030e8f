"""Offset retention on the PostgreSQL store (kcoord.pgstore, a cluster node's): the same rule as on the embedded
store (tests/unit/test_retention.py, whose helpers these tests share), with what it writes read back from PostgreSQL.

- in-process, on a manual clock: an Empty group's offsets expire at the retention from when it became Empty, a
  simple consumer's from each commit; the tombstones and the group's removal are in the database, and a node that
  takes the partitions again (a restart) reads back the Empty time before the expiry and nothing after it;
- a real server over the wire: a simple consumer's offsets, committed with kcoord.client, go at the retention
  (the server's wall clock moved ahead; its timers run on real time), the group leaves ListGroups, and a
  `kcoord serve` node started afterwards on the same database does not bring them back. The same with nothing
  simulated, a whole minute of offsets.retention.minutes=1 on `kcoord serve` nodes, is the slow run's.
"""

from __future__ import annotations

import time

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import server as server_module
from kcoord import wire
from kcoord.client import Client
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.pgstore import Partitioner, PgRecords, check_pg_store, connect, init_schema, partition_for
from kcoord.timers import Clock

from ..support.cluster_nodes import FAST, KCluster, wait_until
from ..support.harness import commit
from ..support.retention import RETENTION, at, codes, empty_group_with_offsets, harness
from ..support.servers import ThreadServer

PARTITIONS = 8  # "g" and "s" are in two coordinator partitions (7 and 3)
TOPIC = "orders"
MINUTE = 60_000  # the servers' offsets.retention.minutes=1 (Kafka's least)
LONG_LEASE = ("--set", "broker.session.timeout.ms=60000", "--set", "broker.heartbeat.interval.ms=1000")


# ---- what the database holds -----------------------------------------------------------------------------------

def lease_all(dsn: str, node_id: int) -> int:
    """Every coordinator partition taken by `node_id` at a new epoch, as its lease round takes free or run-out
    partitions; returns the epoch."""
    conn = connect(dsn)
    try:
        init_schema(conn, PARTITIONS)
        (epoch,) = conn.execute("UPDATE kcoord_leases SET node_id = %s, epoch = (SELECT max(epoch) + 1 FROM "
                                "kcoord_leases), expires_at = clock_timestamp() + interval '1 hour' "
                                "RETURNING epoch", (node_id,)).fetchone()
    finally:
        conn.close()
    return epoch


@pytest.fixture
def node_store(pg_dsn):
    """node_store(node_id): a cluster node's store backend on pg_dsn, holding every partition (its lease round's
    part, without the loop); each is closed after the test."""
    opened: list[PgRecords] = []

    def make(node_id: int) -> PgRecords:
        epoch = lease_all(pg_dsn, node_id)
        records = PgRecords(pg_dsn, node_id, Partitioner(PARTITIONS))
        records.epochs.update(dict.fromkeys(range(PARTITIONS), epoch))
        opened.append(records)
        return records

    yield make
    for records in opened:
        records.close()


def take(h, records: PgRecords) -> Coordinator:
    """What a node does at start over PostgreSQL: the topics at once (the store's scan: the global partition), then
    the groups of the partitions its lease round takes (Cluster.take replays them)."""
    c = h.restarted(records)
    c.load(records.scan_partitions(range(PARTITIONS)))
    return c


def stored(dsn: str) -> set[tuple]:
    """The group records (group, "group") and offsets (group, topic, partition) the database holds, each checked to
    be filed under its group's coordinator partition (where the node that takes the partition reads it)."""
    conn = connect(dsn)
    try:
        rows = conn.execute("SELECT partition, key, value FROM kcoord_records WHERE partition >= 0").fetchall()
    finally:
        conn.close()
    out = set()
    for part, key, value in rows:
        rec = R.decode(bytes(key), bytes(value))
        assert part == partition_for(rec.group, PARTITIONS), (rec, part)
        out.add((rec.group, rec.key.topic, rec.key.partition) if rec.kind == "offset" else (rec.group, rec.kind))
    return out


def in_db(dsn: str, gid: str) -> set:
    """What the database holds of group `gid`: its offsets as (topic, partition), and "group" for its record."""
    return {k[1:] if len(k) == 3 else k[1] for k in stored(dsn) if k[0] == gid}


# ---- in-process, on a manual clock ---------------------------------------------------------------------------

def test_expiry_is_written_to_postgresql_and_a_node_taking_the_partitions_again_keeps_it(pg_dsn, node_store) -> None:
    records = node_store(1)
    h = harness(records=records)  # topics t and u, 8 partitions each
    empty_since = empty_group_with_offsets(h)
    assert codes(commit(h, "s")) == [E.NONE]
    h.c.store.commit()
    assert in_db(pg_dsn, "g") == {("t", 0), ("u", 0), "group"} and in_db(pg_dsn, "s") == {("t", 0)}
    records.close()
    # The node restarts halfway (or another node takes its partitions): the group's Empty time comes back from
    # its GroupMetadataValue in PostgreSQL, not the time of the load.
    at(h, empty_since + RETENTION // 2)
    records = node_store(1)
    c = take(h, records)
    assert c.groups["g"].state_timestamp == empty_since
    assert c.groups["g"].state.value == "Empty" and c.groups["s"].protocol_type is None
    at(h, empty_since + RETENTION - 1)
    c.expire_offsets()
    assert set(c.offsets.committed("g")) == {("t", 0), ("u", 0)}
    assert in_db(pg_dsn, "g") == {("t", 0), ("u", 0), "group"}
    at(h, empty_since + RETENTION)
    c.expire_offsets()
    assert "g" not in c.groups and "s" in c.groups  # s committed 1 ms after g became Empty
    assert in_db(pg_dsn, "g") == set() and in_db(pg_dsn, "s") == {("t", 0)}  # tombstones, the group's record too
    at(h, empty_since + RETENTION + 1)
    c.expire_offsets()
    assert "s" not in c.groups and in_db(pg_dsn, "s") == set()
    assert c.offsets.expired_count == 3 and c.groups_expired == 2
    records.close()
    # A second node takes every partition: nothing comes back.
    records = node_store(2)
    c = take(h, records)
    assert not c.groups and not c.offsets.by_group
    records.close()
    assert stored(pg_dsn) == set()
    assert check_pg_store(pg_dsn).ok


# ---- a real server, over the wire ----------------------------------------------------------------------------

class LaterClock(Clock):
    """The server's clock with its wall time `ahead_ms` ahead (retention is counted on wall time, from the commit
    timestamps the server wrote); its deadlines (the check every offsets.retention.check.interval.ms) stay on the
    real monotonic clock."""

    ahead_ms = 0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.ahead_ms


def commit_over_the_wire(bootstrap: str, group: str, offsets: dict[int, int]) -> list[int]:
    """A simple consumer's OffsetCommit (generation -1, no member): the error code of each partition."""
    req = wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
            for p, o in offsets.items()])])
    with Client(bootstrap) as c:
        return [p.error_code for t in c.request(req, 8).topics for p in t.partitions]


def listed(bootstrap: str) -> set[str]:
    with Client(bootstrap) as c:
        resp = c.request(wire.ListGroupsRequest(states_filter=[]), 4)
    assert resp.error_code == E.NONE
    return {g.group_id for g in resp.groups}


def fetched(bootstrap: str, group: str) -> dict[int, int]:
    """OffsetFetch of every committed offset of `group` (topics null): partition -> offset."""
    with Client(bootstrap) as c:
        resp = c.request(wire.OffsetFetchRequest(group_id=group, topics=None), 7)
    assert resp.error_code == E.NONE
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def next_check(srv: ThreadServer) -> int | None:
    """When the server's next retention check is due (its monotonic ms), read from the test's thread: None while
    the check's timer is not armed (it is being fired on the server's loop)."""
    c = srv.server.coordinator
    try:
        return c.timers.heap.deadline_of(c.expiry_timer)
    except KeyError:
        return None


def test_a_servers_expiry_over_postgresql_is_not_undone_by_a_node_started_afterwards(pg_dsn, tmp_path,
                                                                                       monkeypatch) -> None:
    monkeypatch.setattr(server_module, "Clock", LaterClock)  # the Server the ThreadServer makes runs on it
    # Leases far longer than the test (a loaded machine's late lease round must not unload the groups); the server
    # hands them back when it closes, so the node started afterwards takes the partitions at once.
    srv = ThreadServer(None, store_url=pg_dsn, node_id=1, lease_ms=60_000, lease_renew_ms=1000,
                       coordinator_partitions=PARTITIONS, topics=[f"{TOPIC}:3"],
                       group=GroupConfig(offsets_retention_minutes=MINUTE // 60_000,
                                         offsets_retention_check_interval_ms=50))
    try:
        assert srv.error is None and srv.server.cluster is not None
        bootstrap = f"127.0.0.1:{srv.port}"
        assert commit_over_the_wire(bootstrap, "s", {0: 10, 1: 11}) == [E.NONE, E.NONE]
        assert commit_over_the_wire(bootstrap, "kept", {0: 5}) == [E.NONE]
        assert "s" in listed(bootstrap) and fetched(bootstrap, "s") == {0: 10, 1: 11}
        assert in_db(pg_dsn, "s") == {(TOPIC, 0), (TOPIC, 1)}
        expired = srv.server.coordinator.groups_expired
        clock = srv.server.clock
        assert isinstance(clock, LaterClock)
        clock.ahead_ms = MINUTE - 30_000  # short of the retention by half a minute: checks run, nothing goes
        first = wait_until(lambda: next_check(srv), 10, "the retention check is armed")
        wait_until(lambda: (next_check(srv) or 0) >= first + 100, 10, "two retention checks ran")
        assert "s" in listed(bootstrap) and in_db(pg_dsn, "s") == {(TOPIC, 0), (TOPIC, 1)}
        assert commit_over_the_wire(bootstrap, "kept", {0: 6}) == [E.NONE]  # committed at the clock's "now"
        clock.ahead_ms = MINUTE
        wait_until(lambda: "s" not in listed(bootstrap), 10, "the simple consumer's group leaves ListGroups")
        assert fetched(bootstrap, "s") == {}
        assert in_db(pg_dsn, "s") == set()  # the offsets' tombstones are in PostgreSQL
        assert srv.server.coordinator.groups_expired == expired + 1
        assert "kept" in listed(bootstrap) and in_db(pg_dsn, "kept") == {(TOPIC, 0)}
    finally:
        srv.close()
    assert srv.error is None
    # A node started on the same database afterwards, on the real wall clock (by which s's offsets are a few
    # seconds old: a node that read them back would serve them for a minute).
    with KCluster(pg_dsn, tmp_path, nodes=1, args=(*LONG_LEASE, "--topic", f"{TOPIC}:3",
                                                   "--set", f"offsets.topic.num.partitions={PARTITIONS}")) as cl:
        bootstrap = cl.node(1).bootstrap
        assert listed(bootstrap) == {"kept"}
        assert fetched(bootstrap, "s") == {} and fetched(bootstrap, "kept") == {0: 6}
        assert in_db(pg_dsn, "s") == set()


@pytest.mark.slow
def test_kcoord_serve_nodes_expire_offsets_after_a_real_minute_and_the_other_node_does_not_bring_them_back(
        pg_dsn, tmp_path) -> None:
    """Nothing simulated: offsets.retention.minutes=1 (Kafka's least) on two `kcoord serve` nodes; a simple
    consumer's offsets go a minute after their commit, and the other node that takes the partition over when the
    owner is killed, then the owner restarted, read nothing back. About 70 s."""
    args = (*FAST, "--topic", f"{TOPIC}:3", "--set", "offsets.retention.minutes=1",
            "--set", "offsets.retention.check.interval.ms=200")
    with KCluster(pg_dsn, tmp_path, nodes=2, args=args) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        group = "simple"
        owner = cl.owner_of(group)
        other = 3 - owner
        node = cl.node(owner)
        sent_at = time.time()  # the commit's timestamp is the node's wall clock when it handles it: no earlier
        assert commit_over_the_wire(node.bootstrap, group, {0: 10, 1: 11}) == [E.NONE, E.NONE]
        assert cl.committed() == {(group, TOPIC, 0): 10, (group, TOPIC, 1): 11}
        assert group in listed(node.bootstrap)
        wait_until(lambda: group not in listed(node.bootstrap), 90, "the group leaves ListGroups", interval=0.2)
        gone_at = time.time()
        assert gone_at - sent_at >= 60  # not before the retention: a minute of the node's wall clock
        assert fetched(node.bootstrap, group) == {}
        # The tombstones are written by the node's writer thread, a batch at a time, while the loop answers: a read
        # may see the deletion a moment before the database does (as with SQLite's group commit).
        wait_until(lambda: cl.committed() == {}, 5, "the expired offsets' tombstones are written")
        node.kill()
        wait_until(lambda: cl.owner_of(group) == other, 15, f"node {other} takes the group's partition")
        assert group not in listed(cl.node(other).bootstrap) and fetched(cl.node(other).bootstrap, group) == {}
        node.start()
        wait_until(lambda: cl.balanced([1, 2]), 15, "the restarted node takes its share again")
        holder = cl.node(cl.owner_of(group)).bootstrap
        assert group not in listed(holder) and fetched(holder, group) == {}
        assert cl.committed() == {}
