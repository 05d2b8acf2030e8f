"""The ACL admin APIs in process (kcoord.security.acls): many ACLs are listed, made and removed in slices on the
coordinator's timers, as the server runs them, with Kafka's bound of 10,000 records a request; the order in which
a request's ACLs are applied never lets a decision made between two slices be more permissive than both the ACLs
before the request and those after it; and the records load back."""

from __future__ import annotations

from kcoord import errors as E
from kcoord import wire
from kcoord.coordinator import Coordinator
from kcoord.reply import Reply
from kcoord.security.acls import MAX_RECORDS
from kcoord.security.authorizer import GROUP, READ
from kcoord.store import GroupStore, MemoryRecords

from ..support.harness import ClassicHarness


def sliced() -> ClassicHarness:
    h = ClassicHarness()
    h.c.slice_long_requests = True  # as the server runs it
    h.c.acls.configure(True)
    return h


def run_slices(h: ClassicHarness, reply, between=lambda: None) -> int:
    fires = 0
    while type(reply) is Reply and not reply.done:
        assert fires < 10_000, "never answered"
        h.advance(1)
        fires += 1
        between()
    return fires


def creation(name: str, principal: str = "User:alice", permission: int = 3, pattern: int = 3):
    return wire.CreateAclsRequestAclCreation(resource_type=GROUP, resource_name=name, resource_pattern_type=pattern,
                                             principal=principal, host="*", operation=READ,
                                             permission_type=permission)


def every_filter(**kw):
    fields = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1)
    fields.update(kw)
    return fields


def answer(reply):
    return reply.response if type(reply) is Reply else reply


def test_many_acls_are_made_listed_and_removed_in_slices() -> None:
    h = sliced()
    n = MAX_RECORDS
    reply = h.c.handle(wire.CreateAclsRequest(creations=[creation(f"g{i:05d}") for i in range(n)]), 3)
    assert type(reply) is Reply and not reply.done  # parked: the loop is given back before the last is made
    sizes: list[int] = []
    assert run_slices(h, reply, lambda: sizes.append(len(h.c.acls.authorizer))) >= 2
    assert any(0 < size < n for size in sizes)  # made over several slices, not in one
    assert [r.error_code for r in reply.response.results] == [E.NONE] * n
    assert len(h.c.acls.authorizer) == n
    reply = h.c.handle(wire.DescribeAclsRequest(**every_filter()), 3)
    assert type(reply) is Reply and not reply.done
    run_slices(h, reply)
    assert sorted(r.resource_name for r in reply.response.resources) == [f"g{i:05d}" for i in range(n)]
    reply = h.c.handle(wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(**every_filter())]), 3)
    assert type(reply) is Reply and not reply.done
    run_slices(h, reply)
    assert len(reply.response.filter_results[0].matching_acls) == n
    assert len(h.c.acls.authorizer) == 0


def test_more_than_10000_in_one_request_are_refused_whole_as_kafkas_controller_bounds_them() -> None:
    h = sliced()
    r = answer(h.c.handle(wire.CreateAclsRequest(creations=[creation(f"g{i}") for i in range(MAX_RECORDS + 1)]), 3))
    assert {(x.error_code, x.error_message) for x in r.results} == {
        (E.UNKNOWN_SERVER_ERROR, "Cannot create more than 10000 acls in a single create operation.")}
    assert len(r.results) == MAX_RECORDS + 1 and len(h.c.acls.authorizer) == 0
    for part in (range(0, MAX_RECORDS), range(MAX_RECORDS, MAX_RECORDS + 2)):
        run_slices(h, h.c.handle(wire.CreateAclsRequest(creations=[creation(f"g{i}") for i in part]), 3))
    # a filter whose matches would take the request past the bound fails alone; the others' ACLs go
    reply = h.c.handle(wire.DeleteAclsRequest(filters=[
        wire.DeleteAclsRequestDeleteAclsFilter(**every_filter(resource_name_filter="g0", pattern_type_filter=3)),
        wire.DeleteAclsRequestDeleteAclsFilter(**every_filter())]), 3)
    run_slices(h, reply)
    results = reply.response.filter_results
    assert [(f.error_code, len(f.matching_acls)) for f in results] == [(E.NONE, 1), (E.UNKNOWN_SERVER_ERROR, 0)]
    assert results[1].error_message == "Cannot remove more than 10000 acls in a single delete operation."
    assert len(h.c.acls.authorizer) == MAX_RECORDS + 1


def test_between_slices_no_decision_is_more_permissive_than_before_and_after() -> None:
    """An ALLOW and a DENY of alice's READ on `g` in one creation among thousands (the ALLOW first in the request):
    the DENYs are applied first, so alice is never allowed in between, though before and after she is not. Their
    removal takes the ALLOWs first, so she is not allowed in between either."""
    h = sliced()
    fill = [creation(f"filler-{i}", principal="User:carol") for i in range(5_000)]
    reply = h.c.handle(wire.CreateAclsRequest(creations=[creation("g"), *fill, creation("g", permission=2)]), 3)
    authorize = h.c.acls.authorizer.authorize
    seen = []

    def between() -> None:
        seen.append(authorize("User:alice", "10.0.0.1", READ, GROUP, "g"))

    between()
    assert run_slices(h, reply, between) >= 2
    assert not any(seen), "alice was allowed between two slices"
    # removing both (and the fillers): the ALLOW goes before the DENY
    reply = h.c.handle(wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(**every_filter())]), 3)
    seen.clear()
    run_slices(h, reply, between)
    assert not any(seen[:-1])
    assert not authorize("User:alice", "10.0.0.1", READ, GROUP, "g")  # no ACL, allow.everyone false: refused


def test_acl_records_load_back_into_another_coordinator() -> None:
    store = GroupStore(MemoryRecords())
    c = Coordinator(store=store)
    c.acls.configure(True)
    c.handle(wire.CreateAclsRequest(creations=[creation("a"), creation("b-", pattern=4, permission=2)]), 3)
    c.handle(wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
        **every_filter(resource_name_filter="a"))]), 3)
    store.commit()
    again = Coordinator(store=store)
    stats = again.load()
    assert stats.acls == 1 and again.acls.authorizer.acls == c.acls.authorizer.acls


def test_more_than_10000_filters_in_one_delete_are_refused_whole() -> None:
    h = sliced()
    run_slices(h, h.c.handle(wire.CreateAclsRequest(creations=[creation("g")]), 3))
    f = wire.DeleteAclsRequestDeleteAclsFilter(**every_filter())
    r = answer(h.c.handle(wire.DeleteAclsRequest(filters=[f] * (MAX_RECORDS + 1)), 3))
    assert {(x.error_code, x.error_message, len(x.matching_acls)) for x in r.filter_results} == {
        (E.UNKNOWN_SERVER_ERROR, "kcoord takes at most 10000 filters in one DeleteAcls request", 0)}
    assert len(r.filter_results) == MAX_RECORDS + 1 and len(h.c.acls.authorizer) == 1
