"""Groups of real Kafka consumers against `kcoord serve`, for the interop tests: the topic they share, a test's
classic group of real members (`Group`) and whether it covers the topic (`coverage`), a KIP-848 group's watch for a
partition held twice (`Watch`), the polling wait that fails with what it saw (and the server's log tail), and the
offsets a group committed."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import pytest

from kcoord import wire
from kcoord.client import Client

from . import waits
from .interop_consumer import ConsumerMember
from .interop_member import MEMBERS, Member
from .servers import Server

TOPIC = "orders"
PARTITIONS = 12
ALL = frozenset(range(PARTITIONS))
FORM_TIMEOUT = 40.0
_group_ids = itertools.count()


class Group:
    """One consumer group of a test: starts members, closes whatever is left at teardown."""

    def __init__(self, server: Server, kind: str, name: str, strategy: str | None = None) -> None:
        self.server = server
        self.kind = kind
        self.id = f"{name}-{next(_group_ids)}"
        self.strategy = strategy
        self.members: list[Member] = []

    def start(self, client_id: str, instance_id: str | None = None, track_positions: bool = False,
              kind: str | None = None) -> Member:
        m = MEMBERS[kind or self.kind](self.server.bootstrap, self.id, TOPIC, client_id=client_id, instance_id=instance_id,
                               strategy=self.strategy, track_positions=track_positions).start()
        self.members.append(m)
        return m

    def close(self, *members: Member) -> None:
        """Close several members at once (each on its own thread), then drop them from the group's list."""
        for m in members:
            m._stop.set()
        for m in members:
            m.close()
            self.members.remove(m)

    def describe(self) -> dict:
        return self.server.describe(self.id)


def wait_until(check: Callable[[], tuple[bool, object]], timeout: float, what: str, server: Server | None = None):
    """Poll check() -> (done, observed) until done; fail with the last observation (and the server's log tail)
    after `timeout` seconds."""
    return waits.wait_until(check, timeout, what, interval=0.1, show=pretty,
                            more=None if server is None else lambda: f"\nserver log tail:\n{server.log_tail()}")


def pretty(observed) -> str:
    return json.dumps(observed, indent=1, default=lambda o: sorted(o) if isinstance(o, (set, frozenset)) else repr(o))


def summary(d: dict) -> dict:
    """The parts of a describe_group answer a failure message needs."""
    return {"state": d["state"], "generation": d["generation"], "leader": d["leader"], "protocol": d["protocol"],
            "members": [{"member_id": m["member_id"], "instance": m["group_instance_id"], "client": m["client_id"],
                         "assignment": m["assignment"]} for m in d["members"]],
            "history": [(h["generation"], h["trigger"], h["member_id"], h["group_instance_id"], h["reason"])
                        for h in d["history"]]}


def described_partitions(m: dict) -> frozenset[int]:
    a = m["assignment"]
    if a == "":
        return frozenset()  # no assignment bytes: the group is not Stable (describe shows them only then)
    assert isinstance(a, dict), f"member {m['member_id']}: undecodable assignment {a!r}"
    return frozenset(a.get(TOPIC, ()))


def coverage(members: list[Member], group: Group) -> tuple[bool, dict]:
    """Whether `members` (and nobody else) form the stable group, every partition assigned to exactly one of
    them, each non-empty, the clients' own view equal to the server's."""
    client_view = {m.client_id: m.assigned for m in members}
    errors = {m.client_id: repr(m.error) for m in members if m.error is not None}
    d = group.describe()
    if errors:
        pytest.fail(f"a {group.kind} member failed: {errors}; server: {pretty(summary(d))}")
    server_view = {m["client_id"]: described_partitions(m) for m in d["members"]}
    owned = [p for ps in client_view.values() for p in ps]
    ok = (not errors and d["state"] == "Stable" and len(d["members"]) == len(members)
          and server_view == client_view and all(client_view.values())
          and sorted(owned) == sorted(ALL))
    observed = {"client_view": client_view, "errors": errors, "server": summary(d),
                "missing": ALL - set(owned), "overlap": sorted({p for p in owned if owned.count(p) > 1})}
    return ok, observed


class Watch:
    """Samples every member's holdings on every change and fails on a partition held twice."""

    def __init__(self) -> None:
        self.members: list[ConsumerMember] = []
        self.violations: list[str] = []
        self.fenced: set[str] = set()  # fenced by the coordinator: they hold on until their next heartbeat says so
        self._lock = threading.Lock()

    def fence(self, m: ConsumerMember) -> None:
        """A member the test has the coordinator fence (an admin removal): its partitions move at once, as in Kafka,
        while the client believes it holds them until its next heartbeat is refused. It leaves the check."""
        with self._lock:
            self.fenced.add(m.client_id)

    def check(self, _m=None) -> None:
        with self._lock:
            seen: dict[tuple[str, int], str] = {}
            for m in self.members:
                if m.client_id in self.fenced:
                    continue
                for tp in m.held:
                    if tp in seen:
                        self.violations.append(f"{tp} held by {seen[tp]} and {m.client_id}")
                    seen[tp] = m.client_id

    def start(self, server: Server, group: str, client_id: str, **kw) -> ConsumerMember:
        m = ConsumerMember(server.bootstrap, group, kw.pop("topics", [TOPIC]), client_id=client_id,
                           on_change=self.check, **kw)
        self.members.append(m)
        return m.start()

    def stop(self, m: ConsumerMember) -> None:
        m.stop()
        self.members.remove(m)

    def close(self) -> None:
        for m in list(self.members):
            self.stop(m)


def committed(srv, group: str) -> dict[int, int]:
    with Client(srv.bootstrap) as c:
        resp = c.call(9, 8, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
            group_id=group, topics=[wire.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1, 2, 3])])]))
    return {p.partition_index: p.committed_offset for p in resp.groups[0].topics[0].partitions
            if p.committed_offset >= 0}
