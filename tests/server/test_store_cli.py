"""`kcoord store check`, `kcoord store compact` and `kcoord serve` on a store, run as the real CLI (subprocesses):
what check names as a problem is what serve refuses to start on, and compact converts an old store or refuses one
serve would refuse. The stores are made in-process (tests/support/stores.py)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kcoord import records as R
from kcoord.store import STORE_FILE, SqliteRecords, StoreError, check_store, compact_store, read_witness

from ..support.cli import kcoord
from ..support.stores import damage_checksum, damage_missing_db_with_wal, damage_truncate, fill, full_store, pragma


def test_store_check_cli_table_json_and_exit_codes(tmp_path) -> None:
    full_store(tmp_path)
    ok = kcoord("store", "check", str(tmp_path))
    assert ok.returncode == 0, ok.stderr
    assert "ok" in ok.stdout and "offsets" in ok.stdout.splitlines()[0]
    doc = json.loads(kcoord("store", "check", str(tmp_path), "--json").stdout)
    assert (doc["ok"], doc["groups"], doc["members"], doc["offsets"], doc["topics"]) == (True, 1, 2, 12, 1)
    damage_checksum(tmp_path)
    bad = kcoord("store", "check", str(tmp_path))
    assert bad.returncode == 1 and "DAMAGED" in bad.stdout and "fails its checksum" in bad.stdout


@pytest.mark.parametrize("damage", [damage_missing_db_with_wal, damage_checksum], ids=["missing_db_with_wal", "checksum"])
def test_store_check_and_serve_give_one_verdict_on_a_damaged_store(tmp_path, damage) -> None:
    # What `kcoord store check` names as the problem is what `kcoord serve` refuses to start on, both exiting 1
    # (a database deleted under its write-ahead log was once reported differently by the two).
    full_store(tmp_path)
    words = damage(tmp_path)
    check = kcoord("store", "check", str(tmp_path), "--json")
    doc = json.loads(check.stdout)
    assert check.returncode == 1 and doc["ok"] is False, check
    assert any(words in p for p in doc["problems"]), doc["problems"]
    serve = kcoord("serve", "--port", "0", "--data-dir", str(tmp_path))
    assert serve.returncode == 1 and len(serve.stderr.splitlines()) == 1, serve
    assert "refusing to start" in serve.stderr and words in serve.stderr, serve.stderr


def test_serve_refuses_a_damaged_store_with_a_clear_message(tmp_path) -> None:
    full_store(tmp_path)
    damage_truncate(tmp_path)
    out = kcoord("serve", "--port", "0", "--data-dir", str(tmp_path))
    assert out.returncode == 1
    assert "refusing to start" in out.stderr and "damaged" in out.stderr and "store check" in out.stderr
    assert "Traceback" not in out.stderr


def old_store(d: str) -> None:
    """A store as kcoord made it before it gave pages back (auto_vacuum NONE), with free pages."""
    fill(d, 20_000)
    db = sqlite3.connect(f"{d}/{STORE_FILE}", isolation_level=None)
    db.execute("PRAGMA auto_vacuum=NONE")
    db.execute("VACUUM")
    db.close()
    records = SqliteRecords(d, fsync="off")  # a kcoord commit that frees pages again
    records.put({R.offset_key(f"g{j}", "t", 0): None for j in range(1000)})
    records.close()


def test_store_compact_converts_an_old_store_and_keeps_its_records_state_and_witness(tmp_path) -> None:
    d = str(tmp_path / "data")
    old_store(d)
    assert pragma(d, "auto_vacuum") == 0 and pragma(d, "freelist_count") > 0
    assert check_store(d).ok  # both kinds of store are read
    records = SqliteRecords(d, fsync="off")
    assert records.reclaim(64) == 0  # an old store cannot give pages back while serving
    before = dict(records.scan())
    seq = records.state.seq
    with pytest.raises(StoreError, match="in use"):  # the server's lock: never while it runs
        compact_store(d)
    r = kcoord("store", "compact", d)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1 and "in use" in r.stderr
    records.close()
    r = kcoord("store", "compact", d)
    assert r.returncode == 0, r.stderr
    assert "given back while serving" in r.stdout
    assert pragma(d, "auto_vacuum") == 2 and pragma(d, "freelist_count") == 0
    assert check_store(d).ok and read_witness(d) == seq
    records = SqliteRecords(d, fsync="off")
    assert dict(records.scan()) == before and records.state.seq == seq
    records.close()


def test_store_compact_refuses_a_store_serve_would_refuse_and_a_missing_one(tmp_path) -> None:
    d = tmp_path / "data"
    fill(str(d), 2000)
    (d / "kcoord.seq").unlink()  # the witness gone: refused by serve, so by compact
    r = kcoord("store", "compact", str(d))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "refusing to compact" in r.stderr and "kcoord.seq" in r.stderr
    r = kcoord("store", "compact", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such directory" in r.stderr
