"""Kafka's listeners: `listeners`, `advertised.listeners` and `listener.security.protocol.map`, read as Kafka reads
them (SocketServerConfigs, KafkaConfig.listeners / effectiveAdvertisedListeners).

Each listener has a name, the address it binds, the address it advertises (what Metadata and FindCoordinator give
clients who connected through it) and its security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""

from __future__ import annotations

import re
from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)  # Kafka's default: each protocol named as itself
_ENTRY = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.]+\]|[^:/\[\]]*):(-?[0-9]+)")


class ListenerError(ValueError):
    """A listener setting that cannot be served: one line naming the setting."""


@dataclass
class Listener:
    name: str  # upper case, as Kafka keeps listener names
    host: str  # what it binds ("" or 0.0.0.0: every address)
    port: int  # 0: a free port, known once bound
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    advertised_host: str | None = None  # None: `host`
    advertised_port: int | None = None  # None: `port`

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def address(self) -> tuple[str, int]:
        """What a client that connected through this listener is told to connect to."""
        return (self.advertised_host or self.host, self.advertised_port or self.port)


def parse_protocol_map(text: str) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL pairs."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {item.strip()!r} is not NAME:PROTOCOL (the "
                                f"protocols: {', '.join(PROTOCOLS)})")
        if name in out:
            raise ListenerError(f"listener.security.protocol.map: listener {name} is given twice")
        out[name] = protocol
    return out


def _entries(setting: str, text: str) -> list[tuple[str, str, int]]:
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = _ENTRY.fullmatch(item)
        if m is None:
            raise ListenerError(f"{setting}: {item!r} is not NAME://host:port")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ListenerError(f"{setting}: {item!r}: {port} is not a TCP port")
        out.append((m.group(1).upper(), m.group(2).strip("[]"), port))
    return out


def listener_names(listeners: str) -> set[str]:
    """The names in a `listeners` value (ListenerError for one that is malformed)."""
    return {name for name, _, _ in _entries("listeners", listeners)}


def parse_listeners(listeners: str, advertised: str = "", protocol_map: str = DEFAULT_PROTOCOL_MAP,
                    skip: frozenset[str] = frozenset()) -> list[Listener]:
    """The listeners, with Kafka's rules: names and ports unique, every name in the protocol map, advertised
    addresses only for listeners that exist (their names and ports may repeat: one listener may advertise
    another's address), none of them a non-routable meta-address. Those named in `skip` (a KRaft controller's
    listeners, controller.listener.names) are left out, in both lists."""
    protocols = parse_protocol_map(protocol_map)
    out: list[Listener] = []
    for name, host, port in _entries("listeners", listeners):
        if name in skip:
            continue
        if name not in protocols:
            raise ListenerError(f"listeners: listener {name} has no security protocol: name it in "
                                f"listener.security.protocol.map (e.g. {name}:SASL_SSL)")
        if any(x.name == name for x in out):
            raise ListenerError(f"listeners: listener {name} is given twice")
        if port and any(x.port == port and x.host == host for x in out):
            raise ListenerError(f"listeners: two listeners on port {port}")
        out.append(Listener(name, host, port, protocols[name]))
    if not out:
        raise ListenerError("listeners: no listener given")
    by_name = {x.name: x for x in out}
    seen = set()
    for name, host, port in _entries("advertised.listeners", advertised):
        if name in skip:
            continue
        if name not in by_name:
            raise ListenerError(f"advertised.listeners: {name} is not one of the listeners "
                                f"({', '.join(by_name)})")
        if name in seen:
            raise ListenerError(f"advertised.listeners: listener {name} is given twice")
        seen.add(name)
        if not host or host in ("0.0.0.0", "::"):
            raise ListenerError(f"advertised.listeners: {name}://{host}:{port}: a non-routable meta-address no "
                                f"client can connect to; give the host name or address clients should use")
        by_name[name].advertised_host, by_name[name].advertised_port = host, port
    return out
