"""A small blocking Kafka client over kcoord's own codec, for the CLI and for tests that need exact frames
(JoinGroup v8/v9, LeaveGroup v5) the common clients never send."""

from __future__ import annotations

import socket
import struct

from . import wire


class KafkaError(Exception):
    pass


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

    def request(self, body, version: int):
        """Send a request message and return its response (the API key is the message's)."""
        return self.call(type(body).API_KEY, version, body)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise KafkaError("the server closed the connection")
            buf += chunk
        return bytes(buf)
