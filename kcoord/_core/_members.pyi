"""Type stubs for kcoord._core._members (compiled member tables and the deadline heap)."""

from collections.abc import Callable
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

class DeadlineHeap:
    keys_in_use: int
    def __init__(self, capacity: int = ...) -> None: ...
    def __len__(self) -> int: ...
    def new_key(self) -> int: ...
    def release_key(self, key: int) -> None: ...
    def schedule(self, key: int, deadline: int) -> None: ...
    def cancel(self, key: int) -> bool: ...
    def is_scheduled(self, key: int) -> bool: ...
    def deadline_of(self, key: int) -> int: ...
    def next_deadline(self) -> int | None: ...
    def pop_due(self, now: int) -> int: ...
    def pop_expired(self, now: int) -> list[int]: ...

class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[Any]  # JoinGroupRequestProtocol
    assignment: bytes
    join_reply: Any
    sync_reply: Any
    is_new: bool
    timer: int
    is_static: bool
    awaiting_join: bool
    awaiting_sync: bool
    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                 protocols: list[Any]) -> None: ...
    def metadata_for(self, protocol: str | None) -> bytes | None: ...
    def same_protocols(self, protocols: list[Any]) -> bool: ...

class MemberTable:
    members: dict[str, ClassicMember]
    static_members: dict[str, str]
    protocol_support: dict[str, int]
    pending: dict[str, int]
    num_awaiting_join: int
    def __len__(self) -> int: ...
    def __contains__(self, member_id: object) -> bool: ...
    def __iter__(self) -> Any: ...
    def get(self, member_id: str) -> ClassicMember | None: ...
    def static_member_id(self, instance_id: str | None) -> str | None: ...
    def add(self, m: ClassicMember) -> None: ...
    def remove(self, member_id: str) -> ClassicMember: ...
    def set_protocols(self, m: ClassicMember, protocols: list[Any]) -> None: ...
    def set_join_reply(self, m: ClassicMember, reply: Any) -> Any: ...
    def rename(self, old_id: str, m: ClassicMember) -> None: ...
    def supports(self, protocol_type: str, group_protocol_type: str | None, protocols: list[Any]) -> bool: ...
    def validate(self, member_id: str, instance_id: str | None) -> int: ...

def monotonic_ms() -> int: ...

class TimersCore:
    """Subclassed by kcoord.timers.Timers."""
    @property
    def heap(self) -> DeadlineHeap: ...
    @property
    def clock(self) -> Any: ...  # kcoord.timers.Clock
    actions: list[Callable[[int], None] | None]
    def __init__(self, clock: Any) -> None: ...
    def arm(self, key: int, delay_ms: int, action: Callable[[int], None] | None = None) -> None: ...
    def remaining_ms(self, key: int) -> int: ...

# KIP-848 consumer groups and connect groups: members, and the compiled part of each group (subclassed in Python).

CONSUMER_STABLE: int
EMPTY_IDS: npt.NDArray[np.int32]  # read-only, empty

class ModernMember:
    COPIED: ClassVar[tuple[str, ...]]
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: npt.NDArray[np.int32]
    pending: npt.NDArray[np.int32]
    session_key: int
    rebalance_armed_epoch: int
    quiet_response: Any
    quiet_epoch: int
    def __init__(self, member_id: str) -> None: ...
    def copy_as(self, member_id: str) -> Self: ...

class ModernGroupCore:
    members: dict[str, Any]  # member id -> the type's ModernMember
    group_epoch: int
    assignment_epoch: int
    @property
    def heartbeat_interval_ms(self) -> int: ...
    def init_core(self, timers: TimersCore, session_ms: int, interval_ms: int, response: Any) -> None: ...
    def quick_heartbeat(self, req: Any, client_id: str, client_host: str) -> Any: ...

class ConsumerMember(ModernMember):
    rack_id: str | None
    subscribed: tuple[str, ...]
    topic_names: tuple[str, ...]
    regex: str | None
    server_assignor: str | None
    topics: npt.NDArray[np.int32]
    topics_key: tuple[int, ...]
    classic: Any  # ClassicMemberMetadata, or None for a member speaking the consumer protocol

class ConsumerGroupCore(ModernGroupCore):
    members: dict[str, ConsumerMember]  # type: ignore[assignment]
    catalogue_version: int
    catalogue: Any
    # ConsumerGroup.validate_offset_commit compiled (the offsets' hot path asks it once a commit)
    def quick_validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                                     version: int = 9) -> int: ...

class ConnectMember(ModernMember):
    assignors: tuple[Any, ...]  # (name, minimum_version, maximum_version, reason, version, metadata) each
    joined: int
    delivered: tuple[int, bytes] | None

class ConnectGroupCore(ModernGroupCore):
    members: dict[str, ConnectMember]  # type: ignore[assignment]
    assignor_version: int

def intern_known_tasks(entries: list[Any], start: int, by_name: dict[str, dict[int, int]], out: list[int]) -> int: ...
