"""Offset retention (offsets.retention.minutes, offsets.retention.check.interval.ms) with Kafka's rule, and what a
deletion gives back: the deleted groups' memory and the store's pages.

Kafka's rule (OffsetMetadataManager.cleanupExpiredOffsets, OffsetExpirationConditionImpl, ClassicGroup and
ConsumerGroup.offsetExpirationCondition, GroupMetadataManager.maybeDeleteGroup): an offset expires when
now - base >= retention, base being the time an Empty classic group became Empty (its currentStateTimestamp, kept in
its GroupMetadataValue), else the offset's own commit timestamp (a simple consumer's group, a consumer group, a
Stable classic "consumer" group's unsubscribed topics); the topics a live group subscribes to never expire; an Empty
group whose offsets are all gone is deleted (tombstones). Driven in-process on a manual clock.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from kcoord import coordinator as coordinator_module
from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.coordinator import Coordinator
from kcoord.store import GroupStore, SqliteRecords, check_store, read_witness

from ..support.harness import ClassicHarness, ConnectHarness, ConsumerHarness, codes, commit
from ..support.retention import INTERVAL, MINUTES, RETENTION, at, empty_group_with_offsets, harness, subscription
from ..support.stores import fill, pragma


def stored_offsets(h, gid: str) -> set[tuple[str, int]]:
    out = set()
    for key, value in h.records.data.items():
        if key[:2] in (b"\x00\x00", b"\x00\x01"):
            rec = R.decode(key, value)
            if rec.key.group == gid:
                out.add((rec.key.topic, rec.key.partition))
    return out


# ---- which offsets expire, and when --------------------------------------------------------------------------

def test_an_empty_groups_offsets_expire_exactly_at_retention_from_when_it_became_empty() -> None:
    h = harness()
    empty_since = empty_group_with_offsets(h)
    assert empty_since == h.clock.ms - 1  # the state timestamp is the transition's, 60 s after the commits
    at(h, empty_since + RETENTION - 1)  # the commits are older than the retention by now; Empty for 1 ms less
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("t", 0), ("u", 0)} == stored_offsets(h, "g")
    assert "g" in h.c.groups
    at(h, empty_since + RETENTION)
    h.c.expire_offsets()
    assert h.c.offsets.committed("g") == {} and stored_offsets(h, "g") == set()
    # ... and the Empty group with no offsets left goes too, its record tombstoned
    assert "g" not in h.c.groups and R.group_key("g") not in h.records.data
    assert h.c.offsets.expired_count == 2 and h.c.groups_expired == 1


def test_a_live_groups_subscribed_topics_never_expire_and_its_other_topics_do() -> None:
    h = harness()
    ids = h.form("A", protocols=(("range", subscription("t")),))
    g = h.group()
    assert codes(commit(h, "g", gen=g.generation, member=ids["A"], iid="A",
                        parts=(("t", 0, 5, "", -1), ("u", 0, 7, "", -1)))) == [E.NONE, E.NONE]
    committed_at = h.clock.ms
    at(h, committed_at + RETENTION - 1)
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("t", 0), ("u", 0)}
    at(h, committed_at + 100 * RETENTION)  # the member is still there (no timer has fired): Stable
    h.c.expire_offsets()
    assert g.state.value == "Stable"
    assert set(h.c.offsets.committed("g")) == {("t", 0)} == stored_offsets(h, "g")  # u expired from its commit
    assert h.c.groups["g"] is g


def test_a_live_group_whose_subscriptions_cannot_be_read_keeps_every_offset() -> None:
    # Kafka: a subscription it cannot parse leaves the group unaware of its topics, so none of its offsets expire.
    h = harness()
    ids = h.form("A", protocols=(("range", b"not a subscription"),))
    g = h.group()
    assert codes(commit(h, "g", gen=g.generation, member=ids["A"], iid="A")) == [E.NONE]
    at(h, h.clock.ms + 100 * RETENTION)
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("t", 0)}


def test_a_simple_consumers_offsets_expire_each_from_its_commit_then_the_group_goes() -> None:
    h = harness()
    assert codes(commit(h, "s", parts=(("t", 0, 1, "", -1),))) == [E.NONE]
    first = h.clock.ms
    h.clock.ms += 30_000
    assert codes(commit(h, "s", parts=(("t", 1, 2, "", -1),))) == [E.NONE]
    second = h.clock.ms
    assert h.c.groups["s"].protocol_type is None  # no protocol type: Kafka's simple consumer
    at(h, first + RETENTION - 1)
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("s")) == {("t", 0), ("t", 1)}
    at(h, first + RETENTION)
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("s")) == {("t", 1)} == stored_offsets(h, "s")
    assert "s" in h.c.groups
    at(h, second + RETENTION)
    h.c.expire_offsets()
    assert "s" not in h.c.groups and h.c.offsets.committed("s") == {} and stored_offsets(h, "s") == set()


def test_a_group_in_a_rebalance_keeps_every_offset() -> None:
    h = harness()
    ids = h.form("A", "B", protocols=(("range", subscription("t")),))
    g = h.group()
    assert codes(commit(h, "g", gen=g.generation, member=ids["A"], iid="A", parts=(("u", 0, 1, "", -1),))) == [0]
    assert h.leave((ids["B"], "B")).error_code == E.NONE  # A must rejoin: PreparingRebalance
    assert g.state.value == "PreparingRebalance"
    at(h, h.clock.ms + 100 * RETENTION)
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("u", 0)}


def test_an_empty_group_without_offsets_goes_at_the_next_check() -> None:
    # Kafka's cleanupExpiredOffsets answers "all expired" for a group with no offsets: maybeDeleteGroup deletes it.
    h = harness()
    ids = h.form("A", protocols=(("range", subscription("t")),))
    assert h.leave((ids["A"], "A")).error_code == E.NONE
    h.advance(1)
    assert h.group().state.value == "Empty" and R.group_key("g") in h.records.data
    h.c.expire_offsets()
    assert "g" not in h.c.groups and R.group_key("g") not in h.records.data


def test_a_consumer_groups_offsets_expire_from_their_commits_except_what_a_member_consumes() -> None:
    h = ConsumerHarness(topics={"T": 2, "U": 2}, offsets_retention_minutes=MINUTES)
    r = h.join("m", topics=("T",))
    epoch = r.member_epoch
    for topic in ("T", "U"):
        req = wire.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=epoch, member_id="m", topics=[
            wire.OffsetCommitRequestTopic(name=topic, partitions=[wire.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata="")])])
        assert codes(h.c.handle(req, 9)) == [E.NONE]
    committed_at = h.clock.ms
    h.clock.ms = committed_at + RETENTION - 1
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("T", 0), ("U", 0)}
    h.clock.ms = committed_at + RETENTION
    h.c.expire_offsets()
    assert set(h.c.offsets.committed("g")) == {("T", 0)}  # m consumes T
    h.hb("m", -1)  # m leaves: the group is Empty, T is nobody's now
    h.c.expire_offsets()
    assert h.c.offsets.committed("g") == {} and "g" not in h.c.groups


def test_an_empty_connect_group_goes_once_it_has_been_empty_for_the_retention() -> None:
    # kcoord's own rule: a connect group keeps its units and assignor state, and its workers commit no offsets.
    h = ConnectHarness(offsets_retention_minutes=MINUTES)
    assert h.join("w").error_code == E.NONE
    h.clock.ms += 10 * RETENTION  # the group's age does not count, only the time it has been Empty
    h.c.expire_offsets()
    assert "g" in h.c.groups
    assert h.hb("w", -1).error_code == E.NONE
    empty_since = h.clock.ms
    h.clock.ms = empty_since + RETENTION - 1
    h.c.expire_offsets()
    assert "g" in h.c.groups
    h.clock.ms = empty_since + RETENTION
    h.c.expire_offsets()
    assert "g" not in h.c.groups and not [k for k in h.records.data if k[:2] != R.topic_key("t")[:2]]


# ---- the check: when it runs, and in slices --------------------------------------------------------------

def test_offsets_retention_check_interval_ms_is_when_expired_offsets_go() -> None:
    h = harness()
    start = h.clock.ms  # the coordinator was made here: it checks at start + k * INTERVAL
    h.clock.ms += 1
    assert codes(commit(h, "s")) == [E.NONE]  # expired from start + 1 + RETENTION: the check after is INTERVAL on
    h.advance(RETENTION + INTERVAL - 2)
    assert h.clock.ms == start + RETENTION + INTERVAL - 1
    assert set(h.c.offsets.committed("s")) == {("t", 0)}
    h.advance(1)
    assert h.c.offsets.committed("s") == {} and "s" not in h.c.groups


def test_offsets_retention_minutes_sets_how_long_offsets_are_kept() -> None:
    for minutes in (1, 3):
        h = ClassicHarness(offsets_retention_minutes=minutes)
        assert codes(commit(h, "s")) == [E.NONE]
        t0 = h.clock.ms
        at(h, t0 + minutes * 60_000 - 1)
        h.c.expire_offsets()
        assert "s" in h.c.groups
        at(h, t0 + minutes * 60_000)
        h.c.expire_offsets()
        assert "s" not in h.c.groups


def test_the_check_runs_in_slices_each_a_timer_of_its_own(monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module, "EXPIRY_SLICE", 50)
    h = harness()
    for i in range(400):
        assert codes(commit(h, f"s{i}")) == [E.NONE]
    h.c.store.commit()
    at(h, h.clock.ms + RETENTION)
    check = h.c.timers.next_deadline()
    h.clock.ms = max(h.clock.ms, check)
    assert h.c.poll() == 1  # one fire: one slice
    left = len(h.c.groups)
    assert 0 < left < 400 and h.c.next_deadline() == h.clock.ms + 1  # the next slice is armed 1 ms later
    h.advance(1000)  # each slice does at least one group (4 here, fewer on a slow machine's 2 ms)
    assert not h.c.groups and not h.c.offsets.by_group and h.c.groups_expired == 400


def test_a_group_deleted_or_recreated_between_slices_is_judged_as_it_is_then(monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module, "EXPIRY_SLICE", 3)
    h = harness()
    assert codes(commit(h, "a", parts=tuple(("t", p, 1, "", -1) for p in range(8)))) == [E.NONE] * 8
    assert codes(commit(h, "b")) == [E.NONE]
    at(h, h.clock.ms + RETENTION)
    h.c._sweep.extend(["a", "b"])
    assert not h.c.expire_slice(3)  # part of a's offsets
    assert h.c.handle(wire.DeleteGroupsRequest(groups_names=["a"]), 2).results[0].error_code == E.NONE
    assert codes(commit(h, "a")) == [E.NONE]  # a new "a", committed now: not expired
    while not h.c.expire_slice(3):
        pass
    assert set(h.c.offsets.committed("a")) == {("t", 0)} and "b" not in h.c.groups


# ---- durable: a restart keeps the result, and the state timestamp --------------------------------------------

def test_the_state_timestamp_is_stored_and_a_restart_keeps_the_expiry_result(tmp_path) -> None:
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    h = harness(records=records)  # topics t and u, 8 partitions each
    empty_since = empty_group_with_offsets(h)
    assert codes(commit(h, "s")) == [E.NONE]
    h.c.store.commit()
    records.close()
    # A restart halfway: the group's Empty time comes back from its GroupMetadataValue, not the time of the load.
    at(h, empty_since + RETENTION // 2)
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    c = h.restarted(records)
    assert c.groups["g"].state_timestamp == empty_since
    at(h, empty_since + RETENTION - 1)
    c.expire_offsets()
    assert set(c.offsets.committed("g")) == {("t", 0), ("u", 0)}
    at(h, empty_since + RETENTION)
    c.expire_offsets()
    assert "g" not in c.groups and "s" in c.groups  # s committed 1 ms after g became Empty
    at(h, empty_since + RETENTION + 1)
    c.expire_offsets()
    assert "s" not in c.groups
    records.close()
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    c = h.restarted(records)
    assert not c.groups and not c.offsets.by_group
    records.close()
    assert check_store(str(tmp_path / "data")).ok


def test_a_stored_group_without_a_state_timestamp_expires_from_its_commits() -> None:
    # Kafka: a GroupMetadataValue with currentStateTimestamp -1 (or an older value version) gives no base timestamp.
    h = harness()
    empty_since = empty_group_with_offsets(h)
    value = R.decode(R.group_key("g"), h.records.data[R.group_key("g")]).value
    value.current_state_timestamp = -1
    h.records.data[R.group_key("g")] = R.group_value(value)
    c = h.restarted(h.records)
    assert c.groups["g"].state_timestamp is None
    at(h, empty_since + RETENTION - 1)  # the commits were 60 s before the group became Empty: expired by now
    c.expire_offsets()
    assert "g" not in c.groups


# ---- what a deletion gives back ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_a_deleted_group_is_freed_at_once_not_at_the_next_garbage_collection(kind) -> None:
    h = harness() if kind == "classic" else ConsumerHarness()
    if kind == "classic":
        assert codes(commit(h, "g")) == [E.NONE]
    else:
        h.join("m")
        h.hb("m", -1)
    ref = weakref.ref(h.c.groups["g"])
    gc.disable()
    try:
        assert h.c.handle(wire.DeleteGroupsRequest(groups_names=["g"]), 2).results[0].error_code == E.NONE
        assert ref() is None  # no reference cycle keeps it (and the memory of 100,000 like it) alive
    finally:
        gc.enable()


def test_a_new_store_gives_freed_pages_back_step_by_step(tmp_path) -> None:
    d = str(tmp_path / "data")
    fill(d, 20_000)
    assert pragma(d, "auto_vacuum") == 2 and pragma(d, "freelist_count") > 0
    records = SqliteRecords(d, fsync="off")
    seq = records.state.seq
    steps = 0
    while (left := records.reclaim(64)) > 0:
        steps += 1
    assert steps > 1 and left == 0  # in steps of at most 64 pages
    assert records.state.seq == seq  # no commit: the state row and the witness stay
    records.close()
    assert pragma(d, "freelist_count") == 0
    assert check_store(d).ok and read_witness(d) == seq


def test_deletions_schedule_the_reclaim_on_the_coordinators_timers(tmp_path) -> None:
    d = str(tmp_path / "data")
    h = harness()
    records = SqliteRecords(d, fsync="off")
    c = Coordinator(h.config, h.clock, store=GroupStore(records, h.clock.wall_ms))
    c.topics.create("t", 1)
    for i in range(3000):
        assert codes(c.handle(wire.OffsetCommitRequest(
            group_id=f"g{i}", generation_id_or_member_epoch=-1, member_id="", topics=[wire.OffsetCommitRequestTopic(
                name="t", partitions=[wire.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata="x" * 100,
                    committed_leader_epoch=-1)])]), 8)) == [E.NONE]
    names = [f"g{i}" for i in range(3000)]
    assert not any(r.error_code for r in c.handle(wire.DeleteGroupsRequest(groups_names=names), 2).results)
    assert records.db.execute("PRAGMA freelist_count").fetchone()[0] > 0
    assert c.timers.is_armed(c.reclaim_timer)
    while (deadline := c.next_deadline()) is not None and c.timers.is_armed(c.reclaim_timer):
        h.clock.ms = max(h.clock.ms, deadline)
        c.poll()
    assert records.db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    records.close()
