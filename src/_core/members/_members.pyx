# Compiled member tables and the coordinator's deadline heap.
#
# A heartbeat is a member lookup (one dict probe) and a deadline move (a sift in an indexed binary heap over
# integer keys): neither allocates. Group state machines stay in readable Python (kcoord/groups/) and use
# these as plain objects.

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t


# The Kafka error codes MemberTable.validate answers with (Errors.java; kcoord.errors has them all by name).
cdef enum:
    UNKNOWN_MEMBER_ID = 25
    FENCED_INSTANCE_ID = 82


@cython.final
cdef class DeadlineHeap:
    """An indexed min-heap of deadlines (ms) keyed by small integers.

    `schedule(key, deadline)` inserts or moves a key (a timer is replaced, never duplicated), `cancel(key)`
    removes it, `pop_expired(now)` takes every key whose deadline is <= now in deadline order. Keys come from
    `new_key()` and go back with `release_key()`; storage grows by doubling and is reused.
    """

    cdef int64_t* deadline   # by key
    cdef int32_t* pos        # by key: index in heap, or -1
    cdef int32_t* heap       # heap of keys
    cdef int32_t* free_keys  # released keys, a stack
    cdef Py_ssize_t size, cap, nfree, next_key

    def __cinit__(self, Py_ssize_t capacity=64):
        self.cap = max(capacity, 16)
        self.deadline = <int64_t*>PyMem_Malloc(self.cap * sizeof(int64_t))
        self.pos = <int32_t*>PyMem_Malloc(self.cap * sizeof(int32_t))
        self.heap = <int32_t*>PyMem_Malloc(self.cap * sizeof(int32_t))
        self.free_keys = <int32_t*>PyMem_Malloc(self.cap * sizeof(int32_t))
        if not (self.deadline and self.pos and self.heap and self.free_keys):
            raise MemoryError()
        self.size = self.nfree = self.next_key = 0

    def __dealloc__(self):
        PyMem_Free(self.deadline)
        PyMem_Free(self.pos)
        PyMem_Free(self.heap)
        PyMem_Free(self.free_keys)

    def __len__(self):
        return self.size

    @property
    def keys_in_use(self):
        return self.next_key - self.nfree

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        cdef void* a = PyMem_Realloc(self.deadline, cap * sizeof(int64_t))
        if a == NULL:
            raise MemoryError()
        self.deadline = <int64_t*>a
        a = PyMem_Realloc(self.pos, cap * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.pos = <int32_t*>a
        a = PyMem_Realloc(self.heap, cap * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.heap = <int32_t*>a
        a = PyMem_Realloc(self.free_keys, cap * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.free_keys = <int32_t*>a
        self.cap = cap
        return 0

    cpdef int new_key(self) except -1:
        """A fresh key, not scheduled."""
        cdef int32_t k
        if self.nfree:
            self.nfree -= 1
            return self.free_keys[self.nfree]
        if self.next_key == self.cap:
            self._grow()
        k = <int32_t>self.next_key
        self.next_key += 1
        self.pos[k] = -1
        return k

    cpdef release_key(self, int key):
        """Cancel the key's timer and give the key back for reuse."""
        self._check(key)
        self._remove(key)
        self.free_keys[self.nfree] = key
        self.nfree += 1

    cdef int _check(self, int key) except -1:
        if key < 0 or key >= self.next_key:
            raise KeyError(key)
        return 0

    cdef inline bint _less(self, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
        # order by deadline, then by key so that equal deadlines pop in a stable order
        cdef int32_t a = self.heap[i]
        cdef int32_t b = self.heap[j]
        if self.deadline[a] != self.deadline[b]:
            return self.deadline[a] < self.deadline[b]
        return a < b

    cdef inline void _swap(self, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
        cdef int32_t a = self.heap[i]
        cdef int32_t b = self.heap[j]
        self.heap[i] = b
        self.heap[j] = a
        self.pos[b] = <int32_t>i
        self.pos[a] = <int32_t>j

    cdef void _up(self, Py_ssize_t i) noexcept nogil:
        cdef Py_ssize_t parent
        while i > 0:
            parent = (i - 1) >> 1
            if not self._less(i, parent):
                break
            self._swap(i, parent)
            i = parent

    cdef void _down(self, Py_ssize_t i) noexcept nogil:
        cdef Py_ssize_t child
        while True:
            child = 2 * i + 1
            if child >= self.size:
                break
            if child + 1 < self.size and self._less(child + 1, child):
                child += 1
            if not self._less(child, i):
                break
            self._swap(i, child)
            i = child

    cdef void _remove(self, int key) noexcept nogil:
        cdef Py_ssize_t i = self.pos[key]
        if i < 0:
            return
        self.size -= 1
        if i != self.size:
            self._swap(i, self.size)
            self._down(i)
            self._up(i)
        self.pos[key] = -1

    cpdef schedule(self, int key, int64_t deadline):
        """Set the key's deadline (ms), inserting it or moving it in place."""
        self._check(key)
        cdef Py_ssize_t i = self.pos[key]
        self.deadline[key] = deadline
        if i < 0:
            i = self.size
            self.heap[i] = key
            self.pos[key] = <int32_t>i
            self.size += 1
            self._up(i)
        else:
            self._down(i)
            self._up(i)

    cpdef bint cancel(self, int key) except -1:
        """Unschedule the key; True if it was scheduled."""
        self._check(key)
        if self.pos[key] < 0:
            return False
        self._remove(key)
        return True

    cpdef bint is_scheduled(self, int key) except -1:
        self._check(key)
        return self.pos[key] >= 0

    cpdef int64_t deadline_of(self, int key) except? -1:
        self._check(key)
        if self.pos[key] < 0:
            raise KeyError(f"timer {key} is not scheduled")
        return self.deadline[key]

    cpdef object next_deadline(self):
        """The earliest deadline, or None."""
        if self.size == 0:
            return None
        return self.deadline[self.heap[0]]

    cpdef int pop_due(self, int64_t now) except -2:
        """The key with the earliest deadline if it is <= now (and unschedule it), else -1."""
        cdef int32_t k
        if self.size == 0 or self.deadline[self.heap[0]] > now:
            return -1
        k = self.heap[0]
        self._remove(k)
        return k

    def pop_expired(self, int64_t now):
        """Every key whose deadline is <= now, earliest first, each unscheduled."""
        out = []
        cdef int k = self.pop_due(now)
        while k >= 0:
            out.append(k)
            k = self.pop_due(now)
        return out


@cython.final
@cython.no_gc
cdef class ClassicMember:
    """A member of a classic group: typed fields the state machine reads and writes directly."""

    cdef public str member_id
    cdef public object group_instance_id  # str or None
    cdef public str client_id
    cdef public str client_host
    cdef public int32_t session_timeout_ms
    cdef public int32_t rebalance_timeout_ms
    cdef public str protocol_type
    cdef public list protocols  # JoinGroupRequestProtocol (name, metadata) in the member's order of preference
    cdef public bytes assignment
    cdef public object join_reply  # the parked JoinGroup, or None
    cdef public object sync_reply  # the parked SyncGroup, or None
    cdef public bint is_new
    cdef public int timer  # the member's heartbeat timer key

    def __init__(self, str member_id, group_instance_id, str client_id, str client_host,
                 int32_t session_timeout_ms, int32_t rebalance_timeout_ms, str protocol_type, list protocols):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.timer = -1

    @property
    def is_static(self):
        return self.group_instance_id is not None

    @property
    def awaiting_join(self):
        return self.join_reply is not None

    @property
    def awaiting_sync(self):
        return self.sync_reply is not None

    cpdef object metadata_for(self, str protocol):
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return None

    cpdef bint same_protocols(self, list protocols):
        """Kafka's member.matches: the same protocols, in the same order, with the same metadata."""
        if len(protocols) != len(self.protocols):
            return False
        for a, b in zip(self.protocols, protocols):
            if a.name != b.name or a.metadata != b.metadata:
                return False
        return True

    def __repr__(self):
        return (f"ClassicMember({self.member_id!r}, instance={self.group_instance_id!r}, "
                f"join={'parked' if self.join_reply is not None else '-'}, "
                f"sync={'parked' if self.sync_reply is not None else '-'})")


@cython.final
cdef class MemberTable:
    """The members of one classic group: member id -> member, instance id -> member id, the protocol
    support counts, the number of members awaiting a join response, and the KIP-394 pending members.
    Insertion order is kept (it decides a new leader when the leader leaves)."""

    cdef readonly dict members          # member id -> ClassicMember
    cdef readonly dict static_members   # instance id -> member id
    cdef readonly dict protocol_support  # protocol name -> number of members that list it
    cdef readonly dict pending          # KIP-394 pending member id -> timer key
    cdef readonly Py_ssize_t num_awaiting_join

    def __init__(self):
        self.members = {}
        self.static_members = {}
        self.protocol_support = {}
        self.pending = {}
        self.num_awaiting_join = 0

    def __len__(self):
        return len(self.members)

    def __contains__(self, member_id):
        return member_id in self.members

    def __iter__(self):
        return iter(list(self.members.values()))

    cpdef ClassicMember get(self, str member_id):
        return self.members.get(member_id)

    cpdef object static_member_id(self, object instance_id):
        return self.static_members.get(instance_id)

    cdef void _count_protocols(self, ClassicMember m, int delta):
        for p in m.protocols:
            name = p.name
            self.protocol_support[name] = self.protocol_support.get(name, 0) + delta
            if self.protocol_support[name] == 0:
                del self.protocol_support[name]

    cpdef add(self, ClassicMember m):
        if m.member_id in self.members:
            raise KeyError(f"member {m.member_id} is already in the group")
        self.members[m.member_id] = m
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id
        self._count_protocols(m, 1)
        if m.join_reply is not None:
            self.num_awaiting_join += 1

    cpdef ClassicMember remove(self, str member_id):
        cdef ClassicMember m = self.members.pop(member_id)
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        self._count_protocols(m, -1)
        if m.join_reply is not None:
            self.num_awaiting_join -= 1
        return m

    cpdef set_protocols(self, ClassicMember m, list protocols):
        self._count_protocols(m, -1)
        m.protocols = protocols
        self._count_protocols(m, 1)

    cpdef object set_join_reply(self, ClassicMember m, object reply):
        """Park (or clear, with None) the member's JoinGroup; returns the reply it replaced, if any."""
        old = m.join_reply
        if old is None and reply is not None:
            self.num_awaiting_join += 1
        elif old is not None and reply is None:
            self.num_awaiting_join -= 1
        m.join_reply = reply
        return old

    cpdef rename(self, str old_id, ClassicMember m):
        """Put `m` (a static member's replacement, with a new member id) where `old_id` was."""
        cdef ClassicMember old = self.members.pop(old_id)
        if old.join_reply is not None:
            self.num_awaiting_join -= 1
        self._count_protocols(old, -1)
        self.members[m.member_id] = m
        self._count_protocols(m, 1)
        if m.join_reply is not None:
            self.num_awaiting_join += 1
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id

    cpdef bint supports(self, str protocol_type, str group_protocol_type, list protocols):
        """Kafka's supportsProtocols for a non-empty group: same type, and one protocol all members list."""
        if protocol_type != group_protocol_type:
            return False
        cdef Py_ssize_t n = len(self.members)
        for p in protocols:
            if self.protocol_support.get(p.name, 0) == n:
                return True
        return False

    cpdef int validate(self, str member_id, object instance_id) except -1:
        """Kafka's validateMember: 0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        cdef object mapped
        if instance_id is not None:
            mapped = self.static_members.get(instance_id)
            if mapped is None:
                return UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return FENCED_INSTANCE_ID
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID
        return 0


# ---- the clock -------------------------------------------------------------------------------------------------

# The clock time.monotonic_ns() reads, read without a Python call (CPython's own function for it: private up to
# 3.12, public from 3.13), in ms rounded down as `time.monotonic_ns() // 1_000_000`.
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030D0000
    static inline int64_t kcoord_monotonic_ns(void) { PyTime_t t = 0; (void)PyTime_MonotonicRaw(&t); return t; }
    #else
    static inline int64_t kcoord_monotonic_ns(void) { return (int64_t)_PyTime_GetMonotonicClock(); }
    #endif
    static inline int64_t kcoord_monotonic_ms(void) {
        int64_t ns = kcoord_monotonic_ns(), ms = ns / 1000000;
        return ns % 1000000 < 0 ? ms - 1 : ms;
    }
    """
    int64_t _monotonic_ms "kcoord_monotonic_ms"() noexcept


def monotonic_ms():
    """time.monotonic_ns() // 1_000_000 without a Python frame: kcoord.timers.Clock.now_ms. TimersCore reads the
    same clock in C when its clock's now_ms is this function."""
    return _monotonic_ms()


cdef class TimersCore:
    """The compiled part of kcoord.timers.Timers: the deadline heap, the clock, each key's action, and the arming
    of a key (`arm`, and `arm_in` from compiled code: a heartbeat's session). With the real clock (its now_ms is
    monotonic_ms) the time is read in C; any other clock (tests' ManualClock) is called."""

    cdef readonly DeadlineHeap heap
    cdef readonly object clock
    cdef public list actions  # by key: the action called with the key when its deadline passes, or None
    cdef object _now  # clock.now_ms
    cdef bint _monotonic  # clock.now_ms is monotonic_ms

    def __init__(self, clock):
        self.clock = clock
        self.heap = DeadlineHeap()
        self.actions = []
        self._now = clock.now_ms
        self._monotonic = self._now is monotonic_ms

    cdef int64_t now(self) except? -1:
        if self._monotonic:
            return _monotonic_ms()
        return self._now()

    cdef int arm_in(self, int key, int64_t delay_ms) except -1:
        """(Re)schedule the key delay_ms from now."""
        self.heap.schedule(key, self.now() + delay_ms)
        return 0

    def arm(self, int key, int64_t delay_ms, action=None):
        """(Re)schedule the key `delay_ms` from now; a given action replaces the key's action."""
        if action is not None:
            self.actions[key] = action
        self.arm_in(key, delay_ms)

    def remaining_ms(self, int key):
        """Milliseconds until the key's deadline (below 0 once it has passed and not fired yet); KeyError if the
        key is not armed."""
        return self.heap.deadline_of(key) - self.now()


# ---- KIP-848 groups: what consumer and connect groups share --------------------------------------------------------

import numpy as np

from kcoord._core._wire import HEARTBEAT_HAS_INSTANCE_ID, consumer_heartbeat_shape

# Kafka's MemberState.STABLE (kcoord._core._assign.STABLE: the reconciliation step's states)
cdef enum:
    _STABLE = 0
CONSUMER_STABLE = _STABLE

EMPTY_IDS = np.zeros(0, dtype=np.int32)
EMPTY_IDS.flags.writeable = False

cdef int _HAS_INSTANCE_ID = HEARTBEAT_HAS_INSTANCE_ID
cdef object _shape = consumer_heartbeat_shape

# Kafka's error codes an OffsetCommit's check answers (kcoord.errors has them by name)
cdef enum:
    _ILLEGAL_GENERATION = 22
    _UNKNOWN_MEMBER_ID = 25
    _UNSUPPORTED_VERSION = 35
    _FENCED_INSTANCE_ID = 82
    _STALE_MEMBER_EPOCH = 113


# no_gc holds for a subclass only if its base is no_gc too (Cython's needs_gc asks the base); neither holds a
# reference back to a member or a group. Not subclassed in Python.
@cython.no_gc
cdef class ModernMember:
    """A member of a KIP-848 group (consumer or connect), with the fields both types keep: typed, as
    ClassicMember's, so that the heartbeat's checks are loads rather than attribute lookups. Assignments are the
    group's int32 id arrays. Each type's COPIED names the fields copy_as carries over."""

    cdef public str member_id
    cdef public object instance_id  # str or None
    cdef public str client_id
    cdef public str client_host
    cdef public int32_t rebalance_timeout_ms
    cdef public int32_t member_epoch
    cdef public int32_t previous_member_epoch
    cdef public int32_t state  # Kafka's MemberState value
    cdef public object assigned
    cdef public object pending  # ids pending revocation
    cdef public int session_key
    cdef public int32_t rebalance_armed_epoch
    cdef public object quiet_response  # the answer to a heartbeat that changes nothing, at quiet_epoch
    cdef public int32_t quiet_epoch

    COPIED = ()

    def __init__(self, str member_id):
        self.member_id = member_id
        self.client_id = ""
        self.client_host = ""
        self.rebalance_timeout_ms = -1
        self.state = _STABLE
        self.assigned = EMPTY_IDS
        self.pending = EMPTY_IDS
        self.session_key = -1
        self.rebalance_armed_epoch = -1
        self.quiet_epoch = -1
        self._init_own()

    cdef void _init_own(self) noexcept:
        pass

    def copy_as(self, str member_id):
        """The same member under another id (a static member's replacement); timers and cached answers are not
        copied."""
        m = type(self)(member_id)
        for name in self.COPIED:
            setattr(m, name, getattr(self, name))
        return m

    def __repr__(self):
        return (f"{type(self).__name__}({self.member_id!r}, epoch={self.member_epoch}, state={self.state}, "
                f"assigned={self.assigned.tolist()}, pending={self.pending.tolist()})")


cdef class ModernGroupCore:
    """What a KIP-848 group's regular heartbeat reads, typed, and that heartbeat compiled (quick_heartbeat). Each
    type says what a heartbeat must not change (_unchanged) and what the quiet answer is (_quiet)."""

    cdef public dict members  # member id -> the type's member
    cdef public int32_t group_epoch
    cdef public int32_t assignment_epoch
    cdef TimersCore _timers
    cdef int64_t _session_ms
    cdef readonly int32_t heartbeat_interval_ms
    cdef object _response

    def init_core(self, TimersCore timers, int64_t session_ms, int32_t interval_ms, response):
        """timers: the coordinator's (kcoord.timers.Timers); session_ms, interval_ms: the group's session timeout
        and heartbeat interval; response: the type's heartbeat response class."""
        self._timers = timers
        self._session_ms = session_ms
        self.heartbeat_interval_ms = interval_ms
        self._response = response
        self._init_own()

    cdef void _init_own(self) noexcept:
        pass

    cdef bint _unchanged(self, object req, ModernMember m) except -1:
        return True

    cdef object _quiet(self, ModernMember m, int32_t epoch):
        return self._response(member_id=m.member_id, member_epoch=epoch,
                              heartbeat_interval_ms=self.heartbeat_interval_ms)

    def quick_heartbeat(self, req, str client_id, str client_host):
        """The hot path, or None: a member at its epoch that changes nothing of its own (what _unchanged checks; the
        same client id and host), in a group that owes no new target. Its session is extended; if it is reconciled
        it gets the answer it got last time (made once per epoch), else `reconcile_heartbeat` moves it one compiled
        step towards its target. Nothing here is looked at by the stateless request checks (a known member's id is
        not blank), so the router calls this before them."""
        cdef object found = self.members.get(req.member_id)
        if found is None:
            return None
        cdef ModernMember m = <ModernMember>found
        cdef int32_t epoch = req.member_epoch
        if (epoch != m.member_epoch or epoch <= 0 or self.group_epoch != self.assignment_epoch
                or client_id != m.client_id or client_host != m.client_host
                or not self._unchanged(req, m)):
            return None
        self._timers.arm_in(m.session_key, self._session_ms)
        if m.state != _STABLE or epoch != self.assignment_epoch:
            return self.reconcile_heartbeat(m, req)
        if m.quiet_epoch != epoch:
            m.quiet_response = self._quiet(m, epoch)
            m.quiet_epoch = epoch
        return m.quiet_response


# ---- KIP-848 consumer groups ------------------------------------------------------------------------------------

@cython.final
@cython.no_gc
cdef class ConsumerMember(ModernMember):
    """A member of a consumer group (KIP-848)."""

    cdef public object rack_id  # str or None
    cdef public tuple subscribed  # SubscribedTopicNames, sorted
    cdef public tuple topic_names  # what it consumes: the names and the regex's matches, sorted
    cdef public object regex  # str or None
    cdef public object server_assignor  # str or None
    cdef public object topics  # subscribed topic indices in the group's topic space (int32 array)
    cdef public tuple topics_key  # the same as a tuple (the target computation groups members by it)
    # A classic-protocol member inside the consumer group (KIP-848 migration): its ClassicMemberMetadata
    # (session timeout and supported protocols, as the member metadata record keeps them); None for a member that
    # speaks the consumer protocol.
    cdef public object classic

    COPIED = ("instance_id", "rack_id", "client_id", "client_host", "subscribed", "topic_names", "regex",
              "rebalance_timeout_ms", "server_assignor", "member_epoch", "previous_member_epoch", "state",
              "assigned", "pending", "topics", "topics_key", "classic")

    cdef void _init_own(self) noexcept:
        self.subscribed = ()
        self.topic_names = ()
        self.topics = EMPTY_IDS
        self.topics_key = ()


cdef class ConsumerGroupCore(ModernGroupCore):
    """A consumer group's compiled heartbeat. kcoord.groups.consumer.ConsumerGroup is the rest of the group, in
    Python, on top of this. A heartbeat changes nothing of its own when it sends no subscription, timeout, rack or
    assignor, its instance id (if it sends one) is its own, the member speaks the consumer protocol, and the
    group's topics have not changed."""

    cdef public int64_t catalogue_version  # the topic catalogue's version the group last looked at
    cdef public object catalogue

    cdef bint _unchanged(self, object req, ModernMember m) except -1:
        cdef int shape = _shape(req)
        return not (shape < 0 or (<ConsumerMember>m).classic is not None
                    or self.catalogue_version != self.catalogue.version
                    or (shape & _HAS_INSTANCE_ID and req.instance_id != m.instance_id))

    # ---- OffsetCommit's check, compiled: the offsets' hot path (kcoord._core._offsets) asks it once a commit ----

    def quick_validate_offset_commit(self, member_id, instance_id, int32_t member_epoch, int version=9):
        """ConsumerGroup.validate_offset_commit (Kafka's ConsumerGroup.validateOffsetCommit) compiled, for the
        offsets' hot path; the general path asks the Python method, and the differential test
        (tests/unit/test_offsets_quick.py) holds the two to the same answers. An epoch below zero (an admin, a
        simple consumer) only for an empty group; otherwise the member must exist, use OffsetCommit v9+, and send
        its current epoch (a classic member inside the group: its generation, which is its member epoch, and its
        instance id)."""
        if member_epoch < 0:
            return _UNKNOWN_MEMBER_ID if self.members else 0
        found = self.members.get(member_id)
        if found is None:
            return _UNKNOWN_MEMBER_ID
        cdef ConsumerMember m = <ConsumerMember>found
        if m.classic is not None:
            if instance_id is not None and m.instance_id != instance_id:
                return _FENCED_INSTANCE_ID
            return 0 if member_epoch == m.member_epoch else _ILLEGAL_GENERATION
        if version < 9:
            return _UNSUPPORTED_VERSION
        return 0 if member_epoch == m.member_epoch else _STALE_MEMBER_EPOCH


# ---- connect groups (kcoord's own group type) -------------------------------------------------------------------

@cython.final
@cython.no_gc
cdef class ConnectMember(ModernMember):
    """A worker of a connect group. Units (connectors and tasks) are the group's int32 unit ids. `assignors` is the
    worker's ClientAssignors as tuples (name, minimum_version, maximum_version, reason, version, metadata), in its
    order of preference."""

    cdef public tuple assignors
    cdef public int64_t joined  # arrival order in the group: the longest-standing member decides ties
    cdef public object delivered  # (version, metadata) of the assignment the worker was last sent, or None

    COPIED = ("instance_id", "client_id", "client_host", "rebalance_timeout_ms", "assignors", "joined",
              "member_epoch", "previous_member_epoch", "state", "assigned", "pending", "delivered")

    cdef void _init_own(self) noexcept:
        self.assignors = ()


cdef class ConnectGroupCore(ModernGroupCore):
    """A connect group's compiled heartbeat. kcoord.groups.connect.ConnectGroup is the rest of the group, in
    Python, on top of this. A heartbeat changes nothing of its own when it sends no assignors, rebalance timeout or
    server assignor, and its instance id, if any, is its own; the quiet answer carries the negotiated version."""

    cdef public int32_t assignor_version  # the negotiated version V the installed target was computed at

    cdef void _init_own(self) noexcept:
        self.assignor_version = -1

    cdef bint _unchanged(self, object req, ModernMember m) except -1:
        return not (req.client_assignors is not None or req.rebalance_timeout_ms != -1
                    or req.server_assignor is not None
                    or (req.instance_id is not None and req.instance_id != m.instance_id))

    cdef object _quiet(self, ModernMember m, int32_t epoch):
        return self._response(member_id=m.member_id, member_epoch=epoch,
                              heartbeat_interval_ms=self.heartbeat_interval_ms,
                              assignor_version=self.assignor_version)


def intern_known_tasks(list entries, Py_ssize_t start, dict by_name, list out):
    """Connect groups' unit interning, the common case compiled: append to `out` the unit ids of entries[start:]
    (each with .connector and .task_ids), looked up in by_name (connector -> {task: unit id}), until an entry names
    a unit the table does not have yet. Returns that entry's index (its ids are not appended), or len(entries)."""
    cdef Py_ssize_t i, j, n = len(entries), mark, m
    cdef object t, d, ids, u
    cdef list ids_list
    for i in range(start, n):
        t = entries[i]
        d = by_name.get(t.connector)
        if d is None:
            return i
        ids = t.task_ids
        mark = len(out)
        if type(ids) is list:
            ids_list = <list>ids
            m = len(ids_list)
            for j in range(m):
                u = (<dict>d).get(ids_list[j])
                if u is None:
                    del out[mark:]
                    return i
                out.append(u)
        else:
            for x in ids:
                u = (<dict>d).get(x)
                if u is None:
                    del out[mark:]
                    return i
                out.append(u)
    return n
