"""The cost of authentication (issue 31), against one real `kcoord serve` per bench with four listeners: PLAINTEXT,
SSL, SASL_SSL and SASL_PLAINTEXT (SCRAM-SHA-512 and PLAIN enabled), its certificate made here by trustme.

1. Heartbeats per server CPU-second on established connections over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512),
   in the same run against the same server and group (the issue's target: SSL and SASL_SSL within 15% of
   PLAINTEXT). Rounds alternate between the protocols; each round's server CPU is read from /proc/<pid>/stat
   around the heartbeats only (the TLS handshakes and logins come before). Two loads: pipelined (each connection
   writes its 100 members' heartbeats at once, as the other heartbeat benches) and one in flight per connection
   (each heartbeat its own TLS record both ways: the protocol's worst case). The target is gated on the pipelined
   load, where it is reachable (SSL at 0.85-0.95 of PLAINTEXT on 7225340, before per-request principals); the
   one-in-flight ratio is reported only (0.5-0.65 there: each record's encryption and uvloop's TLS layer, which
   kcoord does not control).
2. Full logins per second (connect, ApiVersions, SaslHandshake, SaslAuthenticate until done, close) over
   SASL_PLAINTEXT by LOGIN_CLIENTS concurrent clients, SCRAM-SHA-512 and PLAIN (whose PBKDF2 runs per login on the
   server's auth threads), and logins per server CPU-second.
3. A bystander member of an established classic group heartbeats every 10 ms from its own process (as in
   bench_hostile) while STORM concurrent SCRAM-SHA-512 logins run over SASL_PLAINTEXT, then STORM concurrent PLAIN
   logins, then STORM SCRAM-SHA-512 logins over SASL_SSL (each after its own TLS handshake): its p99 and longest
   heartbeat during each kind of storm, gated at the issue's target (p99 under 50 ms). A control storm (as many
   connections, each making a login's four round trips with ApiVersions on PLAINTEXT; not gated) shows what such a
   burst of connections costs the bystander without any authentication. The storms' client runs at nice 10 (see
   storms_niced). Over SASL_SSL the bystander's p99 was 80-100 ms (max 107-142) while the loop's TLS layer ran
   every handshake message that had arrived in one turn (up to 477 in a 112 ms turn); with the handshakes held to a
   budget per turn (kcoord/security/handshakes.py) it is 23 ms (max 38.5) on 2 cores.

The client side of SCRAM is computed here (RFC 5802) from each user's SaltedPassword, derived once per user, so
the load generator's CPU goes to the exchange, not to PBKDF2. Marked slow (about 1-2 minutes); run with
`.venv/bin/python -m pytest benches/bench_security.py -m slow -s -p no:cacheprovider`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import multiprocessing as mp
import os
import secrets
import ssl
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization as ser

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.security.scram import MECHANISMS, salted_password

from .bench_hostile import BYSTANDER_PERIOD_S, bystander, percentile
from .loadgen import Conn, ServerProcess, form_group, free_port, heartbeat_load, request_load

pytestmark = pytest.mark.slow

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
TARGET_RATIO = 0.85  # SSL and SASL_SSL within 15% of PLAINTEXT (heartbeats per server CPU-second)
MEMBERS, HB_CONNS = 1_000, 10  # pipelined: 100 heartbeats per write on each of 10 connections
SINGLE_CONNS = 50  # one in flight: 50 connections, one heartbeat each at a time
ROUNDS, ROUND_S = 4, 2.5
LOGIN_CLIENTS, LOGIN_S = 16, 5.0
STORM, STORMS = 1_000, 2
STORM_NICE = 10  # the storm client's niceness (storms_niced)
P99_TARGET_S = 0.050
USERS = [f"bench-{i}" for i in range(8)]
ITERATIONS = 4096
HOST = "localhost"  # the name in the server's certificate


# ---- the server: four listeners, a trustme certificate, users added over PLAINTEXT ---------------------------

@dataclass
class User:
    name: str
    password: str
    client_key: bytes  # HMAC(SaltedPassword, "Client Key"): what the SCRAM client needs, derived once
    stored_key: bytes


class SecureServer(ServerProcess):
    def __init__(self, tmp: str) -> None:
        self.ca = trustme.CA()
        keystore = os.path.join(tmp, "server.pem")
        leaf = self.ca.issue_cert(HOST, "127.0.0.1")
        key = ser.load_pem_private_key(leaf.private_key_pem.bytes(), None)  # Kafka reads PKCS#8 keys only
        with open(keystore, "wb") as fh:
            fh.write(key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()))
            fh.write(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        self.ports = {p: free_port() for p in (*PROTOCOLS, "SASL_PLAINTEXT")}
        listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items())
        super().__init__(f"listeners={listeners}", "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
                         "ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}",
                         "group.initial.rebalance.delay.ms=300", port=self.ports["PLAINTEXT"],
                         log_path=os.path.join(tmp, "server.log"))
        self.client_ssl = ssl.create_default_context()
        self.ca.configure_trust(self.client_ssl)
        try:
            self.users = [self._add_user(name, secrets.token_urlsafe(12)) for name in USERS]
        except BaseException:
            self.stop()
            raise

    def _add_user(self, name: str, password: str) -> User:
        mech = MECHANISMS["SCRAM-SHA-512"]
        salt = secrets.token_bytes(16)
        salted = salted_password(mech, password, salt, ITERATIONS)
        with Client(f"127.0.0.1:{self.port}") as c:
            resp = c.call(51, 0, wire.AlterUserScramCredentialsRequest(deletions=[], upsertions=[
                wire.AlterUserScramCredentialsRequestScramCredentialUpsertion(
                    name=name, mechanism=mech, iterations=ITERATIONS, salt=salt, salted_password=salted)]))
        assert [r.error_code for r in resp.results] == [E.NONE]
        client_key = hmac.digest(salted, b"Client Key", "sha512")
        return User(name, password, client_key, hashlib.sha512(client_key).digest())


@pytest.fixture
def server():
    with tempfile.TemporaryDirectory(prefix="kcoord-security-") as tmp:
        srv = SecureServer(tmp)
        try:
            yield srv
        finally:
            srv.stop()


# ---- the client side of a login ------------------------------------------------------------------------------

class LoginFailed(Exception):
    pass


async def call(c: Conn, key: int, version: int, body):
    c.writer.write(c.frame(key, version, body))
    (frame,) = await c.responses(1)
    return wire.decode_response(key, version, frame)[1]


def scram_final(user: User, client_first_bare: str, server_first: str, cnonce: str) -> bytes:
    """RFC 5802's client-final message for a server-first: ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage).
    (The server's signature is not checked: the bench knows no ServerKey, and only its presence is looked for.)"""
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    if not attrs["r"].startswith(cnonce):
        raise LoginFailed(f"server nonce {attrs['r']!r} does not extend ours")
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(user.stored_key, auth_message, "sha512")
    proof = bytes(a ^ b for a, b in zip(user.client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


async def login(c: Conn, mechanism: str, user: User) -> None:
    """ApiVersions, SaslHandshake v1, SaslAuthenticate v2 until done, each awaited as a client does."""
    await call(c, 18, 3, wire.ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
    r = await call(c, 17, 1, wire.SaslHandshakeRequest(mechanism=mechanism))
    if r.error_code:
        raise LoginFailed(f"SaslHandshake error {r.error_code}")
    if mechanism == "PLAIN":
        tokens = [f"\0{user.name}\0{user.password}".encode()]
    else:
        cnonce = secrets.token_urlsafe(18)
        bare = f"n={user.name},r={cnonce}"
        tokens = [f"n,,{bare}".encode()]
    r = await call(c, 36, 2, wire.SaslAuthenticateRequest(auth_bytes=tokens[0]))
    if r.error_code:
        raise LoginFailed(f"SaslAuthenticate error {r.error_code}: {r.error_message}")
    if mechanism != "PLAIN":
        final = scram_final(user, bare, bytes(r.auth_bytes).decode(), cnonce)
        r = await call(c, 36, 2, wire.SaslAuthenticateRequest(auth_bytes=final))
        if r.error_code:
            raise LoginFailed(f"SaslAuthenticate error {r.error_code}: {r.error_message}")
        if not bytes(r.auth_bytes).startswith(b"v="):
            raise LoginFailed(f"no server signature: {bytes(r.auth_bytes)[:40]!r}")


def opener(srv: SecureServer, protocol: str, mechanism: str = "SCRAM-SHA-512"):
    """connect(port) for request_load: a connection on `protocol`'s listener, logged in when it is a SASL one."""
    users = iter(srv.users * 1_000_000)

    async def connect(_port: int) -> Conn:
        tls = protocol in ("SSL", "SASL_SSL")
        c = await Conn.open(srv.ports[protocol], ssl=srv.client_ssl if tls else None, server_hostname=HOST)
        if protocol.startswith("SASL"):
            await login(c, mechanism, next(users))
        return c

    return connect


# ---- 1. heartbeats per server CPU-second by protocol ---------------------------------------------------------

async def heartbeat_round(srv: SecureServer, protocol: str, group, pipelined: bool) -> tuple[int, float, float]:
    """(heartbeats answered, server CPU-seconds, wall seconds) of one round on `protocol`'s listener."""
    connect = opener(srv, protocol)
    n = HB_CONNS if pipelined else SINGLE_CONNS
    conns = [await connect(0) for _ in range(n)]
    ready = iter(conns)

    async def take(_port: int) -> Conn:
        return next(ready)

    cpu0 = srv.cpu_seconds()
    if pipelined:
        load = await heartbeat_load(srv.ports[protocol], group, n, ROUND_S, connect=take)
    else:
        gid = group.instance_ids[0].rsplit("-instance-", 1)[0]
        load = await request_load(srv.ports[protocol], [(12, 4, wire.HeartbeatRequest(
            group_id=gid, generation_id=group.generation, member_id=mid, group_instance_id=iid))
            for mid, iid in zip(group.member_ids[:n], group.instance_ids[:n])], n, ROUND_S, connect=take)
    cpu = srv.cpu_seconds() - cpu0
    await asyncio.sleep(0.2)
    return load.requests, cpu, load.seconds


def test_heartbeats_per_server_cpu_second_by_protocol(benchmark: Any, server: SecureServer, capsys) -> None:
    group = asyncio.run(form_group(server.port, "load", MEMBERS, HB_CONNS))
    # the members answer on every listener: a heartbeat's errors are checked once per protocol
    for protocol in PROTOCOLS:
        async def check(protocol=protocol) -> int:
            c = await opener(server, protocol)(0)
            r = await call(c, 12, 4, wire.HeartbeatRequest(group_id="load", generation_id=group.generation,
                                                          member_id=group.member_ids[0],
                                                          group_instance_id=group.instance_ids[0]))
            c.close()
            return r.error_code
        assert asyncio.run(check()) == E.NONE, protocol

    def run() -> dict[str, dict[str, list[tuple[int, float, float]]]]:
        out: dict[str, dict[str, list]] = {"pipelined": {p: [] for p in PROTOCOLS},
                                           "one in flight": {p: [] for p in PROTOCOLS}}
        for _ in range(ROUNDS):
            for kind, pipelined in (("pipelined", True), ("one in flight", False)):
                for protocol in PROTOCOLS:
                    out[kind][protocol].append(asyncio.run(heartbeat_round(server, protocol, group, pipelined)))
        return out

    rounds = benchmark.pedantic(run, rounds=1, iterations=1)
    figures: dict[str, dict[str, Any]] = {}
    lines = [f"heartbeats per server CPU-second, {MEMBERS:,} members; {ROUNDS} rounds of {ROUND_S:g} s per protocol "
             f"and load, the protocols one after the other in each round (medians over the rounds; the ratio is the "
             f"median of each round's ratio to that round's PLAINTEXT)"]
    for kind, by_protocol in rounds.items():
        rates = {p: [n / max(cpu, 1e-9) for n, cpu, _ in rs] for p, rs in by_protocol.items()}
        figures[kind] = {p: {"heartbeats_per_server_cpu_s": round(statistics.median(rates[p])),
                             "heartbeats_per_s": round(statistics.median(n / s for n, _, s in by_protocol[p])),
                             "ratio_to_plaintext": round(statistics.median(
                                 r / base for r, base in zip(rates[p], rates["PLAINTEXT"])), 3),
                             "rounds": [(n, round(cpu, 2), round(s, 2)) for n, cpu, s in by_protocol[p]]}
                         for p in PROTOCOLS}
        shape = f"{HB_CONNS} connections x {MEMBERS // HB_CONNS} per write" if kind == "pipelined" else \
            f"{SINGLE_CONNS} connections x 1"
        lines.append(f"  {kind} ({shape}):")
        for p in PROTOCOLS:
            f = figures[kind][p]
            lines.append(f"    {p:<10} {f['heartbeats_per_server_cpu_s']:>9,} per server CPU-s "
                         f"({f['ratio_to_plaintext']:.2f} of PLAINTEXT)   {f['heartbeats_per_s']:>8,}/s wall   "
                         f"rounds {', '.join(f'{r / 1e3:.0f}k' for r in rates[p])}")
    pipelined = figures["pipelined"]
    worst = min(pipelined[p]["ratio_to_plaintext"] for p in ("SSL", "SASL_SSL"))
    lines.append(f"target (pipelined, gated): SSL and SASL_SSL >= {TARGET_RATIO:.2f} of PLAINTEXT: "
                 f"{'ok' if worst >= TARGET_RATIO else 'MISS'} (worst {worst:.2f}); one in flight: reported, not gated "
                 f"(each heartbeat is its own TLS record both ways, whose cost no server change removes)")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    benchmark.extra_info.update(kind="security-heartbeats", figures=figures, target_ratio=TARGET_RATIO)
    assert worst >= TARGET_RATIO, f"TLS heartbeats at {worst:.2f} of PLAINTEXT's per server CPU-second"


# ---- 2. logins per second -------------------------------------------------------------------------------------

async def login_load(srv: SecureServer, mechanism: str) -> tuple[int, int, float, float]:
    """(logins done, failures, wall seconds, server CPU-seconds): LOGIN_CLIENTS clients log in over and over."""
    port = srv.ports["SASL_PLAINTEXT"]
    done = failed = 0
    stop = time.perf_counter() + LOGIN_S

    async def client(i: int) -> None:
        nonlocal done, failed
        k = i
        while time.perf_counter() < stop:
            user = srv.users[k % len(srv.users)]
            k += LOGIN_CLIENTS
            c = await Conn.open(port)
            try:
                await login(c, mechanism, user)
                done += 1
            except (LoginFailed, ConnectionError):
                failed += 1
            finally:
                c.close()

    cpu0 = srv.cpu_seconds()
    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(LOGIN_CLIENTS)))
    elapsed = time.perf_counter() - t0
    return done, failed, elapsed, srv.cpu_seconds() - cpu0


def test_logins_per_second(benchmark: Any, server: SecureServer, capsys) -> None:
    def run() -> dict[str, tuple[int, int, float, float]]:
        return {m: asyncio.run(login_load(server, m)) for m in ("SCRAM-SHA-512", "PLAIN")}

    results = benchmark.pedantic(run, rounds=1, iterations=1)
    lines = [f"full logins over SASL_PLAINTEXT (connect, ApiVersions, SaslHandshake, SaslAuthenticate..., close), "
             f"{LOGIN_CLIENTS} concurrent clients for {LOGIN_S:g} s"]
    figures = {}
    for m, (done, failed, s, cpu) in results.items():
        figures[m] = {"logins_per_s": round(done / s), "logins_per_server_cpu_s": round(done / max(cpu, 1e-9)),
                      "server_cpu_ms_per_login": round(cpu / max(done, 1) * 1e3, 3), "failed": failed,
                      "server_cpu_s": round(cpu, 2), "seconds": round(s, 2)}
        f = figures[m]
        lines.append(f"  {m:<14} {f['logins_per_s']:>6,}/s wall   {f['logins_per_server_cpu_s']:>6,} per server "
                     f"CPU-s ({f['server_cpu_ms_per_login']} ms each; server CPU {cpu:.2f} s in {s:.2f} s)   "
                     f"failed {failed}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    benchmark.extra_info.update(kind="security-logins", figures=figures)
    assert all(f["failed"] == 0 and f["logins_per_s"] > 0 for f in figures.values()), figures


# ---- 3. a bystander's heartbeats during a login storm ------------------------------------------------------

CONTROL = "no login (control)"  # the same storm's connections and round trips without authentication
OVER_TLS = "SCRAM-SHA-512 over SASL_SSL"  # each login after its own TLS handshake


async def storm(srv: SecureServer, mechanism: str) -> tuple[int, int, float]:
    """STORM connections opened at once on SASL_PLAINTEXT, each logging in at once: (done, failed, seconds). The
    control: as many connections on PLAINTEXT, each making a SCRAM login's four round trips with ApiVersions."""
    listener = {CONTROL: "PLAINTEXT", OVER_TLS: "SASL_SSL"}.get(mechanism, "SASL_PLAINTEXT")
    port, tls = srv.ports[listener], srv.client_ssl if listener == "SASL_SSL" else None
    mechanism = "SCRAM-SHA-512" if mechanism == OVER_TLS else mechanism
    t0 = time.perf_counter()

    async def control(c: Conn) -> None:
        for _ in range(4):
            await call(c, 18, 3, wire.ApiVersionsRequest(client_software_name="bench", client_software_version="1"))

    async def one(i: int) -> Conn | None:
        try:
            c = await asyncio.wait_for(Conn.open(port, ssl=tls, server_hostname=HOST), 60)
        except (TimeoutError, OSError):
            return None
        try:
            await asyncio.wait_for(control(c) if mechanism == CONTROL else
                                   login(c, mechanism, srv.users[i % len(srv.users)]), 60)
        except (TimeoutError, LoginFailed, OSError):
            c.close()
            return None
        return c

    conns = await asyncio.gather(*(one(i) for i in range(STORM)))
    elapsed = time.perf_counter() - t0
    done = [c for c in conns if c is not None]
    for c in done:
        c.close()
    await asyncio.sleep(0.1)
    return len(done), STORM - len(done), elapsed


def storms_niced(srv: SecureServer, kinds: tuple[str, ...], out) -> None:
    """STORMS storms of each kind, from a process at nice STORM_NICE; put [(kind, start, end, done, failed,
    seconds, server CPU-seconds)] on `out`. The storm's client stands for a thousand clients on other machines: on a
    two-core machine, at the server's priority, its own CPU (a thousand asyncio connections in one Python process)
    would be taken from the server and the bystander, and the bystander would measure that."""
    os.nice(STORM_NICE)
    windows = []
    for _ in range(STORMS):
        for kind in kinds:
            cpu0 = srv.cpu_seconds()
            start = time.monotonic()
            done, failed, took = asyncio.run(storm(srv, kind))
            windows.append((kind, start, time.monotonic(), done, failed, took, srv.cpu_seconds() - cpu0))
            time.sleep(0.5)
    out.put(windows)


def test_bystander_during_login_storms(benchmark: Any, server: SecureServer, capsys) -> None:
    group = asyncio.run(form_group(server.port, "bystander", 1, 1))
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=bystander, args=(server.port, "bystander", group.member_ids[0], group.instance_ids[0],
                                               group.generation, stop, out))
    proc.start()
    kinds = ("SCRAM-SHA-512", "PLAIN", CONTROL, OVER_TLS)
    try:
        time.sleep(1.0)
        quiet = (time.monotonic() - 0.8, time.monotonic())

        def run() -> list[tuple[str, float, float, int, int, float, float]]:
            got = ctx.Queue()
            storms = ctx.Process(target=storms_niced, args=(server, kinds, got))
            storms.start()
            windows = got.get(timeout=300)
            storms.join(30)
            return windows

        windows = benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        stop.set()
        samples = out.get(timeout=60)
        proc.join(30)
    lines = [f"a bystander heartbeating every {BYSTANDER_PERIOD_S * 1e3:g} ms during {STORM:,} concurrent logins "
             f"over SASL_PLAINTEXT, {STORMS} storms of each (heartbeats in flight during a storm, pooled)"]
    quiet_lat = [d for t, d, _ in samples if quiet[0] <= t <= quiet[1]]
    lines.append(f"  {'before':<27} p99 {percentile(quiet_lat, 99) * 1e3:6.1f} ms  max "
                 f"{max(quiet_lat, default=0) * 1e3:6.1f} ms  ({len(quiet_lat)} heartbeats)")
    figures, missed = {}, []
    for kind in kinds:
        mine = [w for w in windows if w[0] == kind]
        during = [(d, e) for t, d, e in samples if any(t <= end and t + d >= start for _, start, end, *_ in mine)]
        lat = [d for d, _ in during]
        errors = sorted({e for _, e in during if e})
        done, failed = sum(w[3] for w in mine), sum(w[4] for w in mine)
        p99, worst = percentile(lat, 99), max(lat, default=0.0)
        figures[kind] = {"p99_ms": round(p99 * 1e3, 1), "max_ms": round(worst * 1e3, 1), "heartbeats": len(lat),
                         "logins": done, "failed": failed, "storm_s": [round(w[5], 2) for w in mine],
                         "server_cpu_s": [round(w[6], 2) for w in mine], "heartbeat_errors": errors,
                         "max_ms_per_storm": [round(max((d for t, d, _ in samples if t <= w[2] and t + d >= w[1]),
                                                        default=0.0) * 1e3, 1) for w in mine]}
        gated = kind != CONTROL
        if gated and (not lat or p99 >= P99_TARGET_S or errors or failed):
            missed.append(kind)
        f = figures[kind]
        lines.append(f"  {kind:<27} p99 {p99 * 1e3:6.1f} ms  max {worst * 1e3:6.1f} ms  ({len(lat)} heartbeats; "
                     f"max per storm {f['max_ms_per_storm']} ms; storms took {f['storm_s']} s, server CPU "
                     f"{f['server_cpu_s']} s; {failed} failed{'; heartbeat errors ' + str(errors) if errors else ''})"
                     f"   {'p99 < %g ms: ' % (P99_TARGET_S * 1e3) + ('MISS' if kind in missed else 'ok') if gated else 'not gated'}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    benchmark.extra_info.update(kind="security-login-storm", figures=figures, p99_target_ms=P99_TARGET_S * 1e3)
    assert not missed, f"bystander p99 at or over {P99_TARGET_S * 1e3:g} ms (or failures) during: {missed}"
