"""Waiting for what a server, a client or a cluster does in its own time: poll until a check holds. A timeout only
bounds a wait that would otherwise hang; it is never a speed check (those are in benches/)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def poll(check: Callable[[], tuple[bool, T]], timeout: float, interval: float = 0.05) -> tuple[bool, T]:
    """check() -> (done, observed), every `interval` seconds until done or `timeout` seconds have passed; the last
    (done, observed)."""
    deadline = time.monotonic() + timeout
    while True:
        done, observed = check()
        if done or time.monotonic() > deadline:
            return done, observed
        time.sleep(interval)


def poll_value(value: Callable[[], T], timeout: float, interval: float = 0.05) -> tuple[bool, T]:
    """`poll` of a value that is done when it is truthy."""
    def check() -> tuple[bool, T]:
        v = value()
        return bool(v), v
    return poll(check, timeout, interval)


def wait_until(check: Callable[[], tuple[bool, T]], timeout: float, what: str, *, interval: float = 0.05,
               show: Callable[[T], str] = str, more: Callable[[], str] | None = None) -> T:
    """check() -> (done, observed) until done; the last observation. After `timeout` seconds the test fails, naming
    `what`, the last observation (as `show` writes it) and `more()` (a server's log, say)."""
    done, observed = poll(check, timeout, interval)
    if not done:
        pytest.fail(f"{what}: not reached within {timeout}s; last observed:\n{show(observed)}"
                    f"{more() if more is not None else ''}")
    return observed


def wait_for(value: Callable[[], T], what: str, timeout: float = 30.0, *, interval: float = 0.05) -> T:
    """value() until it is truthy; that value. After `timeout` seconds the test fails, naming `what`."""
    done, v = poll_value(value, timeout, interval)
    if not done:
        pytest.fail(f"timed out waiting for {what}")
    return v
