"""A small blocking Kafka client over kcoord's own codec, for the CLI and for tests that need exact frames
(JoinGroup v8/v9, LeaveGroup v5) the common clients never send."""

from __future__ import annotations

import socket
import struct

from . import wire


class KafkaError(Exception):
    pass


def encode_request_at(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body) -> bytes:
    """A request frame whose header carries `api_key` rather than the body's own: kcoord's private APIs (connect
    groups) when a server has moved them (group.connect.api.key.base). The codec encodes at the body's key."""
    frame = wire.encode_request(type(body).API_KEY, api_version, correlation_id, client_id, body)
    if api_key == type(body).API_KEY:
        return frame
    return frame[:4] + api_key.to_bytes(2, "big", signed=True) + frame[6:]


class Client:
    def __init__(self, bootstrap: str, client_id: str = "kcoord-cli", timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not port.isdigit():
            raise KafkaError(f"bootstrap {bootstrap!r} is not HOST:PORT")
        self.sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api_key: int, version: int, body) -> int:
        self.correlation_id += 1
        self.sock.sendall(wire.encode_request(api_key, version, self.correlation_id, self.client_id, body))
        return self.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int):
        (size,) = struct.unpack(">i", self._exact(4))
        corr, body = wire.decode_response(api_key, version, self._exact(size))
        if corr != correlation_id:
            raise KafkaError(f"expected the answer to request {correlation_id}, got {corr}")
        return body

    def call(self, api_key: int, version: int, body):
        return self.receive(api_key, version, self.send(api_key, version, body))

    def request(self, body, version: int, api_key: int | None = None):
        """Send a request message and return its response. The API key is the message's, unless the server serves
        it at another (`api_key`: kcoord's moved private block)."""
        if api_key is None:
            return self.call(type(body).API_KEY, version, body)
        self.correlation_id += 1
        self.sock.sendall(encode_request_at(api_key, version, self.correlation_id, self.client_id, body))
        return self.receive(type(body).API_KEY, version, self.correlation_id)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise KafkaError("the server closed the connection")
            buf += chunk
        return bytes(buf)
