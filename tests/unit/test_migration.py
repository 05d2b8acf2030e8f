"""KIP-848 online migration between classic and consumer groups (kcoord.groups.migration), in-process on the manual
clock, named after the GroupMetadataManagerTest cases
(testOnlineUpgrade*, testClassicGroupJoinToConsumerGroup*, testConsumerGroupHeartbeatToClassicGroup*,
testLastConsumerProtocolMemberLeaving*). Every test writes Kafka-format records; the restart tests replay them.
"""

from __future__ import annotations

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.assignors import decode_assignment, encode_assignment
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.consumer import STABLE, UNREVOKED_PARTITIONS, ConsumerGroup

from ..support.harness import DELAY, SESSION, MigrationHarness, owners
from ..support.snapshots import check_rebuild

TOPIC = MigrationHarness.TOPIC


# ---- upgrade -----------------------------------------------------------------------------------------------------

def test_online_upgrade_keeps_the_generation_and_each_members_assignment() -> None:
    h = MigrationHarness()
    a, b = h.form_classic(2)
    gen = h.group().generation
    r = h.chb("c", 0, join=True)
    assert r.error_code == E.NONE, r.error_message
    g = h.group()
    assert isinstance(g, ConsumerGroup)
    # the classic generation became the group epoch; the join bumped it once
    assert g.group_epoch == gen + 1 and r.member_epoch == gen + 1
    for mid, want in ((a, [0, 2, 4]), (b, [1, 3, 5])):
        m = g.members[mid]
        assert m.classic is not None and m.classic.session_timeout_ms == SESSION
        assert m.member_epoch == m.previous_member_epoch == gen and m.state == STABLE
        assert m.assigned.tolist() == want
    assert h.parts(r) == []  # everything is still held by the classic members
    owners(g)
    d = h.c.handle(wire.ConsumerGroupDescribeRequest(group_ids=["g"]), 1).groups[0]
    assert sorted(m.member_type for m in d.members) == [0, 0, 1]


def test_parked_joins_are_answered_rebalance_in_progress_on_upgrade() -> None:
    h = MigrationHarness()
    a, b = h.form_classic(2)
    parked = h.cjoin(a, owned=[0, 2, 4])  # a rejoins: the classic group waits for b
    assert not parked.done
    assert h.chb("c", 0, join=True).error_code == E.NONE
    assert parked.done and parked.response.error_code == E.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("config, setup, words", [
    ({"group_consumer_migration_policy": "downgrade"}, None, "online upgrade is disabled"),
    ({"group_consumer_migration_policy": "disabled"}, None, "online upgrade is disabled"),
    ({"group_consumer_max_size": 1}, None, "exceeds the consumer group maximum size"),
    ({}, "custom", "unsupported custom assignor"),
    ({}, "connect", "does not use the consumer embedded protocol"),
])
def test_online_upgrade_preconditions_answer_group_id_not_found(config, setup, words) -> None:
    h = MigrationHarness(**config)
    if setup == "custom":
        h.form_classic(2, protocol="my-assignor")
    elif setup == "connect":
        mid = h.join(ptype="connect", protocols=(("sessioned", b"x"),)).response.member_id
        r = h.join(mid, ptype="connect", protocols=(("sessioned", b"x"),))
        h.advance(2 * DELAY)
        assert r.done and r.response.error_code == 0
    else:
        h.form_classic(2)
    before = h.group()
    size = len(before.members)
    r = h.chb("c", 0, join=True)
    assert r.error_code == E.GROUP_ID_NOT_FOUND and words in r.error_message, r.error_message
    assert h.group() is before and isinstance(before, ClassicGroup) and len(before.members) == size > 0


def test_online_upgrade_refuses_a_malformed_subscription() -> None:
    h = MigrationHarness()
    h.form_classic(2)
    g = h.group()
    m = next(iter(g.members.members.values()))
    m.protocols[0].metadata = b"\x00\x03\xff"
    r = h.chb("c", 0, join=True)
    assert r.error_code == E.GROUP_ID_NOT_FOUND and "malformed" in r.error_message


def test_migration_policy_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="group.consumer.migration.policy"):
        MigrationHarness(group_consumer_migration_policy="sideways")
    assert MigrationHarness(group_consumer_migration_policy="UPGRADE").config.upgrade_enabled()


# ---- classic members inside a consumer group ----------------------------------------------------------------------

def upgraded() -> tuple[MigrationHarness, str, str, int]:
    h = MigrationHarness()
    a, b = h.form_classic(2)
    r = h.chb("c", 0, join=True)
    return h, a, b, r.member_epoch


def test_classic_members_rejoin_revoke_and_the_consumer_member_gets_its_share() -> None:
    h, a, b, epoch = upgraded()
    g = h.group()
    gen = epoch - 1
    # heartbeats tell the classic members to rejoin
    assert h.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, gen) == E.REBALANCE_IN_PROGRESS
    # a rejoins reporting what it owns: it must revoke first (cooperative), at its old epoch
    r = h.cjoin(a, owned=[0, 2, 4])
    assert r.done and r.response.error_code == E.NONE
    j = r.response
    assert (j.leader, j.members, j.protocol_type, j.protocol_name) == ("", [], "consumer", "cooperative-sticky")
    ma = g.members[a]
    assert j.generation_id == ma.member_epoch
    s = h.csync(a, j.generation_id)
    assert s.done and s.response.error_code == E.NONE
    kept = decode_assignment(s.response.assignment).partitions.get(TOPIC, [])
    assert sorted(kept) == ma.assigned.tolist()
    # each member rejoins until nothing moves; the consumer member heartbeats
    epochs = {a: j.generation_id, b: gen}
    held = {a: sorted(kept), b: [1, 3, 5]}
    cepoch, cparts = epoch, []
    for _ in range(6):
        for mid in (a, b):
            if h.heartbeat(mid, epochs[mid]) == E.REBALANCE_IN_PROGRESS:
                r = h.cjoin(mid, owned=held[mid])
                assert r.response.error_code == E.NONE
                epochs[mid] = r.response.generation_id
                s = h.csync(mid, epochs[mid])
                assert s.response.error_code == E.NONE, s.response
                held[mid] = sorted(decode_assignment(s.response.assignment).partitions.get(TOPIC, []))
        rc = h.chb("c", cepoch, cparts)
        assert rc.error_code == E.NONE
        cepoch = rc.member_epoch
        if rc.assignment is not None:
            cparts = h.parts(rc)
        owners(g)
        believed = held[a] + held[b] + cparts
        assert len(believed) == len(set(believed)), held  # never two holders, as the clients see it
    assert sorted(held[a] + held[b] + cparts) == list(range(6))
    assert len(cparts) == 2 and g.state_name == "Stable"


def test_classic_member_apis_inside_a_consumer_group_answer_kafkas_errors() -> None:
    h, a, b, epoch = upgraded()
    gen = epoch - 1
    # JoinGroup v4+ with no member id: MEMBER_ID_REQUIRED with an id to come back with
    r = h.cjoin("")
    assert r.response.error_code == E.MEMBER_ID_REQUIRED and r.response.member_id
    # protocols none of the other classic members support
    assert h.cjoin("", protocol="roundrobin").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("", ptype="connect").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.cjoin("c").response.error_code == E.UNKNOWN_MEMBER_ID  # the consumer member is not classic
    # SyncGroup: generation, protocol, must-rejoin
    assert h.csync(a, gen + 7).response.error_code == E.ILLEGAL_GENERATION
    assert h.csync(a, gen, protocol="range").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.csync(a, gen).response.error_code == E.REBALANCE_IN_PROGRESS  # behind the group epoch
    assert h.csync("nobody", gen).response.error_code == E.UNKNOWN_MEMBER_ID
    # Heartbeat
    assert h.heartbeat(a, gen + 1) == E.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", gen) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, gen, iid="other") == E.UNKNOWN_MEMBER_ID  # no member has that instance id
    # a consumer heartbeat with a classic member's id is refused
    assert h.chb(a, gen).error_code == E.UNKNOWN_MEMBER_ID
    # OffsetCommit: the generation is the member epoch (ILLEGAL_GENERATION otherwise), any version
    def commit(mid: str, generation: int, v: int = 7) -> int:
        req = wire.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=generation, member_id=mid,
                                       topics=[wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                           wire.OffsetCommitRequestPartition(partition_index=0,
                                                                             committed_offset=5)])])
        return h.c.handle(req, v).topics[0].partitions[0].error_code
    assert commit(a, gen) == E.NONE
    assert commit(a, gen + 1) == E.ILLEGAL_GENERATION


def test_a_dynamic_classic_member_joins_with_the_id_it_was_given() -> None:
    """KIP-394 inside a consumer group: MEMBER_ID_REQUIRED hands out an id; the JoinGroup that brings it back
    creates the member (Kafka's getOrMaybeSubscribeDynamicConsumerGroupMember), which then gets its share."""
    h, a, b, epoch = upgraded()
    mid = h.cjoin("").response.member_id
    r = h.cjoin(mid)
    assert r.done and r.response.error_code == E.NONE
    g = h.group()
    m = g.members[mid]
    assert m.classic is not None and g.group_epoch == epoch + 1 and r.response.generation_id == m.member_epoch
    full = MigrationHarness(group_consumer_max_size=3)
    full.form_classic(2)
    assert full.chb("c", 0, join=True).error_code == E.NONE
    assert full.cjoin("").response.error_code == E.GROUP_MAX_SIZE_REACHED  # checked before MEMBER_ID_REQUIRED
    assert full.cjoin("given-id").response.error_code == E.GROUP_MAX_SIZE_REACHED


def test_a_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    h, a, b, epoch = upgraded()
    gen = epoch - 1
    assert h.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS
    gb, held_b = gen, [1, 3, 5]
    for _ in range(12):  # a keeps heartbeating but never rejoins; b follows, c heartbeats
        h.advance(3_000)
        h.heartbeat(a, gen)
        gb, held_b = h.follow(b, gb, held_b)
        h.chb("c", h.group().members["c"].member_epoch)
    assert a not in h.group().members  # the join timer (its rebalance timeout, 30 s) fenced it
    assert b in h.group().members


def test_a_converted_classic_member_that_goes_silent_is_fenced_at_its_own_session_timeout() -> None:
    """Kafka's convertToConsumerGroup schedules each converted member's session timeout (its classic
    session.timeout.ms, not group.consumer.session.timeout.ms): one that never speaks again is fenced then, to the
    millisecond, while the others that keep heartbeating stay."""
    h, a, b, epoch = upgraded()
    assert SESSION < h.config.group_consumer_session_timeout_ms and SESSION < 30_000  # its own, not another timeout
    gen = epoch - 1
    held_b = [1, 3, 5]
    cepoch = epoch
    for _ in range(3):  # a is silent; b follows the rebalance, c heartbeats
        h.advance(3_000)
        gen, held_b = h.follow(b, gen, held_b)
        r = h.chb("c", cepoch)
        assert r.error_code == E.NONE
        cepoch = r.member_epoch
    h.advance(SESSION - 1 - 9_000)
    g = h.group()
    assert a in g.members
    h.advance(1)
    assert a not in g.members and {b, "c"} <= set(g.members)
    assert h.c.events.expiries == {("consumer", "session-timeout"): 1}
    assert h.heartbeat(a, epoch - 1) == E.UNKNOWN_MEMBER_ID


# ---- downgrade ----------------------------------------------------------------------------------------------------

def test_last_consumer_member_leaving_downgrades_to_a_stable_classic_group_that_rebalances() -> None:
    h, a, b, epoch = upgraded()
    g = h.group()
    targets = {mid: g.target.get(mid).tolist() for mid in (a, b)}
    r = h.chb("c", -1)
    assert r.error_code == E.NONE
    cg = h.group()
    assert isinstance(cg, ClassicGroup) and g.dead
    assert cg.generation == epoch  # the group epoch (the leave did not bump it); the rebalance comes next
    assert cg.state.value == "PreparingRebalance"  # a member left: a rebalance follows
    assert {m.member_id for m in cg.members.members.values()} == {a, b}
    for mid in (a, b):
        got = decode_assignment(cg.members.get(mid).assignment).partitions.get(TOPIC, [])
        assert sorted(got) == targets[mid]
    # the classic members carry on with the classic protocol
    assert h.heartbeat(a, cg.generation) == E.REBALANCE_IN_PROGRESS


def test_downgrade_writes_its_records_and_replays_as_a_classic_group() -> None:
    h, a, b, epoch = upgraded()
    h.chb("c", -1)
    c2 = h.restarted()
    g = c2.groups["g"]
    assert isinstance(g, ClassicGroup) and {m for m in g.members.members} == {a, b}


def test_upgrade_writes_its_records_and_replays_with_classic_members() -> None:
    h, a, b, epoch = upgraded()
    c2 = h.restarted()
    g = c2.groups["g"]
    assert isinstance(g, ConsumerGroup) and g.group_epoch == epoch
    assert g.members[a].classic is not None and g.members[a].classic.session_timeout_ms == SESSION
    assert g.members["c"].classic is None
    assert g.members[a].assigned.tolist() == h.group().members[a].assigned.tolist()


def test_no_downgrade_when_the_policy_only_upgrades() -> None:
    h = MigrationHarness(group_consumer_migration_policy="upgrade")
    h.form_classic(2)
    r = h.chb("c", 0, join=True)
    assert r.error_code == E.NONE
    h.chb("c", -1)
    assert isinstance(h.group(), ConsumerGroup) and len(h.group().members) == 2


def test_consumer_members_session_expiry_downgrades() -> None:
    h, a, b, epoch = upgraded()
    state = {a: (epoch - 1, [0, 2, 4]), b: (epoch - 1, [1, 3, 5])}
    for _ in range(20):  # the classic members follow; the consumer member is silent
        h.advance(3_000)
        if isinstance(h.group(), ClassicGroup):
            break
        for mid in (a, b):
            state[mid] = h.follow(mid, *state[mid])
    g = h.group()
    assert isinstance(g, ClassicGroup) and set(g.members.members) == {a, b}


def test_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: the classic static member takes the consumer-protocol
    member's place and its target; the group goes back to a Stable classic group, with no rebalance."""
    h = MigrationHarness()
    a, b = h.form_classic(2)
    assert h.chb("c", 0, join=True, iid="ic").error_code == E.NONE
    target = h.group().target.get("c").tolist()
    r = h.cjoin("", iid="ic")  # the same instance comes back with the classic protocol, at once (no -2 needed)
    g = h.group()
    assert isinstance(g, ClassicGroup) and g.state.value == "Stable"
    assert r.done and r.response.error_code == E.NONE
    new_id, gen = r.response.member_id, r.response.generation_id
    assert new_id != "c" and gen == g.generation
    assert {m.group_instance_id for m in g.members.members.values()} == {None, "ic"} and len(g.members) == 3
    s = h.csync(new_id, gen, iid="ic")
    assert s.done and s.response.error_code == E.NONE
    assert sorted(decode_assignment(s.response.assignment).partitions.get(TOPIC, [])) == target


def test_consumer_static_member_replaces_a_classic_static_member_at_once() -> None:
    """The other direction of a static roll: a classic static member never sends -2, so the consumer-protocol
    member with its instance id replaces it at once (Kafka throws UNRELEASED_INSTANCE_ID only when both speak
    the consumer protocol), taking over its partitions."""
    h = MigrationHarness()
    mids = {}
    replies = {iid: h.cjoin(iid=iid) for iid in ("i0", "i1")}
    h.advance(2 * DELAY)
    mids = {iid: r.response.member_id for iid, r in replies.items()}
    leader = replies["i0"].response.leader
    assignments = {mids["i0"]: encode_assignment({TOPIC: [0, 1, 2]}), mids["i1"]: encode_assignment({TOPIC: [3, 4, 5]})}
    for iid in ("i0", "i1"):
        h.csync(mids[iid], 1, iid, assignments=assignments if mids[iid] == leader else None)
    r = h.chb("c0", 0, join=True, iid="i0")
    assert r.error_code == E.NONE, r.error_message
    g = h.group()
    assert isinstance(g, ConsumerGroup) and mids["i0"] not in g.members
    m = g.members["c0"]
    assert m.classic is None and m.instance_id == "i0" and g.static["i0"] == "c0"
    assert m.assigned.tolist() == [0, 1, 2] and h.parts(r) == [0, 1, 2]
    owners(g)


def test_unrevoked_classic_member_gets_its_kept_partitions_at_sync() -> None:
    h, a, b, epoch = upgraded()
    r = h.cjoin(a, owned=[0, 2, 4])
    m = h.group().members[a]
    assert m.state == UNREVOKED_PARTITIONS and m.member_epoch == epoch - 1  # 4 goes to c: revoke first
    assert h.group().group_epoch > m.member_epoch  # behind, but UNREVOKED: SyncGroup still answers
    s = h.csync(a, r.response.generation_id)
    assert s.response.error_code == E.NONE
    kept = sorted(decode_assignment(s.response.assignment).partitions.get(TOPIC, []))
    assert kept == m.assigned.tolist() and len(kept) == 2 and set(kept) < {0, 2, 4}


# ---- the whole group at random: classic and consumer-protocol members mixed -----------------------------------------

class Classic:
    """An eager classic client (range): it gives up everything when told to rejoin; its leader assigns."""

    def __init__(self, h: MigrationHarness, name: str) -> None:
        self.h, self.name = h, name
        self.mid, self.gen, self.held = "", -1, []
        self.join = self.sync = None

    def start_join(self) -> None:
        self.held = []  # eager: revoke everything before rejoining
        self.join = self.h.join(self.mid, protocols=(("range", self.h.sub()),), session=SESSION)
        self.sync = None

    def act(self) -> bool:
        """One step; False when the client is gone (fenced and not coming back)."""
        h = self.h
        if self.join is not None:
            if not self.join.done:
                return True
            r, self.join = self.join.response, None
            if r.error_code == E.MEMBER_ID_REQUIRED:
                self.mid = r.member_id
                self.start_join()
                return True
            if r.error_code != E.NONE:
                self.mid = "" if r.error_code == E.UNKNOWN_MEMBER_ID else self.mid
                self.start_join()
                return True
            self.mid, self.gen = r.member_id, r.generation_id
            assignments = None
            if r.members:  # the leader of a classic group: range over the members
                ids = sorted(m.member_id for m in r.members)
                n = len(ids)
                parts = h.c.topics.get(TOPIC).partitions
                per, extra = divmod(parts, n)
                assignments, start = {}, 0
                for i, mid in enumerate(ids):
                    k = per + (1 if i < extra else 0)
                    assignments[mid] = encode_assignment({TOPIC: list(range(start, start + k))})
                    start += k
            self.sync = h.sync(self.mid, self.gen, assignments=assignments, pname="range")
            return True
        if self.sync is not None:
            if not self.sync.done:
                return True
            r, self.sync = self.sync.response, None
            if r.error_code == E.NONE:
                self.held = sorted(decode_assignment(r.assignment).partitions.get(TOPIC, [])) if r.assignment \
                    else []
            else:
                self.start_join()
            return True
        error = h.heartbeat(self.mid, self.gen)
        if error == E.REBALANCE_IN_PROGRESS:
            self.start_join()
        elif error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self.mid = "" if error == E.UNKNOWN_MEMBER_ID else self.mid
            self.start_join()
        return True

    def leave(self) -> None:
        if self.mid:
            self.h.leave((self.mid, None))


class Modern:
    """A consumer-protocol client (librdkafka's group.protocol=consumer, reduced)."""

    def __init__(self, h: MigrationHarness, name: str) -> None:
        self.h, self.name = h, name
        self.epoch, self.held = 0, []

    def act(self) -> bool:
        h = self.h
        r = h.chb(self.name, self.epoch, None if self.epoch == 0 else self.held, join=self.epoch == 0)
        if r.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.epoch, self.held = 0, []  # fenced: it gives everything up and joins again
            return True
        if r.error_code != E.NONE:
            return True  # e.g. GROUP_ID_NOT_FOUND while the classic group cannot be upgraded: retried
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.held = h.parts(r)
        return True

    def leave(self) -> None:
        if self.epoch > 0:
            self.h.chb(self.name, -1)


def check_disjoint(clients) -> None:
    believed = [p for c in clients for p in c.held]
    assert len(believed) == len(set(believed)), {c.name: c.held for c in clients}


REBUILD_EVERY = 40  # steps between two comparisons of the live group with one rebuilt from its records


@pytest.mark.parametrize("interval", [0, 1_000])
@pytest.mark.parametrize("seed", range(16))
def test_random_mixes_of_classic_and_consumer_members_never_share_a_partition_and_converge(seed: int,
                                                                                            interval: int) -> None:
    """Classic and consumer-protocol clients come and go in one group (upgrades and downgrades on the way): no
    partition is believed held by two clients, the group rebuilt from its records every REBUILD_EVERY steps is the
    live one (a classic group once settled), and once input stops everyone converges; with the target computed at
    every change and batched (group.consumer.assignment.interval.ms)."""
    import random

    rng = random.Random(seed)
    h = MigrationHarness(partitions=rng.randint(3, 9), group_consumer_assignment_interval_ms=interval)
    clients: list[Classic | Modern] = []
    n = 0
    due = REBUILD_EVERY
    for step in range(260):
        due -= 1
        if due <= 0 and check_rebuild(h.c, h.records, f"seed {seed}, before step {step}"):
            due = REBUILD_EVERY  # else at the next step: a classic group between generations is not compared
        op = rng.random()
        if (op < 0.08 and len(clients) < 6) or not clients:
            n += 1
            c = Modern(h, f"m{n}") if rng.random() < 0.5 else Classic(h, f"k{n}")
            if isinstance(c, Classic):
                c.start_join()
            clients.append(c)
        elif op < 0.12:
            c = clients.pop(rng.randrange(len(clients)))
            c.leave()
        else:
            rng.choice(clients).act()
        h.advance(rng.choice((0, 50, 200, 400)))
        check_disjoint(clients)
        g = h.c.groups.get("g")
        if isinstance(g, ConsumerGroup):
            owners(g)
    if not clients:  # everyone left: two newcomers, one of each protocol
        clients = [Classic(h, "k-last"), Modern(h, "m-last")]
        clients[0].start_join()
    # input stops: everyone keeps acting until the group is at rest
    for _ in range(400):
        for c in clients:
            c.act()
            check_disjoint(clients)
        h.advance(200)
    g = h.group()
    check_rebuild(h.c, h.records, f"seed {seed}, at rest")
    total = h.c.topics.get(TOPIC).partitions
    assert sorted(p for c in clients for p in c.held) == list(range(total)), {c.name: c.held for c in clients}
    assert g.state_name == "Stable", g.state_name
    kinds = {type(c) for c in clients}
    if Modern in kinds:
        assert isinstance(g, ConsumerGroup)
    else:
        assert isinstance(g, ClassicGroup)  # no consumer-protocol member left: back to classic


def test_a_restart_mid_roll_keeps_every_member_where_it_was() -> None:
    """A group with classic and consumer-protocol members at rest, restarted from its records: every member's
    next heartbeat is answered as before the restart (no rebalance), and nothing is held twice."""
    h, a, b, epoch = upgraded()
    state = {a: (epoch - 1, [0, 2, 4]), b: (epoch - 1, [1, 3, 5])}
    c_epoch, c_held = epoch, []
    for _ in range(6):
        for mid in (a, b):
            state[mid] = h.follow(mid, *state[mid])
        r = h.chb("c", c_epoch, c_held)
        c_epoch = r.member_epoch
        c_held = h.parts(r) if r.assignment is not None else c_held
    g = h.group()
    assert g.state_name == "Stable"
    before = {mid: (m.member_epoch, m.assigned.tolist()) for mid, m in g.members.items()}
    h.c = h.restarted()
    g2 = h.group()
    assert {mid: (m.member_epoch, m.assigned.tolist()) for mid, m in g2.members.items()} == before
    for mid in (a, b):
        assert h.heartbeat(mid, state[mid][0]) == E.NONE
    r = h.chb("c", c_epoch, c_held)
    assert (r.error_code, r.member_epoch, r.assignment) == (E.NONE, c_epoch, None)
    assert g2.group_epoch == g.group_epoch and g2.state_name == "Stable"
    owners(g2)


def test_leave_group_from_classic_members_inside_a_consumer_group() -> None:
    """LeaveGroup fences classic members as a -1 leave fences consumer-protocol ones (the epoch moves); an admin
    LeaveGroup naming the consumer-protocol member first and a classic member after downgrades at the first and
    hands the rest to the classic group."""
    h, a, b, epoch = upgraded()
    r = h.leave((a, None, "bye"))
    assert [m.error_code for m in r.members] == [E.NONE]
    g = h.group()
    assert isinstance(g, ConsumerGroup) and a not in g.members and g.group_epoch == epoch + 1
    owners(g)
    h2, a2, b2, _ = upgraded()
    r = h2.leave(("c", None), (a2, None))
    assert [m.error_code for m in r.members] == [E.NONE, E.NONE]
    g2 = h2.group()
    assert isinstance(g2, ClassicGroup) and set(g2.members.members) == {b2}


@pytest.mark.parametrize("fields, error", [
    ({"subscribed_topic_regex": "(unclosed"}, E.INVALID_REGULAR_EXPRESSION),
    ({}, E.GROUP_MAX_SIZE_REACHED),
])
def test_a_join_that_fails_leaves_the_classic_group_as_it_was(fields, error) -> None:
    """Kafka converts and joins in one write: when the join fails the conversion is not written either."""
    h = MigrationHarness(group_consumer_max_size=2 if not fields else 10)
    h.form_classic(2)
    before = h.group()
    keys = dict(h.records.scan())
    req = wire.ConsumerGroupHeartbeatRequest(group_id="g", member_id="c", member_epoch=0, rebalance_timeout_ms=1000,
                                             subscribed_topic_names=[TOPIC], topic_partitions=[], **fields)
    r = h.c.handle(req, 1, "cclient", "/127.0.0.1")
    assert r.error_code == error, r.error_message
    assert h.group() is before and isinstance(before, ClassicGroup) and before.state.value == "Stable"
    assert dict(h.records.scan()) == keys


def test_parked_syncs_are_answered_rebalance_in_progress_on_upgrade() -> None:
    h = MigrationHarness()
    ids = []
    joins = []
    for _ in range(2):
        mid = h.cjoin().response.member_id
        ids.append(mid)
        joins.append(h.cjoin(mid))
    h.advance(2 * DELAY)
    leader = joins[0].response.leader
    follower = next(m for m in ids if m != leader)
    parked = h.csync(follower, joins[0].response.generation_id)  # waits for the leader's assignment
    assert not parked.done and h.group().state.value == "CompletingRebalance"
    assert h.chb("c", 0, join=True).error_code == E.NONE
    assert parked.done and parked.response.error_code == E.REBALANCE_IN_PROGRESS
    assert isinstance(h.group(), ConsumerGroup)
