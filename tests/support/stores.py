"""Stores to test on: one written through a coordinator (a static group, offsets, a topic), the ways a store gets
damaged (each returns the words kcoord's refusal names), and stores of many deleted groups (free pages)."""

from __future__ import annotations

import os
import sqlite3

from kcoord import records as R
from kcoord import wire
from kcoord.records import group_key, offset_key, offset_value
from kcoord.store import STORE_FILE, SqliteRecords, record_crc
from kcoord.topics import TopicCatalogue

from .harness import ClassicHarness


def commit(h: ClassicHarness, offsets: dict[tuple[str, int], int], *, gid: str = "g", member_id: str = "",
           generation: int = -1, iid: str | None = None) -> wire.OffsetCommitResponse:
    req = wire.OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=iid,
        topics=[wire.OffsetCommitRequestTopic(name=t, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=3,
                                              committed_metadata=f"m{o}")])
            for (t, p), o in offsets.items()])
    return h.c.handle(req, 8)


def full_store(path) -> None:
    """A store with a static group, offsets and a topic, written through a coordinator."""
    records = SqliteRecords(str(path))
    topics = TopicCatalogue()
    h = ClassicHarness({}, records=records, catalogue=topics)
    topics.on_change = h.c.store.write_topic
    topics.create("orders", 12)
    ids = h.form("A", "B")
    commit(h, {("orders", p): 100 + p for p in range(12)}, member_id=ids["A"], generation=1, iid="A")
    records.close()


# ---- damage ---------------------------------------------------------------------------------------------------

def damage_truncate(path) -> str:
    db = path / STORE_FILE
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.truncate(size // 2)
    return "damaged"


def damage_empty(path) -> str:
    (path / STORE_FILE).write_bytes(b"")
    return "is empty"


def damage_garbage_header(path) -> str:
    db = path / STORE_FILE
    data = bytearray(db.read_bytes())
    data[:100] = os.urandom(100)
    db.write_bytes(bytes(data))
    return "damaged"


def damage_checksum(path) -> str:
    db = sqlite3.connect(path / STORE_FILE)
    db.execute("UPDATE records SET value = ? WHERE key = ?", (offset_value(1, -1, "", 0), offset_key("g", "orders", 3)))
    db.commit()
    db.close()
    return "fails its checksum"


def restate(db: sqlite3.Connection) -> None:
    """Make the state row agree with the records, as if kcoord itself had written what a damage function wrote."""
    seq = int(db.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()[0].split()[0])
    count, total = db.execute("SELECT count(*), sum(crc) FROM records").fetchone()
    db.execute("UPDATE meta SET value = ? WHERE name = 'state'", (f"{seq} {count} {total}",))


def damage_record_bytes(path) -> str:
    # bytes that pass their checksum but are not a record: something wrote them, not kcoord
    db = sqlite3.connect(path / STORE_FILE)
    key, bad = group_key("g"), b"\x00\x03\xff\xff"
    db.execute("UPDATE records SET value = ?, crc = ? WHERE key = ?", (bad, record_crc(key, bad), key))
    restate(db)
    db.commit()
    db.close()
    return "cannot be read"


def damage_offset_bytes(path) -> str:
    # a truncated offset value with a matching checksum (the replay's fast path must still catch it)
    db = sqlite3.connect(path / STORE_FILE)
    key, bad = offset_key("g", "orders", 5), offset_value(7, -1, "", 0)[:-3]
    db.execute("UPDATE records SET value = ?, crc = ? WHERE key = ?", (bad, record_crc(key, bad), key))
    restate(db)
    db.commit()
    db.close()
    return "cannot be read"


def damage_foreign_db(path) -> str:
    (path / STORE_FILE).unlink()
    db = sqlite3.connect(path / STORE_FILE)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    return "not a kcoord store"


def damage_missing_db_with_wal(path) -> str:
    (path / STORE_FILE).unlink()
    (path / (STORE_FILE + "-wal")).write_bytes(b"\x37\x7f\x06\x82" + os.urandom(60))
    return "write-ahead log"


DAMAGE = [damage_truncate, damage_empty, damage_garbage_header, damage_checksum, damage_record_bytes,
          damage_offset_bytes, damage_foreign_db, damage_missing_db_with_wal]


# ---- stores of many deleted groups ------------------------------------------------------------------------------

def fill(d: str, groups: int) -> None:
    records = SqliteRecords(d, fsync="off")
    for i in range(0, groups, 1000):
        records.put({R.offset_key(f"g{j}", "t", 0): R.offset_value(j, -1, "x" * 40, 0) for j in range(i, i + 1000)})
    records.put({R.offset_key(f"g{j}", "t", 0): None for j in range(groups // 10, groups)})  # most go
    records.close()


def pragma(d: str, name: str) -> int:
    db = sqlite3.connect(f"file:{d}/{STORE_FILE}?mode=ro", uri=True)
    try:
        return db.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        db.close()
