"""kcoord.gcpolicy: what survives a full garbage collection is frozen, so a full collection scans what was made since
the last one, not the server's whole state; and nothing kcoord drops while serving is left as cyclic garbage, which
a frozen object would never be freed from.

The garbage checks run with automatic collection off and DEBUG_SAVEALL, so the one collection at the end sees
every cycle the churn made (none may be found), and each group the churn made must be gone by then.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import urllib.request
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kcoord import gcpolicy, wire
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.store import MemoryRecords

from ..support.harness import SESSION, ClassicHarness, ConnectHarness, ConsumerHarness, MigrationHarness
from ..support.servers import ThreadServer, commit_frame, recv_exact
from ..support.waits import wait_for


@contextmanager
def cyclic_garbage() -> Iterator[list]:
    """Yields a list that, after the block, holds every object that became cyclic garbage inside it."""
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection (nor a freeze after one) hides a cycle from the final one
    gc.collect()
    found: list = []
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def kinds(objects: list) -> str:
    return ", ".join(f"{n} {t}" for t, n in Counter(
        f"{type(o).__module__}.{type(o).__qualname__}" for o in objects).most_common(12))


class Watched:
    """Weak references to every group a coordinator holds whenever `see` is called."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []

    def see(self, c: Coordinator) -> None:
        self.refs += [weakref.ref(g) for g in c.groups.values()]

    def alive(self) -> list:
        return [g for g in (r() for r in self.refs) if g is not None]


def commit(c: Coordinator, group: str, generation: int = -1, member: str = "", topic: str = "t") -> None:
    r = c.handle(wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, topics=[
            wire.OffsetCommitRequestTopic(name=topic, partitions=[
                wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 8)
    assert r.topics[0].partitions[0].error_code == 0


def delete(c: Coordinator, *groups: str) -> None:
    r = c.handle(wire.DeleteGroupsRequest(groups_names=list(groups)), 2)
    assert all(x.error_code == 0 for x in r.results), r


# ---- churns: groups of each type made, used and dropped, in-process ----------------------------------------------

def classic_churn(w: Watched) -> Coordinator:
    h = ClassicHarness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000)
    for i in range(6):
        gid = f"c{i}"
        mid = h.dynamic_member(gid=gid)
        joined = h.join(mid, gid=gid)  # parked until the initial delay ends
        h.advance(5_000)
        gen = joined.response.generation_id
        assert h.sync(mid, gen, gid=gid, assignments={mid: b"a"}).response.error_code == 0
        assert h.heartbeat(mid, gen, gid=gid) == 0
        commit(h.c, gid, gen, mid)
        w.see(h.c)
        if i % 3 == 0:
            assert h.leave((mid, None), gid=gid).error_code == 0
        elif i % 3 == 1:
            h.advance(SESSION + 1)  # expires at its session timeout
        else:  # a second member joins and is still parked when the first leaves
            second = h.dynamic_member(gid=gid)
            parked = h.join(second, gid=gid)
            h.leave((mid, None), gid=gid)
            h.advance(35_000)
            assert parked.done
            h.advance(SESSION + 1)
        delete(h.c, gid)
    ids = h.form("a", "b", None)  # static members, replaced, then gone
    h.join(iid="a")
    w.see(h.c)
    h.leave(("", "a"), ("", "b"), (ids["d2"], None))
    delete(h.c, "g")
    for i in range(20):  # simple consumers: their groups go with DeleteGroups, or expire with their offsets
        commit(h.c, f"simple-{i}")
    w.see(h.c)
    delete(h.c, *(f"simple-{i}" for i in range(10)))
    h.advance(61_000 + 1_000)
    assert not h.c.groups
    return h.c


def consumer_churn(w: Watched) -> Coordinator:
    h = ConsumerHarness(topics={"T": 4})
    for i in range(6):
        gid = f"k{i}"
        a = h.join("a", gid=gid)
        b = h.join("b", gid=gid)
        h.hb("a", a.member_epoch, owned={}, gid=gid)
        h.hb("b", b.member_epoch, owned={}, gid=gid)
        w.see(h.c)
        assert h.hb("a", -1, gid=gid).error_code == 0  # leaves
        h.advance(60_000)  # b is fenced at its session timeout
        delete(h.c, gid)
    assert not h.c.groups
    return h.c


def connect_churn(w: Watched) -> Coordinator:
    h = ConnectHarness()
    for i in range(6):
        gid = f"w{i}"
        h.epoch.clear()
        h.join("w1", gid=gid)
        h.join("w2", gid=gid)
        w.see(h.c)
        assert h.hb("w1", -1, gid=gid).error_code == 0
        h.advance(120_000)
        delete(h.c, gid)
    assert not h.c.groups
    return h.c


def migration_churn(w: Watched) -> Coordinator:
    h = MigrationHarness(group_consumer_migration_policy="bidirectional")
    for _ in range(3):
        a, b = h.form_classic(2)
        w.see(h.c)
        assert h.chb("c", 0, join=True).error_code == 0  # upgraded to a consumer group
        w.see(h.c)
        assert h.chb("c", -1).error_code == 0  # the last consumer member leaves: a classic group again
        w.see(h.c)
        h.leave((a, None), (b, None))
        h.advance(60_000)
        delete(h.c, "g")
    commit(h.c, "g")  # a simple consumer's commit makes an empty classic group...
    w.see(h.c)
    assert h.chb("x", 0, join=True).error_code == 0  # ...which a consumer member's join replaces
    w.see(h.c)
    assert h.chb("x", -1).error_code == 0
    delete(h.c, "g")
    assert not h.c.groups
    return h.c


@pytest.mark.parametrize("churn", [classic_churn, consumer_churn, connect_churn, migration_churn],
                         ids=["classic", "consumer", "connect", "migration"])
def test_groups_dropped_by_every_path_are_freed_by_reference_counting(churn: Callable[[Watched], Coordinator]) -> None:
    w = Watched()
    with cyclic_garbage() as garbage:
        c = churn(w)
    assert w.refs, "the churn made no group"
    assert not garbage, f"cyclic garbage left by the churn: {kinds(garbage)}"
    assert not w.alive(), f"groups still referenced: {w.alive()}"
    del c


# ---- the real server: connections opened, used and closed ---------------------------------------------------------

def call(sock: socket.socket, api: int, version: int, corr: int, req: wire.Message):
    sock.sendall(wire.encode_request(api, version, corr, "gc-churn", req))
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    return wire.decode_response(api, version, recv_exact(sock, n))[1]


def join_request(gid: str, member: str = "") -> wire.JoinGroupRequest:
    return wire.JoinGroupRequest(group_id=gid, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                 member_id=member, protocol_type="consumer",
                                 protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"m")])


def connection_churn(srv: ThreadServer, rounds: int) -> None:
    for i in range(rounds):
        gid = f"g{i}"
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            call(s, 18, 3, 1, wire.ApiVersionsRequest(client_software_name="gc", client_software_version="1"))
            call(s, 3, 12, 2, wire.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            mid = call(s, 11, 9, 3, join_request(gid)).member_id
            gen = call(s, 11, 9, 4, join_request(gid, mid)).generation_id
            assert call(s, 14, 5, 5, wire.SyncGroupRequest(
                group_id=gid, generation_id=gen, member_id=mid, protocol_type="consumer", protocol_name="range",
                assignments=[wire.SyncGroupRequestAssignment(member_id=mid, assignment=b"a")])).error_code == 0
            assert call(s, 12, 4, 6, wire.HeartbeatRequest(group_id=gid, generation_id=gen, member_id=mid)) \
                .error_code == 0
            s.sendall(commit_frame(7, f"simple-{i}", 0, i))  # a simple consumer's commit
            recv_exact(s, struct.unpack(">i", recv_exact(s, 4))[0])
            other = call(s, 11, 9, 8, join_request(gid)).member_id
            # a second member's join waits for the first to rejoin; its client goes meanwhile
            s.sendall(wire.encode_request(11, 9, 9, "gc-churn", join_request(gid, other)))
            wait_for(lambda g=gid: srv.server.coordinator.groups[g].state_name == "PreparingRebalance",
                     f"{gid} to prepare a rebalance", 10.0, interval=0.01)
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            assert call(s, 13, 5, 1, wire.LeaveGroupRequest(group_id=gid, members=[
                wire.LeaveGroupRequestMemberIdentity(member_id=m) for m in (mid, other)])).error_code == 0
            r = call(s, 42, 2, 2, wire.DeleteGroupsRequest(groups_names=[gid, f"simple-{i}"]))
            assert [x.error_code for x in r.results] == [0, 0]
        if srv.server.metrics is not None:
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.server.metrics.port}/metrics", timeout=10) as r:
                assert r.status == 200
    wait_for(lambda: not srv.server.connections and not srv.server.coordinator.groups,
             "every connection and group gone", 10.0, interval=0.01)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_closed_connections_are_freed_by_reference_counting(loop: str) -> None:
    """Connections (and a metrics scrape's) opened, used and closed, one with a JoinGroup still parked: nothing
    they leave is cyclic garbage, under asyncio (whose transport refers to itself until kcoord drops that) and
    under uvloop (what `kcoord serve` runs)."""
    policy = asyncio.get_event_loop_policy()
    if loop == "uvloop":
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        srv = ThreadServer(MemoryRecords(), topics=["t:4"], metrics_port=0,
                           group=GroupConfig(group_initial_rebalance_delay_ms=0))
    finally:
        asyncio.set_event_loop_policy(policy)
    try:
        assert srv.error is None, srv.error
        connection_churn(srv, 2)  # what the first requests make once (caches, the codec's tables) is not churn
        with cyclic_garbage() as garbage:
            connection_churn(srv, 10)
        assert not garbage, f"cyclic garbage left by closed connections: {kinds(garbage)}"
    finally:
        srv.close()


# ---- the policy ------------------------------------------------------------------------------------------------------

GROUPS = 40_000  # junk groups (about 5 tracked objects each): well past what CPython lets pile up between full ones


def test_a_full_collection_scans_what_was_made_since_the_last_not_the_whole_state() -> None:
    """Issue 30's junk groups, in-process: with the policy installed, each full collection scans at most a small
    part of the state, while the frozen objects (out of every collection) grow with it."""
    scanned: list[int] = []

    def probe(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            scanned.append(sum(len(gc.get_objects(generation)) for generation in range(3)))

    h = ClassicHarness()
    holder = object()
    before = gcpolicy.installed()  # by a server another test left running (then it stays)
    gcpolicy.install(holder)
    frozen_before = gc.get_freeze_count()  # what the test process held
    gc.callbacks.append(probe)
    try:
        for i in range(GROUPS):
            h.c.handle(wire.OffsetCommitRequest(
                group_id=f"junk-{i}", generation_id_or_member_epoch=-1, member_id="", topics=[
                    wire.OffsetCommitRequestTopic(name="t", partitions=[
                        wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 8)
        frozen = gc.get_freeze_count() - frozen_before
        auto = list(scanned)
    finally:
        gc.callbacks.remove(probe)
        gcpolicy.uninstall(holder)
    assert len(h.c.groups) == GROUPS
    assert len(auto) >= 3, "too few full collections ran to show anything"
    state = 4 * GROUPS  # at least: each group, its member table, timers and their callback
    assert max(auto) < state // 3, f"a full collection scanned {max(auto)} objects (state: {frozen} frozen)"
    assert frozen >= state, f"only {frozen} objects frozen for {GROUPS} groups"
    assert gcpolicy.installed() == before and (before or gc.get_freeze_count() == 0)  # the collector as it was


def test_the_policy_lasts_while_any_server_holds_it() -> None:
    a, b = object(), object()
    before = gcpolicy.installed()
    gcpolicy.install(a)
    gcpolicy.install(b)
    try:
        gcpolicy.uninstall(a)
        assert gcpolicy.installed()
        gc.collect()
        assert gc.get_freeze_count() > 0  # what survived was frozen
    finally:
        gcpolicy.uninstall(b)
        gcpolicy.uninstall(b)  # twice: nothing more happens
    assert gcpolicy.installed() == before and (before or gc.get_freeze_count() == 0)
