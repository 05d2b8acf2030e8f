"""Every `kcoord` subcommand, its text and --json output and each failure exit it can give, against the error
contract in kcoord/cli/__init__.py's docstring: a failure is one stderr line ``kcoord COMMAND: what: problem``, exit 2 for a
mistake in the command line or its input, 1 for a refusal at run time; a command that did part of its work prints
that part on stdout and exits 1 with the refused part on the one line.

Most calls run in-process (``kcoord.cli.main``, output through capsys) against one module-scoped `kcoord serve`
holding groups in every state a group reports; a few run the real process where its exit status and stderr are the
point. `kcoord plan` runs its scenarios on one Spark session (marker spark); its mistakes are caught before Spark
starts, which the tests check by making a Spark start fail them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.cli import GROUP_STATES, connect_describe_key
from kcoord.cli import plan as plan_cli
from kcoord.client import Client
from kcoord.protocol import MESSAGES

from ..support.cli import LONG_MS, PARTITIONS, TOPIC, admin_commit, command_of, kcoord, ok, refused, run, the_line
from ..support.servers import Server, free_port, serve
from ..support.stores import damage_checksum, damage_truncate, full_store

SETTINGS = ("group.initial.rebalance.delay.ms=0", "group.coordinator.rebalance.protocols=classic,consumer,connect",
            f"group.consumer.max.session.timeout.ms={LONG_MS}", f"group.consumer.session.timeout.ms={LONG_MS}",
            f"group.connect.max.session.timeout.ms={LONG_MS}", f"group.connect.session.timeout.ms={LONG_MS}")


# ---- running the CLI --------------------------------------------------------------------------------------------

def table_rows(text: str, header: list[str]) -> list[list[str]]:
    """A CLI table's rows split on whitespace, after checking its header."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    assert lines and lines[0] == header, text
    return lines[1:]


# ---- the server and its groups ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    args = ["--topic", f"{TOPIC}:{PARTITIONS}"]
    for s in SETTINGS:
        args += ["--set", s]
    srv = serve(free_port(), tmp_path_factory.mktemp("cli-paths") / "server.log", *args)
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


def wait_state(server: Server, group: str, state: str, timeout: float = 20.0) -> dict:
    """The group's description once it reports `state` (polled through the describe APIs)."""
    deadline = time.monotonic() + timeout
    while True:
        d = server.describe(group)
        if d["state"] == state:
            return d
        assert time.monotonic() < deadline, f"group {group} never reached {state}: {d}"
        time.sleep(0.02)


def join(c: Client, group: str, instance: str) -> wire.JoinGroupResponse:
    r = c.call(11, 9, wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=LONG_MS, rebalance_timeout_ms=LONG_MS, member_id="",
        group_instance_id=instance, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert r.error_code == E.NONE, r
    return r


def join_and_sync(c: Client, group: str, instance: str) -> None:
    r = join(c, group, instance)
    s = c.call(14, 5, wire.SyncGroupRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                                            group_instance_id=instance, protocol_type="consumer",
                                            protocol_name="range", assignments=[]))
    assert s.error_code == E.NONE, s


def consumer_heartbeat(c: Client, group: str, member: str, epoch: int = 0) -> wire.ConsumerGroupHeartbeatResponse:
    """A KIP-848 member's first heartbeat (epoch 0: joins, subscribed to the topic) or its leave (epoch -1)."""
    joining = {"rebalance_timeout_ms": LONG_MS, "subscribed_topic_names": [TOPIC], "topic_partitions": []}
    r = c.request(wire.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                     **(joining if epoch == 0 else {})), 1)
    assert r.error_code == E.NONE, r
    return r


def connect_join(c: Client, group: str, worker: str) -> None:
    r = c.request(wire.ConnectGroupHeartbeatRequest(
        group_id=group, member_id=worker, member_epoch=0, rebalance_timeout_ms=LONG_MS,
        client_assignors=[wire.ConnectGroupHeartbeatRequestAssignor(name="ica", minimum_version=1, maximum_version=2,
                                                                    reason=0, version=2, metadata=b"")],
        connectors_and_tasks=wire.ConnectGroupHeartbeatRequestConnectorsAndTasks(connectors=[], tasks=[])),
        0, api_key=connect_describe_key(c) - 3)
    assert r.error_code == E.NONE, r


# group -> (type, state), each made as Kafka makes it and confirmed through the describe APIs
ESTATE = {
    "classic-empty": ("classic", "Empty"),  # an admin's offset commit
    "classic-stable": ("classic", "Stable"),  # a static member joined and synced
    "classic-completing": ("classic", "CompletingRebalance"),  # joined, not synced
    "classic-preparing": ("classic", "PreparingRebalance"),  # a second member's join parked for the first's rejoin
    "consumer-stable": ("consumer", "Stable"),  # one KIP-848 member, all partitions
    "consumer-reconciling": ("consumer", "Reconciling"),  # a second member waits for the first to revoke
    "consumer-empty": ("consumer", "Empty"),  # its one member left
    "connect-assigning": ("connect", "Assigning"),  # a worker was asked to compute the assignment
}


@pytest.fixture(scope="module")
def estate(server: Server) -> Iterator[dict[str, tuple[str, str]]]:
    parked = Client(server.bootstrap)
    try:
        with Client(server.bootstrap) as c:
            admin_commit(c, "classic-empty", {0: 5})
            join_and_sync(c, "classic-stable", "s-1")
            join(c, "classic-completing", "c-1")
            join_and_sync(c, "classic-preparing", "p-1")
            parked.send(11, 9, wire.JoinGroupRequest(
                group_id="classic-preparing", session_timeout_ms=LONG_MS, rebalance_timeout_ms=LONG_MS,
                member_id="", group_instance_id="p-2", protocol_type="consumer",
                protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert len(consumer_heartbeat(c, "consumer-stable", "k-1").assignment.topic_partitions[0].partitions) \
                == PARTITIONS
            consumer_heartbeat(c, "consumer-reconciling", "k-1")
            consumer_heartbeat(c, "consumer-reconciling", "k-2")
            consumer_heartbeat(c, "consumer-empty", "k-1")
            consumer_heartbeat(c, "consumer-empty", "k-1", epoch=-1)
            connect_join(c, "connect-assigning", "w-1")
        for group, (kind, state) in ESTATE.items():
            assert wait_state(server, group, state)["type"] == kind
        yield ESTATE
    finally:
        parked.close()


def listing(capsys: pytest.CaptureFixture[str], server: Server, *flags: str) -> dict[str, tuple[str, str]]:
    """`kcoord groups FLAGS` in both forms, checked to list the same groups: group -> (type, state)."""
    doc = json.loads(ok(capsys, "groups", "--json", *flags, "--bootstrap", server.bootstrap))
    as_json = {g["group"]: (g["type"], g["state"]) for g in doc}
    assert len(as_json) == len(doc)
    text = ok(capsys, "groups", *flags, "--bootstrap", server.bootstrap)
    if not as_json:
        assert text == "(no groups)\n"
    else:
        rows = table_rows(text, ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"])
        assert {r[0]: (r[1], r[2]) for r in rows} == as_json and len(rows) == len(as_json)
        assert [r[0] for r in rows] == sorted(as_json)
    return as_json


# ---- kcoord groups ----------------------------------------------------------------------------------------------

def test_groups_lists_every_group_with_its_type_and_state(capsys, server, estate) -> None:
    everything = listing(capsys, server)
    assert {g: everything.get(g) for g in estate} == estate
    doc = json.loads(ok(capsys, "groups", "--json", "--bootstrap", server.bootstrap))
    protocol = {g["group"]: g["protocol_type"] for g in doc}
    assert (protocol["classic-empty"], protocol["classic-stable"], protocol["consumer-stable"],
            protocol["connect-assigning"]) == ("", "consumer", "consumer", "connect")


def test_groups_state_lists_exactly_the_groups_in_that_state(capsys, server, estate) -> None:
    everything = listing(capsys, server)
    assert len({s for _, s in everything.values()}) >= 6  # a filter that is ignored cannot pass below
    for state in GROUP_STATES:
        want = {g: ts for g, ts in everything.items() if ts[1] == state}
        assert listing(capsys, server, "--state", state) == want, state
        assert listing(capsys, server, "--state", state.upper()) == want, state  # any case
        assert {g for g, ts in estate.items() if ts[1] == state} <= set(want)
    assert listing(capsys, server, "--state", "Dead") == {}  # Kafka lists no Dead group
    # two --state flags: the union
    union = listing(capsys, server, "--state", "Empty", "--state", "PreparingRebalance")
    assert union == {g: ts for g, ts in everything.items() if ts[1] in ("Empty", "PreparingRebalance")}
    assert {"classic-empty", "consumer-empty", "classic-preparing"} <= set(union)
    assert "classic-stable" not in union and "consumer-reconciling" not in union


def test_groups_type_lists_exactly_the_groups_of_that_type(capsys, server, estate) -> None:
    everything = listing(capsys, server)
    for kind in ("classic", "consumer", "connect"):
        want = {g: ts for g, ts in everything.items() if ts[0] == kind}
        assert want and listing(capsys, server, "--type", kind) == want, kind
    both = listing(capsys, server, "--type", "consumer", "--type", "connect")
    assert both == {g: ts for g, ts in everything.items() if ts[0] != "classic"}
    # --type and --state together: both must hold
    assert listing(capsys, server, "--type", "consumer", "--state", "Empty") == \
        {g: ts for g, ts in everything.items() if ts == ("consumer", "Empty")}
    assert "consumer-empty" in listing(capsys, server, "--type", "consumer", "--state", "Empty")


@pytest.mark.parametrize("args,names", [
    (["--state", "Rebalancing"], ["--state", "'Rebalancing'", "PreparingRebalance"]),
    (["--type", "connector"], ["--type", "'connector'", "classic"]),
    (["--bootstrap", "localhost"], ["--bootstrap", "'localhost'"]),
    (["--bootstrap", "127.0.0.1:0"], ["--bootstrap", "1..65535"]),
])
def test_groups_mistakes_exit_2(capsys, args, names) -> None:
    refused(capsys, 2, "groups", *args, names=tuple(names))


# ---- kcoord describe --------------------------------------------------------------------------------------------

def test_describe_of_an_unknown_group_exits_1_on_every_describe_path(capsys, server, estate) -> None:
    group = "never-was-a-group"
    # what each describe API answers for it: the two KIP-848-style ones GROUP_ID_NOT_FOUND, DescribeGroups (before
    # v6) no error and the state Dead, as Kafka answers
    with Client(server.bootstrap) as c:
        g = c.request(wire.ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        assert g.error_code == E.GROUP_ID_NOT_FOUND
        key = connect_describe_key(c)
        assert key is not None
        g = c.request(wire.ConnectGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 0,
                      api_key=key).groups[0]
        assert g.error_code == E.GROUP_ID_NOT_FOUND
        g = c.request(wire.DescribeGroupsRequest(groups=[group]), 5).groups[0]
        assert (g.error_code, g.group_state, list(g.members)) == (E.NONE, "Dead", [])
    for flags in ((), ("--json",)):
        line = refused(capsys, 1, "describe", group, *flags, "--bootstrap", server.bootstrap, names=(f"'{group}'",))
        assert line == f"kcoord describe: group '{group}' does not exist"
    # a group each path knows is described (exit 0): GROUP_ID_NOT_FOUND from another path is not the answer
    for group, (kind, state) in estate.items():
        d = json.loads(ok(capsys, "describe", group, "--json", "--bootstrap", server.bootstrap))
        assert (d["group"], d["type"], d["state"]) == (group, kind, state)
    text = ok(capsys, "describe", "classic-stable", "--bootstrap", server.bootstrap)
    assert text.startswith("GROUP classic-stable  type classic  state Stable  generation 1") and "s-1" in text


def test_describe_of_a_deleted_group_exits_1(capsys, server) -> None:
    with Client(server.bootstrap) as c:
        admin_commit(c, "to-delete", {1: 9})
    assert json.loads(ok(capsys, "describe", "to-delete", "--json", "--bootstrap", server.bootstrap))["state"] == \
        "Empty"
    assert table_rows(ok(capsys, "delete", "to-delete", "--bootstrap", server.bootstrap), ["GROUP", "RESULT"]) == \
        [["to-delete", "deleted"]]
    for flags in ((), ("--json",)):
        refused(capsys, 1, "describe", "to-delete", *flags, "--bootstrap", server.bootstrap,
                names=("'to-delete'", "does not exist"))


# ---- server error codes and a missing server --------------------------------------------------------------------

def answer_with(monkeypatch: pytest.MonkeyPatch, kind: type, spoil: Callable[[Any], None]) -> None:
    """Every response of type `kind` the CLI's client receives is changed by `spoil` (a server's error code)."""
    original = Client.request

    def request(self: Client, body: Any, version: int, api_key: int | None = None) -> Any:
        resp = original(self, body, version, api_key)
        if isinstance(resp, kind):
            spoil(resp)
        return resp
    monkeypatch.setattr(Client, "request", request)


def _group_error(code: int) -> Callable[[Any], None]:
    def spoil(resp: Any) -> None:
        resp.groups[0].error_code = code
    return spoil


def _top_error(code: int) -> Callable[[Any], None]:
    def spoil(resp: Any) -> None:  # as a server answers a request refused as a whole: no per-item results
        resp.error_code = code
        for items in ("groups", "members"):
            if hasattr(resp, items):
                setattr(resp, items, [])
    return spoil


@pytest.mark.parametrize("argv,kind,spoil,names", [
    (["describe", "consumer-stable"], wire.ConsumerGroupDescribeResponse, _group_error(E.COORDINATOR_LOAD_IN_PROGRESS),
     ["ConsumerGroupDescribe consumer-stable: COORDINATOR_LOAD_IN_PROGRESS"]),
    (["describe", "connect-assigning", "--json"], wire.ConnectGroupDescribeResponse,
     _group_error(E.COORDINATOR_NOT_AVAILABLE), ["ConnectGroupDescribe connect-assigning: COORDINATOR_NOT_AVAILABLE"]),
    (["describe", "classic-stable"], wire.DescribeGroupsResponse, _group_error(E.NOT_COORDINATOR),
     ["DescribeGroups classic-stable: NOT_COORDINATOR"]),
    (["groups", "--json"], wire.ListGroupsResponse, _top_error(E.COORDINATOR_NOT_AVAILABLE),
     ["ListGroups at", "COORDINATOR_NOT_AVAILABLE"]),
    (["remove-members", "spoiled", "--instance-id", "nobody"], wire.LeaveGroupResponse,
     _top_error(E.COORDINATOR_NOT_AVAILABLE), ["'spoiled'", "LeaveGroup: COORDINATOR_NOT_AVAILABLE"]),
])
def test_a_servers_error_code_exits_1_naming_it(capsys, monkeypatch, server, estate, argv, kind, spoil,
                                                names) -> None:
    answer_with(monkeypatch, kind, spoil)
    refused(capsys, 1, *argv, "--bootstrap", server.bootstrap, names=tuple(names))


@pytest.mark.parametrize("argv", [["groups"], ["describe", "g", "--json"], ["remove-members", "g", "--instance-id", "a"],
                                  ["topics", "--create", "t:1"], ["offsets", "g"], ["delete", "g", "--json"]])
def test_no_server_exits_1_naming_the_address(capsys, argv) -> None:
    address = f"127.0.0.1:{free_port()}"
    refused(capsys, 1, *argv, "--bootstrap", address, names=(address, "refused"))


# ---- kcoord remove-members --------------------------------------------------------------------------------------

def test_remove_members_text_json_and_refusals(capsys, server) -> None:
    with Client(server.bootstrap) as c:
        join_and_sync(c, "rm-json", "a")
        join_and_sync(c, "rm-text", "b")
    b = ("--bootstrap", server.bootstrap)
    # --json, all removed: exit 0, each member's result
    out = json.loads(ok(capsys, "remove-members", "rm-json", "--instance-id", "a", "--json", *b))
    assert out == {"error": "NONE", "members": [{"group_instance_id": "a", "error": "NONE"}]}
    assert wait_state(server, "rm-json", "Empty")["members"] == []
    # text, one removed and one unknown: the table on stdout, the refused one on the one stderr line, exit 1
    rc, text, err = run(capsys, "remove-members", "rm-text", "--instance-id", "b", "--instance-id", "ghost",
                        "--reason", "scaled down", *b)
    assert rc == 1
    assert table_rows(text, ["INSTANCE-ID", "RESULT"]) == [["b", "NONE"], ["ghost", "UNKNOWN_MEMBER_ID"]]
    line = the_line(err, "remove-members", "'rm-text'", "ghost (UNKNOWN_MEMBER_ID)")
    assert " b " not in line
    d = server.describe("rm-text")
    assert d["members"] == [] and d["history"][-1]["reason"] == "scaled down"
    # --json, refused: the document on stdout, the line on stderr
    rc, out, err = run(capsys, "remove-members", "rm-text", "--instance-id", "ghost", "--json", *b)
    assert rc == 1 and json.loads(out)["members"] == [{"group_instance_id": "ghost", "error": "UNKNOWN_MEMBER_ID"}]
    the_line(err, "remove-members", "ghost")
    # a mistake in the command line
    refused(capsys, 2, "remove-members", "rm-text", *b, names=("--instance-id",))
    refused(capsys, 2, "remove-members", "--instance-id", "a", *b, names=("group",))


# ---- kcoord topics ----------------------------------------------------------------------------------------------

def topic_rows(text: str) -> dict[str, int]:
    rows = table_rows(text[text.index("TOPIC  "):], ["TOPIC", "PARTITIONS", "TOPIC-ID"])  # after what was deleted
    assert all(len(r[2]) == 32 and int(r[2], 16) for r in rows)  # a topic id: 16 bytes in hex, never zero
    return {r[0]: int(r[1]) for r in rows}


def test_topics_create_grow_delete_text_and_json(capsys, server) -> None:
    b = ("--bootstrap", server.bootstrap)
    listed = topic_rows(ok(capsys, "topics", "--create", "paths-a:3", *b))
    assert listed["paths-a"] == 3 and listed[TOPIC] == PARTITIONS
    doc = json.loads(ok(capsys, "topics", "--grow", "paths-a:5", "--json", *b))
    assert doc["errors"] == [] and {"topic": "paths-a", "partitions": 5} in \
        [{k: t[k] for k in ("topic", "partitions")} for t in doc["topics"]]
    # a deletion says what went: the topic, its partitions, and every group's committed offsets of it
    with Client(server.bootstrap) as c:
        admin_commit(c, "paths-deleted", {0: 5}, topic="paths-a")
    out = ok(capsys, "topics", "--delete", "paths-a", *b)
    assert out.splitlines()[0] == "deleted topic paths-a (5 partitions) and every group's committed offsets of it"
    assert "paths-a" not in topic_rows(out)
    with Client(server.bootstrap) as c:
        assert c.request(wire.OffsetFetchRequest(group_id="paths-deleted", topics=None), 7).topics == []
    ok(capsys, "topics", "--create", "paths-c:2", *b)
    doc = json.loads(ok(capsys, "topics", "--delete", "paths-c", "--json", *b))
    assert doc["deleted"] == [{"topic": "paths-c", "partitions": 2}] and doc["errors"] == []
    # part done, part refused: what was done on stdout (both forms), the refused part on the one line, exit 1
    rc, out, err = run(capsys, "topics", "--create", "paths-b:2", "--grow", "paths-nosuch:3", "--json", *b)
    assert rc == 1
    doc = json.loads(out)
    assert {t["topic"]: t["partitions"] for t in doc["topics"]}["paths-b"] == 2
    assert len(doc["errors"]) == 1 and doc["errors"][0].startswith("grow paths-nosuch: UNKNOWN_TOPIC_OR_PARTITION")
    the_line(err, "topics", "grow paths-nosuch: UNKNOWN_TOPIC_OR_PARTITION")
    rc, out, err = run(capsys, "topics", "--delete", "paths-b", "--delete", "paths-nosuch", *b)
    assert rc == 1 and "paths-b" not in topic_rows(out)
    the_line(err, "topics", "delete paths-nosuch: UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize("args,names", [
    (["--create", ":3"], ["--create :3", "invalid topic name"]),
    (["--create", "x:abc"], ["--create x:abc"]),
    (["--grow", "x:0"], ["--grow x:0"]),
    (["--grow", "x:2", "--grow", "x:3"], ["--grow", "'x'"]),
    (["--delete", "bad name!"], ["--delete", "bad name!"]),
])
def test_topics_mistakes_exit_2(capsys, server, args, names) -> None:
    refused(capsys, 2, "topics", *args, "--bootstrap", server.bootstrap, names=tuple(names))


# ---- kcoord offsets and delete (without real consumers: an admin's commits) -------------------------------------

def test_offsets_and_delete_text_and_json(capsys, server) -> None:
    b = ("--bootstrap", server.bootstrap)
    with Client(server.bootstrap) as c:
        admin_commit(c, "paths-offsets", {0: 5, 2: 7})
    rows = table_rows(ok(capsys, "offsets", "paths-offsets", *b),
                      ["TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "METADATA"])
    assert rows == [[TOPIC, "0", "5", "-", "-"], [TOPIC, "2", "7", "-", "-"]]
    doc = json.loads(ok(capsys, "offsets", "paths-offsets", "--topic", f"{TOPIC}:2", "--json", *b))
    assert doc == {"group": "paths-offsets", "offsets": [
        {"topic": TOPIC, "partition": 2, "offset": 7, "leader_epoch": None, "metadata": ""}]}
    plan = json.loads(ok(capsys, "offsets", "paths-offsets", "--reset", "--to-earliest", "--dry-run", "--json", *b))
    assert plan["dry_run"] is True and [(p["partition"], p["current_offset"]) for p in plan["partitions"]] == \
        [(0, 5), (2, 7)]
    assert json.loads(ok(capsys, "offsets", "paths-offsets", "--json", *b))["offsets"][0]["offset"] == 5
    assert json.loads(ok(capsys, "delete", "paths-offsets", "--json", *b)) == \
        [{"group": "paths-offsets", "error": "NONE"}]
    refused(capsys, 1, "offsets", "paths-offsets", *b, names=("'paths-offsets'", "does not exist"))
    rc, out, err = run(capsys, "delete", "paths-offsets", *b)
    assert rc == 1 and table_rows(out, ["GROUP", "RESULT"]) == [["paths-offsets", "GROUP_ID_NOT_FOUND"]]
    the_line(err, "delete", "paths-offsets (GROUP_ID_NOT_FOUND)")


# ---- kcoord apis ------------------------------------------------------------------------------------------------

def test_apis_lists_each_request_message_with_its_versions(capsys, server) -> None:
    requests = {m.api_key: m for m in MESSAGES if m.kind == "request"}
    want = {k: (m.name.removesuffix("Request"), m.valid.lo, m.valid.hi, None if m.flexible.empty else m.flexible.lo)
            for k, m in requests.items()}
    doc = json.loads(ok(capsys, "apis", "--json"))
    assert [r["api_key"] for r in doc] == sorted(want)
    assert {r["api_key"]: (r["name"], r["min_version"], r["max_version"], r["first_flexible_version"])
            for r in doc} == want
    rows = table_rows(ok(capsys, "apis"), ["KEY", "API", "VERSIONS", "FLEXIBLE-FROM"])
    assert {int(k): (name, *map(int, versions.split("-")), None if flex == "-" else int(flex.removeprefix("v")))
            for k, name, versions, flex in rows} == want
    assert len(rows) == len(want)
    # every API the server serves is listed with the versions it serves
    with Client(server.bootstrap) as c:
        served = {k.api_key: (k.min_version, k.max_version) for k in c.request(wire.ApiVersionsRequest(), 3).api_keys}
    assert served and {k: want[k][1:3] for k in served if k in want} == served


# ---- kcoord store check / accept --------------------------------------------------------------------------------

def test_store_check_of_a_damaged_store_json_and_text(capsys, tmp_path) -> None:
    full_store(tmp_path)
    doc = json.loads(ok(capsys, "store", "check", str(tmp_path), "--json"))
    assert doc["ok"] is True and doc["problems"] == [] and doc["offsets"] == 12
    problem = damage_checksum(tmp_path)
    rc, out, err = run(capsys, "store", "check", str(tmp_path), "--json")
    assert rc == 1
    doc = json.loads(out)
    assert doc["ok"] is False and len(doc["problems"]) >= 1 and problem in doc["problems"][0]
    the_line(err, "store check", str(tmp_path), "damaged", problem)
    rc, out, err = run(capsys, "store", "check", str(tmp_path))
    assert rc == 1
    rows = table_rows(out.split("\nproblem: ")[0],
                      ["store", "state", "records", "groups", "members", "offsets", "topics", "bytes"])
    assert rows[0][1] == "DAMAGED"
    assert [line for line in out.splitlines() if line.startswith("problem: ")] == \
        [f"problem: {p}" for p in doc["problems"]]
    the_line(err, "store check", str(tmp_path), problem)


def test_store_check_damaged_as_a_process(tmp_path) -> None:
    # the contract end to end: the real process's exit status, its JSON on stdout and its one line on stderr
    full_store(tmp_path)
    damage_truncate(tmp_path)
    r = kcoord("store", "check", str(tmp_path), "--json")
    assert r.returncode == 1, r
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "damaged" in doc["problems"][0]
    the_line(r.stderr, "store check", str(tmp_path), doc["problems"][0])


def test_store_refusals(capsys, tmp_path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for command in ("check", "accept"):
        refused(capsys, 2, "store", command, str(tmp_path / "absent"), names=(str(tmp_path / "absent"),
                                                                               "no such directory"))
        refused(capsys, 2, "store", command, str(afile), names=(str(afile), "not a directory"))
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(capsys, 1, "store", "accept", str(empty), names=(str(empty), "does not exist"))
    rc, out, err = run(capsys, "store", "check", str(empty))
    assert rc == 1 and "DAMAGED" in out
    the_line(err, "store check", str(empty), "does not exist")
    store = tmp_path / "store"
    store.mkdir()
    full_store(store)
    assert ok(capsys, "store", "accept", str(store)) == f"{store}: nothing to accept; the store holds every " \
        "acknowledged commit\n"
    damage_truncate(store)
    refused(capsys, 1, "store", "accept", str(store), names=(str(store), "damaged"))
    refused(capsys, 2, "store", names=("store_command",))


# ---- kcoord cluster ---------------------------------------------------------------------------------------------

def test_cluster_mistakes_and_no_database(capsys) -> None:
    refused(capsys, 2, "cluster", names=("--store",))
    line = refused(capsys, 2, "cluster", "--store", "mysql://root:s3cret@db:3306/x", names=("--store", "postgresql://"))
    assert "s3cret" not in line
    port = free_port()
    line = refused(capsys, 1, "cluster", "--store", f"postgresql://kcoord:s3cret@127.0.0.1:{port}/x",
                   names=("cannot connect to the PostgreSQL store", str(port)))
    assert "s3cret" not in line


def test_cluster_check_reports_the_write_log_problems(capsys, pg_dsn) -> None:
    from kcoord import pgstore

    refused(capsys, 1, "cluster", "--store", pg_dsn, names=("is not a kcoord store (no kcoord tables",))
    conn = pgstore.connect(pg_dsn)
    try:
        pgstore.init_schema(conn, 4)
        assert ok(capsys, "cluster", "--store", pg_dsn, "--check").splitlines()[-1].endswith(
            "write log: one writer per partition at a time")
        # partition 1: epoch 3 written by two nodes; partition 2: an older epoch written after a newer one
        conn.execute("INSERT INTO kcoord_writes (partition, seq, epoch, node_id) VALUES "
                     "(1, 1, 3, 1), (1, 2, 3, 2), (2, 1, 5, 1), (2, 2, 4, 1)")
    finally:
        conn.close()
    text = ok(capsys, "cluster", "--store", pg_dsn)  # without --check: a report, exit 0
    assert "partition 1: epoch 3 written by nodes 1, 2" in text and "partition 2: write 2 at epoch 4 after epoch 5" \
        in text
    rc, out, err = run(capsys, "cluster", "--store", pg_dsn, "--check", "--json")
    assert rc == 1
    doc = json.loads(out)
    assert sorted(doc["problems"]) == ["partition 1: epoch 3 written by nodes 1, 2",
                                       "partition 2: write 2 at epoch 4 after epoch 5"]
    assert doc["partitions"] == 4 and doc["nodes"] == []
    the_line(err, "cluster", "2 problem(s) in the write log", doc["problems"][0])
    rc, out, err = run(capsys, "cluster", "--store", pg_dsn, "--check")
    assert rc == 1 and "unowned" in out
    the_line(err, "cluster", "2 problem(s)")


# ---- kcoord serve, --version, unknown arguments -----------------------------------------------------------------

def test_serve_loop_uvloop_without_uvloop_exits_2(capsys, monkeypatch) -> None:
    import kcoord.cli as cli

    def no_uvloop(cfg: Any, loop: str) -> None:
        assert loop == "uvloop"
        raise ImportError("No module named 'uvloop'")
    monkeypatch.setattr(cli, "configure_logging", lambda *a: None)
    monkeypatch.setattr(cli, "run", no_uvloop)
    refused(capsys, 2, "serve", "--port", "0", "--loop", "uvloop", names=("--loop uvloop", "uvloop installed"))


def test_version(capsys) -> None:
    rc, out, err = run(capsys, "--version")
    assert rc == 0 and err == "" and out.startswith("kcoord ") and len(out.split()) == 2


@pytest.mark.parametrize("argv", [
    ["serve", "--port", "0"], ["groups"], ["describe", "g"], ["remove-members", "g", "--instance-id", "a"], ["topics"],
    ["offsets", "g"], ["delete", "g"], ["apis"], ["store", "check", "d"], ["store", "accept", "d"],
    ["cluster", "--store", "postgresql://x"], ["plan", "--members", "m", "--out", "o"]])
def test_an_unknown_argument_names_the_command(capsys, monkeypatch, argv) -> None:
    # nothing runs (no server, store or file is needed): the mistake is found first
    import kcoord.cli as cli

    monkeypatch.setattr(cli, "run", lambda *a: pytest.fail("kcoord serve started"))
    monkeypatch.setattr(cli, "configure_logging", lambda *a: None)
    line = refused(capsys, 2, *argv, "--bogus", names=("unrecognized arguments",))
    assert line == f"kcoord {command_of(argv)}: unrecognized arguments: --bogus"


# ---- kcoord plan: mistakes caught before Spark starts -----------------------------------------------------------

@pytest.fixture
def plan_inputs(tmp_path: Path) -> tuple[Path, Path]:
    members, topics = tmp_path / "members.json", tmp_path / "topics.json"
    members.write_text('{"group_id": "g", "member_id": "m1", "topics": ["t"]}\n')
    topics.write_text('{"topic": "t", "partitions": 3}\n')
    return members, topics


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark start fails the test: the mistake must be caught before it."""
    def start(*a: Any) -> None:
        pytest.fail("kcoord plan started Spark")
    monkeypatch.setattr(plan_cli, "_session", start)


@pytest.mark.parametrize("spec", ["bogus", "rolling-bounce:3", "scale-out", "scale-out:x", "scale-in:-1",
                                  "scale-out:-0.5", "scale-in:nan", "grow:t", "grow:t:x", "grow:t:-2", "rack-loss"])
def test_plan_bad_scenario_exits_2_before_spark(capsys, no_spark, plan_inputs, tmp_path, spec) -> None:
    members, topics = plan_inputs
    refused(capsys, 2, "plan", "--members", str(members), "--topics", str(topics), "--out", str(tmp_path / "o"),
            "--scenario", spec, names=(f"unknown scenario '{spec}'", "rolling-bounce | scale-out:N"))


def test_plan_input_mistakes_exit_2_before_spark(capsys, no_spark, plan_inputs, tmp_path) -> None:
    members, topics = plan_inputs
    out = str(tmp_path / "o")
    refused(capsys, 2, "plan", "--members", str(members), "--topics", str(topics), "--out", out, "--conf", "novalue",
            names=("--conf", "'novalue'"))
    absent = str(tmp_path / "absent.json")
    refused(capsys, 2, "plan", "--members", absent, "--topics", str(topics), "--out", out,
            names=(f"--members {absent}", "no such file"))
    (tmp_path / "broken.json").write_text('{"group_id": "g", "member_id": \n')
    refused(capsys, 2, "plan", "--members", str(tmp_path / "broken.json"), "--topics", str(topics), "--out", out,
            names=(f"--members {tmp_path / 'broken.json'}:1", "not JSON"))
    (tmp_path / "broken-array.json").write_text('[{"topic": "t", "partitions": 3},\n {"topic": ]')
    refused(capsys, 2, "plan", "--members", str(members), "--topics", str(tmp_path / "broken-array.json"),
            "--out", out, names=(f"--topics {tmp_path / 'broken-array.json'}:2", "not JSON"))
    (tmp_path / "latin1.json").write_bytes(b'{"group_id": "caf\xe9", "member_id": "m"}\n')
    refused(capsys, 2, "plan", "--members", str(tmp_path / "latin1.json"), "--topics", str(topics), "--out", out,
            names=("latin1.json", "UTF-8"))
    refused(capsys, 2, "plan", "--members", str(members), "--out", str(members), names=("--out", "not a directory"))
    refused(capsys, 2, "plan", "--members", str(members), names=("--out",))
    refused(capsys, 2, "plan", "--out", out, names=("--members",))
    refused(capsys, 2, "plan", "--members", str(members), "--out", out, "--assignor", "fair",
            names=("--assignor", "'fair'"))


def test_plan_without_pyspark_or_java_is_one_line(capsys, monkeypatch, plan_inputs, tmp_path) -> None:
    members, topics = plan_inputs
    argv = ("plan", "--members", str(members), "--topics", str(topics), "--out", str(tmp_path / "o"), "--quiet")
    real_find_spec = plan_cli.importlib.util.find_spec
    monkeypatch.setattr(plan_cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real_find_spec(name, *a))
    refused(capsys, 2, *argv, names=("needs PySpark", "kcoord[spark]"))
    monkeypatch.undo()

    def no_java(*a: Any) -> None:
        raise RuntimeError("Java gateway process exited before sending its port number\nmore")
    monkeypatch.setattr(plan_cli, "_session", no_java)
    line = refused(capsys, 1, *argv, names=("Spark did not start", "Java gateway process exited"))
    assert "more" not in line


# (`kcoord plan` on Spark, each scenario: tests/interop/test_spark.py, beside the session it shares)
