"""`kcoord offsets`, `kcoord offsets --reset`, `kcoord delete`, `kcoord --version` and the help texts, run as the
real CLI (subprocesses) against a real `kcoord serve`, with real consumers (confluent-kafka and kafka-python in one
classic group) committing, and cross-checked both ways with confluent-kafka's AdminClient.

kcoord keeps no log: its ListOffsets answers 0 for a known partition's earliest and latest offsets alike, so against
it every --to and --shift-by lands on 0, clamped as kafka-consumer-groups.sh clamps (the JSON says to which bound).
The clamping itself is checked over other bounds by the plan function's own tests at the end. The reset's refusal
in each state with members runs the CLI's own main in-process against groups that raw protocol clients hold in that
state (six states, twelve runs: seconds rather than a subprocess start each).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import re
import subprocess
import time

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.assignors import encode_subscription
from kcoord.cli import admin as admin_cli
from kcoord.cli import build_parser
from kcoord.cli import main as cli_main
from kcoord.cli.admin import Move, PlanError, plan_reset
from kcoord.client import Client

from ..support.cli import kcoord, one_line
from ..support.interop_member import MEMBERS, Member
from ..support.servers import Server, free_port, serve
from ..support.waits import wait_until

TOPICS = {"orders": 4, "events": 2}
LEADER_EPOCH = 3  # what the kafka-python consumer commits with its offsets
_ids = itertools.count()


def module_server(tmp_path_factory, name: str, *settings: str):
    """A `kcoord serve` with TOPICS, no initial rebalance delay and `settings`, for a module's tests; it must stop
    cleanly."""
    log = tmp_path_factory.mktemp(name) / "server.log"
    args = ["--set", "group.initial.rebalance.delay.ms=0", *(a for s in settings for a in ("--set", s))]
    for t, n in TOPICS.items():
        args += ["--topic", f"{t}:{n}"]
    srv = serve(free_port(), log, *args)
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from module_server(tmp_path_factory, "admin-cli")


@pytest.fixture(scope="module")
def assigning_server(tmp_path_factory):
    """A server whose consumer groups stay Assigning for 15 s after a change that came within 15 s of their last
    target computation (group.consumer.assignment.interval.ms at its maximum): long enough to look at one."""
    yield from module_server(tmp_path_factory, "admin-cli-assigning", "group.consumer.assignment.interval.ms=15000")


@pytest.fixture
def admin(server):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": server.bootstrap})


def new_group(what: str) -> str:
    return f"admin-{what}-{next(_ids)}"


# ---- running the CLI --------------------------------------------------------------------------------------------

def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0 and not r.stderr, f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cli_offsets(server: Server, group: str) -> dict[tuple[str, int], tuple[int, int | None, str]]:
    """`kcoord offsets GROUP --json`: (topic, partition) -> (offset, leader epoch, metadata)."""
    out = json.loads(ok(kcoord("offsets", group, "--json", "--bootstrap", server.bootstrap)))
    assert out["group"] == group
    return {(o["topic"], o["partition"]): (o["offset"], o["leader_epoch"], o["metadata"]) for o in out["offsets"]}


def table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return lines[0], lines[1:]


def reset(server: Server, group: str, *args: str) -> dict:
    """`kcoord offsets GROUP --reset ARGS --json`, which must succeed: its JSON."""
    return json.loads(ok(kcoord("offsets", group, "--reset", *args, "--json", "--bootstrap", server.bootstrap)))


# ---- the state of things, through AdminClient -----------------------------------------------------------------

def admin_offsets(admin, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=20)
    assert res.group_id == group
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in res.topic_partitions
            if tp.offset >= 0}


def admin_alter(admin, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    tps = [TopicPartition(t, p, o, metadata=m) for (t, p), (o, m) in sorted(offsets.items())]
    res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(timeout=20)
    assert all(tp.error is None for tp in res.topic_partitions), res.topic_partitions


def admin_groups(admin) -> set[str]:
    res = admin.list_consumer_groups().result(timeout=20)
    assert not res.errors, res.errors
    return {g.group_id for g in res.valid}


def wait_state(server: Server, group: str, state: str, members: int | None = None) -> dict:
    def check():
        d = server.describe(group)
        return d["state"] == state and (members is None or len(d["members"]) == members), d
    return wait_until(check, 60.0, f"group {group} {state}")


# ---- a group of real consumers ----------------------------------------------------------------------------------

class RealGroup:
    """Real consumers in one classic group over "orders" (by default a confluent-kafka and a kafka-python one), each
    committing (offset, metadata) for the partitions it was assigned, through its own client's commit call."""

    def __init__(self, server: Server, group: str, kinds: tuple[str, ...] = ("confluent", "kafka-python")) -> None:
        self.server = server
        self.group = group
        self.members: list[Member] = [MEMBERS[kind](server.bootstrap, group, "orders", client_id=f"{kind}-{group}")
                                      for kind in kinds]
        for m in self.members:
            m.start()
        try:
            self.wait_assigned()
        except BaseException:
            self.close()
            raise

    def wait_assigned(self) -> None:
        def check():
            held = [m.assigned for m in self.members]
            stable = self.server.describe(self.group)
            whole = sorted(p for ps in held for p in ps) == list(range(TOPICS["orders"]))
            errors = [m.error for m in self.members if m.error is not None]
            assert not errors, errors
            return (whole and all(held) and stable["state"] == "Stable" and len(stable["members"]) == len(held),
                    (held, stable["state"], [x["client_id"] for x in stable["members"]]))
        wait_until(check, 60.0, f"{self.group}: both consumers assigned, the group Stable")

    def commit(self, offsets: dict[int, tuple[int, str]]) -> dict[int, tuple[int, int | None, str]]:
        """Each member commits the partitions of `offsets` it holds, with their metadata (kafka-python with a leader
        epoch as well). Returns what the server was sent, partition -> (offset, leader epoch, metadata):
        confluent-kafka sends a metadata string with its C terminator (b"m\\0"), which a server keeps as sent (Kafka
        does too)."""
        sent = {}
        for m in self.members:
            mine = {p: om for p, om in offsets.items() if p in m.assigned}
            if m.kind == "confluent":
                from confluent_kafka import TopicPartition as CTP

                tps = [CTP("orders", p, o, metadata=md) for p, (o, md) in sorted(mine.items())]
                res = m.run(lambda c, tps=tps: c.commit(offsets=tps, asynchronous=False))
                assert not [tp for tp in res if tp.error], res
                sent.update({p: (o, None, md + "\0") for p, (o, md) in mine.items()})
            else:
                from kafka import OffsetAndMetadata
                from kafka import TopicPartition as KTP

                req = {KTP("orders", p): OffsetAndMetadata(o, md, LEADER_EPOCH) for p, (o, md) in mine.items()}
                m.run(lambda c, req=req: c.commit(req))
                sent.update({p: (o, LEADER_EPOCH, md) for p, (o, md) in mine.items()})
        assert sorted(sent) == sorted(offsets), (sent, [m.assigned for m in self.members])
        return sent

    def close(self) -> None:
        for m in self.members:
            m.close()
        errors = [m.error for m in self.members if m.error is not None]
        assert not errors, errors


@pytest.fixture
def real_group(server):
    groups: list[RealGroup] = []

    def make(group: str, *kinds: str) -> RealGroup:
        groups.append(RealGroup(server, group, kinds or ("confluent", "kafka-python")))
        return groups[-1]
    yield make
    for g in groups:
        g.close()


# ---- kcoord offsets GROUP ---------------------------------------------------------------------------------------

@pytest.mark.interop
def test_offsets_lists_what_real_consumers_committed(server, real_group) -> None:
    group = new_group("list")
    g = real_group(group)
    # a group with members and nothing committed yet: said so, exit 0
    none = ok(kcoord("offsets", group, "--bootstrap", server.bootstrap))
    assert "no committed offsets" in none
    assert cli_offsets(server, group) == {}
    committed = {p: (100 + 10 * p, f"m-{p}") for p in range(TOPICS["orders"])}
    sent = g.commit(committed)
    assert {e for _, e, _ in sent.values()} == {None, LEADER_EPOCH}  # both clients hold partitions
    expected = {("orders", p): v for p, v in sent.items()}
    assert cli_offsets(server, group) == expected
    header, rows = table_rows(ok(kcoord("offsets", group, "--bootstrap", server.bootstrap)))
    assert header == ["TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "METADATA"]
    # the text table escapes what is not printable (the JSON has the metadata as it is)
    assert rows == [["orders", str(p), str(o), "-" if e is None else str(e), md.replace("\0", "\\x00")]
                    for (_, p), (o, e, md) in sorted(expected.items())]
    # --topic narrows the listing
    only = json.loads(ok(kcoord("offsets", group, "--topic", "orders:1,3", "--json", "--bootstrap",
                                server.bootstrap)))
    assert [(o["partition"], o["offset"]) for o in only["offsets"]] == [(1, 110), (3, 130)]


def test_offsets_of_an_unknown_group_is_refused(server) -> None:
    r = kcoord("offsets", "never-was", "--bootstrap", server.bootstrap)
    assert "does not exist" in one_line(r, 1, "never-was")
    assert r.stdout == ""


# ---- kcoord offsets GROUP --reset -------------------------------------------------------------------------------

@pytest.mark.interop
def test_reset_is_refused_while_members_are_in_the_group_and_allowed_after_they_close(server, real_group,
                                                                                      admin) -> None:
    group = new_group("members")
    g = real_group(group)
    g.commit({p: (50, "x") for p in range(TOPICS["orders"])})
    before = cli_offsets(server, group)
    for extra in ((), ("--dry-run",)):
        r = kcoord("offsets", group, "--reset", "--to-earliest", *extra, "--bootstrap", server.bootstrap)
        line = one_line(r, 1, group, "Stable")
        assert "can only be reset if the group" in line and "inactive" in line and r.stdout == ""
    assert cli_offsets(server, group) == before
    g.close()
    wait_state(server, group, "Empty")
    out = reset(server, group, "--to-earliest")
    assert out["dry_run"] is False
    assert [(m["topic"], m["partition"], m["current_offset"], m["new_offset"]) for m in out["partitions"]] == \
        [("orders", p, 50, 0) for p in range(TOPICS["orders"])]
    # Kafka's tool commits the new offsets without metadata; the AdminClient reads what the CLI wrote
    assert cli_offsets(server, group) == {("orders", p): (0, None, "") for p in range(TOPICS["orders"])}
    assert admin_offsets(admin, group) == {("orders", p): (0, "") for p in range(TOPICS["orders"])}


def classic_join(c: Client, group: str, member_id: str = "", *, wait: bool = True):
    """A classic consumer's JoinGroup v5 (KIP-394: an unknown member first gets MEMBER_ID_REQUIRED and its id);
    wait=False sends it without reading the answer (a join the coordinator parks)."""
    req = wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=encode_subscription(["orders"]))])
    if not wait:
        return c.send(wire.JoinGroupRequest.API_KEY, 5, req)
    return c.request(req, 5)


def classic_member(c: Client, group: str, *, sync: bool) -> str:
    """A dynamic classic member that joins (the group then CompletingRebalance) and, if `sync`, syncs as the
    leader (Stable)."""
    first = classic_join(c, group)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    j = classic_join(c, group, first.member_id)
    assert j.error_code == E.NONE and j.leader == j.member_id, j
    if sync:
        s = c.request(wire.SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                            assignments=[wire.SyncGroupRequestAssignment(
                                                member_id=j.member_id, assignment=b"")]), 3)
        assert s.error_code == E.NONE
    return j.member_id


def consumer_join(c: Client, group: str, member: str) -> wire.ConsumerGroupHeartbeatResponse:
    r = c.request(wire.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["orders"], topic_partitions=[]), 0)
    assert r.error_code == E.NONE, r
    return r


def into_preparing_rebalance(clients, group: str) -> None:
    classic_member(clients[0], group, sync=True)
    second = classic_join(clients[1], group)  # a second member's join: the first must rejoin, the join is parked
    classic_join(clients[1], group, second.member_id, wait=False)


def into_assigning(clients, group: str) -> None:
    """On `assigning_server`: b's join comes within the interval of the target a's join computed, so the group
    epoch moves on and the next target waits for the interval's end (15 s)."""
    consumer_join(clients[0], group, "a")
    b = consumer_join(clients[1], group, "b")
    assert b.member_epoch > 0


def into_reconciling(clients, group: str) -> None:
    """a joins; once the assignment interval (1 s by default) has passed, b's join is computed at once and b waits
    for a's revocation, which a never makes: Reconciling until a's session ends."""
    consumer_join(clients[0], group, "a")
    time.sleep(1.1)
    consumer_join(clients[1], group, "b")


# every state with members, and how clients put a group in it
INTO_STATE = {
    "PreparingRebalance": into_preparing_rebalance,
    "CompletingRebalance": lambda clients, group: classic_member(clients[0], group, sync=False),
    "Stable": lambda clients, group: classic_member(clients[0], group, sync=True),
    "Reconciling": into_reconciling,
    "Assigning": into_assigning,
    "Stable-consumer": lambda clients, group: consumer_join(clients[0], group, "a"),
}


@pytest.mark.parametrize("state", list(INTO_STATE))
def test_reset_is_refused_in_every_state_with_members(request, state, capsys) -> None:
    """Kafka's ConsumerGroupCommand resets only an Empty or Dead group: a group with members, classic or consumer,
    in any state, is refused in one line naming the state (a dry run too), and nothing is committed. The server
    refuses the admin OffsetCommit the tool would send as well (Kafka's validateOffsetCommit: UNKNOWN_MEMBER_ID),
    so a tool that does not look first cannot reset under the members either."""
    server = request.getfixturevalue("assigning_server" if state == "Assigning" else "server")
    group = new_group("busy")
    want = state.removesuffix("-consumer")
    with Client(server.bootstrap) as c:
        assert admin_cli.commit_offsets(c, group, {("orders", 0): 50}) == []  # while the group is empty
    with Client(server.bootstrap) as c1, Client(server.bootstrap) as c2:
        INTO_STATE[state]((c1, c2), group)
        d = server.describe(group)
        assert (d["state"], d["type"], bool(d["members"])) == \
            (want, "consumer" if state in ("Reconciling", "Assigning", "Stable-consumer") else "classic", True)
        for extra in ((), ("--dry-run",)):
            code = cli_main(["offsets", group, "--reset", "--to-earliest", *extra, "--bootstrap", server.bootstrap])
            out, err = capsys.readouterr()
            assert (code, out) == (1, ""), err
            assert err.count("\n") == 1 and f"can only be reset if the group '{group}' is inactive, but the " \
                f"current state is {want}." in err, err
        with Client(server.bootstrap) as c:
            assert admin_cli.commit_offsets(c, group, {("orders", 0): 0}) == ["orders:0 (UNKNOWN_MEMBER_ID)"]
            assert {tp: x.offset for tp, x in admin_cli.fetch_committed(c, group).items()} == {("orders", 0): 50}
        assert server.describe(group)["state"] == want


def seeded(admin, what: str, offsets: dict[tuple[str, int], int]) -> str:
    group = new_group(what)
    admin_alter(admin, group, {tp: (o, "seed") for tp, o in offsets.items()})
    return group


ALL_50 = {("orders", p): 50 for p in range(4)} | {("events", p): 20 for p in range(2)}


@pytest.mark.interop
def test_each_reset_mode_against_kcoords_bounds(server, admin) -> None:
    # kcoord answers ListOffsets with 0 for earliest and latest: --to-earliest/--to-latest give 0, and --to and
    # --shift-by are clamped to 0, the JSON naming the bound (above latest: latest; below earliest: earliest).
    for args, clamped in ((("--to-earliest",), None), (("--to-latest",), None), (("--to", "0"), None),
                          (("--to", "7"), "latest"), (("--shift-by", "-3"), "latest"),
                          (("--shift-by", "-60"), "earliest")):
        group = seeded(admin, "mode", {("orders", 2): 50})
        out = reset(server, group, *args)
        [m] = out["partitions"]
        assert (m["topic"], m["partition"], m["current_offset"], m["new_offset"], m["clamped_to"]) == \
            ("orders", 2, 50, 0, clamped), (args, m)
        if args[0] in ("--to", "--shift-by"):
            assert m["requested_offset"] == (int(args[1]) if args[0] == "--to" else 50 + int(args[1]))
        assert admin_offsets(admin, group) == {("orders", 2): (0, "")}
    # the text table says what was asked and where it was clamped
    group = seeded(admin, "mode-text", {("orders", 1): 50})
    header, rows = table_rows(ok(kcoord("offsets", group, "--reset", "--shift-by", "-3", "--bootstrap",
                                        server.bootstrap)))
    assert header == ["TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET", "NOTE"]
    assert rows == [["orders", "1", "50", "0", "requested", "47,", "clamped", "to", "latest"]]


@pytest.mark.interop
def test_reset_covers_the_group_committed_partitions_or_the_topics_named(server, admin) -> None:
    # without --topic: every partition the group has committed offsets for, and nothing else
    group = seeded(admin, "scope", {("orders", 0): 50, ("events", 1): 20})
    out = reset(server, group, "--to-latest")
    assert [(m["topic"], m["partition"]) for m in out["partitions"]] == [("events", 1), ("orders", 0)]
    assert admin_offsets(admin, group) == {("orders", 0): (0, ""), ("events", 1): (0, "")}
    # T:P,P and a repeated --topic: those partitions only
    group = seeded(admin, "scope", ALL_50)
    reset(server, group, "--to-earliest", "--topic", "orders:1,2", "--topic", "events:0")
    after = admin_offsets(admin, group)
    changed = {tp for tp in ALL_50 if after[tp][0] != ALL_50[tp]}
    assert changed == {("orders", 1), ("orders", 2), ("events", 0)}
    assert all(after[tp] == (0, "") for tp in changed)
    # a topic without partitions: every partition of it, also those the group never committed
    group = seeded(admin, "scope", {("orders", 0): 50})
    out = reset(server, group, "--to-earliest", "--topic", "orders")
    assert [(m["partition"], m["current_offset"]) for m in out["partitions"]] == [(0, 50), (1, None), (2, None),
                                                                                  (3, None)]
    assert admin_offsets(admin, group) == {("orders", p): (0, "") for p in range(4)}


@pytest.mark.interop
def test_reset_refusals_are_one_line(server, admin) -> None:
    group = seeded(admin, "refuse", {("orders", 0): 50})
    b = ("--bootstrap", server.bootstrap)
    # --shift-by where the group has committed nothing (Kafka: "Cannot shift offset for partition ...")
    line = one_line(kcoord("offsets", group, "--reset", "--shift-by", "1", "--topic", "orders", *b), 1, "orders:1")
    assert "no committed offset" in line
    assert "does not exist" in one_line(kcoord("offsets", group, "--reset", "--to-earliest", "--topic", "nosuch", *b),
                                        1, "nosuch")
    one_line(kcoord("offsets", group, "--reset", "--to-earliest", "--topic", "orders:9", *b), 1, "orders:9")
    # nothing to reset: a group that does not exist, without --topic
    one_line(kcoord("offsets", "no-such-group", "--reset", "--to-earliest", *b), 1, "no-such-group", "--topic")
    assert admin_offsets(admin, group) == {("orders", 0): (50, "seed")}  # none of it committed anything


@pytest.mark.interop
def test_reset_of_a_group_that_does_not_exist_creates_its_offsets(server, admin) -> None:
    # Kafka's tool resets a Dead (unknown) group too: the partitions named get committed offsets
    group = new_group("new")
    assert group not in admin_groups(admin)
    reset(server, group, "--to-latest", "--topic", "events")
    assert admin_offsets(admin, group) == {("events", 0): (0, ""), ("events", 1): (0, "")}
    assert wait_state(server, group, "Empty")["members"] == []


@pytest.mark.interop
def test_dry_run_prints_the_plan_and_commits_nothing(server, admin) -> None:
    group = seeded(admin, "dry", ALL_50)
    out = reset(server, group, "--to-earliest", "--dry-run")
    assert out["dry_run"] is True
    assert {(m["topic"], m["partition"]): (m["current_offset"], m["new_offset"]) for m in out["partitions"]} == \
        {tp: (o, 0) for tp, o in ALL_50.items()}
    text = ok(kcoord("offsets", group, "--reset", "--shift-by", "-5", "--topic", "orders:3", "--dry-run",
                     "--bootstrap", server.bootstrap))
    header, rows = table_rows(text)
    assert header == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "NOTE"]
    assert rows[0][:4] == ["orders", "3", "50", "0"] and rows[-1] == ["(dry", "run:", "nothing", "committed)"]
    assert admin_offsets(admin, group) == {tp: (o, "seed") for tp, o in ALL_50.items()}


# ---- AdminClient, both ways -------------------------------------------------------------------------------------

@pytest.mark.interop
def test_the_cli_reads_what_admin_client_wrote(server, admin) -> None:
    group = new_group("alter")
    admin_alter(admin, group, {("orders", 0): (7, "from-admin"), ("events", 1): (9, "")})
    # (librdkafka sends a metadata string with its C terminator, and the server keeps what it was sent)
    assert cli_offsets(server, group) == {("orders", 0): (7, None, "from-admin\0"), ("events", 1): (9, None, "\0")}
    assert reset(server, group, "--to-earliest", "--topic", "orders:0")["partitions"][0]["new_offset"] == 0
    assert admin_offsets(admin, group) == {("orders", 0): (0, ""), ("events", 1): (9, "")}


@pytest.mark.interop
def test_a_group_deleted_by_admin_client_is_gone_for_the_cli(server, admin) -> None:
    group = seeded(admin, "admin-del", {("orders", 0): 5})
    assert group in [g["group"] for g in json.loads(ok(kcoord("groups", "--json", "--bootstrap", server.bootstrap)))]
    admin.delete_consumer_groups([group])[group].result(timeout=20)
    one_line(kcoord("offsets", group, "--bootstrap", server.bootstrap), 1, group, "does not exist")
    listed = json.loads(ok(kcoord("groups", "--json", "--bootstrap", server.bootstrap)))
    assert group not in [g["group"] for g in listed]


@pytest.mark.interop
def test_a_group_deleted_by_the_cli_is_gone_for_admin_client(server, admin) -> None:
    group = seeded(admin, "cli-del", {("orders", 0): 5})
    assert group in admin_groups(admin)
    header, rows = table_rows(ok(kcoord("delete", group, "--bootstrap", server.bootstrap)))
    assert header == ["GROUP", "RESULT"] and rows == [[group, "deleted"]]
    assert group not in admin_groups(admin)
    assert admin_offsets(admin, group) == {}


# ---- kcoord delete ----------------------------------------------------------------------------------------------

@pytest.mark.interop
def test_delete_reports_each_group(server, admin, real_group) -> None:
    live = new_group("live")
    real_group(live, "confluent").commit({p: (3, "") for p in range(TOPICS["orders"])})  # one member is enough
    empty = seeded(admin, "empty", {("orders", 0): 5})
    unknown = new_group("unknown")
    r = kcoord("delete", empty, live, unknown, "--bootstrap", server.bootstrap)
    line = one_line(r, 1, f"{live} (NON_EMPTY_GROUP)", f"{unknown} (GROUP_ID_NOT_FOUND)")
    assert empty not in line
    header, rows = table_rows(r.stdout)
    assert rows == [[empty, "deleted"], [live, "NON_EMPTY_GROUP"], [unknown, "GROUP_ID_NOT_FOUND"]]
    assert empty not in admin_groups(admin)
    assert len(cli_offsets(server, live)) == TOPICS["orders"]  # the live group and its offsets stay
    # --json: every group's result on stdout, the failures on the one stderr line
    r = kcoord("delete", live, "--json", "--bootstrap", server.bootstrap)
    one_line(r, 1, live)
    assert json.loads(r.stdout) == [{"group": live, "error": "NON_EMPTY_GROUP"}]
    other = seeded(admin, "empty", {("events", 0): 1})
    assert json.loads(ok(kcoord("delete", other, "--json", "--bootstrap", server.bootstrap))) == \
        [{"group": other, "error": "NONE"}]


# ---- --version, help, mistakes ----------------------------------------------------------------------------------

def test_version() -> None:
    r = kcoord("--version")
    try:
        expected = importlib.metadata.version("kcoord")
    except importlib.metadata.PackageNotFoundError:
        import kcoord as package

        expected = package.__version__
    assert r.returncode == 0 and r.stdout == f"kcoord {expected}\n" and not r.stderr, r
    assert re.fullmatch(r"kcoord \d+\.\d+\.\d+\S*\n", r.stdout)


def subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, (*path, name))


def test_every_commands_help_shows_its_defaults() -> None:
    seen = []
    for path, parser in subparsers(build_parser()):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
                seen.append((path, action.dest))
                assert f"default: {action.default}" in text or "(default" in (action.help or ""), \
                    f"kcoord {' '.join(path)} --help does not show {action.option_strings[0]}'s default:\n{text}"
    commands = {p[0] for p, _ in seen if p}
    assert {"serve", "groups", "describe", "remove-members", "topics", "offsets", "delete", "plan"} <= commands
    # as a user sees it
    out = " ".join(ok(kcoord("offsets", "--help")).split())
    assert "--bootstrap BOOTSTRAP HOST:PORT of a kcoord server, or several separated by commas (tried in turn) " \
           "(default: 127.0.0.1:9092)" in out
    assert "(default: None)" not in out and "(default: False)" not in out
    assert "--host HOST (default: 127.0.0.1)" in " ".join(ok(kcoord("serve", "--help")).split())


@pytest.mark.parametrize("args, names", [
    (["offsets", "g", "--reset", "--to", "abc"], ["--to", "'abc'"]),
    (["offsets", "g", "--reset", "--to", "-1"], ["--to", "'-1'"]),
    (["offsets", "g", "--reset", "--shift-by", "x"], ["--shift-by", "'x'"]),
    (["offsets", "g", "--shift-by", "3"], ["--shift-by", "--reset"]),
    (["offsets", "g", "--to-latest"], ["--to-latest", "--reset"]),
    (["offsets", "g", "--dry-run"], ["--dry-run", "--reset"]),
    (["offsets", "g", "--reset"], ["--reset", "--to-earliest"]),
    (["offsets", "g", "--reset", "--to-earliest", "--to-latest"], ["--to-earliest", "--to-latest"]),
    (["offsets", "g", "--reset", "--to", "3", "--shift-by", "1"], ["--to", "--shift-by"]),
    (["offsets", "g", "--reset", "--to-earliest", "--topic", "orders:x"], ["--topic", "orders:x"]),
    (["offsets", "g", "--reset", "--to-earliest", "--topic", "orders:"], ["--topic", "orders:"]),
    (["offsets", "g", "--reset", "--to-earliest", "--topic", "orders:-1"], ["--topic", "orders:-1"]),
    (["offsets", "g", "--reset", "--to-earliest", "--topic", ":1"], ["--topic", ":1"]),
    (["offsets", "g", "--reset", "--to-earliest", "--topic", "bad name"], ["--topic", "bad name"]),
    (["offsets", ""], ["group"]),
    (["offsets"], ["group"]),
    (["delete"], ["GROUP"]),
    (["delete", "a", ""], ["GROUP"]),
    (["offsets", "g", "--bootstrap", "nohost"], ["--bootstrap", "nohost"]),
])
def test_cli_mistakes_are_one_line_and_exit_2(server, args, names) -> None:
    # given a live server, so nothing but the mistake can fail
    r = kcoord(*args, *(["--bootstrap", server.bootstrap] if "--bootstrap" not in args else []))
    assert r.stdout == ""
    one_line(r, 2, *names)


def test_no_server_is_one_line_and_exit_1() -> None:
    port = free_port()
    for args in (["offsets", "g"], ["offsets", "g", "--reset", "--to-earliest"], ["delete", "g"]):
        one_line(kcoord(*args, "--bootstrap", f"127.0.0.1:{port}"), 1, f"127.0.0.1:{port}")


# ---- the reset plan, over bounds other than kcoord's [0, 0] ---------------------------------------------------

A, B = ("t", 0), ("t", 1)
EARLIEST = {A: 10, B: 0}
LATEST = {A: 100, B: 5}


def test_plan_to_clamps_to_the_partition_bounds() -> None:
    assert plan_reset([A, B], "to", 50, {A: 70}, EARLIEST, LATEST) == [
        Move("t", 0, 70, 50, 50, None), Move("t", 1, None, 5, 50, "latest")]
    assert plan_reset([A], "to", 3, {}, EARLIEST, LATEST) == [Move("t", 0, None, 10, 3, "earliest")]
    assert plan_reset([A], "to", 100, {}, EARLIEST, LATEST) == [Move("t", 0, None, 100, 100, None)]  # latest itself


def test_plan_shift_by_clamps_as_kafka_does() -> None:
    committed = {A: 40, B: 4}
    assert plan_reset([A, B], "shift", -5, committed, EARLIEST, LATEST) == [
        Move("t", 0, 40, 35, 35, None), Move("t", 1, 4, 0, -1, "earliest")]
    assert plan_reset([A, B], "shift", 70, committed, EARLIEST, LATEST) == [
        Move("t", 0, 40, 100, 110, "latest"), Move("t", 1, 4, 5, 74, "latest")]
    assert plan_reset([A], "shift", -30, committed, EARLIEST, LATEST) == [Move("t", 0, 40, 10, 10, None)]
    with pytest.raises(PlanError, match="t:1"):
        plan_reset([A, B], "shift", 1, {A: 40}, EARLIEST, LATEST)


def test_plan_earliest_and_latest_take_the_bounds() -> None:
    assert plan_reset([B, A, A], "earliest", None, {A: 40}, EARLIEST, {}) == [
        Move("t", 0, 40, 10), Move("t", 1, None, 0)]
    assert plan_reset([A, B], "latest", None, {A: 40}, {}, LATEST) == [Move("t", 0, 40, 100), Move("t", 1, None, 5)]


def test_version_without_installed_metadata(monkeypatch) -> None:
    import kcoord as package

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert admin_cli.kcoord_version() == package.__version__


def test_topic_arguments() -> None:
    assert admin_cli.topic_partitions("orders") == ("orders", None)
    assert admin_cli.topic_partitions("orders:3,1,3") == ("orders", (1, 3))
    assert admin_cli.merge_scope([("a", (1,)), ("a", (0,)), ("b", (2,)), ("b", None), ("c", None), ("c", (1,))]) \
        == {"a": (0, 1), "b": None, "c": None}
    for bad in ("orders:", "orders:x", "orders:1,", ":1", "a b", "orders:-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            admin_cli.topic_partitions(bad)
