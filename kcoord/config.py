"""Coordinator settings, named and defaulted as Kafka's broker configs are."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

# Kafka's ClassicGroupMember / GroupCoordinatorConfig constants.
CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

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
    # KIP-800 reasons are kept in a bounded per-group history (Kafka only logs them); this bounds it.
    group_rebalance_history_size: int = 64
    offset_metadata_max_bytes: int = 4096
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
    "group.rebalance.history.size": (INT, 0, None),  # kcoord's own
    "offset.metadata.max.bytes": (INT, 0, None),
    **{f"group.{kind}.{name}": (INT, 1, None)  # Kafka: atLeast(1) each (group.connect.*: as group.consumer.*)
       for kind in ("consumer", "connect")
       for name in ("session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms", "heartbeat.interval.ms",
                    "min.heartbeat.interval.ms", "max.heartbeat.interval.ms", "max.size")},
    "group.connect.max.assignment.delay.ms": (INT, 0, None),
    # kcoord's private block of API keys: above every Kafka API key, with room for its four APIs.
    "group.connect.api.key.base": (INT, 1000, 32764),
}

# The same for the broker settings kcoord.server.ServerConfig reads (server.SETTINGS), from Kafka's ServerConfigs,
# ServerLogConfigs and KafkaConfig.
SERVER_BOUNDS: dict[str, tuple[tuple[int, int], int | None, int | None]] = {
    "socket.request.max.bytes": (INT, 1, None),  # Kafka: atLeast(1)
    "max.connections": (INT, 0, None),  # Kafka: atLeast(0)
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
}


def check_bounds(obj: Any, names: dict[str, str], bounds: dict[str, tuple[tuple[int, int], int | None, int | None]]
                 ) -> None:
    """Each bounded setting of `obj` (Kafka name -> field in `names`) within its type and bounds; a ValueError
    names the setting, the value and the rule ("num.partitions: 0 is below the minimum 1")."""
    for name, ((type_lo, type_hi), lo, hi) in bounds.items():
        value = getattr(obj, names[name])
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name}: {value!r} is not an integer")
        lo = type_lo if lo is None else lo
        hi = type_hi if hi is None else hi
        if value < lo:
            raise ValueError(f"{name}: {value} is below the minimum {lo}")
        if value > hi:
            raise ValueError(f"{name}: {value} is above the maximum {hi}")


def check_order(obj: Any, rules: list[tuple[str, str, str]]) -> None:
    """Cross-setting rules (a <= b, a < b) over GroupConfig's Kafka names; a ValueError names both settings."""
    for a, op, b in rules:
        va, vb = getattr(obj, SETTINGS[a]), getattr(obj, SETTINGS[b])
        if op == "<=" and not va <= vb:
            raise ValueError(f"{a} ({va}) must not be above {b} ({vb})")
        if op == "<" and not va < vb:
            raise ValueError(f"{a} ({va}) must be below {b} ({vb})")


def kafka_settings(cls: type, names: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    """The fields of dataclass `cls` that Kafka-named `settings` set, each value parsed to the type of the field's
    default (`names`: Kafka name -> field). A ValueError names the setting that is unknown or malformed."""
    defaults = {f.name: f.default for f in fields(cls)}
    out = {}
    for name, value in settings.items():
        if name not in names:
            raise ValueError(f"unknown setting {name!r}; known: {', '.join(sorted(names))}")
        attr = names[name]
        out[attr] = parse_setting(name, defaults[attr], value)
    return out


def parse_setting(name: str, default: object, value: Any) -> Any:
    """`value` as the type of `default`, read as Kafka reads its properties: booleans as true or false (in any
    case), integers as decimal digits with an optional sign (no "1_000", no "1e3")."""
    kind = type(default)
    if isinstance(value, kind):
        return value
    text = str(value).strip()
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{name}: {value!r} is not true or false")
        return text.lower() == "true"
    if kind is int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError(f"{name}: {value!r} is not an integer")
        return int(text)
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a valid {kind.__name__}") from None
