"""Codec speed: kcoord against kio (native reader) and kafka-python 3, on the coordinator's hot messages.

Each operation is one pytest-benchmark group with one benchmark per codec; all three work on the same
bytes (checked before timing). The session summary (conftest.py) prints the medians and kcoord's speedups
next to the issue's targets: decode >= 3x kio and >= 10x kafka-python, encode >= 10x kafka-python.
Run: `python -m pytest benches/bench_codec.py`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from kcoord import wire
from kcoord.protocol import BY_NAME
from tests.support.peers import KAFKA_PYTHON, KIO

CODECS = ("kcoord", "kio", "kafka-python")


def member_id(i: int) -> str:
    return f"consumer-{i:06d}-3f2c9e1a-77b4-4c1e-9"  # 36 characters, like a client id + uuid suffix


def heartbeat_request() -> wire.HeartbeatRequest:
    return wire.HeartbeatRequest(group_id="payments-consumers", generation_id=42, member_id=member_id(7),
                                 group_instance_id="payments-host-07")


def join_group_request() -> wire.JoinGroupRequest:
    protocols = [wire.JoinGroupRequestProtocol(name=name, metadata=bytes(range(i, i + 60)))
                 for i, name in enumerate(("cooperative-sticky", "range"))]
    return wire.JoinGroupRequest(
        group_id="payments-consumers", session_timeout_ms=45_000, rebalance_timeout_ms=300_000,
        member_id=member_id(7), group_instance_id="payments-host-07", protocol_type="consumer",
        protocols=protocols, reason="rebalance triggered by a new subscription")


def sync_group_request(n: int) -> wire.SyncGroupRequest:
    assignments = [wire.SyncGroupRequestAssignment(member_id=member_id(i), assignment=bytes([i % 251]) * 40)
                   for i in range(n)]
    return wire.SyncGroupRequest(group_id="payments-consumers", generation_id=42, member_id=member_id(0),
                                 group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                 assignments=assignments)


def join_group_response(n: int) -> wire.JoinGroupResponse:
    members = [wire.JoinGroupResponseMember(member_id=member_id(i), group_instance_id=f"payments-host-{i:05d}",
                                            metadata=bytes([i % 251]) * 40)
               for i in range(n)]
    return wire.JoinGroupResponse(throttle_time_ms=0, error_code=0, generation_id=42, protocol_type="consumer",
                                  protocol_name="range", leader=member_id(0), skip_assignment=False,
                                  member_id=member_id(0), members=members)


def metadata_response(topics: int, partitions: int) -> wire.MetadataResponse:
    brokers = [wire.MetadataResponseBroker(node_id=b, host=f"broker-{b}.kafka.internal", port=9092, rack=f"az-{b}")
               for b in range(3)]
    return wire.MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id="kcoord-bench-cluster", controller_id=0,
        topics=[wire.MetadataResponseTopic(
            error_code=0, name=f"events.topic-{t:03d}", topic_id=t.to_bytes(16, "big"), is_internal=False,
            partitions=[wire.MetadataResponsePartition(
                error_code=0, partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2],
                isr_nodes=[0, 1, 2], offline_replicas=[]) for p in range(partitions)],
            topic_authorized_operations=-2147483648) for t in range(topics)])


@dataclass(frozen=True)
class Operation:
    name: str
    kind: str  # "decode" (body bytes to object) or "encode" (prebuilt object to body bytes)
    message: str
    version: int
    build: Callable[[], Any]
    rounds: int | None = None  # fixed rounds for the big cases; None lets pytest-benchmark calibrate

    def param(self) -> Any:
        return pytest.param(self, id=re.sub(r"\W+", "_", self.name), marks=pytest.mark.benchmark(group=self.name))


OPERATIONS = (
    Operation("Heartbeat v4 request decode", "decode", "HeartbeatRequest", 4, heartbeat_request),
    Operation("JoinGroup v9 request decode", "decode", "JoinGroupRequest", 9, join_group_request),
    Operation("SyncGroup v5 request decode, 1k", "decode", "SyncGroupRequest", 5, partial(sync_group_request, 1_000)),
    Operation("SyncGroup v5 request decode, 10k", "decode", "SyncGroupRequest", 5,
              partial(sync_group_request, 10_000), rounds=20),
    Operation("JoinGroup v9 response encode, 1k", "encode", "JoinGroupResponse", 9,
              partial(join_group_response, 1_000)),
    Operation("JoinGroup v9 response encode, 10k", "encode", "JoinGroupResponse", 9,
              partial(join_group_response, 10_000), rounds=20),
    Operation("Metadata v12 response encode, 100x12", "encode", "MetadataResponse", 12,
              partial(metadata_response, 100, 12)),
)


def kio_encoder(entity: Any) -> Callable[[], bytes]:
    write = entity_writer(type(entity))

    def encode() -> bytes:
        out = io.BytesIO()
        write(out, entity)
        return out.getvalue()

    return encode


def prepare(op: Operation, codec: str) -> Callable[[], Any]:
    """The timed call for `codec`, after checking it does the same work as kcoord's."""
    msg, v = BY_NAME[op.message], op.version
    obj = op.build()
    data = obj.encode(v)
    if op.kind == "decode":
        if codec == "kcoord":
            run = partial(getattr(wire, op.message).decode, data, v)
            assert run() == obj
        elif codec == "kio":
            run = partial(entity_reader(KIO.message_class(msg, v)), data, 0)
            assert run() == (KIO.convert(msg, v, obj), len(data))
        else:
            run = partial(KAFKA_PYTHON.message_class(msg).decode, data, version=v)
            assert run() == KAFKA_PYTHON.convert(msg, v, obj)
    else:
        if codec == "kcoord":
            run = partial(obj.encode, v)
        elif codec == "kio":
            run = kio_encoder(KIO.convert(msg, v, obj))
        else:
            run = partial(KAFKA_PYTHON.convert(msg, v, obj).encode, version=v)
        assert bytes(run()) == data
    return run


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("op", [op.param() for op in OPERATIONS])
def test_codec(benchmark: Any, op: Operation, codec: str) -> None:
    run = prepare(op, codec)
    benchmark.extra_info.update(operation=op.name, kind=op.kind, codec=codec)
    if op.rounds is None:
        benchmark(run)
    else:
        benchmark.pedantic(run, rounds=op.rounds, warmup_rounds=1)
