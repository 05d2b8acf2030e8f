"""The admin commands against what peers and clusters do to them (issue 30, "Defects found by the acceptance runs"):

- strings a client chose (group, member, instance and client ids, racks, reasons) carrying terminal escapes and
  newlines are escaped in every table and header line (one function, kcoord.tables.printable), so they neither
  clear the operator's screen nor forge rows; --json keeps them exact, escaped as JSON escapes them;
- `kcoord offsets` shows a stored negative offset, as stored;
- in a cluster, a node killed within its lease does not stop `kcoord groups` (the rest are listed, a warning names
  the node, exit 0) nor `kcoord delete` of the other nodes' groups; `--bootstrap` takes a comma-separated list,
  tried in turn, as Kafka's bootstrap.servers.

The commands run in-process (kcoord.cli.main, output through capsys) against a real `kcoord serve`, or real
`kcoord serve --store postgresql://...` nodes over the suite's PostgreSQL; the groups are made by kcoord's raw
client, which sends whatever strings it is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.tables import printable

from ..support.cli import LONG_MS, admin_commit, run, the_line
from ..support.cluster_nodes import FAST, KCluster, find_coordinator, group_on, wait_until
from ..support.servers import Server, free_port, serve

ESC = "\x1b"
SCREEN = f"{ESC}[2J{ESC}[H"  # clear the screen, cursor home
GROUP = f"evil{SCREEN}\nFORGED-GROUP"
CLIENT_ID = f"cid{ESC}]0;owned{chr(7)}\nFORGED-CLIENT"  # sets the terminal's title, then a row of its own
INSTANCE = f"inst{ESC}[31m\r\nFORGED-INSTANCE"
REASON = f"bye{SCREEN}\nFORGED-REASON"
CONSUMER_GROUP = f"kip848{SCREEN}\u202e\nFORGED-CONSUMER"  # with a bidi override (not printable either)
MEMBER = f"member{SCREEN}\nFORGED-MEMBER"
RACK = f"rack{ESC}[8m\nFORGED-RACK"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve(free_port(), tmp_path_factory.mktemp("hostile") / "server.log", "--topic", "orders:2",
                "--set", "group.initial.rebalance.delay.ms=0",
                "--set", f"group.consumer.max.session.timeout.ms={LONG_MS}",
                "--set", f"group.consumer.session.timeout.ms={LONG_MS}")
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


def join(c: Client, group: str, instance: str | None, member_id: str = "") -> wire.JoinGroupResponse:
    r = c.call(11, 9, wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=LONG_MS, rebalance_timeout_ms=LONG_MS, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert r.error_code == E.NONE, r
    return r


@pytest.fixture(scope="module")
def hostile(server: Server) -> None:
    """A classic group whose group id, member's client id and instance id carry escapes and newlines, with a
    rebalance whose reason does; a consumer group whose group id, member id and rack do."""
    with Client(server.bootstrap, client_id=CLIENT_ID) as c:
        r = join(c, GROUP, INSTANCE)
        s = c.call(14, 5, wire.SyncGroupRequest(group_id=GROUP, generation_id=r.generation_id, member_id=r.member_id,
                                                group_instance_id=INSTANCE, protocol_type="consumer",
                                                protocol_name="range", assignments=[]))
        assert s.error_code == E.NONE, s
        left = c.call(13, 5, wire.LeaveGroupRequest(group_id=GROUP, members=[
            wire.LeaveGroupRequestMemberIdentity(member_id=r.member_id, group_instance_id=INSTANCE, reason=REASON)]))
        assert left.error_code == E.NONE, left
        join(c, GROUP, INSTANCE)  # back in: a member again, the reason in the group's history
        hb = c.request(wire.ConsumerGroupHeartbeatRequest(
            group_id=CONSUMER_GROUP, member_id=MEMBER, member_epoch=0, rack_id=RACK, rebalance_timeout_ms=LONG_MS,
            subscribed_topic_names=["orders"], topic_partitions=[]), 1)
        assert hb.error_code == E.NONE, hb


def clean(out: str) -> list[str]:
    """The lines of a command's text output, checked to hold no escape, carriage return or forged line."""
    assert ESC not in out and "\r" not in out and "\u202e" not in out, repr(out)
    lines = out.splitlines()
    assert not [line for line in lines if line.startswith("FORGED")], out
    return lines


def test_groups_escapes_the_group_ids_in_its_table(capsys, server, hostile) -> None:
    doc = json.loads(run(capsys, "groups", "--json", "--bootstrap", server.bootstrap)[1])
    assert {g["group"] for g in doc} == {GROUP, CONSUMER_GROUP}, "the JSON has the ids as they are"
    rc, out, err = run(capsys, "groups", "--bootstrap", server.bootstrap)
    assert (rc, err) == (0, "")
    lines = clean(out)
    assert len(lines) == 1 + len(doc), f"one row per group:\n{out}"
    assert lines[1].startswith(printable(GROUP) + " ") and lines[2].startswith(printable(CONSUMER_GROUP) + " ")
    assert printable(GROUP) == "evil\\x1b[2J\\x1b[H\\x0aFORGED-GROUP"


def test_describe_of_a_classic_group_escapes_ids_hosts_and_reasons(capsys, server, hostile) -> None:
    rc, out, err = run(capsys, "describe", GROUP, "--json", "--bootstrap", server.bootstrap)
    d = json.loads(out)
    assert (rc, d["group"], d["members"][0]["client_id"], d["members"][0]["group_instance_id"]) == \
        (0, GROUP, CLIENT_ID, INSTANCE)
    assert REASON in [h["reason"] for h in d["history"]]
    assert ESC not in out, "JSON escapes control characters itself"
    rc, out, err = run(capsys, "describe", GROUP, "--bootstrap", server.bootstrap)
    assert (rc, err) == (0, "")
    lines = clean(out)
    assert lines[0].startswith(f"GROUP {printable(GROUP)}  type classic")
    assert lines[1] == "" and lines[2].startswith("MEMBER-ID") and lines[4] == "", out
    assert lines[3].startswith(printable(d["members"][0]["member_id"]) + " "), "one row for the one member"
    assert printable(CLIENT_ID) in lines[3] and printable(INSTANCE) in lines[3]
    history = lines[lines.index("REBALANCE HISTORY (newest last)") + 1:]
    assert len(history) == 1 + len(d["history"]), f"one row per rebalance:\n{out}"
    assert any(printable(REASON) in x for x in history)


def test_describe_of_a_consumer_group_escapes_member_ids_and_racks(capsys, server, hostile) -> None:
    d = json.loads(run(capsys, "describe", CONSUMER_GROUP, "--json", "--bootstrap", server.bootstrap)[1])
    assert (d["group"], [m["member_id"] for m in d["members"]], d["members"][0]["rack"]) == \
        (CONSUMER_GROUP, [MEMBER], RACK)
    rc, out, err = run(capsys, "describe", CONSUMER_GROUP, "--bootstrap", server.bootstrap)
    assert (rc, err) == (0, "")
    lines = clean(out)
    assert lines[0].startswith(f"GROUP {printable(CONSUMER_GROUP)}  type consumer")
    assert lines[1:3] == ["", lines[2]] and lines[2].startswith("MEMBER-ID")
    assert len(lines) == 4 and lines[3].startswith(printable(MEMBER) + " "), out


def test_an_error_line_is_escaped_too(capsys, server, hostile) -> None:
    rc, out, err = run(capsys, "remove-members", GROUP, "--instance-id", f"ghost{SCREEN}", "--bootstrap",
                       server.bootstrap)
    assert rc == 1 and ESC not in out + err
    the_line(err, "remove-members", "ghost\\x1b[2J")


# ---- kcoord offsets: what is stored, negative too ---------------------------------------------------------

def test_offsets_shows_stored_negative_offsets(capsys, server) -> None:
    with Client(server.bootstrap) as c:
        admin_commit(c, "negative", {0: -1, 1: 7}, topic="orders")
    b = ("--bootstrap", server.bootstrap)
    rc, out, err = run(capsys, "offsets", "negative", *b)
    assert (rc, err) == (0, "")
    assert [line.split() for line in out.splitlines()[1:]] == [["orders", "0", "-1", "-", "-"],
                                                               ["orders", "1", "7", "-", "-"]]
    doc = json.loads(run(capsys, "offsets", "negative", "--json", *b)[1])
    assert [(o["partition"], o["offset"]) for o in doc["offsets"]] == [(0, -1), (1, 7)]
    # a reset covers it; --shift-by has nothing to shift from there (Kafka's admin client reads a negative offset
    # as none)
    plan = json.loads(run(capsys, "offsets", "negative", "--reset", "--to-earliest", "--dry-run", "--json", *b)[1])
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]] == \
        [(0, -1, 0), (1, 7, 0)]
    rc, out, err = run(capsys, "offsets", "negative", "--reset", "--shift-by", "1", "--dry-run", *b)
    assert rc == 1 and out == ""
    the_line(err, "offsets", "orders:0", "no committed offset")


# ---- a cluster node killed within its lease ----------------------------------------------------------------

def test_a_node_killed_within_its_lease_costs_only_its_own_groups(capsys, pg_dsn, tmp_path) -> None:
    """Node 2 is killed (SIGKILL: its lease stays held for the minute it runs); node 1 still names it in Metadata
    and as the coordinator of its groups. `kcoord groups` lists node 1's groups with a warning naming node 2, exit 0;
    --bootstrap with node 2 first falls through to node 1; `kcoord delete` deletes node 1's group and reports
    node 2's as COORDINATOR_NOT_AVAILABLE, naming it."""
    args = (*FAST, "--set", "broker.session.timeout.ms=60000", "--topic", "orders:2")
    with KCluster(pg_dsn, tmp_path, nodes=2, args=args) as cl:
        wait_until(lambda: cl.balanced([1, 2]), 15, "the partitions shared by the two nodes")
        mine, theirs = group_on(cl, 1, "live"), group_on(cl, 2, "dead")
        for node_id, group in ((1, mine), (2, theirs)):
            with Client(cl.node(node_id).bootstrap) as c:
                admin_commit(c, group, {0: 3}, topic="orders")
        live, dead = cl.node(1).bootstrap, cl.node(2).bootstrap
        wait_until(lambda: find_coordinator(live, theirs).node_id == 2, 15, "node 1 names node 2 the coordinator")
        cl.node(2).kill()
        assert cl.owner_of(theirs) == 2, "node 2's lease is still held"
        warning = f"kcoord groups: warning: cannot connect to {dead}: Connection refused; the groups that node " \
                  "serves are not listed\n"
        for bootstrap in (live, f"{dead},{live}", f" {dead} , {live} "):
            rc, out, err = run(capsys, "groups", "--bootstrap", bootstrap)
            assert (rc, err) == (0, warning), out
            assert [line.split()[:3] for line in out.splitlines()] == [["GROUP", "TYPE", "STATE"],
                                                                       [mine, "classic", "Empty"]]
        rc, out, err = run(capsys, "groups", "--json", "--bootstrap", f"{dead},{live}")
        assert (rc, err, [g["group"] for g in json.loads(out)]) == (0, warning, [mine])
        rc, out, err = run(capsys, "delete", theirs, mine, "--json", "--bootstrap", f"{dead},{live}")
        assert rc == 1 and json.loads(out) == [{"group": theirs, "error": "COORDINATOR_NOT_AVAILABLE"},
                                               {"group": mine, "error": "NONE"}]
        the_line(err, "delete", f"{theirs} (COORDINATOR_NOT_AVAILABLE: cannot connect to {dead}", "refused")
        # with no node answering, the one line names each address
        cl.node(1).kill()
        rc, out, err = run(capsys, "groups", "--bootstrap", f"{dead},{live}")
        assert (rc, out) == (1, "")
        the_line(err, "groups", f"cannot connect to any of 2 addresses: {dead}: Connection refused; "
                                f"{live}: Connection refused")
