"""The timers' compiled part (TimersCore: arm, remaining_ms, the clock read in C) and the modern members' compiled
base (ModernMember): what the groups rely on when they arm a session through `timers.arm`."""

from __future__ import annotations

import gc
import time

import pytest

from kcoord._core._members import (
    ConnectGroupCore,
    ConnectMember,
    ConsumerGroupCore,
    ConsumerMember,
    ModernGroupCore,
    ModernMember,
    TimersCore,
    monotonic_ms,
)
from kcoord.timers import Clock, ManualClock, Timers


def test_arm_sets_the_deadline_from_a_manual_clock_and_remaining_ms_counts_down() -> None:
    clock = ManualClock(1_000)
    timers = Timers(clock)
    fired: list[int] = []
    k = timers.new(fired.append)
    timers.arm(k, 500)
    assert timers.heap.deadline_of(k) == 1_500 and timers.remaining_ms(k) == 500
    clock.advance(200)
    assert timers.remaining_ms(k) == 300
    timers.arm(k, 50)  # re-armed: moved, not duplicated
    assert timers.heap.deadline_of(k) == 1_250 and len(timers.heap) == 1
    clock.advance(60)
    assert timers.remaining_ms(k) == -10  # passed, not fired yet
    assert timers.fire_due() == 1 and fired == [k]
    with pytest.raises(KeyError):
        timers.remaining_ms(k)  # not armed any more


def test_arm_with_an_action_replaces_the_keys_action() -> None:
    clock = ManualClock(0)
    timers = Timers(clock)
    first: list[int] = []
    second: list[int] = []
    k = timers.new(first.append)
    timers.arm(k, 10, second.append)
    clock.advance(10)
    timers.fire_due()
    assert (first, second) == ([], [k])
    timers.arm(k, 10)  # no action given: the key keeps the one it has
    clock.advance(10)
    timers.fire_due()
    assert second == [k, k]


def test_the_real_clock_is_read_in_c_as_monotonic_ms_reads_it() -> None:
    timers = Timers(Clock())
    k = timers.new()
    before = time.monotonic_ns() // 1_000_000
    timers.arm(k, 1_000)
    after = time.monotonic_ns() // 1_000_000
    assert before + 1_000 <= timers.heap.deadline_of(k) <= after + 1_000
    assert before <= monotonic_ms() <= time.monotonic_ns() // 1_000_000 + 1
    assert 0 < timers.remaining_ms(k) <= 1_000


def test_a_clock_that_overrides_now_ms_is_called_not_the_monotonic_clock() -> None:
    class Late(Clock):
        def now_ms(self) -> int:  # type: ignore[override]
            return 7

    timers = Timers(Late())
    k = timers.new()
    timers.arm(k, 3)
    assert timers.heap.deadline_of(k) == 10 and timers.remaining_ms(k) == 3


def test_timers_is_the_compiled_core_with_its_python_api() -> None:
    clock = ManualClock(5)
    timers = Timers(clock)
    assert isinstance(timers, TimersCore) and timers.clock is clock and timers.actions == []
    k = timers.new()
    assert not timers.is_armed(k) and timers.next_deadline() is None
    timers.arm(k, 1)
    assert timers.is_armed(k) and timers.next_deadline() == 6
    timers.cancel(k)
    assert not timers.is_armed(k)
    timers.release(k)
    assert timers.heap.keys_in_use == 0


@pytest.mark.parametrize("cls", [ConsumerMember, ConnectMember])
def test_both_modern_members_share_one_base_and_stay_outside_the_cycle_collector(cls: type[ModernMember]) -> None:
    m = cls("m-1")
    assert isinstance(m, ModernMember)
    assert (m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.state, m.session_key,
            m.rebalance_armed_epoch, m.quiet_epoch, len(m.assigned), len(m.pending)) == ("m-1", "", "", -1, 0, -1, -1,
                                                                                           -1, 0, 0)
    assert not gc.is_tracked(m)  # no_gc, on the base as on the type (a member holds no reference back)
    assert repr(m) == f"{cls.__name__}('m-1', epoch=0, state=0, assigned=[], pending=[])"


def test_copy_as_carries_the_types_copied_fields_and_not_its_timers_or_cached_answer() -> None:
    c = ConsumerMember("a")
    c.instance_id, c.member_epoch, c.subscribed, c.rack_id = "i", 4, ("t",), "r1"
    c.session_key, c.quiet_epoch, c.quiet_response = 3, 4, object()
    d = c.copy_as("b")
    assert type(d) is ConsumerMember and d.member_id == "b"
    assert all(getattr(d, n) is getattr(c, n) for n in ConsumerMember.COPIED)
    assert (d.session_key, d.quiet_epoch, d.quiet_response) == (-1, -1, None)
    w = ConnectMember("w")
    w.joined, w.assignors, w.delivered = 9, (("ica", 1, 2, 0, 2, b""),), (2, b"x")
    x = w.copy_as("x")
    assert type(x) is ConnectMember and (x.member_id, x.joined, x.assignors, x.delivered) == (
        "x", 9, w.assignors, (2, b"x"))
    assert "joined" not in ConsumerMember.COPIED and "subscribed" not in ConnectMember.COPIED


def test_both_group_cores_share_one_compiled_base() -> None:
    assert issubclass(ConsumerGroupCore, ModernGroupCore) and issubclass(ConnectGroupCore, ModernGroupCore)
    core = ConnectGroupCore()
    core.init_core(Timers(ManualClock(0)), 45_000, 5_000, object)
    assert (core.heartbeat_interval_ms, core.assignor_version) == (5_000, -1)
