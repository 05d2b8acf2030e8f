/* Scratch allocation for the assignor kernels.
 *
 * Kernels allocate a few buffers of one entry per partition. Fresh memory costs one page fault per 4 KiB page,
 * and those faults (not the kernels' arithmetic) dominate large groups: a million partitions is about a thousand
 * faults per buffer, serialised across threads on the process's memory map. Buffers of 2 MiB and more are
 * therefore 2 MiB-aligned and advised as transparent huge pages on Linux (as numpy does for its large arrays):
 * one fault per 2 MiB. Elsewhere, or if the advice is refused, this is plain malloc. Free with free().
 */
#ifndef KCOORD_ASSIGN_ALLOC_H
#define KCOORD_ASSIGN_ALLOC_H

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define KC_HUGE_PAGE ((size_t)2 << 20)

static inline void *kc_alloc(size_t n) {
    if (n == 0) n = 1;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n >= KC_HUGE_PAGE) {
        void *p = NULL;
        size_t rounded = (n + KC_HUGE_PAGE - 1) & ~(KC_HUGE_PAGE - 1);
        if (posix_memalign(&p, KC_HUGE_PAGE, rounded) != 0) return NULL;
        (void)madvise(p, rounded, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(n);
}

static inline void *kc_zalloc(size_t n) {
    void *p;
    if (n < KC_HUGE_PAGE) return calloc(n ? n : 1, 1);
    p = kc_alloc(n);
    if (p != NULL) memset(p, 0, n);
    return p;
}

#endif
