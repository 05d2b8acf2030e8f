# Round-robin: all partitions in (topic name, partition) order are dealt over the members in rank order by one
# circular cursor that skips members not subscribed to the partition's topic (Java's RoundRobinAssignor). Within a
# topic the next subscriber is always the next entry of the topic's subscriber list, so the cost is O(P) plus one
# binary search per topic, instead of the O(P × M) skipping of a naive loop over heterogeneous subscriptions.


cdef int roundrobin_kernel(const Group* g, const Index* ix, int32_t* owner) noexcept nogil:
    cdef int32_t T = g.n_topics, K = g.n_sets, M = g.n_members
    cdef int32_t* subs = <int32_t*>xmalloc(M, sizeof(int32_t))
    cdef int64_t* heap = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int64_t* cur = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef const int32_t* lst
    cdef int32_t t, s, m = 0, pos = 0
    cdef int64_t n, L, lo, hi, mid, idx, p, base
    if subs == NULL or heap == NULL or cur == NULL:
        free(subs); free(heap); free(cur)
        return KC_NOMEM
    for t in range(T):
        n = topic_count(g, t)
        if n <= 0 or ix.n_subs[t] == 0:
            continue
        if ix.topic_sptr[t + 1] - ix.topic_sptr[t] == 1:
            s = ix.topic_sets[ix.topic_sptr[t]]
            lst = ix.set_members + ix.set_mptr[s]
            L = ix.set_mptr[s + 1] - ix.set_mptr[s]
        else:
            L = merge_subscribers(ix, t, ix.n_subs[t], subs, heap, cur)
            lst = subs
        lo = 0
        hi = L
        while lo < hi:
            mid = (lo + hi) >> 1
            if lst[mid] < pos:
                lo = mid + 1
            else:
                hi = mid
        idx = 0 if lo == L else lo
        base = g.topic_start[t]
        for p in range(n):
            m = lst[idx]
            owner[base + p] = m
            idx += 1
            if idx == L:
                idx = 0
        pos = m + 1
        if pos == M:
            pos = 0
    free(subs); free(heap); free(cur)
    return KC_OK
