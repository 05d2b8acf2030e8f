"""TLS handshakes held to a budget per turn of the event loop.

A TLS handshake is the costliest thing a connection asks of the loop before its first request: the server's key
exchange, its signature and the TLS layer's own work take a few hundred microseconds of the loop's CPU per
connection. A thousand clients connecting together (a fleet restarting, a storm of logins) answer the server's
flights in bursts, and the loop's TLS layer runs every handshake message that has arrived in the same turn: 477 of
them in one 112 ms turn, measured, and an established group's heartbeat waits behind them (p99 100-140 ms in
benches/bench_security.py). Pacing the accepts does not help (it was tried: the bursts are the clients' later
flights), and a cap on handshakes in flight would let a few silent connections hold every slot.

So each TLS connection's bytes pass through a `MeteredTls` protocol until its handshake is over: while this turn's
handshakes have used less than HANDSHAKE_BUDGET_S of the loop, a read is handed to the loop's own TLS layer at once
(uvloop's compiled SSLProtocol, or asyncio's); past it, the read is kept, the connection is not read, and it waits
its turn in a queue that the next turns serve first, in arrival order. A connection that sends nothing costs
nothing and holds nothing. Once the handshake is done the TLS layer becomes the transport's protocol itself, so an
established connection pays nothing for this. The handshake timeout is the TLS layer's own (HANDSHAKE_TIMEOUT_S).

A handshake that fails on a TLS error (an untrusted or missing client certificate, a protocol or cipher the
listener does not allow, a plaintext client) is reported to `on_failure`, which Kafka counts as a failed
authentication."""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import Any

HANDSHAKE_BUDGET_S = 0.004  # of each loop turn, for all TLS handshakes of a listener together
HANDSHAKE_TIMEOUT_S = 60.0  # asyncio's default for a server-side TLS handshake
_READ_SIZE = 64 * 1024  # a read during a handshake: its messages are a few KiB


def tls_protocol_class(loop: asyncio.AbstractEventLoop) -> type:
    """The loop's own TLS protocol: uvloop's compiled one under uvloop (the transport's fast path knows it), else
    asyncio's (the same state machine, in Python)."""
    if type(loop).__module__.startswith("uvloop"):
        # uvloop's compiled module has SSLProtocol, its stubs do not declare it
        from uvloop.loop import SSLProtocol  # type: ignore[attr-defined, import-not-found]

        return SSLProtocol  # type: ignore[no-any-return]
    from asyncio.sslproto import SSLProtocol as AsyncioSSLProtocol

    return AsyncioSSLProtocol


class HandshakeBudget:
    """One listener's handshake time in the current loop turn, and the connections waiting for a later turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop, budget_s: float | None = None) -> None:
        self.loop = loop
        self.budget_s = HANDSHAKE_BUDGET_S if budget_s is None else budget_s
        self.spent = 0.0
        self.armed = False  # a new turn is scheduled: it resets `spent` and serves the queue
        self.waiting: deque[MeteredTls] = deque()
        self.deferred = 0  # reads set aside for a later turn, in all (tests and benches read it)

    def may_run(self) -> bool:
        if not self.armed:
            self.armed = True
            self.loop.call_soon(self._new_turn)
        return self.spent < self.budget_s and not self.waiting

    def _new_turn(self) -> None:
        self.armed = False
        self.spent = 0.0
        waiting = self.waiting
        while waiting:  # at least one read per turn, however small the budget
            waiting.popleft().run_kept()
            if self.spent >= self.budget_s:
                break
        if waiting and not self.armed:
            self.armed = True
            self.loop.call_soon(self._new_turn)


class MeteredTls(asyncio.BufferedProtocol):
    """The protocol of a TLS connection's transport during its handshake: hands each read to the TLS layer within
    the listener's HandshakeBudget, and then steps aside (the transport's protocol becomes the TLS layer)."""

    _buffer = bytearray(_READ_SIZE)  # shared: a transport's get_buffer and buffer_updated are never interleaved

    def __init__(self, budget: HandshakeBudget, ctx: ssl.SSLContext, app_factory: Callable[[], Any],
                 on_failure: Callable[[str, ssl.SSLError], None] | None = None) -> None:
        self.budget = budget
        self.ctx = ctx
        self.app_factory: Callable[[], Any] | None = app_factory
        self.on_failure: Callable[[str, ssl.SSLError], None] | None = on_failure
        self.transport: Any = None
        self.tls: Any = None  # the loop's SSLProtocol until the handshake is over
        self.kept: bytes | None = None  # a read waiting for a later turn (the transport is not read meanwhile)
        self.done = False
        self.ip = ""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.ip = peer[0] if peer else ""
        loop = self.budget.loop
        waiter = loop.create_future()
        waiter.add_done_callback(self._handshake_over)
        # app_factory is let go (None) only once the connection is over, after this
        self.tls = tls_protocol_class(loop)(loop, self.app_factory(), self.ctx, waiter,  # type: ignore[misc]
                                            server_side=True,
                                            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        self.tls.connection_made(transport)  # starts the handshake's timeout; nothing is computed before a read

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buffer)

    def buffer_updated(self, nbytes: int) -> None:
        if self.tls is None:
            return
        if self.budget.may_run():
            self._run(self._buffer[:nbytes])
        else:
            self.kept = bytes(self._buffer[:nbytes])
            self.budget.deferred += 1
            self.transport.pause_reading()
            self.budget.waiting.append(self)

    def run_kept(self) -> None:
        data, self.kept = self.kept, None
        if data is None or self.tls is None:
            return
        self._run(data)
        if self.tls is not None and not self.transport.is_closing():
            self.transport.resume_reading()
        self._hand_over()

    def _run(self, data: bytes | bytearray) -> None:
        tls = self.tls
        t = perf_counter()
        view = 0
        while view < len(data):  # the TLS layer's buffer may be smaller than the read
            buf = tls.get_buffer(len(data) - view)
            n = min(len(buf), len(data) - view)
            buf[:n] = data[view:view + n]
            view += n
            tls.buffer_updated(n)
            if self.tls is None:  # the handshake failed and the connection is gone
                break
        self.budget.spent += perf_counter() - t

    def _handshake_over(self, waiter: asyncio.Future) -> None:
        exc = None if waiter.cancelled() else waiter.exception()
        if exc is not None:
            if isinstance(exc, ssl.SSLError) and self.on_failure is not None:
                self.on_failure(self.ip, exc)
            return
        self.done = True
        self._hand_over()

    def _hand_over(self) -> None:
        """The handshake is over and no read is kept: the TLS layer becomes the transport's protocol."""
        if self.done and self.kept is None and self.tls is not None and not self.transport.is_closing():
            self.transport.set_protocol(self.tls)
            # uvloop's transport may keep this protocol's bound methods: keep nothing alive through them
            self.tls = self.app_factory = self.on_failure = None

    # ---- the rest is the TLS layer's ------------------------------------------------------------------------

    def eof_received(self) -> bool | None:
        return self.tls.eof_received() if self.tls is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        tls, self.tls, self.kept = self.tls, None, None
        if tls is not None:
            tls.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.tls is not None:
            self.tls.pause_writing()

    def resume_writing(self) -> None:
        if self.tls is not None:
            self.tls.resume_writing()
