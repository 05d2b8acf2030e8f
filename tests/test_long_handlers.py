"""No request holds the event loop for long (issue 30): the store's writes beside a large record do not read that
record again, and DeleteGroups / ListGroups of many groups run in slices on the coordinator's timers, other requests
served between them. Times are measured in benches/bench_hostile.py; these tests count the work done."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from kcoord import records as R
from kcoord.store import STORE_FILE, SqliteRecords

FIXTURE = Path(__file__).parent / "fixtures" / "store-a195b2b"  # a store written by an older kcoord (WITHOUT ROWID)
BIG = 8 << 20  # a record larger than SQLite's page cache (2 MiB by default): reading it means reading the file


def bytes_read() -> int:
    """What this process has read through read() and pread() (Linux's rchar): SQLite reads its pages so."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def writes_beside_a_large_record(records: SqliteRecords, commits: int = 20) -> int:
    """Bytes read by `commits` writes of small records whose keys sort right beside a BIG one: the records of new
    members of a group whose other members' records are large (an online upgrade of a classic group with big
    metadata: each KIP-848 join writes there)."""
    records.put({R.consumer_member_key("big", "a-member"): b"\x00\x00" + b"x" * BIG})
    before = bytes_read()
    for i in range(commits):
        records.put({R.consumer_member_key("big", f"b-{i:04d}"): b"v" * 100,
                     R.consumer_member_key("big", f"a-{i:04d}"): b"w" * 100})
    return bytes_read() - before


def test_writes_beside_a_large_record_do_not_read_it(tmp_path) -> None:
    # Kept WITHOUT ROWID, SQLite compared each written key with the whole large row (its overflow pages read again):
    # 5 records of 15 MiB made each KIP-848 join beside them cost 130 ms and froze the server for a minute.
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    try:
        read = writes_beside_a_large_record(records)
        assert read < BIG, f"20 small writes read {read:,} bytes: the {BIG:,}-byte record beside them was read"
        assert [k for k, _ in records.scan()] == sorted(k for k, _ in records.scan())  # replayed in key order
    finally:
        records.close()


def test_a_store_made_without_rowid_is_converted_when_opened(tmp_path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "data", data)
    db = sqlite3.connect(data / STORE_FILE)
    before = db.execute("SELECT key, value, crc FROM records ORDER BY key").fetchall()
    assert "WITHOUT ROWID" in db.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    db.close()
    records = SqliteRecords(str(data), fsync="off")
    try:
        layout = records.db.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()[0]
        assert "WITHOUT ROWID" not in layout.upper()
        assert records.db.execute("SELECT key, value, crc FROM records ORDER BY key").fetchall() == before
        assert list(records.scan()) == [(k, v) for k, v, _ in before]  # in key order, as replay wants
        assert writes_beside_a_large_record(records) < BIG
    finally:
        records.close()
    reopened = SqliteRecords(str(data), fsync="off")  # the state row and the witness still agree with the records
    reopened.close()
