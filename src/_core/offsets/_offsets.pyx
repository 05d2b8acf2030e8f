# The offsets' hot path: OffsetCommit and OffsetFetch answered without a Python object per partition beyond what the
# offsets table keeps. kcoord.offsets.Offsets is the rest, in Python, on top of OffsetsCore; its general path
# (offset_commit, offset_fetch) answers whatever the quick path leaves, and is the oracle the differential test
# holds this one to (tests/unit/test_offsets_quick.py).

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from commit_flat cimport CommitHead, CommitPart

from kcoord._core._members import ConsumerGroupCore
from kcoord._core._wire import (
    OffsetCommitRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
    _offset_commit_flat,
    offset_commit_answer,
    offset_fetch_partitions,
)


cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL


# Kafka's error codes this path answers (kcoord.errors has them by name; the core layer imports nothing above it)
cdef int16_t ILLEGAL_GENERATION = 22
cdef int16_t INVALID_GROUP_ID = 24

# The record types and versions kcoord.records writes for a commit: an OffsetCommitKey (type 1) and an
# OffsetCommitValue v3.
cdef int16_t OFFSET_COMMIT = 1
cdef int16_t OFFSET_COMMIT_VALUE_VERSION = 3
cdef Py_ssize_t KEY_FIXED = 2 + 2 + 2 + 4
cdef Py_ssize_t VALUE_FIXED = 2 + 8 + 4 + 2 + 8

# A commit of more partitions than this takes the general path (whose long answers are Deferred).
QUICK_COMMIT_MAX = 1024
cdef Py_ssize_t _QUICK_MAX = QUICK_COMMIT_MAX
cdef bytes ZERO_UUID = b"\x00" * 16
cdef dict _EMPTY = {}
cdef str _NO_TEXT = ""
cdef object _REQUEST = OffsetCommitRequest
# the codec's helpers, held here so that a call skips the module's namespace
cdef object _flat = _offset_commit_flat
cdef object _answer = offset_commit_answer
cdef object _fetch_partitions = offset_fetch_partitions


cdef inline void _put16(char* p, uint16_t v) noexcept:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


cdef inline void _put32(char* p, uint32_t v) noexcept:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline void _put64(char* p, uint64_t v) noexcept:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)


cdef Py_ssize_t java_length(str s):
    """Java's String.length() (UTF-16 code units), what Kafka compares with offset.metadata.max.bytes."""
    cdef Py_ssize_t n = len(s)
    cdef Py_UCS4 ch
    if PyUnicode_KIND(s) == 4:
        for ch in s:
            if ch > 0xFFFF:
                n += 1
    return n


cdef const char* utf8(str s, Py_ssize_t* size):
    """The UTF-8 bytes of s (cached in the str), or NULL when s has none (a lone surrogate): the caller falls back."""
    try:
        return PyUnicode_AsUTF8AndSize(s, size)
    except UnicodeError:
        return NULL


cdef bytes offset_key(const char* group, Py_ssize_t glen, const char* topic, Py_ssize_t tlen, int32_t partition):
    cdef bytes b = PyBytes_FromStringAndSize(NULL, KEY_FIXED + glen + tlen)
    cdef char* p = PyBytes_AS_STRING(b)
    _put16(p, <uint16_t>OFFSET_COMMIT)
    _put16(p + 2, <uint16_t>glen)
    memcpy(p + 4, group, glen)
    p += 4 + glen
    _put16(p, <uint16_t>tlen)
    memcpy(p + 2, topic, tlen)
    _put32(p + 2 + tlen, <uint32_t>partition)
    return b


cdef bytes offset_value(int64_t offset, int32_t epoch, const char* meta, Py_ssize_t mlen, int64_t timestamp):
    cdef bytes b = PyBytes_FromStringAndSize(NULL, VALUE_FIXED + mlen)
    cdef char* p = PyBytes_AS_STRING(b)
    _put16(p, <uint16_t>OFFSET_COMMIT_VALUE_VERSION)
    _put64(p + 2, <uint64_t>offset)
    _put32(p + 10, <uint32_t>epoch)
    _put16(p + 14, <uint16_t>mlen)
    if mlen:
        memcpy(p + 16, meta, mlen)
    _put64(p + 16 + mlen, <uint64_t>timestamp)
    return b


cdef struct Extra:  # what the quick path works out for each CommitPart
    PyObject* name  # its topic's name in the table: the request's (v0-9) or the catalogue's (v10), borrowed
    const char* tname  # ... its UTF-8 bytes
    Py_ssize_t tlen
    Py_ssize_t mlen  # the metadata's UTF-8 bytes
    const char* meta  # ... held by the request's str


cdef class OffsetsCore:
    """What the offsets' hot path reads, typed, and that path compiled (`handle_commit`, `handle_fetch`, the API
    handlers). kcoord.offsets.Offsets is the rest; its `offset_commit` and `offset_fetch` answer whatever the
    quick path leaves (and everything while `quick` is false)."""

    cdef public dict by_group  # group id -> {(topic, partition): (offset, leader epoch, metadata, timestamp ms)}
    cdef public object groups  # the router's groups by id
    cdef public object create_group
    cdef public object store
    cdef public object topics  # the topic catalogue
    cdef public object clock
    cdef public int64_t metadata_max_bytes
    cdef public int64_t message_max_bytes
    cdef public int64_t commit_count
    cdef public object planned
    cdef public bint quick

    def __cinit__(self):
        self.by_group = {}
        self.quick = True

    # ---- OffsetCommit ---------------------------------------------------------------------------------------

    def handle_commit(self, req, int version, client_id="", client_host=""):
        """The OffsetCommit handler: the quick path, else the general one (`offset_commit`)."""
        if self.quick:
            r = self._quick_commit(req, version)
            if r is not None:
                return r
        return self.offset_commit(req, version, client_id, client_host)

    def quick_commit(self, req, int version):
        """The answer to an OffsetCommit whose every partition is one the catalogue has, with metadata within
        offset.metadata.max.bytes, no partition named twice, a group id, and records within message.max.bytes;
        the commit is staged and applied when the group takes it, and every partition answers the group's
        verdict. None for any other request (nothing done): the general path answers it."""
        return self._quick_commit(req, version)

    cdef object _quick_commit(self, object req, int version):
        cdef CommitHead head
        cdef CommitPart stack[8]
        cdef Extra stack_extra[8]
        cdef CommitPart* parts = stack
        cdef Extra* extra = stack_extra
        cdef Py_ssize_t n
        cdef object planned = self.planned
        if version < 0 or version > 10 or (planned is not None and planned[0] is req) or type(req) is not _REQUEST:
            return None
        n = _flat(req, <size_t>&head, <size_t>stack, 8)
        if n > 8:
            if n > _QUICK_MAX:
                return None
            parts = <CommitPart*>PyMem_Malloc(n * (sizeof(CommitPart) + sizeof(Extra)))
            if parts == NULL:
                raise MemoryError()
            extra = <Extra*>(parts + n)
        try:
            if parts != stack:
                _flat(req, <size_t>&head, <size_t>parts, n)
            return self._commit(&head, parts, extra, n, version)
        finally:
            if parts != stack:
                PyMem_Free(parts)

    cdef object _commit(self, CommitHead* head, CommitPart* parts, Extra* extra, Py_ssize_t n, int version):
        cdef Py_ssize_t i, glen, tlen = 0, size = 0
        cdef int64_t count = 0
        cdef int64_t limit = self.metadata_max_bytes
        cdef int64_t now
        cdef int32_t generation
        cdef int error
        cdef const char* gp
        cdef const char* tp = NULL
        cdef PyObject* tname = NULL
        cdef CommitPart* q
        cdef Extra* x
        cdef PyObject* seen = NULL  # the request topic (by its name or id) the previous partition was of
        cdef dict by_name = None, by_id = None
        cdef object groups = self.groups
        group_id = <object>head.group_id
        if n == 0 or type(group_id) is not str or not group_id:
            return None
        gp = utf8(group_id, &glen)
        if gp == NULL or glen > 0x7FFF:
            return None
        if version >= 10:
            by_id = self.topics.by_id
        else:
            by_name = self.topics.by_name
        for i in range(n):
            q = &parts[i]
            x = &extra[i]
            if (q.topic_id if version >= 10 else q.name) != seen:
                seen = q.topic_id if version >= 10 else q.name
                topic = by_id.get(<object>q.topic_id) if version >= 10 else by_name.get(<object>q.name)
                if topic is None:
                    return None
                name = topic.name if version >= 10 else <object>q.name
                if type(name) is not str:
                    return None
                tp = utf8(name, &tlen)
                if tp == NULL or tlen > 0x7FFF:
                    return None
                tname = <PyObject*>name
                count = topic.partitions
            if not 0 <= q.partition < count:
                return None
            x.name = tname
            x.tname = tp
            x.tlen = tlen
            x.mlen = 0
            x.meta = NULL
            meta = <object>q.metadata
            if meta is None:
                q.metadata = <PyObject*>_NO_TEXT  # a null metadata is kept as "", as the record keeps it
            elif type(meta) is not str:
                return None
            elif meta:
                if java_length(meta) > limit:
                    return None
                x.meta = utf8(meta, &x.mlen)
                if x.meta == NULL or x.mlen > 0x7FFF:
                    return None
            size += KEY_FIXED + VALUE_FIXED + glen + tlen + x.mlen
        if n > 1 and _named_twice(parts, extra, n):  # the general path's dict keeps one of them
            return None
        generation = head.generation if version >= 1 else -1
        g = (<dict>groups).get(group_id) if type(groups) is dict else groups.get(group_id)
        if g is None:
            error = 0 if generation < 0 else ILLEGAL_GENERATION
        elif isinstance(g, ConsumerGroupCore):  # the consumer group's check, compiled
            error = g.quick_validate_offset_commit(<object>head.member_id if version >= 1 else "",
                                                   <object>head.instance_id, generation, version)
        else:
            error = g.validate_offset_commit(<object>head.member_id if version >= 1 else "", <object>head.instance_id,
                                             generation, version)
        if not error:
            if size > self.message_max_bytes:
                return None  # UNKNOWN_SERVER_ERROR, as the general path answers
            if g is None:
                self.create_group(group_id)
            now = self.clock.wall_ms()
            self._apply(group_id, gp, glen, parts, extra, n, now)
            self.commit_count += n
        return _answer(<object>head.topics, error)

    cdef int _apply(self, str group_id, const char* gp, Py_ssize_t glen, CommitPart* parts, Extra* extra,
                    Py_ssize_t n, int64_t now) except -1:
        # staged first, then applied, as Offsets._write does
        cdef Py_ssize_t i
        cdef CommitPart* q
        cdef dict mine
        store = self.store
        if store.persistent:
            stage = store.stage
            for i in range(n):
                q = &parts[i]
                stage(offset_key(gp, glen, extra[i].tname, extra[i].tlen, q.partition),
                      offset_value(q.offset, q.leader_epoch, extra[i].meta, extra[i].mlen, now))
        mine = self.by_group.get(group_id)
        if mine is None:
            mine = self.by_group[group_id] = {}
        ts = now
        for i in range(n):
            q = &parts[i]
            mine[(<object>extra[i].name, q.partition)] = (q.offset, q.leader_epoch, <object>q.metadata, ts)
        return 0

    # ---- OffsetFetch ----------------------------------------------------------------------------------------

    def handle_fetch(self, req, int version, client_id="", client_host=""):
        """The OffsetFetch handler: the quick path (every form), else the general one (`offset_fetch`)."""
        if self.quick and 0 <= version <= 10:
            return self.quick_fetch(req, version)
        return self.offset_fetch(req, version, client_id, client_host)

    def quick_fetch(self, req, int version):
        """OffsetFetch in one pass per topic: the same answer as `offset_fetch`, each partition's made in C."""
        cdef list out = []
        cdef set seen
        if version <= 7:
            group_id = req.group_id
            committed = self.by_group.get(group_id, _EMPTY)
            wanted = req.topics
            if wanted is None:
                for name, parts in _all_committed(committed):
                    out.append(OffsetFetchResponseTopic(
                        name=name, partitions=_fetch_partitions(committed, name, parts, False)))
            else:
                for t in wanted:
                    name = t.name
                    out.append(OffsetFetchResponseTopic(
                        name=name, partitions=_fetch_partitions(committed, name, t.partition_indexes, False)))
            return OffsetFetchResponse(topics=out, error_code=0 if group_id else INVALID_GROUP_ID)
        seen = set()
        catalogue = self.topics
        for rg in req.groups:
            gid = rg.group_id
            if gid in seen:  # each group once: a repeated id cannot multiply the answer
                continue
            seen.add(gid)
            error = 0 if gid else INVALID_GROUP_ID
            g = self.groups.get(gid)
            if not error and g is not None and version >= 9:
                refused = g.validate_offset_fetch(rg.member_id, rg.member_epoch)
                if refused:
                    out.append(OffsetFetchResponseGroup(group_id=gid, topics=[], error_code=refused))
                    continue
            committed = self.by_group.get(gid, _EMPTY)
            group_topics = []
            if rg.topics is None:
                by_name = catalogue.by_name
                for name, parts in _all_committed(committed):
                    topic = by_name.get(name)
                    group_topics.append(OffsetFetchResponseTopics(
                        name=name, topic_id=topic.topic_id if topic is not None else ZERO_UUID,
                        partitions=_fetch_partitions(committed, name, parts, True)))
            else:
                by_id = catalogue.by_id
                for t in rg.topics:
                    if version >= 10:
                        topic = by_id.get(t.topic_id)
                        name = topic.name if topic is not None else None
                    else:
                        name = t.name
                    group_topics.append(OffsetFetchResponseTopics(
                        name=name or "", topic_id=t.topic_id,
                        partitions=_fetch_partitions(committed, name, t.partition_indexes, True)))
            out.append(OffsetFetchResponseGroup(group_id=gid, topics=group_topics, error_code=error))
        return OffsetFetchResponse(groups=out)


cdef bint _named_twice(CommitPart* parts, Extra* extra, Py_ssize_t n) except -1:
    cdef Py_ssize_t i, j
    cdef set seen
    if n <= 16:
        for i in range(1, n):
            for j in range(i):
                if parts[i].partition == parts[j].partition and (
                        extra[i].name == extra[j].name or <object>extra[i].name == <object>extra[j].name):
                    return True
        return False
    seen = set()
    for i in range(n):
        seen.add((<object>extra[i].name, parts[i].partition))
    return len(seen) != n


cdef list _all_committed(dict committed):
    """(topic, [partition, ...]) for every committed offset, topics and partitions in order (as sorting the
    table's (topic, partition) keys orders them)."""
    cdef dict by_topic = {}
    cdef list parts
    for key in committed:
        name = (<tuple>key)[0]
        parts = by_topic.get(name)
        if parts is None:
            parts = by_topic[name] = []
        parts.append((<tuple>key)[1])
    out = []
    for name in sorted(by_topic):
        parts = by_topic[name]
        parts.sort()
        out.append((name, parts))
    return out
