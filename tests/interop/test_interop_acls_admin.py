"""`kcoord acls` and the real admin clients over the same ACLs (issue 32, "ACLs created through confluent-kafka's
AdminClient are listed by `kcoord acls --list` and the other way round"): a real `kcoord serve` with
StandardAuthorizer on a PLAINTEXT listener whose User:ANONYMOUS is a super user, the CLI run as a subprocess as users
run it, and confluent-kafka's AdminClient (create_acls / describe_acls / delete_acls) and kafka-python's
KafkaAdminClient (the same three) on the other side. Each direction is checked by reading back through the other
side, never by the writer's own answer."""

from __future__ import annotations

import json

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.security.authorizer import ANY

from ..support.authorized import STANDARD_AUTHORIZER
from ..support.cli import kcoord
from ..support.servers import free_port, serve

FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("acls-admin") / "server.log"
    srv = serve(free_port(), log, "--set", f"authorizer.class.name={STANDARD_AUTHORIZER}",
                "--set", "super.users=User:ANONYMOUS")
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


@pytest.fixture(autouse=True)
def no_acls(server):
    """Each test starts from no ACL at all (DeleteAcls with a filter matching every one)."""
    with Client(server.bootstrap) as c:
        r = c.call(31, 2, wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
            resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
            host_filter=None, operation=ANY, permission_type=ANY)]))
    assert r.filter_results[0].error_code == E.NONE, r
    yield


def cli(server, *argv: str) -> str:
    """`kcoord acls ARGV --bootstrap SERVER` as a subprocess, which must succeed: its stdout."""
    r = kcoord("acls", "--bootstrap", server.bootstrap, *argv)
    assert (r.returncode, r.stderr) == (0, ""), f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cli_list(server, *argv: str) -> list[tuple[str, ...]]:
    """Every ACL `kcoord acls --list --json` shows, as (type, name, pattern, principal, host, operation, permission)
    of Kafka's enum names, sorted."""
    return sorted(tuple(a[k] for k in FIELDS) for a in json.loads(cli(server, "--list", "--json", *argv))["acls"])


# ---- confluent-kafka (librdkafka) -------------------------------------------------------------------------------

@pytest.fixture
def confluent(server):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": server.bootstrap})


def confluent_rows(bindings) -> list[tuple[str, ...]]:
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                   b.permission_type.name) for b in bindings)


def confluent_any():
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as R

    return AclBindingFilter(R.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)


@pytest.mark.interop
def test_acls_created_by_confluent_kafka_are_listed_by_kcoord_acls(server, confluent) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as R

    bindings = [
        AclBinding(R.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(R.GROUP, "team-a-", ResourcePatternType.PREFIXED, "User:alice", "10.0.0.7", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(R.GROUP, "team-a-secret", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL,
                   AclPermissionType.DENY),
        AclBinding(R.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ops", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]
    for future in confluent.create_acls(bindings, request_timeout=10).values():
        assert future.result() is None
    assert cli_list(server) == sorted([
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("GROUP", "team-a-", "PREFIXED", "User:alice", "10.0.0.7", "READ", "ALLOW"),
        ("GROUP", "team-a-secret", "LITERAL", "User:alice", "*", "ALL", "DENY"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "*", "DESCRIBE", "ALLOW"),
    ])
    # kcoord's filters over them: what applies to the group team-a-orders; one principal's
    assert [a[1] for a in cli_list(server, "--group", "team-a-orders", "--resource-pattern-type", "match")] == [
        "team-a-"]
    assert [a[0] for a in cli_list(server, "--principal", "User:ops")] == ["CLUSTER"]
    # and kcoord acls --remove removes them, as confluent-kafka then sees
    removed = cli(server, "--remove", "--group", "team-a-secret", "--topic", "orders", "--force")
    assert removed.startswith("removed 2 ACLs:\n")
    assert confluent_rows(confluent.describe_acls(confluent_any(), request_timeout=10).result()) == sorted([
        ("GROUP", "team-a-", "PREFIXED", "User:alice", "10.0.0.7", "READ", "ALLOW"),
        ("BROKER", "kafka-cluster", "LITERAL", "User:ops", "*", "DESCRIBE", "ALLOW"),
    ])


@pytest.mark.interop
def test_acls_added_by_kcoord_acls_are_described_and_deleted_by_confluent_kafka(server, confluent) -> None:
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as R

    cli(server, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob", "--operation", "Read",
        "--operation", "Describe", "--topic", "orders", "--group", "billing")
    cli(server, "--add", "--deny-principal", "User:eve", "--deny-host", "10.9.9.9", "--group", "team-",
        "--resource-pattern-type", "prefixed")
    expected = sorted(
        [(rtype, name, "LITERAL", f"User:{who}", "*", op, "ALLOW") for rtype, name in (("TOPIC", "orders"),
                                                                                      ("GROUP", "billing"))
         for who in ("alice", "bob") for op in ("READ", "DESCRIBE")]
        + [("GROUP", "team-", "PREFIXED", "User:eve", "10.9.9.9", "ALL", "DENY")])
    assert confluent_rows(confluent.describe_acls(confluent_any(), request_timeout=10).result()) == expected
    # confluent-kafka's own filter: bob's on the topic orders
    bob = AclBindingFilter(R.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert [r[5] for r in confluent_rows(confluent.describe_acls(bob, request_timeout=10).result())] == [
        "DESCRIBE", "READ"]
    # confluent-kafka deletes them: bob's everywhere, then the prefixed DENY
    bob_everywhere = AclBindingFilter(R.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                                      AclPermissionType.ANY)
    (deleted,) = confluent.delete_acls([bob_everywhere], request_timeout=10).values()
    assert len(deleted.result()) == 4
    assert cli_list(server) == [a for a in expected if a[3] != "User:bob"]
    prefixed = AclBindingFilter(R.GROUP, "team-", ResourcePatternType.PREFIXED, None, None, AclOperation.ANY,
                                AclPermissionType.DENY)
    (deleted,) = confluent.delete_acls([prefixed], request_timeout=10).values()
    assert confluent_rows(deleted.result()) == [("GROUP", "team-", "PREFIXED", "User:eve", "10.9.9.9", "ALL", "DENY")]
    assert cli_list(server) == [a for a in expected if a[3] == "User:alice"]


# ---- kafka-python -----------------------------------------------------------------------------------------------

@pytest.fixture
def kafka_python(server):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    yield admin
    admin.close()


def kafka_python_rows(acls) -> list[tuple[str, ...]]:
    return sorted((a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
                   a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name, a.permission_type.name)
                  for a in acls)


def kafka_python_any():
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as R

    return ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                     resource_pattern=ResourcePatternFilter(R.ANY, None, ACLResourcePatternType.ANY))


@pytest.mark.interop
def test_acls_created_by_kafka_python_are_listed_and_removed_by_kcoord_acls(server, kafka_python) -> None:
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
    from kafka.admin import ResourceType as R

    acls = [
        ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(R.TOPIC, "events", ACLResourcePatternType.LITERAL)),
        ACL("User:alice", "*", ACLOperation.DELETE, ACLPermissionType.ALLOW,
            ResourcePattern(R.GROUP, "etl-", ACLResourcePatternType.PREFIXED)),
        ACL("User:*", "10.0.0.1", ACLOperation.DESCRIBE, ACLPermissionType.DENY,
            ResourcePattern(R.TOPIC, "*", ACLResourcePatternType.LITERAL)),
    ]
    result = kafka_python.create_acls(acls)
    assert (len(result["succeeded"]), result["failed"]) == (3, [])
    assert cli_list(server) == sorted([
        ("TOPIC", "events", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
        ("GROUP", "etl-", "PREFIXED", "User:alice", "*", "DELETE", "ALLOW"),
        ("TOPIC", "*", "LITERAL", "User:*", "10.0.0.1", "DESCRIBE", "DENY"),
    ])
    # kcoord removes exactly the entry it names (principal, operation, default host *), as kafka-python then sees
    out = json.loads(cli(server, "--remove", "--group", "etl-", "--resource-pattern-type", "prefixed",
                         "--allow-principal", "User:alice", "--operation", "Delete", "--json"))
    assert [(a["resource_name"], a["operation"]) for a in out["removed"]] == [("etl-", "DELETE")]
    found, error = kafka_python.describe_acls(kafka_python_any())
    assert error.errno == 0
    assert kafka_python_rows(found) == sorted([
        ("TOPIC", "events", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
        ("TOPIC", "*", "LITERAL", "User:*", "10.0.0.1", "DESCRIBE", "DENY"),
    ])


@pytest.mark.interop
def test_acls_added_by_kcoord_acls_are_described_and_deleted_by_kafka_python(server, kafka_python) -> None:
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as R

    cli(server, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--allow-host", "10.0.0.1",
        "--allow-host", "10.0.0.2", "--group", "payments", "--topic", "payments")
    cli(server, "--add", "--allow-principal", "User:ops", "--operation", "Alter", "--operation", "Describe",
        "--cluster")
    expected = sorted(
        [(rtype, "payments", "LITERAL", "User:alice", h, "READ", "ALLOW") for rtype in ("TOPIC", "GROUP")
         for h in ("10.0.0.1", "10.0.0.2")]
        + [("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "*", op, "ALLOW") for op in ("ALTER", "DESCRIBE")])
    found, error = kafka_python.describe_acls(kafka_python_any())
    assert error.errno == 0
    assert kafka_python_rows(found) == expected
    # kafka-python deletes: alice's from one host on any resource, then the cluster's
    one_host = ACLFilter(principal="User:alice", host="10.0.0.1", operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(R.ANY, None, ACLResourcePatternType.ANY))
    cluster = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(R.CLUSTER, "kafka-cluster",
                                                               ACLResourcePatternType.LITERAL))
    results = kafka_python.delete_acls([one_host, cluster])
    assert [(len(matched), error.errno) for _, matched, error in results] == [(2, 0), (2, 0)]
    assert cli_list(server) == [a for a in expected if a[0] != "CLUSTER" and a[4] == "10.0.0.2"]
