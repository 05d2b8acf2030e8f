"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer speaks it, checked against the stored SCRAM credentials (kcoord
keeps one user list for both mechanisms, where Kafka's PLAIN reads JAAS `user_<name>` options), and
`new_mechanism`, the server's one way to start an exchange of any enabled mechanism."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    Lookup,
    Mechanism,
    SaslFailure,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
    salted_password,
)

__all__ = ["PlainMechanism", "SaslFailure", "new_mechanism", "plain_needs_derivation"]

plain_needs_derivation = True  # PLAIN's step runs PBKDF2 (4096+ iterations): call it off the event loop
PREFERENCE = (MECHANISMS["SCRAM-SHA-512"], MECHANISMS["SCRAM-SHA-256"])  # the stored credential a password is
# checked against, when a user has both


@dataclass(frozen=True)
class PlainAttempt:
    """A parsed PLAIN token and the credential it is to be checked against (None: no such user); what `verify`
    needs, and nothing shared."""

    authzid: str
    user: str
    password: str
    mechanism_type: int
    credential: ScramCredential | None
    utf8: bool


class PlainMechanism:
    """The server of one PLAIN exchange. `step(token)` is `verify(prepare(token))`: `prepare` parses and calls
    `lookup` (cheap; on the event loop if lookup must be), `verify` derives SaltedPassword with PBKDF2 (4096+
    iterations, releases the GIL; on a worker thread). Neither touches state beyond this object, and every failure
    is told to the client verbatim, as Kafka's."""

    name = "PLAIN"
    needs_derivation = offload = plain_needs_derivation

    def __init__(self, lookup: Lookup):
        self._lookup = lookup
        self.complete = False
        self.principal_name: str | None = None
        self._used = False

    def step(self, token: bytes) -> bytes:
        return self.verify(self.prepare(token))

    def prepare(self, token: bytes) -> PlainAttempt:
        if self._used:
            self.complete = False
            raise SaslFailure("Unexpected challenge in Sasl server state "
                              + ("COMPLETE" if self.principal_name is not None else "FAILED"), False)
        self._used = True
        try:
            return self._prepare(bytes(token))
        except SaslFailure:
            self.complete = False
            raise

    def _prepare(self, token: bytes) -> PlainAttempt:
        try:
            text, utf8 = token.decode("utf-8"), True
        except UnicodeDecodeError:  # Java decodes with U+FFFD for bad bytes; such a name or password matches none
            text, utf8 = token.decode("utf-8", "replace"), False
        parts = text.split("\0", 3)  # PlainSaslServer.extractTokens: at most 4 parts
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}", True)
        authzid, user, password = parts
        if not user:
            raise SaslFailure("Authentication failed: username not specified", True)
        if not password:
            raise SaslFailure("Authentication failed: password not specified", True)
        found: ScramCredential | None = None
        mechanism_type = PREFERENCE[0]
        try:
            if utf8:
                for mechanism_type in PREFERENCE:
                    found = self._lookup(user, mechanism_type)
                    if found is not None:
                        break
        except Exception as e:
            raise SaslFailure("Authentication failed: credentials for user could not be verified", True) from e
        if found is not None and not MIN_ITERATIONS <= found.iterations <= MAX_ITERATIONS:
            # a stored credential outside Kafka's bounds (the store refuses them): weak, or a PBKDF2 without end
            raise SaslFailure("Authentication failed: credentials for user could not be verified", True)
        return PlainAttempt(authzid, user, password, mechanism_type, found, utf8)

    def verify(self, attempt: PlainAttempt) -> bytes:
        try:
            stored = attempt.credential
            if stored is None or not _matches(attempt.mechanism_type, attempt.password, stored):
                raise SaslFailure("Authentication failed: Invalid username or password", True)
            if attempt.authzid and attempt.authzid != attempt.user:
                raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                                  "from username", True)
        except SaslFailure:
            self.complete = False
            raise
        self.complete, self.principal_name = True, attempt.user
        return b""


def _matches(mechanism_type: int, password: str, stored: ScramCredential) -> bool:
    salted = salted_password(mechanism_type, password, stored.salt, stored.iterations)
    derived = credential_from_salted(mechanism_type, salted, stored.salt, stored.iterations)
    return hmac.compare_digest(derived.stored_key, stored.stored_key)


def new_mechanism(name: str, lookup: Lookup, nonce: Callable[[], str] | None = None) -> Mechanism:
    """The server side of one exchange of `name` ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"); `lookup(user,
    mechanism_type)` gives the stored credential or None; `nonce` makes SCRAM's server nonce (tests only)."""
    if name == PlainMechanism.name:
        return PlainMechanism(lookup)
    if name in MECHANISMS:
        return ScramMechanism(name, lookup, nonce)
    raise ValueError(f"unknown SASL mechanism {name!r}")
