# A growable output buffer for encoders. It starts small, doubles as needed, and is written through inline
# functions so an encoder is a run of stores; the frame's size prefix is reserved first and patched last.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef struct WBuf:
    char* buf
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int wb_init(WBuf* w, Py_ssize_t cap) except -1:
    if cap < 64:
        cap = 64
    w.buf = <char*>PyMem_Malloc(cap)
    if w.buf == NULL:
        raise MemoryError()
    w.len = 0
    w.cap = cap
    return 0


cdef inline void wb_free(WBuf* w) noexcept:
    if w.buf != NULL:
        PyMem_Free(w.buf)
        w.buf = NULL
    w.len = w.cap = 0


cdef inline int wb_grow(WBuf* w, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap = w.cap * 2
    while cap < w.len + n:
        cap *= 2
    cdef char* nb = <char*>PyMem_Realloc(w.buf, cap)
    if nb == NULL:
        raise MemoryError()
    w.buf = nb
    w.cap = cap
    return 0


cdef inline int wb_need(WBuf* w, Py_ssize_t n) except -1:
    if w.len + n > w.cap:
        return wb_grow(w, n)
    return 0


cdef inline int w_raw(WBuf* w, const char* p, Py_ssize_t n) except -1:
    wb_need(w, n)
    memcpy(w.buf + w.len, p, n)
    w.len += n
    return 0


cdef inline int w_int8(WBuf* w, int8_t v) except -1:
    wb_need(w, 1)
    w.buf[w.len] = <char>v
    w.len += 1
    return 0


cdef inline int w_bool(WBuf* w, bint v) except -1:
    return w_int8(w, 1 if v else 0)


cdef inline void _put16(char* p, uint16_t v) noexcept nogil:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


cdef inline void _put32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline int w_uint16(WBuf* w, uint16_t v) except -1:
    wb_need(w, 2)
    _put16(w.buf + w.len, v)
    w.len += 2
    return 0


cdef inline int w_int16(WBuf* w, int16_t v) except -1:
    return w_uint16(w, <uint16_t>v)


cdef inline int w_uint32(WBuf* w, uint32_t v) except -1:
    wb_need(w, 4)
    _put32(w.buf + w.len, v)
    w.len += 4
    return 0


cdef inline int w_int32(WBuf* w, int32_t v) except -1:
    return w_uint32(w, <uint32_t>v)


cdef inline int w_int64(WBuf* w, int64_t v) except -1:
    wb_need(w, 8)
    _put32(w.buf + w.len, <uint32_t>((<uint64_t>v) >> 32))
    _put32(w.buf + w.len + 4, <uint32_t>v)
    w.len += 8
    return 0


cdef inline int w_float64(WBuf* w, double d) except -1:
    cdef int64_t bits
    memcpy(&bits, &d, 8)
    return w_int64(w, bits)


cdef inline int w_uvarint(WBuf* w, uint32_t v) except -1:
    wb_need(w, 5)
    while v >= 0x80:
        w.buf[w.len] = <char>((v & 0x7F) | 0x80)
        w.len += 1
        v >>= 7
    w.buf[w.len] = <char>v
    w.len += 1
    return 0


cdef inline int w_varint(WBuf* w, int32_t v) except -1:
    return w_uvarint(w, (<uint32_t>v << 1) ^ <uint32_t>(v >> 31))


# ---- lengths and objects ------------------------------------------------------------------------------

cdef inline int w_len(WBuf* w, Py_ssize_t n, int width) except -1:
    # width: 2 (int16), 4 (int32) or 0 (compact: N+1 as unsigned varint; -1 writes 0 for null)
    if width == 0:
        return w_uvarint(w, <uint32_t>(n + 1))
    if width == 2:
        if n > 0x7FFF:
            raise OverflowError("string longer than 32767 bytes")
        return w_int16(w, <int16_t>n)
    if n > 0x7FFFFFFF:
        raise OverflowError("value longer than 2^31-1 bytes")
    return w_int32(w, <int32_t>n)


cdef inline int w_str(WBuf* w, object s, int width) except -1:
    # s is a str, or None where the caller allows null
    cdef Py_ssize_t n
    cdef const char* p
    if s is None:
        return w_len(w, -1, width)
    p = PyUnicode_AsUTF8AndSize(s, &n)
    w_len(w, n, width)
    return w_raw(w, p, n)


cdef inline int w_bytes(WBuf* w, object b, int width) except -1:
    cdef Py_buffer view
    if b is None:
        return w_len(w, -1, width)
    if PyBytes_CheckExact(b):
        w_len(w, PyBytes_GET_SIZE(b), width)
        return w_raw(w, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
    if PyUnicode_Check(b):
        raise TypeError("bytes expected, got str")
    PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    try:
        w_len(w, view.len, width)
        w_raw(w, <const char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef inline int w_uuid(WBuf* w, object u) except -1:
    if not PyBytes_CheckExact(u):
        u = u.bytes  # a uuid.UUID
    if PyBytes_GET_SIZE(u) != 16:
        raise ValueError("a uuid is 16 bytes")
    return w_raw(w, PyBytes_AS_STRING(u), 16)
