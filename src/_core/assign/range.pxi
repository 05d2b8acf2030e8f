# Range: per topic, the subscribers in rank order take contiguous slices, the first n % S one partition more.
#
# With racks (KIP-881, the Java client's RangeAssignor): when some topic has consumers with racks that share
# racks with its partition replicas and not every partition lives on every rack, a rack pass runs first. Topics
# with the same subscribers and the same partition count are co-partitioned: partition p of all of them goes to
# the first subscriber (in rank order) whose rack holds p of every one of them and that still has room. Any
# other topic that needs racks gives each subscriber, in order, up to its room of the partitions on its rack.
# Then the plain range pass hands out what is left, so balance and co-partitioning never give way to racks.


cdef int range_plain(const Group* g, const Index* ix, int32_t* owner) noexcept nogil:
    cdef int32_t T = g.n_topics, K = g.n_sets, M = g.n_members
    cdef int32_t* subs = <int32_t*>xmalloc(M, sizeof(int32_t))
    cdef int64_t* heap = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int64_t* cur = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int32_t t
    cdef int64_t n, S, q, r, lim, got, base, start, ln, i, p
    if subs == NULL or heap == NULL or cur == NULL:
        free(subs); free(heap); free(cur)
        return KC_NOMEM
    for t in range(T):
        n = topic_count(g, t)
        S = ix.n_subs[t]
        if n <= 0 or S == 0:
            continue
        q = n // S
        r = n % S
        lim = S if S < n else n
        got = merge_subscribers(ix, t, lim, subs, heap, cur)
        base = g.topic_start[t]
        start = 0
        for i in range(got):
            ln = q + (1 if i < r else 0)
            for p in range(start, start + ln):
                owner[base + p] = subs[i]
            start += ln
    free(subs); free(heap); free(cur)
    return KC_OK


cdef struct RangeState:
    const Group* g
    const Index* ix
    const int32_t* member_rack
    int32_t n_racks
    const int64_t* prack_ptr
    const int32_t* prack_ids
    int32_t* owner
    int64_t* sptr      # [T + 1]: each topic's subscriber list (rank order) in `subs`
    int32_t* subs
    int64_t* cnt       # partitions assigned so far, per (topic, subscriber slot)
    int64_t* q         # per topic: partitions per subscriber
    int64_t* extra     # per topic: subscribers that may still take one more
    int64_t* left      # per topic: partitions not yet assigned
    int64_t* cursor    # per topic: every partition before it is assigned
    uint8_t* hasc      # per topic: some subscriber has a rack


cdef struct TopicKey:
    uint64_t h
    int32_t t


cdef int cmp_topickey(const void* a, const void* b) noexcept nogil:
    cdef const TopicKey* x = <const TopicKey*>a
    cdef const TopicKey* y = <const TopicKey*>b
    if x.h != y.h:
        return -1 if x.h < y.h else 1
    return (x.t > y.t) - (x.t < y.t)


cdef inline int64_t max_assignable(const RangeState* st, int32_t t, int64_t i) noexcept nogil:
    cdef int64_t v = st.q[t] + (1 if st.extra[t] > 0 else 0) - st.cnt[st.sptr[t] + i]
    return v if v > 0 else 0


cdef inline void on_assigned(RangeState* st, int32_t t, int64_t i, int64_t k) noexcept nogil:
    st.cnt[st.sptr[t] + i] += k
    if st.cnt[st.sptr[t] + i] > st.q[t]:
        st.extra[t] -= 1
    st.left[t] -= k


cdef inline bint has_rack(const RangeState* st, int64_t pid, int32_t r) noexcept nogil:
    cdef int64_t j
    for j in range(st.prack_ptr[pid], st.prack_ptr[pid + 1]):
        if st.prack_ids[j] == r:
            return True
    return False


cdef int assign_ranges(RangeState* st, int32_t t, bint by_rack) noexcept nogil:
    """Each subscriber in order takes up to its room of the first unassigned partitions (on its rack if by_rack)."""
    cdef const Group* g = st.g
    cdef int64_t S = st.sptr[t + 1] - st.sptr[t]
    cdef int64_t base = g.topic_start[t], n = topic_count(g, t)
    cdef int64_t* rptr = NULL
    cdef int64_t* rcur = NULL
    cdef int32_t* rlist = NULL
    cdef int64_t i, j, e, c, p, mx, take, tot
    cdef int32_t m, rk, r
    if by_rack:
        tot = st.prack_ptr[base + n] - st.prack_ptr[base]
        rptr = <int64_t*>xcalloc(st.n_racks + 1, sizeof(int64_t))
        rcur = <int64_t*>xmalloc(st.n_racks, sizeof(int64_t))
        rlist = <int32_t*>xmalloc(tot, sizeof(int32_t))
        if rptr == NULL or rcur == NULL or rlist == NULL:
            free(rptr); free(rcur); free(rlist)
            return KC_NOMEM
        for p in range(n):
            for j in range(st.prack_ptr[base + p], st.prack_ptr[base + p + 1]):
                rptr[st.prack_ids[j] + 1] += 1
        for r in range(st.n_racks):
            rptr[r + 1] += rptr[r]
            rcur[r] = rptr[r]
        for p in range(n):
            for j in range(st.prack_ptr[base + p], st.prack_ptr[base + p + 1]):
                r = st.prack_ids[j]
                rlist[rcur[r]] = <int32_t>p
                rcur[r] += 1
        for r in range(st.n_racks):
            rcur[r] = rptr[r]
    for i in range(S):
        if st.left[t] == 0:
            break
        mx = max_assignable(st, t, i)
        if mx == 0:
            continue
        m = st.subs[st.sptr[t] + i]
        rk = st.member_rack[m]
        take = 0
        if by_rack and rk >= 0:
            j = rcur[rk]
            e = rptr[rk + 1]
            while j < e and take < mx:
                p = rlist[j]
                j += 1
                if st.owner[base + p] < 0:
                    st.owner[base + p] = m
                    take += 1
            rcur[rk] = j
        else:
            c = st.cursor[t]
            while c < n and take < mx:
                if st.owner[base + c] < 0:
                    st.owner[base + c] = m
                    take += 1
                c += 1
            st.cursor[t] = c
        if take > 0:
            on_assigned(st, t, i, take)
    free(rptr); free(rcur); free(rlist)
    return KC_OK


cdef int assign_copartitioned(RangeState* st, const int32_t* grp, int64_t gs) noexcept nogil:
    """Partition p of every topic in grp goes to the first subscriber whose rack holds p of all of them."""
    cdef const Group* g = st.g
    cdef int32_t t0 = grp[0]
    cdef int64_t sp0 = st.sptr[t0], S = st.sptr[t0 + 1] - sp0
    cdef int64_t n = topic_count(g, t0)
    cdef int64_t* qptr = <int64_t*>xcalloc(st.n_racks + 1, sizeof(int64_t))
    cdef int64_t* qh = <int64_t*>xmalloc(st.n_racks, sizeof(int64_t))
    cdef int32_t* qlist = <int32_t*>xmalloc(S, sizeof(int32_t))
    cdef int32_t* nrl = <int32_t*>xmalloc(S, sizeof(int32_t))
    cdef int64_t nn = 0, nh = 0, alive = S, i, p, j, x, best, pid0
    cdef int32_t rk, r, u, m
    cdef bint ok
    if qptr == NULL or qh == NULL or qlist == NULL or nrl == NULL:
        free(qptr); free(qh); free(qlist); free(nrl)
        return KC_NOMEM
    for i in range(S):
        rk = st.member_rack[st.subs[sp0 + i]]
        if rk >= 0:
            qptr[rk + 1] += 1
        else:
            nrl[nn] = <int32_t>i
            nn += 1
    for r in range(st.n_racks):
        qptr[r + 1] += qptr[r]
        qh[r] = qptr[r]
    for i in range(S):
        rk = st.member_rack[st.subs[sp0 + i]]
        if rk >= 0:
            qlist[qh[rk]] = <int32_t>i
            qh[rk] += 1
    for r in range(st.n_racks):
        qh[r] = qptr[r]
    for p in range(n):
        best = S
        while nh < nn and max_assignable(st, t0, nrl[nh]) == 0:
            nh += 1
        if nh < nn:
            best = nrl[nh]
        pid0 = g.topic_start[t0] + p
        for j in range(st.prack_ptr[pid0], st.prack_ptr[pid0 + 1]):
            r = st.prack_ids[j]
            ok = True
            for x in range(1, gs):
                if not has_rack(st, g.topic_start[grp[x]] + p, r):
                    ok = False
                    break
            if not ok:
                continue
            while qh[r] < qptr[r + 1] and max_assignable(st, t0, qlist[qh[r]]) == 0:
                qh[r] += 1
            if qh[r] < qptr[r + 1] and qlist[qh[r]] < best:
                best = qlist[qh[r]]
        if best < S:
            m = st.subs[sp0 + best]
            for x in range(gs):
                u = grp[x]
                st.owner[g.topic_start[u] + p] = m
                on_assigned(st, u, best, 1)
            if max_assignable(st, t0, best) == 0:
                alive -= 1
                if alive == 0:
                    break
    free(qptr); free(qh); free(qlist); free(nrl)
    return KC_OK


cdef inline bint same_group(const RangeState* st, int32_t t, int32_t u) noexcept nogil:
    cdef const Index* ix = st.ix
    cdef int64_t a = ix.topic_sptr[t], b = ix.topic_sptr[t + 1]
    cdef int64_t c = ix.topic_sptr[u], d = ix.topic_sptr[u + 1]
    cdef int64_t kt = topic_count(st.g, t) if st.hasc[t] else 0
    cdef int64_t ku = topic_count(st.g, u) if st.hasc[u] else 0
    if kt != ku or b - a != d - c:
        return False
    return memcmp(ix.topic_sets + a, ix.topic_sets + c, <size_t>(b - a) * sizeof(int32_t)) == 0


cdef int rack_pass(RangeState* st, const uint8_t* needs) noexcept nogil:
    cdef const Group* g = st.g
    cdef const Index* ix = st.ix
    cdef int32_t T = g.n_topics
    cdef TopicKey* keys = <TopicKey*>xmalloc(T, sizeof(TopicKey))
    cdef uint8_t* done = <uint8_t*>xcalloc(T, 1)
    cdef int32_t* grp = <int32_t*>xmalloc(T, sizeof(int32_t))
    cdef int64_t nk = 0, x, y, gs, j
    cdef int32_t t, u
    cdef uint64_t h
    cdef int rc = KC_OK
    if keys == NULL or done == NULL or grp == NULL:
        free(keys); free(done); free(grp)
        return KC_NOMEM
    for t in range(T):
        if st.sptr[t + 1] == st.sptr[t]:
            continue
        h = 1469598103934665603ULL
        for j in range(ix.topic_sptr[t], ix.topic_sptr[t + 1]):
            h = (h ^ <uint64_t>ix.topic_sets[j]) * 1099511628211ULL
        h = (h ^ <uint64_t>(topic_count(g, t) if st.hasc[t] else 0)) * 1099511628211ULL
        keys[nk].h = h
        keys[nk].t = t
        nk += 1
    if nk > 1:
        qsort(keys, <size_t>nk, sizeof(TopicKey), cmp_topickey)
    for x in range(nk):
        t = keys[x].t
        if done[t]:
            continue
        done[t] = 1
        grp[0] = t
        gs = 1
        y = x + 1
        while y < nk and keys[y].h == keys[x].h:
            u = keys[y].t
            if not done[u] and same_group(st, t, u):
                done[u] = 1
                grp[gs] = u
                gs += 1
            y += 1
        if gs > 1:
            if st.hasc[t]:
                rc = assign_copartitioned(st, grp, gs)
        elif needs[t]:
            rc = assign_ranges(st, t, True)
        if rc != KC_OK:
            break
    free(keys); free(done); free(grp)
    return rc


cdef int range_racks(const Group* g, const Index* ix, const int32_t* member_rack, int32_t n_racks,
                     const int64_t* prack_ptr, const int32_t* prack_ids, int32_t* owner) noexcept nogil:
    cdef int32_t T = g.n_topics, K = g.n_sets
    cdef RangeState st
    cdef int64_t* heap = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int64_t* mcur = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int32_t* cstamp = <int32_t*>xcalloc(n_racks, sizeof(int32_t))
    cdef int32_t* pstamp = <int32_t*>xcalloc(n_racks, sizeof(int32_t))
    cdef uint8_t* needs = <uint8_t*>xcalloc(T, 1)
    cdef int64_t total, S, n, base, i, j, pid, nunion
    cdef int32_t t, rk, r, stamp
    cdef bint any_needs = False, shared, uniform
    cdef int rc = KC_OK
    st.g = g
    st.ix = ix
    st.member_rack = member_rack
    st.n_racks = n_racks
    st.prack_ptr = prack_ptr
    st.prack_ids = prack_ids
    st.owner = owner
    st.sptr = <int64_t*>xcalloc(T + 1, sizeof(int64_t))
    st.q = <int64_t*>xcalloc(T, sizeof(int64_t))
    st.extra = <int64_t*>xcalloc(T, sizeof(int64_t))
    st.left = <int64_t*>xcalloc(T, sizeof(int64_t))
    st.cursor = <int64_t*>xcalloc(T, sizeof(int64_t))
    st.hasc = <uint8_t*>xcalloc(T, 1)
    st.subs = NULL
    st.cnt = NULL
    if st.sptr != NULL:
        for t in range(T):
            S = ix.n_subs[t] if topic_count(g, t) > 0 else 0
            st.sptr[t + 1] = st.sptr[t] + S
        total = st.sptr[T]
        st.subs = <int32_t*>xmalloc(total, sizeof(int32_t))
        st.cnt = <int64_t*>xcalloc(total, sizeof(int64_t))
    if (heap == NULL or mcur == NULL or cstamp == NULL or pstamp == NULL or needs == NULL or st.sptr == NULL
            or st.q == NULL or st.extra == NULL or st.left == NULL or st.cursor == NULL or st.hasc == NULL
            or st.subs == NULL or st.cnt == NULL):
        rc = KC_NOMEM
    else:
        for t in range(T):
            S = st.sptr[t + 1] - st.sptr[t]
            if S == 0:
                continue
            n = topic_count(g, t)
            base = g.topic_start[t]
            merge_subscribers(ix, t, S, st.subs + st.sptr[t], heap, mcur)
            st.q[t] = n // S
            st.extra[t] = n % S
            st.left[t] = n
            stamp = t + 1
            for i in range(st.sptr[t], st.sptr[t + 1]):
                rk = member_rack[st.subs[i]]
                if rk >= 0:
                    st.hasc[t] = 1
                    cstamp[rk] = stamp
            if not st.hasc[t]:
                continue
            nunion = 0
            for pid in range(base, base + n):
                for j in range(prack_ptr[pid], prack_ptr[pid + 1]):
                    r = prack_ids[j]
                    if pstamp[r] != stamp:
                        pstamp[r] = stamp
                        nunion += 1
            shared = False
            for r in range(n_racks):
                if pstamp[r] == stamp and cstamp[r] == stamp:
                    shared = True
                    break
            if not shared:
                continue
            uniform = True
            for pid in range(base, base + n):
                if prack_ptr[pid + 1] - prack_ptr[pid] != nunion:
                    uniform = False
                    break
            if not uniform:
                needs[t] = 1
                any_needs = True
        if any_needs:
            rc = rack_pass(&st, needs)
        if rc == KC_OK:
            for t in range(T):
                if st.sptr[t + 1] > st.sptr[t]:
                    rc = assign_ranges(&st, t, False)
                    if rc != KC_OK:
                        break
    free(heap); free(mcur); free(cstamp); free(pstamp); free(needs)
    free(st.sptr); free(st.subs); free(st.cnt); free(st.q); free(st.extra); free(st.left); free(st.cursor)
    free(st.hasc)
    return rc
