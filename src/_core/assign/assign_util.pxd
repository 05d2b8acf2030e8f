# Inline helpers shared by the assignor kernels: allocation that never asks for zero bytes (and puts large
# buffers on huge pages), and a binary min-heap over int64 keys (callers pack (primary << 32 | secondary) so one
# comparison orders both).

from libc.stdint cimport int64_t


cdef extern from "assign/assign_alloc.h" nogil:  # src/_core is on the C include path
    void* kc_alloc(size_t n)
    void* kc_zalloc(size_t n)


cdef enum:
    KC_OK = 0
    KC_NOMEM = -1
    KC_DUPLICATE = 1


cdef inline void* xmalloc(int64_t n, size_t size) noexcept nogil:
    """n items of `size` bytes (at least one item); large buffers on huge pages (assign_alloc.h). free() it."""
    if n < 1:
        n = 1
    return kc_alloc(<size_t>n * size)


cdef inline void* xcalloc(int64_t n, size_t size) noexcept nogil:
    if n < 1:
        n = 1
    return kc_zalloc(<size_t>n * size)


cdef inline int64_t pack(int64_t hi, int64_t lo) noexcept nogil:
    return (hi << 32) | lo


cdef inline int64_t low32(int64_t key) noexcept nogil:
    return key & 0xFFFFFFFFLL


cdef inline void heap_sift_down(int64_t* h, int64_t n, int64_t i) noexcept nogil:
    cdef int64_t key = h[i]
    cdef int64_t child
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and h[child + 1] < h[child]:
            child += 1
        if h[child] >= key:
            break
        h[i] = h[child]
        i = child
    h[i] = key


cdef inline void heap_push(int64_t* h, int64_t* n, int64_t key) noexcept nogil:
    cdef int64_t i = n[0]
    cdef int64_t parent
    n[0] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if h[parent] <= key:
            break
        h[i] = h[parent]
        i = parent
    h[i] = key


cdef inline void heap_pop(int64_t* h, int64_t* n) noexcept nogil:
    n[0] -= 1
    if n[0] > 0:
        h[0] = h[n[0]]
        heap_sift_down(h, n[0], 0)


cdef inline void heap_replace_top(int64_t* h, int64_t n, int64_t key) noexcept nogil:
    h[0] = key
    heap_sift_down(h, n, 0)
