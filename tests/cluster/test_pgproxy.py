"""The fault harness's PostgreSQL proxy (tests/support/pgproxy.py) against the suite's real PostgreSQL: psycopg
works through it; stall holds every byte (a query does not complete, a result stops mid-stream) and heal delivers
them all, in order; drop closes every connection and refuses new ones until heal; reset ends every connection with
an RST and serves the next at once; either side's end ends its twin; close() leaves no thread and no socket."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import threading
import time

import pytest

from ..support.pgproxy import PgProxy, address
from ..support.waits import wait_for

psycopg = pytest.importorskip("psycopg")

TIMEOUT = 10  # libpq's connect_timeout: bounds a connect that would otherwise hang


@pytest.fixture
def proxy(pg_dsn):
    p = PgProxy(address(pg_dsn)).start()
    try:
        yield p
    finally:
        p.close()


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=TIMEOUT)


class Running:
    """`work()` in a thread of its own: its result or its exception once it ends."""

    def __init__(self, work) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()

    def _run(self, work) -> None:
        try:
            self.result = work()
        except BaseException as e:
            self.error = e

    def join(self, timeout: float = 30.0) -> object:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "still running"
        if self.error is not None:
            raise self.error
        return self.result


def backend_alive(pg_dsn: str, pid: int) -> bool:
    with connect(pg_dsn) as direct:
        return direct.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 1


def raw_session(port: int, pg_dsn: str) -> tuple[socket.socket, int]:
    """A session opened by hand on a plain socket (protocol 3.0, trust authentication): the socket, ready for a
    query, and the backend's pid."""
    user, dbname = pg_dsn.split("//", 1)[1].split("@", 1)[0], pg_dsn.rsplit("/", 1)[1]
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    params = b"user\0" + user.encode() + b"\0database\0" + dbname.encode() + b"\0\0"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    pid = None
    data = b""
    while True:
        while len(data) < 5 or len(data) < 1 + struct.unpack("!i", data[1:5])[0]:
            more = s.recv(65536)
            assert more, f"PostgreSQL closed the session during its start: {data!r}"
            data += more
        kind, size = data[:1], struct.unpack("!i", data[1:5])[0]
        body, data = data[5:1 + size], data[1 + size:]
        assert kind != b"E", body
        if kind == b"K":
            pid = struct.unpack("!i", body[:4])[0]
        elif kind == b"Z":
            assert pid is not None
            return s, pid


def test_the_dsn_names_the_proxy_and_psycopg_works_through_it(proxy, pg_dsn) -> None:
    host, port = address(pg_dsn)
    assert (host, port) == proxy.target and port != proxy.port
    through = proxy.dsn(pg_dsn)
    assert through == pg_dsn.replace(f"{host}:{port}", f"127.0.0.1:{proxy.port}")
    assert proxy.dsn("postgresql://u:p%40w@db.example:5432/x?sslmode=disable") == \
        f"postgresql://u:p%40w@127.0.0.1:{proxy.port}/x?sslmode=disable"
    with pytest.raises(ValueError):
        proxy.dsn("host=127.0.0.1 port=5432 dbname=x")
    assert proxy.mode == "pass" and proxy.connections == 0
    with connect(through) as conn:
        assert conn.execute("SELECT current_database(), inet_server_port()").fetchone() == \
            (pg_dsn.rsplit("/", 1)[1], port)
        conn.execute("CREATE TABLE t (v int)")
        conn.execute("INSERT INTO t SELECT generate_series(1, 1000)")
        assert conn.execute("SELECT sum(v) FROM t").fetchone() == (500500,)
        assert proxy.connections == 1
    wait_for(lambda: proxy.connections == 0, "the proxy to close the connection its client closed", 10)


def test_stall_holds_a_query_and_heal_completes_it(proxy, pg_dsn) -> None:
    with connect(proxy.dsn(pg_dsn)) as conn:
        big = os.urandom(2_000_000).hex()  # 4 MB each way: more than the kernel's buffers hold
        proxy.stall()
        assert proxy.mode == "stall"
        query = Running(lambda: conn.execute("SELECT md5(%s), %s::text", (big, big)).fetchone())
        time.sleep(1.0)
        assert query.thread.is_alive(), "a query completed through a stalled proxy"
        # new connections are accepted and held too
        late = Running(lambda: connect(proxy.dsn(pg_dsn)).close())
        wait_for(lambda: proxy.connections == 2, "the proxy to accept a connection while stalled", 10)
        time.sleep(0.5)
        assert late.thread.is_alive(), "a connection was served through a stalled proxy"
        proxy.heal()
        assert proxy.mode == "pass"
        assert query.join() == (hashlib.md5(big.encode()).hexdigest(), big)
        late.join()
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_stall_stops_a_result_mid_stream_and_heal_delivers_all_of_it_in_order(proxy, pg_dsn) -> None:
    rows = 200_000
    expected = b"".join(b"%d\t%s\n" % (i, hashlib.md5(str(i).encode()).hexdigest().encode())
                        for i in range(1, rows + 1))
    received = bytearray()
    first = threading.Event()

    def copy_out() -> bytes:
        with connect(proxy.dsn(pg_dsn)) as conn, conn.cursor() as cur, \
                cur.copy(f"COPY (SELECT i, md5(i::text) FROM generate_series(1, {rows}) i) TO STDOUT") as copy:
            for chunk in copy:
                received.extend(chunk)
                first.set()
        return bytes(received)

    with connect(pg_dsn) as direct:  # the server sends it all at once: far more than the buffers between hold
        assert direct.execute(f"SELECT sum(length(i::text) + 34) FROM generate_series(1, {rows}) i").fetchone() \
            == (len(expected),)
    proxy.stall()
    copy = Running(copy_out)
    time.sleep(0.3)
    assert copy.thread.is_alive() and not received  # the query itself is held
    proxy.heal()
    assert first.wait(30)
    proxy.stall()  # mid-stream
    time.sleep(0.5)  # what had passed the proxy reaches the client
    held = len(received)
    time.sleep(0.5)
    assert len(received) == held < len(expected), "bytes went through a stalled proxy"
    for _ in range(5):  # and a few more stalls and heals, wherever they fall
        proxy.heal()
        time.sleep(0.02)
        proxy.stall()
        time.sleep(0.02)
    proxy.heal()
    assert copy.join() == expected


def test_drop_closes_the_connection_and_refuses_new_ones_until_heal(proxy, pg_dsn) -> None:
    conn = connect(proxy.dsn(pg_dsn))
    try:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        proxy.drop()
        assert proxy.mode == "drop" and proxy.connections == 0
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    wait_for(lambda: not backend_alive(pg_dsn, pid), "PostgreSQL's side of the dropped connection to end", 10)
    for _ in range(2):
        with pytest.raises(psycopg.OperationalError):
            connect(proxy.dsn(pg_dsn))
    assert proxy.connections == 0
    with connect(pg_dsn) as direct:  # the server itself is fine
        assert direct.execute("SELECT 1").fetchone() == (1,)
    proxy.heal()
    with connect(proxy.dsn(pg_dsn)) as conn:
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_reset_fails_the_connection_and_the_next_connects_at_once(proxy, pg_dsn) -> None:
    conn = connect(proxy.dsn(pg_dsn))
    try:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        proxy.reset()
        assert proxy.mode == "pass" and proxy.connections == 0
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    with connect(proxy.dsn(pg_dsn)) as again:
        assert again.execute("SELECT 3").fetchone() == (3,)
    wait_for(lambda: not backend_alive(pg_dsn, pid), "PostgreSQL's side of the reset connection to end", 10)


def test_reset_sends_an_rst_where_drop_sends_a_fin(proxy) -> None:
    """At the socket: after reset() the client's read fails with ECONNRESET; after drop() it reads EOF."""
    def raw() -> socket.socket:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT)
        wait_for(lambda: proxy.connections == 1, "the proxy to accept the connection", 10)
        return s

    with raw() as s:
        proxy.reset()
        with pytest.raises(ConnectionResetError):
            s.recv(1)
    with raw() as s:
        proxy.drop()
        assert s.recv(1) == b""
    proxy.heal()


def test_either_side_ending_ends_its_twin(proxy, pg_dsn) -> None:
    conn = connect(proxy.dsn(pg_dsn))
    try:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with connect(pg_dsn) as direct:  # PostgreSQL ends the session: the client's side ends
            assert direct.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        wait_for(lambda: proxy.connections == 0, "the proxy to close the client's side of a server-ended session", 10)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    # the client goes away without a word (no Terminate message): the server's side ends
    s, pid = raw_session(proxy.port, pg_dsn)
    s.close()
    wait_for(lambda: proxy.connections == 0, "the proxy to close the server's side of a client-ended session", 10)
    wait_for(lambda: not backend_alive(pg_dsn, pid), "PostgreSQL's side of the client-ended session to end", 10)


def test_close_leaves_no_thread_and_no_socket(pg_dsn) -> None:
    fds = set(os.listdir("/proc/self/fd"))
    threads = set(threading.enumerate())
    proxy = PgProxy(address(pg_dsn)).start()
    assert proxy.connections == 0
    conn = connect(proxy.dsn(pg_dsn))
    held, _ = raw_session(proxy.port, pg_dsn)
    proxy.stall()
    stalled = socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT)
    try:
        wait_for(lambda: proxy.connections == 3, "three connections through the proxy", 10)
        assert len(set(threading.enumerate()) - threads) == 1
        proxy.close()
        proxy.close()  # idempotent
        assert set(threading.enumerate()) == threads
        assert held.recv(1) == b"" and stalled.recv(1) == b""
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        with pytest.raises(RuntimeError):
            proxy.stall()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT).close()
    finally:
        conn.close()
        held.close()
        stalled.close()
    assert set(os.listdir("/proc/self/fd")) == fds
    PgProxy(address(pg_dsn)).close()  # never started: nothing to stop


def test_controls_before_start_set_the_mode(pg_dsn) -> None:
    proxy = PgProxy(address(pg_dsn))
    try:
        proxy.drop()
        proxy.start()
        assert proxy.mode == "drop"
        with pytest.raises(psycopg.OperationalError):
            connect(proxy.dsn(pg_dsn))
        proxy.heal()
        with connect(proxy.dsn(pg_dsn)) as conn:
            assert conn.execute("SELECT 4").fetchone() == (4,)
    finally:
        proxy.close()
