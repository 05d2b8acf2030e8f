"""Assignor speed: Kafka's JMH grid, the assignor issue's targets, and kafka-python in the same run.

* The grid of Kafka's ServerSideAssignorBenchmark / ClientSideAssignorBenchmark: members 100, 1,000, 10,000 ×
  partitions per member 5, 10, 50 × topics 10, 100, 1,000; homogeneous and heterogeneous (5 buckets with disjoint
  topic and member slices); full, and incremental (M - 1 members assigned, then one joins). Timed: the bulk call
  `assign_arrays` on prepared numpy arrays (validation, canonical subscription sets, kernel, CSR out), as JMH
  times `assign` on a prepared GroupSpec. The summary prints each cell next to the published Java figure.
* kafka-python 3.0.12's range, round-robin and sticky against kcoord's simple calls (Python objects in and out on
  both sides). kafka-python's sticky at 1,000 × 10,000 takes ~20 s a call: those cases are marked slow.
* Sticky at 1M partitions: 2,000 members, 500 topics × 2,000 (Kafka's testLargeAssignmentAndGroup... tests, both
  the uniform-subscription and the non-equal-subscription shape), through the simple call and the bulk call.
* The GIL: a pure-Python thread's speed while another thread runs kernels (about 1.0: the GIL stays free), and two
  threads running kernels at once (their scaling is bounded by memory bandwidth and by the other core's load).

Targets (reported, not asserted): uniform homogeneous 10,000 members × 100,000 partitions full < 3 ms;
heterogeneous < 10 ms; sticky 1,000 × 10,000 >= 200x kafka-python; sticky with 1M partitions < 0.5 s.
Run: `python -m pytest benches/bench_assignors.py` (`-m "not slow"` skips the slow kafka-python cases).
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kcoord import assignors as A
from kcoord._core import _assign
from kcoord.assignors import Member

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KPSubscription

GRID_MEMBERS = (100, 1_000, 10_000)
GRID_RATIOS = (5, 10, 50)
GRID_TOPICS = (10, 100, 1_000)
GRID_ASSIGNORS = ("uniform", "range", "cooperative-sticky")
SUBSCRIPTIONS = ("homogeneous", "heterogeneous")
ASSIGNMENTS = ("full", "incremental")
BUCKETS = 5  # Kafka's MAX_BUCKET_COUNT for heterogeneous groups

# Published Java JMH figures (ms/op) for cells of the grid, from the Apache Kafka pull requests each names (hardware
# not stated). Uniform heterogeneous: after KAFKA-17710's rewrite.
JAVA_MS: dict[tuple[str, str, str, int, int, int], tuple[float, str]] = {
    ("uniform", "homogeneous", "full", 100, 5, 10): (0.020, "#19677"),
    ("uniform", "homogeneous", "full", 100, 10, 1000): (0.129, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 10, 10): (2.602, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 10, 100): (2.884, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 10, 1000): (3.158, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 50, 10): (13.874, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 50, 100): (12.351, "#19677"),
    ("uniform", "homogeneous", "full", 10000, 50, 1000): (14.557, "#19677"),
    ("uniform", "homogeneous", "incremental", 100, 5, 10): (0.010, "#19677"),
    ("uniform", "homogeneous", "incremental", 100, 5, 1000): (0.068, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 5, 10): (0.704, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 5, 100): (0.881, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 5, 1000): (1.071, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 10, 10): (1.041, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 10, 100): (1.112, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 10, 1000): (1.374, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 50, 10): (3.124, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 50, 100): (3.428, "#19677"),
    ("uniform", "homogeneous", "incremental", 10000, 50, 1000): (4.377, "#19677"),
    ("uniform", "heterogeneous", "full", 100, 5, 10): (0.059, "#17385"),
    ("uniform", "heterogeneous", "full", 100, 5, 100): (0.233, "#17385"),
    ("uniform", "heterogeneous", "full", 100, 5, 1000): (1.648, "#17385"),
    ("uniform", "heterogeneous", "full", 100, 10, 10): (0.076, "#17385"),
    ("uniform", "heterogeneous", "full", 100, 10, 100): (0.271, "#17385"),
    ("uniform", "heterogeneous", "full", 10000, 5, 10): (5.8, "#17385"),
    ("uniform", "heterogeneous", "full", 10000, 5, 100): (18.1, "#17385"),
    ("uniform", "heterogeneous", "full", 10000, 5, 1000): (202.7, "#17385"),
    ("uniform", "heterogeneous", "full", 10000, 10, 10): (8.9, "#17385"),
    ("uniform", "heterogeneous", "full", 10000, 10, 100): (22.9, "#17385"),
    ("range", "homogeneous", "incremental", 1000, 10, 1000): (3.1, "#16504"),
    ("range", "homogeneous", "incremental", 10000, 10, 100): (5.6, "#16504"),
    ("range", "homogeneous", "incremental", 10000, 10, 1000): (36.4, "#17285, before its topic-id cache"),
    ("range", "heterogeneous", "incremental", 10000, 10, 1000): (158.3, "#17285, before its topic-id cache"),
}

# The targets on grid cells, in seconds.
GRID_TARGETS: dict[tuple[str, str, str, int, int, int], tuple[float, str]] = {
    ("uniform", "homogeneous", "full", 10000, 10, 1000): (3e-3, "uniform homogeneous 10,000 × 100,000 full"),
    ("uniform", "heterogeneous", "full", 10000, 10, 10): (10e-3, "uniform heterogeneous 10,000 × 100,000 full"),
    ("uniform", "heterogeneous", "full", 10000, 10, 100): (10e-3, "uniform heterogeneous 10,000 × 100,000 full"),
    ("uniform", "heterogeneous", "full", 10000, 10, 1000): (10e-3, "uniform heterogeneous 10,000 × 100,000 full"),
}


def timed(benchmark: Any, fn: Callable[[], Any], budget: float = 0.15, max_rounds: int = 50) -> Any:
    """Runs fn under pytest-benchmark with a fixed number of rounds sized from one trial call."""
    if getattr(benchmark, "disabled", False):
        return benchmark(fn)
    start = time.perf_counter()
    fn()
    trial = time.perf_counter() - start
    rounds = max(3, min(max_rounds, int(budget / max(trial, 1e-6))))
    return benchmark.pedantic(fn, rounds=rounds, warmup_rounds=1)


# ---------------------------------------------------------------------------------------------------------------
# The JMH grid on the bulk face


def jmh_group(subscription: str, members: int, per_topic: int, topics: int):
    """(partition_counts, member_sets, set_indptr, set_topics) as Kafka's benchmark builds its members."""
    counts = np.full(topics, per_topic, dtype=np.int32)
    if subscription == "homogeneous":
        return counts, np.zeros(members, dtype=np.int32), np.array([0, topics]), np.arange(topics, dtype=np.int32)
    buckets = min(BUCKETS, members)
    topic_slice = -(-topics // buckets)
    member_slice = -(-members // buckets)
    member_sets = np.minimum(np.arange(members) // member_slice, buckets - 1).astype(np.int32)
    rows = [np.arange(b * topic_slice, min((b + 1) * topic_slice, topics), dtype=np.int32) for b in range(buckets)]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    return counts, member_sets, indptr, np.concatenate(rows)


def grid_case(assignor: str, subscription: str, assignment: str, members: int, ratio: int, topics: int):
    """The arguments of the timed assign_arrays call."""
    per_topic = members * ratio // topics
    if assignment == "full":
        return jmh_group(subscription, members, per_topic, topics), {}
    counts, sets, indptr, flat = jmh_group(subscription, members - 1, per_topic, topics)
    first = A.assign_arrays(assignor, counts, sets, indptr, flat)
    # the new member subscribes like the last existing one (heterogeneous) or to every topic, and owns nothing
    sets = np.append(sets, sets[-1]).astype(np.int32)
    owned_indptr = np.append(first.indptr, first.indptr[-1])
    kwargs = {"owned_indptr": owned_indptr, "owned_partitions": first.partitions}
    if assignor != "uniform":
        kwargs["generations"] = np.append(np.ones(members - 1, dtype=np.int32), -1)
    return (counts, sets, indptr, flat), kwargs


GRID = [pytest.param(a, s, t, m, r, n, id=f"{a}-{s}-{t}-{m}x{r}x{n}")
        for a in GRID_ASSIGNORS for s in SUBSCRIPTIONS for t in ASSIGNMENTS
        for m in GRID_MEMBERS for r in GRID_RATIOS for n in GRID_TOPICS]


@pytest.mark.parametrize(("assignor", "subscription", "assignment", "members", "ratio", "topics"), GRID)
def test_jmh_grid(benchmark, assignor, subscription, assignment, members, ratio, topics):
    key = (assignor, subscription, assignment, members, ratio, topics)
    args, kwargs = grid_case(*key)
    result = A.assign_arrays(assignor, *args, **kwargs)
    assigned = int((result.owners >= 0).sum()) + (int(result.withheld.sum()) if result.withheld is not None else 0)
    assert assigned == len(result.owners)  # every partition has an owner (or waits for one: cooperative)
    java = JAVA_MS.get(key)
    target = GRID_TARGETS.get(key)
    benchmark.extra_info.update(
        assignor_grid=True, assignor=assignor, subscription=subscription, assignment=assignment, members=members,
        ratio=ratio, topics=topics, partitions=len(result.owners),
        java_ms=java[0] if java else None, java_source=java[1] if java else None,
        target_s=target[0] if target else None, target_name=target[1] if target else None)
    timed(benchmark, lambda: A.assign_arrays(assignor, *args, **kwargs))


# ---------------------------------------------------------------------------------------------------------------
# kafka-python in the same run (simple calls on both sides)


class KafkaPythonCluster:
    def __init__(self, topics: dict[str, int]) -> None:
        self._topics = topics
        self._partitions = {t: set(range(n)) for t, n in topics.items()}

    def topics(self):
        return set(self._topics)

    def partitions_for_topic(self, topic):
        return self._partitions.get(topic)


class KafkaPythonMember:
    def __init__(self, member_id: str, metadata: Any) -> None:
        self.member_id = member_id
        self.group_instance_id = None
        self.metadata = metadata


def peer_group(members: int, topics: int, per_topic: int):
    names = {f"topic-{i:03d}": per_topic for i in range(topics)}
    subscribed = tuple(names)
    return names, [Member(f"consumer-{i:05d}", None, subscribed) for i in range(members)]


def kafka_python_members(ms: list[Member], previous: dict | None = None) -> list[KafkaPythonMember]:
    out = []
    for m in ms:
        user_data = b""
        if previous is not None and m.member_id in previous:
            user_data = StickyAssignorUserData(sorted(previous[m.member_id].items()), 1)
        out.append(KafkaPythonMember(m.member_id, KPSubscription(version=0, topics=list(m.topics),
                                                                   user_data=user_data)))
    return out


def from_kafka_python(result) -> dict:
    out = {}
    for mid, assignment in result.items():
        pairs = [(tp.topic, tp.partitions) if hasattr(tp, "topic") else tuple(tp)
                 for tp in assignment.assigned_partitions]
        out[mid] = {t: sorted(ps) for t, ps in pairs if ps}
    return out


PEER_CASES = [
    # (operation, assignor, members, topics, partitions per topic, event, kafka-python is slow, target speedup)
    ("range 1,000 × 10,000", "range", 1000, 100, 100, "full", False, None),
    ("round-robin 1,000 × 10,000", "roundrobin", 1000, 100, 100, "full", False, None),
    ("range 2,000 × 100,000", "range", 2000, 500, 200, "full", False, None),
    ("round-robin 2,000 × 100,000", "roundrobin", 2000, 500, 200, "full", False, None),
    ("sticky 100 × 1,000, full", "sticky", 100, 10, 100, "full", False, None),
    ("sticky 100 × 1,000, one member leaves", "sticky", 100, 10, 100, "leave", False, None),
    ("sticky 1,000 × 10,000, full", "sticky", 1000, 100, 100, "full", True, 200.0),
    ("sticky 1,000 × 10,000, one member leaves", "sticky", 1000, 100, 100, "leave", True, 200.0),
]


def peer_param(case, impl):
    marks = [pytest.mark.slow] if impl == "kafka-python" and case[6] else []
    return pytest.param(case, impl, id=f"{case[0]}-{impl}".replace(" ", ""), marks=marks)


@pytest.mark.parametrize(("case", "impl"), [peer_param(c, i) for c in PEER_CASES for i in ("kcoord", "kafka-python")])
def test_vs_kafka_python(benchmark, case, impl):
    op, assignor, n_members, n_topics, per_topic, event, _, target = case
    topics, ms = peer_group(n_members, n_topics, per_topic)
    previous = None
    if event == "leave":
        previous = A.sticky_assign(ms, topics)
        ms = [Member(m.member_id, None, m.topics, owned=previous[m.member_id], generation=1) for m in ms[1:]]
    if impl == "kcoord":
        fn = {"range": A.range_assign, "roundrobin": A.roundrobin_assign, "sticky": A.sticky_assign}[assignor]

        def run():
            return fn(ms, topics)
    else:
        cls = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
               "sticky": StickyPartitionAssignor}[assignor]
        cluster = KafkaPythonCluster(topics)
        kp_members = kafka_python_members(ms, previous)

        def run():
            return (cls() if assignor == "sticky" else cls).assign(cluster, kp_members)

    benchmark.extra_info.update(assignor_peer=op, impl=impl, target_speedup=target)
    if getattr(benchmark, "disabled", False) or impl == "kcoord" or not case[6]:
        result = timed(benchmark, run, budget=0.5, max_rounds=20)
    else:
        result = benchmark.pedantic(run, rounds=1, iterations=1)  # ~20 s a call
    got = result if impl == "kcoord" else from_kafka_python(result)
    counts = [sum(len(v) for v in d.values()) for d in got.values()]
    assert sum(counts) == n_topics * per_topic
    if assignor != "range":  # range balances each topic, not the total
        assert max(counts) - min(counts) <= 1
    if assignor != "sticky":
        assert got == {"range": A.range_assign, "roundrobin": A.roundrobin_assign}[assignor](ms, topics)


# ---------------------------------------------------------------------------------------------------------------
# Sticky with 1M partitions: 2,000 members, 500 topics × 2,000 partitions


MILLION_TOPICS = {f"topic-{i:03d}": 2000 for i in range(500)}


def million_members(shape: str) -> list[Member]:
    """Kafka's two 1M tests: every member on every topic ("uniform"), or the last on the first topic only."""
    names = tuple(MILLION_TOPICS)
    return [Member(f"consumer-{i:04d}", None, names if shape == "uniform" or i < 1999 else names[:1])
            for i in range(2000)]


def million_case(face: str, event: str, shape: str):
    if face == "simple":
        ms = million_members(shape)
        if event != "full":
            first = A.sticky_assign(ms, MILLION_TOPICS)
            # "rejoin": consumer 0 lost its partitions (Kafka's tests); "leave": consumer 0 left the group
            ms = [Member(m.member_id, None, m.topics, owned=first[m.member_id] if i else None, generation=1)
                  for i, m in enumerate(ms)]
            if event == "leave":
                ms = ms[1:]
        return lambda: A.sticky_assign(ms, MILLION_TOPICS)
    counts = np.full(500, 2000, dtype=np.int32)
    sets = np.zeros(2000, dtype=np.int32)
    if shape == "uniform":
        args = (counts, sets, np.array([0, 500]), np.arange(500, dtype=np.int32))
    else:
        sets[-1] = 1
        args = (counts, sets, np.array([0, 500, 501]), np.append(np.arange(500), 0).astype(np.int32))
    if event == "full":
        return lambda: A.assign_arrays("sticky", *args)
    first = A.assign_arrays("sticky", *args)
    sizes = np.diff(first.indptr)
    own = first.partitions[first.indptr[1]:]
    if event == "rejoin":
        sizes[0] = 0
        kwargs = dict(owned_indptr=np.concatenate(([0], np.cumsum(sizes))), owned_partitions=own,
                      generations=np.ones(2000, dtype=np.int32))
        return lambda: A.assign_arrays("sticky", *args, **kwargs)
    kwargs = dict(owned_indptr=np.concatenate(([0], np.cumsum(sizes[1:]))), owned_partitions=own,
                  generations=np.ones(1999, dtype=np.int32))
    leave_args = (counts, sets[1:], args[2], args[3])
    return lambda: A.assign_arrays("sticky", *leave_args, **kwargs)


@pytest.mark.parametrize("shape", ["uniform", "non-equal"])
@pytest.mark.parametrize("face", ["simple", "bulk"])
@pytest.mark.parametrize("event", ["full", "rejoin", "leave"])
def test_sticky_one_million_partitions(benchmark, face, event, shape):
    run = million_case(face, event, shape)
    subscriptions = "all members on all topics" if shape == "uniform" else "one member on one topic"
    benchmark.extra_info.update(assignor_target=f"sticky 1M partitions, {subscriptions}, {event} ({face} call)",
                                target_s=0.5)
    timed(benchmark, run, budget=2.0, max_rounds=5)


# ---------------------------------------------------------------------------------------------------------------
# The GIL is released inside kernels: two threads


def thread_case(kernel: str) -> Callable[[], Any]:
    """One kernel call on a prepared 1M-partition group (2,000 members, 500 topics × 2,000 partitions).

    Each thread writes into its own output array, allocated once: fresh memory page-faults, and page faults
    serialise threads on the process's memory map, which would hide what the kernels do.
    """
    counts, sets, indptr, flat = jmh_group("homogeneous", 2_000, 2_000, 500)
    prep = _assign.prepare(counts, sets, indptr, flat)
    outputs = threading.local()

    def out() -> np.ndarray:
        if not hasattr(outputs, "owner"):
            outputs.owner = np.full(prep.n_partitions, -1, dtype=np.int32)
        return outputs.owner

    if kernel == "range":
        return lambda: _assign.range_owners(prep, out=out())
    first = A.assign_arrays("sticky", counts, sets, indptr, flat)
    sizes = np.diff(first.indptr)
    sizes[0] = 0  # member 0 lost its partitions: claims to resolve, a quota to refill
    owned = (np.concatenate(([0], np.cumsum(sizes))), first.partitions[first.indptr[1]:],
             np.ones(2_000, dtype=np.int32))
    return lambda: _assign.sticky_owners(prep, *owned, mode="sticky", out=out())


def two_calls(call: Callable[[], Any], parallel: bool, repeat: int = 10) -> None:
    """Two workers of `repeat` kernel calls each, one after the other or in two threads."""
    def work():
        for _ in range(repeat):
            call()

    if not parallel:
        work()
        work()
        return
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.parametrize("kernel", ["range", "sticky"])
@pytest.mark.parametrize("mode", ["one thread", "two threads"])
def test_two_threads(benchmark, kernel, mode):
    call = thread_case(kernel)
    benchmark.extra_info.update(assignor_threads=mode, kernel=kernel)
    timed(benchmark, lambda: two_calls(call, mode == "two threads"), budget=3.0, max_rounds=20)


def python_progress(call: Callable[[], Any], calls: int = 20) -> float:
    """How fast a pure-Python loop runs while another thread makes kernel calls, relative to running alone.

    About 1.0: the kernel left the GIL free; about 0: it held the GIL (the loop could not run). Both runs use
    the same loop; alone, a timer thread (asleep until then) ends it.
    """
    def spin(stop: threading.Event) -> float:
        n = 0
        start = time.perf_counter()
        while not stop.is_set():
            n += 1
        return n / (time.perf_counter() - start)

    alone_stop = threading.Event()
    timer = threading.Timer(0.1, alone_stop.set)
    timer.start()
    alone = spin(alone_stop)
    timer.join()
    done = threading.Event()

    def work():
        for _ in range(calls):
            call()
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    beside = spin(done)
    worker.join()
    return beside / alone


@pytest.mark.parametrize("kernel", ["range", "sticky"])
def test_python_thread_beside_a_kernel(benchmark, kernel):
    call = thread_case(kernel)
    ratios: list[float] = []
    benchmark.pedantic(lambda: ratios.append(python_progress(call)), rounds=3, iterations=1)
    benchmark.extra_info.update(assignor_gil=kernel, python_progress=sorted(ratios)[len(ratios) // 2])
