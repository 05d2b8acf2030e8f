"""The model of one classic group that random operation sequences drive (tests/unit/test_classic_model.py) and that
tests/unit/test_store.py extends with commits and restarts: clients (1-50, static and dynamic) join, rejoin, change
protocols, sync, heartbeat, leave, get removed in batches by instance id, restart with a new member id (static
replacement), and the clock jumps; `check` holds the invariants, `finish` stops everyone and lets time run out. In
process only (the harness), no socket."""

from __future__ import annotations

import random

from kcoord import errors as E
from kcoord import records as R
from kcoord.groups.classic import State

from .harness import ClassicHarness

PROTOCOL_SETS = [(("range", b"r"),), (("range", b"r2"), ("roundrobin", b"x")), (("roundrobin", b"x"), ("range", b"r")),
                 (("roundrobin", b"x"),)]


class Client:
    def __init__(self, n: int, static: bool) -> None:
        self.iid = f"inst-{n}" if static else None
        self.name = self.iid or f"dyn-{n}"
        self.member_id = ""
        self.generation = -1
        self.synced = -1
        self.protocols = PROTOCOL_SETS[0]


class Model:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.h = ClassicHarness()
        n = rng.randint(1, 50)
        self.clients = [Client(i, rng.random() < 0.6) for i in range(n)]
        self.replies: list = []
        self.max_generation = 0
        self.leaders: dict[int, set[str]] = {}  # generation -> identities that were told they lead
        self.identity: dict[str, str] = {}  # member id -> instance id or member id

    # ---- bookkeeping -------------------------------------------------------------------------------

    def track(self, reply, kind: str, client: Client):
        self.replies.append(reply)
        reply.on_done(lambda resp: self.answered(resp, kind, client))
        return reply

    def answered(self, resp, kind: str, client: Client) -> None:
        gen = resp.generation_id if kind == "join" else None
        if kind == "join" and resp.member_id:
            self.identity.setdefault(resp.member_id, client.iid or resp.member_id)
        g = self.h.c.groups.get("g")
        for mid, m in (g.members.members.items() if g is not None else ()):
            self.identity.setdefault(mid, m.group_instance_id or mid)
        if gen is not None and gen != -1:
            assert g is not None and 0 <= gen <= g.generation, f"response carries generation {gen} the group never had"
        if kind == "join" and resp.error_code == E.NONE:
            client.member_id, client.generation = resp.member_id, resp.generation_id
            if resp.leader:
                self.leaders.setdefault(gen, set()).add(self.identity.get(resp.leader, resp.leader))
        elif kind == "join" and resp.error_code == E.MEMBER_ID_REQUIRED:
            client.member_id = resp.member_id
        elif resp.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.member_id = "" if resp.error_code == E.UNKNOWN_MEMBER_ID or client.iid is None else client.member_id

    def check(self) -> None:
        g = self.h.c.groups.get("g")
        if g is None:
            return
        assert g.generation >= self.max_generation, "generation went down"
        self.max_generation = g.generation
        t = g.members
        for iid, mid in t.static_members.items():
            assert mid in t.members and t.members[mid].group_instance_id == iid
        for mid, m in t.members.items():
            if m.group_instance_id is not None:
                assert t.static_members[m.group_instance_id] == mid
        assert t.num_awaiting_join == sum(m.awaiting_join for m in t.members.values())
        # the running size of the group's record that JoinGroup is checked against (message.max.bytes)
        assert g.member_bytes.keys() == t.members.keys() and g.members_size == sum(g.member_bytes.values())
        for mid, m in t.members.items():
            assert g.member_bytes[mid] == R.group_member_size(mid, m.group_instance_id, m.client_id, m.client_host,
                                                              max(len(p.metadata) for p in m.protocols), 0)
        assert (g.leader_id in t.members) if t.members else g.leader_id is None
        for gen, who in self.leaders.items():
            assert len(who) == 1, f"generation {gen} had leaders {who}"
        if g.state in (State.COMPLETING_REBALANCE, State.STABLE):
            assert g.protocol_name is not None and t.members

    # ---- operations --------------------------------------------------------------------------------

    def step(self) -> None:
        rng, h = self.rng, self.h
        c = rng.choice(self.clients)
        g = h.c.groups.get("g")
        op = rng.random()
        if c.member_id and c.generation > c.synced and g is not None and op < 0.7:
            self.sync(c, g)  # a client that joined syncs next, most of the time
        elif op < 0.30:
            if rng.random() < 0.05:
                c.protocols = rng.choice(PROTOCOL_SETS)
            self.track(h.join(c.member_id, c.iid, protocols=c.protocols), "join", c)
        elif op < 0.40:
            self.sync(c, g)
        elif op < 0.70:
            h.heartbeat(c.member_id or "x", c.generation, c.iid)
        elif op < 0.75:
            h.leave((c.member_id, c.iid if rng.random() < 0.5 else None, "model leave"))
        elif op < 0.78:
            statics = [x.iid for x in self.clients if x.iid is not None]
            if statics:
                h.leave(*[("", iid) for iid in rng.sample(statics, min(len(statics), rng.randint(1, 3)))])
        elif op < 0.86:
            if c.iid is not None:  # a static member restarts: new member id, same instance id
                c.member_id = ""
                self.track(h.join("", c.iid, protocols=c.protocols, v=rng.choice((5, 8, 9))), "join", c)
        else:
            h.advance(rng.choice((1, 100, 2_000, 3_000, 6_000, 12_000, 31_000)))

    def sync(self, c: Client, g) -> None:
        assign = None
        if g is not None and g.leader_id == c.member_id:
            assign = {mid: mid.encode()[:8] for mid in g.members.members}
        c.synced = c.generation
        self.track(self.h.sync(c.member_id or "x", c.generation, c.iid, assignments=assign,
                               pname=g.protocol_name if g is not None else "range"), "sync", c)

    def finish(self) -> None:
        for _ in range(40):  # everyone stops; session, join and sync timers run out
            self.h.advance(30_000)
        assert all(r.done for r in self.replies), "a parked request was never answered"
