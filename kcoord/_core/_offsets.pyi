"""Type stubs for kcoord._core._offsets (the offsets' compiled hot path: OffsetCommit and OffsetFetch)."""

from typing import Any

# A commit of more partitions than this takes the general path.
QUICK_COMMIT_MAX: int

class OffsetsCore:
    # group id -> {(topic, partition): (offset, leader epoch, metadata, commit timestamp ms)}
    by_group: dict[str, dict[tuple[str, int], tuple[int, int, str | None, int]]]
    groups: Any  # Mapping[str, Group]: the router's groups by id
    create_group: Any  # Callable[[str], Group]
    store: Any  # RecordSink
    topics: Any  # TopicCatalogue
    clock: Any  # Clock
    metadata_max_bytes: int
    message_max_bytes: int
    commit_count: int
    planned: Any  # (OffsetCommitRequest, CommitPlan) | None
    quick: bool  # answer what the compiled path can (False: the general path answers everything)
    def handle_commit(self, req: Any, version: int, client_id: str = ..., client_host: str = ...) -> Any: ...
    def quick_commit(self, req: Any, version: int) -> Any: ...
    def handle_fetch(self, req: Any, version: int, client_id: str = ..., client_host: str = ...) -> Any: ...
    def quick_fetch(self, req: Any, version: int) -> Any: ...
    # the general path, which the Python subclass (kcoord.offsets.Offsets) provides
    def offset_commit(self, req: Any, version: int, client_id: str = ..., client_host: str = ...) -> Any: ...
    def offset_fetch(self, req: Any, version: int, client_id: str = ..., client_host: str = ...) -> Any: ...
