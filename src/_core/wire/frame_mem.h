/* Memory for FrameReader's buffers: grown without zero-filling and, on Linux above FM_MAP_ABOVE bytes, by
 * mremap, so a buffer growing toward a 100 MiB frame is never copied nor cleared (an anonymous mapping's pages
 * cost nothing until the socket writes them). Elsewhere, and for small buffers, malloc and realloc. */
#ifndef KCOORD_FRAME_MEM_H
#define KCOORD_FRAME_MEM_H

#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#define FM_MAP_ABOVE ((size_t)1 << 20)
#endif

/* A buffer of `size` bytes (contents undefined), or NULL. */
static inline char *fm_alloc(size_t size) {
#if defined(__linux__)
    if (size > FM_MAP_ABOVE) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : (char *)p;
    }
#endif
    return (char *)malloc(size ? size : 1);
}

static inline void fm_free(char *p, size_t size) {
    if (p == NULL) return;
#if defined(__linux__)
    if (size > FM_MAP_ABOVE) { munmap(p, size); return; }
#endif
    free(p);
}

/* `p` (of `size` bytes) grown or shrunk to `new_size`, keeping its first min(size, new_size) bytes; NULL (and `p`
 * untouched) when there is no memory. */
static inline char *fm_resize(char *p, size_t size, size_t new_size) {
#if defined(__linux__)
    if (size > FM_MAP_ABOVE && new_size > FM_MAP_ABOVE) {
        void *q = mremap(p, size, new_size, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : (char *)q;
    }
    if (size > FM_MAP_ABOVE || new_size > FM_MAP_ABOVE) {
        char *q = fm_alloc(new_size);
        if (q == NULL) return NULL;
        memcpy(q, p, size < new_size ? size : new_size);
        fm_free(p, size);
        return q;
    }
#endif
    return (char *)realloc(p, new_size ? new_size : 1);
}

#endif
