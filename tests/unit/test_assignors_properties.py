"""Property tests (Hypothesis) for every assignor.

Each assignor is checked for validity (every partition of a subscribed topic goes to exactly one member that
subscribes to it), balance, determinism under any permutation of its input, and, for the sticky ones, stickiness
against the theoretical minimum and the cooperative rule. Range (with KIP-881 racks) and round-robin are also
checked against straightforward pure-Python renderings of Java's algorithms, written here from their documented
behaviour, and against kafka-python's range and round-robin where kafka-python is correct (dynamic members).

The invariant checks are shared with test_assignors.py, in tests/support/assignments.py.
"""

from __future__ import annotations

import itertools
import random
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kcoord import assignors as A
from kcoord.assignors import AssignmentError, Member

from ..support.assignments import (
    TP,
    all_partitions,
    check_valid,
    flatten,
    is_java_balanced,
    jkey,
    kafka_sorted,
    loads,
    min_moves_homogeneous,
    moves,
    valid_claims,
    with_owned,
)
from ..support.quick import examples

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KPSubscription


# ---------------------------------------------------------------------------------------------------------------
# Input helpers (the invariant checks are in tests/support/assignments.py)


def permuted(members: list[Member], topics: Mapping[str, int], rnd: random.Random):
    """The same group with members, topics, subscriptions and owned partitions in another order."""
    ms = []
    for m in members:
        subs = list(m.topics)
        rnd.shuffle(subs)
        owned = None
        if m.owned is not None:
            items = [(t, list(ps)) for t, ps in m.owned.items()]
            rnd.shuffle(items)
            for _, ps in items:
                rnd.shuffle(ps)
            owned = dict(items)
        ms.append(Member(m.member_id, m.instance_id, tuple(subs), owned, m.generation, m.rack))
    rnd.shuffle(ms)
    items = list(topics.items())
    rnd.shuffle(items)
    return ms, dict(items)


# ---------------------------------------------------------------------------------------------------------------
# Pure-Python references of Java's range (KIP-881 racks included) and round-robin


def ref_range(members: list[Member], topics: Mapping[str, int],
              partition_racks: Mapping[str, list[Iterable[str]]] | None = None) -> dict:
    order = [m.member_id for m in kafka_sorted(members)]
    rack = {m.member_id: (m.rack or None) for m in members}
    subs = {m.member_id: set(m.topics) for m in members}
    out: dict[str, dict[str, list[int]]] = {m.member_id: {} for m in members}

    class State:
        def __init__(self, topic: str, n: int, consumers: list[str]) -> None:
            self.topic, self.n, self.consumers = topic, n, consumers
            self.q, self.extra = divmod(n, len(consumers))
            self.count = dict.fromkeys(consumers, 0)
            self.unassigned = list(range(n))
            self.racks = None
            if any(rack[c] for c in consumers):
                given_racks = (partition_racks or {}).get(topic) or [()] * n
                self.racks = [{r for r in given_racks[p] if r} for p in range(n)]
            consumer_racks = {rack[c] for c in consumers if rack[c]}
            union = set().union(*self.racks) if self.racks else set()
            self.needs = bool(consumer_racks & union) and not all(r == union for r in self.racks or ())

        def room(self, c: str) -> int:
            return max(0, self.q + (1 if self.extra > 0 else 0) - self.count[c])

        def matches(self, c: str, p: int) -> bool:
            return rack[c] is None or (self.racks is not None and rack[c] in self.racks[p])

        def give(self, c: str, parts: list[int]) -> None:
            out[c].setdefault(self.topic, []).extend(parts)
            self.count[c] += len(parts)
            if self.count[c] > self.q:
                self.extra -= 1
            self.unassigned = [p for p in self.unassigned if p not in parts]

        def ranges(self, by_rack: bool) -> None:
            for c in self.consumers:
                if not self.unassigned:
                    break
                take = [p for p in self.unassigned if not by_rack or self.matches(c, p)][:self.room(c)]
                if take:
                    self.give(c, take)

    states = [State(t, n, [c for c in order if t in subs[c]]) for t, n in topics.items()
              if n > 0 and any(t in subs[c] for c in order)]
    if any(s.needs for s in states):
        groups: dict[tuple, list[State]] = {}
        for s in states:
            groups.setdefault((tuple(s.consumers), s.n if s.racks is not None else 0), []).append(s)
        for (consumers, n), group in groups.items():
            if len(group) > 1:
                remaining = list(consumers)
                for p in range(n):
                    c = next((c for c in remaining
                              if all(s.matches(c, p) and s.room(c) > 0 for s in group)), None)
                    if c is not None:
                        for s in group:
                            s.give(c, [p])
                        if all(s.room(c) == 0 for s in group):
                            remaining.remove(c)
                            if not remaining:
                                break
            elif group[0].needs:
                group[0].ranges(by_rack=True)
    for s in states:
        s.ranges(by_rack=False)
    return {mid: {t: sorted(ps) for t, ps in sorted(d.items(), key=lambda kv: jkey(kv[0]))} for mid, d in out.items()}


def ref_roundrobin(members: list[Member], topics: Mapping[str, int]) -> dict:
    order = [m.member_id for m in kafka_sorted(members)]
    subs = {m.member_id: set(m.topics) for m in members}
    out: dict[str, dict[str, list[int]]] = {m.member_id: {} for m in members}
    i = 0
    for topic in sorted({t for s in subs.values() for t in s if t in topics}, key=jkey):
        for p in range(topics[topic]):
            while topic not in subs[order[i % len(order)]]:
                i += 1
            out[order[i % len(order)]].setdefault(topic, []).append(p)
            i += 1
    return out


# ---------------------------------------------------------------------------------------------------------------
# Strategies

NAME = st.text(alphabet="abAB01-._é\uff5e\U0001f600", min_size=1, max_size=3)  # astral vs BMP: Java's UTF-16 order
ASCII_NAME = st.text(alphabet="abAB01-._", min_size=1, max_size=3)
RACKS = ("a", "b", "c")


@st.composite
def groups(draw, *, homogeneous: bool = False, max_members: int = 6, max_topics: int = 4, max_partitions: int = 8,
           racks: bool = False, min_members: int = 1, name=NAME):
    names = draw(st.lists(name, min_size=1, max_size=max_topics, unique=True))
    topics = {t: draw(st.integers(0, max_partitions)) for t in names}
    mids = draw(st.lists(name, min_size=min_members, max_size=max_members, unique=True))
    iids = draw(st.lists(name, min_size=len(mids), max_size=len(mids), unique=True))
    static = draw(st.lists(st.booleans(), min_size=len(mids), max_size=len(mids)))
    if homogeneous:
        common = tuple(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        subs = [common] * len(mids)
    else:
        subs = [tuple(draw(st.lists(st.sampled_from(names), unique=True))) for _ in mids]
    member_racks = [draw(st.sampled_from((None, *RACKS))) if racks else None for _ in mids]
    members = [Member(mid, iid if s else None, sub, rack=r)
               for mid, iid, s, sub, r in zip(mids, iids, static, subs, member_racks, strict=True)]
    return members, topics


@st.composite
def partition_racks(draw, topics: Mapping[str, int]):
    rack_sets = st.lists(st.sampled_from(RACKS), unique=True, max_size=3)
    return {t: [draw(rack_sets) for _ in range(n)] for t, n in topics.items()}


@st.composite
def claimed_groups(draw, *, homogeneous: bool = False, max_members: int = 6):
    """A group whose members claim random partitions with random generations (overlaps and stale claims)."""
    members, topics = draw(groups(homogeneous=homogeneous, max_members=max_members))
    universe = sorted({(t, p) for t, n in topics.items() for p in range(n)})
    out = []
    for m in members:
        mine = draw(st.lists(st.sampled_from(universe), unique=True, max_size=6)) if universe else []
        owned: dict[str, list[int]] = {}
        for t, p in mine:
            owned.setdefault(t, []).append(p)
        if draw(st.booleans()):
            owned.setdefault("no-such-topic", []).append(0)  # claims on deleted topics are ignored
        out.append(Member(m.member_id, m.instance_id, m.topics, owned=owned,
                          generation=draw(st.sampled_from((-1, 1, 2, 3))), rack=m.rack))
    return out, topics


SIMPLE = {
    "range": A.range_assign,
    "roundrobin": A.roundrobin_assign,
    "sticky": A.sticky_assign,
    "cooperative-sticky": A.cooperative_sticky_assign,
    "uniform": A.uniform_assign,
    "server-range": A.server_range_assign,
}


def run(name: str, members, topics):
    return SIMPLE[name](members, topics)


# ---------------------------------------------------------------------------------------------------------------
# Member order


@given(groups(max_members=8), st.randoms(use_true_random=False))
def test_member_order_is_kafkas_total_order(group, rnd):
    members, _ = group
    expected = [m.member_id for m in kafka_sorted(members)]
    shuffled = list(members)
    rnd.shuffle(shuffled)
    got = [m.member_id for m in A.member_order(shuffled)]
    assert got == expected
    statics = [m.instance_id is not None for m in A.member_order(shuffled)]
    assert statics == sorted(statics, reverse=True)  # static members first
    perm = A.kafka_order([m.member_id for m in shuffled], [m.instance_id for m in shuffled])
    assert [shuffled[i].member_id for i in perm] == expected


# ---------------------------------------------------------------------------------------------------------------
# Every assignor: validity and determinism


@pytest.mark.parametrize("name", sorted(SIMPLE))
@settings(max_examples=examples(150))
@given(group=groups(), rnd=st.randoms(use_true_random=False))
def test_valid_and_independent_of_input_order(name, group, rnd):
    members, topics = group
    result = run(name, members, topics)
    check_valid(result, members, topics)
    again = run(name, *permuted(members, topics, rnd))
    assert again == result
    assert list(again) == list(result)  # members come out in the same (Kafka) order


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
@settings(max_examples=examples(200))
@given(group=claimed_groups(), rnd=st.randoms(use_true_random=False))
def test_sticky_with_arbitrary_claims_is_valid_and_deterministic(name, group, rnd):
    members, topics = group
    result = run(name, members, topics)
    check_valid(result, members, topics, complete=name == "sticky")
    if name == "sticky":
        assert is_java_balanced(result, members)
    assert run(name, *permuted(members, topics, rnd)) == result


# ---------------------------------------------------------------------------------------------------------------
# Range and round-robin: Java's algorithms and balance


@settings(max_examples=examples(300))
@given(group=groups(racks=True, max_members=7), data=st.data())
def test_range_agrees_with_reference_including_racks(group, data):
    members, topics = group
    racks = data.draw(partition_racks(topics)) if data.draw(st.booleans()) else None
    result = A.range_assign(members, topics, partition_racks=racks)
    assert result == ref_range(members, topics, racks)


@settings(max_examples=examples(200))
@given(group=groups(max_members=8))
def test_range_balanced_per_topic(group):
    members, topics = group
    result = A.range_assign(members, topics)
    check_valid(result, members, topics)
    for topic, n in topics.items():
        counts = [len(result[m.member_id].get(topic, ())) for m in members if topic in m.topics]
        if counts:
            assert max(counts) - min(counts) <= 1
            # the first subscribers in Kafka's order take the extra partitions
            ordered = [len(result[m.member_id].get(topic, ())) for m in kafka_sorted(members) if topic in m.topics]
            assert ordered == sorted(ordered, reverse=True)


@settings(max_examples=examples(300))
@given(group=groups(max_members=8))
def test_roundrobin_agrees_with_reference(group):
    members, topics = group
    assert A.roundrobin_assign(members, topics) == ref_roundrobin(members, topics)


@settings(max_examples=examples(200))
@given(group=groups(homogeneous=True, max_members=8))
def test_roundrobin_balanced_overall_when_homogeneous(group):
    members, topics = group
    result = A.roundrobin_assign(members, topics)
    check_valid(result, members, topics)
    counts = loads(result).values()
    assert max(counts) - min(counts) <= 1


def _kafka_python_members(members: list[Member]):
    class JoinMember:
        def __init__(self, m: Member) -> None:
            self.member_id = m.member_id
            self.group_instance_id = m.instance_id
            self.metadata = KPSubscription(version=0, topics=list(m.topics), user_data=b"")

    return [JoinMember(m) for m in members]


class _Cluster:
    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics = topics

    def partitions_for_topic(self, topic):
        return set(range(self.topics[topic])) if topic in self.topics else None


def _from_kafka_python(result) -> dict:
    out = {}
    for mid, assignment in result.items():
        pairs = [(tp.topic, tp.partitions) if hasattr(tp, "topic") else tuple(tp)
                 for tp in assignment.assigned_partitions]
        out[mid] = {topic: sorted(parts) for topic, parts in pairs if parts}
    return out


@settings(max_examples=examples(150))
@given(group=groups(max_members=6, name=ASCII_NAME))
def test_range_agrees_with_kafka_python_for_dynamic_members(group):
    # kafka-python orders dynamic members correctly (by member id) and drops static ones in mixed groups; it
    # compares code points where Java compares UTF-16 code units, so the names here are ASCII
    members, topics = group
    members = [Member(m.member_id, None, m.topics) for m in members]
    mine = A.range_assign(members, topics)
    theirs = _from_kafka_python(RangePartitionAssignor.assign(_Cluster(topics), _kafka_python_members(members)))
    assert {k: {t: p for t, p in v.items()} for k, v in theirs.items()} == mine


@settings(max_examples=examples(150))
@given(group=groups(max_members=6, homogeneous=True, name=ASCII_NAME))
def test_roundrobin_agrees_with_kafka_python_for_dynamic_members(group):
    members, topics = group
    members = [Member(m.member_id, None, m.topics) for m in members]
    mine = A.roundrobin_assign(members, topics)
    theirs = _from_kafka_python(RoundRobinPartitionAssignor.assign(_Cluster(topics), _kafka_python_members(members)))
    assert theirs == mine


# ---------------------------------------------------------------------------------------------------------------
# Sticky, cooperative-sticky, uniform: balance and stickiness


@pytest.mark.parametrize("name", ["sticky", "uniform"])
@settings(max_examples=examples(200))
@given(group=groups(homogeneous=True, max_members=8, max_partitions=12))
def test_homogeneous_balanced_overall(name, group):
    members, topics = group
    result = run(name, members, topics)
    check_valid(result, members, topics)
    counts = loads(result).values()
    assert max(counts) - min(counts) <= 1


@settings(max_examples=examples(200))
@given(group=groups(max_members=7, max_partitions=10))
def test_sticky_heterogeneous_is_balanced(group):
    members, topics = group
    result = A.sticky_assign(members, topics)
    check_valid(result, members, topics)
    assert is_java_balanced(result, members)


@st.composite
def membership_changes(draw, *, homogeneous: bool, max_members: int = 6, max_partitions: int = 9):
    """(members before, members after, topics): one member joins or one leaves."""
    members, topics = draw(groups(homogeneous=homogeneous, max_members=max_members, min_members=2,
                                  max_partitions=max_partitions))
    if draw(st.booleans()):
        gone = draw(st.sampled_from(members))
        after = [m for m in members if m.member_id != gone.member_id]
    else:
        taken = {m.member_id for m in members} | {m.instance_id for m in members if m.instance_id}
        new_id = draw(NAME.filter(lambda s: s not in taken))
        static = draw(st.booleans())
        sub = members[0].topics if homogeneous else tuple(draw(st.lists(st.sampled_from(sorted(topics)), unique=True)))
        after = [*members, Member(new_id, new_id if static else None, sub)]
    return members, after, topics


@pytest.mark.parametrize("name", ["sticky", "uniform"])
@settings(max_examples=examples(200))
@given(change=membership_changes(homogeneous=True))
def test_one_member_joins_or_leaves_moves_the_theoretical_minimum(name, change):
    before, after, topics = change
    first = run(name, before, topics)
    claims = valid_claims(flatten(first), after)
    second = run(name, with_owned(after, first), topics)
    check_valid(second, after, topics)
    assert moves(claims, flatten(second)) == min_moves_homogeneous(claims, after, topics)


@pytest.mark.parametrize("name", ["sticky", "uniform"])
@settings(max_examples=examples(150))
@given(group=groups(homogeneous=True, max_members=6, max_partitions=10), data=st.data())
def test_arbitrary_previous_assignment_moves_the_theoretical_minimum(name, group, data):
    members, topics = group
    universe = sorted(all_partitions(topics, members))
    owners = data.draw(st.lists(st.sampled_from([None] + [m.member_id for m in members]),
                                min_size=len(universe), max_size=len(universe)))
    prev = {tp: o for tp, o in zip(universe, owners, strict=True) if o is not None}
    owned: dict[str, dict[str, list[int]]] = {}
    for (t, p), o in sorted(prev.items()):
        owned.setdefault(o, {}).setdefault(t, []).append(p)
    result = run(name, with_owned(members, owned), topics)
    check_valid(result, members, topics)
    assert moves(prev, flatten(result)) == min_moves_homogeneous(prev, members, topics)


def oracle_min_moves(members: list[Member], topics: Mapping[str, int], claims: Mapping[TP, str],
                     max_square_sum: int) -> int:
    """The fewest moves of claimed partitions over every valid assignment at least as balanced (sum of squared
    loads no larger) as max_square_sum, by brute force."""
    parts = sorted(all_partitions(topics, members))
    choices = [[m.member_id for m in members if t in m.topics] for t, _ in parts]
    best = None
    ids = [m.member_id for m in members]
    for pick in itertools.product(*choices):
        load = Counter(pick)
        if sum(load[i] ** 2 for i in ids) > max_square_sum:
            continue
        owner = dict(zip(parts, pick, strict=True))
        n = moves(claims, owner)
        best = n if best is None else min(best, n)
    assert best is not None
    return best


@settings(max_examples=examples(120))
@given(change=membership_changes(homogeneous=False, max_members=4, max_partitions=3))
def test_sticky_heterogeneous_join_or_leave_no_assignment_as_balanced_moves_fewer(change):
    before, after, topics = change
    assume(len(all_partitions(topics, after)) <= 7)
    first = A.sticky_assign(before, topics)
    claims = valid_claims(flatten(first), after)
    second = A.sticky_assign(with_owned(after, first), topics)
    check_valid(second, after, topics)
    assert is_java_balanced(second, after)
    square_sum = sum(v * v for v in loads(second).values())
    assert moves(claims, flatten(second)) <= oracle_min_moves(after, topics, claims, square_sum)


def cooperative_rounds(members: list[Member], topics: Mapping[str, int], first, generation: int = 1,
                       limit: int = 6):
    """Runs cooperative-sticky rebalances (members revoke what they lose, then rejoin) until nothing is withheld.

    Checks in every round that no member gets a partition another member still owns. Returns (rounds, final).
    """
    owned = {m.member_id: first.get(m.member_id, {}) for m in members}
    for rounds in range(1, limit + 1):
        current = with_owned(members, owned, generation)
        result = A.cooperative_sticky_assign(current, topics)
        check_valid(result, members, topics, complete=False)
        held = {(t, p): mid for mid, d in owned.items() for t, ps in d.items() for p in ps}
        for (t, p), mid in flatten(result).items():
            owner = held.get((t, p))
            assert owner is None or owner == mid, f"{t}-{p} given to {mid} while {owner} still owns it"
        missing = all_partitions(topics, members) - set(flatten(result))
        if not missing:
            return rounds, result
        owned = result  # each member revokes what it lost; the withheld partitions are now free
        generation += 1
    raise AssertionError(f"cooperative-sticky did not settle in {limit} rounds")


@settings(max_examples=examples(200))
@given(change=membership_changes(homogeneous=True))
def test_cooperative_homogeneous_settles_in_two_rounds_with_minimum_moves(change):
    before, after, topics = change
    first = A.sticky_assign(before, topics)
    claims = valid_claims(flatten(first), after)
    rounds, final = cooperative_rounds(after, topics, first)
    assert rounds <= 2
    counts = loads(final).values()
    assert max(counts) - min(counts) <= 1
    assert moves(claims, flatten(final)) == min_moves_homogeneous(claims, after, topics)


@settings(max_examples=examples(200))
@given(change=membership_changes(homogeneous=False, max_members=5))
def test_cooperative_heterogeneous_never_double_assigns_and_settles(change):
    before, after, topics = change
    first = A.sticky_assign(before, topics)
    rounds, final = cooperative_rounds(after, topics, first)
    assert rounds <= 3
    assert is_java_balanced(final, after)


@settings(max_examples=examples(200))
@given(group=claimed_groups(max_members=5))
def test_cooperative_with_conflicting_claims_withholds_contested_partitions(group):
    members, topics = group
    result = A.cooperative_sticky_assign(members, topics)
    claimants: dict[TP, list[Member]] = {}
    for m in members:
        for t, ps in (m.owned or {}).items():
            for p in set(ps):
                claimants.setdefault((t, p), []).append(m)
    for (t, p), mid in flatten(result).items():
        others = [m for m in claimants.get((t, p), []) if m.member_id != mid]
        if others:
            mine = [m for m in claimants[(t, p)] if m.member_id == mid]
            # only the unique highest-generation claimant may keep a contested partition
            assert mine and all(mine[0].generation > o.generation for o in others), f"{t}-{p} to {mid}"


@settings(max_examples=examples(200))
@given(group=groups(max_members=7, max_partitions=10))
def test_uniform_heterogeneous_keeps_valid_and_sticky(group):
    members, topics = group
    first = A.uniform_assign(members, topics)
    check_valid(first, members, topics)
    assert is_java_balanced(first, members)
    # a second run on its own result changes nothing
    assert A.uniform_assign(with_owned(members, first), topics) == first


# ---------------------------------------------------------------------------------------------------------------
# The bulk face agrees with the simple face


def _arrays(members: list[Member], topics: Mapping[str, int], rnd: random.Random):
    """Interned arrays with one (possibly duplicated, unsorted) subscription row per member."""
    order = kafka_sorted(members)
    names = sorted(topics, key=jkey)
    index = {t: i for i, t in enumerate(names)}
    rows = []
    for m in order:
        row = [index[t] for t in m.topics]
        rnd.shuffle(row)
        rows.append(row + row[:1])  # a duplicate topic id in a row is harmless
    perm = list(range(len(rows)))
    rnd.shuffle(perm)  # set numbering is arbitrary
    member_sets = np.empty(len(rows), dtype=np.int64)
    flat, indptr = [], [0]
    for new, old in enumerate(perm):
        member_sets[old] = new
        flat.extend(rows[old])
        indptr.append(len(flat))
    counts = [topics[t] for t in names]
    return order, names, counts, member_sets, np.asarray(indptr), np.asarray(flat, dtype=np.int64)


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky", "uniform"])
@settings(max_examples=examples(100))
@given(group=groups(), rnd=st.randoms(use_true_random=False))
def test_assign_arrays_matches_the_simple_face(name, group, rnd):
    members, topics = group
    order, names, counts, member_sets, indptr, flat = _arrays(members, topics, rnd)
    csr = A.assign_arrays(name, counts, member_sets, indptr, flat)
    starts = A.partition_starts(counts)
    got = {}
    for i, m in enumerate(order):
        d: dict[str, list[int]] = {}
        tix, parts = A.split_partition_ids(csr.partitions[csr.indptr[i]:csr.indptr[i + 1]], counts)
        for t, p in zip(tix.tolist(), parts.tolist(), strict=True):
            d.setdefault(names[t], []).append(p)
        got[m.member_id] = d
        assert np.all(csr.owners[csr.partitions[csr.indptr[i]:csr.indptr[i + 1]]] == i)
    simple = {"range": A.range_assign, "roundrobin": A.roundrobin_assign, "sticky": A.sticky_assign,
              "cooperative-sticky": A.cooperative_sticky_assign, "uniform": A.uniform_assign}[name]
    assert got == simple(members, topics)
    assert int(starts[-1]) == len(csr.owners)


@settings(max_examples=examples(100))
@given(group=claimed_groups(max_members=5))
def test_assign_arrays_sticky_claims_match_the_simple_face(group):
    members, topics = group
    order = kafka_sorted(members)
    names = sorted(topics, key=jkey)
    counts = [topics[t] for t in names]
    starts = A.partition_starts(counts)
    index = {t: i for i, t in enumerate(names)}
    set_ids: dict[frozenset, int] = {}
    rows: list[list[int]] = []
    member_sets = []
    for m in order:
        key = frozenset(index[t] for t in m.topics)
        if key not in set_ids:
            set_ids[key] = len(rows)
            rows.append(sorted(key))
        member_sets.append(set_ids[key])
    own_ptr, own = [0], []
    for m in order:
        for t, ps in (m.owned or {}).items():
            if t in index:
                own.extend(int(starts[index[t]]) + p for p in ps if 0 <= p < topics[t])
        own_ptr.append(len(own))
    csr = A.assign_arrays("cooperative-sticky", counts, member_sets, np.cumsum([0] + [len(r) for r in rows]),
                          [t for r in rows for t in r], owned_indptr=own_ptr, owned_partitions=own,
                          generations=[m.generation for m in order])
    simple = A.cooperative_sticky_assign(members, topics)
    assert sum(len(v) for d in simple.values() for v in d.values()) == len(csr.partitions)
    withheld = set(np.flatnonzero(csr.withheld).tolist())
    assigned = {int(starts[index[t]]) + p for d in simple.values() for t, ps in d.items() for p in ps}
    assert not withheld & assigned
    subscribed = {pid for t in {t for m in members for t in m.topics} for pid in
                  range(int(starts[index[t]]), int(starts[index[t] + 1]))}
    assert withheld | assigned == subscribed


def test_assign_arrays_rejects_bad_arrays():
    with pytest.raises(AssignmentError, match="negative partition count"):
        A.assign_arrays("range", [3, -1], [0], [0, 1], [0])
    with pytest.raises(AssignmentError, match="set_topics"):
        A.assign_arrays("range", [3], [0], [0, 1], [5])
    with pytest.raises(AssignmentError, match="member_sets"):
        A.assign_arrays("range", [3], [2], [0, 1], [0])
    with pytest.raises(AssignmentError, match="set_indptr"):
        A.assign_arrays("range", [3], [0], [0, 2], [0])
    with pytest.raises(AssignmentError, match="integers"):
        A.assign_arrays("range", [3.5], [0], [0, 1], [0])
    with pytest.raises(AssignmentError, match="owned_indptr"):
        A.assign_arrays("sticky", [3], [0], [0, 1], [0], owned_indptr=[0, 5], owned_partitions=[0])
    with pytest.raises(AssignmentError, match="generations"):
        A.assign_arrays("sticky", [3], [0], [0, 1], [0], generations=[1, 2])
    with pytest.raises(AssignmentError, match="unknown assignor"):
        A.assign_arrays("fair", [3], [0], [0, 1], [0])
    with pytest.raises(AssignmentError, match="current assignment of more than one member"):
        A.assign_arrays("uniform", [3], [0, 0], [0, 1], [0], owned_indptr=[0, 1, 2], owned_partitions=[1, 1])


def test_kernels_write_into_a_callers_array():
    from kcoord._core import _assign

    prep = _assign.prepare([3, 4], [0, 0, 1], [0, 2, 3], [0, 1, 1])
    out = np.full(7, 99, dtype=np.int32)
    for kernel in (_assign.range_owners, _assign.roundrobin_owners):
        expected = kernel(prep)
        assert kernel(prep, out=out) is out and np.array_equal(out, expected)
    owners, _ = _assign.sticky_owners(prep, out=out)
    assert owners is out and np.array_equal(out, _assign.sticky_owners(prep)[0])
    for bad in (np.zeros(6, np.int32), np.zeros(7, np.int64), np.zeros((7, 1), np.int32), [0] * 7):
        with pytest.raises(AssignmentError, match="out must be"):
            _assign.range_owners(prep, out=bad)
