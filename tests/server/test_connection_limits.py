"""What one peer (or one address) can take of the server's connections, descriptors and read buffers: Kafka's
max.connections.per.ip (+ overrides), max.connection.creation.rate and queued.max.request.bytes, the open-file
limit raised at start, refusals logged at a bounded rate, and socket.request.timeout.ms for a trickled request.
Each runs the real `kcoord serve` and drives it over loopback sockets (127.0.0.x: one machine, several
addresses)."""

from __future__ import annotations

import resource
import socket
import struct
import tempfile
import time
from pathlib import Path

import pytest

from ..support.metrics import scrape_until, value
from ..support.servers import free_port, recv_exact, serve


def start(*settings: str, preexec_fn=None):
    args = []
    for s in settings:
        args += ["--set", s]
    return serve(free_port(), Path(tempfile.mkdtemp(prefix="kcoord-test-limits-")) / "server.log", *args,
                 preexec_fn=preexec_fn)


def stop(srv) -> None:
    srv.proc.terminate()
    assert srv.proc.wait(timeout=10) == 0, srv.log_tail()


OPENED: list[socket.socket] = []


@pytest.fixture(autouse=True)
def close_sockets():
    yield
    while OPENED:
        OPENED.pop().close()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    OPENED.append(s)
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def api_versions_frame(correlation_id: int = 1, padding: int = 0) -> bytes:
    """An ApiVersions v0 request, `padding` bytes of trailing junk after its body (ignored, as Kafka ignores it)."""
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test" + b"\0" * padding
    return struct.pack(">i", len(body)) + body


def served(s: socket.socket, correlation_id: int = 7) -> bool:
    """The connection answers an ApiVersions request (False: the server closed it)."""
    try:
        s.sendall(api_versions_frame(correlation_id))
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        corr = struct.unpack(">i", recv_exact(s, size)[:4])[0]
    except (ConnectionError, OSError):
        return False
    assert corr == correlation_id
    return True


def closed_by_server(s: socket.socket, wait: float = 10.0) -> bool:
    s.settimeout(wait)
    try:
        return s.recv(10) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def log_lines(srv, needle: str) -> list[str]:
    return [line for line in srv.log.read_text(errors="replace").splitlines() if needle in line]


def wait_log(srv, needle: str, wait: float = 10.0) -> list[str]:
    """The log lines holding `needle`, once there is one (empty after `wait` seconds)."""
    deadline = time.monotonic() + wait
    while not (lines := log_lines(srv, needle)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return lines


def test_max_connections_per_ip_with_an_override_for_one_address() -> None:
    srv = start("max.connections.per.ip=2", "max.connections.per.ip.overrides=127.0.0.2:4")
    try:
        mine = [connect(srv.port) for _ in range(2)]
        assert all(served(s) for s in mine)
        extra = connect(srv.port)
        assert closed_by_server(extra)  # the third from 127.0.0.1
        other = [connect(srv.port, "127.0.0.2") for _ in range(4)]
        assert all(served(s) for s in other)  # its override allows four
        assert closed_by_server(connect(srv.port, "127.0.0.2"))
        assert served(connect(srv.port, "127.0.0.3"))  # a third address has the default two
        mine.pop().close()  # a closed connection gives its address's place back
        deadline = time.monotonic() + 10
        while not served(again := connect(srv.port)):
            assert time.monotonic() < deadline, "the freed place was never given back"
        assert served(mine[0]) and served(again)
        assert wait_log(srv, "max.connections.per.ip (2) reached for 127.0.0.1")
    finally:
        stop(srv)


@pytest.mark.parametrize("settings, error", [
    (["max.connections.per.ip=0"], "max.connections.per.ip: 0 is allowed only with max.connections.per.ip.overrides"),
    (["max.connections.per.ip.overrides=127.0.0.1"], "'127.0.0.1' is not host:count"),
    (["max.connections.per.ip.overrides=127.0.0.1:x"], "'127.0.0.1:x' is not host:count"),
    (["queued.max.request.bytes=1000"], "queued.max.request.bytes (1000) must be -1 or at least "
                                        "socket.request.max.bytes (104857600)"),
    (["max.connection.creation.rate=-1"], "max.connection.creation.rate: -1 is below the minimum 0"),
    (["socket.request.timeout.ms=0"], "socket.request.timeout.ms: 0 is below the minimum 1"),
])
def test_connection_settings_are_checked_at_start(settings, error) -> None:
    from kcoord.config import ServerConfig

    with pytest.raises(ValueError) as e:
        ServerConfig.from_kafka(dict(s.split("=", 1) for s in settings))
    assert error in str(e.value)


def test_max_connections_per_ip_zero_with_an_override_admits_only_that_address() -> None:
    srv = start("max.connections.per.ip=0", "max.connections.per.ip.overrides=127.0.0.4:1")
    try:
        assert closed_by_server(connect(srv.port))
        assert served(connect(srv.port, "127.0.0.4"))
    finally:
        stop(srv)


def test_max_connection_creation_rate_refuses_a_burst_and_logs_a_bounded_number_of_lines() -> None:
    rate = 5
    srv = start(f"max.connection.creation.rate={rate}")
    try:
        t0 = time.monotonic()
        burst = [connect(srv.port) for _ in range(40)]
        elapsed = time.monotonic() - t0
        alive = [s for s in burst if served(s)]
        # a bucket a second deep: the first `rate` at once, then `rate` a second
        assert rate <= len(alive) <= rate + int(elapsed * rate) + 1, (len(alive), elapsed)
        refusals = log_lines(srv, "max.connection.creation.rate (5/s) exceeded")
        assert 1 <= len(refusals) <= 2, refusals  # 35 refusals in one burst: one line, the rest counted later
        time.sleep(1.2)  # the bucket refills: a new connection is admitted again
        assert served(connect(srv.port))
    finally:
        stop(srv)


def limit_files(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_file_limit_is_raised_to_the_hard_one_so_idle_sockets_do_not_lock_others_out() -> None:
    # A soft limit of 160 (the hard one 4096): without raising it, about 150 idle sockets would take every
    # descriptor and accept() would fail for everyone after them.
    srv = start(preexec_fn=limit_files(160, 4096))
    try:
        idle = [connect(srv.port) for _ in range(300)]
        late = connect(srv.port)
        assert served(late)
        assert served(idle[-1]) and served(idle[0])
        assert not log_lines(srv, "accept() failed")
        for s in idle:
            s.close()
    finally:
        stop(srv)


def test_at_the_open_file_limit_extra_connections_are_refused_quietly_and_the_rest_are_served() -> None:
    # soft = hard = 160: the server serves at most 160 - 64 connections and refuses the rest before accept()
    # runs out of descriptors; 300 refusals make a few log lines, not one each.
    srv = start(preexec_fn=limit_files(160, 160))
    try:
        first = connect(srv.port)
        assert served(first)
        flood = [connect(srv.port) for _ in range(300)]
        alive = sum(served(s) for s in flood)
        assert alive == 160 - 64 - 1, alive
        assert served(first)
        lines = log_lines(srv, "refusing a connection")
        assert 1 <= len(lines) <= 3, len(lines)
        assert "max.connections (96) reached" in lines[0]
        assert not log_lines(srv, "accept() failed")
        for s in flood:
            s.close()
        srv.check_alive()
    finally:
        stop(srv)


def test_a_request_trickled_past_socket_request_timeout_ms_closes_its_connection() -> None:
    srv = start("socket.request.timeout.ms=1000")
    try:
        talker = connect(srv.port)
        trickler = connect(srv.port)
        frame = api_versions_frame(padding=200)
        t0 = time.monotonic()
        closed = False
        for i in range(len(frame) - 1):  # a byte every 50 ms: the whole frame would take 11 s
            try:
                trickler.sendall(frame[i:i + 1])
            except OSError:
                closed = True
                break
            assert served(talker)  # a peer sending whole requests is served throughout
            time.sleep(0.05)
            if closed_by_server(trickler, wait=0.001):
                closed = True
                break
        assert closed, "the trickled request was never cut off"
        assert time.monotonic() - t0 >= 1.0  # never before its deadline
        assert wait_log(srv, "did not arrive whole within socket.request.timeout.ms (1000)")
        assert served(talker)
    finally:
        stop(srv)


def send_as_read(conns: list[socket.socket], frames: list[bytes], upto: int, wait: float = 10.0) -> list[int]:
    """Send each connection its frame up to byte `upto` (negative: from the end), without blocking, as far as the
    server reads within `wait` seconds; the bytes each got out."""
    for s in conns:
        s.setblocking(False)
    ends = [upto if upto >= 0 else len(f) + upto for f in frames]
    sent = [0] * len(conns)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(n < e for n, e in zip(sent, ends)):
        for i, s in enumerate(conns):
            if sent[i] < ends[i]:
                try:
                    sent[i] += s.send(frames[i][sent[i]:ends[i]][:65536])
                except BlockingIOError:
                    pass
        time.sleep(0.002)
    for s in conns:
        s.setblocking(True)
    return sent


def test_unfinished_frames_beyond_queued_max_request_bytes_wait_their_turn_and_are_all_answered() -> None:
    mib = 1 << 20
    srv = start(f"socket.request.max.bytes={mib}", f"queued.max.request.bytes={2 * mib}")
    try:
        frames = [api_versions_frame(correlation_id=10 + i, padding=mib - 20) for i in range(4)]
        conns = [connect(srv.port) for _ in frames]
        # every frame but its last 100 bytes, as far as the server reads: past 2 MiB of unfinished frames the
        # server stops reading the connections that grow, so their sends stall in the socket buffers
        sent = send_as_read(conns, frames, -100)
        assert wait_log(srv, "above queued.max.request.bytes (2097152)")
        assert served(connect(srv.port))  # whole small requests from others are read and answered meanwhile
        # now finish every frame: each is answered, those held back once the others' memory is given back
        for s in conns:
            s.setblocking(True)
            s.settimeout(20)
        for i, s in enumerate(conns):
            s.sendall(frames[i][sent[i]:])
        for i, s in enumerate(conns):
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            assert struct.unpack(">i", recv_exact(s, size)[:4])[0] == 10 + i
        srv.check_alive()
    finally:
        stop(srv)


def test_the_refusal_log_is_rate_limited_per_kind() -> None:
    import logging

    from kcoord.server import RateLimitedLog

    now = [0.0]
    records: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("kcoord.test.ratelimit")
    logger.addHandler(Catch())
    logger.propagate = False
    rl = RateLimitedLog(logger, interval=10.0, clock=lambda: now[0])
    for _ in range(1000):
        rl.warning("refusing %s", "a")
    rl.warning("other %s", "b")
    assert records == ["refusing a", "other b"]
    now[0] = 10.0
    rl.warning("refusing %s", "c")
    assert records[-1] == "refusing c (and 999 more like it in the last 10 s)"
    now[0] = 15.0
    rl.warning("refusing %s", "d")
    assert len(records) == 3


def send_part(s: socket.socket, data: bytes, srv, needle: str | None = None) -> None:
    """Send `data`, then (with `needle`) wait until the server's log shows what reading it did."""
    s.sendall(data)
    if needle is not None:
        assert wait_log(srv, needle), f"never logged {needle!r}"


def answer_to(s: socket.socket, correlation_id: int, wait: float = 10.0) -> bool:
    s.settimeout(wait)
    try:
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        return struct.unpack(">i", recv_exact(s, size)[:4])[0] == correlation_id
    except (TimeoutError, ConnectionError):
        return False


def test_when_only_muted_connections_hold_the_bound_the_one_furthest_along_is_read() -> None:
    # B and C are muted while A is read; A's peer goes without finishing: what B and C hold and may take is more than
    # the bound, and nobody else is being read. The one furthest along is read again, finishes and is answered;
    # then the other.
    mib = 1 << 20
    srv = start(f"socket.request.max.bytes={mib}", f"queued.max.request.bytes={mib}", "socket.request.timeout.ms=60000")
    try:
        a, b, c = connect(srv.port), connect(srv.port), connect(srv.port)
        fb = api_versions_frame(correlation_id=21, padding=mib - 20)
        fc = api_versions_frame(correlation_id=22, padding=mib - 20)
        a.sendall(api_versions_frame(correlation_id=20, padding=mib - 20)[:200_000])
        time.sleep(0.3)
        b.sendall(fb[:600_000])  # B's buffer grows toward its whole frame as it asks for more
        time.sleep(0.3)
        send_part(b, fb[600_000:700_000], srv, "not reading /127.0.0.1")
        c.sendall(fc[:600_000])  # muted at a read: what A, B and C hold and may take is over the bound
        time.sleep(0.3)
        a.close()  # the only connection being read goes, unfinished
        import threading

        rests = [threading.Thread(target=sock.sendall, args=(frame[600_000 if sock is c else 700_000:],))
                 for sock, frame in ((b, fb), (c, fc))]
        for t in rests:  # both peers send the rest of their frames; the kernel holds what is not read yet
            t.start()
        assert answer_to(b, 21, wait=15) and answer_to(c, 22, wait=15), \
            "muted connections holding the bound between them were never read again"
        for t in rests:
            t.join(10)
        srv.check_alive()
    finally:
        stop(srv)


def test_a_muted_connection_whose_peer_goes_gives_its_bytes_back() -> None:
    # A is read and never finishes (its deadline is far off); B is muted, then its peer closes. B's bytes are given
    # back within a second, so C's request is read and answered beside A's instead of being held behind B's bytes
    # until A's deadline.
    mib = 1 << 20
    srv = start(f"socket.request.max.bytes={mib}", f"queued.max.request.bytes={mib}", "socket.request.timeout.ms=60000")
    try:
        a, b = connect(srv.port), connect(srv.port)
        a.sendall(api_versions_frame(correlation_id=30, padding=mib - 20)[:200_000])
        time.sleep(0.3)
        fb = api_versions_frame(correlation_id=31, padding=mib - 20)
        b.sendall(fb[:600_000])
        time.sleep(0.3)
        send_part(b, fb[600_000:700_000], srv, "not reading")
        b.close()
        c = connect(srv.port)
        c.settimeout(10)
        c.sendall(api_versions_frame(correlation_id=32, padding=100_000))  # beside A: within the bound
        assert answer_to(c, 32), "a request stayed held behind the bytes of a peer that had gone"
        srv.check_alive()
    finally:
        stop(srv)


def test_unfinished_frames_never_hold_more_than_the_bound_and_one_frame() -> None:
    # Eight connections each send 90% of a 1 MiB frame at once against a 2 MiB bound. A connection is muted
    # before a read that could take the total past the bound (its buffer may double at that read), so the most
    # ever held is the bound plus one frame: the one connection read when nobody else could finish.
    mib = 1 << 20
    mport = free_port()
    srv = serve(free_port(), Path(tempfile.mkdtemp(prefix="kcoord-test-limits-")) / "server.log",
                "--set", f"socket.request.max.bytes={mib}", "--set", f"queued.max.request.bytes={2 * mib}",
                "--set", "max.connections.per.ip=8", "--metrics-port", str(mport))
    try:
        frames = [api_versions_frame(correlation_id=40 + i, padding=mib - 20) for i in range(8)]
        conns = [connect(srv.port) for _ in frames]
        sent = send_as_read(conns, frames, 900_000)
        m = scrape_until(mport, lambda m: value(m, "kcoord_muted_connections") >= 1, "a muted connection")
        peak = value(m, "kcoord_queued_request_bytes_peak")
        assert peak <= 2 * mib + mib + 4, peak
        assert value(m, "kcoord_queued_request_bytes") <= peak
        for s in conns:
            s.settimeout(20)
        for i, s in enumerate(conns):
            s.sendall(frames[i][sent[i]:])
        for i, s in enumerate(conns):
            assert answer_to(s, 40 + i, wait=20)
        scrape_until(mport, lambda m: value(m, "kcoord_queued_request_bytes") == 0,
                     "the bytes of finished frames given back")
        extra = connect(srv.port)  # a ninth from 127.0.0.1: refused, and counted by its limit
        assert served(extra) is False or closed_by_server(extra)
        scrape_until(mport, lambda m: value(m, "kcoord_connections_refused_total", limit="max.connections.per.ip")
                     == 1, "the refusal counted by its limit")
    finally:
        stop(srv)
