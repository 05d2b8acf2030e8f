"""Real clients over TLS (issue 31) against `kcoord serve`, with certificates trustme makes at test time:

* an SSL listener with ssl.client.auth=required: confluent-kafka with a client certificate forms a classic group
  and commits, and the server names it User:<its DN mapped by ssl.principal.mapping.rules>; a client without a
  certificate, or with one another CA signed, fails in the client and makes nothing;
* a SASL_SSL listener: kafka-python and aiokafka (PLAIN, SCRAM-SHA-512) and confluent-kafka (SCRAM-SHA-512) form
  classic groups and commit; confluent-kafka with group.protocol=consumer forms a KIP-848 group;
* a client that does not trust the server's CA fails with its SSL error;
* SIGHUP reloads a renewed server certificate without a restart (new connections get it, an established consumer
  keeps working), and refuses one whose DN changed (the old one is still served).

Users are added through AlterUserScramCredentials on a PLAINTEXT listener, as in test_sasl_interop."""

from __future__ import annotations

import json
import re
import signal
import socket
import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509

from kcoord.client import Client, ClientSecurity

from ..support.cli import kcoord
from ..support.interop import TOPIC, committed
from ..support.interop_consumer import ConsumerMember
from ..support.interop_member import MEMBERS
from ..support.secured import Pki, add_users, groups, secured_server, stop
from ..support.waits import wait_until

USERS = {"alice": ("SCRAM-SHA-512", "alice-tls-secret")}
# CN=Alice.Smith,OU=Payments,O=Example -> User:alice.smith@payments; other DNs as they are (DEFAULT)
MAPPING = "RULE:^CN=([^,]+),OU=Payments,O=Example$/$1@payments/L,DEFAULT"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki, tmp_path_factory):
    srv = secured_server(tmp_path_factory.mktemp("tls"), pki, f"ssl.principal.mapping.rules={MAPPING}",
                         topic=f"{TOPIC}:4")
    add_users(srv.bootstrap, USERS)
    yield srv
    log = stop(srv)
    assert USERS["alice"][1] not in log  # never a password in the log


def served_serial(port: int, ca_file) -> int:
    """The serial of the certificate a new TLS connection to `port` is given."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number


def confluent_errors(conf: dict, codes: set[int], timeout: float = 15.0) -> list:
    """Start an AdminClient with `conf`, ask it for the groups, and wait until librdkafka reports an error with
    one of `codes` through error_cb; every error it reported."""
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    admin.list_consumer_groups(request_timeout=5)
    deadline = time.monotonic() + timeout
    while not any(e.code() in codes for e in errors):
        assert time.monotonic() < deadline, errors
        admin.poll(0.1)
    return errors


# ---- SSL with client certificates ---------------------------------------------------------------------------------

def test_a_client_certificate_forms_a_classic_group_commits_and_is_named_by_the_mapping_rules(server, pki) -> None:
    cert, key = pki.client_cert("alice", common_name="Alice.Smith")
    m = MEMBERS["confluent"](server.ssl, "g-ssl-cert", TOPIC, client_id="cert-1", client_config={
        "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file), "ssl.certificate.location": cert,
        "ssl.key.location": key})
    m.start()
    try:
        wait_until(lambda: (m.assigned == frozenset(range(4)), m.assigned), 30, "never assigned")
        m.commit({0: 3, 2: 9})
        assert committed(server, "g-ssl-cert") == {0: 3, 2: 9}
        # kcoord describe --json's member principal (the JSON log lines carry it too)
        assert [x["principal"] for x in server.describe("g-ssl-cert")["members"]] == ["User:alice.smith@payments"]
    finally:
        m.close()
    lines = [line for line in server.log.read_text().splitlines() if "on listener SSL with a certificate" in line]
    assert lines and all(" authenticated as User:alice.smith@payments " in line for line in lines), lines


@pytest.mark.parametrize("how", ["no certificate", "another CA's certificate"])
def test_a_client_without_a_trusted_certificate_fails_in_the_client_and_makes_nothing(server, pki, how) -> None:
    from confluent_kafka import KafkaError

    conf = {"bootstrap.servers": server.ssl, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file)}
    if how != "no certificate":
        cert, key = pki.client_cert("mallory", common_name="Alice.Smith", other_ca=True)
        conf |= {"ssl.certificate.location": cert, "ssl.key.location": key}
    before = groups(server)
    m = ConsumerMember(server.ssl, f"g-refused-{how}", [TOPIC], client_id="refused",
                       conf={**conf, "group.protocol": "classic"})
    m.start()
    try:
        failed = {KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
        wait_until(lambda: (any(e.code() in failed for e in m.errors), m.errors), 15, "no SSL error in the client")
        assert not m.partitions
    finally:
        m.stop()
    assert groups(server) == before
    server.check_alive()


# ---- SASL_SSL -----------------------------------------------------------------------------------------------------

def sasl_ssl_config(kind: str, mechanism: str, pki: Pki) -> dict:
    user, (_, password) = "alice", USERS["alice"]
    if kind == "confluent":
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_file), "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password}
    conf = {"security_protocol": "SASL_SSL", "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}
    if kind == "aiokafka":
        from aiokafka.helpers import create_ssl_context

        return conf | {"ssl_context": create_ssl_context(cafile=str(pki.ca_file))}
    return conf | {"ssl_cafile": str(pki.ca_file)}


@pytest.mark.parametrize(("kind", "mechanism"), [("kafka-python", "PLAIN"), ("kafka-python", "SCRAM-SHA-512"),
                                                 ("aiokafka", "PLAIN"), ("aiokafka", "SCRAM-SHA-512"),
                                                 ("confluent", "SCRAM-SHA-512")])
def test_a_classic_group_forms_and_commits_over_sasl_ssl(server, pki, kind, mechanism) -> None:
    group = f"g-sasl-ssl-{kind}-{mechanism}"
    m = MEMBERS[kind](server.sasl_ssl, group, TOPIC, client_id=f"{kind}-1",
                      client_config=sasl_ssl_config(kind, mechanism, pki))
    m.start()
    try:
        wait_until(lambda: (m.assigned == frozenset(range(4)), m.assigned), 30, "never assigned")
        m.commit({1: 4, 3: 8})
        assert committed(server, group) == {1: 4, 3: 8}
    finally:
        m.close()


def test_a_kip848_group_forms_over_sasl_ssl(server, pki) -> None:
    m = ConsumerMember(server.sasl_ssl, "g-848-sasl-ssl", [TOPIC], client_id="c848",
                       conf=sasl_ssl_config("confluent", "SCRAM-SHA-512", pki))
    m.start()
    try:
        wait_until(lambda: (m.partitions == frozenset(range(4)), m.partitions), 30, "never assigned")
        m.commit({2: 6})
        assert committed(server, "g-848-sasl-ssl") == {2: 6}
    finally:
        m.stop()


@pytest.mark.parametrize("listener", ["ssl", "sasl_ssl"])
def test_a_client_that_does_not_trust_the_servers_ca_fails_with_its_ssl_error(server, pki, listener) -> None:
    from confluent_kafka import KafkaError

    cert, key = pki.client_cert("alice2", common_name="Alice.Smith")
    conf = {"bootstrap.servers": getattr(server, listener), "ssl.ca.location": str(pki.other_ca_file)}
    if listener == "ssl":
        conf |= {"security.protocol": "SSL", "ssl.certificate.location": cert, "ssl.key.location": key}
    else:
        conf |= {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                 "sasl.password": USERS["alice"][1]}
    before = groups(server)
    errors = confluent_errors(conf, {KafkaError._SSL})
    assert any("certificate verify failed" in e.str() for e in errors if e.code() == KafkaError._SSL), errors
    with pytest.raises(ssl.SSLCertVerificationError):  # kcoord's own client too
        Client(server.sasl_ssl, security=ClientSecurity(
            security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
            sasl_password=USERS["alice"][1], ssl_ca_location=str(pki.other_ca_file)))
    assert groups(server) == before


# ---- reloading a renewed certificate ------------------------------------------------------------------------------

# ---- kcoord's own tools on secured listeners: --command-config ----------------------------------------------

def test_the_tools_connect_over_sasl_ssl_and_ssl_with_a_command_config(server, pki, tmp_path) -> None:
    """--command-config takes a Kafka client configuration as Kafka's tools do: the Java clients' names
    (sasl.jaas.config, PEM key and trust stores) or librdkafka's; what is no security setting is named and left
    aside."""
    password = USERS["alice"][1]
    java = tmp_path / "java.properties"
    java.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    f'    username="alice" password="{password}";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_file}\nclient.id=ops\n")
    want = groups(server)
    got = kcoord("groups", "--bootstrap", server.sasl_ssl, "--command-config", str(java), "--json")
    assert got.returncode == 0, got.stderr
    assert {g["group"] for g in json.loads(got.stdout)} == want
    assert got.stderr.strip() == f"--command-config {java}: not used by kcoord's tools: client.id"
    got = kcoord("users", "list", "--bootstrap", server.sasl_ssl, "--command-config", str(java), "--json")
    assert got.returncode == 0, got.stderr
    assert "alice" in got.stdout and password not in got.stdout + got.stderr

    cert, key = pki.client_cert("ops", common_name="Alice.Smith")
    keystore = tmp_path / "ops-keystore.pem"  # Kafka's PEM keystore: the key, then the chain
    keystore.write_text(Path(key).read_text() + Path(cert).read_text())
    for name, text in (("ssl-java", f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
                                    f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_file}\n"),
                       ("ssl-librdkafka", f"security.protocol=SSL\nssl.certificate.location={cert}\n"
                                          f"ssl.key.location={key}\nssl.ca.location={pki.ca_file}\n")):
        conf = tmp_path / f"{name}.properties"
        conf.write_text(text)
        got = kcoord("groups", "--bootstrap", server.ssl, "--command-config", str(conf), "--json")
        assert got.returncode == 0, (name, got.stderr)
        assert {g["group"] for g in json.loads(got.stdout)} == want


def test_a_command_config_that_cannot_serve_is_one_line_and_never_shows_the_password(server, pki, tmp_path) -> None:
    def conf(text: str) -> str:
        path = tmp_path / f"c{abs(hash(text))}.properties"
        path.write_text(text)
        return str(path)

    trust = f"ssl.ca.location={pki.ca_file}\n"
    cases = [  # (the file, a part of the one line it gives, exit code)
        (conf("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
              "sasl.password=not-her-password\n" + trust), "SASL_AUTHENTICATION_FAILED", 1),
        (conf("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
              "sasl.password=not-her-password\n"), "CERTIFICATE_VERIFY_FAILED", 1),  # the server's CA is not the system's
        (conf("security.protocol=SSL\n" + trust), "the server closed the connection", 1),  # TLS, no SASL
        (conf("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=secret-x\n"),
         "sasl.mechanism='GSSAPI'", 2),
        (conf("security.protocol=SASL_SSL\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule "
              'required password="secret-y";\n'), "sasl.jaas.config: expected PlainLoginModule", 2),
        (conf("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n"
              "ssl.truststore.password=secret-z\n"), "ssl.truststore.type=JKS", 2),
        (conf("security.protocol=SSL\nssl.keystore.locaton=/typo.pem\n"), "ssl.keystore.locaton", 2),
        (str(tmp_path / "missing.properties"), "No such file or directory", 2),
    ]
    for path, says, code in cases:
        got = kcoord("describe", "some-group", "--bootstrap", server.sasl_ssl, "--command-config", path)
        lines = got.stderr.strip().splitlines()
        assert got.returncode == code and len(lines) == 1 and says in lines[0], (path, got.returncode, got.stderr)
        assert "Traceback" not in got.stderr
        for secret in ("not-her-password", "secret-x", "secret-y", "secret-z"):
            assert secret not in got.stderr + got.stdout
    got = kcoord("groups", "--bootstrap", server.sasl_ssl)  # no configuration: a plaintext client on SASL_SSL
    assert got.returncode == 1 and len(got.stderr.strip().splitlines()) == 1, got.stderr


def sighup_and_wait(server, pattern: str, count: int) -> None:
    """SIGHUP the server and wait until the log has `count` lines matching `pattern`."""
    server.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: (len(re.findall(pattern, server.log.read_text())) >= count, server.log_tail(5)), 10,
               "no reload line")
    server.check_alive()


def test_sighup_reloads_a_renewed_certificate_and_refuses_one_with_another_dn(server, pki) -> None:
    old = pki.server_serial
    assert served_serial(server.sasl_port, pki.ca_file) == old
    m = MEMBERS["kafka-python"](server.sasl_ssl, "g-reload", TOPIC, client_id="reload-1",
                                client_config=sasl_ssl_config("kafka-python", "SCRAM-SHA-512", pki))
    m.start()
    try:
        wait_until(lambda: (m.assigned == frozenset(range(4)), m.assigned), 30, "never assigned")
        generation = server.describe("g-reload")["generation"]

        renewed = pki.write_server_keystore()  # the same DN, a new key and serial
        assert renewed != old
        sighup_and_wait(server, r"listener (SSL|SASL) reloaded its TLS key", 2)
        assert served_serial(server.sasl_port, pki.ca_file) == renewed
        assert served_serial(server.tls_port, pki.ca_file) == renewed
        m.commit({0: 21})  # the established consumer goes on over its connection
        assert committed(server, "g-reload") == {0: 21}

        pki.write_server_keystore(common_name="impostor", organization_name="kcoord", organization_unit_name="brokers")
        sighup_and_wait(server, r"TLS reload of listener (SSL|SASL) was refused", 2)
        assert served_serial(server.sasl_port, pki.ca_file) == renewed
        m.commit({0: 22})
        assert committed(server, "g-reload") == {0: 22}
        assert m.assigned == frozenset(range(4))
        assert server.describe("g-reload")["generation"] == generation  # no rebalance meanwhile
    finally:
        m.close()
    refused = [line for line in server.log.read_text().splitlines() if "TLS reload of listener" in line]
    assert len(refused) == 2 and all("Traceback" not in line for line in refused), refused
