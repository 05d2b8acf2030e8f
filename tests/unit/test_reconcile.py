"""KIP-848 reconciliation (Kafka's CurrentAssignmentBuilder): the compiled step against Kafka's answers and the model.

* One test per transition, named after the cases of Kafka's CurrentAssignmentBuilderTest (trunk) with the same
  members, targets and epochs; each runs the compiled step and the pure-Python model (reconcile_model.py), checks
  that they agree, and checks Kafka's answer. The catalogue is Kafka's: topic1 and topic2 with 10 partitions each
  (global ids 0-9 and 10-19). Kafka's regular-expression cases become subscriptions (the caller resolves a regex
  to topic ids; an unresolved one matches nothing).
* A worked example: two members sharing one epoch table, one revoking what the other is to get.
* Hypothesis: the compiled step equals the model on arbitrary inputs (every state, flag and ownership), and on
  inputs a real group can produce the step keeps Kafka's invariants.
* The partition epoch table (Kafka's addPartitionEpochs / removePartitionEpochs) and the boundary's validation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kcoord._core import _assign
from kcoord._core._assign import AssignmentError, PartitionEpochError, PartitionEpochs

from ..support import reconcile_model as model
from ..support.quick import examples
from ..support.reconcile_model import (
    FENCED_MEMBER_EPOCH,
    STABLE,
    UNKNOWN,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Member,
    Step,
)

TOPIC_START = (0, 10, 20)  # Kafka's tests: topic1 and topic2, 10 partitions each
T1, T2 = 0, 1
BOTH = frozenset({T1, T2})


def tp(t1: Iterable[int] = (), t2: Iterable[int] = ()) -> frozenset[int]:
    """Partitions of topic1 and topic2 as global ids: tp(t1=[1, 2], t2=[4]) → {1, 2, 14}."""
    return frozenset(t1) | frozenset(10 + p for p in t2)


def ids(parts: Iterable[int]) -> np.ndarray:
    return np.array(sorted(parts), dtype=np.int32)


def table_of(topic_start, values: list[int]) -> PartitionEpochs:
    table = PartitionEpochs(np.array(topic_start, dtype=np.int64))
    for epoch in sorted(set(values) - {-1}):
        table.add(ids(p for p, e in enumerate(values) if e == epoch), epoch)
    return table


def kernel_step(table: PartitionEpochs, m: Member, target_epoch: int, target, subscribed, owned,
                subscription_changed: bool) -> Step:
    """The compiled step, checked for well-formed output, as a model Step."""
    assigned, pending = ids(m.assigned), ids(m.pending_revocation)
    res = _assign.reconcile(table, m.state, m.member_epoch, m.previous_member_epoch, target_epoch, assigned,
                            pending, ids(target), ids(subscribed), None if owned is None else ids(owned),
                            subscription_changed)
    for arr in (res.assigned, res.pending_revocation):
        assert arr.dtype == np.int32 and arr.ndim == 1
        assert np.all(np.diff(arr) > 0), f"output not ascending and duplicate-free: {arr}"
    new = Member(res.state, res.member_epoch, res.previous_member_epoch, frozenset(res.assigned.tolist()),
                 frozenset(res.pending_revocation.tolist()))
    assert res.assigned_changed == (new.assigned != m.assigned)
    assert res.changed == (new != m)
    if not res.assigned_changed:
        assert res.assigned is assigned, "an unchanged assignment is handed back, not copied"
    if new.pending_revocation == m.pending_revocation:
        assert res.pending_revocation is pending
    return Step(new, res.error)


def step(m: Member, target_epoch: int, target, *, subscribed=BOTH, epoch_of: Callable[[int, int], int] = lambda t, p: -1,
         owned=None, subscription_changed=False) -> Step:
    """Runs the compiled step and the model on one of Kafka's cases; they must agree. epoch_of(topic, partition)."""
    values = [epoch_of(t, p - TOPIC_START[t]) for t in range(len(TOPIC_START) - 1)
              for p in range(TOPIC_START[t], TOPIC_START[t + 1])]
    ours = kernel_step(table_of(TOPIC_START, values), m, target_epoch, target, subscribed, owned,
                       subscription_changed)
    theirs = model.reconcile(m, target_epoch, frozenset(target), subscribed, TOPIC_START, values, owned,
                             subscription_changed)
    assert ours == theirs, f"kernel {ours} != model {theirs}"
    return ours


def member(state, epoch, previous, assigned=frozenset(), pending=frozenset()) -> Member:
    return Member(state, epoch, previous, frozenset(assigned), frozenset(pending))


def test_the_compiled_step_is_loaded():
    assert _assign.__file__.endswith((".so", ".pyd")), _assign.__file__
    assert type(_assign.reconcile).__name__ in ("cython_function_or_method", "builtin_function_or_method")


# --- Kafka's CurrentAssignmentBuilderTest, case by case ----------------------------------------------------------


def test_stable_to_stable():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 11, tp([1, 2, 3], [4, 5, 6]), epoch_of=lambda t, p: 10)
    assert got == Step(member(STABLE, 11, 10, tp([1, 2, 3], [4, 5, 6])))


def test_stable_to_stable_with_new_partitions():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 11, tp([1, 2, 3, 4], [4, 5, 6, 7]))
    assert got == Step(member(STABLE, 11, 10, tp([1, 2, 3, 4], [4, 5, 6, 7])))


def test_stable_to_unrevoked_partitions():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 11, tp([2, 3, 4], [5, 6, 7]))
    # revoke first: 4 and 7 are free, but they wait until 1 and 4 are given up; the epoch does not advance
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([1], [4])))


def test_stable_to_unreleased_partitions():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 11, tp([1, 2, 3, 4], [4, 5, 6, 7]), epoch_of=lambda t, p: 10)
    assert got == Step(member(UNRELEASED_PARTITIONS, 11, 10, tp([1, 2, 3], [4, 5, 6])))


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 11, tp([1, 2, 3], [4, 5, 7]), epoch_of=lambda t, p: 10 if t == T2 else -1, owned=frozenset())
    # topic2-6 is gone from the target but the client no longer reports it: dropped at once, no revocation
    assert got == Step(member(UNRELEASED_PARTITIONS, 11, 10, tp([1, 2, 3], [4, 5])))


def test_unrevoked_partitions_to_stable():
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([1], [4]))
    got = step(m, 11, tp([2, 3], [5, 6]), owned=tp([2, 3], [5, 6]))
    assert got == Step(member(STABLE, 11, 10, tp([2, 3], [5, 6])))


def test_remains_in_unrevoked_partitions():
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([1], [4]))
    # a null owned list, or one that still holds topic1-1 or topic2-4: nothing moves
    for owned in (None, tp([1, 2, 3], [5, 6]), tp([2, 3], [4, 5, 6])):
        assert step(m, 12, tp([3], [6]), owned=owned) == Step(m)


def test_unrevoked_partitions_to_unrevoked_partitions():
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([1], [4]))
    got = step(m, 12, tp([3], [6]), owned=tp([2, 3], [5, 6]))
    # straight back into revocation at the same member epoch (KAFKA-19974: no bump on the way out)
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, tp([3], [6]), tp([2], [5])))


def test_unrevoked_partitions_to_unreleased_partitions():
    m = member(UNREVOKED_PARTITIONS, 11, 10, tp([2, 3], [5, 6]))
    got = step(m, 11, tp([2, 3, 4], [5, 6, 7]), epoch_of=lambda t, p: 10, owned=tp([2, 3], [5, 6]))
    assert got == Step(member(UNRELEASED_PARTITIONS, 11, 11, tp([2, 3], [5, 6])))


def test_unrevoked_partitions_to_stable_with_returned_partitions_pending_revocation():
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([4]))

    def epoch_of(t: int, p: int) -> int:
        # 2, 3 / 5, 6 held by the member itself, topic1-4 pending revocation at the member: none is "unreleased"
        return 10 if (t == T1 and p in (2, 3, 4)) or (t == T2 and p in (5, 6)) else -1

    got = step(m, 12, tp([2, 3, 4], [5, 6, 7]), epoch_of=epoch_of, owned=tp([2, 3], [5, 6]))
    assert got == Step(member(STABLE, 12, 10, tp([2, 3, 4], [5, 6, 7])))


def test_unreleased_partitions_to_stable():
    m = member(UNRELEASED_PARTITIONS, 11, 11, tp([2, 3], [5, 6]))
    got = step(m, 12, tp([2, 3], [5, 6]), epoch_of=lambda t, p: 10)
    assert got == Step(member(STABLE, 12, 11, tp([2, 3], [5, 6])))


def test_unreleased_partitions_to_stable_with_new_partitions():
    m = member(UNRELEASED_PARTITIONS, 11, 11, tp([2, 3], [5, 6]))
    got = step(m, 11, tp([2, 3, 4], [5, 6, 7]))
    assert got == Step(member(STABLE, 11, 11, tp([2, 3, 4], [5, 6, 7])))


def test_unreleased_partitions_to_unreleased_partitions():
    m = member(UNRELEASED_PARTITIONS, 11, 11, tp([2, 3], [5, 6]))
    assert step(m, 11, tp([2, 3, 4], [5, 6, 7]), epoch_of=lambda t, p: 10) == Step(m)


def test_unreleased_partitions_to_unrevoked_partitions():
    m = member(UNRELEASED_PARTITIONS, 11, 11, tp([2, 3], [5, 6]))
    got = step(m, 12, tp([3], [6]), epoch_of=lambda t, p: 10)
    assert got == Step(member(UNREVOKED_PARTITIONS, 11, 11, tp([3], [6]), tp([2], [5])))


def test_unknown_state():
    m = member(UNKNOWN, 11, 11, tp([3], [6]), tp([2], [5]))
    # first fenced (a null owned list, or any owned partition), the member left as it is ...
    assert step(m, 12, tp([3], [6]), epoch_of=lambda t, p: 10) == Step(m, FENCED_MEMBER_EPOCH)
    assert step(m, 12, tp([3], [6]), epoch_of=lambda t, p: 10, owned=tp([3])) == Step(m, FENCED_MEMBER_EPOCH)
    # ... then it rejoins owning nothing and is reconciled from scratch, straight to the target epoch
    got = step(m, 12, tp([3], [6]), epoch_of=lambda t, p: 11, owned=frozenset())
    assert got == Step(member(STABLE, 12, 11, tp([3], [6])))


@pytest.mark.parametrize(("member_epoch", "target_epoch", "expected_epoch", "subscription_changed"),
                         [(10, 11, 11, False), (10, 11, 11, True), (10, 10, 10, True)])
def test_stable_to_stable_with_assignment_topics_no_longer_in_subscription(member_epoch, target_epoch,
                                                                          expected_epoch, subscription_changed):
    m = member(STABLE, member_epoch, member_epoch - 1, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, target_epoch, tp([1, 2, 3], [4, 5, 6]), subscribed={T2}, owned=tp([], [4, 5, 6]),
               subscription_changed=subscription_changed)
    # topic1 is no longer subscribed and the client has let it go; the previous epoch is updated in every case
    assert got == Step(member(STABLE, expected_epoch, member_epoch, tp([], [4, 5, 6])))


@pytest.mark.parametrize(("member_epoch", "target_epoch", "expected_epoch", "subscription_changed"),
                         [(10, 11, 10, False), (10, 11, 10, True), (10, 10, 10, True)])
def test_stable_to_unrevoked_partitions_with_assignment_topics_no_longer_in_subscription(
        member_epoch, target_epoch, expected_epoch, subscription_changed):
    m = member(STABLE, member_epoch, member_epoch - 1, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, target_epoch, tp([1, 2, 3], [4, 5, 6]), subscribed={T2}, owned=tp([1, 2, 3], [4, 5, 6]),
               subscription_changed=subscription_changed)
    assert got == Step(member(UNREVOKED_PARTITIONS, expected_epoch, member_epoch, tp([], [4, 5, 6]), tp([1, 2, 3])))


def test_remains_in_unrevoked_partitions_with_assignment_topics_no_longer_in_subscription():
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3], [5, 6]), tp([1], [4]))
    got = step(m, 12, tp([1, 3, 4], [6, 7]), subscribed={T2}, owned=tp([1, 2, 3], [4, 5, 6]),
               subscription_changed=True)
    # still revoking topic2-4; topic1's assigned partitions join the revocation, nothing else moves
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, tp([], [5, 6]), tp([1, 2, 3], [4])))


def test_subscribed_topic_name_and_unresolved_regular_expression():
    # names {topic1} plus a regex for topic2 that is not resolved yet: the subscription is {topic1}
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 10, tp([1, 2, 3], [4, 5, 6]), subscribed={T1}, owned=tp([1, 2, 3], [4, 5, 6]),
               subscription_changed=True)
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, tp([1, 2, 3]), tp([], [4, 5, 6])))


def test_unresolved_regular_expression():
    # only an unresolved regex: the member subscribes to nothing, everything it holds is revoked
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 10, tp([1, 2, 3], [4, 5, 6]), subscribed=set(), owned=tp([1, 2, 3], [4, 5, 6]),
               subscription_changed=True)
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, frozenset(), tp([1, 2, 3], [4, 5, 6])))


def test_subscribed_topic_name_and_resolved_regular_expression():
    m = member(STABLE, 10, 10, tp([1, 2, 3], [4, 5, 6]))
    got = step(m, 10, tp([1, 2, 3], [4, 5, 6]), owned=tp([1, 2, 3], [4, 5, 6]), subscription_changed=True)
    assert got == Step(m)


# --- the same rules on cases Kafka's test file does not spell out -----------------------------------------------


def test_stable_at_the_target_epoch_is_left_alone():
    # at the target epoch without a subscription change nothing is recomputed, even if the target differs
    m = member(STABLE, 11, 10, tp([1, 2, 3]))
    assert step(m, 11, tp([4, 5])) == Step(m)


def test_unrevoked_partitions_with_null_owned_partitions_never_progress():
    # a null TopicPartitions counts as still owning everything, even with nothing pending revocation
    for pending in (tp([1]), frozenset()):
        m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3]), pending)
        assert step(m, 11, tp([2, 3])) == Step(m)
    m = member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3]), frozenset())
    assert step(m, 11, tp([2, 3]), owned=frozenset()) == Step(member(STABLE, 11, 10, tp([2, 3])))


def test_stable_to_unrevoked_partitions_with_null_owned_partitions():
    # a null owned list revokes even what the client may already have dropped
    m = member(STABLE, 10, 10, tp([1, 2, 3]))
    got = step(m, 11, tp([2, 3, 4]), owned=None)
    assert got == Step(member(UNREVOKED_PARTITIONS, 10, 10, tp([2, 3]), tp([1])))


def test_stable_drops_and_adds_in_one_step_when_the_client_already_let_go():
    # revoke-first only holds while the client reports a partition: one it no longer lists is dropped at once
    m = member(STABLE, 10, 10, tp([1, 2, 3]))
    got = step(m, 11, tp([2, 3, 4]), owned=tp([2, 3]))
    assert got == Step(member(STABLE, 11, 10, tp([2, 3, 4])))


def test_unknown_state_without_owned_partitions_never_waits_for_revocation():
    m = member(UNKNOWN, 11, 9, tp([1, 2]), tp([3]))
    got = step(m, 12, tp([2, 4]), epoch_of=lambda t, p: 7 if p == 4 else -1, owned=frozenset())
    assert got == Step(member(UNRELEASED_PARTITIONS, 12, 11, tp([2])))


def test_subscription_change_with_nothing_to_strip():
    m = member(STABLE, 10, 9, tp([1, 2], [3]))
    assert step(m, 10, tp([1, 2], [3]), subscription_changed=True) == Step(m)
    m = member(UNREVOKED_PARTITIONS, 10, 9, tp([1]), tp([2]))
    assert step(m, 11, tp([1]), owned=tp([1, 2]), subscription_changed=True) == Step(m)


def test_subscription_change_to_nothing_with_nothing_assigned_rebuilds_the_member():
    # Kafka's shortcut for "no topic subscribed, nothing pending" always builds a new member: previous epoch moves
    m = member(STABLE, 10, 9)
    assert step(m, 10, frozenset(), subscribed=set(), subscription_changed=True) == Step(member(STABLE, 10, 10))
    m = member(STABLE, 10, 9, tp([1]))
    assert step(m, 10, tp([1]), subscribed=set(), owned=frozenset(), subscription_changed=True) == Step(
        member(STABLE, 10, 10))


def test_stable_strip_of_partitions_already_released_keeps_the_state():
    m = member(STABLE, 10, 10, tp([1], [4]))
    got = step(m, 10, tp([1], [4]), subscribed={T1}, owned=tp([1]), subscription_changed=True)
    assert got == Step(member(STABLE, 10, 10, tp([1])))


# --- a worked example: two members, one epoch table -------------------------------------------------------------


class Group:
    """Two members and the epoch table they share; the table moves with every changed member, as Kafka's
    ConsumerGroup.updateMember does (old member's partitions removed at its epoch, new one's added at its)."""

    def __init__(self, n_partitions: int):
        self.topic_start = (0, n_partitions)
        self.table = PartitionEpochs(np.array(self.topic_start, dtype=np.int64))
        self.members: dict[str, Member] = {}

    def heartbeat(self, mid: str, target_epoch: int, target, owned) -> list[int] | None:
        """One heartbeat's reconciliation; returns the response's Assignment (None: unchanged)."""
        m = self.members.get(mid) or member(STABLE, 0, -1)
        values = self.table.to_numpy().tolist()
        got = kernel_step(self.table, m, target_epoch, frozenset(target), {0}, owned, False)
        assert got == model.reconcile(m, target_epoch, frozenset(target), {0}, self.topic_start, values, owned)
        assert got.error == 0
        new = got.member
        if new != m:
            self.table.remove(ids(m.assigned), m.member_epoch)
            self.table.remove(ids(m.pending_revocation), m.member_epoch)
            self.table.add(ids(new.assigned), new.member_epoch)
            self.table.add(ids(new.pending_revocation), new.member_epoch)
        joined = mid not in self.members
        self.members[mid] = new
        return sorted(new.assigned) if joined or new.assigned != m.assigned else None


def test_reference_worked_example_two_members():
    g = Group(4)
    # A joins: epoch 1, target A={0,1,2,3}
    assert g.heartbeat("A", 1, {0, 1, 2, 3}, owned=frozenset()) == [0, 1, 2, 3]
    assert g.members["A"] == member(STABLE, 1, 0, {0, 1, 2, 3})
    # B joins: epoch 2, target A={0,1}, B={2,3}; 2 and 3 are still A's
    assert g.heartbeat("B", 2, {2, 3}, owned=frozenset()) == []
    assert g.members["B"] == member(UNRELEASED_PARTITIONS, 2, 0)
    # A heartbeats at epoch 1 still owning everything: it must revoke 2 and 3 first, at its old epoch
    assert g.heartbeat("A", 2, {0, 1}, owned=frozenset({0, 1, 2, 3})) == [0, 1]
    assert g.members["A"] == member(UNREVOKED_PARTITIONS, 1, 1, {0, 1}, {2, 3})
    assert g.table.to_numpy().tolist() == [1, 1, 1, 1]
    # B heartbeats: 2 and 3 are pending at A, so no assignment (its previous epoch catches up to 2 all the same)
    assert g.heartbeat("B", 2, {2, 3}, owned=frozenset()) is None
    assert g.members["B"] == member(UNRELEASED_PARTITIONS, 2, 2)
    # A reports {0,1}: 2 and 3 are free, A moves to epoch 2 with an unchanged set (Assignment null)
    assert g.heartbeat("A", 2, {0, 1}, owned=frozenset({0, 1})) is None
    assert g.members["A"] == member(STABLE, 2, 1, {0, 1})
    assert g.table.to_numpy().tolist() == [2, 2, -1, -1]
    # B heartbeats and gets them
    assert g.heartbeat("B", 2, {2, 3}, owned=frozenset()) == [2, 3]
    assert g.members["B"] == member(STABLE, 2, 2, {2, 3})
    assert g.table.to_numpy().tolist() == [2, 2, 2, 2]


# --- Hypothesis: the compiled step is the model ------------------------------------------------------------------

STATES = (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS, UNKNOWN)


@st.composite
def cases(draw, realistic: bool = False, max_topics: int = 6):
    """(member, target_epoch, target, subscribed, topic_start, epochs, owned, subscription_changed).

    Arbitrary: any lists, overlapping or not, in any state. Realistic: what a group can hold — pending revocation
    disjoint from assigned and non-empty exactly in UNREVOKED_PARTITIONS (any in UNKNOWN), and the member's own
    partitions held at its epoch in the table.
    """
    counts = draw(st.lists(st.integers(0, 6), min_size=1, max_size=max_topics))
    topic_start = (0, *itertools.accumulate(counts))
    n = topic_start[-1]
    pids = st.frozensets(st.integers(0, n - 1), max_size=n) if n else st.just(frozenset())
    epoch = st.integers(0, 4)
    state = draw(st.sampled_from(STATES))
    assigned, pending, target = draw(pids), draw(pids), draw(pids)
    epochs = draw(st.lists(st.sampled_from((-1, -1, -1, 0, 1, 2, 3, 4)), min_size=n, max_size=n))
    m = Member(state, draw(epoch), draw(epoch), assigned, pending)
    if realistic:
        pending -= assigned
        if state in (STABLE, UNRELEASED_PARTITIONS):
            pending = frozenset()
        if state == UNREVOKED_PARTITIONS:
            assume(pending)
        m = Member(state, m.member_epoch, m.previous_member_epoch, assigned, pending)
        for p in assigned | pending:
            epochs[p] = m.member_epoch
    subscribed = draw(st.frozensets(st.integers(0, len(counts) - 1)))
    owned = draw(st.none() | pids)
    return m, draw(epoch), target, subscribed, topic_start, epochs, owned, draw(st.booleans())


def both(case) -> Step:
    m, target_epoch, target, subscribed, topic_start, epochs, owned, changed = case
    ours = kernel_step(table_of(topic_start, epochs), m, target_epoch, target, subscribed, owned, changed)
    theirs = model.reconcile(m, target_epoch, target, subscribed, topic_start, epochs, owned, changed)
    assert ours == theirs
    return ours


@settings(max_examples=examples(2000))
@given(cases())
def test_kernel_equals_model(case):
    both(case)


@settings(max_examples=examples(300))
@given(cases(max_topics=60))
def test_kernel_equals_model_with_many_topics(case):
    both(case)


def check_invariants(case, got: Step) -> None:
    """Kafka's reconciliation invariants for one step on a realistic case (CurrentAssignmentBuilder's)."""
    m, target_epoch, target, subscribed, topic_start, epochs, owned, _ = case
    if got.error:
        assert got.member == m
        return
    new = got.member
    # the member epoch advances to the target epoch exactly when nothing remains to revoke
    if new.pending_revocation:
        assert new.state == UNREVOKED_PARTITIONS and new.member_epoch == m.member_epoch
    else:
        assert new.member_epoch == target_epoch
    assert new.assigned.isdisjoint(new.pending_revocation)
    added = new.assigned - m.assigned
    released = (m.assigned | m.pending_revocation) - new.assigned - new.pending_revocation
    if added and released:
        # revoke first: nothing is added while the client still reports (or may hold) a partition it loses ...
        assert owned is not None and owned.isdisjoint(released)
    if owned is None or owned >= m.assigned | m.pending_revocation:
        # ... so a client that reports everything it was given never loses and gains in one step
        assert not (added and released)
    # a partition goes to this member only once nobody else holds it, and only from its subscribed target
    assert all(epochs[p] == -1 or p in m.pending_revocation for p in added)
    assert all(p in target and topic_of(topic_start, p) in subscribed for p in added)


def topic_of(topic_start, p: int) -> int:
    return next(t for t in range(len(topic_start) - 1) if topic_start[t] <= p < topic_start[t + 1])


@settings(max_examples=examples(1000))
@given(cases(realistic=True))
def test_invariants(case):
    check_invariants(case, both(case))


def test_invariant_checks_catch_broken_steps():
    """The invariant checks are not vacuous: each of these wrong answers to one case is refused."""
    m = member(STABLE, 10, 9, {0, 1})
    case = (m, 11, frozenset({1, 2}), frozenset({0}), (0, 4), [10, 10, -1, 3], frozenset({0, 1}), False)
    right = Step(member(UNREVOKED_PARTITIONS, 10, 10, {1}, {0}))
    check_invariants(case, right)
    for wrong in (
        Step(member(STABLE, 11, 10, {1, 2})),  # gives 2 before 0 is revoked (KAFKA-15763's bug)
        Step(member(UNREVOKED_PARTITIONS, 11, 10, {1}, {0})),  # advances while revoking
        Step(member(STABLE, 10, 10, {1})),  # stays behind with nothing to revoke
        Step(member(STABLE, 11, 10, {1, 3})),  # takes a partition held by another member, outside its target
    ):
        with pytest.raises(AssertionError):
            check_invariants(case, wrong)


# --- the partition epoch table and the boundary -----------------------------------------------------------------


def test_partition_epochs_refuse_a_second_holder():
    table = PartitionEpochs(np.array([0, 4, 6], dtype=np.int64))
    assert len(table) == 6 and table.n_topics == 2
    table.add(ids([1, 4]), 3)
    with pytest.raises(PartitionEpochError, match="partition 4 to 5: it is still held at epoch 3") as err:
        table.add(ids([0, 4, 5]), 5)
    assert (err.value.partition_id, err.value.epoch) == (4, 3)
    assert table.to_numpy().tolist() == [-1, 3, -1, -1, 3, -1], "a refused add changes nothing"
    with pytest.raises(PartitionEpochError, match="partition 2 appears twice"):
        table.add(np.array([0, 2, 2], dtype=np.int32), 5)
    assert table.to_numpy().tolist() == [-1, 3, -1, -1, 3, -1]
    with pytest.raises(AssignmentError, match="epoch must be >= 0"):
        table.add(ids([0]), -1)


def test_partition_epochs_remove_only_at_the_expected_epoch():
    table = PartitionEpochs([0, 6])
    table.add([5, 0, 3], 7)  # any order, any integer sequence
    with pytest.raises(PartitionEpochError, match="remove epoch 6 from partition 0: it is held at epoch 7"):
        table.remove(ids([3, 0]), 6)
    with pytest.raises(PartitionEpochError, match="partition 1: it is free") as err:
        table.remove(ids([0, 1]), 7)
    assert (err.value.partition_id, err.value.epoch) == (1, -1)
    with pytest.raises(PartitionEpochError, match="partition 3 appears twice"):
        table.remove(np.array([3, 0, 3], dtype=np.int32), 7)
    assert table.to_numpy().tolist() == [7, -1, -1, 7, -1, 7]
    table.remove(ids([0, 3, 5]), 7)
    assert table.to_numpy().tolist() == [-1] * 6
    with pytest.raises(AssignmentError, match="partition 6 .* outside 0..5"):
        table.add(ids([6]), 1)


def test_partition_epochs_grow_with_the_catalogue():
    table = PartitionEpochs([0, 2, 3])
    table.add(ids([0, 1, 2]), 4)
    table.grow([0, 3, 4, 6])  # topic 0 gains a partition, topic 2 is new: topic 1's id moves from 2 to 3
    assert table.to_numpy().tolist() == [4, 4, -1, 4, -1, -1]
    assert table.topic_start.tolist() == [0, 3, 4, 6] and not table.topic_start.flags.writeable
    with pytest.raises(AssignmentError, match="topic 0 would shrink"):
        table.grow([0, 2, 4, 6])
    with pytest.raises(AssignmentError, match="fewer than the 3"):
        table.grow([0, 3, 4])
    with pytest.raises(AssignmentError, match="topic_start must not fall"):
        PartitionEpochs([0, 3, 2])
    with pytest.raises(AssignmentError, match="start at 0"):
        PartitionEpochs([1, 3])


def reconcile_args(**overrides):
    table = PartitionEpochs(np.array([0, 4, 8], dtype=np.int64))
    args = {"epochs": table, "state": STABLE, "member_epoch": 1, "previous_member_epoch": 0, "target_epoch": 2,
            "assigned": ids([0, 1]), "pending_revocation": ids([]), "target": ids([1, 5]),
            "subscribed_topics": ids([0, 1]), "owned": None}
    args.update(overrides)
    return args


@pytest.mark.parametrize(("field", "value", "message"), [
    ("assigned", np.array([1, 0], dtype=np.int32), "assigned must be ascending: partition 0 .* follows 1"),
    ("pending_revocation", np.array([3, 3], dtype=np.int32), "pending_revocation: partition 3 appears twice"),
    ("target", np.array([2, 8], dtype=np.int32), r"target: partition 8 \(entry 1\) is outside 0..7"),
    ("owned", np.array([-1], dtype=np.int32), "owned: partition -1"),
    ("subscribed_topics", np.array([2], dtype=np.int32), "subscribed_topics: topic 2 .* outside 0..1"),
    ("assigned", None, "assigned must be an array of ids, not None"),
    ("target", np.zeros((1, 2), dtype=np.int32), "target must be one-dimensional"),
    ("target", np.array([0.5]), "target must hold integers"),
    ("state", 3, "state must be one of"),
])
def test_reconcile_refuses_bad_input(field, value, message):
    with pytest.raises(AssignmentError, match=message):
        _assign.reconcile(**reconcile_args(**{field: value}))


def test_reconcile_takes_other_integer_sequences():
    res = _assign.reconcile(**reconcile_args(assigned=[0, 1], target=np.array([1, 5], dtype=np.int64),
                                             owned=(0, 1)))
    assert (res.state, res.assigned.tolist(), res.pending_revocation.tolist()) == (UNREVOKED_PARTITIONS, [1], [0])
    assert "UNREVOKED_PARTITIONS" in repr(res)


def test_results_do_not_share_the_kernel_buffers():
    first = _assign.reconcile(**reconcile_args(owned=ids([])))
    assert first.assigned.tolist() == [1, 5]
    _assign.reconcile(**reconcile_args(assigned=ids([2, 3]), target=ids([6, 7]), owned=ids([])))
    assert first.assigned.tolist() == [1, 5]


# --- step: the owned list from the wire, the kernel and the table's move in one call ------------------------------

TOPIC_IDS = [bytes([t + 1]) * 16 for t in range(64)]


def wire_owned(draw, owned: frozenset[int], topic_start) -> list:
    """`owned` as a heartbeat's TopicPartitions: per topic, in any topic order, partitions in any order, some
    repeated, and some entries the group cannot know (another topic id, partitions outside the topic)."""
    from kcoord import wire

    by_topic: dict[int, list[int]] = {}
    for p in owned:
        t = topic_of(topic_start, p)
        by_topic.setdefault(t, []).append(p - topic_start[t])
    entries = []
    for t, parts in by_topic.items():
        parts = draw(st.permutations(parts))
        parts = parts + draw(st.lists(st.sampled_from(parts), max_size=2))  # repeats
        parts = parts + draw(st.lists(st.sampled_from((-1, topic_start[t + 1] - topic_start[t], 2**31 - 1)),
                                      max_size=1))
        entries.append(wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=TOPIC_IDS[t], partitions=parts))
    if draw(st.booleans()):
        entries.append(wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=b"\xee" * 16, partitions=[0, 1]))
    return draw(st.permutations(entries))


@settings(max_examples=examples(1500))
@given(cases(realistic=True), st.data())
def test_step_is_reconcile_then_the_tables_move(case, data):
    """`step` answers as `reconcile` does, with `owned` as an array or straight from the wire (unordered,
    repeated, unknown entries), its target as a row of a CSR among other rows; and when the member changed, the
    table afterwards is the one Kafka's removePartitionEpochs / addPartitionEpochs leave, or, when they refuse, the
    step raises and the table is as it was."""
    m, target_epoch, target, subscribed, topic_start, epochs, owned, changed = case
    assigned, pending = ids(m.assigned), ids(m.pending_revocation)
    expected = _assign.reconcile(table_of(topic_start, epochs), m.state, m.member_epoch, m.previous_member_epoch,
                                 target_epoch, assigned, pending, ids(target), ids(subscribed),
                                 None if owned is None else ids(owned), changed)
    others = data.draw(st.lists(st.frozensets(st.integers(0, max(topic_start[-1] - 1, 0))), max_size=3))
    row = data.draw(st.integers(0, len(others)))
    rows = [*others[:row], target, *others[row:]]
    indptr = np.array([0, *itertools.accumulate(len(r) for r in rows)], dtype=np.int64)
    flat = np.concatenate([ids(r) for r in rows]) if rows else ids([])
    n_topics = len(topic_start) - 1
    by_topic_id = {TOPIC_IDS[t]: t for t in range(n_topics)}
    as_wire = owned is not None and data.draw(st.booleans())
    given_owned = wire_owned(data.draw, owned, topic_start) if as_wire else (None if owned is None else ids(owned))

    table = table_of(topic_start, epochs)
    after = table_of(topic_start, epochs)
    try:
        if expected.changed and not expected.error:
            after.remove(assigned, m.member_epoch)
            after.remove(pending, m.member_epoch)
            after.add(expected.assigned, expected.member_epoch)
            after.add(expected.pending_revocation, expected.member_epoch)
        refused = None
    except PartitionEpochError as e:
        refused = e
    args = (table, m.state, m.member_epoch, m.previous_member_epoch, target_epoch, assigned, pending, indptr, flat,
            row, ids(subscribed), given_owned, by_topic_id, changed)
    if refused is not None:
        with pytest.raises(PartitionEpochError):
            _assign.step(*args)
        assert table.to_numpy().tolist() == list(epochs), "a refused step leaves the table as it was"
        return
    got = _assign.step(*args)
    assert (got.state, got.member_epoch, got.previous_member_epoch, got.changed, got.assigned_changed,
            got.error) == (expected.state, expected.member_epoch, expected.previous_member_epoch, expected.changed,
                           expected.assigned_changed, expected.error)
    assert got.assigned.tolist() == expected.assigned.tolist()
    assert got.pending_revocation.tolist() == expected.pending_revocation.tolist()
    assert (got.assigned is assigned) == (not got.assigned_changed)
    assert table.to_numpy().tolist() == after.to_numpy().tolist()


def test_step_refuses_a_table_that_disagrees_and_changes_nothing():
    table = PartitionEpochs([0, 4])
    table.add(ids([0, 1]), 3)
    table.add(ids([2]), 9)  # another member holds 2 at epoch 9
    csr = np.array([0, 3], dtype=np.int64), ids([0, 1, 2])
    # the member says it holds 0, 1 at epoch 5: the table has them at 3
    with pytest.raises(PartitionEpochError, match="partition 0 from epoch 5 to 6: the table has it at epoch 3"):
        _assign.step(table, STABLE, 5, 4, 6, ids([0, 1]), ids([]), *csr, 0, ids([0]), None)
    assert table.to_numpy().tolist() == [3, 3, 9, -1]
    # at its real epoch it moves to 6 and keeps 0 and 1, but 2 is still held: UNRELEASED_PARTITIONS
    got = _assign.step(table, STABLE, 3, 2, 6, ids([0, 1]), ids([]), *csr, 0, ids([0]), None)
    assert (got.state, got.member_epoch, got.assigned.tolist()) == (UNRELEASED_PARTITIONS, 6, [0, 1])
    assert table.to_numpy().tolist() == [6, 6, 9, -1]


def step_args(**overrides):
    table = PartitionEpochs(np.array([0, 4, 8], dtype=np.int64))
    args = {"epochs": table, "state": STABLE, "member_epoch": 1, "previous_member_epoch": 0, "target_epoch": 2,
            "assigned": ids([]), "pending_revocation": ids([]), "target_indptr": np.array([0, 2], dtype=np.int64),
            "target_flat": ids([1, 5]), "target_row": 0, "subscribed_topics": ids([0, 1]), "owned": None}
    args.update(overrides)
    return args


@pytest.mark.parametrize(("field", "value", "message"), [
    ("target_row", 1, "target_row 1 is outside the 1 rows"),
    ("target_indptr", np.array([0, 3], dtype=np.int64), r"row 0 spans \[0, 3\), outside target_flat's 2 entries"),
    ("target_flat", np.array([5, 1], dtype=np.int32), "target must be ascending"),
    ("target_flat", ids([1, 8]), r"target: partition 8 \(entry 1\) is outside 0..7"),
    ("assigned", None, "assigned must be an array of ids, not None"),
    ("assigned", np.array([1, 0], dtype=np.int32), "assigned must be ascending"),
    ("owned", np.array([9], dtype=np.int32), "owned: partition 9"),
    ("owned", [], "owned as TopicPartitions needs by_topic_id"),
    ("subscribed_topics", ids([2]), "subscribed_topics: topic 2"),
    ("state", 4, "state must be one of"),
])
def test_step_refuses_bad_input(field, value, message):
    args = step_args(**{field: value})
    with pytest.raises(AssignmentError, match=message):
        _assign.step(**args)
    assert args["epochs"].to_numpy().tolist() == [-1] * 8


def test_step_takes_other_arrays_and_a_member_without_a_target():
    args = step_args(assigned=[0], target_indptr=[0, 2], target_flat=np.array([1, 5]), owned=(0,))
    args["epochs"].add([0], 1)
    got = _assign.step(**args)
    assert (got.state, got.assigned.tolist(), got.pending_revocation.tolist()) == (UNREVOKED_PARTITIONS, [], [0])
    assert args["epochs"].to_numpy().tolist() == [1] + [-1] * 7
    got = _assign.step(**step_args(target_row=-1))
    assert (got.state, got.member_epoch, got.assigned.tolist()) == (STABLE, 2, [])
