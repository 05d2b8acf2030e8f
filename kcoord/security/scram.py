"""SCRAM (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks it, and the credentials it checks.

A credential is what Kafka stores (KRaft's UserScramCredentialRecord): salt, StoredKey, ServerKey and iterations;
never the password nor the SaltedPassword."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# Kafka's mechanism names and their wire types (ScramMechanism: SCRAM_SHA_256 = 1, SCRAM_SHA_512 = 2)
MECHANISMS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES: dict[int, str] = {v: k for k, v in MECHANISMS.items()}
HASHES: dict[int, str] = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # ScramMechanism.maxIterations


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC over the password's UTF-8 bytes (no SASLprep, as
    Kafka's ScramFormatter)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: int, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential from a SaltedPassword (what AlterUserScramCredentials carries; Kafka's
    ScramControlManager.finishUpsertion)."""
    h = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), hmac.digest(salted, b"Server Key", h),
                           iterations)


def credential(mechanism: int, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a password."""
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


# --- the server side of the exchange (ScramSaslServer), pure: no I/O, no shared mutable state ---------------------

GENERIC_FAILURE = "Authentication failed during {} due to invalid credentials with SASL mechanism {}"


class SaslFailure(Exception):
    """An exchange that failed. `message` is the mechanism's own text: told to the client verbatim when
    `client_visible` (Kafka's SaslAuthenticationException), else only logged, the client being told the generic
    text of `client_message` (Kafka's SaslException, so that a user's existence is not leaked). It never holds a
    password, a proof or any of the token's bytes."""

    def __init__(self, message: str, client_visible: bool):
        super().__init__(message)
        self.message = message
        self.client_visible = client_visible


def client_message(failure: SaslFailure, mechanism: str, reauthentication: bool = False) -> str:
    """What SaslAuthenticate's ErrorMessage says for a failure (SaslServerAuthenticator.handleSaslToken)."""
    if failure.client_visible:
        return failure.message
    return GENERIC_FAILURE.format("re-authentication" if reauthentication else "authentication", mechanism)


class Mechanism(Protocol):
    """One exchange, for one connection; its `step` is never called by two threads at once."""

    name: str  # "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
    complete: bool  # True once the exchange has succeeded
    principal_name: str | None  # the authenticated user name once complete
    needs_derivation: bool  # True: `step` runs PBKDF2 (PLAIN), call it off the event loop
    offload: bool  # the same (the name kcoord.server asks for)

    def step(self, token: bytes) -> bytes:
        """The next server token; raises SaslFailure."""
        ...


Lookup = Callable[[str, int], "ScramCredential | None"]

# ScramMessages' grammar, over ASCII only (Java's classes are [\x01-\x7F] less some; a non-ASCII byte fails them)
_VALUE = r"[\x01-\x2b\x2d-\x7f]++"  # any but NUL and ","
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]++"  # printable but ","
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]++|=2C|=3D)++"  # "," and "=" only as =2C and =3D
_B64 = r"(?:[a-zA-Z0-9/+]{4})*+(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?+"
_EXTENSIONS = rf"(?:,[A-Za-z]++={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})")


MAX_SCRAM_MESSAGE = 16384  # kcoord's own bound on a client message (Kafka has none; real ones are a few hundred
# bytes): parsing is linear but the step runs on the event loop, and a 1 MiB one took 0.1-0.6 s to refuse


def username(saslname: str) -> str:
    """A saslname unescaped: =2C is ",", then =3D is "=" (ScramFormatter.username, in its order; the grammar has
    already refused any other "=")."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def saslname(user: str) -> str:
    """A user name escaped for a client-first message (ScramFormatter.saslName)."""
    return user.replace("=", "=3D").replace(",", "=2C")


def server_nonce() -> str:
    """130 random bits in base 36, as ScramFormatter.secureRandomString (BigInteger(130, random).toString(36))."""
    n = secrets.randbits(130)
    digits = []
    while True:
        n, d = divmod(n, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[d])
        if not n:
            return "".join(reversed(digits))


def _ascii(token: bytes) -> str | None:
    try:
        return bytes(token).decode("ascii")
    except UnicodeDecodeError:
        return None


class ScramMechanism:
    """The server of one SCRAM exchange (ScramSaslServer.evaluateResponse): client-first -> server-first,
    client-final -> server-final. Only HMACs and hashes: cheap enough for the event loop.

    Where it differs from Kafka's: the AuthMessage is made of the bytes received (client-first-bare with its
    extensions and `m=` as sent, client-final-without-proof with its extensions), as RFC 5802 says, where Kafka
    re-serialises them (the same bytes unless a client sends `m=`, two extensions or a final-message extension);
    the client-final nonce must equal the combined nonce (Kafka's only checks that it ends with it); an `a=` authzid
    is unescaped before it is compared with the user name; `tokenauth=true` is refused (no delegation tokens); a
    message above MAX_SCRAM_MESSAGE bytes is refused."""

    needs_derivation = offload = False

    def __init__(self, name: str, lookup: Lookup, nonce: Callable[[], str] | None = None):
        self.name = name
        self.mechanism_type = MECHANISMS[name]
        self._hash = HASHES[self.mechanism_type]
        self._lookup = lookup
        self._nonce = nonce or server_nonce
        self.complete = False
        self.principal_name: str | None = None
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._credential: ScramCredential | None = None
        self._user = ""
        self._client_first_bare = b""
        self._server_first = b""
        self._combined_nonce = ""

    def step(self, token: bytes) -> bytes:
        try:
            if len(token) > MAX_SCRAM_MESSAGE and self._state != "COMPLETE":
                raise SaslFailure(f"SCRAM message of {len(token)} bytes, above kcoord's {MAX_SCRAM_MESSAGE}", False)
            if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._client_first(token)
            if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
                return self._client_final(token)
            raise SaslFailure(f"Unexpected challenge in Sasl server state {self._state}", False)
        except SaslFailure:
            self._state, self.complete = "FAILED", False  # a step after completion fails it too, as Kafka's
            self._clear()
            raise

    def _clear(self) -> None:
        self._credential = None
        self._client_first_bare = self._server_first = b""

    def _client_first(self, token: bytes) -> bytes:
        text = _ascii(token)
        m = _CLIENT_FIRST.fullmatch(text) if text is not None else None
        if m is None:
            raise SaslFailure("Invalid SCRAM client first message format", False)
        for extension in m.group("extensions").split(",")[1:]:
            key, _, value = extension.partition("=")
            if key == "tokenauth" and value.lower() == "true":
                raise SaslFailure("Token authentication failed: delegation tokens are not supported", False)
        user = username(m.group("saslname"))
        try:
            stored = self._lookup(user, self.mechanism_type)
        except Exception as e:
            raise SaslFailure("Authentication failed: Credentials could not be obtained", False) from e
        if stored is None:
            raise SaslFailure("Authentication failed: Invalid user credentials", False)
        authzid = m.group("authzid")
        if authzid is not None and username(authzid) != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from "
                              "username", True)
        if stored.iterations < MIN_ITERATIONS:
            raise SaslFailure(f"Iterations {stored.iterations} is less than the minimum {MIN_ITERATIONS} for "
                              f"{self.name}", False)
        self._combined_nonce = m.group("nonce") + self._nonce()
        self._server_first = (f"r={self._combined_nonce},s={base64.b64encode(stored.salt).decode()},"
                              f"i={stored.iterations}").encode()
        self._credential, self._user = stored, user
        self._client_first_bare = m.group("bare").encode()
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first

    def _client_final(self, token: bytes) -> bytes:
        text = _ascii(token)
        m = _CLIENT_FINAL.fullmatch(text) if text is not None else None
        if m is None:
            raise SaslFailure("Invalid SCRAM client final message format", False)
        if m.group("nonce") != self._combined_nonce:
            raise SaslFailure("Invalid client nonce in the final client message.", False)
        stored = self._credential
        assert stored is not None
        auth_message = b",".join((self._client_first_bare, self._server_first, m.group("without_proof").encode()))
        proof = base64.b64decode(m.group("proof"))
        client_signature = hmac.digest(stored.stored_key, auth_message, self._hash)
        if len(proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials", False)
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), stored.stored_key):
            raise SaslFailure("Invalid client credentials", False)
        server_signature = hmac.digest(stored.server_key, auth_message, self._hash)
        self._state, self.complete, self.principal_name = "COMPLETE", True, self._user
        self._clear()
        return b"v=" + base64.b64encode(server_signature)
