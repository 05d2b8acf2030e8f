"""kcoord.spark and `kcoord plan`: plans made on Spark equal the in-process assignors group by group, the KIP-345
rolling bounce moves nothing for static members, bad input is a PlanError naming the group and row, and diff and
the scenario helpers compute what they document.

One SparkSession on local[2] for the module (marker `spark`: needs PySpark and Java 17+).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:  # the spark extra; `make test` installs it
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    from kcoord import assignors as A
    from kcoord import spark as S
    from kcoord.cli import plan as plan_cli
except ImportError as exc:
    if not os.environ.get("CIBUILDWHEEL"):  # `make test` installs the extra: a missing one is a failure there
        raise
    # a wheel's test run, which deselects the spark marker but still imports this module
    pytest.skip(f"the spark extra is not installed: {exc}", allow_module_level=True)

from ..support.cli import ok, refused
from ..support.spark_estate import MEMBERS_DDL, TOPICS_DDL, Estate, assert_equal_by_group, by_group

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this interpreter, whatever the environment says
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = S.local_session("local[2]", "kcoord-tests", {"spark.sql.shuffle.partitions": "4",
                                                           "spark.default.parallelism": "2"})
    yield session
    session.stop()


# ---------------------------------------------------------------------------------------------------------------
# Generated estates and the in-process reference


# ---------------------------------------------------------------------------------------------------------------
# Spark's plan is the in-process assignor's, group by group


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky", "uniform"])
def test_plan_equals_in_process_assignor_group_by_group(spark, assignor):
    estate = Estate(seed=345, groups=300, disjoint_owned=assignor == "uniform")
    members, topics = estate.frames(spark)
    # split_partitions=8: range plans the rack-free groups above 8 partitions in chunks of topics
    plan = S.plan(members, topics, assignor, split_partitions=8 if assignor == "range" else None)
    got = by_group(plan)
    assert_equal_by_group(estate, assignor, got)
    assert sum(len(ms) for ms in got.values()) == len(estate.rows)  # every member is in the plan


def test_range_estate_uses_racks_and_splits(spark):
    # the equality test above is only as strong as its estate: racks change range in many of its groups, and
    # both split and unsplit (rack-aware) groups are among them
    estate = Estate(seed=345, groups=300)
    changed = 0
    for rows in estate.groups().values():
        members = [A.Member(r[1], r[2], tuple(r[3]), rack=r[4]) for r in rows]
        topics = {t: estate.topics[t] for r in rows for t in r[3]}
        racks = {t: estate.racks[t] for t in topics if t in estate.racks}
        changed += A.range_assign(members, topics, partition_racks=racks) != A.range_assign(members, topics)
    assert changed >= 50
    members, topics = estate.frames(spark)
    split = {c[0] for c in S._prepare(members, topics, "range", 8)[4]}
    assert 30 <= len(split) <= 300 - 30


def test_range_split_by_topic_equals_the_unsplit_plan(spark):
    rng = random.Random(881)
    topics = {f"topic-{i:02d}": rng.choice([0, 1, 3, 7, 20, 60]) for i in range(50)}
    rows = []
    for i in range(400):
        iid = f"instance-{rng.randint(0, 10**6)}-{i}" if i % 3 else None
        subs = [] if i % 37 == 0 else rng.sample(sorted(topics), rng.randint(1, 8))
        rows.append(("big", f"member-{rng.randint(0, 10**6)}-{i}", iid, subs, None, None, None))
    members = spark.createDataFrame(rows, MEMBERS_DDL)
    topics_df = spark.createDataFrame([(t, n, None) for t, n in topics.items()], TOPICS_DDL)
    prepared = S._prepare(members, topics_df, "range", 100)
    n_chunks = max(c[3] for c in prepared[4])
    work = S._work(*prepared, None)
    assert work.select("_chunk").distinct().count() == n_chunks > 5  # a task per chunk of topics
    split = by_group(S.plan(members, topics_df, "range", split_partitions=100, check=False))
    whole = by_group(S.plan(members, topics_df, "range", split_partitions=None, check=False))
    expected = A.range_assign([A.Member(r[1], r[2], tuple(r[3])) for r in rows], topics)
    assert split == whole == {"big": {m: {t: ps for t, ps in p.items() if ps} for m, p in expected.items()}}
    assert sum(1 for p in expected.values() if not any(p.values())) > 50  # members range leaves idle


def test_two_subscriptions_with_one_hash_are_an_error_not_a_wrong_plan():
    # the task trusts (group, subscription hash) only after checking that no two subscriptions of a group share
    # a hash; a real xxhash64 collision is not at hand, so the batch is written by hand
    import pyarrow as pa

    rows = [  # group_id, _chunk, _nchunks, _kind, member_id, instance_id, _sub, topics, topic, partitions, _mine
        ("g", 0, 1, 0, None, None, None, [], "a", 2, True),
        ("g", 0, 1, 0, None, None, None, [], "b", 2, True),
        ("g", 0, 1, 1, None, None, 7, ["a"], None, None, None),
        ("g", 0, 1, 1, None, None, 7, ["b"], None, None, None),
        ("g", 0, 1, 2, "m", None, 7, [], None, None, None),
    ]
    names = ["group_id", "_chunk", "_nchunks", "_kind", "member_id", "instance_id", "_sub", "topics", "topic",
             "partitions", "_mine"]
    types = [pa.string(), pa.int32(), pa.int32(), pa.int8(), pa.string(), pa.string(), pa.int64(),
             pa.list_(pa.string()), pa.string(), pa.int32(), pa.bool_()]
    batch = pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], t) for i, t in enumerate(types)], names=names)
    with pytest.raises(S.PlanError, match="group 'g': two different subscriptions have the same 64-bit hash"):
        list(S._plan_batches(iter([batch]), "roundrobin"))
    ok = batch.filter(pa.array([True, True, True, False, True]))
    assert pa.Table.from_batches(list(S._plan_batches(iter([ok]), "roundrobin"))).to_pylist() == [
        {"group_id": "g", "member_id": "m", "instance_id": None, "topic": "a", "partition": p} for p in (0, 1)]


# ---------------------------------------------------------------------------------------------------------------
# KIP-345: a rolling bounce of static members moves nothing


def bounce_estate(spark: SparkSession, groups: int, static: bool) -> tuple[DataFrame, DataFrame]:
    rows = []
    for g in range(groups):
        for i in range(4):
            rows.append((f"g{g:04d}", f"consumer-{g}-{i}-{(i * 7919 + g) % 1000:03d}",
                         f"pod-{i}" if static else None, ["orders", "payments"] if i % 2 else ["orders"], None,
                         None, None))
    members = spark.createDataFrame(rows, MEMBERS_DDL)
    topics = spark.createDataFrame([("orders", 10, None), ("payments", 5, None)], TOPICS_DDL)
    return members, topics


def written(df: DataFrame, tmp_path: Path, name: str) -> DataFrame:
    df.write.parquet(str(tmp_path / name))
    return df.sparkSession.read.parquet(str(tmp_path / name))


def test_kip345_rolling_bounce_of_1000_static_groups_moves_nothing_under_range(spark, tmp_path):
    members, topics = bounce_estate(spark, 1000, static=True)
    before = written(S.plan(members, topics, "range"), tmp_path, "before")
    bounced = S.rolling_bounce(members)
    assert bounced.join(members, ["group_id", "member_id"]).count() == 0  # every member id is new
    after = written(S.plan(bounced, topics, "range", check=False), tmp_path, "after")
    d = S.diff(before, after).toPandas()
    groups, estate = d[d.group_id.notna()], d[d.group_id.isna()].iloc[0]
    assert len(groups) == 1000
    assert (groups.moved == 0).all() and (groups.members_affected == 0).all()
    assert estate.moved == 0 and estate.partitions_before == estate.partitions_after == 1000 * 15


def test_kip345_rolling_bounce_of_dynamic_members_moves_every_partition(spark, tmp_path):
    # without instance ids a restarted consumer is a new member: every partition changes hands
    members, topics = bounce_estate(spark, 1000, static=False)
    before = written(S.plan(members, topics, "range"), tmp_path, "before")
    after = written(S.plan(S.rolling_bounce(members), topics, "range", check=False), tmp_path, "after")
    d = S.diff(before, after).toPandas()
    groups, estate = d[d.group_id.notna()], d[d.group_id.isna()].iloc[0]
    assert (groups.moved == 15).all() and (groups.members_affected == 8).all()  # 4 leave, 4 new ones
    assert estate.moved == 15_000 and estate.added == estate.removed == 0


@pytest.mark.parametrize("assignor", ["roundrobin", "sticky", "cooperative-sticky", "uniform"])
def test_static_rolling_bounce_moves_nothing_under_every_assignor(spark, tmp_path, assignor):
    # a fresh group is planned, its members come to own that plan, then every member restarts
    estate = Estate(seed=7, groups=60)
    rows = [(g, m, i or f"static-{m}", subs, rack, None, None) for g, m, i, subs, rack, _, _ in estate.rows]
    members = spark.createDataFrame(rows, MEMBERS_DDL)
    _, topics = estate.frames(spark)
    before = written(S.plan(members, topics, assignor), tmp_path, "before")
    after = S.plan(S.rolling_bounce(S.with_owned(members, before)), topics, assignor, check=False)
    estate_row = S.diff(before, written(after, tmp_path, "after")).filter("group_id is null").first()
    assert estate_row.partitions_before > 500
    assert estate_row.moved == estate_row.added == estate_row.removed == 0


# ---------------------------------------------------------------------------------------------------------------
# Bad input: a PlanError naming the group and the row, before any task runs


def members_of(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    return spark.createDataFrame(rows, MEMBERS_DDL)


GOOD = [("orders-app", "m-1", "pod-1", ["orders"], None, None, None),
        ("orders-app", "m-2", None, ["orders", "audit"], None, None, None),
        ("billing", "b-1", None, ["payments"], None, None, None)]
TOPICS = [("orders", 6, None), ("audit", 2, None), ("payments", 3, None)]


def plan_error(spark: SparkSession, members: list[tuple], topics: list[tuple] = TOPICS,
               assignor: str = "range") -> str:
    with pytest.raises(S.PlanError) as info:
        S.plan(members_of(spark, members), spark.createDataFrame(topics, TOPICS_DDL), assignor)
    assert type(info.value) is S.PlanError and isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "Traceback" not in msg and "py4j" not in msg.lower() and "org.apache" not in msg
    return msg


def test_good_input_plans(spark):
    got = by_group(S.plan(members_of(spark, GOOD), spark.createDataFrame(TOPICS, TOPICS_DDL)))
    assert got == {"orders-app": {"m-1": {"orders": [0, 1, 2]}, "m-2": {"audit": [0, 1], "orders": [3, 4, 5]}},
                   "billing": {"b-1": {"payments": [0, 1, 2]}}}


def test_bad_input_unknown_topic_names_group_member_and_topic(spark):
    msg = plan_error(spark, GOOD + [("billing", "b-2", None, ["payments", "refunds"], None, None, None)])
    assert msg == "group 'billing': member 'b-2' subscribes to unknown topic 'refunds' (not in topics_df)"


def test_bad_input_negative_partition_count_names_topic_and_a_subscribing_group(spark):
    msg = plan_error(spark, GOOD, [("orders", 6, None), ("audit", -2, None), ("payments", 3, None)])
    assert msg == ("topics_df: topic 'audit' has a negative partition count (-2); subscribed to by group "
                   "'orders-app' (member 'm-2')")


def test_bad_input_duplicate_member_id_names_group_and_member(spark):
    msg = plan_error(spark, GOOD + [("orders-app", "m-2", "pod-9", ["orders"], None, None, None)])
    assert msg == "group 'orders-app': member id 'm-2' appears in 2 member rows (member ids must be unique in a group)"


def test_bad_input_null_group_id_names_the_row(spark):
    msg = plan_error(spark, GOOD + [(None, "m-7", "pod-7", ["orders"], None, None, None)])
    assert msg == "members_df: a row has a null group_id (member_id='m-7', instance_id='pod-7')"


def test_bad_input_more_cases(spark):
    assert plan_error(spark, GOOD + [("orders-app", "m-3", "pod-1", ["orders"], None, None, None)]) == \
        "group 'orders-app': instance id 'pod-1' is used by members 'm-1' and 'm-3'"
    assert plan_error(spark, GOOD, TOPICS + [("audit", 4, None)]) == "topics_df: topic 'audit' appears in 2 rows"
    assert plan_error(spark, GOOD, [("orders", 2, [["a"]]), *TOPICS[1:]]) == (
        "topics_df: topic 'orders' has racks for 1 partitions but 2 partitions; subscribed to by group "
        "'orders-app' (member 'm-1')")
    claims = [{"topic": "orders", "partition": 1}]
    assert plan_error(spark, [("g", "a", None, ["orders"], None, claims, None),
                              ("g", "b", None, ["orders"], None, claims, None)], assignor="uniform") == (
        "group 'g': partition orders-1 is in the current (owned) assignment of members 'a' and 'b' (uniform: a "
        "partition has one current owner)")
    with pytest.raises(S.PlanError, match="members_df has no column 'topics'"):
        S.plan(members_of(spark, GOOD).drop("topics"), spark.createDataFrame(TOPICS, TOPICS_DDL))
    with pytest.raises(S.PlanError, match="unknown assignor 'rangee'"):
        S.plan(members_of(spark, GOOD), spark.createDataFrame(TOPICS, TOPICS_DDL), "rangee")


# ---------------------------------------------------------------------------------------------------------------
# diff


PLAN_ROWS = "group_id string, member_id string, instance_id string, topic string, partition int"


def test_diff_counts_moves_membership_and_balance(spark):
    before = spark.createDataFrame([
        ("g1", "a-1", "a", "t", 0), ("g1", "a-1", "a", "t", 1), ("g1", "b", None, "t", 2), ("g1", "b", None, "t", 3),
        ("g1", "c", None, None, None),
        ("g2", "x", None, "t", 0),
    ], PLAN_ROWS)
    after = spark.createDataFrame([
        # a restarted (a-2, same instance): keeps 0 and 1, takes 2 from b; d joins and gets the new partition 4
        ("g1", "a-2", "a", "t", 0), ("g1", "a-2", "a", "t", 1), ("g1", "a-2", "a", "t", 2), ("g1", "b", None, "t", 3),
        ("g1", "c", None, None, None), ("g1", "d", None, "t", 4),
        ("g3", "y", None, "t", 0),
    ], PLAN_ROWS)
    rows = {r.group_id: r.asDict() for r in S.diff(before, after).collect()}
    assert list(rows["g1"].keys()) == list(S.DIFF_COLUMNS)
    g1 = rows["g1"]
    assert (g1["members_before"], g1["members_after"], g1["partitions_before"], g1["partitions_after"]) == (3, 4, 4, 5)
    assert (g1["moved"], g1["added"], g1["removed"], g1["members_affected"]) == (1, 1, 0, 3)  # a, b, d
    assert (g1["max_before"], g1["min_before"], g1["max_after"], g1["min_after"]) == (2, 0, 3, 0)
    assert g1["stddev_before"] == pytest.approx((8 / 3 - (4 / 3) ** 2) ** 0.5)
    assert g1["stddev_after"] == pytest.approx((11 / 4 - (5 / 4) ** 2) ** 0.5)
    g2, g3 = rows["g2"], rows["g3"]
    assert (g2["members_after"], g2["removed"], g2["members_affected"], g2["max_after"]) == (0, 1, 1, None)
    assert (g3["members_before"], g3["added"], g3["members_affected"], g3["min_before"]) == (0, 1, 1, None)
    e = rows[None]
    assert (e["members_before"], e["members_after"], e["partitions_before"], e["partitions_after"]) == (4, 5, 5, 6)
    assert (e["moved"], e["added"], e["removed"], e["members_affected"]) == (1, 2, 1, 5)
    assert (e["max_before"], e["min_before"], e["max_after"], e["min_after"]) == (2, 0, 3, 0)
    assert e["stddev_before"] == pytest.approx((9 / 4 - (5 / 4) ** 2) ** 0.5)  # over the 4 members: 2, 2, 0, 1


def test_current_plan_and_with_owned_round_trip(spark, tmp_path):
    members = members_of(spark, GOOD)
    topics = spark.createDataFrame(TOPICS, TOPICS_DDL)
    planned = written(S.plan(members, topics, "sticky"), tmp_path, "planned")
    owning = S.with_owned(members, planned)
    assert by_group(S.current_plan(owning)) == by_group(planned)
    assert {r.generation for r in owning.collect()} == {1}
    same = S.diff(planned, S.plan(owning, topics, "sticky", check=False)).filter("group_id is null").first()
    assert same.moved == same.added == same.removed == 0


# ---------------------------------------------------------------------------------------------------------------
# Scenarios


SCENARIO_MEMBERS = [("g", "m-a", "pod-a", ["t"], "r1", [{"topic": "t", "partition": 0}], 3),
                    ("g", "m-b", "pod-b", ["t", "u"], "r2", None, 3),
                    ("g", "m-c", None, ["u"], "r1", [{"topic": "u", "partition": 1}], 3)]


def test_rolling_bounce_keeps_instance_ids_and_static_assignments(spark):
    rows = {r.instance_id or r.topics[0]: r for r in S.rolling_bounce(members_of(spark, SCENARIO_MEMBERS)).collect()}
    assert rows["pod-a"].member_id.startswith("pod-a-") and rows["pod-a"].owned[0].asDict() == {"topic": "t",
                                                                                               "partition": 0}
    assert rows["pod-a"].generation == 3 and rows["pod-b"].member_id.startswith("pod-b-")
    assert rows["u"].member_id.startswith("consumer-") and rows["u"].owned is None and rows["u"].generation is None
    assert len({r.member_id for r in rows.values()} | {"m-a", "m-b", "m-c"}) == 6


def test_scale_out_copies_subscriptions_in_member_order(spark):
    out = S.scale_out(members_of(spark, SCENARIO_MEMBERS), 4).collect()
    assert len(out) == 7
    new = sorted((r for r in out if r.member_id.startswith("scaled-")), key=lambda r: int(r.member_id.split("-")[1]))
    # member order: pod-a, pod-b (static), then m-c; new member i copies member i mod 3
    assert [(r.topics, r.rack, r.instance_id is not None) for r in new] == [
        (["t"], "r1", True), (["t", "u"], "r2", True), (["u"], "r1", False), (["t"], "r1", True)]
    assert all(r.owned is None and r.generation is None for r in new)
    assert len({r.member_id for r in out}) == 7 and len({r.instance_id for r in out if r.instance_id}) == 5
    assert S.scale_out(members_of(spark, SCENARIO_MEMBERS), fraction=0.5).count() == 3 + 2  # ceil(1.5)


def test_scale_in_removes_the_last_members_and_keeps_one(spark):
    m = members_of(spark, SCENARIO_MEMBERS)
    assert sorted(r.member_id for r in S.scale_in(m, 1).collect()) == ["m-a", "m-b"]  # the dynamic one goes first
    assert [r.member_id for r in S.scale_in(m, 10).collect()] == ["m-a"]
    assert S.scale_in(m, fraction=0.34).count() == 1  # ceil(1.02) = 2 leave
    with pytest.raises(S.PlanError, match="either a number of members or a fraction"):
        S.scale_in(m)


def test_grow_partitions_copies_rack_placement(spark):
    topics = spark.createDataFrame([("t", 2, [["a", "b"], ["c"]]), ("u", 3, None)], TOPICS_DDL)
    grown = {r.topic: r for r in S.grow_partitions(topics, {"t": 5}).collect()}
    assert grown["t"].partitions == 5 and grown["t"].racks == [["a", "b"], ["c"], ["a", "b"], ["c"], ["a", "b"]]
    assert grown["u"].partitions == 3 and grown["u"].racks is None
    assert {r.topic: r.partitions for r in S.grow_partitions(topics, factor=1.5).collect()} == {"t": 3, "u": 5}
    with pytest.raises(S.PlanError, match="topic 't' has 2 partitions; a topic cannot shrink to 1"):
        S.grow_partitions(topics, {"t": 1})


def test_rack_loss_removes_consumers_and_replicas_on_the_rack(spark):
    topics = spark.createDataFrame([("t", 2, [["r1", "r2"], ["r1"]]), ("u", 3, None)], TOPICS_DDL)
    members, topics = S.rack_loss(members_of(spark, SCENARIO_MEMBERS), topics, "r1")
    assert [r.member_id for r in members.collect()] == ["m-b"]
    assert {r.topic: r.racks for r in topics.collect()} == {"t": [["r2"], []], "u": None}


# ---------------------------------------------------------------------------------------------------------------
# `kcoord plan`


def test_parse_scenario():
    assert plan_cli.parse_scenario("rolling-bounce") == ("rolling-bounce", None)
    assert plan_cli.parse_scenario("scale-out:3") == ("scale-out", 3)
    assert plan_cli.parse_scenario("scale-in:0.2") == ("scale-in", 0.2)
    assert plan_cli.parse_scenario("grow:orders.v2:24") == ("grow", ("orders.v2", 24))
    assert plan_cli.parse_scenario("rack-loss:eu-west-1a") == ("rack-loss", "eu-west-1a")
    for bad in ("bounce", "scale-out", "scale-out:x", "grow:orders", "rack-loss"):
        with pytest.raises(ValueError, match="unknown scenario"):
            plan_cli.parse_scenario(bad)


DESCRIBE = [
    {"group": "orders-app", "state": "Stable", "protocol_type": "consumer", "protocol": "range", "generation": 4,
     "leader": "m-1", "history": [],
     "members": [
         {"member_id": "m-1", "group_instance_id": "pod-1", "client_id": "c", "host": "/10.0.0.1",
          "assignment": {"orders": [0, 1, 2], "audit": [0]}},
         {"member_id": "m-2", "group_instance_id": "pod-2", "client_id": "c", "host": "/10.0.0.2",
          "assignment": {"orders": [3, 4, 5], "audit": [1]}}]},
    {"group": "billing", "state": "Stable", "protocol_type": "consumer", "protocol": "range", "generation": 1,
     "leader": "b-1", "history": [],
     "members": [{"member_id": "b-1", "group_instance_id": None, "client_id": "c", "host": "/10.0.0.3",
                  "assignment": {"payments": [0, 1, 2]}}]},
]


def test_describe_json_becomes_member_rows():
    rows = plan_cli.describe_rows(DESCRIBE)
    assert rows[0] == {"group_id": "orders-app", "member_id": "m-1", "instance_id": "pod-1",
                       "topics": ["audit", "orders"], "rack": None, "generation": 4,
                       "owned": [{"topic": "audit", "partition": 0}, {"topic": "orders", "partition": 0},
                                 {"topic": "orders", "partition": 1}, {"topic": "orders", "partition": 2}]}
    assert plan_cli.topics_from_assignments(rows) == [{"topic": "audit", "partitions": 2, "racks": None},
                                                      {"topic": "orders", "partitions": 6, "racks": None},
                                                      {"topic": "payments", "partitions": 3, "racks": None}]
    with pytest.raises(ValueError, match="not a consumer protocol assignment"):
        plan_cli.describe_rows({"group": "x", "protocol_type": "connect",
                                "members": [{"member_id": "w", "assignment": "00ff"}]})


def test_kcoord_plan_end_to_end_from_describe_json(tmp_path):
    (tmp_path / "describe.json").write_text(json.dumps(DESCRIBE))
    (tmp_path / "topics.json").write_text(json.dumps({"topics": [
        {"topic": "orders", "partitions": 6, "topic_id": "00"}, {"topic": "audit", "partitions": 2, "topic_id": "01"},
        {"topic": "payments", "partitions": 3, "topic_id": "02"}], "errors": []}))
    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-m", "kcoord.cli", "plan", "--members", str(tmp_path / "describe.json"), "--topics",
         str(tmp_path / "topics.json"), "--assignor", "sticky", "--scenario", "scale-out:1", "--master", "local[2]",
         "--conf", "spark.sql.shuffle.partitions=2", "--out", str(out), "--json"],
        check=False, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    e = summary["estate"]
    assert summary["groups"] == 2 and summary["scenario"] == "scale-out:1"
    assert (e["members_before"], e["members_after"], e["partitions_before"], e["partitions_after"]) == (3, 5, 11, 11)
    # sticky from the owned "before" plan: each new member takes only what balance needs
    assert e["added"] == e["removed"] == 0 and 0 < e["moved"] <= 5
    assert summary["top_groups"][0]["group_id"] in ("orders-app", "billing")
    assert "kcoord plan: planning after" in proc.stderr  # progress while Spark works
    for name in ("before", "after", "diff"):
        assert list((out / name).glob("*.parquet")), name


def test_kcoord_plan_prints_a_table_and_infers_topics_from_describe(spark, tmp_path, capsys):
    # in-process, on the test session: no --topics, no scenario (current assignment -> a new range plan)
    from kcoord import cli

    (tmp_path / "describe.json").write_text(json.dumps(DESCRIBE))
    rc = cli.main(["plan", "--members", str(tmp_path / "describe.json"), "--out", str(tmp_path / "out"), "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "partition counts inferred from the current assignment" in err
    assert "range, current assignment -> new plan: 2 groups, members 3 -> 3, partitions 11 -> 11" in out
    assert "groups with the most moved partitions" in out
    # the describe assignment is range's own (in member order pod-1, pod-2): nothing moves
    assert out.splitlines()[3].split()[:5] == ["estate", "0", "0", "0", "0"]
    assert spark.sparkContext._jsc is not None  # the CLI left the session it did not create running


def test_kcoord_serve_does_not_import_pyspark():
    code = ("import sys; from kcoord import cli; cli.main(['apis', '--json']); "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_kcoord_plan_baseline_is_read_not_planned(spark, tmp_path, capsys):
    # a plan written by one run is the "before" of the next: with --baseline nothing is planned for it
    from kcoord import cli

    (tmp_path / "describe.json").write_text(json.dumps(DESCRIBE))
    assert cli.main(["plan", "--members", str(tmp_path / "describe.json"), "--out", str(tmp_path / "one"),
                     "--quiet", "--json"]) == 0
    capsys.readouterr()
    baseline = str(tmp_path / "one" / "after")
    orders = F.col("topic") == "orders"  # a baseline unlike range's plan: pod-1 holds all of orders
    skewed = (spark.read.parquet(baseline).withColumn("member_id", F.when(orders, "m-1").otherwise(F.col("member_id")))
              .withColumn("instance_id", F.when(orders, "pod-1").otherwise(F.col("instance_id"))))
    skewed.write.parquet(str(tmp_path / "skewed"))
    for base, moved in ((baseline, 0), (str(tmp_path / "skewed"), 3)):
        out = tmp_path / f"two-{moved}"
        rc = cli.main(["plan", "--members", str(tmp_path / "describe.json"), "--baseline", base,
                       "--scenario", "rolling-bounce", "--out", str(out), "--quiet", "--json"])
        summary = json.loads(capsys.readouterr().out)
        assert rc == 0
        before = spark.read.parquet(str(out / "before"))
        assert before.exceptAll(spark.read.parquet(base)).count() == 0 == \
            spark.read.parquet(base).exceptAll(before).count()
        # orders-app's static members bounce under range: against its own plan nothing moves, against the skewed
        # one orders 3-5 go back from pod-1 to pod-2; billing's one dynamic member comes back under a new id
        assert {g["group_id"]: g["moved"] for g in summary["top_groups"]} == {"orders-app": moved, "billing": 3}


# ---- kcoord plan on Spark: the scenarios -------------------------------------------------------------------------
# (rolling-bounce and scale-out:N run through the CLI above: test_kcoord_plan_baseline_is_read_not_planned and
# test_kcoord_plan_end_to_end_from_describe_json; each run here costs seconds of Spark jobs. The CLI's run/refused
# helpers are tests/support/cli.py's; the session is this file's.)

# Two groups over topics t (6 partitions, replicas on racks r1 and r2) and u (3): "dyn" has two dynamic members
# subscribed to both, one per rack; "stat" four static members subscribed to t, racks r1 r2 r1 r2.
PLAN_MEMBERS = [
    {"group_id": "dyn", "member_id": "d-0", "topics": ["t", "u"], "rack": "r1"},
    {"group_id": "dyn", "member_id": "d-1", "topics": ["t", "u"], "rack": "r2"},
    *[{"group_id": "stat", "member_id": f"s-{i}", "instance_id": f"i-{i}", "topics": ["t"], "rack": f"r{1 + i % 2}"}
      for i in range(4)],
]
PLAN_TOPICS = [{"topic": "t", "partitions": 6, "racks": [["r1", "r2"]] * 6}, {"topic": "u", "partitions": 3}]
SUBSCRIBED = {"dyn": {("t", p) for p in range(6)} | {("u", p) for p in range(3)}, "stat": {("t", p) for p in range(6)}}


@pytest.fixture(scope="module")
def plan_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("plan")
    (d / "members.json").write_text("".join(json.dumps(m) + "\n" for m in PLAN_MEMBERS))  # JSON lines
    (d / "topics.json").write_text(json.dumps(PLAN_TOPICS))  # one JSON array
    return d / "members.json", d / "topics.json", d


def plan_run(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path, Path], scenario: str | None,
             *extra: str) -> tuple[str, Path]:
    """`kcoord plan` with the module's inputs (range, no split search); (stdout, the --out directory)."""
    members, topics, d = files
    out = d / f"out-{scenario or 'none'}-{len(extra)}"
    argv = ["plan", "--members", str(members), "--topics", str(topics), "--out", str(out), "--quiet",
            "--split-partitions", "0", *extra]
    if scenario:
        argv += ["--scenario", scenario]
    return ok(capsys, *argv), out


def holders(out: Path, name: str) -> dict[str, dict[tuple[str, int], str]]:
    """A written plan (Parquet): per group, each partition's holder (a static member's instance id, else its member
    id); a partition held twice fails."""
    import pyarrow.parquet as pq

    plans: dict[str, dict[tuple[str, int], str]] = {}
    idle: dict[str, set[str]] = {}
    for r in pq.read_table(str(out / name)).to_pylist():
        owner = r["instance_id"] or r["member_id"]
        if r["partition"] is None:
            idle.setdefault(r["group_id"], set()).add(owner)
            continue
        tp = (r["topic"], r["partition"])
        assert tp not in plans.setdefault(r["group_id"], {}), f"{name}: {tp} held twice in {r['group_id']}"
        plans[r["group_id"]][tp] = owner
    return plans


def holders_in(plan: dict[tuple[str, int], str]) -> set[str]:
    return set(plan.values())


@pytest.mark.spark
def test_plan_scale_in_removes_the_last_members(capsys, spark, plan_files) -> None:
    text, out = plan_run(capsys, plan_files, "scale-in:1", "--json")
    summary = json.loads(text)
    assert (summary["scenario"], summary["assignor"], summary["groups"], summary["out"]) == \
        ("scale-in:1", "range", 2, str(out))
    e = summary["estate"]
    assert (e["members_before"], e["members_after"], e["partitions_before"], e["partitions_after"]) == (6, 4, 15, 15)
    assert e["added"] == e["removed"] == 0
    before, after = holders(out, "before"), holders(out, "after")
    assert {g: holders_in(p) for g, p in before.items()} == {"dyn": {"d-0", "d-1"}, "stat": {f"i-{i}" for i in
                                                                                            range(4)}}
    # the last in member order leaves each group (static members by instance id, dynamic ones after them)
    assert {g: holders_in(p) for g, p in after.items()} == {"dyn": {"d-0"}, "stat": {"i-0", "i-1", "i-2"}}
    assert {g: set(p) for g, p in after.items()} == SUBSCRIBED  # every partition still assigned
    assert {g["group_id"]: g["members_after"] for g in summary["top_groups"]} == {"dyn": 1, "stat": 3}


@pytest.mark.spark
def test_plan_scale_out_by_a_fraction_of_each_group(capsys, spark, plan_files) -> None:
    text, out = plan_run(capsys, plan_files, "scale-out:0.5")
    # ceil(0.5 x 2) = 1 new member in dyn, ceil(0.5 x 4) = 2 in stat
    assert text.splitlines()[0] == "range, scale-out:0.5: 2 groups, members 6 -> 9, partitions 15 -> 15"
    assert text.rstrip().endswith(f"plans and diff written to {out}/ (before, after, diff; Parquet)")
    groups = {r[0]: r for r in (line.split() for line in text.splitlines()) if r and r[0] in ("dyn", "stat")}
    assert (groups["dyn"][1], groups["stat"][1]) == ("2->3", "4->6")
    before, after = holders(out, "before"), holders(out, "after")
    assert {g: len(holders_in(p)) for g, p in after.items()} == {"dyn": 3, "stat": 6}
    assert all(holders_in(before[g]) < holders_in(after[g]) for g in after)  # the old members stay
    assert {g: set(p) for g, p in after.items()} == SUBSCRIBED


@pytest.mark.spark
def test_plan_grow_assigns_the_new_partitions(capsys, spark, plan_files) -> None:
    text, out = plan_run(capsys, plan_files, "grow:u:5", "--json")
    summary = json.loads(text)
    e = summary["estate"]
    # only dyn subscribes to u: its 2 new partitions are added, nothing is removed
    assert (e["partitions_before"], e["partitions_after"], e["added"], e["removed"]) == (15, 17, 2, 0)
    by_group = {g["group_id"]: g for g in summary["top_groups"]}
    assert (by_group["dyn"]["added"], by_group["stat"]["added"], by_group["stat"]["moved"]) == (2, 0, 0)
    before, after = holders(out, "before"), holders(out, "after")
    assert set(after["dyn"]) == SUBSCRIBED["dyn"] | {("u", 3), ("u", 4)}
    assert after["stat"] == before["stat"]


@pytest.mark.spark
def test_plan_rack_loss_leaves_nothing_on_the_lost_rack(capsys, spark, plan_files) -> None:
    text, out = plan_run(capsys, plan_files, "rack-loss:r1", "--json")
    e = json.loads(text)["estate"]
    assert (e["members_before"], e["members_after"], e["partitions_after"]) == (6, 3, 15)
    on_r1 = {m.get("instance_id") or m["member_id"] for m in PLAN_MEMBERS if m["rack"] == "r1"}
    after = holders(out, "after")
    assert {g: holders_in(p) for g, p in after.items()} == {"dyn": {"d-1"}, "stat": {"i-1", "i-3"}}
    assert not on_r1 & set().union(*map(holders_in, after.values()))
    assert {g: set(p) for g, p in after.items()} == SUBSCRIBED


@pytest.mark.spark
def test_plan_refusals_after_spark_started(capsys, monkeypatch, spark, plan_files) -> None:
    members, topics, d = plan_files
    # a scenario the input cannot have: named with its topic, exit 2
    refused(capsys, 2, "plan", "--members", str(members), "--topics", str(topics), "--out", str(d / "bad-grow"),
            "--quiet", "--scenario", "grow:nosuch:5", names=("'nosuch'",))
    # member rows without --topics (only describe --json output infers them)
    refused(capsys, 2, "plan", "--members", str(members), "--out", str(d / "no-topics"), "--quiet",
            names=("--topics is needed",))
    # Spark's own failure: one line, exit 1
    from py4j.protocol import Py4JError

    def fails(*a: Any) -> int:
        raise Py4JError("An error occurred while calling o42.parquet\njava stack")
    monkeypatch.setattr(plan_cli, "_run", fails)
    line = refused(capsys, 1, "plan", "--members", str(members), "--topics", str(topics), "--out", str(d / "fail"),
                   "--quiet", names=("Spark failed", "o42.parquet"))
    assert "java stack" not in line
    assert spark.sparkContext._jsc is not None  # the CLI left the session it did not create running
