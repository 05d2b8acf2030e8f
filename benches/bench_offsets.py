"""The commit path against the heartbeat, in-process: what one OffsetCommit costs in CPU next to a consumer group's
regular heartbeat, and OffsetFetch of 1,000 partitions; the compiled offsets path (new) and the general Python path
(old, `Offsets.quick = False`) side by side in the same run.

Each figure is the whole request path without sockets, as the server runs it for a frame: the frame's bytes decoded
(header and body), the API's handler called as the server calls it (`Coordinator.handlers[key]`), the response
encoded into a frame. Heartbeat and commits are
measured in alternating rounds of process CPU time (not wall time: other work on a shared machine inflates wall
time more than CPU time); each figure is the median over the rounds of CPU seconds per request.

- Without a store: a consumer group of 1,000 members over 1,000 partitions, a stable member's
  ConsumerGroupHeartbeat (the quick heartbeat), against a single-partition OffsetCommit in each form (that member's
  epoch, v9; the member of a classic group at its generation, v8; a simple consumer, generation -1, v9).
- With the SQLite store (`SqliteRecords`, store.fsync=always as `kcoord serve --data-dir` runs it): the same, each
  commit staged, and the staged batch written (one transaction, one fsync) every BATCH requests, as the server's
  group commit writes what arrived meanwhile; the writer's CPU is counted (it runs on this thread here). Twice:
  each commit of another of BATCH partitions (a write of BATCH rows), and every commit of the same partition (the
  batch keeps the last: a write of one row).
- OffsetFetch of 1,000 partitions of one member (groups form, v9): listed, and all of the group's (topics null).

Targets (issue 33): a single-partition commit at most 2 heartbeats of CPU without a store and at most 4 with the
SQLite store; OffsetFetch of 1,000 partitions under 100 µs. Reported, not asserted.
Run: `python -m pytest benches/bench_offsets.py -s -p no:cacheprovider`.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pytest

from kcoord import wire
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.consumer import ConsumerGroup
from kcoord.store import GroupStore, SqliteRecords
from kcoord.timers import ManualClock

MEMBERS, PARTITIONS = 1_000, 1_000
BATCH = 100  # requests per store write with the SQLite store
ROUNDS, CALLS = 9, 4_000  # alternating rounds, requests of each kind per round
FETCH_PARTITIONS = 1_000


def consumer_group(store=None) -> tuple[Coordinator, ConsumerGroup]:
    """A Stable consumer group of MEMBERS members (joined by real heartbeats) over one topic of PARTITIONS
    partitions, and a classic group "classic" of one member at generation 1, on `store` if given."""
    c = Coordinator(GroupConfig(), ManualClock(1_000_000), store=store)
    c.topics.create("orders", PARTITIONS)
    for i in range(MEMBERS):
        c.handle(wire.ConsumerGroupHeartbeatRequest(
            group_id="bench", member_id=f"member-{i:05d}", member_epoch=0, rebalance_timeout_ms=300_000,
            subscribed_topic_names=["orders"], topic_partitions=[]), 1)
    g = c.groups["bench"]
    while c.next_deadline() is not None and g.group_epoch != g.assignment_epoch:
        c.clock.ms = c.next_deadline()  # type: ignore[attr-defined]
        c.poll()
    for m in list(g.members.values()):  # every member reconciles to the group's epoch
        for _ in range(4):
            r = c.handle(wire.ConsumerGroupHeartbeatRequest(
                group_id="bench", member_id=m.member_id, member_epoch=m.member_epoch,
                topic_partitions=[wire.ConsumerGroupHeartbeatRequestTopicPartitions(
                    topic_id=c.topics.get("orders").topic_id, partitions=ps)
                    for _, ps in g.space.split(m.assigned)]), 1)
            assert r.error_code == 0
            if m.state == "stable" or m.member_epoch == g.group_epoch and not len(m.pending):
                break
    # a classic group of one static member at generation 1 (joined, the initial delay passed, synced)
    join = c.handle(wire.JoinGroupRequest(
        group_id="classic", session_timeout_ms=45_000, rebalance_timeout_ms=300_000, member_id="",
        group_instance_id="static-0", protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]), 9)
    while not join.done:
        c.clock.ms = c.next_deadline()  # type: ignore[attr-defined]
        c.poll()
    member = join.response.member_id
    sync = c.handle(wire.SyncGroupRequest(
        group_id="classic", generation_id=1, member_id=member, group_instance_id="static-0", protocol_type="consumer",
        protocol_name="range", assignments=[wire.SyncGroupRequestAssignment(member_id=member, assignment=b"")]), 5)
    classic = c.groups["classic"]
    assert sync.done and isinstance(classic, ClassicGroup) and classic.generation == 1
    return c, g


def round_trip(c: Coordinator, key: int, version: int, *bodies: wire.Message) -> Callable[[], bytes]:
    """One request's path in the server (KafkaConnection.handle, less the socket): decode the frame, call the API's
    handler, encode the answer; each call takes the next of `bodies`' frames, round."""
    frames = [wire.encode_request(key, version, 1, "bench", body)[4:] for body in bodies]
    decode, handler, encode = wire.decode_request, c.handlers[key], wire.encode_response
    turn = [0]
    n = len(frames)

    def call() -> bytes:
        i = turn[0]
        turn[0] = i + 1 if i + 1 < n else 0
        header, req = decode(frames[i])
        return encode(key, version, header.correlation_id, handler(req, version, "", ""))

    return call


def stable_heartbeat(c: Coordinator, g: ConsumerGroup) -> Callable[[], bytes]:
    """A Stable member's regular ConsumerGroupHeartbeat (the compiled quick heartbeat)."""
    m = g.members["member-00000"]
    call = round_trip(c, 68, 1, wire.ConsumerGroupHeartbeatRequest(
        group_id="bench", member_id=m.member_id, member_epoch=m.member_epoch))
    r = wire.decode_response(68, 1, call()[4:])[1]
    assert (r.error_code, r.member_epoch, r.assignment) == (0, m.member_epoch, None)
    return call


def commits(c: Coordinator, g: ConsumerGroup, keys: int = 1) -> dict[str, Callable[[], bytes]]:
    """A single-partition OffsetCommit in each form; each call commits the next of `keys` partitions, round (with a
    store, a batch then writes that many rows, not one row overwritten)."""
    m = g.members["member-00000"]
    classic = c.groups["classic"]
    assert isinstance(classic, ClassicGroup)

    def topics(p: int) -> list[wire.OffsetCommitRequestTopic]:
        return [wire.OffsetCommitRequestTopic(name="orders", partitions=[wire.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=1_000_000 + p, committed_leader_epoch=0)])]

    forms = {
        "consumer (member epoch, v9)": (9, [wire.OffsetCommitRequest(
            group_id="bench", generation_id_or_member_epoch=m.member_epoch, member_id=m.member_id,
            topics=topics(p)) for p in range(keys)]),
        "classic member (generation, v8)": (8, [wire.OffsetCommitRequest(
            group_id="classic", generation_id_or_member_epoch=1, member_id=classic.leader_id,
            group_instance_id="static-0", topics=topics(p)) for p in range(keys)]),
        "simple consumer (generation -1, v9)": (9, [wire.OffsetCommitRequest(
            group_id="simple", generation_id_or_member_epoch=-1, member_id="", topics=topics(p))
            for p in range(keys)]),
    }
    out = {}
    for name, (v, bodies) in forms.items():
        call = round_trip(c, 8, v, *bodies)
        for _ in bodies:
            r = wire.decode_response(8, v, call()[4:])[1]
            assert [p.error_code for t in r.topics for p in t.partitions] == [0], (name, r)
        out[name] = call
    return out


def cpu_rounds(cases: dict[str, Callable[[], Any]], calls: int = CALLS, rounds: int = ROUNDS,
               every: Callable[[], None] | None = None, batch: int = BATCH) -> dict[str, float]:
    """CPU seconds per call of each case, the median of `rounds` alternating rounds of `calls` calls; `every` runs
    after each `batch` calls (the store's write), inside the measured time."""
    per: dict[str, list[float]] = {name: [] for name in cases}
    clock = time.process_time
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = clock()
            if every is None:
                for _ in range(calls):
                    fn()
            else:
                for i in range(calls):
                    fn()
                    if i % batch == batch - 1:
                        every()
            per[name].append((clock() - t0) / calls)
    return {name: statistics.median(ts) for name, ts in per.items()}


def quick(c: Coordinator, on: bool, fn: Callable[[], bytes]) -> Callable[[], bytes]:
    offsets = c.offsets

    def call() -> bytes:
        offsets.quick = on
        return fn()

    return call


def report(benchmark: Any, title: str, figures: dict[str, float], heartbeat: float, target: float) -> None:
    lines = [f"\n{title} (CPU per request, median of {ROUNDS} rounds of {CALLS:,}; shared machine)",
             f"  {'consumer heartbeat':<52} {heartbeat * 1e6:7.2f} µs   1.00 heartbeats"]
    for name, t in figures.items():
        ratio = t / heartbeat
        verdict = "" if not name.startswith("new") else (" ok" if ratio <= target else " MISS")
        lines.append(f"  {name:<52} {t * 1e6:7.2f} µs {ratio:6.2f} heartbeats (target <= {target:g}){verdict}")
    print("\n".join(lines))
    benchmark.extra_info.update(heartbeat_us=heartbeat * 1e6, **{k: v * 1e6 for k, v in figures.items()})


@pytest.mark.benchmark(group="offsets: commit vs heartbeat, in-process (decode -> coordinator -> encode)")
def test_commit_against_heartbeat_without_a_store(benchmark: Any) -> None:
    c, g = consumer_group()
    hb = stable_heartbeat(c, g)
    cases: dict[str, Callable[[], Any]] = {"heartbeat": hb}
    for form, call in commits(c, g).items():
        cases[f"new: {form}"] = quick(c, True, call)
        cases[f"old: {form}"] = quick(c, False, call)
    classic = c.groups["classic"]
    assert isinstance(classic, ClassicGroup)
    cases["classic heartbeat"] = classic_hb = round_trip(c, 12, 4, wire.HeartbeatRequest(
        group_id="classic", generation_id=1, member_id=classic.leader_id, group_instance_id="static-0"))
    assert wire.decode_response(12, 4, classic_hb()[4:])[1].error_code == 0
    figures = cpu_rounds(cases)
    heartbeat = figures.pop("heartbeat")
    classic_heartbeat = figures.pop("classic heartbeat")
    report(benchmark, "single-partition OffsetCommit without a store", figures, heartbeat, 2.0)
    form = "classic member (generation, v8)"
    print(f"  beside the classic member's own Heartbeat (v4, {classic_heartbeat * 1e6:.2f} µs): new "
          f"{figures['new: ' + form] / classic_heartbeat:.2f}, old {figures['old: ' + form] / classic_heartbeat:.2f} "
          "heartbeats")
    benchmark.extra_info.update(classic_heartbeat_us=classic_heartbeat * 1e6)
    benchmark(cases["new: consumer (member epoch, v9)"])


def sqlite_row_cpu(data: str, rows: int, batches: int = 400) -> float:
    """CPU seconds per row of SqliteRecords.put writing `rows` offset records that are already stored (what a round
    of commits to distinct partitions writes), in a store of its own beside `data`."""
    import os

    from kcoord import records as R
    store = SqliteRecords(os.path.join(data, "floor"), fsync="always")
    keys = [R.offset_key(f"group-{i}", "orders", i) for i in range(rows)]
    store.put({k: R.offset_value(0, -1, "", 0) for k in keys})
    t = time.process_time()
    for o in range(1, batches + 1):
        store.put({k: R.offset_value(o, -1, "", 0) for k in keys})
    spent = time.process_time() - t
    store.close()
    return spent / (batches * rows)


@pytest.mark.parametrize("keys", (BATCH, 1))
@pytest.mark.benchmark(group="offsets: commit vs heartbeat, in-process, SQLite store")
def test_commit_against_heartbeat_with_the_sqlite_store(benchmark: Any, keys: int) -> None:
    data = tempfile.mkdtemp(prefix="kcoord-bench-offsets-")
    try:
        store = GroupStore(SqliteRecords(data, fsync="always"))
        c, g = consumer_group(store)
        store.commit()
        c.autocommit = False  # the store is written once per BATCH requests, as the server's group commit does
        hb = stable_heartbeat(c, g)
        cases: dict[str, Callable[[], Any]] = {"heartbeat": hb}
        for form, call in commits(c, g, keys).items():
            cases[f"new: {form}"] = quick(c, True, call)
            cases[f"old: {form}"] = quick(c, False, call)
        store.commit()
        figures = cpu_rounds(cases, every=store.commit)
        heartbeat = figures.pop("heartbeat")
        rows = f"each of another partition: {BATCH} rows" if keys > 1 else "all of one partition: one row"
        report(benchmark, f"single-partition OffsetCommit, SQLite store (fsync=always; one write per {BATCH} requests, "
               f"{rows})",
               figures, heartbeat, 4.0)
        if keys > 1:
            floor = sqlite_row_cpu(data, keys)
            benchmark.extra_info["sqlite_put_us_per_row"] = round(floor * 1e6, 2)
            print(f"  the store's own write alone (SqliteRecords.put of {keys} rows already stored, fsync=always): "
                  f"{floor * 1e6:.2f} µs per row = {floor / heartbeat:.2f} heartbeats, below which no commit that "
                  f"writes a row of its own can go")
        call = cases["new: consumer (member epoch, v9)"]

        def batch() -> None:
            for _ in range(BATCH):
                call()
            store.commit()

        benchmark(batch)
        store.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.benchmark(group="offsets: OffsetFetch of 1,000 partitions, in-process")
def test_fetch_of_a_thousand_partitions(benchmark: Any) -> None:
    c = Coordinator(GroupConfig(), ManualClock(1_000_000))
    c.topics.create("orders", FETCH_PARTITIONS)
    c.handle(wire.OffsetCommitRequest(group_id="simple", topics=[wire.OffsetCommitRequestTopic(
        name="orders", partitions=[wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=p,
                                                                     committed_metadata="m")
                                   for p in range(FETCH_PARTITIONS)])]), 9)
    listed = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="simple", topics=[
        wire.OffsetFetchRequestTopics(name="orders", partition_indexes=list(range(FETCH_PARTITIONS)))])])
    every = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="simple", topics=None)])
    handle = c.handlers[9]
    cases: dict[str, Callable[[], Any]] = {}
    for name, req in (("listed", listed), ("all (topics null)", every)):
        full = round_trip(c, 9, 9, req)
        r = wire.decode_response(9, 9, full()[4:])[1]
        assert len(r.groups[0].topics[0].partitions) == FETCH_PARTITIONS
        for side, on in (("new", True), ("old", False)):
            cases[f"{side}: {name}, handler only"] = quick(c, on, lambda req=req: handle(req, 9, "", ""))
            cases[f"{side}: {name}, decode -> handle -> encode"] = quick(c, on, full)
    figures = cpu_rounds(cases, calls=200)
    lines = [f"\nOffsetFetch of {FETCH_PARTITIONS:,} partitions (CPU per request, median of {ROUNDS} rounds; shared "
             "machine; target < 100 µs)"]
    for name, t in figures.items():
        verdict = "" if not name.startswith("new") else (" ok" if t < 100e-6 else " MISS")
        lines.append(f"  {name:<52} {t * 1e6:8.1f} µs{verdict}")
    print("\n".join(lines))
    benchmark.extra_info.update({k: v * 1e6 for k, v in figures.items()})
    benchmark(cases["new: listed, handler only"])
