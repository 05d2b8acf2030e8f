"""Coordinator settings, named and defaulted as Kafka's broker configs are."""

from __future__ import annotations

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
        if self.group_initial_rebalance_extension not in INITIAL_REBALANCE_EXTENSIONS:
            choices = ", ".join(INITIAL_REBALANCE_EXTENSIONS)
            raise ValueError(f"group.initial.rebalance.extension must be one of {choices}, "
                             f"not {self.group_initial_rebalance_extension!r}")
        protocols = self.rebalance_protocols()
        if "classic" not in protocols or not protocols <= {"classic", "consumer", "connect"}:
            raise ValueError("group.coordinator.rebalance.protocols must list classic, and may list consumer and "
                             f"connect; not {self.group_coordinator_rebalance_protocols!r}")
        assignors = self.consumer_assignors()
        if not assignors or not set(assignors) <= {"uniform", "range"}:
            raise ValueError(f"group.consumer.assignors must list uniform and/or range, not "
                             f"{self.group_consumer_assignors!r}")
        for name, lo, value, hi in (
                ("group.consumer.session.timeout.ms", self.group_consumer_min_session_timeout_ms,
                 self.group_consumer_session_timeout_ms, self.group_consumer_max_session_timeout_ms),
                ("group.consumer.heartbeat.interval.ms", self.group_consumer_min_heartbeat_interval_ms,
                 self.group_consumer_heartbeat_interval_ms, self.group_consumer_max_heartbeat_interval_ms),
                ("group.connect.session.timeout.ms", self.group_connect_min_session_timeout_ms,
                 self.group_connect_session_timeout_ms, self.group_connect_max_session_timeout_ms),
                ("group.connect.heartbeat.interval.ms", self.group_connect_min_heartbeat_interval_ms,
                 self.group_connect_heartbeat_interval_ms, self.group_connect_max_heartbeat_interval_ms)):
            if not 1 <= lo <= value <= hi:
                raise ValueError(f"{name} must lie within its min and max (here {lo} <= {value} <= {hi} is false)")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
        if self.group_connect_heartbeat_interval_ms >= self.group_connect_session_timeout_ms:
            raise ValueError("group.connect.heartbeat.interval.ms must be below group.connect.session.timeout.ms")
        if self.group_connect_max_size < 1:
            raise ValueError("group.connect.max.size must be at least 1")
        if self.group_connect_max_assignment_delay_ms < 0:
            raise ValueError("group.connect.max.assignment.delay.ms can't be negative")
        if not 1000 <= self.group_connect_api_key_base <= 32764:
            raise ValueError("group.connect.api.key.base must lie within 1000..32764 (kcoord's private block, above "
                             f"every Kafka API key), not {self.group_connect_api_key_base}")
        if self.group_consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        if self.group_consumer_migration_policy.strip().lower() not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, not "
                             f"{self.group_consumer_migration_policy!r}")

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
    """`value` as the type of `default`: booleans as Kafka reads them (true or false, in any case)."""
    kind = type(default)
    if isinstance(value, kind):
        return value
    text = str(value).strip()
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{name}: expected true or false, not {value!r}")
        return text.lower() == "true"
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a valid {kind.__name__}") from None
