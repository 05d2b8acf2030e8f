"""Randomized model test: thousands of random operation sequences against one classic group.

Clients (1-50, static and dynamic) join, rejoin, change protocols, sync, heartbeat, leave, get removed in
batches by instance id, restart with a new member id (static replacement), and the clock jumps. After every
step the invariants (Model.check, in tests/support/classic_model.py) are checked; at the end every client stops and
time runs out, and every request that was ever parked must have been answered exactly once (a second answer raises
inside Reply).
"""

from __future__ import annotations

import random

import pytest

from kcoord import errors as E
from kcoord.groups.classic import State

from ..support.classic_model import Model
from ..support.harness import REBALANCE as REBALANCE_MS
from ..support.harness import ClassicHarness
from ..support.snapshots import check_rebuild

SEQUENCES = 2_000
REBUILD_EVERY = 10  # steps between two comparisons of the live group with one rebuilt from its records


@pytest.mark.parametrize("block", range(8))
def test_random_sequences_keep_invariants(block: int) -> None:
    for seq in range(block * SEQUENCES // 8, (block + 1) * SEQUENCES // 8):
        rng = random.Random(seq)
        model = Model(rng)
        try:
            due = REBUILD_EVERY
            for i in range(rng.randint(10, 80)):
                model.step()
                model.check()
                due -= 1
                if due <= 0 and check_rebuild(model.h.c, model.h.records, f"step {i}"):
                    due = REBUILD_EVERY  # else at the next step the group is between generations no more
            model.finish()
            model.check()
            check_rebuild(model.h.c, model.h.records, "the end")
        except AssertionError as e:
            raise AssertionError(f"sequence seed {seq}: {e}") from e


def test_a_classic_group_is_compared_with_its_rebuild_only_once_settled() -> None:
    """A classic group's record is written when a generation settles (Kafka's), so check_rebuild skips the group
    while it rebalances, and compares it again once it is Empty or Stable. A group that holds nothing yet (made by
    a KIP-394 first join) has no record and stands for no group."""
    h = ClassicHarness()
    ids = h.form(None, None)
    assert check_rebuild(h.c, h.records) == 1  # Stable: the record is the live group
    h.leave((ids["d1"], None))
    assert h.group().state == State.PREPARING_REBALANCE
    assert check_rebuild(h.c, h.records) == 0  # the record still holds d1: not compared
    h.advance(REBALANCE_MS)  # d0 does not rejoin: the join phase ends without anyone, Empty at the next generation
    assert h.group().state == State.EMPTY and check_rebuild(h.c, h.records) == 1
    assert h.join(gid="new").response.error_code == E.MEMBER_ID_REQUIRED  # "new": Empty, generation 0, no record
    assert check_rebuild(h.c, h.records) == 1
