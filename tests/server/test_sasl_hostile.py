"""Hostile SASL over the wire (issue 31): truncated and huge frames, bad nonces, a replayed client-final, wrong proofs,
non-UTF-8 and escaped names, tokens at the wrong time. Each ends in an authentication failure (58, answered after
connection.failed.authentication.delay.ms, then closed) or a closed connection, never a traceback; nothing is made
on the server, and another client is served all along."""

from __future__ import annotations

import socket
import struct

import pytest
from kafka.net.sasl.scram import ScramClient

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig

from ..support.secured import add_user, call, closed, plain_login
from ..support.servers import free_port, in_process

MECH = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def srv():
    cfg = ServerConfig.from_kafka({
        "listeners": f"INTERNAL://127.0.0.1:{free_port()},EXTERNAL://127.0.0.1:{free_port()}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": f"{MECH},PLAIN", "connection.failed.authentication.delay.ms": "20",
        "sasl.server.max.receive.size": "65536"}, topics=["t:1"])
    with in_process(cfg) as server:
        add_user(server, "alice", "pw")
        add_user(server, "a,b=c", "pw")  # a name that needs SCRAM's =2C and =3D
        yield server


def sasl(srv) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.listeners[1].port))
    assert call(s, 17, 1, wire.SaslHandshakeRequest(mechanism=MECH)).error_code == E.NONE
    return s


def authenticate(s: socket.socket, token: bytes, corr: int = 2) -> wire.SaslAuthenticateResponse:
    return call(s, 36, 2, wire.SaslAuthenticateRequest(auth_bytes=token), corr)


def failed(s: socket.socket, resp) -> bool:
    return resp.error_code == E.SASL_AUTHENTICATION_FAILED and closed(s)


def served(srv) -> None:
    with Client(f"127.0.0.1:{srv.listeners[0].port}") as c:
        assert c.call(18, 3, wire.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                      ).error_code == E.NONE


BAD_FIRST = [b"", b"n,,", b"y,,n=alice,r=abc", b"p=x,,n=alice,r=abc", b"n,,n=al=ice,r=abc", b"n,,n=\xff\xfe,r=abc",
             b"n,,n=alice,r=a\x01b", b"n,a=bob,n=alice,r=abc", b"n,,n=alice,r=abc,tokenauth=true",
             b"n,,n=nobody,r=abc", b"\x00" * 20_000, "n,,n=élise,r=abc".encode()]


@pytest.mark.parametrize("token", BAD_FIRST, ids=range(len(BAD_FIRST)))
def test_a_bad_client_first_message_fails_authentication(srv, token) -> None:
    with sasl(srv) as s:
        assert failed(s, authenticate(s, token))
    served(srv)


def exchange(s: socket.socket, user: str = "alice", password: str = "pw") -> ScramClient:
    client = ScramClient(user, password, MECH)
    client.process_server_first_message(authenticate(s, client.first_message()).auth_bytes)
    return client


def test_escaped_names_authenticate_and_a_good_exchange_completes(srv) -> None:
    with sasl(srv) as s:
        client = exchange(s, "a=2Cb=3Dc")  # the name a,b=c as SCRAM escapes it (kafka-python's client does not)
        resp = authenticate(s, client.final_message(), 3)
        assert resp.error_code == E.NONE
        client.process_server_final_message(resp.auth_bytes)  # checks the server's signature
        assert call(s, 3, 12, wire.MetadataRequest(topics=[]), 4).brokers


@pytest.mark.parametrize("how", ["wrong proof", "bad nonce", "truncated", "not utf-8", "huge", "extra bytes"])
def test_a_bad_client_final_message_fails_authentication(srv, how) -> None:
    with sasl(srv) as s:
        final = exchange(s, password="pw" if how != "wrong proof" else "wrong").final_message()
        if how == "bad nonce":
            final = final.replace(b",r=", b",r=x", 1)
        elif how == "truncated":
            final = final[:len(final) // 2]
        elif how == "not utf-8":
            final = final[:-3] + b"\xff\xfe\xfd"
        elif how == "huge":
            final = final + b"A" * 40_000
        elif how == "extra bytes":
            final = final + b",p=AAAA"
        assert failed(s, authenticate(s, final, 3))
    served(srv)


def test_a_replayed_client_final_fails(srv) -> None:
    with sasl(srv) as s:
        client = exchange(s)
        final = client.final_message()
        assert authenticate(s, final, 3).error_code == E.NONE
        # replayed on a new connection: its server nonce differs, so the proof does not hold there
    with sasl(srv) as s:
        exchange(s)
        assert failed(s, authenticate(s, final, 3))
    served(srv)


def whole(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_frames_that_break_the_exchange_close_without_a_traceback(srv, caplog) -> None:
    port = srv.listeners[1].port
    cases = [
        struct.pack(">i", 70_000) + b"x" * 16,  # above sasl.server.max.receive.size: closed before it arrives
        struct.pack(">i", 6) + b"\x00\x24\x00\x02\x00\x00",  # a SaslAuthenticate header cut short
        wire.encode_request(36, 2, 1, "t", wire.SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=x")),  # no handshake
        struct.pack(">ihhih", 13, 36, 9, 1, 1) + b"t" + b"\x00\x00",  # SaslAuthenticate v9: closed at once
        whole(wire.encode_request(17, 1, 1, "t", wire.SaslHandshakeRequest(mechanism="PLAIN"))[4:-2]),  # cut short
    ]
    for frame in cases:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(frame)
            assert closed(s)
        served(srv)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_plain_with_a_bad_token_fails_and_a_good_one_still_works(srv) -> None:
    for token in (b"alice", b"\x00alice", b"\x00alice\x00", b"\x00\x00pw", b"bob\x00alice\x00pw", b"\x00al\xffice\x00pw",
                  b"\x00alice\x00wrong"):
        with socket.create_connection(("127.0.0.1", srv.listeners[1].port)) as s:
            assert call(s, 17, 1, wire.SaslHandshakeRequest(mechanism="PLAIN")).error_code == E.NONE
            resp = authenticate(s, token)
            assert resp.error_code == E.SASL_AUTHENTICATION_FAILED and closed(s), token
    with socket.create_connection(("127.0.0.1", srv.listeners[1].port)) as s:
        assert plain_login(s, "alice", "pw").error_code == E.NONE
    assert not srv.coordinator.groups
