"""Type stubs for kcoord._core._assign: the compiled assignor kernels, the KIP-848 reconciliation step, and their
array boundary.

Members are numbered by rank (Kafka's order), topics by name order; topic t owns the global partition ids
[topic_start[t], topic_start[t + 1]). kcoord.assignors is the public face.
"""

from typing import Any

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike
MODES: dict[str, int]
MAX_PARTITIONS: int

class AssignmentError(ValueError): ...

class DuplicateClaimError(AssignmentError):
    partition_id: int
    def __init__(self, msg: str, partition_id: int) -> None: ...

class Prepared:
    """A validated group in canonical form: sorted, merged subscription sets, plus the indexes kernels use."""

    topic_start: npt.NDArray[np.int64]
    member_set: npt.NDArray[np.int32]
    set_ptr: npt.NDArray[np.int64]
    set_topics: npt.NDArray[np.int32]
    @property
    def n_members(self) -> int: ...
    @property
    def n_partitions(self) -> int: ...

def prepare(partition_counts: ArrayLike, member_sets: ArrayLike, set_indptr: ArrayLike,
            set_topics: ArrayLike) -> Prepared: ...
def range_owners(prep: Prepared, member_racks: ArrayLike | None = ..., partition_rack_indptr: ArrayLike | None = ...,
                 partition_racks: ArrayLike | None = ...,
                 out: npt.NDArray[np.int32] | None = ...) -> npt.NDArray[np.int32]: ...
def roundrobin_owners(prep: Prepared, out: npt.NDArray[np.int32] | None = ...) -> npt.NDArray[np.int32]: ...
def sticky_owners(
    prep: Prepared, owned_indptr: ArrayLike | None = ..., owned_partitions: ArrayLike | None = ...,
    generations: ArrayLike | None = ..., mode: str = ..., max_passes: int = ...,
    out: npt.NDArray[np.int32] | None = ...,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8] | None]: ...
def owners_to_csr(owner: ArrayLike, n_members: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...
def intern_owned(owned: list[Any], topic_index: dict[str, int],
                 topic_start: ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...
def csr_to_dicts(indptr: ArrayLike, partitions: ArrayLike, topic_start: ArrayLike, topic_names: list[str],
                 member_ids: list[str]) -> dict[str, dict[str, list[int]]]: ...

# KIP-848 reconciliation (Kafka's CurrentAssignmentBuilder) and the partition epoch table it reads.

STABLE: int
UNREVOKED_PARTITIONS: int
UNRELEASED_PARTITIONS: int
UNKNOWN: int
FENCED_MEMBER_EPOCH: int
MEMBER_STATES: dict[int, str]

class PartitionEpochError(AssignmentError):
    partition_id: int
    epoch: int
    def __init__(self, msg: str, partition_id: int, epoch: int) -> None: ...

class PartitionEpochs:
    """Per global partition id, the epoch of the member holding it (assigned or pending revocation), -1 if free."""

    topic_start: npt.NDArray[np.int64]
    def __init__(self, topic_start: ArrayLike) -> None: ...
    @property
    def n_partitions(self) -> int: ...
    @property
    def n_topics(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, partition: int) -> int: ...
    def to_numpy(self) -> npt.NDArray[np.int32]: ...
    def add(self, partitions: ArrayLike, epoch: int) -> None: ...
    def remove(self, partitions: ArrayLike, expected_epoch: int) -> None: ...
    def grow(self, topic_start: ArrayLike) -> None: ...

class Reconciled:
    """One member after a reconciliation step (the input arrays themselves where they did not change)."""

    state: int
    member_epoch: int
    previous_member_epoch: int
    assigned: npt.NDArray[np.int32]
    pending_revocation: npt.NDArray[np.int32]
    changed: bool
    assigned_changed: bool
    error: int

def reconcile(
    epochs: PartitionEpochs, state: int, member_epoch: int, previous_member_epoch: int, target_epoch: int,
    assigned: ArrayLike, pending_revocation: ArrayLike, target: ArrayLike, subscribed_topics: ArrayLike,
    owned: ArrayLike | None, subscription_changed: bool = ...,
) -> Reconciled: ...
def step(
    epochs: PartitionEpochs, state: int, member_epoch: int, previous_member_epoch: int, target_epoch: int,
    assigned: ArrayLike, pending_revocation: ArrayLike, target_indptr: ArrayLike, target_flat: ArrayLike,
    target_row: int, subscribed_topics: ArrayLike, owned: Any, by_topic_id: dict[bytes, int] | None = ...,
    subscription_changed: bool = ...,
) -> Reconciled: ...
