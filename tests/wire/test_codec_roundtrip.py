"""Every version of every message round-trips: random values, nulls, empty arrays, tagged and unknown tags."""

from __future__ import annotations

import random

import pytest

from kcoord import wire
from kcoord.protocol import MESSAGES
from kcoord.protocol.dsl import Message

from ..support.values import random_message

CASES = [(m, v) for m in MESSAGES for v in m.versions]


@pytest.mark.parametrize("msg,version", CASES, ids=[f"{m.name}_v{v}" for m, v in CASES])
def test_roundtrip_every_version(msg: Message, version: int) -> None:
    rng = random.Random(f"{msg.name}/{version}")
    cls = getattr(wire, msg.name)
    for _ in range(40):
        obj = random_message(msg, version, rng)
        data = obj.encode(version)
        back = cls.decode(data, version)
        assert back == obj
        assert back.encode(version) == data  # byte for byte, unknown tagged fields included
        decoded, end = cls.decode_from(b"\x07" + data + b"\x01\x02", version, 1)
        assert decoded == obj and end == 1 + len(data)


def test_nulls_and_empty_arrays_roundtrip() -> None:
    r = wire.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
    back = wire.ConsumerGroupHeartbeatRequest.decode(r.encode(1), 1)
    assert back.subscribed_topic_names is None and back.topic_partitions is None
    r.subscribed_topic_names = []
    r.topic_partitions = []
    back = wire.ConsumerGroupHeartbeatRequest.decode(r.encode(1), 1)
    assert back.subscribed_topic_names == [] and back.topic_partitions == []


def test_unknown_tagged_fields_survive_and_sort() -> None:
    hb = wire.HeartbeatRequest(group_id="g", generation_id=3, member_id="m", unknown_tags=[(7, b"x"), (2, b"")])
    data = hb.encode(4)
    back = wire.HeartbeatRequest.decode(data, 4)
    assert back.unknown_tags == [(2, b""), (7, b"x")]
    assert back.encode(4) == data


def test_absent_non_ignorable_field_is_refused() -> None:
    # group_instance_id exists from JoinGroup v5; Kafka refuses to drop a non-default value silently.
    r = wire.JoinGroupRequest(group_id="g", member_id="", protocol_type="consumer", group_instance_id="i-1")
    with pytest.raises(wire.EncodeError, match="group_instance_id.*version 4"):
        r.encode(4)
    assert wire.JoinGroupRequest.decode(r.encode(5), 5).group_instance_id == "i-1"


def test_absent_ignorable_field_is_dropped() -> None:
    r = wire.JoinGroupRequest(group_id="g", member_id="", protocol_type="consumer", reason="rolling restart")
    assert wire.JoinGroupRequest.decode(r.encode(7), 7).reason is None
    assert wire.JoinGroupRequest.decode(r.encode(8), 8).reason == "rolling restart"


def test_null_where_version_forbids_is_refused() -> None:
    with pytest.raises(wire.EncodeError, match="member_id is null"):
        wire.HeartbeatRequest(group_id="g", member_id=None).encode(3)
    with pytest.raises(wire.EncodeError, match="group_instance_id.*version 2"):
        wire.HeartbeatRequest(group_id="g", member_id="m", group_instance_id="i").encode(2)


def test_wrong_element_type_is_a_type_error() -> None:
    r = wire.JoinGroupRequest(group_id="g", protocols=[{"name": "range"}])
    with pytest.raises(TypeError):
        r.encode(5)


def test_int_attributes_are_range_checked() -> None:
    with pytest.raises(OverflowError):
        wire.HeartbeatRequest(generation_id=2**31)


def test_unsupported_version_is_refused() -> None:
    with pytest.raises(wire.UnsupportedVersionError):
        wire.HeartbeatRequest().encode(5)
    with pytest.raises(wire.UnsupportedVersionError):
        wire.HeartbeatRequest.decode(b"", -1)


def test_encode_into_appends_and_exposes_buffer() -> None:
    buf = wire.WriteBuffer()
    hb = wire.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    hb.encode_into(buf, 3)
    hb.encode_into(buf, 3)
    assert bytes(memoryview(buf)) == hb.encode(3) * 2
    with pytest.raises(wire.EncodeError):
        wire.HeartbeatRequest(member_id=None).encode_into(buf, 3)
    assert len(buf) == 2 * len(hb.encode(3))  # a failed encode leaves the buffer as it was


def test_compiled_codec_is_the_one_loaded() -> None:
    import kcoord._core._wire as impl

    assert impl.__file__.endswith((".so", ".pyd"))
    assert wire.HeartbeatRequest is impl.HeartbeatRequest
