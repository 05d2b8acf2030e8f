"""Golden bytes: kcoord against kafka-python 3 and kio, every version of every Kafka API kcoord serves (the SASL and
SCRAM credential APIs of issue 31 included).

kcoord's own Connect group APIs (keys 1000+) have no peer and are not here.

For each case a peer supports, random values are encoded by the peer and decoded by kcoord (must equal the
original object), and encoded by kcoord (must equal the peer's bytes, byte for byte). Every case must have
at least one peer, so a version no peer covers fails here instead of silently dropping out.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kcoord import wire
from kcoord.protocol import BY_NAME
from kcoord.protocol.dsl import Message

from ..support.peers import KAFKA_PYTHON, KIO, PEERS, KafkaPython, Kio, Peer

# Group coordinator, offsets and broker APIs (coordinator.py, offsets.py, broker.py). Only one peer for:
# ConsumerGroupHeartbeat, ConsumerGroupDescribe (kio; kafka-python has no class for them), OffsetCommit v0-1,
# OffsetFetch v0, ListOffsets v0, CreateTopics v0-1 (kafka-python; kio has only the versions Kafka 4 kept, KIP-896).
APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "FindCoordinator",
        "ApiVersions", "Metadata", "ConsumerGroupHeartbeat", "ListOffsets", "Fetch", "Produce", "CreateTopics",
        "CreatePartitions", "DeleteTopics", "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete",
        "ConsumerGroupDescribe", "SaslHandshake", "SaslAuthenticate", "DescribeUserScramCredentials",
        "AlterUserScramCredentials")
CASES = [(BY_NAME[api + kind], v) for api in APIS for kind in ("Request", "Response")
         for v in BY_NAME[api + kind].versions]
VALUES_PER_CASE = 25


def cases_for(peer: Peer) -> list[Any]:
    return [pytest.param(msg, v, id=f"{msg.name}_v{v}") for msg, v in CASES if peer.supports(msg, v)]


def check_golden(peer: Peer, msg: Message, version: int) -> None:
    rng = random.Random(f"{peer.name}/{msg.name}/{version}")
    cls = getattr(wire, msg.name)
    for _ in range(VALUES_PER_CASE):
        obj = peer.random_message(msg, version, rng)
        theirs = peer.encode(peer.convert(msg, version, obj), version)
        assert cls.decode(theirs, version) == obj, f"kcoord decodes {peer.name}'s bytes differently"
        assert obj.encode(version) == theirs, f"kcoord's bytes differ from {peer.name}'s"


@pytest.mark.parametrize("msg,version", cases_for(KAFKA_PYTHON))
def test_golden_kafka_python(msg: Message, version: int) -> None:
    check_golden(KAFKA_PYTHON, msg, version)


@pytest.mark.parametrize("msg,version", cases_for(KIO))
def test_golden_kio(msg: Message, version: int) -> None:
    check_golden(KIO, msg, version)


def test_every_case_has_a_peer() -> None:
    uncovered = [f"{msg.name}_v{v}" for msg, v in CASES if not any(p.supports(msg, v) for p in PEERS)]
    assert not uncovered, f"no golden peer for {uncovered}"


def test_golden_check_catches_a_wrong_value() -> None:
    # The check must be able to fail: a peer that writes one field differently is caught.
    class Skewed(KafkaPython):
        def convert(self, msg: Message, version: int, obj: Any) -> Any:
            peer_obj = super().convert(msg, version, obj)
            peer_obj.generation_id ^= 1
            return peer_obj

    with pytest.raises(AssertionError, match="decodes kafka_python's bytes differently"):
        check_golden(Skewed(), BY_NAME["HeartbeatRequest"], 3)


@pytest.mark.parametrize("peer_class,name,version", [
    (KafkaPython, "FetchResponse", 12),  # tagged structs at their default (current_leader, ...)
    (KafkaPython, "FetchRequest", 17),  # the zero uuid in tagged replica_directory_id, the default replica_state
    (Kio, "FetchRequest", 17),  # the zero uuid in tagged replica_directory_id
])
def test_golden_check_catches_a_tagged_default_written(peer_class: type[Peer], name: str, version: int) -> None:
    # Kafka leaves out a tagged field equal to its default. These peers write it unless handed their own "absent"
    # value: fed literally, their bytes differ from kcoord's, so the check sees a tagged field written or not,
    # and the adapters' mapping is still needed.
    class Literal(peer_class):  # type: ignore[misc,valid-type]
        omit_tagged_defaults = False

    peer = Literal()
    with pytest.raises(AssertionError, match=f"kcoord's bytes differ from {peer.name}'s"):
        check_golden(peer, BY_NAME[name], version)
