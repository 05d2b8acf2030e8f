"""A kcoord cluster: several `kcoord serve` nodes over one PostgreSQL database (kcoord.pgstore).

Groups live in `offsets.topic.num.partitions` coordinator partitions (Kafka's hash of the group id). Each node
runs a lease loop every `broker.heartbeat.interval.ms`: it renews its own node row and the leases it holds (each
for `broker.session.timeout.ms`, by the database's clock), reads who is alive and who owns what, works out the
share of partitions that is its own, gives up what it holds beyond that share, and takes partitions that are free
or whose lease has run out, raising their epochs and replaying their records. Every write carries the epochs, so
a node that lost a lease (paused, cut off) cannot write; it steps down when its write is refused or when its own
clock says the lease has run out, whichever it sees first.

The share is sticky: a live owner keeps what it has up to ceil(partitions / nodes); the rest goes, in partition
order, to the node with the fewest. Every node computes it from the same table, so they agree without talking.

Requests for a group whose partition this node has not loaded are answered NOT_COORDINATOR (FindCoordinator names
the owner); FindCoordinator answers COORDINATOR_NOT_AVAILABLE while no live node holds the partition, as Kafka
does while a partition has no leader. Both are retriable: clients look again.

A node serves a partition only until its lease deadline: the start of the lease round that last renewed or took
it, plus the lease, by `lease_clock` (CLOCK_BOOTTIME: it never steps with the wall clock, and it runs on while
the machine is suspended or the process is stopped). That round began before the database stamped the lease, so
the deadline passes before the database's `expires_at`, and so before any other node can take the partition
(rounds take it only once the database's own clock says the lease ran out). From its deadline on, the node answers
every request for the partition's groups NOT_COORDINATOR, reads as well as writes, even before its next round
tells it who took over (a resumed process answers what it read while stopped the same way), and FindCoordinator
no longer names it. Its writes are fenced by the epoch besides, at the database. No clock of a node's own
extends a lease: the database stamps every expiry.

A second process started with a node's `node.id` is refused while the first is registered and live; once the
first's registration runs out (paused, cut off) the second registers and takes its partitions at raised epochs.
The first, if it comes back, finds its registration taken and stops (exit status 1): two processes answering
as one node id would give clients two addresses for it.

When the database cannot be reached, writes fail: the partitions they touched are unloaded (their memory is
ahead of the database), the connections waiting for that commit are closed unanswered (clients retry), and the
partitions are taken again (epoch raised, records replayed) once the database answers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from . import errors as E
from . import wire
from .offsets import DEFER_ABOVE
from .pgstore import (
    GLOBAL,
    WRITES_RETENTION,
    FencedError,
    Partitioner,
    PgRecords,
    StoreError,
    Superseded,
    connect,
    init_schema,
    locked,
    psycopg,
)
from .pgstore import _first_line as first_line
from .reply import Deferred, Reply, release
from .tables import ranges
from .topics import Topic, TopicCatalogue

if TYPE_CHECKING:
    import psycopg

    from .coordinator import LoadStats

log = logging.getLogger("kcoord.cluster")
PRUNE_EVERY = 120  # lease rounds between prunings of this node's partitions' write log
FAILURE_LOG_EVERY_S = 30.0  # a database that stays away is logged once per this, not once per round
BOOTTIME = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)  # (Linux; elsewhere the monotonic clock)


def lease_clock() -> float:
    """The clock of every lease deadline a node keeps (see the module docstring): seconds since boot."""
    return time.clock_gettime(BOOTTIME)


@dataclass
class Node:
    node_id: int
    host: str
    port: int
    # its advertised address on each listener (listener name -> (host, port)); empty for a node that registered
    # none (it is then reached at host:port whatever the listener)
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of `listener` reaches this node; None when the node has no such listener (Kafka leaves it
        out of Metadata and answers FindCoordinator COORDINATOR_NOT_AVAILABLE)."""
        if not self.listeners or listener is None:
            return self.host, self.port
        return self.listeners.get(listener)


def listeners_text(listeners: dict[str, tuple[str, int]]) -> str:
    """A node's listeners as kcoord_nodes keeps them: NAME=host:port,..."""
    return ",".join(f"{name}={host}:{port}" for name, (host, port) in listeners.items())


def parse_listeners_text(text: str) -> dict[str, tuple[str, int]]:
    out = {}
    for item in text.split(","):
        name, sep, address = item.partition("=")
        host, _, port = address.rpartition(":")
        if sep and port.isdigit():
            out[name] = (host, int(port))
    return out


@dataclass
class View:
    """What the last lease round read: live nodes and each partition's live owner (None: free or expired)."""
    nodes: dict[int, Node] = field(default_factory=dict)
    owners: dict[int, int | None] = field(default_factory=dict)
    until: dict[int, float] = field(default_factory=dict)  # partition -> when its lease ends (lease_clock())

    def owner(self, p: int) -> int | None:
        """The partition's owner while its lease, as last read, has not run out."""
        o = self.owners.get(p)
        return o if o is not None and self.until.get(p, 0) > lease_clock() else None


def share(view: View, partitions: int, me: int) -> set[int]:
    """The partitions `me` should hold (see the module docstring): the same answer on every node for one view."""
    live = sorted(view.nodes)
    if me not in live:
        return set()
    cap = math.ceil(partitions / len(live))
    count = dict.fromkeys(live, 0)
    owner: dict[int, int] = {}
    orphans = []
    for p in range(partitions):
        o = view.owners.get(p)
        if o in count and count[o] < cap:
            owner[p] = o
            count[o] += 1
        else:
            orphans.append(p)
    for p in orphans:
        o = min(live, key=lambda n: (count[n], n))
        owner[p] = o
        count[o] += 1
    return {p for p, o in owner.items() if o == me}


@dataclass
class Round:
    """What one lease round did in the database (run off the event loop)."""
    started: float  # lease_clock() before the first statement: leases renewed run from here
    view: View
    renewed: set[int]
    acquired: dict[int, int]  # partition -> new epoch
    rows: list  # the acquired partitions' records
    topics: list | None  # the topic records, when their version moved
    topics_version: str
    registered: bool


class NodeSettings(Protocol):
    """The server settings a node reads (kcoord.config.ServerConfig has them)."""

    node_id: int
    coordinator_partitions: int
    lease_ms: int
    lease_renew_ms: int
    host: str
    port: int
    advertised_host: str | None
    advertised_port: int | None
    topics: list[str]


class StagedRecords(Protocol):
    """What a node may do to its server's staged records (store.GroupStore)."""

    def drop_staged(self, drop: Callable[[bytes], bool]) -> int: ...


class ClusterHost(Protocol):
    """What a node needs of the server it runs in, and all it may touch: kcoord.server.Server implements it. The
    node reads the settings and the topic catalogue, and asks the server to load and unload groups, to take the
    catalogue's and the credentials' changes, to commit what a turn staged, and to re-arm its timer."""

    @property
    def config(self) -> NodeSettings: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def topics(self) -> TopicCatalogue: ...

    def load_records(self, rows: Iterable[tuple[bytes, bytes]]) -> LoadStats:
        """Replay records read from the database (checked rows) into the coordinator."""
        ...

    def unload_groups(self, belongs: Callable[[str], bool]) -> int:
        """Drop the groups whose id `belongs` (parked requests answered NOT_COORDINATOR): how many."""
        ...

    def refresh_credentials(self, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Adopt the SCRAM credentials as the database holds them."""
        ...

    def forget_topic(self, name: str) -> None:
        """A topic another node deleted: every group's committed offsets of it go."""
        ...

    def halt(self, exc: BaseException) -> None:
        """Stop serving at once, answering nothing more; the process exits with `exc`."""

    def drop_staged(self, belongs: Callable[[bytes], bool]) -> int:
        """Forget the staged records whose key `belongs` names, closing unanswered what waited for a commit."""

    def commit_staged(self) -> None:
        """Commit what this turn has staged, if anything."""
        ...

    def rearm_timer(self) -> None: ...


class Cluster:
    def __init__(self, server: ClusterHost, dsn: str) -> None:
        cfg = server.config
        self.server = server
        self.dsn = dsn
        self.node_id = cfg.node_id
        self.partitions = cfg.coordinator_partitions
        self.lease_s = cfg.lease_ms / 1000
        self.interval_s = cfg.lease_renew_ms / 1000
        self.host = cfg.advertised_host or cfg.host
        self.port = cfg.advertised_port or cfg.port
        self.listeners: dict[str, tuple[str, int]] = {}  # this node's advertised address per listener (set at start)
        self.incarnation = os.urandom(8).hex()
        self.partitioner = Partitioner(self.partitions)
        # a node stopped inside a transaction holds lease rows no longer than its lease would have
        self.records = PgRecords(dsn, self.node_id, self.partitioner, idle_in_transaction_s=self.lease_s)
        self.epochs = self.records.epochs  # partition -> epoch held and loaded
        self.deadline: dict[int, float] = {}  # partition -> when this node stops serving it (lease_clock())
        self.view = View()
        self.topics_version = ""
        self.lease_conn: psycopg.Connection | None = None  # the lease's own connection, from open()
        self.task: asyncio.Task | None = None
        self.rounds = 0
        self.stopping = False
        self.failing_since: float | None = None  # lease rounds fail since then (time.monotonic())
        self.failure_logged = 0.0
        self.wake = asyncio.Event()  # set to stop the lease loop between rounds
        self.failed_rounds = 0  # for the metrics endpoint
        self.step_downs = 0  # partitions stepped down from

    # ---- start and stop ------------------------------------------------------------------------------

    def open(self) -> PgRecords:
        """Connect, make or check the schema, and register this node (refused while another live process is
        registered under the same node.id). Returns the store backend for the server's GroupStore."""
        conn = self.lease_conn = connect(self.dsn, node_id=self.node_id, idle_in_transaction_s=self.lease_s)
        init_schema(conn, self.partitions)
        if not self._register(conn):
            row = conn.execute("SELECT host, port FROM kcoord_nodes WHERE node_id = %s", (self.node_id,)).fetchone()
            conn.close()
            raise StoreError(f"node.id {self.node_id} is in use by a live node at {row[0]}:{row[1]}")
        self._create_topics(conn)
        self.topics_version = conn.execute(
            "SELECT value FROM kcoord_meta WHERE name = 'topics_version'").fetchone()[0]
        return self.records

    def _create_topics(self, conn) -> None:
        """The start-up topics (--topic) that the database does not hold yet, written where every node reads them
        before any node serves them: nodes started together agree on each topic's id (the first one written
        wins; the server grows a topic given more partitions than stored)."""
        from . import records as R
        from .pgstore import record_crc
        from .topics import parse_topic_spec
        rows = []
        for spec in self.server.config.topics:
            name, n = parse_topic_spec(spec)
            key, value = R.topic_key(name), R.topic_value(os.urandom(16), n)
            rows.append((key, value, record_crc(key, value)))
        if rows:
            with conn.transaction():
                added = conn.execute(
                    "INSERT INTO kcoord_records (partition, key, value, crc) SELECT %s, * FROM unnest(%s::bytea[], "
                    "%s::bytea[], %s::bigint[]) ON CONFLICT DO NOTHING RETURNING key",
                    (GLOBAL, *map(list, zip(*rows, strict=True)))).fetchall()
                if added:
                    conn.execute("UPDATE kcoord_meta SET value = (value::bigint + 1)::text "
                                 "WHERE name = 'topics_version'")

    def _register(self, conn) -> bool:
        lease = f"{self.lease_s} seconds"
        row = conn.execute(
            "INSERT INTO kcoord_nodes AS n (node_id, host, port, incarnation, started_at, expires_at, listeners) "
            "VALUES (%s, %s, %s, %s, clock_timestamp(), clock_timestamp() + %s::interval, %s)"
            " ON CONFLICT (node_id) DO UPDATE SET host = excluded.host, port = excluded.port,"
            " incarnation = excluded.incarnation, started_at = excluded.started_at, expires_at = excluded.expires_at,"
            " listeners = excluded.listeners"
            " WHERE n.expires_at < clock_timestamp() OR n.incarnation = excluded.incarnation RETURNING node_id",
            (self.node_id, self.host, self.port, self.incarnation, lease, listeners_text(self.listeners))).fetchone()
        return row is not None

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        await self.round()
        await asyncio.sleep(0)
        self.task = loop.create_task(self._run())

    async def close(self) -> None:
        """Give every partition back (the server has committed and unloaded), and leave the node table, so the
        others take over at their next round instead of after the lease."""
        self.stopping = True
        self.wake.set()
        if self.task is not None:  # a round under way finishes first: what it takes is handed back below
            try:
                await self.task
            except Exception:
                pass
        held = dict(self.epochs)
        self.epochs.clear()
        try:
            await asyncio.to_thread(self._leave, held)
        except Exception as e:
            log.warning("could not hand back leases on stop (they run out by themselves): %s", e)
        if self.lease_conn is not None:
            self.lease_conn.close()

    def _leave(self, held: dict[int, int]) -> None:
        conn = self._lease_conn()
        self._release(conn, held)
        conn.execute("DELETE FROM kcoord_nodes WHERE node_id = %s AND incarnation = %s",
                     (self.node_id, self.incarnation))

    def _release(self, conn, held: dict[int, int]) -> None:
        if held:
            parts = list(held)
            locked(conn, parts, "UPDATE kcoord_leases l SET node_id = NULL, expires_at = '-infinity' "
                   "FROM unnest(%s::int[], %s::bigint[]) AS m(p, e) "
                   "WHERE l.partition = m.p AND l.epoch = m.e AND l.node_id = %s RETURNING l.partition",
                   (parts, [held[p] for p in parts], self.node_id))

    def _lease_conn(self):
        if self.lease_conn is None or self.lease_conn.closed or self.lease_conn.broken:
            if self.lease_conn is not None:
                self.lease_conn.close()
            self.lease_conn = None
            self.lease_conn = connect(self.dsn, timeout_s=max(1.0, self.interval_s), node_id=self.node_id,
                                      idle_in_transaction_s=self.lease_s)
        return self.lease_conn

    # ---- the lease loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self.stopping:
            try:
                await asyncio.wait_for(self.wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            if self.stopping:
                return
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("a lease round failed")

    async def round(self) -> None:
        """One lease round: the database part in a thread, then what it means applied on the event loop."""
        held = dict(self.epochs)
        try:
            r = await asyncio.to_thread(self._db_round, held)
        except (StoreError, psycopg.Error) as e:
            self.failed_rounds += 1
            now = time.monotonic()
            if self.failing_since is None or now - self.failure_logged >= FAILURE_LOG_EVERY_S:
                log.warning("lease round failed: %s", first_line(e),
                            extra={"kcoord": {"event": "lease-round-failed", "error": first_line(e)}})
                self.failure_logged = now
            if self.failing_since is None:
                self.failing_since = now
            self.expire_leases()
            return
        if self.failing_since is not None:
            log.info("lease rounds succeed again after %.1f s", time.monotonic() - self.failing_since,
                     extra={"kcoord": {"event": "lease-round-recovered",
                                       "seconds": round(time.monotonic() - self.failing_since, 3)}})
            self.failing_since = None
        self.rounds += 1
        self._apply(r, held)
        if not r.registered and not self.stopping:
            self.superseded()

    def _db_round(self, held: dict[int, int]) -> Round:
        conn = self._lease_conn()
        started = lease_clock()
        lease = f"{self.lease_s} seconds"
        registered = conn.execute(
            "UPDATE kcoord_nodes SET expires_at = clock_timestamp() + %s::interval, host = %s, port = %s, "
            "listeners = %s WHERE node_id = %s AND incarnation = %s RETURNING node_id",
            (lease, self.host, self.port, listeners_text(self.listeners), self.node_id,
             self.incarnation)).fetchone() is not None \
            or self._register(conn)
        renewed: set[int] = set()
        if held and registered:
            parts = list(held)
            renewed = {p for (p,) in locked(
                conn, parts, "UPDATE kcoord_leases l SET expires_at = clock_timestamp() + %s::interval "
                "FROM unnest(%s::int[], %s::bigint[]) AS m(p, e) "
                "WHERE l.partition = m.p AND l.epoch = m.e AND l.node_id = %s RETURNING l.partition",
                (lease, parts, [held[p] for p in parts], self.node_id))}
        view = View()
        for node_id, host, port, listeners in conn.execute(
                "SELECT node_id, host, port, listeners FROM kcoord_nodes WHERE expires_at > clock_timestamp()"
        ).fetchall():
            view.nodes[node_id] = Node(node_id, host, port, parse_listeners_text(listeners))
        read_at = lease_clock()
        for p, node_id, left in conn.execute(
                "SELECT partition, node_id, CASE WHEN expires_at > clock_timestamp() "
                "THEN extract(epoch FROM expires_at - clock_timestamp()) ELSE -1 END FROM kcoord_leases").fetchall():
            view.owners[p] = node_id if left > 0 and node_id in view.nodes else None
            view.until[p] = read_at + float(left)
        acquired: dict[int, int] = {}
        rows: list = []
        if registered and not self.stopping:
            wanted = [p for p in sorted(share(view, self.partitions, self.node_id))
                      if p not in renewed and view.owners.get(p) in (None, self.node_id)]
            if wanted:
                acquired = dict(locked(
                    conn, wanted, "UPDATE kcoord_leases SET node_id = %s, epoch = epoch + 1, "
                    "expires_at = clock_timestamp() + %s::interval WHERE partition = ANY(%s) "
                    "AND (node_id IS NULL OR node_id = %s OR expires_at < clock_timestamp()) "
                    "RETURNING partition, epoch", (self.node_id, lease, wanted, self.node_id)))
                if acquired:
                    rows = conn.execute("SELECT key, value, crc FROM kcoord_records WHERE partition = ANY(%s) "
                                        "ORDER BY key", (list(acquired),)).fetchall()
                    for p in acquired:
                        view.owners[p], view.until[p] = self.node_id, started + self.lease_s
        if held and self.rounds % PRUNE_EVERY == 0:  # the write log is evidence for an hour, not forever
            conn.execute(f"DELETE FROM kcoord_writes WHERE partition = ANY(%s) "
                         f"AND at < clock_timestamp() - interval '{WRITES_RETENTION}'", (list(held),))
        topics = None
        with conn.transaction():  # the version and the topics it numbers, from one snapshot
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            version = conn.execute("SELECT value FROM kcoord_meta WHERE name = 'topics_version'").fetchone()[0]
            if version != self.topics_version:
                topics = conn.execute("SELECT key, value, crc FROM kcoord_records WHERE partition = %s",
                                      (GLOBAL,)).fetchall()
        return Round(started, view, renewed, acquired, rows, topics, version, registered)

    def _apply(self, r: Round, held: dict[int, int]) -> None:
        self.view = r.view
        # Topics read before this node's own latest topic write are older than its catalogue: not adopted (the
        # next round reads them again); nor while such a write is under way (on the server's writer thread), whose
        # version is not known yet.
        if r.topics is not None and not self.records.global_in_flight \
                and int(r.topics_version) >= self.records.topics_written:
            self.refresh_topics(r.topics)
            self.topics_version = r.topics_version
        lost = [p for p in held if p not in r.renewed and p in self.epochs]
        if lost:
            self.step_down(lost, "its lease was lost")
        until = r.started + self.lease_s
        for p in r.renewed:
            if p in self.epochs:
                self.deadline[p] = until
        mine = share(r.view, self.partitions, self.node_id) if r.registered else set()
        excess = [p for p in self.epochs if p not in mine]
        if excess:
            released = {p: self.epochs[p] for p in excess}
            self.step_down(excess, "it moves to another node")
            self.server.loop.create_task(self._release_later(released))
        if r.acquired:
            self.take(r.acquired, r.rows, until)
        self.expire_leases()

    def superseded(self) -> None:
        """Another process registered this node.id while this one's registration had run out (it was stopped or cut
        off): it has stepped down from everything (its leases were not renewed), and now stops."""
        self.stopping = True
        self.server.halt(Superseded(f"node.id {self.node_id} was registered by another process while this one's "
                                    "registration had run out; stopping"))

    async def _release_later(self, held: dict[int, int]) -> None:
        try:
            await asyncio.to_thread(self._release, self._lease_conn(), held)
        except Exception as e:
            log.warning("could not hand back partitions %s (their leases run out): %s", sorted(held), e)

    def expire_leases(self) -> None:
        """Step down from every partition whose lease has run out by this node's clock."""
        now = lease_clock()
        gone = [p for p in self.epochs if self.deadline.get(p, 0) <= now]
        if gone:
            self.step_down(gone, "its lease ran out")

    # ---- loading and unloading partitions ------------------------------------------------------------

    def take(self, acquired: dict[int, int], rows: list, until: float) -> None:
        """Replay the acquired partitions' records and start serving them."""
        from .pgstore import checked
        t0 = time.perf_counter()
        srv = self.server
        stats = srv.load_records(checked(rows))
        for p, epoch in acquired.items():
            self.epochs[p] = epoch
            self.deadline[p] = until
        srv.rearm_timer()
        log.info("node %d took coordinator partitions %s: %d groups, %d members, %d offsets in %.3f s",
                 self.node_id, _ranges_or_none(acquired), stats.groups, stats.members, stats.offsets,
                 time.perf_counter() - t0,
                 extra={"kcoord": {"event": "partitions-taken", "node": self.node_id, "partitions": sorted(acquired),
                                   "groups": stats.groups, "offsets": stats.offsets}})

    def step_down(self, parts: list[int], why: str) -> None:
        """Stop serving `parts`: commit what is staged for them first when the lease still allows it, or else forget
        it (it must never be written: were the partitions taken again, their new epoch would let it through, old
        state over what another node wrote meanwhile); then drop their groups from memory (parked requests are
        answered NOT_COORDINATOR)."""
        srv = self.server
        if all(self.deadline.get(p, 0) > lease_clock() for p in parts):
            srv.commit_staged()
        gone = set(parts)
        self.step_downs += len(gone)
        for p in parts:
            self.epochs.pop(p, None)
            self.deadline.pop(p, None)
        partition_of = self.partitioner
        unloaded = srv.unload_groups(lambda gid: partition_of(gid) in gone)
        of_key = partition_of.of_key
        dropped = srv.drop_staged(lambda key: of_key(key) in gone)
        srv.rearm_timer()
        log.info("node %d left coordinator partitions %s (%s): %d groups unloaded, %d staged records forgotten",
                 self.node_id, _ranges_or_none(parts), why, unloaded, dropped,
                 extra={"kcoord": {"event": "partitions-left", "node": self.node_id, "partitions": sorted(parts),
                                   "reason": why, "groups": unloaded, "forgotten": dropped}})

    def commit_failed(self, exc: BaseException) -> None:
        """A commit was refused (fenced) or could not reach the database: its partitions' memory is ahead of the
        database, so they are unloaded, and taken again at a later round if they are still this node's."""
        parts = sorted(self.records.failed_partitions)  # one transaction: none of them was written
        log.warning("store commit failed on node %d (%s): stepping down from partitions %s", self.node_id,
                    first_line(exc), _ranges_or_none(parts),
                    extra={"kcoord": {"event": "commit-failed", "node": self.node_id, "error": first_line(exc),
                                      "partitions": parts, "fenced": isinstance(exc, FencedError)}})
        for p in parts:
            self.deadline[p] = 0  # nothing staged for them may be committed now
        held = [p for p in parts if p in self.epochs]
        if held:  # (none: nothing to unload, and nothing of the others' to commit here on the loop)
            self.step_down(held, "a write for it failed")

    def forget_staged(self, store: StagedRecords) -> None:
        """A write failed: drop what was staged since for the partitions it touched (it may build on what the failed
        write held; those partitions are unloaded and replayed from the database when taken again)."""
        failed = self.records.failed_partitions
        if failed:
            of_key = self.partitioner.of_key
            store.drop_staged(lambda key: of_key(key) in failed)

    def refresh_topics(self, rows: list) -> None:
        """Adopt the catalogue as the database has it (another node created, grew or deleted a topic), and the SCRAM
        credentials (the other records every node reads)."""
        from . import records as R
        from .pgstore import checked
        cat = self.server.topics
        stored = {}
        for key, value in checked(rows):
            rec = R.decode(key, value)
            if rec.type != R.KCOORD_TOPIC:
                continue
            t = rec.value
            stored[t.name] = Topic(t.name, t.topic_id, t.partitions)
        self.server.refresh_credentials(checked(rows))
        on_change, on_delete = cat.on_change, cat.on_delete
        cat.on_change = cat.on_delete = None  # what the database already holds is not written back
        try:
            for name, t in stored.items():
                mine = cat.get(name)
                if mine is None or mine.topic_id != t.topic_id or mine.partitions != t.partitions:
                    cat.restore(t)
            for name in [n for n in cat.by_name if n not in stored]:
                cat.delete(name)
                self.server.forget_topic(name)
        finally:
            cat.on_change, cat.on_delete = on_change, on_delete

    # ---- answering -----------------------------------------------------------------------------------

    def serving(self, group_id: str) -> bool:
        p = self.partitioner(group_id)
        return p in self.epochs and self.deadline.get(p, 0) > lease_clock()

    def coordinator(self, group_id: str) -> Node | None:
        """The live node that holds the group's partition, by the last round (this node while it serves it)."""
        p = self.partitioner(group_id)
        if p in self.epochs:
            if self.deadline.get(p, 0) > lease_clock():
                return Node(self.node_id, self.host, self.port, self.listeners)
            return None  # its lease ran out here, and no round has said yet who holds it now
        owner = self.view.owner(p)
        if owner is None or owner == self.node_id:
            return None
        return self.view.nodes.get(owner)

    def brokers(self) -> list[Node]:
        nodes = dict(self.view.nodes)
        nodes[self.node_id] = Node(self.node_id, self.host, self.port, self.listeners)
        return [nodes[n] for n in sorted(nodes)]

    def wrap(self, handlers: dict) -> dict:
        """The handlers, with every group-keyed API answered NOT_COORDINATOR for groups this node does not serve."""
        out = dict(handlers)
        for key, refuse in SINGLE.items():
            if key in out:
                out[key] = self._single(out[key], refuse)
        for key, (ids, rebuild) in MULTI.items():
            if key in out:
                out[key] = self._multi(out[key], ids, rebuild)
        return out

    def _single(self, handler, refuse):
        serving = self.serving

        def guarded(req, version, client_id="", client_host=""):
            gid = req.group_id
            if gid and not serving(gid):
                return refuse(req, version)
            return handler(req, version, client_id, client_host)
        return guarded

    def _multi(self, handler, ids, rebuild):
        serving = self.serving

        def guarded(req, version, client_id="", client_host=""):
            foreign = [g for g in ids(req, version) if g and not serving(g)]
            if not foreign:
                return handler(req, version, client_id, client_host)
            return rebuild(handler, req, version, client_id, client_host, set(foreign))
        return guarded


NOT = E.NOT_COORDINATOR


def _offset_commit(req, version):
    def answer():
        return wire.OffsetCommitResponse(topics=[wire.OffsetCommitResponseTopic(
            name=t.name, topic_id=t.topic_id, partitions=[
                wire.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=NOT)
                for p in t.partitions]) for t in req.topics])
    # thousands of partitions are answered off the loop (server.OFFLOAD_ABOVE), as Offsets.offset_commit does
    def dispose():
        for t in req.topics:
            parts, t.partitions = t.partitions, []
            release(parts)
    return Deferred(answer, dispose) if sum(len(t.partitions) for t in req.topics) > DEFER_ABOVE else answer()


def _offset_fetch_v7(req, version):
    if version >= 2:
        return wire.OffsetFetchResponse(topics=[], error_code=NOT)
    return wire.OffsetFetchResponse(topics=[wire.OffsetFetchResponseTopic(name=t.name, partitions=[
        wire.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, committed_leader_epoch=-1,
                                          metadata="", error_code=NOT) for i in t.partition_indexes])
        for t in req.topics or []])


# API key -> the answer for one group this node does not serve.
SINGLE: dict[int, Callable] = {
    wire.JoinGroupRequest.API_KEY: lambda req, v: wire.JoinGroupResponse(
        error_code=NOT, member_id=req.member_id, protocol_name="" if v < 7 else None),
    wire.SyncGroupRequest.API_KEY: lambda req, v: wire.SyncGroupResponse(error_code=NOT),
    wire.HeartbeatRequest.API_KEY: lambda req, v: wire.HeartbeatResponse(error_code=NOT),
    wire.LeaveGroupRequest.API_KEY: lambda req, v: wire.LeaveGroupResponse(error_code=NOT, members=[]),
    wire.OffsetCommitRequest.API_KEY: _offset_commit,
    wire.OffsetDeleteRequest.API_KEY: lambda req, v: wire.OffsetDeleteResponse(error_code=NOT, topics=[]),
    wire.ConsumerGroupHeartbeatRequest.API_KEY: lambda req, v: wire.ConsumerGroupHeartbeatResponse(
        error_code=NOT, error_message="This node is not the coordinator of the group."),
    wire.ConnectGroupHeartbeatRequest.API_KEY: lambda req, v: wire.ConnectGroupHeartbeatResponse(
        error_code=NOT, error_message="This node is not the coordinator of the group."),
    wire.ConnectGroupPrepareAssignmentRequest.API_KEY: lambda req, v: wire.ConnectGroupPrepareAssignmentResponse(
        error_code=NOT, error_message="This node is not the coordinator of the group."),
    wire.ConnectGroupInstallAssignmentRequest.API_KEY: lambda req, v: wire.ConnectGroupInstallAssignmentResponse(
        error_code=NOT, error_message="This node is not the coordinator of the group."),
}


def _offset_fetch_ids(req, version):
    return [req.group_id] if version <= 7 else [g.group_id for g in req.groups]


def _offset_fetch(handler, req, version, client_id, client_host, foreign):
    if version <= 7:
        return _offset_fetch_v7(req, version)
    resp = handler(req, version, client_id, client_host)  # read-only: the foreign groups' answers are replaced
    for g in resp.groups:
        if g.group_id in foreign:
            g.topics, g.error_code = [], NOT
    return resp


def _describe(handler, req, version, client_id, client_host, foreign):
    resp = handler(req, version, client_id, client_host)  # read-only
    for g in resp.groups:
        if g.group_id in foreign:
            g.error_code = NOT
    return resp


def _delete_groups(handler, req, version, client_id, client_host, foreign):
    mine = [g for g in req.groups_names if g not in foreign]

    def merged(resp) -> wire.DeleteGroupsResponse:
        results = {r.group_id: r for r in resp.results} if resp is not None else {}
        return wire.DeleteGroupsResponse(results=[
            results.get(g) or wire.DeleteGroupsResponseDeletableGroupResult(group_id=g, error_code=NOT)
            for g in dict.fromkeys(req.groups_names)])

    if not mine:
        return merged(None)
    resp = handler(wire.DeleteGroupsRequest(groups_names=mine), version, client_id, client_host)
    if type(resp) is not Reply:
        return merged(resp)
    out = Reply(version=version)  # many groups are deleted in slices (Coordinator.delete_groups): answered after
    resp.on_done(lambda r: out.resolve(merged(r)))
    return out


# API key -> (the group ids a request names, how to answer when some are not this node's).
MULTI: dict[int, tuple[Callable, Callable]] = {
    wire.OffsetFetchRequest.API_KEY: (_offset_fetch_ids, _offset_fetch),
    wire.DescribeGroupsRequest.API_KEY: (lambda req, v: req.groups, _describe),
    wire.DeleteGroupsRequest.API_KEY: (lambda req, v: req.groups_names, _delete_groups),
    wire.ConsumerGroupDescribeRequest.API_KEY: (lambda req, v: req.group_ids, _describe),
    wire.ConnectGroupDescribeRequest.API_KEY: (lambda req, v: req.group_ids, _describe),
}


def _ranges_or_none(parts) -> str:
    return ranges(parts) or "none"
