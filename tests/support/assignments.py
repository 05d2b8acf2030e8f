"""Checks of an assignor's output shared by the assignor tests (tests/unit/test_assignors*.py): validity, balance
and moves, written from Kafka's documented rules, independent of the implementation under test. In-process only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from kcoord.assignors import Member

TP = tuple[str, int]


def jkey(s: str) -> bytes:
    """Java's String order (UTF-16 code units), independent of the implementation under test."""
    return s.encode("utf-16-be", "surrogatepass")


def kafka_sorted(members: Iterable[Member]) -> list[Member]:
    return sorted(members, key=lambda m: (m.instance_id is None,
                                          jkey(m.instance_id if m.instance_id is not None else m.member_id)))


def flatten(assignment: Mapping[str, Mapping[str, list[int]]]) -> dict[TP, str]:
    out: dict[TP, str] = {}
    for mid, topics in assignment.items():
        for topic, parts in topics.items():
            assert parts == sorted(parts), f"{mid}/{topic}: partitions not ascending: {parts}"
            assert parts, f"{mid}/{topic}: empty partition list"
            for p in parts:
                assert (topic, p) not in out, f"{topic}-{p} assigned to {out[(topic, p)]} and {mid}"
                out[(topic, p)] = mid
    return out


def all_partitions(topics: Mapping[str, int], members: Iterable[Member]) -> set[TP]:
    subscribed = {t for m in members for t in m.topics if t in topics}
    return {(t, p) for t in subscribed for p in range(topics[t])}


def check_valid(assignment, members: list[Member], topics: Mapping[str, int], *, complete: bool = True) -> dict:
    """Every member present; every assigned partition exists and goes to a subscriber; all assigned if complete."""
    assert set(assignment) == {m.member_id for m in members}
    subs = {m.member_id: set(m.topics) for m in members}
    flat = flatten(assignment)
    for (topic, p), mid in flat.items():
        assert topic in topics and 0 <= p < topics[topic], f"{topic}-{p} does not exist"
        assert topic in subs[mid], f"{topic}-{p} given to {mid}, which does not subscribe to {topic}"
    if complete:
        missing = all_partitions(topics, members) - set(flat)
        assert not missing, f"unassigned: {sorted(missing)}"
    return flat


def loads(assignment) -> dict[str, int]:
    return {mid: sum(len(v) for v in topics.values()) for mid, topics in assignment.items()}


def is_java_balanced(assignment, members: list[Member]) -> bool:
    """No partition could move to another subscriber of its topic with two fewer partitions (Java's isBalanced)."""
    load = loads(assignment)
    lightest: dict[str, int] = {}  # per topic, the lowest load among its subscribers
    for m in members:
        for topic in m.topics:
            lightest[topic] = min(lightest.get(topic, load[m.member_id]), load[m.member_id])
    return all(load[mid] <= lightest[topic] + 1 for mid, topics in assignment.items() for topic in topics)


def moves(before: Mapping[TP, str], after: Mapping[TP, str]) -> int:
    """Partitions whose previous owner still has a claim to them and that now belong to someone else."""
    return sum(1 for tp, mid in before.items() if after.get(tp) != mid)


def valid_claims(prev: Mapping[TP, str], members: list[Member]) -> dict[TP, str]:
    """The previous owners that are still members and still subscribe to the topic."""
    subs = {m.member_id: set(m.topics) for m in members}
    return {tp: mid for tp, mid in prev.items() if mid in subs and tp[0] in subs[mid]}


def min_moves_homogeneous(claims: Mapping[TP, str], members: list[Member], topics: Mapping[str, int]) -> int:
    """The fewest moves of claimed partitions any balanced assignment of a homogeneous group can make."""
    subscribers = [m.member_id for m in members if m.topics]
    total = len(all_partitions(topics, members))
    if not subscribers:
        return 0
    q, extra = divmod(total, len(subscribers))
    kept = Counter(claims.values())
    keep = sum(min(kept[s], q) for s in subscribers) + min(extra, sum(1 for s in subscribers if kept[s] > q))
    return sum(kept.values()) - keep


def with_owned(members: list[Member], assignment, generation: int = 1) -> list[Member]:
    return [Member(m.member_id, m.instance_id, m.topics, owned=assignment.get(m.member_id), generation=generation,
                   rack=m.rack) for m in members]
