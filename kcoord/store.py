"""Durable coordinator state: Kafka-format records, written ahead of the responses that acknowledge them.

What the coordinator must not forget is kept as the records Kafka keeps in `__consumer_offsets`: a
GroupMetadataKey/Value per classic group (generation, protocol, leader, members with instance ids, subscriptions
and assignments) and an OffsetCommitKey/Value per committed partition. Keys and values are the exact bytes Kafka
writes (an int16 record type or version, then the struct). The latest value per key wins and a tombstone deletes,
as in a compacted topic. kcoord adds one record of its own, the topic catalogue (a Kafka cluster keeps topics in
its metadata log, which kcoord does not have); its type id (1000) is outside Kafka's range.

Layers:
- `Records` is the backend interface: an atomic, durable `put` of a batch of key -> value-or-tombstone, and a
  `scan` of what is stored. `SqliteRecords` (the embedded default, SQLite in WAL mode from the standard library),
  `MemoryRecords` (a dict, for tests and in-process use). A replicated backend (a compacted Kafka-compatible
  topic, PostgreSQL) would implement the same two calls over the same bytes.
- `GroupStore` turns coordinator state into records, stages the writes of one event-loop turn and commits them
  as one transaction (`commit`), and replays a backend into a Coordinator on start (`load`).
- `check_store` reads a data directory end to end and names every problem it finds (`kcoord store check`).

Why SQLite: it is in the standard library, needs no server, survives SIGKILL and power loss with its WAL (each
commit's frames are checksummed and fsynced before `commit` returns, with `store.fsync=always`), and a compacted
key/value table is exactly a table with a primary key. A hand-written log would need its own compaction, torn-write
detection and index. kcoord adds a CRC32 per record over key and value, so a damaged payload is named rather than
replayed.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol

from . import wire
from .topics import Topic, TopicCatalogue

if TYPE_CHECKING:
    from .classic import ClassicGroup
    from .coordinator import Coordinator

STORE_FILE = "kcoord.db"
LOCK_FILE = "kcoord.lock"
STORE_MAGIC = "kcoord-store"
STORE_FORMAT = 1
FSYNC_POLICIES = ("always", "off")

# Record types (the key's int16 "version" is the record type id, as in Kafka's coordinator records).
OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY, GROUP_METADATA_KEY = 0, 1, 2
KCOORD_TOPIC_KEY = 1000
GROUP_METADATA_VALUE_VERSION = 3  # what Kafka writes for classic groups
OFFSET_COMMIT_VALUE_VERSION = 3  # leader epoch, no expire timestamp (KIP-211)

_I16 = struct.Struct(">h")
_TOPIC_VALUE = struct.Struct(">h16si")


class StoreError(Exception):
    """The store cannot be used: damaged, foreign, locked, or a write failed. The message names the problem."""


# ---------------------------------------------------------------------------------------------------------------
# Records: Kafka's bytes


def group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY) + wire.GroupMetadataKey(group=group_id).encode(GROUP_METADATA_KEY)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY) + wire.OffsetCommitKey(
        group=group_id, topic=topic, partition=partition).encode(OFFSET_COMMIT_KEY)


def topic_key(name: str) -> bytes:
    return _I16.pack(KCOORD_TOPIC_KEY) + name.encode()


def group_value(g: "ClassicGroup", timestamp_ms: int) -> bytes:
    protocol = g.protocol_name
    members = [wire.GroupMetadataValueMemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
        subscription=(m.metadata_for(protocol) or b"") if protocol is not None else b"",
        assignment=m.assignment) for m in g.members]
    value = wire.GroupMetadataValue(protocol_type=g.protocol_type or "", generation=g.generation, protocol=protocol,
                                    leader=g.leader_id if members else None,
                                    current_state_timestamp=timestamp_ms, members=members)
    return _I16.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


def offset_value(offset: int, leader_epoch: int, metadata: str | None, timestamp_ms: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_VALUE_VERSION) + wire.OffsetCommitValue(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
        commit_timestamp=timestamp_ms).encode(OFFSET_COMMIT_VALUE_VERSION)


def topic_value(t: Topic) -> bytes:
    return _TOPIC_VALUE.pack(0, t.topic_id, t.partitions)


@dataclass
class Record:
    """One decoded record. kind: "group", "offset" or "topic"."""

    kind: str
    group: str | None
    key: object
    value: object


def decode_record(key: bytes, value: bytes) -> Record:
    """Decode a stored key and value; a StoreError says which record is wrong and how."""
    try:
        rtype = _I16.unpack_from(key)[0]
        if rtype == GROUP_METADATA_KEY:
            k = wire.GroupMetadataKey.decode(memoryview(key)[2:], rtype)
            v = wire.GroupMetadataValue.decode(memoryview(value)[2:], _value_version(value, 4))
            return Record("group", k.group, k, v)
        if rtype in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
            k = wire.OffsetCommitKey.decode(memoryview(key)[2:], rtype)
            v = wire.OffsetCommitValue.decode(memoryview(value)[2:], _value_version(value, 4))
            return Record("offset", k.group, k, v)
        if rtype == KCOORD_TOPIC_KEY:
            version, topic_id, partitions = _TOPIC_VALUE.unpack(value)
            name = key[2:].decode()
            if version != 0 or partitions < 1 or not name:
                raise ValueError(f"bad topic value (version {version}, {partitions} partitions)")
            return Record("topic", None, name, Topic(name, topic_id, partitions))
        raise ValueError(f"unknown record type {rtype}")
    except (wire.DecodeError, ValueError, struct.error, UnicodeDecodeError) as e:
        raise StoreError(f"record with key {key[:64].hex()} cannot be read: {e}") from None


def _value_version(value: bytes, highest: int) -> int:
    version = _I16.unpack_from(value)[0]
    if not 0 <= version <= highest:
        raise ValueError(f"unknown value version {version}")
    return version


# ---------------------------------------------------------------------------------------------------------------
# Backends


class Records(Protocol):
    """A compacted key/value log: the interface a durable backend implements."""

    def put(self, batch: dict[bytes, bytes | None]) -> None:
        """Store every entry (None: a tombstone) atomically and durably, or raise StoreError."""

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every stored (key, value); a StoreError names a damaged record."""

    def close(self) -> None: ...


class MemoryRecords:
    """Records in a dict: what tests replay from, and a model of the compaction rule."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.commits = 0

    def put(self, batch: dict[bytes, bytes | None]) -> None:
        for k, v in batch.items():
            if v is None:
                self.data.pop(k, None)
            else:
                self.data[k] = v
        self.commits += 1

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self.data.items()))

    def close(self) -> None:
        pass


SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (key BLOB PRIMARY KEY, value BLOB NOT NULL, crc INTEGER NOT NULL) WITHOUT ROWID;
"""


def record_crc(key: bytes, value: bytes) -> int:
    return zlib.crc32(value, zlib.crc32(key))


class SqliteRecords:
    """The embedded store: one SQLite database in WAL mode in the data directory.

    fsync "always" (the default) fsyncs the WAL at every commit, before the responses it covers leave: nothing
    acknowledged is lost to a crash of the process or the machine. "off" leaves flushing to the OS: a killed
    process loses nothing, a power cut may lose the last commits, and the store stays consistent either way.
    One server at a time: the directory is locked while the store is open.
    """

    def __init__(self, data_dir: str, fsync: str = "always", *, create: bool = True) -> None:
        if fsync not in FSYNC_POLICIES:
            raise StoreError(f"store.fsync must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, STORE_FILE)
        self.fsync = fsync
        self.commits = 0
        os.makedirs(data_dir, exist_ok=True)
        self._lock = _lock_dir(data_dir)
        try:
            if not os.path.exists(self.path):
                if not create:
                    raise StoreError(f"{self.path} does not exist")
                _refuse_orphans(self.path)
                _create(self.path)
            self.db = _open(self.path, readonly=False)
            _verify(self.db, self.path, full=False)
            self.db.execute(f"PRAGMA synchronous={'FULL' if fsync == 'always' else 'NORMAL'}")
        except BaseException:
            os.close(self._lock)
            raise

    def put(self, batch: dict[bytes, bytes | None]) -> None:
        puts = [(k, v, record_crc(k, v)) for k, v in batch.items() if v is not None]
        dels = [(k,) for k, v in batch.items() if v is None]
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            if puts:
                db.executemany("INSERT OR REPLACE INTO records (key, value, crc) VALUES (?, ?, ?)", puts)
            if dels:
                db.executemany("DELETE FROM records WHERE key = ?", dels)
            db.execute("COMMIT")
        except sqlite3.Error as e:
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise StoreError(f"{self.path}: write failed: {e}") from e
        self.commits += 1

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        crc32 = zlib.crc32
        try:
            cur = self.db.execute("SELECT key, value, crc FROM records")
            while rows := cur.fetchmany(8192):
                for key, value, crc in rows:
                    if crc32(value, crc32(key)) != crc:
                        raise StoreError(f"{self.path}: record with key {key[:64].hex()} fails its checksum")
                    yield key, value
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cannot read records: {e}") from e

    def close(self) -> None:
        if self.db is None:
            return
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a clean stop leaves everything in the main file
        except sqlite3.Error:
            pass
        self.db.close()
        self.db = None
        os.close(self._lock)


def _lock_dir(data_dir: str) -> int:
    fd = os.open(os.path.join(data_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreError(f"{data_dir} is in use by another kcoord process") from None
    return fd


def _refuse_orphans(path: str) -> None:
    # A WAL without its database means the database file went missing: never start empty over it.
    wal = path + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        raise StoreError(f"{path} is missing but its write-ahead log {wal} is not: refusing to start empty")


def _create(path: str) -> None:
    """Create the store atomically: built beside, then renamed into place, so a crash leaves none or all."""
    tmp = path + ".new"
    for f in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
        if os.path.exists(f):
            os.unlink(f)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("magic", STORE_MAGIC), ("format", str(STORE_FORMAT)), ("created_ms", str(time.time_ns() // 10**6))])
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _open(path: str, readonly: bool) -> sqlite3.Connection:
    try:
        uri = f"file:{path}?mode={'ro' if readonly else 'rw'}"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise StoreError(f"{path}: cannot open: {e}") from e


def _verify(db: sqlite3.Connection, path: str, full: bool) -> None:
    """Refuse what is not a healthy kcoord store, naming the problem."""
    try:
        if os.path.getsize(path) == 0:
            raise StoreError(f"{path} is empty (truncated?); it is not a kcoord store")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "records"} <= tables:
            raise StoreError(f"{path} is not a kcoord store (tables: {', '.join(sorted(tables)) or 'none'})")
        meta = dict(db.execute("SELECT name, value FROM meta"))
        if meta.get("magic") != STORE_MAGIC:
            raise StoreError(f"{path} is not a kcoord store (magic {meta.get('magic')!r})")
        if meta.get("format") != str(STORE_FORMAT):
            raise StoreError(f"{path} has store format {meta.get('format')!r}; this kcoord reads {STORE_FORMAT}")
        problems = [r[0] for r in db.execute(f"PRAGMA {'integrity_check' if full else 'quick_check'}(20)")]
        if problems != ["ok"]:
            raise StoreError(f"{path} is damaged: {'; '.join(problems)}")
    except sqlite3.Error as e:
        raise StoreError(f"{path} is damaged: {e}") from e


# ---------------------------------------------------------------------------------------------------------------
# The coordinator's store


class NullStore:
    """Keeps nothing beyond the coordinator's memory (no --data-dir)."""

    dirty = False
    on_dirty: Callable[[], None] | None = None

    def write_group(self, group: "ClassicGroup") -> None:
        pass

    def write_offsets(self, group_id: str, offsets: dict) -> None:
        pass

    def delete_group(self, group_id: str, offset_keys: Iterable[tuple[str, int]]) -> None:
        pass

    def write_topic(self, topic: Topic) -> None:
        pass

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class LoadStats:
    groups: int = 0
    members: int = 0
    offsets: int = 0
    topics: int = 0
    seconds: float = 0.0


class GroupStore:
    """Stages the records a turn of the event loop writes and commits them as one transaction.

    `dirty` is true while staged records are not yet durable: no response may leave then (the server holds them
    until `commit`). `on_dirty` is called when the first record of a batch is staged (the server schedules the
    commit at the end of the turn). Writes to one key within a batch collapse to the last.
    """

    def __init__(self, records: Records, wall_ms: Callable[[], int] | None = None) -> None:
        self.records = records
        self.pending: dict[bytes, bytes | None] = {}
        self.dirty = False
        self.on_dirty: Callable[[], None] | None = None
        self.wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self.commits = 0
        self.staged = 0

    def _stage(self, key: bytes, value: bytes | None) -> None:
        if not self.dirty:
            self.dirty = True
            if self.on_dirty is not None:
                self.on_dirty()
        self.pending[key] = value
        self.staged += 1

    def write_group(self, group: "ClassicGroup") -> None:
        self._stage(group_key(group.group_id), group_value(group, self.wall_ms()))

    def write_offsets(self, group_id: str, offsets: dict) -> None:
        """offsets: {(topic, partition): (offset, leader epoch, metadata, commit time ms) or None (delete)}."""
        for (topic, partition), v in offsets.items():
            self._stage(offset_key(group_id, topic, partition), None if v is None else offset_value(*v))

    def delete_group(self, group_id: str, offset_keys: Iterable[tuple[str, int]]) -> None:
        for topic, partition in list(offset_keys):
            self._stage(offset_key(group_id, topic, partition), None)
        self._stage(group_key(group_id), None)

    def write_topic(self, topic: Topic) -> None:
        self._stage(topic_key(topic.name), topic_value(topic))

    def commit(self) -> None:
        """Make everything staged durable (one transaction). On failure the error propagates: the caller must
        not send the responses it holds."""
        if not self.dirty:
            return
        batch, self.pending = self.pending, {}
        self.dirty = False
        self.records.put(batch)
        self.commits += 1

    def close(self) -> None:
        self.records.close()

    # ---- replay ----------------------------------------------------------------------------------

    def load(self, coordinator: "Coordinator", topics: TopicCatalogue | None = None) -> LoadStats:
        """Replay every record into an empty coordinator: groups (Stable with their members, or Empty),
        generations, leaders, protocols, static maps, assignments and offsets. Every member gets a full session
        timeout from now to come back (Kafka's onLoaded)."""
        t0 = time.perf_counter()
        stats = LoadStats()
        groups: dict[str, object] = {}
        offsets: dict[str, dict[tuple[str, int], tuple]] = {}
        key_from, value_from = wire.OffsetCommitKey.decode_from, wire.OffsetCommitValue.decode_from
        last_group, last = None, {}
        for key, value in self.records.scan():
            # The common case without the dispatch: an OffsetCommitKey v1 with a v3 value. Keys come in key
            # order, so one group's offsets arrive together.
            if key[:2] == b"\x00\x01" and value[:2] == b"\x00\x03":
                try:
                    k, kend = key_from(key, 1, 2)
                    v, vend = value_from(value, 3, 2)
                except wire.DecodeError:
                    kend = vend = -1
                if kend != len(key) or vend != len(value):
                    decode_record(key, value)  # raises, naming the record
                if k.group != last_group:
                    last_group, last = k.group, offsets.setdefault(k.group, {})
                last[(k.topic, k.partition)] = (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
                continue
            rec = decode_record(key, value)
            if rec.kind == "group":
                groups[rec.group] = rec.value
            elif rec.kind == "offset":
                v = rec.value
                offsets.setdefault(rec.group, {})[(rec.key.topic, rec.key.partition)] = (
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
            elif rec.kind == "topic":
                if topics is not None:
                    topics.restore(rec.value)
                stats.topics += 1
        for group_id, value in groups.items():
            problem = group_problem(value)
            if problem:
                raise StoreError(f"group {group_id!r}: {problem}")
            g = coordinator.group(group_id, create=True)
            g.restore(value)
            stats.groups += 1
            stats.members += len(value.members)
        for group_id, committed in offsets.items():
            g = coordinator.group(group_id, create=True)
            g.offsets.update(committed)
            stats.offsets += len(committed)
        stats.seconds = time.perf_counter() - t0
        return stats


def group_problem(value) -> str | None:
    """What makes a stored GroupMetadataValue unusable, or None."""
    ids = [m.member_id for m in value.members]
    if len(set(ids)) != len(ids):
        return "a member id appears twice"
    iids = [m.group_instance_id for m in value.members if m.group_instance_id is not None]
    if len(set(iids)) != len(iids):
        return "an instance id appears twice"
    if value.generation < 0:
        return f"negative generation {value.generation}"
    if value.members and value.leader not in ids:
        return f"leader {value.leader!r} is not a member"
    if value.members and value.protocol is None:
        return "members but no protocol"
    return None


# ---------------------------------------------------------------------------------------------------------------
# kcoord store check


@dataclass
class CheckReport:
    path: str
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    groups: int = 0
    members: int = 0
    offsets: int = 0
    topics: int = 0
    records: int = 0
    bytes: int = 0

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "problems": self.problems, "records": self.records,
                "groups": self.groups, "members": self.members, "offsets": self.offsets, "topics": self.topics,
                "bytes": self.bytes}


def check_store(data_dir: str, max_problems: int = 50) -> CheckReport:
    """Read a store end to end (SQLite's integrity check, then every record's checksum and bytes, then each
    group's consistency) without changing it."""
    path = os.path.join(data_dir, STORE_FILE)
    report = CheckReport(path)

    def problem(text: str) -> None:
        report.ok = False
        if len(report.problems) < max_problems:
            report.problems.append(text)

    if not os.path.exists(path):
        problem(f"{path} does not exist")
        return report
    report.bytes = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    try:
        db = _open(path, readonly=True)
    except StoreError as e:
        problem(str(e))
        return report
    try:
        _verify(db, path, full=True)
        for key, value, crc in db.execute("SELECT key, value, crc FROM records"):
            report.records += 1
            if record_crc(key, value) != crc:
                problem(f"record with key {key[:64].hex()} fails its checksum")
                continue
            try:
                rec = decode_record(key, value)
            except StoreError as e:
                problem(str(e))
                continue
            if rec.kind == "group":
                report.groups += 1
                report.members += len(rec.value.members)
                issue = group_problem(rec.value)
                if issue:
                    problem(f"group {rec.group!r}: {issue}")
            elif rec.kind == "offset":
                report.offsets += 1
            else:
                report.topics += 1
    except StoreError as e:
        problem(str(e))
    except sqlite3.Error as e:
        problem(f"{path} is damaged: {e}")
    finally:
        db.close()
    return report
