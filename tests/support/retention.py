"""Offset retention's scenario, shared by the in-process tests (unit/test_retention.py) and the PostgreSQL ones
(cluster/test_retention_pg.py): a classic group on a harness with a short retention, whose offsets outlive it."""

from __future__ import annotations

from kcoord import errors as E
from kcoord import wire

from .harness import ClassicHarness, codes, commit

MINUTES = 2
RETENTION = MINUTES * 60_000
INTERVAL = 5_000


def subscription(*topics: str) -> bytes:
    """JoinGroup metadata of a consumer subscribed to `topics` (a version-prefixed ConsumerProtocolSubscription)."""
    return b"\x00\x00" + wire.ConsumerProtocolSubscription(topics=list(topics)).encode(0)


def harness(**config) -> ClassicHarness:
    return ClassicHarness(offsets_retention_minutes=MINUTES, offsets_retention_check_interval_ms=INTERVAL, **config)


def at(h, ms: int) -> None:
    """The clock at `ms` (absolute), without firing any timer: the members' sessions stay as they were."""
    h.clock.ms = ms


def empty_group_with_offsets(h: ClassicHarness) -> int:
    """A classic consumer group that commits t-0 and u-0, then loses its only member: returns when it became Empty."""
    ids = h.form("A", protocols=(("range", subscription("t")),))
    g = h.group()
    assert codes(commit(h, "g", gen=g.generation, member=ids["A"], iid="A",
                        parts=(("t", 0, 5, "", -1), ("u", 0, 7, "", -1)))) == [E.NONE, E.NONE]
    h.clock.ms += 60_000
    assert h.leave((ids["A"], "A")).error_code == E.NONE
    h.advance(1)  # the join phase left by the last member completes: Empty
    assert g.state.value == "Empty"
    return g.state_timestamp
