"""kcoord.timers and the compiled deadline heap under it (kcoord._core._members.DeadlineHeap): the heap against a
plain model (keyed timers replaced, never duplicated), and MemberTimers, per-member deadlines keyed by (member,
kind) over the coordinator's one deadline heap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord._core._members import DeadlineHeap
from kcoord.groups.base import MemberTimers
from kcoord.timers import ManualClock, Timers


def make() -> tuple[ManualClock, Timers, MemberTimers, list[tuple[str, str]]]:
    clock = ManualClock(1_000)
    timers = Timers(clock)
    fired: list[tuple[str, str]] = []
    return clock, timers, MemberTimers(timers, lambda m, k: fired.append((m, k))), fired


def test_each_member_kind_fires_its_own_expiry_in_deadline_order() -> None:
    clock, timers, mt, fired = make()
    mt.arm("a", "session", 300)
    mt.arm("a", "rebalance", 100)
    mt.arm("b", "session", 200)
    clock.advance(250)
    assert timers.fire_due() == 2
    assert fired == [("a", "rebalance"), ("b", "session")]
    assert mt.is_armed("a", "session") and not mt.is_armed("b", "session")


def test_rearming_moves_the_deadline_and_the_cached_key_is_the_fast_path() -> None:
    clock, timers, mt, fired = make()
    key = mt.arm("a", "session", 100)
    assert mt.key("a", "session") == key and len(mt) == 1
    clock.advance(90)
    timers.heap.schedule(key, clock.now_ms() + 100)  # what a heartbeat does with the key cached on its member
    clock.advance(90)
    assert timers.fire_due() == 0
    mt.arm("a", "session", 5)
    clock.advance(5)
    assert timers.fire_due() == 1 and fired == [("a", "session")]


def test_a_renamed_member_keeps_its_timers_and_the_old_id_has_none() -> None:
    clock, timers, mt, fired = make()
    key = mt.arm("old", "session", 100)
    mt.rename("old", "new", ("session", "pending"))
    assert mt.key("new", "session") == key and not mt.is_armed("old", "session")
    clock.advance(100)
    timers.fire_due()
    assert fired == [("new", "session")]


def test_released_and_cleared_keys_go_back_to_the_heap() -> None:
    clock, timers, mt, fired = make()
    a = mt.arm("a", "session", 100)
    mt.arm("b", "pending", 100)
    mt.release("a", "session")
    assert timers.heap.keys_in_use == 1 and not mt.is_armed("a", "session")
    assert mt.key("c", "session") == a  # the released key is reused
    mt.cancel("b", "pending")
    clock.advance(100)
    assert timers.fire_due() == 0 and fired == []
    mt.clear()
    assert timers.heap.keys_in_use == 0 and len(mt) == 0


def test_group_timers_are_the_groups_own_and_no_member_id_can_reach_them() -> None:
    """GroupTimers: a group's deadlines by kind (a connect group's compute lease and delay), apart from its
    members' (they were once member timers under the member id "")."""
    from kcoord.groups.base import GroupTimers

    clock, timers, mt, member_fired = make()
    fired: list[str] = []
    gt = GroupTimers(timers, fired.append)
    gt.arm("compute", 100)
    gt.arm("delay", 50)
    mt.arm("", "compute", 10)  # a member whose id is empty has its own timer, not the group's
    assert gt.is_armed("compute") and gt.key("compute") != mt.key("", "compute")
    clock.advance(60)
    assert timers.fire_due() == 2
    assert fired == ["delay"] and member_fired == [("", "compute")]
    gt.cancel("compute")
    clock.advance(100)
    assert timers.fire_due() == 0 and not gt.is_armed("compute")
    gt.arm("compute", 10)
    gt.clear()  # unloaded: its keys go back, nothing fires, and the group is let go
    clock.advance(20)
    assert timers.fire_due() == 0 and fired == ["delay"] and not gt.keys


# ---- the compiled deadline heap ------------------------------------------------------------------------------

ops = st.lists(st.tuples(st.sampled_from(["new", "schedule", "cancel", "pop", "release"]),
                         st.integers(0, 40), st.integers(0, 1000)), max_size=300)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_heap_matches_model(seq) -> None:
    heap = DeadlineHeap(capacity=4)
    keys: list[int] = []
    model: dict[int, int] = {}
    for op, i, t in seq:
        if op == "new" or not keys:
            k = heap.new_key()
            assert k not in keys
            keys.append(k)
        elif op == "schedule":
            k = keys[i % len(keys)]
            heap.schedule(k, t)
            model[k] = t
        elif op == "cancel":
            k = keys[i % len(keys)]
            assert heap.cancel(k) == (k in model)
            model.pop(k, None)
        elif op == "release":
            k = keys.pop(i % len(keys))
            heap.release_key(k)
            model.pop(k, None)
        else:
            due = sorted((d, k) for k, d in model.items() if d <= t)
            assert heap.pop_expired(t) == [k for _, k in due]
            for _, k in due:
                del model[k]
        assert len(heap) == len(model)
        assert heap.next_deadline() == (min(model.values()) if model else None)
        assert heap.keys_in_use == len(keys)


def test_rescheduling_moves_instead_of_duplicating() -> None:
    heap = DeadlineHeap()
    k = heap.new_key()
    for d in (50, 10, 99, 30):
        heap.schedule(k, d)
    assert len(heap) == 1 and heap.deadline_of(k) == 30
    assert heap.pop_expired(100) == [k] and heap.pop_expired(1000) == []
