"""`kcoord acls` (issue 32), the CLI in-process against an in-process server with StandardAuthorizer configured
(tests/support/authorized.py: its PLAINTEXT listener's User:ANONYMOUS is a super user). What each command did is
read back through DescribeAcls (`srv.acls()`), never from the command's own output alone: --add's cross product,
the defaults (operation All, host *), prefixed patterns, --list's filters (resource, pattern type, --principal),
--remove's (every ACL of a resource, or exactly the entries named), --json, each mistake of the command line (one
line, exit 2, nothing changed), and the server's refusals (SECURITY_DISABLED without an authorizer,
CLUSTER_AUTHORIZATION_FAILED for a user without CLUSTER ALTER / DESCRIBE) as one line, exit 1."""

from __future__ import annotations

import json

import pytest

from kcoord import errors as E
from kcoord import wire

from ..support.authorized import MECHANISM, PASSWORD, AuthorizedServer
from ..support.cli import ok, refused, run, the_line
from ..support.servers import free_port

ANY_HOST = "*"


@pytest.fixture(scope="module")
def srv():
    s = AuthorizedServer(users=("alice",))
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_acls(srv):
    """Each test starts from no ACL at all on the module's server."""
    srv.revoke_all()
    yield


def acls(capsys, srv, *argv: str) -> str:
    """`kcoord acls ARGV --bootstrap <the super user's listener>`, which must succeed: its stdout."""
    return ok(capsys, "acls", "--bootstrap", srv.bootstrap, *argv)


def listed(capsys, srv, *argv: str) -> list[tuple[str, ...]]:
    """`kcoord acls --list ARGV --json`: the ACLs as srv.acls() names them, sorted."""
    out = json.loads(acls(capsys, srv, "--list", "--json", *argv))
    return sorted(tuple(a[k] for k in ("resource_type", "resource_name", "pattern_type", "principal", "host",
                                       "operation", "permission")) for a in out["acls"])


# ---- --add ----------------------------------------------------------------------------------------------------

def test_add_creates_the_cross_product_of_resources_principals_operations_and_hosts(capsys, srv) -> None:
    out = acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
               "--operation", "Read", "--operation", "describe", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
               "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--topic", "orders", "--group", "billing")
    expected = sorted(
        [(rtype, name, "LITERAL", f"User:{who}", h, op, "ALLOW")
         for rtype, name in (("TOPIC", "orders"), ("GROUP", "billing")) for who in ("alice", "bob")
         for op in ("READ", "DESCRIBE") for h in ("10.0.0.1", "10.0.0.2")]
        + [(rtype, name, "LITERAL", "User:eve", "10.0.0.9", op, "DENY")
           for rtype, name in (("TOPIC", "orders"), ("GROUP", "billing")) for op in ("READ", "DESCRIBE")])
    assert len(expected) == 20
    assert srv.acls() == expected
    assert out.startswith("added 20 ACLs:\n")
    assert "RESOURCE-TYPE  NAME" in out
    assert len([line for line in out.splitlines() if line.startswith(("TOPIC ", "GROUP "))]) == 20


def test_add_defaults_to_operation_all_from_any_host(capsys, srv) -> None:
    acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--topic", "orders")
    acls(capsys, srv, "--add", "--deny-principal", "User:*", "--group", "*")
    assert srv.acls() == [("GROUP", "*", "LITERAL", "User:*", ANY_HOST, "ALL", "DENY"),
                          ("TOPIC", "orders", "LITERAL", "User:alice", ANY_HOST, "ALL", "ALLOW")]


def test_add_of_acls_that_exist_says_so_and_changes_nothing(capsys, srv) -> None:
    acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g")
    before = srv.acls()
    out = acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--operation", "READ", "--operation",
               "Delete", "--group", "g")
    assert srv.acls() == sorted(before + [("GROUP", "g", "LITERAL", "User:alice", "*", "DELETE", "ALLOW")])
    added, present = out.split("\n\n")
    assert added.startswith("added 1 ACL:\n") and "DELETE" in added and "READ" not in added
    assert present.startswith("already present, left as they are (1):\n") and "READ" in present
    out = json.loads(acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--operation", "read", "--group",
                          "g", "--json"))
    assert out["added"] == [] and out["refused"] == []
    assert [(a["operation"], a["permission"]) for a in out["existing"]] == [("READ", "ALLOW")]


def test_operation_names_are_kafkas_in_any_case(capsys, srv) -> None:
    acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--cluster", "--operation", "ClusterAction",
         "--operation", "IDEMPOTENTWRITE", "--operation", "describe_configs", "--operation", "alterconfigs")
    assert srv.acls() == [("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", op, "ALLOW")
                          for op in ("ALTER_CONFIGS", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE")]


def test_prefixed_acls_are_added_and_found_by_match_and_any(capsys, srv) -> None:
    acls(capsys, srv, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "team-a-",
         "--resource-pattern-type", "PREFIXED")
    acls(capsys, srv, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", "team-a-orders")
    acls(capsys, srv, "--add", "--allow-principal", "User:carol", "--operation", "Read", "--group", "team-b-")
    prefixed = ("GROUP", "team-a-", "PREFIXED", "User:alice", "*", "READ", "ALLOW")
    literal = ("GROUP", "team-a-orders", "LITERAL", "User:bob", "*", "READ", "ALLOW")
    assert prefixed in srv.acls()
    # literal (the default): the exact literal pattern only
    assert listed(capsys, srv, "--group", "team-a-") == []
    assert listed(capsys, srv, "--group", "team-a-orders") == [literal]
    # prefixed: the exact prefixed pattern only
    assert listed(capsys, srv, "--group", "team-a-", "--resource-pattern-type", "prefixed") == [prefixed]
    assert listed(capsys, srv, "--group", "team-a-orders", "--resource-pattern-type", "prefixed") == []
    # match: what applies to the group team-a-orders; any: any pattern type of the exact name
    assert listed(capsys, srv, "--group", "team-a-orders", "--resource-pattern-type", "match") == sorted(
        [prefixed, literal])
    assert listed(capsys, srv, "--group", "team-a-", "--resource-pattern-type", "any") == [prefixed]


# ---- --list ---------------------------------------------------------------------------------------------------

def test_list_shows_a_table_of_every_acl_and_the_same_as_json(capsys, srv) -> None:
    assert acls(capsys, srv, "--list") == "(no ACLs)\n"
    srv.grant("TOPIC", "orders", "WRITE", "alice", host="10.1.1.1")
    srv.deny("GROUP", "billing", "READ", "bob")
    srv.grant("CLUSTER", "kafka-cluster", "DESCRIBE", "alice")
    lines = acls(capsys, srv, "--list").splitlines()
    assert lines[0].split() == ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    assert sorted(tuple(line.split()) for line in lines[1:]) == srv.acls()
    assert listed(capsys, srv) == srv.acls()
    assert len(srv.acls()) == 3


def test_list_filters_by_resource_and_by_principal(capsys, srv) -> None:
    srv.grant("TOPIC", "orders", "READ", "alice")
    srv.grant("TOPIC", "orders", "READ", "bob")
    srv.grant("TOPIC", "payments", "READ", "alice")
    srv.grant("GROUP", "orders", "READ", "alice")
    srv.grant("TOPIC", "*", "DESCRIBE", "alice")
    assert [a[:2] + a[3:4] for a in listed(capsys, srv, "--topic", "orders")] == [
        ("TOPIC", "orders", "User:alice"), ("TOPIC", "orders", "User:bob")]
    assert [a[:2] + a[3:4] for a in listed(capsys, srv, "--topic", "orders", "--group", "orders",
                                           "--principal", "User:alice")] == [
        ("GROUP", "orders", "User:alice"), ("TOPIC", "orders", "User:alice")]
    assert {a[1] for a in listed(capsys, srv, "--principal", "User:alice")} == {"orders", "payments", "*"}
    assert listed(capsys, srv, "--principal", "User:nobody") == []
    # a literal `*` is listed by --topic '*' only, and applies to a topic under match
    assert [a[1] for a in listed(capsys, srv, "--topic", "*")] == ["*"]
    assert [a[1] for a in listed(capsys, srv, "--topic", "orders", "--resource-pattern-type", "match",
                                 "--principal", "User:bob")] == ["orders"]
    assert {a[1] for a in listed(capsys, srv, "--topic", "orders", "--resource-pattern-type", "match")} == {
        "orders", "*"}


def test_list_of_a_pattern_type_without_a_resource(capsys, srv) -> None:
    srv.grant("TOPIC", "orders", "READ", "alice")
    srv.grant("GROUP", "team-", "READ", "alice", pattern="PREFIXED")
    assert [a[2] for a in listed(capsys, srv, "--resource-pattern-type", "prefixed")] == ["PREFIXED"]
    assert [a[2] for a in listed(capsys, srv, "--resource-pattern-type", "literal")] == ["LITERAL"]
    assert len(listed(capsys, srv, "--resource-pattern-type", "any")) == 2


def test_list_escapes_what_a_terminal_would_act_on(capsys, srv) -> None:
    srv.grant("GROUP", "evil\x1b[2Jgroup", "READ", "alice")
    out = acls(capsys, srv, "--list")
    assert "\x1b" not in out and "evil\\x1b[2Jgroup" in out
    assert listed(capsys, srv)[0][1] == "evil\x1b[2Jgroup"  # --json has it exact


# ---- --remove -------------------------------------------------------------------------------------------------

def test_remove_without_a_principal_removes_every_acl_of_the_resource_and_prints_them(capsys, srv) -> None:
    srv.grant("TOPIC", "orders", "READ", "alice")
    srv.deny("TOPIC", "orders", "WRITE", "bob", host="10.0.0.1")
    srv.grant("TOPIC", "orders-x", "READ", "alice")
    srv.grant("TOPIC", "orders", "READ", "alice", pattern="PREFIXED")
    srv.grant("GROUP", "orders", "READ", "alice")
    out = acls(capsys, srv, "--remove", "--topic", "orders", "--force")
    assert srv.acls() == [("GROUP", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                          ("TOPIC", "orders", "PREFIXED", "User:alice", "*", "READ", "ALLOW"),
                          ("TOPIC", "orders-x", "LITERAL", "User:alice", "*", "READ", "ALLOW")]
    lines = out.splitlines()
    assert lines[0] == "removed 2 ACLs:"
    assert sorted(tuple(line.split()) for line in lines[2:]) == [
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:bob", "10.0.0.1", "WRITE", "DENY")]


def test_remove_with_principals_removes_exactly_the_entries_add_would_make(capsys, srv) -> None:
    srv.grant("GROUP", "g", "READ", "alice")
    srv.grant("GROUP", "g", "ALL", "alice")
    srv.grant("GROUP", "g", "READ", "alice", host="10.0.0.1")
    srv.deny("GROUP", "g", "READ", "alice")
    srv.grant("GROUP", "g", "READ", "bob")
    # the default operation is All and the default host *: only that entry goes
    out = json.loads(acls(capsys, srv, "--remove", "--group", "g", "--allow-principal", "User:alice", "--json"))
    assert [(a["operation"], a["host"], a["permission"]) for a in out["removed"]] == [("ALL", "*", "ALLOW")]
    assert len(srv.acls()) == 4
    acls(capsys, srv, "--remove", "--group", "g", "--allow-principal", "User:alice", "--operation", "Read",
         "--allow-host", "10.0.0.1")
    assert srv.acls() == [("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                          ("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "DENY"),
                          ("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW")]
    acls(capsys, srv, "--remove", "--group", "g", "--deny-principal", "User:alice", "--operation", "read")
    assert srv.acls() == [("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                          ("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW")]


def test_remove_with_match_removes_what_applies_to_the_resource(capsys, srv) -> None:
    srv.grant("GROUP", "team-a-orders", "READ", "alice")
    srv.grant("GROUP", "team-a-", "READ", "alice", pattern="PREFIXED")
    srv.grant("GROUP", "*", "DESCRIBE", "alice")
    srv.grant("GROUP", "team-b-", "READ", "alice", pattern="PREFIXED")
    srv.grant("GROUP", "team-a-payments", "READ", "alice")
    out = acls(capsys, srv, "--remove", "--group", "team-a-orders", "--resource-pattern-type", "match")
    assert out.startswith("removed 3 ACLs:\n")
    assert [a[1:3] for a in srv.acls()] == [("team-a-payments", "LITERAL"), ("team-b-", "PREFIXED")]


def test_remove_that_matches_nothing_says_so(capsys, srv) -> None:
    srv.grant("TOPIC", "orders", "READ", "alice")
    assert acls(capsys, srv, "--remove", "--topic", "payments") == "no ACL matched: nothing removed\n"
    assert json.loads(acls(capsys, srv, "--remove", "--topic", "payments", "--json")) == {"removed": [],
                                                                                         "refused": []}
    assert len(srv.acls()) == 1


# ---- mistakes: one line, exit 2, nothing done ----------------------------------------------------------------

MISTAKES = [
    (("--topic", "t"), ("give exactly one action", "--add", "--list", "--remove")),
    (("--add", "--list", "--topic", "t", "--allow-principal", "User:a"), ("--add and --list", "exactly one")),
    (("--add", "--remove", "--list"), ("--add and --list and --remove",)),
    (("--add", "--allow-principal", "User:a"), ("--add", "resource", "--topic", "--group", "--cluster")),
    (("--remove", "--allow-principal", "User:a"), ("--remove", "resource")),
    (("--add", "--topic", "t"), ("--add", "--allow-principal", "--deny-principal")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"), ("--operation", "'Fly'",
                                                                                    "not an operation")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Any"), ("'Any'", "not an operation")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "IdempotentWrite"),
     ("--operation IdempotentWrite", "TOPIC only supports operations")),
    (("--remove", "--group", "g", "--allow-principal", "User:a", "--operation", "ClusterAction"),
     ("--operation ClusterAction", "GROUP only supports operations")),
    (("--list", "--deny-principal", "User:a"), ("--deny-principal", "not with --list")),
    (("--list", "--allow-principal", "User:a"), ("--allow-principal", "not with --list")),
    (("--list", "--allow-host", "1.2.3.4"), ("--allow-host", "not with --list")),
    (("--list", "--operation", "Read"), ("--operation", "not with --list")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--principal", "User:a"), ("--principal",
                                                                                       "only with --list")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "match"),
     ("--resource-pattern-type match", "not with --add")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "any"),
     ("--resource-pattern-type any", "not with --add")),
    (("--list", "--resource-pattern-type", "regex"), ("--resource-pattern-type", "'regex'")),
    (("--add", "--cluster", "--allow-principal", "User:a", "--resource-pattern-type", "prefixed"),
     ("--cluster", "prefixed")),
    (("--add", "--topic", "t", "--allow-principal", "alice"), ("--allow-principal", "'alice'", "principalType")),
    (("--add", "--topic", "t", "--deny-principal", "User:"), ("--deny-principal", "'User:'")),
    (("--list", "--principal", ":bob"), ("--principal", "':bob'")),
    (("--add", "--topic", "  ", "--allow-principal", "User:a"), ("--topic", "empty")),
    (("--add", "--group", "", "--allow-principal", "User:a"), ("--group", "empty")),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--allow-host", ""), ("--allow-host", "empty")),
    (("--add", "--topic", "t\udcff", "--allow-principal", "User:a"), ("--topic", "not UTF-8")),
    (("--add", "--topic", "t" * 40_000, "--allow-principal", "User:a"), ("--topic", "40000 bytes")),
    (("--add", "--topic", "t", "--deny-principal", "User:a", "--allow-host", "1.2.3.4"),
     ("--allow-host", "needs --allow-principal")),
    (("--remove", "--topic", "t", "--deny-host", "1.2.3.4"), ("--deny-host", "needs --deny-principal")),
    (("--remove", "--topic", "t", "--operation", "Read"), ("--operation", "--allow-principal", "every ACL")),
    (("--list", "--bogus"), ("unrecognized arguments", "--bogus")),
]


@pytest.mark.parametrize(("argv", "names"), MISTAKES, ids=[" ".join(a)[:60] for a, _ in MISTAKES])
def test_each_mistake_is_one_line_and_exit_2_and_changes_nothing(capsys, srv, argv, names) -> None:
    srv.grant("TOPIC", "t", "READ", "alice")
    before = srv.acls()
    refused(capsys, 2, "acls", "--bootstrap", srv.bootstrap, *argv, names=names)
    assert srv.acls() == before


def test_a_server_that_is_not_there_is_one_line_exit_1(capsys) -> None:
    address = f"127.0.0.1:{free_port()}"
    refused(capsys, 1, "acls", "--list", "--bootstrap", address, names=(address,))


# ---- the server's refusals: one line, exit 1 ------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "api", "message"), [
    (("--list",), "DescribeAcls", "No Authorizer is configured on the broker"),
    (("--add", "--topic", "t", "--allow-principal", "User:a"), "DescribeAcls", "No Authorizer is configured"),
    (("--remove", "--topic", "t"), "DeleteAcls", "No Authorizer is configured."),
])
def test_without_an_authorizer_each_action_is_refused_security_disabled(capsys, argv, api, message) -> None:
    s = AuthorizedServer(users=(), authorizer_class_name="", super_users="")
    try:
        refused(capsys, 1, "acls", "--bootstrap", s.bootstrap, *argv, names=(api, "SECURITY_DISABLED", message))
    finally:
        s.close()


@pytest.fixture
def alice_config(tmp_path, srv):
    path = tmp_path / "alice.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM}\nsasl.username=alice\n"
                    f"sasl.password={PASSWORD}\n")
    return str(path)


@pytest.mark.parametrize(("argv", "api"), [
    (("--list",), "DescribeAcls"),
    (("--add", "--group", "g", "--allow-principal", "User:alice"), "DescribeAcls"),
    (("--remove", "--group", "g"), "DeleteAcls"),
])
def test_a_user_without_cluster_access_is_refused_cluster_authorization_failed(capsys, srv, alice_config, argv,
                                                                               api) -> None:
    srv.grant("GROUP", "g", "READ", "bob")
    before = srv.acls()
    refused(capsys, 1, "acls", "--bootstrap", srv.sasl, "--command-config", alice_config, *argv,
            names=(api, "CLUSTER_AUTHORIZATION_FAILED"))
    assert srv.acls() == before


def test_a_user_with_describe_but_not_alter_on_the_cluster_may_list_but_not_change(capsys, srv, alice_config) -> None:
    srv.grant("CLUSTER", "kafka-cluster", "DESCRIBE", "alice")
    as_alice = ("acls", "--bootstrap", srv.sasl, "--command-config", alice_config)
    assert ok(capsys, *as_alice, "--list", "--cluster").split()[7:] == [
        "CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]
    refused(capsys, 1, *as_alice, "--add", "--group", "g", "--allow-principal", "User:alice",
            names=("CreateAcls", "CLUSTER_AUTHORIZATION_FAILED"))
    refused(capsys, 1, *as_alice, "--remove", "--cluster", names=("DeleteAcls", "CLUSTER_AUTHORIZATION_FAILED"))
    assert len(srv.acls()) == 1
    # with CLUSTER ALTER (which implies DESCRIBE) the same user manages ACLs
    srv.grant("CLUSTER", "kafka-cluster", "ALTER", "alice")
    ok(capsys, *as_alice, "--add", "--group", "g", "--allow-principal", "User:alice", "--operation", "Read")
    assert ("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW") in srv.acls()


def test_a_wrong_password_is_one_line(capsys, srv, tmp_path) -> None:
    path = tmp_path / "wrong.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM}\nsasl.username=alice\n"
                    "sasl.password=not-the-password\n")
    code, out, err = run(capsys, "acls", "--bootstrap", srv.sasl, "--command-config", str(path), "--list")
    assert (code, out) == (1, "")
    the_line(err, "acls", srv.sasl)


# ---- a server that refuses part of a request (Kafka refuses what kcoord's checks keep from it) -------------------

class PartlyRefusing:
    """A stand-in for the connection: DescribeAcls finds nothing; CreateAcls refuses its second creation and
    DeleteAcls its second filter, as a Kafka broker may (INVALID_REQUEST, the 10,000 removals limit)."""

    def __init__(self, address: str) -> None:
        self.address = address

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def request(self, req, version: int):
        if isinstance(req, wire.DescribeAclsRequest):
            return wire.DescribeAclsResponse(error_code=E.NONE, error_message=None, resources=[])
        if isinstance(req, wire.CreateAclsRequest):
            return wire.CreateAclsResponse(results=[wire.CreateAclsResponseAclCreationResult(
                error_code=E.INVALID_REQUEST if i == 1 else E.NONE,
                error_message="Invalid host" if i == 1 else None) for i, _ in enumerate(req.creations)])
        assert isinstance(req, wire.DeleteAclsRequest)
        first = req.filters[0]
        return wire.DeleteAclsResponse(filter_results=[
            wire.DeleteAclsResponseDeleteAclsFilterResult(error_code=E.NONE, error_message=None, matching_acls=[
                wire.DeleteAclsResponseDeleteAclsMatchingAcl(
                    error_code=E.NONE, error_message=None, resource_type=first.resource_type_filter,
                    resource_name=first.resource_name_filter, pattern_type=3, principal="User:alice", host="*",
                    operation=3, permission_type=3)]),
            wire.DeleteAclsResponseDeleteAclsFilterResult(
                error_code=E.UNKNOWN_SERVER_ERROR, error_message="Cannot remove more than 10000 acls in a single "
                "delete operation.", matching_acls=[])])


def test_a_partial_refusal_prints_what_was_done_and_names_the_rest_on_one_line(capsys, monkeypatch) -> None:
    import kcoord.cli

    monkeypatch.setattr(kcoord.cli, "connect", PartlyRefusing)
    code, out, err = run(capsys, "acls", "--add", "--topic", "t", "--allow-principal", "User:alice",
                         "--allow-principal", "User:bob", "--operation", "Read")
    assert code == 1
    assert out.startswith("added 1 ACL:\n") and "User:alice" in out and "User:bob" not in out
    the_line(err, "acls", "not added", "User:bob", "INVALID_REQUEST", "Invalid host")
    code, out, err = run(capsys, "acls", "--remove", "--topic", "t", "--topic", "u", "--json")
    assert code == 1
    assert [a["resource_name"] for a in json.loads(out)["removed"]] == ["t"]
    the_line(err, "acls", "DeleteAcls", "UNKNOWN_SERVER_ERROR", "10000")
