"""kcoord.security.tls: Kafka's TLS settings, PEM rules, client authentication, protocols, cipher suites, the reload
of a renewed certificate, and the principal of a client certificate (its DN as Java writes it, mapped by
ssl.principal.mapping.rules). Every handshake here is a real one over a loopback TCP connection; the certificates
are made by the test (trustme's CA, cryptography for the subjects trustme cannot write)."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from kcoord.security.tls import (
    ANONYMOUS,
    NoMatchingRule,
    PrincipalMapper,
    TlsConfigError,
    TlsSettings,
    peer_principal,
    reload,
    server_context,
    subject_dn,
)

from ..support.secured import pkcs8

# ------------------------------------------------------------------------------------------------------------------
# Certificates


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _ca_parts(ca: trustme.CA):
    key = ser.load_pem_private_key(ca.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    return key, cert


def issue(ca: trustme.CA, subject: x509.Name, sans=("localhost",), key=None, client=False):
    """A certificate for `subject` signed by `ca`, and its key (a new EC key unless given)."""
    ca_key, ca_cert = _ca_parts(ca)
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in sans]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def pem_chain(cert: x509.Certificate, ca: trustme.CA) -> str:
    return cert.public_bytes(ser.Encoding.PEM).decode() + ca.cert_pem.bytes().decode()


def name(*attrs: tuple) -> x509.Name:
    """A Name from (oid, value) pairs, least specific first (as in the certificate); a list is a multi-valued RDN."""
    rdns = []
    for a in attrs:
        group = a if isinstance(a, list) else [a]
        rdns.append(x509.RelativeDistinguishedName([x509.NameAttribute(*t) for t in group]))
    return x509.Name(rdns)


SERVER_NAME = name((NameOID.ORGANIZATION_NAME, "kcoord"), (NameOID.COMMON_NAME, "broker"))


@pytest.fixture(scope="module")
def server_pair(ca):
    return issue(ca, SERVER_NAME)


def keystore(ca, cert, key, tmp_path: Path, form: str, password: str | None = None) -> dict[str, str]:
    """Kafka settings holding `cert` and `key` in one of the PEM forms: "location" (one file, key and chain) or
    "inline" (ssl.keystore.key and ssl.keystore.certificate.chain)."""
    key_pem = pkcs8(key, password)
    out = {"ssl.keystore.type": "PEM"}
    if form == "location":
        path = tmp_path / "keystore.pem"
        path.write_text(key_pem + pem_chain(cert, ca))
        out["ssl.keystore.location"] = str(path)
    else:
        out["ssl.keystore.key"] = key_pem
        out["ssl.keystore.certificate.chain"] = pem_chain(cert, ca)
    if password is not None:
        out["ssl.key.password"] = password
    return out


def client_context(ca, cert=None, key=None, tmp_path: Path | None = None, **versions) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(ctx)
    for attr, value in versions.items():
        setattr(ctx, attr, value)
    if cert is not None:
        assert tmp_path is not None
        path = tmp_path / "client.pem"
        path.write_text(pkcs8(key) + cert.public_bytes(ser.Encoding.PEM).decode())
        ctx.load_cert_chain(path)
    return ctx


# ------------------------------------------------------------------------------------------------------------------
# A real handshake over loopback


@dataclass
class Conn:
    server: ssl.SSLSocket | None = None
    client: ssl.SSLSocket | None = None
    server_error: Exception | None = None
    client_error: Exception | None = None
    extra: dict = field(default_factory=dict)

    def close(self) -> None:
        for s in (self.server, self.client):
            if s is not None:
                s.close()


def connect(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> Conn:
    """A TCP connection over 127.0.0.1 with each end's TLS handshake run: the server's on a thread."""
    conn = Conn()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)

        def accept() -> None:
            raw, _ = listener.accept()
            raw.settimeout(10)
            try:
                conn.server = server_ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError) as e:
                conn.server_error = e
                raw.close()

        t = threading.Thread(target=accept)
        t.start()
        raw = socket.create_connection(listener.getsockname(), timeout=10)
        try:
            conn.client = client_ctx.wrap_socket(raw, server_hostname="localhost")
        except (ssl.SSLError, OSError) as e:
            conn.client_error = e
            raw.close()
        t.join(10)
        assert not t.is_alive()
    return conn


def exchange(conn: Conn) -> bytes:
    """Application data both ways: what the client reads back."""
    assert conn.server is not None and conn.client is not None
    conn.client.sendall(b"ping")
    assert conn.server.recv(4) == b"ping"
    conn.server.sendall(b"pong")
    return conn.client.recv(4)


def principal_over_tls(server_ctx, client_ctx, rules="DEFAULT") -> str:
    conn = connect(server_ctx, client_ctx)
    try:
        assert conn.server_error is None and conn.client_error is None, (conn.server_error, conn.client_error)
        assert exchange(conn) == b"pong"
        return peer_principal(conn.server, rules)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------------------------
# ssl.principal.mapping.rules: SslPrincipalMapperTest


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_are_accepted(rules: str) -> None:
    PrincipalMapper(rules)
    s = TlsSettings.from_kafka({"ssl.keystore.location": "/ks", "ssl.principal.mapping.rules": rules})
    assert s.principal_mapping_rules == rules


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules_are_one_line_errors_naming_the_setting(rules: str) -> None:
    with pytest.raises(TlsConfigError) as e:
        PrincipalMapper(rules)
    assert str(e.value).startswith("ssl.principal.mapping.rules: ")
    assert "\n" not in str(e.value)
    with pytest.raises(TlsConfigError, match="^ssl.principal.mapping.rules"):
        TlsSettings.from_kafka({"ssl.keystore.location": "/x", "ssl.principal.mapping.rules": rules})


KAFKA_RULES = ", ".join(
    [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
)


@pytest.mark.parametrize(
    ("dn", "expected"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_kafkas_mapping_examples(dn: str, expected: str) -> None:
    assert PrincipalMapper(KAFKA_RULES).name(dn) == expected


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_kafkas_rule_splitting(expected: str, rules: str) -> None:
    assert str(PrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_kafkas_comma_with_whitespace() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_as_kafka_resolves_them() -> None:
    # $4 with three groups is made literal; $12 with two groups is $1 then "2" (Java's Matcher); $0 the whole match
    assert PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$4/").name("CN=a,OU=b,O=c") == "a@$4"
    assert PrincipalMapper("RULE:^CN=(.*?),OU=(.*)$/$12/").name("CN=a,OU=b") == "a2"
    assert PrincipalMapper("RULE:^CN=(.*?),OU=(.*)$/[$0]/").name("CN=a,OU=b") == "[CN=a,OU=b]"
    assert PrincipalMapper("RULE:^CN=(.*?),.*$/\\$1=$1/").name("CN=a,OU=b") == "$1=a"


def test_a_replacement_java_would_refuse_at_each_connection_is_refused_at_start() -> None:
    # Kafka's escapeLiteralBackReferences shifts its second insert ("$5$6" becomes "\$\5$6"), so Java's Matcher
    # throws "No group 6" for every DN the rule matches; kcoord refuses the setting instead
    for rules in ("RULE:^(.*)$/$5$6/", "RULE:^.*$/$1/", "RULE:^(.*)$/a$/", "RULE:^(.*)$/$x/"):
        with pytest.raises(TlsConfigError, match="^ssl.principal.mapping.rules: rule `"):
            PrincipalMapper(rules)
    assert PrincipalMapper("RULE:^(.*)$/$5/").name("CN=a") == "$5"
    assert PrincipalMapper("RULE:^(.*)$/a\\\\/").name("CN=a") == "a\\"


def test_the_rule_must_match_the_whole_dn_and_no_match_is_an_error() -> None:
    mapper = PrincipalMapper("RULE:CN=([a-z]+)/$1/")
    assert mapper.name("CN=duke") == "duke"
    with pytest.raises(
        NoMatchingRule, match="No rules apply to CN=duke,O=x, rules \\[RULE:CN=\\(\\[a-z\\]\\+\\)/\\$1\\]"
    ):
        mapper.name("CN=duke,O=x")


# ------------------------------------------------------------------------------------------------------------------
# The subject DN as Java's X500Principal.getName() writes it


def dn_of(ca, subject: x509.Name) -> str:
    cert, _ = issue(ca, subject)
    return subject_dn(cert.public_bytes(ser.Encoding.DER))


def test_dn_several_rdns_most_specific_first(ca) -> None:
    subject = name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.STATE_OR_PROVINCE_NAME, "MD"),
        (NameOID.LOCALITY_NAME, "Fulton"),
        (NameOID.ORGANIZATION_NAME, "mycp"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "SME"),
        (NameOID.COMMON_NAME, "Duke"),
    )
    assert dn_of(ca, subject) == "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"
    # Java's other RFC 2253 keywords; DC is an IA5String, read as text because it has a keyword
    subject = name(
        (NameOID.DOMAIN_COMPONENT, "com"),
        (NameOID.DOMAIN_COMPONENT, "mycp"),
        (NameOID.STREET_ADDRESS, "1 Main St"),
        (NameOID.USER_ID, "duke"),
    )
    assert dn_of(ca, subject) == "UID=duke,STREET=1 Main St,DC=mycp,DC=com"


def test_dn_multi_valued_rdn_in_encoded_order(ca) -> None:
    # DER sorts a SET's members by their whole encoding, length first: OU=Eng's is shorter than CN=Duke's, so it
    # comes first whatever order is given, and Java (RDN(DerValue)) writes the AVAs in the order it decodes them
    subject = name(
        (NameOID.ORGANIZATION_NAME, "Org"),
        [(NameOID.ORGANIZATIONAL_UNIT_NAME, "Eng"), (NameOID.COMMON_NAME, "Duke")],
    )
    assert dn_of(ca, subject) == "OU=Eng+CN=Duke,O=Org"


def test_dn_escapes_as_rfc2253_and_java(ca) -> None:
    subject = name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.LOCALITY_NAME, "nul\0byte"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "  padded \r"),
        (NameOID.ORGANIZATION_NAME, 'a+b=c<d>e#f;g"h\\i'),
        (NameOID.COMMON_NAME, "Tkac, Adam Zoë"),
    )
    assert dn_of(ca, subject) == (
        'CN=Tkac\\, Adam Zoë,O=a\\+b\\=c\\<d\\>e\\#f\\;g\\"h\\\\i,OU=\\ \\ padded\\ \\\r,L=nul\\00byte,C=US'
    )


def test_dn_attributes_without_a_java_keyword_are_oid_and_hex_ber(ca) -> None:
    email = "duke@example.com"
    subject = name(
        (NameOID.ORGANIZATION_NAME, "Org"),
        (NameOID.TITLE, "Boss"),
        (NameOID.COMMON_NAME, "Duke"),
        (NameOID.EMAIL_ADDRESS, email),
    )
    expected_email = "1.2.840.113549.1.9.1=#16" + bytes([len(email)]).hex() + email.encode().hex()
    assert dn_of(ca, subject) == f"{expected_email},CN=Duke,2.5.4.12=#0c04426f7373,O=Org"


def test_dn_string_types_java_decodes_and_one_it_does_not(ca) -> None:
    bmp = x509.NameAttribute(NameOID.COMMON_NAME, "Dük€", _type=_ASN1Type.BMPString)
    assert dn_of(ca, x509.Name([x509.RelativeDistinguishedName([bmp])])) == "CN=Dük€"
    universal = x509.NameAttribute(NameOID.COMMON_NAME, "ab", _type=_ASN1Type.UniversalString)
    assert dn_of(ca, x509.Name([x509.RelativeDistinguishedName([universal])])) == "CN=#1c080000006100000062"


# ------------------------------------------------------------------------------------------------------------------
# server_context: the PEM forms, each with a handshake


@pytest.mark.parametrize(
    ("form", "password"), [("location", None), ("inline", None), ("location", "pw1"), ("inline", "pw2")]
)
def test_each_pem_form_serves_a_handshake(ca, server_pair, tmp_path, form, password) -> None:
    cert, key = server_pair
    settings = keystore(ca, cert, key, tmp_path, form, password)
    ctx = server_context(TlsSettings.from_kafka(settings))
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.server_error is None and conn.client_error is None
        assert conn.client.getpeercert(binary_form=True) == cert.public_bytes(ser.Encoding.DER)
        assert exchange(conn) == b"pong"
        assert peer_principal(conn.server, "DEFAULT") == ANONYMOUS
    finally:
        conn.close()


def test_pem_on_one_line_as_a_properties_file_continuation_leaves_it(ca, server_pair, client_pair, tmp_path) -> None:
    # Kafka's docs write inline PEM over lines ending in "\\", which the properties file joins with spaces; its
    # PemParser accepts whitespace anywhere in the base64 text, and so does kcoord
    cert, key = server_pair
    settings = {k: v.replace("\n", " ") for k, v in keystore(ca, cert, key, tmp_path, "inline", "pw").items()}
    assert "\n" not in settings["ssl.keystore.key"]
    # quirk (PemParser's greedy ".*" after BEGIN): on one line, a chain of two certificates is read as its last one
    # alone, here the CA's, which is not the key's
    with pytest.raises(TlsConfigError, match="^ssl.keystore.key: the key and certificate chain cannot be loaded"):
        server_context(TlsSettings.from_kafka(settings))
    settings["ssl.keystore.certificate.chain"] = cert.public_bytes(ser.Encoding.PEM).decode().replace("\n", " ")
    settings["ssl.truststore.certificates"] = ca.cert_pem.bytes().decode().replace("\n", " ")
    settings["ssl.client.auth"] = "required"
    ctx = server_context(TlsSettings.from_kafka(settings))
    assert principal_over_tls(ctx, client_context(ca, *client_pair, tmp_path)) == "User:CN=Duke,OU=ServiceUsers,O=Org"


def test_damaged_base64_is_refused(ca, server_pair, tmp_path) -> None:
    cert, key = server_pair
    settings = keystore(ca, cert, key, tmp_path, "inline")
    settings["ssl.keystore.certificate.chain"] = CHAIN.replace("AAAA", "AAA")
    with pytest.raises(TlsConfigError, match="^ssl.keystore.certificate.chain: a PEM entry's base64 text is damaged"):
        server_context(TlsSettings.from_kafka(settings))


def test_a_pkcs1_key_is_refused_as_kafka(ca, tmp_path) -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert, _ = issue(ca, SERVER_NAME, key=rsa_key)
    pkcs1 = rsa_key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.TraditionalOpenSSL, ser.NoEncryption()).decode()
    assert "BEGIN RSA PRIVATE KEY" in pkcs1
    inline = {"ssl.keystore.key": pkcs1, "ssl.keystore.certificate.chain": pem_chain(cert, ca)}
    with pytest.raises(TlsConfigError, match="^ssl.keystore.key: the private key is 'RSA PRIVATE KEY'.*PKCS#8"):
        server_context(TlsSettings.from_kafka(inline))
    path = tmp_path / "ks.pem"
    path.write_text(pkcs1 + pem_chain(cert, ca))
    with pytest.raises(TlsConfigError, match="^ssl.keystore.location: the private key is 'RSA PRIVATE KEY'"):
        server_context(TlsSettings.from_kafka({"ssl.keystore.location": str(path)}))
    # the same RSA key as PKCS#8 serves
    ctx = server_context(TlsSettings.from_kafka({**inline, "ssl.keystore.key": pkcs8(rsa_key)}))
    assert principal_over_tls(ctx, client_context(ca)) == ANONYMOUS


@pytest.mark.parametrize("form", ["location", "inline"])
def test_key_password_mistakes(ca, server_pair, tmp_path, form) -> None:
    cert, key = server_pair
    wrong = {**keystore(ca, cert, key, tmp_path, form, "right"), "ssl.key.password": "wrong"}
    with pytest.raises(TlsConfigError, match="^ssl.key.password: the private key cannot be decrypted"):
        server_context(TlsSettings.from_kafka(wrong))
    missing = keystore(ca, cert, key, tmp_path, form, "right")
    del missing["ssl.key.password"]
    with pytest.raises(TlsConfigError, match="is encrypted, but ssl.key.password is not set"):
        server_context(TlsSettings.from_kafka(missing))
    needless = {**keystore(ca, cert, key, tmp_path, form), "ssl.key.password": "x"}
    with pytest.raises(TlsConfigError, match="^ssl.key.password: is set, but the private key is not encrypted"):
        server_context(TlsSettings.from_kafka(needless))


def test_a_key_that_is_not_the_certificates_is_refused(ca, server_pair, tmp_path) -> None:
    cert, _ = server_pair
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(TlsConfigError, match="^ssl.keystore.key: the key and certificate chain cannot be loaded"):
        server_context(TlsSettings.from_kafka(keystore(ca, cert, other, tmp_path, "inline")))


KEY = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
CHAIN = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/ks"}, "ssl.keystore.type=JKS: kcoord reads PEM"),
        ({"ssl.keystore.location": "/ks", "ssl.truststore.type": "PKCS12"}, "ssl.truststore.type=PKCS12"),
        ({"ssl.keystore.key": KEY}, "ssl.keystore.key: "),
        ({"ssl.keystore.certificate.chain": CHAIN}, "ssl.keystore.certificate.chain: "),
        (
            {"ssl.keystore.key": KEY, "ssl.keystore.certificate.chain": CHAIN, "ssl.keystore.location": "/ks"},
            "ssl.keystore.location: both",
        ),
        (
            {"ssl.keystore.key": KEY, "ssl.keystore.certificate.chain": CHAIN, "ssl.keystore.password": "p"},
            "ssl.keystore.password: ",
        ),
        ({"ssl.keystore.location": "/ks", "ssl.keystore.password": "p"}, "ssl.keystore.password: "),
        ({}, "ssl.keystore.location: a TLS listener needs"),
        (
            {"ssl.keystore.location": "/ks", "ssl.truststore.location": "/ts", "ssl.truststore.certificates": CHAIN},
            "ssl.truststore.location: both",
        ),
        (
            {"ssl.keystore.location": "/ks", "ssl.truststore.location": "/ts", "ssl.truststore.password": "p"},
            "ssl.truststore.password: ",
        ),
        ({"ssl.keystore.location": "/ks", "ssl.client.auth": "always"}, "ssl.client.auth='always'"),
        (
            {"ssl.keystore.location": "/ks", "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"},
            "ssl.enabled.protocols: 'TLSv1.1'",
        ),
        ({"ssl.keystore.location": "/ks", "ssl.enabled.protocols": " , "}, "ssl.enabled.protocols: empty"),
        ({"ssl.keystore.location": "/ks", "ssl.cipher.suites": "TLS_FOO"}, "ssl.cipher.suites: 'TLS_FOO'"),
        (
            {"ssl.keystore.location": "/ks", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
            "ssl.cipher.suites: kcoord cannot enable only some TLS 1.3 suites",
        ),
        (
            {
                "ssl.keystore.location": "/ks",
                "ssl.enabled.protocols": "TLSv1.3",
                "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            },
            "ssl.cipher.suites: none of the suites",
        ),
        ({"ssl.keystore.location": "/ks", "ssl.allow.dn.changes": "yes"}, "ssl.allow.dn.changes='yes'"),
        ({"ssl.keystore.location": "/nonexistent/ks.pem"}, "ssl.keystore.location=/nonexistent/ks.pem: cannot read"),
        ({"ssl.keystore.key": "junk", "ssl.keystore.certificate.chain": CHAIN}, "ssl.keystore.key: no PRIVATE KEY"),
        (
            {"ssl.keystore.key": KEY + KEY, "ssl.keystore.certificate.chain": CHAIN},
            "ssl.keystore.key: expected one private key, but found 2",
        ),
        (
            {"ssl.keystore.key": KEY, "ssl.keystore.certificate.chain": "junk"},
            "ssl.keystore.certificate.chain: no CERT",
        ),
    ],
)
def test_every_config_mistake_is_one_line_naming_the_setting(settings, named) -> None:
    with pytest.raises(TlsConfigError) as e:
        server_context(TlsSettings.from_kafka(settings))
    message = str(e.value)
    assert message.startswith(named), message
    assert "\n" not in message


def test_the_listener_override_wins(ca, server_pair, tmp_path) -> None:
    cert, key = server_pair
    settings = {
        **keystore(ca, cert, key, tmp_path, "inline"),
        "ssl.client.auth": "none",
        "listener.name.external.ssl.client.auth": "required",
        "listener.name.internal.ssl.enabled.protocols": "TLSv1.3",
    }
    assert TlsSettings.from_kafka(settings, "EXTERNAL").client_auth == "required"
    assert TlsSettings.from_kafka(settings, "EXTERNAL").enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert TlsSettings.from_kafka(settings, "INTERNAL").client_auth == "none"
    assert TlsSettings.from_kafka(settings, "INTERNAL").enabled_protocols == ("TLSv1.3",)
    assert TlsSettings.from_kafka(settings).client_auth == "none"
    # the error names the setting as written
    with pytest.raises(TlsConfigError, match="^listener.name.external.ssl.client.auth='sometimes'"):
        TlsSettings.from_kafka({**settings, "listener.name.external.ssl.client.auth": "sometimes"}, "EXTERNAL")


def test_on_sasl_ssl_only_the_listeners_own_client_auth_applies(ca, server_pair, tmp_path) -> None:
    cert, key = server_pair
    settings = {**keystore(ca, cert, key, tmp_path, "inline"), "ssl.client.auth": "required"}
    assert TlsSettings.from_kafka(settings, "SECURE", security_protocol="SASL_SSL").client_auth == "none"
    assert TlsSettings.from_kafka(settings, "SECURE", security_protocol="SSL").client_auth == "required"
    own = {**settings, "listener.name.secure.ssl.client.auth": "requested"}
    assert TlsSettings.from_kafka(own, "SECURE", security_protocol="SASL_SSL").client_auth == "requested"


def test_repr_hides_the_key_and_passwords(ca, server_pair, tmp_path) -> None:
    cert, key = server_pair
    s = TlsSettings.from_kafka(keystore(ca, cert, key, tmp_path, "inline", "hunter2"))
    assert "hunter2" not in repr(s) and "PRIVATE KEY" not in repr(s)
    assert "key_password=<hidden>" in repr(s)


# ------------------------------------------------------------------------------------------------------------------
# Client authentication and the principal


@pytest.fixture(scope="module")
def client_pair(ca):
    subject = name(
        (NameOID.ORGANIZATION_NAME, "Org"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
        (NameOID.COMMON_NAME, "Duke"),
    )
    return issue(ca, subject, sans=(), client=True)


def with_auth(ca, server_pair, tmp_path, auth: str, **extra) -> ssl.SSLContext:
    cert, key = server_pair
    trust = tmp_path / "trust.pem"
    trust.write_text(ca.cert_pem.bytes().decode())
    settings = {
        **keystore(ca, cert, key, tmp_path, "location"),
        "ssl.client.auth": auth,
        "ssl.truststore.location": str(trust),
        **extra,
    }
    return server_context(TlsSettings.from_kafka(settings))


def test_client_auth_none_never_asks_for_the_certificate(ca, server_pair, client_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "none")
    assert ctx.verify_mode == ssl.CERT_NONE
    assert principal_over_tls(ctx, client_context(ca, *client_pair, tmp_path)) == ANONYMOUS


def test_client_auth_requested(ca, server_pair, client_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "requested")
    assert principal_over_tls(ctx, client_context(ca)) == ANONYMOUS
    assert principal_over_tls(ctx, client_context(ca, *client_pair, tmp_path)) == "User:CN=Duke,OU=ServiceUsers,O=Org"


def test_client_auth_required_without_a_certificate_fails_the_handshake(ca, server_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "required")
    conn = connect(ctx, client_context(ca))
    try:
        assert isinstance(conn.server_error, ssl.SSLError)
        assert conn.server is None
        if conn.client is not None:  # TLS 1.3: the client's half ended before the server refused; reads fail
            try:
                data = conn.client.recv(1)
            except (ssl.SSLError, OSError):
                data = b""
            assert data == b""
    finally:
        conn.close()


def test_client_auth_required_with_a_certificate_gives_the_mapped_principal(ca, server_pair, client_pair, tmp_path):
    ctx = with_auth(ca, server_pair, tmp_path, "required")
    client = client_context(ca, *client_pair, tmp_path)
    assert principal_over_tls(ctx, client, KAFKA_RULES) == "User:duke"
    assert principal_over_tls(ctx, client, PrincipalMapper("DEFAULT")) == "User:CN=Duke,OU=ServiceUsers,O=Org"
    with pytest.raises(NoMatchingRule):
        principal_over_tls(ctx, client, "RULE:^CN=(.*?),OU=Admins.*$/$1/")


def test_the_principal_from_an_asyncio_transport(ca, server_pair, client_pair, tmp_path) -> None:
    # how the server meets it: asyncio's transport gives an SSLObject (not an SSLSocket)
    import asyncio

    ctx = with_auth(ca, server_pair, tmp_path, "requested")
    client = client_context(ca, *client_pair, tmp_path)
    mapper = PrincipalMapper(KAFKA_RULES)

    async def main() -> list[str]:
        seen: list[str] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(peer_principal(writer.get_extra_info("ssl_object"), mapper))
            writer.write(b"ok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
        port = server.sockets[0].getsockname()[1]
        async with server:
            for c in (client, client_context(ca)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=c, server_hostname="localhost")
                assert await reader.readexactly(2) == b"ok"
                writer.close()
        return seen

    assert asyncio.run(asyncio.wait_for(main(), 10)) == ["User:duke", ANONYMOUS]


def test_an_untrusted_client_certificate_fails_the_handshake(ca, server_pair, tmp_path) -> None:
    stranger = trustme.CA()
    cert, key = issue(stranger, name((NameOID.COMMON_NAME, "Mallory")), sans=(), client=True)
    ctx = with_auth(ca, server_pair, tmp_path, "requested")
    conn = connect(ctx, client_context(ca, cert, key, tmp_path))
    try:
        assert isinstance(conn.server_error, ssl.SSLError)
    finally:
        conn.close()


def test_the_principal_of_a_certificate_with_a_rich_subject(ca, server_pair, tmp_path) -> None:
    subject = name(
        (NameOID.DOMAIN_COMPONENT, "com"),
        (NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        [(NameOID.COMMON_NAME, "Duke"), (NameOID.USER_ID, "d42")],
        (NameOID.EMAIL_ADDRESS, "d@x.io"),
    )
    cert, key = issue(ca, subject, sans=(), client=True)
    ctx = with_auth(ca, server_pair, tmp_path, "required")
    expected = "User:1.2.840.113549.1.9.1=#16066440782e696f,CN=Duke+UID=d42,O=Acme\\, Inc.,DC=com"
    assert principal_over_tls(ctx, client_context(ca, cert, key, tmp_path)) == expected


# ------------------------------------------------------------------------------------------------------------------
# Protocols and cipher suites


def test_tls12_only(ca, server_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "none", **{"ssl.enabled.protocols": "TLSv1.2"})
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.version() == "TLSv1.2"
    finally:
        conn.close()
    conn = connect(ctx, client_context(ca, minimum_version=ssl.TLSVersion.TLSv1_3))
    try:
        assert conn.server_error is not None and conn.client_error is not None
    finally:
        conn.close()


def test_tls13_only(ca, server_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "none", **{"ssl.enabled.protocols": "TLSv1.3"})
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.version() == "TLSv1.3"
    finally:
        conn.close()
    conn = connect(ctx, client_context(ca, maximum_version=ssl.TLSVersion.TLSv1_2))
    try:
        assert conn.server_error is not None and conn.client_error is not None
    finally:
        conn.close()


def test_both_protocols_by_default(ca, server_pair, tmp_path) -> None:
    ctx = with_auth(ca, server_pair, tmp_path, "none")
    for version, name_ in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
        conn = connect(ctx, client_context(ca, minimum_version=version, maximum_version=version))
        try:
            assert conn.client.version() == name_
        finally:
            conn.close()


def test_cipher_suites_by_their_java_names(ca, server_pair, tmp_path) -> None:
    # only TLS 1.2 suites listed: as in Java, TLS 1.3 (which has none left) is not negotiated
    suites = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_EMPTY_RENEGOTIATION_INFO_SCSV"
    ctx = with_auth(ca, server_pair, tmp_path, "none", **{"ssl.cipher.suites": suites})
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.version() == "TLSv1.2"
        assert conn.client.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    finally:
        conn.close()
    # all three TLS 1.3 suites and one TLS 1.2 suite: both protocols, TLS 1.2 restricted to the one
    all13 = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256"
    ctx = with_auth(
        ca,
        server_pair,
        tmp_path,
        "none",
        **{"ssl.cipher.suites": all13 + ",TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
    )
    conn = connect(ctx, client_context(ca, maximum_version=ssl.TLSVersion.TLSv1_2))
    try:
        assert conn.client.cipher()[0] == "ECDHE-ECDSA-CHACHA20-POLY1305"
    finally:
        conn.close()
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.version() == "TLSv1.3"
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------------------------
# Reload


def test_reload_a_renewed_certificate(ca, tmp_path) -> None:
    first, first_key = issue(ca, SERVER_NAME)
    settings = keystore(ca, first, first_key, tmp_path, "location")
    ctx = server_context(TlsSettings.from_kafka(settings))
    client = client_context(ca)
    before = connect(ctx, client)
    try:
        assert before.client.getpeercert(binary_form=True) == first.public_bytes(ser.Encoding.DER)
        # renewed: a new key and certificate, the same DN and SANs, written over the same file
        renewed, renewed_key = issue(ca, SERVER_NAME)
        assert keystore(ca, renewed, renewed_key, tmp_path, "location") == settings
        reload(ctx, TlsSettings.from_kafka(settings))
        after = connect(ctx, client)
        try:
            assert after.client.getpeercert(binary_form=True) == renewed.public_bytes(ser.Encoding.DER)
            assert exchange(after) == b"pong"
        finally:
            after.close()
        # the connection made before keeps its session and its certificate
        assert exchange(before) == b"pong"
        assert before.client.getpeercert(binary_form=True) == first.public_bytes(ser.Encoding.DER)
    finally:
        before.close()


def test_reload_refuses_a_changed_dn_and_keeps_serving_the_old(ca, tmp_path) -> None:
    first, first_key = issue(ca, SERVER_NAME)
    ctx = server_context(TlsSettings.from_kafka(keystore(ca, first, first_key, tmp_path, "inline")))
    other, other_key = issue(ca, name((NameOID.ORGANIZATION_NAME, "kcoord"), (NameOID.COMMON_NAME, "impostor")))
    changed = keystore(ca, other, other_key, tmp_path, "inline")
    with pytest.raises(TlsConfigError) as e:
        reload(ctx, TlsSettings.from_kafka(changed))
    assert str(e.value) == (
        "ssl.keystore.key: the new certificate's subject DN 'CN=impostor,O=kcoord' differs from the current "
        "'CN=broker,O=kcoord' (set ssl.allow.dn.changes=true to allow it)"
    )
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.getpeercert(binary_form=True) == first.public_bytes(ser.Encoding.DER)
    finally:
        conn.close()
    reload(ctx, TlsSettings.from_kafka({**changed, "ssl.allow.dn.changes": "true"}))
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.getpeercert(binary_form=True) == other.public_bytes(ser.Encoding.DER)
    finally:
        conn.close()


def test_reload_refuses_changed_sans_unless_allowed(ca, tmp_path) -> None:
    first, first_key = issue(ca, SERVER_NAME, sans=("localhost",))
    ctx = server_context(TlsSettings.from_kafka(keystore(ca, first, first_key, tmp_path, "inline")))
    more, more_key = issue(ca, SERVER_NAME, sans=("localhost", "broker.example"))
    changed = keystore(ca, more, more_key, tmp_path, "inline")
    with pytest.raises(TlsConfigError, match="^ssl.keystore.key: the new certificate's subject alternative names"):
        reload(ctx, TlsSettings.from_kafka(changed))
    reload(ctx, TlsSettings.from_kafka({**changed, "ssl.allow.san.changes": "true"}))
    conn = connect(ctx, client_context(ca))
    try:
        assert conn.client.getpeercert(binary_form=True) == more.public_bytes(ser.Encoding.DER)
    finally:
        conn.close()


def test_reload_refuses_a_broken_keystore_and_keeps_the_old(ca, tmp_path) -> None:
    first, first_key = issue(ca, SERVER_NAME)
    settings = keystore(ca, first, first_key, tmp_path, "inline", "pw")
    ctx = server_context(TlsSettings.from_kafka(settings))
    with pytest.raises(TlsConfigError, match="^ssl.key.password: the private key cannot be decrypted"):
        reload(ctx, TlsSettings.from_kafka({**settings, "ssl.key.password": "nope"}))
    assert principal_over_tls(ctx, client_context(ca)) == ANONYMOUS
