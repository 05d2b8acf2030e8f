# KIP-848 reconciliation: one member's step towards its target assignment (Kafka's CurrentAssignmentBuilder), and
# the group's partition epoch table it reads.
#
# Partition lists are global partition ids (topic t owns [topic_start[t], topic_start[t + 1])), ascending and
# duplicate-free, so every set operation is one linear merge. The subscription is an ascending list of topic ids;
# the epoch table holds, per partition, the epoch of the member that holds it (assigned or pending revocation),
# or -1. The rules, in Kafka's terms (tests/support/reconcile_model.py is the same step over Python sets):
#
#   goal      = target ∩ subscribed topics
#   kept      = assigned ∩ goal,  revoking = assigned − kept
#   unreleased = p in goal − kept held by someone (epoch != -1) other than this member as pending revocation
#   adding    = goal − kept − unreleased
#   1. revoking ≠ ∅ and the client still owns one of them (or did not say: owned null) → UNREVOKED_PARTITIONS at
#      the given epoch, assigned = kept, pending = revoking;
#   2. otherwise → target epoch, assigned = kept ∪ adding, nothing pending, UNRELEASED_PARTITIONS if anything is
#      unreleased, else STABLE.
# build() picks the epoch and whether to run that (next_assignment) or only strip unsubscribed topics
# (strip_unsubscribed) from the member's state; see reconcile_kernel.

cdef enum:
    MS_STABLE = 0
    MS_UNREVOKED = 1
    MS_UNRELEASED = 2
    MS_UNKNOWN = 127
    RC_FENCED_MEMBER_EPOCH = 110


cdef struct RecIn:
    int32_t state
    int32_t member_epoch
    int32_t previous_member_epoch
    int32_t target_epoch
    const int32_t* assigned         # ascending, unique (so are the other lists)
    int64_t n_assigned
    const int32_t* pending          # partitions pending revocation
    int64_t n_pending
    const int32_t* target
    int64_t n_target
    const int32_t* owned            # what the request says the client owns
    int64_t n_owned
    bint owned_null                 # the request's TopicPartitions was null: counts as owning everything
    const int32_t* topics           # subscribed topic ids
    int32_t n_topics
    const int64_t* topic_start
    const int32_t* epochs           # partition epoch table, -1: free
    bint subscription_changed       # strip unsubscribed topics even at the target epoch


cdef struct RecOut:
    int32_t state
    int32_t member_epoch
    int32_t previous_member_epoch
    int32_t* assigned               # capacity max(n_assigned, n_target)
    int64_t n_assigned
    int32_t* pending                # capacity n_pending + n_assigned
    int64_t n_pending
    bint changed                    # the member differs from the input in any field
    bint assigned_changed
    int32_t error                   # 0, or RC_FENCED_MEMBER_EPOCH (member returned as is)


cdef struct SubCursor:
    const int32_t* topics
    const int64_t* topic_start
    int32_t n
    int32_t i


cdef inline void sub_init(SubCursor* c, const RecIn* r) noexcept nogil:
    c.topics = r.topics
    c.topic_start = r.topic_start
    c.n = r.n_topics
    c.i = 0


cdef inline bint sub_has(SubCursor* c, int32_t p) noexcept nogil:
    """Whether the topic of partition p is subscribed. p must not decrease from one call to the next."""
    cdef int64_t lo, hi, mid
    if c.i < c.n and c.topic_start[c.topics[c.i] + 1] <= p:
        # the ranges of subscribed topics ascend: find the first one that ends after p
        lo = c.i + 1
        hi = c.n
        while lo < hi:
            mid = (lo + hi) >> 1
            if c.topic_start[c.topics[mid] + 1] <= p:
                lo = mid + 1
            else:
                hi = mid
        c.i = <int32_t>lo
    return c.i < c.n and c.topic_start[c.topics[c.i]] <= p


cdef inline bint advance_to(const int32_t* a, int64_t n, int64_t* k, int32_t p) noexcept nogil:
    """Whether p is in a[k:], moving k to the first entry >= p (p must not decrease between calls)."""
    while k[0] < n and a[k[0]] < p:
        k[0] += 1
    return k[0] < n and a[k[0]] == p


cdef bint intersects(const int32_t* a, int64_t na, const int32_t* b, int64_t nb) noexcept nogil:
    cdef int64_t i = 0, j = 0
    while i < na and j < nb:
        if a[i] < b[j]:
            i += 1
        elif b[j] < a[i]:
            j += 1
        else:
            return True
    return False


cdef inline bint owns_any(const RecIn* r, const int32_t* revoking, int64_t n) noexcept nogil:
    """Kafka's ownsRevokedPartitions: a null owned list owns everything, even when nothing is being revoked."""
    return r.owned_null or intersects(r.owned, r.n_owned, revoking, n)


cdef inline bint same_ids(const int32_t* a, int64_t na, const int32_t* b, int64_t nb) noexcept nogil:
    return na == nb and (na == 0 or memcmp(a, b, <size_t>na * sizeof(int32_t)) == 0)


cdef inline void keep_member(const RecIn* r, RecOut* o) noexcept nogil:
    """The member as it is."""
    o.state = r.state
    o.member_epoch = r.member_epoch
    o.previous_member_epoch = r.previous_member_epoch
    if r.n_assigned:
        memcpy(o.assigned, r.assigned, <size_t>r.n_assigned * sizeof(int32_t))
    o.n_assigned = r.n_assigned
    if r.n_pending:
        memcpy(o.pending, r.pending, <size_t>r.n_pending * sizeof(int32_t))
    o.n_pending = r.n_pending


cdef inline void move_epoch(const RecIn* r, RecOut* o, int32_t epoch) noexcept nogil:
    """The member builder's updateMemberEpoch: the previous epoch is always the old member epoch."""
    o.previous_member_epoch = r.member_epoch
    o.member_epoch = epoch


cdef void strip_unsubscribed(const RecIn* r, RecOut* o) noexcept nogil:
    """Kafka's updateCurrentAssignment: assigned partitions of topics no longer subscribed go to pending revocation
    (UNREVOKED_PARTITIONS) while the client still owns one of them, or are dropped if it has already let go."""
    cdef SubCursor cur
    cdef int64_t i, j = 0, k = 0, nd = 0, w = 0
    cdef int32_t p
    cdef bint any_dropped = False
    sub_init(&cur, r)
    # kept → o.assigned; dropped ∪ pending (a merge, Kafka merges maps) → o.pending
    for i in range(r.n_assigned):
        p = r.assigned[i]
        if sub_has(&cur, p):
            o.assigned[k] = p
            k += 1
        else:
            any_dropped = True
            while j < r.n_pending and r.pending[j] < p:
                o.pending[w] = r.pending[j]
                w += 1
                j += 1
            if j < r.n_pending and r.pending[j] == p:
                j += 1
            o.pending[w] = p
            w += 1
            nd += 1
    if not any_dropped and (r.n_topics > 0 or r.n_pending > 0):
        keep_member(r, o)
        return
    # (with no topic subscribed and nothing pending, Kafka's shortcut builds a new member even if nothing drops)
    while j < r.n_pending:
        o.pending[w] = r.pending[j]
        w += 1
        j += 1
    o.n_assigned = k
    o.state = r.state
    move_epoch(r, o, r.member_epoch)
    if w > 0 and owns_any(r, o.pending, w):
        o.state = MS_UNREVOKED
        o.n_pending = w
    else:
        # already revoked by the client: the state and the pending list stay as they were
        if r.n_pending:
            memcpy(o.pending, r.pending, <size_t>r.n_pending * sizeof(int32_t))
        o.n_pending = r.n_pending


cdef void next_assignment(const RecIn* r, RecOut* o, int32_t epoch) noexcept nogil:
    """Kafka's computeNextAssignment(epoch, assigned): see the rules at the top of this file."""
    cdef SubCursor cur
    cdef int64_t ia = 0, it = 0, kp = 0, nk = 0, nr = 0, nadd = 0
    cdef int32_t p
    cdef bint unreleased = False
    sub_init(&cur, r)
    # one merge of assigned with target: kept → o.assigned, revoking → o.pending, count adding and unreleased
    while ia < r.n_assigned or it < r.n_target:
        if it >= r.n_target or (ia < r.n_assigned and r.assigned[ia] < r.target[it]):
            o.pending[nr] = r.assigned[ia]
            nr += 1
            ia += 1
        elif ia >= r.n_assigned or r.target[it] < r.assigned[ia]:
            p = r.target[it]
            it += 1
            if sub_has(&cur, p):
                if r.epochs[p] != -1 and not advance_to(r.pending, r.n_pending, &kp, p):
                    unreleased = True
                else:
                    nadd += 1
        else:
            p = r.target[it]
            ia += 1
            it += 1
            if sub_has(&cur, p):
                o.assigned[nk] = p
                nk += 1
            else:
                o.pending[nr] = p
                nr += 1
    if nr > 0 and owns_any(r, o.pending, nr):
        o.state = MS_UNREVOKED
        move_epoch(r, o, epoch)
        o.n_assigned = nk
        o.n_pending = nr
        return
    o.state = MS_UNRELEASED if unreleased else MS_STABLE
    move_epoch(r, o, r.target_epoch)
    o.n_pending = 0
    o.n_assigned = nk
    if nadd == 0:
        return
    # assigned = kept ∪ adding = the goal less the unreleased: one more pass over the target
    sub_init(&cur, r)
    ia = 0
    kp = 0
    nk = 0
    for it in range(r.n_target):
        p = r.target[it]
        if not sub_has(&cur, p):
            continue
        if (advance_to(r.assigned, r.n_assigned, &ia, p) or r.epochs[p] == -1
                or advance_to(r.pending, r.n_pending, &kp, p)):
            o.assigned[nk] = p
            nk += 1
    o.n_assigned = nk


cdef int reconcile_kernel(const RecIn* r, RecOut* o) noexcept nogil:
    """Kafka's CurrentAssignmentBuilder.build for one member. Writes the member after the step to `o`.

    Needs no memory of its own (the output buffers are the caller's), so it cannot fail: always KC_OK.
    """
    o.error = 0
    if r.state == MS_STABLE:
        if r.member_epoch != r.target_epoch:
            next_assignment(r, o, r.member_epoch)
        elif r.subscription_changed:
            strip_unsubscribed(r, o)
        else:
            keep_member(r, o)
    elif r.state == MS_UNREVOKED:
        if owns_any(r, r.pending, r.n_pending):
            if r.subscription_changed:
                strip_unsubscribed(r, o)
            else:
                keep_member(r, o)
        else:
            # the member epoch stays as it is on the way out of revocation (KAFKA-19974)
            next_assignment(r, o, r.member_epoch)
    elif r.state == MS_UNRELEASED:
        next_assignment(r, o, r.member_epoch)
    else:
        # UNKNOWN: a state from a newer coordinator. Fenced, unless the client says it owns nothing at all.
        if r.owned_null or r.n_owned > 0:
            keep_member(r, o)
            o.error = RC_FENCED_MEMBER_EPOCH
        else:
            next_assignment(r, o, r.target_epoch)
    o.assigned_changed = not same_ids(o.assigned, o.n_assigned, r.assigned, r.n_assigned)
    o.changed = (o.assigned_changed or o.state != r.state or o.member_epoch != r.member_epoch
                 or o.previous_member_epoch != r.previous_member_epoch
                 or not same_ids(o.pending, o.n_pending, r.pending, r.n_pending))
    return KC_OK


# --- the partition epoch table ----------------------------------------------------------------------------------

cdef int64_t epochs_add(int32_t* table, const int32_t* pids, int64_t n, int32_t epoch) noexcept nogil:
    """Sets table[p] = epoch for every p, all or nothing. Returns -1, or the index in pids of a partition that
    somebody (possibly pids itself, twice) already holds; the table is then as it was."""
    cdef int64_t i, j
    for i in range(n):
        if table[pids[i]] != -1:
            return i
    for i in range(n):
        if table[pids[i]] != -1:  # a duplicate within pids: undo
            for j in range(i):
                table[pids[j]] = -1
            return i
        table[pids[i]] = epoch
    return -1


cdef int64_t epochs_remove(int32_t* table, const int32_t* pids, int64_t n, int32_t expected) noexcept nogil:
    """Frees every p held at `expected`, all or nothing. Returns -1, or the index in pids of a partition held at
    another epoch (or already freed earlier in pids); the table is then as it was."""
    cdef int64_t i, j
    for i in range(n):
        if table[pids[i]] != expected:
            return i
    for i in range(n):
        if table[pids[i]] != expected:
            for j in range(i):
                table[pids[j]] = expected
            return i
        table[pids[i]] = -1
    return -1
