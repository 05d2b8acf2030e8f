# Per-request counters for the metrics endpoint (kcoord.metrics): requests by API and version, top-level error codes,
# and a latency histogram by API. The server calls `observe` for every response it encodes, so this is compiled:
# fixed arrays indexed by API key and version, a bucket search over a few doubles, one monotonic clock read.

cimport cython
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cdef enum:
    KAFKA_KEYS = 128      # Kafka's API keys are below this
    PRIVATE_BASE = 1000   # kcoord's own (connect groups) are decoded at 1000-1003
    PRIVATE_KEYS = 4
    SLOTS = KAFKA_KEYS + PRIVATE_KEYS
    VERSIONS = 32
    MAX_BUCKETS = 32


cdef inline double monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def now():
    """The clock `observe` measures against: CLOCK_MONOTONIC in seconds, the clock of time.perf_counter on Linux."""
    return monotonic()


cdef inline int slot_of(int key) noexcept:
    if 0 <= key < KAFKA_KEYS:
        return key
    if PRIVATE_BASE <= key < PRIVATE_BASE + PRIVATE_KEYS:
        return KAFKA_KEYS + key - PRIVATE_BASE
    return -1


@cython.final
@cython.auto_pickle(False)
cdef class RequestStats:
    """Counts by (API key, version), top-level error codes by (key, version, code), latency by key."""

    cdef int64_t counts[SLOTS * VERSIONS]  # [slot * VERSIONS + version]
    cdef int64_t buckets[SLOTS * (MAX_BUCKETS + 1)]  # [slot * (MAX_BUCKETS + 1) + bucket]
    cdef double sums[SLOTS]
    cdef double bounds[MAX_BUCKETS]
    cdef int nbounds
    cdef signed char has_error[SLOTS]  # -1: not seen yet; 0/1: the response type has a top-level error_code
    cdef readonly dict errors  # (key, version, error code): count
    cdef readonly tuple latency_bounds

    def __init__(self, bounds):
        bounds = tuple(float(b) for b in bounds)
        if not 0 < len(bounds) <= MAX_BUCKETS or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"bucket bounds must be 1 to {MAX_BUCKETS} increasing values")
        self.latency_bounds = bounds
        self.nbounds = len(bounds)
        for i, b in enumerate(bounds):
            self.bounds[i] = b
        for i in range(SLOTS):
            self.has_error[i] = -1
        self.errors = {}

    def observe(self, int key, int version, object response, double t0):
        """A response to (key, version) is ready; the request was read at `t0` (the `now()` clock)."""
        cdef int slot = slot_of(key)
        cdef int i = 0
        cdef double latency = monotonic() - t0
        if slot < 0 or not 0 <= version < VERSIONS:
            return
        self.counts[slot * VERSIONS + version] += 1
        if self.has_error[slot] < 0:
            self.has_error[slot] = hasattr(type(response), "error_code")
        if self.has_error[slot]:
            code = response.error_code
            if code:
                k = (key, version, code)
                self.errors[k] = self.errors.get(k, 0) + 1
        while i < self.nbounds and latency > self.bounds[i]:
            i += 1
        self.buckets[slot * (MAX_BUCKETS + 1) + i] += 1
        self.sums[slot] += latency

    def requests(self):
        """{(key, version): count} of what was answered."""
        out = {}
        for slot in range(SLOTS):
            for v in range(VERSIONS):
                n = self.counts[slot * VERSIONS + v]
                if n:
                    out[(slot if slot < KAFKA_KEYS else slot - KAFKA_KEYS + PRIVATE_BASE, v)] = n
        return out

    def latency(self):
        """{key: ([count per bucket, the last for +Inf], sum of seconds)} for the keys answered."""
        out = {}
        for slot in range(SLOTS):
            counts = [self.buckets[slot * (MAX_BUCKETS + 1) + i] for i in range(self.nbounds + 1)]
            if any(counts):
                out[slot if slot < KAFKA_KEYS else slot - KAFKA_KEYS + PRIVATE_BASE] = (counts, self.sums[slot])
        return out
