"""KIP-848 online migration of a 10,000-member group, in-process (the migration issue's bench): a live classic group
over 20,000 partitions (2 each, assigned by its leader) is upgraded by one consumer-protocol member's join, then
downgraded when that member leaves. Each conversion writes its whole record set (tombstones of one type, records
of the other) to an in-memory store, as it would to the data directory.

Printed: the conversion alone (`migration.upgrade` / `migration.downgrade` into a new group) and the whole request
that causes it (the join's ConsumerGroupHeartbeat, which also computes the first target over 10,001 members; the
leave's, which also starts the classic group's rebalance).
Run: `python -m pytest benches/bench_migration.py -s`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest

from kcoord import wire
from kcoord.assignors import encode_assignment
from kcoord.coordinator import Coordinator
from kcoord.groups import migration
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.consumer import ConsumerGroup
from kcoord.store import GroupStore, MemoryRecords
from kcoord.timers import ManualClock

from .bench_coordinator import LARGE, join_requests

MEMBERS, PARTITIONS = 10_000, 20_000


def classic_group(members: int = MEMBERS) -> tuple[Coordinator, ManualClock]:
    clock = ManualClock(1_000_000)
    c = Coordinator(LARGE, clock, store=GroupStore(MemoryRecords(), clock.wall_ms))
    c.topics.create("orders", PARTITIONS)
    joins = [c.handle(r, 9, "bench", "/127.0.0.1") for r in join_requests(members)]
    while not joins[0].done:
        clock.ms = c.next_deadline()
        c.poll()
    g = c.groups["bench"]
    ids = [j.response.member_id for j in joins]
    per = PARTITIONS // members
    assignments = [wire.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(
        {"orders": list(range(i * per, (i + 1) * per))})) for i, m in enumerate(ids)]
    c.handle(wire.SyncGroupRequest(group_id="bench", generation_id=1, member_id=g.leader_id,
                                          protocol_type="consumer", protocol_name="range", assignments=assignments), 5)
    for m in ids:
        if m != g.leader_id:
            c.handle(wire.SyncGroupRequest(group_id="bench", generation_id=1, member_id=m,
                                                  protocol_type="consumer", protocol_name="range"), 5)
    assert g.state.value == "Stable"
    return c, clock


def join(c: Coordinator):
    return c.handle(wire.ConsumerGroupHeartbeatRequest(
        group_id="bench", member_id="newcomer", member_epoch=0, rebalance_timeout_ms=300_000,
        subscribed_topic_names=["orders"], topic_partitions=[]), 1, "bench", "/127.0.0.1")


@pytest.mark.benchmark(group="online migration of a 10,000-member group, in-process")
def test_upgrade_and_downgrade_of_a_10000_member_group(benchmark: Any) -> None:
    alone_up, alone_down, whole_up, whole_down = [], [], [], []
    for _ in range(3):
        c, _clock = classic_group()
        old = c.groups["bench"]
        assert migration.validate_upgrade(old, c.config) is None
        new = ConsumerGroup("bench", c.group_context())
        t0 = time.perf_counter()
        migration.upgrade(old, new)
        alone_up.append(time.perf_counter() - t0)
        assert len(new.members) == MEMBERS and new.group_epoch == old.generation
        back = ClassicGroup("bench", c.group_context())
        t0 = time.perf_counter()
        migration.downgrade(new, back, False)
        alone_down.append(time.perf_counter() - t0)
        assert len(back.members) == MEMBERS and back.state.value == "Stable"

        c, _clock = classic_group()
        t0 = time.perf_counter()
        r = join(c)
        whole_up.append(time.perf_counter() - t0)
        assert r.error_code == 0 and isinstance(c.groups["bench"], ConsumerGroup)
        t0 = time.perf_counter()
        r = c.handle(wire.ConsumerGroupHeartbeatRequest(group_id="bench", member_id="newcomer",
                                                               member_epoch=-1), 1)
        whole_down.append(time.perf_counter() - t0)
        assert r.error_code == 0 and isinstance(c.groups["bench"], ClassicGroup)
    ms = {k: statistics.median(v) * 1e3 for k, v in (("upgrade", alone_up), ("downgrade", alone_down),
                                                     ("join", whole_up), ("leave", whole_down))}
    benchmark.extra_info.update(members=MEMBERS, partitions=PARTITIONS, **{f"{k}_ms": v for k, v in ms.items()})
    benchmark.pedantic(lambda: None, rounds=1)
    print(f"\nonline migration, {MEMBERS:,} members over {PARTITIONS:,} partitions (median of 3): upgrade "
          f"{ms['upgrade']:.0f} ms alone, {ms['join']:.0f} ms for the whole join; downgrade "
          f"{ms['downgrade']:.0f} ms alone, {ms['leave']:.0f} ms for the whole leave")
