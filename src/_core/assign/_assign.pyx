# Compiled partition assignors: range (with KIP-881 racks), round-robin, sticky, cooperative-sticky and the
# server-side uniform assignor, as kernels over interned integer ids and flat arrays.
#
# Every kernel is `noexcept nogil` and runs with the GIL released; it reads the interned group (group.pxi) and
# writes one owner per global partition id. The functions at the bottom of this file are the only place that
# touches Python objects: they validate numpy inputs, call a kernel, and convert to and from Python mappings.
# kcoord/assignors.py is the public face; this module has no knowledge of names, only of numbers.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

from assign_util cimport *

import gc

import numpy as np

include "group.pxi"
include "range.pxi"
include "roundrobin.pxi"
include "sticky.pxi"


class AssignmentError(ValueError):
    """Input no assignor can work with: an unknown topic, a negative partition count, a duplicate member id, ..."""


class DuplicateClaimError(AssignmentError):
    """Two members hold the same partition in a server-side current assignment."""

    def __init__(self, msg, partition_id):
        super().__init__(msg)
        self.partition_id = partition_id


MODES = {"sticky": MODE_STICKY, "cooperative-sticky": MODE_COOPERATIVE, "uniform": MODE_UNIFORM}
MAX_PARTITIONS = 2**31 - 1


cdef inline const int64_t* _p64(const int64_t[::1] a) noexcept:
    """The data pointer of a, or NULL when a is None or empty (call with the GIL held)."""
    return &a[0] if a is not None and a.shape[0] > 0 else NULL


cdef inline const int32_t* _p32(const int32_t[::1] a) noexcept:
    """The data pointer of a, or NULL when a is None or empty (call with the GIL held)."""
    return &a[0] if a is not None and a.shape[0] > 0 else NULL


cdef object _ints(object x, object dtype, str name):
    """A contiguous one-dimensional integer array of `dtype`, or AssignmentError naming what is wrong."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype == dtype and x.flags.c_contiguous:
        return x  # already what the kernels read: no copy, and every value fits
    a = np.asarray(x)
    if a.ndim != 1:
        raise AssignmentError(f"{name} must be one-dimensional, not of shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=dtype)
    if a.dtype.kind not in "iu":
        raise AssignmentError(f"{name} must hold integers, not {a.dtype}")
    info = np.iinfo(dtype)
    if a.min() < info.min or a.max() > info.max:
        raise AssignmentError(f"{name} holds values outside {np.dtype(dtype).name}")
    return np.ascontiguousarray(a, dtype=dtype)


cdef object _indptr(object x, Py_ssize_t rows, Py_ssize_t nnz, str name):
    a = _ints(x, np.int64, name)
    if a.shape[0] != rows + 1:
        raise AssignmentError(f"{name} must have {rows + 1} entries (one per row, plus one), not {a.shape[0]}")
    if a[0] != 0 or a[rows] != nnz or (rows > 0 and np.any(a[1:] < a[:rows])):
        raise AssignmentError(f"{name} must rise from 0 to {nnz} without falling")
    return a


cdef object _out(object out, Py_ssize_t n):
    """The caller's owner array (int32, contiguous, one entry per partition) or a new one."""
    if out is None:
        return np.empty(n, dtype=np.int32)
    if not (isinstance(out, np.ndarray) and out.ndim == 1 and out.dtype == np.int32 and out.flags.c_contiguous
            and out.flags.writeable and out.shape[0] == n):
        raise AssignmentError(f"out must be a writable contiguous int32 array of {n} entries (one per partition)")
    return out


cdef class Prepared:
    """A validated, canonical, indexed group (see group.pxi); owns the arrays its Group points into."""

    cdef readonly object topic_start
    cdef readonly object member_set
    cdef readonly object set_ptr
    cdef readonly object set_topics
    cdef Group g
    cdef Index ix
    cdef bint indexed

    def __dealloc__(self):
        if self.indexed:
            index_free(&self.ix)

    @property
    def n_members(self):
        return self.g.n_members

    @property
    def n_partitions(self):
        return int(self.topic_start[self.g.n_topics])


def prepare(partition_counts, member_sets, set_indptr, set_topics):
    """Validates the interned arrays and returns them in canonical form (sorted, merged subscription sets)."""
    cdef Prepared prep = Prepared()
    cdef const int64_t[::1] ts
    cdef const int32_t[::1] ms
    cdef const int64_t[::1] sp
    cdef const int32_t[::1] st
    cdef int32_t[::1] oms
    cdef int64_t[::1] osp
    cdef int32_t[::1] ost
    cdef int32_t n_sets = 0
    cdef const int32_t* p_ms
    cdef const int32_t* p_st
    cdef int32_t* p_oms
    cdef int32_t* p_ost
    cdef int rc
    counts = _ints(partition_counts, np.int64, "partition_counts")
    if counts.size and counts.min() < 0:
        t = int(np.flatnonzero(counts < 0)[0])
        raise AssignmentError(f"topic {t} has a negative partition count ({int(counts[t])})")
    topic_start = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=topic_start[1:])
    total = int(topic_start[counts.shape[0]])
    if total > MAX_PARTITIONS:
        raise AssignmentError(f"{total} partitions in one group; at most {MAX_PARTITIONS}")
    msets = _ints(member_sets, np.int32, "member_sets")
    topics = _ints(set_topics, np.int32, "set_topics")
    n_in = np.asarray(set_indptr).shape[0] - 1 if np.ndim(set_indptr) == 1 else -1
    if n_in < 0:
        raise AssignmentError("set_indptr must be one-dimensional with one entry per set, plus one")
    sptr = _indptr(set_indptr, n_in, topics.shape[0], "set_indptr")
    if msets.size and (msets.min() < -1 or msets.max() >= n_in):
        raise AssignmentError(f"member_sets must hold -1 (no subscription) or a set index below {n_in}")
    if topics.size and (topics.min() < 0 or topics.max() >= counts.shape[0]):
        raise AssignmentError(f"set_topics must hold topic indexes below {counts.shape[0]}")
    if msets.shape[0] > MAX_PARTITIONS or n_in > MAX_PARTITIONS or counts.shape[0] > MAX_PARTITIONS:
        raise AssignmentError("too many members, sets or topics")
    out_ms = np.empty(msets.shape[0], dtype=np.int32)
    out_sp = np.zeros(n_in + 1, dtype=np.int64)
    out_st = np.empty(topics.shape[0], dtype=np.int32)
    ts = topic_start
    ms = msets
    sp = sptr
    st = topics
    oms = out_ms
    osp = out_sp
    ost = out_st
    p_ms = _p32(ms)
    p_st = _p32(st)
    p_oms = &oms[0] if oms.shape[0] > 0 else NULL
    p_ost = &ost[0] if ost.shape[0] > 0 else NULL
    with nogil:
        rc = canonicalize_sets(<int32_t>ms.shape[0], <int32_t>(sp.shape[0] - 1), p_ms, &sp[0], p_st,
                               p_oms, &osp[0], p_ost, &n_sets)
    if rc != KC_OK:
        raise MemoryError()
    prep.topic_start = topic_start
    prep.member_set = out_ms
    prep.set_ptr = out_sp[:n_sets + 1].copy()
    prep.set_topics = out_st[:out_sp[n_sets]].copy()
    ts = prep.topic_start
    ms = prep.member_set
    sp = prep.set_ptr
    st = prep.set_topics
    prep.g.n_members = <int32_t>ms.shape[0]
    prep.g.n_topics = <int32_t>(ts.shape[0] - 1)
    prep.g.n_sets = n_sets
    prep.g.topic_start = &ts[0]
    prep.g.member_set = _p32(ms)
    prep.g.set_ptr = &sp[0]
    prep.g.set_topics = _p32(st)
    with nogil:
        rc = index_build(&prep.g, &prep.ix)
    if rc != KC_OK:
        raise MemoryError()
    prep.indexed = True
    return prep


def range_owners(Prepared prep, member_racks=None, partition_rack_indptr=None, partition_racks=None, out=None):
    """The owner (member index, -1 for none) of every partition under range; KIP-881 racks when racks are given.

    `out`: an int32 array of one entry per partition to write into instead of a new one.
    """
    cdef Py_ssize_t P = prep.n_partitions, M = prep.g.n_members
    owner = _out(out, P)
    owner.fill(-1)
    cdef int32_t[::1] ow = owner
    cdef const int32_t[::1] mr
    cdef const int64_t[::1] rp
    cdef const int32_t[::1] ri
    cdef int32_t n_racks = 0
    cdef const int32_t* p_mr
    cdef const int32_t* p_ri
    cdef int rc
    if member_racks is None and partition_rack_indptr is None and partition_racks is None:
        with nogil:
            rc = range_plain(&prep.g, &prep.ix, &ow[0] if P > 0 else NULL)
    else:
        if member_racks is None or partition_rack_indptr is None or partition_racks is None:
            raise AssignmentError("rack-aware range needs member_racks, partition_rack_indptr and partition_racks")
        racks_m = _ints(member_racks, np.int32, "member_racks")
        if racks_m.shape[0] != M:
            raise AssignmentError(f"member_racks must have one entry per member ({M}), not {racks_m.shape[0]}")
        ids = _ints(partition_racks, np.int32, "partition_racks")
        ptr = _indptr(partition_rack_indptr, P, ids.shape[0], "partition_rack_indptr")
        if (racks_m.size and racks_m.min() < -1) or (ids.size and ids.min() < 0):
            raise AssignmentError("rack ids must be >= 0 (-1 in member_racks: no rack)")
        n_racks = max(int(racks_m.max()) + 1 if racks_m.size else 0, int(ids.max()) + 1 if ids.size else 0)
        if ids.size:
            # sorted, duplicate-free rack ids per partition
            part = np.repeat(np.arange(P, dtype=np.int64), np.diff(ptr))
            order = np.lexsort((ids, part))
            ids = ids[order]
            part = part[order]
            nids = ids.shape[0]
            keep = np.ones(nids, dtype=bool)
            keep[1:] = (ids[1:] != ids[:nids - 1]) | (part[1:] != part[:nids - 1])
            ids = np.ascontiguousarray(ids[keep])
            ptr = np.zeros(P + 1, dtype=np.int64)
            np.cumsum(np.bincount(part[keep], minlength=P), out=ptr[1:])
        mr = racks_m
        rp = ptr
        ri = ids
        p_mr = _p32(mr)
        p_ri = _p32(ri)
        with nogil:
            rc = range_racks(&prep.g, &prep.ix, p_mr, n_racks, &rp[0], p_ri, &ow[0] if P > 0 else NULL)
    if rc != KC_OK:
        raise MemoryError()
    return owner


def roundrobin_owners(Prepared prep, out=None):
    """The owner of every partition under round-robin (`out`: see range_owners)."""
    cdef Py_ssize_t P = prep.n_partitions
    owner = _out(out, P)
    owner.fill(-1)
    cdef int32_t[::1] ow = owner
    cdef int rc
    with nogil:
        rc = roundrobin_kernel(&prep.g, &prep.ix, &ow[0] if P > 0 else NULL)
    if rc != KC_OK:
        raise MemoryError()
    return owner


def sticky_owners(Prepared prep, owned_indptr=None, owned_partitions=None, generations=None, str mode="sticky",
                  int max_passes=-1, out=None):
    """The owner of every partition under sticky, cooperative-sticky or uniform, and (cooperative) the withheld.

    owned_partitions are global partition ids (CSR rows per member); ids outside the group's partitions are
    ignored. Returns (owner, withheld), withheld a uint8 flag per partition or None unless cooperative.
    `out`: see range_owners.
    """
    cdef Py_ssize_t P = prep.n_partitions, M = prep.g.n_members
    cdef int kmode
    cdef const int64_t[::1] op
    cdef const int32_t[::1] pids
    cdef const int32_t[::1] gens
    cdef int64_t bad = -1
    cdef const int64_t* p_op
    cdef const int32_t* p_pids
    cdef const int32_t* p_gens
    cdef int rc
    if mode not in MODES:
        raise AssignmentError(f"unknown sticky mode {mode!r}; expected one of {sorted(MODES)}")
    kmode = MODES[mode]
    owner = _out(out, P)
    withheld = np.zeros(P if kmode == MODE_COOPERATIVE else 0, dtype=np.uint8)
    cdef int32_t[::1] ow = owner
    cdef uint8_t[::1] wh = withheld
    if owned_indptr is None and owned_partitions is None:
        op = None
        pids = None
    elif owned_indptr is None or owned_partitions is None:
        raise AssignmentError("owned_indptr and owned_partitions go together")
    else:
        ids = owned_partitions
        if not (isinstance(ids, np.ndarray) and ids.dtype == np.int32):
            ids = np.asarray(ids)
            if ids.size and ids.dtype.kind in "iu":
                ids = np.where((ids >= 0) & (ids < P), ids, -1)  # ids outside the group's partitions: no claim
        pids = _ints(ids, np.int32, "owned_partitions")
        op = _indptr(owned_indptr, M, pids.shape[0], "owned_indptr")
    if generations is None:
        gens = None
    else:
        gens = _ints(generations, np.int32, "generations")
        if gens.shape[0] != M:
            raise AssignmentError(f"generations must have one entry per member ({M}), not {gens.shape[0]}")
    p_op = _p64(op)
    p_pids = _p32(pids)
    p_gens = _p32(gens)
    with nogil:
        rc = sticky_kernel(&prep.g, &prep.ix, p_op, p_pids, p_gens, kmode, max_passes,
                           &ow[0] if P > 0 else NULL, &wh[0] if wh.shape[0] > 0 else NULL, &bad)
    if rc == KC_DUPLICATE:
        raise DuplicateClaimError(f"partition {bad} is in the current assignment of more than one member", bad)
    if rc != KC_OK:
        raise MemoryError()
    return owner, (withheld if kmode == MODE_COOPERATIVE else None)


def owners_to_csr(owner, Py_ssize_t n_members):
    """Member → partitions CSR (indptr int64[M + 1], ascending global partition ids int32) from owners."""
    ow = _ints(owner, np.int32, "owner")
    cdef const int32_t[::1] o = ow
    cdef Py_ssize_t P = o.shape[0], i
    indptr = np.zeros(n_members + 1, dtype=np.int64)
    cdef int64_t[::1] ip = indptr
    cdef int32_t m
    cdef int64_t total
    if P and (ow.max() >= n_members or ow.min() < -1):
        raise AssignmentError("owner holds member indexes out of range")
    with nogil:
        for i in range(P):
            m = o[i]
            if m >= 0:
                ip[m + 1] += 1
        for i in range(n_members):
            ip[i + 1] += ip[i]
    total = ip[n_members]
    parts = np.empty(total, dtype=np.int32)
    cur = indptr[:n_members].copy()
    cdef int32_t[::1] pv = parts
    cdef int64_t[::1] cu = cur
    with nogil:
        for i in range(P):
            m = o[i]
            if m >= 0:
                pv[cu[m]] = <int32_t>i
                cu[m] += 1
    return indptr, parts


def intern_owned(list owned, dict topic_index, topic_start):
    """Claims as CSR of global partition ids: owned[i] is member i's {topic: partitions} (or None).

    Topics missing from topic_index and partitions outside a topic's range are not claims and are dropped.
    """
    cdef const int64_t[::1] ts = _ints(topic_start, np.int64, "topic_start")
    cdef Py_ssize_t M = len(owned), i
    indptr = np.zeros(M + 1, dtype=np.int64)
    cdef int64_t[::1] ip = indptr
    cdef Py_ssize_t cap = 1024, n = 0
    buf = np.empty(cap, dtype=np.int32)
    cdef int32_t[::1] bv = buf
    cdef int64_t base, cnt, pv
    cdef object tix
    for i in range(M):
        mapping = owned[i]
        if mapping is not None:
            for topic, parts in mapping.items():
                tix = topic_index.get(topic)
                if tix is None:
                    continue
                base = ts[<Py_ssize_t>tix]
                cnt = ts[<Py_ssize_t>tix + 1] - base
                for p in parts:
                    pv = p
                    if pv < 0 or pv >= cnt:
                        continue
                    if n == cap:
                        cap *= 2
                        grown = np.empty(cap, dtype=np.int32)
                        grown[:n] = buf[:n]
                        buf = grown
                        bv = buf
                    bv[n] = <int32_t>(base + pv)
                    n += 1
        ip[i + 1] = n
    return indptr, buf[:n].copy()


def csr_to_dicts(indptr, partitions, topic_start, list topic_names, list member_ids):
    """{member_id: {topic: [partitions ascending]}} for every member, from member → global partition CSR.

    The cyclic garbage collector is paused while the result is built: it holds only acyclic containers, and a
    million fresh lists would otherwise trigger collections that cost more than building them.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _csr_to_dicts(indptr, partitions, topic_start, topic_names, member_ids)
    finally:
        if paused:
            gc.enable()


cdef dict _csr_to_dicts(indptr, partitions, topic_start, list topic_names, list member_ids):
    cdef const int64_t[::1] ip = _ints(indptr, np.int64, "indptr")
    cdef const int32_t[::1] pv = _ints(partitions, np.int32, "partitions")
    cdef const int64_t[::1] ts = _ints(topic_start, np.int64, "topic_start")
    cdef Py_ssize_t M = len(member_ids), T = len(topic_names), i, j, e, x, lo, hi, mid
    cdef int64_t pid, base, end
    cdef list lst
    cdef dict d
    cdef dict out = {}
    cdef list ints
    if ip.shape[0] != M + 1 or ts.shape[0] != T + 1:
        raise AssignmentError("csr_to_dicts: indptr or topic_start does not match the names")
    largest = int(np.max(np.diff(np.asarray(ts)))) if T else 0
    ints = list(range(largest))
    for i in range(M):
        d = {}
        j = ip[i]
        while j < ip[i + 1]:
            pid = pv[j]
            lo = 0
            hi = T
            while hi - lo > 1:
                mid = (lo + hi) >> 1
                if ts[mid] <= pid:
                    lo = mid
                else:
                    hi = mid
            base = ts[lo]
            end = ts[lo + 1]
            e = j
            while e < ip[i + 1] and pv[e] < end:
                e += 1
            lst = [None] * (e - j)
            for x in range(j, e):
                lst[x - j] = ints[pv[x] - base]
            d[topic_names[lo]] = lst
            j = e
        out[member_ids[i]] = d
    return out
