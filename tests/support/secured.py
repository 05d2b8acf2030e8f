"""A `kcoord serve` with TLS and SASL listeners for the tests of real clients over them (issue 31): certificates made
by trustme at test time (a CA, the server's, clients'; another CA nobody trusts), written to a temporary directory as
PEM files, and SCRAM users added through AlterUserScramCredentials on a PLAINTEXT listener."""

from __future__ import annotations

import secrets
import socket
import struct
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization as ser

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.security.scram import MECHANISMS, salted_password

from .servers import Server, free_port, recv_exact, serve

SERVER_DN = {"common_name": "broker", "organization_name": "kcoord", "organization_unit_name": "brokers"}


def pkcs8(key, password: str | None = None) -> str:
    """A private key as PKCS#8 PEM, encrypted with `password` when one is given."""
    encryption = ser.BestAvailableEncryption(password.encode()) if password else ser.NoEncryption()
    return key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, encryption).decode()


def serial(pem: bytes | str) -> int:
    """The serial number of the first certificate in a PEM text."""
    return x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem).serial_number


class Pki:
    """A CA the server and clients trust, another one nobody trusts, and PEM files under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA(organization_name="kcoord tests")
        self.other_ca = trustme.CA(organization_name="someone else")
        self.ca_file = root / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.other_ca_file = root / "other-ca.pem"
        self.other_ca.cert_pem.write_to_path(str(self.other_ca_file))
        self.keystore = root / "server-keystore.pem"  # ssl.keystore.location: the PKCS#8 key, then the chain
        self.server_serial = self.write_server_keystore()

    def write_server_keystore(self, **dn: str) -> int:
        """(Re)issue the server's certificate for 127.0.0.1 and localhost, with a new key, into `keystore`; its
        serial. `dn`: trustme's common_name/organization_name/organization_unit_name (default SERVER_DN)."""
        leaf = self.ca.issue_cert("127.0.0.1", "localhost", **(dn or SERVER_DN))
        key = ser.load_pem_private_key(leaf.private_key_pem.bytes(), None)
        chain = "".join(p.bytes().decode() for p in leaf.cert_chain_pems)
        tmp = self.keystore.with_suffix(".tmp")
        tmp.write_text(pkcs8(key) + chain)
        tmp.replace(self.keystore)  # whole, never half-written, when the server reads it
        self.server_serial = serial(chain)
        return self.server_serial

    def client_cert(self, name: str, *, common_name: str, unit: str = "Payments", other_ca: bool = False) -> tuple[str, str]:
        """A client certificate (DN CN=<common_name>,OU=<unit>,O=Example) signed by the CA, or by the other CA;
        the paths of its certificate and its (PKCS#8) key."""
        ca = self.other_ca if other_ca else self.ca
        leaf = ca.issue_cert(f"{name}@example.com", common_name=common_name, organization_name="Example",
                             organization_unit_name=unit)
        cert, key = self.root / f"{name}.crt", self.root / f"{name}.key"
        cert.write_text("".join(p.bytes().decode() for p in leaf.cert_chain_pems))
        key.write_text(pkcs8(ser.load_pem_private_key(leaf.private_key_pem.bytes(), None)))
        return str(cert), str(key)


def secured_server(root: Path, pki: Pki, *settings: str, topic: str | None = None) -> Server:
    """`kcoord serve` with listeners INTERNAL (PLAINTEXT, `bootstrap`), SSL (client certificates required: `ssl`)
    and SASL (SASL_SSL, PLAIN and both SCRAMs: `sasl_ssl`), each at 127.0.0.1; `settings` are more --set values."""
    internal, tls, sasl = free_port(), free_port(), free_port()
    args = ["--set", "group.initial.rebalance.delay.ms=0",
            "--set", f"listeners=INTERNAL://127.0.0.1:{internal},SSL://127.0.0.1:{tls},SASL://127.0.0.1:{sasl}",
            "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,SSL:SSL,SASL:SASL_SSL",
            "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "--set", f"ssl.keystore.location={pki.keystore}",
            "--set", f"ssl.truststore.location={pki.ca_file}",
            "--set", "listener.name.ssl.ssl.client.auth=required"]
    if topic is not None:
        args += ["--topic", topic]
    for s in settings:
        args += ["--set", s]
    srv = serve(internal, root / "server.log", *args)
    srv.ssl, srv.sasl_ssl = f"127.0.0.1:{tls}", f"127.0.0.1:{sasl}"
    srv.tls_port, srv.sasl_port = tls, sasl
    return srv


def add_users(bootstrap: str, users: dict[str, tuple[str, str]]) -> None:
    """SCRAM credentials through AlterUserScramCredentials: {user: (mechanism, password)}, 4096 iterations."""
    with Client(bootstrap) as c:
        for name, (mech, password) in users.items():
            salt = secrets.token_bytes(16)
            resp = c.call(51, 0, wire.AlterUserScramCredentialsRequest(deletions=[], upsertions=[
                wire.AlterUserScramCredentialsRequestScramCredentialUpsertion(
                    name=name, mechanism=MECHANISMS[mech], iterations=4096, salt=salt,
                    salted_password=salted_password(MECHANISMS[mech], password, salt, 4096))]))
            assert [r.error_code for r in resp.results] == [E.NONE]


def stop(srv: Server) -> str:
    """Stop the server (SIGTERM); its whole log."""
    srv.proc.terminate()
    srv.proc.wait(30)
    return srv.log.read_text(errors="replace")


def groups(srv: Server) -> set[str]:
    """The ids of the groups a (secured) server has, by ListGroups."""
    with Client(srv.bootstrap) as c:
        return {g.group_id for g in c.call(16, 4, wire.ListGroupsRequest(states_filter=[])).groups}


# ---- a SASL listener spoken to by hand: one request on a socket, a closed connection, a user, a PLAIN login ----

def call(sock: socket.socket, key: int, version: int, body, corr: int = 1):
    sock.sendall(wire.encode_request(key, version, corr, "t", body))
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    got, resp = wire.decode_response(key, version, recv_exact(sock, size))
    assert got == corr
    return resp


def closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def add_user(srv, name: str, password: str) -> None:
    add_users(f"127.0.0.1:{srv.listeners[0].port}", {name: ("SCRAM-SHA-512", password)})


def plain_login(s: socket.socket, user: str, password: str, corr: int = 1):
    assert call(s, 17, 1, wire.SaslHandshakeRequest(mechanism="PLAIN"), corr).error_code == E.NONE
    return call(s, 36, 2, wire.SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), corr + 1)
