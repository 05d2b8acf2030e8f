"""Listeners as Kafka has them (issue 31): `listeners`, `advertised.listeners`, `listener.security.protocol.map`;
Metadata and FindCoordinator answer with the address of the listener the request came in on; and on a SASL listener
nothing but ApiVersions and the SASL exchange is served before authentication (as Kafka's
SaslServerAuthenticator allows)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.config import ServerConfig
from kcoord.listeners import ListenerError, parse_listeners

from ..support.secured import add_user, call, closed, plain_login
from ..support.servers import free_port, in_process


def listeners_config(**settings) -> ServerConfig:
    return ServerConfig.from_kafka({k.replace("_", "."): v for k, v in settings.items()}, topics=["t:2"])


def test_each_listener_answers_with_its_own_advertised_address() -> None:
    a, b = free_port(), free_port()
    cfg = listeners_config(listeners=f"INTERNAL://127.0.0.1:{a},EXTERNAL://127.0.0.1:{b}",
                           advertised_listeners="EXTERNAL://kafka.example.com:9094",
                           listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT")
    with in_process(cfg) as srv:
        assert [(x.name, x.port) for x in srv.listeners] == [("INTERNAL", a), ("EXTERNAL", b)]
        for port, address in ((a, ("127.0.0.1", a)), (b, ("kafka.example.com", 9094))):
            with Client(f"127.0.0.1:{port}") as c:
                md = c.call(3, 12, wire.MetadataRequest(topics=None, allow_auto_topic_creation=False))
                assert [(x.host, x.port) for x in md.brokers] == [address]
                fc = c.call(10, 4, wire.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]))
                assert [(x.host, x.port, x.error_code) for x in fc.coordinators] == [(*address, E.NONE)]
                fc = c.call(10, 3, wire.FindCoordinatorRequest(key="g", key_type=0))
                assert (fc.host, fc.port) == address


@pytest.mark.parametrize(("settings", "names"), [
    ({"listeners": "A://127.0.0.1:1"}, "listener A has no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "listener PLAINTEXT is given twice"),
    ({"listeners": "PLAINTEXT://127.0.0.1:5,SSL://127.0.0.1:5"}, "two listeners on port 5"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "is not NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "70000 is not a TCP port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1", "advertised.listeners": "SSL://h:1"}, "SSL is not one of the listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1", "advertised.listeners": "PLAINTEXT://0.0.0.0:1"},
     "non-routable meta-address"),
    ({"listeners": "PLAINTEXT://0.0.0.0:1"}, "binds every address"),
    ({"listeners": "X://127.0.0.1:1", "listener.security.protocol.map": "X:TLS"}, "is not NAME:PROTOCOL"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1"}, "sasl.enabled.mechanisms: 'GSSAPI' has none of"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"},
     "not OAUTHBEARER"),
])
def test_a_listener_setting_that_cannot_be_served_is_refused_naming_it(settings, names) -> None:
    with pytest.raises(ValueError, match=names.replace("(", r"\(").replace(".", r"\.").replace("'", ".")):
        ServerConfig.from_kafka(settings)


def test_kcoord_serve_refuses_a_bad_listener_in_one_line() -> None:
    r = subprocess.run([sys.executable, "-m", "kcoord.cli", "serve", "--set", "listeners=A://127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "listener A has no security protocol" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_protocol_names_are_listener_names_by_default() -> None:
    (x,) = parse_listeners("sasl_ssl://h:1")
    assert (x.name, x.protocol, x.tls, x.sasl) == ("SASL_SSL", "SASL_SSL", True, True)
    with pytest.raises(ListenerError):
        parse_listeners("")


# ---- before authentication on a SASL listener ---------------------------------------------------------------

def sasl_listener(**more) -> ServerConfig:
    return listeners_config(listeners=f"SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                            sasl_enabled_mechanisms="SCRAM-SHA-512,PLAIN", **more)


def test_a_request_before_authentication_closes_the_connection_without_effect() -> None:
    with in_process(sasl_listener()) as srv:
        port = srv.listeners[0].port
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(wire.encode_request(8, 8, 1, "t", wire.OffsetCommitRequest(
                group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
                    wire.OffsetCommitRequestTopic(name="t", partitions=[
                        wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])))
            assert closed(s)
        assert "g" not in srv.coordinator.groups and not srv.coordinator.offsets.committed("g")
        with socket.create_connection(("127.0.0.1", port)) as s:  # ApiVersions is served, once
            assert call(s, 18, 3, wire.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                        ).error_code == E.NONE
            s.sendall(wire.encode_request(18, 3, 2, "t", wire.ApiVersionsRequest(
                client_software_name="t", client_software_version="1")))
            assert closed(s)


def test_a_mechanism_not_enabled_is_answered_with_the_enabled_ones_then_closed_after_the_delay() -> None:
    with in_process(sasl_listener(connection_failed_authentication_delay_ms="300")) as srv:
        with socket.create_connection(("127.0.0.1", srv.listeners[0].port)) as s:
            t = time.monotonic()
            resp = call(s, 17, 1, wire.SaslHandshakeRequest(mechanism="GSSAPI"))
            waited = time.monotonic() - t
            assert (resp.error_code, resp.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512", "PLAIN"])
            assert closed(s)
        assert waited >= 0.3  # held until connection.failed.authentication.delay.ms, as Kafka holds it
        assert srv.auth_results[("SASL_PLAINTEXT", "GSSAPI", "failure")] == 1


def test_an_enabled_mechanism_is_accepted_and_the_sasl_apis_are_refused_on_a_plaintext_listener() -> None:
    with in_process(sasl_listener()) as srv:
        with socket.create_connection(("127.0.0.1", srv.listeners[0].port)) as s:
            resp = call(s, 17, 1, wire.SaslHandshakeRequest(mechanism="PLAIN"))
            assert (resp.error_code, resp.mechanisms) == (E.NONE, ["SCRAM-SHA-512", "PLAIN"])
    with in_process(listeners_config()) as srv, Client(f"127.0.0.1:{srv.port}") as c:
        assert c.call(17, 1, wire.SaslHandshakeRequest(mechanism="PLAIN")).error_code == E.ILLEGAL_SASL_STATE
        assert c.call(36, 2, wire.SaslAuthenticateRequest(auth_bytes=b"x")).error_code == E.ILLEGAL_SASL_STATE


def test_a_frame_above_sasl_server_max_receive_size_before_authentication_closes() -> None:
    with in_process(sasl_listener(sasl_server_max_receive_size="1000")) as srv:
        with socket.create_connection(("127.0.0.1", srv.listeners[0].port)) as s:
            s.sendall(struct.pack(">i", 1001) + b"x" * 1001)
            assert closed(s)


# ---- sessions and re-authentication (KIP-368) --------------------------------------------------------------------

def two_listeners(**more) -> ServerConfig:
    return listeners_config(listeners=f"INTERNAL://127.0.0.1:{free_port()},EXTERNAL://127.0.0.1:{free_port()}",
                            listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
                            sasl_enabled_mechanisms="PLAIN", **more)


def test_connections_max_reauth_ms_is_the_session_lifetime_and_an_expired_session_is_closed() -> None:
    with in_process(two_listeners(connections_max_reauth_ms="700")) as srv:
        add_user(srv, "alice", "pw")
        add_user(srv, "bob", "pw2")
        port = srv.listeners[1].port
        with socket.create_connection(("127.0.0.1", port)) as s:
            resp = plain_login(s, "alice", "pw")
            assert (resp.error_code, resp.session_lifetime_ms) == (E.NONE, 700)
            assert call(s, 3, 12, wire.MetadataRequest(topics=[]), 3).brokers
            # a re-authentication (SaslHandshake on the authenticated connection) renews the session
            resp = plain_login(s, "alice", "pw", 4)
            assert (resp.error_code, resp.session_lifetime_ms) == (E.NONE, 700)
            time.sleep(0.8)  # past the session's end: anything but a re-authentication closes the connection
            s.sendall(wire.encode_request(3, 12, 6, "t", wire.MetadataRequest(topics=[])))
            assert closed(s)
        with socket.create_connection(("127.0.0.1", port)) as s:  # the principal cannot change on the way
            assert plain_login(s, "alice", "pw").error_code == E.NONE
            time.sleep(1.05)  # a re-authentication starts at most once a second
            resp = plain_login(s, "bob", "pw2", 3)
            assert resp.error_code == E.SASL_AUTHENTICATION_FAILED
            assert "Cannot change principals during re-authentication" in resp.error_message
            assert closed(s)
    with in_process(two_listeners()) as srv:  # 0 (the default): no expiry, and no re-authentication
        add_user(srv, "alice", "pw")
        with socket.create_connection(("127.0.0.1", srv.listeners[1].port)) as s:
            resp = plain_login(s, "alice", "pw")
            assert (resp.error_code, resp.session_lifetime_ms) == (E.NONE, 0)
            assert call(s, 17, 1, wire.SaslHandshakeRequest(mechanism="PLAIN"), 3).error_code == \
                E.ILLEGAL_SASL_STATE


def test_connections_max_reauth_ms_per_listener_and_mechanism_as_kafka_reads_it() -> None:
    """listener.name.<listener>.<mechanism>.connections.max.reauth.ms, then listener.name.<listener>.connections.
    max.reauth.ms, then connections.max.reauth.ms (Kafka's SaslChannelBuilder)."""
    from kcoord.client import ClientSecurity

    a, b, c = free_port(), free_port(), free_port()
    cfg = listeners_config(listeners=f"INTERNAL://127.0.0.1:{a},EXTERNAL://127.0.0.1:{b},PARTNER://127.0.0.1:{c}",
                           listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,"
                                                          "PARTNER:SASL_PLAINTEXT",
                           sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-512", connections_max_reauth_ms="0")
    cfg.security.update({"listener.name.external.plain.connections.max.reauth.ms": "60000",
                         "listener.name.partner.connections.max.reauth.ms": "90000"})
    with in_process(cfg) as srv:
        add_user(srv, "alice", "pw")

        def lifetime(port: int, mechanism: str) -> float | None:
            sec = ClientSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                 sasl_username="alice", sasl_password="pw")
            t = time.monotonic()
            with Client(f"127.0.0.1:{port}", security=sec) as client:
                return None if client.session_expires is None else round(client.session_expires - t)

        assert lifetime(b, "PLAIN") == 60  # the listener's PLAIN
        assert lifetime(b, "SCRAM-SHA-512") is None  # the server's: 0, no expiry
        assert lifetime(c, "PLAIN") == lifetime(c, "SCRAM-SHA-512") == 90  # the listener's, for every mechanism
    with pytest.raises(ValueError, match="listener.name.external.plain.connections.max.reauth.ms='soon'"):
        ServerConfig.from_kafka({"listener.name.external.plain.connections.max.reauth.ms": "soon"})


# ---- TLS listeners: failed handshakes are failed authentications ----------------------------------------------

def test_a_failed_tls_handshake_counts_as_a_failed_authentication_of_the_listener(tmp_path) -> None:
    """Kafka counts an SSL handshake that fails (no client certificate where one is required, a plaintext client)
    as a failed authentication of the listener; kcoord too (mechanism SSL), and the listener serves on."""
    import ssl

    from ..support.secured import Pki

    pki = Pki(tmp_path)
    cfg = listeners_config(listeners=f"SSL://127.0.0.1:{free_port()}", ssl_keystore_location=str(pki.keystore),
                           ssl_truststore_location=str(pki.ca_file), ssl_client_auth="required")
    with in_process(cfg) as srv:
        port = srv.listeners[0].port
        no_cert = ssl.create_default_context(cafile=str(pki.ca_file))
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                no_cert.wrap_socket(raw, server_hostname="localhost") as s:
            try:  # TLS 1.3: the server's alert (or its close) comes at the first read
                s.sendall(wire.encode_request(18, 3, 1, "t", wire.ApiVersionsRequest(
                    client_software_name="t", client_software_version="1")))
                assert s.recv(1) == b""
            except (ssl.SSLError, ConnectionError):
                pass
        with socket.create_connection(("127.0.0.1", port)) as s:  # a plaintext client on the TLS port
            s.sendall(wire.encode_request(18, 0, 1, "t", wire.ApiVersionsRequest()))
            assert closed(s)
        deadline = time.monotonic() + 10
        while srv.auth_results[("SSL", "SSL", "failure")] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert srv.auth_results[("SSL", "SSL", "failure")] == 2
        cert, key = pki.client_cert("alice", common_name="alice")
        good = ssl.create_default_context(cafile=str(pki.ca_file))
        good.load_cert_chain(cert, key)
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                good.wrap_socket(raw, server_hostname="localhost") as s:
            assert call(s, 18, 3, wire.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                        ).error_code == E.NONE
        assert srv.auth_results[("SSL", "SSL", "failure")] == 2


def test_a_request_offloaded_for_its_size_still_names_its_principal_and_listener(monkeypatch) -> None:
    """A JoinGroup above OFFLOAD_ABOVE is decoded on the worker; its member is still noted with the principal the
    connection authenticated as, and a large Metadata request is answered with its own listener's address."""
    from kcoord import server as server_module

    monkeypatch.setattr(server_module, "OFFLOAD_ABOVE", 256 << 10)
    with in_process(two_listeners(group_initial_rebalance_delay_ms="0")) as srv:
        add_user(srv, "alice", "pw")
        with socket.create_connection(("127.0.0.1", srv.listeners[1].port)) as s:
            assert plain_login(s, "alice", "pw").error_code == E.NONE
            metadata = b"m" * (300 << 10)

            def join(member_id: str, corr: int):
                return call(s, 11, 5, wire.JoinGroupRequest(
                    group_id="g-big", session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
                    protocol_type="consumer",
                    protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=metadata)]), corr)

            first = join("", 3)
            assert first.error_code == E.MEMBER_ID_REQUIRED
            joined = join(first.member_id, 4)
            assert (joined.error_code, joined.member_id) == (E.NONE, first.member_id)
            md = call(s, 3, 12, wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name=f"t{i:06}")
                                                             for i in range(30_000)]), 5)
            assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", srv.listeners[1].port)]
        assert srv.offloaded >= 3
        assert srv.coordinator.groups["g-big"].principals == {first.member_id: "User:alice"}
