# Bounded reads over one frame. Every primitive checks the bytes that remain; on short or malformed input it
# sets `bad`, moves to the end and returns a zero value, so a decoder runs to completion without reading past
# `end` and the caller raises one DecodeError at the top. Lengths read from the wire are capped by the bytes
# that remain before anything is allocated.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef struct Cursor:
    const unsigned char* p
    const unsigned char* end
    bint bad


cdef inline bint need(Cursor* c, Py_ssize_t n) noexcept nogil:
    if n < 0 or c.end - c.p < n:
        c.bad = 1
        c.p = c.end
        return 0
    return 1


cdef inline Py_ssize_t remaining(Cursor* c) noexcept nogil:
    return c.end - c.p


cdef inline bint rd_bool(Cursor* c) noexcept nogil:
    if not need(c, 1):
        return 0
    cdef unsigned char b = c.p[0]
    c.p += 1
    return b != 0


cdef inline int8_t rd_int8(Cursor* c) noexcept nogil:
    if not need(c, 1):
        return 0
    cdef int8_t v = <int8_t>c.p[0]
    c.p += 1
    return v


cdef inline uint16_t rd_uint16(Cursor* c) noexcept nogil:
    if not need(c, 2):
        return 0
    cdef uint16_t v = (<uint16_t>c.p[0] << 8) | c.p[1]
    c.p += 2
    return v


cdef inline int16_t rd_int16(Cursor* c) noexcept nogil:
    return <int16_t>rd_uint16(c)


cdef inline uint32_t rd_uint32(Cursor* c) noexcept nogil:
    if not need(c, 4):
        return 0
    cdef uint32_t v = ((<uint32_t>c.p[0] << 24) | (<uint32_t>c.p[1] << 16)
                       | (<uint32_t>c.p[2] << 8) | c.p[3])
    c.p += 4
    return v


cdef inline int32_t rd_int32(Cursor* c) noexcept nogil:
    return <int32_t>rd_uint32(c)


cdef inline int64_t rd_int64(Cursor* c) noexcept nogil:
    cdef uint64_t hi = rd_uint32(c)
    cdef uint64_t lo = rd_uint32(c)
    return <int64_t>((hi << 32) | lo)


cdef inline double rd_float64(Cursor* c) noexcept nogil:
    cdef int64_t bits = rd_int64(c)
    cdef double d
    memcpy(&d, &bits, 8)
    return d


cdef inline uint32_t rd_uvarint(Cursor* c) noexcept nogil:
    # At most 5 bytes; a fifth byte with more than 4 significant bits is malformed.
    cdef uint32_t v = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if c.p >= c.end:
            c.bad = 1
            return 0
        b = c.p[0]
        c.p += 1
        if shift == 28 and (b & 0xF0):
            c.bad = 1
            c.p = c.end
            return 0
        v |= (<uint32_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            return v
        shift += 7


cdef inline int32_t rd_varint(Cursor* c) noexcept nogil:
    cdef uint32_t u = rd_uvarint(c)
    return <int32_t>((u >> 1) ^ (-(<int32_t>(u & 1))))


# ---- lengths --------------------------------------------------------------------------------------------
# Each returns -1 for null, or a length that fits in what remains (else `bad`).

cdef inline Py_ssize_t _capped(Cursor* c, int64_t n) noexcept nogil:
    if n > c.end - c.p:
        c.bad = 1
        c.p = c.end
        return 0
    return <Py_ssize_t>n


cdef inline Py_ssize_t rd_len16(Cursor* c) noexcept nogil:
    cdef int16_t n = rd_int16(c)
    if n < -1:
        c.bad = 1
        c.p = c.end
        return 0
    if n == -1:
        return -1
    return _capped(c, n)


cdef inline Py_ssize_t rd_len32(Cursor* c) noexcept nogil:
    cdef int32_t n = rd_int32(c)
    if n < -1:
        c.bad = 1
        c.p = c.end
        return 0
    if n == -1:
        return -1
    return _capped(c, n)


cdef inline Py_ssize_t rd_ulen(Cursor* c) noexcept nogil:
    # compact: N+1 as an unsigned varint, 0 for null
    cdef int64_t n = <int64_t>rd_uvarint(c) - 1
    if n == -1:
        return -1
    return _capped(c, n)


cdef inline Py_ssize_t not_null(Cursor* c, Py_ssize_t n) noexcept nogil:
    # a null where the version does not allow one
    if n < 0:
        c.bad = 1
        c.p = c.end
        return 0
    return n


# ---- objects -----------------------------------------------------------------------------------------

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)


cdef inline bint _is_ascii(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint64_t acc = 0
    cdef uint64_t word
    while i + 8 <= n:
        memcpy(&word, p + i, 8)
        acc |= word
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
    return (acc & 0x8080808080808080ULL) == 0


cdef inline object _str(Cursor* c, Py_ssize_t n):
    # Group, member and topic names are ASCII in practice: copy those straight into a compact str.
    cdef object s
    if n < 0:
        return None
    if n == 0:
        return ""
    if n > 1 and _is_ascii(c.p, n):
        s = PyUnicode_New(n, 127)
        memcpy(PyUnicode_DATA(s), c.p, n)
    else:
        s = PyUnicode_DecodeUTF8(<const char*>c.p, n, NULL)
    c.p += n
    return s


cdef inline object _bytes(Cursor* c, Py_ssize_t n):
    if n < 0:
        return None
    if n == 0:
        return b""
    cdef object b = PyBytes_FromStringAndSize(<const char*>c.p, n)
    c.p += n
    return b


cdef inline object rd_string(Cursor* c):
    return _str(c, not_null(c, rd_len16(c)))


cdef inline object rd_nstring(Cursor* c):
    return _str(c, rd_len16(c))


cdef inline object rd_cstring(Cursor* c):
    return _str(c, not_null(c, rd_ulen(c)))


cdef inline object rd_cnstring(Cursor* c):
    return _str(c, rd_ulen(c))


cdef inline object rd_bytes(Cursor* c):
    return _bytes(c, not_null(c, rd_len32(c)))


cdef inline object rd_nbytes(Cursor* c):
    return _bytes(c, rd_len32(c))


cdef inline object rd_cbytes(Cursor* c):
    return _bytes(c, not_null(c, rd_ulen(c)))


cdef inline object rd_cnbytes(Cursor* c):
    return _bytes(c, rd_ulen(c))


cdef inline object rd_uuid(Cursor* c):
    if not need(c, 16):
        return None
    cdef object b = PyBytes_FromStringAndSize(<const char*>c.p, 16)
    c.p += 16
    return b
