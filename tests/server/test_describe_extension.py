"""kcoord's describe extension (tagged field KCOORD_DESCRIBE_TAG) goes only to a request that asks for it.

DescribeGroups v5+, ConsumerGroupDescribe and ConnectGroupDescribe answer a request carrying tagged field 10000 with
kcoord's own view of each group in the same tag; any other request gets Kafka's answer alone, which a strict
decoder (kio 0.6.5 refuses an unknown tag) reads. kcoord's tools ask, so `kcoord describe` shows what it showed.
The in-process tests run on the harnesses of test_classic, test_consumer and test_connect; one test runs the
real server and reads its frames with kio.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v0.response import ConsumerGroupDescribeResponse as KioCGD0
from kio.schema.consumer_group_describe.v1.response import ConsumerGroupDescribeResponse as KioCGD1
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse as KioDG5
from kio.schema.describe_groups.v6.response import DescribeGroupsResponse as KioDG6
from kio.schema.response_header.v1.header import ResponseHeader as KioHeader
from kio.serial import entity_reader

from kcoord import errors as E
from kcoord import wire
from kcoord.cli import describe_group
from kcoord.client import Client
from kcoord.groups.base import KCOORD_DESCRIBE_TAG

from ..support.harness import DELAY, ClassicHarness, ConnectHarness, ConsumerHarness
from ..support.servers import free_port, recv_exact, serve

ASK = [(KCOORD_DESCRIBE_TAG, b"")]
CONNECT_DESCRIBE = wire.ConnectGroupDescribeRequest.API_KEY  # 1003
KIO = {(15, 5): KioDG5, (15, 6): KioDG6, (69, 0): KioCGD0, (69, 1): KioCGD1}


def kio_decode(api_key: int, version: int, body: bytes) -> Any:
    """kio's reading of a response body: it raises on a tagged field its schema does not name."""
    decoded, size = entity_reader(KIO[api_key, version])(memoryview(body), 0)
    assert size == len(body)
    return decoded


def extension(described) -> dict | None:
    tags = dict(described.unknown_tags or ())
    assert set(tags) <= {KCOORD_DESCRIBE_TAG}, tags
    return json.loads(tags[KCOORD_DESCRIBE_TAG]) if tags else None


def classic() -> ClassicHarness:
    """A Stable classic group "g" of one static member whose requests came from User:alice."""
    h = ClassicHarness()
    r = h.join(iid="s-1", reason="first")
    h.advance(DELAY)  # the initial rebalance delay
    j = r.response
    assert h.sync(j.member_id, j.generation_id, "s-1").response.error_code == E.NONE
    h.c.note_principal("g", j.member_id, "User:alice")
    return h


def consumer() -> ConsumerHarness:
    h = ConsumerHarness()
    assert h.join("k-1").error_code == E.NONE
    h.c.note_principal("g", "k-1", "User:alice")
    return h


def connect() -> ConnectHarness:
    h = ConnectHarness()
    assert h.join("w-1").error_code == E.NONE
    h.c.note_principal("g", "w-1", "User:alice")
    return h


def describe(h, api_key: int, version: int, unknown_tags=None):
    if api_key == 15:
        req = wire.DescribeGroupsRequest(groups=["g"], unknown_tags=unknown_tags)
    elif api_key == 69:
        req = wire.ConsumerGroupDescribeRequest(group_ids=["g"], unknown_tags=unknown_tags)
    else:
        req = wire.ConnectGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False,
                                               unknown_tags=unknown_tags)
    return h.c.handle(req, version)


CASES = [pytest.param(classic, 15, 5, id="DescribeGroups_v5"), pytest.param(classic, 15, 6, id="DescribeGroups_v6"),
         pytest.param(consumer, 69, 0, id="ConsumerGroupDescribe_v0"),
         pytest.param(consumer, 69, 1, id="ConsumerGroupDescribe_v1"),
         pytest.param(connect, CONNECT_DESCRIBE, 0, id="ConnectGroupDescribe_v0")]


@pytest.mark.parametrize("make,api_key,version", CASES)
def test_an_answer_carries_the_extension_only_when_the_request_asks(make, api_key, version) -> None:
    h = make()
    plain = describe(h, api_key, version)
    asked = describe(h, api_key, version, ASK)
    (g,), (ga,) = plain.groups, asked.groups
    assert g.error_code == ga.error_code == E.NONE
    assert g.unknown_tags is None and extension(g) is None
    doc = extension(ga)
    assert doc is not None
    # the extension is there, its members' principals in it
    if api_key == 15:
        assert (doc["generation"], doc["protocol"], doc["principals"]) == \
            (1, "range", {ga.members[0].member_id: "User:alice"})
        assert [e["reason"] for e in doc["history"]] == ["first"]
    elif api_key == 69:
        assert doc["k-1"]["state"] == "STABLE" and doc["k-1"]["principal"] == "User:alice"
    else:
        assert doc["principals"] == {"w-1": "User:alice"} and "installed_assignor" in doc
    # the two answers differ by the tag alone: Kafka's fields are the same bytes
    ga.unknown_tags = None
    assert asked.encode(version) == plain.encode(version)
    # a request's other tags are not a request for the extension
    other = describe(h, api_key, version, [(KCOORD_DESCRIBE_TAG + 1, b"")])
    assert other.groups[0].unknown_tags is None


@pytest.mark.parametrize("make,api_key,version", [c for c in CASES if c.values[1] != CONNECT_DESCRIBE])
def test_a_strict_decoder_reads_the_answer_to_a_request_that_does_not_ask(make, api_key, version) -> None:
    h = make()
    got = kio_decode(api_key, version, describe(h, api_key, version).encode(version))
    assert [g.group_id for g in got.groups] == ["g"] and len(got.groups[0].members) == 1
    # the check can fail: kio refuses the answer that carries the extension
    with pytest.raises(KeyError, match=str(KCOORD_DESCRIBE_TAG)):
        kio_decode(api_key, version, describe(h, api_key, version, ASK).encode(version))


def test_describe_groups_below_v5_ignores_the_ask() -> None:
    # v0-v4 are not flexible: there is no tag to carry the answer in, and the request could not carry the ask
    h = classic()
    for version in range(5):
        r = describe(h, 15, version, ASK)
        assert r.groups[0].unknown_tags is None
        wire.DescribeGroupsResponse.decode(r.encode(version), version)


def raw_call(sock: socket.socket, api_key: int, version: int, body) -> bytes:
    """One request's answer body, as the server sent it (after the flexible response header, read by kio)."""
    sock.sendall(wire.encode_request(api_key, version, 7, "strict-client", body))
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    frame = recv_exact(sock, size)
    header, used = entity_reader(KioHeader)(memoryview(frame), 0)
    assert header.correlation_id == 7
    return frame[used:]


def test_the_server_answers_a_strict_client_without_the_extension_and_kcoords_describe_with_it(tmp_path) -> None:
    srv = serve(free_port(), tmp_path / "server.log", "--topic", "orders:2",
                "--set", "group.initial.rebalance.delay.ms=0")
    try:
        with Client(srv.bootstrap) as c:
            r = c.call(11, 9, wire.JoinGroupRequest(
                group_id="cl", session_timeout_ms=60_000, rebalance_timeout_ms=60_000, member_id="",
                group_instance_id="s-1", protocol_type="consumer", reason="first",
                protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert r.error_code == E.NONE
            assert c.call(14, 5, wire.SyncGroupRequest(
                group_id="cl", generation_id=r.generation_id, member_id=r.member_id, group_instance_id="s-1",
                protocol_type="consumer", protocol_name="range", assignments=[])).error_code == E.NONE
            assert c.request(wire.ConsumerGroupHeartbeatRequest(
                group_id="co", member_id="k-1", member_epoch=0, rebalance_timeout_ms=60_000,
                subscribed_topic_names=["orders"], topic_partitions=[]), 1).error_code == E.NONE
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            dg = kio_decode(15, 5, raw_call(s, 15, 5, wire.DescribeGroupsRequest(groups=["cl"])))
            assert (dg.groups[0].group_state, dg.groups[0].members[0].group_instance_id) == ("Stable", "s-1")
            cg = kio_decode(69, 1, raw_call(s, 69, 1, wire.ConsumerGroupDescribeRequest(group_ids=["co"])))
            assert [m.member_id for m in cg.groups[0].members] == ["k-1"]
        with Client(srv.bootstrap) as c:
            d = describe_group(c, "cl")  # `kcoord describe`: asks, and shows the extension's fields
            assert (d["generation"], d["leader"], d["protocol"]) == (1, r.member_id, "range")
            assert [e["reason"] for e in d["history"]] == ["first"]
            d = describe_group(c, "co")
            assert (d["members"][0]["state"], d["members"][0]["previous_member_epoch"]) == ("STABLE", 0)
    finally:
        srv.proc.terminate()
        assert srv.proc.wait(timeout=30) == 0, srv.log_tail()
