"""Drives an in-process Coordinator with a manual clock: requests in, Replies out, no sockets, no sleeping."""

from __future__ import annotations

from kcoord import wire
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.reply import Reply
from kcoord.store import GroupStore, MemoryRecords
from kcoord.timers import ManualClock

SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000
# The topics a harness starts with (name -> partitions): offsets are committed only to partitions the catalogue has
# (else UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers), as real clients only commit what Metadata showed them.
TOPICS = {"t": 8, "u": 8}


class Harness:
    def __init__(self, topics: dict[str, int] | None = None, **config) -> None:
        self.clock = ManualClock(1_000_000)
        self.config = GroupConfig(**{"group_initial_rebalance_delay_ms": DELAY, **config})
        self.records = MemoryRecords()  # every test also writes Kafka-format records, committed per request
        self.c = Coordinator(self.config, self.clock, store=GroupStore(self.records, self.clock.wall_ms))
        for name, n in (TOPICS if topics is None else topics).items():
            self.c.topics.create(name, n)

    def group(self, gid: str = "g"):
        return self.c.groups[gid]

    def advance(self, ms: int) -> int:
        """Move the clock forward, stopping at each timer deadline on the way (as the server's timer task
        wakes at each one); returns how many timers fired."""
        target = self.clock.ms + ms
        fired = 0
        while (d := self.c.next_deadline()) is not None and d <= target:
            self.clock.ms = max(self.clock.ms, d)
            fired += self.c.poll()
        self.clock.ms = target
        return fired

    def join(self, member_id: str = "", iid: str | None = None, *, gid: str = "g", v: int = 9,
             protocols=(("range", b"r"),), ptype: str = "consumer", session: int = SESSION,
             rebalance: int = REBALANCE, reason: str | None = None, client_id: str = "client") -> Reply:
        req = wire.JoinGroupRequest(
            group_id=gid, session_timeout_ms=session, rebalance_timeout_ms=rebalance if v >= 1 else -1,
            member_id=member_id, group_instance_id=iid if v >= 5 else None, protocol_type=ptype,
            protocols=[wire.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
            reason=reason if v >= 8 else None)
        return self.c.handle(req, v, client_id, "/127.0.0.1")

    def sync(self, member_id: str, generation: int, iid: str | None = None, *, gid: str = "g", v: int = 5,
             assignments: dict[str, bytes] | None = None, ptype: str | None = "consumer",
             pname: str | None = "range") -> Reply:
        req = wire.SyncGroupRequest(
            group_id=gid, generation_id=generation, member_id=member_id, group_instance_id=iid if v >= 3 else None,
            protocol_type=ptype if v >= 5 else None, protocol_name=pname if v >= 5 else None,
            assignments=[wire.SyncGroupRequestAssignment(member_id=k, assignment=a)
                         for k, a in (assignments or {}).items()])
        return self.c.handle(req, v)

    def heartbeat(self, member_id: str, generation: int, iid: str | None = None, *, gid: str = "g",
                  v: int = 4) -> int:
        req = wire.HeartbeatRequest(group_id=gid, generation_id=generation, member_id=member_id,
                                    group_instance_id=iid if v >= 3 else None)
        return self.c.handle(req, v).error_code

    def leave(self, *members: tuple[str, str | None] | tuple[str, str | None, str | None], gid: str = "g",
              v: int = 5) -> wire.LeaveGroupResponse:
        if v <= 2:
            req = wire.LeaveGroupRequest(group_id=gid, member_id=members[0][0])
        else:
            req = wire.LeaveGroupRequest(group_id=gid, members=[
                wire.LeaveGroupRequestMemberIdentity(member_id=m[0], group_instance_id=m[1],
                                                     reason=m[2] if len(m) > 2 and v >= 5 else None)
                for m in members])
        return self.c.handle(req, v)

    def advance_alive(self, ms: int, members: dict[str, str | None], step: int = SESSION // 3) -> None:
        """Advance while the given members (member id -> instance id) keep heartbeating."""
        gen = self.group().generation
        left = ms
        while left > 0:
            d = min(step, left)
            self.advance(d)
            left -= d
            for mid, iid in members.items():
                self.heartbeat(mid, gen, iid)

    # ---- composite steps ---------------------------------------------------------------------------

    def dynamic_member(self, **kw) -> str:
        """A dynamic member's KIP-394 first join: returns the id the coordinator hands out."""
        r = self.join(**kw)
        assert r.response.error_code == 79
        return r.response.member_id

    def form(self, *iids: str | None, v: int = 9, protocols=(("range", b"r"),)) -> dict[str, str]:
        """A Stable group: each entry an instance id (static) or None (dynamic); returns key -> member id.
        Keys are the instance ids, or "d0", "d1"... for dynamic members."""
        replies = {}
        for i, iid in enumerate(iids):
            key = iid if iid is not None else f"d{i}"
            if iid is None:
                mid = self.dynamic_member(v=v, protocols=protocols)
                replies[key] = self.join(mid, v=v, protocols=protocols)
            else:
                replies[key] = self.join(iid=iid, v=v, protocols=protocols)
        g = self.group()
        while any(not r.done for r in replies.values()):
            assert self.advance(DELAY) or g.timers.next_deadline() is not None
        ids = {k: r.response.member_id for k, r in replies.items()}
        leader = replies[next(iter(replies))].response.leader
        gen = g.generation
        syncs = {k: self.sync(mid, gen, k if k in iids else None,
                              assignments={m: f"a-{k2}".encode() for k2, m in ids.items()} if mid == leader else None)
                 for k, mid in ids.items() if mid != leader}
        lk = next(k for k, m in ids.items() if m == leader)
        syncs[lk] = self.sync(leader, gen, lk if lk in iids else None,
                              assignments={m: f"a-{k2}".encode() for k2, m in ids.items()})
        assert all(s.done and s.response.error_code == 0 for s in syncs.values())
        assert g.state.value == "Stable"
        return ids
