"""`kcoord serve` as a subprocess on a free loopback port, driven over real sockets with kcoord's own codec."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord import wire

from ..support.servers import api_versions, recv_frame, start, stop

# Exactly what is implemented: the broker surface consumers need, and the classic group and offset APIs.
# Nothing else is advertised (GetTelemetrySubscriptions, 71, among them).
SERVED = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 29, 30, 31, 36, 37, 42, 47, 50, 51, 68, 69}
# 20: DeleteTopics; 68, 69: KIP-848; 17, 36: SASL (ILLEGAL_SASL_STATE outside a SASL listener); 50, 51: SCRAM users;
# 29-31: the ACL APIs (SECURITY_DISABLED without an authorizer)


@pytest.fixture(scope="module")
def server():
    proc, port = start("socket.request.max.bytes=1048576")
    yield port
    assert stop(proc) == 0, "server did not shut down cleanly on SIGTERM"


def wait_parked(port: int, group: str) -> None:
    """Until `group` is PreparingRebalance (a join is parked in it), read through DescribeGroups on its own
    connection: the order of events is the server's own state, not a pause."""
    from kcoord.client import Client

    deadline = time.monotonic() + 20
    with Client(f"127.0.0.1:{port}") as c:
        while (g := c.call(15, 5, wire.DescribeGroupsRequest(groups=[group])).groups[0]).group_state \
                != "PreparingRebalance":
            assert time.monotonic() < deadline, f"{group} never parked a join: {g.group_state}"
            time.sleep(0.01)


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_every_version(server, version) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as s:
        resp = api_versions(s, version)
    assert resp.error_code == 0
    assert {k.api_key for k in resp.api_keys} == SERVED


def test_too_new_api_versions_answers_v0_with_unsupported_version(server) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 99, 5, -1))
        corr, resp = wire.decode_response(18, 0, recv_frame(s))
    assert corr == 5 and resp.error_code == 35
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


@pytest.mark.parametrize("payload", [
    b"\xde\xad\xbe\xef" * 8,                       # garbage size prefix (negative)
    struct.pack(">i", 2**31 - 1) + b"x",           # 2 GiB claimed
    struct.pack(">i", 3) + b"\x00\x12\x00",         # a frame too short for a request header
    struct.pack(">ihhih", 10, 777, 0, 1, -1),      # unknown API key
    struct.pack(">ihhih", 10, 12, 42, 1, -1),      # unsupported Heartbeat version
], ids=["garbage", "2GiB-prefix", "truncated-header", "unknown-api", "unsupported-version"])
def test_bad_input_closes_only_that_connection(server, payload) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as good:
        with socket.create_connection(("127.0.0.1", server), timeout=5) as bad:
            bad.sendall(payload)
            assert bad.recv(100) == b""  # closed by the server
        assert api_versions(good, 3).error_code == 0  # the other client is still served


# ---- the group protocol over the wire, with frames only kcoord's codec builds (v8/v9) ------------------

def join_v(c, version: int, iid: str, member_id: str = "", reason: str | None = None) -> "wire.JoinGroupResponse":
    return c.call(11, version, wire.JoinGroupRequest(
        group_id="wire-g", session_timeout_ms=30_000, rebalance_timeout_ms=60_000, member_id=member_id,
        group_instance_id=iid, protocol_type="consumer", reason=reason,
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\x00\x00")]))


def form_static_pair(server, version: int):
    """Two static members joined over two connections (the join is parked, so they run concurrently)."""
    from kcoord.client import Client

    a, b = Client(f"127.0.0.1:{server}"), Client(f"127.0.0.1:{server}")
    corr_a = a.send(11, version, wire.JoinGroupRequest(
        group_id="wire-g", session_timeout_ms=30_000, rebalance_timeout_ms=60_000, member_id="",
        group_instance_id="lead", protocol_type="consumer", reason="first start",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
    wait_parked(server, "wire-g")  # the leader's join is in before the follower's
    corr_b = b.send(11, version, wire.JoinGroupRequest(
        group_id="wire-g", session_timeout_ms=30_000, rebalance_timeout_ms=60_000, member_id="",
        group_instance_id="follow", protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
    ra, rb = a.receive(11, version, corr_a), b.receive(11, version, corr_b)
    assert ra.error_code == rb.error_code == 0 and ra.leader == ra.member_id
    gen = ra.generation_id
    corr = b.send(14, 5, wire.SyncGroupRequest(group_id="wire-g", generation_id=gen, member_id=rb.member_id,
                                               group_instance_id="follow", protocol_type="consumer",
                                               protocol_name="range"))
    sa = a.call(14, 5, wire.SyncGroupRequest(
        group_id="wire-g", generation_id=gen, member_id=ra.member_id, group_instance_id="lead",
        protocol_type="consumer", protocol_name="range",
        assignments=[wire.SyncGroupRequestAssignment(member_id=ra.member_id, assignment=b"A"),
                     wire.SyncGroupRequestAssignment(member_id=rb.member_id, assignment=b"B")]))
    sb = b.receive(14, 5, corr)
    assert (sa.assignment, sb.assignment) == (b"A", b"B")
    return a, b, ra, rb


@pytest.mark.parametrize("version,skip", [(9, True), (8, False)])
def test_kip814_static_leader_restart_over_the_wire(fresh_server, version, skip) -> None:
    from kcoord.cli import describe_group
    from kcoord.client import Client

    a, b, ra, rb = form_static_pair(fresh_server, version)
    a.close()  # the leader's process restarts: a new connection, an empty member id, the same instance id
    with Client(f"127.0.0.1:{fresh_server}") as a2:
        r = join_v(a2, version, "lead", reason="restarted after upgrade")
        assert r.error_code == 0 and r.generation_id == ra.generation_id and r.member_id != ra.member_id
        if skip:  # KIP-814: told it leads, given every member, and told not to assign
            assert r.skip_assignment and r.leader == r.member_id
            assert sorted(m.group_instance_id for m in r.members) == ["follow", "lead"]
        else:  # before v9: the old leader id, so the restarted leader acts as a follower
            assert r.leader == ra.member_id and r.members == []
        s = a2.call(14, 5, wire.SyncGroupRequest(group_id="wire-g", generation_id=r.generation_id,
                                                 member_id=r.member_id, group_instance_id="lead",
                                                 protocol_type="consumer", protocol_name="range"))
        assert s.assignment == b"A"
        with Client(f"127.0.0.1:{fresh_server}") as cli:
            d = describe_group(cli, "wire-g")
    b.close()
    assert d["state"] == "Stable" and d["generation"] == ra.generation_id
    reasons = [(h["trigger"], h["group_instance_id"], h["reason"]) for h in d["history"]]
    assert ("static-rejoin", "lead", "restarted after upgrade") in reasons  # KIP-800 reason from JoinGroup v8+
    assert ("join", "lead", "first start") in reasons


def test_kip800_leave_v5_reason_shown_by_describe_cli(fresh_server) -> None:
    a, b, ra, rb = form_static_pair(fresh_server, 9)
    resp = b.call(13, 5, wire.LeaveGroupRequest(group_id="wire-g", members=[
        wire.LeaveGroupRequestMemberIdentity(member_id=rb.member_id, group_instance_id="follow",
                                             reason="scaling down")]))
    assert resp.members[0].error_code == 0
    out = subprocess.run([sys.executable, "-m", "kcoord.cli", "describe", "wire-g", "--bootstrap",
                          f"127.0.0.1:{fresh_server}"], capture_output=True, text=True, timeout=30)
    a.close(), b.close()
    assert out.returncode == 0, out.stderr
    assert "scaling down" in out.stdout and "REBALANCE HISTORY" in out.stdout


def test_remove_members_cli_rebalances_at_once_and_describe_shows_reason(fresh_server) -> None:
    from kcoord.cli import describe_group
    from kcoord.client import Client

    a, b, ra, rb = form_static_pair(fresh_server, 9)
    bootstrap = f"127.0.0.1:{fresh_server}"
    out = subprocess.run([sys.executable, "-m", "kcoord.cli", "remove-members", "wire-g", "--instance-id", "follow",
                          "--json", "--bootstrap", bootstrap], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["members"] == [{"group_instance_id": "follow", "error": "NONE"}]
    with Client(bootstrap) as cli:
        d = describe_group(cli, "wire-g")
    # no session-timeout wait: the group is rebalancing now, without the removed member
    assert d["state"] == "PreparingRebalance"
    assert [m["group_instance_id"] for m in d["members"]] == ["lead"]
    assert d["history"][-1]["reason"] == "member was removed by an admin"
    hb = a.call(12, 4, wire.HeartbeatRequest(group_id="wire-g", generation_id=ra.generation_id,
                                             member_id=ra.member_id, group_instance_id="lead"))
    assert hb.error_code == 27  # REBALANCE_IN_PROGRESS: the survivor rejoins
    out = subprocess.run([sys.executable, "-m", "kcoord.cli", "describe", "wire-g", "--bootstrap", bootstrap],
                         capture_output=True, text=True, timeout=30)
    assert "admin-removal" in out.stdout and "member was removed by an admin" in out.stdout
    a.close(), b.close()


# ---- connections left idle, and the server keeps serving ---------------------------------------------

def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def test_thousand_idle_connections_memory_bounded_others_served() -> None:
    proc, port = start()
    try:
        before = rss_kb(proc.pid)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(1000)]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            assert api_versions(s, 3).error_code == 0
        grown = rss_kb(proc.pid) - before
        for s in idle:
            s.close()
        # 1,000 idle connections cost their read buffers and protocol objects, not more: about 20 KiB each
        assert grown < 1000 * 40, f"RSS grew by {grown} KiB for 1,000 idle connections"
    finally:
        assert stop(proc) == 0


def test_responses_keep_request_order_behind_a_parked_join(fresh_server) -> None:
    # JoinGroup (parked for the initial delay) then ApiVersions, pipelined on one connection: Kafka answers
    # in request order, so the ApiVersions answer waits behind the join.
    from kcoord.client import Client

    with Client(f"127.0.0.1:{fresh_server}") as c:
        join = wire.JoinGroupRequest(group_id="order-g", session_timeout_ms=30_000, member_id="",
                                     group_instance_id="i", protocol_type="consumer",
                                     protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")])
        frames = wire.encode_request(11, 9, 1, "c", join) + wire.encode_request(18, 3, 2, "c", wire.ApiVersionsRequest())
        c.sock.sendall(frames)
        first = c.receive(11, 9, 1)
        second = c.receive(18, 3, 2)
    assert first.error_code == 0 and first.generation_id == 1 and second.error_code == 0


# ---- limits and shutdown ------------------------------------------------------------------------------

def test_max_connections_refuses_the_extra_connection() -> None:
    proc, port = start("max.connections=3")
    try:
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        for s in held:
            assert api_versions(s, 3).error_code == 0
        extra = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert extra.recv(10) == b""  # closed at once
        extra.close()
        assert api_versions(held[0], 3).error_code == 0  # the others are still served
        for s in held:
            s.close()
    finally:
        assert stop(proc) == 0


def test_idle_connections_are_reaped() -> None:
    # connections.max.idle.ms=2000: a connection silent for it is closed, never before; one that keeps talking
    # for longer than that is kept. (A lower bound only: a loaded machine can close it late, never early.)
    proc, port = start("connections.max.idle.ms=2000")
    try:
        busy = socket.create_connection(("127.0.0.1", port), timeout=30)
        idle = socket.create_connection(("127.0.0.1", port), timeout=30)
        t0 = time.monotonic()
        assert api_versions(idle, 3).error_code == 0
        while time.monotonic() - t0 < 4.5:  # a request every 0.25 s, for over two idle timeouts
            assert api_versions(busy, 3).error_code == 0
            time.sleep(0.25)
        assert idle.recv(10) == b""  # the server has closed the silent one
        assert time.monotonic() - t0 >= 2.0
        assert api_versions(busy, 3).error_code == 0  # the talking one is still served
        busy.close()
        idle.close()
    finally:
        assert stop(proc) == 0


def test_sigterm_answers_parked_requests_then_exits_cleanly() -> None:
    from kcoord.client import Client

    proc, port = start("group.initial.rebalance.delay.ms=60000")
    c = Client(f"127.0.0.1:{port}")
    corr = c.send(11, 9, wire.JoinGroupRequest(
        group_id="shutdown-g", session_timeout_ms=30_000, member_id="", group_instance_id="i",
        protocol_type="consumer", protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    wait_parked(port, "shutdown-g")  # the join is parked for the initial delay
    proc.terminate()
    resp = c.receive(11, 9, corr)
    assert resp.error_code == 16  # NOT_COORDINATOR: the client looks for the coordinator again
    assert c.sock.recv(10) == b""
    c.close()
    assert proc.wait(timeout=10) == 0


# ---- fuzzed frames against a live server ---------------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_server():
    proc, port = start("group.initial.rebalance.delay.ms=0", "socket.request.max.bytes=65536")
    yield proc, port
    assert stop(proc) == 0


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api_key=st.sampled_from(sorted(SERVED) + [7, 68, 71, 999, -1]), version=st.integers(-2, 20),
       correlation_id=st.integers(-(2**31), 2**31 - 1), body=st.binary(max_size=300))
def test_fuzzed_frames_answered_or_closed_server_stays_up(fuzz_server, api_key, version, correlation_id,
                                                          body) -> None:
    # Header fields chosen, body random: the server answers (what happens to decode) or closes this connection;
    # it never hangs on a whole frame and never stops serving the others.
    proc, port = fuzz_server
    frame = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz" + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        first = s.recv(4)  # a response's size prefix, or b"" when the server closes: never a timeout
        if first:
            (size,) = struct.unpack(">i", first.ljust(4, b"\0"))
            assert 0 < size < 1 << 20
    assert proc.poll() is None
    with socket.create_connection(("127.0.0.1", port), timeout=5) as good:
        assert api_versions(good, 3).error_code == 0


def test_settings_by_kafka_name_reach_the_coordinator(tmp_path) -> None:
    from argparse import Namespace

    from kcoord.cli import main, server_config

    props = tmp_path / "server.properties"
    props.write_text("# as in Kafka's server.properties\ngroup.initial.rebalance.delay.ms=250\ngroup.max.size=7\n")
    args = Namespace(config=str(props), set=["group.initial.rebalance.extension=kafka", "store.fsync=off"],
                     host="127.0.0.1", port=0, advertised_host=None, advertised_port=None, topic=None, data_dir=None,
                     metrics_port=None, metrics_host=None, store=None)
    cfg = server_config(args)
    assert (cfg.group.group_initial_rebalance_delay_ms, cfg.group.group_max_size) == (250, 7)
    assert cfg.group.group_initial_rebalance_extension == "kafka" and cfg.store_fsync == "off"
    assert server_config(Namespace(**{**vars(args), "config": None, "set": []})).group \
        .group_initial_rebalance_extension == "last-join"
    for bad in ("group.initial.rebalance.extension=sometimes", "group.max.size=lots", "no.such.setting=1"):
        assert main(["serve", "--port", "0", "--set", bad]) == 2
