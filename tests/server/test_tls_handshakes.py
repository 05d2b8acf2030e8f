"""kcoord.security.handshakes: TLS handshakes held to a budget per loop turn (MeteredTls, HandshakeBudget), under
both event loops the server runs on, with real TLS clients and a trustme certificate."""

from __future__ import annotations

import asyncio
import ssl

import pytest
import trustme
import uvloop

from kcoord.security.handshakes import HandshakeBudget, MeteredTls, tls_protocol_class

METERS: list[MeteredTls] = []  # what the listener of `serve` made
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="module")
def pki():
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


class Echo(asyncio.Protocol):
    """The application: answers each read with its bytes; records the transport it was given."""

    made: list = []

    def connection_made(self, transport) -> None:
        self.transport = transport
        Echo.made.append(transport)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


def run(loop_name: str, coro_fn):
    loop = LOOPS[loop_name]()
    try:
        return loop.run_until_complete(coro_fn(loop))
    finally:
        loop.run_until_complete(close_all())
        loop.close()


async def close_all() -> None:
    """Every connection the listener made, closed on the server's side before its loop closes."""
    for m in METERS:
        if m.transport is not None:
            m.transport.abort()
    for t in Echo.made:
        t.abort()
    Echo.made = []
    await asyncio.sleep(0.05)


async def serve(loop, pki, budget: HandshakeBudget, failures: list | None = None):
    server_ctx, _ = pki

    def failed(ip, e):
        if failures is not None:
            failures.append((ip, e))

    def meter() -> MeteredTls:
        m = MeteredTls(budget, server_ctx, Echo, on_failure=failed)
        METERS.append(m)
        return m

    METERS.clear()
    return await loop.create_server(meter, "127.0.0.1", 0)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_handshakes_past_the_budget_wait_for_later_turns_and_all_complete(pki, loop_name) -> None:
    """A budget of nothing: one handshake read per turn, the others kept and served in later turns; every
    client finishes its handshake and is answered, and no meter outlives its handshake."""
    _, client_ctx = pki
    clients = 40

    async def main(loop):
        budget = HandshakeBudget(loop, budget_s=0.0)
        server = await serve(loop, pki, budget)
        port = server.sockets[0].getsockname()[1]

        async def one(i: int):
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
            w.write(b"hello %d" % i)
            got = await asyncio.wait_for(r.readexactly(len(b"hello %d" % i)), 10)
            return got, (r, w)

        Echo.made = []
        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(clients))), 30)
        assert [got for got, _ in results] == [b"hello %d" % i for i in range(clients)]
        assert len(Echo.made) == clients
        assert budget.deferred > 0 and not budget.waiting
        # Established: each connection's TLS layer is its transport's protocol, the meter is out of the way
        await asyncio.sleep(0.05)
        assert len(METERS) == clients
        assert all(m.tls is None and m.app_factory is None for m in METERS)
        assert {type(m.transport.get_protocol()) for m in METERS} == {tls_protocol_class(loop)}
        for _, (r, w) in results:  # and the connections still work
            w.write(b"again")
        assert [await asyncio.wait_for(r.readexactly(5), 10) for _, (r, w) in results] == [b"again"] * clients
        for _, (_, w) in results:
            w.close()
        server.close()
        await server.wait_closed()

    run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_failed_handshake_is_reported_and_a_silent_connection_is_not(pki, loop_name) -> None:
    _, client_ctx = pki

    async def main(loop):
        failures: list = []
        budget = HandshakeBudget(loop)
        server = await serve(loop, pki, budget, failures)
        port = server.sockets[0].getsockname()[1]
        # A plaintext client on the TLS port: the server's TLS layer fails the handshake and closes
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"\x00\x00\x00\x10" + b"\x00" * 16)
        assert await asyncio.wait_for(r.read(), 10) == b""
        w.close()
        for _ in range(100):
            if failures:
                break
            await asyncio.sleep(0.02)
        assert [(ip, type(e)) for ip, e in failures] == [("127.0.0.1", ssl.SSLError)]
        assert "WRONG_VERSION_NUMBER" in str(failures[0][1])
        # One that connects and leaves without a word, and one that sends half a ClientHello and leaves: not
        # failed authentications (Kafka: a closed channel)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.close()
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"\x16\x03\x01\x02\x00\x01")
        await asyncio.sleep(0.05)
        w.close()
        await asyncio.sleep(0.2)
        assert len(failures) == 1
        # The listener still serves a good client
        r, w = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
        w.write(b"ok")
        assert await asyncio.wait_for(r.readexactly(2), 10) == b"ok"
        w.close()
        server.close()
        await server.wait_closed()

    run(loop_name, main)
