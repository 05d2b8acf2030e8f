"""What happens to groups, as an operator sees it: counted for the metrics endpoint (kcoord.metrics) and logged.

The group types call a `GroupEvents` at the moments Kafka's group coordinator logs and counts: a rebalance (a
classic join phase, or a consumer or connect group's epoch bump) starting and ending, a member's session or
rebalance deadline expiring, a static member replaced by a new instance, an admin removal. Each call is one INFO
line on the `kcoord.groups` logger (its fields also in the record's `kcoord` attribute, which the JSON log format
writes out) and a few integer additions; nothing here runs per heartbeat. Nothing of a request's payload is
logged: ids, counts, the trigger and the client's KIP-800 reason (a short text the client chose to send).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from bisect import bisect_left
from collections import Counter

log = logging.getLogger("kcoord.groups")

# What a group records as the trigger of a change (its rebalance history), by class of KIP-800 reason.
EXPIRY_TRIGGERS = frozenset({"session-timeout", "join-timeout", "sync-timeout", "rebalance-timeout"})
STATIC_REPLACEMENT = "static-rejoin"
ADMIN_REMOVAL = "admin-removal"
ADMIN_REMOVAL_REASON = "member was removed by an admin"  # KIP-800: the admin client's default reason


def join_reason(reason: str | None) -> str:
    """A KIP-800 reason as Kafka writes it when the client gave none."""
    return reason if reason else "not provided"

# Rebalance durations: from a few milliseconds (a delay of 0, members all present) to Kafka's 5-minute default
# rebalance timeout and beyond.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Histogram:
    """Counts per bucket (upper bounds, `le`) and their sum: what a Prometheus histogram exposes, kept in plain
    integers so observing costs a bisect and two additions."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


# The principal of the request being handled (set by the server around each request on an authenticating
# listener, None otherwise): the group events a request causes name who sent it.
REQUEST_PRINCIPAL: list[str | None] = [None]


class GroupEvents:
    """Counters of group events by group type, and their log lines. One per coordinator."""

    def __init__(self) -> None:
        self.rebalances_started: Counter[tuple[str, str]] = Counter()  # (group type, trigger)
        self.rebalances_completed: Counter[str] = Counter()  # group type
        self.rebalance_seconds: dict[str, Histogram] = {}  # group type: time from start to Stable
        self.expiries: Counter[tuple[str, str]] = Counter()  # (group type, which deadline)
        self.static_replacements: Counter[str] = Counter()
        self.admin_removals: Counter[str] = Counter()

    @staticmethod
    def _log(message: str, **fields) -> None:
        if log.isEnabledFor(logging.INFO):
            if REQUEST_PRINCIPAL[0] is not None:
                fields["principal"] = REQUEST_PRINCIPAL[0]
            log.info(message + " " + " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"
                                              for k, v in fields.items() if v is not None),
                     extra={"kcoord": fields})

    def rebalance_started(self, group_type: str, group_id: str, epoch: int, members: int, trigger: str,
                          reason: str) -> None:
        """A classic group entered PreparingRebalance (`epoch`: the generation it rebalances from), or a consumer
        or connect group's epoch moved (`epoch`: the new group epoch)."""
        self.rebalances_started[group_type, trigger] += 1
        self._log("rebalance started", event="rebalance-started", group_type=group_type, group=group_id,
                  epoch=epoch, members=members, trigger=trigger, reason=reason)

    def join_completed(self, group_id: str, generation: int, members: int, leader: str | None) -> None:
        """A classic group's join phase ended: the generation is formed, SyncGroup is awaited."""
        self._log("join phase completed", event="join-completed", group_type="classic", group=group_id,
                  epoch=generation, members=members, leader=leader)

    def rebalance_completed(self, group_type: str, group_id: str, epoch: int, members: int, seconds: float,
                            outcome: str = "Stable") -> None:
        """A rebalance ended: the group is Stable again (or, `outcome`, Empty: everybody left during it)."""
        self.rebalances_completed[group_type] += 1
        h = self.rebalance_seconds.get(group_type)
        if h is None:
            h = self.rebalance_seconds[group_type] = Histogram(DURATION_BUCKETS)
        h.observe(seconds)
        self._log("rebalance completed", event="rebalance-completed", group_type=group_type, group=group_id,
                  epoch=epoch, members=members, seconds=round(seconds, 3), outcome=outcome)

    def member_event(self, group_type: str, group_id: str, epoch: int, trigger: str, member_id: str,
                     instance_id: str | None, reason: str) -> None:
        """A change a group records in its history; expiries, static replacements and admin removals are counted
        and logged (joins and leaves show in the rebalance they start)."""
        if trigger in EXPIRY_TRIGGERS:
            self.expiries[group_type, trigger] += 1
            self._log("member expired", event="member-expired", group_type=group_type, group=group_id, epoch=epoch,
                      trigger=trigger, member=member_id, instance=instance_id)
        elif trigger == STATIC_REPLACEMENT:
            self.static_replacements[group_type] += 1
            self._log("static member replaced", event="static-member-replaced", group_type=group_type,
                      group=group_id, epoch=epoch, member=member_id, instance=instance_id, reason=reason)
        elif trigger == ADMIN_REMOVAL:
            self.admin_removals[group_type] += 1
            self._log("member removed by an admin", event="admin-removal", group_type=group_type, group=group_id,
                      epoch=epoch, member=member_id, instance=instance_id, reason=reason)


# Request latencies (kcoord._core._stats counts them): from a heartbeat's tens of microseconds to a JoinGroup parked
# for a whole rebalance.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0, 300.0)


NO_EVENTS = GroupEvents()  # what a group built outside a coordinator reports to (tests, tools)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601 with milliseconds), level, logger, message, then the event's
    fields (a record's `kcoord` attribute) and, for a failure, the exception's text."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
               "message": record.getMessage()}
        fields = getattr(record, "kcoord", None)
        if fields:
            out.update((k, v) for k, v in fields.items() if k not in out)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        t = time.gmtime(record.created)
        return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(record.msecs):03d}Z"


LOG_FORMATS = ("text", "json")


class StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a line is written, not the stream of the moment it was made (an
    embedding program or a test harness may swap it, and a closed one must not be written to)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


_handler: logging.Handler | None = None


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """The server's logging: to stderr, at `level` (a logging level name), as text or JSON lines. Called again, it
    replaces its own handler and leaves any other alone."""
    global _handler
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    _handler = StderrHandler()
    _handler.setFormatter(JsonFormatter() if fmt == "json" else
                          logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(_handler)
    root.setLevel(level)
