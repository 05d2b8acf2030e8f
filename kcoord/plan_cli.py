"""`kcoord plan`: what-if assignment planning on Spark, from the command line.

    kcoord plan --members FILE [--topics FILE] [--assignor range]
                [--scenario rolling-bounce|scale-out:N|scale-out:0.2|scale-in:N|scale-in:0.2|grow:TOPIC:N|rack-loss:RACK]
                [--baseline PLAN] [--master local[*]] [--conf KEY=VALUE] --out DIR [--json] [--top 10] [--quiet]

Inputs are Parquet (a file or a directory) or JSON (rows as a JSON array or JSON lines, in the schemas of
kcoord.spark). Members may also be the output of ``kcoord describe GROUP --json`` (one object, or an array of
them): its members become member rows (the instance id, and the current assignment as ``owned``); DescribeGroups
does not carry subscriptions, so every member is taken to subscribe to every topic assigned in its group. Topics
may also be ``kcoord topics --json`` output; without --topics, partition counts are inferred from the current
assignment (the highest partition seen, plus one).

What is compared. With --scenario: the plan of the members as they are ("before"; or the plan in --baseline)
against the plan after the scenario ("after"); for the sticky assignors the scenario starts from the members
owning their "before" partitions. Without --scenario: the members' current assignment (``owned``; or --baseline)
against a fresh plan. Writes DIR/before, DIR/after and DIR/diff as Parquet and prints the diff's estate summary
and the groups with the most moved partitions (--json: the same as JSON).

This module imports PySpark only when the command runs, so `kcoord serve` never loads it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

from .tables import table

SCENARIO_HELP = ("rolling-bounce | scale-out:N | scale-out:FRACTION | scale-in:N | scale-in:FRACTION | "
                 "grow:TOPIC:N | rack-loss:RACK")
MEMBERS_DDL = ("group_id string, member_id string, instance_id string, topics array<string>, rack string, "
               "owned array<struct<topic:string,partition:int>>, generation int")
TOPICS_DDL = "topic string, partitions int, racks array<array<string>>"


def add_plan_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers `kcoord plan` on the CLI's subparsers."""
    p = subparsers.add_parser("plan", help="plan assignments for many groups on Spark, with what-if scenarios",
                              description="Plans assignments with kcoord's compiled assignors on Spark and compares "
                              "two plans (before/after a scenario, or the current assignment and a new plan).")
    p.add_argument("--members", required=True, metavar="FILE", help="members: Parquet, JSON rows, or describe --json")
    p.add_argument("--topics", metavar="FILE", help="topics: Parquet, JSON rows, or topics --json")
    p.add_argument("--assignor", default="range",
                   choices=("range", "roundrobin", "sticky", "cooperative-sticky", "uniform"))
    p.add_argument("--scenario", metavar="SPEC", help=SCENARIO_HELP)
    p.add_argument("--baseline", metavar="PLAN", help="a plan (Parquet) to compare against, instead of planning it")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", default=[],
                   help="a Spark setting, e.g. spark.driver.memory=8g (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", help="where to write before/, after/ and diff/ (Parquet)")
    p.add_argument("--split-partitions", type=int, default=100_000, metavar="N",
                   help="range: plan groups with more partitions in chunks of topics of about N partitions")
    p.add_argument("--top", type=int, default=10, metavar="N", help="groups to list, most moved partitions first")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_plan)
    return p


# ---- reading inputs (plain Python: no Spark needed) ----------------------------------------------------------

def parse_scenario(spec: str) -> tuple[str, Any]:
    """'scale-out:3' → ('scale-out', 3); 'scale-in:0.2' → ('scale-in', 0.2); 'grow:orders:24' → ('grow', ('orders',
    24)); 'rack-loss:az-1' → ('rack-loss', 'az-1'); 'rolling-bounce' → ('rolling-bounce', None)."""
    name, _, arg = spec.partition(":")
    if name == "rolling-bounce" and not arg:
        return name, None
    if name in ("scale-out", "scale-in") and arg:
        try:
            return name, int(arg)
        except ValueError:
            pass
        try:
            value = float(arg)
        except ValueError:
            value = -1.0
        if 0 <= value <= 1e6:
            return name, value
    if name == "grow":
        topic, _, count = arg.rpartition(":")
        if topic and count.isdigit():
            return name, (topic, int(count))
    if name == "rack-loss" and arg:
        return name, arg
    raise ValueError(f"unknown scenario {spec!r}; expected one of: {SCENARIO_HELP}")


def _peek_json(path: str) -> Any | None:
    """The parsed file if it is one JSON document (an object, or an array), else None (JSON lines, Parquet)."""
    p = Path(path)
    if p.is_dir():
        return None
    with open(p, "rb") as fh:
        head = fh.read(1)
        while head in (b" ", b"\n", b"\r", b"\t"):
            head = fh.read(1)
    if head not in (b"{", b"["):
        return None
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError:
        return None  # JSON lines: one object per line


def _is_describe(doc: Any) -> bool:
    return isinstance(doc, dict) and "members" in doc and "group" in doc


def describe_rows(doc: Any) -> list[dict[str, Any]]:
    """Member rows from `kcoord describe GROUP --json` output (one object or a list of them)."""
    groups = doc if isinstance(doc, list) else [doc]
    rows = []
    for g in groups:
        if not _is_describe(g):
            raise ValueError("expected `kcoord describe GROUP --json` output (objects with 'group' and 'members')")
        assigned: dict[str, set[int]] = {}
        for m in g["members"]:
            a = m.get("assignment")
            if a is not None and not isinstance(a, dict):
                raise ValueError(f"group {g['group']!r}: member {m.get('member_id')!r} has an assignment that is not "
                                 f"a consumer protocol assignment (protocol type {g.get('protocol_type')!r})")
            for topic, parts in (a or {}).items():
                assigned.setdefault(topic, set()).update(parts)
        topics = sorted(assigned)
        for m in g["members"]:
            a = m.get("assignment") or {}
            rows.append({"group_id": g["group"], "member_id": m["member_id"],
                         "instance_id": m.get("group_instance_id"), "topics": topics, "rack": None,
                         "owned": [{"topic": t, "partition": int(p)} for t in sorted(a) for p in sorted(a[t])],
                         "generation": g.get("generation")})
    return rows


def topics_from_assignments(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Topic rows inferred from members' owned partitions: the highest partition seen, plus one."""
    highest: dict[str, int] = {}
    for r in rows:
        for o in r["owned"] or ():
            highest[o["topic"]] = max(highest.get(o["topic"], -1), o["partition"])
        for t in r["topics"] or ():
            highest.setdefault(t, -1)
    return [{"topic": t, "partitions": n + 1, "racks": None} for t, n in sorted(highest.items())]


def _read(spark: Any, path: str, ddl: str, doc: Any | None) -> Any:
    if doc is not None:
        rows = doc if isinstance(doc, list) else [doc]
        return spark.createDataFrame(rows, ddl)
    p = Path(path)
    if p.is_dir() or p.suffix == ".parquet":
        return spark.read.parquet(path)
    return spark.read.schema(ddl).json(path)


# ---- progress ------------------------------------------------------------------------------------------------

class Progress:
    """Prints what Spark is doing (the step, and task counts of the running stages) to stderr until stopped."""

    def __init__(self, sc: Any, enabled: bool, interval: float = 0.5) -> None:
        self.sc = sc
        self.enabled = enabled
        self.interval = interval
        self.step = "starting"
        self.tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._last = ""
        self._last_time = 0.0
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="kcoord-plan-progress", daemon=True)

    def __enter__(self) -> Self:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops printing and clears the progress line (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.enabled and self.tty and self._last:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._last = ""

    def set(self, step: str) -> None:
        self.step = step
        if self.enabled and not self.tty:
            self._print(f"kcoord plan: {step}", force=True)

    def line(self) -> str:
        tracker = self.sc.statusTracker()
        parts = []
        for sid in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(sid)
            if info is not None:
                parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks"
                             + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
        elapsed = time.monotonic() - self._started
        return f"kcoord plan: {self.step} [{elapsed:.0f}s]" + (" | " + ", ".join(parts) if parts else "")

    def _print(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r\033[K" + text[:200])
        elif force or (text != self._last and now - self._last_time >= 2.0):
            sys.stderr.write(text + "\n")
        else:
            return
        sys.stderr.flush()
        self._last, self._last_time = text, now

    def _run(self) -> None:
        from py4j.protocol import Py4JError

        while not self._stop.wait(self.interval):
            try:
                self._print(self.line())
            except (Py4JError, OSError, AttributeError):  # the context is stopping; progress is best effort
                return


# ---- the command ---------------------------------------------------------------------------------------------

def _fmt_balance(mx: Any, mn: Any, sd: Any) -> str:
    if mx is None:
        return "-"
    return f"{mx}/{mn}/{sd:.2f}" if sd is not None else f"{mx}/{mn}/-"


def summary_text(estate: dict[str, Any], groups: list[dict[str, Any]], n_groups: int, what: str) -> str:
    e = estate
    lines = [(f"{what}: {n_groups:,} groups, members {e['members_before']:,} -> {e['members_after']:,}, "
              f"partitions {e['partitions_before']:,} -> {e['partitions_after']:,}"), ""]
    lines.append(table(
        ["", "moved", "added", "removed", "members affected", "balance before (max/min/stddev)", "balance after"],
        [["estate", f"{e['moved']:,}", f"{e['added']:,}", f"{e['removed']:,}", f"{e['members_affected']:,}",
          _fmt_balance(e["max_before"], e["min_before"], e["stddev_before"]),
          _fmt_balance(e["max_after"], e["min_after"], e["stddev_after"])]], right=True))
    if groups:
        lines += ["", f"groups with the most moved partitions (top {len(groups)}):"]
        lines.append(table(
            ["GROUP", "MEMBERS", "PARTITIONS", "MOVED", "ADDED", "REMOVED", "AFFECTED", "BEFORE max/min/sd",
             "AFTER max/min/sd"],
            [[g["group_id"], f"{g['members_before']}->{g['members_after']}",
              f"{g['partitions_before']}->{g['partitions_after']}", g["moved"], g["added"], g["removed"],
              g["members_affected"], _fmt_balance(g["max_before"], g["min_before"], g["stddev_before"]),
              _fmt_balance(g["max_after"], g["min_after"], g["stddev_after"])] for g in groups], right=True))
    return "\n".join(lines)


def _session(master: str, conf: list[str]) -> tuple[Any, bool]:
    from pyspark.sql import SparkSession

    from .spark import local_session

    existing = SparkSession.getActiveSession()
    if existing is not None:
        return existing, False
    settings = {}
    for item in conf:
        key, _, value = item.partition("=")
        settings[key.strip()] = value.strip()
    return local_session(master, "kcoord plan", settings), True


def run_plan(args: argparse.Namespace) -> int:
    try:
        for path in (args.members, args.topics, args.baseline):
            if path is not None and not Path(path).exists():
                raise ValueError(f"{path}: no such file or directory")
        scenario = parse_scenario(args.scenario) if args.scenario else None
        for item in args.conf:
            if "=" not in item:
                raise ValueError(f"--conf takes KEY=VALUE, not {item!r}")
        members_doc = _peek_json(args.members)
        topics_doc = _peek_json(args.topics) if args.topics else None
    except (ValueError, OSError) as e:
        print(f"kcoord plan: {e}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("pyspark") is None:
        print("kcoord plan: needs PySpark: pip install 'kcoord[spark]' (and Java 17 or 21)", file=sys.stderr)
        return 2
    spark, own = _session(args.master, args.conf)
    try:
        with Progress(spark.sparkContext, enabled=not args.quiet) as progress:
            return _run(spark, args, scenario, members_doc, topics_doc, progress)
    finally:
        if own:
            spark.stop()


def _run(spark: Any, args: argparse.Namespace, scenario: tuple[str, Any] | None, members_doc: Any,
         topics_doc: Any, progress: Progress) -> int:
    from . import spark as S

    try:
        if _is_describe(members_doc) or (isinstance(members_doc, list) and members_doc
                                         and _is_describe(members_doc[0])):
            member_rows = describe_rows(members_doc)
            members = spark.createDataFrame(member_rows, MEMBERS_DDL)
            if topics_doc is None and not args.topics:
                print("kcoord plan: no --topics: partition counts inferred from the current assignment",
                      file=sys.stderr)
                topics_doc = topics_from_assignments(member_rows)
        else:
            members = _read(spark, args.members, MEMBERS_DDL, members_doc)
        if isinstance(topics_doc, dict) and isinstance(topics_doc.get("topics"), list):  # kcoord topics --json
            topics_doc = [{"topic": t["topic"], "partitions": t["partitions"], "racks": t.get("racks")}
                          for t in topics_doc["topics"]]
        if topics_doc is None and not args.topics:
            raise S.PlanError("--topics is needed unless --members is `kcoord describe --json` output")
        topics = _read(spark, args.topics, TOPICS_DDL, topics_doc)
        out = Path(args.out)
        kw: dict[str, Any] = {"split_partitions": args.split_partitions if args.split_partitions > 0 else None}
        sticky = args.assignor in ("sticky", "cooperative-sticky", "uniform")

        def write(df: Any, name: str) -> Any:
            df.write.mode("overwrite").parquet(str(out / name))
            return spark.read.parquet(str(out / name))

        progress.set("checking the input")
        if scenario is not None:
            if args.baseline:
                S.validate(members, topics, args.assignor)
                before = spark.read.parquet(args.baseline)
            else:
                before = S.plan(members, topics, args.assignor, **kw)  # validates members and topics
            progress.set("planning before" if not args.baseline else "reading before")
            before = write(before, "before")
            start = S.with_owned(members, before) if sticky else members
            new_members, new_topics = apply_scenario(S, scenario, start, topics)
            # derived from checked input by kcoord's own helpers: not checked again
            after = S.plan(new_members, new_topics, args.assignor, check=False, **kw)
            what = f"{args.assignor}, {args.scenario}"
        else:
            after = S.plan(members, topics, args.assignor, **kw)
            before = spark.read.parquet(args.baseline) if args.baseline else S.current_plan(members)
            progress.set("reading before")
            before = write(before, "before")
            what = f"{args.assignor}, current assignment -> new plan"
        progress.set("planning after")
        after = write(after, "after")
        progress.set("diffing")
        d = write(S.diff(before, after), "diff")
        progress.set("summarizing")
        estate = d.filter("group_id is null").collect()[0].asDict()
        top = [r.asDict() for r in d.filter("group_id is not null")
               .orderBy(d.moved.desc(), d.added.desc(), d.removed.desc(), d.group_id).limit(max(args.top, 0))
               .collect()]
        n_groups = d.filter("group_id is not null").count()
    except ValueError as e:  # PlanError, or a file that is not what it should be
        print(f"kcoord plan: {e}", file=sys.stderr)
        return 2
    progress.stop()
    if args.json:
        print(json.dumps({"assignor": args.assignor, "scenario": args.scenario, "groups": n_groups,
                          "estate": estate, "top_groups": top, "out": str(out)}, indent=2))
    else:
        print(summary_text(estate, top, n_groups, what))
        print(f"\nplans and diff written to {out}/ (before, after, diff; Parquet)")
    return 0


def apply_scenario(S: Any, scenario: tuple[str, Any], members: Any, topics: Any) -> tuple[Any, Any]:
    """The members and topics after a parsed scenario."""
    name, arg = scenario
    if name == "rolling-bounce":
        return S.rolling_bounce(members), topics
    if name in ("scale-out", "scale-in"):
        fn = S.scale_out if name == "scale-out" else S.scale_in
        return (fn(members, arg) if isinstance(arg, int) else fn(members, fraction=arg)), topics
    if name == "grow":
        topic, count = arg
        return members, S.grow_partitions(topics, {topic: count})
    if name == "rack-loss":
        return S.rack_loss(members, topics, arg)
    raise ValueError(f"unknown scenario {name!r}")
