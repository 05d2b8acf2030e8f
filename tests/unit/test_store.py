"""The durable store (kcoord.store): Kafka-format records, write-ahead, replay, damage detection.

In-process tests drive a Coordinator over MemoryRecords or SqliteRecords with a manual clock and replay the
records into a second coordinator, as a restart does. The randomized test replays after every step of the
classic-group model and checks that whatever was acknowledged is what a restart would find.
"""

from __future__ import annotations

import random
import sqlite3
import struct

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.coordinator import Coordinator
from kcoord.groups.classic import State
from kcoord.records import group_key, offset_key, offset_value
from kcoord.store import STORE_FILE, GroupStore, MemoryRecords, SqliteRecords, StoreError, check_store, record_crc
from kcoord.timers import ManualClock
from kcoord.topics import TopicCatalogue

from ..support.classic_model import Model
from ..support.harness import REBALANCE, SESSION, ClassicHarness
from ..support.stores import DAMAGE, commit, full_store, restate

# ---- the records are Kafka's bytes ----------------------------------------------------------------------

def test_offset_commit_key_and_value_layout_is_kafkas() -> None:
    key = offset_key("grp", "orders", 7)
    assert key == struct.pack(">hh3sh6si", 1, 3, b"grp", 6, b"orders", 7)  # type 1, then group, topic, partition
    value = offset_value(42, 5, "meta", 1_700_000_000_000)
    assert value == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1_700_000_000_000)  # v3: epoch, no expiry


def test_group_record_is_groupmetadata_v3_with_members_and_assignments() -> None:
    h = ClassicHarness()
    ids = h.form("A", "B", None)
    value = h.records.data[group_key("g")]
    assert value[:2] == b"\x00\x03"
    v = wire.GroupMetadataValue.decode(value[2:], 3)
    g = h.group()
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == ("consumer", g.generation, "range", g.leader_id)
    assert {m.member_id: (m.group_instance_id, m.assignment, m.subscription, m.session_timeout)
            for m in v.members} == {
        ids["A"]: ("A", b"a-A", b"r", SESSION), ids["B"]: ("B", b"a-B", b"r", SESSION),
        ids["d2"]: (None, b"a-d2", b"r", SESSION)}


def _s(text: str | None) -> bytes:
    """A Kafka (nullable) string: int16 length, then UTF-8; null is length -1."""
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text.encode())) + text.encode()


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_group_record_bytes_laid_out_by_hand_from_kafkas_schema() -> None:
    # The stored classic group, checked against bytes laid out here field by field from Kafka's
    # GroupMetadataKey.json (record type 2: group) and GroupMetadataValue.json at version 3 (protocolType,
    # generation, protocol?, leader?, currentStateTimestamp, then each member: memberId, groupInstanceId?,
    # clientId, clientHost, rebalanceTimeout, sessionTimeout, subscription, assignment), not through kcoord's codec.
    h = ClassicHarness()
    ids = h.form("A", "B", None)
    g = h.group()
    written_at = h.clock.wall_ms()
    assert group_key("g") == struct.pack(">h", 2) + _s("g")
    key_of = {mid: k for k, mid in ids.items()}
    members = b"".join(
        _s(mid) + _s(key_of[mid] if key_of[mid] in ("A", "B") else None) + _s("client") + _s("/127.0.0.1")
        + struct.pack(">ii", REBALANCE, SESSION) + _b(b"r") + _b(f"a-{key_of[mid]}".encode())
        for mid in [m.member_id for m in g.members])
    expected = (struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", g.generation) + _s("range")
                + _s(g.leader_id) + struct.pack(">q", written_at) + struct.pack(">i", 3) + members)
    assert h.records.data[group_key("g")] == expected


@pytest.mark.parametrize("change,words", [
    (lambda v: v.members.append(v.members[0]), "a member id appears twice"),
    (lambda v: setattr(v.members[1], "group_instance_id", v.members[0].group_instance_id),
     "an instance id appears twice"),
    (lambda v: setattr(v, "generation", -1), "negative generation -1"),
    (lambda v: setattr(v, "leader", "someone-else"), "leader 'someone-else' is not a member"),
    (lambda v: setattr(v, "protocol", None), "members but no protocol"),
], ids=["member-twice", "instance-twice", "negative-generation", "leader-not-member", "no-protocol"])
def test_an_inconsistent_stored_group_is_refused_by_load_and_by_store_check(tmp_path, change, words) -> None:
    # A GroupMetadataValue whose bytes and checksum are sound but whose content no group could have: the
    # coordinator refuses to load it (never a half-built group) and `store check` names it.
    full_store(tmp_path)
    db = sqlite3.connect(tmp_path / STORE_FILE)
    key = group_key("g")
    (value,) = db.execute("SELECT value FROM records WHERE key = ?", (key,)).fetchone()
    v = wire.GroupMetadataValue.decode(value[2:], 3)
    change(v)
    bad = value[:2] + v.encode(3)
    db.execute("UPDATE records SET value = ?, crc = ? WHERE key = ?", (bad, record_crc(key, bad), key))
    restate(db)
    db.commit()
    db.close()
    records = SqliteRecords(str(tmp_path))
    try:
        with pytest.raises(StoreError, match=f"group 'g': {words}"):
            Coordinator(store=GroupStore(records)).load()
    finally:
        records.close()
    report = check_store(str(tmp_path))
    assert not report.ok and any(f"group 'g': {words}" in p for p in report.problems), report.problems


# ---- replay ----------------------------------------------------------------------------------------------

def test_replay_restores_a_stable_static_group_and_its_offsets() -> None:
    h = ClassicHarness(topics={"orders": 2})
    ids = h.form("A", "B", "C")
    g = h.group()
    assert commit(h, {("orders", 0): 10, ("orders", 1): 11}, member_id=ids["A"], generation=g.generation,
                  iid="A").topics[0].partitions[0].error_code == E.NONE
    c2 = h.restarted()
    g2 = c2.groups["g"]
    assert g2.state == State.STABLE and g2.generation == g.generation and g2.leader_id == g.leader_id
    assert g2.protocol_type == "consumer" and g2.protocol_name == "range"
    assert dict(g2.members.static_members) == dict(g.members.static_members)
    assert {m.member_id: m.assignment for m in g2.members} == {m.member_id: m.assignment for m in g.members}
    assert c2.offsets.committed("g") == h.c.offsets.committed("g")
    assert c2.offsets.committed("g")[("orders", 1)][:3] == (11, 3, "m11")
    # The members carry on as if nothing happened: heartbeats with their ids and generation are fine.
    for iid, mid in ids.items():
        hb = c2.handle(wire.HeartbeatRequest(group_id="g", generation_id=g.generation, member_id=mid,
                                                    group_instance_id=iid), 4)
        assert hb.error_code == E.NONE


def test_replayed_static_member_rejoining_with_a_new_id_keeps_generation_and_assignment() -> None:
    h = ClassicHarness()
    h.form("A", "B", "C")
    gen = h.group().generation
    h.restart()
    r = h.join(iid="B")  # the member's process restarted too: empty member id, same instance id
    assert r.done and r.response.error_code == E.NONE and r.response.generation_id == gen
    assert h.group().state == State.STABLE
    sync = h.sync(r.response.member_id, gen, "B")
    assert sync.response.assignment == b"a-B"


def test_replay_gives_every_member_a_full_session_timeout_from_the_load() -> None:
    h = ClassicHarness()
    ids = h.form("A", "B")
    h.advance(SESSION - 100)  # nearly expired before the restart...
    h.restart()
    h.advance(SESSION - 100)  # ...but the load re-armed a full session timeout
    g = h.group()
    assert set(g.members.members) == set(ids.values()) and g.state == State.STABLE
    h.advance(200)  # nobody came back: both expire and the group rebalances to Empty
    assert not g.members.members
    assert [e.trigger for e in g.history][-2:] == ["session-timeout", "session-timeout"]


def test_replay_of_a_group_above_max_size_rebalances() -> None:
    h = ClassicHarness()
    h.form("A", "B", "C")
    small = ClassicHarness(group_max_size=2)
    small.records.data.update(h.records.data)
    c2 = small.restarted()
    assert c2.groups["g"].state == State.PREPARING_REBALANCE


def test_empty_group_keeps_its_generation_and_offsets() -> None:
    h = ClassicHarness()
    ids = h.form(None)
    gen = h.group().generation
    commit(h, {("t", 0): 5}, member_id=ids["d0"], generation=gen)
    h.leave((ids["d0"], None))
    assert h.group().state == State.EMPTY
    c2 = h.restarted()
    g2 = c2.groups["g"]
    assert g2.state == State.EMPTY and g2.generation == gen + 1 and c2.offsets.committed("g")[("t", 0)][0] == 5


# ---- write-ahead -----------------------------------------------------------------------------------------

def test_offset_commit_is_in_the_store_when_the_response_is_returned() -> None:
    h = ClassicHarness()
    resp = commit(h, {("t", 0): 1, ("t", 1): 2})
    assert all(p.error_code == E.NONE for p in resp.topics[0].partitions)
    assert h.records.data[offset_key("g", "t", 1)][:2] == b"\x00\x03"
    assert h.restarted().offsets.committed("g")[("t", 1)][0] == 2


class FailingRecords(MemoryRecords):
    def put(self, batch):
        raise StoreError("disk full")


def test_a_failed_write_is_never_acknowledged() -> None:
    h = ClassicHarness()
    h.c.store = GroupStore(FailingRecords())
    with pytest.raises(StoreError):
        commit(h, {("t", 0): 1})  # the caller gets the error, not a response saying NONE


def test_rejected_commits_write_nothing() -> None:
    h = ClassicHarness()
    h.form("A")
    before = dict(h.records.data)
    resp = commit(h, {("t", 0): 1}, member_id="nobody", generation=1, iid=None)
    assert resp.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
    assert h.records.data == before


def test_heartbeats_write_nothing() -> None:
    h = ClassicHarness()
    ids = h.form("A", "B")
    staged, commits = h.c.store.staged, h.records.commits
    for _ in range(1000):
        assert h.heartbeat(ids["A"], 1, "A") == E.NONE
    assert (h.c.store.staged, h.records.commits) == (staged, commits)


def test_delete_groups_and_offset_delete_write_tombstones() -> None:
    h = ClassicHarness()
    commit(h, {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    h.c.handle(wire.OffsetDeleteRequest(group_id="g", topics=[
        wire.OffsetDeleteRequestTopic(name="u", partitions=[wire.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert offset_key("g", "u", 0) not in h.records.data
    assert h.restarted().offsets.committed("g").keys() == {("t", 0), ("t", 1)}
    resp = h.c.handle(wire.DeleteGroupsRequest(groups_names=["g"]), 2)
    assert resp.results[0].error_code == E.NONE
    assert h.records.data == {}
    assert "g" not in h.restarted().groups


def test_writes_staged_in_one_turn_are_one_transaction_and_collapse_per_key() -> None:
    h = ClassicHarness()
    h.c.autocommit = False  # as the server runs it: one commit per event-loop turn
    for i in range(50):
        commit(h, {("t", i % 5): i})
    assert h.records.commits == 0 and h.c.store.dirty and len(h.c.store.pending) == 5
    h.c.store.commit()
    assert h.records.commits == 1 and not h.c.store.dirty
    assert {k: v[0] for k, v in h.restarted().offsets.committed("g").items()} == {("t", p): 45 + p for p in range(5)}


# ---- what a restart finds is what was acknowledged, after every step of random sequences -----------------

class DurableModel(Model):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.acked: dict[tuple[str, int], int] = {}
        self.next_offset = 0

    def step(self) -> None:
        if self.rng.random() < 0.15:
            c = self.rng.choice(self.clients)
            g = self.h.c.groups.get("g")
            self.next_offset += 1
            part = ("t", self.rng.randrange(4))
            resp = commit(self.h, {part: self.next_offset}, member_id=c.member_id, iid=c.iid,
                          generation=c.generation if g is not None and c.member_id else -1)
            if resp.topics[0].partitions[0].error_code == E.NONE:
                self.acked[part] = self.next_offset
        else:
            super().step()

    def check(self) -> None:
        super().check()
        live = self.h.c.groups.get("g")
        c2 = self.h.restarted()
        back = c2.groups.get("g")
        offsets = {k: v[0] for k, v in c2.offsets.committed("g").items()} if back is not None else {}
        assert offsets == self.acked, "acknowledged offsets differ after a restart"
        if live is None:
            return
        if live.state == State.STABLE:
            assert back is not None and back.state == State.STABLE
            assert (back.generation, back.leader_id, back.protocol_name) == (
                live.generation, live.leader_id, live.protocol_name)
            assert {m.member_id: (m.group_instance_id, m.assignment, m.metadata_for(live.protocol_name))
                    for m in back.members} == {
                m.member_id: (m.group_instance_id, m.assignment, m.metadata_for(live.protocol_name))
                for m in live.members}
        elif live.state == State.EMPTY:
            assert (back.generation if back is not None else 0) == live.generation
            assert back is None or not back.members.members
        else:
            assert (back.generation if back is not None else 0) <= live.generation


@pytest.mark.parametrize("block", range(2))
def test_random_sequences_restart_to_what_was_acknowledged(block: int) -> None:
    for seq in range(block * 150, (block + 1) * 150):
        rng = random.Random(10_000 + seq)
        model = DurableModel(rng)
        try:
            for _ in range(rng.randint(10, 60)):
                model.step()
                model.check()
        except AssertionError as e:
            raise AssertionError(f"sequence seed {10_000 + seq}: {e}") from e


# ---- the embedded SQLite store ---------------------------------------------------------------------------

def test_sqlite_records_compaction_tombstones_and_reopen(tmp_path) -> None:
    r = SqliteRecords(str(tmp_path))
    r.put({b"k1": b"v1", b"k2": b"v2"})
    r.put({b"k1": b"v1b", b"k2": None, b"k3": b"v3"})
    assert dict(r.scan()) == {b"k1": b"v1b", b"k3": b"v3"}
    r.close()
    r2 = SqliteRecords(str(tmp_path), fsync="off")
    assert dict(r2.scan()) == {b"k1": b"v1b", b"k3": b"v3"}
    r2.close()


def test_one_server_per_data_dir(tmp_path) -> None:
    r = SqliteRecords(str(tmp_path))
    with pytest.raises(StoreError, match="in use by another kcoord"):
        SqliteRecords(str(tmp_path))
    r.close()
    SqliteRecords(str(tmp_path)).close()


def test_unknown_fsync_policy_is_refused(tmp_path) -> None:
    with pytest.raises(StoreError, match="store.fsync"):
        SqliteRecords(str(tmp_path), fsync="sometimes")


def test_sqlite_store_replays_groups_offsets_and_topics(tmp_path) -> None:
    full_store(tmp_path)
    clock = ManualClock(5_000_000)
    topics = TopicCatalogue()
    c = Coordinator(clock=clock, store=GroupStore(SqliteRecords(str(tmp_path))), topics=topics)
    stats = c.load()
    assert (stats.groups, stats.members, stats.offsets, stats.topics) == (1, 2, 12, 1)
    assert topics.get("orders").partitions == 12
    g = c.groups["g"]
    assert g.state == State.STABLE and set(g.members.static_members) == {"A", "B"}
    assert {p: v[0] for (_, p), v in c.offsets.committed("g").items()} == {p: 100 + p for p in range(12)}
    report = check_store(str(tmp_path))
    c.store.close()
    assert report.ok and (report.groups, report.members, report.offsets, report.topics) == (1, 2, 12, 1)


@pytest.mark.parametrize("damage", DAMAGE, ids=[d.__name__[7:] for d in DAMAGE])
def test_damaged_store_is_refused_and_reported(tmp_path, damage) -> None:
    full_store(tmp_path)
    words = damage(tmp_path)
    with pytest.raises(StoreError, match=words):
        records = SqliteRecords(str(tmp_path))
        try:
            store = GroupStore(records)
            c = Coordinator(store=store)
            c.load()
        finally:
            records.close()
    report = check_store(str(tmp_path))
    assert not report.ok and report.problems, report
    assert any(words in p for p in report.problems), report.problems


def test_a_cluster_nodes_failed_batch_takes_what_was_staged_since_for_its_partitions_and_is_settled() -> None:
    """The group commit's bookkeeping when a cluster node's write fails (GroupStore.drop_staged, settle): what was
    staged while the failed batch was written goes for the partitions it touched and stays for the others; once
    its waiting answers are dropped, nothing waits for the failed batch any more (`durable` moves past it), and the
    next batch is written and counted as before."""
    records = MemoryRecords()
    store = GroupStore(records)
    store.stage(offset_key("a", "t", 0), offset_value(1, -1, "", 0))
    batch = store.hand_off()
    assert batch is not None and store.writing == 1 and not store.dirty
    store.stage(offset_key("a", "t", 1), offset_value(2, -1, "", 0))  # same group: the failed partition's
    store.stage(offset_key("b", "t", 0), offset_value(3, -1, "", 0))  # another group, another partition
    store.written(batch, StoreError("fenced"))
    assert store.durable == 0 and store.newest == 2
    assert store.drop_staged(lambda key: key.startswith(offset_key("a", "t", 0)[:5])) == 1
    assert list(store.pending) == [offset_key("b", "t", 0)] and store.dirty
    store.settle(1)
    assert store.durable == 1
    store.settle(0)  # never backwards
    assert store.durable == 1
    batch = store.hand_off()
    assert batch is not None and store.writing == 2
    store.write(store.prepare(batch))
    store.written(batch, None)
    assert store.durable == 2 and records.data == {offset_key("b", "t", 0): offset_value(3, -1, "", 0)}
    assert store.drop_staged(lambda key: True) == 0 and not store.dirty


def test_the_batch_a_group_last_staged_in_is_kept_and_pruned_once_written_past_the_limit() -> None:
    """GroupStore.group_seq (what an OffsetFetch of a group waits for): each group's newest staging batch; groups
    whose batch is written are forgotten once there are more than GROUP_SEQ_KEPT, or twice what the last pruning
    kept, and a group staged since is not."""
    from kcoord.store import GROUP_SEQ_KEPT

    st = GroupStore(MemoryRecords())
    st.stage(offset_key("g", "t", 0), offset_value(1, -1, "", 0))
    assert st.group_seq == {b"g": 1}
    st.commit()
    st.stage(offset_key("g", "t", 1), offset_value(2, -1, "", 0))
    assert st.group_seq == {b"g": 2}
    st.commit()
    for i in range(GROUP_SEQ_KEPT + 1):
        st.stage(offset_key(f"many-{i}", "t", 0), offset_value(i, -1, "", 0))
    st.commit()  # batch 3 written: every group's batch is durable, and there are more than the limit
    assert st.group_seq == {} and st.group_seq_limit == GROUP_SEQ_KEPT
    st.stage(offset_key("later", "t", 0), offset_value(1, -1, "", 0))
    batch = st.hand_off()
    for i in range(GROUP_SEQ_KEPT + 1):
        st.stage(offset_key(f"more-{i}", "t", 0), offset_value(i, -1, "", 0))
    st.written(batch, None)  # batch 4 written; batch 5 (the "more" groups) is still staged
    assert len(st.group_seq) == GROUP_SEQ_KEPT + 1 and b"later" not in st.group_seq
    assert st.group_seq_limit == 2 * (GROUP_SEQ_KEPT + 1)
