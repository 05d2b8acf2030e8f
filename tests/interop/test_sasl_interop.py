"""Real clients authenticating to `kcoord serve` over SASL (issue 31): confluent-kafka (librdkafka), kafka-python and
aiokafka with PLAIN and SCRAM-SHA-256/512 on a SASL_PLAINTEXT listener; a classic group forms and commits on each,
and a KIP-848 group (confluent, group.protocol=consumer) too. Users are added through AlterUserScramCredentials on
a second, PLAINTEXT listener (an operator's internal one). A wrong password, an unknown user or a mechanism that is
not enabled fails in the client with its authentication error, and changes nothing on the server."""

from __future__ import annotations

import time

import pytest

from kcoord import wire
from kcoord.client import Client

from ..support.interop import committed
from ..support.interop_consumer import ConsumerMember
from ..support.interop_member import MEMBERS
from ..support.secured import add_users
from ..support.servers import free_port, serve
from ..support.waits import wait_until

USERS = {"alice": ("SCRAM-SHA-512", "alice-secret-Ω"), "bob": ("SCRAM-SHA-256", "bob-secret")}
TOPIC = "orders"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    internal, external = free_port(), free_port()
    log = tmp_path_factory.mktemp("sasl") / "log"
    srv = serve(internal, log, "--topic", f"{TOPIC}:4", "--set", "group.initial.rebalance.delay.ms=0",
                "--set", f"listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
                "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    srv.external = f"127.0.0.1:{external}"
    add_users(srv.bootstrap, USERS)
    yield srv
    srv.proc.terminate()
    srv.proc.wait(30)
    log_text = log.read_text()
    for _, password in USERS.values():
        assert password not in log_text  # never a password in the log


def sasl_config(kind: str, mechanism: str, user: str, password: str) -> dict:
    if kind == "confluent":
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password}
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}


@pytest.mark.parametrize("kind", list(MEMBERS))
@pytest.mark.parametrize(("mechanism", "user"), [("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "bob"),
                                                 ("PLAIN", "alice")])
def test_a_classic_group_forms_and_commits_over_sasl(server, kind, mechanism, user) -> None:
    group = f"g-{kind}-{mechanism}-{user}"
    m = MEMBERS[kind](server.external, group, TOPIC, client_id=f"{kind}-1",
                      client_config=sasl_config(kind, mechanism, user, USERS[user][1]))
    m.start()
    try:
        wait_until(lambda: (m.assigned == frozenset(range(4)), m.assigned), 30, "never assigned")
        m.commit({0: 11, 3: 7})
        assert committed(server, group) == {0: 11, 3: 7}
        # describe (over the PLAINTEXT listener) names the principal the member authenticated as
        assert [x["principal"] for x in server.describe(group)["members"]] == [f"User:{user}"]
    finally:
        m.close()


def test_a_kip848_group_forms_over_sasl(server) -> None:
    m = ConsumerMember(server.external, "g-848", [TOPIC], client_id="c848",
                       conf=sasl_config("confluent", "SCRAM-SHA-512", "alice", USERS["alice"][1]))
    m.start()
    try:
        wait_until(lambda: (m.partitions == frozenset(range(4)), m.partitions), 30, "never assigned")
        m.commit({1: 5})
        assert committed(server, "g-848") == {1: 5}
        assert [x["principal"] for x in server.describe("g-848")["members"]] == ["User:alice"]
        assert "principal='User:alice'" in server.log.read_text()  # the group events it caused name it
    finally:
        m.stop()


def test_wrong_credentials_fail_in_the_client_and_change_nothing(server) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    for mechanism, user, password in (("SCRAM-SHA-512", "alice", "wrong"), ("PLAIN", "alice", "wrong"),
                                      ("SCRAM-SHA-256", "mallory", "x"), ("SCRAM-SHA-256", "alice", USERS["alice"][1])):
        # the last: alice has a SCRAM-SHA-512 credential only
        errors = []
        admin = AdminClient({"bootstrap.servers": server.external, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                             "error_cb": errors.append})
        admin.list_consumer_groups(request_timeout=5)
        deadline = time.monotonic() + 15
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            assert time.monotonic() < deadline, (mechanism, user, errors)
            admin.poll(0.1)
    with Client(server.bootstrap) as c:  # nothing was made by the failed clients
        listed = c.call(16, 4, wire.ListGroupsRequest(states_filter=[])).groups
        assert not [g for g in listed if not g.group_id.startswith("g-")]


def test_a_mechanism_the_listener_does_not_enable_fails_in_the_client() -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    from kcoord.config import ServerConfig

    from ..support.servers import in_process

    internal, external = free_port(), free_port()
    cfg = ServerConfig.from_kafka({
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN"})
    with in_process(cfg) as srv:
        add_users(f"127.0.0.1:{internal}", {"alice": ("SCRAM-SHA-512", "pw")})
        errors = []
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{external}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "pw",
                             "error_cb": errors.append})
        admin.list_consumer_groups(request_timeout=5)
        deadline = time.monotonic() + 15
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            assert time.monotonic() < deadline, errors
            admin.poll(0.1)
        assert "PLAIN" in str(errors[0])  # librdkafka names what the broker enables
        assert srv.auth_results[("EXTERNAL", "SCRAM-SHA-512", "failure")] >= 1 and not srv.coordinator.groups
