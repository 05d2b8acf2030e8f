"""Hostile input: random, truncated, flipped and absurd-length bytes into every decoder.

The only acceptable outcomes are a decoded message or kcoord's own DecodeError: never another exception,
a crash, a hang, or an allocation out of proportion to the frame. The four Hypothesis tests below run well over
100,000 cases together: each checks, when it ends, that it ran at least a quarter of that itself, so the count holds
whichever tests run, in whatever order or process.
"""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord import wire
from kcoord.protocol import MESSAGES

from ..support.values import random_message

DECODERS = [(getattr(wire, m.name), m, v) for m in MESSAGES for v in m.versions]
CASES_PER_TEST = 26_000
MIN_CASES_PER_TEST = 25_000  # four tests: at least 100,000 cases together
TALLY = {"cases": 0}

hostile = settings(max_examples=CASES_PER_TEST, deadline=2000, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])

decoder_index = st.integers(min_value=0, max_value=len(DECODERS) - 1)
ABSURD = [
    struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2), struct.pack(">i", -(2**31)), struct.pack(">I", 2**31),
    struct.pack(">h", 0x7FFF), struct.pack(">h", -2), b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff",
    b"\x80\x80\x80\x80\x80", b"\xfe\xff\xff\xff\x07",
]


@pytest.fixture
def counted():
    """Fails the test using it unless it decoded at least MIN_CASES_PER_TEST cases itself."""
    before = TALLY["cases"]
    yield
    ran = TALLY["cases"] - before
    assert ran >= MIN_CASES_PER_TEST, ran


def valid_bytes(i: int, seed: int) -> bytes:
    cls, msg, v = DECODERS[i]
    return random_message(msg, v, random.Random(seed)).encode(v)


def decode_or_error(i: int, data: bytes):
    cls, _, v = DECODERS[i]
    TALLY["cases"] += 1
    try:
        return cls.decode(data, v)
    except wire.DecodeError:
        return None


@hostile
@given(decoder_index, st.binary(max_size=256))
def test_random_bytes_decode_or_decode_error(counted, i: int, data: bytes) -> None:
    msg = decode_or_error(i, data)
    if msg is not None:
        # whatever decodes must encode back to the very bytes (strict decode consumed all of them), except
        # where bytes held a non-canonical form (a bool byte of 2, a tagged field at its default value)
        again = msg.encode(DECODERS[i][2])
        assert DECODERS[i][0].decode(again, DECODERS[i][2]) == msg


@hostile
@given(decoder_index, st.integers(0, 2**32), st.data())
def test_truncated_frames_are_decode_errors(counted, i: int, seed: int, data) -> None:
    good = valid_bytes(i, seed)
    if not good:
        return
    cut = data.draw(st.integers(0, len(good) - 1))
    TALLY["cases"] += 1
    with pytest.raises(wire.DecodeError):
        DECODERS[i][0].decode(good[:cut], DECODERS[i][2])


@hostile
@given(decoder_index, st.integers(0, 2**32), st.data())
def test_flipped_bytes_decode_or_decode_error(counted, i: int, seed: int, data) -> None:
    good = bytearray(valid_bytes(i, seed))
    if not good:
        return
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(good) - 1))
        good[pos] ^= data.draw(st.integers(1, 255))
    decode_or_error(i, bytes(good))


@hostile
@given(decoder_index, st.integers(0, 2**32), st.data())
def test_absurd_lengths_decode_or_decode_error(counted, i: int, seed: int, data) -> None:
    good = valid_bytes(i, seed)
    pos = data.draw(st.integers(0, len(good)))
    bad = data.draw(st.sampled_from(ABSURD))
    overwrite = data.draw(st.booleans())
    frame = good[:pos] + bad + good[pos + (len(bad) if overwrite else 0):]
    decode_or_error(i, frame)


@pytest.mark.parametrize("prefix", ABSURD, ids=[p.hex() for p in ABSURD])
def test_absurd_lengths_allocate_in_proportion_to_the_frame(prefix: bytes) -> None:
    # Each decoder gets a short frame whose every position in turn claims an absurd length; the peak
    # allocation while decoding stays within a small multiple of the frame (a decoded object costs more
    # than its wire bytes, but never in proportion to the length the frame claims).
    rng = random.Random(prefix)
    tracemalloc.start()
    try:
        worst = 0
        for cls, msg, v in DECODERS:
            good = random_message(msg, v, rng, max_items=2).encode(v)
            for pos in range(0, min(len(good), 48)):
                frame = good[:pos] + prefix + good[pos:]
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
                try:
                    cls.decode(frame, v)
                except wire.DecodeError:
                    pass
                peak = tracemalloc.get_traced_memory()[1] - base
                worst = max(worst, peak / (len(frame) + 64))
    finally:
        tracemalloc.stop()
    assert worst < 200, f"peak allocation {worst:.0f}x the frame size"


@hostile
@given(st.binary(min_size=0, max_size=64))
def test_random_request_frames(data: bytes) -> None:
    TALLY["cases"] += 1
    try:
        wire.decode_request(data)
    except (wire.DecodeError, wire.UnsupportedVersionError):
        pass


def test_unknown_api_and_version_carry_the_correlation_id() -> None:
    frame = struct.pack(">hhi", 999, 0, 4242) + b"\x00\x00"
    with pytest.raises(wire.UnsupportedVersionError) as e:
        wire.decode_request(frame)
    assert (e.value.api_key, e.value.api_version, e.value.correlation_id) == (999, 0, 4242)
    frame = struct.pack(">hhi", 12, 99, 7) + b"\x00\x00"
    with pytest.raises(wire.UnsupportedVersionError) as e:
        wire.decode_request(frame)
    assert (e.value.api_key, e.value.api_version, e.value.correlation_id) == (12, 99, 7)


def test_invalid_utf8_is_a_decode_error() -> None:
    data = wire.HeartbeatRequest(group_id="gg", generation_id=1, member_id="m").encode(3)
    broken = data.replace(b"gg", b"\xff\xfe")
    with pytest.raises(wire.DecodeError, match="UTF-8"):
        wire.HeartbeatRequest.decode(broken, 3)


def test_null_where_not_nullable_is_a_decode_error() -> None:
    data = struct.pack(">h", -1) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"
    with pytest.raises(wire.DecodeError):
        wire.HeartbeatRequest.decode(data, 0)


def test_overlong_varint_is_a_decode_error() -> None:
    # a compact string length in six bytes: no valid 32-bit varint is that long
    with pytest.raises(wire.DecodeError):
        wire.HeartbeatRequest.decode(b"\x81\x80\x80\x80\x80\x00" + b"\x00" * 8, 4)
