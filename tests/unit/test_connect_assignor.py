"""The connect groups' client-side assignor (kcoord.client.worker_assignor): Kafka Connect's incremental cooperative
assignor over complete targets, with the scheduled delay for departed workers kept in the assignor state."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord import wire
from kcoord.client.worker_assignor import (
    CONFIG_MISMATCH,
    AssignmentInput,
    AssignmentMetadata,
    AssignmentOutput,
    ConnectorTasks,
    DepartedInput,
    IncrementalCooperativeAssignor,
    MemberInput,
    UnitSet,
    WorkerMetadata,
)

Unit = tuple[str, int]  # (connector, task); task -1 is the connector itself
DELAY = 10_000


# ---- helpers --------------------------------------------------------------------------------------------------------


def meta(mid: str, offset: int = 5) -> bytes:
    return WorkerMetadata(f"http://{mid}:8083", offset).encode()


def member(mid: str, target: UnitSet | None = None, iid: str | None = None, offset: int = 5,
           target_metadata: bytes = b"") -> MemberInput:
    return MemberInput(mid, iid, meta(mid, offset), target if target is not None else UnitSet([], []),
                       target_metadata)


def run(assignor: IncrementalCooperativeAssignor, members: list[MemberInput], units: dict[str, int], *,
        computing: str | None = None, now: int = 0, departed: list[DepartedInput] | None = None,
        state: bytes | None = None, delay_remaining: int = -1, version: int = 2) -> AssignmentOutput:
    return assignor.assign(AssignmentInput(computing or members[0].member_id, version, now, units, members,
                                           departed or [], state, delay_remaining))


def unit_set(out: AssignmentOutput, mid: str) -> UnitSet:
    m = next(m for m in out.members if m.member_id == mid)
    return UnitSet(m.connectors, m.tasks)


def units_of(s) -> set[Unit]:
    """A UnitSet (or MemberAssignment) as units; checks the output shape on the way."""
    assert list(s.connectors) == sorted(s.connectors), s.connectors
    conns = [t.connector for t in s.tasks]
    assert conns == sorted(set(conns)), f"tasks not grouped by connector in name order: {conns}"
    out = {(c, -1) for c in s.connectors}
    assert len(out) == len(s.connectors)
    for t in s.tasks:
        assert t.task_ids and list(t.task_ids) == sorted(set(t.task_ids)), t
        out |= {(t.connector, i) for i in t.task_ids}
    return out


def owners(out: AssignmentOutput) -> dict[Unit, str]:
    """unit -> member id; fails when a unit is assigned twice."""
    seen: dict[Unit, str] = {}
    for m in out.members:
        for u in units_of(m):
            assert u not in seen, f"{u} assigned to {seen[u]} and {m.member_id}"
            seen[u] = m.member_id
    return seen


def all_units(units: dict[str, int]) -> set[Unit]:
    return {(c, -1) for c in units} | {(c, t) for c, n in units.items() for t in range(n)}


def counts(out: AssignmentOutput) -> dict[str, tuple[int, int]]:
    """member id -> (connectors, tasks)."""
    return {m.member_id: (len(m.connectors), sum(len(t.task_ids) for t in m.tasks)) for m in out.members}


def assert_balanced(out: AssignmentOutput) -> None:
    c = counts(out)
    n = len(c)
    for kind in (0, 1):
        total = sum(v[kind] for v in c.values())
        lo, hi = total // n, -(-total // n)
        assert all(lo <= v[kind] <= hi for v in c.values()), (kind, c)


def follow(out: AssignmentOutput, members: list[MemberInput]) -> list[MemberInput]:
    """The members again, each with the target `out` gave it (what the next Prepare lists)."""
    by_id = {m.member_id: m for m in out.members}
    return [MemberInput(m.member_id, m.instance_id, m.metadata, UnitSet(by_id[m.member_id].connectors,
                                                                        by_id[m.member_id].tasks),
                        by_id[m.member_id].metadata) for m in members]


def lost_in_state(state: bytes) -> set[Unit]:
    obj = json.loads(state)
    out: set[Unit] = set()
    for e in obj["lost"]:
        out |= {(c, -1) for c in e["connectors"]}
        for c, flat in e["tasks"]:
            for a, b in zip(flat[0::2], flat[1::2], strict=True):
                out |= {(c, t) for t in range(a, b)}
    return out


def steady(assignor: IncrementalCooperativeAssignor, n: int, units: dict[str, int]) -> list[MemberInput]:
    members = [member(f"w{i}") for i in range(n)]
    return follow(run(assignor, members, units), members)


# ---- first assignment and balance -----------------------------------------------------------------------------------


def test_first_assignment_balances_connectors_and_tasks() -> None:
    units = {"a": 3, "b": 0, "c": 7, "d": 1, "e": 4}
    members = [member(f"w{i}") for i in range(4)]
    out = run(IncrementalCooperativeAssignor(), members, units)
    assert out.error == 0 and out.delay_ms == 0
    assert [m.member_id for m in out.members] == ["w0", "w1", "w2", "w3"]
    assert set(owners(out)) == all_units(units)
    c = counts(out)
    assert sorted(v[0] for v in c.values()) == [1, 1, 1, 2]
    assert sorted(v[1] for v in c.values()) == [3, 4, 4, 4]
    assert all(m.version == 2 for m in out.members)
    # free units go out in id order as contiguous chunks: a member holds runs, not scattered tasks
    assert [(t.connector, t.task_ids) for t in out.members[0].tasks] == [("a", [0, 1, 2]), ("c", [0])]
    assert [(t.connector, t.task_ids) for t in out.members[1].tasks] == [("c", [1, 2, 3, 4])]


def test_first_assignment_more_members_than_units() -> None:
    units = {"a": 2}
    members = [member(f"w{i}") for i in range(5)]
    out = run(IncrementalCooperativeAssignor(), members, units)
    assert set(owners(out)) == all_units(units)
    assert counts(out) == {"w0": (1, 1), "w1": (0, 1), "w2": (0, 0), "w3": (0, 0), "w4": (0, 0)}


# ---- stickiness -----------------------------------------------------------------------------------------------------


def test_stickiness_one_worker_joins_moves_only_the_surplus() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 6, "b": 6, "c": 0}
    members = steady(a, 3, units)
    before = {m.member_id: units_of(m.target) for m in members}
    assert sorted(len(v) for v in before.values()) == [5, 5, 5]  # 1 connector + 4 tasks each
    out = run(a, [*members, member("w3")], units)
    after = {m.member_id: units_of(m) for m in out.members}
    assert_balanced(out)
    for mid in before:
        assert after[mid] <= before[mid]  # old members only give up units
    moved = sum(len(before[mid] - after[mid]) for mid in before)
    assert moved == 3  # 12 tasks / 4 = 3: one task from each; 3 connectors / 4: none moves
    assert counts(out)["w3"] == (0, 3)


def test_stickiness_one_worker_leaves_moves_only_its_units() -> None:
    a = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=0)
    units = {f"c{i}": 10 for i in range(4)}
    members = steady(a, 4, units)
    before = {m.member_id: units_of(m.target) for m in members}
    out = run(a, members[:3], units, departed=[DepartedInput("w3", None, members[3].target)])
    after = {m.member_id: units_of(m) for m in out.members}
    assert_balanced(out)
    assert set(owners(out)) == all_units(units)
    for mid in ("w0", "w1", "w2"):
        assert before[mid] <= after[mid]
    assert out.delay_ms == 0 and lost_in_state(out.state) == set()


def test_stickiness_steady_state_is_a_fixed_point() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"x": 17, "y": 3, "z": 9}
    members = steady(a, 5, units)
    out = run(a, members, units)
    assert {m.member_id: units_of(m) for m in out.members} == {m.member_id: units_of(m.target) for m in members}


def test_extra_quota_goes_to_members_that_hold_the_most() -> None:
    # w0 holds 5 tasks, w1 holds 1, w2 none; 7 tasks / 3 -> quotas 3, 2, 2: w0 keeps 3 (the +1), gives up 2
    units = {"a": 7}
    members = [member("w0", UnitSet([], [ConnectorTasks("a", [0, 1, 2, 3, 4])])),
               member("w1", UnitSet(["a"], [ConnectorTasks("a", [5])])), member("w2")]
    out = run(IncrementalCooperativeAssignor(), members, units)
    got = {m.member_id: units_of(m) for m in out.members}
    assert got["w0"] == {("a", 0), ("a", 1), ("a", 2)}  # keeps its lowest ids, gives up 3 and 4
    assert got["w2"] == {("a", 3), ("a", 4)}  # the least loaded is filled first, in id order
    assert got["w1"] == {("a", -1), ("a", 5), ("a", 6)}
    assert_balanced(out)


# ---- unit set changes ---------------------------------------------------------------------------------------------


def test_deleted_connector_units_dropped() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 4, "b": 4, "c": 4}
    members = steady(a, 3, units)
    smaller = {"a": 4, "c": 2}  # b deleted, c shrunk to 2 tasks
    out = run(a, members, smaller)
    got = owners(out)
    assert set(got) == all_units(smaller)
    assert not any(c == "b" for c, _ in got) and ("c", 2) not in got and ("c", 3) not in got
    assert_balanced(out)


def test_new_connector_assigned_at_once() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 6, "b": 6, "c": 6}
    members = steady(a, 3, units)
    before = {m.member_id: units_of(m.target) for m in members}
    bigger = {**units, "d": 6}
    out = run(a, members, bigger)
    after = {m.member_id: units_of(m) for m in out.members}
    assert set(owners(out)) == all_units(bigger)
    assert out.delay_ms == 0
    for mid in before:
        assert before[mid] <= after[mid]  # nothing moves, each gets new units
    assert sorted(len(after[mid] - before[mid]) for mid in before) == [2, 2, 3]  # 6 tasks + 1 connector


def test_new_tasks_go_to_the_least_loaded_first() -> None:
    units = {"a": 4}
    members = [member("w0", UnitSet(["a"], [ConnectorTasks("a", [0, 1])])),
               member("w1", UnitSet([], [ConnectorTasks("a", [2])])), member("w2", UnitSet([], []))]
    out = run(IncrementalCooperativeAssignor(), members, units)
    got = {m.member_id: units_of(m) for m in out.members}
    assert got["w2"] == {("a", 3)}
    assert got["w0"] == {("a", -1), ("a", 0), ("a", 1)} and got["w1"] == {("a", 2)}


# ---- lost units and the scheduled delay -------------------------------------------------------------------------------


def departure(delay: int = DELAY) -> tuple[IncrementalCooperativeAssignor, dict[str, int], list[MemberInput],
                                           AssignmentOutput]:
    """w0, w1, w2 balanced over 3 connectors x 4 tasks; w2 departs at t=1000."""
    a = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=delay)
    units = {"a": 4, "b": 4, "c": 4}
    members = steady(a, 3, units)
    out = run(a, members[:2], units, now=1000, departed=[DepartedInput("w2", None, members[2].target)])
    return a, units, members, out


def test_departed_worker_units_held_for_the_delay() -> None:
    a, units, members, out = departure()
    lost = units_of(members[2].target)
    got = owners(out)
    assert not lost & set(got)
    assert set(got) == all_units(units) - lost
    assert {m.member_id: units_of(m) for m in out.members} == {m.member_id: units_of(m.target) for m in members[:2]}
    assert out.delay_ms == DELAY
    assert lost_in_state(out.state) == lost
    # later, still inside the delay (the coordinator's timer runs): still held, the delay counts down
    again = run(a, follow(out, members[:2]), units, now=4000, state=out.state, delay_remaining=DELAY - 3000)
    assert not lost & set(owners(again))
    assert again.delay_ms == DELAY - 3000 and lost_in_state(again.state) == lost


def test_departed_worker_returns_inside_delay_gets_its_units_back() -> None:
    a, units, members, out = departure()
    lost = units_of(members[2].target)
    back = run(a, [*follow(out, members[:2]), member("w2")], units, now=5000, state=out.state,
               delay_remaining=DELAY - 4000)
    got = {m.member_id: units_of(m) for m in back.members}
    assert got == {m.member_id: units_of(m.target) for m in members}  # no movement at all
    assert got["w2"] == lost
    assert back.delay_ms == 0 and lost_in_state(back.state) == set()


def test_departed_static_worker_returns_with_a_new_member_id_by_instance_id() -> None:
    a = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=DELAY)
    units = {"a": 5, "b": 5}
    members = [member("w0", iid="i0"), member("w1", iid="i1"), member("w2", iid="i2")]
    members = follow(run(a, members, units), members)
    out = run(a, members[:2], units, now=10, departed=[DepartedInput("w2", "i2", members[2].target)])
    back = run(a, [*follow(out, members[:2]), member("w2-new", iid="i2")], units, now=20, state=out.state)
    assert units_of(unit_set(back, "w2-new")) == units_of(members[2].target)
    assert back.delay_ms == 0


def test_departed_worker_returning_in_the_same_prepare_keeps_its_units() -> None:
    # fenced and rejoined (same member id, empty target) before any computation ran
    a = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=DELAY)
    units = {"a": 9}
    members = steady(a, 3, units)
    out = run(a, [*members[:2], member("w2")], units, departed=[DepartedInput("w2", None, members[2].target)])
    assert units_of(unit_set(out, "w2")) == units_of(members[2].target)
    assert out.delay_ms == 0


def test_delay_expiry_reassigns_lost_units() -> None:
    a, units, members, out = departure()
    lost = units_of(members[2].target)
    later = follow(out, members[:2])
    expired = run(a, later, units, now=1000 + DELAY, state=out.state)  # the timer fired: no delay running
    got = owners(expired)
    assert set(got) == all_units(units)
    for m in later:  # the survivors keep theirs and share the lost units
        assert units_of(m.target) <= units_of(unit_set(expired, m.member_id))
    assert_balanced(expired)
    assert expired.delay_ms == 0 and lost_in_state(expired.state) == set()
    assert {got[u] for u in lost} == {"w0", "w1"}


def test_delay_expiry_gives_lost_units_to_the_worker_that_joined_meanwhile() -> None:
    a, units, members, out = departure()
    lost = units_of(members[2].target)
    joined = run(a, [*follow(out, members[:2]), member("w3")], units, now=2000, state=out.state,
                 delay_remaining=DELAY - 1000)
    assert not lost & set(owners(joined)) and joined.delay_ms == DELAY - 1000
    assert_balanced(joined)
    expired = run(a, follow(joined, [*members[:2], member("w3")]), units, now=1000 + DELAY, state=joined.state)
    assert set(owners(expired)) == all_units(units)
    assert_balanced(expired)
    for m in joined.members:  # everyone at or under quota: nobody loses anything, the lost units fill them up
        assert units_of(m) <= units_of(unit_set(expired, m.member_id))
    assert counts(expired)["w3"] == (1, 4) and counts(joined)["w3"] == (0, 2)


def test_delay_zero_reassigns_at_once() -> None:
    _, units, members, out = departure(delay=0)
    assert set(owners(out)) == all_units(units)
    assert out.delay_ms == 0 and lost_in_state(out.state) == set()
    assert_balanced(out)


def test_delay_zero_releases_units_another_worker_held_back() -> None:
    _, units, members, out = departure()
    zero = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=0)
    again = run(zero, follow(out, members[:2]), units, now=2000, state=out.state, delay_remaining=DELAY - 1000)
    assert set(owners(again)) == all_units(units) and again.delay_ms == 0


def test_deadline_follows_the_coordinators_clock() -> None:
    # the next computing worker's clock is 5 s behind: when the coordinator's timer fires (delay_remaining 0), its
    # now_ms is still before the stored deadline, yet the units go
    a, units, members, out = departure()
    skewed = run(a, follow(out, members[:2]), units, computing="w1", now=1000 + DELAY - 5000, state=out.state,
                 delay_remaining=0)
    assert set(owners(skewed)) == all_units(units) and skewed.delay_ms == 0
    # 5 s ahead, 3 s into the delay: 7 s remain, not 2 s
    ahead = run(a, follow(out, members[:2]), units, computing="w1", now=1000 + 3000 + 5000, state=out.state,
                delay_remaining=DELAY - 3000)
    assert ahead.delay_ms == DELAY - 3000


def test_lost_units_of_a_deleted_connector_are_forgotten() -> None:
    a, units, members, out = departure()
    lost_conns = {c for c, _ in units_of(members[2].target)}
    remaining = {c: n for c, n in units.items() if c not in lost_conns}
    again = run(a, follow(out, members[:2]), remaining, now=2000, state=out.state, delay_remaining=DELAY - 1000)
    assert set(owners(again)) == all_units(remaining)
    assert again.delay_ms == 0 and lost_in_state(again.state) == set()


def test_unreadable_state_counts_as_empty() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 3}
    for state in (b"", b"\xff\xfe", b"[1,2]", b'{"v": 99}', b'{"v":1,"lost":[{"member":3}]}', b"[" * 100_000):
        out = run(a, [member("w0")], units, state=state, delay_remaining=5)
        assert set(owners(out)) == all_units(units) and out.delay_ms == 0


# ---- config, leader, metadata ---------------------------------------------------------------------------------------


def test_config_mismatch() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 2}
    members = [member("w0", offset=3), member("w1", offset=7)]
    out = run(a, members, units, computing="w0", state=b"opaque")
    assert (out.error, out.members, out.delay_ms, out.state) == (CONFIG_MISMATCH, [], 0, b"opaque")
    fresh = run(a, members, units, computing="w0")
    assert fresh.error == CONFIG_MISMATCH and json.loads(fresh.state)["lost"] == []
    ok = run(a, members, units, computing="w1")
    assert ok.error == 0 and set(owners(ok)) == all_units(units)


def test_leader_kept_while_member() -> None:
    a = IncrementalCooperativeAssignor()
    units = {"a": 4}
    members = [member("w0", offset=4), member("w1", offset=9), member("w2", offset=9)]
    first = run(a, members, units, computing="w1")
    md = AssignmentMetadata.decode(first.members[0].metadata)
    assert md == AssignmentMetadata("w1", "http://w1:8083", 9, 2)
    assert all(m.metadata == first.members[0].metadata for m in first.members)
    members = follow(first, members)
    second = run(a, [*members, member("w3", offset=9)], units, computing="w2")
    assert AssignmentMetadata.decode(second.members[3].metadata).leader == "w1"
    third = run(a, [members[0], members[2]], units, computing="w2")  # w1 gone: the computing worker leads
    assert AssignmentMetadata.decode(third.members[0].metadata) == AssignmentMetadata("w2", "http://w2:8083", 9, 2)


def test_metadata_v1_has_no_config_offset() -> None:
    out = run(IncrementalCooperativeAssignor(), [member("w0", offset=42)], {"a": 1}, version=1)
    m = out.members[0]
    assert m.version == 1
    assert "config_offset" not in json.loads(m.metadata)
    assert AssignmentMetadata.decode(m.metadata) == AssignmentMetadata("w0", "http://w0:8083", -1, 1)
    v2 = run(IncrementalCooperativeAssignor(), [member("w0", offset=42)], {"a": 1}, version=2).members[0]
    assert AssignmentMetadata.decode(v2.metadata).config_offset == 42 and v2.version == 2


def test_metadata_roundtrip_and_tolerant_decoding() -> None:
    wm = WorkerMetadata("http://h:1", 17)
    assert WorkerMetadata.decode(wm.encode()) == wm
    for junk in (b"", b"\x00\x01", b"null", b"[]", b'{"url": 5, "config_offset": "x"}'):
        assert WorkerMetadata.decode(junk) == WorkerMetadata("", -1)
    am = AssignmentMetadata("w", "u", 3, 2)
    assert AssignmentMetadata.decode(am.encode()) == am
    for junk in (b"", b"garbage", b"{}", b'{"leader": 1}'):
        assert AssignmentMetadata.decode(junk) is None


def test_computing_worker_must_be_a_member() -> None:
    with pytest.raises(ValueError, match="not among the members"):
        run(IncrementalCooperativeAssignor(), [member("w0")], {"a": 1}, computing="nobody")


# ---- inputs -----------------------------------------------------------------------------------------------------


def test_wire_objects_accepted_as_input() -> None:
    cat, ct = (wire.ConnectGroupPrepareAssignmentResponseConnectorsAndTasks,
               wire.ConnectGroupPrepareAssignmentResponseConnectorTasks)
    target = cat(connectors=["a"], tasks=[ct(connector="a", task_ids=[0, 1]), ct(connector="gone", task_ids=[0])])
    members = [MemberInput("w0", None, meta("w0"), target), member("w1")]
    dep = wire.ConnectGroupPrepareAssignmentResponseDepartedMember(member_id="w9", instance_id=None,
                                                                   target=cat(connectors=[], tasks=[]))
    out = run(IncrementalCooperativeAssignor(), members, {"a": 4}, departed=[dep])
    assert set(owners(out)) == all_units({"a": 4})
    assert {("a", -1), ("a", 0)} <= units_of(out.members[0])


def test_duplicate_claims_first_member_keeps_the_unit() -> None:
    units = {"a": 2}
    both = UnitSet(["a"], [ConnectorTasks("a", [0, 1])])
    out = run(IncrementalCooperativeAssignor(), [member("w0", both), member("w1", both)], units)
    got = owners(out)
    assert got[("a", -1)] == "w0" and set(got) == all_units(units)
    assert_balanced(out)


def test_deterministic() -> None:
    a = IncrementalCooperativeAssignor()
    rng = random.Random(7)
    units = {f"c{i}": rng.randrange(0, 20) for i in range(12)}
    members = steady(a, 5, units)
    inp = [*members[1:], member("new")]
    out1 = run(a, inp, units, computing="w1", departed=[DepartedInput("w0", None, members[0].target)], now=5)
    out2 = run(a, inp, units, computing="w1", departed=[DepartedInput("w0", None, members[0].target)], now=5)
    assert out1 == out2
    shuffled = dict(sorted(units.items(), key=lambda kv: rng.random()))
    out3 = run(a, inp, shuffled, computing="w1", departed=[DepartedInput("w0", None, members[0].target)], now=5)
    assert out3 == out1


def test_state_is_small() -> None:
    a = IncrementalCooperativeAssignor()
    units = {f"conn{i:04d}": 100 for i in range(1000)}
    members = steady(a, 100, units)
    gone = members[37]
    out = run(a, members[:37] + members[38:], units, now=1, departed=[DepartedInput("w37", None, gone.target)])
    assert lost_in_state(out.state) == units_of(gone.target)
    assert len(out.state) < 600, out.state  # its 10 connectors and 1,000 tasks, as ranges
    settled = run(a, follow(out, members[:37] + members[38:]), units, now=2, state=out.state,
                  delay_remaining=out.delay_ms - 1)
    assert settled.state == out.state  # no assignment ever enters the state
    assert len(run(a, members, units).state) < 30  # nothing lost: nothing but the version


# ---- properties -------------------------------------------------------------------------------------------------------

unit_maps = st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 12), max_size=6)


@settings(max_examples=200)
@given(st.data())
def test_random_histories_keep_the_invariants(data: st.DataObject) -> None:
    """Random unit sets, member counts and histories (joins, departures, returns by member or instance id, unit set
    changes, time passing). Each output: no unit twice; every unit not held back assigned, held-back ones exactly
    those in the state and only units a departed worker held; floor/ceil balance of connectors and of tasks; a
    member at or under its quota loses nothing (one above it gains nothing); the same input gives the same output."""
    delay = data.draw(st.sampled_from([0, 1000]), label="delay")
    a = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=delay)
    units = data.draw(unit_maps, label="units")
    serial = iter(range(1000))
    members = [member(f"m{next(serial)}", iid=f"i{k}" if data.draw(st.booleans()) else None)
               for k in range(data.draw(st.integers(1, 6), label="members"))]
    state: bytes | None = None
    now, delay_remaining = 0, -1
    departed: list[DepartedInput] = []
    gone: list[DepartedInput] = []  # every departure so far, for returns
    ever_departed: set[Unit] = set()
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        step = data.draw(st.sampled_from(["join", "leave", "return", "units", "time", "time", "none"]), label="step")
        if step == "join":
            members.append(member(f"m{next(serial)}"))
        elif step == "leave" and len(members) > 1:
            m = members.pop(data.draw(st.integers(0, len(members) - 1)))
            d = DepartedInput(m.member_id, m.instance_id, m.target)
            departed.append(d)
            gone.append(d)
            ever_departed |= units_of(m.target)
        elif step == "return" and gone:
            d = data.draw(st.sampled_from(gone))
            ids = {m.member_id for m in members}
            iids = {m.instance_id for m in members}
            if d.instance_id is not None and d.instance_id not in iids:
                members.append(member(f"m{next(serial)}", iid=d.instance_id))  # a new process, same instance
            elif d.member_id not in ids:
                members.append(member(d.member_id, iid=d.instance_id if d.instance_id not in iids else None))
        elif step == "units":
            units = data.draw(unit_maps, label="new units")
        elif step == "time":
            dt = data.draw(st.integers(0, 1500))
            now += dt
            if delay_remaining >= 0:
                delay_remaining = -1 if dt >= delay_remaining else delay_remaining - dt  # the timer fired
        computing = data.draw(st.sampled_from(members)).member_id
        inp = AssignmentInput(computing, 2, now, dict(units), list(members), list(departed), state, delay_remaining)
        out = a.assign(inp)
        assert out == a.assign(inp)
        assert out.error == 0 and [m.member_id for m in out.members] == [m.member_id for m in members]
        got = owners(out)
        held = all_units(units) - set(got)
        assert set(got) <= all_units(units)
        assert held == lost_in_state(out.state)
        assert held <= ever_departed
        assert (out.delay_ms > 0) == bool(held) and out.delay_ms <= delay
        assert_balanced(out)
        for m in members:
            old = units_of(m.target) & all_units(units)
            new = units_of(unit_set(out, m.member_id))
            for kind in (lambda u: u[1] < 0, lambda u: u[1] >= 0):  # connectors, then tasks
                o = {u for u in old if kind(u)}
                w = {u for u in new if kind(u)}
                if len(o) <= len(w):
                    assert o <= w, (m.member_id, o - w)
                else:
                    assert w <= o, (m.member_id, w - o)
        members = follow(out, members)
        state, departed = out.state, []
        delay_remaining = out.delay_ms if out.delay_ms > 0 else -1
