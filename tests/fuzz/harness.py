"""The request path in process, for the fuzzer: bytes -> FrameReader -> decode_request -> handlers -> responses.

`TestOneInput(data)` builds a kcoord Server exactly as `kcoord serve` does (kcoord.server.Server and its own
`start()`, run on a fake event loop with a manual clock, and a MemoryRecords store where the variant keeps one),
opens up to three KafkaConnections on fake transports, and plays the input's operations against them: frames the
harness frames for a chosen API and version, plausible requests built from what earlier responses taught it
(member ids, generations, epochs), mutated; raw stream bytes; deliveries in chunks of any size; clock jumps that
fire the server's timer; client closes. At the end the server shuts down as on SIGTERM and restarts from its store.

Input format (every field big-endian, missing bytes read as zero):
    byte 0                     the server variant (VARIANTS)
    then operations, each an op byte b: kind b & 7, connection (b >> 3) % 3, arg b >> 5
      0 REQUEST   key u8, ver u8, n u16, body[n]
                                           a frame with the harness's header for the API and version the key and
                                           version bytes name (plausible.select) and this body
      1 TEMPLATE  key u8, ver u8, k1 u8, k2 u8, m u8, m x (pos u16, val u8)
                                           the plausible body of that API and version (plausible.py) with the group,
                                           member, instance and epoch k1/k2 pick from what was learned, mutated m
                                           times (Run.params, mutate)
      2 RAW       n u16, bytes[n]          appended to the connection's stream as they are (the framing is theirs)
      3 DELIVER   c u8                     the connection's pending bytes reach the server in reads of c + 1 bytes
                                           (c = 255: all at once), an event-loop turn after each; arg & 1: the
                                           next connection's too, their reads sharing turns
      4 ADVANCE   t u16                    the clock moves t x (1, 10, 100, 1000)[arg & 3] ms, timers firing in order
      5 CLOSE                              the client closes the connection (a later op opens a new one)
      6, 7                                 TEMPLATE (weighted: structured input finds the handlers' deep branches)
    Pending bytes are delivered whole before an ADVANCE and at the end.

What must hold (an AssertionError, or any exception escaping, is a finding):
  - the server never raises out of its protocol methods, never logs an ERROR (a handler that raised, a parked
    response it could not encode, a failed timer), and never writes to a connection it closed;
  - no input takes HANG_CPU_SECONDS of CPU (a timer that re-arms itself at 0 ms, work out of proportion);
  - a connection is closed exactly when its stream holds a frame the server must refuse (a size outside
    0..socket.request.max.bytes, an undecodable request, an API or version it does not serve, ApiVersions aside);
  - the responses on a connection are, in order, the answers to its requests (Produce acks=0 excepted): each
    decodes with the codec at its request's API and version, with its correlation id; once the server shuts down,
    a connection it did not close has had every answer;
  - wire.decode_request round-trips whatever it accepts; a standalone FrameReader fed the same stream in other
    chunks yields the same frames (and fails at the same byte);
  - every group keeps its own invariants (classic: static ids and leader among the members; consumer and connect:
    static ids and epochs; consumer: no partition held by two members);
  - a restart from the store loads without error and finds the acknowledged state: committed offsets, topics,
    stable classic groups, consumer and connect group epochs and members.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import logging
import os
import random
import signal
import struct
import threading
import traceback
from collections import deque
from collections.abc import Callable

import numpy as np

from kcoord import server as server_module
from kcoord import wire
from kcoord.config import GroupConfig, ServerConfig
from kcoord.groups import classic as classic_module
from kcoord.groups.classic import ClassicGroup, State
from kcoord.groups.connect import ConnectGroup
from kcoord.groups.consumer import ConsumerGroup
from kcoord.security.authorizer import OPERATION_NAMES, PATTERN_NAMES, PERMISSION_NAMES, RESOURCE_NAMES
from kcoord.server import KafkaConnection, Server
from kcoord.store import MemoryRecords
from kcoord.timers import ManualClock
from kcoord.topics import parse_topic_spec

from .plausible import Params, encoded, select, served

# The oracle follows each read's frames as they are handled, in that read: a read's frames are never split across
# turns of the loop here (the server's 5 ms budget a turn is wall time, which would make runs unrepeatable; its
# split is tested in tests/server/test_long_handlers.py).
server_module.TURN_BUDGET_S = float("inf")
# Nor is a large frame sent to the worker thread (a real thread beside the fake loop; tested in
# tests/server/test_offload.py).
server_module.OFFLOAD_ABOVE = float("inf")

MAX_CONNECTIONS = 3
START_MS = 1_700_000_000_000
ABSURD = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\x00\x00\x7f\xff", b"\xff\xff\xff\xff\x0f")
ALL_PROTOCOLS = "classic,consumer,connect"

# (GroupConfig fields, ServerConfig fields, keep a store): each input runs against one.
VARIANTS: tuple[tuple[dict, dict, bool], ...] = (
    # every API served, rebalances complete at once, a store: the richest path
    ({"group_coordinator_rebalance_protocols": ALL_PROTOCOLS, "group_initial_rebalance_delay_ms": 0}, {}, True),
    # Kafka's defaults (no connect groups, a 3 s initial delay), memory only
    ({}, {}, False),
    # the connect block moved to 2000-2003, Kafka's delay extension, small groups, frames and metadata, no topic
    # auto-creation, two connections at most
    ({"group_coordinator_rebalance_protocols": ALL_PROTOCOLS, "group_connect_api_key_base": 2000,
      "group_initial_rebalance_extension": "kafka", "group_initial_rebalance_delay_ms": 100, "group_max_size": 2,
      "group_consumer_max_size": 2, "group_connect_max_size": 2, "offset_metadata_max_bytes": 16,
      "group_consumer_migration_policy": "upgrade", "group_consumer_assignors": "range"},
     {"max_frame_size": 4096, "auto_create_topics": False, "max_connections": 2, "num_partitions": 3}, True),
    # classic groups only, no online migration, a store
    ({"group_coordinator_rebalance_protocols": "classic", "group_consumer_migration_policy": "disabled",
      "group_initial_rebalance_delay_ms": 0}, {"num_partitions": 2}, True),
)
TOPICS = ["t:4", "u:2"]


class Finding(AssertionError):
    """An invariant the server broke."""


class Hang(BaseException):
    """Raised by the watchdog inside whatever runs too long (a BaseException: kcoord's `except Exception` handlers,
    which log and go on, must not swallow it)."""


# An input takes milliseconds; one that takes HANG_CPU_SECONDS of CPU is stuck (a loop that never ends, work out of
# all proportion to the request). The watchdog then looks where it is, a few times over (one look may land in the
# loop's head and miss its body), and interrupts it with those stacks: libFuzzer's own -timeout (wall clock,
# SIGALRM) would only say that an input was slow. It counts CPU time (SIGVTALRM): a busy machine does not set it off.
HANG_CPU_SECONDS = 3.0
HANG_SAMPLES = 5
_samples: list[str] = []


def _watchdog(signum, frame) -> None:
    _samples.append("".join(traceback.format_stack(frame)))
    if len(_samples) < HANG_SAMPLES:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0.01)
        return
    stacks = "\n".join(f"--- look {i + 1}:\n{st}" for i, st in enumerate(_samples))
    _samples.clear()
    raise Hang(f"an input ran {HANG_CPU_SECONDS:.0f} s of CPU; where it was:\n{stacks}")


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGVTALRM, _watchdog)


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Finding(what)


# ---- the fake event loop and transport -------------------------------------------------------------------------

class Handle:
    __slots__ = ("when", "seq", "fn", "args", "cancelled")

    def __init__(self, when: int, seq: int, fn: Callable, args: tuple) -> None:
        self.when, self.seq, self.fn, self.args, self.cancelled = when, seq, fn, args, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: Handle) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class Listener:
    """What `loop.create_server` returns: nothing listens, nothing is accepted but what the harness opens."""

    sockets: list = []

    def close(self) -> None:
        pass

    async def start_serving(self) -> None:
        pass

    def is_serving(self) -> bool:
        return True

    async def wait_closed(self) -> None:
        pass


class FakeLoop:
    """The parts of an asyncio loop the server uses, on the manual clock: callbacks run when the harness says."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.ready: deque[Handle] = deque()
        self.timers: list[Handle] = []
        self.seq = 0

    def time(self) -> float:
        return self.clock.ms / 1000

    def call_soon(self, fn: Callable, *args) -> Handle:
        self.seq += 1
        h = Handle(0, self.seq, fn, args)
        self.ready.append(h)
        return h

    def call_later(self, delay: float, fn: Callable, *args) -> Handle:
        self.seq += 1
        h = Handle(self.clock.ms + max(round(delay * 1000), 0), self.seq, fn, args)
        heapq.heappush(self.timers, h)
        return h

    def set_exception_handler(self, handler) -> None:
        pass  # the loop's own errors (accept() failures) do not arise without sockets

    def create_task(self, coro) -> Handle:
        coro.close()  # the idle reaper: connections.max.idle.ms is not what is fuzzed here
        return Handle(0, 0, None, ())

    async def create_server(self, factory, host, port, **kwargs) -> Listener:
        return Listener()

    def run_ready(self) -> None:
        """One loop turn: the callbacks queued before it started (each may queue more, for the next turn)."""
        for _ in range(len(self.ready)):
            h = self.ready.popleft()
            if not h.cancelled:
                h.fn(*h.args)

    def settle(self) -> None:
        for _ in range(1000):
            if not self.ready:
                return
            self.run_ready()
        raise Finding("the event loop never settles: callbacks keep queueing callbacks")

    def advance(self, ms: int) -> None:
        """Move the clock by `ms`, firing every timer due on the way at its own time, as the loop would."""
        end = self.clock.ms + ms
        while self.timers and self.timers[0].when <= end:
            h = heapq.heappop(self.timers)
            if h.cancelled:
                continue
            self.clock.ms = max(self.clock.ms, h.when)
            h.fn(*h.args)
            self.settle()
        self.clock.ms = end


class Transport:
    def __init__(self, loop: FakeLoop, conn: KafkaConnection, port: int) -> None:
        self.loop, self.conn, self.port = loop, conn, port
        self.data = bytearray()
        self.closing = False
        self.paused = False  # the server stopped reading it (a turn's budget spent, too many answers waiting)

    def write(self, data) -> None:
        check(not self.closing, "the server wrote to a connection it had closed")
        self.data += data

    def close(self) -> None:
        self._shut()

    def abort(self) -> None:
        self._shut()

    def _shut(self) -> None:
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.conn.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", self.port) if name == "peername" else default


# ---- one client connection and what it must see ------------------------------------------------------------------

ACL_ENUMS = (RESOURCE_NAMES, PATTERN_NAMES, OPERATION_NAMES, PERMISSION_NAMES)
ACL_FILTER_FIELDS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
ACL_CREATION_FIELDS = ("resource_type", "resource_pattern_type", "operation", "permission_type")
MAX_ACL_ITEMS = 10_000  # more creations or filters are refused whole before anything looks at them


def refused_acl_request(key: int, body) -> bool:
    """An ACL request Kafka refuses to parse: one holding an UNKNOWN (0) or unknown resource type, pattern type,
    operation or permission (CreateAclsRequest.validate, DescribeAclsRequest.normalizeAndValidate); the server
    closes the connection without an answer."""
    if key == wire.DescribeAclsRequest.API_KEY:
        items, fields = [body], ACL_FILTER_FIELDS
    elif key == wire.DeleteAclsRequest.API_KEY:
        items, fields = body.filters, ACL_FILTER_FIELDS
    elif key == wire.CreateAclsRequest.API_KEY:
        items, fields = body.creations, ACL_CREATION_FIELDS
    else:
        return False
    if len(items) > MAX_ACL_ITEMS:
        return False
    return any(getattr(x, f) == 0 or getattr(x, f) not in names for x in items for f, names in zip(fields, ACL_ENUMS))


def split_frames(stream: bytes | bytearray, max_size: int) -> tuple[list[bytes], int | None]:
    """The frames of a stream, and the offset at which a bad size prefix becomes known (its 4th byte), if any."""
    frames, pos = [], 0
    while len(stream) - pos >= 4:
        (size,) = struct.unpack_from(">i", stream, pos)
        if size < 0 or size > max_size:
            return frames, pos + 4
        if len(stream) - pos - 4 < size:
            break
        frames.append(bytes(stream[pos + 4:pos + 4 + size]))
        pos += 4 + size
    return frames, None


class Peer:
    def __init__(self, run: Run, port: int) -> None:
        self.run = run
        srv = run.server
        self.conn = KafkaConnection(srv)
        self.transport = Transport(run.loop, self.conn, port)
        self.conn.connection_made(self.transport)
        self.refused = self.transport.closing  # max.connections
        self.pending = bytearray()  # written by the client, not yet delivered
        self.stream = bytearray()  # delivered
        self.chunks: list[int] = []  # the sizes it was delivered in
        self.frames_seen = 0
        self.must_close = False  # the stream holds a frame the server must refuse
        self.expected: deque[tuple[int, int, int]] = deque()  # (api key, version, correlation id) still to answer
        self.parsed = 0
        self.client_closed = False

    @property
    def alive(self) -> bool:
        return not self.transport.closing

    def read(self, chunk: int) -> None:
        """One read of at most `chunk` bytes, as asyncio's transport does it: get_buffer, recv_into,
        buffer_updated. Bytes the client sent after the server closed are dropped, as the socket drops them."""
        if not self.alive:
            self.pending.clear()
        if not self.pending or self.transport.paused:
            return
        buf = self.conn.get_buffer(-1)  # asyncio's selector transport asks so
        n = min(chunk, len(self.pending), len(buf))
        check(n > 0, "get_buffer returned an empty buffer")
        piece = bytes(self.pending[:n])
        buf[:n] = piece
        del buf
        del self.pending[:n]
        self.stream += piece
        self.chunks.append(n)
        self.conn.buffer_updated(n)
        self.run.check_errors()
        self.follow()

    def follow(self) -> None:
        """The oracle: what the server must do with the frames delivered so far."""
        frames, bad_at = split_frames(self.stream, self.run.server.config.max_frame_size)
        for frame in frames[self.frames_seen:]:
            if not self.must_close:
                self.expect(frame)
        self.frames_seen = len(frames)
        if bad_at is not None and bad_at <= len(self.stream):
            self.must_close = True
        if not self.client_closed:
            check(self.transport.closing == (self.must_close or self.refused),
                  "the server closed a connection whose requests were all well-formed" if self.transport.closing
                  else "the server kept a connection open after a frame it must refuse")

    def expect(self, frame: bytes) -> None:
        srv = self.run.server
        if srv.key_map is not None:
            frame = srv.key_map.to_codec(frame)
        try:
            header, body = wire.decode_request(frame)
        except wire.UnsupportedVersionError as e:
            if e.api_key == wire.ApiVersionsRequest.API_KEY:  # answered in v0 format with UNSUPPORTED_VERSION
                self.expected.append((e.api_key, 0, e.correlation_id))
            else:
                self.must_close = True
            return
        except wire.DecodeError:
            self.must_close = True
            return
        key, version = header.request_api_key, header.request_api_version
        # (b) the codec: whatever it accepts, it encodes again to the same message
        again = wire.encode_request(key, version, header.correlation_id, header.client_id, body)
        header2, body2 = wire.decode_request(again[4:])
        check((header2.correlation_id, header2.client_id) == (header.correlation_id, header.client_id),
              f"API {key} v{version}: decode(encode(request)) has another header")
        if body2 != body:
            check(canonical(body2) != canonical(body), f"API {key} v{version}: unknown tagged fields out of order: "
                                                       "decode keeps their order, encode sorts them")
            raise Finding(f"API {key} v{version}: decode(encode(request)) differs from the request")
        if key not in srv.handlers or refused_acl_request(key, body):
            self.must_close = True
            return
        if key == wire.ProduceRequest.API_KEY and body.acks == 0:
            return  # never answered
        self.expected.append((key, version, header.correlation_id))

    def take_responses(self) -> None:
        data = self.transport.data
        while len(data) - self.parsed >= 4:
            (size,) = struct.unpack_from(">i", data, self.parsed)
            check(4 <= size <= len(data) - self.parsed - 4, f"a response frame of size {size} does not fit what "
                                                             "was written")
            frame = bytes(data[self.parsed + 4:self.parsed + 4 + size])
            self.parsed += 4 + size
            check(bool(self.expected), "a response to no request")
            key, version, corr = self.expected.popleft()
            check(struct.unpack_from(">i", frame)[0] == corr,
                  f"API {key} v{version}: the response carries correlation id "
                  f"{struct.unpack_from('>i', frame)[0]}, the request {corr} (responses out of order)")
            try:
                got, msg = wire.decode_response(key, version, frame)
            except wire.DecodeError as e:
                raise Finding(f"API {key} v{version}: the response does not decode: {e}") from e
            check(got == corr, "decode_response read another correlation id")
            self.run.learn(key, msg)


# ---- one run of one input ----------------------------------------------------------------------------------------

class Reader:
    """Fields off the input; past its end every read is zero."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def u8(self) -> int:
        b = self.data[self.pos] if self.pos < len(self.data) else 0
        self.pos += 1
        return b

    def u16(self) -> int:
        return self.u8() << 8 | self.u8()

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


class ErrorLog(logging.Handler):
    """What kcoord logs at ERROR and above while an input runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.active = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.active:
            self.records.append(record)


ERRORS = ErrorLog()
logging.getLogger("kcoord").addHandler(ERRORS)


class Run:
    def __init__(self, variant: int) -> None:
        group, server, self.keeps_store = VARIANTS[variant % len(VARIANTS)]
        self.config = ServerConfig(port=9092, topics=list(TOPICS), group=GroupConfig(**group), **server)
        self.clock = ManualClock(START_MS)
        self.records = MemoryRecords() if self.keeps_store else None
        self.server = Server(self.config, clock=self.clock, records=self.records)
        self.loop = FakeLoop(self.clock)
        # start() freezes what start-up made (gc.freeze: a server lives as long as its process). Each input's
        # server is garbage soon, and a freeze per input would keep every earlier input's cycles from the collector.
        freeze, gc.freeze = gc.freeze, lambda: None
        try:
            run_now(self.server.start(), self.loop)
        finally:
            gc.freeze = freeze
        self.peers: list[Peer | None] = [None] * MAX_CONNECTIONS
        self.all_peers: list[Peer] = []
        self.ports = 40000
        self.corr = 0
        self.members: list[str] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, tuple] = {}
        self.group_epoch = 0
        self.fresh = 0

    def peer(self, i: int) -> Peer:
        p = self.peers[i]
        if p is None or not p.alive or p.client_closed:
            self.ports += 1
            p = self.peers[i] = Peer(self, self.ports)
            self.all_peers.append(p)
            self.loop.settle()
        return p

    def check_errors(self) -> None:
        if ERRORS.records:
            r = ERRORS.records[0]
            trace = "\n" + logging.Formatter().formatException(r.exc_info) if r.exc_info else ""
            raise Finding(f"the server logged: {r.getMessage()}{trace}") from (r.exc_info[1] if r.exc_info else None)

    def check_responses(self) -> None:
        self.check_errors()
        for p in self.all_peers:
            p.take_responses()

    # ---- what responses teach a client ------------------------------------------------------------------------

    def remember(self, member_id: str | None, epoch: int | None = None) -> None:
        if not member_id:
            return
        if member_id not in self.epochs and len(self.members) < 16:
            self.members.append(member_id)
        if epoch is not None:
            self.epochs[member_id] = epoch

    def learn(self, key: int, msg) -> None:
        if key == wire.JoinGroupRequest.API_KEY:
            self.remember(msg.member_id, msg.generation_id)
            for m in msg.members:
                self.remember(m.member_id, msg.generation_id)
        elif key == wire.ConsumerGroupHeartbeatRequest.API_KEY:
            self.remember(msg.member_id, msg.member_epoch)
            if msg.member_id and msg.assignment is not None:
                self.owned[msg.member_id] = tuple((tp.topic_id, tuple(tp.partitions))
                                                  for tp in msg.assignment.topic_partitions)
        elif key == wire.ConnectGroupHeartbeatRequest.API_KEY:
            self.remember(msg.member_id, msg.member_epoch)
        elif key == wire.ConnectGroupPrepareAssignmentRequest.API_KEY:
            if msg.error_code == 0:
                self.group_epoch = msg.group_epoch
            for m in msg.members:
                self.remember(m.member_id)
        elif key == wire.DescribeGroupsRequest.API_KEY:
            for g in msg.groups:
                for m in g.members:
                    self.remember(m.member_id)

    def params(self, k1: int, k2: int) -> Params:
        sel = k1 & 15
        member = "" if sel == 0 or not self.members else (
            "fuzz-unknown" if sel == 15 else self.members[(sel - 1) % len(self.members)])
        epoch = self.epochs.get(member, 0)
        epoch = (epoch, 0, -1, epoch + 1)[k2 & 3]
        self.fresh += 1
        topics = tuple((t.name, t.topic_id, t.partitions) for t in sorted(self.server.topics.by_name.values(),
                                                                           key=lambda t: t.name))
        return Params(group=("g", "g", "h", "")[k1 >> 4 & 3], member=member, fresh=f"w{self.fresh}", epoch=epoch,
                      group_epoch=self.group_epoch, instance=(None, None, "i1", "i2")[k1 >> 6],
                      topics=topics or (("t", bytes(16), 1),), members=tuple(self.members),
                      owned=self.owned.get(member, ()), flags=k2 >> 2)

    # ---- operations -------------------------------------------------------------------------------------------

    def frame(self, key: int, version: int, client_id: str | None, body: bytes) -> bytes:
        self.corr += 1
        hv = wire.request_header_version(key, version)
        if hv < 0:  # not an API the codec knows: Kafka's header v1
            hv = 1
        if self.server.key_map is not None and 1000 <= key < 1004:
            key = self.server.key_map.advertised(key)
        header = wire.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=self.corr,
                                    client_id=client_id).encode(hv)
        frame = header + body
        return struct.pack(">i", len(frame)) + frame

    def template(self, r: Reader) -> bytes:
        key, version = select(r.u8(), r.u8())
        k1, k2 = r.u8(), r.u8()
        p = self.params(k1, k2)
        if served(key, version):
            body = bytearray(encoded(key, version, p))
            if key in (wire.ConsumerGroupHeartbeatRequest.API_KEY, wire.ConnectGroupHeartbeatRequest.API_KEY) \
                    and not p.member:
                self.remember(p.fresh, 0)
        else:
            body = bytearray(b"\x00" * 8)
        for _ in range(r.u8() & 7):
            pos, val = r.u16(), r.u8()
            mutate(body, pos, val)
        return self.frame(key, version, "fuzz", bytes(body))

    def play(self, r: Reader) -> None:
        while r.more():
            op = r.u8()
            kind, conn, arg = op & 7, (op >> 3) % MAX_CONNECTIONS, op >> 5
            if kind == 0:
                key, version = select(r.u8(), r.u8())
                self.peer(conn).pending += self.frame(key, version, None if arg & 1 else "fuzz", r.take(r.u16()))
            elif kind == 2:
                self.peer(conn).pending += r.take(r.u16())
            elif kind == 3:
                c = r.u8()
                together = [self.peer(conn)] + ([self.peer((conn + 1) % MAX_CONNECTIONS)] if arg & 1 else [])
                self.deliver(together, 1 << 30 if c == 255 else c + 1)
            elif kind == 4:
                self.deliver_all()
                self.loop.advance(r.u16() * (1, 10, 100, 1000)[arg & 3])
                self.check_responses()
            elif kind == 5:
                p = self.peers[conn]
                if p is not None and p.alive:
                    p.client_closed = True
                    p.pending.clear()
                    p.transport.abort()
                    self.loop.settle()
            else:
                self.peer(conn).pending += self.template(r)
        self.deliver_all()

    def deliver(self, peers: list[Peer], chunk: int) -> None:
        """Reads of `chunk` bytes until the peers' pending bytes are in; the peers' reads of one round share an
        event-loop turn (sockets readable together), whose callbacks (the store's commit) run after them."""
        while any(p.pending and p.alive and not p.transport.paused for p in peers):
            for p in peers:
                p.read(chunk)
            self.loop.settle()
            self.check_responses()
        for p in peers:
            p.read(chunk)  # drops what a closed connection still had pending

    def deliver_all(self) -> None:
        self.deliver([p for p in self.peers if p is not None], 1 << 30)

    # ---- the end: group invariants, shutdown, restart --------------------------------------------------------

    def finish(self) -> None:
        srv = self.server
        self.loop.settle()
        self.check_responses()
        check_groups(srv.coordinator.groups)
        open_before = [p for p in self.all_peers if p.alive]
        live = snapshot(srv)
        run_now(srv.close(), self.loop)
        self.loop.settle()
        self.check_responses()
        for p in open_before:
            check(not p.expected, f"a request left unanswered at shutdown: API {p.expected[0][0]} "
                                  f"v{p.expected[0][1]}" if p.expected else "")
            check(p.parsed == len(p.transport.data), "a partial response frame was written")
        check(srv.failed is None, f"the store failed: {srv.failed}")
        if self.records is not None:
            restarted = Server(self.config, clock=ManualClock(self.clock.ms), records=self.records)
            check_restart(live, snapshot(restarted))
            check_groups(restarted.coordinator.groups)
            restarted.store.close()


def canonical(value):
    """A message as plain data, unknown tagged fields sorted (the order encode writes them in)."""
    if isinstance(value, wire.Message):
        out = {name: canonical(getattr(value, name)) for name in value._FIELDS}
        out["unknown_tags"] = sorted(value.unknown_tags or ())
        return out
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def mutate(body: bytearray, pos: int, val: int) -> None:
    how, at = pos >> 14, (pos & 0x3FFF) % (len(body) + 1)
    if how == 0 and at < len(body):
        body[at] ^= val or 0x80
    elif how == 1:
        body[at:at] = bytes([val])
    elif how == 2:
        del body[at:at + 1 + (val & 3)]
    elif val & 1:
        del body[at:]
    else:
        a = ABSURD[(val >> 1) % len(ABSURD)]
        body[at:at + len(a)] = a


def run_now(coro, loop: FakeLoop):
    """Run a coroutine that never waits on anything (Server.start and close on the fake loop) to its end."""
    outer = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(loop)
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    finally:
        asyncio.events._set_running_loop(outer)
    coro.close()
    raise Finding("a server coroutine waited on the fake loop")


# ---- invariants of the coordinator's state -----------------------------------------------------------------------

def check_groups(groups: dict) -> None:
    for gid, g in groups.items():
        check(g.group_id == gid, f"group {gid!r} is filed under another id ({g.group_id!r})")
        if isinstance(g, ClassicGroup):
            t = g.members
            for iid, mid in t.static_members.items():
                check(mid in t.members and t.members[mid].group_instance_id == iid,
                      f"classic group {gid!r}: static member {iid!r} -> {mid!r} is not a member with that id")
            for mid, m in t.members.items():
                check(m.member_id == mid, f"classic group {gid!r}: member {mid!r} is filed under another id")
                if m.group_instance_id is not None:
                    check(t.static_members.get(m.group_instance_id) == mid,
                          f"classic group {gid!r}: member {mid!r} is static but not in the static table")
            check(t.num_awaiting_join == sum(m.awaiting_join for m in t.members.values()),
                  f"classic group {gid!r}: the awaiting-join count is off")
            if g.state != State.DEAD:
                check((g.leader_id in t.members) if t.members else g.leader_id is None,
                      f"classic group {gid!r}: leader {g.leader_id!r} is not a member")
            if g.state in (State.COMPLETING_REBALANCE, State.STABLE):
                check(g.protocol_name is not None and len(t) > 0,
                      f"classic group {gid!r} is {g.state.value} without members or a protocol")
            check(g.generation >= 0, f"classic group {gid!r}: generation {g.generation}")
        elif isinstance(g, ConsumerGroup | ConnectGroup):
            kind = "consumer" if isinstance(g, ConsumerGroup) else "connect"
            for iid, mid in g.static.items():
                check(mid in g.members and g.members[mid].instance_id == iid,
                      f"{kind} group {gid!r}: static member {iid!r} -> {mid!r} is not a member with that id")
            for mid, m in g.members.items():
                check(m.member_id == mid, f"{kind} group {gid!r}: member {mid!r} is filed under another id")
                check(m.member_epoch <= g.group_epoch, f"{kind} group {gid!r}: member {mid!r} at epoch "
                                                       f"{m.member_epoch}, past the group's {g.group_epoch}")
            check(g.assignment_epoch <= g.group_epoch,
                  f"{kind} group {gid!r}: assignment epoch {g.assignment_epoch} past group epoch {g.group_epoch}")
            if isinstance(g, ConsumerGroup) and g.members:
                held = np.concatenate([np.concatenate([m.assigned, m.pending]) for m in g.members.values()])
                check(len(np.unique(held)) == len(held), f"consumer group {gid!r}: a partition has two holders")


def snapshot(srv: Server) -> dict:
    c = srv.coordinator
    groups = {}
    for gid, g in c.groups.items():
        if isinstance(g, ClassicGroup):
            stable = g.state == State.STABLE
            groups[gid] = ("classic", (g.generation, g.leader_id, g.protocol_name,
                                       sorted(m.member_id for m in g.members)) if stable else None)
        else:
            groups[gid] = (g.GROUP_TYPE, (g.group_epoch, g.assignment_epoch, sorted(g.members)))
    return {"offsets": {gid: dict(o) for gid, o in c.offsets.by_group.items()},
            "topics": {t.name: (t.topic_id, t.partitions) for t in srv.topics.by_name.values()},
            "groups": groups}


def check_restart(live: dict, back: dict) -> None:
    check(back["offsets"] == live["offsets"], "the committed offsets differ after a restart")
    # the topics of the configuration (--topic NAME:PARTITIONS) are made again on start: grown to their count if
    # they have fewer partitions, created anew (a new id) if they were deleted
    expected = dict(live["topics"])
    configured = dict(parse_topic_spec(spec) for spec in TOPICS)
    for name, partitions in configured.items():
        if name in expected:
            expected[name] = (expected[name][0], max(expected[name][1], partitions))
    check({n: t for n, t in back["topics"].items() if n in expected} == expected
          and set(back["topics"]) <= set(expected) | set(configured), "the topics differ after a restart")
    for gid, (kind, state) in live["groups"].items():
        if state is None:  # a classic group in the middle of a rebalance: what it restarts as is Kafka's business
            continue
        if kind == "classic":
            check(back["groups"].get(gid) == (kind, state), f"stable classic group {gid!r} differs after a restart")
        elif state[2]:  # a modern group with members is kept whole
            check(back["groups"].get(gid) == (kind, state), f"{kind} group {gid!r} differs after a restart")


# ---- the entry point -----------------------------------------------------------------------------------------------

_REAL_URANDOM = os.urandom

# Open bugs the fuzzer found, each with its input in tests/fuzz/crashes/ (see the README there): a finding whose
# text holds one of these is not reported again, so the fuzzer goes on looking for others. tests/wire/test_fuzz.py
# replays the crash inputs strictly (KCOORD_FUZZ_STRICT=1) as expected failures: when a bug is fixed its test
# passes unexpectedly, and then its line here goes and its input moves to the corpus.
KNOWN_OPEN: dict[str, str] = {}  # none open: the eight found so far are fixed (tests/wire/test_fuzz_findings.py)
STRICT = os.environ.get("KCOORD_FUZZ_STRICT") == "1"


def known_open(e: BaseException) -> str | None:
    text = f"{e}\n{e.__cause__}"
    return next((name for pattern, name in KNOWN_OPEN.items() if pattern in text), None)


def TestOneInput(data: bytes) -> None:  # (atheris and libFuzzer call it so)
    """One input, in a fresh server. Deterministic: os.urandom (member ids, topic ids) is seeded for the run."""
    try:
        run_input(data)
    except Exception as e:
        if STRICT or known_open(e) is None:
            raise


def run_input(data: bytes, runs: list[Run] | None = None) -> Run:
    """Run one input; `runs` gets the run as soon as it starts (to look at after an exception)."""
    rng = random.Random(0x6B636F6F7264)
    os.urandom = rng.randbytes
    classic_module._ENTROPY[:] = [b"", 0]  # member ids come from a pool of urandom bytes: start it afresh
    ERRORS.records.clear()
    ERRORS.active = True
    watched = threading.current_thread() is threading.main_thread()
    if watched:
        _samples.clear()
        signal.setitimer(signal.ITIMER_VIRTUAL, HANG_CPU_SECONDS)
    try:
        r = Reader(data)
        run = Run(r.u8())
        if runs is not None:
            runs.append(run)
        run.play(r)
        run.finish()
        check_frame_reader(run)
        return run
    except Hang as e:
        raise Finding(str(e)) from None
    finally:
        if watched:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        os.urandom = _REAL_URANDOM
        classic_module._ENTROPY[:] = [b"", 0]
        ERRORS.active = False
        ERRORS.records.clear()


def client_streams(data: bytes) -> list[bytes]:
    """The bytes each connection of an input sent, as a real client would send them to `kcoord serve` (the
    templates filled in with what the in-process server answered). Known open bugs are let through here: the
    streams up to them are still good traffic."""
    runs: list[Run] = []
    try:
        run_input(data, runs)
    except Exception as e:
        if known_open(e) is None:
            raise
    return [bytes(p.stream) for run in runs for p in run.all_peers if p.stream]


def check_frame_reader(run: Run) -> None:
    """(a) The frame splitter alone: each connection's stream again, through `feed` and through get_buffer /
    buffer_updated, in the chunks it arrived in and in 7-byte chunks. Each call returns the frames its bytes
    complete, as the size prefixes split the stream; the call whose bytes complete a bad size prefix raises
    FrameError (the frames it completed before that go with it), and so does every call after it."""
    max_size = run.server.config.max_frame_size
    for p in run.all_peers:
        stream = bytes(p.stream)
        _, bad_at = split_frames(stream, max_size)
        for sizes in (p.chunks, [7]):
            for api in ("feed", "buffer"):
                reader = wire.FrameReader(max_size, 64)
                got: list[bytes] = []
                pos = i = 0
                while pos < len(stream):
                    piece = stream[pos:pos + sizes[i % len(sizes)]]
                    i += 1
                    try:
                        if api == "feed":
                            out = reader.feed(piece)
                        else:
                            view = reader.get_buffer()
                            piece = piece[:len(view)]
                            view[:len(piece)] = piece
                            del view
                            out = reader.buffer_updated(len(piece))
                    except wire.FrameError:
                        check(bad_at is not None and pos + len(piece) >= bad_at,
                              f"FrameReader.{api}: a FrameError before any bad size prefix")
                        check(reader.failed, f"FrameReader.{api}: a FrameError left the reader open")
                        try:
                            reader.feed(b"x")
                        except wire.FrameError:
                            break
                        raise Finding(f"FrameReader.{api}: a reader that failed took more bytes") from None
                    pos += len(piece)
                    check(bad_at is None or pos < bad_at,
                          f"FrameReader.{api}: no FrameError once a bad size prefix is complete")
                    got += out
                    check(got == split_frames(stream[:pos], max_size)[0],
                          f"FrameReader.{api} split the stream otherwise than its size prefixes say (to byte {pos})")
