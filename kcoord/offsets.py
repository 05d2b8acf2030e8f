"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete, kept by group id whatever the group's type.

As in Kafka's OffsetMetadataManager, offsets are not a group's state: a group of one type can be replaced by one
of another (an empty consumer group by a classic one on JoinGroup) and its offsets stay. The group, when there
is one, only decides whether a member may commit (`validate_offset_commit`), fetch or delete. Each accepted
commit is staged as an OffsetCommitKey/Value record before the response that confirms it leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from functools import partial

from . import errors as E
from . import records as R
from . import wire
from ._core._offsets import OffsetsCore
from .config import DEFAULT_MESSAGE_MAX_BYTES
from .groups.base import Group, RecordSink
from .reply import Deferred, release
from .timers import Clock
from .topics import TopicCatalogue

NO_OFFSET = -1

# (offset, leader epoch, metadata, commit timestamp ms), as OffsetCommitValue v3 keeps it.
Committed = tuple[int, int, str | None, int]


def java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units, what Kafka compares with offset.metadata.max.bytes (despite the
    name: "é" counts 1, an emoji outside the BMP 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


DEFER_ABOVE = 4096  # a refusal of more partitions than this is filled in by a Deferred (off the loop when large)


class CommitPlan:
    """One OffsetCommit as the catalogue sees it (Offsets.plan_commit): the response's topics (the partitions the
    catalogue refuses already answered), the partitions that reach the group with their response entries, and the
    records the commit would write with their size."""

    __slots__ = ("topics", "valid", "accepted", "size", "count")

    def __init__(self, topics: list, valid: list, count: int) -> None:
        self.topics = topics
        self.valid = valid
        self.accepted: dict[tuple[str, int], Committed | None] = {}
        self.size = 0
        self.count = count  # partitions in the request

    def answer(self, error: int = E.NONE) -> wire.OffsetCommitResponse:
        """The response; when the group (or the size bound) refuses the commit, every partition that reached the
        group answers `error`."""
        if error:
            for rp, *_ in self.valid:
                rp.error_code = error
        return wire.OffsetCommitResponse(topics=self.topics)

    def dispose(self, req: wire.OffsetCommitRequest) -> None:
        """Empty the request's and the answer's partition lists (Deferred.dispose), once the answer is encoded."""
        release(self.valid)
        for t in (*req.topics, *self.topics):
            parts, t.partitions = t.partitions, []
            release(parts)
        self.accepted = {}


class Offsets(OffsetsCore):
    """Committed offsets by group id. OffsetCommit and OffsetFetch are answered by the compiled quick path
    (`OffsetsCore.handle_commit`, `handle_fetch`: the common commit, every fetch) when `quick` is set, and by
    `offset_commit` / `offset_fetch` here otherwise: the general path, which is also the quick path's oracle."""

    def __init__(self, groups: Mapping[str, Group], create_group: Callable[[str], Group], store: RecordSink,
                 topics: TopicCatalogue, clock: Clock, metadata_max_bytes: int,
                 message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES) -> None:
        self.groups = groups  # the router's groups by id
        self.create_group = create_group  # the group a simple consumer's first commit makes (Kafka: an Empty classic)
        self.store = store
        self.topics = topics
        self.clock = clock
        self.metadata_max_bytes = metadata_max_bytes
        self.message_max_bytes = message_max_bytes  # what one commit's records may hold (Kafka: message.max.bytes)
        self.by_group = {}
        self.commit_count = 0  # offsets accepted by OffsetCommit since start (Kafka's offset-commit-count)
        self.expired_count = 0  # offsets expired by retention since start (Kafka's offset-expiration-count)
        self.handlers: dict[int, Callable[..., Deferred | wire.Message]] = {
                         wire.OffsetCommitRequest.API_KEY: self.handle_commit,
                         wire.OffsetFetchRequest.API_KEY: self.handle_fetch,
                         wire.OffsetDeleteRequest.API_KEY: self.offset_delete}
        self.planned = None  # (request, CommitPlan) made by `prepare` off the loop
        self._replay_group: str | None = None
        self._replay_into: dict[tuple[str, int], Committed] = {}

    def committed(self, group_id: str) -> dict[tuple[str, int], Committed]:
        """The group's committed offsets by (topic, partition) (empty if it has none)."""
        return self.by_group.get(group_id, {})

    def count(self) -> int:
        return sum(map(len, self.by_group.values()))

    def _write(self, group_id: str, changes: dict[tuple[str, int], Committed | None]) -> None:
        """Stage the changes (None: delete) and apply them; staged first, so nothing is confirmed before it is
        durable."""
        store = self.store
        if store.persistent:
            for (topic, partition), v in changes.items():
                store.stage(R.offset_key(group_id, topic, partition), None if v is None else R.offset_value(*v))
        mine = self.by_group.setdefault(group_id, {})
        for key, v in changes.items():
            if v is None:
                del mine[key]
            else:
                mine[key] = v
        if not mine:
            del self.by_group[group_id]

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups: every committed offset of the group goes (tombstones)."""
        mine = self.by_group.get(group_id)
        if mine:
            self._write(group_id, dict.fromkeys(list(mine)))

    def forget_topic(self, name: str) -> int:
        """A deleted topic's committed offsets go from every group (tombstones), as Kafka's coordinator removes
        them when partitions are deleted. Returns how many went."""
        gone = 0
        for group_id, mine in list(self.by_group.items()):
            keys = [k for k in mine if k[0] == name]
            if keys:
                self._write(group_id, dict.fromkeys(keys))
                gone += len(keys)
        return gone

    def expire(self, group_id: str, keys: Iterable[tuple[str, int]], base_ms: int | None, kept: Container[str],
               now_ms: int, retention_ms: int) -> int:
        """Kafka's OffsetMetadataManager.cleanupExpiredOffsets over `keys` of one group (the caller takes a long
        group in slices): an offset expires (a tombstone) when `retention_ms` have passed since `base_ms`, or since
        its own commit timestamp when `base_ms` is None (OffsetExpirationConditionImpl: now - base >= retention),
        unless its topic is in `kept` (one the group subscribes to). Returns how many expired."""
        mine = self.by_group.get(group_id)
        if not mine or (base_ms is not None and now_ms - base_ms < retention_ms):
            return 0
        gone: dict[tuple[str, int], Committed | None] = {}
        for key in keys:
            v = mine.get(key)
            if v is not None and key[0] not in kept and now_ms - (v[3] if base_ms is None else base_ms) >= retention_ms:
                gone[key] = None
        if gone:
            self._write(group_id, gone)
            self.expired_count += len(gone)
        return len(gone)

    def _topic_key(self, name: str, topic_id: bytes, version: int, id_version: int) -> str | None:
        if version >= id_version:
            t = self.topics.by_id.get(topic_id)
            return t.name if t is not None else None
        return name

    # ---- OffsetCommit -------------------------------------------------------------------------------------

    def plan_commit(self, req: wire.OffsetCommitRequest, version: int) -> CommitPlan:
        """What the catalogue says of an OffsetCommit before its group is asked (safe beside the loop: it reads the
        catalogue and the clock only; the server makes it on its worker for a large request, see `prepare`).

        Kafka's API layer first (KafkaApis.handleOffsetCommitRequest): a topic the catalogue does not have, or a
        partition the topic does not have, is UNKNOWN_TOPIC_OR_PARTITION (from v10, an unknown topic id is
        UNKNOWN_TOPIC_ID), whatever the group would say; only the rest reach the group. Of those, metadata above
        offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE (unless the group refuses the commit), and the rest
        are the records the commit would write."""
        topics = []
        valid: list[tuple[wire.OffsetCommitResponsePartition, wire.OffsetCommitRequestPartition, str, int]] = []
        group_bytes = R.OFFSET_RECORD_FIXED + R.utf8_len(req.group_id)
        for t in req.topics:
            name = self._topic_key(t.name, t.topic_id, version, 10)
            topic = self.topics.get(name) if name is not None else None
            if name is None or topic is None:
                err = E.UNKNOWN_TOPIC_ID if name is None else E.UNKNOWN_TOPIC_OR_PARTITION
                parts = [wire.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err)
                         for p in t.partitions]
            else:
                count, parts = topic.partitions, []
                record_bytes = group_bytes + R.utf8_len(name)  # an OffsetCommit record's bytes but its metadata
                for p in t.partitions:
                    rp = wire.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=E.NONE)
                    if 0 <= p.partition_index < count:
                        valid.append((rp, p, name, record_bytes))
                    else:
                        rp.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(rp)
            topics.append(wire.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=parts))
        plan = CommitPlan(topics, valid, sum(len(t.partitions) for t in topics))
        if not valid:
            return plan
        accepted = plan.accepted
        now = self.clock.wall_ms()  # the commit timestamp Kafka records
        limit = self.metadata_max_bytes
        size = 0  # the records' key and value bytes, compared with message.max.bytes
        for rp, p, name, record_bytes in valid:
            meta = p.committed_metadata
            if meta:
                if java_length(meta) > limit:
                    rp.error_code = E.OFFSET_METADATA_TOO_LARGE  # unless the group refuses the whole commit
                    continue
                record_bytes += R.utf8_len(meta)
            # a null metadata is kept as "" (Kafka's OffsetAndMetadata.NoMetadata), as the record keeps it
            accepted[(name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch, meta or "", now)
            size += record_bytes
        plan.size = size
        return plan

    def prepare(self, req: wire.OffsetCommitRequest, version: int) -> CommitPlan:
        """The request's plan, made on the server's worker thread; the server hands it back as `planned` (the
        request and its plan) while it calls `offset_commit` with that request on the loop."""
        return self.plan_commit(req, version)

    def offset_commit(self, req: wire.OffsetCommitRequest, version: int, client_id: str = "",
                      client_host: str = "") -> wire.OffsetCommitResponse | Deferred:
        planned = self.planned
        plan = planned[1] if planned is not None and planned[0] is req else None
        if plan is not None and any(self.topics.get(name) is None for name in {k[0] for k in plan.accepted}):
            plan = None  # a topic went between the plan (off the loop) and now: the catalogue is asked again
        if plan is None:
            plan = self.plan_commit(req, version)
        if not plan.valid:
            return Deferred(plan.answer, partial(plan.dispose, req)) if plan.count > DEFER_ABOVE else plan.answer()
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        g = None
        if not req.group_id:
            error = E.INVALID_GROUP_ID
        else:
            g = self.groups.get(req.group_id)
            if g is None:
                # a simple consumer or an admin commits without a group: an Empty classic group is made below, if
                # the commit is taken (it would answer NONE)
                error = E.NONE if generation < 0 else E.ILLEGAL_GENERATION
            else:
                error = g.validate_offset_commit(req.member_id if version >= 1 else "", req.group_instance_id,
                                                 generation, version)
        if not error and plan.size > self.message_max_bytes:
            # Kafka's coordinator writes a commit's records as one batch; one above the offsets topic's
            # max.message.bytes fails whole, and Kafka 4's GroupCoordinatorService answers every partition of it
            # UNKNOWN_SERVER_ERROR (CoordinatorOperationExceptionHelper maps RecordTooLargeException so).
            error = E.UNKNOWN_SERVER_ERROR
        if not error:
            if g is None:
                self.create_group(req.group_id)
            if plan.accepted:
                self._write(req.group_id, plan.accepted)
                self.commit_count += len(plan.accepted)
        if plan.count > DEFER_ABOVE:  # a long answer: made (and the request freed) off the loop
            return Deferred(partial(plan.answer, error), partial(plan.dispose, req))
        return plan.answer(error)

    # ---- OffsetFetch --------------------------------------------------------------------------------------

    def _fetch_partitions(self, committed: dict, name: str | None, partitions, partition_cls) -> list:
        out = []
        for idx in partitions:
            off = committed.get((name, idx)) if name is not None else None
            if off is None:
                out.append(partition_cls(partition_index=idx, committed_offset=NO_OFFSET, committed_leader_epoch=-1,
                                         metadata="", error_code=E.NONE))
            else:
                out.append(partition_cls(partition_index=idx, committed_offset=off[0], committed_leader_epoch=off[1],
                                         metadata=off[2], error_code=E.NONE))
        return out

    @staticmethod
    def _all_committed(committed: dict) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for (name, idx) in sorted(committed):
            topics.setdefault(name, []).append(idx)
        return topics

    def offset_fetch(self, req: wire.OffsetFetchRequest, version: int, client_id: str = "",
                     client_host: str = "") -> wire.OffsetFetchResponse:
        if version <= 7:
            committed = self.committed(req.group_id)
            if req.topics is None:
                wanted = list(self._all_committed(committed).items())
            else:
                wanted = [(t.name, t.partition_indexes) for t in req.topics]
            topics = [wire.OffsetFetchResponseTopic(
                name=name, partitions=self._fetch_partitions(committed, name, parts, wire.OffsetFetchResponsePartition))
                for name, parts in wanted]
            error = E.INVALID_GROUP_ID if not req.group_id else E.NONE
            return wire.OffsetFetchResponse(topics=topics, error_code=error)
        groups = []
        seen: set[str] = set()
        for rg in req.groups:
            if rg.group_id in seen:  # each group once: a repeated id cannot multiply the answer
                continue
            seen.add(rg.group_id)
            error = E.INVALID_GROUP_ID if not rg.group_id else E.NONE
            g = self.groups.get(rg.group_id)
            if not error and g is not None and version >= 9:
                refused = g.validate_offset_fetch(rg.member_id, rg.member_epoch)
                if refused:
                    groups.append(wire.OffsetFetchResponseGroup(group_id=rg.group_id, topics=[], error_code=refused))
                    continue
            committed = self.committed(rg.group_id)
            wanted_ids: list[tuple[str | None, bytes, list[int]]]
            if rg.topics is None:
                wanted_ids = [(name, t.topic_id if (t := self.topics.get(name)) else wire.ZERO_UUID, parts)
                              for name, parts in self._all_committed(committed).items()]
            else:
                wanted_ids = [(self._topic_key(t.name, t.topic_id, version, 10), t.topic_id, t.partition_indexes)
                              for t in rg.topics]
            group_topics = [wire.OffsetFetchResponseTopics(
                name=name or "", topic_id=tid, partitions=self._fetch_partitions(
                    committed, name, parts, wire.OffsetFetchResponsePartitions))
                for name, tid, parts in wanted_ids]
            groups.append(wire.OffsetFetchResponseGroup(group_id=rg.group_id, topics=group_topics, error_code=error))
        return wire.OffsetFetchResponse(groups=groups)

    # ---- OffsetDelete -------------------------------------------------------------------------------------

    def offset_delete(self, req: wire.OffsetDeleteRequest, version: int, client_id: str = "",
                      client_host: str = "") -> wire.OffsetDeleteResponse:
        if not req.group_id:
            return wire.OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID)
        g = self.groups.get(req.group_id)
        error = g.validate_offset_delete() if g is not None else E.GROUP_ID_NOT_FOUND
        if error or g is None:
            return wire.OffsetDeleteResponse(error_code=error)
        subscribed = g.subscribed_topics()
        committed = self.committed(req.group_id)
        topics = []
        removed: dict[tuple[str, int], Committed | None] = {}
        for t in req.topics:
            parts = []
            # Kafka's API layer (KafkaApis.handleOffsetDeleteRequest): a topic or partition the catalogue does not
            # have is UNKNOWN_TOPIC_OR_PARTITION before the group is asked
            topic = self.topics.get(t.name)
            count = topic.partitions if topic is not None else 0
            for p in t.partitions:
                if not 0 <= p.partition_index < count:
                    err = E.UNKNOWN_TOPIC_OR_PARTITION
                elif t.name in subscribed:
                    err = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    err = E.NONE
                    if (t.name, p.partition_index) in committed:
                        removed[(t.name, p.partition_index)] = None
                parts.append(wire.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=err))
            topics.append(wire.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        if removed:
            self._write(req.group_id, removed)
        return wire.OffsetDeleteResponse(error_code=E.NONE, topics=topics)

    # ---- replay -------------------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes) -> None:
        """Apply one stored OffsetCommitKey/Value. Keys come in key order, so one group's offsets arrive together:
        the common case (a v1 key with a v3 value) is decoded without the general record dispatch."""
        if key[:2] == b"\x00\x01" and value[:2] == b"\x00\x03":
            try:
                k, kend = wire.OffsetCommitKey.decode_from(key, 1, 2)
                v, vend = wire.OffsetCommitValue.decode_from(value, 3, 2)
            except wire.DecodeError:
                kend = vend = -1
            if kend != len(key) or vend != len(value):
                R.decode(key, value)  # raises, naming the record
        else:
            rec = R.decode(key, value)
            k, v = rec.key, rec.value
        if k.group != self._replay_group:
            self._replay_group, self._replay_into = k.group, self.by_group.setdefault(k.group, {})
        self._replay_into[(k.topic, k.partition)] = (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)

    def replay_done(self) -> None:
        self._replay_group, self._replay_into = None, {}
