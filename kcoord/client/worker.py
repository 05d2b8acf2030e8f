"""Connect groups, the worker side: an asyncio client that joins a connect group, runs the units the coordinator
gives it, and computes the group's assignment when the coordinator picks it (docs/connect-protocol.md §2, D3-D16;
the D-numbers in this module are that file's decisions).

    async def started(units):            # sync or async callbacks
        for u in units: run(u)
    async def stopped(units):
        for u in units: await halt(u)

    worker = Worker("127.0.0.1:9092", "connect-cluster", units={"orders-sink": 4},
                    on_assigned=started, on_revoked=stopped)
    await worker.start()                 # joined (raises on a fatal error such as UNSUPPORTED_ASSIGNOR)
    ...
    worker.units_changed()               # the application's connectors or tasks changed: ask for a new assignment
    ...
    await worker.stop()                  # revoke everything, then leave (-1; static=True: -2, the target is kept)

A unit is a connector or one of its tasks (`Unit`); the callbacks get the units added or removed as a frozenset.
Rules the worker follows (KIP-848's consumer, with units for partitions):

* The member id is generated here (uuid4 hex) unless given, and kept for the process lifetime: a fenced worker
  rejoins with it at epoch 0. A lost connection keeps member id and epoch; the worker reconnects with backoff and
  tries its current epoch first (a full heartbeat), so a coordinator restart costs no rebalance.
* Reconciliation runs beside the heartbeat loop, which keeps the session alive meanwhile: a response that removes
  units runs `on_revoked`, then a heartbeat goes out at once with the smaller owned set (the acknowledgement the
  coordinator waits for before giving the units to others); a response that adds units runs `on_assigned`. A
  callback must finish within `rebalance_timeout_ms`, or the coordinator fences the worker.
* A callback that raises is logged, and the units count as revoked (or assigned) anyway: the coordinator's view is
  the truth, and holding on to units the application could not stop would only get the worker fenced later.
* Fenced (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, or GROUP_ID_NOT_FOUND once joined): every owned unit goes to
  `on_lost` (default: `on_revoked`), then the worker rejoins at epoch 0. UNRELEASED_INSTANCE_ID: the join is retried
  after a backoff. UNSUPPORTED_ASSIGNOR, INVALID_REQUEST and the other errors no retry can mend stop the worker: its
  units go to `on_lost`, `error` is set, and `start`, `wait_for` and `wait_closed` raise `ConnectGroupError`.
* When a heartbeat response says ShouldComputeAssignment, the worker calls ConnectGroupPrepareAssignment, runs its
  assignor (in a thread) over the current unit set, and calls ConnectGroupInstallAssignment, all within
  `rebalance_timeout_ms`. STALE_MEMBER_EPOCH, REBALANCE_IN_PROGRESS and UNKNOWN_MEMBER_ID from these only mean the
  group moved on: the worker keeps heartbeating and computes again when asked.

One connection carries every request, one at a time, correlation ids checked. Logs go to `kcoord.client.worker`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import ssl
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple

from .. import errors as E
from .. import wire
from . import PLAINTEXT, AuthenticationFailed, ClientSecurity, SaslExchange, encode_request_at
from .worker_assignor import (
    AssignmentInput,
    AssignmentMetadata,
    DepartedInput,
    IncrementalCooperativeAssignor,
    MemberInput,
    WorkerMetadata,
)

log = logging.getLogger("kcoord.client.worker")

JOIN_EPOCH, LEAVE_EPOCH, TEMPORARY_LEAVE_EPOCH = 0, -1, -2
DEFAULT_API_KEY_BASE = 1000  # the API key the codec knows each message by (kcoord.protocol.connect)

# Errors no retry can mend: the worker stops. GROUP_ID_NOT_FOUND is one only on a join (a classic group holds the
# id); once joined it means the coordinator lost the group, and the worker rejoins.
FATAL = frozenset({E.UNSUPPORTED_ASSIGNOR, E.INVALID_REQUEST, E.GROUP_AUTHORIZATION_FAILED, E.INVALID_GROUP_ID,
                   E.GROUP_MAX_SIZE_REACHED, E.UNSUPPORTED_VERSION, E.GROUP_ID_NOT_FOUND})
FENCED = frozenset({E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH})
COORDINATOR = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS})
GROUP_MOVED_ON = frozenset({E.STALE_MEMBER_EPOCH, E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID})


class Unit(NamedTuple):
    """A unit of work: a connector (`task == -1`, Connect's CONNECTOR_TASK) or task `task` of a connector."""

    connector: str
    task: int = -1

    @property
    def is_connector(self) -> bool:
        return self.task < 0

    def __str__(self) -> str:
        return self.connector if self.task < 0 else f"{self.connector}-{self.task}"  # Connect's ConnectorTaskId


Units = frozenset[Unit]
NO_UNITS: Units = frozenset()
Callback = Callable[[Units], Awaitable[None] | None]


def all_units(counts: Mapping[str, int]) -> Units:
    """Every unit of connectors given as {connector: task count}: each connector and its tasks 0..count-1."""
    return frozenset([Unit(c) for c in counts] + [Unit(c, i) for c, n in counts.items() for i in range(n)])


def units_from_wire(cat) -> Units:
    """The units of a ConnectorsAndTasks struct (any message's)."""
    if cat is None:
        return NO_UNITS
    return frozenset([Unit(c) for c in cat.connectors] + [Unit(t.connector, i) for t in cat.tasks for i in t.task_ids])


def units_to_wire(units: Iterable[Unit], cat_cls: type, tasks_cls: type):
    """`units` as a ConnectorsAndTasks struct of the given message classes, sorted."""
    connectors: list[str] = []
    tasks: dict[str, list[int]] = {}
    for u in sorted(units):
        if u.task < 0:
            connectors.append(u.connector)
        else:
            tasks.setdefault(u.connector, []).append(u.task)
    return cat_cls(connectors=connectors, tasks=[tasks_cls(connector=c, task_ids=ids) for c, ids in tasks.items()])


class ConnectGroupError(Exception):
    """The coordinator refused the worker for good (UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, ...)."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(f"{E.name(code)} ({code}): {message or 'no message'}")
        self.code = code


class ConnectionLost(Exception):
    """The coordinator connection failed; the worker reconnects."""


class _Connection:
    """One socket to the coordinator; requests go one at a time. A failed or cancelled call closes it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
                 api_key_base: int) -> None:
        self.reader, self.writer = reader, writer
        self.client_id = client_id
        self.key_shift = api_key_base - DEFAULT_API_KEY_BASE
        self.correlation_id = 0
        self.lock = asyncio.Lock()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            # abort, not close: nothing is left to send (each call waits for its answer), and a TLS transport's
            # close waits for the peer's close_notify, which a loop about to end would leave unfinished
            self.writer.transport.abort()

    async def call(self, body, timeout: float, version: int = 0):
        """A connect group request (at the server's moved API key), or with `version` a Kafka one (SASL)."""
        async with self.lock:
            if self.closed:
                raise ConnectionLost("the connection is closed")
            self.correlation_id += 1
            corr, key = self.correlation_id, type(body).API_KEY
            shift = self.key_shift if key >= DEFAULT_API_KEY_BASE else 0
            frame = encode_request_at(key + shift, version, corr, self.client_id, body)
            try:
                async with asyncio.timeout(timeout):
                    self.writer.write(frame)
                    await self.writer.drain()
                    (size,) = struct.unpack(">i", await self.reader.readexactly(4))
                    data = await self.reader.readexactly(size)
                got, response = wire.decode_response(key, version, data)
            except BaseException:
                self.close()  # a half-read frame leaves the stream unusable
                raise
            if got != corr:
                self.close()
                raise ConnectionLost(f"expected the answer to request {corr}, got {got}")
            return response


class _Backoff:
    def __init__(self, first: float = 0.05, cap: float = 1.0) -> None:
        self.first, self.cap, self.n = first, cap, 0

    def reset(self) -> None:
        self.n = 0

    def next(self) -> float:
        delay = min(self.cap, self.first * 2 ** self.n)
        self.n += 1
        return delay * random.uniform(0.8, 1.2)


class Worker:
    """A member of connect group `group_id` at `bootstrap` ("host:port").

    units: the connectors the application runs, {connector: task count}, or a function returning that (read at
        each computation: the worker's current view of every unit).
    on_assigned / on_revoked / on_lost: called with the units added / removed / lost (fenced or failed; default
        on_revoked); plain functions or coroutines.
    member_id: default uuid4 hex. instance_id: makes the worker static (stop(static=True) keeps its target).
    url, config_offset (an int or a function): the worker metadata (`WorkerMetadata`) the assignor sees; a worker
        whose config offset is behind another's makes the computation fail with CONFIG_MISMATCH.
    assignor: default `IncrementalCooperativeAssignor()`.
    api_key_base: the server's `group.connect.api.key.base`.
    security: how the worker authenticates (`kcoord.client.ClientSecurity`: Kafka's client settings
        security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location,
        ssl.key.location, ...). A refused authentication or an untrusted server certificate stops the worker
        (`error` is an AuthenticationFailed or ssl.SSLCertVerificationError), as Kafka's clients stop on an
        AuthenticationException; a session with a lifetime (KIP-368) is renewed by reconnecting before it ends.
    """

    def __init__(self, bootstrap: str, group_id: str, *, units: Mapping[str, int] | Callable[[], Mapping[str, int]],
                 on_assigned: Callback | None = None, on_revoked: Callback | None = None,
                 on_lost: Callback | None = None, member_id: str | None = None, instance_id: str | None = None,
                 url: str = "", config_offset: int | Callable[[], int] = 0, assignor: Any = None,
                 rebalance_timeout_ms: int = 60_000, request_timeout_ms: int = 30_000,
                 client_id: str = "kcoord-connect", api_key_base: int = DEFAULT_API_KEY_BASE,
                 security: ClientSecurity = PLAINTEXT) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"bootstrap {bootstrap!r} is not HOST:PORT")
        if not group_id:
            raise ValueError("group_id can't be empty")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.group_id = group_id
        self.member_id = member_id or uuid.uuid4().hex
        self.instance_id = instance_id
        self.url = url
        self.assignor = assignor if assignor is not None else IncrementalCooperativeAssignor()
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.request_timeout = request_timeout_ms / 1000
        self.client_id = client_id
        self.api_key_base = api_key_base
        self.security = security
        self._ssl = security.ssl_context()
        self._session_ends: float | None = None  # loop time when the connection's SASL session ends
        self._units = units
        self._config_offset = config_offset
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        self._on_lost = on_lost if on_lost is not None else on_revoked

        # what the application reads
        self.owned: Units = NO_UNITS  # the units this worker runs now (its callbacks have completed)
        self.member_epoch = JOIN_EPOCH
        self.assignor_version = -1  # the group's negotiated assignor version (D9)
        self.heartbeat_interval_ms = 1000
        self.assignment_error = 0  # the last assignment's Error (1: CONFIG_MISMATCH)
        self.assignment_metadata: AssignmentMetadata | None = None  # leader, leader url, config offset
        self.error: BaseException | None = None  # set when the worker stopped on an error

        self._reason = 0  # the assignor Reason, int8; bumped by units_changed()
        self._full = True  # the next heartbeat carries every field (join, or after a reconnect)
        self._sent_assignor: tuple | None = None  # (reason, version, metadata) the coordinator has
        self._sent_owned: Units | None = None  # the owned set the coordinator has
        self._target: Units | None = None  # the last assignment the coordinator gave, None after a fence
        self._conn: _Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._joined = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task | None = None
        self._reconciler: asyncio.Task | None = None
        self._compute_task: asyncio.Task | None = None
        self._prepared = False  # the running computation's Prepare was answered (responses arrive in order)
        self._compute_again = False  # asked to compute (again) while a computation was running

    def __repr__(self) -> str:
        return (f"Worker({self.member_id}, group={self.group_id!r}, epoch={self.member_epoch}, "
                f"owned={len(self.owned)} units, version={self.assignor_version}, computing={self.computing})")

    # ---- the application's side -------------------------------------------------------------------------------

    @property
    def computing(self) -> bool:
        """True while this worker computes the group's assignment."""
        return self._compute_task is not None and not self._compute_task.done()

    @property
    def units(self) -> Mapping[str, int]:
        """The application's current connectors, {connector: task count}."""
        return dict(self._units() if callable(self._units) else self._units)

    async def start(self) -> None:
        """Connect and join; returns after the first successful heartbeat (the heartbeat loop runs on)."""
        if self._loop_task is not None:
            raise RuntimeError("the worker was started already")
        self._loop_task = asyncio.create_task(self._run(), name=f"kcoord-connect-{self.member_id}")
        joined = asyncio.create_task(self._joined.wait())
        try:
            await asyncio.wait({joined, self._loop_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            joined.cancel()
        if self._loop_task.done():
            await self._loop_task  # raises the error that ended it

    def units_changed(self) -> None:
        """The application's connectors or tasks changed: bump the assignor Reason, so the next heartbeat (sent
        now) carries ClientAssignors and the coordinator asks for a new computation."""
        self._reason = (self._reason + 129) % 256 - 128  # +1, wrapping within int8
        self._wake.set()

    async def stop(self, *, static: bool = False) -> None:
        """Revoke every owned unit, then leave the group: epoch -1, or with static=True epoch -2 (a static member
        leaving for now: the coordinator keeps its target for the next process with the same instance id)."""
        if static and self.instance_id is None:
            raise ValueError("a static leave needs an instance_id")
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None and not self._loop_task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._loop_task), self.request_timeout + 1)
            except TimeoutError:
                self._loop_task.cancel()
            except Exception:  # a fatal error: self.error holds it
                pass
        await self._cancel_compute()
        await self._halt_reconciler()
        if self.owned:
            await self._callback(self._on_revoked, "on_revoked", self.owned)
            self.owned = NO_UNITS
            self._notify()
        if self.member_epoch >= 0 and self._joined.is_set() and self.error is None:  # a member, even at epoch 0
            epoch = TEMPORARY_LEAVE_EPOCH if static else LEAVE_EPOCH
            try:
                resp = await self._call(self._heartbeat_request(epoch))
                if resp.error_code:
                    log.warning("%s: leaving: %s %s", self.member_id, E.name(resp.error_code), resp.error_message)
                else:
                    log.info("%s left group %s (epoch %d)", self.member_id, self.group_id, epoch)
            except ConnectionLost as e:
                log.warning("%s: leaving: %s", self.member_id, e)
            self.member_epoch = epoch
        self._drop_connection()
        self._notify()

    async def wait_for(self, predicate: Callable[[Worker], bool], timeout: float) -> None:
        """Wait until predicate(worker) holds (checked at every state change); TimeoutError after `timeout` s."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                if self.error is not None:
                    raise self.error
                await self._changed.wait()

    async def wait_closed(self) -> None:
        """Wait until the heartbeat loop ends: after stop(), or on a fatal error (raised here)."""
        if self._loop_task is not None:
            await asyncio.shield(self._loop_task)

    # ---- heartbeats ---------------------------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _assignor_fields(self) -> tuple[int, int, bytes]:
        offset = self._config_offset() if callable(self._config_offset) else self._config_offset
        return self._reason, self.assignor.maximum_version, WorkerMetadata(self.url, offset).encode()

    def _heartbeat_request(self, epoch: int) -> wire.ConnectGroupHeartbeatRequest:
        full = self._full or epoch == JOIN_EPOCH
        req = wire.ConnectGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                member_epoch=epoch, instance_id=self.instance_id)
        if epoch < 0:
            return req
        if full:
            req.rebalance_timeout_ms = self.rebalance_timeout_ms
        fields = self._assignor_fields()
        if full or fields != self._sent_assignor:
            reason, version, metadata = fields
            req.client_assignors = [wire.ConnectGroupHeartbeatRequestAssignor(
                name=self.assignor.name, minimum_version=self.assignor.minimum_version,
                maximum_version=self.assignor.maximum_version, reason=reason, version=version, metadata=metadata)]
        if full or self.owned != self._sent_owned:
            req.connectors_and_tasks = units_to_wire(self.owned, wire.ConnectGroupHeartbeatRequestConnectorsAndTasks,
                                                     wire.ConnectGroupHeartbeatRequestConnectorTasks)
        return req

    async def _run(self) -> None:
        backoff = _Backoff()
        try:
            while not self._stopping:
                self._wake.clear()
                owned = self.owned
                req = self._heartbeat_request(self.member_epoch)
                try:
                    resp = await self._call(req)
                except ConnectionLost as e:
                    self._full = True
                    delay = backoff.next()
                    log.info("%s: coordinator connection failed (%s); retrying in %.2fs at epoch %d",
                             self.member_id, e, delay, self.member_epoch)
                    await self._sleep(delay)
                    continue
                code = resp.error_code
                if code == E.NONE:
                    backoff.reset()
                    self._accept(resp, req, owned)
                    await self._sleep(max(self.heartbeat_interval_ms, 10) / 1000)
                elif code in FENCED or (code == E.GROUP_ID_NOT_FOUND and req.member_epoch > 0):
                    log.warning("%s: %s at epoch %d (%s); abandoning %d units and rejoining", self.member_id,
                                E.name(code), req.member_epoch, resp.error_message, len(self.owned))
                    await self._abandon()
                    if backoff.n:
                        await self._sleep(backoff.next())
                    else:
                        backoff.next()  # a second fence in a row waits a little
                elif code == E.UNRELEASED_INSTANCE_ID:
                    delay = max(backoff.next(), 0.2)
                    log.info("%s: instance %s is still held by another member; retrying the join in %.2fs",
                             self.member_id, self.instance_id, delay)
                    await self._sleep(delay)
                elif code in FATAL:
                    raise ConnectGroupError(code, resp.error_message)
                else:  # COORDINATOR_NOT_AVAILABLE and kin, or an unexpected code: reconnect, then the same epoch
                    delay = backoff.next()
                    log.warning("%s: heartbeat: %s (%s); reconnecting in %.2fs", self.member_id, E.name(code),
                                resp.error_message, delay)
                    self._drop_connection()
                    await self._sleep(delay)
        except (ConnectGroupError, AuthenticationFailed, ssl.SSLCertVerificationError) as e:
            log.error("%s: the coordinator refused the worker: %s", self.member_id, e)
            self.error = e
            await self._abandon()
            raise
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            log.exception("%s: the heartbeat loop failed", self.member_id)
            self.error = e
            await self._abandon()
            raise
        finally:
            self._notify()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early for a revocation to acknowledge, a unit change or stop()."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            pass

    def _accept(self, resp: wire.ConnectGroupHeartbeatResponse, req: wire.ConnectGroupHeartbeatRequest,
                owned: Units) -> None:
        self._full = False
        if req.client_assignors is not None:
            a = req.client_assignors[0]
            self._sent_assignor = (a.reason, a.version, a.metadata)
        if req.connectors_and_tasks is not None:
            self._sent_owned = owned
        if resp.member_epoch != self.member_epoch:
            log.info("%s: epoch %d -> %d", self.member_id, self.member_epoch, resp.member_epoch)
        self.member_epoch = resp.member_epoch
        self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        if resp.assignor_version >= 0:
            self.assignor_version = resp.assignor_version
        if resp.assignment is not None:
            given = resp.assignment
            target = units_from_wire(given.connectors_and_tasks)
            removed, added = self.owned - target, target - self.owned
            if removed and added:
                log.warning("%s: an assignment both removes %d and adds %d units; revoking first", self.member_id,
                            len(removed), len(added))
            self._target = target
            self.assignment_error = given.error
            try:
                self.assignment_metadata = AssignmentMetadata.decode(given.metadata) if given.metadata else None
            except Exception:  # another assignor's metadata
                self.assignment_metadata = None
            if target != self.owned and (self._reconciler is None or self._reconciler.done()):
                self._reconciler = asyncio.create_task(self._reconcile())
        if resp.should_compute_assignment:
            if not self.computing:
                self._compute_task = asyncio.create_task(self._compute())
            elif self._prepared:  # asked after this computation's Prepare: the group moved on meanwhile
                self._compute_again = True
        self._joined.set()
        self._notify()

    # ---- reconciliation -----------------------------------------------------------------------------------------

    async def _reconcile(self) -> None:
        """Move `owned` to the coordinator's latest target: revoke (then acknowledge at once), then assign."""
        while self._target is not None and self._target != self.owned:
            target = self._target
            removed = self.owned - target
            if removed:
                log.info("%s: revoking %d units: %s", self.member_id, len(removed), _show(removed))
                await self._callback(self._on_revoked, "on_revoked", removed)
                self.owned = self.owned - removed
                self._wake.set()  # acknowledge now
            else:
                added = target - self.owned
                log.info("%s: assigned %d units: %s", self.member_id, len(added), _show(added))
                await self._callback(self._on_assigned, "on_assigned", added)
                self.owned = self.owned | added
            self._notify()

    async def _callback(self, fn: Callback | None, what: str, units: Units) -> None:
        if fn is None:
            return
        try:
            result = fn(units)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: %s raised; the units count as %s anyway", self.member_id, what,
                          "assigned" if what == "on_assigned" else "released")

    async def _halt_reconciler(self) -> None:
        """Let a running callback finish, then stop reconciling."""
        self._target = None
        if self._reconciler is not None:
            await asyncio.gather(self._reconciler, return_exceptions=True)
            self._reconciler = None

    async def _abandon(self) -> None:
        """Fenced or failed: give up every unit (on_lost) and start over at epoch 0 with the same member id."""
        await self._cancel_compute()
        await self._halt_reconciler()
        if self.owned:
            await self._callback(self._on_lost, "on_lost", self.owned)
            self.owned = NO_UNITS
        self.member_epoch = JOIN_EPOCH
        self._full = True
        self._sent_assignor = self._sent_owned = None
        self._notify()

    # ---- computing the assignment -------------------------------------------------------------------------------

    async def _cancel_compute(self) -> None:
        if self._compute_task is not None and not self._compute_task.done():
            self._compute_task.cancel()
            await asyncio.gather(self._compute_task, return_exceptions=True)

    async def _compute(self) -> None:
        """Compute and install, again if the coordinator asked once more after this computation's Prepare."""
        try:
            while True:
                await self._compute_once()
                if not self._compute_again or self._stopping:
                    break
                log.info("%s: asked again while computing: computing again", self.member_id)
        finally:
            self._prepared = False
            self._notify()

    async def _compute_once(self) -> None:
        started = time.monotonic()
        self._compute_again = self._prepared = False
        try:
            async with asyncio.timeout(self.rebalance_timeout_ms / 1000):
                prep = await self._call(wire.ConnectGroupPrepareAssignmentRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch))
                self._prepared = True
                if prep.error_code:
                    level = logging.INFO if prep.error_code in GROUP_MOVED_ON else logging.WARNING
                    log.log(level, "%s: prepare: %s (%s)", self.member_id, E.name(prep.error_code),
                            prep.error_message)
                    return
                if prep.assignor_name != self.assignor.name:
                    log.error("%s: the group uses assignor %r, this worker has %r: not computing", self.member_id,
                              prep.assignor_name, self.assignor.name)
                    return
                inp = AssignmentInput(
                    computing_member_id=self.member_id, version=prep.assignor_version,
                    now_ms=int(time.time() * 1000), units=self.units,
                    members=[MemberInput(m.member_id, m.instance_id, m.metadata, m.target, m.target_metadata)
                             for m in prep.members],
                    departed=[DepartedInput(d.member_id, d.instance_id, d.target) for d in prep.departed_members],
                    state=prep.assignor_state, delay_remaining_ms=prep.delay_remaining_ms)
                out = await asyncio.to_thread(self.assignor.assign, inp)
                install = wire.ConnectGroupInstallAssignmentRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                    group_epoch=prep.group_epoch, error=out.error, assignment_delay_ms=out.delay_ms,
                    assignor_state=out.state, members=[wire.ConnectGroupInstallAssignmentRequestMember(
                        member_id=m.member_id, connectors_and_tasks=_install_units(m), version=m.version,
                        metadata=m.metadata) for m in out.members])
                resp = await self._call(install)
            took = (time.monotonic() - started) * 1000
            if resp.error_code == E.NONE:
                self._wake.set()  # heartbeat now: this worker's own share is waiting
                log.info("%s: installed the assignment of group epoch %d for %d members (error %d, delay %d ms, "
                         "%.0f ms)", self.member_id, prep.group_epoch, len(out.members), out.error, out.delay_ms, took)
            elif resp.error_code in GROUP_MOVED_ON:
                log.info("%s: install at group epoch %d: %s (%s)", self.member_id, prep.group_epoch,
                         E.name(resp.error_code), resp.error_message)
            else:
                log.error("%s: install at group epoch %d: %s (%s)", self.member_id, prep.group_epoch,
                          E.name(resp.error_code), resp.error_message)
        except TimeoutError:
            log.warning("%s: the computation took longer than the rebalance timeout (%d ms)", self.member_id,
                        self.rebalance_timeout_ms)
        except ConnectionLost as e:
            log.info("%s: computing: %s", self.member_id, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: computing the assignment failed", self.member_id)

    # ---- the connection -----------------------------------------------------------------------------------------

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> _Connection:
        async with self._connect_lock:
            loop = asyncio.get_running_loop()
            if self._conn is not None and self._session_ends is not None and loop.time() >= self._session_ends:
                log.debug("%s: the SASL session is ending: reconnecting", self.member_id)
                self._drop_connection()
            if self._conn is None or self._conn.closed:
                async with asyncio.timeout(self.request_timeout):
                    reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl)
                conn = _Connection(reader, writer, self.client_id, self.api_key_base)
                try:
                    lifetime_ms = await self._authenticate(conn) if self.security.sasl else 0
                except BaseException:
                    conn.close()
                    raise
                # renewed at 85% of its lifetime, before the server closes it (Kafka's clients: 85-95%)
                self._session_ends = loop.time() + lifetime_ms * 0.85 / 1000 if lifetime_ms else None
                self._conn = conn
                log.debug("%s: connected to %s:%d", self.member_id, self.host, self.port)
            return self._conn

    async def _authenticate(self, conn: _Connection) -> int:
        """SaslHandshake and SaslAuthenticate on a new connection; the session lifetime in ms (0: none)."""
        exchange = SaslExchange(self.security).requests()
        body, version = next(exchange)
        while True:
            resp = await conn.call(body, self.request_timeout, version)
            try:
                body, version = exchange.send(resp)
            except StopIteration as done:
                log.debug("%s: authenticated as %s with %s", self.member_id, self.security.sasl_username,
                          self.security.sasl_mechanism)
                return done.value or 0

    async def _call(self, body):
        """Send one request and return its response; ConnectionLost when the connection fails."""
        try:
            conn = await self._connection()
            return await conn.call(body, self.request_timeout)
        except ssl.SSLCertVerificationError:  # an untrusted server: no retry mends it (Kafka: SslAuthenticationException)
            self._drop_connection()
            raise
        except (OSError, EOFError, TimeoutError, wire.DecodeError) as e:
            self._drop_connection()
            raise ConnectionLost(repr(e)) from e
        except ConnectionLost:
            self._drop_connection()
            raise


def _install_units(m) -> Any:
    """A MemberAssignment's connectors and tasks as an Install member's struct."""
    return wire.ConnectGroupInstallAssignmentRequestConnectorsAndTasks(
        connectors=list(m.connectors),
        tasks=[wire.ConnectGroupInstallAssignmentRequestConnectorTasks(connector=t.connector, task_ids=list(t.task_ids))
               for t in m.tasks])


def _show(units: Units, limit: int = 8) -> str:
    names = sorted(map(str, units))
    return ", ".join(names[:limit]) + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
