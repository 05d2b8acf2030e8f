"""The topic catalogue: names, ids and partition counts behind Metadata, Fetch and the server-side assignors.

kcoord stores no records: a topic here is only what a consumer group needs to know about it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Topic:
    name: str
    topic_id: bytes  # 16 bytes, random like Kafka's; kept by the store across restarts
    partitions: int


class TopicError(ValueError):
    pass


class PartitionLimitError(TopicError):
    """A topic or the catalogue would pass topic.max.partitions / max.partitions (Kafka: INVALID_PARTITIONS)."""


DEFAULT_TOPIC_MAX_PARTITIONS = 100_000
DEFAULT_MAX_PARTITIONS = 200_000


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """`orders:12` -> ("orders", 12); a bare name has one partition."""
    name, _, count = spec.partition(":")
    try:
        n = int(count) if count else 1
    except ValueError:
        raise TopicError(f"bad topic {spec!r}: expected NAME or NAME:PARTITIONS") from None
    validate_name(name)
    if n < 1:
        raise TopicError(f"bad topic {spec!r}: a topic has at least one partition")
    return name, n


def validate_name(name: str) -> None:
    # Kafka's Topic.validate: 1-249 characters of [a-zA-Z0-9._-], not "." or "..".
    if not name or len(name) > 249 or name in (".", "..") or \
            any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        raise TopicError(f"invalid topic name {name!r}")


class TopicCatalogue:
    def __init__(self, auto_create: bool = True, default_partitions: int = 1, *,
                 topic_max_partitions: int = DEFAULT_TOPIC_MAX_PARTITIONS,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS) -> None:
        self.auto_create = auto_create  # Kafka: auto.create.topics.enable
        self.default_partitions = default_partitions  # Kafka: num.partitions
        # kcoord's own bounds: what one topic, and all of them together, may have. A partition costs nothing
        # until a group or a Metadata answer spells it out, so these bound what a few bytes of request can make
        # the server build.
        self.topic_max_partitions = topic_max_partitions
        self.max_partitions = max_partitions
        self.total_partitions = 0
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        self.on_change: Callable[[Topic], None] | None = None  # the store keeps the catalogue (kcoord.store)
        self.on_delete: Callable[[Topic], None] | None = None
        self.version = 0  # moves on every change: groups compare it to notice new topics and partitions

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def create(self, name: str, partitions: int) -> Topic:
        validate_name(name)
        if name in self.by_name:
            raise TopicError(f"topic {name!r} already exists")
        if partitions < 1:
            raise TopicError(f"topic {name!r} needs at least one partition, not {partitions}")
        self.check_partitions(name, partitions, 0)
        t = Topic(name, os.urandom(16), partitions)
        self.by_name[name] = t
        self.by_id[t.topic_id] = t
        self.total_partitions += partitions
        self.version += 1
        if self.on_change is not None:
            self.on_change(t)
        return t

    def check_partitions(self, name: str, partitions: int, now: int) -> None:
        """Refuse a topic `name` going from `now` to `partitions` partitions past either bound."""
        if partitions > self.topic_max_partitions:
            raise PartitionLimitError(f"topic {name!r}: {partitions} partitions is above topic.max.partitions "
                                      f"({self.topic_max_partitions})")
        total = self.total_partitions - now + partitions
        if total > self.max_partitions:
            raise PartitionLimitError(f"topic {name!r}: {partitions} partitions would make {total} in all, above "
                                      f"max.partitions ({self.max_partitions})")

    def restore(self, t: Topic) -> None:
        """Load a stored topic (its id survives restarts, as a Kafka topic's does)."""
        old = self.by_name.pop(t.name, None)
        if old is not None:
            del self.by_id[old.topic_id]
            self.total_partitions -= old.partitions
        self.by_name[t.name] = t
        self.by_id[t.topic_id] = t
        self.total_partitions += t.partitions
        self.version += 1

    def over_limits(self) -> str | None:
        """What in the catalogue (as loaded from a store) is past the bounds now set, or None."""
        for t in self.by_name.values():
            if t.partitions > self.topic_max_partitions:
                return (f"topic {t.name!r} has {t.partitions} partitions, above topic.max.partitions "
                        f"({self.topic_max_partitions})")
        if self.total_partitions > self.max_partitions:
            return f"the topics have {self.total_partitions} partitions in all, above max.partitions ({self.max_partitions})"
        return None

    def delete(self, name: str) -> Topic:
        """Delete a topic (Kafka's DeleteTopics); a KeyError if there is none by that name."""
        t = self.by_name.pop(name)
        del self.by_id[t.topic_id]
        self.total_partitions -= t.partitions
        self.version += 1
        if self.on_delete is not None:
            self.on_delete(t)
        return t

    def grow(self, name: str, partitions: int) -> Topic:
        """Raise a topic's partition count (Kafka only ever grows it)."""
        t = self.by_name[name]
        if partitions < t.partitions:
            raise TopicError(f"topic {name!r} has {t.partitions} partitions; they can only grow")
        if partitions != t.partitions:
            self.check_partitions(name, partitions, t.partitions)
            self.total_partitions += partitions - t.partitions
            t.partitions = partitions
            self.version += 1
            if self.on_change is not None:
                self.on_change(t)
        return t

    def names_by_id(self) -> dict[bytes, str]:
        return {tid: t.name for tid, t in self.by_id.items()}
