"""kcoord's own Kafka message definitions and the generator that turns them into the compiled codec.

`MESSAGES` lists every definition in a fixed order (the generator relies on it for stable output).
"""

from __future__ import annotations

from . import broker, consumer, group, headers, records
from .dsl import Field, Message, Struct, Versions

MESSAGES: tuple[Message, ...] = tuple(
    obj
    for mod in (headers, broker, group, consumer, records)
    for obj in vars(mod).values()
    if isinstance(obj, Message)
)
BY_NAME: dict[str, Message] = {m.name: m for m in MESSAGES}
REQUESTS: dict[int, Message] = {m.api_key: m for m in MESSAGES if m.kind == "request"}
RESPONSES: dict[int, Message] = {m.api_key: m for m in MESSAGES if m.kind == "response"}

__all__ = ["BY_NAME", "Field", "MESSAGES", "Message", "REQUESTS", "RESPONSES", "Struct", "Versions"]
