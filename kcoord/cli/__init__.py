"""`kcoord` command line: this module is the `kcoord` command and its group, topic, store and cluster commands;
`plan`, `offsets`/`delete`, `users` and `acls` are its modules plan.py, admin.py, users.py and acls.py.

    kcoord serve [--port 9092] [--data-dir DIR] [--topic orders:12] [--set group.initial.rebalance.delay.ms=0]
                 [--config FILE]
    kcoord groups [--state Stable] [--json]
    kcoord describe GROUP [--json]
    kcoord remove-members GROUP --instance-id A [--instance-id B] [--reason TEXT] [--json]
    kcoord topics [--create NAME:PARTITIONS] [--grow NAME:PARTITIONS] [--delete NAME] [--json]
    kcoord apis [--json]
    kcoord store check (DIR | postgresql://...) [--json]
    kcoord store compact DIR [--json]
    kcoord cluster --store postgresql://... [--check] [--json]
    kcoord offsets GROUP [--reset (--to N | --to-earliest | --to-latest | --shift-by N) [--topic T[:P,...]]
                   [--dry-run]] [--json]
    kcoord delete GROUP [GROUP...] [--json]
    kcoord users add NAME [--mechanism M] [--iterations N] [--password-file F] [--data-dir DIR] [--json]
    kcoord users list [--json]
    kcoord users delete NAME [--mechanism M] [--json]
    kcoord acls (--add | --list | --remove) [--allow-principal P] [--deny-principal P] [--allow-host H]
                [--deny-host H] [--operation OP] [--topic T] [--group G] [--cluster]
                [--resource-pattern-type literal|prefixed|match|any] [--principal P] [--force] [--json]
    kcoord --version

The group commands talk to a running server over the Kafka protocol (--bootstrap, default 127.0.0.1:9092).

Errors, in every command and with or without --json: one line on stderr, ``kcoord COMMAND: what: problem``, naming
the input at fault, and nothing on stdout; never a traceback. The exit status says which kind: 2 for a mistake in
the command line or its input (an argument, a setting, a file), 1 for a refusal at run time (no server to talk
to, a group that does not exist, a server's error code, a store that cannot be served). Where a command does
several things (topics --create/--grow, remove-members) it prints what it did on stdout and its refused parts on
that one stderr line, and exits 1; so does a report that finds a problem (store check of a damaged store,
cluster --check): the report on stdout, the first problem on the line. A command that asks every cluster node
(groups) and hears from some of them lists what they answered and exits 0, with a line ``kcoord COMMAND: warning:
...`` on stderr for each node that did not answer. Peer-controlled strings (group, member, instance and client
ids, hosts, reasons) are escaped in the text output (tables.printable); --json escapes them as JSON does. A reader
that stops early
(``kcoord describe G | head -1``) ends the command quietly with 141, as a process killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import sys

from .. import errors as E
from .. import wire
from ..assignors import AssignmentError, decode_assignment
from ..client import (
    PLAINTEXT,
    Client,
    ClientConfigError,
    ClientSecurity,
    KafkaError,
    Unreachable,
    bootstrap_list,
    connect_first,
    security_from_properties,
)
from ..config import PG_SCHEMES, ServerConfig, SettingError, parse_properties
from ..events import LOG_FORMATS, configure_logging
from ..groups.base import KCOORD_DESCRIBE_TAG
from ..pgstore import Superseded
from ..security.tls import ANONYMOUS  # the principal of a member that did not authenticate (Kafka's name)
from ..server import run
from ..store import STORE_FILE, StoreError, accept_store, check_store, compact_store
from ..tables import printable, ranges, table
from ..topics import TopicError, parse_topic_spec, validate_name
from .acls import add_acls_parser  # `kcoord acls`
from .admin import add_admin_parsers, kcoord_version, warn  # `kcoord offsets`, `kcoord delete`, --version
from .users import add_users_parser  # `kcoord users`


class CliError(Exception):
    """A command's failure as its one line on stderr; `code` is the exit status (2: input, 1: refused)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def read_properties(path: str) -> list[tuple[str, str, int]]:
    """A properties file of Kafka-named settings (a Kafka server.properties), read with Java's properties syntax
    as Kafka reads it (kcoord.config.parse_properties), from UTF-8 text: (name, value, line) per entry. A
    ValueError names the file (and the line) that cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    for n, raw in enumerate(data.split(b"\n"), 1):
        if b"\0" in raw:
            raise ValueError(f"{path}:{n}: binary data, not a properties file")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{n}: not UTF-8 text, not a properties file") from None
    try:
        return parse_properties(data.decode("utf-8-sig"))
    except ValueError as e:  # a malformed \\uXXXX, named by its line
        raise ValueError(f"{path}:{e}") from None


def server_config(args) -> ServerConfig:
    settings: dict[str, str] = {}
    where: dict[str, str] = {}  # a setting from the file -> "--config FILE:LINE: ", to name it when refused
    if args.config:
        try:
            entries = read_properties(args.config)
        except ValueError as e:
            raise ValueError(f"--config {e}") from None
        for name, value, line in entries:  # a name given twice: the later wins, as in Java's Properties
            settings[name] = value
            where[name] = f"--config {args.config}:{line}: "
    for item in args.set or ():  # --set wins over the file
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set takes NAME=VALUE, not {item!r}")
        settings[key.strip()] = value.strip()
        where.pop(key.strip(), None)
    for spec in args.topic or ():
        try:
            parse_topic_spec(spec)
        except TopicError as e:
            raise ValueError(f"--topic {spec}: {e}") from None
    try:
        return ServerConfig.from_kafka(settings, host=args.host, port=args.port, advertised_host=args.advertised_host,
                                       advertised_port=args.advertised_port, topics=list(args.topic or ()),
                                       data_dir=args.data_dir, store_url=args.store, metrics_port=args.metrics_port,
                                       metrics_host=args.metrics_host)
    except SettingError as e:  # a setting from the file is named with its line
        raise ValueError(f"{where.get(e.name, '')}{e}") from None


def _serve(args) -> int:
    configure_logging("DEBUG" if args.verbose else args.log_level, args.log_format)
    try:
        cfg = server_config(args)
    except ValueError as e:
        raise CliError(str(e), 2) from None
    if args.require_store:
        if cfg.data_dir is None:
            raise CliError("--require-store needs --data-dir (the directory that must hold the store)", 2)
        if not os.path.isfile(os.path.join(cfg.data_dir, STORE_FILE)):
            raise CliError(f"--require-store: {cfg.data_dir} holds no store ({STORE_FILE}): refusing to start with a "
                           "new, empty one")
    try:
        run(cfg, args.loop)
    except ImportError:
        raise CliError("--loop uvloop needs uvloop installed", 2) from None
    except Superseded as e:  # (a StoreError) it was serving, and stopped
        raise CliError(str(e)) from None
    except StoreError as e:
        hint = ""
        if cfg.data_dir and os.path.isfile(os.path.join(cfg.data_dir, STORE_FILE)):
            hint = f" (`kcoord store check {cfg.data_dir}` gives a full report)"
        raise CliError(f"refusing to start: {e}{hint}") from None
    except ValueError as e:  # a start-up topic the catalogue refuses
        raise CliError(f"refusing to start: {e}") from None
    except OSError as e:
        if e.filename:
            raise CliError(f"{e.filename}: {e.strerror}") from None
        raise CliError(f"cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}") from None
    return 0


def _cluster(args) -> int:
    if not args.store.startswith(PG_SCHEMES):
        raise CliError(f"--store: {args.store.split('@')[-1]!r} is not a postgresql:// URL", 2)
    from ..pgstore import describe_cluster  # psycopg only when asked
    try:
        info = describe_cluster(args.store)
    except StoreError as e:
        raise CliError(str(e)) from None
    held: dict[int | None, list[int]] = {}
    for lease in info["leases"]:
        held.setdefault(lease["node"], []).append(lease["partition"])
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        rows = []
        for n in info["nodes"]:
            mine = held.get(n["node"], []) if n["live"] else []
            rows.append([n["node"], f"{n['host']}:{n['port']}", "live" if n["live"] else "gone", n["lease_left_ms"],
                         len(mine), ranges(mine) or "none"])
        if held.get(None):
            rows.append(["-", "-", "unowned", "-", len(held[None]), ranges(held[None])])
        print(table(["node", "address", "state", "lease left ms", "partitions", "which"], rows))
        print(f"{info['partitions']} coordinator partitions, "
              f"{sum(x['records'] for x in info['leases'])} group records, {info['topic_records']} topic records; "
              f"write log: {'; '.join(info['problems']) if info['problems'] else 'one writer per partition at a time'}")
    if args.check and info["problems"]:
        raise CliError(f"{len(info['problems'])} problem(s) in the write log: {info['problems'][0]}")
    return 0


def _store_dir(path: str) -> None:
    """`kcoord store check/accept DIR`: DIR must be a directory (a mistake in the argument: exit 2)."""
    if not os.path.exists(path):
        raise CliError(f"{path}: no such directory", 2)
    if not os.path.isdir(path):
        raise CliError(f"{path}: not a directory", 2)


def _store_check(args) -> int:
    if args.dir.startswith(PG_SCHEMES):
        from ..pgstore import check_pg_store  # psycopg only when asked
        try:
            report = check_pg_store(args.dir)
        except StoreError as e:  # nothing read: no report
            from ..pgstore import safe_url
            raise CliError(f"{safe_url(args.dir)}: {e}") from None
    else:
        _store_dir(args.dir)
        report = check_store(args.dir)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(table(["store", "state", "records", "groups", "members", "offsets", "topics", "bytes"], [[
            report.path, "ok" if report.ok else "DAMAGED", report.records, report.groups, report.members,
            report.offsets, report.topics, report.bytes]]))
        for p in report.problems:
            print(f"problem: {p}")
    if not report.ok:  # the report on stdout, the verdict on the one stderr line (as `cluster --check`)
        first = report.problems[0] if report.problems else "damaged"
        raise CliError(f"{report.path if args.dir.startswith(PG_SCHEMES) else args.dir}: damaged: "
                       f"{len(report.problems)} problem(s): {first}")
    return 0


def _on_data_dir(args, command: str, why: str, fn):
    """`fn(args.dir)` for a store command that takes only a data directory (a PostgreSQL URL: one line saying
    `why`, exit 2); a StoreError is the command's one line."""
    if args.dir.startswith(PG_SCHEMES):
        from ..pgstore import safe_url
        raise CliError(f"{safe_url(args.dir)}: store {command} takes a data directory; a PostgreSQL store is "
                       f"{why}", 2)
    _store_dir(args.dir)
    try:
        return fn(args.dir)
    except StoreError as e:
        raise CliError(str(e)) from None


def _store_compact(args) -> int:
    r = _on_data_dir(args, "compact", "PostgreSQL's to vacuum", compact_store)
    if args.json:
        print(json.dumps({"path": r.path, "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
                          "converted": r.converted}, indent=2))
    else:
        print(f"{r.path}: {r.bytes_before} -> {r.bytes_after} bytes"
              + ("; freed pages are now given back while serving" if r.converted else ""))
    return 0


def _store_accept(args) -> int:
    accepted = _on_data_dir(args, "accept", "PostgreSQL's to keep (it has no commit witness to accept)", accept_store)
    if not accepted:
        print(f"{args.dir}: nothing to accept; the store holds every acknowledged commit")
    for text in accepted:
        print(f"accepted: {text}")
    return 0


# ---- group commands -----------------------------------------------------------------------------------

# The states a group reports (classic: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead; consumer and
# connect groups: Empty, Assigning, Reconciling, Stable, Dead), as Kafka names them; --state takes them in any case.
GROUP_STATES = ("Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "Dead")


def group_state(text: str) -> str:
    """--state: a group state by its Kafka name, in any case (as kafka-consumer-groups.sh reads it)."""
    for state in GROUP_STATES:
        if text.strip().lower() == state.lower():
            return state
    raise argparse.ArgumentTypeError(f"{text!r} is not a group state (one of {', '.join(GROUP_STATES)})")


def bootstrap_address(text: str) -> str:
    """--bootstrap: HOST:PORT, or several separated by commas as Kafka's bootstrap.servers (tried in turn)."""
    addresses = bootstrap_list(text)
    for address in addresses or [text]:
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            where = "" if addresses == [text] else f" (in {text!r})"
            raise argparse.ArgumentTypeError(f"{address!r}{where} is not HOST:PORT (a port within 1..65535)")
    return ",".join(addresses)


def tcp_port(lo: int):
    def parse(text: str) -> int:
        try:
            port = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
        if not lo <= port <= 65535:
            raise argparse.ArgumentTypeError(f"{port} is not a TCP port ({lo}..65535)")
        return port
    return parse


COMMAND_CONFIG_HELP = ("a Kafka client configuration for a secured listener, as Kafka's tools take it: "
                       "security.protocol, sasl.mechanism, sasl.jaas.config (or sasl.username and sasl.password), "
                       "ssl.truststore.location and ssl.keystore.location (PEM), ssl.key.password")
SECURITY = [PLAINTEXT]  # how this run's commands connect: --command-config's, read in main()


def connect(bootstrap: str) -> Client:
    """A client of the server at `bootstrap`, or of the first of a comma-separated list that answers (tried in
    turn), secured as --command-config says; a CliError when there is none to talk to."""
    try:
        return connect_first(bootstrap, security=SECURITY[0])
    except Unreachable as e:  # a TLS error too: "cannot connect to HOST:PORT: [SSL: CERTIFICATE_VERIFY_FAILED] ..."
        raise CliError(str(e)) from None


def command_config(path: str) -> ClientSecurity:
    """--command-config FILE: a Kafka client configuration, as Kafka's tools take it (security.protocol,
    sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password, PEM ssl.truststore/keystore or librdkafka's
    ssl.ca.location, ...). Settings that are no security setting are left aside with one line saying so."""
    try:
        security, ignored = security_from_properties({k: v for k, v, _ in read_properties(path)})
    except ClientConfigError as e:
        raise CliError(f"--command-config {path}: {e}", 2) from None
    except ValueError as e:  # the file: unreadable, not text, a malformed escape (named with its line)
        raise CliError(f"--command-config {e}", 2) from None
    if ignored:
        print(f"--command-config {printable(path)}: not used by kcoord's tools: {', '.join(map(printable, ignored))}",
              file=sys.stderr)
    return security


def consumer_assignment(data: bytes) -> dict[str, list[int]] | None:
    """The partitions in ConsumerProtocolAssignment bytes (protocol type "consumer"), or None if unreadable."""
    try:
        parts = decode_assignment(data).partitions
    except AssignmentError:
        return None
    return {t: sorted(ps) for t, ps in parts.items()}


def _named_partitions(assignment) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}


MEMBER_TYPES = {0: "classic", 1: "consumer"}  # ConsumerGroupDescribe v1 MemberType (-1: unknown)
# The describe requests ask for kcoord's extension (the server sends it only to a request carrying its tag).
ASK_EXTENSION = [(KCOORD_DESCRIBE_TAG, b"")]


def describe_consumer_group(client: Client, group: str) -> dict | None:
    """A KIP-848 consumer group as ConsumerGroupDescribe gives it (None if the group is not one)."""
    g = client.request(wire.ConsumerGroupDescribeRequest(group_ids=[group], unknown_tags=ASK_EXTENSION), 1).groups[0]
    if g.error_code in (E.GROUP_ID_NOT_FOUND, E.UNSUPPORTED_VERSION):  # not one, or consumer groups are off
        return None
    if g.error_code:
        raise KafkaError(f"ConsumerGroupDescribe {group}: {E.name(g.error_code)}")
    extra = dict(g.unknown_tags or ())
    ext = json.loads(extra[KCOORD_DESCRIBE_TAG]) if KCOORD_DESCRIBE_TAG in extra else {}
    members = []
    for m in g.members:
        more = ext.get(m.member_id, {})
        members.append({"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                        "host": m.client_host, "rack": m.rack_id, "protocol": MEMBER_TYPES.get(m.member_type),
                        "member_epoch": m.member_epoch,
                        "previous_member_epoch": more.get("previous_member_epoch"), "state": more.get("state"),
                        "subscribed_topics": list(m.subscribed_topic_names),
                        "assignment": _named_partitions(m.assignment),
                        "target_assignment": _named_partitions(m.target_assignment),
                        "pending_revocation": more.get("pending_revocation", {}),
                        "principal": more.get("principal", ANONYMOUS)})
    return {"group": g.group_id, "type": "consumer", "state": g.group_state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name, "members": members}


def _units(c) -> dict:
    return {"connectors": list(c.connectors), "tasks": {t.connector: sorted(t.task_ids) for t in c.tasks}}


def connect_describe_key(client: Client) -> int | None:
    """ConnectGroupDescribe's API key as the server advertises it (its private block may be moved), or None when
    the server does not serve connect groups."""
    keys = [k.api_key for k in client.request(wire.ApiVersionsRequest(), 0).api_keys if k.api_key >= 1000]
    return min(keys) + 3 if len(keys) >= 4 else None


def describe_connect_group(client: Client, group: str) -> dict | None:
    """A connect group as ConnectGroupDescribe gives it (None if the group is not one, or the server has none)."""
    key = connect_describe_key(client)
    if key is None:
        return None
    g = client.request(wire.ConnectGroupDescribeRequest(group_ids=[group], include_authorized_operations=False,
                                                        unknown_tags=ASK_EXTENSION), 0, api_key=key).groups[0]
    if g.error_code == E.GROUP_ID_NOT_FOUND:
        return None
    if g.error_code:
        raise KafkaError(f"ConnectGroupDescribe {group}: {E.name(g.error_code)}")
    extra = dict(g.unknown_tags or ())
    principals = json.loads(extra[KCOORD_DESCRIBE_TAG]).get("principals", {}) if KCOORD_DESCRIBE_TAG in extra else {}
    members = [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                "host": m.client_host, "versions": [m.minimum_version, m.maximum_version],
                "member_epoch": m.member_epoch, "state": m.state, "assignment": _units(m.assignment),
                "target_assignment": _units(m.target_assignment), "pending_revocation": _units(m.pending_revocation),
                "principal": principals.get(m.member_id, ANONYMOUS)}
               for m in g.members]
    return {"group": g.group_id, "type": "connect", "state": g.group_state, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name, "assignor_version": g.assignor_version,
            "computing_member_id": g.computing_member_id, "compute_remaining_ms": g.compute_remaining_ms,
            "delay_remaining_ms": g.delay_remaining_ms, "members": members,
            "history": [{"group_epoch": h.group_epoch, "time_ms": h.timestamp_ms, "reason": h.reason}
                        for h in g.history]}


def describe_group(client: Client, group: str) -> dict:
    """A group as `kcoord describe` shows it: a consumer group through ConsumerGroupDescribe, a connect group
    through ConnectGroupDescribe, a classic group through DescribeGroups."""
    consumer = describe_consumer_group(client, group)
    if consumer is not None:
        return consumer
    connect = describe_connect_group(client, group)
    if connect is not None:
        return connect
    resp = client.request(wire.DescribeGroupsRequest(groups=[group], unknown_tags=ASK_EXTENSION), 5)
    g = resp.groups[0]
    if g.error_code:
        raise KafkaError(f"DescribeGroups {group}: {E.name(g.error_code)}")
    extra = dict(g.unknown_tags or ())
    ext = json.loads(extra[KCOORD_DESCRIBE_TAG]) if KCOORD_DESCRIBE_TAG in extra else {}
    members = []
    for m in g.members:
        assigned = consumer_assignment(m.member_assignment) if g.protocol_type == "consumer" else None
        members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "host": m.client_host,
                        "assignment": assigned if assigned is not None else m.member_assignment.hex(),
                        "principal": ext.get("principals", {}).get(m.member_id, ANONYMOUS)})
    return {"group": g.group_id, "type": "classic", "state": g.group_state, "protocol_type": g.protocol_type,
            "protocol": ext.get("protocol") or g.protocol_data or None, "generation": ext.get("generation"),
            "leader": ext.get("leader"), "members": members, "history": ext.get("history", [])}


def _fmt_units(u: dict) -> str:
    """Connectors, then each connector's tasks as ranges: "a b | a:0-3 b:0,2"."""
    tasks = " ".join(f"{c}:{ranges(ts)}" for c, ts in sorted(u["tasks"].items()) if ts)
    conns = " ".join(sorted(u["connectors"]))
    return " | ".join(x for x in (conns, tasks) if x) or "-"


def _ms(v: int) -> str:
    return "-" if v < 0 else f"{v / 1000:.1f}s"


def _fmt_assignment(a) -> str:
    if isinstance(a, dict):
        return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(a.items())) or "-"
    return a or "-"


def brokers(bootstrap: str) -> list[str]:
    """The addresses of every node (Metadata): a single server is the bootstrap address that answered, whatever it
    advertises."""
    with connect(bootstrap) as c:
        nodes = c.request(wire.MetadataRequest(topics=[]), 9).brokers
    return [c.address] if len(nodes) <= 1 else [f"{b.host}:{b.port}" for b in nodes]


def coordinator_address(bootstrap: str, group: str) -> str:
    """Where `group` is served: the bootstrap server itself, or in a cluster the node FindCoordinator names."""
    nodes = brokers(bootstrap)
    if len(nodes) == 1:
        return nodes[0]
    with connect(bootstrap) as c:
        r = c.request(wire.FindCoordinatorRequest(key=group, key_type=0), 3)
    if r.error_code:
        raise CliError(f"group {group!r}: FindCoordinator: {E.name(r.error_code)}")
    return f"{r.host}:{r.port}"


def _describe(args) -> int:
    with connect(coordinator_address(args.bootstrap, args.group)) as c:
        d = describe_group(c, args.group)
    if d["state"] == "Dead":
        raise CliError(f"group {args.group!r} does not exist")
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    d = {**d, **{k: printable(v) for k, v in d.items() if isinstance(v, str)}}  # the header line's strings
    if d["type"] == "consumer":
        print(f"GROUP {d['group']}  type consumer  state {d['state']}  group epoch {d['group_epoch']}  "
              f"assignment epoch {d['assignment_epoch']}  assignor {d['assignor']}\n")
        print(table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "PROTOCOL", "EPOCH", "STATE", "ASSIGNMENT",
                     "TARGET", "PENDING-REVOCATION"],
                    [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"], m["protocol"] or "-",
                      m["member_epoch"], m["state"],
                      _fmt_assignment(m["assignment"]), _fmt_assignment(m["target_assignment"]),
                      _fmt_assignment(m["pending_revocation"])] for m in d["members"]])
              if d["members"] else "(no members)")
        return 0
    if d["type"] == "connect":
        print(f"GROUP {d['group']}  type connect  state {d['state']}  group epoch {d['group_epoch']}  "
              f"assignment epoch {d['assignment_epoch']}  assignor {d['assignor'] or '-'} v{d['assignor_version']}\n"
              f"computing {d['computing_member_id'] or '-'} (lease {_ms(d['compute_remaining_ms'])})  "
              f"scheduled delay {_ms(d['delay_remaining_ms'])}\n")
        print(table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "VERSIONS", "EPOCH", "STATE", "ASSIGNMENT",
                     "TARGET", "PENDING-REVOCATION"],
                    [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"],
                      "{}-{}".format(*m["versions"]), m["member_epoch"], m["state"], _fmt_units(m["assignment"]),
                      _fmt_units(m["target_assignment"]), _fmt_units(m["pending_revocation"])] for m in d["members"]])
              if d["members"] else "(no members)")
        if d["history"]:
            print("\nREBALANCE HISTORY (newest last)")
            print(table(["TIME", "EPOCH", "REASON"], [
                [datetime.datetime.fromtimestamp(h["time_ms"] / 1000, datetime.UTC).strftime("%H:%M:%S.%f")[:-3],
                 h["group_epoch"], h["reason"]] for h in d["history"]]))
        return 0
    print(f"GROUP {d['group']}  type classic  state {d['state']}  generation {d['generation']}  protocol "
          f"{d['protocol_type'] or '-'}/{d['protocol'] or '-'}  leader {d['leader'] or '-'}\n")
    print(table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"], _fmt_assignment(m["assignment"])]
                 for m in d["members"]]) if d["members"] else "(no members)")
    if d["history"]:
        print("\nREBALANCE HISTORY (newest last)")
        print(table(["TIME", "GEN", "TRIGGER", "MEMBER-ID", "INSTANCE-ID", "REASON"], [
            [datetime.datetime.fromtimestamp(h["time_ms"] / 1000, datetime.UTC).strftime("%H:%M:%S.%f")[:-3],
             h["generation"], h["trigger"], h["member_id"], h["group_instance_id"], h["reason"]]
            for h in d["history"]]))
    return 0


def _groups(args) -> int:
    found = {}
    nodes = brokers(args.bootstrap)
    unanswered = []
    for address in nodes:  # each node lists the groups it serves, as Kafka's brokers do
        try:  # a node that is gone (killed, still within its lease) is named in a warning; the others are listed
            with connect(address) as c:
                resp = c.request(wire.ListGroupsRequest(states_filter=args.state or [],
                                                        types_filter=args.type or []), 5)
        except (CliError, KafkaError, OSError) as e:
            if len(nodes) == 1:
                raise
            unanswered.append(f"{e}" if isinstance(e, CliError) else f"{address}: {getattr(e, 'strerror', None) or e}")
            continue
        if resp.error_code:
            raise CliError(f"ListGroups at {address}: {E.name(resp.error_code)}")
        found.update({g.group_id: (g.group_id, g.group_type, g.group_state, g.protocol_type) for g in resp.groups})
    if len(unanswered) == len(nodes):
        raise CliError(f"no node answered ListGroups: {'; '.join(unanswered)}")
    for problem in unanswered:
        warn(args, f"{problem}; the groups that node serves are not listed")
    rows = sorted(found.values())
    if args.json:
        print(json.dumps([{"group": g, "type": t, "state": s, "protocol_type": p} for g, t, s, p in rows], indent=2))
    else:
        print(table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"], [list(r) for r in rows]) if rows else "(no groups)")
    return 0


def _remove_members(args) -> int:
    # KIP-345 admin removal: a batch LeaveGroup v5 naming instance ids, with an empty member id each.
    reason = args.reason or "member was removed by an admin"
    req = wire.LeaveGroupRequest(group_id=args.group, members=[
        wire.LeaveGroupRequestMemberIdentity(member_id="", group_instance_id=iid, reason=reason)
        for iid in args.instance_id])
    with connect(coordinator_address(args.bootstrap, args.group)) as c:
        resp = c.request(req, 5)
    results = [{"group_instance_id": m.group_instance_id, "error": E.name(m.error_code)} for m in resp.members]
    if args.json:
        print(json.dumps({"error": E.name(resp.error_code), "members": results}, indent=2))
    elif results:
        print(table(["INSTANCE-ID", "RESULT"], [[r["group_instance_id"], r["error"]] for r in results]))
    if resp.error_code:
        raise CliError(f"group {args.group!r}: LeaveGroup: {E.name(resp.error_code)}")
    failed = [f"{r['group_instance_id']} ({r['error']})" for r in results if r["error"] != "NONE"]
    if failed:
        raise CliError(f"group {args.group!r}: not removed: {', '.join(failed)}")
    return 0


def topic_specs(option: str, specs: list[str] | None) -> list[tuple[str, int]]:
    """NAME:PARTITIONS arguments of `option`, each checked (a CliError names the one at fault)."""
    out: dict[str, int] = {}
    for spec in specs or ():
        try:
            name, n = parse_topic_spec(spec)
        except TopicError as e:
            raise CliError(f"{option} {spec}: {e}", 2) from None
        if name in out:
            raise CliError(f"{option}: topic {name!r} is given twice: with {out[name]} and {n} partitions", 2)
        out[name] = n
    return list(out.items())


def _topics(args) -> int:
    create = topic_specs("--create", args.create)
    grow = topic_specs("--grow", args.grow)
    delete = list(dict.fromkeys(args.delete or ()))
    for name in delete:
        try:
            validate_name(name)
        except TopicError as e:
            raise CliError(f"--delete: {e}", 2) from None
    with connect(args.bootstrap) as c:
        problems = []
        deleted = []  # (name, partitions) of each topic deleted
        known = {t.name: len(t.partitions) for t in c.request(wire.MetadataRequest(
            topics=[wire.MetadataRequestTopic(name=n) for n in delete], allow_auto_topic_creation=False), 12).topics
            if t.error_code == 0} if delete else {}
        for name, n in create:
            r = c.request(wire.CreateTopicsRequest(timeout_ms=30_000, topics=[
                wire.CreateTopicsRequestCreatableTopic(name=name, num_partitions=n, replication_factor=1)]), 5)
            res = r.topics[0]
            if res.error_code:
                problems.append(f"create {name}: {E.name(res.error_code)} {res.error_message or ''}".rstrip())
        for name in delete:
            r = c.request(wire.DeleteTopicsRequest(timeout_ms=30_000, topic_names=[name]), 5)
            res = r.responses[0]
            if res.error_code:
                problems.append(f"delete {name}: {E.name(res.error_code)} {res.error_message or ''}".rstrip())
            else:
                deleted.append((name, known.get(name)))
        for name, n in grow:
            r = c.request(wire.CreatePartitionsRequest(timeout_ms=30_000, topics=[
                wire.CreatePartitionsRequestCreatePartitionsTopic(name=name, count=n, assignments=None)]), 3)
            res = r.results[0]
            if res.error_code:
                problems.append(f"grow {name}: {E.name(res.error_code)} {res.error_message or ''}".rstrip())
        meta = c.request(wire.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    rows = sorted((t.name, len(t.partitions), t.topic_id.hex()) for t in meta.topics if t.error_code == 0)
    if args.json:
        print(json.dumps({"topics": [{"topic": n, "partitions": p, "topic_id": i} for n, p, i in rows],
                          "deleted": [{"topic": n, "partitions": p} for n, p in deleted],
                          "errors": problems}, indent=2))
    else:
        # DeleteTopics answers no count of the offsets that went with a topic: say that every group's went.
        for name, count in deleted:
            print(f"deleted topic {name}{'' if count is None else f' ({count} partitions)'} and every group's "
                  "committed offsets of it")
        if deleted:
            print()
        print(table(["TOPIC", "PARTITIONS", "TOPIC-ID"], [list(r) for r in rows]) if rows else "(no topics)")
    if problems:
        raise CliError("; ".join(problems))
    return 0


def _apis(args) -> int:
    rows = []
    for key, cls in sorted(wire.REQUEST_TYPES.items()):
        flex = cls.FIRST_FLEXIBLE_VERSION
        rows.append({"api_key": key, "name": cls.__name__.removesuffix("Request"), "min_version": cls.MIN_VERSION,
                     "max_version": cls.MAX_VERSION, "first_flexible_version": flex if flex >= 0 else None})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(table(["KEY", "API", "VERSIONS", "FLEXIBLE-FROM"], [  # columns as wide as the longest name
        [r["api_key"], r["name"], f"{r['min_version']}-{r['max_version']}",
         None if r["first_flexible_version"] is None else f"v{r['first_flexible_version']}"] for r in rows]))
    return 0


class HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, "(default: X)", unless its text already says it or it has none
    (None, False, an empty list); an option with a default but no help text gets that line alone."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        return bool(action.option_strings) and action.default not in (None, False, [], argparse.SUPPRESS)

    def _format_action(self, action: argparse.Action) -> str:
        if action.help is None and self._shows_default(action):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or not self._shows_default(action):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a mistake reported as one line, `kcoord COMMAND: problem`, and exit status 2; every
    command's help shows the defaults (HelpFormatter)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="kcoord", description="A Kafka-compatible group coordinator.")
    ap.add_argument("--version", action="version", version=f"kcoord {kcoord_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("serve", help="run the coordinator (a Kafka-wire server)")
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=tcp_port(0), default=9092, help="0..65535 (0: any free port)")
    sp.add_argument("--advertised-host", help="host clients are told to connect to (default: --host)")
    sp.add_argument("--advertised-port", type=tcp_port(1),
                    help="port clients are told to connect to (default: --port)")
    sp.add_argument("--topic", action="append", metavar="NAME:PARTITIONS", help="a topic to create at start")
    sp.add_argument("--data-dir", metavar="DIR",
                    help="keep groups and committed offsets durably in DIR (default: in memory only)")
    sp.add_argument("--require-store", action="store_true",
                    help="refuse to start unless --data-dir already holds a store (a mistyped DIR would start empty)")
    sp.add_argument("--store", metavar="URL",
                    help="keep state in PostgreSQL (postgresql://USER@HOST:PORT/DB) shared by the nodes of a cluster, "
                         "each with its own --set node.id (instead of --data-dir; README \"A cluster on PostgreSQL\")")
    sp.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help="a Kafka-named setting, e.g. group.initial.rebalance.delay.ms=0 (repeatable)")
    sp.add_argument("--config", metavar="FILE",
                    help="a Kafka server.properties (Java properties syntax): the settings kcoord uses are read, "
                         "Kafka's others are named in a warning and left out")
    sp.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                    help="event loop (auto: uvloop when installed)")
    sp.add_argument("--metrics-port", type=tcp_port(0), metavar="PORT",
                    help="serve Prometheus metrics on http://HOST:PORT/metrics, with /healthz and /readyz "
                         "(0: any free port; default: no endpoint)")
    sp.add_argument("--metrics-host", metavar="HOST", help="address the metrics endpoint listens on (default: --host)")
    sp.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO", type=str.upper,
                    help="INFO: starts, stops, rebalances, expiries, admin removals; DEBUG adds connections")
    sp.add_argument("--log-format", choices=LOG_FORMATS, default="text", help="json: one JSON object per line")
    sp.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level DEBUG")
    sp.set_defaults(func=_serve)

    def group_cmd(name: str, help: str, func) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--bootstrap", default="127.0.0.1:9092", type=bootstrap_address,
                       help="HOST:PORT of a kcoord server, or several separated by commas (tried in turn)")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
        p.set_defaults(func=func)
        return p

    gp = group_cmd("groups", "list groups with their type and state", _groups)
    gp.add_argument("--state", action="append", type=group_state,
                    help=f"only groups in this state (repeatable; any case): {', '.join(GROUP_STATES)}")
    gp.add_argument("--type", action="append", choices=("classic", "consumer", "connect"),
                    help="only groups of this type (repeatable)")
    group_cmd("describe", "describe a group: members, assignments, rebalance history", _describe).add_argument(
        "group")
    rm = group_cmd("remove-members", "remove static members by instance id (KIP-345)", _remove_members)
    rm.add_argument("group")
    rm.add_argument("--instance-id", action="append", required=True, help="group.instance.id to remove")
    rm.add_argument("--reason", help="KIP-800 reason (default: member was removed by an admin)")
    tp = group_cmd("topics", "list topics; create or grow them", _topics)
    tp.add_argument("--create", action="append", metavar="NAME:PARTITIONS")
    tp.add_argument("--grow", action="append", metavar="NAME:PARTITIONS", help="raise the partition count")
    tp.add_argument("--delete", action="append", metavar="NAME",
                    help="delete a topic and every group's committed offsets of it (DeleteTopics)")
    add_admin_parsers(sub, group_cmd, error=CliError, connect=connect, describe_group=describe_group)
    add_users_parser(sub, error=CliError, connect=connect, bootstrap_type=bootstrap_address,
                     command_config_help=COMMAND_CONFIG_HELP)
    add_acls_parser(sub, group_cmd, error=CliError, connect=connect)
    sa = sub.add_parser("apis", help="list the APIs and versions the codec implements")
    sa.add_argument("--json", action="store_true")
    sa.set_defaults(func=_apis)
    st = sub.add_parser("store", help="inspect, accept or compact a store").add_subparsers(dest="store_command",
                                                                                          required=True)
    sc = st.add_parser("check", help="check a store's integrity, record by record")
    sc.add_argument("dir", metavar="DIR|URL", help="the --data-dir of a kcoord server, or the --store "
                    "(postgresql://...) of a cluster")
    sc.add_argument("--json", action="store_true")
    sc.set_defaults(func=_store_check)
    sx = st.add_parser("accept", help="take a store refused for missing acknowledged commits as it now is "
                                      "(read `kcoord store check` first: what it lost stays lost)")
    sx.add_argument("dir", help="the --data-dir of a stopped kcoord server")
    sx.set_defaults(func=_store_accept)
    sk = st.add_parser("compact", help="rewrite a stopped server's store without its free pages (VACUUM), and "
                                       "convert an older store to give freed pages back while serving")
    sk.add_argument("dir", help="the --data-dir of a stopped kcoord server")
    sk.add_argument("--json", action="store_true")
    sk.set_defaults(func=_store_compact)
    cl = sub.add_parser("cluster", help="the nodes of a cluster on PostgreSQL and the partitions each holds")
    cl.add_argument("--store", required=True, metavar="URL", help="the nodes' --store (postgresql://...)")
    cl.add_argument("--check", action="store_true",
                    help="exit 1 if the write log shows a partition written by two nodes at once")
    cl.add_argument("--json", action="store_true", help="machine-readable output")
    cl.set_defaults(func=_cluster)
    from .plan import add_plan_parser  # `kcoord plan`; PySpark is imported only when it runs
    add_plan_parser(sub)
    return ap


STDOUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a writer killed by a closed pipe


def _stdout_closed() -> int:
    """stdout's reader has gone (`| head`): point stdout at /dev/null so nothing more fails on it, exit quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # an in-process stdout without a file descriptor
        pass
    return STDOUT_CLOSED


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    where = "kcoord " + " ".join(x for x in (args.command, getattr(args, "store_command", None),
                                             getattr(args, "users_command", None)) if x)
    if extra:  # argparse would name no command ("kcoord: unrecognized arguments"); the contract names it
        parser.exit(2, f"{where}: unrecognized arguments: {' '.join(extra)}\n")
    try:
        SECURITY[0] = PLAINTEXT
        if getattr(args, "command_config", None):
            SECURITY[0] = command_config(args.command_config)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        return 130
    except CliError as e:
        message, code = str(e), e.code
    except KafkaError as e:
        message, code = f"{args.bootstrap}: {e}" if hasattr(args, "bootstrap") else str(e), 1
    except OSError as e:
        message = f"{e.filename}: {e.strerror}" if e.filename else (e.strerror or str(e))
        if hasattr(args, "bootstrap"):
            message = f"{args.bootstrap}: {message}"
        code = 1
    print(f"{where}: {printable(' '.join(message.split()))}", file=sys.stderr)
    return code

