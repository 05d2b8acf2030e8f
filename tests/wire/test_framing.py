"""Frame splitting and header versions."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord import wire


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_any_chunking() -> None:
    payloads = [b"", b"a", b"hello" * 100, bytes(range(256)) * 300]
    stream = b"".join(frame(p) for p in payloads)
    rng = random.Random(1)
    for _ in range(50):
        reader = wire.FrameReader(max_frame_size=1 << 20, initial_size=64)
        out, pos = [], 0
        while pos < len(stream):
            n = rng.randint(1, 5000)
            out += reader.feed(stream[pos:pos + n])
            pos += n
        assert out == payloads
        assert reader.pending == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=8), st.lists(st.integers(1, 4096), min_size=1))
def test_buffered_protocol_path_matches_payloads(payloads, chunks) -> None:
    # The asyncio BufferedProtocol path: get_buffer() hands a view, the transport writes into it,
    # buffer_updated(n) returns whole frames.
    stream = b"".join(frame(p) for p in payloads)
    reader = wire.FrameReader(max_frame_size=1 << 16, initial_size=64)
    out, pos, i = [], 0, 0
    while pos < len(stream):
        view = reader.get_buffer(-1)
        n = min(len(view), chunks[i % len(chunks)], len(stream) - pos)
        view[:n] = stream[pos:pos + n]
        del view
        out += reader.buffer_updated(n)
        pos += n
        i += 1
    assert out == payloads


def test_large_frames_are_lent_whole_and_stay_intact_while_the_reader_goes_on() -> None:
    # buffer_updated hands a frame of 1 MiB or more over in the block it arrived in (a read-only memoryview), and the
    # bytes after it in the same read go on into a fresh block; growing toward a large frame keeps what arrived, also
    # when the transport still holds the previous view (then the reader moves to a fresh block).
    rng = random.Random(7)
    big = [bytes([i]) * (1 << 20) + rng.randbytes(rng.randint(0, 2 << 20)) for i in range(1, 4)]
    payloads = [b"small", big[0], b"", big[1], b"x" * 100_000, big[2], b"last"]
    stream = b"".join(frame(p) for p in payloads)
    reader = wire.FrameReader(max_frame_size=8 << 20, initial_size=64)
    out, pos, held = [], 0, None
    while pos < len(stream):
        view = reader.get_buffer(-1)
        n = min(len(view), rng.randint(1, 400_000), len(stream) - pos)
        view[:n] = stream[pos:pos + n]
        held = view if rng.random() < 0.3 else None  # sometimes the transport keeps its view a while
        del view
        out += reader.buffer_updated(n)
        pos += n
    del held
    assert [bytes(f) for f in out] == payloads
    lent = [f for f in out if type(f) is memoryview]
    assert [bytes(f) for f in lent] == big and all(f.readonly for f in lent)
    assert all(type(f) is bytes for f in out if len(f) < 1 << 20)
    assert reader.capacity < 1 << 20  # the reader kept none of the large blocks
    assert reader.feed(frame(big[0])) == [big[0]]  # feed() copies (bytes) whatever the size


@pytest.mark.parametrize("size", [-1, -(2**31), 2**31 - 1, (1 << 20) + 1])
def test_size_prefix_outside_limit_fails_before_allocating(size: int) -> None:
    reader = wire.FrameReader(max_frame_size=1 << 20, initial_size=64)
    with pytest.raises(wire.FrameError, match="frame size"):
        reader.feed(struct.pack(">i", size) + b"xx")
    assert reader.failed
    with pytest.raises(wire.FrameError):
        reader.feed(b"more")  # a failed stream stays failed


def test_frame_at_exact_limit_is_accepted() -> None:
    reader = wire.FrameReader(max_frame_size=1000, initial_size=64)
    assert reader.feed(frame(b"x" * 1000)) == [b"x" * 1000]


def test_partial_frame_buffer_grows_to_the_frame_only() -> None:
    reader = wire.FrameReader(max_frame_size=1 << 20, initial_size=64)
    reader.feed(struct.pack(">i", 100_000) + b"abc")
    view = reader.get_buffer(-1)
    # room for more of this frame, neither the maximum frame size nor (yet) all the frame declares
    assert 4096 <= len(view) < 100_000


def test_a_declared_frame_costs_what_its_sender_sent_not_what_it_declared() -> None:
    # Found at a195b2b: a peer declaring a 100 MB frame and sending 70 KB made the server allocate 100 MB.
    reader = wire.FrameReader(max_frame_size=100 << 20)
    sent = 4
    reader.feed(struct.pack(">i", 100 << 20))
    for chunk in range(70):
        assert reader.feed(bytes(1000)) == []
        sent += 1000
        assert reader.capacity <= max(2 * sent, sent + 65536) + 4096, (chunk, reader.capacity)
    assert reader.capacity < 256 * 1024


def test_a_large_frame_arrives_whole_and_its_buffer_is_given_back() -> None:
    payload = bytes(range(256)) * (12 << 12)  # 12 MiB
    reader = wire.FrameReader(max_frame_size=100 << 20)
    stream = frame(payload) + frame(b"after")
    out = []
    for pos in range(0, len(stream), 1 << 16):
        out += reader.feed(stream[pos:pos + (1 << 16)])
    assert out == [payload, b"after"]
    assert reader.capacity >= len(payload)  # grown to hold it while it arrived
    reader.get_buffer(-1)
    assert reader.capacity <= 1 << 20  # and given back once it was consumed


def test_request_header_versions() -> None:
    # flexible request versions use header v2 (tagged fields), others v1
    assert wire.request_header_version(12, 3) == 1
    assert wire.request_header_version(12, 4) == 2
    assert wire.request_header_version(18, 3) == 2
    assert wire.request_header_version(999, 0) == -1


def test_api_versions_response_header_is_always_v0() -> None:
    # KIP-511: ApiVersions v3+ has a flexible body but its response header stays v0 (no tagged-field byte).
    assert wire.response_header_version(18, 3) == 0
    assert wire.response_header_version(18, 4) == 0
    assert wire.response_header_version(12, 4) == 1
    assert wire.response_header_version(12, 3) == 0
    body = wire.ApiVersionsResponse(error_code=0, api_keys=[])
    data = wire.encode_response(18, 3, 77, body)
    size, corr = struct.unpack(">ii", data[:8])
    assert size == len(data) - 4 and corr == 77
    assert data[8:] == body.encode(3)  # the body follows the correlation id directly


def test_flexible_response_header_has_tag_section() -> None:
    body = wire.HeartbeatResponse(error_code=27)
    data = wire.encode_response(12, 4, 5, body)
    assert data[8:9] == b"\x00" and data[9:] == body.encode(4)
    corr, back = wire.decode_response(12, 4, data[4:])
    assert corr == 5 and back == body


def test_request_roundtrip_through_header() -> None:
    body = wire.JoinGroupRequest(group_id="g", session_timeout_ms=10_000, member_id="", protocol_type="consumer",
                                 group_instance_id="i-1", reason="why")
    for v in range(0, 10):
        body_v = body if v >= 8 else wire.JoinGroupRequest(**{**body.to_dict(), "reason": None})
        if v < 5:
            body_v.group_instance_id = None
        data = wire.encode_request(11, v, 9, "client-1", body_v)
        header, back = wire.decode_request(data[4:])
        assert (header.request_api_key, header.request_api_version, header.correlation_id) == (11, v, 9)
        assert header.client_id == "client-1"
        assert back == body_v
        assert wire.peek_request(data[4:]) == (11, v, 9)


def test_request_header_v2_client_id_is_not_compact() -> None:
    # RequestHeader v2 keeps ClientId as a classic int16-length string (flexibleVersions "none").
    data = wire.encode_request(12, 4, 1, "abc", wire.HeartbeatRequest(group_id="g", member_id="m"))
    assert data[12:17] == b"\x00\x03abc"


def test_null_client_id() -> None:
    data = wire.encode_request(12, 0, 1, None, wire.HeartbeatRequest(group_id="g", member_id="m"))
    header, _ = wire.decode_request(data[4:])
    assert header.client_id is None


def test_encode_request_checks_body_type() -> None:
    with pytest.raises(TypeError):
        wire.encode_request(12, 0, 1, "c", wire.JoinGroupRequest())


def test_bytes_after_a_request_body_are_ignored_as_kafka_ignores_them() -> None:
    # librdkafka 2.x's AdminClient sends Metadata v13 with three bytes after the body; Kafka's broker never checks
    # what remains after a request, so neither does kcoord (a truncated body is still an error).
    req = wire.MetadataRequest(topics=None, allow_auto_topic_creation=False)
    frame = wire.encode_request(3, 13, 7, "rdkafka", req)[4:]
    assert wire.decode_request(frame + b"\x01\x00\x00") == wire.decode_request(frame)
    with pytest.raises(wire.DecodeError):
        wire.decode_request(frame[:-2])
