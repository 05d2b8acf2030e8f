"""`kcoord serve` as a subprocess on a free loopback port, driven over real sockets with kcoord's own codec."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from kcoord import wire


# Exactly what is implemented: the broker surface consumers need, and the classic group and offset APIs.
# Not advertised: ConsumerGroupHeartbeat/Describe (KIP-848 comes later), GetTelemetrySubscriptions.
SERVED = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 42, 47}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kcoord.cli", "serve", "--port", str(port), "--set", "socket.request.max.bytes=1048576"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {proc.stdout.read().decode()}")
            time.sleep(0.05)
    yield port
    proc.terminate()
    rc = proc.wait(timeout=10)
    proc.stdout.close()
    assert rc == 0, "server did not shut down cleanly on SIGTERM"


def recv_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def api_versions(sock: socket.socket, version: int, correlation_id: int = 1) -> wire.ApiVersionsResponse:
    body = wire.ApiVersionsRequest(client_software_name="kcoord-test", client_software_version="1")
    if version < 3:
        body = wire.ApiVersionsRequest()
    sock.sendall(wire.encode_request(18, version, correlation_id, "test", body))
    corr, resp = wire.decode_response(18, version, recv_frame(sock))
    assert corr == correlation_id
    return resp


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_every_version(server, version) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as s:
        resp = api_versions(s, version)
    assert resp.error_code == 0
    assert {k.api_key for k in resp.api_keys} == SERVED


def test_too_new_api_versions_answers_v0_with_unsupported_version(server) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 99, 5, -1))
        corr, resp = wire.decode_response(18, 0, recv_frame(s))
    assert corr == 5 and resp.error_code == 35
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


@pytest.mark.parametrize("payload", [
    b"\xde\xad\xbe\xef" * 8,                       # garbage size prefix (negative)
    struct.pack(">i", 2**31 - 1) + b"x",           # 2 GiB claimed
    struct.pack(">i", 3) + b"\x00\x12\x00",         # a frame too short for a request header
    struct.pack(">ihhih", 10, 777, 0, 1, -1),      # unknown API key
    struct.pack(">ihhih", 10, 12, 42, 1, -1),      # unsupported Heartbeat version
], ids=["garbage", "2GiB-prefix", "truncated-header", "unknown-api", "unsupported-version"])
def test_bad_input_closes_only_that_connection(server, payload) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as good:
        with socket.create_connection(("127.0.0.1", server), timeout=5) as bad:
            bad.sendall(payload)
            assert bad.recv(100) == b""  # closed by the server
        assert api_versions(good, 3).error_code == 0  # the other client is still served
