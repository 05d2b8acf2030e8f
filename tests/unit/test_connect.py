"""Connect groups in-process (kcoord.groups.connect): the behaviours of kcoord's connect protocol
(docs/connect-protocol.md), driven through the coordinator with a manual clock and a real (in-memory) record store."""

from __future__ import annotations

from collections import Counter

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.groups.connect import UNREVOKED, ConnectGroup
from kcoord.store import StoreError
from kcoord.timers import ManualClock

from ..support.harness import ConnectHarness, assignor, owners, plain
from ..support.snapshots import check_rebuild

W = wire
SESSION = 45_000
INTERVAL = 5_000
REBALANCE = 60_000
HB, PREPARE, INSTALL, DESCRIBE = 1000, 1001, 1002, 1003


def settle(h: ConnectHarness, owned: dict[str, dict], rounds: int = 10) -> list[tuple[str, dict, dict]]:
    """Every worker heartbeats in turn reporting what it owns, until nothing changes; returns each change as
    (member, before, after), and checks that no response both adds and removes."""
    changes = []
    for _ in range(rounds):
        moved = False
        for mid in list(owned):
            before_epoch = h.epoch.get(mid)
            r = h.hb(mid, owned=owned[mid])
            assert r.error_code == E.NONE, (mid, r)
            if r.assignment is not None:
                new = plain(r.assignment.connectors_and_tasks)
                old = owned[mid]
                old_set, new_set = units_of(old), units_of(new)
                assert old_set <= new_set or new_set <= old_set, f"{mid}: one response adds and removes {old} {new}"
                if new != old:
                    changes.append((mid, old, new))
                    moved = True
                owned[mid] = new
            moved |= r.member_epoch != before_epoch
        if not moved:
            return changes
    raise AssertionError("the group did not settle")


def units_of(u: dict) -> set:
    return {("c", c) for c in u.get("c", [])} | {(k, t) for k, ts in u.get("t", {}).items() for t in ts}


# ---- membership and validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("change, words", [
    ({"assignors": None}, "ClientAssignors"),
    ({"assignors": []}, "ClientAssignors"),
    ({"server_assignor": "uniform"}, "ServerAssignor"),
    ({"rebalance": -1}, "RebalanceTimeoutMs"),
    ({"owned": {"c": ["a"]}}, "ConnectorsAndTasks"),
])
def test_connect_join_requires_client_assignors(change, words) -> None:
    h = ConnectHarness()
    kw = {"owned": {}, "assignors": [assignor()], "rebalance": REBALANCE, **change}
    r = h.hb("w1", 0, **kw)
    assert (r.error_code, words in r.error_message) == (E.INVALID_REQUEST, True)
    assert "g" not in h.c.groups


@pytest.mark.parametrize("lo, hi, version", [(-2, 2, 1), (1, -1, -1), (3, 2, 2), (1, 2, 3), (1, 2, 0)])
def test_connect_version_range_rules(lo, hi, version) -> None:
    h = ConnectHarness()
    r = h.hb("w1", 0, owned={}, assignors=[assignor(lo, hi, version=version)], rebalance=REBALANCE)
    assert r.error_code == E.INVALID_REQUEST and "Assignor ica" in r.error_message


def test_connect_version_range_disjoint_is_unsupported_assignor_and_leaves_the_group_unchanged() -> None:
    h = ConnectHarness()
    h.join("w1", lo=1, hi=2)
    h.join("w2", lo=2, hi=3)
    before = (h.group().group_epoch, list(h.group().members))
    r = h.join("w3", lo=3, hi=4)  # the group's intersection is [2, 2]
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR and "[2, 2]" in r.error_message
    assert (h.group().group_epoch, list(h.group().members)) == before
    # and a worker naming only an assignor nobody else has
    r = h.hb("w4", 0, owned={}, assignors=[assignor(name="other")], rebalance=REBALANCE)
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR


def test_connect_member_id_client_generated() -> None:
    h = ConnectHarness()
    for epoch in (0, 1, -1):
        r = h.hb("", epoch, owned={}, assignors=[assignor()], rebalance=REBALANCE)
        assert r.error_code == E.INVALID_REQUEST and "MemberId" in r.error_message
    r = h.join("my-worker-id")
    assert r.member_id == "my-worker-id" and r.error_code == E.NONE


def test_connect_unknown_member_and_group() -> None:
    h = ConnectHarness()
    assert h.hb("w1", 3).error_code == E.GROUP_ID_NOT_FOUND
    h.join("w1")
    assert h.hb("nobody", 3).error_code == E.UNKNOWN_MEMBER_ID
    assert h.prepare("w1", 0, gid="missing").error_code == E.GROUP_ID_NOT_FOUND


def test_connect_max_size() -> None:
    h = ConnectHarness(group_connect_max_size=2)
    h.join("w1")
    h.join("w2")
    assert h.join("w3").error_code == E.GROUP_MAX_SIZE_REACHED
    assert len(h.group().members) == 2


def test_a_worker_whose_assignor_metadata_would_pass_message_max_bytes_is_refused() -> None:
    # A worker's record holds its assignors' metadata: one that would pass message.max.bytes is refused
    # (UNKNOWN_SERVER_ERROR, the consumer group's answer) at its join and when it grows, and nothing of it is kept.
    h = ConnectHarness()
    assert h.join("w1").error_code == E.NONE
    r = h.join("w2", metadata=b"x" * (2 << 20))  # under the default bound, 1048588
    assert r.error_code == E.UNKNOWN_SERVER_ERROR and "message.max.bytes" in r.error_message
    g = h.group()
    assert list(g.members) == ["w1"] and h.records.data.get(R.connect_member_key("g", "w2")) is None
    epoch = g.group_epoch
    r = h.hb("w1", assignors=[assignor(metadata=b"x" * (2 << 20))])
    assert r.error_code == E.UNKNOWN_SERVER_ERROR and g.members["w1"].assignors[0][5] == b"url"
    assert g.group_epoch == epoch and h.hb("w1").error_code == E.NONE
    assert h.join("w2", metadata=b"x" * 1_000_000).error_code == E.NONE  # under the bound: taken


def test_connect_protocol_off_answers_unsupported_version() -> None:
    c = Coordinator(GroupConfig(), ManualClock(0))
    r = c.handle(W.ConnectGroupHeartbeatRequest(group_id="g", member_id="w", member_epoch=0,
                                                       rebalance_timeout_ms=1, client_assignors=[assignor()]), 0)
    assert r.error_code == E.UNSUPPORTED_VERSION
    assert {HB, PREPARE, INSTALL, DESCRIBE} <= c.hidden_apis
    assert not {HB, PREPARE, INSTALL, DESCRIBE} & ConnectHarness().c.hidden_apis


# ---- computation ---------------------------------------------------------------------------------------------------

def test_connect_first_worker_computes() -> None:
    h = ConnectHarness()
    r = h.join("w1")
    assert (r.member_epoch, r.should_compute_assignment, r.assignor_version) == (0, True, 2)
    assert h.group().group_epoch == 1
    p = h.prepare("w1")
    assert (p.error_code, p.group_epoch, [m.member_id for m in p.members]) == (E.NONE, 1, ["w1"])
    assert h.hb("w1").should_compute_assignment is False  # asked until it prepares, not after
    h.install("w1", {"w1": {"c": ["a"], "t": {"a": [0, 1]}}}, group_epoch=p.group_epoch)
    r = h.hb("w1")
    assert r.member_epoch == 1 and plain(r.assignment.connectors_and_tasks) == {"c": ["a"], "t": {"a": [0, 1]}}
    assert (r.assignment.version, r.assignment.metadata) == (2, b"leader=w1")
    assert h.group().state_name == "Stable" and h.group().members["w1"].state == 0


def test_connect_select_covering_worker() -> None:
    h = ConnectHarness()
    h.join("B", lo=3, hi=4)
    h.join("C", lo=2, hi=4)
    h.join("A", lo=1, hi=5)
    g = h.group()
    g.computing = None  # choose again now that all three are in
    g.owe_computation()
    assert g.computing == "A"
    assert h.hb("A").assignor_version == 4 and g.negotiated()[1] == 4


def test_connect_select_without_cover() -> None:
    h = ConnectHarness()
    h.join("A", lo=1, hi=2)
    r = h.join("B", lo=2, hi=3)
    assert r.error_code == E.NONE
    g = h.group()
    g.computing = None
    g.owe_computation()
    assert g.computing == "B"  # nobody covers [1, 3]: the highest maximum
    assert h.hb("A").assignor_version == 2 and h.hb("B").assignor_version == 2


@pytest.mark.parametrize("ranges, version", [
    ({"A": (0, 3), "B": (1, 5), "C": (3, 4)}, 3),  # B: the highest maximum, also the widest
    ({"A": (0, 4), "B": (2, 5), "C": (3, 4)}, 4),  # B: the highest maximum; A is the widest
])
def test_connect_select_without_cover_takes_the_highest_maximum(ranges, version) -> None:
    """Nobody's range covers all the others': the worker with the highest maximum computes (B), not the one with
    the highest minimum (C), the widest range or the first to join (A). Chosen when the computing worker leaves,
    and told so in its heartbeat answer."""
    h = ConnectHarness()
    h.join("first", lo=3, hi=3)  # computes at once, then leaves: the three below are chosen among
    for w, (lo, hi) in ranges.items():
        assert h.join(w, lo=lo, hi=hi).error_code == E.NONE
    g = h.group()
    assert g.computing == "first"
    assert h.hb("first", -1).error_code == E.NONE
    answers = {w: h.hb(w) for w in ranges}
    assert {w: (r.error_code, r.should_compute_assignment, r.assignor_version) for w, r in answers.items()} == {
        "A": (E.NONE, False, version), "B": (E.NONE, True, version), "C": (E.NONE, False, version)}
    assert h.prepare("B").error_code == E.NONE and h.prepare("A").error_code == E.UNKNOWN_MEMBER_ID


def test_connect_prepare_from_non_chosen() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    other = "w2" if g.computing == "w1" else "w1"
    assert h.prepare(other).error_code == E.UNKNOWN_MEMBER_ID
    assert h.prepare(g.computing, 7).error_code == E.STALE_MEMBER_EPOCH
    assert h.install(other, {}).error_code == E.UNKNOWN_MEMBER_ID


def test_connect_install_validation() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    w = g.computing
    h.prepare(w)
    before = (len(h.records.data), g.assignment_epoch, len(g.units))
    twice = h.install(w, {"w1": {"t": {"a": [0, 1]}}, "w2": {"t": {"a": [1]}}})
    assert twice.error_code == E.INVALID_REQUEST and "assigned more than once (w1, w2)" in twice.error_message
    unknown = h.install(w, {"w1": {"c": ["a"]}, "ghost": {"c": ["b"]}})
    assert unknown.error_code == E.INVALID_REQUEST and "ghost" in unknown.error_message
    same = h.install(w, {"w1": {"t": {"a": [3, 3]}}})  # one member given a task twice
    assert same.error_code == E.INVALID_REQUEST and "assigned more than once (w1)" in same.error_message
    m = W.ConnectGroupInstallAssignmentRequestMember(
        member_id="w1", connectors_and_tasks=W.ConnectGroupInstallAssignmentRequestConnectorsAndTasks(
            connectors=[], tasks=[]), version=2, metadata=b"")
    listed_twice = h.c.handle(W.ConnectGroupInstallAssignmentRequest(
        group_id="g", member_id=w, member_epoch=h.epoch[w], group_epoch=g.group_epoch, error=0, members=[m, m]), 0)
    assert listed_twice.error_code == E.INVALID_REQUEST and "listed twice" in listed_twice.error_message
    assert (len(h.records.data), g.assignment_epoch, len(g.units)) == before
    h2 = ConnectHarness()
    h2.join("w1")
    h2.join("w2")
    g2 = h2.group()
    w2 = g2.computing
    h2.prepare(w2)
    assert h2.install(w2, {}, group_epoch=g2.group_epoch - 1).error_code == E.REBALANCE_IN_PROGRESS
    assert h2.install(w2, {}, epoch=99).error_code == E.STALE_MEMBER_EPOCH
    assert (g2.assignment_epoch, len(g2.units)) == (0, 0)  # nothing installed, nothing interned


def test_connect_install_refused_persists_nothing() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    w = g.computing
    h.prepare(w)
    snapshot = dict(h.records.data)
    r = h.install(w, {"w1": {"t": {"a": [0, 1], "b": [0]}}, "w2": {"t": {"b": [0]}}})
    assert r.error_code == E.INVALID_REQUEST
    assert h.records.data == snapshot
    assert (g.assignment_epoch, len(g.units), g.computing) == (0, 0, w)
    h.install(w, {"w1": {"t": {"a": [0, 1]}}, "w2": {"t": {"b": [0]}}})
    assert g.assignment_epoch == g.group_epoch and len(g.units) == 3


def test_connect_install_after_a_refused_one_gives_every_worker_its_units_by_name() -> None:
    """An Install refused for a unit given twice interns its units, names one in the refusal and forgets them; the
    valid Installs after it (the same units listed in another order, then more units) reach every worker by name,
    in its heartbeat answers and in ConnectGroupDescribe, and survive a restart."""
    h = ConnectHarness()
    for w in ("w1", "w2", "w3"):
        h.join(w)
    g = h.group()
    h.prepare(g.computing)
    twice = h.install(g.computing, {"w1": {"c": ["a"], "t": {"a": [0, 1, 2]}}, "w2": {"c": ["b"], "t": {"a": [2]}},
                                    "w3": {"t": {"b": [0]}}})
    assert twice.error_code == E.INVALID_REQUEST and "assigned more than once (w1, w2)" in twice.error_message
    assert len(g.units) == 0
    owned: dict[str, dict] = {"w1": {}, "w2": {}, "w3": {}}

    def check(installed: dict[str, dict]) -> None:
        settle(h, owned)
        assert owned == installed  # what each worker was told, by name, heartbeat by heartbeat
        d = h.describe()
        assert d.error_code == E.NONE
        assert {m.member_id: plain(m.target_assignment) for m in d.members} == installed
        assert {m.member_id: plain(m.assignment) for m in d.members} == installed
        assert all(plain(m.pending_revocation) == {} for m in d.members)
        owners(g)

    # the same units in another order: each interned id now names another unit than in the refused Install
    first = {"w1": {"t": {"b": [0]}}, "w2": {"t": {"a": [2, 1]}}, "w3": {"c": ["b", "a"], "t": {"a": [0]}}}
    h.install(g.computing, first)
    check({"w1": {"t": {"b": [0]}}, "w2": {"t": {"a": [1, 2]}}, "w3": {"c": ["a", "b"], "t": {"a": [0]}}})
    # a later Install that moves units and adds new ones (the table grows past the refused Install's length)
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])  # a config change: compute again
    second = {"w1": {"c": ["a"], "t": {"b": [0, 1]}}, "w2": {"t": {"a": [2], "c": [0]}},
              "w3": {"c": ["b", "c"], "t": {"a": [0, 1]}}}
    h.compute(g.computing, second)
    check({"w1": {"c": ["a"], "t": {"b": [0, 1]}}, "w2": {"t": {"a": [2], "c": [0]}},
           "w3": {"c": ["b", "c"], "t": {"a": [0, 1]}}})
    d2 = h.restarted().handle(W.ConnectGroupDescribeRequest(group_ids=["g"]), 0).groups[0]
    assert {m.member_id: plain(m.target_assignment) for m in d2.members} == owned


def test_connect_compute_lease_expires() -> None:
    h = ConnectHarness()
    h.join("w1", rebalance=10_000)
    h.join("w2", rebalance=10_000)
    g = h.group()
    slow = g.computing
    other = "w2" if slow == "w1" else "w1"
    h.advance(9_000)
    h.hb("w1"), h.hb("w2")
    assert g.computing == slow
    h.advance(1_500)
    assert g.computing == other  # the lease passed to the other worker
    assert slow in g.members  # and the slow one is not fenced
    assert h.hb(other).should_compute_assignment is True
    assert h.prepare(slow).error_code == E.UNKNOWN_MEMBER_ID


def test_connect_epoch_moves_during_a_computation_asks_again() -> None:
    h = ConnectHarness()
    h.join("w1")
    p = h.prepare("w1")
    h.join("w2")  # the group moves while w1 computes
    assert h.install("w1", {"w1": {"c": ["a"]}}, group_epoch=p.group_epoch).error_code == E.REBALANCE_IN_PROGRESS
    r = h.hb("w1")
    assert r.should_compute_assignment is True  # asked again at once, not after the lease
    p = h.prepare("w1")
    assert p.group_epoch == 2 and sorted(m.member_id for m in p.members) == ["w1", "w2"]
    assert h.install("w1", {"w1": {"c": ["a"]}, "w2": {"c": ["b"]}}, group_epoch=2).error_code == E.NONE


def test_connect_chosen_worker_leaves() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    chosen = g.computing
    other = "w2" if chosen == "w1" else "w1"
    epoch = g.group_epoch
    assert h.hb(chosen, -1).error_code == E.NONE
    assert g.computing == other and g.group_epoch == epoch + 1
    assert h.hb(other).should_compute_assignment is True


def test_connect_chosen_worker_leaves_mid_compute() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    chosen = g.computing
    other = "w2" if chosen == "w1" else "w1"
    p = h.prepare(chosen)
    assert p.error_code == E.NONE
    chosen_epoch = h.epoch[chosen]
    assert h.hb(chosen, -1).error_code == E.NONE  # gone after its Prepare, before its Install
    assert g.computing == other and h.hb(other).should_compute_assignment is True
    late = h.install(chosen, {other: {"c": ["a"]}}, group_epoch=p.group_epoch, epoch=chosen_epoch)
    assert late.error_code == E.UNKNOWN_MEMBER_ID and g.assignment_epoch == 0


def test_connect_install_after_the_worker_moved_on_while_computing() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    h.compute(g.computing, {"w1": owned["w1"], "w2": owned["w2"]})  # target epoch 3: both still at 2
    h.hb("w2", owned=owned["w2"], assignors=[assignor(reason=2)])  # epoch 4 owed
    w = g.computing
    p = h.prepare(w)
    before = h.epoch[w]
    h.hb(w, owned=owned[w])  # its heartbeat moves it to epoch 3 while it computes
    assert h.epoch[w] == before + 1
    # the Install built before that heartbeat's answer carries the previous epoch: accepted
    assert h.install(w, {"w1": owned["w1"], "w2": owned["w2"]}, group_epoch=p.group_epoch,
                     epoch=before).error_code == E.NONE
    assert g.assignment_epoch == p.group_epoch == 4


def test_connect_stale_install_asks_again() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    w = g.computing
    p = h.prepare(w)
    stale = g.members[w].previous_member_epoch + 1  # neither its epoch nor its previous one
    assert stale != h.epoch[w]
    assert h.install(w, {}, group_epoch=p.group_epoch, epoch=stale).error_code == E.STALE_MEMBER_EPOCH
    assert h.hb(w, owned=owned[w]).should_compute_assignment is True  # not left waiting for the lease


def test_connect_config_mismatch() -> None:
    h = ConnectHarness()
    h.join("w1")
    h.join("w2")
    g = h.group()
    first = g.computing
    p = h.prepare(first)
    r = h.install(first, {}, group_epoch=p.group_epoch, error=1)
    assert r.error_code == E.NONE and g.assignment_epoch == 0 and g.computing == first
    assert h.hb(first).should_compute_assignment is True  # asked again
    h.prepare(first)
    h.install(first, {}, error=1)
    assert g.computing not in (first, None)  # two mismatches: another worker
    second = g.computing
    h.compute(second, {"w1": {"c": ["a"]}, "w2": {"c": ["b"]}})
    assert g.assignment_epoch == g.group_epoch


# ---- reconciliation ------------------------------------------------------------------------------------------------

def two_workers(h: ConnectHarness) -> dict[str, dict]:
    h.join("w1")
    h.join("w2")
    owned = {"w1": {}, "w2": {}}
    h.compute(h.group().computing, {"w1": {"c": ["a"], "t": {"a": [0, 1]}}, "w2": {"c": ["b"], "t": {"b": [0]}}})
    settle(h, owned)
    return owned


def test_connect_revoke_before_assign() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    assert owned == {"w1": {"c": ["a"], "t": {"a": [0, 1]}}, "w2": {"c": ["b"], "t": {"b": [0]}}}
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])  # a config change: compute again
    h.compute(g.computing, {"w1": {"c": ["a"], "t": {"a": [0]}}, "w2": {"c": ["b"], "t": {"a": [1], "b": [0]}}})
    old_epoch = h.epoch["w2"]
    r2 = h.hb("w2", owned=owned["w2"])  # w2 first: task a-1 is still w1's
    assert r2.assignment is None or "a" not in plain(r2.assignment.connectors_and_tasks).get("t", {})
    assert r2.member_epoch > old_epoch  # it moves to the new epoch, without the unreleased task
    r1 = h.hb("w1", owned=owned["w1"])
    assert r1.member_epoch == h.epoch["w1"] and plain(r1.assignment.connectors_and_tasks) == {"c": ["a"],
                                                                                             "t": {"a": [0]}}
    assert g.members["w1"].state == UNREVOKED and r1.member_epoch < g.assignment_epoch  # revokes at its old epoch
    owned["w1"] = {"c": ["a"], "t": {"a": [0]}}
    r2 = h.hb("w2", owned=owned["w2"])
    assert r2.assignment is None  # w1 has not acknowledged yet
    h.hb("w1", owned=owned["w1"])  # acknowledges
    r2 = h.hb("w2", owned=owned["w2"])
    assert plain(r2.assignment.connectors_and_tasks) == {"c": ["b"], "t": {"a": [1], "b": [0]}}
    owners(g)


def test_connect_null_owned_blocks_revocation() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    h.compute(g.computing, {"w1": {"c": ["a"]}, "w2": {"c": ["b"], "t": {"a": [0, 1], "b": [0]}}})
    h.hb("w1", owned=owned["w1"])
    for _ in range(5):
        assert h.hb("w1", owned=None).error_code == E.NONE  # null: it still owns everything
        assert g.members["w1"].state == UNREVOKED
        h.hb("w2", owned=owned["w2"])
        h.advance(INTERVAL)
    h.advance(REBALANCE)
    assert "w1" not in g.members  # the rebalance timeout fenced it
    assert h.hb("w1").error_code == E.UNKNOWN_MEMBER_ID


def test_connect_lost_response() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    h.compute(g.computing, {"w1": {"c": ["a"], "t": {"a": [0, 1]}}, "w2": {"c": ["b"], "t": {"b": [0, 1]}}})
    prev = h.epoch["w2"]
    r = h.hb("w2", owned=owned["w2"])
    assert r.member_epoch > prev  # this response is "lost": the worker retries with its previous epoch
    again = h.hb("w2", prev, owned=owned["w2"])
    assert again.error_code == E.NONE and again.member_epoch == r.member_epoch
    extra = h.hb("w2", prev, owned={"c": ["b", "a"], "t": {"b": [0]}})
    assert extra.error_code == E.FENCED_MEMBER_EPOCH


def test_connect_metadata_only_change() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    h.compute(g.computing, {"w1": owned["w1"], "w2": owned["w2"]}, meta={"w1": b"leader=w2", "w2": b"leader=w2"})
    r = h.hb("w1", owned=owned["w1"])
    assert r.assignment is not None and r.assignment.metadata == b"leader=w2"
    assert plain(r.assignment.connectors_and_tasks) == owned["w1"]
    assert h.hb("w1", owned=owned["w1"]).assignment is None


# ---- triggers and the scheduled delay ----------------------------------------------------------------------------

def test_connect_config_change_trigger() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    epoch = g.group_epoch
    h.hb("w1", owned=owned["w1"], client="another-client-id")
    h.hb("w1", owned=owned["w1"], rebalance=30_000)
    assert g.group_epoch == epoch and g.computing is None  # client id and timeout: no bump
    h.hb("w1", owned=owned["w1"], assignors=[assignor(reason=1)])
    assert g.group_epoch == epoch + 1 and g.computing is not None
    assert g.history[-1].reason == "member w1 updated its assignor's reason or metadata"
    h.hb("w2", owned=owned["w2"], assignors=[assignor(lo=1, hi=3)])
    assert g.group_epoch == epoch + 2 and g.history[-1].reason == "member w2 changed its assignors"


def test_connect_departed_worker_delay() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    for _ in range(10):  # w2 stops heartbeating; w1 carries on
        h.hb("w1", owned=owned["w1"])
        h.advance(INTERVAL)
    assert "w2" not in g.members and g.history[-1].reason.endswith("its session timed out")
    assert g.computing == "w1"
    p = h.prepare("w1")
    assert [(d.member_id, plain(d.target)) for d in p.departed_members] == [("w2", {"c": ["b"], "t": {"b": [0]}})]
    h.install("w1", {"w1": owned["w1"]}, group_epoch=p.group_epoch, delay=20_000, state=b"lost b")
    assert g.delay_remaining_ms() == 20_000
    h.advance(10_000)
    h.join("w3")  # a worker joins meanwhile: a computation is owed anyway; the delay keeps running
    w = g.computing
    p = h.prepare(w)
    assert p.delay_remaining_ms == 10_000 and p.assignor_state == b"lost b" and p.departed_members == []
    h.install(w, {"w1": owned["w1"], "w3": {}}, group_epoch=p.group_epoch, delay=p.delay_remaining_ms, state=b"x")
    epoch = g.group_epoch
    h.advance(9_000)
    h.hb("w1", owned=owned["w1"]), h.hb("w3", owned={})
    assert g.group_epoch == epoch
    h.advance(1_000)
    assert g.group_epoch == epoch + 1 and g.history[-1].reason == "the scheduled rebalance delay ended"
    assert g.computing is not None
    h.compute(g.computing, {"w1": owned["w1"], "w3": {"c": ["b"], "t": {"b": [0]}}})
    owned3 = {"w1": owned["w1"], "w3": {}}
    settle(h, owned3)
    assert owned3["w3"] == {"c": ["b"], "t": {"b": [0]}}


def test_connect_delay_state_survives() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    g = h.group()
    h.hb("w2", -1)
    p = h.prepare("w1")
    h.install("w1", {"w1": owned["w1"]}, group_epoch=p.group_epoch, delay=30_000, state=b"opaque")
    h.advance(5_000)
    c2 = h.restarted()
    g2 = c2.groups["g"]
    assert (g2.assignor_state, g2.delay_remaining_ms(), g2.group_epoch) == (b"opaque", 25_000, g.group_epoch)
    h.c = c2
    h.join("w4")  # a change of the computing worker keeps the state
    h.hb("w1", owned=owned["w1"])
    w = g2.computing
    assert h.prepare(w).assignor_state == b"opaque"
    h.advance(25_000)
    assert g2.history[-1].reason == "the scheduled rebalance delay ended"


def test_connect_static_bounce() -> None:
    h = ConnectHarness()
    h.join("w1", iid="i1")
    h.join("w2", iid="i2")
    h.compute(h.group().computing, {"w1": {"c": ["a"]}, "w2": {"c": ["b"]}})
    owned = {"w1": {}, "w2": {}}
    settle(h, owned)
    g = h.group()
    epoch, computed = g.group_epoch, g.assignment_epoch
    assert h.join("w2b", iid="i2").error_code == E.UNRELEASED_INSTANCE_ID  # the holder is active
    assert h.hb("w2", -2, iid="i2").error_code == E.NONE
    r = h.join("w2b", iid="i2")
    assert r.error_code == E.NONE and plain(r.assignment.connectors_and_tasks) == {"c": ["b"]}
    assert (g.group_epoch, g.assignment_epoch, g.computing) == (epoch, computed, None)  # no bump, no compute
    assert "w2" not in g.members and g.members["w2b"].instance_id == "i2"


# ---- durability, admin, migration -----------------------------------------------------------------------------

def test_connect_replay_roundtrip() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    h.join("w3", iid="i3")
    g = h.group()
    h.compute(g.computing, {"w1": owned["w1"], "w2": {"c": ["b"]}, "w3": {"t": {"b": [0]}}}, state=b"s", delay=5)
    h.hb("w2", owned=owned["w2"])  # w2 is revoking b-0
    c2 = h.restarted()
    g2 = c2.groups["g"]
    for m in g.members.values():
        m2 = g2.members[m.member_id]
        assert (m2.member_epoch, m2.previous_member_epoch, m2.state, m2.assigned.tolist(), m2.pending.tolist(),
                m2.instance_id, m2.assignors) == (m.member_epoch, m.previous_member_epoch, m.state,
                                                  m.assigned.tolist(), m.pending.tolist(), m.instance_id, m.assignors)
        assert g2.target.get(m.member_id).tolist() == g.target.get(m.member_id).tolist()
    assert (g2.group_epoch, g2.assignment_epoch, g2.assignor_state, g2.units.connectors, g2.assignor_version) == \
        (g.group_epoch, g.assignment_epoch, g.assignor_state, g.units.connectors, g.assignor_version)
    assert owners(g2) == owners(g)
    # a stored record naming a unit outside the unit table is refused, not ignored
    bad = dict(h.records.data)
    key = R.connect_target_member_key("g", "w1")
    bad[key] = R.connect_value(W.ConnectGroupTargetAssignmentMemberValue(units=[999], version=0, metadata=b""))
    h.records.data = bad
    with pytest.raises(StoreError, match="outside the unit table"):
        h.restarted()


def test_connect_record_types_are_private_and_distinct() -> None:
    types = ConnectGroup.RECORD_TYPES
    assert len(set(types)) == len(types) == 6
    assert R.KCOORD_TOPIC not in types and min(types) > R.KCOORD_TOPIC > max(R.CONSUMER_RECORDS)
    for t in types:  # every key decodes back to its own type
        key = {R.CONNECT_GROUP_METADATA: R.connect_group_key("g"), R.CONNECT_GROUP_UNITS: R.connect_units_key("g"),
               R.CONNECT_GROUP_MEMBER_METADATA: R.connect_member_key("g", "m"),
               R.CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA: R.connect_target_metadata_key("g"),
               R.CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER: R.connect_target_member_key("g", "m"),
               R.CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT: R.connect_current_assignment_key("g", "m")}[t]
        assert R.record_type(key) == t


def test_connect_replay_refuses_a_unit_held_twice() -> None:
    h = ConnectHarness()
    two_workers(h)
    key = R.connect_current_assignment_key("g", "w2")
    g = h.group()
    w1 = g.members["w1"]
    h.records.data[key] = R.connect_value(W.ConnectGroupCurrentMemberAssignmentValue(
        member_epoch=g.members["w2"].member_epoch, previous_member_epoch=0, state=0, assigned=w1.assigned.tolist(),
        pending_revocation=[]))
    with pytest.raises(StoreError):
        h.restarted()


def test_connect_delete_tombstones_every_record() -> None:
    h = ConnectHarness()
    two_workers(h)
    h.hb("w1", -1)
    h.hb("w2", -1)
    r = h.c.handle(W.DeleteGroupsRequest(groups_names=["g"]), 2)
    assert r.results[0].error_code == E.NONE
    assert not [k for k in h.records.data if R.record_type(k) in ConnectGroup.RECORD_TYPES]


def test_connect_list_and_describe() -> None:
    h = ConnectHarness()
    owned = two_workers(h)
    listed = h.c.handle(W.ListGroupsRequest(states_filter=[], types_filter=["connect"]), 5).groups
    assert [(x.group_id, x.group_type, x.protocol_type, x.group_state) for x in listed] == \
        [("g", "connect", "connect", "Stable")]
    d = h.describe()
    assert (d.group_epoch, d.assignment_epoch, d.assignor_name, d.assignor_version) == (2, 2, "ica", 2)
    assert {m.member_id: plain(m.assignment) for m in d.members} == owned
    assert {m.member_id: plain(m.target_assignment) for m in d.members} == owned
    assert [x.reason for x in d.history] == ["member w1 joined", "member w2 joined"]
    assert h.c.handle(W.DescribeGroupsRequest(groups=["g"]), 6).groups[0].error_code == E.GROUP_ID_NOT_FOUND
    assert h.describe("nope").error_code == E.GROUP_ID_NOT_FOUND
    # the workers commit no offsets in their group
    r = h.c.handle(W.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=2, member_id="w1", topics=[W.OffsetCommitRequestTopic(
            name="t", partitions=[W.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 9)
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.GROUP_ID_NOT_FOUND]


def test_connect_offline_migration() -> None:
    h = ConnectHarness()
    join = W.JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                              protocol_type="connect", protocols=[W.JoinGroupRequestProtocol(name="sessioned",
                                                                                             metadata=b"")])
    h.c.handle(join, 3)  # a live classic connect group
    assert h.join("w1").error_code == E.GROUP_ID_NOT_FOUND
    assert type(h.c.groups["g"]).__name__ == "ClassicGroup"
    h2 = ConnectHarness()  # an empty classic group: a simple consumer's commit made it
    h2.c.handle(W.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[W.OffsetCommitRequestTopic(
            name="t", partitions=[W.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 2)
    assert type(h2.c.groups["g"]).__name__ == "ClassicGroup" and h2.c.groups["g"].is_empty()
    assert h2.join("w1").error_code == E.NONE
    assert isinstance(h2.c.groups["g"], ConnectGroup)


# ---- a random model: joins, leaves, computations, delays, silence ------------------------------------------------

REBUILD_EVERY = 25  # steps between two comparisons of the live group with one rebuilt from its records


@pytest.mark.parametrize("interval", [0, 1_000])
@pytest.mark.parametrize("seed", range(6))
def test_connect_random_model_one_computer_and_no_unit_held_twice(seed: int, interval: int) -> None:
    """Workers join, leave, go silent, come back; whoever is asked computes a random complete assignment over a
    changing unit set (sometimes with a delay, sometimes a config mismatch); everyone reports what it owns. At every
    step: no unit is held by two workers, at most one worker is told to compute, and that worker is a member; every
    REBUILD_EVERY steps the group rebuilt from the records is the live one; at the end, with everyone heartbeating,
    the group settles on the last installed target. With the computation asked for at every change, and at most
    once per group.connect.assignment.interval.ms."""
    import random

    rnd = random.Random(seed)
    h = ConnectHarness(group_connect_min_session_timeout_ms=1_000, group_connect_session_timeout_ms=3_000,
                       group_connect_min_heartbeat_interval_ms=100, group_connect_heartbeat_interval_ms=500,
                       group_connect_assignment_interval_ms=interval)
    owned: dict[str, dict] = {}
    silent: set[str] = set()
    n = 0
    for step in range(250):
        if step % REBUILD_EVERY == 0:  # the group rebuilt from the records written so far is the live one
            check_rebuild(h.c, h.records, f"seed {seed}, before step {step}")
        g = h.c.groups.get("g")
        action = rnd.random()
        if action < 0.12 or not owned:
            n += 1
            mid = f"w{n}"
            if h.join(mid, rebalance=2_000).error_code == E.NONE:
                owned[mid] = {}
        elif action < 0.18:
            mid = rnd.choice(sorted(owned))
            h.hb(mid, -1)
            del owned[mid]
            silent.discard(mid)
        elif action < 0.22:
            silent.add(rnd.choice(sorted(owned)))
        elif action < 0.40 and g is not None and g.computing is not None:
            w = g.computing
            if h.prepare(w).error_code == E.NONE:
                units = [("c", f"k{i}") for i in range(rnd.randint(0, 6))] + \
                        [(f"k{i}", t) for i in range(rnd.randint(0, 6)) for t in range(rnd.randint(0, 4))]
                rnd.shuffle(units)
                members = sorted(g.members)
                targets: dict[str, dict] = {m: {} for m in members if rnd.random() < 0.9}
                for u in units:
                    if not targets or rnd.random() < 0.1:
                        continue  # held back
                    t = targets[rnd.choice(sorted(targets))]
                    if u[0] == "c":
                        t.setdefault("c", []).append(u[1])
                    else:
                        t.setdefault("t", {}).setdefault(u[0], []).append(u[1])
                r = h.install(w, targets, error=1 if rnd.random() < 0.1 else 0,
                              delay=rnd.choice([0, 0, 0, 1_500]))
                assert r.error_code == E.NONE, r
        else:
            h.advance(rnd.choice([10, 100, 400, 1_000]))
        told = set()
        for mid in sorted(owned):
            if mid in silent:
                continue
            r = h.hb(mid, owned=owned[mid])
            if r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH):  # fenced while silent or slow
                owned[mid] = {}
                r = h.join(mid, rebalance=2_000)
            assert r.error_code == E.NONE, (mid, r)
            if r.should_compute_assignment:
                told.add(mid)
            if r.assignment is not None:
                new = plain(r.assignment.connectors_and_tasks)
                assert units_of(new) <= units_of(owned[mid]) or units_of(owned[mid]) <= units_of(new)
                owned[mid] = new
        g = h.c.groups.get("g")
        if g is not None:
            owners(g)
            assert len(told) <= 1 and (not told or told == {g.computing})
            assert g.computing is None or g.computing in g.members
        if silent and rnd.random() < 0.04:
            silent.pop()
    check_rebuild(h.c, h.records, f"seed {seed}, after the last step")
    # Everyone speaks; whoever is asked installs the last target again as it is; the group settles there.
    g = h.group()
    silent.clear()
    for _ in range(30):
        for mid in sorted(owned):
            r = h.hb(mid, owned=owned[mid])
            if r.error_code:
                owned[mid] = {}
                r = h.join(mid, rebalance=2_000)
            if r.assignment is not None:
                owned[mid] = plain(r.assignment.connectors_and_tasks)
        if g.computing is not None and h.prepare(g.computing).error_code == E.NONE:
            h.install(g.computing, {m: {} for m in g.members})
        h.advance(100)
        if g.state_name == "Stable":
            break
    assert g.state_name in ("Stable", "Empty")
    assert all(plain_ids(h, m) == owned[m.member_id] for m in g.members.values())


def plain_ids(h: ConnectHarness, m) -> dict:
    g = h.group()
    return plain(g.units.to_wire(m.assigned, W.ConnectGroupHeartbeatResponseConnectorsAndTasks,
                                 W.ConnectGroupHeartbeatResponseConnectorTasks))


# ---- the scheduled delay end to end: the coordinator and the shipped assignor ------------------------------------

def compute_with_assignor(h: ConnectHarness, assignor, units: dict[str, int]) -> int:
    """What kcoord.client.worker's worker does when asked: Prepare, run the assignor, Install. Returns the delay."""
    from kcoord.client.worker_assignor import AssignmentInput, DepartedInput, MemberInput, WorkerMetadata

    g = h.group()
    w = g.computing
    p = h.prepare(w)
    assert p.error_code == E.NONE, p
    out = assignor.assign(AssignmentInput(
        computing_member_id=w, version=p.assignor_version, now_ms=h.clock.wall_ms(), units=units,
        members=[MemberInput(m.member_id, m.instance_id, m.metadata, m.target, m.target_metadata) for m in p.members],
        departed=[DepartedInput(d.member_id, d.instance_id, d.target) for d in p.departed_members],
        state=p.assignor_state, delay_remaining_ms=p.delay_remaining_ms))
    assert out.error == 0 and WorkerMetadata.decode(p.members[0].metadata).url.startswith("http://")
    targets = {m.member_id: {"c": m.connectors, "t": {t.connector: t.task_ids for t in m.tasks}}
               for m in out.members}
    r = h.install(w, targets, group_epoch=p.group_epoch, delay=out.delay_ms, state=out.state,
                  meta={m.member_id: m.metadata for m in out.members})
    assert r.error_code == E.NONE, r
    return out.delay_ms


def test_connect_scheduled_delay_with_the_shipped_assignor() -> None:
    """Connect's scheduled rebalance delay, kept across computations by the coordinator: a worker that departs and
    returns (same instance id, new process) inside the delay gets its own units back and nothing else moves; one
    that does not return has its units moved only once the delay ends."""
    from kcoord.client.worker_assignor import IncrementalCooperativeAssignor, WorkerMetadata

    delay = 60_000
    ica = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=delay)
    units = {f"c{i}": 4 for i in range(6)}
    h = ConnectHarness()
    for i in (1, 2, 3):
        h.hb(f"w{i}", 0, owned={}, iid=f"i{i}", rebalance=REBALANCE, assignors=[
            assignor(metadata=WorkerMetadata(url=f"http://w{i}", config_offset=5).encode(), name=ica.name)])
    g = h.group()
    owned: dict[str, dict] = {m: {} for m in ("w1", "w2", "w3")}
    compute_with_assignor(h, ica, units)
    settle(h, owned)
    assert sum(len(units_of(u)) for u in owned.values()) == 30
    first = dict(owned)

    def live(*names: str) -> None:
        for _ in range(3):
            for mid in names:
                r = h.hb(mid, owned=owned[mid])
                assert r.error_code == E.NONE, r
                if r.assignment is not None:
                    owned[mid] = plain(r.assignment.connectors_and_tasks)
            if g.computing is not None:
                compute_with_assignor(h, ica, units)

    # w2's process dies: its session ends, it is fenced, its units are held back
    for _ in range(10):
        live("w1", "w3")
        h.advance(INTERVAL)
    assert "w2" not in g.members and g.delay_remaining_ms() > 0
    live("w1", "w3")
    assert owned["w1"] == first["w1"] and owned["w3"] == first["w3"]  # nobody took w2's units
    # it comes back as a new process with the same instance id, inside the delay
    owned["w2b"] = {}
    r = h.hb("w2b", 0, owned={}, iid="i2", rebalance=REBALANCE, assignors=[
        assignor(metadata=WorkerMetadata(url="http://w2", config_offset=5).encode(), name=ica.name)])
    assert r.error_code == E.NONE
    del owned["w2"]
    for _ in range(3):
        live("w1", "w3", "w2b")
    assert owned["w2b"] == first["w2"] and owned["w1"] == first["w1"] and owned["w3"] == first["w3"]
    # now w3 dies for good: its units stay unassigned until the delay ends, then move to the others
    for _ in range(10):
        live("w1", "w2b")
        h.advance(INTERVAL)
    assert "w3" not in g.members
    held_back = units_of(first["w3"])
    waited = 0
    while g.delay_remaining_ms() > INTERVAL:
        live("w1", "w2b")
        assert not held_back & (units_of(owned["w1"]) | units_of(owned["w2b"]))  # not before the delay ends
        h.advance(INTERVAL)
        waited += INTERVAL
    assert waited >= delay - 10 * INTERVAL - INTERVAL
    h.advance(2 * INTERVAL)
    for _ in range(3):
        live("w1", "w2b")
    assert held_back <= units_of(owned["w1"]) | units_of(owned["w2b"])
    assert sorted(len(units_of(u)) for u in (owned["w1"], owned["w2b"])) == [15, 15]
    owners(g)


# ---- the batched computation (group.connect.assignment.interval.ms) ---------------------------------------------

@pytest.mark.parametrize("interval, prepares", [(0, 1_000), (1_000, 2)])
def test_a_thousand_workers_joining_within_one_interval_are_asked_to_compute_once(interval: int,
                                                                                  prepares: int) -> None:
    """1,000 workers join one after another, each heartbeat at once followed by the Prepare a worker told to compute
    makes: with the interval 0 every join asks again (a Prepare of all the members each time, quadratic), with
    1,000 ms the first join's ask and one ask when the interval is over. Then one Install settles the group."""
    h = ConnectHarness(group_connect_assignment_interval_ms=interval)
    prepared = 0

    def follow(mid: str) -> None:
        nonlocal prepared
        if h.hb(mid).should_compute_assignment:
            assert h.prepare(mid).error_code == E.NONE
            prepared += 1
    for i in range(1_000):
        assert h.join(f"w{i}").error_code == E.NONE
        g = h.group()
        if g.computing is not None:
            follow(g.computing)
    if interval:
        assert g.computing is None and g.group_timers.is_armed("assign")
        assert not any(h.hb(m).should_compute_assignment for m in g.members)
        assert h.install("w0", {"w0": {}}).error_code == E.UNKNOWN_MEMBER_ID  # the group moved on
        h.advance(interval)
        follow(g.computing)
    assert prepared == prepares
    w = g.computing
    p = h.prepare(w)
    assert len(p.members) == 1_000
    assert h.install(w, {m: {"c": [m]} for m in g.members}, group_epoch=p.group_epoch).error_code == E.NONE
    assert g.assignment_epoch == g.group_epoch and g.computing is None


def brute_negotiation_problem(g: ConnectGroup, assignors, exclude: str) -> str | None:
    """_negotiation_problem as a pass over every other member (what the kept counts replace)."""
    others = [x for x in g.members.values() if x.member_id != exclude]
    if not others or assignors is None:
        return None
    mine = {a.name: a for a in assignors}
    eldest = min(others, key=lambda x: x.joined)
    for cand in eldest.assignors:
        name = cand[0]
        if name not in mine or not all(any(b[0] == name for b in x.assignors) for x in others):
            continue
        lo = max(next(b for b in x.assignors if b[0] == name)[1] for x in others)
        hi = min(next(b for b in x.assignors if b[0] == name)[2] for x in others)
        a = mine[name]
        return None if max(lo, a.minimum_version) <= min(hi, a.maximum_version) else f"{name} [{lo}, {hi}]"
    return "none in common"


@pytest.mark.parametrize("seed", range(20))
def test_the_kept_assignor_counts_agree_with_a_pass_over_the_members(seed: int) -> None:
    """Workers join with random assignor lists and ranges, change them, leave, come back static under a new id: after
    every step the negotiated assignor and range read from the kept counts are those of a count made afresh from
    the members, and whether a random worker could join (UNSUPPORTED_ASSIGNOR or not) is what a pass over the
    other members says."""
    import random

    rnd = random.Random(seed)
    h = ConnectHarness()

    def lists():
        names = rnd.sample(["x", "y", "z"], rnd.randint(1, 3))
        out = []
        for nm in names:
            lo = rnd.randint(0, 3)
            out.append(assignor(lo, lo + rnd.randint(0, 2), name=nm))
        return out

    live: dict[str, str | None] = {}
    for step in range(120):
        op = rnd.random()
        if op < 0.4 or not live:
            mid, iid = f"w{step}", (f"i{step}" if rnd.random() < 0.3 else None)
            r = h.hb(mid, 0, owned={}, assignors=lists(), rebalance=REBALANCE, iid=iid)
            if r.error_code == E.NONE:
                live[mid] = iid
        elif op < 0.6:
            mid = rnd.choice(sorted(live))
            if h.hb(mid, assignors=lists()).error_code != E.NONE:
                continue
        elif op < 0.75:
            mid = rnd.choice(sorted(live))
            iid = live.pop(mid)
            h.hb(mid, -2 if iid else -1, iid=iid)
            if iid and rnd.random() < 0.7:  # back under a new id: the static replacement
                new = f"{mid}-again"
                r = h.hb(new, 0, owned={}, assignors=lists(), rebalance=REBALANCE, iid=iid)
                if r.error_code == E.NONE:
                    live[new] = iid
        g = h.c.groups.get("g")
        if not isinstance(g, ConnectGroup):
            continue
        fresh: dict[str, tuple] = {}
        for x in g.members.values():
            for a in x.assignors:
                n, los, his = fresh.get(a[0], (0, Counter(), Counter()))
                fresh[a[0]] = (n + 1, los + Counter([a[1]]), his + Counter([a[2]]))
        assert {k: (v[0], +v[1], +v[2]) for k, v in g.support().items()} == fresh, (seed, step)
        assert g.eldest() is min(g.members.values(), key=lambda x: x.joined, default=None)
        probe = lists()
        for exclude in [*sorted(g.members)[:3], "nobody"]:
            assert (g._negotiation_problem(probe, exclude) is None) == \
                (brute_negotiation_problem(g, probe, exclude) is None), (seed, step, exclude)
