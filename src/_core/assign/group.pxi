# The interned group every kernel works on, its canonical form, and the indexes derived from it.
#
# Members are numbered by rank (Kafka's total order, decided at the Python boundary). Topics are numbered in
# name order; topic t owns the global partition ids [topic_start[t], topic_start[t + 1]). A member subscribes to
# one subscription *set* (or none, -1); sets are CSR rows of topic ids. Members sharing a subscription share a
# set, so a homogeneous group of 10,000 members × 1,000 topics is one row of 1,000 ids, not ten million.

cdef struct Group:
    int32_t n_members
    int32_t n_topics
    int32_t n_sets
    const int64_t* topic_start   # [n_topics + 1]
    const int32_t* member_set    # [n_members], -1: subscribes to nothing
    const int64_t* set_ptr       # [n_sets + 1]
    const int32_t* set_topics    # ascending, unique within a set


cdef struct Index:
    int64_t* set_mptr       # [n_sets + 1]: the members of each set, in rank order
    int32_t* set_members
    int64_t* topic_sptr     # [n_topics + 1]: the sets subscribing to each topic, ascending
    int32_t* topic_sets
    int64_t* n_subs         # [n_topics]: how many members subscribe to each topic


cdef struct SetKey:
    uint64_t h
    int64_t n
    int32_t s


cdef int cmp_i32(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*>a)[0]
    cdef int32_t y = (<const int32_t*>b)[0]
    return (x > y) - (x < y)


cdef int cmp_i64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0]
    cdef int64_t y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef int cmp_setkey(const void* a, const void* b) noexcept nogil:
    cdef const SetKey* x = <const SetKey*>a
    cdef const SetKey* y = <const SetKey*>b
    if x.h != y.h:
        return -1 if x.h < y.h else 1
    if x.n != y.n:
        return -1 if x.n < y.n else 1
    return (x.s > y.s) - (x.s < y.s)


cdef inline void sort_i64(int64_t* a, int64_t n) noexcept nogil:
    if n > 1:
        qsort(a, <size_t>n, sizeof(int64_t), cmp_i64)


cdef int canonicalize_sets(int32_t n_members, int32_t n_sets, const int32_t* member_set, const int64_t* set_ptr,
                           const int32_t* set_topics, int32_t* out_member_set, int64_t* out_set_ptr,
                           int32_t* out_set_topics, int32_t* out_n_sets) noexcept nogil:
    """Sorts and deduplicates each set, merges identical sets, drops empty and unused ones.

    Sets are renumbered by their first member in rank order, so the result depends only on the members and
    their subscriptions, never on how the caller numbered the sets.
    """
    cdef int64_t total = set_ptr[n_sets]
    cdef int64_t* tptr = <int64_t*>xmalloc(n_sets + 1, sizeof(int64_t))
    cdef int32_t* ttop = <int32_t*>xmalloc(total, sizeof(int32_t))
    cdef SetKey* keys = <SetKey*>xmalloc(n_sets, sizeof(SetKey))
    cdef int32_t* rep = <int32_t*>xmalloc(n_sets, sizeof(int32_t))
    cdef int32_t* newid = <int32_t*>xmalloc(n_sets, sizeof(int32_t))
    cdef uint8_t* used = <uint8_t*>xcalloc(n_sets, 1)
    cdef int64_t pos = 0, a, b, i, j, w, x, y, ln
    cdef int32_t s, sa, sb, r, nnew = 0
    cdef int64_t nk = 0
    cdef uint64_t h
    cdef bint ordered
    if tptr == NULL or ttop == NULL or keys == NULL or rep == NULL or newid == NULL or used == NULL:
        free(tptr); free(ttop); free(keys); free(rep); free(newid); free(used)
        return KC_NOMEM
    for s in range(n_sets):
        tptr[s] = pos
        a = set_ptr[s]
        b = set_ptr[s + 1]
        if b > a:
            memcpy(ttop + pos, set_topics + a, <size_t>(b - a) * sizeof(int32_t))
        ordered = True
        for i in range(a + 1, b):
            if set_topics[i] <= set_topics[i - 1]:
                ordered = False
                break
        if ordered:
            pos += b - a
        else:
            qsort(ttop + pos, <size_t>(b - a), sizeof(int32_t), cmp_i32)
            w = pos + 1
            for i in range(pos + 1, pos + (b - a)):
                if ttop[i] != ttop[w - 1]:
                    ttop[w] = ttop[i]
                    w += 1
            pos = w
    tptr[n_sets] = pos
    for i in range(n_members):
        s = member_set[i]
        if s >= 0 and tptr[s + 1] > tptr[s]:
            used[s] = 1
    for s in range(n_sets):
        rep[s] = -1
        newid[s] = -1
        if used[s]:
            h = 1469598103934665603ULL
            for i in range(tptr[s], tptr[s + 1]):
                h = (h ^ <uint64_t>ttop[i]) * 1099511628211ULL
            keys[nk].h = h
            keys[nk].n = tptr[s + 1] - tptr[s]
            keys[nk].s = s
            nk += 1
    if nk > 1:
        qsort(keys, <size_t>nk, sizeof(SetKey), cmp_setkey)
    i = 0
    while i < nk:
        j = i
        while j < nk and keys[j].h == keys[i].h and keys[j].n == keys[i].n:
            j += 1
        for x in range(i, j):
            sa = keys[x].s
            if rep[sa] >= 0:
                continue
            rep[sa] = sa
            ln = tptr[sa + 1] - tptr[sa]
            for y in range(x + 1, j):
                sb = keys[y].s
                if rep[sb] < 0 and memcmp(ttop + tptr[sa], ttop + tptr[sb], <size_t>ln * sizeof(int32_t)) == 0:
                    rep[sb] = sa
        i = j
    pos = 0
    out_set_ptr[0] = 0
    for i in range(n_members):
        s = member_set[i]
        if s < 0 or not used[s]:
            out_member_set[i] = -1
            continue
        r = rep[s]
        if newid[r] < 0:
            newid[r] = nnew
            ln = tptr[r + 1] - tptr[r]
            memcpy(out_set_topics + pos, ttop + tptr[r], <size_t>ln * sizeof(int32_t))
            pos += ln
            nnew += 1
            out_set_ptr[nnew] = pos
        out_member_set[i] = newid[r]
    out_n_sets[0] = nnew
    free(tptr); free(ttop); free(keys); free(rep); free(newid); free(used)
    return KC_OK


cdef void index_free(Index* ix) noexcept nogil:
    free(ix.set_mptr)
    free(ix.set_members)
    free(ix.topic_sptr)
    free(ix.topic_sets)
    free(ix.n_subs)
    ix.set_mptr = NULL
    ix.set_members = NULL
    ix.topic_sptr = NULL
    ix.topic_sets = NULL
    ix.n_subs = NULL


cdef int index_build(const Group* g, Index* ix) noexcept nogil:
    cdef int32_t K = g.n_sets, T = g.n_topics, M = g.n_members
    cdef int64_t n_entries = g.set_ptr[K]
    cdef int64_t* cur = <int64_t*>xmalloc((K if K > T else T) + 1, sizeof(int64_t))
    cdef int32_t m, s, t
    cdef int64_t i
    ix.set_mptr = <int64_t*>xcalloc(K + 1, sizeof(int64_t))
    ix.set_members = <int32_t*>xmalloc(M, sizeof(int32_t))
    ix.topic_sptr = <int64_t*>xcalloc(T + 1, sizeof(int64_t))
    ix.topic_sets = <int32_t*>xmalloc(n_entries, sizeof(int32_t))
    ix.n_subs = <int64_t*>xcalloc(T, sizeof(int64_t))
    if (cur == NULL or ix.set_mptr == NULL or ix.set_members == NULL or ix.topic_sptr == NULL
            or ix.topic_sets == NULL or ix.n_subs == NULL):
        free(cur)
        index_free(ix)
        return KC_NOMEM
    for m in range(M):
        s = g.member_set[m]
        if s >= 0:
            ix.set_mptr[s + 1] += 1
    for s in range(K):
        ix.set_mptr[s + 1] += ix.set_mptr[s]
        cur[s] = ix.set_mptr[s]
    for m in range(M):
        s = g.member_set[m]
        if s >= 0:
            ix.set_members[cur[s]] = m
            cur[s] += 1
    for i in range(n_entries):
        ix.topic_sptr[g.set_topics[i] + 1] += 1
    for t in range(T):
        ix.topic_sptr[t + 1] += ix.topic_sptr[t]
        cur[t] = ix.topic_sptr[t]
    for s in range(K):
        for i in range(g.set_ptr[s], g.set_ptr[s + 1]):
            t = g.set_topics[i]
            ix.topic_sets[cur[t]] = s
            cur[t] += 1
            ix.n_subs[t] += ix.set_mptr[s + 1] - ix.set_mptr[s]
    free(cur)
    return KC_OK


cdef inline int64_t topic_count(const Group* g, int32_t t) noexcept nogil:
    return g.topic_start[t + 1] - g.topic_start[t]


cdef bint subscribes(const Group* g, int32_t m, int32_t t) noexcept nogil:
    """Whether member m subscribes to topic t (binary search in its set)."""
    cdef int32_t s = g.member_set[m]
    cdef int64_t lo, hi, mid
    if s < 0:
        return False
    lo = g.set_ptr[s]
    hi = g.set_ptr[s + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if g.set_topics[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo < g.set_ptr[s + 1] and g.set_topics[lo] == t


cdef int64_t merge_subscribers(const Index* ix, int32_t t, int64_t limit, int32_t* out, int64_t* heap,
                               int64_t* cur) noexcept nogil:
    """Writes up to `limit` subscribers of topic t, in rank order, to `out`; returns how many.

    `heap` and `cur` are scratch with room for one entry per set.
    """
    cdef int64_t a = ix.topic_sptr[t], b = ix.topic_sptr[t + 1], k = b - a
    cdef int64_t hn = 0, cnt = 0, j, lo, hi, key
    cdef int32_t s
    if k == 1:
        s = ix.topic_sets[a]
        lo = ix.set_mptr[s]
        hi = ix.set_mptr[s + 1]
        if hi - lo > limit:
            hi = lo + limit
        if hi > lo:
            memcpy(out, ix.set_members + lo, <size_t>(hi - lo) * sizeof(int32_t))
        return hi - lo
    for j in range(k):
        s = ix.topic_sets[a + j]
        cur[j] = ix.set_mptr[s]
        if cur[j] < ix.set_mptr[s + 1]:
            heap_push(heap, &hn, pack(ix.set_members[cur[j]], j))
    while hn > 0 and cnt < limit:
        key = heap[0]
        j = low32(key)
        out[cnt] = <int32_t>(key >> 32)
        cnt += 1
        cur[j] += 1
        s = ix.topic_sets[a + j]
        if cur[j] < ix.set_mptr[s + 1]:
            heap_replace_top(heap, hn, pack(ix.set_members[cur[j]], j))
        else:
            heap_pop(heap, &hn)
    return cnt
