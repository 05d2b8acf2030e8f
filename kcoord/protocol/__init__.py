"""kcoord's own Kafka message definitions and the generator that turns them into the compiled codec.

`MESSAGES` lists every definition in a fixed order (the generator relies on it for stable output).
"""

from __future__ import annotations

from . import broker, connect, consumer, group, headers, records, security
from .dsl import Field, Message, Struct, Versions

MESSAGES: tuple[Message, ...] = tuple(
    obj
    for mod in (headers, broker, group, consumer, records, connect, security)
    for obj in vars(mod).values()
    if isinstance(obj, Message)
)
BY_NAME: dict[str, Message] = {m.name: m for m in MESSAGES}
# (every request and response has an API key; only data structures have none)
REQUESTS: dict[int, Message] = {m.api_key: m for m in MESSAGES if m.kind == "request" and m.api_key is not None}
RESPONSES: dict[int, Message] = {m.api_key: m for m in MESSAGES if m.kind == "response" and m.api_key is not None}
# kcoord's own messages (connect groups): no Kafka schema exists for them; the conformance test checks they share
# neither a name nor an API key with Kafka's.
KCOORD_OWN: frozenset[str] = frozenset(m.name for m in vars(connect).values() if isinstance(m, Message))

__all__ = ["BY_NAME", "KCOORD_OWN", "Field", "MESSAGES", "Message", "REQUESTS", "RESPONSES", "Struct", "Versions"]
