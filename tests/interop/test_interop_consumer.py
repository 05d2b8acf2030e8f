"""KIP-848 consumer groups against real clients: confluent-kafka 2.16 with `group.protocol=consumer`, over loopback,
against `kcoord serve` in a subprocess. Timers are shortened through the server's own settings (heartbeat interval
500 ms, session timeout 4 s), exactly as an operator would set them.

Every test checks, at every sample, that no partition is held by two consumers at once (revoke first, assign
later) and, at the end, that every partition is held exactly once.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client

from ..support.interop import ALL, PARTITIONS, TOPIC, Watch
from ..support.interop_consumer import ConsumerMember
from ..support.interop_member import MEMBERS
from ..support.servers import ROOT, Server, free_port, serve
from ..support.waits import wait_until

pytestmark = pytest.mark.interop

SESSION_MS = 4_000
SETTINGS = ("group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.min.session.timeout.ms=2000", f"group.consumer.session.timeout.ms={SESSION_MS}",
            "group.initial.rebalance.delay.ms=300")
_ids = itertools.count()


def server_args(*extra: str) -> list[str]:
    args = ["--topic", f"{TOPIC}:{PARTITIONS}", "--topic", "classic-orders:6"]
    # (each classic test group gets its own group id, so the three classic clients below form three groups)
    for s in SETTINGS:
        args += ["--set", s]
    return [*args, *extra]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("kcoord") / "server.log"
    srv = serve(free_port(), log, *server_args())
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=15) == 0, srv.log_tail()


@pytest.fixture
def watch():
    w = Watch()
    yield w
    w.close()
    assert not w.violations, w.violations[:5]


def covered(members: list[ConsumerMember], partitions=ALL) -> Callable[[], tuple[bool, object]]:
    """Every partition held by exactly one of `members`."""
    def check():
        held = [p for m in members for p in m.partitions]
        return sorted(held) == sorted(partitions), {m.client_id: sorted(m.partitions) for m in members}
    return check


def describe(server: Server, group: str) -> wire.ConsumerGroupDescribeResponseDescribedGroup:
    with Client(server.bootstrap) as c:
        return c.request(wire.ConsumerGroupDescribeRequest(group_ids=[group]), 0).groups[0]


def settled(server: Server, group: str, members: list[ConsumerMember], partitions=ALL):
    """Covered, and at rest: the group Stable, every member at its target, and each client holding what the
    coordinator says it holds (coverage alone also holds mid-rebalance, between a revocation and the next)."""
    cover = covered(members, partitions)

    def check():
        ok, seen = cover()
        if not ok:
            return False, seen
        d = describe(server, group)
        server_side = sorted(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
                             for m in d.members)
        at_target = all(m.assignment.to_dict() == m.target_assignment.to_dict() for m in d.members)
        client_side = sorted(sorted(m.partitions) for m in members)
        return d.group_state == "Stable" and at_target and server_side == client_side, (d.group_state, seen)
    return check


@pytest.mark.parametrize("size", [3, 10])
def test_consumer_group_forms_and_covers_every_partition(server, watch, size) -> None:
    group = f"cg-form-{next(_ids)}"
    t0 = time.monotonic()
    members = [watch.start(server, group, f"c{i}") for i in range(size)]
    wait_until(settled(server, group, members), 30, f"{size} consumers holding the 12 partitions once")
    took = time.monotonic() - t0
    d = describe(server, group)
    assert (d.error_code, d.group_state, len(d.members)) == (E.NONE, "Stable", size), d
    assert {m.member_epoch for m in d.members} == {d.group_epoch} and d.assignment_epoch == d.group_epoch
    counts = sorted(len(m.partitions) for m in members)
    assert counts[-1] - counts[0] <= 1, counts  # uniform: balanced
    print(f"\n{size} consumers settled in {took:.2f}s")


def test_a_member_joins_and_one_leaves_incrementally(server, watch) -> None:
    group = f"cg-incr-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}") for i in range(3)]
    wait_until(settled(server, group, members), 30, "3 consumers")
    before = {m.client_id: m.partitions for m in members}
    t = time.monotonic()
    newcomer = watch.start(server, group, "c3")
    members.append(newcomer)
    wait_until(settled(server, group, members), 30, "4 consumers")
    for m in members[:3]:
        # Incremental: an old member keeps what it had, less what moved to the newcomer.
        assert m.partitions <= before[m.client_id], (m, before)
        moved = frozenset().union(*(ps for _, ps in m.revoked if _ >= t)) if m.revoked else frozenset()
        assert {p for _, p in moved} <= newcomer.partitions
    still = {m.client_id: m.partitions for m in members if m is not members[0]}
    t = time.monotonic()
    watch.stop(members[0])
    rest = members[1:]
    wait_until(settled(server, group, rest), 30, "3 consumers after one left")
    for m in rest:
        assert still[m.client_id] <= m.partitions  # nobody lost anything when a member left
        assert not [r for r in m.revoked if r[0] >= t], m.revoked


def test_static_member_restarts_within_its_session_and_gets_its_partitions_back(server, watch) -> None:
    group = f"cg-static-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}", instance_id=f"i{i}") for i in range(3)]
    wait_until(settled(server, group, members), 30, "3 static consumers")
    epoch = describe(server, group).group_epoch
    mine = members[1].partitions
    others = {m.client_id: m.partitions for m in members if m is not members[1]}
    t = time.monotonic()
    watch.stop(members[1])  # leaves with -2: its partitions wait for it
    back = watch.start(server, group, "c1-again", instance_id="i1")
    members[1] = back
    wait_until(settled(server, group, members), 30, "the static member back")
    assert back.partitions == mine
    for m in members:
        if m is not back:
            assert m.partitions == others[m.client_id] and not [r for r in m.revoked if r[0] >= t]
    assert describe(server, group).group_epoch == epoch  # no rebalance: the group epoch did not move


def test_killed_member_is_evicted_after_its_session_timeout(server, watch, tmp_path) -> None:
    group = f"cg-kill-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}") for i in range(2)]
    out = open(tmp_path / "member.out", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.interop_consumer", "--bootstrap", server.bootstrap,
                             "--group", group, "--topic", TOPIC, "--client-id", "victim"], cwd=ROOT,
                            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        def three() -> tuple[bool, object]:
            d = describe(server, group)
            held = sum(len(m.partitions) for m in members)
            return len(d.members) == 3 and d.group_state == "Stable" and 0 < held < PARTITIONS, d.group_state
        wait_until(three, 30, "three members, the subprocess holding some partitions")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        t = time.monotonic()
        wait_until(covered(members), SESSION_MS / 1000 + 15, "the survivors holding everything")
        took = time.monotonic() - t
        assert took >= SESSION_MS / 1000 - 1.0, f"evicted after {took:.1f}s, before its session timeout"
        assert len(describe(server, group).members) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()


def test_offsets_committed_with_member_epochs_are_read_by_the_next_owner(server, watch) -> None:
    group = f"cg-offsets-{next(_ids)}"
    a = watch.start(server, group, "a")
    wait_until(covered([a]), 30, "one consumer holding everything")
    a.commit({p: 100 + p for p in range(PARTITIONS)})
    watch.stop(a)
    b = watch.start(server, group, "b")
    wait_until(covered([b]), 30, "the next owner")
    assert b.committed(list(range(PARTITIONS))) == {p: 100 + p for p in range(PARTITIONS)}


def test_partition_growth_reaches_the_members(server, watch) -> None:
    topic = f"grow-{next(_ids)}"
    with Client(server.bootstrap) as c:
        r = c.request(wire.CreateTopicsRequest(timeout_ms=5000, topics=[wire.CreateTopicsRequestCreatableTopic(
            name=topic, num_partitions=4, replication_factor=1)]), 5)
        assert r.topics[0].error_code == E.NONE
    group = f"cg-grow-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}", topics=[topic]) for i in range(2)]
    wait_until(covered(members, range(4)), 30, "4 partitions")
    with Client(server.bootstrap) as c:
        r = c.request(wire.CreatePartitionsRequest(timeout_ms=5000, topics=[
            wire.CreatePartitionsRequestCreatePartitionsTopic(name=topic, count=8, assignments=None)]), 3)
        assert r.results[0].error_code == E.NONE
    wait_until(covered(members, range(8)), 30, "8 partitions after growth")


def test_classic_groups_keep_working_beside_consumer_groups(server, watch) -> None:
    group = f"cg-mixed-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}") for i in range(2)]
    classic = [MEMBERS[kind](server.bootstrap, f"classic-{next(_ids)}", "classic-orders", client_id=f"k{i}").start()
               for i, kind in enumerate(("kafka-python", "aiokafka", "confluent"))]
    try:
        for k in classic:
            def one(k=k) -> tuple[bool, object]:
                return k.assigned == frozenset(range(6)), sorted(k.assigned)
            wait_until(one, 40, f"classic {k.kind} consumer holding classic-orders")
        wait_until(covered(members), 30, "the consumer group beside them")
    finally:
        for k in classic:
            k.close()
    with Client(server.bootstrap) as c:
        listed = {g.group_id: g.group_type for g in c.request(wire.ListGroupsRequest(), 5).groups}
    assert listed[group] == "consumer"


def test_server_restart_with_data_dir_keeps_a_static_consumer_group(watch, tmp_path) -> None:
    port, data = free_port(), tmp_path / "data"
    srv = serve(port, tmp_path / "server.log", *server_args("--data-dir", str(data)))
    group = "cg-restart"
    try:
        members = [watch.start(srv, group, f"c{i}", instance_id=f"i{i}") for i in range(3)]
        wait_until(settled(srv, group, members), 30, "3 static consumers")
        before = {m.client_id: m.partitions for m in members}
        epoch = describe(srv, group).group_epoch
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(10)
        t = time.monotonic()
        srv = serve(port, tmp_path / "server.log", *server_args("--data-dir", str(data)))
        time.sleep(SESSION_MS / 1000 + 1)  # longer than a session: the members carried on with their epochs
        d = describe(srv, group)
        assert d.group_state == "Stable" and d.group_epoch == epoch and len(d.members) == 3, d
        for m in members:
            assert m.partitions == before[m.client_id] and not [r for r in m.revoked if r[0] >= t], m
            assert m.lost == 0
    finally:
        watch.close()
        srv.proc.terminate()
        srv.proc.wait(15)


def test_consumer_protocol_off_is_not_advertised_and_answers_unsupported_version(tmp_path) -> None:
    port = free_port()
    srv = serve(port, tmp_path / "off.log", "--set", "group.coordinator.rebalance.protocols=classic")
    try:
        with Client(srv.bootstrap) as c:
            apis = {k.api_key for k in c.request(wire.ApiVersionsRequest(
                client_software_name="t", client_software_version="1"), 3).api_keys}
            assert 68 not in apis and 69 not in apis and 11 in apis
            r = c.request(wire.ConsumerGroupHeartbeatRequest(
                group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                subscribed_topic_names=["t"], topic_partitions=[]), 1)
            assert r.error_code == E.UNSUPPORTED_VERSION
    finally:
        srv.proc.terminate()
        srv.proc.wait(15)


def test_bad_heartbeats_get_kafka_errors_and_the_group_is_intact(server, watch) -> None:
    group = f"cg-bad-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}") for i in range(2)]
    wait_until(settled(server, group, members), 30, "2 consumers")
    epoch = describe(server, group).group_epoch
    assert epoch == 2
    cases = [
        (dict(member_id="", member_epoch=0), E.INVALID_REQUEST),
        (dict(member_id="x", member_epoch=0, server_assignor="magic"), E.UNSUPPORTED_ASSIGNOR),
        (dict(member_id="x", member_epoch=7), E.UNKNOWN_MEMBER_ID),
        (dict(member_id="x", member_epoch=0, subscribed_topic_names=["t"] * 100_000), E.NONE),
        (dict(member_id="y", member_epoch=-7), E.INVALID_REQUEST),
    ]
    with Client(server.bootstrap) as c:
        for fields, want in cases:
            req = dict(group_id=group, rebalance_timeout_ms=1000, subscribed_topic_names=[TOPIC], topic_partitions=[])
            req.update(fields)
            r = c.request(wire.ConsumerGroupHeartbeatRequest(**req), 1)
            assert r.error_code == want, (fields.get("member_id"), r.error_code, r.error_message)
        c.request(wire.ConsumerGroupHeartbeatRequest(group_id=group, member_id="x", member_epoch=-1), 1)
        # A declared-huge frame is refused before it is read; the others keep being served.
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(struct.pack(">i", 2**31 - 1) + b"\x00\x44\x00\x01")
            assert s.recv(1) == b""
    wait_until(settled(server, group, members), 30, "the group intact")
    d = describe(server, group)
    # Only the one member that joined and left changed the group: two bumps.
    assert (d.group_epoch, len(d.members)) == (epoch + 2, 2), json.dumps({"before": epoch, "after": d.group_epoch})


def test_cli_groups_describe_and_remove_members_on_a_consumer_group(server, watch, capsys) -> None:
    from kcoord.cli import main

    group = f"cg-cli-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}", instance_id=f"i{i}") for i in range(2)]
    wait_until(settled(server, group, members), 30, "2 static consumers")
    assert main(["groups", "--bootstrap", server.bootstrap, "--type", "consumer", "--json"]) == 0
    listed = {g["group"]: g for g in json.loads(capsys.readouterr().out)}
    assert listed[group]["type"] == "consumer" and listed[group]["state"] == "Stable"
    assert all(g["type"] == "consumer" for g in listed.values())
    assert main(["describe", group, "--bootstrap", server.bootstrap, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["type"], d["state"], d["assignor"], d["group_epoch"]) == ("consumer", "Stable", "uniform", 2)
    by_instance = {m["group_instance_id"]: m for m in d["members"]}
    for m in members:
        got = by_instance[m.instance_id]
        assert got["state"] == "STABLE" and got["member_epoch"] == 2 and got["pending_revocation"] == {}
        assert got["protocol"] == "consumer"  # ConsumerGroupDescribe v1's MemberType
        assert set(got["assignment"][TOPIC]) == m.partitions == set(got["target_assignment"][TOPIC])
    assert main(["describe", group, "--bootstrap", server.bootstrap]) == 0
    text = capsys.readouterr().out
    assert "type consumer" in text and "PENDING-REVOCATION" in text and "STABLE" in text and "PROTOCOL" in text
    watch.fence(members[0])
    assert main(["remove-members", group, "--bootstrap", server.bootstrap, "--instance-id", "i0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["members"] == [{"group_instance_id": "i0", "error": "NONE"}]
    assert main(["remove-members", group, "--bootstrap", server.bootstrap, "--instance-id", "nobody"]) == 1
    capsys.readouterr()
    # The removed member is fenced: its next heartbeat is refused, librdkafka drops its partitions as lost and
    # rejoins with epoch 0, and the group settles again.
    wait_until(lambda: (members[0].lost > 0, members[0].lost), 30, "the removed member told it lost its partitions")
    wait_until(settled(server, group, members), 30, "the group after the removal")
    assert describe(server, group).group_epoch > 2


def test_admin_client_describes_a_consumer_group(server, watch) -> None:
    """librdkafka's DescribeConsumerGroups (confluent-kafka's AdminClient) asks ConsumerGroupDescribe v0 of a server
    that advertises v0-1; kcoord sets v1's MemberType on every member, as Kafka does, and v0 drops it."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    group = f"cg-admin-{next(_ids)}"
    members = [watch.start(server, group, f"c{i}") for i in range(2)]
    wait_until(settled(server, group, members), 30, "2 consumers")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})  # kept: the future needs its client alive
    d = admin.describe_consumer_groups([group])[group].result(30)
    assert (d.type, d.state, d.partition_assignor) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE,
                                                       "uniform")
    by_client = {m.client_id: m for m in d.members}
    assert set(by_client) == {m.client_id for m in members}
    for m in members:
        got = by_client[m.client_id]
        assert {tp.partition for tp in got.assignment.topic_partitions} == m.partitions
        assert {tp.partition for tp in got.target_assignment.topic_partitions} == m.partitions
    with Client(server.bootstrap) as c:
        v1 = c.request(wire.ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
    assert [m.member_type for m in v1.members] == [1, 1]


def test_regex_subscription_picks_up_a_topic_created_later(server, watch) -> None:
    tag = next(_ids)
    with Client(server.bootstrap) as c:
        r = c.request(wire.CreateTopicsRequest(timeout_ms=5000, topics=[wire.CreateTopicsRequestCreatableTopic(
            name=f"rx{tag}-a", num_partitions=2, replication_factor=1)]), 5)
        assert r.topics[0].error_code == E.NONE
    group = f"cg-regex-{tag}"
    m = watch.start(server, group, "c0", topics=[f"^rx{tag}-.*"])  # librdkafka sends a ^-subscription as a regex
    wait_until(lambda: (m.held == {(f"rx{tag}-a", 0), (f"rx{tag}-a", 1)}, sorted(m.held)), 30, "the first topic")
    d = describe(server, group)
    assert d.members[0].subscribed_topic_regex and not d.members[0].subscribed_topic_names
    with Client(server.bootstrap) as c:
        for name in (f"rx{tag}-b", f"other{tag}"):
            r = c.request(wire.CreateTopicsRequest(timeout_ms=5000, topics=[wire.CreateTopicsRequestCreatableTopic(
                name=name, num_partitions=1, replication_factor=1)]), 5)
            assert r.topics[0].error_code == E.NONE
    want = {(f"rx{tag}-a", 0), (f"rx{tag}-a", 1), (f"rx{tag}-b", 0)}
    wait_until(lambda: (m.held == want, sorted(m.held)), 30, "the topic created later, and not the other")
