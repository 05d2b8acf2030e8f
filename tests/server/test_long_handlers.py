"""No request holds the event loop for long (issue 30): the store's writes beside a large record do not read that
record again, and DeleteGroups / ListGroups of many groups run in slices on the coordinator's timers, other requests
served between them. Times are measured in benches/bench_hostile.py; these tests count the work done."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.client import Client
from kcoord.reply import Reply
from kcoord.store import STORE_FILE, SqliteRecords

from ..support.harness import DELAY, ClassicHarness
from ..support.servers import free_port, serve

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store-a195b2b"  # a store written by an older kcoord (WITHOUT ROWID)
BIG = 8 << 20  # a record larger than SQLite's page cache (2 MiB by default): reading it means reading the file


def bytes_read() -> int:
    """What this process has read through read() and pread() (Linux's rchar): SQLite reads its pages so."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def writes_beside_a_large_record(records: SqliteRecords, commits: int = 20) -> int:
    """Bytes read by `commits` writes of small records whose keys sort right beside a BIG one: the records of new
    members of a group whose other members' records are large (an online upgrade of a classic group with big
    metadata: each KIP-848 join writes there)."""
    records.put({R.consumer_member_key("big", "a-member"): b"\x00\x00" + b"x" * BIG})
    before = bytes_read()
    for i in range(commits):
        records.put({R.consumer_member_key("big", f"b-{i:04d}"): b"v" * 100,
                     R.consumer_member_key("big", f"a-{i:04d}"): b"w" * 100})
    return bytes_read() - before


def test_writes_beside_a_large_record_do_not_read_it(tmp_path) -> None:
    # Kept WITHOUT ROWID, SQLite compared each written key with the whole large row (its overflow pages read again):
    # 5 records of 15 MiB made each KIP-848 join beside them cost 130 ms and froze the server for a minute.
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    try:
        read = writes_beside_a_large_record(records)
        assert read < BIG, f"20 small writes read {read:,} bytes: the {BIG:,}-byte record beside them was read"
        assert [k for k, _ in records.scan()] == sorted(k for k, _ in records.scan())  # replayed in key order
    finally:
        records.close()


def test_a_store_made_without_rowid_is_converted_when_opened(tmp_path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "data", data)
    db = sqlite3.connect(data / STORE_FILE)
    before = db.execute("SELECT key, value, crc FROM records ORDER BY key").fetchall()
    assert "WITHOUT ROWID" in db.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    db.close()
    records = SqliteRecords(str(data), fsync="off")
    try:
        layout = records.db.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()[0]
        assert "WITHOUT ROWID" not in layout.upper()
        assert records.db.execute("SELECT key, value, crc FROM records ORDER BY key").fetchall() == before
        assert list(records.scan()) == [(k, v) for k, v, _ in before]  # in key order, as replay wants
        assert writes_beside_a_large_record(records) < BIG
    finally:
        records.close()
    reopened = SqliteRecords(str(data), fsync="off")  # the state row and the witness still agree with the records
    reopened.close()


# ---- DeleteGroups and ListGroups in slices ----------------------------------------------------------------------

def commit(group: str) -> wire.OffsetCommitRequest:
    return wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name="t", partitions=[
            wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


def sliced_harness(groups: int) -> ClassicHarness:
    h = ClassicHarness()
    h.c.slice_long_requests = True  # as the server runs it
    for i in range(groups):
        assert h.c.handle(commit(f"g{i:05d}"), 8).topics[0].partitions[0].error_code == E.NONE
    return h


def run_slices(h: ClassicHarness, reply: Reply, between=lambda: None) -> int:
    """Fire the coordinator's timers until `reply` is answered, calling `between` after each fire; the fires."""
    fires = 0
    while not reply.done:
        assert fires < 10_000, "never answered"
        h.advance(1)
        fires += 1
        between()
    return fires


def test_delete_groups_of_many_groups_runs_in_slices_and_answers_every_group_in_order() -> None:
    h = sliced_harness(3_000)
    names = ["", *[f"g{i:05d}" for i in range(3_000)], "nope", "g00000"]
    reply = h.c.handle(wire.DeleteGroupsRequest(groups_names=names), 2)
    assert type(reply) is Reply and not reply.done  # parked: the loop is given back before the last group goes
    left_after_first = sum(f"g{i:05d}" in h.c.groups for i in range(3_000))
    assert 0 < left_after_first < 3_000  # the first slice did part of the work, not none and not all
    # Between slices another client's request is served, and a group named later in the request that gained a
    # member meanwhile is refused when its turn comes (validated then, as Kafka validates at its write).
    joined = h.join(iid="member", gid="g02999")
    h.advance(DELAY)  # the join phase completes (slices fire on the way)
    assert joined.done and joined.response.error_code == E.NONE
    run_slices(h, reply)
    results = reply.response.results
    assert [r.group_id for r in results] == names
    codes = {r.group_id: r.error_code for r in results[1:-2]}
    assert codes.pop("g02999") == E.NON_EMPTY_GROUP and set(codes.values()) == {E.NONE}
    assert [r.error_code for r in (results[0], results[-2], results[-1])] == \
        [E.INVALID_GROUP_ID, E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND]
    assert set(h.c.groups) == {"g02999"} and set(h.c.offsets.by_group) == {"g02999"}
    assert not any(k for k in h.records.data if k[:2] == b"\x00\x01" and b"g00001" in k)  # tombstoned


def test_a_small_delete_groups_is_answered_at_once() -> None:
    h = sliced_harness(3)
    resp = h.c.handle(wire.DeleteGroupsRequest(groups_names=["g00000", "g00001"]), 2)
    assert type(resp) is wire.DeleteGroupsResponse and [r.error_code for r in resp.results] == [E.NONE, E.NONE]


def test_list_groups_of_many_groups_runs_in_slices_and_lists_the_groups_there_were() -> None:
    h = sliced_harness(5_000)
    reply = h.c.handle(wire.ListGroupsRequest(), 5)
    assert type(reply) is Reply and not reply.done
    changed = []

    def between() -> None:  # served between slices: a new group, and a group deleted before it is listed
        if not changed:
            h.c.handle(commit("newcomer"), 8)
            assert h.c.handle(wire.DeleteGroupsRequest(groups_names=["g04999"]), 2).results[0].error_code == 0
            changed.append(1)

    assert run_slices(h, reply, between) >= 2
    listed = [g.group_id for g in reply.response.groups]
    assert sorted(listed) == [f"g{i:05d}" for i in range(4_999)]  # as they were, less the one deleted since


def test_in_process_a_long_request_is_answered_at_once() -> None:
    h = ClassicHarness()
    for i in range(3_000):
        h.c.handle(commit(f"g{i:05d}"), 8)
    assert len(h.c.handle(wire.ListGroupsRequest(), 5).groups) == 3_000


def test_another_connection_is_served_while_a_big_delete_groups_runs(tmp_path) -> None:
    """Over the wire: while DeleteGroups of 20,000 groups runs, another connection's DescribeGroups of its first
    and last groups is answered with the first deleted and the last not yet: served between its slices. A request
    behind it on its own connection is answered after it."""
    n = 20_000
    srv = serve(free_port(), tmp_path / "log", "--data-dir", str(tmp_path / "data"), "--topic", "t:1",
                "--log-level", "WARNING")
    try:
        with Client(srv.bootstrap) as c:
            c.sock.sendall(b"".join(wire.encode_request(8, 8, i, "load", commit(f"g{i:05d}")) for i in range(n)))
            for i in range(n):
                assert c.receive(8, 8, i).topics[0].partitions[0].error_code == E.NONE
        names = [f"g{i:05d}" for i in range(n)]
        with Client(srv.bootstrap) as deleter, Client(srv.bootstrap) as other:
            first = deleter.send(42, 2, wire.DeleteGroupsRequest(groups_names=names))
            behind = deleter.send(18, 3, wire.ApiVersionsRequest(client_software_name="t",
                                                                 client_software_version="1"))
            seen = set()
            while True:
                states = [g.group_state for g in other.call(15, 5, wire.DescribeGroupsRequest(
                    groups=[names[0], names[-1]])).groups]
                seen.add(tuple(states))
                if states[1] == "Dead":
                    break
            assert ("Dead", "Empty") in seen, f"never answered between the deletions: {seen}"
            results = deleter.receive(42, 2, first).results
            assert [r.group_id for r in results] == names and not any(r.error_code for r in results)
            assert deleter.receive(18, 3, behind).error_code == E.NONE  # in request order
    finally:
        srv.proc.terminate()
        srv.proc.wait(30)


def test_a_cluster_node_answers_a_sliced_delete_groups_when_it_is_done() -> None:
    """A node of a cluster answers NOT_COORDINATOR for the groups it does not serve and its own results for the
    rest, also when its coordinator answers them later (a parked reply, many groups)."""
    from kcoord.cluster import MULTI

    _, rebuild = MULTI[wire.DeleteGroupsRequest.API_KEY]
    parked = Reply(version=2)
    asked = []

    def handler(req, version, client_id, client_host):
        asked.append(list(req.groups_names))
        return parked

    answer = rebuild(handler, wire.DeleteGroupsRequest(groups_names=["mine", "theirs", "mine"]), 2, "c", "/h",
                     {"theirs"})
    assert type(answer) is Reply and not answer.done and asked == [["mine", "mine"]]
    parked.resolve(wire.DeleteGroupsResponse(results=[
        wire.DeleteGroupsResponseDeletableGroupResult(group_id="mine", error_code=E.NONE),
        wire.DeleteGroupsResponseDeletableGroupResult(group_id="mine", error_code=E.GROUP_ID_NOT_FOUND)]))
    assert answer.done
    assert [(r.group_id, r.error_code) for r in answer.response.results] in (
        [("mine", E.NONE), ("theirs", E.NOT_COORDINATOR)], [("mine", E.GROUP_ID_NOT_FOUND), ("theirs", E.NOT_COORDINATOR)])


def test_a_pipelined_burst_takes_turns_with_other_connections(tmp_path) -> None:
    """2,000 KIP-848 joins written at once on one connection (each join costs the coordinator more than the last)
    are handled a few milliseconds' worth per turn of the loop: another connection's ConsumerGroupDescribe is
    answered while the burst is under way (the group has some of the members, not none and not all)."""
    n = 2_000
    srv = serve(free_port(), tmp_path / "log", "--topic", "t:1", "--log-level", "WARNING")
    try:
        with Client(srv.bootstrap) as burst, Client(srv.bootstrap) as other:
            burst.sock.sendall(b"".join(wire.encode_request(68, 1, i, "burst", wire.ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=f"m{i:05d}", member_epoch=0, rebalance_timeout_ms=60_000,
                subscribed_topic_names=["t"], topic_partitions=[])) for i in range(n)))
            seen = set()
            while True:
                (g,) = other.call(69, 0, wire.ConsumerGroupDescribeRequest(group_ids=["g"])).groups
                seen.add(len(g.members))
                if len(g.members) == n:
                    break
            assert any(0 < k < n for k in seen), f"only ever saw {sorted(seen)} members: served before or after it"
            assert all(burst.receive(68, 1, i).error_code == E.NONE for i in range(n))
    finally:
        srv.proc.terminate()
        srv.proc.wait(30)


class _Transport:
    """What KafkaConnection asks of its transport, in memory."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1) if name == "peername" else None


class _Timer:
    def cancel(self) -> None:
        pass


class _Loop:
    """A loop turn is what `turn()` runs: the callbacks queued before it."""

    def __init__(self) -> None:
        self.ready: list = []

    def call_soon(self, fn, *args) -> None:
        self.ready.append((fn, args))

    def time(self) -> float:
        return 0.0

    def call_later(self, delay: float, fn, *args):
        return _Timer()

    def turn(self) -> None:
        ready, self.ready = self.ready, []
        for fn, args in ready:
            fn(*args)


def test_one_turn_of_the_loop_has_one_budget_for_every_connection(monkeypatch) -> None:
    """Ten connections each pipelining commits took 5 ms each a turn (the bystander waited 200 ms): the budget is the
    turn's, so a connection whose frames come after another has spent it handles only its first four."""
    import time as clock

    from kcoord import server as S

    monkeypatch.setattr(S, "TURN_BUDGET_S", 0.005)  # the server's (the fuzz harness sets it to inf on import)
    handled: dict[str, int] = {}

    class Slow(S.KafkaConnection):
        def handle(self, frame: bytes) -> bool:
            clock.sleep(0.0005)  # each request costs half a millisecond
            handled[self.name] = handled.get(self.name, 0) + 1
            return super().handle(frame)

    srv = S.Server(S.ServerConfig(topics=["t:1"]))
    srv.loop = _Loop()
    srv.handlers = srv.coordinator.handlers
    conns = {}
    for name in ("a", "b"):
        conn = Slow(srv)
        conn.name = name
        conn.connection_made(_Transport())
        conns[name] = conn
    frames = [wire.encode_request(8, 8, i, "c", commit(f"g{i:03d}"))[4:] for i in range(40)]
    conns["a"]._handle(list(frames))
    conns["b"]._handle(list(frames))
    assert 4 <= handled["a"] < 40  # a spent the turn's budget (5 ms: about 10 of these) and left the rest
    assert handled["b"] == 4  # b came after it in the same turn: its first four only
    srv.loop.turn()  # the next turn: a new budget, shared again (a resumes first, then b)
    assert handled["a"] > 4 and handled["b"] == 8
    while srv.loop.ready:
        srv.loop.turn()
    assert handled == {"a": 40, "b": 40}
    assert all(len(c.transport.written) >= 1 for c in conns.values())
    srv.store.close()
