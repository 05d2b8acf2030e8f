"""Connect groups over the wire: `kcoord serve` as a subprocess, its private APIs gated and movable, and bad input
on them (fuzzed frames, declared-huge and oversized unit lists, unknown members, wrong epochs) answered with an error
code or a closed connection while the group stays as it was."""

from __future__ import annotations

import json
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError

from ..support.cli import kcoord
from ..support.servers import api_versions, recv_frame, start, stop

W = wire
ENABLE = "group.coordinator.rebalance.protocols=classic,consumer,connect"
HB, PREPARE, INSTALL, DESCRIBE = 1000, 1001, 1002, 1003
CONNECT_KEYS = {HB, PREPARE, INSTALL, DESCRIBE}


def advertised(port: int) -> dict[int, tuple[int, int]]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        return {k.api_key: (k.min_version, k.max_version) for k in api_versions(s, 3).api_keys}


def moved_call(c: Client, key: int, body):
    """Send `body` under API key `key` (the connect block moved by group.connect.api.key.base)."""
    return c.request(body, 0, api_key=key)


def join(c: Client, mid: str, group: str = "g", key: int = HB) -> W.ConnectGroupHeartbeatResponse:
    return moved_call(c, key, W.ConnectGroupHeartbeatRequest(
        group_id=group, member_id=mid, member_epoch=0, rebalance_timeout_ms=60_000,
        client_assignors=[W.ConnectGroupHeartbeatRequestAssignor(name="ica", minimum_version=1, maximum_version=2,
                                                                 reason=0, version=2, metadata=b"")],
        connectors_and_tasks=W.ConnectGroupHeartbeatRequestConnectorsAndTasks(connectors=[], tasks=[])))


def units(n_conn: int, n_tasks: int, cls=W.ConnectGroupInstallAssignmentRequestConnectorsAndTasks,
          tcls=W.ConnectGroupInstallAssignmentRequestConnectorTasks, offset: int = 0):
    return cls(connectors=[f"c{i}" for i in range(offset, offset + n_conn)],
               tasks=[tcls(connector=f"c{i}", task_ids=list(range(n_tasks))) for i in range(offset, offset + n_conn)])


def describe(c: Client, group: str = "g") -> W.ConnectGroupDescribeResponseDescribedGroup:
    return c.request(W.ConnectGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 0).groups[0]


def shape(d: W.ConnectGroupDescribeResponseDescribedGroup) -> tuple:
    return (d.group_epoch, d.assignment_epoch, d.group_state,
            sorted((m.member_id, m.member_epoch, repr(m.target_assignment)) for m in d.members))


@pytest.fixture(scope="module")
def connect_server():
    proc, port = start(ENABLE, "socket.request.max.bytes=4194304", "group.connect.max.session.timeout.ms=600000",
                       "group.connect.session.timeout.ms=600000")  # no worker's session ends during the module
    yield proc, port
    assert stop(proc) == 0


@pytest.fixture(scope="module")
def stable_group(connect_server):
    """Group "g": workers w1 and w2, 10 connectors x 10 tasks installed and reconciled."""
    _, port = connect_server
    with Client(f"127.0.0.1:{port}") as c:
        r1 = join(c, "w1")
        join(c, "w2")
        chosen = "w1" if r1.should_compute_assignment else "w2"
        chosen = "w1" if join(c, "w1").should_compute_assignment else chosen
        p = c.request(W.ConnectGroupPrepareAssignmentRequest(group_id="g", member_id=chosen, member_epoch=0), 0)
        assert p.error_code == E.NONE, p
        r = c.request(W.ConnectGroupInstallAssignmentRequest(
            group_id="g", member_id=chosen, member_epoch=0, group_epoch=p.group_epoch, error=0, members=[
                W.ConnectGroupInstallAssignmentRequestMember(member_id="w1", connectors_and_tasks=units(5, 10),
                                                             version=2, metadata=b""),
                W.ConnectGroupInstallAssignmentRequestMember(member_id="w2", connectors_and_tasks=units(5, 10, offset=5),
                                                             version=2, metadata=b"")]), 0)
        assert r.error_code == E.NONE, r
        for mid in ("w1", "w2"):
            hb = c.request(W.ConnectGroupHeartbeatRequest(group_id="g", member_id=mid, member_epoch=0), 0)
            assert hb.error_code == E.NONE and hb.member_epoch == p.group_epoch, hb
        d = describe(c)
        assert d.group_state == "Stable"
    return port, shape(d)


def test_connect_apiversions_gate(connect_server) -> None:
    _, port = connect_server
    on = advertised(port)
    assert {k: on[k] for k in CONNECT_KEYS} == {k: (0, 0) for k in CONNECT_KEYS}
    assert all(k < 100 for k in set(on) - CONNECT_KEYS)  # Kafka's own keys beside the private block
    proc, off_port = start()
    try:
        assert not CONNECT_KEYS & set(advertised(off_port))
        with Client(f"127.0.0.1:{off_port}") as c:
            assert join(c, "w1").error_code == E.UNSUPPORTED_VERSION
    finally:
        assert stop(proc) == 0


def test_connect_api_key_base_moves_the_private_block() -> None:
    proc, port = start(ENABLE, "group.connect.api.key.base=5000")
    try:
        keys = advertised(port)
        assert {5000, 5001, 5002, 5003} <= set(keys) and not CONNECT_KEYS & set(keys)
        with Client(f"127.0.0.1:{port}") as c:
            r = join(c, "w1", key=5000)
            assert (r.error_code, r.should_compute_assignment) == (E.NONE, True)
            d = moved_call(c, 5003, W.ConnectGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False))
            assert [m.member_id for m in d.groups[0].members] == ["w1"]
        with Client(f"127.0.0.1:{port}") as c, pytest.raises(KafkaError, match="closed"):
            join(c, "w2", key=HB)  # 1000 is not served when the block moved: the connection is closed
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0


def test_connect_bad_requests_get_error_codes_and_leave_the_group_intact(stable_group) -> None:
    port, before = stable_group
    with Client(f"127.0.0.1:{port}") as c:
        epoch = before[0]
        cases = [
            (W.ConnectGroupHeartbeatRequest(group_id="g", member_id="ghost", member_epoch=epoch), E.UNKNOWN_MEMBER_ID),
            (W.ConnectGroupHeartbeatRequest(group_id="g", member_id="w1", member_epoch=epoch + 7),
             E.FENCED_MEMBER_EPOCH),
            (W.ConnectGroupHeartbeatRequest(group_id="g", member_id="", member_epoch=epoch), E.INVALID_REQUEST),
            (W.ConnectGroupHeartbeatRequest(group_id="g", member_id="w1", member_epoch=-5), E.INVALID_REQUEST),
            (W.ConnectGroupHeartbeatRequest(group_id="nope", member_id="w1", member_epoch=3), E.GROUP_ID_NOT_FOUND),
            (W.ConnectGroupPrepareAssignmentRequest(group_id="g", member_id="w1", member_epoch=epoch),
             E.UNKNOWN_MEMBER_ID),  # nobody is asked to compute
            (W.ConnectGroupPrepareAssignmentRequest(group_id="g", member_id="w1", member_epoch=-1), E.INVALID_REQUEST),
            (W.ConnectGroupInstallAssignmentRequest(group_id="g", member_id="w1", member_epoch=epoch,
                                                    group_epoch=epoch, error=0, members=[]), E.UNKNOWN_MEMBER_ID),
            (W.ConnectGroupInstallAssignmentRequest(group_id="g", member_id="w1", member_epoch=3, group_epoch=epoch,
                                                    error=0, members=[]), E.STALE_MEMBER_EPOCH),
            (W.ConnectGroupInstallAssignmentRequest(group_id="", member_id="w1", member_epoch=3, group_epoch=epoch,
                                                    error=0, members=[]), E.INVALID_REQUEST),
        ]
        for req, code in cases:
            assert c.request(req, 0).error_code == code, req
        # an Install carrying 400,000 units from a worker that was not asked: refused, nothing interned
        big = W.ConnectGroupInstallAssignmentRequest(group_id="g", member_id="w1", member_epoch=epoch,
                                                     group_epoch=epoch, error=0, members=[
                                                         W.ConnectGroupInstallAssignmentRequestMember(
                                                             member_id="w1", connectors_and_tasks=units(400, 1000),
                                                             version=0, metadata=b"")])
        assert c.request(big, 0).error_code == E.UNKNOWN_MEMBER_ID
        # a heartbeat owning a huge list of units nobody was given: answered, nothing changes
        hb = c.request(W.ConnectGroupHeartbeatRequest(
            group_id="g", member_id="w1", member_epoch=epoch, connectors_and_tasks=units(
                200, 1000, W.ConnectGroupHeartbeatRequestConnectorsAndTasks,
                W.ConnectGroupHeartbeatRequestConnectorTasks, offset=1000)), 0)
        assert hb.error_code == E.NONE and hb.member_epoch == epoch
        assert shape(describe(c)) == before


def _raw(port: int, key: int, body: bytes) -> bytes | None:
    frame = struct.pack(">hhih", key, 0, 7, 4) + b"fuzz" + b"\x00" + body  # header v2: client id, no tags
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            return recv_frame(s)
        except ConnectionError:
            return None


def test_connect_declared_huge_unit_list_closes_the_connection(stable_group) -> None:
    port, before = stable_group
    # ConnectGroupHeartbeat: group "g", member "w1", epoch, then a task list declaring 2**31 entries in 8 bytes
    body = b"\x02g" + b"\x03w1" + struct.pack(">i", before[0]) + b"\x00" + struct.pack(">i", -1) + b"\x00" + b"\x00"
    body += b"\x01" + b"\x01" + b"\x80\x80\x80\x80\x08"  # a non-null struct, no connectors, 2**31 task entries
    assert _raw(port, HB, body) is None
    with Client(f"127.0.0.1:{port}") as c:
        assert shape(describe(c)) == before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(CONNECT_KEYS)), body=st.binary(max_size=200))
def test_connect_fuzzed_frames_leave_the_group_intact(stable_group, connect_server, key, body) -> None:
    port, before = stable_group
    proc, _ = connect_server
    reply = _raw(port, key, body)
    if reply is not None:
        assert 4 <= len(reply) < 1 << 20
    assert proc.poll() is None
    with Client(f"127.0.0.1:{port}") as c:
        d = describe(c)
        assert shape(d) == before


def test_connect_describe_and_groups_cli(stable_group) -> None:
    port, before = stable_group
    boot = f"127.0.0.1:{port}"
    out = kcoord("describe", "g", "--bootstrap", boot, "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert (d["type"], d["state"], d["group_epoch"], d["assignor"], d["assignor_version"]) == \
        ("connect", "Stable", before[0], "ica", 2)
    by = {m["member_id"]: m for m in d["members"]}
    assert by["w1"]["assignment"]["connectors"] == [f"c{i}" for i in range(5)]
    assert by["w2"]["target_assignment"]["tasks"]["c7"] == list(range(10))
    assert [h["reason"] for h in d["history"]][:2] == ["member w1 joined", "member w2 joined"]
    text = kcoord("describe", "g", "--bootstrap", boot)
    assert text.returncode == 0 and "type connect" in text.stdout and "c0:0-9" in text.stdout
    assert "REBALANCE HISTORY" in text.stdout and "member w2 joined" in text.stdout
    groups = kcoord("groups", "--bootstrap", boot, "--type", "connect", "--json")
    assert json.loads(groups.stdout) == [{"group": "g", "type": "connect", "state": "Stable",
                                          "protocol_type": "connect"}]
    bad = kcoord("groups", "--bootstrap", boot, "--type", "connector")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
