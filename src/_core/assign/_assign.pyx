# Compiled partition assignors: range (with KIP-881 racks), round-robin, sticky, cooperative-sticky and the
# server-side uniform assignor, as kernels over interned integer ids and flat arrays; and the KIP-848
# reconciliation step (reconcile.pxi) with the partition epoch table it reads.
#
# Every kernel is `noexcept nogil` and runs with the GIL released; it reads the interned group (group.pxi) and
# writes one owner per global partition id. The functions at the bottom of this file are the only place that
# touches Python objects: they validate numpy inputs, call a kernel, and convert to and from Python mappings.
# kcoord/assignors.py is the public face; this module has no knowledge of names, only of numbers.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

from assign_util cimport *

cimport numpy as cnp

import gc

import numpy as np

cnp.import_array()

include "group.pxi"
include "range.pxi"
include "roundrobin.pxi"
include "sticky.pxi"
include "reconcile.pxi"


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


# --- KIP-848 reconciliation (reconcile.pxi) ----------------------------------------------------------------------

STABLE = MS_STABLE
UNREVOKED_PARTITIONS = MS_UNREVOKED
UNRELEASED_PARTITIONS = MS_UNRELEASED
UNKNOWN = MS_UNKNOWN
FENCED_MEMBER_EPOCH = RC_FENCED_MEMBER_EPOCH
MEMBER_STATES = {MS_STABLE: "STABLE", MS_UNREVOKED: "UNREVOKED_PARTITIONS", MS_UNRELEASED: "UNRELEASED_PARTITIONS",
                 MS_UNKNOWN: "UNKNOWN"}


class PartitionEpochError(AssignmentError):
    """A partition epoch table update that would give a partition two holders, or free one held at another epoch
    (Kafka's addPartitionEpochs / removePartitionEpochs refuse the same). `epoch`: the partition's epoch in the
    table, -1 if free."""

    def __init__(self, msg, partition_id, epoch):
        super().__init__(msg)
        self.partition_id = partition_id
        self.epoch = epoch


_EMPTY_IDS = np.zeros(0, dtype=np.int32)
_EMPTY_IDS.flags.writeable = False
_np_empty = np.empty
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


cdef inline int64_t _first_bad(const int32_t* a, int64_t n, int64_t limit) noexcept nogil:
    """The index of the first entry that is negative, >= limit, or not above the one before it; -1 if none."""
    cdef int64_t i
    if n == 0:
        return -1
    if a[0] < 0 or a[0] >= limit:
        return 0
    for i in range(1, n):
        if a[i] <= a[i - 1] or a[i] >= limit:
            return i
    return -1


cdef const int32_t[::1] _ids(object x, str name) except *:
    """A view of x as contiguous int32 ids: of x itself when it is such an array (no copy, and the view's .base is
    x), else of a converted copy (AssignmentError if it cannot be one)."""
    if x is None:
        raise AssignmentError(f"{name} must be an array of ids, not None")
    try:
        return x
    except (ValueError, TypeError, BufferError):
        return _ints(x, np.int32, name)


cdef inline object _arr(object x, object dtype, str name):
    """x itself when it is a native, contiguous, one-dimensional array of `dtype` (checked through the numpy C API:
    a few loads, where a typed memoryview costs an allocation), else what _ints makes of it."""
    if x is None:
        raise AssignmentError(f"{name} must be an array of ids, not None")
    if (cnp.PyArray_Check(x) and cnp.PyArray_NDIM(<cnp.ndarray>x) == 1
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x) and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)
            and cnp.PyArray_TYPE(<cnp.ndarray>x) == (<cnp.dtype>dtype).type_num):
        return x
    return _ints(x, dtype, name)


cdef str _bad_ids(const int32_t[::1] v, int64_t i, int64_t limit, str name, str what):
    if v[i] < 0 or v[i] >= limit:
        return f"{name}: {what} {v[i]} (entry {i}) is outside 0..{limit - 1}"
    if v[i] == v[i - 1]:
        return f"{name}: {what} {v[i]} appears twice"
    return f"{name} must be ascending: {what} {v[i]} (entry {i}) follows {v[i - 1]}"


cdef object _catalogue(object topic_start):
    """A private, read-only copy of a valid topic_start (int64, from 0, never falling, within MAX_PARTITIONS)."""
    ts = np.array(_ints(topic_start, np.int64, "topic_start"), dtype=np.int64, copy=True)
    if ts.shape[0] < 1 or ts[0] != 0:
        raise AssignmentError("topic_start must start at 0, with one entry per topic plus one")
    falls = np.flatnonzero(np.diff(ts) < 0)
    if falls.shape[0]:
        t = int(falls[0])
        raise AssignmentError(f"topic_start must not fall: topic {t} would have {int(ts[t + 1] - ts[t])} partitions")
    if ts[ts.shape[0] - 1] > MAX_PARTITIONS or ts.shape[0] - 1 > MAX_PARTITIONS:
        raise AssignmentError(f"at most {MAX_PARTITIONS} partitions and topics")
    ts.flags.writeable = False
    return ts


cdef class PartitionEpochs:
    """A consumer group's partition epoch table: for every global partition id, the epoch of the member that holds it
    (assigned or pending revocation), -1 while nobody does. Topic t owns the ids [topic_start[t], topic_start[t+1]).

    `add` and `remove` are Kafka's addPartitionEpochs / removePartitionEpochs: they refuse to give a partition a
    second holder or to free one held at another epoch (PartitionEpochError, naming the partition), and change
    nothing when they refuse. `grow` takes a larger catalogue. `reconcile` reads the table.
    """

    cdef int32_t* table
    cdef int64_t n
    cdef readonly object topic_start
    cdef const int64_t* ts
    cdef int32_t n_top
    # reconcile's output buffers, reused from call to call (reconcile holds the GIL throughout)
    cdef int32_t* out_a
    cdef int32_t* out_p
    cdef int64_t cap_a
    cdef int64_t cap_p
    # step's owned list from the wire
    cdef int32_t* out_o
    cdef int64_t cap_o

    def __cinit__(self, topic_start):
        self.table = NULL
        self.out_a = NULL
        self.out_p = NULL
        self.out_o = NULL
        self.cap_a = 0
        self.cap_p = 0
        self.cap_o = 0
        self._set_catalogue(_catalogue(topic_start))
        self.table = <int32_t*>xmalloc(self.n, sizeof(int32_t))
        if self.table == NULL:
            raise MemoryError()
        memset(self.table, 0xFF, <size_t>self.n * sizeof(int32_t))

    def __dealloc__(self):
        free(self.table)
        free(self.out_a)
        free(self.out_p)
        free(self.out_o)

    cdef _set_catalogue(self, object ts):
        cdef const int64_t[::1] v = ts
        self.topic_start = ts
        self.ts = &v[0]
        self.n_top = <int32_t>(v.shape[0] - 1)
        self.n = v[v.shape[0] - 1]

    @property
    def n_partitions(self):
        return self.n

    @property
    def n_topics(self):
        return self.n_top

    def __len__(self):
        return self.n

    def __getitem__(self, Py_ssize_t partition):
        if partition < 0 or partition >= self.n:
            raise IndexError(f"partition {partition} is outside 0..{self.n - 1}")
        return self.table[partition]

    def to_numpy(self):
        """A copy of the table (int32, one entry per partition)."""
        out = np.empty(self.n, dtype=np.int32)
        cdef int32_t[::1] v = out
        if self.n:
            memcpy(&v[0], self.table, <size_t>self.n * sizeof(int32_t))
        return out

    cdef const int32_t[::1] _pids(self, object partitions) except *:
        cdef const int32_t[::1] v = _ids(partitions, "partitions")
        cdef Py_ssize_t i
        for i in range(v.shape[0]):
            if v[i] < 0 or v[i] >= self.n:
                raise AssignmentError(f"partitions: partition {v[i]} (entry {i}) is outside 0..{self.n - 1}")
        return v

    def add(self, partitions, int32_t epoch):
        """Records that a member at `epoch` now holds `partitions`; refuses (and changes nothing) if any is held.
        Epoch -2 is a static member that left for now (KIP-848): it still holds its partitions."""
        if epoch < 0 and epoch != -2:
            raise AssignmentError(f"epoch must be >= 0 (or -2: a static member away), not {epoch}")
        cdef const int32_t[::1] v = self._pids(partitions)
        cdef int64_t bad
        if v.shape[0] == 0:
            return
        bad = epochs_add(self.table, &v[0], v.shape[0], epoch)
        if bad >= 0:
            p = v[bad]
            held = self.table[p]
            if held == -1:
                raise PartitionEpochError(f"partition {p} appears twice in the partitions to add", p, held)
            raise PartitionEpochError(f"cannot set the epoch of partition {p} to {epoch}: it is still held at "
                                      f"epoch {held}", p, held)

    def remove(self, partitions, int32_t expected_epoch):
        """Frees `partitions`, which a member at `expected_epoch` held; refuses (and changes nothing) if any is held
        at another epoch or free."""
        cdef const int32_t[::1] v = self._pids(partitions)
        cdef int64_t bad
        if v.shape[0] == 0:
            return
        bad = epochs_remove(self.table, &v[0], v.shape[0], expected_epoch)
        if bad >= 0:
            p = v[bad]
            held = self.table[p]
            if held == expected_epoch:
                raise PartitionEpochError(f"partition {p} appears twice in the partitions to remove", p, held)
            raise PartitionEpochError(f"cannot remove epoch {expected_epoch} from partition {p}: it is "
                                      + ("free" if held == -1 else f"held at epoch {held}"), p, held)

    def grow(self, topic_start):
        """Takes a larger catalogue: topics keep their index and may gain partitions, new topics come after the
        old ones. Each topic's epochs move with it (a topic's ids shift when one before it grows: the caller remaps
        its partition lists the same way); new partitions are free."""
        new_ts = _catalogue(topic_start)
        cdef const int64_t[::1] nv = new_ts
        cdef int32_t t, T_old = self.n_top
        cdef int64_t n_new
        cdef int32_t* grown
        if nv.shape[0] - 1 < T_old:
            raise AssignmentError(f"grow: {nv.shape[0] - 1} topics, fewer than the {T_old} the table has")
        for t in range(T_old):
            if nv[t + 1] - nv[t] < self.ts[t + 1] - self.ts[t]:
                raise AssignmentError(f"grow: topic {t} would shrink from {self.ts[t + 1] - self.ts[t]} to "
                                      f"{nv[t + 1] - nv[t]} partitions")
        n_new = nv[nv.shape[0] - 1]
        grown = <int32_t*>xmalloc(n_new, sizeof(int32_t))
        if grown == NULL:
            raise MemoryError()
        memset(grown, 0xFF, <size_t>n_new * sizeof(int32_t))
        for t in range(T_old):
            if self.ts[t + 1] > self.ts[t]:
                memcpy(grown + nv[t], self.table + self.ts[t], <size_t>(self.ts[t + 1] - self.ts[t]) * sizeof(int32_t))
        free(self.table)
        self.table = grown
        self._set_catalogue(new_ts)

    cdef int _reserve(self, int64_t need_a, int64_t need_p) except -1:
        cdef int32_t* q
        if need_a > self.cap_a:
            q = <int32_t*>realloc(self.out_a, <size_t>(need_a + self.cap_a) * sizeof(int32_t))
            if q == NULL:
                raise MemoryError()
            self.out_a = q
            self.cap_a = need_a + self.cap_a
        if need_p > self.cap_p:
            q = <int32_t*>realloc(self.out_p, <size_t>(need_p + self.cap_p) * sizeof(int32_t))
            if q == NULL:
                raise MemoryError()
            self.out_p = q
            self.cap_p = need_p + self.cap_p
        return 0


cdef class Reconciled:
    """One member after a reconciliation step. `assigned` / `pending_revocation` are the input arrays themselves when
    they did not change. `changed`: any field differs from the input (Kafka then writes the member's current
    assignment record); `assigned_changed`: the heartbeat response carries the assignment. `error` is
    FENCED_MEMBER_EPOCH (110) when a member in the UNKNOWN state must rejoin; the member is then as it was."""

    cdef readonly int state
    cdef readonly int member_epoch
    cdef readonly int previous_member_epoch
    cdef readonly object assigned
    cdef readonly object pending_revocation
    cdef readonly bint changed
    cdef readonly bint assigned_changed
    cdef readonly int error

    def __repr__(self):
        return (f"Reconciled(state={MEMBER_STATES.get(self.state, self.state)}, member_epoch={self.member_epoch}, "
                f"previous_member_epoch={self.previous_member_epoch}, assigned={self.assigned.tolist()}, "
                f"pending_revocation={self.pending_revocation.tolist()}, changed={self.changed}, "
                f"assigned_changed={self.assigned_changed}, error={self.error})")


cdef inline object _ids_out(const int32_t* src, int64_t n):
    if n == 0:
        return _EMPTY_IDS
    out = _np_empty(n, _INT32)
    cdef int32_t[::1] v = out
    memcpy(&v[0], src, <size_t>n * sizeof(int32_t))
    return out


def reconcile(PartitionEpochs epochs, int state, int32_t member_epoch, int32_t previous_member_epoch,
              int32_t target_epoch, assigned, pending_revocation, target, subscribed_topics, owned,
              bint subscription_changed=False):
    """One KIP-848 reconciliation step for one member (Kafka's CurrentAssignmentBuilder.build, trunk).

    assigned, pending_revocation, target: the member's partitions, its partitions pending revocation and its target
    assignment; owned: the partitions the heartbeat says the client owns, or None when its TopicPartitions was null
    (which counts as owning everything). All are ascending, duplicate-free int32 arrays of global partition ids of
    `epochs`' catalogue. subscribed_topics: ascending topic ids the member subscribes to (the target of any other
    topic counts as empty). subscription_changed: strip unsubscribed topics even when the member is at the target
    epoch (Kafka's enforce-subscription-consistency flag). The table is only read; the caller moves the member's
    epochs in it (remove the old member's partitions at its old epoch, add the new one's) when `changed`.

    A member in the UNKNOWN state is fenced unless the request's TopicPartitions is an empty list. Kafka looks at
    the list of topic entries: a request naming a topic with no partitions is fenced too, so pass owned=None then.
    """
    cdef object tf = _arr(target, _INT32, "target")
    return _step(epochs, state, member_epoch, previous_member_epoch, target_epoch, assigned, pending_revocation, tf,
                 0, cnp.PyArray_DIM(<cnp.ndarray>tf, 0), subscribed_topics, owned, False, None,
                 subscription_changed, False)


cdef Reconciled _reconciled(const RecIn* r, const RecOut* o, object assigned, object pending):
    cdef Reconciled res = Reconciled.__new__(Reconciled)
    res.state = o.state
    res.member_epoch = o.member_epoch
    res.previous_member_epoch = o.previous_member_epoch
    res.changed = o.changed
    res.assigned_changed = o.assigned_changed
    res.error = o.error
    res.assigned = _ids_out(o.assigned, o.n_assigned) if o.assigned_changed else assigned
    if same_ids(o.pending, o.n_pending, r.pending, r.n_pending):
        res.pending_revocation = pending
    else:
        res.pending_revocation = _ids_out(o.pending, o.n_pending)
    return res


# --- the whole member step: the owned list from the wire, the kernel, the epoch table moved ------------------------

cdef inline int _cmp_i32(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*>a)[0], y = (<const int32_t*>b)[0]
    return (x > y) - (x < y)


cdef int64_t _owned_from_wire(PartitionEpochs epochs, list entries, dict by_topic_id) except -1:
    """A heartbeat's TopicPartitions (entries with .topic_id and .partitions) as ascending, unique global ids in
    epochs.out_o; returns how many. Unknown topics and partitions outside a topic are left out: they cannot match
    anything the group assigned (TopicSpace.from_wire does the same in Python)."""
    cdef int64_t need = 0, n = 0, i, w
    cdef int64_t base, count
    cdef long long p
    cdef bint ordered = True
    cdef int32_t* q
    cdef object t
    for tp in entries:
        need += len(tp.partitions)
    if need > epochs.cap_o:
        q = <int32_t*>realloc(epochs.out_o, <size_t>(need + epochs.cap_o) * sizeof(int32_t))
        if q == NULL:
            raise MemoryError()
        epochs.out_o = q
        epochs.cap_o = need + epochs.cap_o
    for tp in entries:
        t = by_topic_id.get(tp.topic_id)
        if t is None:
            continue
        i = <int64_t>t
        if i < 0 or i >= epochs.n_top:
            continue
        base = epochs.ts[i]
        count = epochs.ts[i + 1] - base
        for x in tp.partitions:
            p = x
            if p < 0 or p >= count:
                continue
            if n > 0 and <int32_t>(base + p) <= epochs.out_o[n - 1]:
                ordered = False
            epochs.out_o[n] = <int32_t>(base + p)
            n += 1
    if not ordered:  # topics (or partitions) out of order, or repeated: sort, then drop repeats
        qsort(epochs.out_o, <size_t>n, sizeof(int32_t), _cmp_i32)
        w = 0
        for i in range(n):
            if w == 0 or epochs.out_o[i] != epochs.out_o[w - 1]:
                epochs.out_o[w] = epochs.out_o[i]
                w += 1
        n = w
    return n


cdef int64_t _move_epochs(int32_t* table, const RecIn* r, const RecOut* o) noexcept nogil:
    """Moves the member's partitions in the table from (assigned ∪ pending at the old epoch) to (assigned ∪ pending
    at the new one), all or nothing: returns -1, or a partition the table disagrees about (the table is then as
    it was)."""
    cdef int64_t i, bad
    cdef int32_t p
    if same_ids(o.assigned, o.n_assigned, r.assigned, r.n_assigned) and \
            same_ids(o.pending, o.n_pending, r.pending, r.n_pending):
        # the same partitions at another epoch (the common step): one pass each
        for i in range(r.n_assigned):
            if table[r.assigned[i]] != r.member_epoch:
                return r.assigned[i]
        for i in range(r.n_pending):
            if table[r.pending[i]] != r.member_epoch:
                return r.pending[i]
        for i in range(r.n_assigned):
            table[r.assigned[i]] = o.member_epoch
        for i in range(r.n_pending):
            table[r.pending[i]] = o.member_epoch
        return -1
    bad = epochs_remove(table, r.assigned, r.n_assigned, r.member_epoch)
    if bad >= 0:
        return r.assigned[bad]
    bad = epochs_remove(table, r.pending, r.n_pending, r.member_epoch)
    if bad >= 0:
        p = r.pending[bad]
        epochs_add(table, r.assigned, r.n_assigned, r.member_epoch)
        return p
    bad = epochs_add(table, o.assigned, o.n_assigned, o.member_epoch)
    if bad >= 0:
        p = o.assigned[bad]
        epochs_add(table, r.pending, r.n_pending, r.member_epoch)
        epochs_add(table, r.assigned, r.n_assigned, r.member_epoch)
        return p
    bad = epochs_add(table, o.pending, o.n_pending, o.member_epoch)
    if bad >= 0:
        p = o.pending[bad]
        epochs_remove(table, o.assigned, o.n_assigned, o.member_epoch)
        epochs_add(table, r.pending, r.n_pending, r.member_epoch)
        epochs_add(table, r.assigned, r.n_assigned, r.member_epoch)
        return p
    return -1


def step(PartitionEpochs epochs, int state, int32_t member_epoch, int32_t previous_member_epoch,
         int32_t target_epoch, assigned, pending_revocation, target_indptr, target_flat, int64_t target_row,
         subscribed_topics, owned, dict by_topic_id=None, bint subscription_changed=False):
    """`reconcile` and what the group does with its answer, in one call: the member's target is row `target_row` of
    the CSR (target_indptr, target_flat), or empty when target_row is -1; `owned` is None (the request's
    TopicPartitions was null), an ascending id array, or the request's TopicPartitions list itself (entries with
    .topic_id and .partitions; `by_topic_id` maps a topic id to its topic index); and when the member changes, its
    partitions move in the table from its old epoch to its new one (Kafka's removePartitionEpochs then
    addPartitionEpochs). Returns the Reconciled member; PartitionEpochError (table untouched) if the table
    disagrees with the member's old partitions or another member holds one of its new ones."""
    cdef object tf = _arr(target_flat, _INT32, "target_flat")
    cdef object ti = _arr(target_indptr, _INT64, "target_indptr")
    cdef const int64_t* indptr = <const int64_t*>cnp.PyArray_DATA(<cnp.ndarray>ti)
    cdef int64_t n_rows = cnp.PyArray_DIM(<cnp.ndarray>ti, 0) - 1
    cdef int64_t n_flat = cnp.PyArray_DIM(<cnp.ndarray>tf, 0)
    cdef int64_t lo = 0, hi = 0
    if target_row >= 0:
        if target_row >= n_rows:
            raise AssignmentError(f"target_row {target_row} is outside the {n_rows} rows of target_indptr")
        lo = indptr[target_row]
        hi = indptr[target_row + 1]
        if lo < 0 or hi < lo or hi > n_flat:
            raise AssignmentError(f"target_indptr: row {target_row} spans [{lo}, {hi}), outside target_flat's "
                                  f"{n_flat} entries")
    return _step(epochs, state, member_epoch, previous_member_epoch, target_epoch, assigned, pending_revocation, tf,
                 lo, hi, subscribed_topics, owned, type(owned) is list, by_topic_id, subscription_changed, True)


cdef Reconciled _step(PartitionEpochs epochs, int state, int32_t member_epoch, int32_t previous_member_epoch,
                      int32_t target_epoch, assigned, pending_revocation, object tf, int64_t lo, int64_t hi,
                      subscribed_topics, owned, bint wire_owned, dict by_topic_id, bint subscription_changed,
                      bint move):
    """The step behind `reconcile` (move False: the table is only read) and `step` (move True): the member's target
    is tf[lo:hi]; `owned` is a TopicPartitions list when wire_owned."""
    cdef RecIn r
    cdef RecOut o
    cdef object a = _arr(assigned, _INT32, "assigned")
    cdef object pr = _arr(pending_revocation, _INT32, "pending_revocation")
    cdef object st = _arr(subscribed_topics, _INT32, "subscribed_topics")
    cdef object ow
    cdef int64_t P = epochs.n, bad
    if state != MS_STABLE and state != MS_UNREVOKED and state != MS_UNRELEASED and state != MS_UNKNOWN:
        raise AssignmentError(f"state must be one of {sorted(MEMBER_STATES)} (Kafka's MemberState values), "
                              f"not {state}")
    r.owned_null = owned is None
    if r.owned_null:
        r.owned = NULL
        r.n_owned = 0
    elif wire_owned:
        if by_topic_id is None:
            raise AssignmentError("owned as TopicPartitions needs by_topic_id")
        r.n_owned = _owned_from_wire(epochs, <list>owned, by_topic_id)
        r.owned = epochs.out_o
    else:
        ow = _arr(owned, _INT32, "owned")
        r.n_owned = cnp.PyArray_DIM(<cnp.ndarray>ow, 0)
        r.owned = <const int32_t*>cnp.PyArray_DATA(<cnp.ndarray>ow) if r.n_owned else NULL
        bad = _first_bad(r.owned, r.n_owned, P)
        if bad >= 0:
            raise AssignmentError(_bad_ids(ow, bad, P, "owned", "partition"))
    r.n_assigned = cnp.PyArray_DIM(<cnp.ndarray>a, 0)
    r.assigned = <const int32_t*>cnp.PyArray_DATA(<cnp.ndarray>a) if r.n_assigned else NULL
    r.n_pending = cnp.PyArray_DIM(<cnp.ndarray>pr, 0)
    r.pending = <const int32_t*>cnp.PyArray_DATA(<cnp.ndarray>pr) if r.n_pending else NULL
    r.n_target = hi - lo
    r.target = <const int32_t*>cnp.PyArray_DATA(<cnp.ndarray>tf) + lo if hi > lo else NULL
    r.n_topics = <int32_t>cnp.PyArray_DIM(<cnp.ndarray>st, 0)
    r.topics = <const int32_t*>cnp.PyArray_DATA(<cnp.ndarray>st) if r.n_topics else NULL
    bad = _first_bad(r.assigned, r.n_assigned, P)
    if bad >= 0:
        raise AssignmentError(_bad_ids(a, bad, P, "assigned", "partition"))
    bad = _first_bad(r.pending, r.n_pending, P)
    if bad >= 0:
        raise AssignmentError(_bad_ids(pr, bad, P, "pending_revocation", "partition"))
    bad = _first_bad(r.target, r.n_target, P)
    if bad >= 0:
        raise AssignmentError(_bad_ids(tf[lo:hi], bad, P, "target", "partition"))
    bad = _first_bad(r.topics, r.n_topics, epochs.n_top)
    if bad >= 0:
        raise AssignmentError(_bad_ids(st, bad, epochs.n_top, "subscribed_topics", "topic"))
    r.state = state
    r.member_epoch = member_epoch
    r.previous_member_epoch = previous_member_epoch
    r.target_epoch = target_epoch
    r.topic_start = epochs.ts
    r.epochs = epochs.table
    r.subscription_changed = subscription_changed
    epochs._reserve(r.n_assigned if r.n_assigned > r.n_target else r.n_target, r.n_assigned + r.n_pending)
    o.assigned = epochs.out_a
    o.pending = epochs.out_p
    reconcile_kernel(&r, &o)
    if move and o.changed and not o.error:
        bad = _move_epochs(epochs.table, &r, &o)
        if bad >= 0:
            held = epochs.table[bad]
            raise PartitionEpochError(f"cannot move partition {bad} from epoch {member_epoch} to {o.member_epoch}: "
                                      f"the table has it " + ("free" if held == -1 else f"at epoch {held}"),
                                      bad, held)
    return _reconciled(&r, &o, a, pr)
