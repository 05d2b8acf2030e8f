"""A small blocking Kafka client over kcoord's own codec, for the CLI and for tests that need exact frames
(JoinGroup v8/v9, LeaveGroup v5) the common clients never send."""

from __future__ import annotations

import socket
import struct

from . import wire


class KafkaError(Exception):
    pass


class Unreachable(KafkaError):
    """No address of a bootstrap list answered; the message names each and why."""


def bootstrap_list(text: str) -> list[str]:
    """The addresses of a bootstrap list as Kafka's bootstrap.servers reads it: HOST:PORT entries separated by
    commas, blanks around them ignored."""
    return [a.strip() for a in text.split(",") if a.strip()]


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
        self.address = bootstrap
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


def connect_first(bootstrap: str, client_id: str = "kcoord-cli", timeout: float = 10.0) -> Client:
    """A client of the first address of `bootstrap` (one HOST:PORT or a comma-separated list) that answers, tried in
    turn as Kafka's clients try bootstrap.servers. With several, an address answers when it takes the connection and
    answers ApiVersions (the request a Kafka client opens each connection with), so a node that is gone (refused)
    or hung (no answer within `timeout`) is passed over. Unreachable, naming each address and why, when none does."""
    addresses = bootstrap_list(bootstrap)
    if not addresses:
        raise Unreachable(f"{bootstrap!r} names no HOST:PORT")
    failed: list[str] = []
    for address in addresses:
        try:
            client = Client(address, client_id, timeout)
        except OSError as e:
            failed.append(f"{address}: {e.strerror or e}")
            continue
        if len(addresses) == 1:
            return client
        try:
            client.request(wire.ApiVersionsRequest(), 0)
        except (OSError, KafkaError) as e:
            client.close()
            failed.append(f"{address}: {getattr(e, 'strerror', None) or e}")
            continue
        return client
    if len(failed) == 1:
        raise Unreachable(f"cannot connect to {failed[0]}")
    raise Unreachable(f"cannot connect to any of {len(failed)} addresses: {'; '.join(failed)}")
