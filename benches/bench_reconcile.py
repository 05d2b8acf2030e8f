"""KIP-848 reconciliation step speed: the compiled `reconcile` (validation, kernel, result) against the pure-Python
model (tests/support/reconcile_model.py, sets in and out) in the same run.

The group's catalogue is 1,000 topics × 100 partitions (100,000 partitions), 90% of them held by other members in the
epoch table; the member holds 10 or 1,000 partitions spread over the topics. Two heartbeats:

* reconciling: a STABLE member gets a new target (epoch 11) that keeps 80% of its partitions and brings 20% new
  ones (half free, half still held elsewhere); it reports everything it owns, so it must revoke first
  (→ UNREVOKED_PARTITIONS).
* no-op: an UNRELEASED_PARTITIONS member at the target epoch still waiting for partitions held elsewhere: the full
  computation runs and the member comes back unchanged (what most heartbeats of a reconciling member do).

The model gets its inputs in its own form (frozensets, a list for the table), so only the step itself is compared.
The session summary (benches/conftest.py) prints the medians and the ratio. Target (reported, not asserted): a reconciling step with 10
partitions under 5 us. Run: `python -m pytest benches/bench_reconcile.py -q -p no:cacheprovider`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kcoord._core import _assign
from tests.support import reconcile_model as model

TOPICS, PER_TOPIC = 1_000, 100
N = TOPICS * PER_TOPIC
TOPIC_START = np.arange(0, N + 1, PER_TOPIC, dtype=np.int64)
SIZES = (10, 1_000)
TARGET_US = 5.0


class Case:
    """One member's heartbeat, in the kernel's form (arrays) and the model's (frozensets)."""

    def __init__(self, kind: str, k: int):
        rng = np.random.default_rng(848 + k)
        picks = rng.choice(N, size=2 * k, replace=False).astype(np.int32)
        mine, other = np.sort(picks[:k]), np.sort(picks[k:])
        keep = np.sort(rng.choice(mine, size=k - k // 5, replace=False))
        fresh = other[: k // 5]
        held_elsewhere = np.setdiff1d(np.arange(N, dtype=np.int32), np.concatenate([mine, fresh[: len(fresh) // 2]]))
        held_elsewhere = held_elsewhere[rng.random(held_elsewhere.shape[0]) < 0.9]
        self.table = _assign.PartitionEpochs(TOPIC_START)
        self.table.add(held_elsewhere, 9)
        self.table.add(mine, 10)
        empty = np.zeros(0, dtype=np.int32)
        if kind == "reconciling":
            self.state, self.epoch, self.previous, self.target_epoch = model.STABLE, 10, 9, 11
            self.assigned, self.target = mine, np.union1d(keep, fresh).astype(np.int32)
            self.expect = model.UNREVOKED_PARTITIONS
        else:
            # waiting for `fresh`, half of which is still held elsewhere
            self.state, self.epoch, self.previous, self.target_epoch = model.UNRELEASED_PARTITIONS, 11, 11, 11
            self.assigned = mine
            self.target = np.union1d(mine, fresh[len(fresh) // 2 :]).astype(np.int32)
            self.table.add(fresh[len(fresh) // 2 :][~np.isin(fresh[len(fresh) // 2 :], held_elsewhere)], 9)
            self.expect = model.UNRELEASED_PARTITIONS
        self.pending = empty
        self.owned = mine
        self.topics = np.unique(np.concatenate([self.assigned, self.target]) // PER_TOPIC).astype(np.int32)
        self.m = model.Member(self.state, self.epoch, self.previous, frozenset(self.assigned.tolist()))
        self.m_target = frozenset(self.target.tolist())
        self.m_topics = frozenset(self.topics.tolist())
        self.m_owned = frozenset(self.owned.tolist())
        self.m_epochs = self.table.to_numpy().tolist()

    def run_kernel(self) -> Any:
        return _assign.reconcile(self.table, self.state, self.epoch, self.previous, self.target_epoch, self.assigned,
                                 self.pending, self.target, self.topics, self.owned, False)

    def run_model(self) -> model.Step:
        return model.reconcile(self.m, self.target_epoch, self.m_target, self.m_topics, TOPIC_START, self.m_epochs,
                               self.m_owned)


CASES: dict[tuple[str, int], Case] = {}


def case(kind: str, k: int) -> Case:
    if (kind, k) not in CASES:
        CASES[(kind, k)] = Case(kind, k)
    return CASES[(kind, k)]


@pytest.mark.benchmark(group="reconcile", max_time=0.5)
@pytest.mark.parametrize("impl", ["kcoord", "model"])
@pytest.mark.parametrize("k", SIZES)
@pytest.mark.parametrize("kind", ["reconciling", "no-op"])
def test_reconcile_step(benchmark: Any, kind: str, k: int, impl: str) -> None:
    c = case(kind, k)
    ours, theirs = c.run_kernel(), c.run_model()
    assert (ours.state, ours.changed) == (c.expect, kind == "reconciling")
    assert (theirs.member.state, theirs.member.assigned) == (ours.state, frozenset(ours.assigned.tolist()))
    benchmark.extra_info.update({"reconcile": kind, "partitions_per_member": k, "impl": impl})
    benchmark(c.run_kernel if impl == "kcoord" else c.run_model)
