"""The oracle for kcoord's compiled reconciliation step: one KIP-848 heartbeat's reconciliation over Python sets.

Written from the behaviour of Kafka's CurrentAssignmentBuilder (trunk, Kafka 4.x; its rules are in the notes
below), for readability first: the
compiled kernel (src/_core/assign/reconcile.pxi) must give exactly the same member for every input.

Partitions are global integer ids; topic t owns [topic_start[t], topic_start[t + 1]). `epochs[p]` is the epoch
of whichever member holds p (assigned or pending revocation), -1 when nobody does. `owned` is the request's
TopicPartitions flattened to ids, or None when that field was null.

Notes on Kafka's behaviour that the model reproduces:
* "Owns a revoked partition" is true whenever `owned` is None, even with nothing pending.
* A partition in the member's own pending-revocation list is never "unreleased" (KAFKA-19449).
* Topics the member no longer subscribes to have an empty target (KAFKA-19431).
* Leaving UNREVOKED_PARTITIONS keeps the member epoch as it is (KAFKA-19974), so a member that goes straight
  back to revoking stays at its epoch; every other exit moves it to the target epoch.
* Stripping unsubscribed topics (`subscription_changed`, Kafka's enforce-subscription-consistency flag) also sets
  previous_member_epoch to the member epoch (apache/kafka#21325). When the member subscribes to nothing and has
  nothing pending, Kafka's shortcut always builds a new member, so that happens even with nothing to strip.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
UNKNOWN = 127
FENCED_MEMBER_EPOCH = 110


@dataclass(frozen=True)
class Member:
    state: int
    member_epoch: int
    previous_member_epoch: int
    assigned: frozenset[int] = frozenset()
    pending_revocation: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Step:
    member: Member  # the member after the step (the same one when returned as is or fenced)
    error: int = 0  # FENCED_MEMBER_EPOCH when a member in an unknown state must rejoin


def reconcile(
    member: Member,
    target_epoch: int,
    target: AbstractSet[int],
    subscribed_topics: AbstractSet[int],
    topic_start: Sequence[int],
    epochs: Sequence[int],
    owned: AbstractSet[int] | None,
    subscription_changed: bool = False,
) -> Step:
    """One reconciliation step (CurrentAssignmentBuilder.build)."""
    m = member

    def subscribed(p: int) -> bool:
        return bisect.bisect_right(topic_start, p) - 1 in subscribed_topics

    def owns_any(revoking: AbstractSet[int]) -> bool:
        return owned is None or not owned.isdisjoint(revoking)

    def moved(epoch: int, **fields) -> Step:
        # the member builder's updateMemberEpoch: the previous epoch is always the old member epoch
        return Step(replace(m, member_epoch=epoch, previous_member_epoch=m.member_epoch, **fields))

    def strip_unsubscribed() -> Step:
        dropped = frozenset(p for p in m.assigned if not subscribed(p))
        if not dropped and (subscribed_topics or m.pending_revocation):
            return Step(m)
        kept = m.assigned - dropped
        revoking = m.pending_revocation | dropped
        if revoking and owns_any(revoking):
            return moved(m.member_epoch, state=UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoking)
        return moved(m.member_epoch, assigned=kept)  # already released by the client: state and pending stay

    def next_assignment(epoch: int) -> Step:
        goal = frozenset(p for p in target if subscribed(p))
        kept = m.assigned & goal
        revoking = m.assigned - kept
        wanted = goal - kept
        unreleased = frozenset(p for p in wanted if epochs[p] != -1 and p not in m.pending_revocation)
        adding = wanted - unreleased
        if revoking and owns_any(revoking):
            return moved(epoch, state=UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoking)
        state = UNRELEASED_PARTITIONS if unreleased else STABLE
        return moved(target_epoch, state=state, assigned=kept | adding, pending_revocation=frozenset())

    if m.state == STABLE:
        if m.member_epoch != target_epoch:
            return next_assignment(m.member_epoch)
        return strip_unsubscribed() if subscription_changed else Step(m)
    if m.state == UNREVOKED_PARTITIONS:
        if owns_any(m.pending_revocation):
            return strip_unsubscribed() if subscription_changed else Step(m)
        return next_assignment(m.member_epoch)
    if m.state == UNRELEASED_PARTITIONS:
        return next_assignment(m.member_epoch)
    # UNKNOWN (any state this coordinator does not know): the client must drop everything and say so
    if owned is None or owned:
        return Step(m, FENCED_MEMBER_EPOCH)
    return next_assignment(target_epoch)
