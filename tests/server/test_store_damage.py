"""Damage to a data directory left by a real crash: refused, or served with every acknowledged offset.

A real `kcoord serve` takes commit load from 12 static members and is SIGKILLed mid-load, so its write-ahead log
holds acknowledged commits that are not in the database file yet. Each kind of damage is applied to a copy of that
directory, which is then opened as the server opens it (the store, then the coordinator's replay) and checked by
`kcoord store check`. The rule for every case: the store is refused, or what it serves holds every acknowledged
offset at its acknowledged value or later (never missing, never older); and `store check` says ok only for a
store that is served that way.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from kcoord.coordinator import Coordinator
from kcoord.store import STORE_FILE, WITNESS_FILE, GroupStore, SqliteRecords, StoreError, check_store

from ..support.cli import kcoord
from ..support.servers import Ledger, Worker, free_port, serve_dir

WAL = STORE_FILE + "-wal"
SHM = STORE_FILE + "-shm"
WAL_HEADER, FRAME_HEADER, PAGE = 32, 24, 4096
FRAME = FRAME_HEADER + PAGE


@dataclass
class Crashed:
    data: Path
    acked: dict[tuple[str, int], int]
    sent: dict[tuple[str, int], int]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Crashed:
    """A data directory left by SIGKILL under commit load, with acknowledged commits still in its WAL."""
    root = tmp_path_factory.mktemp("crashed")
    data, log = root / "data", root / "server.log"
    port = free_port()
    proc = serve_dir(data, port, log, "group.initial.rebalance.delay.ms=300")
    ledger = Ledger()
    workers = [Worker(port, f"dmg-{n % 4}", f"inst-{n}", n, ledger, seed=n) for n in range(12)]
    for w in workers:
        w.start()
    try:
        while True:  # until enough is acknowledged, with enough of it in the WAL; the workers' own pace, no sleep
            with ledger.lock:
                if ledger.acks >= 1500 and (wal_frames(data) > 40 or ledger.acks > 30_000):
                    break  # not just after a checkpoint started the WAL again: its live frames are the damage's target
            workers[0].join(0.05)
            assert proc.poll() is None, log.read_text()[-2000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        for w in workers:
            w.join(20)
    wal = data / WAL
    assert wal.exists() and wal_frames(data) > 10, "the kill left no WAL to damage"
    with ledger.lock:
        return Crashed(data, dict(ledger.acked), dict(ledger.sent))


def flip(path: Path, offset: int, n: int) -> None:
    data = bytearray(path.read_bytes())
    assert 0 <= offset and offset + n <= len(data), (path, offset, n, len(data))
    for i in range(offset, offset + n):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def wal_frames(d: Path) -> int:
    """The WAL's live frames: those from its start that carry the header's salts. After a checkpoint SQLite writes
    the WAL again from its start under new salts and leaves the older frames behind them in the file, where
    damage changes nothing; a damage meant to cut acknowledged commits must land among the live ones."""
    data = (d / WAL).read_bytes()
    salts = data[16:24]
    n = 0
    while WAL_HEADER + (n + 1) * FRAME <= len(data) and \
            data[WAL_HEADER + n * FRAME + 8:WAL_HEADER + n * FRAME + 16] == salts:
        n += 1
    return n


def wal_live_bytes(d: Path) -> int:
    return WAL_HEADER + wal_frames(d) * FRAME


# Each damage names what it does to the copy `d`; the fixture's real crash supplies the bytes.
DAMAGE = {
    "none": lambda d: None,
    "wal_header_salts_8_bytes": lambda d: flip(d / WAL, 16, 8),
    "wal_header_magic": lambda d: flip(d / WAL, 0, 4),
    "wal_header_checksum": lambda d: flip(d / WAL, 24, 8),
    "wal_40_bytes_in_the_middle": lambda d: flip(d / WAL, WAL_HEADER + (wal_frames(d) // 2) * FRAME + 100, 40),
    "wal_40_bytes_in_the_first_frame": lambda d: flip(d / WAL, WAL_HEADER + FRAME_HEADER + 200, 40),
    "wal_frame_header_of_the_last_frame": lambda d: flip(d / WAL, WAL_HEADER + (wal_frames(d) - 1) * FRAME, 8),
    "wal_truncated_to_half": lambda d: truncate(d / WAL, wal_live_bytes(d) // 2),
    "wal_truncated_by_one_frame": lambda d: truncate(d / WAL, WAL_HEADER + (wal_frames(d) - 1) * FRAME),
    "wal_truncated_inside_a_frame": lambda d: truncate(d / WAL, wal_live_bytes(d) - 1000),
    "wal_truncated_to_its_header": lambda d: truncate(d / WAL, WAL_HEADER),
    "wal_emptied": lambda d: truncate(d / WAL, 0),
    "wal_deleted": lambda d: (d / WAL).unlink(),
    "wal_and_shm_deleted": lambda d: ((d / WAL).unlink(), (d / SHM).unlink(missing_ok=True)),
    "shm_deleted": lambda d: (d / SHM).unlink(missing_ok=True),
    "shm_zeroed": lambda d: (d / SHM).write_bytes(bytes(os.path.getsize(d / SHM))) if (d / SHM).exists() else None,
    "db_header_8_bytes": lambda d: flip(d / STORE_FILE, 40, 8),
    "db_first_page_tail": lambda d: flip(d / STORE_FILE, PAGE - 64, 40),
    "db_truncated_to_half": lambda d: truncate(d / STORE_FILE, os.path.getsize(d / STORE_FILE) // 2),
    "db_deleted_wal_left": lambda d: (d / STORE_FILE).unlink(),
    "db_and_wal_deleted": lambda d: ((d / STORE_FILE).unlink(), (d / WAL).unlink()),
    "witness_deleted": lambda d: (d / WITNESS_FILE).unlink(),
    "witness_flipped": lambda d: flip(d / WITNESS_FILE, 10, 2),
    "witness_truncated": lambda d: truncate(d / WITNESS_FILE, 7),
}


def random_damage(seed: int):
    def damage(d: Path) -> None:
        rng = random.Random(seed)
        files = [STORE_FILE, WAL]  # the witness's own damage is the named cases above
        for _ in range(rng.randint(1, 3)):
            f = d / rng.choice(files)
            size = f.stat().st_size
            n = rng.choice([1, 8, 40, 200])
            flip(f, rng.randrange(0, max(1, size - n)), min(n, size))
    return damage


for _seed in range(32):
    DAMAGE[f"random_{_seed}"] = random_damage(_seed)


def served_offsets(d: Path) -> dict[tuple[str, int], int]:
    """Open the store as `kcoord serve` does and read back every committed offset; StoreError if refused."""
    records = SqliteRecords(str(d))
    try:
        c = Coordinator(store=GroupStore(records))
        c.load()
        return {(gid, p): v[0] for gid in c.groups for (_, p), v in c.offsets.committed(gid).items()}
    finally:
        records.close()


def missing_or_older(crashed: Crashed, served: dict[tuple[str, int], int]) -> list[str]:
    return [f"{key}: acknowledged {acked}, served {served.get(key)}" for key, acked in sorted(crashed.acked.items())
            if not acked <= served.get(key, -1) <= crashed.sent[key]]


# The damages whose outcome is known: the undamaged copy is served, every damage of the WAL or the witness is
# refused. The others may go either way, as long as what is served is no rollback.
EXPECTED = {"none": "served", **{kind: "refused" for kind in (
    "wal_header_salts_8_bytes", "wal_40_bytes_in_the_middle", "wal_truncated_to_half", "wal_deleted",
    "db_deleted_wal_left", "witness_deleted")}}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_refused_or_every_acknowledged_offset_is_served(crashed, tmp_path, kind) -> None:
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    DAMAGE[kind](d)
    report = check_store(str(d))  # before the open: what an operator would run on the directory as it is
    try:
        served = served_offsets(d)
    except StoreError as e:
        assert not report.ok, f"{kind}: the server refuses ({e}) but store check says ok"
        assert EXPECTED.get(kind, "refused") == "refused", f"{kind}: refused ({e}), expected to be served"
        print(f"\ndamage {kind}: refused: {str(e)[:160]}")
        return
    wrong = missing_or_older(crashed, served)
    assert not wrong, f"{kind}: served a rollback: {wrong[:5]}"
    assert report.ok, f"{kind}: served every acknowledged offset but store check says {report.problems}"
    assert EXPECTED.get(kind, "served") == "served", f"{kind}: served, expected to be refused"
    print(f"\ndamage {kind}: served: {len(crashed.acked)} acknowledged offsets all there")


def test_damage_matrix_covers_both_outcomes() -> None:
    # Each test of the matrix checks its own expected outcome (whatever runs first, in whatever process); here, that
    # the expectations name damages the matrix has, and both outcomes.
    assert set(EXPECTED) <= set(DAMAGE), set(EXPECTED) - set(DAMAGE)
    assert set(EXPECTED.values()) == {"served", "refused"}


# ---- the findings, over the real server -------------------------------------------------------------------

def test_wal_header_damage_after_sigkill_is_refused_and_the_wal_is_kept(crashed, tmp_path) -> None:
    # Found at a195b2b: `kcoord serve` started with 0 groups and its first clean stop deleted the WAL for good.
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    flip(d / WAL, 16, 8)
    before = (d / WAL).read_bytes()
    r = kcoord("serve", "--port", str(free_port()), "--data-dir", str(d))
    assert r.returncode == 1, r
    assert "refusing to start" in r.stderr and "acknowledged" in r.stderr and WAL in r.stderr, r.stderr
    assert (d / WAL).read_bytes() == before, "the refused start changed the write-ahead log"
    check = kcoord("store", "check", str(d))
    assert check.returncode == 1 and "DAMAGED" in check.stdout and "acknowledged" in check.stdout, check


@pytest.mark.parametrize("how", ["flip_40_bytes_inside", "truncate"])
def test_wal_damage_inside_or_truncation_is_not_an_offset_rollback(crashed, tmp_path, how) -> None:
    # Found at a195b2b: offsets rolled back to older values while `store check` said "ok".
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    if how == "truncate":
        truncate(d / WAL, wal_live_bytes(d) // 3)
    else:
        flip(d / WAL, WAL_HEADER + (wal_frames(d) // 3) * FRAME + 512, 40)
    check = kcoord("store", "check", str(d), "--json")
    assert check.returncode == 1 and '"ok": false' in check.stdout, check
    with pytest.raises(StoreError, match="acknowledged commit"):
        served_offsets(d)


def test_store_accept_takes_a_rolled_back_store_as_it_is_and_only_that(crashed, tmp_path) -> None:
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    truncate(d / WAL, wal_live_bytes(d) // 2)
    with pytest.raises(StoreError, match="acknowledged commit"):
        served_offsets(d)
    r = kcoord("store", "accept", str(d))
    assert r.returncode == 0 and "accepted" in r.stdout and "acknowledged" in r.stdout, r
    assert check_store(str(d)).ok
    served = served_offsets(d)  # what the half WAL held: older than acknowledged, now by the operator's choice
    assert served and missing_or_older(crashed, served), "the half WAL held everything: nothing was accepted"
    again = kcoord("store", "accept", str(d))
    assert again.returncode == 0 and "nothing to accept" in again.stdout, again


def test_store_accept_does_not_pass_a_record_that_fails_its_checksum(crashed, tmp_path) -> None:
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    served_offsets(d)  # a clean open and close: everything in the database file, none in the WAL
    db = sqlite3.connect(d / STORE_FILE)
    db.execute("UPDATE records SET crc = crc + 1 WHERE key = (SELECT min(key) FROM records)")
    db.commit()
    db.close()
    assert kcoord("store", "accept", str(d)).returncode == 0
    with pytest.raises(StoreError, match="fails its checksum"):
        served_offsets(d)
    assert not check_store(str(d)).ok


def test_a_schema_damaged_into_bytes_that_are_not_utf8_is_refused_not_a_traceback(crashed, tmp_path) -> None:
    # Found by the loaded ten-run loop (random_17 on that run's crash): SQLite's "malformed database schema" message
    # quoted the damaged bytes, Python's sqlite3 could not decode them and raised UnicodeDecodeError instead of
    # DatabaseError, and `store check` ended in a traceback. Here the same damage by hand: the schema's own text.
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    served_offsets(d)  # a clean open and close: the schema is in the database file, the WAL is gone
    data = (d / STORE_FILE).read_bytes()
    assert data.count(b"CREATE TABLE") >= 2
    damaged = data.replace(b"CREATE TABLE", b"CREATE\xc0TABLE")
    (d / STORE_FILE).write_bytes(damaged)
    with closing(sqlite3.connect(d / STORE_FILE)) as db, pytest.raises(UnicodeDecodeError):  # sqlite3's own answer
        db.execute("SELECT count(*) FROM sqlite_master")
    report = check_store(str(d))
    assert not report.ok and any("damaged" in p for p in report.problems), report.problems
    with pytest.raises(StoreError, match="damaged"):
        served_offsets(d)
    for args in (("store", "check", str(d)), ("store", "check", str(d), "--json"),
                 ("serve", "--port", str(free_port()), "--data-dir", str(d)), ("store", "accept", str(d))):
        r = kcoord(*args)
        assert r.returncode == 1 and "Traceback" not in r.stderr, (args, r)
    assert (d / STORE_FILE).read_bytes() == damaged, "a refusal wrote"


def test_a_store_exactly_one_acknowledged_commit_behind_its_witness_is_refused(tmp_path) -> None:
    """The smallest loss the commit witness must catch: the database as it was one commit before the last one
    acknowledged (a lost last WAL transaction, a backup restored over the directory), beside the witness of that
    last commit. Refused by the open `kcoord serve` makes and by `kcoord store check`; the same database with its
    own witness (nothing lost) is served, so the refusal is the one missing commit's doing."""
    from kcoord.records import offset_key, offset_value

    data, behind = tmp_path / "data", tmp_path / "behind"
    records = SqliteRecords(str(data))
    for offset in range(1, 6):
        records.put({offset_key("g", "orders", 0): offset_value(offset, -1, "", 0)})
    records.close()
    shutil.copytree(data, behind)  # commit 5, and a witness that says 5
    records = SqliteRecords(str(data))
    records.put({offset_key("g", "orders", 0): offset_value(6, -1, "", 0)})  # commit 6, acknowledged
    assert records.state.seq == 6
    records.close()
    for name in (STORE_FILE, WAL, SHM):  # the database one commit behind; the witness of commit 6 stays
        (data / name).unlink(missing_ok=True)
        if (behind / name).exists():
            shutil.copy2(behind / name, data / name)
    report = check_store(str(data))
    assert not report.ok and any("holds commit 5 but commit 6 was acknowledged: 1 acknowledged commit(s) are "
                                 "missing" in p for p in report.problems), report.problems
    with pytest.raises(StoreError, match="commit 6 was acknowledged"):
        served_offsets(data)
    r = kcoord("store", "check", str(data))
    assert r.returncode == 1 and "DAMAGED" in r.stdout and "1 acknowledged commit(s) are missing" in r.stdout, r
    assert check_store(str(behind)).ok and served_offsets(behind) == {("g", 0): 5}


def read_only(d: Path, *args: str) -> subprocess.CompletedProcess:
    """`kcoord ARGS` with `d` bind-mounted read-only (a private mount namespace: nothing outside the test sees it)."""
    script = f'mount --bind "{d}" "{d}" && mount -o remount,bind,ro "{d}" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "kcoord.cli", *args],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("state", ["after_sigkill", "after_clean_stop"])
def test_store_check_on_a_read_only_filesystem_reports_a_healthy_store_as_ok(crashed, tmp_path, state) -> None:
    # Found at a195b2b: `store check` on a read-only filesystem reported a healthy store as DAMAGED.
    d = tmp_path / "data"
    shutil.copytree(crashed.data, d)
    if state == "after_clean_stop":
        served_offsets(d)
        assert not (d / WAL).exists()
    r = read_only(d, "store", "check", str(d), "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["ok"] and doc["offsets"] == len(crashed.acked), doc
    damaged = tmp_path / "damaged"
    shutil.copytree(d, damaged)
    truncate(damaged / STORE_FILE, os.path.getsize(damaged / STORE_FILE) // 2)
    r = read_only(damaged, "store", "check", str(damaged), "--json")
    assert r.returncode == 1 and not json.loads(r.stdout)["ok"], r
    serve = read_only(d, "serve", "--port", str(free_port()), "--data-dir", str(d))
    assert serve.returncode == 1 and "not writable" in serve.stderr and str(d) in serve.stderr, serve
    assert "Traceback" not in serve.stderr and "cannot listen" not in serve.stderr, serve.stderr
