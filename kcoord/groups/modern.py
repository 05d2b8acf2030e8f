"""What the modern (KIP-848 style) group types share: every member's target assignment as one CSR over interned
integer unit ids (a consumer group's partitions; a connect group's connectors and tasks), and the vectorized
operations the target computation needs. The member step itself is compiled (kcoord._core._assign.step over the
partition epoch table, PartitionEpochs), and is shared the same way: it only sees integer ids.
"""

from __future__ import annotations

import numpy as np

from .._core._members import EMPTY_IDS

_NONE = EMPTY_IDS


def csr_take(indptr: np.ndarray, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the given rows, in that order; a row of -1 is empty. Vectorized: no loop over rows."""
    valid = rows >= 0
    starts = np.zeros(rows.shape[0], dtype=np.int64)
    lens = np.zeros(rows.shape[0], dtype=np.int64)
    starts[valid] = indptr[rows[valid]]
    lens[valid] = indptr[rows[valid] + 1] - starts[valid]
    out_indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lens, out=out_indptr[1:])
    total = int(out_indptr[-1])
    if total == 0:
        return out_indptr, _NONE
    idx = np.repeat(starts - out_indptr[:-1], lens) + np.arange(total, dtype=np.int64)
    return out_indptr, flat[idx]


def csr_changed(a_indptr: np.ndarray, a: np.ndarray, b_indptr: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which rows differ between two CSRs with the same rows (a bool per row)."""
    a_len, b_len = np.diff(a_indptr), np.diff(b_indptr)
    changed = a_len != b_len
    same = np.flatnonzero(~changed & (a_len > 0))
    if same.shape[0]:
        lens = a_len[same]
        rel = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        differ = a[np.repeat(a_indptr[same], lens) + rel] != b[np.repeat(b_indptr[same], lens) + rel]
        if differ.any():
            changed[same[np.unique(np.repeat(np.arange(same.shape[0]), lens)[differ])]] = True
    return changed


class TargetAssignment:
    """Every member's target as one CSR over the group's partition ids, rows in the order of the last computation,
    so the next computation takes the current targets (the uniform assignor's stickiness) without a loop."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []
        self.row: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.flat = _NONE

    def get(self, member_id: str, default: np.ndarray = _NONE) -> np.ndarray:
        r = self.row.get(member_id)
        return default if r is None else self.flat[self.indptr[r]:self.indptr[r + 1]]

    def __getitem__(self, member_id: str) -> np.ndarray:
        r = self.row[member_id]
        return self.flat[self.indptr[r]:self.indptr[r + 1]]

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.row

    def __iter__(self):
        return iter(list(self.row))

    def pop(self, member_id: str) -> None:
        r = self.row.pop(member_id, None)
        if r is not None:
            self.ids[r] = None

    def rename(self, old: str, new: str) -> None:
        r = self.row.pop(old, None)
        if r is not None:
            self.row[new] = r
            self.ids[r] = new

    def rows_for(self, member_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The targets of these members, in this order, as a CSR (an empty row for a member without one)."""
        if member_ids == self.ids:
            return self.indptr, self.flat
        n = len(self.ids)
        if member_ids[:n] == self.ids:  # members only joined since: append empty rows
            indptr = np.concatenate([self.indptr, np.full(len(member_ids) - n, self.indptr[-1], dtype=np.int64)])
            return indptr, self.flat
        get = self.row.get
        rows = np.fromiter((get(m, -1) for m in member_ids), dtype=np.int64, count=len(member_ids))
        return csr_take(self.indptr, self.flat, rows)

    def set(self, member_ids: list[str], indptr: np.ndarray, flat: np.ndarray) -> None:
        if member_ids != self.ids:
            self.ids = list(member_ids)
            self.row = {m: i for i, m in enumerate(member_ids)}
        self.indptr, self.flat = indptr, flat

    def load(self, targets: dict[str, np.ndarray]) -> None:
        ids = list(targets)
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([targets[m].shape[0] for m in ids], out=indptr[1:])
        self.set(ids, indptr, np.concatenate([targets[m] for m in ids]).astype(np.int32) if ids else _NONE)
