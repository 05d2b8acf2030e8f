"""The client side of kcoord. This module: a small blocking Kafka client over kcoord's own codec, for the CLI and
for tests that need exact frames (JoinGroup v8/v9, LeaveGroup v5) the common clients never send. Beside it:
`worker.py`, the connect groups' worker client (asyncio), and `worker_assignor.py`, the assignor it runs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

from .. import errors as E
from .. import wire
from ..security.scram import HASHES, MECHANISMS, MIN_ITERATIONS, salted_password, saslname


class KafkaError(Exception):
    pass


class Unreachable(KafkaError):
    """No address of a bootstrap list answered; the message names each and why."""


def bootstrap_list(text: str) -> list[str]:
    """The addresses of a bootstrap list as Kafka's bootstrap.servers reads it: HOST:PORT entries separated by
    commas, blanks around them ignored."""
    return [a.strip() for a in text.split(",") if a.strip()]


def encode_request_at(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body) -> bytes:
    """A request frame whose header carries `api_key` rather than the body's own: kcoord's private APIs (connect
    groups) when a server has moved them (group.connect.api.key.base). The codec encodes at the body's key."""
    frame = wire.encode_request(type(body).API_KEY, api_version, correlation_id, client_id, body)
    if api_key == type(body).API_KEY:
        return frame
    return frame[:4] + api_key.to_bytes(2, "big", signed=True) + frame[6:]


class AuthenticationFailed(KafkaError):
    """The server refused the client's credentials (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...),
    or the client refused the server's proof. Kafka's clients give up on these rather than retry."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{E.name(code)} ({code}): {message}")
        self.code = code


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ClientSecurity:
    """How a client authenticates: Kafka's client settings (librdkafka's names, snake-cased): security.protocol,
    sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location,
    ssl.key.password, ssl.endpoint.identification.algorithm ("https": the server's certificate must name the host
    connected to, librdkafka's default; "none": it need not). PEM files only. The password never shows in repr()."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"  # librdkafka's default is GSSAPI, which kcoord does not serve
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None  # None: the system's trusted CAs
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol={self.security_protocol!r}: expected one of "
                             f"{', '.join(SECURITY_PROTOCOLS)}")
        object.__setattr__(self, "security_protocol", protocol)
        if self.sasl and self.sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl.mechanism={self.sasl_mechanism!r}: expected one of {', '.join(SASL_MECHANISMS)}")
        if self.sasl and (self.sasl_username is None or self.sasl_password is None):
            raise ValueError(f"security.protocol={protocol} needs sasl.username and sasl.password")
        if self.ssl_endpoint_identification_algorithm not in ("https", "none"):
            raise ValueError(f"ssl.endpoint.identification.algorithm={self.ssl_endpoint_identification_algorithm!r}:"
                             " expected https or none")
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise ValueError("ssl.certificate.location and ssl.key.location go together")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for the connection (None without TLS); OSError/ssl.SSLError for a file it cannot use."""
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=self.ssl_ca_location)
        ctx.check_hostname = self.ssl_endpoint_identification_algorithm == "https"
        if self.ssl_certificate_location is not None:
            ctx.load_cert_chain(self.ssl_certificate_location, self.ssl_key_location, self.ssl_key_password)
        return ctx

    def sasl_client(self) -> SaslClient:
        assert self.sasl_username is not None and self.sasl_password is not None
        return SaslClient(self.sasl_mechanism, self.sasl_username, self.sasl_password)


PLAINTEXT = ClientSecurity()


class ClientConfigError(ValueError):
    """A client setting kcoord's tools cannot use: one line naming the setting (never its secret value)."""


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_JAAS_MODULES = {"org.apache.kafka.common.security.plain.PlainLoginModule",
                 "org.apache.kafka.common.security.scram.ScramLoginModule"}
# Kafka client settings kcoord's tools read; the Java clients' names and librdkafka's
_SECURITY_SETTINGS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username", "sasl.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.endpoint.identification.algorithm",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.enabled.protocols", "ssl.protocol"})


def security_from_properties(props: dict[str, str]) -> tuple[ClientSecurity, list[str]]:
    """The ClientSecurity of a Kafka client configuration (what `--command-config` gives Kafka's tools), in the
    Java clients' names (sasl.jaas.config with PlainLoginModule or ScramLoginModule, PEM key and trust stores) or
    librdkafka's (sasl.username, ssl.ca.location, ...); and the settings it leaves aside (client.id, timeouts:
    nothing kcoord's tools use). ClientConfigError names a setting that is wrong or not supported, never a
    secret's value. Security settings kcoord does not know are refused, not ignored: a client must not connect
    less securely than its file says."""
    unknown = sorted(k for k in props if k.startswith(("ssl.", "sasl.", "security.")) and k not in _SECURITY_SETTINGS)
    if unknown:
        raise ClientConfigError(f"{unknown[0]}: not a client security setting kcoord's tools know")
    for store in ("truststore", "keystore"):
        kind = props.get(f"ssl.{store}.type", "PEM" if f"ssl.{store}.location" in props else "")
        if kind and kind.upper() != "PEM":
            raise ClientConfigError(f"ssl.{store}.type={kind}: kcoord's tools read PEM files only "
                                    f"(ssl.{store}.type=PEM)")
    for name in ("ssl.keystore.password", "ssl.truststore.password"):
        if props.get(name):
            raise ClientConfigError(f"{name}: a PEM store has no password (ssl.key.password is the key's)")
    user, password = props.get("sasl.username"), props.get("sasl.password")
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        module = jaas.split(None, 1)[0] if jaas.strip() else ""
        if module not in _JAAS_MODULES:
            raise ClientConfigError("sasl.jaas.config: expected PlainLoginModule or ScramLoginModule "
                                    "(org.apache.kafka.common.security.{plain,scram}.*)")
        options = {m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)) for m in
                   _JAAS_OPTION.finditer(jaas)}
        if "username" not in options or "password" not in options:
            raise ClientConfigError("sasl.jaas.config: needs username=\"...\" and password=\"...\"")
        unquote = re.compile(r"\\(.)")
        user, password = (unquote.sub(r"\1", options["username"]), unquote.sub(r"\1", options["password"]))
    keystore = props.get("ssl.keystore.location")
    verify = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() or "none"
    try:
        security = ClientSecurity(
            security_protocol=props.get("security.protocol", "PLAINTEXT"),
            sasl_mechanism=props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).upper(),
            sasl_username=user, sasl_password=password,
            ssl_ca_location=props.get("ssl.truststore.location", props.get("ssl.ca.location")),
            ssl_certificate_location=keystore or props.get("ssl.certificate.location"),
            ssl_key_location=keystore or props.get("ssl.key.location"),
            ssl_key_password=props.get("ssl.key.password"),
            ssl_endpoint_identification_algorithm=verify)
    except ValueError as e:
        raise ClientConfigError(str(e)) from None
    ignored = sorted(k for k in props if k not in _SECURITY_SETTINGS)
    return security, ignored


class SaslClient:
    """The client side of SASL/PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, as Kafka's ScramSaslClient: no
    channel binding, the server nonce must extend the client's, at least 4,096 iterations, the server's signature
    checked). No I/O: `first()` is the first token, `respond(challenge)` the next one (None once complete)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {mechanism!r}")
        self.mechanism, self.username, self.password = mechanism, username, password
        self.nonce = nonce or secrets.token_urlsafe(24)
        self.complete = False
        self._state = "first"
        self._server_signature = b""

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            self._state = "done"
            return f"\0{self.username}\0{self.password}".encode()
        self._client_first_bare = f"n={saslname(self.username)},r={self.nonce}"
        self._state = "server-first"
        return f"n,,{self._client_first_bare}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to the server's token; None when the exchange is complete. AuthenticationFailed when the
        server's token is not what SCRAM expects (a wrong nonce, too few iterations, a wrong signature)."""
        if self._state == "done":
            self.complete = True
            return None
        text = bytes(challenge).decode("utf-8", "replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if self._state == "server-first":
            mech = MECHANISMS[self.mechanism]
            nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
            if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
                raise AuthenticationFailed(E.SASL_AUTHENTICATION_FAILED, "invalid server nonce")
            if not iterations.isdigit() or int(iterations) < MIN_ITERATIONS:
                raise AuthenticationFailed(E.SASL_AUTHENTICATION_FAILED, f"requested iterations {iterations!r} "
                                           f"below the minimum {MIN_ITERATIONS}")
            h = HASHES[mech]
            salted = salted_password(mech, self.password, base64.b64decode(salt), int(iterations))
            final_bare = f"c=biws,r={nonce}"
            auth_message = f"{self._client_first_bare},{text},{final_bare}".encode()
            client_key = hmac.digest(salted, b"Client Key", h)
            signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
            proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
            self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", h), auth_message, h)
            self._state = "server-final"
            return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()
        if "e" in attrs:
            raise AuthenticationFailed(E.SASL_AUTHENTICATION_FAILED, f"the server says {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), self._server_signature):
            raise AuthenticationFailed(E.SASL_AUTHENTICATION_FAILED, "invalid server signature")
        self._state = "done"
        self.complete = True
        return None


class SaslExchange:
    """SaslHandshake v1 then SaslAuthenticate v1 until complete, as requests (body, version) and their answers,
    for any transport: `requests()` yields each request and is sent each response. Ends with the session
    lifetime in ms (0: none); AuthenticationFailed when the server refuses."""

    def __init__(self, security: ClientSecurity) -> None:
        self.security = security

    def requests(self):
        sasl = self.security.sasl_client()
        resp = yield wire.SaslHandshakeRequest(mechanism=sasl.mechanism), 1
        if resp.error_code:
            raise AuthenticationFailed(resp.error_code, f"the server enables {', '.join(resp.mechanisms)}, not "
                                                        f"{sasl.mechanism}")
        token: bytes | None = sasl.first()
        while True:
            resp = yield wire.SaslAuthenticateRequest(auth_bytes=token), 1
            if resp.error_code:
                raise AuthenticationFailed(resp.error_code, resp.error_message or "no message")
            token = sasl.respond(resp.auth_bytes)
            if token is None:
                return resp.session_lifetime_ms


class Client:
    def __init__(self, bootstrap: str, client_id: str = "kcoord-cli", timeout: float = 10.0,
                 security: ClientSecurity = PLAINTEXT) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not port.isdigit():
            raise KafkaError(f"bootstrap {bootstrap!r} is not HOST:PORT")
        self.sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
        self.address = bootstrap
        self.client_id = client_id
        self.correlation_id = 0
        self.session_expires: float | None = None  # time.monotonic() when a SASL session with a lifetime ends
        try:
            ctx = security.ssl_context()
            if ctx is not None:
                self.sock = ctx.wrap_socket(self.sock, server_hostname=host or "127.0.0.1")
            if security.sasl:
                exchange = SaslExchange(security).requests()
                body, version = next(exchange)
                while True:
                    try:
                        body, version = exchange.send(self.call(type(body).API_KEY, version, body))
                    except StopIteration as done:
                        if done.value:
                            self.session_expires = time.monotonic() + done.value / 1000
                        break
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api_key: int, version: int, body) -> int:
        self.correlation_id += 1
        self.sock.sendall(wire.encode_request(api_key, version, self.correlation_id, self.client_id, body))
        return self.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int):
        (size,) = struct.unpack(">i", self._exact(4))
        corr, body = wire.decode_response(api_key, version, self._exact(size))
        if corr != correlation_id:
            raise KafkaError(f"expected the answer to request {correlation_id}, got {corr}")
        return body

    def call(self, api_key: int, version: int, body):
        return self.receive(api_key, version, self.send(api_key, version, body))

    def request(self, body, version: int, api_key: int | None = None):
        """Send a request message and return its response. The API key is the message's, unless the server serves
        it at another (`api_key`: kcoord's moved private block)."""
        if api_key is None:
            return self.call(type(body).API_KEY, version, body)
        self.correlation_id += 1
        self.sock.sendall(encode_request_at(api_key, version, self.correlation_id, self.client_id, body))
        return self.receive(type(body).API_KEY, version, self.correlation_id)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise KafkaError("the server closed the connection")
            buf += chunk
        return bytes(buf)


def connect_first(bootstrap: str, client_id: str = "kcoord-cli", timeout: float = 10.0,
                  security: ClientSecurity = PLAINTEXT) -> Client:
    """A client of the first address of `bootstrap` (one HOST:PORT or a comma-separated list) that answers, tried in
    turn as Kafka's clients try bootstrap.servers. With several, an address answers when it takes the connection and
    answers ApiVersions (the request a Kafka client opens each connection with), so a node that is gone (refused)
    or hung (no answer within `timeout`) is passed over. Unreachable, naming each address and why, when none does."""
    addresses = bootstrap_list(bootstrap)
    if not addresses:
        raise Unreachable(f"{bootstrap!r} names no HOST:PORT")
    failed: list[str] = []
    for address in addresses:
        try:
            client = Client(address, client_id, timeout, security)
        except OSError as e:
            failed.append(f"{address}: {e.strerror or e}")
            continue
        if len(addresses) == 1:
            return client
        try:
            client.request(wire.ApiVersionsRequest(), 0)
        except (OSError, KafkaError) as e:
            client.close()
            failed.append(f"{address}: {getattr(e, 'strerror', None) or e}")
            continue
        return client
    if len(failed) == 1:
        raise Unreachable(f"cannot connect to {failed[0]}")
    raise Unreachable(f"cannot connect to any of {len(failed)} addresses: {'; '.join(failed)}")
