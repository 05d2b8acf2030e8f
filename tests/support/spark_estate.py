"""An estate of many consumer groups for kcoord.spark's plans (`Estate`), a plan read back group by group
(`by_group`) and its comparison with the in-process assignors (`assert_equal_by_group`): shared by the Spark tests
on local[2] (tests/interop/test_spark.py) and on a local-cluster (tests/interop/test_spark_cluster.py, whose driver
process imports this too)."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

try:  # the spark extra; `make test` installs it
    from pyspark.sql import DataFrame, SparkSession

    from kcoord import assignors as A
    from kcoord.cli import plan as plan_cli
except ImportError as exc:
    if not os.environ.get("CIBUILDWHEEL"):  # `make test` installs the extra: a missing one is a failure there
        raise
    # a wheel's test run, which deselects the spark marker but still imports the test modules that import this one
    pytest.skip(f"the spark extra is not installed: {exc}", allow_module_level=True)

MEMBERS_DDL = plan_cli.MEMBERS_DDL
TOPICS_DDL = plan_cli.TOPICS_DDL
NON_ASCII = ("\uff5e", "\U0001f600")  # UTF-16 order puts the emoji (a surrogate pair) first; code points do not


class Estate:
    """Many groups with mixed static/dynamic members, differing subscriptions, racks and owned partitions."""

    def __init__(self, seed: int, groups: int, *, disjoint_owned: bool = False) -> None:
        rng = random.Random(seed)
        self.topics = {f"t{i:02d}": rng.choice([0, 1, 2, 3, 4, 6, 8, 12, 16]) for i in range(40)}
        self.topics[NON_ASCII[0] + "-topic"] = 5
        self.topics[NON_ASCII[1] + "-topic"] = 3
        self.racks: dict[str, list[list[str | None]]] = {}
        for t, n in self.topics.items():
            if rng.random() < 0.5:
                self.racks[t] = [[rng.choice("abc"), rng.choice("abcd")] + ([""] if rng.random() < 0.1 else [])
                                 + ([None] if rng.random() < 0.05 else []) for _ in range(n)]
        names = sorted(self.topics)
        self.rows: list[tuple] = []
        for g in range(groups):
            gid = f"group-{g:04d}"
            pool = rng.sample(names, rng.randint(1, 6))
            claimed: set[tuple[str, int]] = set()
            for i in range(rng.randint(1, 12)):
                if g % 10 == 7:  # some groups have ids that Java and Arrow order differently
                    mid = f"{rng.choice(NON_ASCII)}{rng.randint(0, 99)}-{i}"
                else:
                    mid = f"consumer-{rng.randint(0, 10**6)}-{i}"
                iid = f"host-{rng.randint(0, 999)}-{i}" if rng.random() < 0.5 else None
                subs = [t for t in pool if rng.random() < 0.7]
                if rng.random() < 0.1:
                    subs = subs + subs[:1]  # a topic listed twice
                rack = rng.choice([None, "", "a", "b", "c"]) if g % 3 else None  # a third of groups: no racks
                owned = [(t, p) for t in subs for p in range(self.topics[t]) if rng.random() < 0.3]
                if rng.random() < 0.1:
                    owned.append((subs[0] if subs else names[0], 99))  # beyond the topic: not a claim
                if disjoint_owned:
                    owned = [c for c in owned if c not in claimed]
                    claimed.update(owned)
                gen = rng.choice([None, 1, 2, 3])
                self.rows.append((gid, mid, iid, subs, rack, [{"topic": t, "partition": p} for t, p in owned], gen))

    def frames(self, spark: SparkSession) -> tuple[DataFrame, DataFrame]:
        members = spark.createDataFrame(self.rows, MEMBERS_DDL)
        topics = spark.createDataFrame([(t, n, self.racks.get(t)) for t, n in self.topics.items()], TOPICS_DDL)
        return members, topics

    def groups(self) -> dict[str, list[tuple]]:
        out: dict[str, list[tuple]] = {}
        for r in self.rows:
            out.setdefault(r[0], []).append(r)
        return out

    def expected(self, assignor: str, rows: list[tuple]) -> dict[str, dict[str, list[int]]]:
        members = []
        for _, mid, iid, subs, rack, owned, gen in rows:
            claims: dict[str, list[int]] = {}
            for o in owned:
                claims.setdefault(o["topic"], []).append(o["partition"])
            members.append(A.Member(mid, iid, tuple(subs), owned=claims, generation=-1 if gen is None else gen,
                                    rack=rack))
        subscribed = sorted({t for r in rows for t in r[3]})
        topics = {t: self.topics[t] for t in subscribed}
        if assignor == "range":
            racks = {t: self.racks[t] for t in subscribed if t in self.racks} or None
            result = A.range_assign(members, topics, partition_racks=racks)
        else:
            result = {"roundrobin": A.roundrobin_assign, "sticky": A.sticky_assign,
                      "cooperative-sticky": A.cooperative_sticky_assign, "uniform": A.uniform_assign}[assignor](
                members, topics)
        return {m: {t: ps for t, ps in parts.items() if ps} for m, parts in result.items()}


def by_group(plan: DataFrame) -> dict[str, dict[str, dict[str, list[int]]]]:
    """{group: {member: {topic: [partitions]}}} from a plan, members without partitions as {}."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {}
    for r in plan.toArrow().to_pylist():
        parts = out.setdefault(r["group_id"], {}).setdefault(r["member_id"], {})
        if r["topic"] is not None:
            parts.setdefault(r["topic"], []).append(r["partition"])
        else:
            assert r["partition"] is None
    for members in out.values():
        for parts in members.values():
            for ps in parts.values():
                ps.sort()
    return out


def assert_equal_by_group(estate: Estate, assignor: str, got: dict[str, Any]) -> None:
    groups = estate.groups()
    assert set(got) == set(groups)
    wrong = [g for g, rows in groups.items() if got[g] != estate.expected(assignor, rows)]
    assert not wrong, f"{len(wrong)} groups differ from the in-process {assignor}, first {wrong[0]}: " \
                      f"{got[wrong[0]]} != {estate.expected(assignor, groups[wrong[0]])}"
