"""A kcoord cluster on PostgreSQL (kcoord.cluster, kcoord.pgstore): nodes on 127.0.0.N over one real PostgreSQL
started by the suite (tests/support/postgres.py), driven by the real clients.

- groups of confluent-kafka, kafka-python and aiokafka spread over three nodes form and commit, each at the node
  the database says holds its partition; the others answer NOT_COORDINATOR;
- SIGKILL of a static group's coordinator: no revocation, served again within the lease plus a few seconds, every
  acknowledged offset kept; then kills under commit load (20 in the slow run);
- a write whose lease moved on is refused by the database (the epoch), answered by nothing, and the node steps
  down; a node paused past its lease steps down when resumed, and the write log shows one writer at a time; a node
  stopped inside its lease transaction, its lease rows locked, holds the others back no longer than its lease;
- PostgreSQL restarted under the cluster: retriable errors while it is down, nothing acknowledged lost, service
  resumes.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg
import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError
from kcoord.cluster import View, lease_clock, share
from kcoord.pgstore import FencedError, Partitioner, PgRecords, connect, init_schema, partition_for
from kcoord.records import offset_key, offset_value, topic_key, topic_value
from kcoord.store import record_crc

from ..support.cluster_nodes import FAST, KCluster, find_coordinator, group_on, wait_until
from ..support.interop_member import MEMBERS
from ..support.servers import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOPIC = "orders"
LEASE_S = 3.0  # FAST's broker.session.timeout.ms
ARGS = (*FAST, "--topic", f"{TOPIC}:3", "--set", "group.initial.rebalance.delay.ms=0")


def heartbeat(bootstrap: str, group: str) -> int:
    with Client(bootstrap) as c:
        return c.request(wire.HeartbeatRequest(group_id=group, generation_id=1, member_id="m"), 4).error_code


# ---- Kafka's partition rule and the share of partitions --------------------------------------------------------


def test_partition_for_is_kafkas_rule_computed_by_java(tmp_path):
    """abs(groupId.hashCode()) % partitions, as Kafka computes it: Java itself is the oracle (UTF-16 code units,
    overflow, and Utils.abs(Integer.MIN_VALUE) = 0 for "polygenelubricants")."""
    names = ["", "g", "my-group", "polygenelubricants", "grüße", "組-🙂", "x" * 300, "connect-cluster"]
    src = tmp_path / "P.java"
    src.write_text("public class P { public static void main(String[] a) { for (String s : a) {"
                   " int h = s.hashCode(); int abs = h == Integer.MIN_VALUE ? 0 : Math.abs(h);"
                   " System.out.println(abs % 50 + \" \" + abs % 7); } } }")
    out = subprocess.run(["java", str(src), *names], capture_output=True, text=True, timeout=120, check=True)
    expected = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    assert [(partition_for(n, 50), partition_for(n, 7)) for n in names] == expected
    assert Partitioner(50).of_key(offset_key("組-🙂", "t", 3)) == partition_for("組-🙂", 50)


def test_the_share_is_balanced_sticky_and_the_same_on_every_node():
    partitions = 50
    view = View(nodes={1: None, 2: None, 3: None}, owners=dict.fromkeys(range(partitions), 1))
    shares = {n: share(view, partitions, n) for n in (1, 2, 3)}
    assert set().union(*shares.values()) == set(range(partitions))
    assert sum(map(len, shares.values())) == partitions
    assert sorted(map(len, shares.values())) == [16, 17, 17]
    assert shares[1] == set(range(17)), "the owner keeps what it holds up to its share"
    # node 3 goes: its partitions are the only ones that move
    view2 = View(nodes={1: None, 2: None}, owners={p: n for n in (1, 2, 3) for p in shares[n]})
    after = {n: share(view2, partitions, n) for n in (1, 2)}
    assert after[1] >= shares[1] and after[2] >= shares[2]
    assert after[1] | after[2] == set(range(partitions)) and not after[1] & after[2]
    assert share(view2, partitions, 3) == set(), "a node not alive holds nothing"


# ---- the fence ----------------------------------------------------------------------------------------------


def test_a_write_at_an_old_epoch_is_refused_by_the_database_and_writes_nothing(pg_dsn):
    conn = connect(pg_dsn)
    init_schema(conn, 4)
    part = Partitioner(4)
    p = part("g")
    conn.execute("UPDATE kcoord_leases SET node_id = 1, epoch = 7, expires_at = clock_timestamp() + interval '1 h' "
                 "WHERE partition = %s", (p,))
    a = PgRecords(pg_dsn, 1, part)
    a.epochs[p] = 7
    a.put({offset_key("g", "t", 0): offset_value(5, -1, "", 0)})
    # node 2 takes the partition over (what its lease round does when node 1's lease has run out)
    conn.execute("UPDATE kcoord_leases SET node_id = 2, epoch = epoch + 1 WHERE partition = %s", (p,))
    with pytest.raises(FencedError) as e:
        a.put({offset_key("g", "t", 0): offset_value(6, -1, "", 0), offset_key("g", "t", 1): offset_value(1, -1, "", 0)})
    assert e.value.partitions == {p}
    rows = conn.execute("SELECT key, value FROM kcoord_records").fetchall()
    assert [(bytes(k), bytes(v)) for k, v in rows] == [(offset_key("g", "t", 0), offset_value(5, -1, "", 0))]
    assert conn.execute("SELECT seq, epoch, node_id FROM kcoord_writes").fetchall() == [(1, 7, 1)]
    b = PgRecords(pg_dsn, 2, part)
    b.epochs[p] = 8
    b.put({offset_key("g", "t", 0): offset_value(9, -1, "", 0)})
    with pytest.raises(FencedError):  # a partition it holds no lease on at all
        b.put({offset_key("other-group-on-another-partition" if part("other-group-on-another-partition") != p
                          else "zz", "t", 0): offset_value(1, -1, "", 0)})
    a.close()
    b.close()
    conn.close()


def test_writes_and_lease_rounds_lock_lease_rows_in_one_order(pg_dsn):
    """A write touching partitions 5 and 3 (in that order) waits for 3 before it takes 5: another transaction
    holding 3 can still take 5 at once. Locked in the write's own order, the two would deadlock (as a node's
    write and its lease round on its other connection did before)."""
    conn, other = connect(pg_dsn), connect(pg_dsn)
    init_schema(conn, 8)
    conn.execute("UPDATE kcoord_leases SET node_id = 1, epoch = 1, expires_at = clock_timestamp() + interval '1 h'")
    part = Partitioner(8)
    names = {}
    for i in range(1000):
        names.setdefault(part(f"g{i}"), f"g{i}")
    rec = PgRecords(pg_dsn, 1, part)
    rec.epochs.update(dict.fromkeys(range(8), 1))
    done = threading.Event()
    with other.transaction():
        other.execute("SET LOCAL lock_timeout = '2s'")
        other.execute("SELECT 1 FROM kcoord_leases WHERE partition = 3 FOR UPDATE")
        writer = threading.Thread(target=lambda: (rec.put({offset_key(names[5], "t", 0): offset_value(1, -1, "", 0),
                                                           offset_key(names[3], "t", 0): offset_value(1, -1, "", 0)}),
                                                  done.set()))
        writer.start()
        wait_until(lambda: other.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0] > 0, 10,
                   "the write waits for partition 3")
        other.execute("SELECT 1 FROM kcoord_leases WHERE partition = 5 FOR UPDATE")  # not held by the write
        assert not done.is_set()
    writer.join(10)
    assert done.is_set()
    assert conn.execute("SELECT count(*) FROM kcoord_records").fetchone()[0] == 2
    for c in (rec, conn, other):
        c.close()


def test_a_lease_round_read_before_the_nodes_own_topic_write_does_not_undo_it(pg_dsn):
    """A round reads the topics in a thread; if this node creates a topic after that read, the round's older
    snapshot must not delete it (nor forget its offsets) when applied: it is skipped, and the next round's is taken."""
    from kcoord.cluster import Round
    from kcoord.config import ServerConfig
    from kcoord.server import Server

    srv = Server(ServerConfig(port=0, store_url=pg_dsn, topics=["a:1"]))
    try:
        cl = srv.cluster
        stale = cl.lease_conn.execute("SELECT key, value, crc FROM kcoord_records WHERE partition = -1").fetchall()
        version = int(cl.lease_conn.execute("SELECT value FROM kcoord_meta WHERE name = 'topics_version'")
                      .fetchone()[0])
        srv.topics.create("b", 2)
        srv.store.commit()
        assert cl.records.topics_written == version + 1
        cl._apply(Round(lease_clock(), View(), set(), {}, [], stale, str(version), False), {})
        assert "b" in srv.topics, "an older snapshot of the topics undid this node's own write"
        fresh = cl.lease_conn.execute("SELECT key, value, crc FROM kcoord_records WHERE partition = -1").fetchall()
        cl._apply(Round(lease_clock(), View(), set(), {}, [], fresh, str(version + 1), False), {})
        assert srv.topics.get("b").partitions == 2 and cl.topics_version == str(version + 1)
        # a topic deleted elsewhere (a newer snapshot without it) goes here too
        cl.lease_conn.execute("DELETE FROM kcoord_records WHERE partition = -1 AND key = %s", (topic_key("a"),))
        cl.lease_conn.execute("UPDATE kcoord_meta SET value = (value::int + 1)::text WHERE name = 'topics_version'")
        fresh = cl.lease_conn.execute("SELECT key, value, crc FROM kcoord_records WHERE partition = -1").fetchall()
        cl._apply(Round(lease_clock(), View(), set(), {}, [], fresh, str(version + 2), False), {})
        assert "a" not in srv.topics and "b" in srv.topics
    finally:
        srv.store.close()
        srv.cluster.lease_conn.close()


def test_a_node_whose_lease_moved_on_answers_nothing_it_could_not_write_and_steps_down(pg_dsn, tmp_path):
    """The database's fence with a live server: the lease is taken over in the database (as another node's round
    does) while the node still believes it holds it; its next commit is refused by the epoch, the commit's
    connection is closed unanswered, nothing is stored, and the node answers NOT_COORDINATOR from then on."""
    with KCluster(pg_dsn, tmp_path, nodes=1, args=(*ARGS, "--set", "broker.session.timeout.ms=60000",
                                                   "--set", "broker.heartbeat.interval.ms=30000",
                                                   "--metrics-port", "0")) as cl:
        node = cl.node(1)
        group = "fenced-group"
        p = partition_for(group, cl.partitions())
        commit = wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=10, committed_leader_epoch=-1, committed_metadata="")])])
        with Client(node.bootstrap) as c:
            r = c.request(commit, 7)
        assert r.topics[0].partitions[0].error_code == E.NONE
        cl.db.execute("UPDATE kcoord_leases SET node_id = 99, epoch = epoch + 1 WHERE partition = %s", (p,))
        commit.topics[0].partitions[0].committed_offset = 11
        with Client(node.bootstrap) as c, pytest.raises(KafkaError, match="closed the connection"):
            c.request(commit, 7)
        assert cl.committed() == {(group, TOPIC, 0): 10}
        assert heartbeat(node.bootstrap, group) == E.NOT_COORDINATOR
        events = [json.loads(line) for line in node.log.read_text().splitlines() if line.startswith("{")]
        failed = [e for e in events if e.get("event") == "commit-failed"]
        assert failed and failed[0]["fenced"] is True and p in failed[0]["partitions"]
        assert any(e.get("event") == "partitions-left" and p in e["partitions"] for e in events)
        assert node.alive, "a fenced node keeps serving its other partitions"
        other = group_on(cl, 1, "still-mine")
        with Client(node.bootstrap) as c:
            commit.group_id = other
            assert c.request(commit, 7).topics[0].partitions[0].error_code == E.NONE
        port = next(e["metrics_port"] for e in events if e.get("event") == "started")
        scraped = urllib.request.urlopen(f"http://{node.host}:{port}/metrics", timeout=10).read().decode()
        values = {line.split()[0]: float(line.split()[1]) for line in scraped.splitlines()
                  if line.startswith("kcoord_cluster_")}
        assert values.pop("kcoord_cluster_lease_rounds_total") >= 1  # (as many as it has had time for)
        assert values == {"kcoord_cluster_partitions_held": cl.partitions() - 1, "kcoord_cluster_nodes": 1.0,
                          "kcoord_cluster_lease_rounds_failed_total": 0.0, "kcoord_cluster_step_downs_total": 1.0}


# ---- three nodes, three clients -------------------------------------------------------------------------------


def test_groups_of_three_clients_spread_over_three_nodes_form_and_commit(pg_dsn, tmp_path):
    with KCluster(pg_dsn, tmp_path, nodes=3, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2, 3]), 10, "partitions spread over the three nodes")
        members = []
        for kind in MEMBERS:
            for node_id in (1, 2, 3):
                group = group_on(cl, node_id, kind)
                members.append((node_id, MEMBERS[kind](cl.bootstrap, group, TOPIC, client_id=f"{kind}-{node_id}",
                                                       instance_id=f"{group}-a").start()))
        try:
            wait_until(lambda: all(m.assigned == {0, 1, 2} for _, m in members), 60,
                       "every group's one member holds the three partitions")
            for i, (node_id, m) in enumerate(members):
                m.commit({0: 100 + i, 1: 200 + i})
                fc = find_coordinator(cl.node(1 + i % 3).bootstrap, m.group)
                assert (fc.error_code, fc.node_id, fc.port) == (E.NONE, node_id, cl.node(node_id).port)
                for other in {1, 2, 3} - {node_id}:
                    assert heartbeat(cl.node(other).bootstrap, m.group) == E.NOT_COORDINATOR
            stored = cl.committed()
            for i, (_, m) in enumerate(members):
                assert stored[(m.group, TOPIC, 0)] == 100 + i and stored[(m.group, TOPIC, 1)] == 200 + i
                assert m.committed([0, 1]) == {0: 100 + i, 1: 200 + i}
            with Client(cl.node(2).bootstrap) as c:
                md = c.request(wire.MetadataRequest(topics=None), 9)
            assert sorted((b.node_id, b.host, b.port) for b in md.brokers) == \
                [(n.node_id, n.host, n.port) for n in cl.nodes]
            # the group commands find every group from any node: ListGroups at each, describe at the coordinator
            listed = json.loads(run_cli("groups", "--json", "--bootstrap", cl.node(1).bootstrap).stdout)
            assert {g["group"] for g in listed} == {m.group for _, m in members}
            far = next(m for node_id, m in members if node_id == 3)
            described = json.loads(run_cli("describe", far.group, "--json", "--bootstrap", cl.node(1).bootstrap).stdout)
            assert described["state"] == "Stable" and described["members"][0]["group_instance_id"] == f"{far.group}-a"
            from confluent_kafka.admin import AdminClient
            admin = AdminClient({"bootstrap.servers": cl.node(1).bootstrap})
            valid = admin.list_consumer_groups(request_timeout=20).result(30).valid
            assert {g.group_id for g in valid} == {m.group for _, m in members}
        finally:
            for _, m in members:
                m.close()
        out = subprocess.run([sys.executable, "-m", "kcoord.cli", "cluster", "--store", pg_dsn, "--json", "--check"],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout)
        assert [n["node"] for n in info["nodes"] if n["live"]] == [1, 2, 3]
        assert {x["node"] for x in info["leases"]} == {1, 2, 3} and info["problems"] == []
        text = subprocess.run([sys.executable, "-m", "kcoord.cli", "cluster", "--store", pg_dsn],
                              capture_output=True, text=True, cwd=ROOT, timeout=60).stdout
        assert "127.0.0.3:" in text and "one writer per partition at a time" in text
        # the store the three nodes wrote reads back whole: the nine groups, each offset the database holds, the topic
        rc, report, err = store_check(pg_dsn)
        assert (rc, err, report["problems"]) == (0, [], [])
        assert (report["groups"], report["offsets"], report["topics"]) == (9, len(cl.committed()), 1)


# ---- failover -------------------------------------------------------------------------------------------------


CLIENT_SESSION_MS = 45_000  # session.timeout.ms as Kafka's and librdkafka's default has it


class Committer:
    """A static member (confluent-kafka unless `kind` says) committing ever higher offsets, remembering what was
    acknowledged.

    Its session is the clients' default, not the 6 s the single-server interop tests use: these tests take the
    coordinator away (paused, killed, PostgreSQL down) for several seconds, longer under load. When librdkafka's own
    session timer runs out first, it drops its member id and rejoins, the coordinator replaces the static member,
    and a commit it sends before that rejoin is through is answered FENCED_INSTANCE_ID, which librdkafka treats as
    fatal: the consumer stops for good (librdkafka issue 3437; Kafka answers the same). That is the client's behaviour
    under an outage longer than its session, not what these tests are about."""

    def __init__(self, bootstrap: str, group: str, kind: str = "confluent") -> None:
        self.member = MEMBERS[kind](bootstrap, group, TOPIC, client_id=group, instance_id=f"{group}-a",
                                    session_timeout_ms=CLIENT_SESSION_MS)
        self.group = group
        self.acked: dict[int, int] = {}
        self.attempted = 0
        self.acked_at = 0.0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.since: float | None = None  # when it was assigned and began committing

    def start(self) -> Committer:
        """Join, and commit once assigned; closed again if it never is."""
        self.join()
        try:
            return self.commit_once_assigned()
        except BaseException:
            self.close()
            raise

    def join(self) -> Committer:
        """Start the member (it joins its group; committing starts with `commit_once_assigned`)."""
        self.member.start()
        return self

    def commit_once_assigned(self) -> Committer:
        wait_until(lambda: self.member.assigned == {0, 1, 2}, 60, f"{self.group} assigned")
        self.since = time.monotonic()
        self.thread.start()
        return self

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            self.attempted = n
            try:
                self.member.commit({0: n, 1: n, 2: n})
            except Exception as e:  # the failover: retried with the next offset
                self.errors.append(str(e)[:200])
                time.sleep(0.05)
                continue
            self.acked = {0: n, 1: n, 2: n}
            self.acked_at = time.monotonic()

    def close(self) -> None:
        """Stop committing and close the client, whatever point it reached (a client left running would go on
        logging and drawing random numbers in this process's later tests)."""
        self.stop.set()
        if self.since is not None:
            self.thread.join(30)
            self.revoked = self.member.revocations_since(self.since)  # closing the client revokes: read them before
        self.held = self.member.assigned
        self.member.close()


def kills_under_commit_load(pg_dsn, tmp_path, kills: int) -> list[float]:
    """Kill the node coordinating the most committing groups, `kills` times (restarting it after each), with six
    static members committing throughout, two of each client. Returns each kill's time to every group committing
    again."""
    took = []
    with KCluster(pg_dsn, tmp_path, nodes=3, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2, 3]), 10, "partitions spread over the three nodes")
        kinds = list(MEMBERS) * 2
        committers: list[Committer] = []
        try:
            for i in range(6):  # all six join at once, then each commits once assigned
                committers.append(Committer(cl.bootstrap, group_on(cl, 1 + i % 3, f"load{i}"), kinds[i]).join())
            for c in committers:
                c.commit_once_assigned()
            for k in range(kills):
                owners = [cl.owner_of(c.group) for c in committers]
                victim = max((1, 2, 3), key=lambda n: (owners.count(n), -abs(n - 1 - k % 3)))
                killed_at = time.monotonic()
                cl.node(victim).kill()
                wait_until(lambda t=killed_at: all(c.acked_at > t + 0.05 for c in committers), LEASE_S + 10,
                           f"kill {k + 1} (node {victim}): every group commits again")
                took.append(time.monotonic() - killed_at)
                cl.node(victim).start()
                wait_until(lambda: cl.balanced([1, 2, 3]), 15, f"kill {k + 1}: node {victim} back in its share")
        finally:
            for c in committers:
                c.close()
        stored = cl.committed()
        for c in committers:
            assert c.acked, f"{c.group} never committed"
            for p, n in c.acked.items():
                assert c.attempted >= stored[(c.group, TOPIC, p)] >= n, \
                    f"{c.group}/{p}: acknowledged {n}, stored {stored.get((c.group, TOPIC, p))}"
            assert c.revoked == [], f"{c.group}: a static member lost its partitions"
        assert cl.two_writers() == []
    return took


def test_sigkill_of_a_static_groups_coordinator_keeps_its_assignment_and_offsets(pg_dsn, tmp_path):
    took = kills_under_commit_load(pg_dsn, tmp_path, kills=1)  # 20 in the slow test below
    assert all(t < LEASE_S + 5 for t in took), took


@pytest.mark.slow
def test_twenty_kills_under_commit_load_lose_no_acknowledged_commit(pg_dsn, tmp_path):
    took = kills_under_commit_load(pg_dsn, tmp_path, kills=20)
    print(f"\n20 kills: served again after {min(took):.2f}-{max(took):.2f} s (median {sorted(took)[10]:.2f} s)")


def test_a_kip848_member_follows_its_group_to_the_new_coordinator(pg_dsn, tmp_path):
    """A consumer group (KIP-848, librdkafka's group.protocol=consumer) whose coordinator is killed: the new owner
    replays its ConsumerGroup records, and the member carries on at its epoch, holding what it held."""
    from ..support.interop_consumer import ConsumerMember

    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        group = group_on(cl, 1, "kip848")
        m = ConsumerMember(cl.bootstrap, group, [TOPIC], client_id="kip848-a").start()
        try:
            wait_until(lambda: m.partitions == {0, 1, 2}, 30, "the member holds the three partitions")
            m.commit({0: 5, 1: 6})
            epoch = cl.db.execute("SELECT epoch FROM kcoord_leases WHERE partition = %s",
                                  (partition_for(group, cl.partitions()),)).fetchone()[0]
            killed_at = time.monotonic()
            cl.node(1).kill()

            def commits() -> bool:
                try:
                    m.commit({0: 7, 1: 8})
                    return True
                except Exception:  # the coordinator is moving: try again
                    return False
            wait_until(commits, LEASE_S + 10, "the member commits at node 2")
            took = time.monotonic() - killed_at
            revoked, lost, held = list(m.revoked), m.lost, m.partitions  # before closing, which revokes
        finally:
            m.stop()
        assert cl.owner_of(group) == 2 and cl.db.execute(
            "SELECT epoch FROM kcoord_leases WHERE partition = %s", (partition_for(group, cl.partitions()),)
        ).fetchone()[0] > epoch
        assert revoked == [] and lost == 0 and held == {0, 1, 2}, (revoked, lost, held)
        assert {k[2]: v for k, v in cl.committed().items() if k[0] == group} == {0: 7, 1: 8}
        assert took < LEASE_S + 5


def test_a_node_paused_past_its_lease_steps_down_and_never_writes_beside_the_new_owner(pg_dsn, tmp_path):
    """SIGSTOP the coordinator of a committing group until the other node holds its partition, then SIGCONT: what
    the resumed node tries to write (its timers fire first) is refused by the epoch, it steps down and answers
    NOT_COORDINATOR, the group carries on at the new owner, and the write log shows one writer at a time."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        c = Committer(cl.bootstrap, group_on(cl, 1, "paused")).start()
        try:
            node = cl.node(1)
            node.pause()
            wait_until(lambda: cl.owner_of(c.group) == 2, LEASE_S + 5, "node 2 takes the paused node's partitions")
            node.resume()
            resumed_at = time.monotonic()
            wait_until(lambda: any('"partitions-left"' in line for line in node.log.read_text().splitlines()), 10,
                       "the resumed node steps down")
            assert heartbeat(node.bootstrap, c.group) == E.NOT_COORDINATOR
            wait_until(lambda: c.acked_at > resumed_at, 15, "the group commits at node 2")
            wait_until(lambda: cl.balanced([1, 2]), 15, "the resumed node takes its share again")
            moved_at = time.monotonic()
            wait_until(lambda: c.acked_at > moved_at, 15, "the group commits after the move back")
        finally:
            node.resume()  # a stopped coordinator would hold the client's close for its whole timeout
            c.close()
        assert cl.two_writers() == []
        stored = cl.committed()
        assert all(stored[(c.group, TOPIC, p)] >= n for p, n in c.acked.items())
        events = [json.loads(line) for line in node.log.read_text().splitlines() if line.startswith("{")]
        assert all(e["fenced"] for e in events if e.get("event") == "commit-failed"), \
            "the resumed node's writes fail only by the fence"
        # The paused coordinator held the client's requests unanswered; within its session the static member keeps
        # its assignment throughout, at the new owner and back.
        assert c.revoked == [] and c.held == {0, 1, 2}, (c.revoked, c.held)


def commit_offset(bootstrap: str, group: str, offset: int) -> int:
    """One OffsetCommit v7 (as an admin: generation -1) of partition 0; its error code."""
    with Client(bootstrap) as c:
        r = c.request(wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]), 7)
    return r.topics[0].partitions[0].error_code


def test_a_node_paused_inside_its_lease_transaction_does_not_hold_the_others_back(pg_dsn, tmp_path):
    """The worst moment to stop a node: its lease round has locked its lease rows and renewed them, and the COMMIT
    has not been sent. PostgreSQL ends that session once it has idled in its transaction for a lease
    (idle_in_transaction_session_timeout), so its row locks go and the other node takes the partitions over, as it
    would from a node paused anywhere else; the resumed node steps down."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        node = cl.node(1)
        held = {p for p, n in cl.owners().items() if n == 1}
        blocker = psycopg.connect(pg_dsn)
        try:
            # SHARE lets node 1's round lock its rows FOR UPDATE and holds its UPDATE back: it waits inside its
            # transaction, where it is stopped; then the UPDATE goes through and nothing sends the COMMIT.
            blocker.execute("LOCK TABLE kcoord_leases IN SHARE MODE")
            (session,) = wait_until(lambda: cl.db.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'kcoord-node-1' AND wait_event_type = 'Lock'"
                " AND query LIKE 'UPDATE kcoord_leases l SET expires_at%%'").fetchone(), 10,
                "node 1's lease round waits inside its transaction")
            node.pause()
        finally:
            blocker.rollback()
            blocker.close()
        try:
            stopped_at = time.monotonic()
            # Its UPDATE goes through and the session idles in its transaction, holding the rows, until PostgreSQL
            # ends it a lease later. A busy machine can miss that window between two looks, so the session ending
            # while its node is stopped (only PostgreSQL can end it then) shows the same.
            states = []
            wait_until(lambda: states.append(cl.db.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (session,)).fetchone())
                or states[-1] in (("idle in transaction",), None), 5 + LEASE_S,
                "node 1's stopped session is left idle in its transaction")
            wait_until(lambda: all(cl.owners()[p] == 2 for p in held), 2 * LEASE_S + 5,
                       "node 2 takes the stopped node's partitions")
            took = time.monotonic() - stopped_at
        finally:
            node.resume()
        wait_until(lambda: any('"partitions-left"' in line for line in node.log.read_text().splitlines()), 10,
                   "the resumed node steps down")
        wait_until(lambda: cl.balanced([1, 2]), 15, "the resumed node takes its share again")
        assert cl.two_writers() == []
        assert took < 2 * LEASE_S + 2, took


def test_postgres_restarted_under_the_cluster(pg_dsn, tmp_path, postgres_server):
    """While PostgreSQL is down, nothing is acknowledged and every answer is retriable (a closed connection, then
    NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE once the leases have run out); once it is back the nodes take
    their partitions again from what it holds, and the real clients carry on with every acknowledged offset."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        committers: list[Committer] = []
        admin = group_on(cl, 1, "pgdown-admin")
        try:
            committers += [Committer(cl.bootstrap, group_on(cl, n, "pgdown")).join() for n in (1, 2)]
            for c in committers:
                c.commit_once_assigned()
            wait_until(lambda: all(c.acked for c in committers), 10, "commits flow")
            assert commit_offset(cl.node(1).bootstrap, admin, 5) == E.NONE
            cl.db.close()
            acked_before = {c.group: dict(c.acked) for c in committers}
            postgres_server.stop("fast")
            down_at = time.monotonic()
            try:
                code = commit_offset(cl.node(1).bootstrap, admin, 6)
            except KafkaError:
                code = "closed"  # the commit could not be made durable: its connection is closed unanswered
            assert code in ("closed", E.NOT_COORDINATOR), code
            for n in (1, 2):
                wait_until(lambda n=n: find_coordinator(cl.node(n).bootstrap, admin).error_code
                           == E.COORDINATOR_NOT_AVAILABLE, LEASE_S + 5, f"node {n} gives up its leases")
                assert commit_offset(cl.node(n).bootstrap, admin, 7) == E.NOT_COORDINATOR
            stalled = [c.group for c in committers if c.acked_at > down_at + 0.5]
            postgres_server.start()
            up_at = time.monotonic()
            wait_until(lambda: all(c.acked_at > up_at for c in committers), LEASE_S + 15, "commits resume")
            wait_until(lambda: commit_offset(cl.node(1).bootstrap, admin, 8) == E.NONE
                       or commit_offset(cl.node(2).bootstrap, admin, 8) == E.NONE, 15, "the admin commit lands")
        finally:
            for c in committers:
                c.close()
        assert stalled == [], "a commit was acknowledged while PostgreSQL was down"
        import psycopg
        cl.db = psycopg.connect(pg_dsn, autocommit=True)
        stored = cl.committed()
        assert stored[(admin, TOPIC, 0)] == 8
        for c in committers:
            for p, n in [*acked_before[c.group].items(), *c.acked.items()]:
                assert stored[(c.group, TOPIC, p)] >= n
            # PostgreSQL stays down past the lease, so the member's coordinator answers NOT_COORDINATOR for seconds;
            # within its session the static member keeps its partitions throughout.
            assert c.revoked == [] and c.held == {0, 1, 2}, f"{c.group}: {c.revoked}, {c.held}"
        assert all(cl.node(n).alive for n in (1, 2))
        assert cl.two_writers() == []


def test_a_stopped_node_hands_its_partitions_over_at_once(pg_dsn, tmp_path):
    """SIGTERM: the node commits, unloads and gives its leases back, so the other takes them at its next round
    instead of after the lease; the group carries on without a revocation."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=(*ARGS, "--set", "broker.session.timeout.ms=30000")) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 10, "partitions spread over the two nodes")
        c = Committer(cl.bootstrap, group_on(cl, 2, "handover")).start()
        try:
            stopped_at = time.monotonic()
            assert cl.node(2).stop() == 0
            wait_until(lambda: cl.balanced([1]), 5, "node 1 holds every partition, long before the 30 s lease")
            wait_until(lambda: c.acked_at > stopped_at + 0.1, 15, "the group commits at node 1")
        finally:
            c.close()
        assert c.revoked == []
        assert any('"stopped"' in line for line in cl.node(2).log.read_text().splitlines())


def test_one_turn_of_pipelined_commits_is_one_transaction(pg_dsn, tmp_path):
    """Group commit, as with the embedded store: 200 OffsetCommits sent in one write are written in far fewer
    transactions (each one is a row of the write log), and every one of them is stored."""
    with KCluster(pg_dsn, tmp_path, nodes=1, args=ARGS) as cl:
        node = cl.node(1)
        group = "pipelined"
        before = cl.db.execute("SELECT count(*) FROM kcoord_writes").fetchone()[0]
        key = wire.OffsetCommitRequest.API_KEY
        frames = b"".join(wire.encode_request(key, 7, i + 1, "t", wire.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[wire.OffsetCommitRequestTopic(
                name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
                    partition_index=i % 3, committed_offset=i, committed_leader_epoch=-1, committed_metadata="")])]))
            for i in range(200))
        with Client(node.bootstrap) as c:
            c.sock.sendall(frames)  # one write: the server reads them in as few reads as the socket allows
            codes = [c.receive(key, 7, i + 1).topics[0].partitions[0].error_code for i in range(200)]
        assert codes == [E.NONE] * 200
        writes = cl.db.execute("SELECT count(*) FROM kcoord_writes").fetchone()[0] - before
        assert 1 <= writes < 50, writes
        assert {k: v for k, v in cl.committed().items() if k[0] == group} == \
            {(group, TOPIC, p): max(i for i in range(200) if i % 3 == p) for p in range(3)}


def test_a_commit_waiting_on_the_database_holds_no_other_request_and_the_next_batch_waits_for_it(pg_dsn, tmp_path):
    """The group commit on PostgreSQL: a node's write runs on its writer thread. While one waits in the database
    (its partition's lease row locked by another session), the node answers what needs no write (ApiVersions, a
    Heartbeat), and a commit of another group, in another partition, is staged into the next batch and waits too:
    one batch in flight per node, written in order. Once the lock goes, both are answered and stored."""
    args = (*ARGS, "--set", "broker.session.timeout.ms=60000")  # the lease outlives the lock held below
    with KCluster(pg_dsn, tmp_path, nodes=1, args=args) as cl:
        node = cl.node(1)
        parts = cl.partitions()
        first = "held-0"
        second = next(f"held-{i}" for i in range(1, 1000) if partition_for(f"held-{i}", parts)
                      != partition_for(first, parts))
        key = wire.OffsetCommitRequest.API_KEY

        def commit(group: str, offset: int) -> bytes:
            return wire.encode_request(key, 7, offset, "t", wire.OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
                    wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                        committed_metadata="")])]))

        with Client(node.bootstrap) as a, Client(node.bootstrap) as b:
            a.sock.sendall(commit(first, 1))
            assert a.receive(key, 7, 1).topics[0].partitions[0].error_code == E.NONE
            locker = psycopg.connect(pg_dsn)  # not autocommit: the lock is held until the rollback
            try:
                locker.execute("SELECT 1 FROM kcoord_leases WHERE partition = %s FOR UPDATE",
                               (partition_for(first, parts),))
                a.sock.sendall(commit(first, 2))  # its write waits for the lock in the database
                wait_until(lambda: locker.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kcoord-node-1' "
                    "AND wait_event_type = 'Lock' AND query LIKE '%kcoord_put%'").fetchone()[0] == 1, 15,
                    "the node's write waits for the lock")
                b.sock.sendall(commit(second, 3))  # another partition, staged into the next batch
                # The loop is free: what writes nothing is answered while the write waits.
                assert heartbeat(node.bootstrap, "idle-group") == E.UNKNOWN_MEMBER_ID
                with Client(node.bootstrap) as c:
                    assert c.request(wire.ApiVersionsRequest(), 0).error_code == E.NONE
                for sock in (a.sock, b.sock):  # neither commit is answered while the first batch is not written
                    assert select.select([sock], [], [], 0)[0] == []
                assert cl.committed().get((second, TOPIC, 0)) is None, "a second batch was written beside the first"
            finally:
                locker.rollback()
                locker.close()
            assert a.receive(key, 7, 2).topics[0].partitions[0].error_code == E.NONE
            assert b.receive(key, 7, 3).topics[0].partitions[0].error_code == E.NONE
        stored = cl.committed()
        assert stored[(first, TOPIC, 0)] == 2 and stored[(second, TOPIC, 0)] == 3
        assert cl.two_writers() == []


# ---- settings -------------------------------------------------------------------------------------------------


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoord.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


@pytest.mark.parametrize(("args", "expected"), [
    (["--store", "mysql://x/y"], "--store: 'mysql://x/y' is not a postgresql:// URL"),
    (["--store", "postgresql://u:secret@127.0.0.1:1/db", "--data-dir", "/tmp/x"], "--store and --data-dir"),
    (["--store", "postgresql://u:secret@127.0.0.1:1/db", "--set", "broker.heartbeat.interval.ms=9000"],
     "broker.heartbeat.interval.ms (9000) must be below broker.session.timeout.ms (9000)"),
    (["--store", "postgresql://u:secret@127.0.0.1:1/db", "--set", "offsets.topic.num.partitions=0"],
     "offsets.topic.num.partitions: 0 is below the minimum 1"),
    (["--store", "postgresql://u:secret@127.0.0.1:1/db"], "cannot connect to the PostgreSQL store"),
])
def test_cluster_setting_mistakes_are_one_line(args, expected):
    out = run_cli("serve", "--port", "0", *args)
    assert out.returncode != 0 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], out.stderr
    assert "secret" not in out.stderr


def test_a_second_node_with_the_same_id_or_another_partition_count_is_refused(pg_dsn, tmp_path):
    with KCluster(pg_dsn, tmp_path, nodes=1, args=ARGS) as cl:
        same = run_cli("serve", "--host", "127.0.0.9", "--port", "0", "--store", pg_dsn, "--set", "node.id=1")
        assert same.returncode == 1
        assert f"node.id 1 is in use by a live node at {cl.node(1).bootstrap}" in same.stderr
        other = run_cli("serve", "--host", "127.0.0.9", "--port", "0", "--store", pg_dsn, "--set", "node.id=5",
                        "--set", "offsets.topic.num.partitions=10")
        assert other.returncode == 1
        assert "made with offsets.topic.num.partitions=50; this node is set to 10" in other.stderr
        # a node on --port 0 is registered, and named by FindCoordinator, at the port it got
        proc = subprocess.Popen([sys.executable, "-m", "kcoord.cli", "serve", "--host", "127.0.0.7", "--port", "0",
                                 "--store", pg_dsn, "--set", "node.id=7", "--log-format", "json", *ARGS],
                                stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            started = next(json.loads(line) for line in proc.stderr if '"event": "started"' in line)
            assert started["port"] > 0
            assert cl.db.execute("SELECT port FROM kcoord_nodes WHERE node_id = 7").fetchone() == (started["port"],)
        finally:
            proc.terminate()
            proc.stderr.close()
            assert proc.wait(30) == 0


def test_kcoord_cluster_on_a_database_that_is_not_a_kcoord_store_says_so_in_one_line(pg_dsn):
    """A database kcoord never used (a wrong --store), one whose schema lost a table, and one whose kcoord_meta is
    someone else's: one line each, naming the database, exit 1; never a traceback or PostgreSQL's "relation does
    not exist"."""
    conn = connect(pg_dsn)
    try:
        conn.execute("CREATE TABLE orders (id int)")  # someone else's database
        out = run_cli("cluster", "--store", pg_dsn)
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [
            f"kcoord cluster: {pg_dsn} is not a kcoord store (no kcoord tables; the first node started with --store "
            f"creates them)"], out.stderr
        init_schema(conn, 4)
        conn.execute("DROP TABLE kcoord_writes")
        out = run_cli("cluster", "--store", pg_dsn, "--json")
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [
            f"kcoord cluster: {pg_dsn} is not a whole kcoord store (missing: kcoord_writes)"], out.stderr
        conn.execute("CREATE TABLE kcoord_writes (x int)")
        conn.execute("UPDATE kcoord_meta SET value = 'something-else' WHERE name = 'magic'")
        out = run_cli("cluster", "--store", pg_dsn, "--check")
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [
            f"kcoord cluster: {pg_dsn} is not a kcoord store (magic 'something-else')"], out.stderr
    finally:
        conn.close()


def store_check(dsn: str) -> tuple[int, dict | None, list[str]]:
    """`kcoord store check URL --json`: exit status, the report, stderr's lines."""
    out = run_cli("store", "check", dsn, "--json")
    return out.returncode, json.loads(out.stdout) if out.stdout else None, out.stderr.strip().splitlines()


def test_store_check_reads_a_postgresql_store_and_names_each_kind_of_damage(pg_dsn):
    """`kcoord store check postgresql://...`: a sound store's counts; then, one at a time, a record that fails its
    checksum, bytes that are not a record, a record filed under another group's partition, a missing lease row and
    a write log with two writers at one epoch, each named; the verdict on one stderr line, exit 1."""
    conn = connect(pg_dsn)
    try:
        init_schema(conn, 4)
        part = Partitioner(4)
        groups = [f"g{i}" for i in range(6)]
        conn.execute("UPDATE kcoord_leases SET node_id = 1, epoch = 1")
        w = PgRecords(pg_dsn, 1, part)
        w.epochs.update(dict.fromkeys(range(4), 1))
        w.put({offset_key(g, TOPIC, p): offset_value(10 * i + p, -1, "", 0) for i, g in enumerate(groups)
               for p in range(3)} | {topic_key(TOPIC): topic_value(b"\x01" * 16, 3)})
        w.close()
        rc, report, err = store_check(pg_dsn)
        assert (rc, err) == (0, []), "\n".join(err)
        assert report["ok"] and report["problems"] == []
        assert (report["records"], report["offsets"], report["topics"], report["groups"]) == (19, 18, 1, 0)
        assert report["path"] == pg_dsn and report["bytes"] > 0
        text = run_cli("store", "check", pg_dsn)
        assert text.returncode == 0 and "ok" in text.stdout.splitlines()[1] and pg_dsn in text.stdout

        def damaged(expected: str, count: int) -> None:
            rc, report, err = store_check(pg_dsn)
            assert rc == 1 and not report["ok"] and len(report["problems"]) == count, report
            assert any(expected in p for p in report["problems"]), report["problems"]
            assert len(err) == 1 and err[0].startswith(f"kcoord store check: {pg_dsn}: damaged: {count} problem(s)")

        key0 = offset_key("g0", TOPIC, 0)
        conn.execute("UPDATE kcoord_records SET value = %s WHERE key = %s", (offset_value(99, -1, "", 0), key0))
        damaged(f"record with key {key0.hex()} fails its checksum", 1)
        bad = b"\x00\x03\xff\xff"
        key1 = offset_key("g1", TOPIC, 0)
        conn.execute("UPDATE kcoord_records SET value = %s, crc = %s WHERE key = %s", (bad, record_crc(key1, bad), key1))
        damaged("cannot be read", 2)
        key2 = offset_key("g2", TOPIC, 1)
        conn.execute("UPDATE kcoord_records SET partition = %s WHERE key = %s", ((part("g2") + 1) % 4, key2))
        damaged(f"record with key {key2.hex()} is filed under partition {(part('g2') + 1) % 4}; its group's is "
                f"{part('g2')}", 3)
        conn.execute("DELETE FROM kcoord_leases WHERE partition = 3")
        damaged("kcoord_leases holds 3 partitions for 4; missing [3]", 4)
        conn.execute("INSERT INTO kcoord_writes (partition, seq, epoch, node_id) VALUES (0, 100, 1, 2)")
        damaged("write log: partition 0: epoch 1 written by nodes 1, 2", 5)
    finally:
        conn.close()


def test_store_check_and_accept_of_a_postgresql_url_that_cannot_be_used_are_one_line():
    out = run_cli("store", "check", "postgresql://u:secret@127.0.0.1:1/db")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        next(line for line in out.stderr.splitlines() if line.startswith(
            "kcoord store check: postgresql://u:***@127.0.0.1:1/db: cannot connect to the PostgreSQL store: "))]
    out = run_cli("store", "accept", "postgresql://u:secret@127.0.0.1:1/db")
    assert out.returncode == 2 and out.stdout == "" and "secret" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "kcoord store accept: postgresql://u:***@127.0.0.1:1/db: store accept takes a data directory; a PostgreSQL "
        "store is PostgreSQL's to keep (it has no commit witness to accept)"]
