"""Coordinator settings, named and defaulted as Kafka's broker configs are."""

from __future__ import annotations

from dataclasses import dataclass, fields

# Kafka's ClassicGroupMember / GroupCoordinatorConfig constants.
CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    # KIP-800 reasons are kept in a bounded per-group history (Kafka only logs them); this bounds it.
    group_rebalance_history_size: int = 64
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_kafka(cls, settings: dict[str, str | int]) -> "GroupConfig":
        """Build from Kafka-style names (`group.initial.rebalance.delay.ms`); unknown names are an error."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        kwargs = {}
        for key, value in settings.items():
            if key not in known:
                raise ValueError(f"unknown setting {key!r}; known: {', '.join(sorted(known))}")
            kwargs[known[key]] = int(value)
        return cls(**kwargs)
