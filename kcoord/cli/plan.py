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

Every input is checked in plain Python before Spark starts: the files exist and can be read, are not empty, are
JSON (every line of JSON lines) or Parquet with the columns a plan needs, and each row has the fields of its schema
(a mistake is one line naming the file and the line or row); --out is a directory that can be written. Paths reach
Spark as absolute local paths: Hadoop reads "plans:v2" as a URI scheme and a path's "*?[]{}" as a glob, so paths
with glob characters are refused.

This module imports PySpark only when the command runs, so `kcoord serve` never loads it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

from ..tables import table

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
            n = int(arg)
        except ValueError:
            pass
        else:
            if n >= 0:  # a negative count is refused here, before Spark starts (not by scale_in in Spark)
                return name, n
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


# ---- checking inputs before Spark starts (plain Python) -------------------------------------------------------

GLOB_CHARACTERS = set("*?[]{}\\")
MEMBER_FIELDS = {"group_id": str, "member_id": str, "instance_id": str, "topics": list, "rack": str, "owned": list,
                 "generation": int}
TOPIC_FIELDS = {"topic": str, "partitions": int, "racks": list}
REQUIRED = {"members": ("group_id", "member_id"), "topics": ("topic", "partitions")}
PARQUET_COLUMNS = {"members": ("group_id", "member_id", "topics"), "topics": ("topic", "partitions"),
                   "baseline": ("group_id", "member_id", "instance_id", "topic", "partition")}


class InputError(ValueError):
    """An input that cannot be planned from; the message names the file (and line or row) and the problem."""


def spark_path(option: str, path: str) -> str:
    """`path` as Spark should be given it: absolute (Hadoop takes "a:b" for a URI scheme), without glob characters
    (Spark reads a path as a glob pattern)."""
    full = os.path.abspath(os.path.expanduser(path))
    bad = sorted(set(full) & GLOB_CHARACTERS)
    if bad:
        raise InputError(f"{option} {path}: Spark reads {''.join(bad)!r} in a path as a glob pattern; rename it")
    return full


def check_row(row: Any, kind: str, where: str) -> None:
    """A JSON member or topic row with the fields of its schema (kcoord.spark), each of its type."""
    if not isinstance(row, dict):
        raise InputError(f"{where}: expected a JSON object (a {kind[:-1]} row), got {type(row).__name__}")
    types = MEMBER_FIELDS if kind == "members" else TOPIC_FIELDS
    for name in REQUIRED[kind]:
        if row.get(name) is None:
            raise InputError(f"{where}: {name} is missing or null")
    for name, kind_of in types.items():
        value = row.get(name)
        if value is None:
            continue
        if not isinstance(value, kind_of) or (kind_of is int and isinstance(value, bool)):
            raise InputError(f"{where}: {name} is {json.dumps(value)[:40]}, not a JSON "
                             f"{ {str: 'string', int: 'integer', list: 'array'}[kind_of]}")
    if kind == "members":
        if not all(isinstance(t, str) for t in row.get("topics") or ()):
            raise InputError(f"{where}: topics must be an array of strings")
        for o in row.get("owned") or ():
            if not (isinstance(o, dict) and isinstance(o.get("topic"), str) and isinstance(o.get("partition"), int)
                    and not isinstance(o.get("partition"), bool)):
                raise InputError(f"{where}: owned holds {json.dumps(o)[:60]}, not {{\"topic\": ..., \"partition\": N}}")
    elif row["partitions"] < 0:
        raise InputError(f"{where}: partitions is {row['partitions']}, below 0")


def _parquet_columns(option: str, path: Path, kind: str) -> None:
    """A Parquet file or directory (Spark's output) holding the columns `kind` needs."""
    files = [path] if path.is_file() else sorted(f for f in path.rglob("*.parquet") if f.is_file())
    if not files:
        raise InputError(f"{option} {path}: a directory without Parquet files")
    for f in files[:1]:  # Spark's output: its parts share one schema
        with open(f, "rb") as fh:
            head = fh.read(4)
            fh.seek(max(os.path.getsize(f) - 4, 0))
            tail = fh.read(4)
        if head != b"PAR1" or tail != b"PAR1":
            raise InputError(f"{option} {f}: not a Parquet file")
        try:
            import pyarrow.parquet as pq
        except ImportError:  # Spark will say
            return
        try:
            have = set(pq.read_schema(f).names)
        except Exception as e:  # pyarrow's ArrowInvalid and friends: a damaged file
            raise InputError(f"{option} {f}: not a readable Parquet file: {e}") from None
        missing = [c for c in PARQUET_COLUMNS[kind] if c not in have]
        if missing:
            raise InputError(f"{option} {f}: no column {', '.join(missing)} (columns: {', '.join(sorted(have))})")


def check_input(option: str, path: str, kind: str) -> Any | None:
    """Check one input file before Spark starts. Returns the parsed document when the file is one JSON document (an
    array, or an object such as `kcoord describe --json` output), None for JSON lines and Parquet (Spark reads
    those). An InputError names the file, the line or row, and the problem."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{option} {path}: no such file or directory")
    try:
        if kind == "baseline" or _is_parquet(p):
            _parquet_columns(option, p, kind)
            return None
        with open(p, "rb") as fh:
            head = fh.read(4)
    except OSError as e:
        raise InputError(f"{option} {path}: {e.strerror}") from None
    try:
        doc = _peek_json(path)
    except UnicodeDecodeError:
        raise InputError(f"{option} {path}: not UTF-8 text; expected JSON or Parquet") from None
    if doc is not None:
        _check_doc(option, path, kind, doc)
        return doc
    if head.lstrip()[:1] == b"[":  # one JSON array that does not parse
        try:
            with open(p, encoding="utf-8") as fh:
                json.load(fh)
        except json.JSONDecodeError as e:
            raise InputError(f"{option} {path}:{e.lineno}: not JSON ({e.msg} at column {e.colno})") from None
    rows = 0
    with open(p, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                msg = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
                raise InputError(f"{option} {path}:{n}: not JSON ({msg}); expected JSON lines, one {kind[:-1]} "
                                 f"row per line, a JSON array, or Parquet") from None
            check_row(row, kind, f"{option} {path}:{n}")
            rows += 1
    if not rows:
        raise InputError(f"{option} {path}: the file is empty")
    return None


def _check_doc(option: str, path: str, kind: str, doc: Any) -> None:
    where = f"{option} {path}"
    if kind == "members" and (_is_describe(doc) or (isinstance(doc, list) and doc and _is_describe(doc[0]))):
        try:
            rows = describe_rows(doc)
        except (KeyError, TypeError, AttributeError) as e:
            raise InputError(f"{where}: not `kcoord describe --json` output ({type(e).__name__}: {e})") from None
        except ValueError as e:
            raise InputError(f"{where}: {e}") from None
        if not rows:
            raise InputError(f"{where}: the group has no members")
        return
    if kind == "topics" and isinstance(doc, dict) and isinstance(doc.get("topics"), list):  # kcoord topics --json
        doc = doc["topics"]
    rows = doc if isinstance(doc, list) else [doc]
    if not rows and kind == "members":
        raise InputError(f"{where}: no member rows")
    for i, row in enumerate(rows, 1):
        check_row(row, kind, f"{where}: row {i}")


def check_out(path: str, inputs: list[tuple[str, str]]) -> str:
    """--out as an absolute path Spark can write: a directory, or one that can be created; not holding an input
    that the plan overwrites."""
    full = spark_path("--out", path)
    p = Path(full)
    if p.exists() and not p.is_dir():
        raise InputError(f"--out {path}: not a directory")
    parent = p
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"--out {path}: cannot be created: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {path}: {parent} is not writable")
    for option, given in inputs:
        target = Path(os.path.abspath(given))
        for name in ("before", "after", "diff"):
            if target == p / name or (p / name) in target.parents:
                raise InputError(f"{option} {given} lies in {path}/{name}, which this plan overwrites")
    return full


def _read(spark: Any, path: str, ddl: str, doc: Any | None) -> Any:
    if doc is not None:
        rows = doc if isinstance(doc, list) else [doc]
        return spark.createDataFrame(rows, ddl)
    if _is_parquet(Path(path)):
        return spark.read.parquet(path)
    return spark.read.schema(ddl).json(path)


def _is_parquet(p: Path) -> bool:
    """A directory (Spark's output), a .parquet file, or a file that starts as Parquet files do."""
    if p.is_dir() or p.suffix == ".parquet":
        return True
    with open(p, "rb") as fh:
        return fh.read(4) == b"PAR1"


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

    from ..spark import local_session

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
        scenario = parse_scenario(args.scenario) if args.scenario else None
        for item in args.conf:
            key, sep, _ = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--conf takes KEY=VALUE, not {item!r}")
        members_doc = check_input("--members", args.members, "members")
        topics_doc = check_input("--topics", args.topics, "topics") if args.topics else None
        if args.baseline:
            check_input("--baseline", args.baseline, "baseline")
        inputs = [(o, v) for o, v in (("--members", args.members), ("--topics", args.topics),
                                      ("--baseline", args.baseline)) if v]
        out = check_out(args.out, inputs)
        docs = {"--members": members_doc, "--topics": topics_doc, "--baseline": None}
        paths = {o: v if docs[o] is not None else spark_path(o, v) for o, v in inputs}  # what Spark reads
    except (ValueError, OSError) as e:
        print(f"kcoord plan: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("pyspark") is None:
        print("kcoord plan: needs PySpark: pip install 'kcoord[spark]' (and Java 17 or 21)", file=sys.stderr)
        return 2
    try:
        spark, own = _session(args.master, args.conf)
    except Exception as e:  # Spark's own errors (no Java, a bad --conf or --master): one line, not a traceback
        print(f"kcoord plan: Spark did not start (is Java 17 or 21 installed, or JAVA_HOME set?): {_first_line(e)}",
              file=sys.stderr)
        return 1
    spark_args = argparse.Namespace(**{**vars(args), "out": out, "members": paths["--members"],
                                       "topics": paths.get("--topics"), "baseline": paths.get("--baseline"),
                                       "shown_out": args.out})
    try:
        with Progress(spark.sparkContext, enabled=not args.quiet) as progress:
            return _run(spark, spark_args, scenario, members_doc, topics_doc, progress)
    except Exception as e:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if not isinstance(e, (Py4JError, PySparkException)):
            raise
        print(f"kcoord plan: Spark failed: {_first_line(e)}", file=sys.stderr)
        return 1
    finally:
        if own:
            spark.stop()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _run(spark: Any, args: argparse.Namespace, scenario: tuple[str, Any] | None, members_doc: Any,
         topics_doc: Any, progress: Progress) -> int:
    from .. import spark as S

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
        print(f"kcoord plan: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    progress.stop()
    if args.json:
        print(json.dumps({"assignor": args.assignor, "scenario": args.scenario, "groups": n_groups,
                          "estate": estate, "top_groups": top,
                          "out": str(getattr(args, "shown_out", out))}, indent=2))
    else:
        print(summary_text(estate, top, n_groups, what))
        print(f"\nplans and diff written to {getattr(args, 'shown_out', out)}/ (before, after, diff; Parquet)")
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
