# The Kafka wire codec: frame splitting, headers, and every message kcoord speaks.
#
# The per-message classes and their flat decode/encode functions are generated (generated.pxi, written by
# kcoord.protocol.generate from kcoord/protocol/*.py); this file holds the hand-written runtime they use.

import abc

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t
from libc.string cimport memcpy, memmove

from commit_flat cimport CommitHead, CommitPart
from wire_buffer cimport *
from wire_cursor cimport *


class DecodeError(ValueError):
    """Bytes that are not a valid message of the expected type and version."""


class EncodeError(ValueError):
    """A value that the requested version cannot carry (or a null where the version forbids one)."""


class UnsupportedVersionError(ValueError):
    """An API key or version this codec does not implement."""

    def __init__(self, msg, api_key=-1, api_version=-1, correlation_id=-1):
        super().__init__(msg)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class FrameError(ValueError):
    """A size prefix that is negative or above the configured maximum: the connection must be closed."""


ctypedef object (*dec_fn)(Cursor*)
ctypedef int (*enc_fn)(WBuf*, object) except -1

cdef bytes ZERO_UUID = b"\x00" * 16
cdef object _DEFAULT = object()

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


# ---- helpers the generated code calls ---------------------------------------------------------------------

cdef inline Py_ssize_t cap_count(Cursor* c, Py_ssize_t n, Py_ssize_t min_size) noexcept nogil:
    # An element count from the wire: -1 (null) passes; otherwise it must fit in what remains at
    # min_size bytes an element, so a short frame cannot make us allocate for a huge claimed count.
    if n > 0 and n > (c.end - c.p) // min_size:
        c.bad = 1
        c.p = c.end
        return 0
    return n


cdef int null_error(str cls, str field) except -1:
    raise EncodeError(f"{cls}.{field} is null, which this version does not allow")


cdef int absent_error(str cls, str field) except -1:
    raise EncodeError(f"{cls}.{field} has a non-default value, which this version cannot carry")


cdef int unsupported(str cls, int version, int lo, int hi) except -1:
    raise UnsupportedVersionError(f"{cls} has versions {lo}-{hi}, not {version}", -1, version)


cdef inline object as_seq(object items):
    if type(items) is list or type(items) is tuple:
        return items
    return list(items)


cdef int w_tagged(WBuf* w, list entries) except -1:
    # entries: (tag, bytes) sorted by tag
    cdef Py_ssize_t n
    cdef int prev = -1
    w_uvarint(w, <uint32_t>len(entries))
    for tag, data in entries:
        if tag <= prev:
            raise EncodeError(f"tagged field {tag} given twice or out of order")
        prev = tag
        w_uvarint(w, <uint32_t>tag)
        n = len(data)
        w_uvarint(w, <uint32_t>n)
        w_raw(w, PyBytes_AS_STRING(data), n)
    return 0


# ---- the base of every message and struct -----------------------------------------------------------------

class Message(abc.ABC):
    """The common face of every decoded Kafka message and struct (a virtual base: each generated class is
    registered with it). Attributes are typed; `unknown_tags` keeps tagged fields this version does not know,
    as (tag, bytes), so a frame re-encodes byte for byte.

    The generated classes are standalone cdef classes rather than subclasses of a cdef base, because only a
    base class may keep a freelist, and a freelist halves the cost of creating a small message.
    """

    __slots__ = ()


cdef object msg_eq(object a, object b):
    if type(b) is not type(a):
        return NotImplemented
    for name in a._FIELDS:
        if getattr(a, name) != getattr(b, name):
            return False
    return (a.unknown_tags or None) == (b.unknown_tags or None)


cdef str msg_repr(object m):
    parts = [f"{name}={getattr(m, name)!r}" for name in m._FIELDS]
    if m.unknown_tags:
        parts.append(f"unknown_tags={m.unknown_tags!r}")
    return f"{type(m).__name__}({', '.join(parts)})"


cdef dict msg_to_dict(object m):
    return {name: _plain(getattr(m, name)) for name in m._FIELDS}


cdef object _plain(object v):
    if hasattr(type(v), "_FIELDS"):
        return msg_to_dict(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# ---- output buffer ---------------------------------------------------------------------------------------

@cython.final
cdef class WriteBuffer:
    """A growable byte buffer encoders write into; exposes its bytes through the buffer protocol."""

    cdef WBuf w
    cdef int exports

    def __cinit__(self, Py_ssize_t capacity=256):
        wb_init(&self.w, capacity)

    def __dealloc__(self):
        wb_free(&self.w)

    def __len__(self):
        return self.w.len

    def getvalue(self):
        return PyBytes_FromStringAndSize(self.w.buf, self.w.len)

    def clear(self):
        if self.exports:
            raise BufferError("a memoryview of this buffer is still alive")
        self.w.len = 0

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.w.buf, self.w.len, 1, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1

    cdef int check_writable(self) except -1:
        if self.exports:
            raise BufferError("a memoryview of this buffer is still alive")
        return 0


# ---- decode / encode entry points -------------------------------------------------------------------------

cdef object _run(Cursor* c, dec_fn fn, bint whole):
    try:
        o = fn(c)
    except UnicodeDecodeError as e:
        raise DecodeError(f"a string is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if c.bad:
        raise DecodeError("truncated or malformed message")
    if whole and c.p != c.end:
        raise DecodeError(f"{c.end - c.p} bytes left over after the message")
    return o


cdef object _decode(object buf, Py_ssize_t offset, dec_fn fn, bint whole):
    cdef Py_buffer view
    cdef Cursor c
    cdef const unsigned char* base
    cdef Py_ssize_t size
    if PyBytes_CheckExact(buf):
        base = <const unsigned char*>PyBytes_AS_STRING(buf)
        size = PyBytes_GET_SIZE(buf)
        if offset < 0 or offset > size:
            raise DecodeError("offset outside the buffer")
        c.p = base + offset
        c.end = base + size
        c.bad = 0
        o = _run(&c, fn, whole)
        return o if whole else (o, c.p - base)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        base = <const unsigned char*>view.buf
        if offset < 0 or offset > view.len:
            raise DecodeError("offset outside the buffer")
        c.p = base + offset
        c.end = base + view.len
        c.bad = 0
        o = _run(&c, fn, whole)
        return o if whole else (o, c.p - base)
    finally:
        PyBuffer_Release(&view)


cdef inline object decode_whole(object buf, dec_fn fn):
    return _decode(buf, 0, fn, 1)


cdef inline object decode_prefix(object buf, Py_ssize_t offset, dec_fn fn):
    return _decode(buf, offset, fn, 0)


cdef object encode_bytes(object obj, enc_fn fn, int version):
    cdef WBuf w
    wb_init(&w, 256)
    try:
        fn(&w, obj)
        return PyBytes_FromStringAndSize(w.buf, w.len)
    except EncodeError as e:
        raise EncodeError(f"{e} (version {version})") from None
    finally:
        wb_free(&w)


cdef int encode_into_buffer(WriteBuffer buf, object obj, enc_fn fn, int version) except -1:
    buf.check_writable()
    cdef Py_ssize_t mark = buf.w.len
    try:
        fn(&buf.w, obj)
    except EncodeError as e:
        buf.w.len = mark  # leave the buffer as it was
        raise EncodeError(f"{e} (version {version})") from None
    except BaseException:
        buf.w.len = mark
        raise
    return 0


cdef unsigned int _ticks = 0
# A function in bytecode: the interpreter checks, on entering it, whether another thread has asked for the GIL
# (CPython sets that request once a waiter has waited the switch interval, 5 ms) and hands it over if so.
cdef object _switch_point = eval("lambda: None")


cdef inline void gil_tick() noexcept:
    # Called by the generated codec once per array element: every 1,024th enters the interpreter, so a large
    # request decoded or encoded off the event loop (the server's worker) gives the GIL to the loop as Python code
    # would, after at most the switch interval. (Merely releasing and retaking the GIL here does not: each release
    # wakes the waiting loop, which then finds the GIL taken again and starts its 5 ms wait afresh, forever.)
    global _ticks
    _ticks += 1
    if not (_ticks & 1023):
        _switch_point()


include "generated.pxi"

for _cls in STRUCT_TYPES:
    Message.register(_cls)


# ---- what a ConsumerGroupHeartbeat carries (the coordinator's hot path reads it in one call) ----------------

HEARTBEAT_CHANGES_MEMBER = -1
HEARTBEAT_HAS_INSTANCE_ID = 1
HEARTBEAT_HAS_TOPIC_PARTITIONS = 2


def consumer_heartbeat_shape(ConsumerGroupHeartbeatRequest req):
    """HEARTBEAT_CHANGES_MEMBER (-1) when the request sets any field that describes the member (subscribed names or
    regex, rebalance timeout, rack, server assignor); else 0, plus HEARTBEAT_HAS_INSTANCE_ID and
    HEARTBEAT_HAS_TOPIC_PARTITIONS for the two fields that may repeat what the coordinator knows. Nine attribute
    reads from Python cost more than the rest of a stable member's heartbeat check."""
    if (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
            or req.rebalance_timeout_ms != -1 or req.rack_id is not None or req.server_assignor is not None):
        return HEARTBEAT_CHANGES_MEMBER
    return ((HEARTBEAT_HAS_INSTANCE_ID if req.instance_id is not None else 0)
            | (HEARTBEAT_HAS_TOPIC_PARTITIONS if req.topic_partitions is not None else 0))


# ---- what the offsets' hot path (kcoord._core._offsets) builds in one call --------------------------------------
# Another module reaches these classes' fields only through Python attributes; here they are struct fields, so an
# answer of many partitions costs one allocation and a few stores per partition.

def offset_commit_answer(list topics, int16_t error_code):
    """The OffsetCommitResponse to a request whose `topics` (its OffsetCommitRequestTopic list) all answer
    `error_code`: each topic's name and id and each partition's index as the request has them."""
    cdef list out = []
    cdef list parts
    cdef OffsetCommitRequestTopic t
    cdef OffsetCommitRequestPartition p
    cdef OffsetCommitResponseTopic rt
    cdef OffsetCommitResponsePartition rp
    cdef OffsetCommitResponse r
    for t in topics:
        parts = []
        for p in t.partitions:
            rp = OffsetCommitResponsePartition.__new__(OffsetCommitResponsePartition)
            rp.partition_index = p.partition_index
            rp.error_code = error_code
            parts.append(rp)
        rt = OffsetCommitResponseTopic.__new__(OffsetCommitResponseTopic)
        rt.name = t.name
        rt.topic_id = t.topic_id
        rt.partitions = parts
        out.append(rt)
    r = OffsetCommitResponse.__new__(OffsetCommitResponse)
    r.topics = out
    return r


def _offset_commit_flat(OffsetCommitRequest req, size_t head, size_t parts, Py_ssize_t cap):
    """For kcoord._core._offsets alone (it takes raw addresses): lay `req` flat (commit_flat.pxd), its header into
    the CommitHead at address `head`, its partitions in order into the CommitPart array at address `parts`, which
    has room for `cap`. Returns the number of partitions (when above `cap`, only the first `cap` are written). The
    pointers written are borrowed from `req`."""
    cdef CommitHead* h = <CommitHead*>head
    cdef CommitPart* q = <CommitPart*>parts
    cdef Py_ssize_t n = 0
    cdef OffsetCommitRequestTopic t
    cdef OffsetCommitRequestPartition p
    h.group_id = <PyObject*>req.group_id
    h.member_id = <PyObject*>req.member_id
    h.instance_id = <PyObject*>req.group_instance_id
    h.topics = <PyObject*>req.topics
    h.generation = req.generation_id_or_member_epoch
    for t in req.topics:
        for p in t.partitions:
            if n < cap:
                q.name = <PyObject*>t.name
                q.topic_id = <PyObject*>t.topic_id
                q.metadata = <PyObject*>p.committed_metadata
                q.offset = p.committed_offset
                q.partition = p.partition_index
                q.leader_epoch = p.committed_leader_epoch
                q += 1
            n += 1
    return n


cdef object _fetch_one(bint groups, int32_t idx, object committed):
    # committed: (offset, leader epoch, metadata, commit timestamp), or None (no offset)
    cdef OffsetFetchResponsePartition a
    cdef OffsetFetchResponsePartitions b
    cdef int64_t offset = -1
    cdef int32_t epoch = -1
    cdef object meta = ""
    if committed is not None:
        offset = (<tuple>committed)[0]
        epoch = (<tuple>committed)[1]
        meta = (<tuple>committed)[2]
    if groups:
        b = OffsetFetchResponsePartitions.__new__(OffsetFetchResponsePartitions)
        b.partition_index = idx
        b.committed_offset = offset
        b.committed_leader_epoch = epoch
        b.metadata = meta
        return b
    a = OffsetFetchResponsePartition.__new__(OffsetFetchResponsePartition)
    a.partition_index = idx
    a.committed_offset = offset
    a.committed_leader_epoch = epoch
    a.metadata = meta
    return a


def offset_fetch_partitions(dict committed, object name, list indexes, bint groups):
    """An OffsetFetch's answer for the partitions `indexes` of topic `name` (None: a topic id the catalogue does
    not have, whose partitions have no offset), from `committed` ((name, partition) -> (offset, leader epoch,
    metadata, commit timestamp)): OffsetFetchResponsePartitions when `groups` (v8+, the groups form), else
    OffsetFetchResponsePartition; error NONE each."""
    cdef list out = []
    cdef object idx
    cdef object key
    for idx in indexes:
        found = None
        if name is not None:
            key = (name, idx)
            found = committed.get(key)
        out.append(_fetch_one(groups, idx, found))
    return out


# ---- headers ---------------------------------------------------------------------------------------------

# First flexible version of each API's request and response, -1 where none. Kafka's API keys are < 128; kcoord's
# own (connect groups, kcoord.protocol.connect) are a private block from 1000, kept in the slots after 128.
cdef int16_t _REQ_FLEX[136]
cdef int16_t _RESP_FLEX[136]
cdef int16_t _MIN_V[136]
cdef int16_t _MAX_V[136]


cdef inline int _slot(int api_key) noexcept nogil:
    if 0 <= api_key < 128:
        return api_key
    if 1000 <= api_key < 1008:
        return api_key - 1000 + 128
    return -1


for _k in range(136):
    _REQ_FLEX[_k] = -1
    _RESP_FLEX[_k] = -1
    _MIN_V[_k] = 1
    _MAX_V[_k] = 0
for _k, _cls in REQUEST_TYPES.items():
    if _slot(_k) < 0:
        raise ImportError(f"API key {_k} has no slot in the codec's tables")
    _REQ_FLEX[_slot(_k)] = _cls.FIRST_FLEXIBLE_VERSION
    _MIN_V[_slot(_k)] = _cls.MIN_VERSION
    _MAX_V[_slot(_k)] = _cls.MAX_VERSION
for _k, _cls in RESPONSE_TYPES.items():
    _RESP_FLEX[_slot(_k)] = _cls.FIRST_FLEXIBLE_VERSION

API_VERSIONS = {k: (cls.MIN_VERSION, cls.MAX_VERSION) for k, cls in REQUEST_TYPES.items()}


cpdef int request_header_version(int api_key, int api_version) noexcept:
    """2 for a flexible request version, else 1 (-1 for an API this codec does not know)."""
    cdef int s = _slot(api_key)
    if s < 0 or _MIN_V[s] > _MAX_V[s]:
        return -1
    return 2 if 0 <= _REQ_FLEX[s] <= api_version else 1


cpdef int response_header_version(int api_key, int api_version) noexcept:
    """1 for a flexible response version, else 0; ApiVersions always answers with header v0."""
    cdef int s = _slot(api_key)
    if api_key == 18 or s < 0:
        return 0
    return 1 if 0 <= _RESP_FLEX[s] <= api_version else 0


cpdef bint is_supported(int api_key, int api_version) noexcept:
    cdef int s = _slot(api_key)
    return s >= 0 and _MIN_V[s] <= api_version <= _MAX_V[s]


cdef int _peek(Cursor* c, int* api_key, int* api_version, int* correlation_id) except -1:
    # the three fields every request header version starts with
    api_key[0] = rd_int16(c)
    api_version[0] = rd_int16(c)
    correlation_id[0] = rd_int32(c)
    if c.bad:
        raise DecodeError("a request header needs at least 8 bytes")
    return 0


def peek_request(frame):
    """(api_key, api_version, correlation_id) of a request frame without decoding the rest."""
    cdef Cursor c
    cdef Py_buffer view
    cdef int api_key, api_version, correlation_id
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        c.p = <const unsigned char*>view.buf
        c.end = c.p + view.len
        c.bad = 0
        _peek(&c, &api_key, &api_version, &correlation_id)
        return api_key, api_version, correlation_id
    finally:
        PyBuffer_Release(&view)


def decode_request(frame):
    """Decode a request frame (without its size prefix) into (RequestHeader, body), in one pass.

    Raises UnsupportedVersionError (carrying api_key, api_version and correlation_id, so the caller can
    answer) for an API or version this codec does not implement, DecodeError for malformed bytes (a truncated
    body; bytes after a whole body are not an error, as in Kafka).
    """
    cdef Py_buffer view
    cdef Cursor c
    cdef int api_key, api_version, correlation_id
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        c.p = <const unsigned char*>view.buf
        c.end = c.p + view.len
        c.bad = 0
        _peek(&c, &api_key, &api_version, &correlation_id)
        if not is_supported(api_key, api_version):
            raise UnsupportedVersionError(
                f"API {api_key} version {api_version} is not supported", api_key, api_version, correlation_id)
        c.p = <const unsigned char*>view.buf
        header = _run(&c, _DEC_RequestHeader[request_header_version(api_key, api_version)], 0)
        # Bytes after the body are ignored, as Kafka's broker ignores them (it never checks what remains): the
        # AdminClient of librdkafka 2.x sends Metadata v12-13 with three of them.
        body = _run(&c, _DEC_BY_KEY_REQ(api_key, api_version), 0)
        return header, body
    finally:
        PyBuffer_Release(&view)


cdef object _finish(WBuf* w):
    _put32(w.buf, <uint32_t>(w.len - 4))
    return PyBytes_FromStringAndSize(w.buf, w.len)


def encode_request(int api_key, int api_version, int correlation_id, client_id, body):
    """A whole request frame: size prefix, header of the right version, body."""
    cdef WBuf w
    if not is_supported(api_key, api_version):
        raise UnsupportedVersionError(f"API {api_key} version {api_version} is not supported",
                                      api_key, api_version, correlation_id)
    cls = REQUEST_TYPES[api_key]
    if type(body) is not cls:
        raise TypeError(f"API {api_key} takes a {cls.__name__}, not {type(body).__name__}")
    header = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id)
    wb_init(&w, 256)
    try:
        w.len = 4
        _enc_RequestHeader(request_header_version(api_key, api_version))(&w, header)
        _ENC_BY_KEY_REQ(api_key, api_version)(&w, body)
        return _finish(&w)
    finally:
        wb_free(&w)


def encode_response(int api_key, int api_version, int correlation_id, body):
    """A whole response frame: size prefix, header of the right version, body."""
    cdef WBuf w
    cls = RESPONSE_TYPES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"API {api_key} is not supported", api_key, api_version, correlation_id)
    if type(body) is not cls:
        raise TypeError(f"API {api_key} answers with a {cls.__name__}, not {type(body).__name__}")
    enc = _ENC_BY_KEY_RESP(api_key, api_version)
    wb_init(&w, 256)
    try:
        w.len = 4
        w_int32(&w, correlation_id)
        if response_header_version(api_key, api_version) == 1:
            w_uvarint(&w, 0)
        enc(&w, body)
        return _finish(&w)
    finally:
        wb_free(&w)


def decode_response(int api_key, int api_version, frame):
    """Decode a response frame (without its size prefix) into (correlation_id, body)."""
    cls = RESPONSE_TYPES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"API {api_key} is not supported", api_key, api_version)
    header, offset = ResponseHeader.decode_from(frame, response_header_version(api_key, api_version))
    return header.correlation_id, cls.decode_from(frame, api_version, offset)[0]


# ---- framing ---------------------------------------------------------------------------------------------

cdef extern from "frame_mem.h":
    char* fm_alloc(size_t size) nogil
    void fm_free(char* p, size_t size) nogil
    char* fm_resize(char* p, size_t size, size_t new_size) nogil


cdef Py_ssize_t GROW_STEP = 65536  # a buffer grows by at least this much, or doubles, toward the declared size
cdef Py_ssize_t SHRINK_ABOVE = 1 << 20  # an emptied buffer larger than this is replaced by a small one
cdef Py_ssize_t LEND_ABOVE = 1 << 20  # buffer_updated hands a frame this large over in its block, not copied


@cython.final
cdef class _FrameBuffer:
    """One block of a FrameReader's memory (frame_mem.h: never zero-filled; above 1 MiB on Linux an anonymous
    mapping grown by mremap, so growing toward a large frame copies nothing). Lent writable to the transport as a
    memoryview; while one is held the block is never resized, and it is freed when the last holder lets go."""

    cdef char* data
    cdef Py_ssize_t size
    cdef Py_ssize_t exports

    @staticmethod
    cdef _FrameBuffer new(Py_ssize_t size):
        cdef _FrameBuffer b = _FrameBuffer.__new__(_FrameBuffer)
        b.data = fm_alloc(<size_t>size)
        if b.data == NULL:
            raise MemoryError(f"no memory for a {size}-byte frame buffer")
        b.size = size
        return b

    cdef int resize(self, Py_ssize_t size) except -1:
        cdef char* q
        if self.exports:
            raise BufferError("a frame buffer is resized while a view of it is held")
        q = fm_resize(self.data, <size_t>self.size, <size_t>size)
        if q == NULL:
            raise MemoryError(f"no memory for a {size}-byte frame buffer")
        self.data = q
        self.size = size
        return 0

    def __dealloc__(self):
        fm_free(self.data, <size_t>self.size)
        self.data = NULL

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 0, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1


@cython.final
cdef class FrameReader:
    """Splits a byte stream into Kafka frames (4-byte big-endian size, then that many bytes).

    Works as the buffer behind an asyncio BufferedProtocol (get_buffer / buffer_updated) or fed with
    bytes (feed). A size prefix that is negative or above max_frame_size raises FrameError before anything
    is allocated for it; the reader is then closed for good, as the connection should be.
    """

    cdef _FrameBuffer buf
    cdef Py_ssize_t start, end, initial_size
    cdef public Py_ssize_t max_frame_size  # may be lowered or raised between frames (SASL: until authenticated)
    cdef readonly bint failed

    def __init__(self, Py_ssize_t max_frame_size=DEFAULT_MAX_FRAME_SIZE, Py_ssize_t initial_size=16384):
        if max_frame_size < 0:
            raise ValueError("max_frame_size must be >= 0")
        self.max_frame_size = max_frame_size
        self.initial_size = max(initial_size, 64)
        self.buf = _FrameBuffer.new(self.initial_size)
        self.start = self.end = 0

    @property
    def capacity(self):
        """The bytes the reader holds now (what a connection costs in buffer memory, at most)."""
        return self.buf.size

    @property
    def pending(self):
        """Bytes received that do not yet make a whole frame."""
        return self.end - self.start

    cdef Py_ssize_t _want(self) except -1:
        # The capacity the pending frame needs: its whole size once the prefix is known.
        cdef Py_ssize_t have = self.end - self.start
        cdef const unsigned char* p
        cdef int32_t size
        if have < 4:
            return 4
        p = <const unsigned char*>self.buf.data + self.start
        size = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
        if size < 0 or size > self.max_frame_size:
            self.failed = 1
            raise FrameError(f"frame size {size} is outside 0..{self.max_frame_size}")
        return 4 + <Py_ssize_t>size

    def get_buffer(self, Py_ssize_t sizehint=-1):
        """A writable view of the free space, grown toward the frame in progress as its bytes arrive.

        The buffer grows to at most twice what has arrived (and at least by GROW_STEP), never straight to the
        size the prefix declares: a peer that declares a large frame and sends little costs what it sent. Growing
        keeps the block when no view of it is held (the transport lets go of each view before asking for the
        next), so a large frame is neither copied nor cleared as it grows. Once the frames in it are consumed, a
        buffer grown past SHRINK_ABOVE is given back."""
        cdef Py_ssize_t have = self.end - self.start
        cdef _FrameBuffer b = self.buf
        cdef Py_ssize_t cap = b.size
        cdef Py_ssize_t need = max(self._want(), have + 4096)
        cdef _FrameBuffer nb
        if self.failed:
            raise FrameError("the stream already had a bad frame")
        need = min(need, max(2 * have, have + GROW_STEP))
        if have == 0 and cap > SHRINK_ABOVE and need <= SHRINK_ABOVE:
            self.buf = _FrameBuffer.new(max(need, self.initial_size))
            self.start = self.end = 0
        elif need > cap or (self.start and cap - self.end < 4096):
            if b.exports == 0:
                if self.start:
                    memmove(b.data, b.data + self.start, have)
                    self.start = 0
                    self.end = have
                if need > cap:
                    b.resize(need)
            else:  # a view of it is still held: a fresh block, the old one freed with that view
                nb = _FrameBuffer.new(max(need, cap))
                if have:
                    memcpy(nb.data, b.data + self.start, have)
                self.buf = nb
                self.start = 0
                self.end = have
        return memoryview(self.buf)[self.end:]

    def buffer_updated(self, Py_ssize_t nbytes):
        """Account for nbytes written into the last get_buffer() view; returns the complete frames. A frame of
        LEND_ABOVE bytes or more comes as a read-only memoryview of the block it arrived in (not copied: the reader
        takes a fresh block), which is freed with the frame."""
        if nbytes < 0 or self.end + nbytes > self.buf.size:
            raise ValueError("nbytes outside the buffer handed out")
        self.end += nbytes
        return self._frames(1)

    def feed(self, data):
        """Append bytes; returns the complete frames (each a bytes object without its size prefix)."""
        cdef Py_buffer view
        cdef Py_ssize_t off = 0
        cdef Py_ssize_t n
        frames = []
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            while off < view.len:
                mv = self.get_buffer()
                n = min(len(mv), view.len - off)
                del mv
                memcpy(self.buf.data + self.end, <const char*>view.buf + off, n)
                off += n
                self.end += n
                frames.extend(self._frames())
        finally:
            PyBuffer_Release(&view)
        return frames

    cdef list _frames(self, bint lend=0):
        cdef list out = []
        cdef Py_ssize_t want, rest
        cdef _FrameBuffer b, nb
        if self.failed:
            raise FrameError("the stream already had a bad frame")
        while True:
            want = self._want()
            if self.end - self.start < want:
                break
            b = self.buf
            if lend and want - 4 >= LEND_ABOVE:
                # the block goes with the frame; what follows it moves to a fresh block
                rest = self.end - self.start - want
                nb = _FrameBuffer.new(max(rest + 4096, self.initial_size))
                if rest:
                    memcpy(nb.data, b.data + self.start + want, rest)
                out.append(memoryview(b)[self.start + 4:self.start + want].toreadonly())
                self.buf = nb
                self.start = 0
                self.end = rest
                continue
            out.append(PyBytes_FromStringAndSize(b.data + self.start + 4, want - 4))
            self.start += want
        if self.start == self.end:
            self.start = self.end = 0
        return out
