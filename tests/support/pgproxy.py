"""A TCP proxy in front of the suite's PostgreSQL, one per cluster node, so the fault harness can cut one node from
PostgreSQL while its clients still reach it: stall (a blackholed network: nothing forwarded, nothing lost), drop
(every connection closed, new ones closed at once), reset (every connection reset with an RST) and heal.

One daemon thread runs a selector loop over every socket. The control calls (stall, drop, reset, heal, close) are
run by that thread between two turns of its loop and return once done: when stall() returns, no further byte is
forwarded; when drop() or reset() returns, every connection of the moment is closed on both sides.

Each proxied connection is a pair (the client's socket, the upstream socket). Bytes are read from one side only
when nothing read from it is still waiting to be written to the other, so a slow reader slows its writer, as on a
network, and the proxy holds at most one read's worth of bytes per direction. While stalled the proxy neither reads
nor writes nor connects upstream: the bytes wait in the kernel's buffers and the proxy's own, in order, and flow
again on heal(). A connection one side ends (EOF) is ended on the other once what it sent before is delivered; one
side's reset is passed on to the other as a reset.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

CHUNK = 65536
MODES = ("pass", "stall", "drop")
# Errors of a socket its peer reset, or of a write to a socket its peer closed: passed on to the twin as a reset.
RESET_ERRORS = (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED)


def address(dsn: str) -> tuple[str, int]:
    """The (host, port) a libpq URL (postgresql://user@host:port/dbname) names: a proxy's target."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres") or parts.hostname is None or parts.port is None:
        raise ValueError(f"not a libpq URL with a host and a port: {dsn!r}")
    return parts.hostname, parts.port


def _abort(sock: socket.socket) -> None:
    """Close `sock` with an RST rather than a FIN (SO_LINGER on, timeout 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _Pair:
    """One proxied connection: the client's socket and the upstream one, and the bytes read from each side that
    the other side has not taken yet."""

    __slots__ = ("client", "upstream", "connected", "to_upstream", "to_client", "client_eof", "upstream_eof")

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None  # made when the connection is first served (not while stalled)
        self.connected = False  # the upstream connect completed
        self.to_upstream = bytearray()
        self.to_client = bytearray()
        self.client_eof = False
        self.upstream_eof = False


class PgProxy:
    """A TCP proxy from a free loopback port to `target` (PostgreSQL's host and port)."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.port = 0  # bound in start()
        self._mode = "pass"
        self._pairs: set[_Pair] = set()
        self._interest: dict[socket.socket, int] = {}  # what the selector watches each socket for
        self._listener: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._commands: list[tuple[Callable[[], None], threading.Event, list[BaseException]]] = []
        self._lock = threading.Lock()  # guards _commands and _closed
        self._thread: threading.Thread | None = None
        self._running = False
        self._closed = False
        self.error: BaseException | None = None  # what ended the loop, if anything but close() did

    # -- the API -------------------------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def connections(self) -> int:
        """The proxied connections open now (accepted and not yet closed, stalled ones included)."""
        return len(self._pairs)

    def start(self) -> PgProxy:
        if self._closed or self._thread is not None:
            raise RuntimeError("a PgProxy starts once")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, 0))
            listener.listen(128)
            listener.setblocking(False)
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._selector = selectors.DefaultSelector()
        except BaseException:
            listener.close()
            self._close_control()
            raise
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name=f"pgproxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def dsn(self, dsn: str) -> str:
        """The same libpq URL with its host and port replaced by the proxy's."""
        if not self.port:
            raise RuntimeError("the proxy has no port before start()")
        address(dsn)  # a libpq URL with a host and a port, or ValueError
        parts = urlsplit(dsn)
        userinfo, at, _ = parts.netloc.rpartition("@")
        netloc = f"{userinfo}{at}{self.host}:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def stall(self) -> None:
        """Forward nothing, in either direction, on every connection, current and new (new ones are accepted and
        held, not connected upstream): a blackholed network. The held bytes flow, in order, on heal()."""
        self._call(self._do_stall)

    def drop(self) -> None:
        """Close every current connection on both sides, and close each new one as soon as it is accepted, until
        heal()."""
        self._call(self._do_drop)

    def reset(self) -> None:
        """Reset every current connection on both sides (an RST: SO_LINGER 0, then close). The mode is kept: new
        connections are served as before (at once in "pass")."""
        self._call(self._do_reset)

    def heal(self) -> None:
        """Forward again: stalled bytes flow, new connections are served."""
        self._call(self._do_heal)

    def close(self) -> None:
        """Stop the thread and close every socket (connections, listener, selector). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._wake()
            thread.join(30)
            if thread.is_alive():
                raise RuntimeError(f"the proxy's thread {thread.name} did not stop")
        self._shutdown()  # the loop closes everything as it ends; this is for a proxy never started or a dead loop

    def __enter__(self) -> PgProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PgProxy({self.host}:{self.port} -> {self.target[0]}:{self.target[1]}, {self._mode}, "
                f"{len(self._pairs)} connections)")

    # -- control: run by the loop's thread ----------------------------------------------------------------------

    def _call(self, command: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the proxy is closed")
            if self._thread is None:  # not started: no connection to act on
                command()
                return
            if self.error is not None or not self._running:
                raise RuntimeError("the proxy's loop has ended") from self.error
            done = threading.Event()
            failure: list[BaseException] = []
            self._commands.append((command, done, failure))
        self._wake()
        while not done.wait(0.1):
            if self._thread is not None and not self._thread.is_alive():
                raise RuntimeError("the proxy's loop has ended") from self.error
        if failure:
            raise failure[0]

    def _wake(self) -> None:
        w = self._wake_w
        if w is None:
            return
        try:
            w.send(b"x")
        except OSError:
            pass  # the pair's buffer is full (the loop will wake anyway), or the loop has ended and closed it

    def _do_stall(self) -> None:
        self._mode = "stall"
        for pair in self._pairs:
            self._watch(pair)

    def _do_heal(self) -> None:
        self._mode = "pass"
        for pair in list(self._pairs):
            if pair.upstream is None:
                self._connect(pair)
            else:
                self._watch(pair)

    def _do_drop(self) -> None:
        self._mode = "drop"
        for pair in list(self._pairs):
            self._end(pair, reset=False)

    def _do_reset(self) -> None:
        for pair in list(self._pairs):
            self._end(pair, reset=True)

    # -- the loop ----------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        assert self._selector is not None
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                for key, events in self._selector.select():
                    sock = key.fileobj
                    if sock is self._wake_r:
                        self._drain_wake()
                    elif sock is self._listener:
                        self._accept()
                    else:
                        pair = key.data
                        if pair in self._pairs:  # not ended by an earlier event of this turn
                            self._serve(pair, sock, events)
                self._run_commands()
        except BaseException as e:  # kept for the callers, who are told the loop ended
            self.error = e
        finally:
            self._running = False
            self._shutdown()

    def _drain_wake(self) -> None:
        assert self._wake_r is not None
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _run_commands(self) -> None:
        with self._lock:
            commands, self._commands = self._commands, []
        for command, done, failure in commands:
            try:
                command()
            except Exception as e:  # handed to the caller
                failure.append(e)
            done.set()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.ECONNABORTED, errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return
                raise
            if self._mode == "drop":
                client.close()
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client)
            self._pairs.add(pair)
            if self._mode == "pass":
                self._connect(pair)

    def _connect(self, pair: _Pair) -> None:
        """Start the upstream connect of a connection accepted while stalled or just now."""
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.setblocking(False)
        pair.upstream = upstream
        err = upstream.connect_ex(self.target)
        if err == 0:
            self._connected(pair)
        elif err in (errno.EINPROGRESS, errno.EAGAIN):
            self._watch(pair)  # writable when the connect is done
        else:
            self._end(pair, reset=False)

    def _connected(self, pair: _Pair) -> None:
        assert pair.upstream is not None
        pair.connected = True
        pair.upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._watch(pair)

    def _serve(self, pair: _Pair, sock: socket.socket, events: int) -> None:
        if sock is pair.upstream and not pair.connected:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._end(pair, reset=False)  # refused: the client's connection is closed as a server's would be
            else:
                self._connected(pair)
            return
        try:
            if events & selectors.EVENT_WRITE:
                self._write(pair, sock)
            if events & selectors.EVENT_READ:
                self._read(pair, sock)
        except OSError as e:
            self._end(pair, reset=e.errno in RESET_ERRORS)
            return
        if (pair.client_eof and not pair.to_upstream) or (pair.upstream_eof and not pair.to_client):
            self._end(pair, reset=False)  # one side ended and what it sent is delivered: end the other
        else:
            self._watch(pair)

    def _read(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if sock is pair.client:
            if data:
                pair.to_upstream += data
            else:
                pair.client_eof = True
        elif data:
            pair.to_client += data
        else:
            pair.upstream_eof = True

    def _write(self, pair: _Pair, sock: socket.socket) -> None:
        buffer = pair.to_upstream if sock is pair.upstream else pair.to_client
        try:
            sent = sock.send(buffer)
        except (BlockingIOError, InterruptedError):
            return
        del buffer[:sent]

    def _watch(self, pair: _Pair) -> None:
        """Point the selector at what each of the pair's sockets waits for now, given the mode."""
        client_events = upstream_events = 0
        if self._mode == "pass":
            if pair.upstream is not None and not pair.connected:
                upstream_events = selectors.EVENT_WRITE
            elif pair.connected:
                if not pair.to_upstream and not pair.client_eof:
                    client_events |= selectors.EVENT_READ
                if pair.to_client:
                    client_events |= selectors.EVENT_WRITE
                if not pair.to_client and not pair.upstream_eof:
                    upstream_events |= selectors.EVENT_READ
                if pair.to_upstream:
                    upstream_events |= selectors.EVENT_WRITE
        self._want(pair.client, client_events, pair)
        if pair.upstream is not None:
            self._want(pair.upstream, upstream_events, pair)

    def _want(self, sock: socket.socket, events: int, pair: _Pair) -> None:
        assert self._selector is not None
        now = self._interest.get(sock, 0)
        if events == now:
            return
        if not events:
            self._selector.unregister(sock)
            del self._interest[sock]
        elif not now:
            self._selector.register(sock, events, pair)
            self._interest[sock] = events
        else:
            self._selector.modify(sock, events, pair)
            self._interest[sock] = events

    def _end(self, pair: _Pair, *, reset: bool) -> None:
        """Close both sides of `pair`: with an RST when `reset`, else with a FIN."""
        self._pairs.discard(pair)
        for sock in (pair.client, pair.upstream):
            if sock is None:
                continue
            if sock in self._interest:
                assert self._selector is not None
                self._selector.unregister(sock)
                del self._interest[sock]
            if reset:
                _abort(sock)
            else:
                sock.close()

    # -- the end ---------------------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Close every socket and the selector (the loop's last act, or close()'s when there was no loop)."""
        for pair in list(self._pairs):
            self._end(pair, reset=False)
        if self._listener is not None:
            if self._selector is not None:
                try:
                    self._selector.unregister(self._listener)
                except (KeyError, ValueError):
                    pass
            self._listener.close()
            self._listener = None
        self._close_control()
        with self._lock:
            commands, self._commands = self._commands, []
        for _, done, failure in commands:  # callers waiting on a command the loop will never run
            failure.append(RuntimeError("the proxy is closed"))
            done.set()

    def _close_control(self) -> None:
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._wake_r = self._wake_w = None
