"""Garbage collection for a server whose state keeps growing: what survives a full collection is frozen.

CPython's cyclic collector scans, in a full (generation 2) collection, every tracked container it has not been
told to leave alone. Most of kcoord's memory is long-lived state (groups, members, timers, committed offsets:
5 tracked objects for an empty classic group), so before this policy a full collection's pause grew with the
state: 270-290 ms at 100,000 groups (600,000 tracked objects then) on CPython 3.11, one each time the state had
grown by a quarter, and a client making junk groups held every other client's heartbeat up to half a second
(issue 30).

`install()` adds a `gc.callbacks` hook: after every full collection, `gc.freeze()` moves what survived it to the
permanent generation, which no collection scans. The next full collection then scans only what was made since
the last one (CPython runs one every eleventh collection of generation 1 once what it counts as long-lived is
what the last full collection kept: about 40,000 objects, some 20 ms), so its pause is bounded by the allocation
between two full collections, not by the state. install() freezes what start-up made (as the server
always did), then collects the now empty generations, so that CPython's count of long-lived objects, which
spaces full collections, starts from nothing.

The cost: a frozen object is still freed by reference counting when its last reference goes, but never as part
of a garbage cycle. So what kcoord makes and later drops while serving (groups and their members, timers, parked
replies, connections) must be freed by reference counting alone, and tests/server/test_gc_policy.py churns each of them
and fails on any cyclic garbage. There is no periodic unfreeze: a full collection of everything is the pause the
policy exists to avoid (about 3 ms per 1,000 groups), and the known cycles are broken where they are made; the
frozen count is a metric (kcoord_gc_frozen_objects), so a leak shows as a count that grows while the groups and
connections do not. uninstall() (the last server in the process closing) unfreezes, so an embedding process or a
test gets its collector back as it was.
"""

from __future__ import annotations

import gc

_holders: set[int] = set()  # id() of each server that installed the policy and has not uninstalled it


def _after_collection(phase: str, info: dict) -> None:
    # At the end of a full collection the younger generations are empty: what is frozen is what survived it
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


def installed() -> bool:
    return _after_collection in gc.callbacks


def install(holder: object) -> None:
    """Freeze what is alive now and, from now on, what survives each full collection, until every holder that
    installed the policy has uninstalled it."""
    first = not _holders
    _holders.add(id(holder))
    if not first:
        return
    if not installed():
        gc.callbacks.append(_after_collection)
    gc.freeze()  # what start-up made lives as long as the server
    gc.collect()  # scans nothing; CPython's long-lived count (which spaces full collections) starts from 0


def uninstall(holder: object) -> None:
    """`holder` no longer needs the policy; the last one out removes the hook and unfreezes."""
    if id(holder) not in _holders:
        return
    _holders.discard(id(holder))
    if _holders:
        return
    if installed():
        gc.callbacks.remove(_after_collection)
    gc.unfreeze()


def release_transport(transport: object) -> None:
    """A connection is lost: drop the cycle asyncio's own selector transport keeps (its read callback,
    `_read_ready_cb`, is a bound method of itself), so the transport is freed by reference counting even when it
    was frozen. uvloop's transports hold no such cycle; on another transport this does nothing."""
    if getattr(transport, "_read_ready_cb", None) is not None:
        transport._read_ready_cb = None  # type: ignore[attr-defined]
