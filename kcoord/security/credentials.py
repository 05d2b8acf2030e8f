"""The SCRAM credentials kcoord keeps, and KIP-554's admin APIs over them: DescribeUserScramCredentials (key 50) and
AlterUserScramCredentials (key 51), with the semantics of Kafka's KRaft controller and metadata image
(`ScramControlManager.alterCredentials`, `ScramImage.describe`).

A credential is what Kafka stores (UserScramCredentialRecord): salt, StoredKey, ServerKey and iterations, by user
and mechanism; never a password nor a SaltedPassword. Each accepted change is staged in the store as a
`KCOORD_SCRAM_CREDENTIAL` record (kcoord.records) before the response that confirms it leaves, and the table is
rebuilt from those records on load (`replay`). Salts and keys are never returned by an API nor written to a log.

Who may call these APIs (Kafka: CLUSTER DESCRIBE for key 50, CLUSTER ALTER for key 51) is checked before they run,
by kcoord.security.gates, when an authorizer is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from .. import errors as E
from .. import records as R
from .. import wire
from .scram import MAX_ITERATIONS, MECHANISM_NAMES, MECHANISMS, MIN_ITERATIONS, ScramCredential, credential_from_salted

log = logging.getLogger("kcoord.security")

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

# Kafka's messages (ScramImage, ScramControlManager), word for word
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
EMPTY_USERNAME = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
# A record key holds the name with a uint16 length; Kafka's strings are at most 32767 bytes (Short.MAX_VALUE)
MAX_NAME_BYTES = 0x7FFF

Error = tuple[int, str | None]


class Credentials:
    """SCRAM credentials by user, then by mechanism type (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)."""

    def __init__(self, store) -> None:
        self.store = store  # a GroupStore or NullStore: `persistent` and `stage(key, value-or-None)`
        self.by_user: dict[str, dict[int, ScramCredential]] = {}
        self.handlers: dict[int, Callable[..., wire.Message]] = {DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe,
                         ALTER_USER_SCRAM_CREDENTIALS: self.alter}

    def lookup(self, user: str, mechanism: int | str) -> ScramCredential | None:
        """The credential `user` has for `mechanism` (a type, or a name such as "SCRAM-SHA-512"), or None."""
        if isinstance(mechanism, str):
            mechanism = MECHANISMS.get(mechanism, 0)
        mine = self.by_user.get(user)
        return None if mine is None else mine.get(mechanism)

    def __len__(self) -> int:
        return sum(map(len, self.by_user.values()))

    # ---- records ---------------------------------------------------------------------------------------

    def replay(self, rec: R.Record) -> None:
        """One stored KCOORD_SCRAM_CREDENTIAL record (decoded), on load."""
        c = rec.value
        self.by_user.setdefault(c.user, {})[c.mechanism] = ScramCredential(c.salt, c.stored_key, c.server_key,
                                                                           c.iterations)

    def refresh(self, records: Iterable[tuple[bytes, bytes]]) -> None:
        """Become exactly what `records` hold (every stored record; others than credentials are passed over): a
        cluster node adopting what another node wrote."""
        self.by_user = {}
        for key, value in records:
            if R.record_type(key) == R.KCOORD_SCRAM_CREDENTIAL:
                self.replay(R.decode(key, value))

    def put(self, user: str, mechanism: int, cred: ScramCredential | None) -> None:
        """Stage and apply one change (None: the credential goes)."""
        if self.store.persistent:
            key = R.scram_credential_key(user, mechanism)
            self.store.stage(key, None if cred is None else R.scram_credential_value(
                cred.salt, cred.stored_key, cred.server_key, cred.iterations))
        if cred is None:
            mine = self.by_user.get(user, {})
            mine.pop(mechanism, None)
            if not mine:
                self.by_user.pop(user, None)
        else:
            self.by_user.setdefault(user, {})[mechanism] = cred

    # ---- DescribeUserScramCredentials (ScramImage.describe) -----------------------------------------------

    def describe(self, req, version: int, client_id: str = "", client_host: str = ""):
        users = req.users
        duplicate: dict[str, bool] = {}
        if not users:  # null or empty: every user
            duplicate = dict.fromkeys(sorted(self.by_user), False)
        else:
            for u in users:
                duplicate[u.name] = u.name in duplicate
        results = []
        for user, twice in duplicate.items():
            if twice:
                results.append(self._describe_result(user, E.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER + user))
                continue
            mine = self.by_user.get(user)
            if not mine:
                results.append(self._describe_result(user, E.RESOURCE_NOT_FOUND,
                                                     DESCRIBE_USER_THAT_DOES_NOT_EXIST + user))
                continue
            info = wire.DescribeUserScramCredentialsResponseCredentialInfo
            results.append(self._describe_result(user, E.NONE, None, [
                info(mechanism=m, iterations=mine[m].iterations) for m in sorted(mine)]))
        return wire.DescribeUserScramCredentialsResponse(error_code=E.NONE, error_message=None, results=results)

    @staticmethod
    def _describe_result(user: str, error: int, message: str | None, infos: list | None = None):
        return wire.DescribeUserScramCredentialsResponseDescribeUserScramCredentialsResult(
            user=user, error_code=error, error_message=message, credential_infos=infos or [])

    @staticmethod
    def _alter_result(user: str, error: int, message: str | None):
        return wire.AlterUserScramCredentialsResponseAlterUserScramCredentialsResult(
            user=user, error_code=error, error_message=message)

    # ---- AlterUserScramCredentials (ScramControlManager.alterCredentials) ---------------------------------

    def alter(self, req, version: int, client_id: str = "", client_host: str = ""):
        deletions: dict[str, wire.AlterUserScramCredentialsRequestScramCredentialDeletion] = {}
        upsertions: dict[str, wire.AlterUserScramCredentialsRequestScramCredentialUpsertion] = {}
        errors: dict[str, Error] = {}
        # Deletions first, then upsertions; a user's first error stands, a second mention of a user whose first
        # was valid is DUPLICATE_RESOURCE (and undoes the first), as Kafka's maps do.
        for d in req.deletions:
            if d.name in errors:
                continue
            if deletions.pop(d.name, None) is not None:
                errors[d.name] = (E.DUPLICATE_RESOURCE, ALTERED_TWICE)
                continue
            error = self._check_name_and_mechanism(d.name, d.mechanism)
            if error is None and self.lookup(d.name, d.mechanism) is None:
                error = (E.RESOURCE_NOT_FOUND, DELETE_MISSING)
            if error is None:
                deletions[d.name] = d
            else:
                errors[d.name] = error
        for u in req.upsertions:
            if u.name in errors:
                continue
            if deletions.pop(u.name, None) is not None or upsertions.pop(u.name, None) is not None:
                errors[u.name] = (E.DUPLICATE_RESOURCE, ALTERED_TWICE)
                continue
            error = self._check_name_and_mechanism(u.name, u.mechanism)
            if error is None:
                if u.iterations < MIN_ITERATIONS:
                    error = (E.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS)
                elif u.iterations > MAX_ITERATIONS:
                    error = (E.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS)
            if error is None:
                upsertions[u.name] = u
            else:
                errors[u.name] = error
        changes: list[tuple[str, int, ScramCredential | None]] = [(n, d.mechanism, None) for n, d in deletions.items()]
        done = list(deletions)
        for name, u in upsertions.items():
            if not u.salted_password:
                # Kafka's finishUpsertion: the HMAC key (javax SecretKeySpec) cannot be empty; the exception becomes
                # UNKNOWN_SERVER_ERROR, without a message (ApiError.fromThrowable)
                errors[name] = (E.UNKNOWN_SERVER_ERROR, None)
                continue
            changes.append((name, u.mechanism, credential_from_salted(u.mechanism, bytes(u.salted_password),
                                                                       bytes(u.salt), u.iterations)))
            done.append(name)
        for name, mechanism, cred in changes:  # all staged in this turn's batch: applied together
            self.put(name, mechanism, cred)
            log.info("%s SCRAM credential of user %r (%s%s)", "deleted" if cred is None else "set", name,
                     MECHANISM_NAMES[mechanism], "" if cred is None else f", {cred.iterations} iterations",
                     extra={"kcoord": {"event": "scram-credential-" + ("deleted" if cred is None else "set"),
                                       "user": name, "mechanism": MECHANISM_NAMES[mechanism],
                                       "client_id": client_id, "client_host": client_host}})
        results = [self._alter_result(n, E.NONE, None) for n in done]
        results += [self._alter_result(n, code, message) for n, (code, message) in errors.items()]
        return wire.AlterUserScramCredentialsResponse(results=results)

    def refuse(self, req, error: int, message: str | None):
        """An AlterUserScramCredentials answered `error` for every user it names, changing nothing (sorted, as
        Kafka's getErrorResponse): while the store cannot write."""
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return wire.AlterUserScramCredentialsResponse(results=[self._alter_result(n, error, message) for n in names])

    @staticmethod
    def _check_name_and_mechanism(name: str, mechanism: int) -> Error | None:
        """Kafka's validateScramUsernameAndMechanism."""
        if not name:
            return E.UNACCEPTABLE_CREDENTIAL, EMPTY_USERNAME
        if mechanism not in MECHANISM_NAMES:
            return E.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:  # kcoord's: what a record key can hold
            return E.UNACCEPTABLE_CREDENTIAL, f"Username must be at most {MAX_NAME_BYTES} bytes"
        return None
