# A response that may not be ready yet: used by the server, the broker surface and every group type, so it lives
# in no one's extension but its own.

cimport cython


@cython.final
@cython.no_gc
cdef class Reply:
    """A response that may not be ready yet: JoinGroup waits for the join phase, SyncGroup for the leader.

    `version` is the request's API version (a parked reply is built for it when answered). Replies are made
    in bulk during a rebalance, so they stay out of the cyclic GC; the callbacks a reply holds are dropped
    when it is answered, which is what would otherwise keep a cycle alive.
    """

    cdef public object response
    cdef public bint done
    cdef public int version
    cdef list _callbacks

    def __init__(self, response=None, int version=0):
        self.response = response
        self.done = response is not None
        self.version = version

    cpdef resolve(self, response):
        if self.done:
            raise RuntimeError("a reply is answered exactly once")
        self.response = response
        self.done = True
        callbacks, self._callbacks = self._callbacks, None
        if callbacks is not None:
            for cb in callbacks:
                cb(response)

    def on_done(self, cb):
        if self.done:
            cb(self.response)
        elif self._callbacks is None:
            self._callbacks = [cb]
        else:
            self._callbacks.append(cb)

    def __repr__(self):
        return f"Reply({self.response!r})" if self.done else "Reply(<parked>)"
