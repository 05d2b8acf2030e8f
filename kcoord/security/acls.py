"""The ACLs kcoord keeps, and Kafka's ACL admin APIs over them: DescribeAcls (key 29), CreateAcls (30) and
DeleteAcls (31), with the semantics of Kafka's `AclApis` and KRaft's `AclControlManager`.

Each accepted change is staged in the store as a `KCOORD_ACL` record (kcoord.records) before the response that
confirms it leaves; the ACLs are rebuilt from those records on load (`replay`) and, on a cluster node, adopted from
the database every lease round (`refresh`). Who may call these APIs (CLUSTER DESCRIBE to read, CLUSTER ALTER to
change) is checked before they run, by kcoord.security.gates, as KafkaApis checks it before AclApis.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .. import errors as E
from .. import records as R
from .. import wire
from ..events import REQUEST_PRINCIPAL
from .authorizer import (
    ANY,
    LITERAL,
    OPERATION_NAMES,
    PATTERN_NAMES,
    PERMISSION_NAMES,
    RESOURCE_NAMES,
    Acl,
    AclFilter,
    Authorizer,
    acl_problem,
)

log = logging.getLogger("kcoord.security")

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # AclApis' words
NO_AUTHORIZER = "No Authorizer is configured."
MAX_REMOVALS = 10_000  # AclControlManager's MAX_RECORDS_PER_USER_OP
TOO_MANY_REMOVALS = f"Cannot remove more than {MAX_REMOVALS} acls in a single delete operation."


class InvalidAclRequest(wire.DecodeError):
    """An ACL request holding an UNKNOWN (or unknown) enum value: Kafka fails to parse it and closes the connection
    without an answer (CreateAclsRequest.validate, DescribeAclsRequest.normalizeAndValidate)."""


def _known(value: int, names: dict[int, str], what: str) -> int:
    if value == 0 or value not in names:
        raise InvalidAclRequest(f"an ACL request with {what} {value} (UNKNOWN)")
    return value


def request_filter(f) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclFilter; InvalidAclRequest for an UNKNOWN field."""
    return AclFilter(_known(f.resource_type_filter, RESOURCE_NAMES, "resource type"), f.resource_name_filter,
                     _known(f.pattern_type_filter, PATTERN_NAMES, "pattern type"), f.principal_filter, f.host_filter,
                     _known(f.operation, OPERATION_NAMES, "operation"),
                     _known(f.permission_type, PERMISSION_NAMES, "permission type"))


def _who() -> str:
    return REQUEST_PRINCIPAL[0] or "User:ANONYMOUS"


class Acls:
    """The server's ACLs (its Authorizer) and the APIs that manage them. The ACLs are kept and loaded whether or not
    an authorizer is configured (`enabled`); without one, nothing is checked and the APIs answer SECURITY_DISABLED."""

    def __init__(self, store) -> None:
        self.store = store  # a GroupStore or NullStore: `persistent` and `stage(key, value-or-None)`
        self.authorizer = Authorizer()
        self.enabled = False
        self.handlers = {DESCRIBE_ACLS: self.describe, CREATE_ACLS: self.create, DELETE_ACLS: self.delete}
        self._loaded: list[Acl] = []  # the records read on load, applied together by `loaded()`

    def configure(self, enabled: bool, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        """authorizer.class.name (set or not), super.users and allow.everyone.if.no.acl.found."""
        self.enabled = enabled
        self.authorizer.super_users = frozenset(super_users)
        self.authorizer.allow_if_no_acl = allow_if_no_acl
        self.authorizer.replace(self.authorizer.acls)  # (drops the cached decisions)

    # ---- records ---------------------------------------------------------------------------------------

    def replay(self, rec: R.Record) -> None:
        """One stored KCOORD_ACL record (decoded), on load."""
        self._loaded.append(rec.value)

    def loaded(self) -> None:
        """The load is over: the ACLs it read apply, all at once."""
        if self._loaded:
            self.authorizer.replace([*self.authorizer.acls, *self._loaded])
        self._loaded = []

    def refresh(self, records: Iterable[tuple[bytes, bytes]]) -> None:
        """Become exactly what `records` hold (every stored record; others than ACLs are passed over): a cluster
        node adopting what another node wrote. Nothing changes (nor is any cached decision dropped) when the
        database holds what this node holds."""
        stored = {R.decode(k, v).value for k, v in records if R.record_type(k) == R.KCOORD_ACL}
        if stored != self.authorizer.acls:
            self.authorizer.replace(stored)

    def _stage(self, acl: Acl, present: bool) -> None:
        if self.store.persistent:
            self.store.stage(R.acl_key(acl), R.ACL_VALUE if present else None)

    # ---- DescribeAcls (AclApis.handleDescribeAcls) ------------------------------------------------------

    def describe(self, req, version: int, client_id: str = "", client_host: str = ""):
        flt = request_filter(req)
        if not self.enabled:
            return wire.DescribeAclsResponse(error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER_DESCRIBE,
                                             resources=[])
        return wire.DescribeAclsResponse(error_code=E.NONE, error_message=None,
                                         resources=describe_resources(self.authorizer.matching(flt)))

    # ---- CreateAcls (AclControlManager.createAcls) ---------------------------------------------------------

    def create(self, req, version: int, client_id: str = "", client_host: str = ""):
        acls = [Acl(_known(c.resource_type, RESOURCE_NAMES, "resource type"), c.resource_name,
                    _known(c.resource_pattern_type, PATTERN_NAMES, "pattern type"), c.principal, c.host,
                    _known(c.operation, OPERATION_NAMES, "operation"),
                    _known(c.permission_type, PERMISSION_NAMES, "permission type")) for c in req.creations]
        result = wire.CreateAclsResponseAclCreationResult
        if not self.enabled:
            return wire.CreateAclsResponse(results=[result(error_code=E.SECURITY_DISABLED,
                                                           error_message=NO_AUTHORIZER) for _ in acls])
        results = []
        for acl in acls:
            issue = acl_problem(acl)
            if issue is not None:
                results.append(result(error_code=E.INVALID_REQUEST, error_message=issue))
                continue
            if self.authorizer.add(acl):  # an ACL that exists already: a silent success, as Kafka's
                self._stage(acl, True)
                log.info("ACL created: %s", acl.describe(), extra={"kcoord": {
                    "event": "acl-created", **acl_fields(acl), "by": _who(), "client_id": client_id,
                    "client_host": client_host}})
            results.append(result(error_code=E.NONE, error_message=None))
        return wire.CreateAclsResponse(results=results)

    # ---- DeleteAcls (AclControlManager.deleteAcls): atomic, each ACL removed once ----------------------------

    def delete(self, req, version: int, client_id: str = "", client_host: str = ""):
        filters = [request_filter(f) for f in req.filters]
        fresult = wire.DeleteAclsResponseDeleteAclsFilterResult
        if not self.enabled:
            return wire.DeleteAclsResponse(filter_results=[fresult(
                error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[]) for _ in filters])
        doomed: dict[Acl, None] = {}
        results = []
        for flt in filters:
            matched = self.authorizer.matching(flt)
            new = [a for a in matched if a not in doomed]
            if len(doomed) + len(new) > MAX_REMOVALS:
                results.append(fresult(error_code=E.UNKNOWN_SERVER_ERROR, error_message=TOO_MANY_REMOVALS,
                                       matching_acls=[]))
                continue
            doomed.update(dict.fromkeys(new))
            results.append(fresult(error_code=E.NONE, error_message=None, matching_acls=[matching_acl(a)
                                                                                          for a in matched]))
        for acl in doomed:
            self.authorizer.remove(acl)
            self._stage(acl, False)
            log.info("ACL deleted: %s", acl.describe(), extra={"kcoord": {
                "event": "acl-deleted", **acl_fields(acl), "by": _who(), "client_id": client_id,
                "client_host": client_host}})
        return wire.DeleteAclsResponse(filter_results=results)

    def refuse(self, req, key: int, error: int, message: str | None):
        """An ACL change answered `error` throughout, changing nothing: while the store cannot write."""
        if key == CREATE_ACLS:
            return wire.CreateAclsResponse(results=[wire.CreateAclsResponseAclCreationResult(
                error_code=error, error_message=message) for _ in req.creations])
        return wire.DeleteAclsResponse(filter_results=[wire.DeleteAclsResponseDeleteAclsFilterResult(
            error_code=error, error_message=message, matching_acls=[]) for _ in req.filters])


def acl_fields(acl: Acl) -> dict[str, str]:
    """An ACL as the fields of a JSON log event."""
    return {"resource_type": RESOURCE_NAMES[acl.resource_type], "resource_name": acl.name,
            "pattern_type": PATTERN_NAMES[acl.pattern], "principal": acl.principal, "host": acl.host,
            "operation": OPERATION_NAMES[acl.operation], "permission": PERMISSION_NAMES[acl.permission]}


def describe_resources(acls: list[Acl]) -> list:
    """DescribeAcls' answer: the ACLs grouped by resource pattern."""
    by_pattern: dict[tuple[int, str, int], list[Acl]] = {}
    for a in acls:
        by_pattern.setdefault((a.resource_type, a.name, a.pattern), []).append(a)
    desc = wire.DescribeAclsResponseAclDescription
    return [wire.DescribeAclsResponseDescribeAclsResource(
        resource_type=rtype, resource_name=name, pattern_type=pattern, acls=[
            desc(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
            for a in group]) for (rtype, name, pattern), group in by_pattern.items()]


def matching_acl(a: Acl):
    return wire.DeleteAclsResponseDeleteAclsMatchingAcl(
        error_code=E.NONE, error_message=None, resource_type=a.resource_type, resource_name=a.name,
        pattern_type=a.pattern, principal=a.principal, host=a.host, operation=a.operation,
        permission_type=a.permission)


__all__ = ["ANY", "LITERAL", "Acls", "InvalidAclRequest", "request_filter"]
