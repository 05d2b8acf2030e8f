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
- `GroupStore` stages records and commits them in batches, one transaction each: on the caller's thread
  (`commit`), or, under the server, on one writer thread while the event loop goes on staging the next batch (the
  group commit: `hand_off`, `write`, `written`); `scan` gives them back for replay (the coordinator dispatches
  each by its record type).
- `check_store` reads a data directory end to end and names every problem it finds (`kcoord store check`).

What a rollback would show: every commit also writes, in the same transaction, the store's state (a commit
sequence number, the record count and the sum of the records' CRC32s; the `state` row of `meta`), and after it
commits, that sequence number goes into a small file beside the database (`kcoord.seq`, the commit witness). A
store that opens at an older sequence than its witness lost acknowledged commits (a damaged, truncated or missing
write-ahead log: SQLite silently stops reading a WAL at its first bad frame), and one whose records do not add up
to its own count and sum lost or gained records: either is refused, before anything is served, by `kcoord serve`
and by `kcoord store check`, and `kcoord store accept` is the operator's explicit way past it. The README lists
which damage is detected and which cannot be.

Why SQLite: it is in the standard library, needs no server, survives SIGKILL and power loss with its WAL (each
commit's frames are checksummed and fsynced before `commit` returns, with `store.fsync=always`), and a compacted
key/value table is exactly a table with a primary key. A hand-written log would need its own compaction, torn-write
detection and index. kcoord adds a CRC32 per record over key and value, so a damaged payload is named rather than
replayed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sqlite3
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from . import records as R
from .config import FSYNC_POLICIES

if TYPE_CHECKING:
    from .topics import Topic

log = logging.getLogger("kcoord.store")

STORE_FILE = "kcoord.db"
LOCK_FILE = "kcoord.lock"
WITNESS_FILE = "kcoord.seq"  # the last commit's sequence number, written after each commit (see the docstring)
STORE_MAGIC = "kcoord-store"
STORE_FORMAT = 1
AUTO_VACUUM_INCREMENTAL = 2  # PRAGMA auto_vacuum: 0 NONE (stores made before kcoord gave pages back), 1 FULL, 2
# After a checkpoint, the write-ahead log is cut back to this size: one large deletion does not leave a WAL as big.
WAL_SIZE_LIMIT = 64 * 1024 * 1024
# What reading a damaged SQLite file can raise. Python's sqlite3 raises UnicodeDecodeError instead of DatabaseError
# when SQLite's message quotes damaged bytes that are not UTF-8 ("malformed database schema ... near ...").
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)


class StoreError(Exception):
    """The store cannot be used: damaged, foreign, locked, or a write failed. The message names the problem."""


class StoreFullError(StoreError):
    """A write failed for want of space (SQLITE_FULL: the filesystem is full, ENOSPC, or the database reached its
    max_page_count). Nothing of the batch was written; the same batch can be written once there is room."""


# ---------------------------------------------------------------------------------------------------------------
# Backends


class Records(Protocol):
    """A compacted key/value log: the interface a durable backend implements."""

    def put(self, batch: dict[bytes, bytes | None]) -> None:
        """Store every entry (None: a tombstone) atomically and durably, or raise StoreError."""

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every stored (key, value); a StoreError names a damaged record."""

    def close(self) -> None: ...

    # A backend whose `put` waits for the disk (an fsync) or a database says so with a class attribute
    # `write_off_loop = True` (SqliteRecords, PgRecords): a server then runs its writes on a writer thread of its own
    # (the group commit, GroupStore.hand_off). Without it (MemoryRecords) they run on the event loop. A backend that
    # needs the loop's state for a write (a cluster node's lease epochs) provides `prepare(batch)`, called on the
    # loop when the batch is cut, and takes what it returns in `put`.


class MemoryRecords:
    """Records in a dict: what tests replay from, and a model of the compaction rule."""

    write_off_loop = False

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


# `records` is a rowid table with its key in a separate index, kept in key order there. Stores made before kept it
# WITHOUT ROWID: there the whole row is the B-tree's key, and SQLite reads a row's entire payload (its overflow pages
# too) to compare a key with it, so every write whose search passed a large record (a group record of megabytes)
# read all of that record again: 5 members of 15 MiB made each KIP-848 join beside them cost 130 ms, freezing the
# server for a minute (issue 30). SQLite advises WITHOUT ROWID only for rows under ~1/20 of a page
# (https://www.sqlite.org/withoutrowid.html, section 4). Such a store is converted when it is opened for writing.
RECORDS_TABLE = "CREATE TABLE {name} (key BLOB NOT NULL PRIMARY KEY, value BLOB NOT NULL, crc INTEGER NOT NULL)"
SCHEMA = f"""
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
{RECORDS_TABLE.format(name="records")};
"""


def record_crc(key: bytes, value: bytes) -> int:
    return zlib.crc32(value, zlib.crc32(key))


# The commit witness: magic, sequence number, CRC32 of both; one pwrite of 20 bytes at offset 0 per commit.
WITNESS = struct.Struct(">8sQI")
WITNESS_MAGIC = b"kcoordsq"


def encode_witness(seq: int) -> bytes:
    head = struct.pack(">8sQ", WITNESS_MAGIC, seq)
    return head + struct.pack(">I", zlib.crc32(head))


def read_witness(data_dir: str) -> int | None:
    """The sequence number in the commit witness; None if there is none. A StoreError if it is damaged."""
    path = os.path.join(data_dir, WITNESS_FILE)
    try:
        with open(path, "rb") as fh:
            data = fh.read(WITNESS.size + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"{path}: cannot read: {e.strerror}") from None
    if len(data) != WITNESS.size:
        raise StoreError(f"{path} is damaged: {len(data)} bytes, not {WITNESS.size}")
    magic, seq, crc = WITNESS.unpack(data)
    if magic != WITNESS_MAGIC or zlib.crc32(data[:16]) != crc:
        raise StoreError(f"{path} is damaged: its checksum does not match")
    return seq


@dataclass
class StoreState:
    """The `state` row: what the last commit left (sequence number, record count, sum of the records' CRCs)."""
    seq: int
    count: int
    crc_sum: int

    def text(self) -> str:
        return f"{self.seq} {self.count} {self.crc_sum}"

    @classmethod
    def parse(cls, path: str, text: str | None) -> StoreState | None:
        if text is None:
            return None  # a store written before the state row existed: nothing to compare with yet
        try:
            seq, count, crc_sum = (int(x) for x in text.split())
        except ValueError:
            raise StoreError(f"{path} is damaged: its state row reads {text[:80]!r}") from None
        return cls(seq, count, crc_sum)


def _read_state(db: sqlite3.Connection, path: str) -> StoreState | None:
    row = db.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()
    return StoreState.parse(path, row[0] if row else None)


def _actual(db: sqlite3.Connection) -> tuple[int, int]:
    count, total = db.execute("SELECT count(*), coalesce(sum(crc), 0) FROM records").fetchone()
    return count, total


def _audit(db: sqlite3.Connection, path: str, data_dir: str) -> list[str]:
    """What the store's own state row and the commit witness say is missing; [] when the records present provably
    hold every acknowledged commit."""
    problems = []
    state = _read_state(db, path)
    witness_path = os.path.join(data_dir, WITNESS_FILE)
    try:
        witness = read_witness(data_dir)
    except StoreError as e:
        return [str(e)]
    if state is None:
        if witness is not None:
            problems.append(f"{path} has no state row but {witness_path} says commit {witness} was acknowledged: "
                            f"the database is older than its commit witness")
        return problems
    if witness is None and state.seq > 0:
        problems.append(f"{witness_path} is missing: nothing shows whether commits after {state.seq} were lost")
    elif witness is not None and witness > state.seq:
        problems.append(f"{path} holds commit {state.seq} but commit {witness} was acknowledged: "
                        f"{witness - state.seq} acknowledged commit(s) are missing (a damaged, truncated or "
                        f"deleted write-ahead log {os.path.basename(path)}-wal?)")
    count, crc_sum = _actual(db)
    if (count, crc_sum) != (state.count, state.crc_sum):
        problems.append(f"{path} holds {count} records (CRC sum {crc_sum}) but its last commit left "
                        f"{state.count} (CRC sum {state.crc_sum}): records were lost or added outside kcoord")
    return problems


class SqliteRecords:
    """The embedded store: one SQLite database in WAL mode in the data directory.

    fsync "always" (the default) fsyncs the WAL at every commit, before the responses it covers leave: nothing
    acknowledged is lost to a crash of the process or the machine. "off" leaves flushing to the OS: a killed
    process loses nothing, a power cut may lose the last commits, and the store stays consistent either way.
    One server at a time: the directory is locked while the store is open. A server writes it on its writer
    thread (`write_off_loop`): the connection is used by one thread at a time (opened with check_same_thread off).
    """

    write_off_loop = True

    def __init__(self, data_dir: str, fsync: str = "always", *, create: bool = True) -> None:
        if fsync not in FSYNC_POLICIES:
            raise StoreError(f"store.fsync must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, STORE_FILE)
        self.fsync = fsync
        self.commits = 0
        # None only until it is opened below, and once closed (when no other method is called)
        self.db: sqlite3.Connection = None  # type: ignore[assignment]
        self.incremental = False  # auto_vacuum=INCREMENTAL: freed pages can be given back (`reclaim`)
        self._reclaimer: sqlite3.Connection | None = None
        self.created = False  # this open made the store (the data dir held none)
        _make_dir(data_dir)
        self._lock = _lock_dir(data_dir)
        self._witness = -1
        try:
            if not os.path.exists(self.path):
                if not create:
                    raise StoreError(f"{self.path} does not exist")
                _refuse_orphans(self.path)
                _create(self.path)
                self.created = True
            problems = _judge(self.path, data_dir)
            if problems:
                raise StoreError("; ".join(problems))
            self.db = _open(self.path, readonly=False)
            _verify(self.db, self.path, full=False)
            _convert_without_rowid(self.db, self.path)
            self.db.execute(f"PRAGMA synchronous={'FULL' if fsync == 'always' else 'NORMAL'}")
            self.db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            self.incremental = self.db.execute("PRAGMA auto_vacuum").fetchone()[0] == AUTO_VACUUM_INCREMENTAL
            state = _read_state(self.db, self.path)
            if state is None:  # written by a kcoord before the state row: start keeping it now
                count, crc_sum = _actual(self.db)
                state = StoreState(0, count, crc_sum)
                self.db.execute("INSERT INTO meta VALUES ('state', ?)", (state.text(),))
            self.state = state
            self._witness = os.open(os.path.join(data_dir, WITNESS_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            self._write_witness()
        except BaseException:
            if self.db is not None:
                self.db.close()
                self.db = None  # type: ignore[assignment]  # (closed: see __init__)
            if self._witness >= 0:
                os.close(self._witness)
            os.close(self._lock)
            raise
        if self.created:  # loudly: a mistyped data dir would otherwise start an empty coordinator in silence
            where = os.path.abspath(data_dir)
            log.warning("created a new, empty store at %s (the data dir held none; --require-store refuses to start "
                        "without one)", where, extra={"kcoord": {"event": "store-created", "data_dir": where}})

    def _write_witness(self) -> None:
        try:
            os.pwrite(self._witness, encode_witness(self.state.seq), 0)
        except OSError as e:
            raise StoreError(f"{os.path.join(self.data_dir, WITNESS_FILE)}: write failed: {e.strerror}") from None

    def put(self, batch: dict[bytes, bytes | None]) -> None:
        puts = [(k, v, record_crc(k, v)) for k, v in batch.items() if v is not None]
        keys = list(batch)
        db = self.db
        st = self.state
        count, crc_sum = st.count, st.crc_sum
        try:
            db.execute("BEGIN IMMEDIATE")
            for i in range(0, len(keys), 500):  # what each key held before: the count and sum move by it
                chunk = keys[i:i + 500]
                for (old_crc,) in db.execute(f"DELETE FROM records WHERE key IN ({','.join('?' * len(chunk))}) "
                                             f"RETURNING crc", chunk).fetchall():
                    count -= 1
                    crc_sum -= old_crc
            if puts:
                db.executemany("INSERT INTO records (key, value, crc) VALUES (?, ?, ?)", puts)
                count += len(puts)
                crc_sum += sum(p[2] for p in puts)
            new = StoreState(st.seq + 1, count, crc_sum)
            db.execute("UPDATE meta SET value = ? WHERE name = 'state'", (new.text(),))
            db.execute("COMMIT")
        except SQLITE_ERRORS as e:
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except SQLITE_ERRORS:
                    pass
            if getattr(e, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL:
                raise StoreFullError(f"{self.path}: write failed: {e}") from e
            raise StoreError(f"{self.path}: write failed: {e}") from e
        self.state = new
        self._write_witness()
        self.commits += 1

    @property
    def fsyncs(self) -> int:
        """fsyncs of the WAL so far: SQLite's synchronous=FULL syncs it once per commit under store.fsync=always."""
        return self.commits if self.fsync == "always" else 0

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        crc32 = zlib.crc32
        try:
            cur = self.db.execute("SELECT key, value, crc FROM records ORDER BY key")
            while rows := cur.fetchmany(8192):
                for key, value, crc in rows:
                    if crc32(value, crc32(key)) != crc:
                        raise StoreError(f"{self.path}: record with key {key[:64].hex()} fails its checksum")
                    yield key, value
        except SQLITE_ERRORS as e:
            raise StoreError(f"{self.path}: cannot read records: {e}") from e

    def reclaim(self, max_pages: int) -> int:
        """Give up to `max_pages` of the database's free pages (what deleted records left) back to the filesystem:
        one step of SQLite's incremental vacuum, on the event loop between requests. Returns how many free pages
        are left (0: none, or a store made before kcoord gave pages back, whose pages only `kcoord store compact`
        frees). The step is a transaction of its own on a second connection: it changes no record, so neither the
        store's state row nor its commit witness moves; it never waits (a write under way makes it return, to be
        tried again), and it neither fsyncs nor checkpoints: the next commit's fsync covers it, and until then a
        crash loses only the step (the file is as large as before). The file shrinks at the next checkpoint."""
        if not self.incremental or self.db is None:
            return 0
        try:
            db = self._reclaimer
            if db is None:
                db = self._reclaimer = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, isolation_level=None,
                                                       timeout=0, check_same_thread=False)
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("PRAGMA wal_autocheckpoint=0")
                db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            if free:
                # executescript steps the pragma to its end; execute() would free one page
                db.executescript(f"PRAGMA incremental_vacuum({int(max_pages)});")
                free = db.execute("PRAGMA freelist_count").fetchone()[0]
            return free
        except sqlite3.OperationalError as e:
            busy = getattr(e, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            return 1 if busy else 0  # busy: a write is under way, try again; else give up until the next deletion
        except SQLITE_ERRORS:
            return 0

    def close(self) -> None:
        if self.db is None:
            return
        if self._reclaimer is not None:
            self._reclaimer.close()
            self._reclaimer = None
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a clean stop leaves everything in the main file
        except SQLITE_ERRORS:
            pass
        self.db.close()
        self.db = None  # type: ignore[assignment]  # (closed: see __init__)
        try:
            os.fsync(self._witness)  # every commit's own fsync covers the WAL; the witness is flushed here
        except OSError:
            pass
        os.close(self._witness)
        os.close(self._lock)


def _make_dir(data_dir: str) -> None:
    if os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise StoreError(f"data dir {data_dir} is not a directory")
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as e:
        raise StoreError(f"data dir {data_dir} cannot be created: {e.strerror}") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise StoreError(f"data dir {data_dir} is not writable")


def _lock_dir(data_dir: str) -> int:
    try:
        fd = os.open(os.path.join(data_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StoreError(f"data dir {data_dir}: cannot create its lock file: {e.strerror}") from None
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
    seq = read_witness(os.path.dirname(path) or ".")
    if seq:
        raise StoreError(f"{path} is missing but its commit witness says commit {seq} was acknowledged: "
                         f"refusing to start empty")


def _create(path: str) -> None:
    """Create the store atomically: built beside, then renamed into place, so a crash leaves none or all."""
    tmp = path + ".new"
    for f in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
        if os.path.exists(f):
            os.unlink(f)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table: freed pages can be given back
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("magic", STORE_MAGIC), ("format", str(STORE_FORMAT)), ("created_ms", str(time.time_ns() // 10**6)),
            ("state", StoreState(0, 0, 0).text())])
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


# Prepared statements a connection keeps (Python's default: 128). A write prepares a DELETE per count of keys, so a
# busy store cycles through many; each cached one pins the allocator arena it was made in, and 128 of them, made
# while 100,000 groups came and went, kept ~100 MiB of freed memory from the OS. A commit's few fixed statements
# stay cached.
CACHED_STATEMENTS = 8


def _open(path: str, readonly: bool) -> sqlite3.Connection:
    try:
        uri = f"file:{path}?mode={'ro' if readonly else 'rw'}"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                               cached_statements=CACHED_STATEMENTS)
    except SQLITE_ERRORS as e:
        raise StoreError(f"{path}: cannot open: {e}") from e


def _convert_without_rowid(db: sqlite3.Connection, path: str) -> None:
    """A store whose records table is WITHOUT ROWID (made before the layout of SCHEMA) gets that layout, in one
    transaction: the same records, count and CRC sum, so the state row and the commit witness stay as they are."""
    try:
        row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'records'").fetchone()
        if row is None or "WITHOUT ROWID" not in row[0].upper():
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(RECORDS_TABLE.format(name="records_rowid"))
            db.execute("INSERT INTO records_rowid (key, value, crc) SELECT key, value, crc FROM records ORDER BY key")
            db.execute("DROP TABLE records")
            db.execute("ALTER TABLE records_rowid RENAME TO records")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    except SQLITE_ERRORS as e:
        if getattr(e, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL:
            return  # no room for the copy: the old layout still serves (slower beside large records)
        raise StoreError(f"{path}: cannot convert the records table to the current layout: {e}") from e


def _judge(path: str, data_dir: str) -> list[str]:
    """The problems that would make `kcoord serve` refuse the store (a damaged file raises StoreError), judged from
    a read-only connection: closing a read-write one would checkpoint and delete the write-ahead log, and with it
    the evidence of what is wrong."""
    probe = _open(path, readonly=True)
    try:
        _verify(probe, path, full=False)
        return _audit(probe, path, data_dir)
    finally:
        probe.close()


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
    except SQLITE_ERRORS as e:
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

    def delete_topic(self, topic: Topic) -> None:
        pass

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(())

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


GROUP_SEQ_KEPT = 10_000  # GroupStore.group_seq is pruned of written batches past this many groups, or twice as many
# as the last pruning kept (so pruning costs O(1) a write, amortized, however many groups write)


class GroupStore:
    """Stages the records the coordinator writes and commits them in batches, one transaction each.

    Two ways to commit. `commit` writes everything staged now, on the caller's thread (in-process use, start-up and
    shutdown, a cluster node letting a partition go). A server on a store that waits (SQLite, a cluster node's
    PostgreSQL) uses the group commit instead
    (`hand_off` on the event loop, `write` on the one writer thread, `written` back on the loop): batches are
    numbered, `seq` is the batch records are staged into now and `durable` the last one whose write completed
    (every batch up to it is durable, in order, but for a cluster node's failed batch, whose waiting answers were
    dropped: `settle`). While batch `writing` is in the writer thread, what is staged
    goes into the next batch, handed off when that write completes: a response waits for the batch holding what
    it acknowledges, and nothing else waits for the disk.

    A write that fails for want of space (StoreFullError) leaves the store `full`: its batch goes back under what
    was staged since (newer writes to a key win), so memory and the store converge once a write succeeds.

    `dirty` is true while staged records are not yet handed to a write; `on_dirty` is called when the first record
    of a batch is staged (the server schedules the commit at the end of the turn). Writes to one key within a
    batch collapse to the last.
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
        self.seq = 1  # the batch being staged
        # group id (as its key spells it) -> the newest batch that staged one of its records: what an OffsetFetch of
        # the group waits for before it leaves (it may have read what that batch holds; Server, DurableConnection)
        self.group_seq: dict[bytes, int] = {}
        self.group_seq_limit = GROUP_SEQ_KEPT
        self.durable = 0  # every batch up to this one is durable
        self.writing = 0  # the batch in the writer thread (0: none)
        self.full = False  # the last write failed for want of space (StoreFullError)
        # A test's hold on the writer: while this Event is set here and not set itself, writes wait for it (on the
        # writer thread, or on the caller's for `commit`).
        self.hold: threading.Event | None = None
        self.write_seconds = 0.0  # how long the last write took (on the writer thread)

    def stage(self, key: bytes, value: bytes | None) -> None:
        """Write `value` under `key` (None: a tombstone) with the next commit."""
        if not self.dirty:
            self.dirty = True
            if self.on_dirty is not None:
                self.on_dirty()
        self.pending[key] = value
        self.staged += 1
        if len(key) > 3:  # every group's record key: its type, then the group id as a Kafka string
            self.group_seq[key[4:4 + (key[2] << 8 | key[3])]] = self.seq

    def write_topic(self, topic: Topic) -> None:
        """The catalogue's change hook (TopicCatalogue.on_change)."""
        self.stage(R.topic_key(topic.name), R.topic_value(topic.topic_id, topic.partitions))

    def delete_topic(self, topic: Topic) -> None:
        """The catalogue's delete hook: the topic's record goes (a tombstone)."""
        self.stage(R.topic_key(topic.name), None)

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed record, in key order, for replay."""
        return self.records.scan()

    def reclaim(self, max_pages: int) -> int:
        """One step of giving freed pages back (SqliteRecords.reclaim); the free pages left, 0 for a backend
        without any to give."""
        reclaim = getattr(self.records, "reclaim", None)
        return reclaim(max_pages) if reclaim is not None else 0

    @property
    def newest(self) -> int:
        """The newest batch that holds anything staged so far (being staged, or handed to a write)."""
        return self.seq if self.dirty else self.seq - 1

    def commit(self) -> None:
        """Make everything staged durable (one transaction), on this thread; not while a batch is in the writer
        thread. On failure the error propagates and the batch is dropped: the caller must not send the responses
        it holds."""
        if not self.dirty:
            return
        assert not self.writing, "a batch is in the writer thread"
        batch, self.pending = self.pending, {}
        self.dirty = False
        seq = self.seq
        self.seq += 1
        self._put(batch)
        self.durable = seq
        self.full = False
        self.commits += 1
        self._prune(seq)

    def _put(self, batch: dict[bytes, bytes | None]) -> None:
        hold = self.hold
        if hold is not None:
            hold.wait()
        self.records.put(batch)

    # ---- the group commit: hand_off (event loop) -> write (writer thread) -> written (event loop) ----------

    def hand_off(self) -> dict[bytes, bytes | None] | None:
        """The batch staged so far, to be written by `write`; None when nothing is staged or a write is under way.
        `writing` is its number until `written` is called."""
        if not self.dirty or self.writing:
            return None
        batch, self.pending = self.pending, {}
        self.dirty = False
        self.writing = self.seq
        self.seq += 1
        return batch

    def prepare(self, batch: dict[bytes, bytes | None]):
        """What `write` is given for a handed-off batch, made on the event loop: the backend's own form when it has
        one (`prepare`: a cluster node's write takes the lease epochs it holds now), else the batch itself."""
        prepare = getattr(self.records, "prepare", None)
        return batch if prepare is None else prepare(batch)

    def write(self, job) -> None:
        """Write a handed-off batch durably (on the writer thread: this is where the fsync or the database's commit
        waits); `job` is what `prepare` made of it."""
        t0 = time.perf_counter()
        self._put(job)
        self.write_seconds = time.perf_counter() - t0

    def drop_staged(self, drop: Callable[[bytes], bool]) -> int:
        """Forget the staged records whose key `drop` names (a cluster node's partitions whose write failed: what
        was staged for them since is ahead of the database too). How many went."""
        gone = [k for k in self.pending if drop(k)]
        for k in gone:
            del self.pending[k]
        self.dirty = bool(self.pending)
        return len(gone)

    def written(self, batch: dict[bytes, bytes | None], exc: BaseException | None) -> None:
        """The write of the batch in `writing` ended (with `exc` if it failed). On success that batch and all
        before it are durable. On a StoreFullError the store is `full` and the batch goes back under what was
        staged since (a later write carries both); any other error is for the caller (stop)."""
        seq, self.writing = self.writing, 0
        if exc is None:
            self.durable = seq
            self.full = False
            self.commits += 1
            self._prune(seq)
            return
        if isinstance(exc, StoreFullError):
            self.full = True
            batch.update(self.pending)  # what was staged since is newer
            self.pending = batch
            self.dirty = bool(batch)

    def _prune(self, durable: int) -> None:
        """Forget the groups whose newest batch is durable (nothing waits for it) once there are many."""
        if len(self.group_seq) > self.group_seq_limit:
            self.group_seq = {g: n for g, n in self.group_seq.items() if n > durable}
            self.group_seq_limit = max(GROUP_SEQ_KEPT, 2 * len(self.group_seq))

    def settle(self, seq: int) -> None:
        """Batch `seq` failed and every answer that waited for it was dropped (a cluster node's write, whose
        partitions are stepped down from): nothing waits for it any more. `durable` moves past it, so an answer
        made since, which waits for the newest batch staged or written by then, is not held for it forever."""
        if seq > self.durable:
            self.durable = seq

    @property
    def fsyncs(self) -> int:
        return getattr(self.records, "fsyncs", 0)

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
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "problems": self.problems, "notes": self.notes,
                "records": self.records,
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
        try:
            _refuse_orphans(path)
        except StoreError as e:
            problem(str(e))
        return report
    report.bytes = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    with _readable_copy(data_dir) as (where, note):
        if note:
            report.notes.append(note)
        try:
            db = _open(os.path.join(where, STORE_FILE), readonly=True)
        except StoreError as e:
            problem(str(e))
            return report
        try:
            _check_records(db, path, data_dir, report, problem)
        finally:
            db.close()
    return report


@contextmanager
def _readable_copy(data_dir: str) -> Iterator[tuple[str, str]]:
    """Where the store can be read without writing to the data directory: the directory itself when SQLite can
    open it read-only there (it needs to create the shared-memory index beside a WAL), else a private copy of the
    database and its WAL (a read-only filesystem or directory)."""
    path = os.path.join(data_dir, STORE_FILE)
    reason = ""
    try:
        probe = _open(path, readonly=True)
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            probe.close()
    except (StoreError, *SQLITE_ERRORS) as e:
        reason = str(e)
    if not reason or os.access(data_dir, os.W_OK):  # writable: a problem shows when the store is read
        yield data_dir, ""
        return
    with tempfile.TemporaryDirectory(prefix="kcoord-check-") as tmp:
        for name in (STORE_FILE, STORE_FILE + "-wal", WITNESS_FILE):
            if os.path.exists(os.path.join(data_dir, name)):
                shutil.copyfile(os.path.join(data_dir, name), os.path.join(tmp, name))
        yield tmp, f"{data_dir} is not writable ({reason}): checked a copy of the store"


def check_record(key: bytes, value: bytes, crc: int, report: CheckReport, problem) -> bool:
    """One stored record into a check report (either store's): its checksum, its bytes, its consistency on its own,
    and the counts. False when its checksum or bytes are damaged."""
    report.records += 1
    if record_crc(key, value) != crc:
        problem(f"record with key {key[:64].hex()} fails its checksum")
        return False
    try:
        rec = R.decode(key, value)
    except R.RecordError as e:
        problem(str(e))
        return False
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
    return True


def _check_records(db: sqlite3.Connection, path: str, data_dir: str, report: CheckReport, problem) -> None:
    try:
        _verify(db, path, full=True)
        for issue in _audit(db, path, data_dir):
            problem(issue)
        for key, value, crc in db.execute("SELECT key, value, crc FROM records"):
            check_record(key, value, crc, report, problem)
    except StoreError as e:
        problem(str(e))
    except SQLITE_ERRORS as e:
        problem(f"{path} is damaged: {e}")


# ---------------------------------------------------------------------------------------------------------------
# kcoord store accept


def accept_store(data_dir: str) -> list[str]:
    """Take the store as it now is: what `kcoord store accept` does after an operator has read `store check`.

    The state row is set to the records present and the commit witness to the store's sequence number, so a
    store refused for missing acknowledged commits, a missing or damaged witness, or records that do not add up
    opens again with what it holds. It repairs nothing else: a record that fails its checksum, or a damaged
    database file, is still refused. Returns what was accepted (empty when there was nothing to accept)."""
    path = os.path.join(data_dir, STORE_FILE)
    if not os.path.exists(path):
        raise StoreError(f"{path} does not exist")
    lock = _lock_dir(data_dir)
    try:
        accepted = _judge(path, data_dir)
        if not accepted:
            return []
        db = _open(path, readonly=False)
        try:
            state = _read_state(db, path) or StoreState(0, 0, 0)
            try:
                witness = read_witness(data_dir) or 0
            except StoreError:
                witness = 0
            count, crc_sum = _actual(db)
            new = StoreState(max(state.seq, witness) + 1, count, crc_sum)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (new.text(),))
            db.execute("COMMIT")
        except SQLITE_ERRORS as e:
            raise StoreError(f"{path}: cannot write: {e}") from None
        finally:
            db.close()
        fd = os.open(os.path.join(data_dir, WITNESS_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, encode_witness(new.seq), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        return accepted
    finally:
        os.close(lock)


# ---------------------------------------------------------------------------------------------------------------
# kcoord store compact


@dataclass
class CompactReport:
    path: str
    bytes_before: int
    bytes_after: int
    converted: bool  # the store did not give pages back before (auto_vacuum NONE) and now does


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def compact_store(data_dir: str) -> CompactReport:
    """Rewrite the database without its free pages (SQLite's VACUUM): what `kcoord store compact` does, with the
    server stopped. It takes the directory's lock, so it refuses while a server has the store open, and it refuses
    a store that `kcoord serve` would refuse (read `kcoord store check`). A store made before kcoord gave pages back
    (auto_vacuum NONE) is converted, so a running server gives freed pages back from then on. The records, the
    state row and the commit witness are unchanged: the store opens exactly as before, only smaller."""
    path = os.path.join(data_dir, STORE_FILE)
    if not os.path.exists(path):
        raise StoreError(f"{path} does not exist")
    lock = _lock_dir(data_dir)
    try:
        problems = _judge(path, data_dir)
        if problems:
            raise StoreError(f"refusing to compact a store `kcoord serve` would refuse: {problems[0]}")
        before = _file_bytes(path)
        db = _open(path, readonly=False)
        try:
            converted = db.execute("PRAGMA auto_vacuum").fetchone()[0] != AUTO_VACUUM_INCREMENTAL
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes effect with the VACUUM
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            _verify(db, path, full=False)
        except SQLITE_ERRORS as e:
            raise StoreError(f"{path}: cannot compact: {e}") from None
        finally:
            db.close()
        return CompactReport(path, before, _file_bytes(path), converted)
    finally:
        os.close(lock)
