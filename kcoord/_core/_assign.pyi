"""Type stubs for kcoord._core._assign: the compiled assignor kernels and their array boundary.

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
