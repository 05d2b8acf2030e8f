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
    def __init__(self, auto_create: bool = True, default_partitions: int = 1) -> None:
        self.auto_create = auto_create  # Kafka: auto.create.topics.enable
        self.default_partitions = default_partitions  # Kafka: num.partitions
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        self.on_change: Callable[[Topic], None] | None = None  # the store keeps the catalogue (kcoord.store)
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
        t = Topic(name, os.urandom(16), partitions)
        self.by_name[name] = t
        self.by_id[t.topic_id] = t
        self.version += 1
        if self.on_change is not None:
            self.on_change(t)
        return t

    def restore(self, t: Topic) -> None:
        """Load a stored topic (its id survives restarts, as a Kafka topic's does)."""
        old = self.by_name.pop(t.name, None)
        if old is not None:
            del self.by_id[old.topic_id]
        self.by_name[t.name] = t
        self.by_id[t.topic_id] = t
        self.version += 1

    def grow(self, name: str, partitions: int) -> Topic:
        """Raise a topic's partition count (Kafka only ever grows it)."""
        t = self.by_name[name]
        if partitions < t.partitions:
            raise TopicError(f"topic {name!r} has {t.partitions} partitions; they can only grow")
        if partitions != t.partitions:
            t.partitions = partitions
            self.version += 1
            if self.on_change is not None:
                self.on_change(t)
        return t

    def names_by_id(self) -> dict[bytes, str]:
        return {tid: t.name for tid, t in self.by_id.items()}
