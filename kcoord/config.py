"""Coordinator settings, named and defaulted as Kafka's broker configs are: a group's (GroupConfig) and the
server's (ServerConfig), with the bounds Kafka puts on each."""

from __future__ import annotations

import difflib
import ipaddress
import logging
import re
import socket
from dataclasses import dataclass, field, fields
from typing import Any

from .kafka_configs import AUTHORIZER_CONFIGS, BROKER_CONFIGS, is_kafka_broker_setting
from .listeners import DEFAULT_PROTOCOL_MAP, Listener, parse_listeners
from .topics import parse_topic_spec
from .wire import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger("kcoord.config")

# Kafka's ClassicGroupMember / GroupCoordinatorConfig constants.
CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# Kafka's message.max.bytes default (LogConfig.DEFAULT_MAX_MESSAGE_BYTES: 1 MiB + the 12-byte log overhead), which
# the offsets topic's max.message.bytes inherits: no coordinator record (a commit's, a group's) may be larger.
DEFAULT_MESSAGE_MAX_BYTES = 1024 * 1024 + 12

# How the initial rebalance delay (KIP-134) is extended while new members keep arriving:
#   last-join: complete once group.initial.rebalance.delay.ms has passed since the last new member joined
#              (and at least that long since the first), capped by the group's rebalance timeout.
#   kafka:     Kafka's rule: at each expiry that saw a new member, wait another whole delay, capped the same way.
# Both wait out the delay and extend while members arrive; `kafka` also waits a second window when every member
# arrived together at the start, which is how a group that starts at once takes 2 x the delay on Kafka.
INITIAL_REBALANCE_EXTENSIONS = ("last-join", "kafka")
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")  # Kafka's, case-insensitive


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    # kcoord's own setting (see INITIAL_REBALANCE_EXTENSIONS); `kafka` reproduces Kafka's timing exactly.
    group_initial_rebalance_extension: str = "last-join"
    group_max_size: int = 2**31 - 1
    # kcoord's own: the longest a classic group's join or sync phase waits, whatever rebalance timeout a member
    # declares (Kafka waits the largest declared, up to 2^31-1 ms); 5 minutes is Kafka's max.poll.interval.ms default.
    group_max_rebalance_timeout_ms: int = 300_000
    # KIP-800 reasons are kept in a bounded per-group history (Kafka only logs them); this bounds it.
    group_rebalance_history_size: int = 64
    offset_metadata_max_bytes: int = 4096
    # Kafka's broker message.max.bytes: what one commit's offset records, or one group or member record, may hold.
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    # Kafka's offset retention (GroupCoordinatorConfig): an Empty group's offsets expire this long after it became
    # Empty (any other group's, of topics it does not subscribe to, this long after their commit), and an Empty
    # group with no offsets left goes; checked every offsets.retention.check.interval.ms (kcoord.coordinator).
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    # KIP-848 consumer groups (Kafka's GroupCoordinatorConfig names, defaults and bounds).
    group_coordinator_rebalance_protocols: str = "classic,consumer"  # without "consumer": no ConsumerGroupHeartbeat
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: str = "uniform,range"  # the first is the default
    # Kafka 4.3's batching of the target computation (KIP-1263): a change to the group bumps its epoch at once,
    # but its new target is computed at most once per this interval (0: at every change, as before 4.3); members
    # reconcile towards the previous target meanwhile. Kafka's bounds for the group-level override
    # (group.consumer.min/max.assignment.interval.ms) are not kcoord's: it has no group-level settings.
    group_consumer_assignment_interval_ms: int = 1_000
    # Online migration of non-empty groups between the protocols (Kafka's ConsumerGroupMigrationPolicy); an empty
    # group is always replaced by the other type, whatever this says.
    group_consumer_migration_policy: str = "bidirectional"
    # Connect groups (kcoord's own type, README "Connect groups"): on when the rebalance protocols list "connect".
    # Names follow the consumer group's; bounds as Kafka's group.consumer.* (45 s sessions: a departed worker's units
    # wait for the assignor's scheduled delay anyway).
    group_connect_session_timeout_ms: int = 45_000
    group_connect_min_session_timeout_ms: int = 45_000
    group_connect_max_session_timeout_ms: int = 60_000
    group_connect_heartbeat_interval_ms: int = 5_000
    group_connect_min_heartbeat_interval_ms: int = 5_000
    group_connect_max_heartbeat_interval_ms: int = 15_000
    group_connect_max_size: int = 2**31 - 1
    group_connect_max_assignment_delay_ms: int = 600_000  # an Install's scheduled delay is clamped to this
    # As group.consumer.assignment.interval.ms: a worker is asked to compute at most once per this interval.
    group_connect_assignment_interval_ms: int = 1_000
    group_connect_api_key_base: int = 1000  # ConnectGroupHeartbeat's API key; Prepare, Install, Describe follow

    def __post_init__(self) -> None:
        check_bounds(self, SETTINGS, BOUNDS)
        if self.group_initial_rebalance_extension not in INITIAL_REBALANCE_EXTENSIONS:
            choices = ", ".join(INITIAL_REBALANCE_EXTENSIONS)
            raise ValueError(f"group.initial.rebalance.extension: {self.group_initial_rebalance_extension!r} is not "
                             f"one of {choices}")
        protocols = self.rebalance_protocols()
        if "classic" not in protocols or not protocols <= {"classic", "consumer", "connect"}:
            raise ValueError(f"group.coordinator.rebalance.protocols: {self.group_coordinator_rebalance_protocols!r} "
                             "must list classic, and may list consumer and connect")
        assignors = self.consumer_assignors()
        if not assignors or not set(assignors) <= {"uniform", "range"} or len(set(assignors)) != len(assignors):
            raise ValueError(f"group.consumer.assignors: {self.group_consumer_assignors!r} must list uniform and/or "
                             "range, each once")
        if self.group_consumer_migration_policy.strip().lower() not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy: {self.group_consumer_migration_policy!r} is not one "
                             f"of {', '.join(MIGRATION_POLICIES)}")
        # Kafka's cross-setting rules (GroupConfig's constructor `require`s), in Kafka's order; the classic pair is
        # kcoord's (Kafka takes min > max, then refuses every JoinGroup with INVALID_SESSION_TIMEOUT).
        check_order(self, [("group.min.session.timeout.ms", "<=", "group.max.session.timeout.ms")])
        for kind in ("consumer", "connect"):
            g = f"group.{kind}"
            check_order(self, [
                (f"{g}.min.heartbeat.interval.ms", "<=", f"{g}.max.heartbeat.interval.ms"),
                (f"{g}.min.heartbeat.interval.ms", "<=", f"{g}.heartbeat.interval.ms"),
                (f"{g}.heartbeat.interval.ms", "<=", f"{g}.max.heartbeat.interval.ms"),
                (f"{g}.min.session.timeout.ms", "<=", f"{g}.max.session.timeout.ms"),
                (f"{g}.min.session.timeout.ms", "<=", f"{g}.session.timeout.ms"),
                (f"{g}.session.timeout.ms", "<=", f"{g}.max.session.timeout.ms"),
                (f"{g}.heartbeat.interval.ms", "<", f"{g}.session.timeout.ms")])

    def upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy.strip().lower() in ("bidirectional", "upgrade")

    def downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy.strip().lower() in ("bidirectional", "downgrade")

    def rebalance_protocols(self) -> set[str]:
        return {p.strip() for p in self.group_coordinator_rebalance_protocols.split(",") if p.strip()}

    def consumer_assignors(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.group_consumer_assignors.split(",") if a.strip())

    @classmethod
    def from_kafka(cls, settings: dict[str, Any]) -> GroupConfig:
        """Build from Kafka-style names (`group.initial.rebalance.delay.ms`); unknown names are an error."""
        return cls(**kafka_settings(cls, SETTINGS, settings))


SETTINGS = {f.name.replace("_", "."): f.name for f in fields(GroupConfig)}  # Kafka's name -> GroupConfig field

# Kafka's ConfigDef types: an INT setting holds a 32-bit value, a LONG one 64 bits.
INT = (-(2**31), 2**31 - 1)
LONG = (-(2**63), 2**63 - 1)

# The bounds of the numeric group settings, (type, minimum, maximum): Kafka's ConfigDef validators (atLeast,
# between) where Kafka has one. Kafka defines the classic group's four (group.min/max.session.timeout.ms,
# group.initial.rebalance.delay.ms, offset.metadata.max.bytes) without a validator; kcoord refuses the values no
# group could work with: a session timeout below 1 ms and a negative delay or size.
BOUNDS: dict[str, tuple[tuple[int, int], int | None, int | None]] = {
    "group.min.session.timeout.ms": (INT, 1, None),
    "group.max.session.timeout.ms": (INT, 1, None),
    "group.initial.rebalance.delay.ms": (INT, 0, None),
    "group.max.size": (INT, 1, None),  # Kafka: atLeast(1)
    "group.max.rebalance.timeout.ms": (INT, 1, None),  # kcoord's own
    "message.max.bytes": (INT, 0, None),  # Kafka: atLeast(0)
    "group.rebalance.history.size": (INT, 0, None),  # kcoord's own
    "offset.metadata.max.bytes": (INT, 0, None),
    "offsets.retention.minutes": (INT, 1, None),  # Kafka: atLeast(1)
    "offsets.retention.check.interval.ms": (LONG, 1, None),  # Kafka: a LONG, atLeast(1)
    **{f"group.{kind}.{name}": (INT, 1, None)  # Kafka: atLeast(1) each (group.connect.*: as group.consumer.*)
       for kind in ("consumer", "connect")
       for name in ("session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms", "heartbeat.interval.ms",
                    "min.heartbeat.interval.ms", "max.heartbeat.interval.ms", "max.size")},
    "group.connect.max.assignment.delay.ms": (INT, 0, None),
    # Kafka 4.3: atLeast(0), and the group override within 0..15000 by default; kcoord bounds the setting itself so
    "group.consumer.assignment.interval.ms": (INT, 0, 15_000),
    "group.connect.assignment.interval.ms": (INT, 0, 15_000),
    # kcoord's private block of API keys: above every Kafka API key, with room for its four APIs.
    "group.connect.api.key.base": (INT, 1000, 32764),
}

# The same for the broker settings ServerConfig reads (SERVER_SETTINGS), from Kafka's ServerConfigs,
# ServerLogConfigs and KafkaConfig.
SERVER_BOUNDS: dict[str, tuple[tuple[int, int], int | None, int | None]] = {
    "socket.request.max.bytes": (INT, 1, None),  # Kafka: atLeast(1)
    "max.connections": (INT, 0, None),  # Kafka: atLeast(0)
    "max.connections.per.ip": (INT, 0, None),  # Kafka: atLeast(0)
    "max.connection.creation.rate": (INT, 0, None),  # Kafka: atLeast(0)
    "queued.max.request.bytes": (LONG, -1, None),  # Kafka: a LONG, -1 for no bound; else >= socket.request.max.bytes
    "socket.request.timeout.ms": (INT, 1, None),  # kcoord's own
    # Kafka: a LONG without a validator, where a negative value turns idle expiry off; kcoord always expires idle
    # connections, so it refuses what it would not honour.
    "connections.max.idle.ms": (LONG, 1, None),
    "num.partitions": (INT, 1, None),  # Kafka: atLeast(1)
    "topic.max.partitions": (INT, 1, None),  # kcoord's own
    "max.partitions": (INT, 1, None),  # kcoord's own
    "node.id": (INT, 0, None),  # Kafka: a KRaft node id is >= 0
    # A cluster on PostgreSQL (kcoord.cluster). Kafka: atLeast(1); kcoord caps the count, one lease row each.
    "offsets.topic.num.partitions": (INT, 1, 10_000),
    # Kafka's KRaft broker lease and heartbeat: INTs without a validator; kcoord refuses what no lease could use.
    "broker.session.timeout.ms": (INT, 1, None),
    "broker.heartbeat.interval.ms": (INT, 1, None),
    # Authentication (kcoord.security): Kafka's BrokerSecurityConfigs validators
    "connection.failed.authentication.delay.ms": (INT, 0, None),  # Kafka: atLeast(0)
    "connections.max.reauth.ms": (LONG, 0, None),  # Kafka: a LONG, 0 for no re-authentication
    "sasl.server.max.receive.size": (INT, 1, None),
}


def check_bounds(obj: Any, names: dict[str, str], bounds: dict[str, tuple[tuple[int, int], int | None, int | None]]
                 ) -> None:
    """Each bounded setting of `obj` (Kafka name -> field in `names`) within its type and bounds; a ValueError
    names the setting, the value and the rule ("num.partitions: 0 is below the minimum 1")."""
    for name, ((type_lo, type_hi), lo, hi) in bounds.items():
        value = getattr(obj, names[name])
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingError(name, f"{name}: {value!r} is not an integer")
        lo = type_lo if lo is None else lo
        hi = type_hi if hi is None else hi
        if value < lo:
            raise SettingError(name, f"{name}: {value} is below the minimum {lo}")
        if value > hi:
            raise SettingError(name, f"{name}: {value} is above the maximum {hi}")


def check_order(obj: Any, rules: list[tuple[str, str, str]]) -> None:
    """Cross-setting rules (a <= b, a < b) over GroupConfig's Kafka names; a ValueError names both settings."""
    for a, op, b in rules:
        va, vb = getattr(obj, SETTINGS[a]), getattr(obj, SETTINGS[b])
        if op == "<=" and not va <= vb:
            raise ValueError(f"{a} ({va}) must not be above {b} ({vb})")
        if op == "<" and not va < vb:
            raise ValueError(f"{a} ({va}) must be below {b} ({vb})")


class SettingError(ValueError):
    """A setting refused: `name` is the one at fault (so a caller can say where it was given, e.g. a file's line)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def kafka_settings(cls: type, names: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    """The fields of dataclass `cls` that Kafka-named `settings` set, each value parsed to the type of the field's
    default (`names`: Kafka name -> field). Kafka's broker settings that are not in `names` are left out with a
    warning (split_settings); a SettingError names the setting that is unknown or malformed."""
    defaults = {f.name: f.default for f in fields(cls)}
    out = {}
    for name, value in split_settings(settings, names).items():
        attr = names[name]
        out[attr] = parse_setting(name, defaults[attr], value)
    return out


def split_settings(settings: dict[str, Any], known: Any) -> dict[str, Any]:
    """The `settings` whose names are in `known` (kcoord's). The others that are Kafka broker settings
    (kcoord.kafka_configs: broker.id, log.dirs, listeners, ...) are left out and named in one warning; a name that
    is neither is a typo to kcoord: a SettingError naming it and the closest name there is (a Kafka broker ignores
    such a key; a misspelt setting silently left at its default is worse)."""
    ours, ignored, unknown = {}, [], []
    for name, value in settings.items():
        if name in known:
            ours[name] = value
        elif is_kafka_broker_setting(name):
            ignored.append(name)
        else:
            unknown.append(name)
    if unknown:
        raise unknown_setting(unknown[0], known, len(unknown) - 1)
    if ignored:
        log.warning("ignoring %d Kafka broker setting%s kcoord does not use: %s", len(ignored),
                    "" if len(ignored) == 1 else "s", ", ".join(ignored),
                    extra={"kcoord": {"event": "settings-ignored", "settings": ignored}})
    return ours


def unknown_setting(name: str, known: Any, more: int = 0) -> SettingError:
    """The refusal of `name`, which is neither kcoord's nor Kafka's: one short line with the closest name of
    either (difflib), not the list of every name."""
    close = difflib.get_close_matches(name, [*known, *sorted(BROKER_CONFIGS | AUTHORIZER_CONFIGS)], n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]}?)" if close else " (neither kcoord's nor a Kafka broker setting)"
    others = f"; {more} more unknown" if more else ""
    return SettingError(name, f"unknown setting {name!r}{hint}{others}")


def parse_setting(name: str, default: object, value: Any) -> Any:
    """`value` as the type of `default`, read as Kafka reads its properties: booleans as true or false (in any
    case), integers as decimal digits with an optional sign (no "1_000", no "1e3")."""
    kind: Any = type(default)  # bool, int, or a type made from one string (float, str)
    if isinstance(value, kind):
        return value
    text = str(value).strip()
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise SettingError(name, f"{name}: {value!r} is not true or false")
        return text.lower() == "true"
    if kind is int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise SettingError(name, f"{name}: {value!r} is not an integer")
        return int(text)
    try:
        return kind(text)
    except ValueError:
        raise SettingError(name, f"{name}: {value!r} is not a valid {kind.__name__}") from None


# java.util.Properties.load(Reader), which is how Kafka reads server.properties: its line terminators, the
# whitespace it skips (space, tab, form feed) and its escapes.
_NEWLINES = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """The entries of a Java properties file, as java.util.Properties.load(Reader) reads them: (key, value, line)
    in file order (a key given twice: both, the later wins when made a dict), `line` the entry's first line.

    A line whose first non-blank character is # or ! is a comment; a blank line is skipped. A line ending in an
    odd number of backslashes continues on the next, whose leading blanks are dropped (a comment never continues).
    The key ends at the first unescaped =, : or blank; blanks around the separator are skipped (so `key=value`,
    `key: value`, `key value`), and the value is the rest of the line. In keys and values, \\uXXXX is a UTF-16
    code unit, \\t \\n \\r \\f are tab, newline, return and form feed, and a backslash before any other
    character stands for that character (so `\\=`, `\\:`, `\\ ` and `\\\\` put those in a key). A ValueError
    names the line of a malformed \\uXXXX ("3: malformed ...")."""
    lines = _NEWLINES.split(text)
    out = []
    i = 0
    while i < len(lines):
        first = i + 1
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continued(line):
            line = line[:-1]
            if i == len(lines):
                break
            line += lines[i].lstrip(_BLANK)
            i += 1
        if not line:  # a lone backslash continued onto a blank line: nothing (Java reads no entry)
            continue
        key, value = _split_entry(line)
        out.append((_unescape(key, first), _unescape(value, first), first))
    return out


def _continued(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    """Properties.load's split of a logical line into its key and its value (both still escaped)."""
    escaped = False
    end = len(line)
    for j, c in enumerate(line):
        if not escaped and c in "=:" + _BLANK:
            end = j
            break
        escaped = c == "\\" and not escaped
    start = end
    if start < len(line) and line[start] in _BLANK:
        start = len(line) - len(line[start:].lstrip(_BLANK))
    if start < len(line) and line[start] in "=:":
        start += 1
    start = len(line) - len(line[start:].lstrip(_BLANK))
    return line[:end], line[start:]


def _unescape(text: str, line: int) -> str:
    if "\\" not in text:
        return text
    out = []
    j = 0
    while j < len(text):
        c = text[j]
        j += 1
        if c != "\\" or j == len(text):
            out.append(c)
            continue
        c = text[j]
        j += 1
        if c == "u":
            digits = text[j:j + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                escape = "\\u" + digits
                raise ValueError(f"{line}: malformed \\uxxxx escape {escape!r} (Java's \\u takes four hex digits)")
            out.append(chr(int(digits, 16)))
            j += 4
        else:
            out.append(_ESCAPES.get(c, c))
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):  # UTF-16 pairs, as Java's strings hold them
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return result


# ---- the server's settings ---------------------------------------------------------------------------------------

PG_SCHEMES = ("postgresql://", "postgres://")  # a --store URL of the PostgreSQL store (kcoord.pgstore)
FSYNC_POLICIES = ("always", "off")  # store.fsync (kcoord.store)


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 0
    cluster_id: str = "kcoord"
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # socket.request.max.bytes
    max_connections: int = 2**31 - 1  # max.connections
    max_connections_per_ip: int = 2**31 - 1  # max.connections.per.ip
    max_connections_per_ip_overrides: str = ""  # max.connections.per.ip.overrides: "host:count,host:count"
    max_connection_creation_rate: int = 2**31 - 1  # max.connection.creation.rate: new connections per second
    # queued.max.request.bytes: the bytes all connections together may hold in frames not yet whole (Kafka: -1,
    # unbounded; kcoord bounds it by default, README "Settings"). -1 turns the bound off.
    queued_max_request_bytes: int = 200 * 1024 * 1024
    # socket.request.timeout.ms (kcoord's own): a request whose first bytes arrived must be whole within this.
    request_timeout_ms: int = 30_000
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    auto_create_topics: bool = True  # auto.create.topics.enable
    num_partitions: int = 1  # num.partitions
    topic_max_partitions: int = 100_000  # topic.max.partitions (kcoord's own): the most one topic may have
    max_partitions: int = 200_000  # max.partitions (kcoord's own): the most all topics together may have
    topics: list[str] = field(default_factory=list)  # NAME:PARTITIONS
    data_dir: str | None = None  # the embedded store (kcoord.store); None keeps state in memory only
    # A PostgreSQL store shared by the nodes of a cluster (kcoord.cluster, kcoord.pgstore), instead of data_dir.
    store_url: str | None = None
    coordinator_partitions: int = 50  # offsets.topic.num.partitions: groups are spread over this many partitions
    lease_ms: int = 9_000  # broker.session.timeout.ms: how long a node's lease on its partitions lasts unrenewed
    lease_renew_ms: int = 2_000  # broker.heartbeat.interval.ms: how often a node renews and rebalances leases
    store_fsync: str = "always"  # store.fsync: "always" (fsync every commit) or "off" (leave it to the OS)
    metrics_port: int | None = None  # the Prometheus endpoint (kcoord.metrics); None: none
    metrics_host: str | None = None  # where it listens (default: host)
    # Listeners (kcoord.listeners): "" serves one PLAINTEXT listener on host:port (--host, --port)
    listeners: str = ""  # listeners: NAME://host:port,...
    advertised_listeners: str = ""  # advertised.listeners: NAME://host:port,... ("" for a listener: its own)
    listener_security_protocol_map: str = DEFAULT_PROTOCOL_MAP  # listener.security.protocol.map
    # controller.listener.names: a KRaft controller's listeners, which kcoord (no controller) does not serve
    controller_listener_names: str = ""
    # Authentication (kcoord.security). Kafka's default mechanism list is GSSAPI, which kcoord does not serve: a
    # SASL listener needs sasl.enabled.mechanisms set to some of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
    sasl_enabled_mechanisms: str = "GSSAPI"  # sasl.enabled.mechanisms
    failed_authentication_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    connections_max_reauth_ms: int = 0  # connections.max.reauth.ms (0: sessions never expire)
    sasl_server_max_receive_size: int = 524288  # sasl.server.max.receive.size: the largest frame until authenticated
    # Authorization (kcoord.security.authorizer): Kafka's StandardAuthorizer, on when authorizer.class.name names it
    authorizer_class_name: str = ""  # authorizer.class.name ("": no authorizer, every request allowed)
    super_users: str = ""  # super.users: principals allowed everything, separated by ';'
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found
    # The TLS settings (ssl.*) and per-listener overrides (listener.name.<listener>.<setting>) by their Kafka names
    security: dict[str, str] = field(default_factory=dict)
    group: GroupConfig = field(default_factory=GroupConfig)

    def __post_init__(self) -> None:
        """Kafka's rules for each setting (kcoord.config.SERVER_BOUNDS), and the start-up topics within them."""
        if self.store_fsync not in FSYNC_POLICIES:
            raise ValueError(f"store.fsync: {self.store_fsync!r} is not one of {', '.join(FSYNC_POLICIES)}")
        check_bounds(self, SERVER_SETTINGS, SERVER_BOUNDS)
        if 0 <= self.queued_max_request_bytes < self.max_frame_size:
            # Kafka's rule (KafkaConfig): a frame of the largest size must fit in what all frames may hold
            raise ValueError(f"queued.max.request.bytes ({self.queued_max_request_bytes}) must be -1 or at least "
                             f"socket.request.max.bytes ({self.max_frame_size})")
        overrides = self.ip_overrides()
        if self.max_connections_per_ip == 0 and not overrides:
            # Kafka's rule (SocketServer's ConnectionQuotas): 0 for everyone else needs somebody allowed
            raise ValueError("max.connections.per.ip: 0 is allowed only with max.connections.per.ip.overrides")
        if self.store_url is not None:
            if self.data_dir is not None:
                raise ValueError("--store and --data-dir are two stores: give one")
            if not self.store_url.startswith(PG_SCHEMES):
                raise ValueError(f"--store: {self.store_url.split('@')[-1]!r} is not a postgresql:// URL")
            if self.lease_renew_ms >= self.lease_ms:
                raise ValueError(f"broker.heartbeat.interval.ms ({self.lease_renew_ms}) must be below "
                                 f"broker.session.timeout.ms ({self.lease_ms})")
        for name, port, lo in (("port", self.port, 0), ("advertised port", self.advertised_port, 1),
                               ("metrics port", self.metrics_port, 0)):
            if port is not None and not lo <= port <= 65535:
                raise ValueError(f"{name}: {port} is not a TCP port ({lo}..65535)")
        # What Metadata and FindCoordinator tell clients to connect to. Kafka refuses to start on an advertised
        # 0.0.0.0 (KafkaConfig: "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0"): so does
        # kcoord, whichever way it is started.
        if _meta_address(self.advertised_host or self.host):
            if self.advertised_host:
                raise ValueError(f"--advertised-host {self.advertised_host}: a non-routable meta-address no client "
                                 "can connect to; give the host name or address clients should use")
            raise ValueError(f"--host {self.host or repr(self.host)} is no address clients can connect to: give "
                             "--advertised-host with the host name or address they should use")
        listeners = self.listener_list()  # ListenerError (a ValueError) names the setting
        if self.listeners:
            for x in listeners:
                if _meta_address(x.advertised_host or x.host):
                    raise ValueError(f"listeners: {x.name}://{x.host}:{x.port} binds every address: name the "
                                     f"address clients should use in advertised.listeners ({x.name}://HOST:PORT)")
        if any(x.sasl for x in listeners):
            mechanisms = self.enabled_mechanisms()
            served = [m for m in mechanisms if m in SASL_MECHANISMS]
            if not served:
                raise ValueError(f"sasl.enabled.mechanisms: {self.sasl_enabled_mechanisms!r} has none of "
                                 f"{', '.join(SASL_MECHANISMS)}, which a SASL listener needs (GSSAPI, Kafka's "
                                 f"default, is not served by kcoord)")
            if len(served) < len(mechanisms):
                raise ValueError(f"sasl.enabled.mechanisms: kcoord serves {', '.join(SASL_MECHANISMS)}, not "
                                 f"{', '.join(m for m in mechanisms if m not in SASL_MECHANISMS)}")
        if self.authorizer_class_name.strip() and self.authorizer_class_name.strip() not in AUTHORIZERS:
            raise ValueError(f"authorizer.class.name: kcoord serves Kafka's StandardAuthorizer "
                             f"({AUTHORIZERS[0]}), not {self.authorizer_class_name.strip()!r}")
        from .security.authorizer import parse_super_users
        try:
            parse_super_users(self.super_users)
        except ValueError as e:
            raise SettingError("super.users", f"super.users: {e}") from None
        if self.num_partitions > self.topic_max_partitions:
            raise ValueError(f"num.partitions ({self.num_partitions}) must not be above topic.max.partitions "
                             f"({self.topic_max_partitions})")
        counts: dict[str, int] = {}
        for spec in self.topics:
            name, n = parse_topic_spec(spec)
            if name in counts:
                raise ValueError(f"topic {name!r} is given twice: with {counts[name]} and {n} partitions")
            if n > self.topic_max_partitions:
                raise ValueError(f"topic {spec!r}: {n} partitions is above topic.max.partitions "
                                 f"({self.topic_max_partitions})")
            counts[name] = n
        if sum(counts.values()) > self.max_partitions:
            raise ValueError(f"the topics given hold {sum(counts.values())} partitions, above max.partitions "
                             f"({self.max_partitions})")

    def ip_overrides(self) -> dict[str, int]:
        """max.connections.per.ip.overrides as {address: count}: Kafka's "host:count" list, a host name resolved
        to its addresses."""
        out: dict[str, int] = {}
        for item in self.max_connections_per_ip_overrides.split(","):
            if not item.strip():
                continue
            host, sep, count = item.strip().rpartition(":")
            if not sep or not host or not re.fullmatch(r"[0-9]+", count) or int(count) > 2**31 - 1:
                raise ValueError(f"max.connections.per.ip.overrides: {item.strip()!r} is not host:count")
            for addr in _addresses(host.strip("[]")):
                out[addr] = int(count)
        return out

    @classmethod
    def from_kafka(cls, settings: dict[str, str], **kwargs) -> ServerConfig:
        """Build from Kafka-named broker and group settings (`socket.request.max.bytes`,
        `group.initial.rebalance.delay.ms`, ...) plus the given fields; an unknown or malformed setting is a
        ValueError naming it. Kafka's broker settings that kcoord does not use (broker.id, log.dirs, ...) are left
        out with one warning naming them (kcoord.config.split_settings)."""
        security = {k: str(v) for k, v in settings.items() if is_security_setting(k)}
        for name, value in security.items():
            if name.endswith(".connections.max.reauth.ms") and not re.fullmatch(r"[0-9]{1,18}", value.strip()):
                raise SettingError(name, f"{name}={value!r}: expected a number of milliseconds (0: no expiry)")
        settings = split_settings({k: v for k, v in settings.items() if not is_security_setting(k)},
                                  {**SERVER_SETTINGS, **SETTINGS})
        server = kafka_settings(cls, SERVER_SETTINGS, {k: v for k, v in settings.items() if k in SERVER_SETTINGS})
        group = GroupConfig.from_kafka({k: v for k, v in settings.items() if k not in SERVER_SETTINGS})
        return cls(group=group, security=security, **server, **kwargs)

    def listener_list(self) -> list[Listener]:
        """The listeners to serve: `listeners` when given, else one PLAINTEXT listener on host:port advertised as
        --advertised-host/--advertised-port say (kcoord's command line, as before listeners existed)."""
        if not self.listeners:
            return [Listener("PLAINTEXT", self.host, self.port, "PLAINTEXT", self.advertised_host,
                             self.advertised_port)]
        return parse_listeners(self.listeners, self.advertised_listeners, self.listener_security_protocol_map,
                               self.controller_listeners())

    def controller_listeners(self) -> frozenset[str]:
        return frozenset(n.strip().upper() for n in self.controller_listener_names.split(",") if n.strip())

    def reauth_ms(self, listener: str, mechanism: str) -> int:
        """connections.max.reauth.ms for a mechanism on a listener, as Kafka's SaslChannelBuilder reads it:
        `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, else
        `listener.name.<listener>.connections.max.reauth.ms`, else the server's (names lower-cased)."""
        prefix = f"listener.name.{listener.lower()}."
        for name in (f"{prefix}{mechanism.lower()}.connections.max.reauth.ms", f"{prefix}connections.max.reauth.ms"):
            value = self.security.get(name)
            if value is not None:
                return int(value)
        return self.connections_max_reauth_ms

    @property
    def authorizing(self) -> bool:
        """An authorizer is configured: every request is checked against the ACLs."""
        return bool(self.authorizer_class_name.strip())

    def enabled_mechanisms(self) -> list[str]:
        return [m.strip().upper() for m in self.sasl_enabled_mechanisms.split(",") if m.strip()]


def _meta_address(host: str | None) -> bool:
    """`host` binds every address (0.0.0.0, ::, or none given) rather than naming one."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _addresses(host: str) -> list[str]:
    """The addresses a host name or literal stands for (a literal as itself); a ValueError names one that does
    not resolve."""
    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        raise ValueError(f"max.connections.per.ip.overrides: host {host!r} does not resolve") from None
    return sorted({info[4][0] for info in infos})


# Broker settings by their Kafka names (kcoord's own: store.fsync, always | off, see kcoord.store).
SERVER_SETTINGS = {
    "socket.request.max.bytes": "max_frame_size",
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
    "max.connection.creation.rate": "max_connection_creation_rate",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "socket.request.timeout.ms": "request_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "auto.create.topics.enable": "auto_create_topics",
    "num.partitions": "num_partitions",
    "topic.max.partitions": "topic_max_partitions",
    "max.partitions": "max_partitions",
    "node.id": "node_id",
    "offsets.topic.num.partitions": "coordinator_partitions",
    "broker.session.timeout.ms": "lease_ms",
    "broker.heartbeat.interval.ms": "lease_renew_ms",
    "store.fsync": "store_fsync",
    "listeners": "listeners",
    "advertised.listeners": "advertised_listeners",
    "listener.security.protocol.map": "listener_security_protocol_map",
    "controller.listener.names": "controller_listener_names",
    "sasl.enabled.mechanisms": "sasl_enabled_mechanisms",
    "connection.failed.authentication.delay.ms": "failed_authentication_delay_ms",
    "connections.max.reauth.ms": "connections_max_reauth_ms",
    "sasl.server.max.receive.size": "sasl_server_max_receive_size",
    "authorizer.class.name": "authorizer_class_name",
    "super.users": "super_users",
    "allow.everyone.if.no.acl.found": "allow_everyone_if_no_acl_found",
}
# What authorizer.class.name may name: Kafka's KRaft authorizer, and the ZooKeeper-era one whose ACL semantics it
# kept (Kafka 3.x), both served by kcoord.security.authorizer
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what kcoord serves of sasl.enabled.mechanisms


def is_security_setting(name: str) -> bool:
    """A TLS setting or a per-listener override, kept by name in ServerConfig.security for kcoord.security.tls."""
    return name.startswith(("ssl.", "listener.name."))
