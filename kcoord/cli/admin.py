"""`kcoord offsets` and `kcoord delete`: the group administration people use kafka-consumer-groups.sh for.

    kcoord offsets GROUP [--topic T[:P[,P...]]] [--json]
    kcoord offsets GROUP --reset (--to OFFSET | --to-earliest | --to-latest | --shift-by N)
                         [--topic T[:P[,P...]]] [--dry-run] [--json]
    kcoord delete GROUP [GROUP...] [--json]

Only standard Kafka APIs, at versions Apache Kafka 2.4 to 4.x serves, so the same commands work against a Kafka
cluster: FindCoordinator (the group's coordinator), OffsetFetch, OffsetCommit (as an admin: generation -1, no member,
as Kafka's alterConsumerGroupOffsets commits), Metadata (a topic's partitions and their leaders), ListOffsets (at each
partition's leader; timestamp -2 earliest, -1 latest), DescribeGroups / ConsumerGroupDescribe (the group's state)
and DeleteGroups. The reset follows Kafka's ConsumerGroupCommand: refused unless the group is Empty or Dead, --to
and --shift-by clamped to [earliest, latest], --shift-by refused on a partition without a committed offset, the
new offsets committed without metadata.

Registered by kcoord.cli's build_parser (`add_admin_parsers`), which passes in its helpers (CliError, connect,
describe_group), so this module imports nothing of the CLI above it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import errors as E
from .. import wire
from ..client import Client, KafkaError
from ..tables import printable, table
from ..topics import TopicError, validate_name

# Versions every kcoord serves and Apache Kafka 2.4 to 4.x serves (Kafka 4.0 dropped only older ones).
FIND_COORDINATOR_VERSION = 3
OFFSET_FETCH_VERSION = 7
OFFSET_COMMIT_VERSION = 7
LIST_OFFSETS_VERSION = 5
METADATA_VERSION = 9
DELETE_GROUPS_VERSION = 2

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1  # ListOffsets' special timestamps
INACTIVE_STATES = ("Empty", "Dead")  # the states Kafka's tool resets offsets in (Dead: no such group yet)

TopicPartition = tuple[str, int]


def kcoord_version() -> str:
    """The installed distribution's version; from a source tree that was never installed, kcoord.__version__."""
    try:
        return importlib.metadata.version("kcoord")
    except importlib.metadata.PackageNotFoundError:
        # The package face is loaded before any of its modules; read its constant rather than import upward.
        return getattr(sys.modules.get("kcoord"), "__version__", "unknown")


# ---- the reset plan (plain Python: no server needed) ----------------------------------------------------------

@dataclass(frozen=True)
class Move:
    """One partition of a reset: its committed offset before (None: none), the offset it gets, what was asked
    (--to, or current + --shift-by; None for --to-earliest/--to-latest) and the bound it was clamped to, if any."""

    topic: str
    partition: int
    current: int | None
    new: int
    requested: int | None = None
    clamped: str | None = None  # "earliest" or "latest"


class PlanError(ValueError):
    pass


def plan_reset(partitions: Iterable[TopicPartition], mode: str, value: int | None,
               committed: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> list[Move]:
    """Kafka ConsumerGroupCommand's prepareOffsetsToReset for `mode` ("to", "earliest", "latest", "shift"): --to
    and --shift-by land on the requested offset unless it is above the partition's latest offset (then the latest)
    or below its earliest (then the earliest), as checkOffsetsRange does. A PlanError for --shift-by on a partition
    with no committed offset (Kafka: "Cannot shift offset for partition ...")."""
    moves = []
    for tp in sorted(set(partitions)):
        current = committed.get(tp)
        if mode == "earliest":
            moves.append(Move(*tp, current, earliest[tp]))
            continue
        if mode == "latest":
            moves.append(Move(*tp, current, latest[tp]))
            continue
        if mode == "to":
            assert value is not None
            requested = value
        elif mode == "shift":
            assert value is not None
            if current is None or current < 0:  # a negative one is none (Kafka: ListConsumerGroupOffsetsHandler)
                raise PlanError(f"cannot shift {tp[0]}:{tp[1]} by {value}: the group has no committed offset there"
                                + ("" if current is None else f" (it has {current}, not a position)"))
            requested = current + value
        else:
            raise ValueError(f"unknown reset mode {mode!r}")
        if requested > latest[tp]:
            moves.append(Move(*tp, current, latest[tp], requested, "latest"))
        elif requested < earliest[tp]:
            moves.append(Move(*tp, current, earliest[tp], requested, "earliest"))
        else:
            moves.append(Move(*tp, current, requested, requested))
    return moves


# ---- command-line values ----------------------------------------------------------------------------------

def topic_partitions(text: str) -> tuple[str, tuple[int, ...] | None]:
    """--topic: T (every partition of the topic) or T:P[,P...] (those partitions), as kafka-consumer-groups.sh
    reads it."""
    name, sep, parts = text.partition(":")
    try:
        validate_name(name)
    except TopicError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
    if not sep:
        return name, None
    out = []
    for p in parts.split(","):
        if not p.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"{text!r}: partition {p!r} is not a partition number (expected TOPIC:P[,P...], P >= 0)")
        out.append(int(p))
    return name, tuple(sorted(set(out)))


def offset_value(text: str) -> int:
    """--to: an offset, a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (a whole number >= 0; "
                                         "--to-earliest for a partition's first offset)")
    return value


def group_id(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a group id must not be empty")
    return text


# ---- talking to the cluster -------------------------------------------------------------------------------------

class Cluster:
    """The connections a command needs, found as a Kafka client finds them: a group's coordinator through
    FindCoordinator, a partition's leader through Metadata. The bootstrap connection serves a broker at its own
    address (a single kcoord is all three)."""

    def __init__(self, bootstrap: str, connect: Callable[[str], Client]) -> None:
        self.bootstrap = bootstrap
        self._connect = connect
        self._conns: dict[str, Client] = {bootstrap: connect(bootstrap)}
        self._brokers: dict[int, str] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for c in self._conns.values():
            c.close()

    def at(self, address: str) -> Client:
        if address not in self._conns:
            self._conns[address] = self._connect(address)
        return self._conns[address]

    def coordinator_address(self, group: str) -> tuple[str | None, int]:
        """The address of the group's coordinator, or (None, the FindCoordinator error code)."""
        r = self.at(self.bootstrap).request(wire.FindCoordinatorRequest(key=group, key_type=0),
                                            FIND_COORDINATOR_VERSION)
        if r.error_code:
            return None, r.error_code
        return f"{r.host}:{r.port}", E.NONE

    def coordinator(self, group: str) -> tuple[Client | None, int]:
        """The group's coordinator, or (None, the FindCoordinator error code)."""
        address, error = self.coordinator_address(group)
        return (None, error) if address is None else (self.at(address), E.NONE)

    def group_coordinator(self, group: str) -> Client:
        client, error = self.coordinator(group)
        if client is None:
            raise KafkaError(f"FindCoordinator {group}: {E.name(error)}")
        return client

    def partitions(self, topics: Sequence[str]) -> dict[str, dict[int, int]]:
        """Each topic's partitions and their leaders (Metadata); a KafkaError names a topic the cluster lacks."""
        r = self.at(self.bootstrap).request(wire.MetadataRequest(
            topics=[wire.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False),
            METADATA_VERSION)
        self._brokers.update({b.node_id: f"{b.host}:{b.port}" for b in r.brokers})
        out: dict[str, dict[int, int]] = {}
        for t in r.topics:
            if t.error_code == E.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaError(f"topic {t.name!r} does not exist")
            if t.error_code:
                raise KafkaError(f"Metadata {t.name}: {E.name(t.error_code)}")
            out[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
        return out

    def list_offsets(self, leaders: Mapping[TopicPartition, int], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: the offset at `timestamp` (-2 earliest, -1 latest)."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp, leader in sorted(leaders.items()):
            if leader < 0 or leader not in self._brokers:
                raise KafkaError(f"ListOffsets {tp[0]}:{tp[1]}: no leader (LEADER_NOT_AVAILABLE)")
            by_leader.setdefault(leader, []).append(tp)
        out: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            req = wire.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                wire.ListOffsetsRequestListOffsetsTopic(name=t, partitions=[
                    wire.ListOffsetsRequestListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                                timestamp=timestamp) for p in ps])
                for t, ps in topics.items()])
            r = self.at(self._brokers[leader]).request(req, LIST_OFFSETS_VERSION)
            for rt in r.topics:
                for rp in rt.partitions:
                    if rp.error_code:
                        raise KafkaError(f"ListOffsets {rt.name}:{rp.partition_index}: {E.name(rp.error_code)}")
                    out[(rt.name, rp.partition_index)] = rp.offset
        missing = set(leaders) - set(out)
        if missing:
            t, p = min(missing)
            raise KafkaError(f"ListOffsets {t}:{p}: no answer for the partition")
        return out


@dataclass(frozen=True)
class Committed:
    offset: int
    leader_epoch: int | None
    metadata: str


def fetch_committed(coordinator: Client, group: str) -> dict[TopicPartition, Committed]:
    """Every committed offset of the group (OffsetFetch for all topics, which answers only the partitions the group
    has an offset stored for): a negative one too, as it is stored (a client may commit -1; hiding it would hide
    that the partition has a committed offset at all)."""
    r = coordinator.request(wire.OffsetFetchRequest(group_id=group, topics=None, require_stable=False),
                            OFFSET_FETCH_VERSION)
    if r.error_code:
        raise KafkaError(f"OffsetFetch {group}: {E.name(r.error_code)}")
    out = {}
    for t in r.topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaError(f"OffsetFetch {group} {t.name}:{p.partition_index}: {E.name(p.error_code)}")
            out[(t.name, p.partition_index)] = Committed(
                p.committed_offset, p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None,
                p.metadata or "")
    return out


def commit_offsets(coordinator: Client, group: str, offsets: Mapping[TopicPartition, int]) -> list[str]:
    """An admin's OffsetCommit (generation -1, no member id, no metadata or leader epoch, as Kafka's
    alterConsumerGroupOffsets sends it); the partitions refused, as "T:P (ERROR)"."""
    topics: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in sorted(offsets.items()):
        topics.setdefault(t, []).append((p, o))
    req = wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[wire.OffsetCommitRequestTopic(name=t, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                              committed_metadata="") for p, o in ps])
            for t, ps in topics.items()])
    r = coordinator.request(req, OFFSET_COMMIT_VERSION)
    return [f"{t.name}:{p.partition_index} ({E.name(p.error_code)})"
            for t in r.topics for p in t.partitions if p.error_code]


# ---- the commands -------------------------------------------------------------------------------------------

MODES = (("to", "--to"), ("earliest", "--to-earliest"), ("latest", "--to-latest"), ("shift", "--shift-by"))


class AdminCommands:
    """`offsets` and `delete` with the CLI's helpers: `error(message, code)` is its CliError (2: a mistake in the
    command line, 1: refused at run time), `connect(address)` its Client factory, `describe_group(client, group)`
    its group description (a dict with "state")."""

    def __init__(self, error: type[Exception], connect: Callable[[str], Client],
                 describe_group: Callable[[Client, str], dict]) -> None:
        self.error = error
        self.connect = connect
        self.describe_group = describe_group

    def _mode(self, args) -> tuple[str | None, int | None, str | None]:
        """The reset mode given ("to", "earliest", "latest", "shift"), its value and the option's name."""
        values = {"to": args.to, "earliest": args.to_earliest or None, "latest": args.to_latest or None,
                  "shift": args.shift_by}
        for mode, option in MODES:
            if values[mode] is not None:
                return mode, values[mode] if mode in ("to", "shift") else None, option
        return None, None, None

    def offsets(self, args) -> int:
        mode, value, option = self._mode(args)
        if not args.reset:
            if option is not None:
                raise self.error(f"{option} needs --reset", 2)
            if args.dry_run:
                raise self.error("--dry-run needs --reset", 2)
        elif mode is None:
            raise self.error("--reset needs one of --to OFFSET, --to-earliest, --to-latest, --shift-by N", 2)
        scope = merge_scope(args.topic or ())
        with Cluster(args.bootstrap, self.connect) as cluster:
            coordinator = cluster.group_coordinator(args.group)
            if not args.reset:
                return self._list(args, coordinator, scope)
            # --reset was refused above without a mode
            return self._reset(args, cluster, coordinator, scope, mode, value)  # type: ignore[arg-type]

    def _list(self, args, coordinator: Client, scope: dict[str, tuple[int, ...] | None]) -> int:
        committed = fetch_committed(coordinator, args.group)
        if not committed and self.describe_group(coordinator, args.group)["state"] == "Dead":
            raise self.error(f"group {args.group!r} does not exist")
        rows = [(t, p, c) for (t, p), c in sorted(committed.items()) if in_scope(scope, t, p)]
        if args.json:
            print(json.dumps({"group": args.group, "offsets": [
                {"topic": t, "partition": p, "offset": c.offset, "leader_epoch": c.leader_epoch,
                 "metadata": c.metadata} for t, p, c in rows]}, indent=2))
        elif rows:
            print(table(["TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "METADATA"],
                        [[t, p, c.offset, c.leader_epoch, c.metadata or None] for t, p, c in rows]))
        else:
            print(f"(group {args.group!r} has no committed offsets{' in the partitions named' if scope else ''})")
        return 0

    def _reset(self, args, cluster: Cluster, coordinator: Client, scope: dict[str, tuple[int, ...] | None],
               mode: str, value: int | None) -> int:
        group = args.group
        state = self.describe_group(coordinator, group)["state"]
        if state not in INACTIVE_STATES:
            raise self.error(f"Assignments can only be reset if the group {group!r} is inactive, but the current "
                             f"state is {state}.")
        committed = fetch_committed(coordinator, group)
        if scope:
            topics = cluster.partitions(sorted(scope))
            wanted = []
            for t, parts in scope.items():
                for p in parts if parts is not None else sorted(topics[t]):
                    if p not in topics[t]:
                        raise self.error(f"--topic {t}:{p}: topic {t!r} has no partition {p} "
                                         f"(it has {len(topics[t])})")
                    wanted.append((t, p))
        else:
            wanted = sorted(committed)
            if not wanted:
                raise self.error(f"group {group!r} has no committed offsets to reset "
                                 "(name the partitions with --topic)")
            topics = cluster.partitions(sorted({t for t, _ in wanted}))
            gone = [f"{t}:{p}" for t, p in wanted if p not in topics.get(t, {})]
            if gone:
                raise self.error(f"group {group!r} has offsets of partitions that no longer exist: {', '.join(gone)}")
        leaders = {(t, p): topics[t][p] for t, p in wanted}
        earliest = cluster.list_offsets(leaders, EARLIEST_TIMESTAMP) if mode != "latest" else {}
        latest = cluster.list_offsets(leaders, LATEST_TIMESTAMP) if mode != "earliest" else {}
        try:
            moves = plan_reset(wanted, mode, value, {tp: c.offset for tp, c in committed.items()}, earliest, latest)
        except PlanError as e:
            raise self.error(str(e)) from None
        if not args.dry_run:
            refused = commit_offsets(coordinator, group, {(m.topic, m.partition): m.new for m in moves})
            if refused:
                raise self.error(f"group {group!r}: OffsetCommit refused: {', '.join(refused)}")
            after = fetch_committed(coordinator, group)  # what the group now has, read back
            moves = [Move(m.topic, m.partition, m.current, after[(m.topic, m.partition)].offset
                          if (m.topic, m.partition) in after else -1, m.requested, m.clamped) for m in moves]
        if args.json:
            print(json.dumps({"group": group, "dry_run": bool(args.dry_run), "partitions": [
                {"topic": m.topic, "partition": m.partition, "current_offset": m.current, "new_offset": m.new,
                 "requested_offset": m.requested, "clamped_to": m.clamped} for m in moves]}, indent=2))
            return 0
        print(table(["TOPIC", "PARTITION", "CURRENT-OFFSET" if args.dry_run else "PREVIOUS-OFFSET", "NEW-OFFSET",
                     "NOTE"], [[m.topic, m.partition, m.current, m.new, note(m)] for m in moves]))
        if args.dry_run:
            print("(dry run: nothing committed)")
        return 0

    def delete(self, args) -> int:
        groups = list(dict.fromkeys(args.groups))
        results: dict[str, int] = {}
        why: dict[str, str] = {}  # group -> why its coordinator gave no answer
        with Cluster(args.bootstrap, self.connect) as cluster:
            by_coordinator: dict[str, list[str]] = {}
            for g in groups:
                address, error = cluster.coordinator_address(g)
                if address is None:
                    results[g] = error
                else:
                    by_coordinator.setdefault(address, []).append(g)
            for address, names in by_coordinator.items():
                # A coordinator that is gone (a cluster node killed within its lease) costs its own groups only.
                try:
                    r = cluster.at(address).request(wire.DeleteGroupsRequest(groups_names=names),
                                                    DELETE_GROUPS_VERSION)
                except (self.error, KafkaError, OSError) as e:
                    text = str(e) if not isinstance(e, OSError) else f"{address}: {e.strerror or e}"
                    for g in names:
                        results[g], why[g] = E.COORDINATOR_NOT_AVAILABLE, text
                    continue
                results.update({res.group_id: res.error_code for res in r.results})
        rows = [{"group": g, "error": E.name(results[g]) if g in results else "NO_ANSWER"} for g in groups]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print(table(["GROUP", "RESULT"], [[r["group"], "deleted" if r["error"] == "NONE" else r["error"]]
                                              for r in rows]))
        failed = [f"{r['group']} ({r['error']}{': ' + why[r['group']] if r['group'] in why else ''})"
                  for r in rows if r["error"] != "NONE"]
        if failed:
            raise self.error(f"not deleted: {', '.join(failed)}")
        return 0


def merge_scope(specs: Iterable[tuple[str, tuple[int, ...] | None]]) -> dict[str, tuple[int, ...] | None]:
    """--topic values by topic: a topic named without partitions means all of them."""
    out: dict[str, tuple[int, ...] | None] = {}
    for name, parts in specs:
        if parts is None or (name in out and out[name] is None):
            out[name] = None
        else:
            out[name] = tuple(sorted(set(out.get(name) or ()) | set(parts)))
    return out


def in_scope(scope: Mapping[str, tuple[int, ...] | None], topic: str, partition: int) -> bool:
    if not scope:
        return True
    return topic in scope and (scope[topic] is None or partition in scope[topic])  # type: ignore[operator]


def warn(args, message: str) -> None:
    """A warning on stderr, `kcoord COMMAND: warning: ...` (one line, escaped), for a command that goes on: a
    cluster node that did not answer while the others did."""
    print(f"kcoord {args.command}: warning: {printable(' '.join(message.split()))}", file=sys.stderr)


def note(m: Move) -> str | None:
    if m.clamped is None:
        return None
    return f"requested {m.requested}, clamped to {m.clamped}"


def add_admin_parsers(sub: Any, group_cmd: Callable[..., argparse.ArgumentParser], *,
                      error: type[Exception], connect: Callable[[str], Client],
                      describe_group: Callable[[Client, str], dict]) -> None:
    """Registers `kcoord offsets` and `kcoord delete` through cli's `group_cmd` (which adds --bootstrap and
    --json)."""
    cmds = AdminCommands(error, connect, describe_group)
    op = group_cmd("offsets", "a group's committed offsets; reset them (as kafka-consumer-groups.sh --reset-offsets)",
                   cmds.offsets)
    op.add_argument("group", type=group_id, help="the group id")
    op.add_argument("--topic", action="append", type=topic_partitions, metavar="T[:P[,P...]]",
                    help="only this topic, or these partitions of it (repeatable); without it a reset covers every "
                         "partition the group has committed offsets for")
    op.add_argument("--reset", action="store_true",
                    help="reset the offsets (refused unless the group is Empty or does not exist)")
    how = op.add_mutually_exclusive_group()
    how.add_argument("--to", type=offset_value, metavar="OFFSET",
                     help="reset to OFFSET, clamped to the partition's [earliest, latest]")
    how.add_argument("--to-earliest", action="store_true", help="reset to each partition's earliest offset")
    how.add_argument("--to-latest", action="store_true", help="reset to each partition's latest offset")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="move each committed offset by N (negative: back), clamped to [earliest, latest]")
    op.add_argument("--dry-run", action="store_true", help="print the plan (current and new offsets), commit nothing")
    dp = group_cmd("delete", "delete groups and their committed offsets (DeleteGroups; only groups without members)",
                   cmds.delete)
    dp.add_argument("groups", nargs="+", type=group_id, metavar="GROUP", help="the groups to delete")
