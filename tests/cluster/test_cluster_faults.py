"""The faults that break lease-based systems, one at a time, each on a real cluster over the suite's real PostgreSQL
(issue 35; the harness that mixes them under load is tests/cluster/test_fault_harness.py):

- a node resumed after a pause past its lease answers NOT_COORDINATOR for the groups that moved, even to what it
  read while stopped, before its next lease round;
- a node cut from PostgreSQL (its own proxy holds every byte) while its clients still reach it stops answering at
  its lease deadline, whatever its wall clock does (stepped an hour back or forward with libfaketime);
- a second process with a node's node.id, started while the first is paused, fences the first: the first's write
  held in flight since before the pause reaches the database at the old epoch and is refused, and the first stops;
- the database's fence refuses an older epoch of the same node id;
- what a node staged for partitions whose lease ran out is forgotten when it leaves them, never written (not even
  once it takes them again), and a node cut off with commits in its writer and staged acknowledges and writes none.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError
from kcoord.pgstore import FencedError, Partitioner, PgRecords, connect, init_schema, partition_for
from kcoord.records import offset_key, offset_value

from ..support.cluster_nodes import FAST, KCluster, find_coordinator, group_on, wait_until

TOPIC = "orders"
LEASE_S = 3.0  # FAST's broker.session.timeout.ms
ARGS = (*FAST, "--topic", f"{TOPIC}:3", "--set", "group.initial.rebalance.delay.ms=0")


def commit_request(group: str, offset: int) -> wire.OffsetCommitRequest:
    return wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])


def fetch_request(group: str) -> wire.OffsetFetchRequest:
    return wire.OffsetFetchRequest(group_id=group, topics=[wire.OffsetFetchRequestTopic(
        name=TOPIC, partition_indexes=[0])], require_stable=False)


def commit_code(c: Client, group: str, offset: int) -> int:
    return c.request(commit_request(group, offset), 7).topics[0].partitions[0].error_code


def fetched(r: wire.OffsetFetchResponse) -> int | str:
    """The offset an OffsetFetch v7 answered, or the name of its error."""
    if r.error_code != E.NONE:
        return E.name(r.error_code)
    return r.topics[0].partitions[0].committed_offset


def commit_until_acked(bootstrap: str, group: str, offset: int, timeout: float) -> None:
    """Commit at each of the comma-separated nodes in turn until one acknowledges it."""
    def once() -> bool:
        for address in bootstrap.split(","):
            try:
                with Client(address) as c:
                    if commit_code(c, group, offset) == E.NONE:
                        return True
            except (OSError, KafkaError):
                pass
        return False
    wait_until(once, timeout, f"{group}: offset {offset} acknowledged at {bootstrap}")


def stored_offset(cl: KCluster, group: str) -> int | None:
    return cl.committed().get((group, TOPIC, 0))


def test_a_write_at_an_older_epoch_of_the_same_node_id_is_fenced_and_logged_at_the_epoch_claimed(pg_dsn):
    """A restarted node keeps its node.id and takes its partitions at a raised epoch: the database refuses the old
    process's write at the older epoch as it refuses another node's, and the write log records each write at the
    epoch its writer claimed, so a fence that let an old epoch through would show there."""
    conn = connect(pg_dsn)
    init_schema(conn, 4)
    part = Partitioner(4)
    p = part("g")
    conn.execute("UPDATE kcoord_leases SET node_id = 1, epoch = 7, expires_at = clock_timestamp() + interval '1 h' "
                 "WHERE partition = %s", (p,))
    old = PgRecords(pg_dsn, 1, part)
    old.epochs[p] = 7
    old.put({offset_key("g", TOPIC, 0): offset_value(5, -1, "", 0)})
    # the node's new process takes the partition (its lease round: same node id, epoch + 1)
    conn.execute("UPDATE kcoord_leases SET epoch = epoch + 1 WHERE partition = %s", (p,))
    new = PgRecords(pg_dsn, 1, part)
    new.epochs[p] = 8
    new.put({offset_key("g", TOPIC, 0): offset_value(7, -1, "", 0)})
    with pytest.raises(FencedError) as e:
        old.put({offset_key("g", TOPIC, 0): offset_value(6, -1, "", 0)})
    assert e.value.partitions == {p}
    (value,) = conn.execute("SELECT value FROM kcoord_records WHERE partition = %s", (p,)).fetchone()
    assert bytes(value) == offset_value(7, -1, "", 0)
    assert conn.execute("SELECT seq, epoch, node_id FROM kcoord_writes ORDER BY seq").fetchall() == [(1, 7, 1),
                                                                                                        (2, 8, 1)]
    old.close()
    new.close()
    conn.close()


def test_a_resumed_node_answers_not_coordinator_for_groups_that_moved_even_to_what_it_read_while_stopped(
        pg_dsn, tmp_path):
    """Node 1 is stopped past its lease; node 2 takes the group and acknowledges a newer offset. Requests sent to
    node 1 while it was stopped are read when it resumes, before its next lease round can tell it anything: its
    lease deadline has passed by its own clock, so it answers NOT_COORDINATOR (never the offset it holds in
    memory), FindCoordinator does not name it, and ListGroups leaves the group out."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 15, "partitions spread over the two nodes")
        group = group_on(cl, 1, "moved")
        node = cl.node(1)
        commit_until_acked(node.bootstrap, group, 5, 10)
        clients = [Client(node.bootstrap, timeout=30) for _ in range(4)]
        assert group in {g.group_id for g in clients[3].request(wire.ListGroupsRequest(), 5).groups}
        answers: dict[str, object] = {}
        try:
            node.pause()
            try:
                wait_until(lambda: cl.owner_of(group) == 2, 2 * LEASE_S + 10, "node 2 takes the group")
                commit_until_acked(cl.node(2).bootstrap, group, 6, 10)

                def ask(name, c, req, version):
                    try:
                        answers[name] = c.request(req, version)
                    except (OSError, KafkaError) as e:
                        answers[name] = e
                asks = [threading.Thread(target=ask, args=a) for a in (
                    ("fetch", clients[0], fetch_request(group), 7),
                    ("commit", clients[1], commit_request(group, 4), 7),
                    ("find", clients[2], wire.FindCoordinatorRequest(key=group, key_type=0), 3),
                    ("list", clients[3], wire.ListGroupsRequest(), 5))]
                for t in asks:
                    t.start()
                time.sleep(0.5)  # the requests are in node 1's socket buffers
            finally:
                node.resume()
            for t in asks:
                t.join(30)
        finally:
            for c in clients:
                c.close()
        assert fetched(answers["fetch"]) == "NOT_COORDINATOR", answers["fetch"]
        assert answers["commit"].topics[0].partitions[0].error_code == E.NOT_COORDINATOR, answers["commit"]
        find = answers["find"]
        assert find.node_id != 1, find
        assert find.error_code in (E.NONE, E.COORDINATOR_NOT_AVAILABLE), find
        assert group not in {g.group_id for g in answers["list"].groups}, answers["list"]
        assert stored_offset(cl, group) == 6
        assert cl.two_writers() == []


@pytest.mark.parametrize("shift", [0, -3600, 3600], ids=["true-clock", "clock-an-hour-back", "clock-an-hour-ahead"])
def test_a_node_cut_from_postgresql_stops_answering_at_its_lease_deadline_whatever_its_wall_clock_says(
        pg_dsn, tmp_path, shift):
    """Node 1's proxy holds every byte between it and PostgreSQL, so its lease round hangs and nothing tells it that
    node 2 took its group; its clients still reach it. From its lease deadline it answers NOT_COORDINATOR, though its
    wall clock was stepped an hour (libfaketime): the deadline is kept on the boot-time clock, and the database stamps
    every lease expiry, so no clock of the node's extends its lease. Healed, it steps down and nothing it held is
    written."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS, proxied=True, clocked=True) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 15, "partitions spread over the two nodes")
        group = group_on(cl, 1, "cut")
        node = cl.node(1)
        commit_until_acked(node.bootstrap, group, 5, 10)
        node.clock.shift(shift)
        node.proxy.stall()
        cut_at = time.monotonic()
        try:
            wait_until(lambda: cl.owner_of(group) == 2, 2 * LEASE_S + 10, "node 2 takes the group")
            took = time.monotonic() - cut_at
            commit_until_acked(cl.node(2).bootstrap, group, 6, 10)
            with Client(node.bootstrap, timeout=10) as c:
                fetch = fetched(c.request(fetch_request(group), 7))
                commit = commit_code(c, group, 4)
                find = c.request(wire.FindCoordinatorRequest(key=group, key_type=0), 3)
        finally:
            node.proxy.heal()
            node.clock.shift(0)
        assert fetch == "NOT_COORDINATOR", fetch
        assert commit == E.NOT_COORDINATOR
        assert find.node_id != 1, find
        assert took < 2 * LEASE_S + 5, took
        wait_until(lambda: cl.balanced([1, 2]), 20, "node 1 takes its share again once healed")
        assert find_coordinator(node.bootstrap, group).node_id == cl.owner_of(group)
        owner = cl.node(cl.owner_of(group))
        with Client(owner.bootstrap) as c:
            assert fetched(c.request(fetch_request(group), 7)) == 6
        assert stored_offset(cl, group) == 6
        assert cl.two_writers() == []


def test_a_second_process_with_the_node_id_fences_the_paused_first_whose_held_write_is_refused_and_it_stops(
        pg_dsn, tmp_path):
    """Node 1's commit is held in flight (its proxy stalls) and node 1 is paused. A second process started with
    node.id 1 is refused until the first's registration runs out, then registers; the group, taken at a raised epoch,
    acknowledges a newer offset. The first is resumed and its connection healed: its held write reaches the database
    at the old epoch and is refused (its client's connection is closed unanswered), the newer offset stays, the
    write log has one writer at a time, and the first process, finding its node.id registered by the second, stops
    with exit status 1 and one line saying why."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS, proxied=True) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 15, "partitions spread over the two nodes")
        group = group_on(cl, 1, "restarted")
        first = cl.node(1)
        commit_until_acked(first.bootstrap, group, 5, 10)
        held: dict[str, object] = {}
        client = Client(first.bootstrap, timeout=60)

        def send() -> None:
            try:
                held["answer"] = commit_code(client, group, 6)
            except (OSError, KafkaError) as e:
                held["answer"] = e
        try:
            first.proxy.stall()
            sender = threading.Thread(target=send)
            sender.start()
            time.sleep(0.5)  # staged and handed to the writer, whose round trip the proxy holds
            assert "answer" not in held, held
            first.pause()
            try:
                second = cl.restart_as_new_process(1, timeout=4 * LEASE_S + 30)
                # at whichever node holds the group now (node 2 took every partition when the first one's lease ran
                # out, and hands the second process its share)
                commit_until_acked(",".join(n.bootstrap for n in cl.nodes), group, 7, 2 * LEASE_S + 10)
            finally:
                first.proxy.heal()
                first.resume()
            sender.join(30)
            assert isinstance(held.get("answer"), KafkaError), held  # refused by the fence: closed unanswered
            assert first.proc.wait(4 * LEASE_S + 10) == 1
        finally:
            client.close()
        events = first.events()
        assert any(e.get("event") == "commit-failed" and e.get("fenced") for e in events), events[-5:]
        halted = [e for e in events if e.get("event") == "halted"]
        assert halted and "node.id 1 was registered by another process" in halted[0]["error"]
        assert stored_offset(cl, group) == 7
        assert cl.two_writers() == []
        with Client(cl.node(cl.owner_of(group)).bootstrap) as c:
            assert fetched(c.request(fetch_request(group), 7)) == 7
        assert second.alive


def test_a_node_cut_off_with_a_commit_in_its_writer_and_one_staged_acknowledges_and_writes_neither(pg_dsn, tmp_path):
    """Node 1's proxy stalls with one commit in its writer (group g) and a second one staged behind it (group h, on
    another coordinator partition). Its leases run out and node 2 takes both groups and acknowledges a newer offset
    of h. Healed, node 1 steps down (whichever it learns first, the fence or the lost lease): neither commit is
    acknowledged (their connections are closed unanswered), neither is written, and h keeps node 2's offset, also
    once node 1 holds its share again."""
    with KCluster(pg_dsn, tmp_path, nodes=2, args=ARGS, proxied=True) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 15, "partitions spread over the two nodes")
        g = group_on(cl, 1, "in-writer")
        parts = cl.partitions()
        owners = cl.owners()
        h = next(name for i in range(10_000) if owners[partition_for(name := f"staged-{i}", parts)] == 1
                 and partition_for(name, parts) != partition_for(g, parts))
        node = cl.node(1)
        commit_until_acked(node.bootstrap, g, 5, 10)
        commit_until_acked(node.bootstrap, h, 15, 10)
        answers: dict[str, object] = {}
        clients = {name: Client(node.bootstrap, timeout=60) for name in (g, h)}

        def send(group: str, offset: int) -> None:
            try:
                answers[group] = commit_code(clients[group], group, offset)
            except (OSError, KafkaError) as e:
                answers[group] = e
        try:
            node.proxy.stall()
            senders = [threading.Thread(target=send, args=(g, 6))]
            senders[0].start()
            time.sleep(0.5)  # g's commit is in the writer, held by the proxy
            senders.append(threading.Thread(target=send, args=(h, 16)))
            senders[1].start()
            time.sleep(0.5)  # h's commit is staged behind it
            assert answers == {}, answers
            wait_until(lambda: cl.owner_of(g) == 2 and cl.owner_of(h) == 2, 2 * LEASE_S + 10,
                       "node 2 takes both groups")
            commit_until_acked(cl.node(2).bootstrap, h, 17, 10)
        finally:
            node.proxy.heal()
        for t in senders:
            t.join(30)
        for c in clients.values():
            c.close()
        assert isinstance(answers[g], KafkaError) and isinstance(answers[h], KafkaError), answers
        hp = partition_for(h, parts)
        wait_until(lambda: any(e.get("event") == "partitions-left" and hp in e["partitions"]
                               for e in node.events()), 10, "node 1 steps down")
        wait_until(lambda: cl.balanced([1, 2]), 20, "node 1 takes its share again")
        time.sleep(1.0)  # a write node 1 still held would have gone by now
        assert stored_offset(cl, h) == 17 and stored_offset(cl, g) == 5
        assert cl.two_writers() == []


def test_a_node_stepping_down_past_its_deadline_forgets_what_it_staged_there_so_a_retake_cannot_write_it(pg_dsn):
    """The step-down itself, on a real (unstarted) server over the real PostgreSQL: records staged for a partition
    whose lease deadline has passed are forgotten when the node leaves it, and those of its other partitions are
    kept. Were they kept, taking the partition again would raise its epoch in this node's hand, and the next write
    would put them, old state, over what another node wrote meanwhile: the fence would let them through."""
    from kcoord.cluster import lease_clock
    from kcoord.config import ServerConfig
    from kcoord.server import Server

    srv = Server(ServerConfig(port=0, store_url=pg_dsn, topics=[f"{TOPIC}:1"]))
    srv.loop = loop = asyncio.new_event_loop()  # (its timers are armed on it; it never runs)
    try:
        cl = srv.cluster
        cl._apply(cl._db_round({}), {})  # the only node: it takes every partition
        parts = cl.partitions
        g = "left-behind"
        h = next(name for i in range(1000) if partition_for(name := f"kept-{i}", parts) != partition_for(g, parts))
        p, q = partition_for(g, parts), partition_for(h, parts)
        assert p in cl.epochs and q in cl.epochs
        srv.store.stage(offset_key(g, TOPIC, 0), offset_value(6, -1, "", 0))
        srv.store.stage(offset_key(h, TOPIC, 0), offset_value(16, -1, "", 0))
        cl.deadline[p] = lease_clock() - 0.001  # p's lease ran out by this node's clock
        cl.step_down([p], "its lease ran out")
        assert p not in cl.epochs
        # another node wrote p meanwhile (its epoch), then this node takes p again (the next epoch)
        cl.lease_conn.execute("UPDATE kcoord_leases SET node_id = 1, epoch = epoch + 2 WHERE partition = %s", (p,))
        epoch = cl.lease_conn.execute("SELECT epoch FROM kcoord_leases WHERE partition = %s", (p,)).fetchone()[0]
        cl.take({p: epoch}, [], lease_clock() + cl.lease_s)
        srv.store.commit()
        stored = {bytes(k) for (k,) in cl.lease_conn.execute("SELECT key FROM kcoord_records WHERE partition >= 0")}
        assert offset_key(h, TOPIC, 0) in stored
        assert offset_key(g, TOPIC, 0) not in stored, "what was staged before the lease ran out was written"
    finally:
        srv.store.close()
        srv.cluster.lease_conn.close()
        loop.close()
