"""Every group setting (kcoord.config.SETTINGS, offset.metadata.max.bytes aside) shown to take effect at its boundary.

`COVERED` names, for each Kafka setting name, the test that shows its effect: one here, or an existing one that
already pins the boundary. Most tests drive an in-process coordinator on a manual clock (the harnesses of
test_classic, test_consumer, test_connect and test_migration); the classic session bounds, the rebalance protocols,
the moved connect API keys and the heartbeat intervals go through `--set` on two running `kcoord serve`s.

Session deadlines are pinned to the millisecond for each member type and each code path that arms them (a classic
member's SyncGroup and Heartbeat; a consumer or connect member's full heartbeat and the compiled quick heartbeat):
a member last heard from at t with session timeout S is a member at t+S-1 and gone at t+S (Kafka's timer fires when
now >= deadline), so a deadline computed 1 ms late or early fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError
from kcoord.config import SETTINGS, GroupConfig
from kcoord.groups.base import KCOORD_DESCRIBE_TAG
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.consumer import ConsumerGroup

from ..support.harness import DELAY, ClassicHarness, ConnectHarness, ConsumerHarness, MigrationHarness, assignor
from ..support.servers import Server, free_port, serve

HERE = "tests/server/test_settings_group.py"

COVERED: dict[str, str] = {
    "group.min.session.timeout.ms": f"{HERE}::test_classic_session_timeout_bounds_through_set",
    "group.max.session.timeout.ms": f"{HERE}::test_classic_session_timeout_bounds_through_set",
    "group.initial.rebalance.delay.ms": f"{HERE}::test_initial_rebalance_delay_to_the_millisecond",
    "group.initial.rebalance.extension": f"{HERE}::test_initial_rebalance_delay_to_the_millisecond",
    "group.max.size": "tests/unit/test_classic.py::test_group_max_size_reached_for_new_member_when_stable",
    "group.max.rebalance.timeout.ms":
        "tests/unit/test_classic.py::test_a_member_that_heartbeats_and_never_rejoins_holds_the_join_phase_only_up_to_the_bound",
    "message.max.bytes": "tests/unit/test_offsets.py::test_a_commit_whose_records_pass_message_max_bytes_is_refused_whole",
    "group.rebalance.history.size": f"{HERE}::test_rebalance_history_keeps_exactly_the_newest_h",
    "group.coordinator.rebalance.protocols": f"{HERE}::test_rebalance_protocols_gate_the_consumer_and_connect_apis",
    "group.consumer.session.timeout.ms": f"{HERE}::test_consumer_session_deadline_to_the_millisecond",
    "group.consumer.min.session.timeout.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.consumer.max.session.timeout.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.consumer.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.consumer.min.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.consumer.max.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.consumer.max.size": "tests/unit/test_consumer.py::test_new_member_is_rejected_when_maximum_members_is_reached",
    "group.consumer.assignors": f"{HERE}::test_consumer_assignors_first_is_the_default_and_others_are_refused",
    "group.consumer.assignment.interval.ms": f"{HERE}::test_consumer_assignment_interval_to_the_millisecond",
    "group.consumer.migration.policy": f"{HERE}::test_migration_policy_on_upgrade_and_downgrade_of_a_live_group",
    "group.connect.session.timeout.ms": f"{HERE}::test_connect_session_deadline_to_the_millisecond",
    "group.connect.min.session.timeout.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.connect.max.session.timeout.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.connect.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.connect.min.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.connect.max.heartbeat.interval.ms": f"{HERE}::test_modern_session_and_heartbeat_bounds",
    "group.connect.max.size": "tests/unit/test_connect.py::test_connect_max_size",
    "group.connect.max.assignment.delay.ms": f"{HERE}::test_connect_max_assignment_delay_clamps_the_scheduled_delay",
    "group.connect.assignment.interval.ms": f"{HERE}::test_connect_assignment_interval_to_the_millisecond",
    "group.connect.api.key.base": f"{HERE}::test_connect_api_key_base_at_its_maximum",
    "offsets.retention.minutes": "tests/unit/test_retention.py::test_offsets_retention_minutes_sets_how_long_offsets_are_kept",
    "offsets.retention.check.interval.ms":
        "tests/unit/test_retention.py::test_offsets_retention_check_interval_ms_is_when_expired_offsets_go",
}

ROOT = Path(__file__).resolve().parents[2]
CONNECT_DEFAULT_KEYS = {1000, 1001, 1002, 1003}
CONNECT_TOP_KEYS = {32764, 32765, 32766, 32767}  # group.connect.api.key.base at its maximum: the block ends at 32767


def test_covered_names_every_group_setting_and_existing_tests() -> None:
    assert set(COVERED) == set(SETTINGS) - {"offset.metadata.max.bytes"}
    for name, where in COVERED.items():
        path, _, test = where.partition("::")
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {re.escape(test)}\(", source, re.M), f"{name}: {where} does not exist"


def at(h, ms: int) -> None:
    """Move the clock to `ms` (absolute) and poll there once, as the server's timer task or any request does: every
    deadline up to `ms` has fired (earlier ones on the way), one at `ms` + 1 has not. Polling at `ms` itself (not only
    at the next deadline, as the harnesses' advance does) is what catches a timer that fires a millisecond early."""
    h.advance(ms - 1 - h.clock.ms)
    h.clock.ms = ms
    h.c.poll()


# ---- servers (two, shared by the module) -------------------------------------------------------------------------

def start(tmp_path_factory, name: str, *settings: str) -> Server:
    args = [a for s in settings for a in ("--set", s)]
    return serve(free_port(), tmp_path_factory.mktemp("settings") / f"{name}.log", *args)


def stop(srv: Server) -> int:
    srv.proc.terminate()
    return srv.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def classic_only(tmp_path_factory) -> Iterator[Server]:
    """Classic groups only, sessions bounded to [7000, 9000], no initial delay (a join is answered at once)."""
    srv = start(tmp_path_factory, "classic-only", "group.min.session.timeout.ms=7000",
                "group.max.session.timeout.ms=9000", "group.initial.rebalance.delay.ms=0",
                "group.coordinator.rebalance.protocols=classic")
    try:
        yield srv
    finally:
        assert stop(srv) == 0, srv.log_tail()


@pytest.fixture(scope="module")
def all_protocols(tmp_path_factory) -> Iterator[Server]:
    """Every protocol; the connect API block at its highest base; each heartbeat interval at one of its bounds."""
    srv = start(tmp_path_factory, "all-protocols", "group.coordinator.rebalance.protocols=classic,consumer,connect",
                "group.connect.api.key.base=32764", "group.consumer.min.heartbeat.interval.ms=1000",
                "group.consumer.heartbeat.interval.ms=1000", "group.connect.heartbeat.interval.ms=15000")
    try:
        yield srv
    finally:
        assert stop(srv) == 0, srv.log_tail()


def advertised(srv: Server) -> set[int]:
    with Client(srv.bootstrap) as c:
        r = c.request(wire.ApiVersionsRequest(client_software_name="settings-test", client_software_version="1"), 3)
    assert r.error_code == E.NONE
    return {k.api_key for k in r.api_keys}


def static_join(group: str, session_ms: int) -> wire.JoinGroupRequest:
    return wire.JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000,
                                 member_id="", group_instance_id="i", protocol_type="consumer",
                                 protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")])


def consumer_join(group: str, member: str) -> wire.ConsumerGroupHeartbeatRequest:
    return wire.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                              rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
                                              topic_partitions=[])


def connect_join(group: str, member: str) -> wire.ConnectGroupHeartbeatRequest:
    return wire.ConnectGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000, client_assignors=[assignor()],
        connectors_and_tasks=wire.ConnectGroupHeartbeatRequestConnectorsAndTasks(connectors=[], tasks=[]))


def test_classic_session_timeout_bounds_through_set(classic_only: Server) -> None:
    """group.min/max.session.timeout.ms = 7000/9000: JoinGroup at min-1 and max+1 is INVALID_SESSION_TIMEOUT (26) and
    makes no group; at min and at max the member joins (generation 1)."""
    with Client(classic_only.bootstrap) as c:
        outcome = {}
        for session in (6_999, 7_000, 9_000, 9_001):
            r = c.request(static_join(f"s{session}", session), 9)
            outcome[session] = (r.error_code, r.generation_id if r.error_code == E.NONE else None)
        states = {d.group_id: d.group_state for d in
                  c.request(wire.DescribeGroupsRequest(groups=[f"s{s}" for s in outcome]), 5).groups}
    assert E.INVALID_SESSION_TIMEOUT == 26
    assert outcome == {6_999: (26, None), 7_000: (E.NONE, 1), 9_000: (E.NONE, 1), 9_001: (26, None)}
    assert states == {"s6999": "Dead", "s7000": "CompletingRebalance", "s9000": "CompletingRebalance",
                      "s9001": "Dead"}


def test_rebalance_protocols_gate_the_consumer_and_connect_apis(classic_only: Server, all_protocols: Server) -> None:
    """Without "consumer", ConsumerGroupHeartbeat/Describe (68, 69) are not advertised and a heartbeat is answered
    UNSUPPORTED_VERSION; without "connect", the same for kcoord's connect block. With both, both are advertised."""
    off, on = advertised(classic_only), advertised(all_protocols)
    assert 11 in off and 11 in on  # JoinGroup: classic groups are always on
    assert not {68, 69} & off and {68, 69} <= on
    assert not CONNECT_DEFAULT_KEYS & off and CONNECT_TOP_KEYS <= on
    with Client(classic_only.bootstrap) as c:
        assert c.request(consumer_join("cg", "m1"), 1).error_code == E.UNSUPPORTED_VERSION
        assert c.request(connect_join("wg", "w1"), 0).error_code == E.UNSUPPORTED_VERSION
    with Client(all_protocols.bootstrap) as c:
        assert c.request(consumer_join("cg", "m1"), 1).error_code == E.NONE


def test_consumer_group_describe_with_the_consumer_protocol_off_is_unsupported_version() -> None:
    h = ConsumerHarness(group_coordinator_rebalance_protocols="classic")
    r = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
    assert [g.error_code for g in r.groups] == [E.UNSUPPORTED_VERSION]


def test_describe_cli_on_a_classic_only_server_describes_a_classic_group(classic_only: Server) -> None:
    # `kcoord describe` asks ConsumerGroupDescribe first; a server without consumer groups answers it
    # UNSUPPORTED_VERSION, and the command goes on to the classic group.
    with Client(classic_only.bootstrap) as c:
        assert c.request(static_join("described", 7_000), 9).error_code == E.NONE
    from kcoord.cli import describe_group

    with Client(classic_only.bootstrap) as c:
        d = describe_group(c, "described")
    assert (d["type"], d["state"], [m["group_instance_id"] for m in d["members"]]) == \
        ("classic", "CompletingRebalance", ["i"])


def test_connect_api_key_base_at_its_maximum(all_protocols: Server) -> None:
    """group.connect.api.key.base=32764 (its maximum): the four connect APIs are served and advertised at
    32764-32767 (the last int16 keys), no longer at 1000-1003; 32765 or 999 is refused."""
    assert CONNECT_TOP_KEYS <= advertised(all_protocols)
    with Client(all_protocols.bootstrap) as c:
        r = c.request(connect_join("keys", "w1"), 0, api_key=32764)
        assert (r.error_code, r.should_compute_assignment) == (E.NONE, True)
        d = c.request(wire.ConnectGroupDescribeRequest(group_ids=["keys"], include_authorized_operations=False), 0,
                      api_key=32767)
        assert [m.member_id for m in d.groups[0].members] == ["w1"]
    with Client(all_protocols.bootstrap) as c, pytest.raises(KafkaError, match="closed"):
        c.request(wire.ConnectGroupDescribeRequest(group_ids=["keys"], include_authorized_operations=False), 0)
    for bad in (999, 32765):
        with pytest.raises(ValueError, match="group.connect.api.key.base"):
            GroupConfig(group_connect_api_key_base=bad)


def test_heartbeat_interval_set_on_the_server_is_what_members_are_told(all_protocols: Server) -> None:
    """group.consumer.heartbeat.interval.ms=1000 (at its minimum, lowered to 1000) and
    group.connect.heartbeat.interval.ms=15000 (at its default maximum) reach the members over the wire."""
    with Client(all_protocols.bootstrap) as c:
        r = c.request(consumer_join("hb", "m1"), 1)
        assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, 1_000)
        r = c.request(connect_join("hb-w", "w1"), 0, api_key=32764)
        assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, 15_000)


# ---- initial rebalance delay and its extension -------------------------------------------------------------------

D = 1_234  # not the default (3000): the setting, not a constant, decides


@pytest.mark.parametrize("extension, arrivals, rebalance, answered_at", [
    ("last-join", [0], 60_000, D),
    ("last-join", [0, 0], 60_000, D),
    ("last-join", [0, 500], 60_000, 500 + D),  # D after the last new member
    ("last-join", [0, 500], D + 100, D + 100),  # capped by the rebalance timeout
    ("kafka", [0], 60_000, D),  # the first window saw no newcomer
    ("kafka", [0, 0], 60_000, 2 * D),  # a newcomer in the first window: a whole second window
    ("kafka", [0, 500], 60_000, 2 * D),
    ("kafka", [0, 0], D + 100, D + 100),  # the second window is what the rebalance timeout leaves
])
def test_initial_rebalance_delay_to_the_millisecond(extension: str, arrivals: list[int], rebalance: int,
                                                    answered_at: int) -> None:
    """group.initial.rebalance.delay.ms=D: the first join of a new group is not answered at answered_at-1 and is
    at answered_at, for each group.initial.rebalance.extension as config.py describes it."""
    h = ClassicHarness(group_initial_rebalance_delay_ms=D, group_initial_rebalance_extension=extension)
    t0 = h.clock.ms
    replies = []
    for i, offset in enumerate(arrivals):
        h.advance(t0 + offset - h.clock.ms)
        replies.append(h.join(iid=f"m{i}", rebalance=rebalance))
    at(h, t0 + answered_at - 1)
    assert not any(r.done for r in replies)
    at(h, t0 + answered_at)
    assert all(r.done and (r.response.error_code, r.response.generation_id) == (E.NONE, 1) for r in replies)
    assert len(replies[0].response.members) == len(arrivals)  # the leader's list: everyone who arrived


def test_initial_rebalance_delay_zero_answers_without_waiting() -> None:
    h = ClassicHarness(group_initial_rebalance_delay_ms=0)
    r = h.join(iid="a")
    at(h, h.clock.ms)  # the timer due now fires; no time passes
    assert r.done and r.response.generation_id == 1


# ---- rebalance history -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 3])
def test_rebalance_history_keeps_exactly_the_newest_h(size: int) -> None:
    """group.rebalance.history.size=H: after H+1 recorded changes, describe shows exactly the newest H (none at 0):
    a classic group's KIP-800 history (DescribeGroups' kcoord tag) and a connect group's epoch bumps."""
    h = ClassicHarness(group_rebalance_history_size=size)
    for i in range(size + 1):  # each join carries a reason, so each is recorded
        h.join(iid=f"m{i}", reason=f"r{i}")
    d = h.c.handle(wire.DescribeGroupsRequest(groups=["g"], unknown_tags=[(KCOORD_DESCRIBE_TAG, b"")]), 5).groups[0]
    doc = json.loads(dict(d.unknown_tags)[KCOORD_DESCRIBE_TAG])
    assert [e["group_instance_id"] for e in doc["history"]] == [f"m{i}" for i in range(1, size + 1)]
    assert [e["reason"] for e in doc["history"]] == [f"r{i}" for i in range(1, size + 1)]

    w = ConnectHarness(group_rebalance_history_size=size)
    for i in range(size + 1):  # each new worker bumps the group epoch: 1 .. H+1
        assert w.join(f"w{i}").error_code == E.NONE
    assert w.group().group_epoch == size + 1
    assert [r.group_epoch for r in w.describe().history] == list(range(2, size + 2))


# ---- session deadlines, to the millisecond -----------------------------------------------------------------------

def classic_members(h: ClassicHarness) -> list[str]:
    return [m.member_id for m in h.c.handle(wire.DescribeGroupsRequest(groups=["g"]), 5).groups[0].members]


def test_classic_session_deadline_to_the_millisecond() -> None:
    """A classic member with session timeout S: last heard from at its SyncGroup (Timers.arm) or its Heartbeat (the
    heartbeat's own deadline move) at t, it is a member at t+S-1 and removed at t+S."""
    session = 7_001
    for via in ("sync", "heartbeat"):
        h = ClassicHarness()
        r = h.join(iid="A", session=session)
        h.advance(DELAY)
        assert r.done and r.response.generation_id == 1
        mid = r.response.member_id
        h.advance(1_000)  # the join phase's arming is now 1 s older than the SyncGroup's
        assert h.sync(mid, 1, "A", assignments={mid: b"a"}).response.error_code == E.NONE
        if via == "heartbeat":
            h.advance(2_000)
            assert h.heartbeat(mid, 1, "A") == E.NONE
        t = h.clock.ms
        at(h, t + session - 1)
        assert classic_members(h) == [mid], via
        at(h, t + session)
        assert classic_members(h) == [], via
        assert h.group().history[-1].trigger == "session-timeout"


def consumer_members(h: ConsumerHarness) -> list[str]:
    d = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g"]), 0).groups[0]
    return [m.member_id for m in d.members]


def modern_members(h: ConsumerHarness | ConnectHarness) -> list[str]:
    return consumer_members(h) if isinstance(h, ConsumerHarness) else [m.member_id for m in h.describe().members]


def expires_exactly(h: ConsumerHarness | ConnectHarness, session: int, members, via: str) -> None:
    """The group's one member, last heard from now (t), is still there at t+session-1 and gone at t+session."""
    t = h.clock.ms
    at(h, t + session - 1)
    before = members(h)
    at(h, t + session)
    assert (len(before), members(h)) == (1, []), via


def not_the_quick_path(*args, **kwargs) -> None:
    raise AssertionError("the heartbeat was not answered by the compiled quick path")


def test_consumer_session_deadline_to_the_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """group.consumer.session.timeout.ms=S (not a default): a member last heard from at t by a full heartbeat (its
    join: ConsumerGroup.arm_session) or a regular one (the compiled quick_heartbeat) is a member at t+S-1 and is
    fenced and removed at t+S."""
    session = 12_345
    config = {"group_consumer_min_session_timeout_ms": 10_000, "group_consumer_session_timeout_ms": session}
    for via in ("join", "quick"):
        h = ConsumerHarness(**config)
        assert h.join("a").error_code == E.NONE
        if via == "quick":
            h.advance(1_000)
            monkeypatch.setattr(h.group(), "consumer_heartbeat", not_the_quick_path)
            r = h.hb("a", 1)
            assert (r.error_code, r.member_epoch) == (E.NONE, 1)
        expires_exactly(h, session, modern_members, via)


def test_connect_session_deadline_to_the_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """group.connect.session.timeout.ms=S: a worker last heard from at t by a full heartbeat (ConnectGroup.
    arm_session) or a regular one (the compiled quick_heartbeat) is a member at t+S-1 and is fenced at t+S."""
    session = 12_345
    config = {"group_connect_min_session_timeout_ms": 10_000, "group_connect_session_timeout_ms": session}
    for via in ("join", "quick"):
        h = ConnectHarness(**config)
        assert h.join("w1").error_code == E.NONE
        if via == "quick":
            h.compute("w1", {"w1": {"c": ["a"]}})
            assert h.hb("w1", owned={}).error_code == E.NONE  # reaches the installed epoch (a full step)
            assert h.hb("w1", owned={"c": ["a"]}).error_code == E.NONE
            h.advance(1_000)
            monkeypatch.setattr(h.group(), "connect_heartbeat", not_the_quick_path)
            r = h.hb("w1")
            assert (r.error_code, r.member_epoch) == (E.NONE, h.group().assignment_epoch)
        expires_exactly(h, session, modern_members, via)


# ---- consumer and connect: the session and heartbeat bounds --------------------------------------------------------

@pytest.mark.parametrize("kind", ["consumer", "connect"])
def test_modern_session_and_heartbeat_bounds(kind: str) -> None:
    """group.<kind>.min/max.session.timeout.ms and min/max.heartbeat.interval.ms bound the group's session timeout and
    heartbeat interval (Kafka's GroupCoordinatorConfig rules; the requests carry neither): one below the minimum or
    above the maximum is refused naming both settings; at either bound the setting is what members are given: the
    heartbeat interval in every response, and a session that ends exactly S after the last heartbeat."""
    g = f"group_{kind}_"
    base = {f"{g}min_session_timeout_ms": 10_000, f"{g}max_session_timeout_ms": 20_000,
            f"{g}min_heartbeat_interval_ms": 1_000, f"{g}max_heartbeat_interval_ms": 3_000,
            f"{g}session_timeout_ms": 15_000, f"{g}heartbeat_interval_ms": 2_000}
    for field, value, bound in [("session_timeout_ms", 9_999, "min.session"),
                                ("session_timeout_ms", 20_001, "max.session"),
                                ("heartbeat_interval_ms", 999, "min.heartbeat"),
                                ("heartbeat_interval_ms", 3_001, "max.heartbeat")]:
        with pytest.raises(ValueError) as e:
            GroupConfig(**{**base, g + field: value})
        name = f"group.{kind}.{field.replace('_', '.')}"
        assert f"{name} ({value})" in str(e.value) and f"group.{kind}.{bound}" in str(e.value)
    for session, interval in [(10_000, 1_000), (20_000, 3_000)]:
        config = {**base, f"{g}session_timeout_ms": session, f"{g}heartbeat_interval_ms": interval}
        h = ConsumerHarness(**config) if kind == "consumer" else ConnectHarness(**config)
        r = h.join("a")
        assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, interval)
        t = h.clock.ms
        at(h, t + session - 1)
        assert modern_members(h) == ["a"]
        at(h, t + session)
        assert modern_members(h) == []


# ---- consumer assignors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("interval", [0, 1, 1_000, 15_000])
def test_consumer_assignment_interval_to_the_millisecond(interval: int) -> None:
    """group.consumer.assignment.interval.ms=L (KIP-1263): a join L-1 ms after the last target computation waits,
    and the target comes at L exactly, from the group's timer; a join L ms or more after it is computed at once;
    L=0 computes at every change. Out of 0..15000 it is refused."""
    h = ConsumerHarness({"T": 4}, group_consumer_assignment_interval_ms=interval)
    h.join("a")
    g = h.group()
    if interval:
        h.advance(interval - 1)
    h.join("b")
    if interval:
        assert (g.group_epoch, g.assignment_epoch) == (2, 1)
        h.advance(1)
    assert g.assignment_epoch == 2
    h.advance(interval)
    h.join("c")
    assert g.assignment_epoch == g.group_epoch == 3
    for bad in (-1, 15_001):
        with pytest.raises(ValueError, match="group.consumer.assignment.interval.ms"):
            GroupConfig(group_consumer_assignment_interval_ms=bad)


@pytest.mark.parametrize("interval", [0, 1, 1_000, 15_000])
def test_connect_assignment_interval_to_the_millisecond(interval: int) -> None:
    """group.connect.assignment.interval.ms=L: a worker joining L-1 ms after the last ask, while the asked worker
    computes, leaves nobody asked until L exactly; L=0 asks again at once. Out of 0..15000 it is refused."""
    h = ConnectHarness(group_connect_assignment_interval_ms=interval)
    h.join("w1")
    g = h.group()
    assert g.computing == "w1" and h.prepare("w1").error_code == E.NONE
    if interval:
        h.advance(interval - 1)
    h.join("w2")
    if interval:
        assert g.computing is None
        h.advance(1)
    assert g.computing is not None and h.hb(g.computing).should_compute_assignment
    for bad in (-1, 15_001):
        with pytest.raises(ValueError, match="group.connect.assignment.interval.ms"):
            GroupConfig(group_connect_assignment_interval_ms=bad)


@pytest.mark.parametrize("assignors, default, refused", [
    ("uniform,range", "uniform", "sticky"),
    ("range,uniform", "range", "sticky"),
    ("range", "range", "uniform"),
])
def test_consumer_assignors_first_is_the_default_and_others_are_refused(assignors: str, default: str,
                                                                        refused: str) -> None:
    """group.consumer.assignors: members naming no assignor get the first (describe names it, and the targets are
    that assignor's: range gives topics T and U, one partition each, both to one of two members, uniform one each);
    a member naming an assignor not listed gets UNSUPPORTED_ASSIGNOR (112) and does not join."""
    h = ConsumerHarness({"T": 1, "U": 1}, group_consumer_assignors=assignors)
    assert h.join("a", ("T", "U")).error_code == E.NONE
    assert h.join("b", ("T", "U")).error_code == E.NONE
    d = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g"]), 0).groups[0]
    assert d.assignor_name == default
    sizes = sorted(sum(len(tp.partitions) for tp in m.target_assignment.topic_partitions) for m in d.members)
    assert sizes == ([0, 2] if default == "range" else [1, 1])
    r = h.join("c", ("T",), assignor=refused)
    assert (r.error_code, E.UNSUPPORTED_ASSIGNOR) == (112, 112) and refused in r.error_message
    assert sorted(consumer_members(h)) == ["a", "b"]


# ---- migration policy --------------------------------------------------------------------------------------------

def consumer_group_with_a_classic_member(h: MigrationHarness) -> str:
    """Group "g": consumer-protocol member "c", then a classic member that joined it with JoinGroup (no upgrade
    needed: the group is already a consumer group). Returns the classic member's id."""
    assert h.chb("c", 0, join=True).error_code == E.NONE
    mid = h.cjoin().response.member_id
    j = h.cjoin(mid)
    assert j.done and j.response.error_code == E.NONE
    assert h.csync(mid, j.response.generation_id).response.error_code == E.NONE
    assert isinstance(h.group(), ConsumerGroup)
    return mid


@pytest.mark.parametrize("policy, upgrades, downgrades", [
    ("bidirectional", True, True),
    ("upgrade", True, False),
    ("downgrade", False, True),
    ("disabled", False, False),
])
def test_migration_policy_on_upgrade_and_downgrade_of_a_live_group(policy: str, upgrades: bool,
                                                                   downgrades: bool) -> None:
    """group.consumer.migration.policy: the first consumer-protocol member joining a live classic group converts it
    (or gets GROUP_ID_NOT_FOUND and the group stays classic, its members kept); the last consumer-protocol member
    leaving a group of classic members turns it back into a classic group (or it stays a consumer group)."""
    h = MigrationHarness(group_consumer_migration_policy=policy)
    a, b = h.form_classic(2)
    r = h.chb("c", 0, join=True)
    if upgrades:
        assert r.error_code == E.NONE and isinstance(h.group(), ConsumerGroup)
        assert set(h.group().members) == {a, b, "c"}
    else:
        assert r.error_code == E.GROUP_ID_NOT_FOUND and "online upgrade is disabled" in r.error_message
        assert isinstance(h.group(), ClassicGroup) and set(h.group().members.members) == {a, b}

    h = MigrationHarness(group_consumer_migration_policy=policy)
    mid = consumer_group_with_a_classic_member(h)
    assert h.chb("c", -1).error_code == E.NONE
    if downgrades:
        assert isinstance(h.group(), ClassicGroup) and set(h.group().members.members) == {mid}
    else:
        assert isinstance(h.group(), ConsumerGroup) and set(h.group().members) == {mid}


@pytest.mark.parametrize("classic_members, downgrades", [(2, True), (3, False)])
def test_group_max_size_bounds_the_downgrade(classic_members: int, downgrades: bool) -> None:
    """group.max.size=2 also bounds the online downgrade (Kafka's validateOnlineDowngradeWithFencedMembers): the
    classic members left when the last consumer-protocol member goes become a classic group only if they are at
    most group.max.size."""
    h = MigrationHarness(group_max_size=2)
    assert h.chb("c", 0, join=True).error_code == E.NONE
    ids = set()
    for _ in range(classic_members):
        mid = h.cjoin().response.member_id
        j = h.cjoin(mid)
        assert j.done and j.response.error_code == E.NONE
        ids.add(mid)
    assert h.chb("c", -1).error_code == E.NONE
    g = h.group()
    assert isinstance(g, ClassicGroup if downgrades else ConsumerGroup)
    assert set(g.members.members if downgrades else g.members) == ids


# ---- connect: the scheduled delay's clamp ------------------------------------------------------------------------

@pytest.mark.parametrize("limit, asked, armed", [
    (5_000, 4_999, 4_999),
    (5_000, 5_000, 5_000),
    (5_000, 5_001, 5_000),
    (5_000, 2**31 - 1, 5_000),
    (0, 60_000, 0),  # no delay at all
])
def test_connect_max_assignment_delay_clamps_the_scheduled_delay(limit: int, asked: int, armed: int) -> None:
    """group.connect.max.assignment.delay.ms=L: an Install's AssignmentDelayMs is clamped to L; the delay
    describe reports is the clamped one, and the epoch bump that ends it comes at exactly that many ms."""
    h = ConnectHarness(group_connect_max_assignment_delay_ms=limit)
    assert h.join("w1").error_code == E.NONE
    h.compute("w1", {"w1": {}}, delay=asked)
    epoch = h.group().group_epoch
    assert h.describe().delay_remaining_ms == (armed if armed else -1)
    if armed:
        t = h.clock.ms
        at(h, t + armed - 1)
        assert h.describe().group_epoch == epoch
        at(h, t + armed)
        d = h.describe()
        assert d.group_epoch == epoch + 1 and d.history[-1].reason == "the scheduled rebalance delay ended"
    else:
        h.advance(30_000)  # within w1's session
        assert h.describe().group_epoch == epoch and h.describe().delay_remaining_ms == -1
