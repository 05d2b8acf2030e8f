"""Kafka's ACL model and its decision, as StandardAuthorizer makes it (`StandardAuthorizerData.authorize`): no I/O.

An ACL (Kafka's AclBinding) is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
operation, ALLOW or DENY). A request is allowed when:

1. the principal is a super user; otherwise
2. an ACL on the same resource type whose pattern covers the name (the exact LITERAL name, the LITERAL `*`, or a
   PREFIXED prefix of the name) matches the principal (equal, or `User:*`), the host (equal, or `*`) and the
   operation (equal; ALL; an ALLOW on READ, WRITE, DELETE or ALTER also gives DESCRIBE, one on ALTER_CONFIGS also
   gives DESCRIBE_CONFIGS), and no such ACL is a DENY (DENY wins); or
3. no ACL at all covers the name and `allow.everyone.if.no.acl.found` is true.

Decisions are cached by (principal, host, operation, resource type, name); any change to the ACLs drops the cache.
Filters (Kafka's AclBindingFilter, for DescribeAcls and DeleteAcls) are here too.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# ---- the enums on the wire (org.apache.kafka.common.resource / acl) ----------------------------------------------

RESOURCE_TYPES = {"UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
                  "DELEGATION_TOKEN": 6, "USER": 7}
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
RESOURCE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
PATTERN_NAMES = {v: k for k, v in PATTERN_TYPES.items()}
OPERATION_NAMES = {v: k for k, v in OPERATIONS.items()}
PERMISSION_NAMES = {v: k for k, v in PERMISSIONS.items()}

TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
DENY, ALLOW = 2, 3

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a LITERAL resource name or a host that matches every one
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW on any of these also allows DESCRIBE (AclEntry / StandardAuthorizerData's implication)
IMPLIES_DESCRIBE = frozenset((READ, WRITE, DELETE, ALTER))
# The operations an authorized-operations bitfield reports, per resource type (AclEntry.supportedOperations)
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
}
MAX_FIELD_BYTES = 0x7FFF  # kcoord's: what a record key holds of each string (Kafka's strings are no longer)
CACHE_MAX = 1 << 17  # decisions kept before the cache starts again (a hostile client naming endless groups)


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL (Kafka's AclBinding): the resource pattern and the access control entry."""
    resource_type: int
    name: str
    pattern: int  # LITERAL or PREFIXED
    principal: str
    host: str
    operation: int
    permission: int  # ALLOW or DENY

    def describe(self) -> str:
        return (f"{PERMISSION_NAMES.get(self.permission, self.permission)} {self.principal} from {self.host} "
                f"{OPERATION_NAMES.get(self.operation, self.operation)} on "
                f"{RESOURCE_NAMES.get(self.resource_type, self.resource_type)} {self.name!r} "
                f"({PATTERN_NAMES.get(self.pattern, self.pattern)})")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None matches any name, principal or host; ANY any type, operation or
    permission; pattern MATCH matches the ACLs that would apply to the named resource."""
    resource_type: int = ANY
    name: str | None = None
    pattern: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY

    def matches(self, acl: Acl) -> bool:
        """ResourcePatternFilter.matches and AccessControlEntryFilter.matches."""
        if self.resource_type != ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern == MATCH:
            if self.name is not None:
                if acl.pattern == LITERAL:
                    if acl.name != self.name and acl.name != WILDCARD:
                        return False
                elif acl.pattern == PREFIXED:
                    if not self.name.startswith(acl.name):
                        return False
                else:
                    return False
        else:
            if self.pattern != ANY and self.pattern != acl.pattern:
                return False
            if self.name is not None and self.name != acl.name:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != ANY and self.operation != acl.operation:
            return False
        return self.permission == ANY or self.permission == acl.permission


def acl_problem(acl: Acl) -> str | None:
    """Why `acl` cannot be stored, in Kafka's words (AclApis, AclControlManager.validateNewAcl), or None. kcoord
    also refuses a principal that is not Type:Name, which KRaft does not check."""
    if acl.resource_type not in RESOURCE_NAMES or acl.resource_type in (0, ANY):
        return f"Invalid resourceType {RESOURCE_NAMES.get(acl.resource_type, acl.resource_type)}"
    if acl.pattern not in (LITERAL, PREFIXED):
        return f"Invalid patternType {PATTERN_NAMES.get(acl.pattern, acl.pattern)}"
    if acl.operation not in OPERATION_NAMES or acl.operation in (0, ANY):
        return f"Invalid operation {OPERATION_NAMES.get(acl.operation, acl.operation)}"
    if acl.permission not in (ALLOW, DENY):
        return f"Invalid permissionType {PERMISSION_NAMES.get(acl.permission, acl.permission)}"
    if not acl.name:
        return "Invalid empty resource name"
    if acl.resource_type == CLUSTER and acl.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Invalid principal {acl.principal!r}: expected principalType:principalName"
    if not acl.host:
        return "Invalid empty host"
    if max(len(acl.name.encode()), len(acl.principal.encode()), len(acl.host.encode())) > MAX_FIELD_BYTES:
        return f"A resource name, principal or host may be at most {MAX_FIELD_BYTES} bytes"
    return None


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by ';', trimmed, empty entries skipped (StandardAuthorizer
    .getConfiguredSuperUsers); a bad entry is a ValueError with Kafka's words."""
    out = set()
    for entry in value.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        kind, sep, name = entry.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a string in format principalType:principalName but got {entry}")
        out.add(entry)
    return frozenset(out)


def _operation_matches(acl: Acl, operation: int) -> bool:
    if acl.operation == operation or acl.operation == ALL:
        return True
    if acl.permission != ALLOW:  # a DENY never implies
        return False
    if operation == DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    return operation == DESCRIBE_CONFIGS and acl.operation == ALTER_CONFIGS


class Authorizer:
    """The ACLs a server holds and the decisions made over them."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: set[Acl] = set()
        # (resource type, name) -> the LITERAL ACLs on it; resource type -> prefix -> the PREFIXED ACLs on it
        self._literal: dict[tuple[int, str], list[Acl]] = {}
        self._prefixed: dict[int, dict[str, list[Acl]]] = {}
        self._prefix_lengths: dict[int, list[int]] = {}  # the distinct lengths of each type's prefixes, ascending
        self._length_counts: dict[int, dict[int, int]] = {}  # resource type -> prefix length -> prefixes of it
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self.listeners: list[Callable[[], None]] = []  # called on every change: callers' own caches go

    def __len__(self) -> int:
        return len(self.acls)

    # ---- changes --------------------------------------------------------------------------------------

    def add(self, acl: Acl) -> bool:
        """Add one ACL; False when it was there already (Kafka: a silent success)."""
        return bool(self.update(add=(acl,)))

    def remove(self, acl: Acl) -> bool:
        return bool(self.update(remove=(acl,)))

    def update(self, add: Iterable[Acl] = (), remove: Iterable[Acl] = ()) -> int:
        """Remove then add ACLs, as one change (the cached decisions go once); how many were added or removed.
        Each ACL costs about the same whatever the number held."""
        done = 0
        for acl in remove:
            if acl in self.acls:
                self._take(acl)
                done += 1
        for acl in add:
            if acl not in self.acls:
                self._put(acl)
                done += 1
        if done:
            self._changed()
        return done

    def replace(self, acls: Iterable[Acl]) -> None:
        """Become exactly `acls` (a restart's load, a cluster node adopting what another node wrote)."""
        self.acls = set()
        self._literal, self._prefixed, self._prefix_lengths, self._length_counts = {}, {}, {}, {}
        for acl in acls:
            if acl not in self.acls:
                self._put(acl)
        self._changed()

    def _put(self, acl: Acl) -> None:
        self.acls.add(acl)
        if acl.pattern == PREFIXED:
            by_prefix = self._prefixed.setdefault(acl.resource_type, {})
            entries = by_prefix.get(acl.name)
            if entries is None:
                entries = by_prefix[acl.name] = []
                counts = self._length_counts.setdefault(acl.resource_type, {})
                n = len(acl.name)
                counts[n] = counts.get(n, 0) + 1
                if counts[n] == 1:
                    insort(self._prefix_lengths.setdefault(acl.resource_type, []), n)
            entries.append(acl)
        else:
            self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)

    def _take(self, acl: Acl) -> None:
        self.acls.discard(acl)
        if acl.pattern == PREFIXED:
            by_prefix = self._prefixed[acl.resource_type]
            entries = by_prefix[acl.name]
            entries.remove(acl)
            if not entries:
                del by_prefix[acl.name]
                counts = self._length_counts[acl.resource_type]
                n = len(acl.name)
                counts[n] -= 1
                if not counts[n]:
                    del counts[n]
                    self._prefix_lengths[acl.resource_type].remove(n)
        else:
            key = (acl.resource_type, acl.name)
            entries = self._literal[key]
            entries.remove(acl)
            if not entries:
                del self._literal[key]

    def _changed(self) -> None:
        self._cache = {}
        for listener in self.listeners:
            listener()

    def candidates(self, flt: AclFilter) -> Iterable[Acl]:
        """The ACLs `flt` may match, from the indexes when the filter names a resource (a superset of the
        matches: each is still `flt.matches`-checked); every ACL otherwise (a snapshot, so it may be walked in
        slices while ACLs change)."""
        if flt.name is None:
            return list(self.acls)
        types = RESOURCE_NAMES if flt.resource_type == ANY else (flt.resource_type,)
        out: list[Acl] = []
        for t in types:
            if flt.pattern == MATCH:
                out.extend(self._covering(t, flt.name))
                continue
            if flt.pattern in (LITERAL, ANY):
                out.extend(self._literal.get((t, flt.name), ()))
            if flt.pattern in (PREFIXED, ANY):
                out.extend(self._prefixed.get(t, {}).get(flt.name, ()))
        return out

    def matching(self, flt: AclFilter) -> list[Acl]:
        """The ACLs `flt` matches, in a stable order."""
        found = [a for a in self.candidates(flt) if flt.matches(a)]
        found.sort(key=_order)
        return found

    # ---- decisions ------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        allowed = cache.get(key)
        if allowed is None:
            allowed = self._decide(principal, host, operation, resource_type, name)
            if len(cache) >= CACHE_MAX:
                cache.clear()
            cache[key] = allowed
        return allowed

    def _covering(self, resource_type: int, name: str):
        """Every ACL whose pattern covers the name: LITERAL name, LITERAL `*`, PREFIXED prefixes."""
        literal = self._literal
        found = literal.get((resource_type, name))
        if found:
            yield from found
        if name != WILDCARD:
            found = literal.get((resource_type, WILDCARD))
            if found:
                yield from found
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for n in self._prefix_lengths[resource_type]:
                if n > len(name):
                    break
                found = by_prefix.get(name[:n])
                if found:
                    yield from found

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        covered = allowed = False
        for acl in self._covering(resource_type, name):
            covered = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if not _operation_matches(acl, operation):
                continue
            if acl.permission == DENY:
                return False
            allowed = True
        if allowed:
            return True
        return not covered and self.allow_if_no_acl

    def operations_bitfield(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """The authorized-operations field of a describe answer: bit n set for each operation n allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


def _order(acl: Acl) -> tuple:
    return (acl.resource_type, acl.pattern, acl.name, acl.principal, acl.host, acl.operation, acl.permission)
