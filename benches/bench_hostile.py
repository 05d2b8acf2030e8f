"""The hostile run of issue 30: every attack in turn against one real `kcoord serve` (with a data dir), while a
bystander group heartbeats at a fixed rate; per attack, the bystander's p99 and longest heartbeat and the server's
RSS before, at its peak (VmHWM, reset before each attack) and after.

The bystander is its own process (a raw client on a blocking socket, one heartbeat every BYSTANDER_PERIOD_S), so
the attacker's own work (encoding a 34 MiB request) never shows as the server's pause. A heartbeat counts for an
attack when it was in flight at any moment of it. The gate: no bystander heartbeat takes MAX_PAUSE_S or longer
during any attack (the issue's "the stall ones measure the longest pause of a bystander client's heartbeat during
the attack, gated in a bench, and show it under 100 ms"); the whole table is printed before the gate is applied.

Sizes are the issue's, but where one would take long on the 2-core machine: the trickling client runs for
TRICKLE_S, the rebalance-timeout member is watched for FREEZE_WATCH_S, and the "big group" before the 5,000 joins
is one member of BIG_META bytes (message.max.bytes now refuses the issue's 5 x 15 MiB; attack 3 shows that).
Marked slow (about 2-3 minutes): `make test` does not run it; run it with
`.venv/bin/python -m pytest benches/bench_hostile.py -m slow -s`.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import resource
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kcoord import wire

from .loadgen import Conn, ServerProcess, form_group

MAX_PAUSE_S = 0.100  # the gate: the longest bystander heartbeat during any attack
BYSTANDER_PERIOD_S = 0.010
PARTITIONS = 12
COMMIT_PARTITIONS = 2_000_000  # the OffsetCommit of an unknown topic (34 MiB)
HELD_FRAMES, HELD_FRAME_BYTES = 10, 90 << 20  # ten connections each holding 90 MiB of an unfinished frame
FAT_MEMBERS, FAT_META = 5, 15 << 20  # five JoinGroup members with 15 MiB of metadata each
JUNK_GROUPS = 100_000
IDLE_SOCKETS = 1_000
TRICKLE_S = 5.0  # the trickling client is watched this long (socket.request.timeout.ms is 30 s)
FREEZE_WATCH_S = 3.0
KIP848_JOINS = 5_000
BIG_META = 900_000  # the big group's member: just under message.max.bytes (1 MiB)


# ---- the server ----------------------------------------------------------------------------------------------

class Server(ServerProcess):
    """`kcoord serve` with a data dir, its log in a file, with its memory read from /proc."""

    def __init__(self, data_dir: str, log_path: str) -> None:
        super().__init__("group.initial.rebalance.delay.ms=300", topics=(f"orders:{PARTITIONS}",),
                         data_dir=data_dir, log_path=log_path)

    def status(self) -> dict[str, int]:
        """VmRSS and VmHWM in MiB."""
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line[:5]] = int(line.split()[1]) // 1024
        return out

    def reset_peak(self) -> bool:
        """Start VmHWM again from the current RSS (Linux: 5 > clear_refs); False where that is not allowed."""
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as fh:
                fh.write("5")
            return True
        except OSError:
            return False


# ---- the bystander -------------------------------------------------------------------------------------------

def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def bystander(port: int, group: str, member_id: str, instance_id: str, generation: int, stop, out) -> None:
    """Heartbeat every BYSTANDER_PERIOD_S (the next one waits for the answer: a stall shows as one long heartbeat);
    put [(monotonic sent, seconds, error code)] on `out` when `stop` is set."""
    samples = []
    sock = socket.create_connection(("127.0.0.1", port))
    corr = 0
    next_at = time.monotonic()
    while not stop.is_set():
        corr += 1
        frame = wire.encode_request(12, 4, corr, "bystander", wire.HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id))
        t = time.monotonic()
        try:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            _, body = wire.decode_response(12, 4, _recv_exact(sock, size))
            samples.append((t, time.monotonic() - t, body.error_code))
        except OSError:
            samples.append((t, time.monotonic() - t, -1))
            sock.close()
            sock = socket.create_connection(("127.0.0.1", port))
        next_at += BYSTANDER_PERIOD_S
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at = max(next_at, time.monotonic() - BYSTANDER_PERIOD_S)
    sock.close()
    out.put(samples)


# ---- the attacks ---------------------------------------------------------------------------------------------

@dataclass
class Attack:
    name: str
    scale: str
    start: float = 0.0
    end: float = 0.0
    rss: dict[str, int] = field(default_factory=dict)
    note: str = ""


async def responses(c: Conn, n: int, timeout: float) -> list[bytes]:
    return await asyncio.wait_for(c.responses(n), timeout)


async def big_commit(port: int) -> str:
    c = await Conn.open(port)
    frame = c.frame(8, 8, wire.OffsetCommitRequest(
        group_id="hostile-commit", generation_id_or_member_epoch=-1, member_id="", topics=[
            wire.OffsetCommitRequestTopic(name="no-such-topic", partitions=[
                wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=1)
                for p in range(COMMIT_PARTITIONS)])]))
    c.writer.write(frame)
    (resp,) = await responses(c, 1, 120)
    body = wire.decode_response(8, 8, resp)[1]
    c.close()
    codes = sorted({p.error_code for t in body.topics for p in t.partitions})
    return f"{len(frame) >> 20} MiB; partition errors {codes}"


def held_frames(port: int) -> str:
    """Ten connections each send 90 MiB of a frame that declares 95 MiB, and hold it (each sends what the server
    reads within a few seconds: a muted connection is not read)."""
    chunk = b"\x00" * (1 << 20)
    socks = []
    sent = [0] * HELD_FRAMES

    def fill(i: int, s: socket.socket) -> None:
        s.settimeout(4.0)
        try:
            s.sendall(struct.pack(">i", 95 << 20))
            while sent[i] < HELD_FRAME_BYTES:
                s.sendall(chunk)
                sent[i] += len(chunk)
        except OSError:
            pass

    threads = []
    for i in range(HELD_FRAMES):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
        threads.append(threading.Thread(target=fill, args=(i, s)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    time.sleep(1.0)
    for s in socks:
        s.close()
    return f"{sum(sent) >> 20} MiB sent of {HELD_FRAMES * HELD_FRAME_BYTES >> 20}"


def subscription(size: int) -> bytes:
    return b"\x00\x00" + wire.ConsumerProtocolSubscription(topics=["orders"], user_data=b"x" * size).encode(0)


async def classic_join(port: int, group: str, metas: list[bytes], rebalance_ms: int = 60_000,
                       timeout: float = 30) -> list[wire.JoinGroupResponse]:
    conns = [await Conn.open(port) for _ in metas]
    try:
        for i, (c, meta) in enumerate(zip(conns, metas)):
            c.writer.write(c.frame(11, 9, wire.JoinGroupRequest(
                group_id=group, session_timeout_ms=45_000, rebalance_timeout_ms=rebalance_ms, member_id="",
                group_instance_id=f"{group}-{i}", protocol_type="consumer",
                protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=meta)])))
        frames = await asyncio.wait_for(asyncio.gather(*(c.responses(1) for c in conns)), timeout)
        return [wire.decode_response(11, 9, f)[1] for (f,) in frames]
    finally:
        for c in conns:
            c.close()


async def fat_members(port: int) -> str:
    meta = subscription(FAT_META)
    answers = await classic_join(port, "hostile-fat", [meta] * FAT_MEMBERS)
    return f"join errors {sorted(r.error_code for r in answers)}"


async def junk_groups(port: int) -> str:
    conns = [await Conn.open(port) for _ in range(10)]
    per, batch = JUNK_GROUPS // len(conns), 2_000
    errors = 0
    for start in range(0, per, batch):
        for ci, c in enumerate(conns):
            c.writer.write(b"".join(c.frame(8, 8, wire.OffsetCommitRequest(
                group_id=f"junk-{ci}-{i:06d}", generation_id_or_member_epoch=-1, member_id="", topics=[
                    wire.OffsetCommitRequestTopic(name="orders", partitions=[
                        wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
                for i in range(start, min(start + batch, per))))
        for c in conns:
            for f in await responses(c, min(batch, per - start), 120):
                errors += any(p.error_code for t in wire.decode_response(8, 8, f)[1].topics for p in t.partitions)
    for c in conns:
        c.close()
    return f"{JUNK_GROUPS:,} groups, {errors} refused"


async def list_groups(port: int) -> str:
    c = await Conn.open(port)
    c.writer.write(c.frame(16, 4, wire.ListGroupsRequest()))
    (f,) = await responses(c, 1, 120)
    c.close()
    return f"{len(wire.decode_response(16, 4, f)[1].groups):,} listed"


async def delete_groups(port: int) -> str:
    c = await Conn.open(port)
    names = [f"junk-{ci}-{i:06d}" for ci in range(10) for i in range(JUNK_GROUPS // 10)]
    c.writer.write(c.frame(42, 2, wire.DeleteGroupsRequest(groups_names=names)))
    (f,) = await responses(c, 1, 120)
    c.close()
    results = wire.decode_response(42, 2, f)[1].results
    return f"{sum(not r.error_code for r in results):,} of {len(names):,} deleted"


async def frozen_member(port: int) -> str:
    """A member declaring a 2^31-1 ms rebalance timeout heartbeats and never rejoins; a second member joins:
    is its join answered within FREEZE_WATCH_S?"""
    (a,) = await classic_join(port, "hostile-freeze", [subscription(10)], rebalance_ms=2**31 - 1)
    gen = a.generation_id
    if a.leader == a.member_id:
        c = await Conn.open(port)
        c.writer.write(c.frame(14, 5, wire.SyncGroupRequest(
            group_id="hostile-freeze", generation_id=gen, member_id=a.member_id, group_instance_id="hostile-freeze-0",
            protocol_type="consumer", protocol_name="range", assignments=[])))
        await responses(c, 1, 30)
        c.close()
    hb = await Conn.open(port)
    joiner = await Conn.open(port)
    joiner.writer.write(joiner.frame(11, 9, wire.JoinGroupRequest(
        group_id="hostile-freeze", session_timeout_ms=45_000, rebalance_timeout_ms=60_000, member_id="",
        group_instance_id="hostile-freeze-b", protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=subscription(10))])))
    answered = asyncio.ensure_future(joiner.responses(1))
    deadline = time.monotonic() + FREEZE_WATCH_S
    while time.monotonic() < deadline and not answered.done():
        hb.writer.write(hb.frame(12, 4, wire.HeartbeatRequest(group_id="hostile-freeze", generation_id=gen,
                                                              member_id=a.member_id,
                                                              group_instance_id="hostile-freeze-0")))
        await responses(hb, 1, 30)
        await asyncio.sleep(0.2)
    done = answered.done()
    answered.cancel()
    hb.close()
    joiner.close()
    return f"second member's join answered within {FREEZE_WATCH_S:g} s: {'yes' if done else 'no'}"


def idle_sockets(port: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE_SOCKETS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, IDLE_SOCKETS + 1_000), hard))
    socks, refused = [], 0
    for _ in range(IDLE_SOCKETS):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            refused += 1
    time.sleep(1.0)
    try:  # a newcomer is still served
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(wire.encode_request(18, 0, 1, "newcomer", wire.ApiVersionsRequest()))
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            served = "served"
    except OSError as e:
        served = f"not served ({e})"
    for s in socks:
        s.close()
    return f"{len(socks)} open, {refused} refused; a newcomer {served}"


def trickle(port: int) -> str:
    frame = wire.encode_request(18, 0, 1, "trickle", wire.ApiVersionsRequest())
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    end, sent, closed = time.monotonic() + TRICKLE_S, 0, False
    while time.monotonic() < end and sent < len(frame) - 1:
        try:
            s.sendall(frame[sent:sent + 1])
            sent += 1
            if s.recv(1) == b"":
                closed = True
                break
        except TimeoutError:
            continue
        except OSError:
            closed = True
            break
    s.close()
    return f"{sent} bytes in {TRICKLE_S:g} s; closed by the server: {'yes' if closed else 'no'}"


async def kip848_joins(port: int) -> str:
    """The big group (one classic member of BIG_META bytes, Stable), then KIP-848 joins into it (an online
    upgrade: the scenario of the unexplained stall), pipelined on one connection."""
    (m,) = await classic_join(port, "hostile-big", [subscription(BIG_META)])
    if m.error_code == 0 and m.leader == m.member_id:
        c = await Conn.open(port)
        c.writer.write(c.frame(14, 5, wire.SyncGroupRequest(
            group_id="hostile-big", generation_id=m.generation_id, member_id=m.member_id,
            group_instance_id="hostile-big-0", protocol_type="consumer", protocol_name="range", assignments=[])))
        await responses(c, 1, 30)
        c.close()
    c = await Conn.open(port)
    c.writer.write(b"".join(c.frame(68, 1, wire.ConsumerGroupHeartbeatRequest(
        group_id="hostile-big", member_id=f"kip848-{i:05d}", member_epoch=0, rebalance_timeout_ms=300_000,
        subscribed_topic_names=["orders"], subscribed_topic_regex="", topic_partitions=[]))
        for i in range(KIP848_JOINS)))
    errors: dict[int, int] = {}
    for f in await responses(c, KIP848_JOINS, 300):
        code = wire.decode_response(68, 1, f)[1].error_code
        errors[code] = errors.get(code, 0) + 1
    c.close()
    return f"big member join error {m.error_code}; join answers by error code {errors}"


ATTACKS = (
    ("OffsetCommit of 2,000,000 unknown partitions", f"{COMMIT_PARTITIONS:,} partitions", big_commit),
    ("5 JoinGroup members of 15 MiB metadata", f"{FAT_MEMBERS} x {FAT_META >> 20} MiB", fat_members),
    ("100,000 junk groups (OffsetCommit)", f"{JUNK_GROUPS:,} groups", junk_groups),
    ("ListGroups of 100,000", f"{JUNK_GROUPS:,} groups", list_groups),
    ("DeleteGroups of 100,000", f"{JUNK_GROUPS:,} groups", delete_groups),
    ("a 2^31-1 ms rebalance-timeout member", f"watched {FREEZE_WATCH_S:g} s", frozen_member),
    ("~1,000 idle sockets", f"{IDLE_SOCKETS:,} sockets", idle_sockets),
    ("a slow trickling client", f"1 byte / 0.2 s for {TRICKLE_S:g} s", trickle),
    ("5,000 KIP-848 joins after the big group", f"{KIP848_JOINS:,} joins, member of {BIG_META:,} B", kip848_joins),
    # last: the server does not read a muted connection, so it does not see that its peer has gone, and the bytes it
    # held count against queued.max.request.bytes until the request deadline (30 s): the next large requests wait
    ("10 connections holding 90 MiB of a frame", f"{HELD_FRAMES} x {HELD_FRAME_BYTES >> 20} MiB", held_frames),
)


def run_attacks(srv: Server) -> list[Attack]:
    done = []
    for name, scale, fn in ATTACKS:
        a = Attack(name, scale)
        time.sleep(0.5)  # the previous attack's aftermath (its connections closing) is not this one's
        before = srv.status()
        srv.reset_peak()
        a.start = time.monotonic()
        try:
            a.note = asyncio.run(fn(srv.port)) if asyncio.iscoroutinefunction(fn) else fn(srv.port)
        except Exception as e:  # an attack that fails is reported, and the next one runs
            a.note = f"FAILED: {type(e).__name__}: {e}"
        a.end = time.monotonic()
        time.sleep(0.3)
        after = srv.status()
        a.rss = {"before": before["VmRSS"], "peak": after["VmHWM"], "after": after["VmRSS"]}
        done.append(a)
    return done


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))] if s else 0.0


@pytest.mark.slow
# an attack cut short by its timeout leaves its sockets to the garbage collector: reported in the table, not an error
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.benchmark(group="hostile run: a bystander's heartbeats while each attack of issue 30 runs")
def test_hostile_run(benchmark: Any, capsys) -> None:
    with tempfile.TemporaryDirectory(prefix="kcoord-hostile-") as tmp:
        srv = Server(os.path.join(tmp, "data"), os.path.join(tmp, "server.log"))
        try:
            group = asyncio.run(form_group(srv.port, "bystander", 1, 1))
            ctx = mp.get_context("fork")
            stop, out = ctx.Event(), ctx.Queue()
            proc = ctx.Process(target=bystander, args=(srv.port, "bystander", group.member_ids[0],
                                                       group.instance_ids[0], group.generation, stop, out))
            proc.start()
            time.sleep(1.0)
            attacks = benchmark.pedantic(run_attacks, args=(srv,), rounds=1, iterations=1)
            stop.set()
            samples = out.get(timeout=60)
            proc.join(30)
            with open(os.path.join(tmp, "server.log"), "rb") as fh:
                log_lines = sum(1 for _ in fh)
        finally:
            srv.stop()
    rows, failed = [], []
    for a in attacks:
        lat = [d for t, d, _ in samples if t <= a.end and t + d >= a.start]
        errs = sorted({e for t, d, e in samples if t <= a.end and t + d >= a.start and e})
        p99, worst = percentile(lat, 99), max(lat, default=0.0)
        ok = worst < MAX_PAUSE_S and lat
        if not ok:
            failed.append(a.name)
        rows.append((a.name, a.scale, f"{a.end - a.start:.1f} s", str(len(lat)), f"{p99 * 1e3:.1f}",
                     f"{worst * 1e3:.1f}", f"{a.rss['before']}/{a.rss['peak']}/{a.rss['after']}",
                     "ok" if ok else "FAIL", (f"errors {errs}; " if errs else "") + a.note))
    header = ("attack", "scale", "took", "heartbeats", "p99 ms", "max ms", "RSS MiB before/peak/after",
              f"< {MAX_PAUSE_S * 1e3:g} ms", "what happened")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header) - 1)]
    lines = [f"hostile run: bystander heartbeat every {BYSTANDER_PERIOD_S * 1e3:g} ms; server log {log_lines} lines"]
    for r in (header, *rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    benchmark.extra_info.update(kind="hostile-run", rows=[dict(zip(header, r)) for r in rows])
    assert not failed, f"the bystander waited {MAX_PAUSE_S * 1e3:g} ms or more during: {', '.join(failed)}"
