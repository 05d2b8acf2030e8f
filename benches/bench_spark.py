"""Planning on Spark (local[2]): groups per second for kcoord.spark.plan, for the same plan made by a pure-Python
assignor inside a pandas UDF in the same run, and for a plain single-process loop over kcoord's assignors.

* Estate: G groups × M members (half static) × 10 topics each; every group subscribes to its own 10 topics (out of
  a catalogue of 1,000) with P / 10 partitions each. Inputs are Parquet files, read by every implementation.
* kcoord on Spark: ``plan(members, topics, "range")`` written to Spark's ``noop`` sink (every plan row is
  produced, nothing stored). Input validation is a separate case (it is part of every `plan` call; the timed
  planning case passes ``check=False`` so the two costs show apart).
* Peer: kafka-python 3.0.12's RangePartitionAssignor in ``groupBy("group_id").applyInPandas``, emitting the same
  plan rows (same schema, same noop sink). kafka-python groups static members with ``itertools.groupby`` on
  unsorted input, which drops members when static and dynamic members alternate; its input is sorted static
  first so that it plans every member, as Kafka does.
* Loop: one Python process reads the same Parquet with pyarrow and calls ``kcoord.assignors.range_assign`` group
  after group (Member records in, dicts out).
* Spark alone: kcoord's task input (the same shuffle, sort and Arrow batches) and as many plan rows out, but no
  assignor: what Spark costs around any planner, so peer / this bounds every planner's ratio.
* Spark cases are timed twice with the session's cache cleared before each, and the best is kept.
* kcoord over Spark's floor (the figure held): the plan and "Spark alone" timed in the same test, alternately (a
  floor run, then a plan run, three times; each after clearing the cache), best of three each. The issue's target
  is planning ≤ 1.25 × the floor at the 10,000-group estate; the bench fails above it when timing is on (with
  ``--benchmark-disable``, as in ``make test``, it only runs both once). The small estate's ratio is reported.
* Inside one task: the per-group work of each side without Spark around it (kcoord's task body on the Arrow
  batches a task receives; the peer's pandas UDF body on one pandas DataFrame per group), on 500 groups. Both
  sides also pay Spark's own costs (the shuffle, Arrow to and from the JVM for every input and plan row), which
  the end-to-end ratio includes and this one does not.
* One huge group: 10,000 members × 1,000,000 partitions (100 topics × 10,000), range split by topic into chunks
  of 100,000 partitions (10 tasks), into 2 chunks (one per core), and unsplit, next to the in-process simple
  call and bulk call. Timed from the Parquet input to the plan rows (validation excluded).

The full-scale cases (10,000 groups × 100 members × 1,000 partitions; the 1M-partition group) are marked slow and
run in `make bench`; the reduced ones run in CI with timing disabled. The summary table prints groups/s and
the ratios. Run: ``python -m pytest benches/bench_spark.py -m "slow or not slow" -s``.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

try:  # the spark extra; `make bench` installs it
    import pandas as pd
    import pyarrow.parquet as pq
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    from kcoord import spark as S
except ImportError as exc:
    if not os.environ.get("CIBUILDWHEEL"):  # `make test`/`make bench` install the extra: missing is a failure
        raise
    pytest.skip(f"the spark extra is not installed: {exc}", allow_module_level=True)

from kcoord import assignors as A

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KPSubscription

pytestmark = pytest.mark.spark

CATALOGUE_TOPICS = 1_000
TOPICS_PER_GROUP = 10
ESTATES = {  # name: (groups, members per group, partitions per group, slow)
    "10,000 groups × 100 members × 1,000 partitions": (10_000, 100, 1_000, True),
    "500 groups × 20 members × 100 partitions": (500, 20, 100, False),
}
HUGE = {  # name: (members, topics, partitions per topic, split_partitions, slow)
    "1 group × 10,000 members × 1,000,000 partitions": (10_000, 100, 10_000, 100_000, True),
    "1 group × 1,000 members × 10,000 partitions": (1_000, 10, 1_000, 2_000, False),
}


@pytest.fixture(autouse=True)
def collect_spark_sockets() -> Iterator[None]:
    # PySpark leaves the driver's result sockets to the garbage collector (hundreds in a bench); collected here,
    # their ResourceWarnings stay out of whichever later test the collector happens to run in.
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = S.local_session("local[2]", "kcoord-bench", {"spark.sql.shuffle.partitions": "8",
                                                         "spark.driver.memory": "6g"})
    yield session
    session.stop()


def estate_frames(spark: SparkSession, groups: int, members: int, partitions: int) -> tuple[DataFrame, DataFrame]:
    per_topic = partitions // TOPICS_PER_GROUP
    ids = spark.range(groups * members)
    g = (F.col("id") / members).cast("long")
    i = F.col("id") % members
    m = ids.select(
        F.format_string("group-%05d", g).alias("group_id"),
        F.concat(F.lit("consumer-"), i.cast("string"), F.lit("-"), F.substring(F.sha2(F.col("id").cast("string"), 256),
                                                                                1, 12)).alias("member_id"),
        F.when(i % 2 == 0, F.format_string("pod-%03d", i)).alias("instance_id"),
        F.transform(F.sequence(F.lit(0), F.lit(TOPICS_PER_GROUP - 1)),
                    lambda k: F.format_string("topic-%04d", (g * 7 + k * 101) % CATALOGUE_TOPICS)).alias("topics"),
    )
    t = spark.range(CATALOGUE_TOPICS).select(F.format_string("topic-%04d", F.col("id")).alias("topic"),
                                             F.lit(per_topic).cast("int").alias("partitions"))
    return m, t


def huge_frames(spark: SparkSession, members: int, topics: int, per_topic: int) -> tuple[DataFrame, DataFrame]:
    names = [f"topic-{k:03d}" for k in range(topics)]
    m = spark.range(members).select(
        F.lit("huge").alias("group_id"), F.format_string("consumer-%05d", F.col("id")).alias("member_id"),
        F.when(F.col("id") % 2 == 0, F.format_string("pod-%05d", F.col("id"))).alias("instance_id"),
        F.array(*[F.lit(n) for n in names]).alias("topics"))
    t = spark.createDataFrame([(n, per_topic) for n in names], "topic string, partitions int")
    return m, t


@pytest.fixture(scope="session")
def estates(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """Parquet inputs per estate, written once (only for the estates the selected benches use)."""

    class Lazy(dict):
        def __missing__(self, name: str) -> tuple[str, str]:
            root = tmp_path_factory.mktemp("estate")
            m, t = estate_frames(spark, *ESTATES[name][:3]) if name in ESTATES else huge_frames(spark, *HUGE[name][:3])
            m.write.parquet(str(root / "members"))
            t.write.parquet(str(root / "topics"))
            self[name] = (str(root / "members"), str(root / "topics"))
            return self[name]

    return Lazy()


def noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


@pytest.fixture(scope="session")
def warm(spark: SparkSession, estates: Any) -> None:
    """One small plan first, so no timed case pays for the JVM's and the Python workers' first run."""
    m, t = (spark.read.parquet(p) for p in estates["500 groups × 20 members × 100 partitions"])
    noop(S.plan(m, t, "range"))


def record(benchmark: Any, fn: Any, spark: SparkSession | None = None, **info: Any) -> Any:
    """One timed call; on Spark, the best of two with the session's cache cleared before each (the first heavy job
    of a session also pays the JVM's warm-up, which would land on whichever case runs first)."""
    benchmark.extra_info.update(spark_planning=True, **info)
    if spark is None:
        return benchmark.pedantic(fn, rounds=1, iterations=1)
    return benchmark.pedantic(fn, setup=spark.catalog.clearCache, rounds=2, iterations=1)


# ---------------------------------------------------------------------------------------------------------------
# The estate: kcoord on Spark, kafka-python in a pandas UDF, a single-process loop


def kafka_python_range_udf(catalogue: dict[str, int]) -> Any:
    cluster_partitions = {t: set(range(n)) for t, n in catalogue.items()}

    class Cluster:
        def partitions_for_topic(self, topic: str) -> set[int] | None:
            return cluster_partitions.get(topic)

    class KpMember:
        __slots__ = ("group_instance_id", "member_id", "metadata")

        def __init__(self, member_id: str, instance_id: str | None, topics: list[str]) -> None:
            self.member_id = member_id
            self.group_instance_id = instance_id
            self.metadata = KPSubscription(version=0, topics=topics, user_data=b"")

    cluster = Cluster()

    def plan_group(pdf: pd.DataFrame) -> pd.DataFrame:
        gid = pdf["group_id"].iat[0]
        static = pdf["instance_id"].notna().to_numpy()
        order = np.argsort(~static, kind="stable")  # static members first (see the module docstring)
        mids, iids, subs = pdf["member_id"].to_numpy()[order], pdf["instance_id"].to_numpy()[order], \
            pdf["topics"].to_numpy()[order]
        members = [KpMember(mids[k], iids[k], list(subs[k])) for k in range(len(mids))]
        result = RangePartitionAssignor.assign(cluster, members)
        iid_of = dict(zip(mids, iids, strict=True))
        out_m, out_i, out_t, out_p = [], [], [], []
        for mid, a in result.items():
            n = 0
            for topic, parts in a.assigned_partitions:
                for p in parts:
                    out_m.append(mid)
                    out_i.append(iid_of[mid])
                    out_t.append(topic)
                    out_p.append(p)
                    n += 1
            if n == 0:
                out_m.append(mid)
                out_i.append(iid_of[mid])
                out_t.append(None)
                out_p.append(None)
        return pd.DataFrame({"group_id": gid, "member_id": out_m, "instance_id": out_i, "topic": out_t,
                             "partition": pd.array(out_p, dtype="Int32")})

    return plan_group


def kcoord_loop(members_path: str, topics_path: str) -> int:
    """A single process: read the Parquet and call range_assign group after group; returns the groups planned."""
    topics = pq.read_table(topics_path)
    counts = dict(zip(topics.column("topic").to_pylist(), topics.column("partitions").to_pylist(), strict=True))
    tbl = pq.read_table(members_path).sort_by("group_id")
    gids = tbl.column("group_id").to_pylist()
    mids = tbl.column("member_id").to_pylist()
    iids = tbl.column("instance_id").to_pylist()
    subs = tbl.column("topics").to_pylist()
    n_groups = 0
    start = 0
    for end in range(1, len(gids) + 1):
        if end < len(gids) and gids[end] == gids[start]:
            continue
        members = [A.Member(mids[k], iids[k], tuple(subs[k])) for k in range(start, end)]
        subscribed = {t: counts[t] for k in range(start, end) for t in subs[k]}
        A.range_assign(members, subscribed)
        n_groups += 1
        start = end
    return n_groups


def spark_floor(members: DataFrame, topics: DataFrame, rows_per_member: int) -> DataFrame:
    """What Spark costs around any planner: kcoord's task input (the same shuffle and sort, the same Arrow batches
    into the Python worker) and as many plan rows out, but no assignor. Each member row is repeated
    `rows_per_member` times with its own group, member and instance id (one topic name, partitions counting up):
    the least a task must do to hand Spark the plan's rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def rows_out(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            kind = batch.column(batch.schema.get_field_index("_kind")).to_numpy(zero_copy_only=False)
            idx = np.repeat(np.flatnonzero(kind == S.KIND_MEMBER), rows_per_member)
            if idx.size == 0:
                continue
            take = pa.array(idx)
            cols = [pc.take(batch.column(batch.schema.get_field_index(c)), take)
                    for c in ("group_id", "member_id", "instance_id")]
            cols += [pc.take(pa.array(["topic-0000"]), pa.array(np.zeros(idx.size, dtype=np.int32))),
                     pa.array(np.arange(idx.size, dtype=np.int32) % 1_000)]
            out = pa.RecordBatch.from_arrays(cols, names=["group_id", "member_id", "instance_id", "topic", "partition"])
            for off in range(0, out.num_rows, S.OUT_BATCH_ROWS):
                yield out.slice(off, S.OUT_BATCH_ROWS)

    work = S._work(*S._prepare(members, topics, "range", None, check=False), None)
    return work.mapInArrow(rows_out, S.PLAN_SCHEMA)


def estate_param(name: str) -> Any:
    return pytest.param(name, id=name.split(" ×")[0].replace(",", "").replace(" ", "-"),
                        marks=[pytest.mark.slow] if ESTATES[name][3] else [])


PLAN_OVER_FLOOR = 1.25  # the figure to hold: planning adds at most 25% to Spark's floor
# Held at the README's estate. On the small one (a one-second job) what a job costs once, whatever its size, weighs
# as much as the per-group work and moves the ratio from run to run (1.12 and 1.30 measured): it is only reported.
HELD_AT = "10,000 groups × 100 members × 1,000 partitions"
FLOOR_ROUNDS = 3


IMPLS = ("kcoord on Spark", "kcoord validation on Spark", "kafka-python range in a pandas UDF",
         "kcoord single-process loop", "Spark alone, no assignor")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", [estate_param(n) for n in ESTATES])
def test_plan_estate(benchmark, spark, estates, warm, name, impl):
    groups, _, partitions, _ = ESTATES[name]
    mpath, tpath = estates[name]
    m, t = spark.read.parquet(mpath), spark.read.parquet(tpath)
    info = {"case": name, "impl": impl, "groups": groups}
    if impl == "kcoord on Spark":
        record(benchmark, lambda: noop(S.plan(m, t, "range", check=False)), spark, **info)
    elif impl == "kcoord validation on Spark":
        record(benchmark, lambda: S.validate(m, t, "range"), spark, **info)
    elif impl == "kafka-python range in a pandas UDF":
        catalogue = dict(spark.read.parquet(tpath).select("topic", "partitions").toLocalIterator())
        udf = kafka_python_range_udf(catalogue)
        record(benchmark, lambda: noop(m.groupBy("group_id").applyInPandas(udf, S.PLAN_SCHEMA)), spark, **info)
    elif impl == "Spark alone, no assignor":
        per_member = partitions // ESTATES[name][1]
        record(benchmark, lambda: noop(spark_floor(m, t, per_member)), spark, **info)
    else:
        assert record(benchmark, lambda: kcoord_loop(mpath, tpath), **info) == groups
    if not ESTATES[name][3] and impl == "kafka-python range in a pandas UDF":
        # same run, same plan: the peer's rows are kcoord's rows (small estate only; it is collected)
        catalogue = dict(spark.read.parquet(tpath).select("topic", "partitions").toLocalIterator())
        peer = m.groupBy("group_id").applyInPandas(kafka_python_range_udf(catalogue), S.PLAN_SCHEMA)
        ours = S.plan(m, t, "range")
        assert peer.count() == ours.count() >= groups * partitions  # and a row per idle member
        assert peer.exceptAll(ours).count() == 0


@pytest.mark.parametrize("name", [estate_param(n) for n in ESTATES])
def test_plan_over_spark_floor(benchmark, spark, estates, warm, name):
    """kcoord's plan against Spark alone (the same job shape, no assignor), in the same run: the benchmark's
    timing is the plan's; the floor is timed in each round's setup, right before it. Fails when the best plan
    takes more than PLAN_OVER_FLOOR × the best floor."""
    groups, members, partitions, _ = ESTATES[name]
    mpath, tpath = estates[name]
    m, t = spark.read.parquet(mpath), spark.read.parquet(tpath)
    times: dict[str, list[float]] = {"floor": [], "plan": []}

    def timed(what: str, make: Any) -> None:  # the driver's part (S.plan's own jobs) included
        start = time.perf_counter()
        noop(make())
        times[what].append(time.perf_counter() - start)

    def floor_first() -> None:  # untimed by the benchmark: the round's floor run
        spark.catalog.clearCache()
        timed("floor", lambda: spark_floor(m, t, partitions // members))
        spark.catalog.clearCache()

    # not in the summary table of benches/conftest.py (spark_planning): the figure is the ratio printed below
    benchmark.extra_info.update(case=name, impl="kcoord on Spark, against Spark alone", groups=groups)
    rounds = FLOOR_ROUNDS if not benchmark.disabled else 1
    benchmark.pedantic(lambda: timed("plan", lambda: S.plan(m, t, "range", check=False)), setup=floor_first,
                       rounds=rounds, iterations=1)
    floor, plan = min(times["floor"]), min(times["plan"])
    benchmark.extra_info.update(floor_s=floor, plan_s=plan, plan_over_floor=plan / floor,
                                floor_runs=times["floor"], plan_runs=times["plan"])
    print(f"\n{name}: floor {floor:.2f} s, plan {plan:.2f} s (best of {rounds}): plan / floor = {plan / floor:.2f} "
          f"(target <= {PLAN_OVER_FLOOR})")
    if not benchmark.disabled and name == HELD_AT:
        assert plan <= PLAN_OVER_FLOOR * floor, (
            f"planning takes {plan:.2f} s against Spark's floor of {floor:.2f} s: {plan / floor:.2f}x, over the "
            f"{PLAN_OVER_FLOOR}x target (floor runs {times['floor']}, plan runs {times['plan']})")


@pytest.mark.parametrize("impl", ("kcoord", "kafka-python"))
@pytest.mark.parametrize("name", [estate_param(n) for n in ESTATES])
def test_work_inside_one_task(benchmark, spark, estates, warm, name, impl):
    """The per-group work of each side without Spark around it, on 500 groups of the estate: kcoord's task body
    (the Arrow batches a task receives, in; plan batches out) and the peer's pandas UDF body (one pandas
    DataFrame per group in, one out)."""
    mpath, tpath = estates[name]
    m = spark.read.parquet(mpath)
    m = m.filter(F.col("group_id").isin([r[0] for r in m.select("group_id").distinct().limit(500).collect()]))
    t = spark.read.parquet(tpath)
    info = {"case": name, "impl": impl, "groups": 500, "in_task": True}
    if impl == "kcoord":
        batches = S._work(*S._prepare(m, t, "range", None, check=False), 1).toArrow().to_batches(max_chunksize=10_000)
        rows = record(benchmark, lambda: sum(b.num_rows for b in S._plan_batches(iter(batches), "range")), **info)
    else:
        udf = kafka_python_range_udf(dict(t.select("topic", "partitions").toLocalIterator()))
        groups = [g for _, g in m.toPandas().groupby("group_id")]
        rows = record(benchmark, lambda: sum(len(udf(g)) for g in groups), **info)
    assert rows >= 500 * ESTATES[name][2]


# ---------------------------------------------------------------------------------------------------------------
# One huge group, range split by topic


def huge_param(name: str) -> Any:
    return pytest.param(name, id=name.split(" × ")[1].replace(",", "").replace(" ", "-"),
                        marks=[pytest.mark.slow] if HUGE[name][4] else [])


@pytest.mark.parametrize("impl", ("Spark, split by topic", "Spark, split in 2 chunks", "Spark, unsplit",
                                  "in-process range_assign", "in-process assign_arrays"))
@pytest.mark.parametrize("name", [huge_param(n) for n in HUGE])
def test_plan_one_huge_group(benchmark, spark, estates, warm, name, impl):
    members, topics, per_topic, split, _ = HUGE[name]
    mpath, tpath = estates[name]
    info = {"case": name, "impl": impl, "groups": 1, "huge": True}
    if impl.startswith("Spark"):
        m, t = spark.read.parquet(mpath), spark.read.parquet(tpath)
        total = topics * per_topic
        split_at = {"Spark, split by topic": split, "Spark, split in 2 chunks": total // 2}.get(impl)
        record(benchmark, lambda: noop(S.plan(m, t, "range", split_partitions=split_at, check=False)), spark, **info)
        if split_at is not None:  # it was split: one task per chunk
            chunks = S._prepare(m, t, "range", split_at, check=False)[4]
            assert max(c[3] for c in chunks) == -(-total // split_at)
    else:
        tbl = pq.read_table(mpath)
        counts = {f"topic-{k:03d}": per_topic for k in range(topics)}
        if impl == "in-process range_assign":
            ms = [A.Member(mid, iid, tuple(ts)) for mid, iid, ts in zip(
                tbl.column("member_id").to_pylist(), tbl.column("instance_id").to_pylist(),
                tbl.column("topics").to_pylist(), strict=True)]
            result = record(benchmark, lambda: A.range_assign(ms, counts), **info)
            assert sum(len(ps) for d in result.values() for ps in d.values()) == topics * per_topic
        else:
            order = A.kafka_order(tbl.column("member_id").to_pylist(), tbl.column("instance_id").to_pylist())
            sets = np.zeros(members, dtype=np.int32)
            result = record(benchmark, lambda: A.assign_arrays("range", [per_topic] * topics, sets, [0, topics],
                                                               np.arange(topics, dtype=np.int32)), **info)
            assert order.shape[0] == members and (result.owners >= 0).all()
