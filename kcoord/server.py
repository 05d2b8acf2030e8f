"""The asyncio server: framing, per-connection in-order responses, parked requests, API dispatch, timers.

Bytes arrive in a compiled FrameReader (a size prefix above socket.request.max.bytes closes the connection
before anything is allocated); each frame is decoded once in C, handled by the coordinator or the broker
surface, and its response encoded once in C. A request whose answer is parked (JoinGroup, SyncGroup, a held
Fetch) keeps its place: responses on one connection leave in request order, as a Kafka broker's do.
An unknown API key or version closes the connection, as brokers do, except ApiVersions, which answers a
too-new version in v0 format with UNSUPPORTED_VERSION (35).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import select
import signal
import socket
import struct
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from time import perf_counter
from typing import TYPE_CHECKING, Any

from . import errors as E
from . import gcpolicy, wire
from ._core._stats import RequestStats
from ._core._stats import now as stats_clock
from .broker import Broker
from .config import ServerConfig
from .coordinator import Coordinator, LoadStats
from .events import LATENCY_BUCKETS, REQUEST_PRINCIPAL, Histogram
from .listeners import Listener, listener_names
from .reply import Deferred, Reply
from .security.authorizer import parse_super_users
from .security.handshakes import HandshakeBudget, MeteredTls
from .security.sasl import AUTHENTICATE, COMPLETE, FAILED, HANDSHAKE, INITIAL, RAW, SaslSession
from .security.scram import SaslFailure
from .security.tls import ANONYMOUS  # the one object: the request path compares principals with it by `is`
from .store import GroupStore, NullStore, Records, SqliteRecords, StoreError, StoreFullError
from .timers import Clock
from .topics import TopicCatalogue, parse_topic_spec

if TYPE_CHECKING:  # imported at run time only when asked for (psycopg, prometheus_client, TLS)
    import ssl

    from .cluster import Cluster
    from .metrics import MetricsEndpoint, ServerStats
    from .security.gates import Gates
    from .security.tls import PrincipalMapper

log = logging.getLogger("kcoord.server")

API_VERSIONS_KEY = wire.ApiVersionsRequest.API_KEY
# The requests by which a member makes itself known to its group (group_id, member_id): JoinGroup, SyncGroup,
# ConsumerGroupHeartbeat, ConnectGroupHeartbeat. Not the classic Heartbeat: a classic member has joined and synced.
# With an authorizer, the APIs whose one check is READ on the request's group, trusted per connection once passed
# (Heartbeat, ConsumerGroupHeartbeat, ConnectGroupHeartbeat: a member's steady calls) (KafkaConnection._trusted)
CONSUMER_HEARTBEAT_KEY = wire.ConsumerGroupHeartbeatRequest.API_KEY
TRUSTABLE = frozenset((12, CONSUMER_HEARTBEAT_KEY, wire.ConnectGroupHeartbeatRequest.API_KEY))
MAX_TRUSTED = 1024  # (API key, group) pairs one connection keeps trusted before it starts again
MEMBER_KEYS = frozenset((11, 14, wire.ConsumerGroupHeartbeatRequest.API_KEY, wire.ConnectGroupHeartbeatRequest.API_KEY))
FETCH_KEY = wire.FetchRequest.API_KEY
OFFSET_FETCH_KEY = wire.OffsetFetchRequest.API_KEY
# While the store cannot write for want of space, what would write is refused with this code. Kafka's group
# coordinator answers a failed append COORDINATOR_NOT_AVAILABLE when the coordinator stays where it is and may
# write later (NOT_ENOUGH_REPLICAS, a timeout) and NOT_COORDINATOR when the partition's log directory failed
# (KafkaStorageException: leadership moves); a kcoord with a full disk stays the coordinator and recovers in place.
FULL_ERROR = E.COORDINATOR_NOT_AVAILABLE
FULL_RETRY_S = 1.0  # while the store is full, how often the pending write is tried again
FULL_LOG_INTERVAL_S = 10.0  # at most one line a direction (full, writable again) this often
MAX_QUEUED = 1000  # requests awaiting their answer on one connection before the server stops reading it
OUT_HIGH_WATER = 1 << 20  # answers from one read written out before more frames of it are handled
# The frames read in one turn of the loop are handled for about this long, whichever connections they came from (each
# read's first four frames are always handled); the rest wait for a later turn, so a pipelined burst from one peer
# (5,000 KIP-848 joins in one write), or from many (ten connections each pipelining 10,000 commits), takes turns
# with every other connection.
TURN_BUDGET_S = 0.005
# A request frame above this is decoded on the server's worker thread, not on the loop (Kafka's request handler
# threads); for an OffsetCommit the catalogue's part of the answer is made there too (Offsets.plan_commit), and a
# long answer (a Deferred) is made and encoded there. Only the group's part runs on the loop. The codec lets the
# loop take the GIL every few thousand array elements, so the worker never holds the loop back for long.
OFFLOAD_ABOVE = 256 << 10


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: Server, listener: Listener | None = None) -> None:
        self.server = server
        self.reader = wire.FrameReader(server.config.max_frame_size)
        self.listener = listener  # the listener it came in on (None: an in-process caller's)
        self.principal = ANONYMOUS  # who it authenticated as (a certificate's subject, a SASL user); `is`-compared
        self.noted_group = self.noted_member = ""  # the member whose principal was last noted (Coordinator.note_principal)
        # With an authorizer: the (API key, group id) pairs of TRUSTABLE APIs this connection's principal may use,
        # handed straight to their handlers (kcoord.security.gates checks the rest); emptied on any ACL change
        self.trusted: set[tuple[int, str]] | None = set() if server.gates is not None else None
        self.sasl: SaslSession | None = None  # on a SASL listener: the exchange, then the session
        if listener is not None and listener.sasl:
            cfg = server.config
            mechanisms = cfg.enabled_mechanisms()
            self.sasl = SaslSession(listener.name, mechanisms, server.credential,
                                    {m: cfg.reauth_ms(listener.name, m) for m in mechanisms})
            self.reader.max_frame_size = min(cfg.sasl_server_max_receive_size, cfg.max_frame_size)
        # set by connection_made, which asyncio calls before any other method
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.queue: deque = deque()  # [reply, api_key, version, correlation id] awaiting their turn
        self.out: list[bytes] = []  # responses of the frames in hand, written together
        self.needs: list[int] = []  # with a group commit (DurableConnection): the batch each of `out` waits for
        self.host = ""
        self.last_active = 0.0
        self.writing_paused = False  # the transport's write buffer is over its high-water mark
        self.reading_paused = False
        self.out_size = 0  # bytes in `out`
        self.backlog: deque | None = None  # frames read but not handled while answers cannot leave
        self.stats = server.request_stats  # None when the metrics endpoint is off
        self.read_at = 0.0  # when the frames in hand were read (stats_clock), for their latency
        self.ip: str | None = None  # the peer's address once admitted (counted in the server's ConnectionLimits)
        self.frame_bytes = 0  # what this connection's unfinished frame holds, counted in Server.frame_bytes
        self.frame_started = 0.0  # loop time the unfinished frame's first bytes arrived (0: none)
        self.muted = False  # not read while the unfinished frames of all connections hold queued.max.request.bytes
        self.reserved = 0  # what its next read may take, counted in Server.reserved
        self.offloading = False  # a request of this connection is on the server's worker: its later frames wait

    # ---- asyncio protocol ------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        srv = self.server
        peer = transport.get_extra_info("peername")
        ip = peer[0] if peer else ""
        refused = srv.limits.admit(ip, len(srv.connections), srv.loop.time())
        if refused is not None:
            srv.refusals.warning("refusing a connection from %s: %s", ip, refused)
            transport.abort()
            return
        self.ip = ip
        if self.listener is not None and self.listener.protocol == "SSL":
            from .security.tls import peer_principal

            try:
                # (every SSL listener has its mapper, made with its context)
                self.principal = peer_principal(transport.get_extra_info("ssl_object"),
                                                srv.principal_mappers.get(self.listener.name))  # type: ignore[arg-type]
            except Exception as e:  # Kafka: no rule maps the subject -> the connection fails
                log.warning("closing %s on listener %s: %s", ip, self.listener.name, e)
                transport.abort()
                return
            if self.principal is not ANONYMOUS:  # a client certificate: logged as a SASL login is
                log.info("/%s authenticated as %s on listener %s with a certificate", ip, self.principal,
                         self.listener.name, extra={"kcoord": {"event": "authenticated", "principal": self.principal,
                                                               "client": f"/{ip}", "listener": self.listener.name,
                                                               "mechanism": "SSL"}})
        srv.connections.add(self)
        srv.connections_accepted += 1
        self.host = f"/{ip}" if peer else ""
        self.last_active = srv.loop.time()

    def pause_writing(self) -> None:
        # A peer that does not read its answers stops being read (Kafka mutes such a channel): what the server
        # holds for one connection is bounded by the transport's high-water mark plus one read.
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.backlog:
            self.server.loop.call_soon(self.drain)
        else:
            self._update_reading()

    def drain(self) -> None:
        """Handle the frames set aside while the answers could not leave (the peer did not read, or the store
        held them), now that they can."""
        if not self.backlog or self.writing_paused or self.out or self.offloading or self.transport is None or \
                self.transport.is_closing():
            return
        frames, self.backlog = list(self.backlog), None
        self._handle(frames)
        self._update_reading()

    def _update_reading(self) -> None:
        pause = self.writing_paused or len(self.queue) >= MAX_QUEUED or bool(self.backlog) or self.muted or \
            self.offloading or (self.sasl is not None and self.sasl.state == FAILED)
        t = self.transport
        if pause != self.reading_paused and t is not None and not t.is_closing():
            self.reading_paused = pause
            if pause:
                t.pause_reading()
            else:
                t.resume_reading()

    def connection_lost(self, exc) -> None:
        gcpolicy.release_transport(self.transport)
        srv = self.server
        if self in srv.connections:
            srv.connections.discard(self)
            srv.limits.release(self.ip)
        self.queue.clear()  # parked replies are still answered by the group, to nobody
        self._count_frame(0)
        if self.muted:
            self.muted = False
            srv.muted.discard(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            buf = self.reader.get_buffer(sizehint)
        except wire.FrameError:
            self.transport.abort()
            return memoryview(bytearray(4096))  # the transport is closing; what lands here is dropped
        if self.frame_started:
            self._count_frame(self.reader.capacity, mute=False)  # muted from buffer_updated, never mid-read
        return buf

    def next_growth(self) -> int:
        """What this connection's unfinished frame may take more at its next read, at most: the reader grows a
        buffer to twice what has arrived (at least by 64 KiB), toward the frame's declared size (not known here)."""
        if not self.frame_bytes:
            return 0
        pending = self.reader.pending
        return max(min(self.server.config.max_frame_size + 4, max(2 * pending, pending + 65536)) - self.frame_bytes, 0)

    def _reserve(self) -> int:
        """Keep what this connection's next read may take in the server's reservation (nothing while it is muted
        or holds no unfinished frame): a connection is muted when what all are holding and may take at their next
        reads passes the bound, so reads that each fit cannot together overshoot it."""
        grow = self.next_growth() if not self.muted else 0
        self.server.reserved += grow - self.reserved
        self.reserved = grow
        return grow

    def _count_frame(self, held: int, mute: bool = True) -> None:
        """This connection's unfinished frame now holds `held` bytes of buffer: keep the server's total, mute this
        connection once the total passes queued.max.request.bytes (Kafka mutes a channel when its memory pool is
        spent), and unmute the others once it falls back under."""
        srv = self.server
        delta = held - self.frame_bytes
        if not delta and not mute:
            return
        self.frame_bytes = held
        srv.frame_bytes += delta
        if srv.frame_bytes > srv.frame_bytes_peak:
            srv.frame_bytes_peak = srv.frame_bytes
        limit = srv.config.queued_max_request_bytes
        if limit < 0:
            return
        grow = self._reserve()
        if mute and srv.frame_bytes + srv.reserved > limit and held and not self.muted and \
                any(c.frame_bytes and not c.muted for c in srv.connections if c is not self):
            # muted before a read that would take the total past the bound, while another unmuted connection holds
            # part of it: one that finishes frees room (a connection is never muted when every other holder is, so
            # some request always makes progress)
            self.muted = True
            srv.muted.add(self)
            self._reserve()
            srv.refusals.warning("not reading %s for now: unfinished requests hold %d bytes and its next read may "
                                 "take %d more, above queued.max.request.bytes (%d)", self.host, srv.frame_bytes,
                                 grow, limit)
            self._update_reading()
            srv.watch_muted()
        elif delta < 0 and srv.muted and not srv.unmuting:
            srv.unmuting = True
            srv.loop.call_soon(srv.unmute)  # not from inside this connection's read

    def buffer_updated(self, nbytes: int) -> None:
        srv = self.server
        self.last_active = srv.loop.time()
        srv.bytes_in += nbytes
        if self.stats is not None:
            self.read_at = stats_clock()
        try:
            frames = self.reader.buffer_updated(nbytes)
        except wire.FrameError as e:
            log.info("closing %s: %s", self.host, e)
            self.transport.abort()
            return
        if self.reader.pending:  # a frame not yet whole: it counts toward queued.max.request.bytes and its deadline
            if not self.frame_started or frames:
                self.frame_started = self.last_active
            self._count_frame(self.reader.capacity)
        elif self.frame_started:
            self.frame_started = 0.0
            self._count_frame(0)
        if self.backlog or self.offloading:  # behind the frames already waiting, or the request on the worker
            if self.backlog is None:
                self.backlog = deque()
            self.backlog.extend(frames)
            return
        self._handle(frames)

    def _handle(self, frames: list[bytes]) -> None:
        if self.principal is ANONYMOUS:
            self._handle_frames(frames)
            return
        REQUEST_PRINCIPAL[0] = self.principal  # the group events these requests cause name who sent them
        try:
            self._handle_frames(frames)
        finally:
            REQUEST_PRINCIPAL[0] = None

    def _handle_frames(self, frames: list[bytes]) -> None:
        out = self.out
        srv = self.server
        deadline = srv.turn_deadline
        if not deadline:  # the first frames of this turn of the loop: its budget starts now, for every connection
            deadline = srv.turn_deadline = perf_counter() + TURN_BUDGET_S
            srv.loop.call_soon(srv.new_turn)
        for i, frame in enumerate(frames):
            if not self.handle(frame):
                self._write()
                self.transport.close()
                return
            if self.offloading:  # the rest wait until the worker's request has been handled (request order)
                self._write()
                if i + 1 < len(frames):
                    self.backlog = deque(frames[i + 1:])
                self._update_reading()
                break
            if self.out_size > OUT_HIGH_WATER and i + 1 < len(frames):
                # Many or large answers from one read: write them before handling more, and set the rest aside
                # while they cannot leave, so a read of small requests cannot make unbounded answers.
                self._write()
                if out or self.writing_paused:
                    self.backlog = deque(frames[i + 1:])
                    self._update_reading()
                    break
            elif i & 3 == 3 and i + 1 < len(frames) and perf_counter() > deadline:
                # This read has had its turn: the rest of its frames wait for a later one (not read meanwhile)
                self._write()
                self.backlog = deque(frames[i + 1:])
                self._update_reading()
                self.server.loop.call_soon(self._resume)
                break
        if out:
            self._write()
        self.server.rearm_timer()

    def _resume(self) -> None:
        """Go on with the frames a read left for a later turn (`_handle`); answers still waiting for their write do
        not hold them back (`drain` takes over when the peer does not read)."""
        if not self.backlog or self.writing_paused or self.offloading or self.transport is None or \
                self.transport.is_closing():
            return
        frames, self.backlog = list(self.backlog), None
        self._handle(frames)
        self._update_reading()

    def _write(self) -> None:
        out = self.out
        if out:
            srv = self.server
            if srv.store.dirty:  # what a response acknowledges is durable before any response leaves
                srv.held.add(self)
                return
            data = out[0] if len(out) == 1 else b"".join(out)
            self.transport.write(data)
            srv.bytes_out += len(data)
            out.clear()
            self.out_size = 0

    # ---- requests --------------------------------------------------------------------------------

    def handle(self, frame: bytes) -> bool:
        """Answer (or park) one request; False closes the connection."""
        t0 = self.read_at
        srv = self.server
        sasl = self.sasl
        if sasl is not None and (sasl.state != COMPLETE or sasl.expires_at is not None):
            verdict = self._sasl_gate(frame, t0)
            if verdict is not None:
                return verdict
        if self.listener is not None:
            srv.broker.listener = self.listener.name
        if srv.key_map is not None:
            frame = srv.key_map.to_codec(frame)
        if len(frame) > OFFLOAD_ABOVE and srv.worker is not None and self._offload(frame, t0):
            return True
        try:
            header, body = wire.decode_request(frame)
            self.body = body  # (what a DurableConnection's OffsetFetch answer waits for is read from it)
        except wire.UnsupportedVersionError as e:
            if e.api_key == API_VERSIONS_KEY:
                self.respond(srv.broker.unsupported_api_versions(), API_VERSIONS_KEY, 0, e.correlation_id, t0)
                return True
            log.info("closing %s: %s", self.host, e)
            return False
        except wire.DecodeError as e:
            log.info("closing %s: malformed request: %s", self.host, e)
            return False
        key = header.request_api_key
        handler = srv.handlers.get(key)
        if handler is None:
            log.info("closing %s: API %d is not served", self.host, key)
            return False
        version = header.request_api_version
        try:
            trusted = self.trusted
            if trusted is not None and key in TRUSTABLE:  # a group member's steady calls: checked once
                if (key, body.group_id) in trusted and (  # type: ignore[attr-defined]  # (TRUSTABLE's have)
                        key != CONSUMER_HEARTBEAT_KEY or not body.subscribed_topic_names):  # type: ignore[attr-defined]
                    handler = srv.trusted_handlers[key]
                else:
                    handler = self._trusted(key, body, handler)
            response = handler(body, version, header.client_id or "", self.host)
            if key in MEMBER_KEYS and self.principal is not ANONYMOUS:
                self._note_member(body)
            if response is not None:  # None: Produce with acks=0 is never answered
                self.respond(response, key, version, header.correlation_id, t0)
        except wire.DecodeError as e:  # decoded, but invalid as Kafka parses it (an ACL request's UNKNOWN enum)
            log.info("closing %s: malformed request: %s", self.host, e)
            return False
        except Exception:
            log.exception("closing %s: API %d v%d failed", self.host, key, version)
            return False
        return True

    def _trusted(self, key: int, body, gated):
        """The handler for a TRUSTABLE request: its own, unchecked, when this connection's principal may READ the
        group (decided once per group and connection until the ACLs change); else the gated one, which refuses and
        audits. A KIP-848 heartbeat naming topics is always checked (their DESCRIBE too)."""
        if key == CONSUMER_HEARTBEAT_KEY and body.subscribed_topic_names:
            return gated
        trusted = self.trusted
        pair = (key, body.group_id)
        gates = self.server.gates
        if not gates.may_read(self.principal, self.host, body.group_id):  # type: ignore[union-attr]
            return gated
        if len(trusted) >= MAX_TRUSTED:  # type: ignore[arg-type]
            trusted.clear()  # type: ignore[union-attr]
        trusted.add(pair)  # type: ignore[union-attr]
        return self.server.trusted_handlers[key]

    # ---- authentication (SASL listeners) --------------------------------------------------------------

    def _sasl_gate(self, frame, t0: float) -> bool | None:
        """A frame on a SASL listener before (or while re-doing) authentication, or once its session may have
        expired: True or False as `handle` returns, or None to handle it as any request (as Kafka's
        SaslServerAuthenticator lets only ApiVersions and the SASL exchange through before authentication)."""
        s: SaslSession = self.sasl  # type: ignore[assignment]  # (a SASL listener's connection)
        srv = self.server
        if s.state == FAILED:
            return True  # closing after connection.failed.authentication.delay.ms: nothing more is handled
        if s.state == RAW:  # after a v0 handshake the frame is the mechanism's token itself
            self._sasl_token(bytes(frame), None, t0)
            return True
        try:
            key, version, correlation_id = wire.peek_request(frame)
        except wire.DecodeError:
            log.info("closing %s: a frame that is no request before authentication", self.host)
            return False
        now = srv.loop.time()
        if s.state == COMPLETE:
            if key == SASL_HANDSHAKE_KEY:
                req = self._decode_sasl(frame)
                if req is None:
                    return False
                if s.begin_reauthentication(req.mechanism, now):
                    self.respond(wire.SaslHandshakeResponse(error_code=E.NONE, mechanisms=s.enabled),
                                 key, version, correlation_id, t0)
                    return True
                return None  # answered ILLEGAL_SASL_STATE by SASL_REFUSALS
            if s.expired(now):  # Kafka closes such a connection without an answer (expired-connections-killed)
                log.info("closing %s: its session on listener %s expired (connections.max.reauth.ms) and was not "
                         "renewed", self.host, s.listener)
                return False
            return None
        if key == API_VERSIONS_KEY and s.state == INITIAL:
            s.state = HANDSHAKE
            return None
        if key == SASL_HANDSHAKE_KEY and s.state in (INITIAL, HANDSHAKE):
            req = self._decode_sasl(frame)
            if req is None:
                return False
            if req.mechanism not in s.enabled:
                self._sasl_failed(wire.encode_response(key, version, correlation_id, wire.SaslHandshakeResponse(
                    error_code=E.UNSUPPORTED_SASL_MECHANISM, mechanisms=s.enabled)),
                    f"mechanism {req.mechanism!r} is not enabled", req.mechanism)
                return True
            s.begin(req.mechanism, version)
            self.respond(wire.SaslHandshakeResponse(error_code=E.NONE, mechanisms=s.enabled), key, version,
                         correlation_id, t0)
            return True
        if key == SASL_AUTHENTICATE_KEY and s.state == AUTHENTICATE:
            req = self._decode_sasl(frame)
            if req is None:
                return False
            self._sasl_token(req.auth_bytes, (version, correlation_id), t0)
            return True
        log.info("closing %s: API %d before authentication on listener %s", self.host, key, s.listener)
        return False

    def _decode_sasl(self, frame):
        try:
            return wire.decode_request(frame)[1]
        except (wire.DecodeError, wire.UnsupportedVersionError) as e:
            log.info("closing %s: %s", self.host, e)
            return None

    def _sasl_token(self, token: bytes, ctx: tuple[int, int] | None, t0: float) -> None:
        """Give the mechanism the client's token; `ctx` (version, correlation id) of its SaslAuthenticate, None for
        a raw token. A mechanism that derives keys (PLAIN: PBKDF2) runs on the auth threads, not the loop."""
        s: SaslSession = self.sasl  # type: ignore[assignment]  # (a SASL listener's connection)
        mech = s.mechanism
        if mech is None:  # a re-authentication asked for another mechanism (Kafka answers the handshake NONE)
            self._sasl_result(ctx, t0, None, SaslFailure(
                f"SASL mechanism '{s.requested}' requested by client is not supported for re-authentication of "
                f"mechanism '{s.mechanism_name}'", True))
            return
        if getattr(mech, "offload", False):
            srv = self.server
            self.offloading = True
            self._update_reading()
            job = srv.auth_pool.submit(_sasl_step, mech, token)  # type: ignore[union-attr]  # (made for SASL listeners)
            job.add_done_callback(lambda f: srv.on_loop(self._sasl_stepped, f, ctx, t0))
            return
        self._sasl_result(ctx, t0, *_sasl_step(mech, token))

    def _sasl_stepped(self, job, ctx: tuple[int, int] | None, t0: float) -> None:
        self.offloading = False
        if self.transport is None or self.transport.is_closing():
            return
        self._sasl_result(ctx, t0, *job.result())
        if self.backlog:
            self._resume()
        self._update_reading()

    def _sasl_result(self, ctx: tuple[int, int] | None, t0: float, out: bytes | None, exc) -> None:
        s: SaslSession = self.sasl  # type: ignore[assignment]  # (a SASL listener's connection)
        srv = self.server
        mech = s.mechanism
        # Without an exception the mechanism stepped (it exists), and once complete it names the principal
        if exc is None and mech.complete:  # type: ignore[union-attr]
            refused = s.finish(mech.principal_name, srv.loop.time())  # type: ignore[union-attr, arg-type]
            if refused is not None:
                exc = SaslFailure(refused, True)
            else:
                self.principal = s.principal  # type: ignore[assignment]  # (finished: it is set)
                if self.trusted is not None:
                    self.trusted.clear()  # what was trusted was another principal's (a re-authentication)
                self.reader.max_frame_size = srv.config.max_frame_size
                srv.auth_results[(s.listener, s.mechanism_name, "success")] += 1
                log.info("%s authenticated as %s on listener %s with %s", self.host, s.principal, s.listener,
                         s.mechanism_name, extra={"kcoord": {"event": "authenticated", "principal": s.principal,
                                                             "client": self.host, "listener": s.listener,
                                                             "mechanism": s.mechanism_name}})
        if exc is not None:
            message = exc.message if exc.client_visible else (
                f"Authentication failed during {'re-' if s.reauthenticating else ''}authentication due to invalid "
                f"credentials with SASL mechanism {s.mechanism_name}")
            data = None
            if ctx is not None:
                version, correlation_id = ctx
                data = wire.encode_response(SASL_AUTHENTICATE_KEY, version, correlation_id,
                                            wire.SaslAuthenticateResponse(error_code=E.SASL_AUTHENTICATION_FAILED,
                                                                          error_message=message, auth_bytes=b""))
            self._sasl_failed(data, message, s.mechanism_name)
            return
        assert out is not None  # a step without an exception answers a token (maybe empty)
        if ctx is None:  # a raw token after a v0 handshake: answered in a raw frame, even an empty one
            self._out_raw(struct.pack(">i", len(out)) + out)
        else:
            version, correlation_id = ctx
            self.respond(wire.SaslAuthenticateResponse(
                error_code=E.NONE, error_message=None, auth_bytes=out,
                session_lifetime_ms=s.lifetime_ms if s.state == COMPLETE else 0), SASL_AUTHENTICATE_KEY, version,
                correlation_id, t0)
        self._write()

    def _out_raw(self, data: bytes) -> None:
        self.out.append(data)
        self.out_size += len(data)

    def _sasl_failed(self, data: bytes | None, why: str, mechanism: str | None) -> None:
        """Authentication failed: nothing more is read or answered, and after connection.failed.authentication.delay.ms
        the failure's answer (if any) is written and the connection closed, as Kafka does."""
        s: SaslSession = self.sasl  # type: ignore[assignment]  # (a SASL listener's connection)
        srv = self.server
        s.state = FAILED
        self._update_reading()
        srv.auth_results[(s.listener, mechanism or "", "failure")] += 1
        srv.refusals.warning("authentication of %s failed on listener %s with %s: %s", self.host, s.listener,
                             mechanism, why)
        srv.loop.call_later(srv.config.failed_authentication_delay_ms / 1000, self._close_failed, data)

    def _close_failed(self, data: bytes | None) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        self._write()
        if data is not None:
            t.write(data)
        t.close()

    # ---- a large request, on the server's worker ------------------------------------------------------

    def _note_member(self, body) -> None:
        """A member is known by who it authenticated as: noted once for each member a connection speaks for (not
        at every heartbeat: that was a quarter of its cost)."""
        if body.member_id != self.noted_member or body.group_id != self.noted_group:
            self.noted_group, self.noted_member = body.group_id, body.member_id
            self.server.coordinator.note_principal(body.group_id, body.member_id, self.principal)

    def _offload(self, frame: bytes, t0: float) -> bool:
        """Send a large request to the server's worker to be decoded (and prepared) off the loop; its answer keeps
        its place as a parked reply, and this connection's later frames wait until it has been handled. False
        when the inline path should take it (a header it would refuse: it closes or answers as for any frame)."""
        srv = self.server
        try:
            key, version, correlation_id = wire.peek_request(frame)
        except wire.DecodeError:
            return False
        if key not in srv.handlers or not wire.is_supported(key, version):
            return False
        reply = Reply(version=version)
        self.respond(reply, key, version, correlation_id, t0)
        self.offloading = True
        srv.offloaded += 1
        self._update_reading()
        size = len(frame)
        srv.offload_bytes(size)  # counted in queued.max.request.bytes until it has been handled
        prepared = srv.prepared.get(key)
        job = srv.worker.submit(_decode_off_loop, frame, prepared)
        job.add_done_callback(lambda f: srv.on_loop(self._decoded, f, reply, key, version, size))
        return True

    def _decoded(self, job, reply: Reply, key: int, version: int, size: int) -> None:
        """On the loop: the worker decoded (and prepared) the request; handle it as `handle` would."""
        srv = self.server
        srv.offload_bytes(-size)
        self.offloading = False
        if self.transport is None or self.transport.is_closing():
            return
        try:
            header, body, plan = job.result()
        except wire.DecodeError as e:
            log.info("closing %s: malformed request: %s", self.host, e)
            self._abort_offloaded()
            return
        except Exception:
            log.exception("closing %s: API %d v%d could not be decoded", self.host, key, version)
            self._abort_offloaded()
            return
        prepared = srv.prepared.get(key)
        if self.listener is not None:  # as `handle` does: the answer names this request's listener
            srv.broker.listener = self.listener.name
        REQUEST_PRINCIPAL[0] = self.principal
        try:
            if prepared is not None:
                prepared.planned = (body, plan)
            response = srv.handlers[key](body, version, header.client_id or "", self.host)
            if key in MEMBER_KEYS and self.principal is not ANONYMOUS:
                self._note_member(body)
        except wire.DecodeError as e:
            log.info("closing %s: malformed request: %s", self.host, e)
            self._abort_offloaded()
            return
        except Exception:
            log.exception("closing %s: API %d v%d failed", self.host, key, version)
            self._abort_offloaded()
            return
        finally:
            REQUEST_PRINCIPAL[0] = None
            if prepared is not None:
                prepared.planned = None
        self._answer_offloaded(reply, response, key, version, header.correlation_id)
        srv.rearm_timer()
        if self.backlog:
            self._resume()
        self._update_reading()

    def _answer_offloaded(self, reply: Reply, response, key: int, version: int, correlation_id: int) -> None:
        if type(response) is Reply:
            if not response.done:
                response.on_done(lambda r: self._answer_offloaded(reply, r, key, version, correlation_id))
                return
            response = response.response
        if response is None:  # never answered (Produce with acks=0): its place in the queue goes
            for i, entry in enumerate(self.queue):
                if entry[0] is reply:
                    del self.queue[i]
                    break
            self._flush()
            return
        if type(response) is Deferred:  # made and encoded on the worker too
            srv = self.server
            job = srv.worker.submit(_finish_off_loop, response, key, version, correlation_id)
            job.add_done_callback(lambda f: srv.on_loop(self._finished, f, reply, key, version))
            return
        reply.resolve(response)

    def _finished(self, job, reply: Reply, key: int, version: int) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        try:
            encoded = job.result()
        except Exception:
            log.exception("closing %s: the answer to API %d v%d could not be made", self.host, key, version)
            self._abort_offloaded()
            return
        reply.resolve(encoded)

    def _abort_offloaded(self) -> None:
        self._write()
        if self.transport is not None:
            self.transport.abort()

    # ---- answers ---------------------------------------------------------------------------------

    def respond(self, response, key: int, version: int, correlation_id: int, t0: float) -> None:
        """Encode `response` into the answers to write, or queue it behind a parked one (`t0`: when the request
        was read, for its latency)."""
        if type(response) is Reply and not response.done:
            self.queue.append((response, key, version, correlation_id, t0))
            response.on_done(self._flush)
            if len(self.queue) >= MAX_QUEUED:
                self._update_reading()
            return
        if type(response) is Reply:
            response = response.response
        if self.queue:
            self.queue.append((response, key, version, correlation_id, t0))
            return
        if type(response) is Deferred:
            response = response.finish()
        data = wire.encode_response(key, version, correlation_id, response)
        self.out.append(data)
        self.out_size += len(data)
        if self.stats is not None:
            self.stats.observe(key, version, response, t0)

    def _flush(self, _=None) -> None:
        # Called when a parked reply is answered, from inside the group's state change: never raise here.
        q = self.queue
        out = []
        keys = []
        try:
            while q:
                response, key, version, corr, t0 = q[0]
                if type(response) is Reply:
                    if not response.done:
                        break
                    response = response.response
                q.popleft()
                if type(response) is Encoded:  # made on the worker
                    data, response = response.data, response.response
                else:
                    if type(response) is Deferred:
                        response = response.finish()
                    data = wire.encode_response(key, version, corr, response)
                out.append(data)
                keys.append(key)
                self.out_size += len(data)
                if self.stats is not None:
                    self.stats.observe(key, version, response, t0)
        except Exception:
            log.exception("closing %s: a parked response could not be encoded", self.host)
            q.clear()
            if self.transport is not None:
                self.transport.abort()
            return
        if out and self.transport is not None and not self.transport.is_closing():
            self._flushed(out, keys)
        if self.reading_paused:
            self._update_reading()

    def _flushed(self, out: list[bytes], keys: list[int]) -> None:
        """The answers `_flush` took from the queue (`keys`: their APIs), to write after those of earlier frames."""
        self.out.extend(out)
        self._write()


class Encoded:
    """A response made and encoded on the server's worker: the frame to write, and the response (for the stats)."""

    __slots__ = ("data", "response")

    def __init__(self, data: bytes, response) -> None:
        self.data = data
        self.response = response


def _decode_off_loop(frame: bytes, prepared) -> tuple:
    """On the worker: decode a large request, and make what its handler can take ready-made (`prepared.prepare`)."""
    header, body = wire.decode_request(frame)
    plan = prepared.prepare(body, header.request_api_version) if prepared is not None else None
    return header, body, plan


def _finish_off_loop(deferred: Deferred, key: int, version: int, correlation_id: int) -> Encoded:
    """On the worker: make a Deferred's response, encode it, and free what it and its request held (here, not on
    the loop: two million small objects take a while to free). The loop keeps only what the request stats read."""
    response = deferred.finish()
    data = wire.encode_response(key, version, correlation_id, response)
    if deferred.dispose is not None:
        deferred.dispose()
    cls = type(response)
    outcome = cls(error_code=response.error_code) if hasattr(cls, "error_code") else cls()
    return Encoded(data, outcome)


def _sasl_step(mechanism, token: bytes) -> tuple[bytes | None, SaslFailure | None]:
    """One step of a SASL mechanism: (its token, None) or (None, the failure); on the auth threads for PLAIN."""
    try:
        return mechanism.step(token), None
    except SaslFailure as e:
        return None, e
    except Exception:  # a defect in a mechanism fails the authentication, never the server
        log.exception("a SASL %s step failed", getattr(mechanism, "name", "?"))
        return None, SaslFailure("Authentication failed", True)


SASL_HANDSHAKE_KEY = 17  # SaslHandshake (wire.SaslHandshakeRequest.API_KEY)
SASL_AUTHENTICATE_KEY = 36  # SaslAuthenticate
# Kafka's KafkaApis answers for the SASL APIs outside an exchange (a connection already authenticated, or a
# listener without SASL): ILLEGAL_SASL_STATE.
SASL_REFUSALS = {
    SASL_HANDSHAKE_KEY: lambda req, version, client_id="", client_host="": wire.SaslHandshakeResponse(
        error_code=E.ILLEGAL_SASL_STATE, mechanisms=[]),
    SASL_AUTHENTICATE_KEY: lambda req, version, client_id="", client_host="": wire.SaslAuthenticateResponse(
        error_code=E.ILLEGAL_SASL_STATE, error_message="SaslAuthenticate request received after successful "
        "authentication", auth_bytes=b""),
}


class DurableConnection(KafkaConnection):
    """A connection of a server whose store writes on its writer thread (the group commit, Server.writer): each
    response waits only for the batch that holds what it acknowledges, not for every write under way.

    `needs[i]` is the batch `out[i]` waits for, never below the one before it (responses on one connection leave
    in request order). A response whose handler staged records waits for the batch they went into; an OffsetFetch
    waits for the newest batch that staged a record of a group it reads (`GroupStore.group_seq`), since it may have
    read offsets that batch holds: it answers only durable ones, as Kafka's coordinator reads its offsets cache,
    which holds a commit only once appended (an offset read before its write failed would be lost after it was
    seen); one whose handler staged nothing and read nothing unwritten (a Heartbeat) needs nothing of its own; a
    parked one answered later (JoinGroup, SyncGroup) waits for the newest batch staged or being written when it is
    answered, except a held Fetch, which acknowledges nothing."""

    staged0 = 0  # the store's count of staged records when the request in hand arrived
    body: Any = None  # the request in hand, decoded (None: not decoded here)

    def handle(self, frame: bytes) -> bool:
        self.staged0 = self.server.store.staged  # type: ignore[union-attr]  # (a GroupStore, as above)
        self.body = None
        return KafkaConnection.handle(self, frame)

    def _read_need(self, version: int) -> int:
        """The batch an OffsetFetch's answer waits for: the newest that staged a record of a group it read (the
        newest staged or written at all when the request is not known here: one handled off the loop)."""
        store: GroupStore = self.server.store  # type: ignore[assignment]  # (with a writer: a GroupStore)
        body = self.body
        if body is None:
            return store.newest
        staged = store.group_seq
        if not staged:
            return 0
        ids = [body.group_id or ""] if version <= 7 else [g.group_id for g in body.groups or ()]
        return max((staged.get(gid.encode("utf-8", "surrogateescape"), 0) for gid in ids), default=0)

    def respond(self, response, key: int, version: int, correlation_id: int, t0: float) -> None:
        out = self.out
        n = len(out)
        KafkaConnection.respond(self, response, key, version, correlation_id, t0)
        if len(out) > n:  # answered now (not parked, nor queued behind a parked one)
            store: GroupStore = self.server.store  # type: ignore[assignment]  # (with a writer: a GroupStore)
            need = store.seq if store.staged != self.staged0 else self._read_need(version) if key == OFFSET_FETCH_KEY \
                else 0
            needs = self.needs
            if needs and needs[-1] > need:
                need = needs[-1]
            needs.append(need)

    def _flushed(self, out: list[bytes], keys: list[int]) -> None:
        # What each answer leaving the queue waits for: a held Fetch (answered by its timer) acknowledges nothing;
        # anything else, the newest batch (it may have staged, or been answered by a change that staged).
        newest = self.server.store.newest  # type: ignore[union-attr]  # (a GroupStore, as above)
        needs = self.needs
        if len(needs) < len(self.out):  # not expected: whatever lacks one waits for the newest batch
            needs.extend([max(newest, needs[-1] if needs else 0)] * (len(self.out) - len(needs)))
        last = needs[-1] if needs else 0
        for key in keys:
            need = 0 if key == FETCH_KEY else newest
            last = need if need > last else last
            needs.append(last)
        self.out.extend(out)  # after the answers to earlier frames of the batch in hand
        self._write()

    def _write(self) -> None:
        out = self.out
        if not out:
            return
        srv = self.server
        store: GroupStore = srv.store  # type: ignore[assignment]  # (with a writer: a GroupStore)
        needs = self.needs
        if len(needs) < len(out):  # not expected (`respond` and `_flush` give each answer its need)
            need = store.newest
            if needs and needs[-1] > need:
                need = needs[-1]
            needs.extend([need] * (len(out) - len(needs)))
        durable = store.durable
        if needs[-1] <= durable:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            needs.clear()
            self.out_size = 0
        else:
            srv.held.add(self)  # written by Server._written when its batch is durable
            n = bisect_right(needs, durable)
            if not n:
                return
            data = b"".join(out[:n])
            del out[:n]
            del needs[:n]
            self.out_size -= len(data)
        self.transport.write(data)
        srv.bytes_out += len(data)


MUTED_WATCH_S = 0.5  # how often muted connections are looked at for a peer that has gone


def peer_closed(transport) -> bool:
    """Whether the peer of a connection that is not being read has closed it, a look at the socket that takes no
    byte from it: on Linux poll's POLLRDHUP, which sees the close behind bytes not read yet; elsewhere whether the
    next read would end the stream."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or transport.is_closing():
        return False
    try:
        fd = sock.fileno()
        rdhup = getattr(select, "POLLRDHUP", 0)
        if rdhup:
            p = select.poll()
            p.register(fd, rdhup)
            return any(ev & (rdhup | select.POLLHUP | select.POLLERR) for _, ev in p.poll(0))
        with socket.socket(fileno=os.dup(fd)) as s:  # uvloop's socket object does not recv
            return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class RateLimitedLog:
    """Warnings a peer can cause as often as it likes (refused connections, muted reads): the first of each kind is
    logged at once, then at most one every `interval` seconds, saying how many were left out meanwhile."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0, clock=None) -> None:
        self.log = logger
        self.interval = interval
        self.clock = clock or (lambda: perf_counter())
        self.next_at: dict[str, float] = {}
        self.skipped: dict[str, int] = {}

    def warning(self, fmt: str, *args) -> None:
        now = self.clock()
        if now < self.next_at.get(fmt, 0.0):
            self.skipped[fmt] = self.skipped.get(fmt, 0) + 1
            return
        self.next_at[fmt] = now + self.interval
        skipped = self.skipped.pop(fmt, 0)
        if skipped:
            self.log.warning(fmt + " (and %d more like it in the last %g s)", *args, skipped, self.interval)
        else:
            self.log.warning(fmt, *args)


# File descriptors kept for what is not a client connection (the listening sockets, the store, the metrics
# endpoint, a cluster's PostgreSQL sessions): connections past the open-file limit less these are refused,
# so accept() never runs out of descriptors.
RESERVED_FDS = 64


def raise_file_limit() -> int:
    """Raise the soft limit on open files to the hard one (as Kafka's start scripts advise operators to); the
    soft limit in force after it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and soft != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 2**31 - 1


class ConnectionLimits:
    """Who may connect (Kafka's SocketServer ConnectionQuotas): max.connections (capped by the open-file limit),
    max.connections.per.ip with its overrides, max.connection.creation.rate (a token bucket a second deep). A
    connection over a limit is closed at once; Kafka's acceptor delays one over the creation rate instead."""

    def __init__(self, cfg: ServerConfig, open_files: int) -> None:
        self.max_total = min(cfg.max_connections, max(open_files - RESERVED_FDS, 1))
        self.per_ip = cfg.max_connections_per_ip
        self.overrides = cfg.ip_overrides()
        self.rate = cfg.max_connection_creation_rate
        self.tokens = float(self.rate)
        self.filled_at = 0.0
        self.by_ip: dict[str, int] = {}
        self.refused: dict[str, int] = {}  # refusals by the limit met (kcoord_connections_refused)

    def admit(self, ip: str, open_now: int, now: float) -> str | None:
        """Count a new connection from `ip`, or the reason it is refused."""
        if open_now >= self.max_total:
            return self._refuse("max.connections", f"max.connections ({self.max_total}) reached")
        limit = self.overrides.get(ip, self.per_ip)
        if self.by_ip.get(ip, 0) >= limit:
            return self._refuse("max.connections.per.ip", f"max.connections.per.ip ({limit}) reached for {ip}")
        if self.rate < 2**31 - 1:
            self.tokens = min(float(self.rate), self.tokens + (now - self.filled_at) * self.rate)
            self.filled_at = now
            if self.tokens < 1.0:
                return self._refuse("max.connection.creation.rate",
                                    f"max.connection.creation.rate ({self.rate}/s) exceeded")
            self.tokens -= 1.0
        self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
        return None

    def _refuse(self, limit: str, why: str) -> str:
        self.refused[limit] = self.refused.get(limit, 0) + 1
        return why

    def release(self, ip: str | None) -> None:
        if ip is None:
            return
        n = self.by_ip.get(ip, 0) - 1
        if n > 0:
            self.by_ip[ip] = n
        else:
            self.by_ip.pop(ip, None)


class PrivateKeys:
    """kcoord's private API keys (connect groups) when group.connect.api.key.base moves them: the codec knows them
    at 1000-1003; a request at base+i is decoded as 1000+i, and one at 1000+i (no longer served) as an unknown key."""

    COUNT = 4

    def __init__(self, base: int) -> None:
        self.base = base
        self.codec = wire.ConnectGroupHeartbeatRequest.API_KEY

    def to_codec(self, frame: bytes) -> bytes:
        if len(frame) < 2:
            return frame
        key = frame[0] << 8 | frame[1]
        if self.base <= key < self.base + self.COUNT:
            return (key - self.base + self.codec).to_bytes(2, "big") + bytes(frame[2:])
        if self.codec <= key < self.codec + self.COUNT:
            return b"\x7f\xff" + bytes(frame[2:])  # an API nobody serves: the connection is closed
        return frame

    def advertised(self, key: int) -> int:
        return key - self.codec + self.base if self.codec <= key < self.codec + self.COUNT else key


class Server:
    def __init__(self, config: ServerConfig | None = None, clock: Clock | None = None,
                 records: Records | None = None) -> None:
        """`records`: a store backend to use instead of the one `config.data_dir` names (embedding, tests)."""
        self.config = cfg = config or ServerConfig()
        self.clock = clock or Clock()
        self.topics = TopicCatalogue(cfg.auto_create_topics, cfg.num_partitions,
                                     topic_max_partitions=cfg.topic_max_partitions, max_partitions=cfg.max_partitions)
        self.store: GroupStore | NullStore = NullStore()
        self.loaded: LoadStats | None = None
        self.cluster: Cluster | None = None
        if records is None and cfg.store_url is not None:
            from .cluster import Cluster  # psycopg is imported only for a PostgreSQL store
            self.cluster = Cluster(self, cfg.store_url)
            if cfg.listeners:  # registered with its listeners from the start when their ports are known (not 0):
                known = {x.name: x.address() for x in cfg.listener_list()}  # else the first lease round adds them
                if all(port for _, port in known.values()):
                    self.cluster.listeners = known
            records = self.cluster.open()
        if records is None and cfg.data_dir is not None:
            records = SqliteRecords(cfg.data_dir, cfg.store_fsync)
        if records is not None:
            self.store = GroupStore(records, self.clock.wall_ms)
        self.coordinator = Coordinator(cfg.group, self.clock, store=self.store, topics=self.topics)
        self.coordinator.acls.configure(cfg.authorizing, parse_super_users(cfg.super_users),
                                        cfg.allow_everyone_if_no_acl_found)
        if records is not None:
            try:
                self.loaded = self.coordinator.load()
                over = self.topics.over_limits()
                if over is not None:
                    raise StoreError(f"the store holds what the partition bounds refuse: {over}; raise the bound "
                                     f"with --set to serve it (and delete the topic with `kcoord topics --delete`)")
            except BaseException:
                self.store.close()
                raise
            self.topics.on_change = self.store.write_topic
            self.topics.on_delete = self.store.delete_topic
        for spec in cfg.topics:
            name, partitions = parse_topic_spec(spec)
            if name not in self.topics:
                self.topics.create(name, partitions)
            elif partitions > self.topics.get(name).partitions:  # type: ignore[union-attr]  # (name is in it)
                self.topics.grow(name, partitions)
        self.store.commit()
        # One commit per event-loop turn: responses wait in `held` until it is done. On a store that waits for the
        # disk or a database (Records.write_off_loop: SQLite, a cluster's PostgreSQL) the write runs on one writer
        # thread while the loop goes on serving and staging the next batch (the group commit: `_hand_off`,
        # `_written`); one batch at a time, in order.
        self.coordinator.autocommit = False
        self.coordinator.slice_long_requests = True  # DeleteGroups / ListGroups of many groups yield to the loop
        self.store.on_dirty = self._schedule_commit
        self.held: set[KafkaConnection] = set()
        self.group_commit = getattr(records, "write_off_loop", False)
        self.writer: ThreadPoolExecutor | None = None  # the writer thread, once started
        # Made by start(), before any connection: None until then (declared once, for the checker, as what it is)
        self.worker: ThreadPoolExecutor = None  # type: ignore[assignment]  # decodes large requests off the loop
        self.offloaded = 0  # requests decoded on the worker since start
        self.turn_deadline = 0.0  # when this turn's handling budget runs out (0: no frame handled yet this turn)
        # What the worker may prepare for a handler, by API key (Offsets: an OffsetCommit's plan)
        self.prepared = {wire.OffsetCommitRequest.API_KEY: self.coordinator.offsets}
        self._writing: Future | None = None  # the write under way (on the writer thread)
        self._writing_batch: dict = {}  # what it writes
        self._closing = False  # close() is under way: nothing more is handed to the writer
        self._retry: asyncio.TimerHandle | None = None  # the next write attempt while the store is full
        self._full_since = 0.0
        self._writes_refused: dict = {}  # while full: the handlers the refusals replaced
        self._full_logged = {True: float("-inf"), False: float("-inf")}  # when each transition was last logged
        self._full_unlogged = 0
        self.limits = ConnectionLimits(cfg, 2**31 - 1)  # with the open-file limit once started
        self.refusals = RateLimitedLog(log)
        self.frame_bytes = 0  # held by unfinished frames of all connections (queued.max.request.bytes)
        self.frame_bytes_peak = 0  # the most they held at once
        self.reserved = 0  # what the next reads of the connections being read may take more (KafkaConnection._reserve)
        self.muted: set[KafkaConnection] = set()
        self.unmuting = False  # an unmute is scheduled
        self._muted_watch: asyncio.TimerHandle | None = None
        self.failed: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.broker: Broker = None  # type: ignore[assignment]  # made by start(), as the worker
        self.handlers: dict = {}
        self.gates: Gates | None = None  # when an authorizer is configured: every API's check
        self.trusted_handlers: dict = {}  # the unchecked handlers of TRUSTABLE's APIs (KafkaConnection._trusted)
        self.connections: set[KafkaConnection] = set()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # start()'s, as the worker
        self._server: asyncio.AbstractServer | None = None  # the first listener's
        self._servers: list[asyncio.AbstractServer] = []  # one per listener
        self.listeners: list[Listener] = []
        self.auth_pool: ThreadPoolExecutor | None = None  # PLAIN's key derivation, off the loop
        self.auth_results: Counter = Counter()  # (listener, mechanism, "success" | "failure") -> count
        self._tls_contexts: dict[str, ssl.SSLContext] = {}  # by listener name, for reload_tls_on_signal
        self.principal_mappers: dict[str, PrincipalMapper] = {}  # by listener name: ssl.principal.mapping.rules
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._reaper: asyncio.Task | None = None
        base = self.coordinator.config.group_connect_api_key_base
        self.key_map = PrivateKeys(base) if base != wire.ConnectGroupHeartbeatRequest.API_KEY else None
        # What the metrics endpoint reads (kcoord.metrics); the request path only adds to these. Requests are
        # counted and timed only when the endpoint is on, so a server without it pays nothing per request.
        self.request_stats = RequestStats(LATENCY_BUCKETS) if cfg.metrics_port is not None else None
        self.store_commit_seconds = Histogram(LATENCY_BUCKETS)
        self.bytes_in = self.bytes_out = self.connections_accepted = 0
        self.metrics: MetricsEndpoint | None = None

    @property
    def store_name(self) -> str | None:
        """Where the state is kept, for the log (a PostgreSQL URL without its password)."""
        if self.config.store_url is None:
            return self.config.data_dir
        from .pgstore import safe_url
        return safe_url(self.config.store_url)

    @property
    def ready(self) -> bool:
        """The store is loaded (it is, once constructed) and the server listens and has not failed."""
        return self._server is not None and self._server.is_serving() and self.failed is None

    @property
    def port(self) -> int:
        return self.config.port

    async def start(self) -> None:
        cfg = self.config
        self.loop = asyncio.get_running_loop()
        open_files = raise_file_limit()
        self.limits = ConnectionLimits(cfg, open_files)
        if self.limits.max_total < cfg.max_connections and cfg.max_connections != 2**31 - 1:
            log.warning("max.connections is %d but the open-file limit is %d: serving at most %d connections "
                        "(raise the hard limit, e.g. LimitNOFILE or ulimit -Hn)", cfg.max_connections, open_files,
                        self.limits.max_total)
        self.loop.set_exception_handler(self._loop_exception)
        # Bound now, accepting once everything below is in place (a cluster node: once it holds its partitions).
        if self.group_commit:
            self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-store")
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-worker")
        conn_type = DurableConnection if self.writer is not None else KafkaConnection
        self.listeners = cfg.listener_list()
        if any(x.sasl for x in self.listeners):
            self.auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kcoord-auth")
        for x in self.listeners:
            factory = self._protocol_factory(x, conn_type)
            server = await self.loop.create_server(factory, x.host or None, x.port, reuse_address=True, backlog=1024,
                                                   start_serving=False)
            if x.port == 0:
                x.port = server.sockets[0].getsockname()[1]
            self._servers.append(server)
        self._server = self._servers[0]
        if cfg.port == 0 or cfg.listeners:
            first = self.listeners[0]
            cfg.port = first.port
            if cfg.listeners:
                cfg.host = first.host or cfg.host
        self.broker = Broker(self.coordinator, self.topics, node_id=cfg.node_id,
                             host=cfg.advertised_host or cfg.host, port=cfg.advertised_port or cfg.port,
                             cluster_id=cfg.cluster_id, later=self.loop.call_later,
                             served=lambda: set(self.handlers) - self.coordinator.hidden_apis,
                             key_map=self.key_map)
        self.broker.addresses = {x.name: x.address() for x in self.listeners}
        self.handlers = {**self.broker.handlers, **self.coordinator.handlers, **SASL_REFUSALS}
        if self.cluster is not None:
            self.broker.cluster = self.cluster
            self.coordinator.serves = self.cluster.serving
            self.handlers = self.cluster.wrap(self.handlers)
        if cfg.authorizing:  # authorization first, as KafkaApis checks before the coordinator answers
            from .security.gates import Gates
            self.gates = Gates(self.coordinator.acls.authorizer, self.topics)
            self.trusted_handlers = {k: self.handlers[k] for k in TRUSTABLE if k in self.handlers}
            self.handlers = self.gates.wrap(self.handlers)
            self.coordinator.acls.authorizer.listeners.append(self._acls_changed)
        self._reaper = self.loop.create_task(self._reap_idle())
        if cfg.metrics_port is not None:
            from .metrics import MetricsEndpoint  # prometheus_client is imported only when the endpoint is asked for
            self.metrics = endpoint = MetricsEndpoint(self.stats, lambda: self.ready)
            await endpoint.start(cfg.metrics_host or cfg.host, cfg.metrics_port)
        if self.cluster is not None:
            self.cluster.port = cfg.advertised_port or cfg.port  # known now, with --port 0
            if cfg.listeners:  # every listener is registered; the first is the node's address for older nodes
                self.cluster.host, self.cluster.port = self.listeners[0].address()
                self.cluster.listeners = {x.name: x.address() for x in self.listeners}
            await self.cluster.start(self.loop)  # the first lease round: partitions are taken before serving
        # What start-up made lives as long as the server, and so will what survives each full collection from now
        # on: frozen, out of every later collection, so a collection's pause does not grow with the state
        gcpolicy.install(self)
        for listening in self._servers:
            await listening.start_serving()

    # ---- the store ---------------------------------------------------------------------------------

    def _schedule_commit(self) -> None:
        if self.loop is not None:
            self.loop.call_soon(self.commit_turn)

    def commit_turn(self) -> None:
        """Commit what this turn staged, then release the responses that waited for it. With the writer thread:
        hand it to the writer, unless a write is under way (then it goes when that one is done)."""
        if self.writer is not None:
            if not self.store.full:  # type: ignore[union-attr]  # while full, only the retry writes (`_retry_full`)
                self._hand_off()
            return
        self._commit_here()

    def _commit_here(self) -> None:
        """Commit what is staged on this thread (the loop), and release what waited for it."""
        t0 = perf_counter()
        try:
            self.store.commit()
        except Exception as e:
            if self.cluster is not None and isinstance(e, StoreError):
                self._drop_held()
                if isinstance(self.store, GroupStore):
                    self.store.settle(self.store.seq - 1)
                self.cluster.commit_failed(e)
            else:
                self._fail(e)
            return
        self.store_commit_seconds.observe(perf_counter() - t0)
        self._release_held()

    def _hand_off(self) -> None:
        """Hand what is staged to the writer thread as one batch (the group commit). The writer's completion comes
        back to the loop as one callback (`_written`), with no future of asyncio's in between."""
        store: GroupStore = self.store  # type: ignore[assignment]  # (with a writer: a GroupStore)
        if self.failed is not None or self._writing is not None or self._closing:
            return
        batch = store.hand_off()
        if batch is None:
            return
        job = store.prepare(batch)  # on the loop: what the write needs of the loop's state (a cluster's epochs)
        self._writing_batch = batch
        self._writing = fut = self.writer.submit(store.write, job)  # type: ignore[union-attr]  # (started)
        call = self.loop.call_soon_threadsafe
        fut.add_done_callback(lambda f: call(self._written, batch, f))

    def _wait_write(self) -> None:
        """Block the loop until no write is under way, handling each that ends (and what it hands off next): for a
        cluster node stepping down, which commits what it staged for a partition before letting it go."""
        while self._writing is not None:
            fut = self._writing
            try:
                fut.result()
            except BaseException:
                pass  # handled by _written
            self._written(self._writing_batch, fut)

    def _written(self, batch: dict, fut: Future) -> None:
        """A write ended (on the loop): release what waited for it and hand off what was staged meanwhile; on a
        full disk refuse writes until a retry succeeds; a cluster node's failed write (fenced, or the database
        unreachable) drops what waited for it and steps down from its partitions; on any other failure stop
        (`_fail`)."""
        if self._writing is not fut:
            return  # already handled (`_wait_write`)
        self._writing = None
        exc = StoreError("the store's write was cancelled") if fut.cancelled() else fut.exception()
        store: GroupStore = self.store  # type: ignore[assignment]  # (with a writer: a GroupStore)
        was_full = store.full
        seq = store.writing
        store.written(batch, exc)
        if exc is None:
            self.store_commit_seconds.observe(store.write_seconds)
            if was_full:
                self._full_ended()
            self._release_held()
            if store.dirty and not self._closing:
                self._hand_off()
        elif store.full:
            if not was_full:
                self._full_began(exc)
            self._drop_held()  # their batch was not written: nothing they acknowledge may leave
            if self._retry is None:  # cancelled by close (`_settle`)
                self._retry = self.loop.call_later(FULL_RETRY_S, self._retry_full)
        elif self.cluster is not None and isinstance(exc, StoreError):
            # What was staged since for the failed partitions is ahead of the database too: it goes with them
            # (their groups are unloaded and replayed from the database when taken again).
            self.cluster.forget_staged(store)
            self._drop_held()
            store.settle(seq)
            self.cluster.commit_failed(exc)
            if store.dirty and not self._closing:
                self._hand_off()
        else:
            self._fail(exc)

    def _retry_full(self) -> None:
        self._retry = None
        if self.store.full:  # type: ignore[union-attr]  # (a GroupStore, as above)
            self._hand_off()  # the failed batch, with what was staged since

    def _full_began(self, exc: BaseException) -> None:
        """Refuse what would write (Coordinator.write_refusals) until the store can write again; heartbeats and
        reads go on."""
        self._full_since = perf_counter()
        refusals = self.coordinator.write_refusals(FULL_ERROR)
        if self.gates is not None:  # still authorized first: a refusal tells nothing to whom may not know it
            refusals = self.gates.wrap(refusals)
        self._writes_refused = {k: self.handlers[k] for k in refusals if k in self.handlers}
        self.handlers.update({k: refusals[k] for k in self._writes_refused})
        self._log_full(True, "the store is full (%s): writes are refused with COORDINATOR_NOT_AVAILABLE, heartbeats "
                       "and reads are served, and the write is retried every %g s", str(exc), FULL_RETRY_S)

    def _full_ended(self) -> None:
        self.handlers.update(self._writes_refused)
        self._writes_refused = {}
        self._log_full(False, "the store is writable again after %.1f s: writes are accepted",
                       perf_counter() - self._full_since)

    def _log_full(self, began: bool, fmt: str, *args) -> None:
        """One line for each transition, at most one a direction every FULL_LOG_INTERVAL_S (a disk at its
        limit may fill and free again every second)."""
        now = perf_counter()
        if now - self._full_logged[began] < FULL_LOG_INTERVAL_S:
            self._full_unlogged += 1
            return
        self._full_logged[began] = now
        if self._full_unlogged:
            fmt += f" ({self._full_unlogged} transitions not logged since the last line)"
            self._full_unlogged = 0
        (log.error if began else log.warning)(fmt, *args, extra={"kcoord": {
            "event": "store-full" if began else "store-writable"}})

    def _release_held(self, drain: bool = True) -> None:
        held, self.held = self.held, set()
        for conn in held:
            if conn.transport is not None and not conn.transport.is_closing():
                conn._write()
                if conn.backlog and drain:
                    conn.drain()

    async def _settle(self) -> None:
        """Wait for the write under way (Server.close, which writes what is staged after it on the loop)."""
        while self._writing is not None:
            fut = self._writing
            await asyncio.wait([asyncio.wrap_future(fut)])
            self._written(self._writing_batch, fut)  # unless its own callback ran first
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def _drop_held(self) -> None:
        """A commit failed (a cluster node's, or a write to a full disk): the answers that waited for it never
        leave; their connections close (clients retry, and look for the coordinator again), and the server keeps
        serving."""
        held, self.held = self.held, set()
        for conn in held:
            conn.out.clear()
            conn.needs.clear()
            conn.out_size = 0
            if conn.transport is not None:
                conn.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        """The store could not make acknowledged state durable: stop without sending what it would have
        acknowledged (as a database stops on a failed fsync). Clients see the connection drop and look again."""
        log.critical("store commit failed, stopping without answering: %s", exc,
                     extra={"kcoord": {"event": "store-failure", "error": str(exc),
                                       "connections": len(self.connections)}})
        self._abort(exc)

    def halt(self, exc: BaseException) -> None:
        """Stop at once, answering nothing more (a cluster node whose node.id another process took over); the process
        exits with `exc`."""
        log.critical("stopping: %s", exc, extra={"kcoord": {"event": "halted", "error": str(exc)}})
        self._abort(exc)

    def _abort(self, exc: BaseException) -> None:
        self.failed = exc
        self.held.clear()
        for conn in list(self.connections):
            conn.out.clear()
            conn.transport.abort()
        for server in self._servers:
            server.close()
        if self._stop is not None:
            self._stop.set()

    # ---- timers ----------------------------------------------------------------------------------

    def rearm_timer(self) -> None:
        """Make sure the one timer callback fires at the coordinator's earliest deadline."""
        nd = self.coordinator.next_deadline()
        if nd == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = nd
        if nd is not None:
            delay = max(nd - self.clock.now_ms(), 0) / 1000
            self._timer = self.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        try:
            self.coordinator.poll()
        except Exception:
            log.exception("a coordinator timer failed")
        self.rearm_timer()

    def _tls_context(self, listener: Listener):
        from .security.tls import PrincipalMapper, TlsSettings, server_context

        settings = TlsSettings.from_kafka(self.config.security, listener=listener.name,
                                          security_protocol=listener.protocol)
        ctx = server_context(settings)
        self._tls_contexts[listener.name] = ctx
        self.principal_mappers[listener.name] = PrincipalMapper(settings.principal_mapping_rules)
        return ctx

    def reload_tls_on_signal(self) -> None:
        """SIGHUP: each TLS listener's key and certificates read again, one log line per listener; a
        refused reload (TlsConfigError: a changed DN, an unreadable file, ...) is one line and that listener keeps
        serving its current certificate."""
        import ssl

        from .security.tls import TlsConfigError, TlsSettings, reload

        tls = [x for x in self.listeners if x.name in self._tls_contexts]
        if not tls:
            log.info("SIGHUP: no TLS listener to reload")
        for x in tls:
            try:
                reload(self._tls_contexts[x.name],
                       TlsSettings.from_kafka(self.config.security, listener=x.name, security_protocol=x.protocol))
            except (TlsConfigError, OSError, ssl.SSLError) as e:
                log.error("SIGHUP: the TLS reload of listener %s was refused, it keeps its certificate: %s", x.name,
                          e, extra={"kcoord": {"event": "tls_reload_refused", "listener": x.name, "error": str(e)}})
            else:
                log.info("SIGHUP: listener %s reloaded its TLS key and certificates", x.name,
                         extra={"kcoord": {"event": "tls_reloaded", "listener": x.name}})

    def _protocol_factory(self, x: Listener, conn_type: type) -> Callable[[], asyncio.BaseProtocol]:
        """What serves a connection of listener x: a conn_type, behind a MeteredTls until its handshake is over on
        a TLS listener (the handshakes held to a budget per loop turn: a storm of them does not hold the loop)."""
        if not x.tls:
            return lambda: conn_type(self, x)
        budget, ctx = HandshakeBudget(self.loop), self._tls_context(x)

        def failed(ip: str, e: Exception) -> None:
            self._tls_failed(x.name, ip, e)

        return lambda: MeteredTls(budget, ctx, lambda: conn_type(self, x), on_failure=failed)

    def stats(self) -> ServerStats:
        """What the metrics endpoint shows, taken now (kcoord.metrics.ServerStats)."""
        from .metrics import ClusterStats, ServerStats

        store = self.store
        parked = sum(1 for conn in self.connections for item in conn.queue
                     if type(item[0]) is Reply and not item[0].done)
        c = self.cluster
        return ServerStats(
            coordinator=self.coordinator, requests=self.request_stats,
            store_commit_seconds=self.store_commit_seconds, store_fsyncs=getattr(store, "fsyncs", 0),
            store_full=bool(getattr(store, "full", False)), connections=len(self.connections),
            connections_accepted=self.connections_accepted, connections_refused=self.limits.refused,
            authentications=self.auth_results,
            authorization_denials=None if self.gates is None else dict(self.gates.denials),
            queued_request_bytes=self.frame_bytes,
            queued_request_bytes_peak=self.frame_bytes_peak, muted_connections=len(self.muted),
            received_bytes=self.bytes_in, sent_bytes=self.bytes_out, parked_requests=parked, ready=self.ready,
            cluster=None if c is None else ClusterStats(partitions_held=len(c.epochs), nodes=len(c.view.nodes),
                                                        lease_rounds=c.rounds, lease_rounds_failed=c.failed_rounds,
                                                        step_downs=c.step_downs))

    # ---- what a cluster node asks of its server (kcoord.cluster.ClusterHost) ---------------------------------

    def load_records(self, rows: Iterable[tuple[bytes, bytes]]) -> LoadStats:
        return self.coordinator.load(rows)

    def unload_groups(self, belongs: Callable[[str], bool]) -> int:
        return self.coordinator.unload_groups(belongs)

    def _acls_changed(self) -> None:
        """Any change to the ACLs: what each connection trusted is decided again."""
        for conn in self.connections:
            if conn.trusted:
                conn.trusted.clear()

    def refresh_credentials(self, rows: Iterable[tuple[bytes, bytes]]) -> None:
        rows = list(rows)
        self.coordinator.credentials.refresh(rows)
        self.coordinator.acls.refresh(rows)

    def forget_topic(self, name: str) -> None:
        self.coordinator.offsets.forget_topic(name)

    def drop_staged(self, belongs: Callable[[bytes], bool]) -> int:
        """Forget the staged records whose key `belongs` names (a cluster node's partitions it leaves without
        committing what it staged for them: its lease ran out, so they are no longer its to write, and writing them
        once it held those partitions again would put old state over newer). The answers waiting for a commit are
        dropped, their connections closed unanswered, since some waited for what went. How many records went."""
        store = self.store
        n = store.drop_staged(belongs) if isinstance(store, GroupStore) else 0
        if n:
            self._drop_held()
        return n

    def commit_staged(self) -> None:
        if self.writer is not None:
            self._wait_write()  # the write under way, and what it hands off next, ends first
            if self._writing is not None or self.store.full or self.failed is not None:  # type: ignore[union-attr]
                return
        if self.store.dirty:
            self._commit_here()

    def _tls_failed(self, listener: str, ip: str, e: Exception) -> None:
        """A TLS handshake failed on its TLS error (an untrusted or missing client certificate, a protocol or
        cipher the listener does not allow, a plaintext client): a failed authentication, as Kafka counts it."""
        self.auth_results[(listener, "SSL", "failure")] += 1
        self.refusals.warning("authentication of /%s failed on listener %s: SSL handshake failed (%s)", ip, listener,
                              getattr(e, "reason", None) or type(e).__name__)

    def credential(self, user: str, mechanism: int):
        """The stored SCRAM credential of `user` for a mechanism type (1: SHA-256, 2: SHA-512), or None."""
        return self.coordinator.credentials.lookup(user, mechanism)

    def new_turn(self) -> None:
        """The loop has gone round: the next frames handled start a new TURN_BUDGET_S (KafkaConnection._handle)."""
        self.turn_deadline = 0.0

    def on_loop(self, fn, *args) -> None:
        """From the worker thread: call fn(*args) on the loop (nothing once the loop has closed)."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass

    def offload_bytes(self, delta: int) -> None:
        """A request of `delta` bytes went to the worker (or, negative, was handled): it counts toward
        queued.max.request.bytes meanwhile, as a Kafka request holds its memory-pool bytes until it is handled."""
        self.frame_bytes += delta
        if self.frame_bytes > self.frame_bytes_peak:
            self.frame_bytes_peak = self.frame_bytes
        if delta < 0 and self.muted and not self.unmuting:
            self.unmuting = True
            self.loop.call_soon(self.unmute)

    def unmute(self) -> None:
        """Read the muted connections again once the unfinished frames hold less than queued.max.request.bytes;
        while they hold more, and no connection being read holds any of it, the muted one furthest along, so that
        some request always makes progress (the others' peers may have gone)."""
        self.unmuting = False
        if not self.muted:
            return
        limit = self.config.queued_max_request_bytes
        if limit < 0:
            muted, self.muted = self.muted, set()
        else:
            # furthest along first, each while what it may take at its next read fits beside the others; the first
            # one whatever it takes when nobody else is being read
            muted = set()
            projected = self.frame_bytes + self.reserved
            reading = any(c.frame_bytes and not c.muted for c in self.connections)
            for conn in sorted(self.muted, key=lambda c: -c.frame_bytes):
                grow = conn.next_growth()
                if projected + grow > limit and (reading or muted):
                    break
                muted.add(conn)
                projected += grow
            self.muted -= muted
        now = self.loop.time()
        for conn in muted:
            conn.muted = False
            conn._reserve()
            if conn.frame_started:
                conn.frame_started = now  # its request's deadline counts from when it may be read again
            conn._update_reading()

    def watch_muted(self) -> None:
        """While connections are muted, look twice a second whether their peers have gone: a connection that is
        not read does not see its peer close, and its unfinished frame would go on counting."""
        if self._muted_watch is None and self.muted:
            self._muted_watch = self.loop.call_later(MUTED_WATCH_S, self._check_muted)

    def _check_muted(self) -> None:
        self._muted_watch = None
        for conn in list(self.muted):
            if peer_closed(conn.transport):
                conn.transport.abort()  # connection_lost gives its bytes back and unmutes the others
        self.unmute()
        self.watch_muted()

    def _loop_exception(self, loop, context: dict) -> None:
        """The event loop's errors, each kind at most once every few seconds: under asyncio a listening socket
        out of descriptors reports every failed accept() (hundreds of thousands of lines a minute)."""
        if context.get("message", "").startswith("socket.accept() out of system resource"):
            self.refusals.warning("accept() failed: %s", context.get("exception"))
            return
        loop.default_exception_handler(context)

    async def _reap_idle(self) -> None:
        """Close connections idle for connections.max.idle.ms, and those whose request has taken longer than
        socket.request.timeout.ms to arrive whole (a peer trickling a frame a byte at a time)."""
        idle = self.config.connections_max_idle_ms / 1000
        request_timeout = self.config.request_timeout_ms / 1000
        while True:
            await asyncio.sleep(max(min(idle / 4, request_timeout / 4, 10), 0.01))
            now = self.loop.time()
            cutoff = now - idle
            frame_cutoff = now - request_timeout
            for conn in list(self.connections):
                if conn.last_active < cutoff and not conn.queue:
                    log.debug("closing idle connection %s", conn.host)
                    conn.transport.close()
                elif conn.frame_started and conn.frame_started < frame_cutoff and not conn.muted:
                    self.refusals.warning("closing %s: its request did not arrive whole within "
                                          "socket.request.timeout.ms (%d)", conn.host, self.config.request_timeout_ms)
                    conn.transport.abort()

    # ---- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop accepting, answer parked requests (NOT_COORDINATOR, so clients look again), flush, close."""
        if self._server is None:
            return
        for server in self._servers:
            server.close()
        self._closing = True
        if self.failed is None:
            if self.writer is not None:
                await self._settle()
            try:
                self.store.commit()  # what this turn staged, before anything else is answered
                self._release_held(drain=False)
            except StoreFullError as e:
                # Nothing that waited for it was answered: it is lost as an unanswered request is.
                log.warning("stopping with a full store: what was staged since its last write is not kept (no "
                            "response acknowledged it): %s", e)
                self._drop_held()
            except Exception as e:
                self._fail(e)
        if self._reaper is not None:
            self._reaper.cancel()
        if self._muted_watch is not None:
            self._muted_watch.cancel()
        if self._timer is not None:
            self._timer.cancel()
        for g in list(self.coordinator.groups.values()):
            g.unload()
        if self.cluster is not None:
            await self.cluster.close()
        if self.worker is not None:  # a request still on it is dropped, unanswered (its connection closes)
            self.worker.shutdown(wait=False, cancel_futures=True)
        for conn in list(self.connections) if self.failed is None else ():
            conn._flush()
            for response, key, *_ in list(conn.queue):  # held Fetches: answer them now
                if key == FETCH_KEY and type(response) is Reply and not response.done:
                    response.resolve(wire.FetchResponse(error_code=E.NONE))
            conn._flush()
            conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        self._server = None
        if self.auth_pool is not None:
            self.auth_pool.shutdown(wait=False, cancel_futures=True)
        if self.metrics is not None:
            await self.metrics.close()
        if self.writer is not None:
            self.writer.shutdown(wait=True)
        self.store.close()
        gcpolicy.uninstall(self)  # the last server of the process gives the collector back as it was

    async def serve_forever(self) -> None:
        cfg = self.config
        if self.loaded is not None:  # before listening: whoever can connect can read what was loaded
            ld = self.loaded
            log.info("kcoord loaded %d groups, %d members, %d offsets, %d topics and %d ACLs from %s in %.2f s",
                     ld.groups, ld.members, ld.offsets, ld.topics, ld.acls, self.store_name, ld.seconds,
                     extra={"kcoord": {"event": "loaded", "groups": ld.groups, "members": ld.members,
                                       "offsets": ld.offsets, "topics": ld.topics, "acls": ld.acls,
                                       "data_dir": cfg.data_dir, "seconds": round(ld.seconds, 3)}})
        await self.start()
        stop = self._stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.loop.add_signal_handler(sig, stop.set)
        self.loop.add_signal_handler(signal.SIGHUP, self.reload_tls_on_signal)
        if cfg.data_dir is None and cfg.store_url is None:
            log.warning("no --data-dir: groups and committed offsets are kept in memory only")
        metrics = f", metrics on http://{cfg.metrics_host or cfg.host}:{self.metrics.port}/metrics" \
            if self.metrics is not None else ""
        skipped = sorted(cfg.controller_listeners() & listener_names(cfg.listeners))
        if skipped:
            log.warning("not serving listener %s: controller.listener.names names a KRaft controller's listeners, "
                        "and kcoord has no controller", ", ".join(skipped))
        more = "".join(f", {x.name} ({x.protocol}) on {x.host or '*'}:{x.port}" for x in self.listeners[1:])
        first = self.listeners[0]
        named = f" ({first.name}, {first.protocol})" if cfg.listeners else ""
        log.info("kcoord listening on %s:%d%s%s (node %d, %d topics%s)", cfg.host, cfg.port, named, more,
                 cfg.node_id, len(self.topics.by_name), metrics,
                 extra={"kcoord": {"event": "started", "host": cfg.host, "port": cfg.port, "node": cfg.node_id,
                                   "listeners": [{"name": x.name, "protocol": x.protocol, "host": x.host,
                                                  "port": x.port} for x in self.listeners],
                                   "topics": len(self.topics.by_name),
                                   "metrics_port": self.metrics.port if self.metrics is not None else None}})
        await stop.wait()
        groups, members = len(self.coordinator.groups), sum(len(g.members) for g in self.coordinator.groups.values())
        await self.close()
        if self.failed is not None:
            raise self.failed
        log.info("kcoord stopped: %d groups, %d members, %d connections served", groups, members,
                 self.connections_accepted, extra={"kcoord": {"event": "stopped", "groups": groups, "members": members,
                                                              "connections": self.connections_accepted}})


def run(config: ServerConfig, loop: str = "auto") -> None:
    """Run a server until SIGINT/SIGTERM: under uvloop when it is installed ("auto"), or as `loop` says
    ("asyncio" or "uvloop")."""
    if loop not in ("auto", "asyncio", "uvloop"):
        raise ValueError(f"unknown event loop {loop!r}")
    if loop != "asyncio":
        try:
            import uvloop  # type: ignore[import-not-found]
        except ImportError:
            if loop == "uvloop":
                raise
        else:
            uvloop.run(Server(config).serve_forever())
            return
    asyncio.run(Server(config).serve_forever())
