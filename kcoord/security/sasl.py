"""One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it (its SaslState): what the next frame may
be, the mechanism under way, the principal once authenticated, and when the session expires (KIP-368).

The server (kcoord.server.KafkaConnection) feeds it frames and does the I/O; this class only decides."""

from __future__ import annotations

from collections.abc import Callable

from .scram import Mechanism, ScramCredential

# The states (Kafka's names): before anything, after ApiVersions, during the exchange (SaslAuthenticate after a v1
# handshake, raw tokens after a v0 one), done, and failed (the connection closes after the delay).
INITIAL, HANDSHAKE, AUTHENTICATE, RAW, COMPLETE, FAILED = "initial", "handshake", "authenticate", "raw", \
    "complete", "failed"
REAUTH_MIN_INTERVAL_S = 1.0  # Kafka: a re-authentication starts at most once a second


class SaslSession:
    def __init__(self, listener: str, enabled: list[str],
                 lookup: Callable[[str, int], ScramCredential | None], reauth_ms: int | dict[str, int]) -> None:
        self.listener = listener
        self.enabled = enabled
        self.lookup = lookup
        # connections.max.reauth.ms of each mechanism on this listener (or one for all)
        self.reauth_by_mechanism = reauth_ms if isinstance(reauth_ms, dict) else dict.fromkeys(enabled, reauth_ms)
        self.state = INITIAL
        self.mechanism_name: str | None = None
        self.mechanism: Mechanism | None = None  # under way
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.expires_at: float | None = None  # loop time after which only a re-authentication is served
        self.reauth_started = float("-inf")
        self.reauthenticating = False
        self.requested: str | None = None  # the mechanism a re-authentication asked for

    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    def begin(self, mechanism: str, version: int) -> None:
        """A SaslHandshake for an enabled mechanism: the exchange starts (v0: raw tokens follow)."""
        from .plain import new_mechanism

        self.mechanism_name = mechanism
        self.mechanism = new_mechanism(mechanism, self.lookup)
        self.state = AUTHENTICATE if version >= 1 else RAW

    def begin_reauthentication(self, mechanism: str, now: float) -> bool:
        """A SaslHandshake on an authenticated connection: True when a re-authentication starts (the session has
        an expiry and the last one began over a second ago); else the handshake is refused (ILLEGAL_SASL_STATE).
        Kafka answers the handshake NONE even for another mechanism; the token that follows then fails."""
        if self.expires_at is None or now - self.reauth_started < REAUTH_MIN_INTERVAL_S:
            return False
        from .plain import new_mechanism

        self.reauth_started = now
        self.reauthenticating = True
        self.state = AUTHENTICATE
        self.mechanism = new_mechanism(mechanism, self.lookup) if mechanism == self.mechanism_name else None
        self.requested = mechanism
        return True

    def finish(self, name: str, now: float) -> str | None:
        """The exchange succeeded as user `name`: None, or why a re-authentication is refused (another
        principal). The session's lifetime is then `lifetime_ms`."""
        principal = f"User:{name}"
        if self.reauthenticating and self.principal is not None and principal != self.principal:
            return (f"Cannot change principals during re-authentication from {self.principal.replace(':', '.')}: "
                    f"{principal.replace(':', '.')}")
        self.principal = principal
        self.state = COMPLETE
        self.reauthenticating = False
        self.expires_at = now + self.reauth_ms / 1000 if self.reauth_ms > 0 else None
        return None

    @property
    def reauth_ms(self) -> int:
        """The session lifetime of the mechanism authenticated with (0: no expiry)."""
        return self.reauth_by_mechanism.get(self.mechanism_name or "", 0)

    @property
    def lifetime_ms(self) -> int:
        """SaslAuthenticate v1+'s SessionLifetimeMs: connections.max.reauth.ms, or 0 (no expiry)."""
        return self.reauth_ms if self.reauth_ms > 0 else 0

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at
