"""Write the seed corpus of the request fuzzer: `python -m tests.fuzz.make_seeds` (from the repository root).

corpus/fuzz_requests/seed-api*    one per API and version the codec decodes: the plausible request (plausible.py),
                                  encoded as it is, in a frame with a real header, against the server variant that
                                  serves every API (and a few against the others)
corpus/fuzz_requests/seed-flow-*  conversations: classic, consumer (KIP-848) and connect groups from join to leave,
                                  an online upgrade, the broker APIs, and framing (chunks of one byte, a bad size
                                  prefix after good frames, frames that share a delivery)

Seeds are rewritten on every run (files named seed-*); what the fuzzer added (named by their SHA-1) is kept.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from kcoord import wire

from .harness import MAX_CONNECTIONS, TOPICS, VARIANTS, run_input
from .plausible import PAIRS, REQUESTS, Params, encoded, selector

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus" / "fuzz_requests"

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH_OFFSETS = 11, 14, 12, 13, 8, 9
CGH, CGD, CONNECT_HB, PREPARE, INSTALL, CONNECT_DESCRIBE = 68, 69, 1000, 1001, 1002, 1003


class Ops:
    """A fuzz input, written operation by operation (harness.py has the format)."""

    def __init__(self, variant: int = 0) -> None:
        self.data = bytearray([variant])

    def request(self, key: int, version: int, body: bytes, conn: int = 0, client_id: bool = True) -> Ops:
        kb, vb = selector(key, version)
        self.data += bytes([0 | conn << 3 | (0 if client_id else 1) << 5, kb, vb]) + struct.pack(">H", len(body))
        self.data += body
        return self

    def template(self, key: int, version: int, conn: int = 0, member: int = 0, group: int = 0,
                 instance: int = 0, epoch: int = 0, flags: int = 0, mutations=(), deliver: bool = True) -> Ops:
        """member: 0 none (a join), n the n-th learned member id; group: 0 "g", 2 "h", 3 ""; instance: 0 none,
        2 "i1", 3 "i2"; epoch: 0 learned, 1 zero, 2 -1, 3 learned + 1; flags: plausible.Params.flags. Delivered
        at once unless `deliver` is False (what a later request is built from must have been answered)."""
        kb, vb = selector(key, version)
        k1 = member | group << 4 | instance << 6
        k2 = epoch | flags << 2
        self.data += bytes([1 | conn << 3, kb, vb, k1, k2, len(mutations)])
        for pos, val in mutations:
            self.data += struct.pack(">HB", pos, val)
        return self.deliver(conn) if deliver else self

    def raw(self, data: bytes, conn: int = 0) -> Ops:
        self.data += bytes([2 | conn << 3]) + struct.pack(">H", len(data)) + data
        return self

    def deliver(self, conn: int = 0, chunk: int = 255, with_next: bool = False) -> Ops:
        self.data += bytes([3 | conn << 3 | int(with_next) << 5, chunk - 1 if chunk < 255 else 255])
        return self

    def advance(self, ms: int) -> Ops:
        scale = next(i for i, s in enumerate((1, 10, 100, 1000)) if ms // s < 65536)
        self.data += bytes([4 | scale << 5]) + struct.pack(">H", ms // (1, 10, 100, 1000)[scale])
        return self

    def close(self, conn: int = 0) -> Ops:
        self.data += bytes([5 | conn << 3])
        return self


def variant_topics(variant: int) -> tuple[tuple[str, bytes, int], ...]:
    """The topics a variant's server starts with, ids included (os.urandom is seeded alike in every run)."""
    run = run_input(bytes([variant]))
    return tuple((t.name, t.topic_id, t.partitions) for t in sorted(run.server.topics.by_name.values(),
                                                                   key=lambda t: t.name))


def api_seeds() -> dict[str, bytes]:
    out = {}
    topics = variant_topics(0)
    for key, version in PAIRS:
        name = REQUESTS[key].name if key in REQUESTS else f"api{key}"
        body = encoded(key, version, Params(topics=topics, member="m-1", epoch=1, instance="i1" if version % 2
                                            else None))
        out[f"seed-api{key:04d}-v{version:02d}-{name}"] = bytes(Ops(0).request(key, version, body).data)
    for variant in range(1, len(VARIANTS)):  # the newest version of each API against the other variants
        topics = variant_topics(variant)
        for key in sorted({k for k, _ in PAIRS}):
            version = wire.API_VERSIONS[key][1]
            body = encoded(key, version, Params(topics=topics))
            out[f"seed-api{key:04d}-v{version:02d}-variant{variant}"] = bytes(Ops(variant).request(key, version,
                                                                                                 body).data)
    return out


def flow_seeds() -> dict[str, bytes]:
    out = {}
    # classic, static members (JoinGroup v5+): both join, the delay passes, the leader syncs for both, then
    # heartbeats, commits with its generation, fetches offsets, describes, lists, leaves; the group is deleted
    for version, sync_v, hb_v, commit_v in ((5, 3, 3, 7), (9, 5, 4, 10)):
        o = Ops(0).template(JOIN, version, conn=0, instance=2).template(JOIN, version, conn=1, instance=3)
        o.deliver(0).deliver(1).advance(10)
        o.template(SYNC, sync_v, conn=0, member=1, instance=2).template(SYNC, sync_v, conn=1, member=2, instance=3)
        o.deliver(0).deliver(1)
        o.template(HEARTBEAT, hb_v, member=1, instance=2).template(COMMIT, commit_v, member=1, instance=2)
        o.template(FETCH_OFFSETS, 8, member=1).template(15, 5).template(16, 5, flags=3)
        o.template(LEAVE, 5, member=1, instance=2).template(LEAVE, 5, conn=1, member=2, instance=3)
        o.advance(1000).template(42, 2)
        out[f"seed-flow-classic-static-v{version}"] = bytes(o.data)
    # classic, dynamic members: v4's MEMBER_ID_REQUIRED round, a second join with the id, sync, a session timeout
    o = Ops(0).template(JOIN, 4).deliver().template(JOIN, 4, member=1).deliver().advance(10)
    o.template(SYNC, 2, member=1).template(HEARTBEAT, 2, member=1).advance(30_000).template(HEARTBEAT, 2, member=1)
    out["seed-flow-classic-dynamic"] = bytes(o.data)
    # classic under Kafka's defaults: the 3 s initial delay, a join that waits it out; a rejoin; a sync timeout
    o = Ops(1).template(JOIN, 7, instance=2).deliver().advance(1000).template(JOIN, 7, conn=1).deliver(1)
    o.advance(3000).template(JOIN, 7, member=1, instance=2).advance(3000).advance(60_000)
    out["seed-flow-classic-initial-delay"] = bytes(o.data)
    # consumer groups (KIP-848): two members join (v1: ids of their own), heartbeat with what they were assigned,
    # describe, commit with the member epoch, one leaves (-1), the other is fenced by an epoch past the group's
    o = Ops(0).template(CGH, 1, flags=2).template(CGH, 1, conn=1, flags=2 | 4).deliver(0).deliver(1)
    o.template(CGH, 1, member=1).template(CGH, 1, conn=1, member=2).template(CGH, 1, member=1)
    o.template(CGD, 1).template(COMMIT, 10, member=1).template(FETCH_OFFSETS, 10, member=1)
    o.template(CGH, 1, conn=1, member=2, epoch=2).template(CGH, 1, member=1, epoch=3).advance(50_000)
    out["seed-flow-consumer"] = bytes(o.data)
    # a regex subscription, a static member's temporary leave (-2) and its return, server assignor range
    o = Ops(0).template(CGH, 1, instance=2, flags=2 | 8 | 1).template(CGH, 1, member=1, instance=2)
    o.template(CGH, 1, member=1, instance=2, flags=4).template(CGH, 0).deliver().advance(5_000)
    out["seed-flow-consumer-regex-static"] = bytes(o.data)
    # online upgrade: a classic consumer group, then a KIP-848 member joins the same group id
    o = Ops(0).template(JOIN, 9, instance=2).deliver().advance(10).template(SYNC, 5, member=1, instance=2)
    o.template(CGH, 1, conn=1, flags=2).deliver(1).template(HEARTBEAT, 4, member=1, instance=2).advance(10)
    o.template(15, 5).template(CGD, 1)
    out["seed-flow-upgrade"] = bytes(o.data)
    # connect groups: two workers join, the chosen one prepares and installs an assignment for both (the group
    # epoch Prepare answered), both heartbeat with it, describe; a worker's session runs out
    for variant in (0, 2):
        o = Ops(variant).template(CONNECT_HB, 0).template(CONNECT_HB, 0, conn=1).deliver(0).deliver(1)
        o.template(CONNECT_HB, 0, member=1).template(PREPARE, 0, member=1).deliver()
        o.template(INSTALL, 0, member=1).template(PREPARE, 0, member=2).template(INSTALL, 0, member=2)
        o.template(CONNECT_HB, 0, member=1, flags=4).template(CONNECT_HB, 0, conn=1, member=2, flags=4)
        o.template(CONNECT_DESCRIBE, 0).advance(50_000).template(CONNECT_DESCRIBE, 0)
        out[f"seed-flow-connect-variant{variant}"] = bytes(o.data)
    # the broker surface: metadata (all, named, an unknown topic), topics created and grown, a held Fetch
    # answered when its wait is over, Produce with acks=0 (never answered) and acks=-1, ListOffsets
    o = Ops(0).template(3, 12, flags=1).template(3, 12, flags=2).template(19, 7).template(37, 3)
    o.template(1, 17).template(1, 12, flags=4).template(0, 11, flags=1).template(0, 9).template(2, 10, flags=4)
    o.deliver().advance(600).template(18, 4).template(10, 6, flags=4)
    out["seed-flow-broker"] = bytes(o.data)
    # framing: two frames in one delivery, one-byte chunks, then a negative size after a good frame
    api = encoded(18, 3)
    o = Ops(0).request(18, 3, api).request(18, 0, b"").template(18, 2, deliver=False).deliver(chunk=1)
    o.request(18, 3, api, conn=1).template(12, 4, conn=2, member=1, deliver=False).deliver(1, with_next=True)
    o.request(18, 3, api, conn=2).raw(b"\xff\xff\xff\xfe", conn=2).deliver(2, chunk=3)
    out["seed-flow-framing"] = bytes(o.data)
    # a frame at the limit of socket.request.max.bytes (4096 in variant 2) and one a byte past it
    o = Ops(2).raw(struct.pack(">i", 4096) + bytes(4096)).deliver().raw(struct.pack(">i", 4097), conn=1)
    o.deliver(1)
    out["seed-flow-frame-limit"] = bytes(o.data)
    # a client that closes with requests parked (a join waiting out the delay), and max.connections (2)
    o = Ops(2).template(JOIN, 9, instance=2).deliver().close().template(18, 3, conn=1).template(18, 3, conn=2)
    o.deliver(1).deliver(2).advance(200)
    out["seed-flow-close-parked"] = bytes(o.data)
    assert max(len(v) for v in out.values()) < 8192 and MAX_CONNECTIONS == 3 and TOPICS
    return out


def main() -> int:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("seed-*"):
        old.unlink()
    seeds = {**api_seeds(), **flow_seeds()}
    for name, data in seeds.items():
        (CORPUS / name).write_bytes(data)
    total = sum(f.stat().st_size for f in CORPUS.iterdir())
    print(f"{len(seeds)} seeds written to {CORPUS.relative_to(HERE.parents[1])} "
          f"({len(list(CORPUS.iterdir()))} files, {total} bytes in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
