"""The asyncio server: framing, per-connection in-order responses, API dispatch.

At this stage it speaks ApiVersions only (advertising exactly that); the group APIs are added as the
coordinator lands. Framing errors close the connection; an unknown API or version closes it too, as Kafka
brokers do, except ApiVersions, which answers a too-new version in v0 format with UNSUPPORTED_VERSION (35).
"""

from __future__ import annotations

import asyncio
import logging
import signal

from . import wire
from .errors import UNSUPPORTED_VERSION

log = logging.getLogger("kcoord.server")

API_VERSIONS_KEY = 18


class Handlers:
    """Maps API keys to handlers; what is registered here is exactly what ApiVersions advertises."""

    def __init__(self) -> None:
        self.by_key: dict[int, object] = {API_VERSIONS_KEY: self.api_versions}

    def advertised(self) -> list[wire.ApiVersionsResponseApiVersion]:
        return [
            wire.ApiVersionsResponseApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(wire.API_VERSIONS.items())
            if k in self.by_key
        ]

    def api_versions(self, header, body) -> wire.ApiVersionsResponse:
        return wire.ApiVersionsResponse(error_code=0, api_keys=self.advertised(), throttle_time_ms=0)

    def unsupported_api_versions(self) -> wire.ApiVersionsResponse:
        return wire.ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=self.advertised())


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: "Server") -> None:
        self.server = server
        self.reader = wire.FrameReader(server.max_frame_size)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.server.connections.discard(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self.reader.get_buffer(sizehint)
        except wire.FrameError:
            self.transport.close()
            return memoryview(bytearray(4096))  # the transport is closing; whatever lands here is dropped

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.buffer_updated(nbytes)
        except wire.FrameError as e:
            log.info("closing %s: %s", self.peer(), e)
            self.transport.close()
            return
        for frame in frames:
            if not self.handle(frame):
                self.transport.close()
                return

    def peer(self) -> str:
        info = self.transport.get_extra_info("peername") if self.transport else None
        return f"{info[0]}:{info[1]}" if info else "?"

    def handle(self, frame: bytes) -> bool:
        """Answer one request; False closes the connection."""
        handlers = self.server.handlers
        try:
            header, body = wire.decode_request(frame)
        except wire.UnsupportedVersionError as e:
            if e.api_key == API_VERSIONS_KEY:
                # Clients probe with their newest ApiVersions; answer in v0 so any client can read it.
                self.send(API_VERSIONS_KEY, 0, e.correlation_id, handlers.unsupported_api_versions())
                return True
            log.info("closing %s: %s", self.peer(), e)
            return False
        except wire.DecodeError as e:
            log.info("closing %s: malformed request: %s", self.peer(), e)
            return False
        handler = handlers.by_key.get(header.request_api_key)
        if handler is None:
            log.info("closing %s: API %d is not served", self.peer(), header.request_api_key)
            return False
        response = handler(header, body)
        self.send(header.request_api_key, header.request_api_version, header.correlation_id, response)
        return True

    def send(self, api_key: int, version: int, correlation_id: int, body) -> None:
        self.transport.write(wire.encode_response(api_key, version, correlation_id, body))


class Server:
    def __init__(self, host: str = "127.0.0.1", port: int = 9092, *,
                 max_frame_size: int = wire.DEFAULT_MAX_FRAME_SIZE) -> None:
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.handlers = Handlers()
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: KafkaConnection(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.transport.close()
            await self._server.wait_closed()

    async def serve_forever(self) -> None:
        await self.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"kcoord listening on {self.host}:{self.port}", flush=True)
        await stop.wait()
        await self.close()
