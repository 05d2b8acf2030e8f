"""The clock and the coordinator's one deadline structure.

Every timeout (session, join phase, initial delay, pending sync, pending member) is a key in one compiled
deadline heap. A key's action (called with the key) is set when the timer is created; re-arming it (a
heartbeat) only moves the deadline, without allocating. The clock is injected: tests drive a ManualClock and never sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ._core._members import TimersCore, monotonic_ms


class Clock:
    # Monotonic milliseconds: what every deadline is measured in (time.monotonic_ns() // 1_000_000, compiled: it
    # is read on every heartbeat).
    now_ms = staticmethod(monotonic_ms)

    def wall_ms(self) -> int:
        """Wall-clock milliseconds since the epoch: what an operator reads in a group's history."""
        return time.time_ns() // 1_000_000


class ManualClock(Clock):
    def __init__(self, start_ms: int = 0) -> None:
        self.ms = start_ms

    # Clock.now_ms is the compiled function itself (a staticmethod: no Python frame on the hot path); this bound
    # method is called the same way, clock.now_ms(), which the checker cannot match with a staticmethod
    def now_ms(self) -> int:  # type: ignore[override]
        return self.ms

    def wall_ms(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


class Timers(TimersCore):
    """The coordinator's timers: `heap`, `clock`, `actions` (by key) and `arm` are compiled (TimersCore), so that
    a compiled heartbeat arms a session without a Python call."""

    def new(self, action: Callable[[int], None] | None = None) -> int:
        key = self.heap.new_key()
        if key == len(self.actions):
            self.actions.append(action)
        else:
            self.actions[key] = action
        return key

    def release(self, key: int) -> None:
        self.heap.release_key(key)
        self.actions[key] = None

    def cancel(self, key: int) -> None:
        self.heap.cancel(key)

    def is_armed(self, key: int) -> bool:
        return self.heap.is_scheduled(key)

    def next_deadline(self) -> int | None:
        return self.heap.next_deadline()

    def fire_due(self) -> int:
        """Run every action whose deadline has passed, earliest first; returns how many ran."""
        now = self.clock.now_ms()
        fired = 0
        while (key := self.heap.pop_due(now)) >= 0:
            action = self.actions[key]
            fired += 1
            if action is not None:
                action(key)
        return fired
