"""The ACLs kcoord keeps, and Kafka's ACL admin APIs over them: DescribeAcls (key 29), CreateAcls (30) and
DeleteAcls (31), with the semantics of Kafka's `AclApis` and KRaft's `AclControlManager`.

Each accepted change is staged in the store as a `KCOORD_ACL` record (kcoord.records) before the response that
confirms it leaves; the ACLs are rebuilt from those records on load (`replay`) and, on a cluster node, adopted from
the database every lease round (`refresh`). Who may call these APIs (CLUSTER DESCRIBE to read, CLUSTER ALTER to
change) is checked before they run, by kcoord.security.gates, as KafkaApis checks it before AclApis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import errors as E
from .. import records as R
from .. import wire
from ..events import REQUEST_PRINCIPAL
from .authorizer import (
    ANY,
    DENY,
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
MAX_RECORDS = 10_000  # AclControlManager's MAX_RECORDS_PER_USER_OP: the ACLs one request may create or remove
TOO_MANY_REMOVALS = f"Cannot remove more than {MAX_RECORDS} acls in a single delete operation."
TOO_MANY_CREATIONS = f"Cannot create more than {MAX_RECORDS} acls in a single create operation."
TOO_MANY_FILTERS = f"kcoord takes at most {MAX_RECORDS} filters in one DeleteAcls request"
# The fields holding each enum of a creation and of a filter (checked before anything, as Kafka's parse checks them)
ENUMS = (("resource type", RESOURCE_NAMES), ("pattern type", PATTERN_NAMES), ("operation", OPERATION_NAMES),
         ("permission type", PERMISSION_NAMES))
CREATION_FIELDS = ("resource_type", "resource_pattern_type", "operation", "permission_type")
FILTER_FIELDS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
# Work in slices (the coordinator's long requests: LONG_SLICE units, about 2 ms, a slice): the units an ACL costs
SCAN_COST = 0.25  # looked at and passed over
APPLY_COST = 4  # added or removed, staged and logged
APPLY_SLICE = 100  # ACLs applied together (one change to the authorizer, its cached decisions dropped once)


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


def _check_enums(items, fields: tuple[str, ...]) -> None:
    """InvalidAclRequest (the connection closes) when any of `items` holds an UNKNOWN or unknown enum: one set of the
    values of each field, so a request of many items costs little."""
    for field, (what, names) in zip(fields, ENUMS):
        values = {getattr(x, field) for x in items}
        bad = (values - names.keys()) | (values & {0})
        if bad:
            _known(min(bad), names, what)


def _at_once(work: Iterator[float], answer: Callable[[], Any], version: int) -> Any:
    for _ in work:
        pass
    return answer()


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
        # (work, answer, version) -> the answer, or a Reply resolved once the work is done in slices: the
        # coordinator's long requests (Coordinator._long_request); in-process, at once
        self.long_request: Callable[[Iterator[float], Callable[[], Any], int], Any] = _at_once
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
        resources: dict[tuple[int, str, int], list] = {}
        out: list = []
        desc = wire.DescribeAclsResponseAclDescription

        def listing() -> Iterator[float]:
            for a in self.authorizer.candidates(flt):
                if not flt.matches(a):
                    yield SCAN_COST
                    continue
                acls = resources.get((a.resource_type, a.name, a.pattern))
                if acls is None:
                    acls = resources[a.resource_type, a.name, a.pattern] = []
                    out.append(wire.DescribeAclsResponseDescribeAclsResource(
                        resource_type=a.resource_type, resource_name=a.name, pattern_type=a.pattern, acls=acls))
                acls.append(desc(principal=a.principal, host=a.host, operation=a.operation,
                                 permission_type=a.permission))
                yield 1

        return self.long_request(listing(), lambda: wire.DescribeAclsResponse(
            error_code=E.NONE, error_message=None, resources=out), version)

    # ---- CreateAcls (AclControlManager.createAcls) ---------------------------------------------------------

    def create(self, req, version: int, client_id: str = "", client_host: str = ""):
        creations = req.creations
        result = wire.CreateAclsResponseAclCreationResult
        if len(creations) > MAX_RECORDS:
            # Kafka's controller makes at most MAX_RECORDS_PER_USER_OP records of one request (BoundedList): the
            # whole request fails. kcoord counts the creations asked for, not the new ACLs among them, and looks at
            # nothing more of them (one answer object, repeated).
            return wire.CreateAclsResponse(results=[result(error_code=E.UNKNOWN_SERVER_ERROR,
                                                           error_message=TOO_MANY_CREATIONS)] * len(creations))
        _check_enums(creations, CREATION_FIELDS)
        if not self.enabled:
            return wire.CreateAclsResponse(results=[result(error_code=E.SECURITY_DISABLED,
                                                           error_message=NO_AUTHORIZER)] * len(creations))
        results: list = []
        new: dict[Acl, None] = {}
        who = _who()

        def creating() -> Iterator[float]:
            held = self.authorizer.acls
            for c in creations:
                acl = Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                          c.operation, c.permission_type)
                issue = acl_problem(acl)
                if issue is not None:
                    results.append(result(error_code=E.INVALID_REQUEST, error_message=issue))
                elif acl not in held and acl not in new:  # one that exists already: a silent success, as Kafka's
                    new[acl] = None
                    results.append(OK_CREATED)
                else:
                    results.append(OK_CREATED)
                yield 1
            yield from self._apply(list(new), True, who, client_id, client_host)

        return self.long_request(creating(), lambda: wire.CreateAclsResponse(results=results), version)

    # ---- DeleteAcls (AclControlManager.deleteAcls): each ACL removed once ----------------------------------

    def delete(self, req, version: int, client_id: str = "", client_host: str = ""):
        given = req.filters
        fresult = wire.DeleteAclsResponseDeleteAclsFilterResult
        if len(given) > MAX_RECORDS:  # kcoord's bound (a filter that removes nothing is no use in such numbers)
            return wire.DeleteAclsResponse(filter_results=[fresult(
                error_code=E.UNKNOWN_SERVER_ERROR, error_message=TOO_MANY_FILTERS, matching_acls=[])] * len(given))
        _check_enums(given, FILTER_FIELDS)
        if not self.enabled:
            return wire.DeleteAclsResponse(filter_results=[fresult(
                error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])] * len(given))
        doomed: dict[Acl, None] = {}
        results: list = []
        who = _who()

        def deleting() -> Iterator[float]:
            for f in given:
                flt = request_filter(f)
                matched = []
                for a in self.authorizer.candidates(flt):
                    if flt.matches(a):
                        matched.append(a)
                        yield 1
                    else:
                        yield SCAN_COST
                new = [a for a in matched if a not in doomed]
                if len(doomed) + len(new) > MAX_RECORDS:
                    results.append(fresult(error_code=E.UNKNOWN_SERVER_ERROR, error_message=TOO_MANY_REMOVALS,
                                           matching_acls=[]))
                    continue
                doomed.update(dict.fromkeys(new))
                items: list = []
                results.append(fresult(error_code=E.NONE, error_message=None, matching_acls=items))
                for a in matched:
                    items.append(matching_acl(a))
                    yield 1
            yield from self._apply(list(doomed), False, who, client_id, client_host)

        return self.long_request(deleting(), lambda: wire.DeleteAclsResponse(filter_results=results), version)

    def _apply(self, acls: list[Acl], adding: bool, who: str, client_id: str, client_host: str) -> Iterator[float]:
        """Add (or remove) `acls` in slices, each staged and logged. The DENYs are added before the ALLOWs and the
        ALLOWs removed before the DENYs: a decision made between two slices is never more permissive than both the
        ACLs before the request and those after it (a removed DENY never uncovers an ALLOW the request removes too,
        an added ALLOW never precedes the DENY beside it)."""
        acls.sort(key=lambda a: (a.permission == DENY) is not adding)
        event = "acl-created" if adding else "acl-deleted"
        for at in range(0, len(acls), APPLY_SLICE):
            part = acls[at:at + APPLY_SLICE]
            self.authorizer.update(add=part if adding else (), remove=() if adding else part)
            for acl in part:
                self._stage(acl, adding)
                log.info("ACL %s: %s", "created" if adding else "deleted", acl.describe(), extra={"kcoord": {
                    "event": event, **acl_fields(acl), "by": who, "client_id": client_id,
                    "client_host": client_host}})
            yield len(part) * APPLY_COST

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


def matching_acl(a: Acl):
    return wire.DeleteAclsResponseDeleteAclsMatchingAcl(
        error_code=E.NONE, error_message=None, resource_type=a.resource_type, resource_name=a.name,
        pattern_type=a.pattern, principal=a.principal, host=a.host, operation=a.operation,
        permission_type=a.permission)


OK_CREATED = wire.CreateAclsResponseAclCreationResult(error_code=E.NONE, error_message=None)

__all__ = ["ANY", "LITERAL", "Acls", "InvalidAclRequest", "request_filter"]
