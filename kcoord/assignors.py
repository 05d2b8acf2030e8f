"""Kafka's partition assignors, compiled: the client-side range (with KIP-881 racks), round-robin, sticky and
cooperative-sticky, and the server-side (KIP-848) uniform and range assignors.

Three faces over one set of kernels (kcoord._core._assign, `noexcept nogil` over interned integer ids):

* simple calls: ``range_assign(members, topics)`` and friends take `Member` records and ``{topic: partitions}``
  and return ``{member_id: {topic: [partition, ...]}}`` for every member;
* a bulk call on numpy arrays, `assign_arrays`, for planning at scale (member → partition CSR out);
* the consumer protocol: `decode_subscription` reads the ConsumerProtocolSubscription a member sends in
  JoinGroup, `encode_assignment` writes the ConsumerProtocolAssignment it gets back in SyncGroup, and
  `assign_join_group` does the whole leader step.

Member order. Every assignor here orders members by Kafka's total order (Java ``MemberInfo.compareTo``, the
server-side ``RangeAssignor``): static members (``group.instance.id`` set) first, by instance id, then dynamic
members by member id, strings compared as Java compares them (UTF-16 code units). Java's sticky assignors order
by member id only; kcoord uses the total order there too, so a static member that restarts with a new member id
keeps its place, and with it its partitions, under every assignor. Results never depend on the order in which
members, topics or partitions are passed in.

Stickiness. The sticky assignors keep a member's owned partitions unless balance forces them out. A partition
claimed by several members goes to the claim with the highest generation (ConsumerProtocolSubscription v2+, or
the sticky user data); claims tied at the highest generation are void. When all members of a connected part of
the group share one subscription, the number of partitions that move is the theoretical minimum for a balanced
assignment. The cooperative assignor then withholds every partition whose new owner differs from a member that
still claims it: it is assigned in the follow-up rebalance, after the owner has revoked it (KIP-429).

Bad input (an unknown topic, a negative partition count, a duplicate member or instance id) raises
`AssignmentError`, a ValueError, naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from . import wire
from ._core import _assign
from ._core._assign import AssignmentError, DuplicateClaimError

__all__ = [
    "ASSIGNORS",
    "AssignmentError",
    "CsrAssignment",
    "Member",
    "ProtocolAssignment",
    "Subscription",
    "assign",
    "assign_arrays",
    "assign_join_group",
    "cooperative_sticky_assign",
    "decode_assignment",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
    "kafka_order",
    "member_order",
    "members_from_join",
    "partition_starts",
    "range_assign",
    "roundrobin_assign",
    "server_range_assign",
    "split_partition_ids",
    "sticky_assign",
    "uniform_assign",
]

Buffer = bytes | bytearray | memoryview
Assignment = dict[str, dict[str, list[int]]]
"""{member_id: {topic: [partition, ...]}}: every member, topics in name order, partitions ascending."""

UNKNOWN_TOPIC_POLICIES = ("error", "ignore")
CONSUMER_PROTOCOL_VERSION = 3  # the highest ConsumerProtocolSubscription/Assignment version (Kafka 3.5+)


@dataclass(frozen=True, slots=True)
class Member:
    """One group member as an assignor sees it.

    `owned` is what the member owns now: for the client sticky assignors its owned partitions (with
    `generation`, the generation it owned them in); for the server-side assignors its current target
    assignment. Range and round-robin ignore it.
    """

    member_id: str
    instance_id: str | None = None
    topics: Collection[str] = ()
    owned: Mapping[str, Iterable[int]] | None = None
    generation: int = -1
    rack: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Kafka's member order


def _java_keys(strings: Sequence[str]) -> list[Any]:
    """Sort keys that order strings as Java's String.compareTo does (UTF-16 code units)."""
    if all(s.isascii() for s in strings):
        return list(strings)
    return [s.encode("utf-16-be", "surrogatepass") for s in strings]


def _java_sorted(strings: Iterable[str]) -> list[str]:
    items = list(strings)
    keys = _java_keys(items)
    return [s for _, s in sorted(zip(keys, items, strict=True), key=lambda kv: kv[0])]


def _order(member_ids: Sequence[str], instance_ids: Sequence[str | None]) -> list[int]:
    ids = [iid if iid is not None else mid for mid, iid in zip(member_ids, instance_ids, strict=True)]
    keys = _java_keys(ids)
    return sorted(range(len(ids)), key=lambda i: (instance_ids[i] is None, keys[i]))


def _check_unique(member_ids: Sequence[str], instance_ids: Sequence[str | None]) -> None:
    if len(set(member_ids)) != len(member_ids):
        seen: set[str] = set()
        for mid in member_ids:
            if mid in seen:
                raise AssignmentError(f"duplicate member id {mid!r}")
            seen.add(mid)
    by_instance: dict[str, str] = {}
    for mid, iid in zip(member_ids, instance_ids, strict=True):
        if iid is None:
            continue
        other = by_instance.setdefault(iid, mid)
        if other != mid:
            raise AssignmentError(f"instance id {iid!r} is used by members {other!r} and {mid!r}")


def _check_member(m: Member) -> None:
    if not isinstance(m.member_id, str):
        raise AssignmentError(f"member ids must be strings, not {m.member_id!r}")
    if m.instance_id is not None and not isinstance(m.instance_id, str):
        raise AssignmentError(f"member {m.member_id!r}: the instance id must be a string or None")
    if m.rack is not None and not isinstance(m.rack, str):
        raise AssignmentError(f"member {m.member_id!r}: the rack must be a string or None")
    if isinstance(m.generation, bool) or not isinstance(m.generation, int | np.integer):
        raise AssignmentError(f"member {m.member_id!r}: the generation must be an integer")


def member_order(members: Iterable[Member]) -> list[Member]:
    """The members in Kafka's total order: static members by instance id, then dynamic members by member id."""
    members = list(members)
    for m in members:
        _check_member(m)
    mids = [m.member_id for m in members]
    iids = [m.instance_id for m in members]
    _check_unique(mids, iids)
    return [members[i] for i in _order(mids, iids)]


def kafka_order(member_ids: Sequence[str], instance_ids: Sequence[str | None] | None = None) -> np.ndarray:
    """The permutation (int64 indexes) that puts members in Kafka's total order, for `assign_arrays`."""
    iids = list(instance_ids) if instance_ids is not None else [None] * len(member_ids)
    _check_unique(list(member_ids), iids)
    return np.asarray(_order(list(member_ids), iids), dtype=np.int64)


# ---------------------------------------------------------------------------------------------------------------
# The bulk face: numpy arrays in, CSR out


class CsrAssignment(NamedTuple):
    """An assignment as arrays. Member i's partitions are ``partitions[indptr[i]:indptr[i + 1]]``.

    Partition ids are global: topic t's partition p is ``partition_starts(counts)[t] + p``.
    """

    indptr: np.ndarray  # int64[M + 1]
    partitions: np.ndarray  # int32, ascending within each member
    owners: np.ndarray  # int32[P]: the member index of every partition, -1 if unassigned
    withheld: np.ndarray | None  # cooperative-sticky: uint8[P], 1 where a partition waits for its owner to revoke


def partition_starts(partition_counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """int64[T + 1]: the first global partition id of each topic, then the total."""
    counts = np.asarray(partition_counts, dtype=np.int64)
    out = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def split_partition_ids(partition_ids: np.ndarray, partition_counts: Sequence[int] | np.ndarray):
    """(topic index, partition) arrays for global partition ids."""
    starts = partition_starts(partition_counts)
    ids = np.asarray(partition_ids, dtype=np.int64)
    topic = np.searchsorted(starts, ids, side="right") - 1
    return topic.astype(np.int32), (ids - starts[topic]).astype(np.int32)


BULK_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform")


def assign_arrays(
    assignor: str,
    partition_counts: Sequence[int] | np.ndarray,
    member_sets: Sequence[int] | np.ndarray,
    set_indptr: Sequence[int] | np.ndarray,
    set_topics: Sequence[int] | np.ndarray,
    *,
    owned_indptr: Sequence[int] | np.ndarray | None = None,
    owned_partitions: Sequence[int] | np.ndarray | None = None,
    generations: Sequence[int] | np.ndarray | None = None,
    member_racks: Sequence[int] | np.ndarray | None = None,
    partition_rack_indptr: Sequence[int] | np.ndarray | None = None,
    partition_racks: Sequence[int] | np.ndarray | None = None,
) -> CsrAssignment:
    """Runs an assignor on interned arrays, for planning at scale.

    Members are numbered in rank order (sort them with `kafka_order` first); topics are numbered in the order
    round-robin deals them (Kafka deals topics by name). Member i subscribes to the topics of set
    ``member_sets[i]`` (-1: none), ``set_topics[set_indptr[s]:set_indptr[s + 1]]``; members with identical
    subscriptions may share a set or not (identical sets are merged). Owned partitions are global partition ids
    in CSR rows per member, with one generation per member (sticky assignors) or the current target assignment
    (uniform). Racks (range only, KIP-881) are small integers: one per member (-1: none) and a CSR row of the
    replicas' racks per partition. "range" without racks is also the server-side range assignor.
    """
    owners, withheld = assign_owners(assignor, partition_counts, member_sets, set_indptr, set_topics,
                                     owned_indptr=owned_indptr, owned_partitions=owned_partitions,
                                     generations=generations, member_racks=member_racks,
                                     partition_rack_indptr=partition_rack_indptr, partition_racks=partition_racks)
    indptr, parts = _assign.owners_to_csr(owners, len(member_sets))
    return CsrAssignment(indptr, parts, owners, withheld)


def assign_owners(assignor: str, partition_counts, member_sets, set_indptr, set_topics, *, owned_indptr=None,
                  owned_partitions=None, generations=None, member_racks=None, partition_rack_indptr=None,
                  partition_racks=None) -> tuple[np.ndarray, np.ndarray | None]:
    """`assign_arrays` without its per-member CSR: each global partition's owner (member rank, -1: none) and the
    sticky assignors' withheld partitions. What a caller that turns owners into rows itself needs (kcoord.spark)."""
    if assignor not in BULK_ASSIGNORS:
        raise AssignmentError(f"unknown assignor {assignor!r}; expected one of {', '.join(BULK_ASSIGNORS)}")
    prep = _assign.prepare(partition_counts, member_sets, set_indptr, set_topics)
    if assignor == "range":
        if member_racks is None and partition_rack_indptr is None and partition_racks is None:
            return _assign.range_owners(prep), None
        return _assign.range_owners(prep, member_racks, partition_rack_indptr, partition_racks), None
    if assignor == "roundrobin":
        return _assign.roundrobin_owners(prep), None
    return _assign.sticky_owners(prep, owned_indptr, owned_partitions, generations, mode=assignor,
                                 max_passes=16 if assignor == "uniform" else -1)


# ---------------------------------------------------------------------------------------------------------------
# The simple face: Member records and {topic: partitions} in, {member_id: {topic: [partitions]}} out


class _Interned:
    """A group interned to integer ids: members in rank order, topics in Java name order."""

    __slots__ = ("members", "topic_names", "topic_index", "counts", "starts", "member_sets", "set_indptr",
                 "set_topics")

    def __init__(self, members: Iterable[Member], topics: Mapping[str, int], unknown_topics: str) -> None:
        if unknown_topics not in UNKNOWN_TOPIC_POLICIES:
            raise AssignmentError(f"unknown_topics must be one of {UNKNOWN_TOPIC_POLICIES}, not {unknown_topics!r}")
        self.members = member_order(members)
        names = list(topics)
        for name in names:
            count = topics[name]
            if not isinstance(name, str):
                raise AssignmentError(f"topic names must be strings, not {name!r}")
            if isinstance(count, bool) or not isinstance(count, int | np.integer):
                raise AssignmentError(f"topic {name!r} has a partition count that is not an integer: {count!r}")
            if count < 0:
                raise AssignmentError(f"topic {name!r} has a negative partition count ({count})")
        self.topic_names = _java_sorted(names)
        self.topic_index = {name: i for i, name in enumerate(self.topic_names)}
        self.counts = np.fromiter((topics[n] for n in self.topic_names), dtype=np.int64, count=len(names))
        self.starts = partition_starts(self.counts)
        set_ids: dict[tuple[int, ...], int] = {}
        by_object: dict[int, int] = {}  # members often share one topic collection: intern it once
        flat: list[int] = []
        indptr = [0]
        member_sets = np.empty(len(self.members), dtype=np.int32)
        index = self.topic_index
        for i, m in enumerate(self.members):
            sid = by_object.get(id(m.topics))
            if sid is None:
                if isinstance(m.topics, str):
                    raise AssignmentError(f"member {m.member_id!r}: topics must be a collection of names, not a str")
                ids = []
                for topic in m.topics:
                    t = index.get(topic)
                    if t is not None:
                        ids.append(t)
                    elif unknown_topics == "error":
                        raise AssignmentError(f"member {m.member_id!r} subscribes to unknown topic {topic!r}")
                key = tuple(sorted(set(ids)))
                sid = set_ids.get(key)
                if sid is None:
                    sid = set_ids[key] = len(set_ids)
                    flat.extend(key)
                    indptr.append(len(flat))
                by_object[id(m.topics)] = sid
            member_sets[i] = sid
        self.member_sets = member_sets
        self.set_indptr = np.asarray(indptr, dtype=np.int64)
        self.set_topics = np.asarray(flat, dtype=np.int32)

    def prepare(self) -> Any:
        return _assign.prepare(self.counts, self.member_sets, self.set_indptr, self.set_topics)

    def owned(self) -> tuple[np.ndarray, np.ndarray]:
        return _assign.intern_owned([m.owned for m in self.members], self.topic_index, self.starts)

    def generations(self) -> np.ndarray:
        return np.fromiter((m.generation for m in self.members), dtype=np.int64, count=len(self.members))

    def to_dicts(self, owners: np.ndarray) -> Assignment:
        indptr, parts = _assign.owners_to_csr(owners, len(self.members))
        return _assign.csr_to_dicts(indptr, parts, self.starts, self.topic_names,
                                    [m.member_id for m in self.members])

    def partition_name(self, pid: int) -> str:
        t = int(np.searchsorted(self.starts, pid, side="right") - 1)
        return f"{self.topic_names[t]}-{pid - int(self.starts[t])}"


def range_assign(
    members: Iterable[Member],
    topics: Mapping[str, int],
    *,
    partition_racks: Mapping[str, Sequence[Iterable[str]]] | None = None,
    unknown_topics: str = "error",
) -> Assignment:
    """Java's RangeAssignor: per topic, subscribers in Kafka's member order take contiguous ranges.

    With `partition_racks` ({topic: [racks of the replicas of partition 0, of partition 1, ...]}) and members
    with racks, partitions are matched to consumers on the same rack where that keeps the per-topic balance and
    the co-partitioning of topics with equal partition counts and subscribers (KIP-881).
    `unknown_topics="ignore"` skips subscriptions to topics missing from `topics`, as a Java client leader does.
    """
    g = _Interned(members, topics, unknown_topics)
    prep = g.prepare()
    if partition_racks is None or all(m.rack in (None, "") for m in g.members):
        return g.to_dicts(_assign.range_owners(prep))
    rack_index: dict[str, int] = {}
    member_racks = np.fromiter(
        (rack_index.setdefault(m.rack, len(rack_index)) if m.rack else -1 for m in g.members),
        dtype=np.int32, count=len(g.members))
    lengths = np.zeros(int(g.starts[-1]), dtype=np.int64)
    flat: list[int] = []
    # racks are per partition; flat is filled topic by topic in global partition id order
    rows: dict[int, list[list[int]]] = {}
    for topic, per_partition in partition_racks.items():
        t = g.topic_index.get(topic)
        if t is None:
            if unknown_topics == "error":
                raise AssignmentError(f"partition_racks names unknown topic {topic!r}")
            continue
        per_partition = list(per_partition)
        if len(per_partition) != int(g.counts[t]):
            raise AssignmentError(f"partition_racks[{topic!r}] has {len(per_partition)} entries; "
                                  f"the topic has {int(g.counts[t])} partitions")
        rows[t] = [[rack_index.setdefault(r, len(rack_index)) for r in racks if r] for racks in per_partition]
    for t in sorted(rows):
        base = int(g.starts[t])
        for p, racks in enumerate(rows[t]):
            lengths[base + p] = len(racks)
    for t in sorted(rows):
        for racks in rows[t]:
            flat.extend(racks)
    indptr = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return g.to_dicts(_assign.range_owners(prep, member_racks, indptr, np.asarray(flat, dtype=np.int32)))


def server_range_assign(members: Iterable[Member], topics: Mapping[str, int]) -> Assignment:
    """KIP-848's server-side RangeAssignor (no racks; an unknown topic is an error, as in Kafka)."""
    return range_assign(members, topics)


def roundrobin_assign(members: Iterable[Member], topics: Mapping[str, int], *,
                      unknown_topics: str = "error") -> Assignment:
    """Java's RoundRobinAssignor: partitions in (topic, partition) order dealt over members in Kafka's order,
    skipping members not subscribed to the partition's topic."""
    g = _Interned(members, topics, unknown_topics)
    return g.to_dicts(_assign.roundrobin_owners(g.prepare()))


def _sticky(mode: str, members: Iterable[Member], topics: Mapping[str, int], unknown_topics: str) -> Assignment:
    g = _Interned(members, topics, unknown_topics)
    prep = g.prepare()
    indptr, pids = g.owned()
    gens = g.generations() if mode != "uniform" else None
    if gens is not None and gens.size and (gens.min() < -(2**31) or gens.max() >= 2**31):
        raise AssignmentError("generations must fit in a signed 32-bit integer")
    try:
        owners, _ = _assign.sticky_owners(prep, indptr, pids, gens, mode=mode,
                                          max_passes=16 if mode == "uniform" else -1)
    except DuplicateClaimError as exc:
        raise AssignmentError(f"partition {g.partition_name(exc.partition_id)} is in the current assignment of "
                              f"more than one member") from None
    return g.to_dicts(owners)


def sticky_assign(members: Iterable[Member], topics: Mapping[str, int], *, unknown_topics: str = "error") -> Assignment:
    """The sticky assignor (KIP-54): balanced, then as few moves as possible from the owned partitions."""
    return _sticky("sticky", members, topics, unknown_topics)


def cooperative_sticky_assign(members: Iterable[Member], topics: Mapping[str, int], *,
                              unknown_topics: str = "error") -> Assignment:
    """The cooperative-sticky assignor (KIP-429): the sticky target, minus partitions another member still owns.

    A withheld partition is missing from every member's assignment; its owner revokes it (it is not in its
    assignment any more) and rejoins, and the next rebalance assigns it.
    """
    return _sticky("cooperative-sticky", members, topics, unknown_topics)


def uniform_assign(members: Iterable[Member], topics: Mapping[str, int]) -> Assignment:
    """KIP-848's server-side UniformAssignor: `Member.owned` is the current target assignment.

    Homogeneous groups (and homogeneous parts of a group) are balanced exactly with the fewest moves; members
    with differing subscriptions follow Kafka's heterogeneous builder (at most 16 balancing passes). A partition
    in two members' current assignment is an error.
    """
    return _sticky("uniform", members, topics, "error")


ASSIGNORS: dict[str, Callable[..., Assignment]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
"""The client-side assignors by the protocol name a consumer advertises in JoinGroup."""

SERVER_ASSIGNORS = {"uniform": uniform_assign, "range": server_range_assign}
"""The server-side (KIP-848) assignors by name."""


def assign(name: str, members: Iterable[Member], topics: Mapping[str, int], **options: Any) -> Assignment:
    """Runs the client-side assignor `name` ("range", "roundrobin", "sticky", "cooperative-sticky")."""
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise AssignmentError(f"unknown assignor {name!r}; expected one of {', '.join(ASSIGNORS)}") from None
    return fn(members, topics, **options)


# ---------------------------------------------------------------------------------------------------------------
# The consumer protocol: JoinGroup metadata in, SyncGroup assignment bytes out


@dataclass(frozen=True, slots=True)
class Subscription:
    """A decoded ConsumerProtocolSubscription (the metadata of protocol type "consumer" in JoinGroup)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = CONSUMER_PROTOCOL_VERSION


@dataclass(frozen=True, slots=True)
class ProtocolAssignment:
    """A decoded ConsumerProtocolAssignment."""

    partitions: dict[str, list[int]]
    user_data: bytes | None = None
    version: int = CONSUMER_PROTOCOL_VERSION


def _version(data: Buffer, what: str) -> int:
    mv = memoryview(data)
    if mv.nbytes < 2:
        raise AssignmentError(f"{what}: {mv.nbytes} bytes, too short for the 2-byte version")
    version = int.from_bytes(mv[:2], "big", signed=True)
    if version < 0:
        raise AssignmentError(f"{what}: unsupported version {version}")
    return version


def decode_subscription(metadata: Buffer) -> Subscription:
    """Reads a version-prefixed ConsumerProtocolSubscription. A version above 3 is read as 3 and its extra bytes
    ignored, as Kafka does; an empty rack id reads as None."""
    version = _version(metadata, "ConsumerProtocolSubscription")
    try:
        msg, _ = wire.ConsumerProtocolSubscription.decode_from(metadata, min(version, CONSUMER_PROTOCOL_VERSION), 2)
    except wire.DecodeError as exc:
        raise AssignmentError(f"malformed ConsumerProtocolSubscription v{version}: {exc}") from None
    owned: dict[str, list[int]] = {}
    for tp in msg.owned_partitions:
        owned.setdefault(tp.topic, []).extend(tp.partitions)
    return Subscription(topics=list(msg.topics), user_data=msg.user_data, owned_partitions=owned,
                        generation_id=msg.generation_id, rack_id=msg.rack_id or None, version=version)


def encode_subscription(topics: Iterable[str], *, owned: Mapping[str, Iterable[int]] | None = None,
                        generation_id: int = -1, rack_id: str | None = None, user_data: bytes | None = None,
                        version: int = CONSUMER_PROTOCOL_VERSION) -> bytes:
    """A version-prefixed ConsumerProtocolSubscription, as a consumer writes it (topics and owned sorted)."""
    if not 0 <= version <= CONSUMER_PROTOCOL_VERSION:
        raise AssignmentError(f"ConsumerProtocolSubscription version {version} is not 0-{CONSUMER_PROTOCOL_VERSION}")
    owned_tps = [wire.ConsumerProtocolSubscriptionTopicPartition(topic=t, partitions=sorted(owned[t]))
                 for t in _java_sorted(owned)] if owned else []
    msg = wire.ConsumerProtocolSubscription(topics=_java_sorted(set(topics)), user_data=user_data,
                                            owned_partitions=owned_tps, generation_id=generation_id, rack_id=rack_id)
    return version.to_bytes(2, "big") + msg.encode(version)


def encode_assignment(partitions: Mapping[str, Iterable[int]], *, user_data: bytes | None = None,
                      version: int = CONSUMER_PROTOCOL_VERSION) -> bytes:
    """A version-prefixed ConsumerProtocolAssignment (the SyncGroup assignment a consumer decodes).

    Versions 0-3 share one layout; Kafka's leader writes version 3, and so does this by default.
    """
    if not 0 <= version <= CONSUMER_PROTOCOL_VERSION:
        raise AssignmentError(f"ConsumerProtocolAssignment version {version} is not 0-{CONSUMER_PROTOCOL_VERSION}")
    tps = [wire.ConsumerProtocolAssignmentTopicPartition(topic=t, partitions=sorted(partitions[t]))
           for t in _java_sorted(partitions) if partitions[t]]
    msg = wire.ConsumerProtocolAssignment(assigned_partitions=tps, user_data=user_data)
    return version.to_bytes(2, "big") + msg.encode(version)


def decode_assignment(data: Buffer) -> ProtocolAssignment:
    """Reads a version-prefixed ConsumerProtocolAssignment (a version above 3 is read as 3)."""
    version = _version(data, "ConsumerProtocolAssignment")
    try:
        msg, _ = wire.ConsumerProtocolAssignment.decode_from(data, min(version, CONSUMER_PROTOCOL_VERSION), 2)
    except wire.DecodeError as exc:
        raise AssignmentError(f"malformed ConsumerProtocolAssignment v{version}: {exc}") from None
    parts: dict[str, list[int]] = {}
    for tp in msg.assigned_partitions:
        parts.setdefault(tp.topic, []).extend(tp.partitions)
    return ProtocolAssignment(partitions=parts, user_data=msg.user_data, version=version)


def encode_sticky_user_data(owned: Mapping[str, Iterable[int]], generation: int | None) -> bytes:
    """The user data of Kafka's eager "sticky" assignor (StickyAssignorUserData v1; v0 if generation is None)."""
    out = bytearray(len(owned).to_bytes(4, "big", signed=True))
    for topic in _java_sorted(owned):
        name = topic.encode()
        parts = list(owned[topic])
        out += len(name).to_bytes(2, "big", signed=True) + name + len(parts).to_bytes(4, "big", signed=True)
        for p in parts:
            out += int(p).to_bytes(4, "big", signed=True)
    if generation is not None:
        out += int(generation).to_bytes(4, "big", signed=True)
    return bytes(out)


def decode_sticky_user_data(data: Buffer | None) -> tuple[dict[str, list[int]], int | None] | None:
    """(owned partitions, generation or None) from sticky user data; None if there is none or it is unreadable
    (Java then treats the member as owning nothing).

    Java writes StickyAssignorUserData bare; kafka-python 3 puts a 2-byte version in front. Both are read: the
    bare layout first, as Java does, then the prefixed one.
    """
    if data is None:
        return None
    buf = bytes(data)
    if not buf:
        return None
    decoded = _sticky_user_data(buf)
    if decoded is None and len(buf) >= 2 and buf[:2] in (b"\x00\x00", b"\x00\x01"):
        decoded = _sticky_user_data(buf[2:])
    return decoded


def _sticky_user_data(buf: bytes) -> tuple[dict[str, list[int]], int | None] | None:
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(buf):
            raise ValueError("short")
        chunk = buf[pos:pos + n]
        pos += n
        return chunk

    try:
        owned: dict[str, list[int]] = {}
        n_topics = int.from_bytes(take(4), "big", signed=True)
        if n_topics < 0 or n_topics > len(buf):
            return None
        for _ in range(n_topics):
            n = int.from_bytes(take(2), "big", signed=True)
            if n < 0:
                return None
            topic = take(n).decode()
            count = int.from_bytes(take(4), "big", signed=True)
            if count < 0 or count * 4 > len(buf) - pos:
                return None
            raw = take(4 * count)
            owned.setdefault(topic, []).extend(int.from_bytes(raw[i:i + 4], "big", signed=True)
                                               for i in range(0, len(raw), 4))
        generation = int.from_bytes(take(4), "big", signed=True) if len(buf) - pos >= 4 else None
    except (ValueError, UnicodeDecodeError):
        return None
    return owned, generation


def _cooperative_generation(sub: Subscription) -> int:
    if sub.generation_id >= 0:
        return sub.generation_id
    if sub.user_data is not None and len(sub.user_data) >= 4:
        return int.from_bytes(sub.user_data[:4], "big", signed=True)
    return -1


def members_from_join(assignor: str, join_members: Iterable[Any]) -> list[Member]:
    """`Member` records from JoinGroup members (`wire.JoinGroupResponseMember`, or (member_id, instance_id,
    metadata) tuples), reading owned partitions and generations the way `assignor` does in Java: "sticky" from
    its user data, "cooperative-sticky" from the owned partitions and the generation field (v2+, else its user
    data)."""
    out = []
    for jm in join_members:
        if isinstance(jm, tuple):
            member_id, instance_id, metadata = jm
        else:
            member_id, instance_id, metadata = jm.member_id, jm.group_instance_id, jm.metadata
        try:
            sub = decode_subscription(metadata)
        except AssignmentError as exc:
            raise AssignmentError(f"member {member_id!r}: {exc}") from None
        owned: Mapping[str, list[int]] | None = None
        generation = -1
        if assignor == "sticky":
            decoded = decode_sticky_user_data(sub.user_data)
            if decoded is not None:
                owned, gen = decoded
                generation = -1 if gen is None else gen
        elif assignor == "cooperative-sticky":
            owned = sub.owned_partitions
            generation = _cooperative_generation(sub)
        out.append(Member(member_id=member_id, instance_id=instance_id, topics=sub.topics, owned=owned,
                          generation=generation, rack=sub.rack_id))
    return out


def assign_join_group(assignor: str, join_members: Iterable[Any], topics: Mapping[str, int], *,
                      partition_racks: Mapping[str, Sequence[Iterable[str]]] | None = None,
                      unknown_topics: str = "error",
                      version: int = CONSUMER_PROTOCOL_VERSION) -> dict[str, bytes]:
    """The group leader's step: JoinGroup members in, {member_id: ConsumerProtocolAssignment bytes} out.

    A Java client leader skips topics its metadata does not know; pass ``unknown_topics="ignore"`` for that.
    """
    members = members_from_join(assignor, join_members)
    if assignor == "range":
        result = range_assign(members, topics, partition_racks=partition_racks, unknown_topics=unknown_topics)
    else:
        result = assign(assignor, members, topics, unknown_topics=unknown_topics)
    return {mid: encode_assignment(parts, version=version) for mid, parts in result.items()}
