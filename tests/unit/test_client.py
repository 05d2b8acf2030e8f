"""kcoord.client.security_from_properties: a Kafka client configuration (what --command-config gives Kafka's
tools) read into the tools' ClientSecurity, in the Java clients' names and librdkafka's."""

from __future__ import annotations

import pytest

from kcoord.client import ClientConfigError, security_from_properties
from kcoord.config import parse_properties


def read(text: str):
    return security_from_properties({k: v for k, v, _ in parse_properties(text)})


def test_the_java_clients_names() -> None:
    sec, ignored = read("security.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-256\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                        '   username="ops" password="pa\\\\\\\\ss\\\\"word";\n'
                        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n"
                        "ssl.keystore.type=PEM\nssl.keystore.location=/etc/ops.pem\nssl.key.password=k\n"
                        "ssl.endpoint.identification.algorithm=\nrequest.timeout.ms=3000\nclient.id=x\n")
    assert (sec.security_protocol, sec.sasl_mechanism, sec.sasl_username) == ("SASL_SSL", "SCRAM-SHA-256", "ops")
    assert sec.sasl_password == 'pa\\ss"word'  # the properties escapes, then JAAS's
    assert (sec.ssl_ca_location, sec.ssl_certificate_location, sec.ssl_key_location) == \
        ("/etc/ca.pem", "/etc/ops.pem", "/etc/ops.pem")  # a PEM keystore holds the key and the chain
    assert sec.ssl_key_password == "k"
    assert sec.ssl_endpoint_identification_algorithm == "none"  # Java's empty value turns the check off
    assert ignored == ["client.id", "request.timeout.ms"]
    assert "pa\\ss" not in repr(sec)


def test_librdkafkas_names_and_an_unquoted_jaas_option() -> None:
    sec, _ = read("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\nsasl.username=u\nsasl.password=p\n")
    assert (sec.security_protocol, sec.sasl_mechanism, sec.sasl_username, sec.sasl_password) == \
        ("SASL_PLAINTEXT", "PLAIN", "u", "p")
    sec, _ = read("security.protocol=SASL_PLAINTEXT\nsasl.jaas.config=org.apache.kafka.common.security.plain."
                  "PlainLoginModule required username=u2 password=p2;\n")
    assert (sec.sasl_username, sec.sasl_password) == ("u2", "p2")
    sec, _ = read("security.protocol=SSL\nssl.ca.location=/ca\nssl.certificate.location=/c\nssl.key.location=/k\n")
    assert (sec.ssl_ca_location, sec.ssl_certificate_location, sec.ssl_key_location) == ("/ca", "/c", "/k")
    assert read("")[0].security_protocol == "PLAINTEXT"


@pytest.mark.parametrize("text, says", [
    ("security.protocol=SASL_SSL\n", "needs sasl.username and sasl.password"),
    ("security.protocol=TLS\n", "security.protocol='TLS'"),
    ("sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\";\n",
     "needs username"),
    ("ssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n", "ssl.keystore.type=PKCS12"),
    ("ssl.keystore.password=secret-1\n", "ssl.keystore.password: a PEM store has no password"),
    ("ssl.truststore.certificates=-----BEGIN...\n", "ssl.truststore.certificates: not a client security setting"),
    ("security.protocol=SSL\nssl.certificate.location=/c\n", "go together"),
    ("security.protocol=SSL\nssl.endpoint.identification.algorithm=dns\n", "expected https or none"),
])
def test_what_cannot_serve_is_named_and_no_secret_is_shown(text: str, says: str) -> None:
    with pytest.raises(ClientConfigError) as e:
        read(text)
    assert says in str(e.value) and "secret-1" not in str(e.value)
