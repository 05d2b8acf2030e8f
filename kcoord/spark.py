"""Assignment planning on Spark: kcoord's compiled assignors applied to many groups at once, inside Spark tasks.

Needs the ``spark`` extra (``pip install 'kcoord[spark]'``: PySpark 4, pyarrow, pandas) and Java 17 or 21.

Schemas
-------
``members_df``, one row per group member (optional columns may be left out):

==============  ===========================================  =====================================================
group_id        string, not null                              the consumer group
member_id       string, not null                              unique within the group
instance_id     string (optional)                             ``group.instance.id``: set for static members (KIP-345)
topics          array<string>                                 the subscription (null: subscribes to nothing)
rack            string (optional)                             the consumer's rack (``client.rack``); "" is no rack
owned           array<struct<topic: string, partition: int>>  what the member owns now (optional): sticky and
                (optional)                                    cooperative-sticky keep it where balance allows;
                                                              uniform reads it as the current target assignment
generation      int (optional)                                the generation ``owned`` dates from (sticky,
                                                              cooperative-sticky; null: -1)
==============  ===========================================  =====================================================

``topics_df``, one row per topic of the cluster:

==============  ===========================================  =====================================================
topic           string, not null                              the topic name, unique
partitions      int, not null, >= 0                           its partition count
racks           array<array<string>> (optional)               the racks of each partition's replicas (KIP-881),
                                                              one entry per partition; null: unknown
==============  ===========================================  =====================================================

A plan (what `plan` returns, and what `diff` reads), one row per assigned partition:

==============  =======  ==================================================================================
group_id        string
member_id       string
instance_id     string   null for dynamic members
topic           string   null (with partition) for a member that gets no partition, so a plan lists every member
partition       int
==============  =======  ==================================================================================

How a plan runs. Each group is planned by the compiled assignor (`kcoord.assignors.assign_arrays`) inside a Spark
task. A group's topic rows, its distinct subscriptions (once each) and its member rows (with a hash naming their
subscription) are shuffled together by group, sorted, and handed to the task as Arrow record batches
(``mapInArrow``); the task interns names to integers with Arrow and numpy over the whole batch, sorts members
into Kafka's order with Arrow, calls the kernel once per group, and writes the plan back as Arrow. Nothing runs
per row in Python. A group's result is the in-process result for the same members and the topics they subscribe
to: `plan(...)` equals ``range_assign`` (``roundrobin_assign``, ``sticky_assign``, ...) group by group. Range
assigns every topic on its own, so a group with more than ``split_partitions`` partitions is split into chunks
of whole topics planned by separate tasks (every chunk sees all the group's members); the driver picks those
groups before the plan runs. A group with racks on both sides is not split: KIP-881's rack pass couples topics.
Cooperative-sticky withholds partitions whose owner must revoke them first (KIP-429): they are missing from the
plan, as they are from the in-process result.

Input is validated on the driver, with Spark SQL, before any task runs; bad input raises `PlanError` naming the
group and the row (a member subscribed to an unknown topic, a negative partition count, a duplicate member or
instance id, a null group id, ...).

Any SparkSession will do, `local_session`'s or one the caller built for a cluster. The tasks run in the executors'
Python workers, which need kcoord (with its own dependencies) and pyarrow installed on the nodes or shipped
to them (e.g. a packed venv through ``spark.archives``; the README shows how); PySpark itself they get
from Spark. What the driver sends them is a reference to this module's task function and the assignor's name:
nothing of the driver's interpreter, paths or environment.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import assignors as A

__all__ = [
    "ASSIGNORS",
    "DIFF_COLUMNS",
    "PLAN_SCHEMA",
    "PlanError",
    "current_plan",
    "diff",
    "grow_partitions",
    "local_session",
    "plan",
    "rack_loss",
    "rolling_bounce",
    "scale_in",
    "scale_out",
    "validate",
    "with_owned",
]

ASSIGNORS = A.BULK_ASSIGNORS
PLAN_SCHEMA = "group_id string, member_id string, instance_id string, topic string, partition int"
DEFAULT_SPLIT_PARTITIONS = 100_000
OUT_BATCH_ROWS = 131_072

OWNED_TYPE = T.ArrayType(T.StructType([T.StructField("topic", T.StringType()),
                                       T.StructField("partition", T.IntegerType())]))
RACKS_TYPE = T.ArrayType(T.ArrayType(T.StringType()))
MEMBER_COLUMNS: dict[str, tuple[T.DataType, bool]] = {  # name: (type, required)
    "group_id": (T.StringType(), True),
    "member_id": (T.StringType(), True),
    "instance_id": (T.StringType(), False),
    "topics": (T.ArrayType(T.StringType()), True),
    "rack": (T.StringType(), False),
    "owned": (OWNED_TYPE, False),
    "generation": (T.IntegerType(), False),
}
TOPIC_COLUMNS: dict[str, tuple[T.DataType, bool]] = {
    "topic": (T.StringType(), True),
    "partitions": (T.IntegerType(), True),
    "racks": (RACKS_TYPE, False),
}
KIND_TOPIC, KIND_SUBSCRIPTION, KIND_MEMBER = 0, 1, 2  # the order of a group's rows in a task


def local_session(master: str = "local[*]", app: str = "kcoord", conf: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark session for planning: Python workers run this interpreter (unless PYSPARK_PYTHON or the setting
    ``spark.pyspark.python`` says otherwise), Spark's UI and console progress bar are off, and its log says only
    errors.

    ``spark.pyspark.python`` in `conf` (e.g. ``./environment/bin/python`` with a venv shipped in
    ``spark.archives``) names the executors' Python: PySpark reads the workers' Python from the PYSPARK_PYTHON
    environment variable of the driver's process when the session starts (the setting alone reaches only a
    ``spark-submit``), so it is put there."""
    worker_python = (conf or {}).get("spark.pyspark.python")
    if worker_python:
        os.environ["PYSPARK_PYTHON"] = worker_python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class PlanError(ValueError):
    """Input a plan cannot be made from; the message names the group and the offending row."""


# ---------------------------------------------------------------------------------------------------------------
# Input: schemas and validation on the driver


def _conform(df: DataFrame, columns: Mapping[str, tuple[T.DataType, bool]], what: str) -> DataFrame:
    """df with exactly `columns`, in order and of the documented types (missing optional columns as nulls)."""
    if not isinstance(df, DataFrame):
        raise PlanError(f"{what} must be a Spark DataFrame, not {type(df).__name__}")
    have = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for name, (dtype, required) in columns.items():
        if name not in have:
            if required:
                raise PlanError(f"{what} has no column {name!r} (columns: {', '.join(have) or 'none'})")
            cols.append(F.lit(None).cast(dtype).alias(name))
            continue
        got = have[name]
        if got != dtype and not _castable(got, dtype):
            raise PlanError(f"{what}.{name} is {got.simpleString()}; expected {dtype.simpleString()}")
        cols.append(F.col(name).cast(dtype).alias(name) if got != dtype else F.col(name))
    return df.select(*cols)


def _castable(got: T.DataType, want: T.DataType) -> bool:
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if isinstance(want, T.IntegerType):
        return isinstance(got, ints)
    if isinstance(got, T.NullType):
        return True
    if isinstance(want, T.ArrayType) and isinstance(got, T.ArrayType):
        return _castable(got.elementType, want.elementType) or got.elementType == want.elementType
    if isinstance(want, T.StructType) and isinstance(got, T.StructType):
        names = [f.name for f in got.fields]
        return names == [f.name for f in want.fields] and all(
            g.dataType == w.dataType or _castable(g.dataType, w.dataType) for g, w in zip(got.fields, want.fields))
    return False


# Problems are found as rows of one DataFrame (one Spark job), then worded here. Lower `rank` is reported first.
_PROBLEM_SCHEMA = ("rank int, group_id string, member_id string, instance_id string, topic string, "
                   "n long, other string")


def _problem(df: DataFrame, rank: int, *, group_id: Column | None = None, member_id: Column | None = None,
             instance_id: Column | None = None, topic: Column | None = None, n: Column | None = None,
             other: Column | None = None) -> DataFrame:
    def col(c: Column | None, t: str) -> Column:
        return c.cast(t) if c is not None else F.lit(None).cast(t)
    return df.select(F.lit(rank).alias("rank"), col(group_id, "string").alias("group_id"),
                     col(member_id, "string").alias("member_id"), col(instance_id, "string").alias("instance_id"),
                     col(topic, "string").alias("topic"), col(n, "long").alias("n"), col(other, "string").alias("other"))


def _word(rank: int, r: Any) -> str:
    g, mid, iid, topic, n, other = r["group_id"], r["member_id"], r["instance_id"], r["topic"], r["n"], r["other"]
    messages = {
        0: lambda: f"members_df: a row has a null group_id (member_id={mid!r}, instance_id={iid!r})",
        1: lambda: f"group {g!r}: a member row has a null member_id (instance_id={iid!r})",
        2: lambda: f"group {g!r}: member id {mid!r} appears in {n} member rows (member ids must be unique in a "
                   f"group)",
        3: lambda: f"group {g!r}: instance id {iid!r} is used by members {mid!r} and {other!r}",
        4: lambda: f"topics_df: a row has a null topic name (partitions={n})",
        5: lambda: f"topics_df: topic {topic!r} appears in {n} rows",
        6: lambda: f"topics_df: topic {topic!r} has a null partition count" + _subscriber(g, mid),
        7: lambda: f"topics_df: topic {topic!r} has a negative partition count ({n})" + _subscriber(g, mid),
        8: lambda: f"topics_df: topic {topic!r} has racks for {other} partitions but {n} partitions"
                   + _subscriber(g, mid),
        9: lambda: (f"group {g!r}: member {mid!r} subscribes to a null topic name" if topic is None else
                    f"group {g!r}: member {mid!r} subscribes to unknown topic {topic!r} (not in topics_df)"),
        10: lambda: f"group {g!r}: partition {topic}-{n} is in the current (owned) assignment of members {mid!r} "
                    f"and {other!r} (uniform: a partition has one current owner)",
    }
    return messages[rank]()


def _subscriber(group_id: str | None, member_id: str | None) -> str:
    if group_id is None:
        return ""
    return f"; subscribed to by group {group_id!r} (member {member_id!r})"


def validate(members_df: DataFrame, topics_df: DataFrame, assignor: str = "range") -> tuple[DataFrame, DataFrame]:
    """Checks members and topics against the schemas and each other; returns them conformed to the schemas.

    Raises `PlanError` for the first problem found (in the order of the checks below), naming the group and row:
    a null group or member id, a duplicate member id or instance id in a group, a null, duplicate or negative
    topic row, racks that do not match the partition count, a subscription to an unknown topic, and (uniform)
    a partition in two members' current assignment. Runs as one Spark job on the driver (and a second, small one
    to name a member subscribed to a bad topic).
    """
    m, t = _inputs(members_df, topics_df, assignor)
    _check(m, t, assignor, None)
    return m, t


def _inputs(members_df: DataFrame, topics_df: DataFrame, assignor: str) -> tuple[DataFrame, DataFrame]:
    if assignor not in ASSIGNORS:
        raise PlanError(f"unknown assignor {assignor!r}; expected one of {', '.join(ASSIGNORS)}")
    return _conform(members_df, MEMBER_COLUMNS, "members_df"), _conform(topics_df, TOPIC_COLUMNS, "topics_df")


def _check(m: DataFrame, t: DataFrame, assignor: str, subscriptions: DataFrame | None) -> None:
    """validate's checks; `subscriptions` (group_id, topics), when given, are the groups' distinct ones."""
    gid, mid, iid = F.col("group_id"), F.col("member_id"), F.col("instance_id")
    ok = m.filter(gid.isNotNull() & mid.isNotNull())
    # member ids and instance ids, one shuffle: (group, 0, member id) and (group, 1, instance id) keys
    ids = (ok.select("group_id", "member_id", F.explode(F.array(
        F.struct(F.lit(0).alias("k"), mid.alias("v")),
        F.struct(F.lit(1).alias("k"), iid.alias("v")))).alias("key"))
           .filter(F.col("key.v").isNotNull())
           .groupBy("group_id", "key").agg(F.count("*").alias("n"), F.min("member_id").alias("a"),
                                           F.max("member_id").alias("b")))
    # distinct subscriptions per group first: members of a group mostly share one
    if subscriptions is None:
        subscriptions = ok.select("group_id", "topics").distinct()
    subs = subscriptions.select("group_id", F.explode("topics").alias("topic")).distinct()
    checks = [
        _problem(m.filter(gid.isNull()), 0, member_id=mid, instance_id=iid),
        _problem(m.filter(gid.isNotNull() & mid.isNull()), 1, group_id=gid, instance_id=iid),
        _problem(ids.filter((F.col("key.k") == 0) & (F.col("n") > 1)), 2, group_id=gid,
                 member_id=F.col("key.v"), n=F.col("n")),
        _problem(ids.filter((F.col("key.k") == 1) & (F.col("a") != F.col("b"))), 3, group_id=gid,
                 instance_id=F.col("key.v"), member_id=F.col("a"), other=F.col("b")),
        _problem(t.filter(F.col("topic").isNull()), 4, n=F.col("partitions")),
        _problem(t.filter(F.col("topic").isNotNull()).groupBy("topic").count().filter(F.col("count") > 1), 5,
                 topic=F.col("topic"), n=F.col("count")),
        _problem(t.filter(F.col("topic").isNotNull() & F.col("partitions").isNull()), 6, topic=F.col("topic")),
        _problem(t.filter(F.col("partitions") < 0), 7, topic=F.col("topic"), n=F.col("partitions")),
        _problem(t.filter((F.col("partitions") >= 0) & F.col("racks").isNotNull()
                          & (F.size("racks") != F.col("partitions"))), 8,
                 topic=F.col("topic"), n=F.col("partitions"), other=F.size("racks")),
        _problem(subs.join(t.filter(F.col("topic").isNotNull()).select("topic"), "topic", "left_anti"), 9,
                 group_id=gid, topic=F.col("topic")),
    ]
    if assignor == "uniform":
        claims = (ok.select("group_id", "member_id", F.explode("owned").alias("c"))
                  .groupBy("group_id", F.col("c.topic").alias("topic"), F.col("c.partition").alias("partition"))
                  .agg(F.min("member_id").alias("a"), F.max("member_id").alias("b"))
                  .filter(F.col("a") != F.col("b")))
        checks.append(_problem(claims, 10, group_id=gid, topic=F.col("topic"), n=F.col("partition"),
                               member_id=F.col("a"), other=F.col("b")))
    problems = checks[0]
    for c in checks[1:]:
        problems = problems.unionByName(c)
    found = problems.limit(20).collect()
    if found:
        found.sort(key=lambda r: (r["rank"], str(r["group_id"]), str(r["member_id"]), str(r["topic"])))
        first = found[0].asDict()
        if first["rank"] in (6, 7, 8, 9):  # name a member subscribed to the topic (a second, small job)
            has = (F.exists("topics", lambda x: x.isNull()) if first["topic"] is None
                   else F.array_contains("topics", first["topic"]))
            who = m.filter(gid.isNotNull() & mid.isNotNull() & has)
            if first["group_id"] is not None:
                who = who.filter(gid == first["group_id"])
            hit = who.select("group_id", "member_id").orderBy("group_id", "member_id").limit(1).collect()
            if hit:
                first["group_id"], first["member_id"] = hit[0]["group_id"], hit[0]["member_id"]
        msg = _word(first["rank"], first)
        if len(found) > 1:
            more = len(found) - 1
            msg += f" (and {more}{'+' if len(found) == 20 else ''} more problem{'s' if more > 1 else ''})"
        raise PlanError(msg)


# ---------------------------------------------------------------------------------------------------------------
# Inside a task: Arrow batches of (group topics, group members) rows in, plan rows out


def _np(arr: pa.Array | pa.ChunkedArray, fill: int | None = None) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if fill is not None and arr.null_count:
        arr = pc.fill_null(arr, fill)
    return arr.to_numpy(zero_copy_only=False)


def _java_rank(seg: np.ndarray, names: pa.Array, dynamic: np.ndarray | None = None) -> np.ndarray:
    """The permutation sorting rows by (segment, [dynamic], name), names compared as Java compares strings.

    For ASCII names Arrow's byte order is Java's order, and Arrow sorts; otherwise the names go through
    kcoord.assignors' Java sort keys (UTF-16 code units)."""
    n = len(names)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if pc.all(pc.string_is_ascii(names)).as_py() is not False:
        cols = {"s": pa.array(seg)}
        keys = [("s", "ascending")]
        if dynamic is not None:
            cols["d"] = pa.array(dynamic)
            keys.append(("d", "ascending"))
        cols["n"] = names
        keys.append(("n", "ascending"))
        return _np(pc.sort_indices(pa.table(cols), sort_keys=keys)).astype(np.int64)
    keys = A._java_keys(names.to_pylist())
    dyn = dynamic.tolist() if dynamic is not None else [False] * n
    segs = seg.tolist()
    return np.asarray(sorted(range(n), key=lambda i: (segs[i], dyn[i], keys[i])), dtype=np.int64)


def _lookup(table_keys: np.ndarray, table_values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """table_values[j] where table_keys[j] == key (table_keys sorted ascending), -1 where absent."""
    if table_keys.size == 0 or keys.size == 0:
        return np.full(keys.shape[0], -1, dtype=np.int64)
    pos = np.searchsorted(table_keys, keys)
    pos_c = np.minimum(pos, table_keys.shape[0] - 1)
    found = table_keys[pos_c] == keys
    return np.where(found, table_values[pos_c], -1)


def _rack_ids(values: pa.Array, dictionary: pa.Array) -> np.ndarray:
    """Rack ids (indexes into dictionary), -1 for a null or empty rack."""
    ids = _np(pc.index_in(values, value_set=dictionary), fill=-1).astype(np.int64)
    empty = _np(pc.fill_null(pc.equal(values, ""), True)).astype(bool)
    ids[empty] = -1
    return ids


class _Batch:
    """One sorted Arrow table of complete (group, chunk) segments, interned for the kernels."""

    def __init__(self, tbl: pa.Table, assignor: str) -> None:
        self.tbl = tbl
        self.assignor = assignor
        n = tbl.num_rows
        gid = tbl.column("group_id")
        chunk = _np(tbl.column("_chunk"), fill=0)
        new = np.zeros(n, dtype=bool)
        new[0] = True
        if n > 1:
            new[1:] = _np(pc.fill_null(pc.not_equal(gid.slice(1), gid.slice(0, n - 1)), True)).astype(bool)
            new[1:] |= chunk[1:] != chunk[:-1]
        seg = np.cumsum(new) - 1
        self.n_segs = int(seg[-1]) + 1
        self.seg_row = np.flatnonzero(new)  # first row of each segment
        self.nchunks = _np(tbl.column("_nchunks"), fill=1)[self.seg_row]
        self.chunk = chunk[self.seg_row]
        kind = _np(tbl.column("_kind"))
        self._topics(np.flatnonzero(kind == KIND_TOPIC), seg)
        self._subscriptions(np.flatnonzero(kind == KIND_SUBSCRIPTION), seg)
        self._members(np.flatnonzero(kind == KIND_MEMBER), seg)

    def _topics(self, tix: np.ndarray, seg: np.ndarray) -> None:
        tbl = self.tbl
        names = tbl.column("topic").take(pa.array(tix)).combine_chunks() if tix.size else pa.array([], pa.string())
        order = _java_rank(seg[tix], names)
        self.t_rows = tix[order]  # topic rows by (segment, Java name order)
        t_seg = seg[self.t_rows]
        self.t_ptr = np.searchsorted(t_seg, np.arange(self.n_segs + 1))  # each segment's topics in t_rows
        counts = _np(tbl.column("partitions"), fill=0).astype(np.int64)[self.t_rows]
        mine = _np(pc.fill_null(tbl.column("_mine"), True)).astype(bool)[self.t_rows]
        self.t_count = counts  # real partition counts
        self.t_eff = np.where(mine, counts, 0)  # what this chunk assigns
        ends = np.cumsum(self.t_eff)
        group_base = np.concatenate([[0], ends])[self.t_ptr[:-1]]
        self.t_start = ends - self.t_eff - np.repeat(group_base, np.diff(self.t_ptr))  # within its group
        self.t_local = np.arange(self.t_rows.shape[0]) - np.repeat(self.t_ptr[:-1], np.diff(self.t_ptr))
        # (segment, topic name) → local topic index, through integer name ids
        sorted_names = names.take(pa.array(order)) if tix.size else names
        self.names_u = pc.unique(sorted_names)
        nid = _np(pc.index_in(sorted_names, value_set=self.names_u), fill=-1).astype(np.int64)
        self.n_names = max(len(self.names_u), 1)
        key = t_seg.astype(np.int64) * self.n_names + nid
        korder = np.argsort(key, kind="stable")
        self.t_key, self.t_key_local = key[korder], self.t_local[korder]

    def _local_topics(self, seg_of: np.ndarray, names: pa.Array) -> np.ndarray:
        nid = _np(pc.index_in(names, value_set=self.names_u), fill=-1).astype(np.int64)
        key = seg_of.astype(np.int64) * self.n_names + nid
        local = _lookup(self.t_key, self.t_key_local, key)
        local[nid < 0] = -1
        return local

    def _subscriptions(self, six: np.ndarray, seg: np.ndarray) -> None:
        """Each group's distinct subscriptions (CSR of local topic ids), keyed by (segment, hash of the topics)."""
        tbl = self.tbl
        s_seg = seg[six]
        self.sub_ptr = np.searchsorted(s_seg, np.arange(self.n_segs + 1))  # each segment's subscriptions
        take = pa.array(six)
        subs = tbl.column("topics").take(take).combine_chunks()
        flat = pc.list_flatten(subs)
        parent = _np(pc.list_parent_indices(subs)).astype(np.int64)
        local = self._local_topics(s_seg[parent], flat) if len(flat) else np.zeros(0, np.int64)
        keep = local >= 0  # a topic of another chunk, or unknown (check=False): not subscribed here
        self.s_topics = local[keep].astype(np.int32)
        self.s_ptr = np.concatenate([[0], np.cumsum(np.bincount(parent[keep], minlength=six.shape[0]))])
        # (segment, hash) → subscription row; hashes are numbered exactly (np.unique), so keys never collide
        self.hash_values = np.unique(_np(tbl.column("_sub"), fill=0))
        key = s_seg.astype(np.int64) * len(self.hash_values) + self._hash_ids(tbl.column("_sub").take(take))
        korder = np.argsort(key, kind="stable")
        self.sub_key, self.sub_pos = key[korder], korder.astype(np.int64)
        same = np.flatnonzero(self.sub_key[1:] == self.sub_key[:-1])
        if same.size:  # two subscriptions of one group with one 64-bit hash: never seen, but never wrong
            gid = tbl.column("group_id")[int(six[korder[same[0]]])].as_py()
            raise PlanError(f"group {gid!r}: two different subscriptions have the same 64-bit hash")

    def _hash_ids(self, hashes: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return np.searchsorted(self.hash_values, _np(hashes, fill=0)).astype(np.int64)

    def _members(self, mix: np.ndarray, seg: np.ndarray) -> None:
        tbl = self.tbl
        m_seg = seg[mix]
        self.m_ptr = np.searchsorted(m_seg, np.arange(self.n_segs + 1))
        take = pa.array(mix)
        iid = tbl.column("instance_id").take(take).combine_chunks()
        mid = tbl.column("member_id").take(take).combine_chunks()
        dynamic = _np(pc.is_null(iid)).astype(bool)
        key = pc.coalesce(iid, mid)
        order = _java_rank(m_seg, key, dynamic)  # Kafka's order: static by instance id, then dynamic by member id
        self.m_rows = mix[order]  # member rows in rank order
        rank_of = np.empty(mix.shape[0], dtype=np.int64)
        rank_of[order] = np.arange(mix.shape[0])
        # each member's subscription: the index, within its group, of its subscription row (rank order)
        r_seg = m_seg[order]
        key = r_seg.astype(np.int64) * len(self.hash_values) + self._hash_ids(tbl.column("_sub").take(
            pa.array(self.m_rows)))
        pos = _lookup(self.sub_key, self.sub_pos, key)
        self.m_set = np.where(pos >= 0, pos - self.sub_ptr[r_seg], -1).astype(np.int32)
        # owned partitions: CSR rows by rank
        self.o_ptr = self.o_pid = None
        if "owned" in tbl.column_names:
            owned = tbl.column("owned").take(take).combine_chunks()
            flat = pc.list_flatten(owned)
            oparent = _np(pc.list_parent_indices(owned)).astype(np.int64)
            if len(flat) and self.t_rows.shape[0]:
                otopic = self._local_topics(m_seg[oparent], pc.struct_field(flat, "topic"))
                opart = _np(pc.struct_field(flat, "partition"), fill=-1).astype(np.int64)
                tpos = np.where(otopic >= 0, self.t_ptr[m_seg[oparent]] + otopic, 0)  # position in t_rows
                ok = (otopic >= 0) & (opart >= 0) & (opart < self.t_eff[tpos])
                pid = self.t_start[tpos] + opart
                orank = rank_of[oparent[ok]]
                oorder = np.argsort(orank, kind="stable")
                self.o_pid = pid[ok][oorder].astype(np.int32)
                self.o_ptr = np.concatenate([[0], np.cumsum(np.bincount(orank, minlength=mix.shape[0]))])
            else:
                self.o_pid = np.zeros(0, dtype=np.int32)
                self.o_ptr = np.zeros(mix.shape[0] + 1, dtype=np.int64)
            self.gen = _np(tbl.column("generation").take(take), fill=-1).astype(np.int64)[order]
        # racks (range, KIP-881): per segment, whether both sides have racks
        self.rack_segs = np.zeros(self.n_segs, dtype=bool)
        if "racks" in tbl.column_names:
            mrack = tbl.column("rack").take(pa.array(self.m_rows)).combine_chunks()
            has = _np(pc.fill_null(pc.not_equal(mrack, ""), False)).astype(bool)
            seg_has_m = np.bincount(m_seg[order][has], minlength=self.n_segs) > 0
            tracks = tbl.column("racks").take(pa.array(self.t_rows)).combine_chunks()
            tvalid = _np(pc.fill_null(pc.greater(pc.list_value_length(tracks), 0), False)).astype(bool)
            seg_has_t = np.bincount(seg[self.t_rows][tvalid], minlength=self.n_segs) > 0
            self.rack_segs = seg_has_m & seg_has_t
            if self.rack_segs.any():
                self._racks(mrack, tracks)

    def _racks(self, mrack: pa.Array, tracks: pa.Array) -> None:
        parts = pc.list_flatten(tracks)  # one list of replica racks per partition, topics in t_rows order
        self.r_part_ptr = np.concatenate([[0], np.cumsum(_np(pc.list_value_length(tracks), fill=0))])
        values = pc.list_flatten(parts)
        vparent = _np(pc.list_parent_indices(parts)).astype(np.int64)
        dictionary = pc.unique(pa.concat_arrays([pc.cast(mrack, pa.string()), pc.cast(values, pa.string())]))
        self.r_member = _rack_ids(mrack, dictionary)
        ids = _rack_ids(values, dictionary)
        keep = ids >= 0
        self.r_ids = ids[keep]
        self.r_ptr = np.concatenate([[0], np.cumsum(np.bincount(vparent[keep], minlength=len(parts)))])
        self.r_tvalid = _np(pc.fill_null(pc.greater(pc.list_value_length(tracks), 0), False)).astype(bool)

    def _group_racks(self, s: int, ta: int, tb: int, ma: int, mb: int):
        member = self.r_member[ma:mb]
        lengths = []
        flat = []
        for t in range(ta, tb):
            n = int(self.t_eff[t])
            if n == 0:
                continue
            if not self.r_tvalid[t]:
                lengths.append(np.zeros(n, dtype=np.int64))
                continue
            pa_, pb = int(self.r_part_ptr[t]), int(self.r_part_ptr[t + 1])  # this topic's partitions
            lengths.append(np.diff(self.r_ptr[pa_:pb + 1]))
            flat.append(self.r_ids[self.r_ptr[pa_]:self.r_ptr[pb]])
        lens = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
        ids = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
        _, inverse = np.unique(np.concatenate([member[member >= 0], ids]), return_inverse=True)
        dense_member = np.full(member.shape[0], -1, dtype=np.int32)
        nm = int((member >= 0).sum())
        dense_member[member >= 0] = inverse[:nm]
        ptr = np.concatenate([[0], np.cumsum(lens)])
        return dense_member, ptr, inverse[nm:].astype(np.int32)

    def plan(self) -> pa.RecordBatch:
        # The one loop over groups calls the compiled assignor; everything around it is done for the whole batch.
        t_ptr, m_ptr, t_eff = self.t_ptr, self.m_ptr, self.t_eff
        owners_all = [self._owners(s, int(t_ptr[s]), int(t_ptr[s + 1]), int(m_ptr[s]), int(m_ptr[s + 1]),
                                   t_eff[t_ptr[s]:t_ptr[s + 1]]) for s in range(self.n_segs)]
        owners = np.concatenate(owners_all) if owners_all else np.zeros(0, dtype=np.int32)
        ends = np.concatenate([[0], np.cumsum(t_eff)])
        base = np.repeat(m_ptr[:-1], ends[t_ptr[1:]] - ends[t_ptr[:-1]])  # each partition's group's first member
        assigned = owners >= 0
        member = (base + owners)[assigned]  # the batch's member index of each assigned partition
        # members that get nothing are rows too: in an unsplit group, those owning no partition; in a split one,
        # those range gives nothing in any chunk (found once, by chunk 0)
        got = np.zeros(int(m_ptr[-1]), dtype=bool)
        got[member] = True
        unsplit = np.repeat(self.nchunks <= 1, np.diff(m_ptr))
        empties = [np.flatnonzero(unsplit & ~got)]
        for s in np.flatnonzero((self.nchunks > 1) & (self.chunk == 0)):
            ma, mb = int(m_ptr[s]), int(m_ptr[s + 1])
            empties.append(ma + self._range_empties(s, int(t_ptr[s]), ma, mb))
        t_rep = np.repeat(self.t_rows, t_eff)
        part = np.arange(owners.shape[0], dtype=np.int64) - np.repeat(np.cumsum(t_eff) - t_eff, t_eff)
        m_out = self.m_rows[member]
        t_out = t_rep[assigned]
        p_out = part[assigned].astype(np.int32)
        empty = np.sort(np.concatenate(empties))  # in group order, as the rows of each group are
        m_all = np.concatenate([m_out, self.m_rows[empty]])
        n_a, n_e = m_out.shape[0], empty.shape[0]
        t_idx = pa.array(np.concatenate([t_out, np.zeros(n_e, dtype=np.int64)]),
                         mask=np.concatenate([np.zeros(n_a, dtype=bool), np.ones(n_e, dtype=bool)]))
        p_arr = pa.array(np.concatenate([p_out, np.zeros(n_e, dtype=np.int32)]),
                         mask=np.concatenate([np.zeros(n_a, dtype=bool), np.ones(n_e, dtype=bool)]))
        take = pa.array(m_all)
        tbl = self.tbl
        return pa.RecordBatch.from_arrays(
            [_plain(tbl.column("group_id").take(take)), _plain(tbl.column("member_id").take(take)),
             _plain(tbl.column("instance_id").take(take)), _plain(tbl.column("topic").take(t_idx)), p_arr],
            names=["group_id", "member_id", "instance_id", "topic", "partition"])

    def _owners(self, s: int, ta: int, tb: int, ma: int, mb: int, counts: np.ndarray) -> np.ndarray:
        member_sets = self.m_set[ma:mb]
        sa, sb = int(self.sub_ptr[s]), int(self.sub_ptr[s + 1])
        sp = self.s_ptr[sa:sb + 1]
        set_indptr = sp - sp[0]
        set_topics = self.s_topics[sp[0]:sp[-1]]
        kw: dict[str, Any] = {}
        if self.o_ptr is not None:
            op = self.o_ptr[ma:mb + 1]
            kw["owned_indptr"] = op - op[0]
            kw["owned_partitions"] = self.o_pid[op[0]:op[-1]]  # type: ignore[index]  # set with o_ptr
            if self.assignor != "uniform":
                kw["generations"] = self.gen[ma:mb]
        if self.rack_segs[s]:
            kw["member_racks"], kw["partition_rack_indptr"], kw["partition_racks"] = self._group_racks(s, ta, tb,
                                                                                                       ma, mb)
        try:
            return A.assign_owners(self.assignor, counts, member_sets, set_indptr, set_topics, **kw)[0]
        except A.AssignmentError as exc:  # validation on the driver should have caught it; name the group
            gid = self.tbl.column("group_id")[int(self.seg_row[s])].as_py()
            raise PlanError(f"group {gid!r}: {exc}") from None

    def _range_empties(self, s: int | np.integer, ta: int, ma: int, mb: int) -> np.ndarray:
        """Members of a split group that range gives nothing in any chunk: under range, the subscriber of rank i
        (among a topic's subscribers, in Kafka's order) gets a partition of it exactly when i < its count."""
        n = mb - ma
        sets = self.m_set[ma:mb]
        subscribed = sets >= 0
        sa = int(self.sub_ptr[s])
        starts = np.where(subscribed, self.s_ptr[sa + np.maximum(sets, 0)], 0)
        lengths = np.where(subscribed, self.s_ptr[sa + np.maximum(sets, 0) + 1] - starts, 0)
        total = int(lengths.sum())
        rank = np.repeat(np.arange(n, dtype=np.int64), lengths)
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        topic = self.s_topics[np.repeat(starts, lengths) + within].astype(np.int64)
        pair = np.unique(topic * (n + 1) + rank)  # by topic, then rank; a topic listed twice counts once
        topic, rank = pair // (n + 1), pair % (n + 1)
        pos = np.arange(topic.shape[0]) - np.searchsorted(topic, topic, side="left")
        got = np.zeros(n, dtype=bool)
        got[rank[pos < self.t_count[ta:][topic]]] = True
        return np.flatnonzero(~got)


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    return pc.cast(arr, pa.string()) if arr.type != pa.string() else arr


def _plan_batches(batches: Iterator[pa.RecordBatch], assignor: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: batches sorted by (group_id, _chunk, _kind); a segment may span batches."""
    carry: list[pa.RecordBatch] = []
    last_key: tuple[Any, Any] | None = None
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        gid = batch.column(batch.schema.get_field_index("group_id"))
        ch = batch.column(batch.schema.get_field_index("_chunk"))
        new = np.zeros(n, dtype=bool)
        if n > 1:
            new[1:] = _np(pc.fill_null(pc.not_equal(gid.slice(1), gid.slice(0, n - 1)), True)).astype(bool)
            chn = _np(ch, fill=0)
            new[1:] |= chn[1:] != chn[:-1]
        first_key = (gid[0].as_py(), ch[0].as_py())
        new[0] = last_key is not None and first_key != last_key
        last_key = (gid[n - 1].as_py(), ch[n - 1].as_py())
        starts = np.flatnonzero(new)
        if starts.size == 0:
            carry.append(batch)
            continue
        cut = int(starts[-1])
        done = carry + ([batch.slice(0, cut)] if cut else [])
        carry = [batch.slice(cut)]
        if done:
            yield from _plan_table(pa.Table.from_batches(done), assignor)
    if carry:
        yield from _plan_table(pa.Table.from_batches(carry), assignor)


def _plan_table(tbl: pa.Table, assignor: str) -> Iterator[pa.RecordBatch]:
    if tbl.num_rows == 0:
        return
    out = _Batch(tbl.combine_chunks(), assignor).plan()
    for off in range(0, out.num_rows, OUT_BATCH_ROWS):
        yield out.slice(off, OUT_BATCH_ROWS)


# ---------------------------------------------------------------------------------------------------------------
# The plan


def plan(members_df: DataFrame, topics_df: DataFrame, assignor: str = "range", *,
         split_partitions: int | None = DEFAULT_SPLIT_PARTITIONS, partitions: int | None = None,
         check: bool = True) -> DataFrame:
    """Plans every group of `members_df` with `assignor` over `topics_df`; returns the plan (`PLAN_SCHEMA`).

    `assignor`: "range" (client RangeAssignor with KIP-881 racks; also KIP-848's server-side range), "roundrobin",
    "sticky", "cooperative-sticky" or "uniform". Validation (`validate`) runs now, on the driver, and so does the
    search for groups to split (range); the plan itself is lazy, a DataFrame to write or collect. The groups'
    distinct subscriptions, which all three read, are cached in the session (one row per group and distinct
    subscription).
    `split_partitions` (range only): groups with more partitions are split into chunks of whole topics of about
    this many partitions, planned by separate tasks; None never splits. `partitions`: how many Spark partitions
    the groups are shuffled into (default: Spark's ``spark.sql.shuffle.partitions``, coalesced by adaptive
    execution). ``check=False`` skips validation (for input derived from validated input).
    """
    work = _work(*_prepare(members_df, topics_df, assignor, split_partitions, check), partitions)
    # pickled by reference (kcoord.spark._plan_batches and a string): the executors import kcoord themselves
    return work.mapInArrow(functools.partial(_plan_batches, assignor=assignor), PLAN_SCHEMA)


def _prepare(members_df: DataFrame, topics_df: DataFrame, assignor: str, split_partitions: int | None,
             check: bool = True) -> tuple[DataFrame, DataFrame, str, DataFrame, list[tuple[str, str, int, int]]]:
    """The driver's part of `plan`: conformed members and topics, the assignor, the groups' distinct
    subscriptions (cached: the checks, the split search and the plan all read them) and the range splits."""
    members, topics = _inputs(members_df, topics_df, assignor)
    if split_partitions is not None and split_partitions < 1:
        raise PlanError(f"split_partitions must be a positive number of partitions, not {split_partitions}")
    members, subs = _subscriptions(members)
    subs = subs.cache()
    if check:
        _check(members, topics, assignor, subs)
    split = assignor == "range" and split_partitions is not None and _catalogue_exceeds(topics, split_partitions)
    return members, topics, assignor, subs, (_split_chunks(members, topics, subs, split_partitions)
                                             if split and split_partitions is not None else [])


def _catalogue_exceeds(topics: DataFrame, split_partitions: int) -> bool:
    """Whether any group could have more than `split_partitions` partitions: not when the whole catalogue has
    no more. One small job over the topics spares the search over every group's subscriptions."""
    total = topics.agg(F.sum(F.greatest(F.col("partitions"), F.lit(0)).cast("long"))).collect()[0][0]
    return total is not None and total > split_partitions


def _subscriptions(members: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Members with their subscription canonical (sorted, distinct) and hashed into ``_sub``, and each group's
    distinct subscriptions (group_id, _sub, topics): members of a group mostly share one."""
    canonical = F.array_sort(F.array_distinct(F.coalesce("topics", F.array().cast(MEMBER_COLUMNS["topics"][0]))))
    members = members.withColumn("topics", canonical).withColumn("_sub", F.xxhash64("topics"))
    return members, members.select("group_id", "_sub", "topics").distinct()


def _group_topics(subs: DataFrame, topics: DataFrame) -> DataFrame:
    """(group_id, topic, partitions, racks) for every topic some member of the group subscribes to."""
    return subs.select("group_id", F.explode("topics").alias("topic")).distinct().join(topics, "topic")


def _split_chunks(members: DataFrame, topics: DataFrame, subs: DataFrame,
                  split_partitions: int) -> list[tuple[str, str, int, int]]:
    """(group_id, topic, chunk, chunks) for the groups range plans in chunks: more than split_partitions
    partitions, and not racks on both sides. Runs on the driver: one job, two more when a group is that big."""
    gt = _group_topics(subs, topics)
    big = (gt.groupBy("group_id").agg(F.sum("partitions").alias("total"), F.max(F.size("racks") > 0).alias("track"))
           .filter(F.col("total") > split_partitions).collect())
    if not big:
        return []
    with_racks = [r["group_id"] for r in big if r["track"]]
    racky: set[str] = set()
    if with_racks:
        racky = {r["group_id"] for r in members.filter(F.col("group_id").isin(with_racks)
                                                       & F.col("rack").isNotNull() & (F.col("rack") != ""))
                 .select("group_id").distinct().collect()}
    chosen = [r["group_id"] for r in big if r["group_id"] not in racky]
    if not chosen:
        return []
    by_group: dict[str, list[tuple[str, int]]] = {}
    for r in gt.filter(F.col("group_id").isin(chosen)).select("group_id", "topic", "partitions").collect():
        by_group.setdefault(r["group_id"], []).append((r["topic"], r["partitions"]))
    out = []
    for gid, rows in by_group.items():
        rows.sort()
        start, marks = 0, []
        for topic, n in rows:  # chunks of whole topics, each starting below a multiple of split_partitions
            marks.append((topic, start // split_partitions))
            start += n
        chunks = marks[-1][1] + 1
        out += [(gid, topic, chunk, chunks) for topic, chunk in marks]
    return out


def _work(members: DataFrame, topics: DataFrame, assignor: str, subs: DataFrame,
          chunks: list[tuple[str, str, int, int]], partitions: int | None) -> DataFrame:
    """The rows the tasks read, per (group, chunk) and in this order: the group's topics, its distinct
    subscriptions, its members (with the hash of their subscription; the task checks that no two subscriptions of
    a group share one).

    Only the columns the assignor reads are kept, and array columns hold empty arrays rather than nulls: Spark's
    Arrow writer is slow on null arrays (a null array column on a million member rows costs seconds)."""
    sticky = assignor in ("sticky", "cooperative-sticky", "uniform")
    racks = assignor == "range"
    empty = {"topics": F.array().cast(MEMBER_COLUMNS["topics"][0]), "owned": F.array().cast(OWNED_TYPE),
             "racks": F.array().cast(RACKS_TYPE)}
    group_topics = _group_topics(subs, topics)
    rows = {KIND_TOPIC: group_topics, KIND_SUBSCRIPTION: subs, KIND_MEMBER: members}
    if chunks:
        chunked = F.broadcast(members.sparkSession.createDataFrame(
            chunks, "group_id string, topic string, _tchunk int, _nchunks int"))
        split = F.broadcast(chunked.select("group_id", "_nchunks").distinct())
        for kind, df in rows.items():
            df = (df.join(chunked, ["group_id", "topic"], "left") if kind == KIND_TOPIC
                  else df.join(split, "group_id", "left"))
            df = (df.withColumn("_nchunks", F.coalesce("_nchunks", F.lit(1)))
                  .withColumn("_chunk", F.explode(F.sequence(F.lit(0), F.col("_nchunks") - 1))))
            if kind == KIND_TOPIC:
                df = df.withColumn("_mine", (F.col("_nchunks") == 1) | (F.col("_chunk") == F.col("_tchunk")))
            rows[kind] = df
    else:
        rows = {kind: df.select("*", F.lit(0).alias("_chunk"), F.lit(1).alias("_nchunks"))
                for kind, df in rows.items()}
        rows[KIND_TOPIC] = rows[KIND_TOPIC].withColumn("_mine", F.lit(True))
    null = {"string": F.lit(None).cast("string"), "int": F.lit(None).cast("int"), "long": F.lit(None).cast("long")}
    cols: list[tuple[str, Column | None, Column | None, Column | None]] = [  # topic, subscription, member rows
        ("group_id", None, None, None),
        ("_chunk", None, None, None),
        ("_nchunks", None, None, None),
        ("_kind", F.lit(KIND_TOPIC), F.lit(KIND_SUBSCRIPTION), F.lit(KIND_MEMBER)),
        ("member_id", null["string"], null["string"], None),
        ("instance_id", null["string"], null["string"], None),
        ("_sub", null["long"], None, None),
        ("topics", empty["topics"], None, empty["topics"]),
    ]
    if racks:
        cols.append(("rack", null["string"], null["string"], None))
    if sticky:
        cols += [("owned", empty["owned"], empty["owned"], F.coalesce("owned", empty["owned"])),
                 ("generation", null["int"], null["int"], None)]
    cols += [("topic", None, null["string"], null["string"]), ("partitions", None, null["int"], null["int"])]
    if racks:
        cols.append(("racks", F.coalesce("racks", empty["racks"]), empty["racks"], empty["racks"]))
    cols.append(("_mine", None, F.lit(None).cast("boolean"), F.lit(None).cast("boolean")))
    types = {"_chunk": "int", "_nchunks": "int", "_kind": "tinyint"}

    def pick(name: str, expr: Column | None) -> Column:
        expr = F.col(name) if expr is None else expr
        return (expr.cast(types[name]) if name in types else expr).alias(name)

    kinds = (KIND_TOPIC, KIND_SUBSCRIPTION, KIND_MEMBER)
    parts = [rows[kind].select(*[pick(c[0], c[1:][i]) for c in cols]) for i, kind in enumerate(kinds)]
    work = parts[0].unionByName(parts[1]).unionByName(parts[2])
    keys = [F.col("group_id"), F.col("_chunk")]
    work = work.repartition(partitions, *keys) if partitions else work.repartition(*keys)
    return work.sortWithinPartitions("group_id", "_chunk", "_kind")


# ---------------------------------------------------------------------------------------------------------------
# Comparing plans

DIFF_COLUMNS = (
    "group_id", "members_before", "members_after", "partitions_before", "partitions_after", "moved", "added",
    "removed", "members_affected", "max_before", "min_before", "stddev_before", "max_after", "min_after",
    "stddev_after",
)


def _owner() -> Column:
    """Who holds a partition: the instance id of a static member (it survives restarts), else the member id."""
    return F.coalesce(F.col("instance_id"), F.col("member_id"))


def _per_member(p: DataFrame) -> DataFrame:
    return p.groupBy("group_id", _owner().alias("owner")).agg(F.count("partition").alias("n"))


def _balance(per_member: DataFrame, suffix: str) -> list[Column]:
    return [F.count("*").alias(f"members_{suffix}"), F.sum("n").alias(f"partitions_{suffix}"),
            F.max("n").alias(f"max_{suffix}"), F.min("n").alias(f"min_{suffix}"),
            F.stddev_pop("n").alias(f"stddev_{suffix}")]


def diff(plan_a: DataFrame, plan_b: DataFrame) -> DataFrame:
    """Per group, what changes from plan_a (before) to plan_b (after), plus one summary row for the whole estate.

    Columns (`DIFF_COLUMNS`): members and partitions before/after; ``moved``: partitions in both plans whose holder
    differs (a holder is a static member's instance id, else its member id, so a static member that restarts with
    a new member id holds on to its partitions); ``added`` / ``removed``: partitions only in plan_b / plan_a (new
    partitions, partitions withheld by cooperative-sticky, groups that appear or vanish); ``members_affected``:
    holders that gain or lose a partition; balance as the max, min and population standard deviation of
    partitions per member. The summary row has a null group_id, sums of the counts, the extremes of max and min,
    and the standard deviation over every member of the estate.

    Each plan is read twice: write plans to Parquet (or cache them) before diffing them.
    """
    pm_a, pm_b = _per_member(plan_a), _per_member(plan_b)
    bal = (pm_a.groupBy("group_id").agg(*_balance(pm_a, "before"))
           .join(pm_b.groupBy("group_id").agg(*_balance(pm_b, "after")), "group_id", "full_outer"))

    def held(p: DataFrame, name: str) -> DataFrame:
        return p.filter(F.col("partition").isNotNull()).select("group_id", "topic", "partition",
                                                               _owner().alias(name))

    j = held(plan_a, "a").join(held(plan_b, "b"), ["group_id", "topic", "partition"], "full_outer")
    changed = ~F.col("a").eqNullSafe(F.col("b"))
    moves = (j.groupBy("group_id").agg(
        F.sum((F.col("a").isNotNull() & F.col("b").isNotNull() & changed).cast("long")).alias("moved"),
        F.sum(F.col("a").isNull().cast("long")).alias("added"),
        F.sum(F.col("b").isNull().cast("long")).alias("removed")))
    c = j.filter(changed)
    affected = (c.select("group_id", F.col("a").alias("owner")).unionByName(c.select("group_id", F.col("b").alias(
        "owner"))).filter(F.col("owner").isNotNull()).distinct().groupBy("group_id")
        .agg(F.count("*").alias("members_affected")))
    zero: dict[str, bool | float | int | str] = {k: 0 for k in (
        "members_before", "members_after", "partitions_before", "partitions_after", "moved", "added", "removed",
        "members_affected")}
    per_group = (bal.join(moves, "group_id", "left").join(affected, "group_id", "left").na.fill(zero)
                 .select(*[F.col(k).cast("long").alias(k) if k in zero else F.col(k) for k in DIFF_COLUMNS]))
    per_group = per_group.select(*[F.col(k).cast("int").alias(k) if k.startswith(("max_", "min_")) else F.col(k)
                                   for k in DIFF_COLUMNS])
    sums = per_group.agg(*[F.sum(k).alias(k) for k in zero], *[F.max(k).alias(k) for k in ("max_before",
                                                                                          "max_after")],
                         *[F.min(k).alias(k) for k in ("min_before", "min_after")])
    spread = (pm_a.agg(F.stddev_pop("n").alias("stddev_before"))
              .crossJoin(pm_b.agg(F.stddev_pop("n").alias("stddev_after"))))
    estate = sums.crossJoin(spread).select(*[F.lit(None).cast("string").alias(k) if k == "group_id"
                                             else F.col(k).cast(per_group.schema[k].dataType) for k in DIFF_COLUMNS])
    return per_group.unionByName(estate)


def current_plan(members_df: DataFrame) -> DataFrame:
    """The members' ``owned`` partitions as a plan (the current assignment), to diff a new plan against."""
    m = _conform(members_df, MEMBER_COLUMNS, "members_df")
    held = (m.select("group_id", "member_id", "instance_id", F.explode("owned").alias("o"))
            .select("group_id", "member_id", "instance_id", F.col("o.topic").alias("topic"),
                    F.col("o.partition").alias("partition")))
    idle = (m.filter(F.coalesce(F.size("owned"), F.lit(0)) <= 0)
            .select("group_id", "member_id", "instance_id", F.lit(None).cast("string").alias("topic"),
                    F.lit(None).cast("int").alias("partition")))
    return held.unionByName(idle)


def with_owned(members_df: DataFrame, plan_df: DataFrame, generation: int | None = None) -> DataFrame:
    """members_df with ``owned`` set from a plan (by group and member id): the state after that plan is applied.

    ``generation`` becomes the given value, or one more than the member's (null: 0), as after a rebalance."""
    m = _conform(members_df, MEMBER_COLUMNS, "members_df")
    owned = (plan_df.filter(F.col("partition").isNotNull()).groupBy("group_id", "member_id")
             .agg(F.collect_list(F.struct(F.col("topic"), F.col("partition").cast("int").alias("partition")))
                  .alias("_owned")))
    gen = F.lit(generation) if generation is not None else F.coalesce(F.col("generation"), F.lit(0)) + 1
    out = m.join(owned, ["group_id", "member_id"], "left")
    return out.select(*[F.col("_owned").cast(OWNED_TYPE).alias("owned") if c == "owned"
                        else gen.cast("int").alias("generation") if c == "generation" else F.col(c)
                        for c in MEMBER_COLUMNS])


# ---------------------------------------------------------------------------------------------------------------
# Scenarios: a new members/topics DataFrame derived from an old one


def _new_id(*parts: Column) -> Column:
    return F.substring(F.sha2(F.concat_ws("\u0000", *parts), 256), 1, 16)


def rolling_bounce(members_df: DataFrame, salt: str = "bounce") -> DataFrame:
    """Every member restarts: it comes back with a new member id, as a consumer does after a restart.

    Static members keep their instance id, and with it their place in the member order and their current
    (``owned``) assignment, which the coordinator keeps by instance id (KIP-345). Dynamic members come back as new
    members owning nothing. New ids are derived from the old ones and `salt` (deterministic)."""
    m = _conform(members_df, MEMBER_COLUMNS, "members_df")
    static = F.col("instance_id").isNotNull()
    new_mid = F.concat(F.coalesce(F.col("instance_id"), F.lit("consumer")), F.lit("-"),
                       _new_id(F.col("group_id"), F.col("member_id"), F.lit(salt)))
    return m.select(*[new_mid.alias("member_id") if c == "member_id"
                      else F.when(static, F.col(c)).alias(c) if c in ("owned", "generation") else F.col(c)
                      for c in MEMBER_COLUMNS])


def _how_many(n: int | None, fraction: float | None, size: Column, what: str) -> Column:
    if (n is None) == (fraction is None):
        raise PlanError(f"{what}: give either a number of members or a fraction of each group")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise PlanError(f"{what}: the number of members must be an integer >= 0, not {n!r}")
        return F.lit(n)
    if not isinstance(fraction, int | float) or not 0 <= fraction or math.isnan(fraction):
        raise PlanError(f"{what}: the fraction must be a number >= 0, not {fraction!r}")
    return F.ceil(size * F.lit(float(fraction))).cast("int")


def _ranked(m: DataFrame) -> DataFrame:
    """Members with _rank (0-based, static by instance id, then dynamic by member id) and _size per group."""
    w = Window.partitionBy("group_id").orderBy(F.col("instance_id").isNull(), F.coalesce("instance_id", "member_id"))
    return (m.withColumn("_rank", F.row_number().over(w) - 1)
            .withColumn("_size", F.count("*").over(Window.partitionBy("group_id"))))


def scale_out(members_df: DataFrame, n: int | None = None, *, fraction: float | None = None) -> DataFrame:
    """Adds `n` members to every group (or ``ceil(fraction × size)``). New member i copies the subscription and
    rack of the group's member i mod size (in member order); it is static when that member is, with a new
    instance id, and owns nothing."""
    m = _ranked(_conform(members_df, MEMBER_COLUMNS, "members_df"))
    k = _how_many(n, fraction, F.col("_size"), "scale_out")
    m = m.withColumn("_new", k)
    new = (m.filter(F.col("_rank") < F.col("_new"))
           .withColumn("_i", F.explode(F.sequence(F.col("_rank"), F.col("_new") - 1, F.col("_size")))))
    tag = F.concat(F.lit("scaled-"), F.col("_i").cast("string"), F.lit("-"),
                   _new_id(F.col("group_id"), F.col("member_id"), F.col("_i").cast("string")))
    new = new.select(*[tag.alias("member_id") if c == "member_id"
                       else F.when(F.col("instance_id").isNotNull(), tag).alias("instance_id") if c == "instance_id"
                       else F.lit(None).cast(t).alias(c) if c in ("owned", "generation") else F.col(c)
                       for c, (t, _) in MEMBER_COLUMNS.items()])
    return _conform(members_df, MEMBER_COLUMNS, "members_df").unionByName(new)


def scale_in(members_df: DataFrame, n: int | None = None, *, fraction: float | None = None) -> DataFrame:
    """Removes `n` members from every group (or ``ceil(fraction × size)``): the last ones in member order
    (dynamic members before static ones). A group always keeps at least one member."""
    m = _ranked(_conform(members_df, MEMBER_COLUMNS, "members_df"))
    k = _how_many(n, fraction, F.col("_size"), "scale_in")
    keep = F.greatest(F.col("_size") - k, F.lit(1))
    return m.filter(F.col("_rank") < keep).select(*MEMBER_COLUMNS)


def grow_partitions(topics_df: DataFrame, counts: Mapping[str, int] | None = None, *,
                    factor: float | None = None) -> DataFrame:
    """Partition growth: the named topics grow to the given counts (or every topic to ``ceil(partitions ×
    factor)``). New partition p is placed like partition p mod the old count (its racks are copied)."""
    t = _conform(topics_df, TOPIC_COLUMNS, "topics_df")
    if (counts is None) == (factor is None):
        raise PlanError("grow_partitions: give either {topic: new count} or a factor")
    if factor is not None:
        if not isinstance(factor, int | float) or not factor >= 1:
            raise PlanError(f"grow_partitions: the factor must be >= 1, not {factor!r}")
        new = F.ceil(F.col("partitions") * F.lit(float(factor))).cast("int")
    elif counts is not None:  # (one of the two is given: checked above)
        counts = dict(counts)
        for name, c in counts.items():
            if isinstance(c, bool) or not isinstance(c, int) or c < 0:
                raise PlanError(f"grow_partitions: topic {name!r}: the new count must be an integer >= 0, not {c!r}")
        now = {r["topic"]: r["partitions"] for r in t.filter(F.col("topic").isin(list(counts))).collect()}
        for name, c in counts.items():
            if name not in now:
                raise PlanError(f"grow_partitions: topic {name!r} is not in topics_df")
            if now[name] is not None and c < now[name]:
                raise PlanError(f"grow_partitions: topic {name!r} has {now[name]} partitions; a topic cannot "
                                f"shrink to {c}")
        new = F.col("partitions")
        for name, c in counts.items():
            new = F.when(F.col("topic") == name, F.lit(c)).otherwise(new)
    t = t.select("topic", "racks", F.col("partitions").alias("_old"), new.alias("_new"))
    old, new = F.col("_old"), F.col("_new")
    racks = F.when(F.col("racks").isNull() | (old <= 0) | (new <= old), F.col("racks")).otherwise(
        F.transform(F.sequence(F.lit(0), new - 1), lambda p: F.element_at(F.col("racks"), p % old + 1)))
    return t.select("topic", new.alias("partitions"), racks.cast(RACKS_TYPE).alias("racks"))


def rack_loss(members_df: DataFrame, topics_df: DataFrame, rack: str) -> tuple[DataFrame, DataFrame]:
    """A rack (an availability zone) goes down: its consumers leave their groups and its replicas go offline
    (they leave every partition's replica racks). Returns the new (members, topics)."""
    m = _conform(members_df, MEMBER_COLUMNS, "members_df")
    t = _conform(topics_df, TOPIC_COLUMNS, "topics_df")
    m = m.filter(F.col("rack").isNull() | (F.col("rack") != rack))
    t = t.withColumn("racks", F.transform("racks", lambda rs: F.filter(rs, lambda r: r.isNull() | (r != rack))))
    return m, t

