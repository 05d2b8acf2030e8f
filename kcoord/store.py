"""Durable coordinator state: records written ahead of the responses that acknowledge them.

What the coordinator must not forget is kept as the records Kafka keeps in `__consumer_offsets` (kcoord.records
builds and reads their bytes; each group type and the offsets stage their own). The latest value per key wins and a
tombstone deletes, as in a compacted topic. The store knows no group type: it keeps keys and values, commits them,
hands them back in key order for replay, and checks them.

Layers:
- `Records` is the backend interface: an atomic, durable `put` of a batch of key -> value-or-tombstone, and a
  `scan` of what is stored. `SqliteRecords` (the embedded default, SQLite in WAL mode from the standard library),
  `MemoryRecords` (a dict, for tests and in-process use). A replicated backend (a compacted Kafka-compatible
  topic, PostgreSQL) would implement the same two calls over the same bytes.
- `GroupStore` stages the records of one event-loop turn and commits them as one transaction (`commit`); `scan`
  gives them back for replay (the coordinator dispatches each by its record type).
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
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from . import records as R

if TYPE_CHECKING:
    from .topics import Topic

STORE_FILE = "kcoord.db"
LOCK_FILE = "kcoord.lock"
STORE_MAGIC = "kcoord-store"
STORE_FORMAT = 1
FSYNC_POLICIES = ("always", "off")

class StoreError(Exception):
    """The store cannot be used: damaged, foreign, locked, or a write failed. The message names the problem."""


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

    persistent = False
    dirty = False
    on_dirty: Callable[[], None] | None = None

    @staticmethod
    def wall_ms() -> int:
        return time.time_ns() // 1_000_000

    def stage(self, key: bytes, value: bytes | None) -> None:
        pass

    def write_topic(self, topic: Topic) -> None:
        pass

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(())

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


class GroupStore:
    """Stages the records a turn of the event loop writes and commits them as one transaction.

    `dirty` is true while staged records are not yet durable: no response may leave then (the server holds them
    until `commit`). `on_dirty` is called when the first record of a batch is staged (the server schedules the
    commit at the end of the turn). Writes to one key within a batch collapse to the last.
    """

    persistent = True

    def __init__(self, records: Records, wall_ms: Callable[[], int] | None = None) -> None:
        self.records = records
        self.pending: dict[bytes, bytes | None] = {}
        self.dirty = False
        self.on_dirty: Callable[[], None] | None = None
        self.wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self.commits = 0
        self.staged = 0

    def stage(self, key: bytes, value: bytes | None) -> None:
        """Write `value` under `key` (None: a tombstone) with the next commit."""
        if not self.dirty:
            self.dirty = True
            if self.on_dirty is not None:
                self.on_dirty()
        self.pending[key] = value
        self.staged += 1

    def write_topic(self, topic: Topic) -> None:
        """The catalogue's change hook (TopicCatalogue.on_change)."""
        self.stage(R.topic_key(topic.name), R.topic_value(topic.topic_id, topic.partitions))

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed record, in key order, for replay."""
        return self.records.scan()

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
                rec = R.decode(key, value)
            except R.RecordError as e:
                problem(str(e))
                continue
            groups, members = R.tally(rec)
            report.groups += groups
            report.members += members
            issue = R.problem(rec)
            if issue:
                problem(issue)
            if rec.kind == "offset":
                report.offsets += 1
            elif rec.kind == "topic":
                report.topics += 1
    except StoreError as e:
        problem(str(e))
    except sqlite3.Error as e:
        problem(f"{path} is damaged: {e}")
    finally:
        db.close()
    return report
