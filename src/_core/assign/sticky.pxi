# Sticky, cooperative-sticky (client side, KIP-54/341/429/792) and uniform (server side, KIP-848) share one kernel.
#
# 1. Claims. Each member's owned partitions (client: ConsumerProtocolSubscription v1-3 / sticky user data; server:
#    the current target assignment) are resolved per partition: the claimant with the highest generation owns it;
#    a tie at the highest generation leaves it unowned. A claim counts for stickiness only while its owner still
#    subscribes to the topic.
# 2. Components. Subscription sets that share a topic are joined. A component with one set is homogeneous and is
#    solved exactly: quotas P // n and P % n one more, the +1 quotas go to the members that would keep the most
#    (ties by rank), everyone keeps up to its quota of what it owns (lowest (partition, topic) first, as Java's
#    constrained assignment does), and the rest is dealt round-robin, first to members below the minimum quota,
#    then one each to members with a +1 quota. Nothing moves that balance does not force: the number of kept
#    partitions is the maximum any balanced assignment can keep.
# 3. Components with several sets follow the server-side uniform heterogeneous builder: keep every valid claim,
#    give each unowned partition to the least loaded subscriber (topics by partitions per subscriber descending,
#    then subscriber count ascending), then balance: per topic, move a partition from its most loaded holder to
#    its least loaded subscriber while they differ by more than one, for at most 16 passes, as Kafka does. The
#    client sticky assignors balance globally instead: the most loaded member (ties by rank) gives one partition
#    to the least loaded member that can take one of its partitions, preferring a partition that goes back to its
#    previous owner, then one that is not at its previous owner; repeated until no such move exists, which is the
#    balance Java's sticky assignors check (no partition can move to a member with two fewer).
# 4. Cooperative: a partition stays out of this round's assignment when its target is not its resolved owner and
#    some member still claims it; it is assigned in the next rebalance, after its owner has revoked it.

cdef enum:
    MODE_STICKY = 0
    MODE_COOPERATIVE = 1
    MODE_UNIFORM = 2


cdef struct Claims:
    int32_t* prev       # [P] or NULL (no claims): the resolved owner (>= 0) if it still subscribes to the topic;
                        # -1 nobody claims the partition; -3 claimed, but by no valid owner (tie, or unsubscribed)


cdef inline int32_t prev_of(const Claims* c, int64_t pid) noexcept nogil:
    cdef int32_t v
    if c.prev == NULL:
        return -1
    v = c.prev[pid]
    return v if v >= 0 else -1


cdef struct Work:
    int32_t* kept       # [M]
    int32_t* quota      # [M]
    int32_t* cnt        # [M]
    int32_t* ring       # [M]
    int64_t* off        # [M + 1]
    int64_t* wcur       # [M]


cdef struct ClassQueues:
    const int64_t* mptr     # set -> its slice of the per-set arrays below
    int32_t* qa             # members sorted by (load, rank) when filling starts
    int32_t* qq             # FIFO of members that took a partition (a ring per set)
    int64_t* apos
    int64_t* qhead
    int64_t* qlen
    int32_t* load


cdef struct TopicOrd:
    int64_t p
    int64_t s
    int32_t t


cdef int cmp_topicord(const void* a, const void* b) noexcept nogil:
    cdef const TopicOrd* x = <const TopicOrd*>a
    cdef const TopicOrd* y = <const TopicOrd*>b
    cdef int64_t lhs = x.p * y.s, rhs = y.p * x.s
    if lhs != rhs:
        return -1 if lhs > rhs else 1
    if x.s != y.s:
        return -1 if x.s < y.s else 1
    return (x.t > y.t) - (x.t < y.t)


cdef int resolve_claims(const Group* g, const Index* ix, const int64_t* own_ptr, const int32_t* own_pid,
                        const int32_t* generation, bint strict, int32_t* prev, int64_t* bad_pid) noexcept nogil:
    """Per partition, the claimant with the highest generation; a tie at the highest generation voids the claim.

    Members are visited in descending generation, so the first claim on a partition is the best one: a later
    claim either ties it (void) or is older (ignored). `strict` (server side): a second claimant is an error.
    """
    cdef int32_t T = g.n_topics, M = g.n_members, K = g.n_sets
    cdef int64_t P = g.topic_start[T]
    cdef int64_t* order = NULL
    cdef int32_t* stamp = <int32_t*>xcalloc(K, sizeof(int32_t))
    cdef int64_t pid, i, x, j
    cdef int32_t t, m, cl, gm, s
    cdef bint sorted_needed = False
    if stamp == NULL:
        return KC_NOMEM
    if generation != NULL:
        for m in range(1, M):
            if generation[m] != generation[0]:
                sorted_needed = True
                break
    if sorted_needed:
        order = <int64_t*>xmalloc(M, sizeof(int64_t))
        if order == NULL:
            free(stamp)
            return KC_NOMEM
        for m in range(M):
            order[m] = (<int64_t>0x7FFFFFFF - generation[m]) * (M + 1) + m
        sort_i64(order, M)
    memset(prev, 0xFF, <size_t>P * sizeof(int32_t))
    for x in range(M):
        m = <int32_t>(order[x] % (M + 1)) if sorted_needed else <int32_t>x
        gm = generation[m] if generation != NULL else 0
        for i in range(own_ptr[m], own_ptr[m + 1]):
            pid = own_pid[i]
            if pid < 0 or pid >= P:
                continue
            cl = prev[pid]
            if cl == -1:
                prev[pid] = m
            elif cl != m and cl != -2:
                if strict:
                    bad_pid[0] = pid
                    free(order)
                    free(stamp)
                    return KC_DUPLICATE
                if (generation[cl] if generation != NULL else 0) == gm:
                    prev[pid] = -2
    free(order)
    for t in range(T):
        for j in range(ix.topic_sptr[t], ix.topic_sptr[t + 1]):
            stamp[ix.topic_sets[j]] = t + 1
        for pid in range(g.topic_start[t], g.topic_start[t + 1]):
            cl = prev[pid]
            if cl == -1:
                continue
            if cl < 0:
                prev[pid] = -3
                continue
            s = g.member_set[cl]
            if s < 0 or stamp[s] != t + 1:
                prev[pid] = -3
    free(stamp)
    return KC_OK


cdef inline int32_t topic_of_pid(const Group* g, int64_t pid) noexcept nogil:
    cdef int64_t lo = 0, hi = g.n_topics, mid
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if g.topic_start[mid] <= pid:
            lo = mid
        else:
            hi = mid
    return <int32_t>lo


cdef inline int32_t uf_find(int32_t* parent, int32_t x) noexcept nogil:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


cdef int assign_homogeneous(const Group* g, const Index* ix, int32_t s, const Claims* c, int32_t* owner,
                            Work* w) noexcept nogil:
    cdef int64_t mb = ix.set_mptr[s], n = ix.set_mptr[s + 1] - mb
    cdef const int32_t* mem = ix.set_members + mb
    cdef int64_t ta = g.set_ptr[s], tb = g.set_ptr[s + 1]
    cdef int64_t total = 0, min_q, extra, cap, i, j, x, a, k, qm, pid, nr, wr, cj, cp, cend
    cdef int64_t trimmed = 0, longest = 0
    cdef int32_t m, t, o
    cdef int32_t* buf = NULL
    cdef int64_t* keys = NULL
    for j in range(ta, tb):
        total += topic_count(g, g.set_topics[j])
    if n == 0 or total == 0:
        return KC_OK
    min_q = total // n
    extra = total % n
    for i in range(n):
        m = mem[i]
        w.kept[m] = 0
        w.quota[m] = <int32_t>min_q
        w.cnt[m] = <int32_t>i
    if c.prev != NULL:
        for j in range(ta, tb):
            t = g.set_topics[j]
            for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                o = c.prev[pid]
                if o >= 0:
                    w.kept[o] += 1
    if extra > 0:
        keys = <int64_t*>xmalloc(n, sizeof(int64_t))
        if keys == NULL:
            return KC_NOMEM
        cap = min_q + 1
        for i in range(n):
            k = w.kept[mem[i]]
            keys[i] = pack(cap - (k if k < cap else cap), i)
        sort_i64(keys, n)
        for x in range(extra):
            w.quota[mem[low32(keys[x])]] += 1
        free(keys)
        keys = NULL
    # members keep everything up to their quota; only those above it need their partitions gathered
    w.off[0] = 0
    for i in range(n):
        m = mem[i]
        k = w.kept[m]
        w.off[i + 1] = w.off[i] + (k if k > w.quota[m] else 0)
        w.wcur[i] = w.off[i]
        if k > w.quota[m]:
            trimmed += k
            if k > longest:
                longest = k
    if c.prev != NULL:
        if trimmed > 0:
            buf = <int32_t*>xmalloc(trimmed, sizeof(int32_t))
            keys = <int64_t*>xmalloc(longest, sizeof(int64_t))
            if buf == NULL or keys == NULL:
                free(buf)
                free(keys)
                return KC_NOMEM
        for j in range(ta, tb):
            t = g.set_topics[j]
            for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                o = c.prev[pid]
                if o < 0:
                    continue
                if w.kept[o] <= w.quota[o]:
                    owner[pid] = o
                else:
                    i = w.cnt[o]
                    buf[w.wcur[i]] = <int32_t>pid
                    w.wcur[i] += 1
    for i in range(n):
        m = mem[i]
        k = w.kept[m]
        qm = w.quota[m]
        if k <= qm:
            w.cnt[m] = <int32_t>k
            continue
        # keep the qm lowest by (partition, topic), as Java's constrained assignment does
        a = w.off[i]
        for x in range(k):
            pid = buf[a + x]
            t = topic_of_pid(g, pid)
            keys[x] = pack(pid - g.topic_start[t], t)
        sort_i64(keys, k)
        for x in range(qm):
            owner[g.topic_start[low32(keys[x])] + (keys[x] >> 32)] = m
        w.cnt[m] = <int32_t>qm
    free(buf)
    free(keys)
    # deal what is left in (topic, partition) order: round-robin to members below the minimum quota, then one
    # each to the members with a +1 quota; cj/cp is a cursor over the set's unassigned partitions
    cj = ta
    cp = g.topic_start[g.set_topics[ta]]
    cend = g.topic_start[g.set_topics[ta] + 1]
    nr = 0
    for i in range(n):
        m = mem[i]
        if w.cnt[m] < min_q:
            w.ring[nr] = m
            nr += 1
    while nr > 0:
        wr = 0
        for x in range(nr):
            while cj < tb:
                if cp < cend and owner[cp] < 0:
                    break
                cp += 1
                if cp >= cend:
                    cj += 1
                    if cj < tb:
                        cp = g.topic_start[g.set_topics[cj]]
                        cend = g.topic_start[g.set_topics[cj] + 1]
            if cj >= tb:
                return KC_OK
            m = w.ring[x]
            owner[cp] = m
            w.cnt[m] += 1
            if w.cnt[m] < min_q:
                w.ring[wr] = m
                wr += 1
        nr = wr
    for i in range(n):
        m = mem[i]
        if w.cnt[m] >= w.quota[m]:
            continue
        while cj < tb:
            if cp < cend and owner[cp] < 0:
                break
            cp += 1
            if cp >= cend:
                cj += 1
                if cj < tb:
                    cp = g.topic_start[g.set_topics[cj]]
                    cend = g.topic_start[g.set_topics[cj] + 1]
        if cj >= tb:
            return KC_OK
        owner[cp] = m
        w.cnt[m] += 1
    return KC_OK


cdef inline int64_t cq_headload(const ClassQueues* q, int32_t s) noexcept nogil:
    cdef int64_t base = q.mptr[s], n = q.mptr[s + 1] - base
    cdef int64_t la = 0x7FFFFFFF, lq = 0x7FFFFFFF
    if q.apos[s] < n:
        la = q.load[q.qa[base + q.apos[s]]]
    if q.qlen[s] > 0:
        lq = q.load[q.qq[base + q.qhead[s]]]
    return la if la <= lq else lq


cdef inline int32_t cq_pop(ClassQueues* q, int32_t s) noexcept nogil:
    """The least loaded member of set s takes one partition (the two-queue trick: O(1), loads only grow)."""
    cdef int64_t base = q.mptr[s], n = q.mptr[s + 1] - base
    cdef int32_t m
    if q.apos[s] < n and (q.qlen[s] == 0 or q.load[q.qa[base + q.apos[s]]] <= q.load[q.qq[base + q.qhead[s]]]):
        m = q.qa[base + q.apos[s]]
        q.apos[s] += 1
    else:
        m = q.qq[base + q.qhead[s]]
        q.qhead[s] += 1
        if q.qhead[s] == n:
            q.qhead[s] = 0
        q.qlen[s] -= 1
    q.load[m] += 1
    q.qq[base + (q.qhead[s] + q.qlen[s]) % n] = m
    q.qlen[s] += 1
    return m


cdef int64_t balance_topic(const Group* g, const Index* ix, const Claims* c, int32_t* owner, int32_t* load,
                           int32_t* setmin, int32_t* setmax, int32_t t) noexcept nogil:
    cdef int64_t base = g.topic_start[t], n = topic_count(g, t)
    cdef int64_t a = ix.topic_sptr[t], b = ix.topic_sptr[t + 1], j, x, p, pick, pick2, pick3
    cdef int64_t moves = 0
    cdef int32_t lo = 0x7FFFFFFF, hi = -1, s, m, o, A, B, al, bl, l
    for j in range(a, b):
        s = ix.topic_sets[j]
        if setmin[s] < lo:
            lo = setmin[s]
        if setmax[s] > hi:
            hi = setmax[s]
    if hi - lo <= 1:
        return 0
    while True:
        B = -1
        bl = 0x7FFFFFFF
        for j in range(a, b):
            s = ix.topic_sets[j]
            for x in range(ix.set_mptr[s], ix.set_mptr[s + 1]):
                m = ix.set_members[x]
                l = load[m]
                if l < bl or (l == bl and m < B):
                    bl = l
                    B = m
        A = -1
        al = -1
        for p in range(base, base + n):
            o = owner[p]
            if o < 0:
                continue
            l = load[o]
            if l > al or (l == al and o < A):
                al = l
                A = o
        if A < 0 or al - bl <= 1:
            break
        pick = -1
        pick2 = -1
        pick3 = -1
        for p in range(base, base + n):
            if owner[p] != A:
                continue
            if prev_of(c, p) == B:
                pick = p
                break
            if pick2 < 0 and prev_of(c, p) != A:
                pick2 = p
            if pick3 < 0:
                pick3 = p
        if pick < 0:
            pick = pick2 if pick2 >= 0 else pick3
        owner[pick] = B
        load[A] -= 1
        load[B] += 1
        moves += 1
        s = g.member_set[B]
        if load[B] > setmax[s]:
            setmax[s] = load[B]
        s = g.member_set[A]
        if load[A] < setmin[s]:
            setmin[s] = load[A]
    return moves


cdef inline bint load_less(const int32_t* load, int32_t a, int32_t b) noexcept nogil:
    return load[a] < load[b] or (load[a] == load[b] and a < b)


cdef void ih_sift_up(int32_t* hp, int64_t* hpos, const int32_t* load, int64_t base, int64_t i) noexcept nogil:
    """Indexed min-heap of members by (load, rank), one per subscription set, living in hp[base:...]."""
    cdef int32_t m = hp[base + i]
    cdef int64_t parent
    while i > 0:
        parent = (i - 1) >> 1
        if not load_less(load, m, hp[base + parent]):
            break
        hp[base + i] = hp[base + parent]
        hpos[hp[base + i]] = i
        i = parent
    hp[base + i] = m
    hpos[m] = i


cdef void ih_sift_down(int32_t* hp, int64_t* hpos, const int32_t* load, int64_t base, int64_t n,
                       int64_t i) noexcept nogil:
    cdef int32_t m = hp[base + i]
    cdef int64_t child
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and load_less(load, hp[base + child + 1], hp[base + child]):
            child += 1
        if not load_less(load, hp[base + child], m):
            break
        hp[base + i] = hp[base + child]
        hpos[hp[base + i]] = i
        i = child
    hp[base + i] = m
    hpos[m] = i


cdef struct Balancer:
    const Group* g
    const Index* ix
    const Claims* c
    int32_t* owner
    int32_t* load
    int32_t* topic_of  # [P]
    int32_t* head      # [M]: first partition a member holds (general topics only), -1 for none
    int32_t* nxt       # [P]: doubly linked lists of held partitions
    int32_t* prv
    int32_t* hp        # per-set indexed min-heaps by (load, rank), sliced like set_members
    int64_t* hpos
    int32_t* th        # per-topic min-heaps of (set, topic) pairs by the set's head (load, rank), sliced like
    int32_t* tpos      # topic_sets; a pair is numbered like set_topics (set-major); tpos: its place in th
    int32_t* pair_set  # [pairs]: the set of a pair
    int64_t* stamp     # [T]
    int64_t stampv
    int64_t* dheap     # donors, lazily: pack(INT32_MAX - load, member)
    int64_t dn
    int64_t dcap
    int64_t* hist      # [max load + 2]: members (general ones) per load
    int32_t min_load   # the lowest load of any general member


cdef inline int32_t set_head(const Balancer* b, int32_t s) noexcept nogil:
    return b.hp[b.ix.set_mptr[s]]


cdef inline bint pair_less(const Balancer* b, int32_t e, int32_t f) noexcept nogil:
    return load_less(b.load, set_head(b, b.pair_set[e]), set_head(b, b.pair_set[f]))


cdef void th_sift(Balancer* b, int32_t t, int64_t i, bint up) noexcept nogil:
    """Restores topic t's heap of pairs after the key of the pair at position i changed (up: either way;
    otherwise down only, as heap construction needs)."""
    cdef int64_t base = b.ix.topic_sptr[t], n = b.ix.topic_sptr[t + 1] - base, parent, child
    cdef int32_t e = b.th[base + i]
    while up and i > 0:
        parent = (i - 1) >> 1
        if not pair_less(b, e, b.th[base + parent]):
            break
        b.th[base + i] = b.th[base + parent]
        b.tpos[b.th[base + i]] = <int32_t>i
        i = parent
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and pair_less(b, b.th[base + child + 1], b.th[base + child]):
            child += 1
        if not pair_less(b, b.th[base + child], e):
            break
        b.th[base + i] = b.th[base + child]
        b.tpos[b.th[base + i]] = <int32_t>i
        i = child
    b.th[base + i] = e
    b.tpos[e] = <int32_t>i


cdef void set_head_moved(Balancer* b, int32_t s) noexcept nogil:
    """Set s's head (or its load) changed: re-place the set in the heap of each of its topics."""
    cdef const Group* g = b.g
    cdef int64_t e
    for e in range(g.set_ptr[s], g.set_ptr[s + 1]):
        th_sift(b, g.set_topics[e], b.tpos[e], True)


cdef inline void bl_unlink(Balancer* b, int32_t m, int32_t p) noexcept nogil:
    if b.prv[p] >= 0:
        b.nxt[b.prv[p]] = b.nxt[p]
    else:
        b.head[m] = b.nxt[p]
    if b.nxt[p] >= 0:
        b.prv[b.nxt[p]] = b.prv[p]


cdef inline void bl_link(Balancer* b, int32_t m, int32_t p) noexcept nogil:
    b.prv[p] = -1
    b.nxt[p] = b.head[m]
    if b.head[m] >= 0:
        b.prv[b.head[m]] = p
    b.head[m] = p


cdef int bl_push_donor(Balancer* b, int32_t m) noexcept nogil:
    cdef int64_t* grown
    if b.dn == b.dcap:
        grown = <int64_t*>realloc(b.dheap, <size_t>(2 * b.dcap) * sizeof(int64_t))
        if grown == NULL:
            return KC_NOMEM
        b.dheap = grown
        b.dcap *= 2
    heap_push(b.dheap, &b.dn, pack(0x7FFFFFFF - b.load[m], m))
    return KC_OK


cdef int32_t bl_give(Balancer* b, int32_t a) noexcept nogil:
    """Member a gives one partition to the least loaded member that can take one; returns it, or -1.

    The recipient is the lowest-ranked least-loaded subscriber of one of a's topics; among a's partitions,
    one going back to that member's ownership first, then one not at its previous owner, then the lowest id.
    """
    cdef const Group* g = b.g
    cdef const Index* ix = b.ix
    cdef int32_t p, t, s, h, r, sa, sr, ha, hr, hla, hlr, la = b.load[a], min_l = 0x7FFFFFFF
    cdef int32_t best_pref = 3, best_r = 0x7FFFFFFF, best_p = 0x7FFFFFFF, pref
    cdef int64_t base
    if la - 2 < b.min_load:
        return -1
    b.stampv += 1
    p = b.head[a]
    while p >= 0 and min_l > b.min_load:
        t = b.topic_of[p]
        if b.stamp[t] != b.stampv:
            b.stamp[t] = b.stampv
            r = set_head(b, b.pair_set[b.th[ix.topic_sptr[t]]])
            if b.load[r] < min_l:
                min_l = b.load[r]
        p = b.nxt[p]
    if min_l > la - 2:
        return -1
    p = b.head[a]
    while p >= 0:
        t = b.topic_of[p]
        h = prev_of(b.c, p)
        if h >= 0 and h != a and b.load[h] == min_l:
            if best_pref > 0 or h < best_r or (h == best_r and p < best_p):
                best_pref = 0
                best_r = h
                best_p = p
        r = set_head(b, b.pair_set[b.th[ix.topic_sptr[t]]])
        if b.load[r] == min_l:
            pref = 0 if h == r else (1 if h != a else 2)
            if pref < best_pref or (pref == best_pref and (r < best_r or (r == best_r and p < best_p))):
                best_pref = pref
                best_r = r
                best_p = p
        p = b.nxt[p]
    p = best_p
    r = best_r
    sa = g.member_set[a]
    sr = g.member_set[r]
    ha = set_head(b, sa)
    hla = b.load[ha]
    hr = set_head(b, sr)
    hlr = b.load[hr]
    bl_unlink(b, a, p)
    bl_link(b, r, p)
    b.owner[p] = r
    b.hist[b.load[a]] -= 1
    b.hist[b.load[r]] -= 1
    b.load[a] -= 1
    b.load[r] += 1
    b.hist[b.load[a]] += 1
    b.hist[b.load[r]] += 1
    if b.load[a] < b.min_load:
        b.min_load = b.load[a]
    while b.hist[b.min_load] == 0:
        b.min_load += 1
    base = ix.set_mptr[sa]
    ih_sift_up(b.hp, b.hpos, b.load, base, b.hpos[a])
    base = ix.set_mptr[sr]
    ih_sift_down(b.hp, b.hpos, b.load, base, ix.set_mptr[sr + 1] - base, b.hpos[r])
    if set_head(b, sa) != ha or b.load[ha] != hla:
        set_head_moved(b, sa)
    if sr != sa and (set_head(b, sr) != hr or b.load[hr] != hlr):
        set_head_moved(b, sr)
    return r


cdef int balance_global(const Group* g, const Index* ix, const Claims* c, const uint8_t* single,
                        const TopicOrd* ords, int64_t ngt, int32_t* owner, int32_t* load) noexcept nogil:
    """Rounds of: the most loaded member gives to the least loaded one that can take, until nothing moves."""
    cdef int32_t T = g.n_topics, K = g.n_sets, M = g.n_members
    cdef int64_t P = g.topic_start[T]
    cdef Balancer b
    cdef int64_t x, pid, base, n, i, moved, key, e
    cdef int32_t t, s, m, r, top
    cdef int rc = KC_OK
    b.g = g
    b.ix = ix
    b.c = c
    b.owner = owner
    b.load = load
    b.stampv = 0
    b.dn = 0
    b.dcap = M + 16
    b.topic_of = <int32_t*>xmalloc(P, sizeof(int32_t))
    b.head = <int32_t*>xmalloc(M, sizeof(int32_t))
    b.nxt = <int32_t*>xmalloc(P, sizeof(int32_t))
    b.prv = <int32_t*>xmalloc(P, sizeof(int32_t))
    b.hp = <int32_t*>xmalloc(M, sizeof(int32_t))
    b.hpos = <int64_t*>xmalloc(M, sizeof(int64_t))
    b.th = <int32_t*>xmalloc(g.set_ptr[K], sizeof(int32_t))
    b.tpos = <int32_t*>xmalloc(g.set_ptr[K], sizeof(int32_t))
    b.pair_set = <int32_t*>xmalloc(g.set_ptr[K], sizeof(int32_t))
    cdef int64_t* tcur = <int64_t*>xmalloc(T, sizeof(int64_t))
    b.stamp = <int64_t*>xcalloc(T, sizeof(int64_t))
    b.dheap = <int64_t*>xmalloc(b.dcap, sizeof(int64_t))
    b.hist = NULL
    b.min_load = 0x7FFFFFFF
    top = 0
    for m in range(M):
        s = g.member_set[m]
        if s >= 0 and not single[s]:
            if load[m] > top:
                top = load[m]
            if load[m] < b.min_load:
                b.min_load = load[m]
    b.hist = <int64_t*>xcalloc(top + 2, sizeof(int64_t))
    if (b.topic_of == NULL or b.head == NULL or b.nxt == NULL or b.prv == NULL or b.hp == NULL or b.hpos == NULL
            or b.stamp == NULL or b.dheap == NULL or b.hist == NULL or b.th == NULL or b.tpos == NULL
            or b.pair_set == NULL or tcur == NULL):
        rc = KC_NOMEM
    else:
        for m in range(M):
            s = g.member_set[m]
            if s >= 0 and not single[s]:
                b.hist[load[m]] += 1
        for m in range(M):
            b.head[m] = -1
        for x in range(ngt):
            t = ords[x].t
            for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                b.topic_of[pid] = t
                bl_link(&b, owner[pid], <int32_t>pid)
        for s in range(K):
            if single[s]:
                continue
            base = ix.set_mptr[s]
            n = ix.set_mptr[s + 1] - base
            for i in range(n):
                m = ix.set_members[base + i]
                b.hp[base + i] = m
                b.hpos[m] = i
            i = n // 2 - 1
            while i >= 0:
                ih_sift_down(b.hp, b.hpos, load, base, n, i)
                i -= 1
        # topic heaps over the (set, topic) pairs of general sets, laid out like ix.topic_sets
        for t in range(T):
            tcur[t] = 0
        for s in range(K):
            for e in range(g.set_ptr[s], g.set_ptr[s + 1]):
                b.pair_set[e] = s
                if single[s]:
                    continue
                t = g.set_topics[e]
                b.th[ix.topic_sptr[t] + tcur[t]] = <int32_t>e
                b.tpos[e] = <int32_t>tcur[t]
                tcur[t] += 1
        for x in range(ngt):
            t = ords[x].t
            n = ix.topic_sptr[t + 1] - ix.topic_sptr[t]
            i = n // 2 - 1
            while i >= 0:
                th_sift(&b, t, i, False)
                i -= 1
        while rc == KC_OK:
            moved = 0
            b.dn = 0
            for m in range(M):
                s = g.member_set[m]
                if s >= 0 and not single[s] and load[m] > 1:
                    rc = bl_push_donor(&b, m)
                    if rc != KC_OK:
                        break
            while rc == KC_OK and b.dn > 0:
                key = b.dheap[0]
                heap_pop(b.dheap, &b.dn)
                m = <int32_t>low32(key)
                if 0x7FFFFFFF - (key >> 32) != load[m]:
                    continue
                if load[m] - 2 < b.min_load:
                    break  # donors come most loaded first: no one can give any more this round
                r = bl_give(&b, m)
                if r < 0:
                    continue
                moved += 1
                rc = bl_push_donor(&b, m)
                if rc == KC_OK:
                    rc = bl_push_donor(&b, r)
            if moved == 0:
                break
    free(b.topic_of); free(b.head); free(b.nxt); free(b.prv); free(b.hp); free(b.hpos); free(b.stamp); free(b.dheap)
    free(b.hist); free(b.th); free(b.tpos); free(b.pair_set); free(tcur)
    return rc


cdef int assign_general(const Group* g, const Index* ix, const Claims* c, const uint8_t* single, int32_t* owner,
                        int32_t* load, int mode, int max_passes) noexcept nogil:
    cdef int32_t T = g.n_topics, K = g.n_sets, M = g.n_members
    cdef TopicOrd* ords = <TopicOrd*>xmalloc(T, sizeof(TopicOrd))
    cdef ClassQueues q
    cdef int64_t* heap = <int64_t*>xmalloc(K, sizeof(int64_t))
    cdef int64_t* keys = <int64_t*>xmalloc(M, sizeof(int64_t))
    cdef int32_t* setmin = <int32_t*>xmalloc(K, sizeof(int32_t))
    cdef int32_t* setmax = <int32_t*>xmalloc(K, sizeof(int32_t))
    cdef int64_t ngt = 0, x, j, a, b, pid, base, n, i, hn, moved
    cdef int32_t t, s, o, m, lo, hi
    cdef int passes = 0
    cdef int rc = KC_OK
    q.mptr = ix.set_mptr
    q.qa = <int32_t*>xmalloc(M, sizeof(int32_t))
    q.qq = <int32_t*>xmalloc(M, sizeof(int32_t))
    q.apos = <int64_t*>xcalloc(K, sizeof(int64_t))
    q.qhead = <int64_t*>xcalloc(K, sizeof(int64_t))
    q.qlen = <int64_t*>xcalloc(K, sizeof(int64_t))
    q.load = load
    if (ords == NULL or heap == NULL or keys == NULL or setmin == NULL or setmax == NULL or q.qa == NULL
            or q.qq == NULL or q.apos == NULL or q.qhead == NULL or q.qlen == NULL):
        free(ords); free(heap); free(keys); free(setmin); free(setmax)
        free(q.qa); free(q.qq); free(q.apos); free(q.qhead); free(q.qlen)
        return KC_NOMEM
    for t in range(T):
        a = ix.topic_sptr[t]
        if a == ix.topic_sptr[t + 1] or topic_count(g, t) == 0 or single[ix.topic_sets[a]]:
            continue
        ords[ngt].p = topic_count(g, t)
        ords[ngt].s = ix.n_subs[t]
        ords[ngt].t = t
        ngt += 1
    if ngt > 0:
        if ngt > 1:
            qsort(ords, <size_t>ngt, sizeof(TopicOrd), cmp_topicord)
        for m in range(M):
            load[m] = 0
        for x in range(ngt):
            t = ords[x].t
            for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                o = prev_of(c, pid)
                if o >= 0:
                    owner[pid] = o
                    load[o] += 1
        for s in range(K):
            if single[s]:
                continue
            base = ix.set_mptr[s]
            n = ix.set_mptr[s + 1] - base
            for i in range(n):
                m = ix.set_members[base + i]
                keys[i] = pack(load[m], m)
            sort_i64(keys, n)
            for i in range(n):
                q.qa[base + i] = <int32_t>low32(keys[i])
        for x in range(ngt):
            t = ords[x].t
            a = ix.topic_sptr[t]
            b = ix.topic_sptr[t + 1]
            if b - a == 1:
                s = ix.topic_sets[a]
                for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                    if owner[pid] < 0:
                        owner[pid] = cq_pop(&q, s)
            else:
                hn = 0
                for j in range(a, b):
                    s = ix.topic_sets[j]
                    heap_push(heap, &hn, pack(cq_headload(&q, s), s))
                for pid in range(g.topic_start[t], g.topic_start[t + 1]):
                    if owner[pid] < 0:
                        s = <int32_t>low32(heap[0])
                        owner[pid] = cq_pop(&q, s)
                        heap_replace_top(heap, hn, pack(cq_headload(&q, s), s))
        if mode != MODE_UNIFORM:
            rc = balance_global(g, ix, c, single, ords, ngt, owner, load)
            max_passes = 0
        while max_passes < 0 or passes < max_passes:
            passes += 1
            for s in range(K):
                if single[s]:
                    continue
                lo = 0x7FFFFFFF
                hi = -1
                for i in range(ix.set_mptr[s], ix.set_mptr[s + 1]):
                    m = ix.set_members[i]
                    if load[m] < lo:
                        lo = load[m]
                    if load[m] > hi:
                        hi = load[m]
                setmin[s] = lo
                setmax[s] = hi
            moved = 0
            for x in range(ngt):
                t = ords[x].t
                if ix.n_subs[t] >= 2:
                    moved += balance_topic(g, ix, c, owner, load, setmin, setmax, t)
            if moved == 0:
                break
    free(ords); free(heap); free(keys); free(setmin); free(setmax)
    free(q.qa); free(q.qq); free(q.apos); free(q.qhead); free(q.qlen)
    return rc


cdef int sticky_kernel(const Group* g, const Index* ix, const int64_t* own_ptr, const int32_t* own_pid,
                       const int32_t* generation, int mode, int max_passes, int32_t* owner, uint8_t* withheld,
                       int64_t* bad_pid) noexcept nogil:
    cdef int32_t T = g.n_topics, K = g.n_sets, M = g.n_members
    cdef int64_t P = g.topic_start[T]
    cdef bint has_claims = own_ptr != NULL and own_ptr[M] > 0
    cdef Claims c
    cdef Work w
    cdef int32_t* parent = <int32_t*>xmalloc(K, sizeof(int32_t))
    cdef int32_t* compsize = <int32_t*>xcalloc(K, sizeof(int32_t))
    cdef uint8_t* single = <uint8_t*>xcalloc(K, 1)
    cdef int32_t* load = <int32_t*>xcalloc(M, sizeof(int32_t))
    cdef int64_t pid, j
    cdef int32_t s, t, r0, r, o
    cdef int rc = KC_OK
    c.prev = <int32_t*>xmalloc(P, sizeof(int32_t)) if has_claims else NULL
    w.kept = <int32_t*>xmalloc(M, sizeof(int32_t))
    w.quota = <int32_t*>xmalloc(M, sizeof(int32_t))
    w.cnt = <int32_t*>xmalloc(M, sizeof(int32_t))
    w.ring = <int32_t*>xmalloc(M, sizeof(int32_t))
    w.off = <int64_t*>xmalloc(M + 1, sizeof(int64_t))
    w.wcur = <int64_t*>xmalloc(M, sizeof(int64_t))
    if (parent == NULL or compsize == NULL or single == NULL or load == NULL or w.kept == NULL
            or w.quota == NULL or w.cnt == NULL or w.ring == NULL or w.off == NULL or w.wcur == NULL
            or (has_claims and c.prev == NULL)):
        rc = KC_NOMEM
    if rc == KC_OK and has_claims:
        rc = resolve_claims(g, ix, own_ptr, own_pid, generation, mode == MODE_UNIFORM, c.prev, bad_pid)
    if rc == KC_OK:
        for pid in range(P):
            owner[pid] = -1
        for s in range(K):
            parent[s] = s
        for t in range(T):
            if ix.topic_sptr[t + 1] - ix.topic_sptr[t] < 2:
                continue
            r0 = uf_find(parent, ix.topic_sets[ix.topic_sptr[t]])
            for j in range(ix.topic_sptr[t] + 1, ix.topic_sptr[t + 1]):
                r = uf_find(parent, ix.topic_sets[j])
                if r != r0:
                    parent[r] = r0
        for s in range(K):
            compsize[uf_find(parent, s)] += 1
        for s in range(K):
            single[s] = compsize[uf_find(parent, s)] == 1
            if single[s] and rc == KC_OK:
                rc = assign_homogeneous(g, ix, s, &c, owner, &w)
    if rc == KC_OK:
        rc = assign_general(g, ix, &c, single, owner, load, mode, max_passes)
    if rc == KC_OK and mode == MODE_COOPERATIVE:
        for pid in range(P):
            withheld[pid] = 0
            if has_claims and c.prev[pid] != -1:
                o = owner[pid]
                if o >= 0 and o != c.prev[pid]:
                    owner[pid] = -1
                    withheld[pid] = 1
    free(parent); free(compsize); free(single); free(load)
    free(c.prev)
    free(w.kept); free(w.quota); free(w.cnt); free(w.ring); free(w.off); free(w.wcur)
    return rc
