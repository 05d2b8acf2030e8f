"""The classic coordinator in-process: heartbeat cost by group size, full rebalances, memory per member.

A heartbeat here is the whole request path without sockets: frame bytes decoded (header and body), the
coordinator's checks and deadline move, the response encoded into a frame. Targets (classic coordinator
issue): a heartbeat under 2 µs; a 10,000-member rebalance under 100 ms of coordinator time (the clock is
advanced by hand, so no initial delay is waited for in real time).
Run: `python -m pytest benches/bench_coordinator.py`.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from kcoord import wire
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.timers import ManualClock

SIZES = (10, 1_000, 10_000)
# A classic group's record holds every member and must fit message.max.bytes (1 MiB by default, as on Kafka: about
# 7,000 of these members); 10,000 need it raised, as a Kafka operator raises the offsets topic's max.message.bytes.
LARGE = GroupConfig(message_max_bytes=16 << 20)


def join_requests(n: int) -> list[wire.JoinGroupRequest]:
    meta = b"\x00\x03" + wire.ConsumerProtocolSubscription(topics=["orders"], generation_id=-1).encode(3)
    return [wire.JoinGroupRequest(
        group_id="bench", session_timeout_ms=45_000, rebalance_timeout_ms=300_000, member_id="",
        group_instance_id=f"instance-{i:05d}", protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=meta)]) for i in range(n)]


def rebalance(reqs: list[wire.JoinGroupRequest], store=None) -> Coordinator:
    """Everyone joins (static, v9), the initial delay passes, the leader syncs, then every follower."""
    clock = ManualClock()
    c = Coordinator(LARGE, clock, store=store)
    joins = [c.handle(r, 9, "bench", "/127.0.0.1") for r in reqs]
    while not joins[0].done:  # the initial delay (extended once, as members kept arriving) runs out
        clock.ms = c.next_deadline()
        c.poll()
    g = c.groups["bench"]
    leader = g.leader_id
    ids = [j.response.member_id for j in joins]
    assignment = [wire.SyncGroupRequestAssignment(member_id=m, assignment=b"\x00\x00\x00\x00\x00\x00\x00\x00")
                  for m in ids]
    c.handle(wire.SyncGroupRequest(group_id="bench", generation_id=1, member_id=leader, protocol_type="consumer",
                                          protocol_name="range", assignments=assignment), 5)
    for m in ids:
        if m != leader:
            c.handle(wire.SyncGroupRequest(group_id="bench", generation_id=1, member_id=m,
                                                  protocol_type="consumer", protocol_name="range"), 5)
    assert g.state.value == "Stable" and g.generation == 1
    return c


@pytest.mark.parametrize("members", SIZES)
@pytest.mark.benchmark(group="classic heartbeat, in-process (decode -> coordinator -> encode)")
def test_heartbeat_in_process(benchmark: Any, members: int) -> None:
    c = rebalance(join_requests(members))
    g = c.groups["bench"]
    m = g.members.get(g.leader_id)
    frame = wire.encode_request(12, 4, 1, "bench", wire.HeartbeatRequest(
        group_id="bench", generation_id=1, member_id=m.member_id, group_instance_id=m.group_instance_id))[4:]
    decode, handle, encode = wire.decode_request, c.handle, wire.encode_response

    def heartbeat() -> bytes:
        header, body = decode(frame)
        response = handle(body, header.request_api_version)
        return encode(12, header.request_api_version, header.correlation_id, response)

    assert wire.decode_response(12, 4, heartbeat()[4:])[1].error_code == 0
    benchmark.extra_info.update(kind="heartbeat", members=members)
    benchmark(heartbeat)


@pytest.mark.parametrize("members", (1_000, 10_000))
@pytest.mark.benchmark(group="classic full rebalance, in-process (all join, leader syncs, followers sync)")
def test_full_rebalance(benchmark: Any, members: int) -> None:
    reqs = join_requests(members)
    benchmark.extra_info.update(kind="rebalance", members=members)
    benchmark.pedantic(rebalance, args=(reqs,), rounds=5, warmup_rounds=1)


@pytest.mark.benchmark(group="classic memory per member")
def test_memory_per_member(benchmark: Any) -> None:
    reqs = join_requests(10_000)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        c = rebalance(reqs)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    per_member = used / 10_000
    benchmark.extra_info.update(kind="memory", members=10_000, bytes_per_member=round(per_member))
    assert c.groups["bench"].state.value == "Stable"
    print(f"\nclassic group memory: {per_member:.0f} bytes per member (10,000 static members, Stable, with "
          "their subscription metadata and assignments)")
    benchmark.pedantic(lambda: None, rounds=1)
