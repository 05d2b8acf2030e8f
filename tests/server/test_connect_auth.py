"""Connect workers authenticate (issue 31): kcoord.client.worker's Worker with Kafka's client settings
(`kcoord.client.ClientSecurity`) against `kcoord serve`'s SASL_SSL and SSL listeners. Workers over SCRAM-SHA-512,
PLAIN and a client certificate form one connect group, each known by its principal; a wrong password or an untrusted
server stops the worker with its error and makes nothing; a session with a lifetime (connections.max.reauth.ms) is
renewed by the worker before the server would close it."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kcoord.client import AuthenticationFailed, ClientSecurity, SaslClient
from kcoord.client.worker import Worker, all_units

from ..support.secured import Pki, add_users, groups, secured_server, stop
from ..support.servers import CONNECT_SETTINGS as SETTINGS

USERS = {"alice": ("SCRAM-SHA-512", "alice-connect-secret"), "carol": ("SCRAM-SHA-512", "carol-connect-secret")}
UNITS = {"orders-sink": 3, "audit-source": 2}
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki, tmp_path_factory):
    srv = secured_server(tmp_path_factory.mktemp("connect-auth"), pki, *SETTINGS,
                         f"connections.max.reauth.ms={REAUTH_MS}")
    add_users(srv.bootstrap, USERS)
    yield srv
    log = stop(srv)
    assert not [p for _, p in USERS.values() if p in log]  # never a password in the log


def sasl(pki: Pki, mechanism: str, user: str, password: str | None = None) -> ClientSecurity:
    return ClientSecurity(security_protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_username=user,
                          sasl_password=USERS[user][1] if password is None else password,
                          ssl_ca_location=str(pki.ca_file))


def test_workers_over_sasl_ssl_and_ssl_form_a_connect_group(server, pki) -> None:
    cert, key = pki.client_cert("worker3", common_name="worker3", unit="Connect")
    securities = [(server.sasl_ssl, sasl(pki, "SCRAM-SHA-512", "alice")),
                  (server.sasl_ssl, sasl(pki, "PLAIN", "alice")),
                  (server.ssl, ClientSecurity(security_protocol="SSL", ssl_ca_location=str(pki.ca_file),
                                              ssl_certificate_location=cert, ssl_key_location=key))]

    async def main() -> dict:
        workers = [Worker(addr, "cg-auth", units=UNITS, member_id=f"w{i}", security=sec)
                   for i, (addr, sec) in enumerate(securities)]
        for w in workers:
            await w.start()
        try:
            everything = all_units(UNITS)

            def settled() -> bool:  # every unit on exactly one worker, and each worker running some
                owned = [x.owned for x in workers]
                return (all(owned) and frozenset().union(*owned) == everything
                        and sum(map(len, owned)) == len(everything))

            async with asyncio.timeout(30):
                while not settled():
                    assert not [w.error for w in workers if w.error is not None]
                    await asyncio.sleep(0.05)
            return await asyncio.to_thread(server.describe, "cg-auth")
        finally:
            for w in workers:
                await w.stop()

    described = asyncio.run(main())
    assert described["type"] == "connect"
    assert {m["member_id"]: m["principal"] for m in described["members"]} == {
        "w0": "User:alice", "w1": "User:alice", "w2": "User:CN=worker3,OU=Connect,O=Example"}


@pytest.mark.parametrize("how", ["wrong password", "unknown user", "untrusted server"])
def test_a_worker_that_cannot_authenticate_stops_with_its_error_and_makes_nothing(server, pki, how) -> None:
    security = {"wrong password": sasl(pki, "SCRAM-SHA-512", "alice", "not-it"),
                "unknown user": sasl(pki, "PLAIN", "mallory", "x"),
                "untrusted server": ClientSecurity(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                                                   sasl_username="alice", sasl_password=USERS["alice"][1],
                                                   ssl_ca_location=str(pki.other_ca_file))}[how]
    expected = ssl.SSLCertVerificationError if how == "untrusted server" else AuthenticationFailed
    before = groups(server)

    async def main() -> None:
        w = Worker(server.sasl_ssl, "cg-refused", units=UNITS, security=security)
        with pytest.raises(expected) as e:
            await asyncio.wait_for(w.start(), 20)
        assert w.error is e.value and not w.owned
        await w.stop()

    asyncio.run(main())
    assert groups(server) == before
    server.check_alive()


def test_a_worker_renews_its_session_before_the_server_would_close_it(server, pki) -> None:
    async def main() -> tuple[int, int]:
        w = Worker(server.sasl_ssl, "cg-reauth", units=UNITS, member_id="carol-w", security=sasl(
            pki, "SCRAM-SHA-512", "carol"))
        await w.start()
        try:
            await w.wait_for(lambda x: x.owned == all_units(UNITS), 30)
            epoch = w.member_epoch
            logins = "authenticated as User:carol on listener SASL"
            async with asyncio.timeout(20):  # three sessions of REAUTH_MS, each renewed at 85% of it
                while server.log.read_text().count(logins) < 3:
                    await asyncio.sleep(0.1)
            return epoch, w.member_epoch
        finally:
            await w.stop()

    before, after = asyncio.run(main())
    assert after == before  # never fenced, never rejoined
    assert "expired (connections.max.reauth.ms)" not in server.log.read_text()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcoords_blocking_client_authenticates_too(server, pki, mechanism) -> None:
    from kcoord import wire
    from kcoord.client import Client

    with Client(server.sasl_ssl, security=sasl(pki, mechanism, "alice")) as c:
        assert c.call(16, 4, wire.ListGroupsRequest(states_filter=[])).error_code == 0
    with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED"):
        Client(server.sasl_ssl, security=sasl(pki, mechanism, "alice", "wrong"))


def test_the_scram_client_checks_the_servers_nonce_iterations_and_signature() -> None:
    def exchange(server_first: str) -> bytes | None:
        c = SaslClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
        c.first()
        return c.respond(server_first.encode())

    ok = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    # RFC 7677's client-final-message for this exchange
    assert exchange(ok) == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    for bad in (ok.replace("r=rOpr", "r=xOpr"), "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                ok.replace("i=4096", "i=4095")):
        with pytest.raises(AuthenticationFailed):
            exchange(bad)
    c = SaslClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    c.first()
    c.respond(ok.encode())
    with pytest.raises(AuthenticationFailed):  # a server that does not know the password
        c.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".replace(b"6rr", b"7rr"))
    c = SaslClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    c.first()
    c.respond(ok.encode())
    assert c.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None and c.complete
