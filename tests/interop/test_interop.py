"""kcoord serve driven by unmodified Kafka consumers: confluent-kafka (librdkafka), kafka-python and aiokafka.

One server for the module (a subprocess on a free loopback port, like tests/server/test_server.py), one group id per
test. Each consumer runs on a thread of its own (tests/support/interop_member.py); the kill tests run one member in a
subprocess so that it can be SIGKILLed. What a test asserts is read from both sides: the assignment each client
reports (its assignment() API and rebalance listener) and the server's view (`kcoord describe`'s
describe_group: generation, leader, members with decoded assignments, rebalance history).

Short timeouts keep this fast: session.timeout.ms=6000 (the server's minimum), heartbeats every second, the
server's group.initial.rebalance.delay.ms=300. Every wait polls a condition against a deadline and fails with
what it observed last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from ..support.interop import (
    ALL,
    FORM_TIMEOUT,
    PARTITIONS,
    TOPIC,
    Group,
    coverage,
    described_partitions,
    pretty,
    summary,
    wait_until,
)
from ..support.interop_member import HEARTBEAT_INTERVAL_MS, KINDS, SESSION_TIMEOUT_MS, Member
from ..support.servers import ROOT, free_port, serve

pytestmark = [
    pytest.mark.interop,
    # kafka-python 3.0.12 loads its protocol schemas lazily (on a consumer's first request of each API, on its
    # IO thread) through deprecated importlib.resources calls; the ini ignores only read_text.
    pytest.mark.filterwarnings(r"ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("kcoord") / "server.log"
    srv = serve(free_port(), log, "--topic", f"{TOPIC}:{PARTITIONS}", "--set", "group.initial.rebalance.delay.ms=300")
    yield srv
    srv.proc.terminate()
    rc = srv.proc.wait(timeout=15)
    assert rc == 0, f"the server did not shut down cleanly on SIGTERM (rc {rc}):\n{srv.log_tail()}"


@pytest.fixture
def make_group(server):
    groups: list[Group] = []

    def make(kind: str, name: str, strategy: str | None = None) -> Group:
        g = Group(server, kind, name, strategy)
        groups.append(g)
        return g

    yield make
    for g in groups:
        g.close(*g.members)
    server.check_alive()


def assert_partitioned(members: list[Member]) -> None:
    views = {m.client_id: sorted(m.assigned) for m in members}
    owned = [p for m in members for p in m.assigned]
    assert sorted(owned) == sorted(ALL), f"union/overlap wrong: {views}"
    assert all(views.values()), f"a member holds nothing: {views}"


# ---- 1. groups form: every partition to exactly one member ---------------------------------------------------

VARIANTS = [("confluent", None), ("confluent", "cooperative-sticky"), ("kafka-python", None), ("aiokafka", None)]


@pytest.mark.parametrize("size", [3, 10])
@pytest.mark.parametrize("kind,strategy", VARIANTS, ids=["confluent", "confluent-cooperative", "kafka-python",
                                                          "aiokafka"])
def test_group_forms_and_covers_every_partition(make_group, server, kind, strategy, size) -> None:
    group = make_group(kind, f"forms-{kind}-{size}", strategy)
    # One member first, then the rest at once: the group forms, then rebalances a running member's partitions.
    first = group.start("c0")
    wait_until(lambda: coverage([first], group), FORM_TIMEOUT, f"a lone {kind} member taking every partition",
               server)
    members = [first] + [group.start(f"c{i}") for i in range(1, size)]
    observed = wait_until(lambda: coverage(members, group), FORM_TIMEOUT,
                          f"{size} {kind} members ({strategy or 'default'}) forming a group", server)
    assert_partitioned(members)
    revoked = first.revocations_since(0)
    assert revoked, f"the first member gave up partitions without its listener hearing: {first.callbacks()}"
    if strategy == "cooperative-sticky":
        assert observed["server"]["protocol"] == "cooperative-sticky", observed["server"]
        # Incremental: only what moves is revoked; what the first member keeps is never taken away.
        kept = first.assigned
        assert not any(r & kept for r in revoked), (
            f"cooperative rebalance revoked partitions the first member kept ({sorted(kept)}): "
            f"{first.callbacks()}")
    # Dynamic members leave on close (LeaveGroup): the group ends up empty, not waiting for session timeouts.
    group.close(*members)
    wait_until(lambda: ((d := group.describe())["state"] == "Empty" and not d["members"], summary(d)),
               SESSION_TIMEOUT_MS / 2000, f"the {kind} group emptied by LeaveGroup", server)


# ---- 2. static membership: restarts within the session timeout cause no rebalance --------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_static_member_restart_keeps_assignment_without_rebalance(make_group, server, kind) -> None:
    group = make_group(kind, f"static-{kind}")
    members = {f"i{i}": group.start(f"c{i}", instance_id=f"i{i}") for i in range(3)}
    wait_until(lambda: coverage(list(members.values()), group), FORM_TIMEOUT, f"3 static {kind} members forming",
               server)
    d0 = group.describe()
    generation = d0["generation"]
    before = {iid: m.assigned for iid, m in members.items()}
    stable_since = time.monotonic()

    def restart(iid: str, role: str) -> None:
        old = members[iid]
        old_id = next(m["member_id"] for m in group.describe()["members"] if m["group_instance_id"] == iid)
        group.close(old)  # a static member sends no LeaveGroup: the server keeps its place for the session
        new = members[iid] = group.start(old.client_id, instance_id=iid)

        def back() -> tuple[bool, dict]:
            ok, observed = coverage(list(members.values()), group)
            new_id = next((m["member_id"] for m in group.describe()["members"] if m["group_instance_id"] == iid),
                          None)
            observed["restarted"] = {"instance": iid, "old_member_id": old_id, "new_member_id": new_id}
            return ok and new.assigned == before[iid] and new_id not in (None, old_id), observed

        observed = wait_until(back, SESSION_TIMEOUT_MS / 1000 * 2,
                              f"restarted static {role} {iid} ({kind}) holding its partitions again", server)
        assert new.assigned == before[iid], f"{role} {iid} came back with other partitions: {observed}"
        others = {i: m.revocations_since(stable_since) for i, m in members.items() if m is not new}
        assert not any(others.values()), (
            f"restarting static {role} {iid} revoked partitions of other members: {others}; "
            f"callbacks: { {i: m.callbacks() for i, m in members.items()} }; server: {summary(group.describe())}")
        d = group.describe()
        assert d["generation"] == generation, (
            f"restarting static {role} {iid} changed the generation {generation} -> {d['generation']}: "
            f"{pretty(summary(d))}")
        assert {iid: m.assigned for iid, m in members.items()} == before
        # The new incarnation is the member now: its commits (with the new member id) are accepted.
        offsets = {p: 1000 + p for p in new.assigned}
        new.commit(offsets)
        got = new.committed(sorted(offsets))
        assert got == offsets, f"restarted static {role} {iid} committed {offsets}, read back {got}"

    leader = next(m["group_instance_id"] for m in d0["members"] if m["member_id"] == d0["leader"])
    restart(leader, "leader")
    d1 = group.describe()
    follower = next(m["group_instance_id"] for m in d1["members"] if m["member_id"] != d1["leader"])
    restart(follower, "follower")


# ---- 3. a static member SIGKILLed and never restarted is evicted after the session timeout ------------------

@pytest.mark.parametrize("kind", KINDS)
def test_killed_static_member_is_evicted_after_session_timeout(make_group, server, kind, tmp_path) -> None:
    group = make_group(kind, f"kill-{kind}")
    out = tmp_path / "member.out"
    with open(out, "wb") as fh:
        victim = subprocess.Popen(
            [sys.executable, "-m", "tests.support.interop_member", "--kind", kind, "--bootstrap", server.bootstrap,
             "--group", group.id, "--topic", TOPIC, "--client-id", "victim", "--instance-id", "victim"],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    survivors: list[Member] = []
    try:
        def formed(expected: set[str]) -> Callable[[], tuple[bool, dict]]:
            def check() -> tuple[bool, dict]:
                d = group.describe()
                view = {m["group_instance_id"]: described_partitions(m) for m in d["members"]}
                client = {m.instance_id: m.assigned for m in survivors}
                owned = [p for ps in view.values() for p in ps]
                ok = (d["state"] == "Stable" and set(view) == expected and all(view.values())
                      and sorted(owned) == sorted(ALL) and all(client[i] == view[i] for i in client))
                return ok, {"server": summary(d), "survivors": client, "victim_rc": victim.poll(),
                            "victim_output": out.read_text(errors="replace")[-2000:]}
            return check

        # The victim joins first, so it is the group's leader: killing it also needs a new leader.
        wait_until(formed({"victim"}), FORM_TIMEOUT, f"a subprocess static {kind} member taking every partition",
                   server)
        survivors += [group.start(f"c{i}", instance_id=f"i{i}") for i in range(2)]
        wait_until(formed({"i0", "i1", "victim"}), FORM_TIMEOUT,
                   f"2 in-process + 1 subprocess static {kind} members forming", server)
        d = group.describe()
        generation = d["generation"]
        victim_id = next(m["member_id"] for m in d["members"] if m["group_instance_id"] == "victim")
        assert d["leader"] == victim_id, f"the first member to join is not the leader: {pretty(summary(d))}"
        killed_at, killed_at_ms = time.monotonic(), time.time() * 1000
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)

        def evicted() -> tuple[bool, dict]:
            ok, observed = coverage(survivors, group)
            ids = {m["group_instance_id"] for m in group.describe()["members"]}
            observed["elapsed_s"] = round(time.monotonic() - killed_at, 2)
            return ok and "victim" not in ids, observed

        wait_until(evicted, SESSION_TIMEOUT_MS / 1000 * 3,
                   f"the SIGKILLed static {kind} member evicted and its partitions reassigned", server)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
    assert_partitioned(survivors)
    d = group.describe()
    assert d["generation"] > generation, f"no rebalance after the eviction: {pretty(summary(d))}"
    assert d["leader"] in {m["member_id"] for m in d["members"]}, f"the leader is not a member: {summary(d)}"
    # The survivors' listeners heard the rebalance (so "no revocation" in the static restart test means some).
    assert all(m.revocations_since(killed_at) for m in survivors), (
        f"a survivor's listener heard no revocation: { {m.client_id: m.callbacks() for m in survivors} }")
    # When: its last heartbeat came at most one interval before the kill, so the session expires between
    # (session - interval) and session after the kill; allow for timer and clock granularity.
    removal = [h for h in d["history"] if h["member_id"] == victim_id and h["time_ms"] >= killed_at_ms - 1000]
    assert removal, f"no rebalance history entry names the evicted member {victim_id}: {pretty(summary(d))}"
    assert removal[0]["trigger"] == "session-timeout", f"evicted by {removal[0]}: {pretty(summary(d))}"
    after_s = (removal[0]["time_ms"] - killed_at_ms) / 1000
    lo, hi = (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000 - 0.5, SESSION_TIMEOUT_MS / 1000 + 2.0
    assert lo <= after_s <= hi, (
        f"the member was evicted {after_s:.2f}s after the kill, expected {lo}-{hi}s "
        f"(session.timeout.ms={SESSION_TIMEOUT_MS}): {pretty(summary(d))}")


# ---- 4. committed offsets are read back by the partitions' next owner -----------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_committed_offsets_survive_a_handover(make_group, server, kind) -> None:
    group = make_group(kind, f"offsets-{kind}")
    a, b = group.start("a"), group.start("b", track_positions=True)
    wait_until(lambda: coverage([a, b], group), FORM_TIMEOUT, f"2 {kind} members forming", server)
    a_parts, b_parts = sorted(a.assigned), sorted(b.assigned)
    expected = {p: 5 + p for p in a_parts} | {p: 100 + p for p in b_parts}
    a.commit({p: expected[p] for p in a_parts})
    b.commit({p: expected[p] for p in b_parts})
    got = a.committed(a_parts)
    assert got == {p: expected[p] for p in a_parts}, f"{kind} committed() right after commit: {got}"

    def positions_of(m: Member, parts: list[int]) -> Callable[[], tuple[bool, dict]]:
        def check() -> tuple[bool, dict]:
            pos = m.positions(parts)
            return pos == {p: expected[p] for p in parts}, {"positions": pos, "assigned": m.assigned}
        return check

    # a leaves (LeaveGroup): b takes over a's partitions and starts from a's commits.
    group.close(a)
    wait_until(lambda: coverage([b], group), FORM_TIMEOUT, f"the remaining {kind} member taking every partition",
               server)
    got = b.committed(sorted(ALL))
    assert got == expected, f"{kind} next owner's committed(): {got}, expected {expected}"
    wait_until(positions_of(b, a_parts), 10, f"{kind} next owner's positions on the partitions it took over")

    # And a brand-new member, after everyone left, starts every partition from the commits.
    group.close(b)
    c = group.start("c", track_positions=True)
    wait_until(lambda: coverage([c], group), FORM_TIMEOUT, f"a new {kind} member taking every partition", server)
    got = c.committed(sorted(ALL))
    assert got == expected, f"{kind} new member's committed(): {got}, expected {expected}"
    wait_until(positions_of(c, sorted(ALL)), 10, f"{kind} new member's positions")


# ---- 5. the three clients in one group ------------------------------------------------------------------------

def test_mixed_clients_agree_on_roundrobin(make_group, server) -> None:
    """librdkafka and kafka-python offer range and roundrobin, aiokafka roundrobin only: the group must pick the
    one protocol every member supports, and the three clients' leaders and followers interoperate."""
    group = make_group("mixed", "mixed")
    members = [group.start(f"{kind}-{i}", kind=kind) for i in range(2) for kind in KINDS]
    observed = wait_until(lambda: coverage(members, group), FORM_TIMEOUT, "6 members of 3 clients forming", server)
    assert observed["server"]["protocol"] == "roundrobin", pretty(observed["server"])
    # Whichever client leads, losing the aiokafka members (LeaveGroup) hands their partitions to the others.
    leaving = [m for m in members if m.kind == "aiokafka"]
    group.close(*leaving)
    rest = [m for m in members if m not in leaving]
    wait_until(lambda: coverage(rest, group), FORM_TIMEOUT, "the 4 remaining members taking every partition", server)
    assert_partitioned(rest)
