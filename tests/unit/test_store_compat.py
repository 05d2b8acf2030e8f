"""A data directory written by an older kcoord opens, checks and replays to the same groups and offsets.

tests/fixtures/store-a195b2b/data was written by kcoord at commit a195b2b (tests/fixtures/make_store_fixture.py,
run against that commit), and expected.json holds what that kcoord answered after replaying it: ListGroups,
DescribeGroups, OffsetFetch of every group, the loaded counts and `store check`. The current code must give the
same answers from a copy of the same bytes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kcoord import wire
from kcoord.cli import main
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.store import GroupStore, SqliteRecords, check_store
from kcoord.timers import ManualClock

from ..fixtures.make_store_fixture import jsonable  # the same conversion the fixture's answers went through

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store-a195b2b"


def answers(data_dir: str) -> dict:
    """The same questions make_store_fixture.answers asked of the old code."""
    clock = ManualClock(1_800_000_000_000)
    store = GroupStore(SqliteRecords(data_dir), clock.wall_ms)
    c = Coordinator(GroupConfig(), clock, store=store)
    try:
        stats = c.load()
        groups = sorted(g.group_id for g in c.handle(wire.ListGroupsRequest(), 5).groups)
        return jsonable({
            "loaded": {"groups": stats.groups, "members": stats.members, "offsets": stats.offsets,
                       "topics": stats.topics},
            "topics": sorted([t.name, t.topic_id.hex(), t.partitions] for t in c.topics.by_name.values()),
            "list_groups": c.handle(wire.ListGroupsRequest(), 5).to_dict(),
            "describe_groups": c.handle(wire.DescribeGroupsRequest(groups=[*groups, "deleted"]), 5).to_dict(),
            "offset_fetch": c.handle(wire.OffsetFetchRequest(groups=[
                wire.OffsetFetchRequestGroup(group_id=g, topics=None) for g in [*groups, "deleted"]]), 8).to_dict(),
            "store_check": {k: v for k, v in check_store(data_dir).to_dict().items() if k not in ("path", "bytes", "notes")},
        })
    finally:
        store.close()


def copy_fixture(tmp_path: Path) -> str:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "data", data)
    return str(data)


def test_a_store_written_by_a195b2b_replays_to_the_same_answers(tmp_path) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert expected.pop("written_by").startswith("a195b2b")
    got = answers(copy_fixture(tmp_path))
    assert got["loaded"] == expected["loaded"] == {"groups": 3, "members": 5, "offsets": 27, "topics": 2}
    for part in ("topics", "describe_groups", "offset_fetch", "store_check"):
        assert got[part] == expected[part], part
    by_id = lambda listing: sorted(listing["groups"], key=lambda g: g["group_id"])  # noqa: E731
    assert by_id(got["list_groups"]) == by_id(expected["list_groups"])
    # And what it holds is what the fixture set out to write (so the comparison above compares something).
    states = {g["group_id"]: g["group_state"] for g in got["list_groups"]["groups"]}
    assert states == {"static-stable": "Stable", "dynamic-stable": "Stable", "left-empty": "Empty", "simple": "Empty"}
    fetched = {g["group_id"]: {(t["name"], p["partition_index"]): p["committed_offset"]
                               for t in g["topics"] for p in t["partitions"]}
               for g in got["offset_fetch"]["groups"]}
    assert fetched["simple"] == {("orders", 0): 42, ("payments", 1): 43}
    assert ("orders", 5) not in fetched["left-empty"] and len(fetched["left-empty"]) == 11
    assert fetched["deleted"] == {}


def test_a_store_written_by_a195b2b_passes_store_check(tmp_path, capsys) -> None:
    data = copy_fixture(tmp_path)
    assert main(["store", "check", data, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and (report["groups"], report["offsets"], report["topics"]) == (3, 27, 2)


def test_a_store_written_before_the_commit_witness_starts_keeping_it(tmp_path) -> None:
    from kcoord.records import offset_key, offset_value
    from kcoord.store import STORE_FILE, WITNESS_FILE, StoreError, read_witness

    data = copy_fixture(tmp_path)
    assert not (Path(data) / WITNESS_FILE).exists()
    records = SqliteRecords(data)  # the first open: a state row from the records present, witness at 0
    assert read_witness(data) == 0 and records.state.seq == 0 and records.state.count == 32
    records.put({offset_key("simple", "orders", 0): offset_value(99, -1, "", 0)})
    assert read_witness(data) == 1 == records.state.seq
    records.close()
    assert check_store(data).ok
    # From now on a lost commit is caught: the database alone, without the commit just made, is a rollback.
    db = sqlite3.connect(Path(data) / STORE_FILE)
    row = db.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()[0]
    db.execute("UPDATE meta SET value = ? WHERE name = 'state'", ("0" + row[row.index(" "):],))
    db.commit()
    db.close()
    report = check_store(data)
    assert not report.ok and any("commit 1 was acknowledged" in p for p in report.problems), report.problems
    with pytest.raises(StoreError, match="commit 1 was acknowledged"):
        SqliteRecords(data)
