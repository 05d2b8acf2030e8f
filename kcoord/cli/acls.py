"""`kcoord acls`: a running server's ACLs through Kafka's ACL admin APIs (DescribeAcls, CreateAcls, DeleteAcls), with
kafka-acls.sh's options and semantics (Kafka's AclCommand).

    kcoord acls --add (--allow-principal P | --deny-principal P)... [--allow-host H]... [--deny-host H]...
                [--operation OP]... (--topic T | --group G | --cluster)... [--resource-pattern-type literal|prefixed]
    kcoord acls --list [--topic T | --group G | --cluster]... [--resource-pattern-type TYPE] [--principal P]...
    kcoord acls --remove (--topic T | --group G | --cluster)... [--resource-pattern-type TYPE]
                [--allow-principal P]... [--deny-principal P]... [--allow-host H]... [--deny-host H]...
                [--operation OP]... [--force]

As kafka-acls.sh:
- --add creates the cross product of each resource x (each --allow-principal x --operation x --allow-host, ALLOW;
  each --deny-principal x --operation x --deny-host, DENY). The operation defaults to All, a principal's hosts to
  `*`. ACLs that exist already are said so and left as they are.
- --remove without a principal removes every ACL of each resource filter; with principals, exactly the ACLs that
  --add would create with the same options (so the default operation All and host `*` apply here too). It prints
  what was removed. --force is accepted (kcoord never prompts).
- --list lists the ACLs of each resource filter (every ACL without one), only those of the --principal(s) if given.
- --resource-pattern-type (default literal) is the resources' pattern type; match (the ACLs that apply to the
  named resource: its literal name, the literal `*`, the prefixed patterns that are prefixes of it) and any (any
  pattern type, the exact name) only filter, in --list and --remove.
- An operation must be one the resource type has (ResourceType TOPIC only supports operations ...).

Where kcoord differs (each a silent surprise in kafka-acls.sh, a one-line mistake here, exit 2): --operation with
--list (kafka-acls.sh ignores it); --operation, --allow-host or --deny-host in a --remove without the principals
they qualify (kafka-acls.sh then removes every ACL of the resource); --allow-host without --allow-principal and
--deny-host without --deny-principal (ignored by kafka-acls.sh); --cluster with --resource-pattern-type prefixed
(dropped by kafka-acls.sh). --cluster with match or any filters the cluster's ACLs (kafka-acls.sh drops it), and
--list --resource-pattern-type T without a resource lists the ACLs of pattern type T (kafka-acls.sh lists all).

Registered by kcoord.cli's build_parser (`add_acls_parser`) through its `group_cmd` (--bootstrap, --json,
--command-config), with its CliError and connect, so this module imports nothing of the CLI above it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from typing import Any

from .. import errors as E
from .. import wire
from ..client import Client, KafkaError
from ..security.authorizer import (
    ALL,
    ALLOW,
    ANY,
    CLUSTER,
    CLUSTER_NAME,
    DENY,
    GROUP,
    LITERAL,
    MATCH,
    MAX_FIELD_BYTES,
    OPERATION_NAMES,
    OPERATIONS,
    PATTERN_NAMES,
    PERMISSION_NAMES,
    PREFIXED,
    RESOURCE_NAMES,
    SUPPORTED_OPERATIONS,
    TOPIC,
    Acl,
    AclFilter,
)
from ..tables import printable, table

ACL_VERSION = 2  # DescribeAcls/CreateAcls/DeleteAcls v2: served by kcoord and by Kafka 2.8 to 4.x


def pascal(enum_name: str) -> str:
    """Kafka's tool names: CLUSTER_ACTION -> ClusterAction (SecurityUtils.toPascalCase)."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


# --operation's names (AclEntry.ACL_OPERATIONS: every operation but UNKNOWN and ANY), by their lower-case key
OPERATION_CHOICES = {pascal(n).lower(): code for n, code in OPERATIONS.items() if n not in ("UNKNOWN", "ANY")}
PATTERN_CHOICES = {"literal": LITERAL, "prefixed": PREFIXED, "match": MATCH, "any": ANY}
HEADERS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


# ---- argument types ---------------------------------------------------------------------------------------------

def _text(text: str, what: str) -> str:
    """A string of the command line as it goes on the wire: trimmed (as kafka-acls.sh trims), not empty, UTF-8, at
    most a Kafka string's length."""
    value = text.strip()
    if not value:
        raise argparse.ArgumentTypeError(f"an empty {what}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # bytes of the command line that are not UTF-8
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not UTF-8 text") from None
    if size > MAX_FIELD_BYTES:
        raise argparse.ArgumentTypeError(f"a {what} of {size} bytes: at most {MAX_FIELD_BYTES}")
    return value


def resource_name(text: str) -> str:
    """--topic, --group: a name (or `*`, or a prefix); trimmed, as kafka-acls.sh trims it."""
    return _text(text, "resource name")


def principal(text: str) -> str:
    """--allow-principal, --deny-principal, --principal: principalType:principalName (User:alice, User:*)."""
    value = _text(text, "principal")
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not a principal: expected a string in format "
                                         "principalType:principalName (User:alice)")
    return value


def host(text: str) -> str:
    """--allow-host, --deny-host: an IP address as the server sees the client's, or `*`."""
    return _text(text, "host")


def operation(text: str) -> int:
    """--operation: Kafka's tool names (Read, ClusterAction, ...) in any case; CLUSTER_ACTION's form too."""
    code = OPERATION_CHOICES.get(text.strip().replace("_", "").lower())
    if code is None:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not an operation (one of "
                                         f"{', '.join(pascal(OPERATION_NAMES[c]) for c in OPERATION_CHOICES.values())})")
    return code


def pattern_type(text: str) -> int:
    """--resource-pattern-type: literal, prefixed, match or any, in any case."""
    code = PATTERN_CHOICES.get(text.strip().lower())
    if code is None:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not a resource pattern type (one of "
                                         f"{', '.join(PATTERN_CHOICES)})")
    return code


# ---- ACLs as shown ----------------------------------------------------------------------------------------------

def _name(names: dict[int, str], code: int) -> str:
    return names.get(code, str(code))  # a value a newer server may send: its number


def fields(acl: Acl) -> dict[str, str]:
    """An ACL in --json: Kafka's enum names, as the server's acl-created/acl-deleted log events."""
    return {"resource_type": _name(RESOURCE_NAMES, acl.resource_type), "resource_name": acl.name,
            "pattern_type": _name(PATTERN_NAMES, acl.pattern), "principal": acl.principal, "host": acl.host,
            "operation": _name(OPERATION_NAMES, acl.operation), "permission": _name(PERMISSION_NAMES, acl.permission)}


def rows(acls: Iterable[Acl]) -> list[list[str]]:
    return [list(fields(a).values()) for a in acls]


def ordered(acls: Iterable[Acl]) -> list[Acl]:
    """Each ACL once, in a stable order: resource type, name, pattern, principal, host, operation, permission."""
    return sorted(set(acls), key=lambda a: (a.resource_type, a.name, a.pattern, a.principal, a.host, a.operation,
                                            a.permission))


def _problem(code: int, message: str | None) -> str:
    return E.name(code) + (f": {message}" if message else "")


# ---- the command ------------------------------------------------------------------------------------------------

class AclsCommands:
    def __init__(self, error: type[Exception], connect: Callable[[str], Client]) -> None:
        self.error = error  # cli.CliError: (message, exit code)
        self.connect = connect
        self._client: Client | None = None  # the connection of the command running

    def mistake(self, message: str) -> Exception:
        return self.error(message, 2)

    # ---- the command line, checked as kafka-acls.sh checks it (AclCommandOptions.checkArgs) -------------------

    def action(self, args) -> str:
        given = [name for name in ("add", "list", "remove") if getattr(args, name)]
        if len(given) != 1:
            said = f"{' and '.join('--' + g for g in given)}: " if given else ""
            raise self.mistake(f"{said}give exactly one action: --add, --list or --remove")
        return given[0]

    def resources(self, args, action: str) -> list[tuple[int, str, int]]:
        """The resource patterns (or pattern filters) named: (type, name, pattern type), topics, the cluster, then
        groups, as kafka-acls.sh orders them, each once."""
        pattern = LITERAL if args.resource_pattern_type is None else args.resource_pattern_type
        if action == "add" and pattern not in (LITERAL, PREFIXED):
            raise self.mistake(f"--resource-pattern-type {PATTERN_NAMES[pattern].lower()}: not with --add (an ACL's "
                               "pattern is literal or prefixed; match and any filter --list and --remove)")
        if args.cluster and pattern == PREFIXED:
            raise self.mistake("--cluster: the cluster's ACLs are literal (on kafka-cluster); not with "
                               "--resource-pattern-type prefixed")
        found: dict[tuple[int, str, int], None] = {}
        for t in args.topic or ():
            found[(TOPIC, t, pattern)] = None
        if args.cluster:
            found[(CLUSTER, CLUSTER_NAME, pattern)] = None
        for g in args.group or ():
            found[(GROUP, g, pattern)] = None
        if not found and action != "list":
            raise self.mistake(f"--{action}: give at least one resource: --topic T, --group G or --cluster")
        return list(found)

    def entries(self, args, action: str) -> list[tuple[str, str, int, int]]:
        """The (principal, host, operation, permission) entries of --add and --remove: each principal x operation x
        host, ALLOW then DENY (AclCommand.getAcls)."""
        for hosts, who in (("allow_host", "allow_principal"), ("deny_host", "deny_principal")):
            if getattr(args, hosts) and not getattr(args, who):
                raise self.mistake(f"--{hosts.replace('_', '-')}: needs --{who.replace('_', '-')} (the hosts it "
                                   "names are those principals')")
        if action == "add" and not args.allow_principal and not args.deny_principal:
            raise self.mistake("--add: give --allow-principal or --deny-principal (whom the ACLs allow or deny)")
        if action == "remove" and args.operation and not args.allow_principal and not args.deny_principal:
            raise self.mistake("--operation: in --remove only with --allow-principal or --deny-principal (without "
                               "principals --remove removes every ACL of the resource, whatever its operation)")
        operations = list(dict.fromkeys(args.operation or [ALL]))
        out: dict[tuple[str, str, int, int], None] = {}
        for principals, hosts, permission in ((args.allow_principal, args.allow_host, ALLOW),
                                              (args.deny_principal, args.deny_host, DENY)):
            for p in principals or ():
                for op in operations:
                    for h in hosts or ["*"]:
                        out[(p, h, op, permission)] = None
        return list(out)

    def check_operations(self, resources: list[tuple[int, str, int]], operations: Iterable[int]) -> None:
        """Each operation must be one the resource type has, or All (AclCommand.validateOperation)."""
        for rtype in dict.fromkeys(r[0] for r in resources):
            valid = (ALL, *SUPPORTED_OPERATIONS[rtype])
            for op in operations:
                if op not in valid:
                    raise self.mistake(f"--operation {pascal(OPERATION_NAMES[op])}: not an operation on a "
                                       f"{RESOURCE_NAMES[rtype].lower()} (ResourceType {RESOURCE_NAMES[rtype]} only "
                                       f"supports operations {', '.join(pascal(OPERATION_NAMES[o]) for o in valid)})")

    def run(self, args) -> int:
        action = self.action(args)
        if action == "list":
            for option in ("allow_principal", "deny_principal", "allow_host", "deny_host"):
                if getattr(args, option):
                    raise self.mistake(f"--{option.replace('_', '-')}: not with --list (--principal lists the ACLs "
                                       "of a principal)")
            if args.operation:
                raise self.mistake("--operation: not with --list (it lists every operation; kafka-acls.sh ignores "
                                   "--operation there)")
        elif args.principal:
            raise self.mistake("--principal: only with --list (--allow-principal and --deny-principal name the "
                               f"principals of --{action})")
        resources = self.resources(args, action)
        entries = [] if action == "list" else self.entries(args, action)
        self.check_operations(resources, {e[2] for e in entries})
        with self.connect(args.bootstrap) as client:  # one connection for the command's requests
            self._client = client
            try:
                if action == "list":
                    return self.list_acls(args, resources)
                if action == "add":
                    return self.add_acls(args, resources, entries)
                return self.remove_acls(args, resources, entries)
            finally:
                self._client = None

    # ---- the requests ---------------------------------------------------------------------------------------

    def _request(self, args, req):
        assert self._client is not None
        try:
            return self._client.request(req, ACL_VERSION)
        except (KafkaError, OSError) as e:
            raise self.error(f"{args.bootstrap}: {getattr(e, 'strerror', None) or e}") from None

    def describe(self, args, flt: AclFilter) -> list[Acl]:
        r = self._request(args, wire.DescribeAclsRequest(
            resource_type_filter=flt.resource_type, resource_name_filter=flt.name, pattern_type_filter=flt.pattern,
            principal_filter=flt.principal, host_filter=flt.host, operation=flt.operation,
            permission_type=flt.permission))
        if r.error_code:
            raise self.error(f"DescribeAcls: {_problem(r.error_code, r.error_message)}")
        return [Acl(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for res in r.resources for a in res.acls]

    def list_acls(self, args, resources: list[tuple[int, str, int]]) -> int:
        if resources:
            filters = [AclFilter(rtype, name, pattern) for rtype, name, pattern in resources]
        else:  # every ACL, or every one of the pattern type given
            filters = [AclFilter(pattern=ANY if args.resource_pattern_type is None else args.resource_pattern_type)]
        found = [a for flt in filters for a in self.describe(args, flt)]
        if args.principal:
            wanted = set(args.principal)
            found = [a for a in found if a.principal in wanted]
        acls = ordered(found)
        if args.json:
            print(json.dumps({"acls": [fields(a) for a in acls]}, indent=2))
        else:
            print(table(HEADERS, rows(acls)) if acls else "(no ACLs)")
        return 0

    def add_acls(self, args, resources: list[tuple[int, str, int]], entries: list[tuple[str, str, int, int]]) -> int:
        wanted = [Acl(rtype, name, pattern, *entry) for rtype, name, pattern in resources for entry in entries]
        present: set[Acl] = set()
        for rtype, name, pattern in resources:  # what is there already, said so as kafka-acls.sh says it
            present.update(self.describe(args, AclFilter(rtype, name, pattern)))
        new = [a for a in wanted if a not in present]
        existing = [a for a in wanted if a in present]
        refused: list[str] = []
        added = new
        if new:
            r = self._request(args, wire.CreateAclsRequest(creations=[wire.CreateAclsRequestAclCreation(
                resource_type=a.resource_type, resource_name=a.name, resource_pattern_type=a.pattern,
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
                for a in new]))
            if len(r.results) != len(new):
                raise self.error(f"CreateAcls: {len(r.results)} results for {len(new)} ACLs")
            added = [a for a, res in zip(new, r.results) if not res.error_code]
            failed = [(a, res) for a, res in zip(new, r.results) if res.error_code]
            problems = {_problem(res.error_code, res.error_message) for _, res in failed}
            if failed and not added and len(problems) == 1:  # refused as a whole (SECURITY_DISABLED, ...)
                raise self.error(f"CreateAcls: {problems.pop()}")
            refused = [f"{a.describe()}: {_problem(res.error_code, res.error_message)}" for a, res in failed]
        if args.json:
            print(json.dumps({"added": [fields(a) for a in added], "existing": [fields(a) for a in existing],
                              "refused": refused}, indent=2))
        else:
            if added:
                print(f"added {len(added)} ACL{'s' if len(added) != 1 else ''}:")
                print(table(HEADERS, rows(added)))
            if existing:
                if added:
                    print()
                print(f"already present, left as they are ({len(existing)}):")
                print(table(HEADERS, rows(existing)))
        if refused:
            raise self.error(f"not added: {'; '.join(refused)}")
        return 0

    def remove_acls(self, args, resources: list[tuple[int, str, int]], entries: list[tuple[str, str, int, int]]) -> int:
        # without principals, one filter per resource matching every entry; with them, one per entry named
        named: list[tuple[str | None, str | None, int, int]] = [*entries] or [(None, None, ANY, ANY)]
        filters = [wire.DeleteAclsRequestDeleteAclsFilter(
            resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern, principal_filter=who,
            host_filter=where, operation=op, permission_type=permission)
            for rtype, name, pattern in resources for who, where, op, permission in named]
        r = self._request(args, wire.DeleteAclsRequest(filters=filters))
        removed = ordered(Acl(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                              m.permission_type) for res in r.filter_results if not res.error_code
                          for m in res.matching_acls)
        problems = list(dict.fromkeys(_problem(res.error_code, res.error_message) for res in r.filter_results
                                      if res.error_code))
        if problems and not removed and len(problems) == 1 and all(res.error_code for res in r.filter_results):
            raise self.error(f"DeleteAcls: {problems[0]}")
        if args.json:
            print(json.dumps({"removed": [fields(a) for a in removed], "refused": problems}, indent=2))
        elif removed:
            print(f"removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
            print(table(HEADERS, rows(removed)))
        else:
            print("no ACL matched: nothing removed")
        if problems:
            raise self.error(f"DeleteAcls: not removed: {'; '.join(problems)}")
        return 0


def add_acls_parser(sub: Any, group_cmd: Callable[..., argparse.ArgumentParser], *, error: type[Exception],
                    connect: Callable[[str], Client]) -> None:
    """Registers `kcoord acls` through cli's `group_cmd` (which adds --bootstrap, --json and --command-config)."""
    cmds = AclsCommands(error, connect)
    p = group_cmd("acls", "ACLs: add, list, remove (kafka-acls.sh's options, over Kafka's ACL admin APIs)", cmds.run)
    p.add_argument("--add", action="store_true", help="add ACLs: each resource x principal x operation x host")
    p.add_argument("--list", action="store_true",
                   help="list the ACLs of the resources given (every ACL without one)")
    p.add_argument("--remove", action="store_true",
                   help="remove the ACLs of the resources given (only the entries named, with principals)")
    p.add_argument("--allow-principal", action="append", type=principal, metavar="TYPE:NAME",
                   help="a principal the ACLs allow, e.g. User:alice or User:* (repeatable)")
    p.add_argument("--deny-principal", action="append", type=principal, metavar="TYPE:NAME",
                   help="a principal the ACLs deny (repeatable); DENY wins over ALLOW")
    p.add_argument("--allow-host", action="append", type=host, metavar="HOST",
                   help="an IP address the allowed principals connect from (repeatable; default: *, any host)")
    p.add_argument("--deny-host", action="append", type=host, metavar="HOST",
                   help="an IP address the denied principals are denied from (repeatable; default: *, any host)")
    p.add_argument("--operation", action="append", type=operation, metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                        "IdempotentWrite or All, in any case (repeatable; default: All)")
    p.add_argument("--topic", action="append", type=resource_name, metavar="T",
                   help="a topic (repeatable); * is every topic")
    p.add_argument("--group", action="append", type=resource_name, metavar="G",
                   help="a group (repeatable); * is every group")
    p.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    p.add_argument("--resource-pattern-type", type=pattern_type, metavar="TYPE",
                   help="literal or prefixed (the ACLs' pattern); in --list and --remove also match (every ACL that "
                        "applies to the named resources) or any (any pattern type, the exact name) (default: "
                        "literal)")
    p.add_argument("--principal", action="append", type=principal, metavar="TYPE:NAME",
                   help="--list: only this principal's ACLs (repeatable)")
    p.add_argument("--force", action="store_true", help="accepted as kafka-acls.sh takes it (kcoord never prompts)")
