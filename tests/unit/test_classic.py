"""The classic protocol, case by case, named after the cases of Kafka's GroupMetadataManager (classicGroupJoin,
classicGroupSync, classicGroupHeartbeat, classicGroupLeave)."""

from __future__ import annotations

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.config import CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from kcoord.groups.classic import ADMIN_REMOVAL_REASON, State
from kcoord.records import group_key

from ..support.harness import DELAY, REBALANCE, SESSION, ClassicHarness


@pytest.fixture
def h() -> ClassicHarness:
    return ClassicHarness()


# ---- validation before the group --------------------------------------------------------------------

def test_join_empty_group_id_invalid_group_id(h):
    assert h.join(gid="").response.error_code == E.INVALID_GROUP_ID


@pytest.mark.parametrize("session", [5_999, 1_800_001])
def test_join_session_timeout_outside_bounds_invalid_session_timeout(h, session):
    assert h.join(session=session).response.error_code == E.INVALID_SESSION_TIMEOUT


def test_join_unknown_group_with_member_id_unknown_member_id(h):
    assert h.join("someone").response.error_code == E.UNKNOWN_MEMBER_ID
    assert "g" not in h.c.groups


# ---- capacity ---------------------------------------------------------------------------------------

def test_group_max_size_reached_for_new_member_when_stable():
    h = ClassicHarness(group_max_size=2)
    h.form("A", "B")
    r = h.join(iid="C")
    assert r.response.error_code == E.GROUP_MAX_SIZE_REACHED and r.response.member_id == ""
    assert h.group().state == State.STABLE and len(h.group().members) == 2


def test_group_max_size_in_preparing_rebalance_counts_awaiting_members():
    # KAFKA-9885: while rebalancing, capacity counts members awaiting a join response, so the last
    # members to rejoin are the ones turned away (and removed), not the ones that arrived first.
    h = ClassicHarness(group_max_size=2)
    ids = h.form("A", "B")
    h.join(ids["A"], "A", protocols=(("range", b"changed"),))  # leader rejoins: rebalance
    assert h.group().state == State.PREPARING_REBALANCE
    late = h.join(iid="C")
    assert not late.done  # one of two awaiting: C is accepted into the join phase
    rb = h.join(ids["B"], "B")
    assert rb.response.error_code == E.GROUP_MAX_SIZE_REACHED and rb.response.member_id == ""
    assert ids["B"] not in h.group().members and len(h.group().members) == 2


# ---- unknown member id ------------------------------------------------------------------------------

def test_new_member_dead_group_coordinator_not_available(h):
    h.form("A")
    g = h.group()
    g.unload()  # the group moved away; a request routed to it before the move sees Dead
    req = wire.JoinGroupRequest(group_id="g", session_timeout_ms=SESSION, member_id="", protocol_type="consumer",
                                protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")])
    r = g.join(req, 9, "c", "h")
    assert r.response.error_code == E.COORDINATOR_NOT_AVAILABLE and r.response.member_id == ""


def test_new_member_empty_group_without_protocols_inconsistent_group_protocol(h):
    assert h.join(protocols=()).response.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(ptype="").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_new_member_unsupported_protocol_inconsistent_group_protocol(h):
    h.form("A")
    r = h.join(iid="B", protocols=(("roundrobin", b""),))
    assert r.response.error_code == E.INCONSISTENT_GROUP_PROTOCOL and r.response.member_id == ""
    assert h.join(iid="B", ptype="connect").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_kip394_dynamic_member_v4_member_id_required(h):
    r = h.join(v=4, client_id="app")
    assert r.response.error_code == E.MEMBER_ID_REQUIRED
    assert r.response.member_id.startswith("app-") and len(r.response.member_id) == len("app-") + 36
    g = h.group()
    assert r.response.member_id in g.members.pending and len(g.members) == 0
    assert g.state == State.EMPTY  # no rebalance yet


def test_kip394_pending_member_expires_after_session_timeout(h):
    mid = h.dynamic_member(v=4)
    h.advance(SESSION - 1)
    assert mid in h.group().members.pending
    h.advance(1)
    assert mid not in h.group().members.pending
    assert h.join(mid, v=4).response.error_code == E.UNKNOWN_MEMBER_ID  # group exists, Empty


def test_dynamic_member_v3_added_at_once(h):
    r = h.join(v=3)
    assert not r.done and h.group().state == State.PREPARING_REBALANCE
    h.advance(DELAY)
    assert r.response.error_code == E.NONE and r.response.generation_id == 1


def test_kip345_static_member_never_gets_member_id_required(h):
    r = h.join(iid="A", v=5)
    assert not r.done
    h.advance(DELAY)
    assert r.response.error_code == E.NONE and r.response.member_id.startswith("A-")


def test_kip345_static_member_id_format_instance_id_uuid(h):
    r = h.join(iid="inst-1")
    h.advance(DELAY)
    assert r.response.member_id.startswith("inst-1-") and len(r.response.member_id) == len("inst-1-") + 36


# ---- known member id --------------------------------------------------------------------------------

def test_known_member_empty_group_bad_protocols_inconsistent_before_unknown_member(h):
    mid = h.dynamic_member()
    h.advance(SESSION)  # pending id expires; the group is Empty
    assert h.join(mid, protocols=()).response.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(mid).response.error_code == E.UNKNOWN_MEMBER_ID


def test_kip394_pending_member_second_join_added_then_rebalance(h):
    mid = h.dynamic_member()
    r = h.join(mid)
    assert mid in h.group().members and mid not in h.group().members.pending
    h.advance(DELAY)
    assert r.response.error_code == E.NONE and r.response.member_id == mid


def test_kip394_pending_member_with_instance_id_is_a_server_error(h):
    mid = h.dynamic_member()
    assert h.join(mid, iid="X").response.error_code == E.UNKNOWN_SERVER_ERROR


def test_validate_member_unmapped_instance_id_unknown_member_id(h):
    ids = h.form("A")
    assert h.join(ids["A"], "Z").response.error_code == E.UNKNOWN_MEMBER_ID


def test_validate_member_instance_mapped_to_other_member_fenced_instance_id(h):
    ids = h.form("A", "B")
    assert h.join(ids["B"], "A").response.error_code == E.FENCED_INSTANCE_ID


def test_validate_member_unknown_member_id(h):
    h.form("A")
    assert h.join("nobody").response.error_code == E.UNKNOWN_MEMBER_ID


def test_validate_member_static_member_without_instance_id_passes(h):
    ids = h.form("A", "B")
    r = h.join(ids["B"])  # follower, same protocols, no instance id: allowed
    assert r.response.error_code == E.NONE and r.response.generation_id == 1


def test_join_preparing_rebalance_updates_member_and_parks(h):
    ids = h.form("A", "B")
    ra = h.join(ids["A"], "A")  # leader rejoin -> PreparingRebalance
    assert not ra.done and h.group().state == State.PREPARING_REBALANCE
    rb = h.join(ids["B"], "B", protocols=(("range", b"new"),))
    assert ra.done and rb.done  # everyone joined: the join phase completes at once
    assert rb.response.generation_id == 2
    assert [(p.name, p.metadata) for p in h.group().members.get(ids["B"]).protocols] == [("range", b"new")]


def test_join_completing_rebalance_same_protocols_current_generation_no_rebalance(h):
    ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(DELAY)
    h.advance(DELAY)
    assert h.group().state == State.COMPLETING_REBALANCE
    leader = ra.response.leader
    again = h.join(leader, "A")
    assert again.response.error_code == E.NONE and again.response.generation_id == 1
    assert len(again.response.members) == 2 and again.response.skip_assignment is False
    follower = h.join(rb.response.member_id, "B")
    assert follower.response.members == []
    assert h.group().state == State.COMPLETING_REBALANCE and h.group().generation == 1


def test_join_completing_rebalance_changed_protocols_rebalances(h):
    _ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    r = h.join(rb.response.member_id, "B", protocols=(("range", b"other"),))
    assert not r.done and h.group().state == State.PREPARING_REBALANCE


def test_join_stable_leader_always_rebalances(h):
    ids = h.form("A", "B")
    r = h.join(ids["A"], "A")
    assert not r.done and h.group().state == State.PREPARING_REBALANCE
    assert h.group().history[-1].reason.startswith("leader re-joining group")


def test_join_stable_follower_changed_protocols_rebalances(h):
    ids = h.form("A", "B")
    assert not h.join(ids["B"], "B", protocols=(("range", b"x"),)).done
    assert h.group().state == State.PREPARING_REBALANCE


def test_join_stable_follower_same_protocols_current_generation(h):
    # kafka-python's extra JoinGroup after a SyncGroup (a kafka-python quirk): no rebalance.
    ids = h.form("A", "B")
    r = h.join(ids["B"], "B")
    assert r.response.error_code == E.NONE and r.response.generation_id == 1 and r.response.members == []
    assert r.response.leader == ids["A"]
    assert h.group().state == State.STABLE


def test_join_empty_group_known_member_unknown_member_id(h):
    ids = h.form(None)
    h.leave((ids["d0"], None))
    assert h.group().state == State.EMPTY
    assert h.join(ids["d0"]).response.error_code == E.UNKNOWN_MEMBER_ID


# ---- static member rejoining with an unknown member id ----------------------------------------------

def test_kip345_static_rejoin_stable_no_rebalance(h):
    ids = h.form("A", "B", "C")
    commits = h.records.commits
    r = h.join(iid="B")
    g = h.group()
    assert r.response.error_code == E.NONE and r.response.generation_id == 1
    assert r.response.member_id != ids["B"] and g.state == State.STABLE
    assert g.members.get(r.response.member_id).assignment == b"a-B"  # the old assignment is kept
    assert h.records.commits == commits + 1  # written before the reply: the new member id is in the store
    stored = wire.GroupMetadataValue.decode(h.records.data[group_key("g")][2:], 3)
    assert r.response.member_id in {m.member_id for m in stored.members}
    sync = h.sync(r.response.member_id, 1, "B")
    assert sync.response.assignment == b"a-B"


def test_kip814_static_leader_rejoin_v9_skip_assignment(h):
    ids = h.form("A", "B", "C")
    r = h.join(iid="A", v=9)
    assert r.response.skip_assignment is True
    assert r.response.leader == r.response.member_id != ids["A"]
    assert sorted(m.group_instance_id for m in r.response.members) == ["A", "B", "C"]
    assert h.group().state == State.STABLE and h.group().generation == 1


def test_kip814_static_leader_rejoin_v8_old_leader_id(h):
    ids = h.form("A", "B", "C")
    r = h.join(iid="A", v=8)
    assert r.response.leader == ids["A"] != r.response.member_id  # acts as a follower
    assert r.response.members == [] and r.response.skip_assignment is False
    assert h.group().leader_id == r.response.member_id


def test_kip814_static_follower_rejoin_v9_no_skip(h):
    ids = h.form("A", "B")
    r = h.join(iid="B", v=9)
    assert r.response.skip_assignment is False and r.response.members == []
    assert r.response.leader == ids["A"]


def test_kip345_replaced_static_member_old_id_fenced(h):
    ids = h.form("A", "B")
    h.join(iid="A")
    assert h.join(ids["A"], "A").response.error_code == E.FENCED_INSTANCE_ID
    assert h.sync(ids["A"], 1, "A").response.error_code == E.FENCED_INSTANCE_ID
    assert h.sync(ids["A"], 1).response.error_code == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(ids["A"], 1, "A") == E.FENCED_INSTANCE_ID


def test_kip345_static_rejoin_fences_old_parked_join(h):
    ids = h.form("A", "B")
    parked = h.join(ids["B"], "B", protocols=(("range", b"x"),))  # rebalance, B parked
    assert not parked.done
    new = h.join(iid="B")
    assert parked.response.error_code == E.FENCED_INSTANCE_ID
    assert not new.done  # PreparingRebalance: the new id takes the old one's place in the join phase


def test_kip345_static_rejoin_fences_old_parked_sync(h):
    _ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    follower_sync = h.sync(rb.response.member_id, 1, "B")
    assert not follower_sync.done
    new = h.join(iid="B")
    assert follower_sync.response.error_code == E.FENCED_INSTANCE_ID
    # CompletingRebalance: the replacement forces a rebalance (KAFKA-9801)
    assert h.group().state == State.PREPARING_REBALANCE and not new.done


def test_kip345_static_rejoin_stable_protocol_change_rebalances(h):
    h.form("A", "B", protocols=(("range", b""), ("roundrobin", b"")))
    r = h.join(iid="B", protocols=(("roundrobin", b""),))
    assert not r.done and h.group().state == State.PREPARING_REBALANCE


def test_kip345_static_rejoin_preparing_completes_join_phase(h):
    ids = h.form("A", "B")
    ra = h.join(ids["A"], "A")
    rb = h.join(iid="B")  # the only member not yet rejoined comes back with a new id
    assert ra.done and rb.done and rb.response.generation_id == 2


def test_kip345_static_leader_replacement_moves_leadership(h):
    h.form("A", "B")
    r = h.join(iid="A")
    assert h.group().leader_id == r.response.member_id


def test_kip345_rolling_bounce_keeps_generation_and_assignments(h):
    # Seed KIP-345's example: A, B, C at generation 5; each restarts with a new member id in turn.
    ids = h.form("A", "B", "C")
    g = h.group()
    for _ in range(4):  # bring the generation to 5 with ordinary rebalances
        leader = g.leader_id
        replies = {k: h.join(mid, k) for k, mid in ids.items()}
        assert all(r.done for r in replies.values())
        gen = g.generation
        for k, mid in ids.items():
            if mid != leader:
                h.sync(mid, gen, k)
        h.sync(leader, gen, next(k for k, m in ids.items() if m == leader),
               assignments={m: f"a-{k}".encode() for k, m in ids.items()})
    assert g.generation == 5 and g.state == State.STABLE
    before = {k: g.members.get(m).assignment for k, m in ids.items()}
    for k in ("A", "B", "C"):
        h.advance(1_000)
        r = h.join(iid=k)
        assert r.response.generation_id == 5 and g.state == State.STABLE
        ids[k] = r.response.member_id
        assert h.sync(ids[k], 5, k).response.assignment == before[k]
        for other, mid in ids.items():
            assert h.heartbeat(mid, 5, other) == E.NONE  # nobody sees a rebalance
    assert g.generation == 5


# ---- join phase and timers --------------------------------------------------------------------------

EXTENSIONS = ("last-join", "kafka")


@pytest.mark.parametrize("extension", EXTENSIONS)
def test_initial_rebalance_delay_extends_while_members_arrive_capped_by_rebalance_timeout(extension):
    h = ClassicHarness(group_initial_rebalance_extension=extension)
    first = h.join(iid="m0", rebalance=10_000)
    for i in range(1, 20):  # a new member every 2 s, for as long as the group waits
        h.advance(2_000)
        if first.done:
            break
        h.join(iid=f"m{i}", rebalance=10_000)
    # the delay started at 3 s with 7 s more allowed: only the 10 s cap (the rebalance timeout) ends it
    assert first.done and first.response.generation_id == 1
    assert h.clock.ms - START == 10_000
    assert len(first.response.members) == 5  # m0 at 0 s, then 2, 4, 6 and 8 s


START = ClassicHarness().clock.ms


def advance_until_done(h: ClassicHarness, r, step: int = 1) -> int:
    """Milliseconds until `r` completes, advancing in `step`s."""
    waited = 0
    while not r.done:
        h.advance(step)
        waited += step
        assert waited < 60_000
    return waited


@pytest.mark.parametrize("extension, formed_after", [("last-join", DELAY), ("kafka", 2 * DELAY)])
def test_initial_rebalance_of_members_that_arrive_together(extension, formed_after):
    # Three members join in the same millisecond, as clients started together do. Kafka's rule sees new members
    # in the first window and waits a second whole one; last-join completes one delay after the last join.
    h = ClassicHarness(group_initial_rebalance_extension=extension)
    rs = [h.join(iid=k) for k in "ABC"]
    assert advance_until_done(h, rs[0]) == formed_after
    assert all(r.done and r.response.generation_id == 1 for r in rs)


@pytest.mark.parametrize("extension, formed_after", [("last-join", 2_500 + DELAY), ("kafka", 2 * DELAY)])
def test_initial_rebalance_waits_the_delay_after_a_late_member(extension, formed_after):
    h = ClassicHarness(group_initial_rebalance_extension=extension)
    a = h.join(iid="A")
    h.advance(2_500)
    b = h.join(iid="B")
    assert 2_500 + advance_until_done(h, a) == formed_after
    assert b.done and {m.member_id for m in a.response.members} == {a.response.member_id, b.response.member_id}


@pytest.mark.parametrize("extension", EXTENSIONS)
def test_initial_rebalance_chain_of_arrivals(extension):
    # A member each 2 s for 8 s. last-join: done 3 s after the last (at 11 s). kafka: windows end at 3, 6, 9
    # (each saw a newcomer) and 12 s (the window 9-12 saw none).
    h = ClassicHarness(group_initial_rebalance_extension=extension)
    first = h.join(iid="m0", rebalance=60_000)
    for i in range(1, 5):
        h.advance(2_000)
        assert not first.done
        h.join(iid=f"m{i}", rebalance=60_000)
    waited = 8_000 + advance_until_done(h, first)
    assert waited == (11_000 if extension == "last-join" else 12_000)
    assert len(first.response.members) == 5


def test_initial_rebalance_extension_is_validated():
    assert GroupConfig.from_kafka({"group.initial.rebalance.extension": "kafka"}).group_initial_rebalance_extension \
        == "kafka"
    assert GroupConfig().group_initial_rebalance_extension == "last-join"
    with pytest.raises(ValueError, match="last-join, kafka"):
        GroupConfig.from_kafka({"group.initial.rebalance.extension": "never"})


def test_initial_rebalance_waits_the_delay_even_when_all_joined(h):
    r = h.join(iid="A")
    assert not r.done
    h.advance(DELAY - 1)
    assert not r.done
    h.advance(1)
    assert r.done and r.response.generation_id == 1


def test_generations_start_at_one(h):
    h.form("A")
    assert h.group().generation == 1


def test_join_completion_removes_dynamic_members_that_did_not_rejoin(h):
    ids = h.form(None, "B")
    r = h.join(ids["B"], "B", protocols=(("range", b"x"),))
    h.advance(REBALANCE)
    assert r.done and r.response.generation_id == 2
    assert ids["d0"] not in h.group().members


def test_join_completion_keeps_static_members_that_did_not_rejoin(h):
    ids = h.form("A", "B")
    r = h.join(ids["B"], "B", protocols=(("range", b"x"),))
    h.advance_alive(REBALANCE, {ids["A"]: "A"})  # A stays alive but does not rejoin
    assert r.done and r.response.generation_id == 2 and ids["A"] in h.group().members


def test_static_member_not_rejoined_is_removed_by_session_timeout(h):
    ids = h.form("A", "B")
    h.advance(SESSION - 1)
    assert h.heartbeat(ids["B"], 1, "B") == E.NONE
    h.advance(1)  # A missed its session timeout
    assert ids["A"] not in h.group().members
    assert h.group().state == State.PREPARING_REBALANCE
    assert h.group().history[-1].trigger == "session-timeout"


def test_new_member_join_times_out_after_five_minutes():
    # A new member's parked join is dropped after CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS, even while the
    # join phase (here bounded by a 10-minute rebalance timeout) is still waiting for others.
    h = ClassicHarness(group_max_rebalance_timeout_ms=600_000)
    ra = h.join(iid="A", rebalance=600_000)
    h.advance(DELAY)
    a = ra.response.member_id
    h.sync(a, 1, "A", assignments={})
    rb = h.join(iid="B", rebalance=600_000)
    h.advance_alive(CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS - 1_000, {a: "A"})
    assert not rb.done
    h.advance_alive(2_000, {a: "A"})
    assert rb.response.error_code == E.UNKNOWN_MEMBER_ID
    assert h.group().members.static_member_id("B") is None


def test_rebalance_timeout_is_max_of_members(h):
    h.join(iid="A", rebalance=20_000)
    h.join(iid="B", rebalance=50_000)
    assert h.group().rebalance_timeout_ms() == 50_000


JAVA_MAX_INT = 2**31 - 1


@pytest.mark.parametrize("bound", [None, 60_000])  # the default (300000), and group.max.rebalance.timeout.ms set
def test_a_member_that_heartbeats_and_never_rejoins_holds_the_join_phase_only_up_to_the_bound(bound):
    # X declares a rebalance timeout of 2^31-1 ms (24.8 days), keeps heartbeating and never rejoins: Kafka would
    # hold the group in PreparingRebalance that long; kcoord waits group.max.rebalance.timeout.ms, then removes X
    # as Kafka removes a member at the rebalance timeout.
    h = ClassicHarness() if bound is None else ClassicHarness(group_max_rebalance_timeout_ms=bound)
    limit = bound or GroupConfig().group_max_rebalance_timeout_ms
    x = h.dynamic_member()
    rx = h.join(x, rebalance=JAVA_MAX_INT)
    y = h.dynamic_member()
    ry = h.join(y)
    h.advance(2 * DELAY)
    assert rx.response.error_code == ry.response.error_code == E.NONE
    leader = rx.response.leader
    h.sync(leader, 1, assignments={x: b"x", y: b"y"})
    h.sync(x if leader == y else y, 1)
    g = h.group()
    assert g.state == State.STABLE
    assert g.members.get(x).rebalance_timeout_ms == JAVA_MAX_INT  # kept as declared...
    stored = wire.GroupMetadataValue.decode(h.records.data[group_key("g")][2:], 3)  # and stored as declared
    assert {m.member_id: m.rebalance_timeout for m in stored.members}[x] == JAVA_MAX_INT
    ry2 = h.join(y, reason="new subscription", protocols=(("range", b"y2"),))  # a rebalance X does not join
    assert g.state == State.PREPARING_REBALANCE
    h.advance_alive(limit - 1, {x: None}, step=1_000)  # ...but the group waits at most the bound
    assert g.state == State.PREPARING_REBALANCE and not ry2.done and x in g.members
    h.advance_alive(1, {x: None})
    assert ry2.done and ry2.response.error_code == E.NONE and ry2.response.generation_id == 2
    assert x not in g.members and g.history[-1].trigger == "join-timeout"
    assert h.heartbeat(x, 1) == E.UNKNOWN_MEMBER_ID


def test_a_leader_that_never_syncs_holds_the_sync_phase_only_up_to_the_bound():
    # The sync phase waits the same bounded rebalance timeout: a leader with 2^31-1 ms that never sends its
    # SyncGroup is removed at group.max.rebalance.timeout.ms, and the group rebalances without it.
    h = ClassicHarness(group_max_rebalance_timeout_ms=40_000)
    ra = h.join(iid="A", rebalance=JAVA_MAX_INT)
    rb = h.join(iid="B", rebalance=JAVA_MAX_INT)
    h.advance(DELAY)  # the join phase completes: the sync phase starts now
    a, b = ra.response.member_id, rb.response.member_id
    leader, follower = (a, "A"), (b, "B")
    if ra.response.leader != a:
        leader, follower = follower, leader
    parked = h.sync(follower[0], 1, follower[1])
    assert not parked.done and h.group().state == State.COMPLETING_REBALANCE
    h.advance_alive(40_000 - 1, {leader[0]: leader[1], follower[0]: follower[1]}, step=1_000)
    assert not parked.done and h.group().state == State.COMPLETING_REBALANCE
    h.advance(1)
    assert leader[0] not in h.group().members and h.group().state == State.PREPARING_REBALANCE
    assert parked.response.error_code == E.REBALANCE_IN_PROGRESS


def stored_group(h) -> bytes | None:
    return h.records.data.get(group_key("g"))


def test_a_join_whose_metadata_would_pass_message_max_bytes_is_refused_to_the_byte_and_nothing_is_kept():
    # The group's record (Kafka: it must fit the offsets topic's max.message.bytes) with B in it, B's metadata
    # counted in full: at the limit B joins, one byte above it is refused UNKNOWN_SERVER_ERROR and nothing of B
    # is kept (no member, no static id, no rebalance, nothing stored).
    limit = 4_000
    h = ClassicHarness(message_max_bytes=limit)
    a = h.form("A")["A"]
    b_id = "B-" + "x" * 36  # a static member's id: its instance id, a dash and a UUID
    room = limit - (R.group_record_size("g", "consumer", "range", a)
                    + R.group_member_size(a, "A", "client", "/127.0.0.1", 1, 0)
                    + R.group_member_size(b_id, "B", "client", "/127.0.0.1", 0, 0))
    g, before = h.group(), stored_group(h)
    refused = h.join(iid="B", protocols=(("range", b"m" * (room + 1)), ("other", b"")))
    assert refused.response.error_code == E.UNKNOWN_SERVER_ERROR and refused.response.member_id == ""
    assert len(g.members) == 1 and g.members.static_member_id("B") is None and g.state == State.STABLE
    assert stored_group(h) == before and g.members_size == R.group_member_size(a, "A", "client", "/127.0.0.1", 1, 0)
    taken = h.join(iid="B", protocols=(("range", b"m" * room), ("other", b"")))
    assert not taken.done and g.state == State.PREPARING_REBALANCE and len(g.members) == 2


def test_a_dynamic_members_huge_metadata_is_refused_at_either_join_under_the_default_bound(h):
    # Issue 30: five members with 15 MiB of metadata each made a 150 MiB record. Under message.max.bytes' default
    # (1048588) a member with 2 MiB of metadata is refused at its first join (no id handed out) and, after a
    # small first join, at its second (its pending id dropped).
    h.form("A")
    g = h.group()
    huge = (("range", b"m" * (2 << 20)),)
    first = h.join(protocols=huge)
    assert first.response.error_code == E.UNKNOWN_SERVER_ERROR and first.response.member_id == ""
    assert not g.members.pending
    mid = h.dynamic_member()
    second = h.join(mid, protocols=huge)
    assert second.response.error_code == E.UNKNOWN_SERVER_ERROR
    assert not g.members.pending and len(g.members) == 1 and g.state == State.STABLE
    assert h.join(mid).response.error_code == E.UNKNOWN_MEMBER_ID  # its pending id is gone


def test_a_member_whose_new_metadata_would_pass_message_max_bytes_keeps_its_old():
    h = ClassicHarness(message_max_bytes=2_000)
    ids = h.form("A", "B")
    g = h.group()
    r = h.join(ids["B"], "B", protocols=(("range", b"m" * 2_000),))
    assert r.response.error_code == E.UNKNOWN_SERVER_ERROR and r.response.member_id == ids["B"]
    assert g.state == State.STABLE and g.members.get(ids["B"]).metadata_for("range") == b"r"
    assert h.heartbeat(ids["B"], 1, "B") == E.NONE


def test_a_leaders_assignments_that_would_pass_message_max_bytes_fail_every_sync_and_the_group_rebalances():
    # Kafka writes the group's record with the leader's assignments; when the log refuses it (MESSAGE_TOO_LARGE)
    # every waiting SyncGroup gets UNKNOWN_SERVER_ERROR and the group prepares a rebalance. Nothing is stored.
    h = ClassicHarness(message_max_bytes=3_000)
    ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(DELAY)
    a, b = ra.response.member_id, rb.response.member_id
    leader, follower = (a, "A"), (b, "B")
    if ra.response.leader != a:
        leader, follower = follower, leader
    before = stored_group(h)
    parked = h.sync(follower[0], 1, follower[1])
    answer = h.sync(leader[0], 1, leader[1], assignments={a: b"x" * 1_500, b: b"y" * 1_500})
    assert answer.response.error_code == parked.response.error_code == E.UNKNOWN_SERVER_ERROR
    assert h.group().state == State.PREPARING_REBALANCE and stored_group(h) == before
    assert all(m.assignment == b"" for m in h.group().members)


def test_join_v0_uses_session_timeout_as_rebalance_timeout(h):
    h.join(v=0, session=7_000)
    assert next(iter(h.group().members)).rebalance_timeout_ms == 7_000


def test_pending_sync_expiry_removes_members_and_rebalances(h):
    ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    leader = ra.response.leader
    h.sync(leader, 1, "A", assignments={})
    assert h.group().state == State.STABLE
    h.advance_alive(REBALANCE, {leader: "A"})  # B never sent SyncGroup
    assert rb.response.member_id not in h.group().members
    assert h.group().state == State.PREPARING_REBALANCE


def test_protocol_selected_by_vote(h):
    ra = h.join(iid="A", protocols=(("roundrobin", b""), ("range", b"")))
    h.join(iid="B", protocols=(("range", b""), ("roundrobin", b"")))
    h.join(iid="C", protocols=(("range", b""), ("roundrobin", b"")))
    h.advance(2 * DELAY)
    assert ra.response.protocol_name == "range"


def test_join_v6_protocol_name_empty_string_not_null(h):
    r = h.join(v=6)
    assert r.response.protocol_name == ""


# ---- SyncGroup --------------------------------------------------------------------------------------

def test_sync_v5_missing_protocol_inconsistent_group_protocol(h):
    ids = h.form("A")
    assert h.sync(ids["A"], 1, "A", ptype=None).response.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_unknown_group_unknown_member_id(h):
    assert h.sync("m", 1, gid="nope").response.error_code == E.UNKNOWN_MEMBER_ID


def test_sync_empty_group_unknown_member_id(h):
    ids = h.form(None)
    h.leave((ids["d0"], None))
    assert h.sync(ids["d0"], 1).response.error_code == E.UNKNOWN_MEMBER_ID


def test_sync_fenced_instance_id(h):
    ids = h.form("A", "B")
    assert h.sync(ids["A"], 1, "B").response.error_code == E.FENCED_INSTANCE_ID


def test_sync_illegal_generation(h):
    ids = h.form("A")
    assert h.sync(ids["A"], 7, "A").response.error_code == E.ILLEGAL_GENERATION


def test_sync_unknown_member_before_illegal_generation(h):
    h.form("A")
    assert h.sync("x", 7).response.error_code == E.UNKNOWN_MEMBER_ID


def test_sync_inconsistent_protocol_name(h):
    ids = h.form("A")
    assert h.sync(ids["A"], 1, "A", pname="roundrobin").response.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_v3_without_protocol_passes(h):
    ids = h.form("A")
    assert h.sync(ids["A"], 1, "A", v=3).response.error_code == E.NONE


def test_sync_preparing_rebalance_in_progress(h):
    ids = h.form("A", "B")
    h.join(ids["A"], "A")
    assert h.sync(ids["B"], 1, "B").response.error_code == E.REBALANCE_IN_PROGRESS


def test_sync_follower_parked_until_leader_assigns(h):
    ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    fs = h.sync(rb.response.member_id, 1, "B")
    assert not fs.done
    ls = h.sync(ra.response.member_id, 1, "A", assignments={ra.response.member_id: b"x"})
    assert ls.response.assignment == b"x"
    assert fs.response.error_code == E.NONE and fs.response.assignment == b""  # missing from the map: empty
    assert fs.response.protocol_name == "range" and fs.response.protocol_type == "consumer"


def test_sync_stable_returns_stored_assignment(h):
    ids = h.form("A", "B")
    assert h.sync(ids["B"], 1, "B").response.assignment == b"a-B"


def test_sync_parked_followers_get_rebalance_in_progress_on_new_rebalance(h):
    _ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    fs = h.sync(rb.response.member_id, 1, "B")
    h.join(iid="C")  # a new member: the group rebalances while B waits for its assignment
    assert fs.response.error_code == E.REBALANCE_IN_PROGRESS


# ---- Heartbeat --------------------------------------------------------------------------------------

def test_heartbeat_unknown_group_unknown_member_id(h):
    assert h.heartbeat("m", 1, gid="nope") == E.UNKNOWN_MEMBER_ID


def test_heartbeat_fenced_before_illegal_generation(h):
    ids = h.form("A", "B")
    assert h.heartbeat(ids["A"], 99, "B") == E.FENCED_INSTANCE_ID
    assert h.heartbeat(ids["A"], 99, "A") == E.ILLEGAL_GENERATION


def test_heartbeat_empty_group_unknown_member_id(h):
    ids = h.form(None)
    h.leave((ids["d0"], None))
    assert h.heartbeat(ids["d0"], 1) == E.UNKNOWN_MEMBER_ID


def test_heartbeat_preparing_rebalance_in_progress_and_keeps_member_alive(h):
    ids = h.form("A", "B")
    h.join(ids["A"], "A")
    for _ in range(5):
        h.advance(SESSION // 2)
        assert h.heartbeat(ids["B"], 1, "B") == E.REBALANCE_IN_PROGRESS
    assert ids["B"] in h.group().members


def test_heartbeat_completing_rebalance_none(h):
    _ra, rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    assert h.heartbeat(rb.response.member_id, 1, "B") == E.NONE


def test_heartbeat_v1_static_member_resolved_by_member_id(h):
    # aiokafka's static members send Heartbeat v1, which has no instance id field.
    ids = h.form("A")
    assert h.heartbeat(ids["A"], 1, v=1) == E.NONE


# ---- LeaveGroup -------------------------------------------------------------------------------------

def test_leave_unknown_group_each_member_unknown(h):
    resp = h.leave(("a", None), ("b", None), gid="nope")
    assert resp.error_code == E.NONE and [m.error_code for m in resp.members] == [E.UNKNOWN_MEMBER_ID] * 2


def test_leave_v0_collapses_member_error_to_top_level(h):
    h.form("A")
    assert h.leave(("nobody", None), v=0).error_code == E.UNKNOWN_MEMBER_ID


def test_leave_dynamic_member_rebalances(h):
    ids = h.form(None, "B")
    resp = h.leave((ids["d0"], None, "shutting down"))
    assert resp.members[0].error_code == E.NONE
    g = h.group()
    assert g.state == State.PREPARING_REBALANCE
    assert g.history[-1].reason == "shutting down" and g.history[-1].trigger == "leave"


def test_kip345_batch_leave_admin_removal_by_instance_id(h):
    ids = h.form("A", "B", "C")
    resp = h.leave(("", "A"), ("", "B"), ("", "Z"))
    assert [m.error_code for m in resp.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    g = h.group()
    assert set(g.members.members) == {ids["C"]} and g.state == State.PREPARING_REBALANCE
    assert [e.reason for e in g.history if e.trigger == "admin-removal"] == [ADMIN_REMOVAL_REASON] * 2


def test_kip800_leave_v5_reason_kept_in_history(h):
    h.form("A", "B")
    h.leave(("", "A", "decommissioning host-1"))
    ev = h.group().history[-1]
    assert (ev.trigger, ev.group_instance_id, ev.reason) == ("admin-removal", "A", "decommissioning host-1")


def test_leave_fenced_instance_id(h):
    ids = h.form("A", "B")
    assert h.leave((ids["A"], "B")).members[0].error_code == E.FENCED_INSTANCE_ID


def test_leave_pending_member_removed(h):
    mid = h.dynamic_member()
    assert h.leave((mid, None)).members[0].error_code == E.NONE
    assert not h.group().members.pending


def test_leave_completes_parked_join_with_unknown_member_id(h):
    ids = h.form("A", "B")
    parked = h.join(ids["B"], "B", protocols=(("range", b"x"),))
    h.leave((ids["B"], "B"))
    assert parked.response.error_code == E.UNKNOWN_MEMBER_ID


def test_leave_during_preparing_completes_join_phase(h):
    ids = h.form("A", "B")
    ra = h.join(ids["A"], "A")
    h.leave((ids["B"], "B"))
    assert ra.done and ra.response.generation_id == 2


# ---- KIP-800 history ----------------------------------------------------------------------------------

def test_kip800_join_reason_v8_in_history(h):
    h.join(iid="A", v=8, reason="rebalance: new partitions")
    assert h.group().history[-1].reason == "rebalance: new partitions"


def test_kip800_history_is_bounded():
    h = ClassicHarness(group_rebalance_history_size=5)
    ids = h.form("A", "B")
    for _ in range(20):
        h.heartbeat(ids["B"], h.group().generation, "B")
        h.join(iid="A")
    assert len(h.group().history) == 5


# ---- offsets, describe, list, delete ------------------------------------------------------------------

def offset_commit(h, gid, member, gen, iid=None, v=9, offsets=(("t", 0, 42),)):
    req = wire.OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=iid,
        topics=[wire.OffsetCommitRequestTopic(name=t, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m")])
            for t, p, o in offsets])
    return [p.error_code for t in h.c.handle(req, v).topics for p in t.partitions]


def offset_fetch(h, gid, topics=(("t", [0]),), v=8):
    req = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id=gid, topics=None if topics is None else [
        wire.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics])])
    resp = h.c.handle(req, v)
    return {(t.name, p.partition_index): p.committed_offset for t in resp.groups[0].topics for p in t.partitions}


def test_offset_commit_member_of_stable_group(h):
    ids = h.form("A")
    assert offset_commit(h, "g", ids["A"], 1, "A") == [E.NONE]
    assert offset_fetch(h, "g") == {("t", 0): 42}


def test_offset_commit_simple_consumer_creates_empty_group(h):
    assert offset_commit(h, "simple", "", -1) == [E.NONE]
    assert h.c.groups["simple"].state == State.EMPTY
    assert offset_fetch(h, "simple", topics=None) == {("t", 0): 42}


def test_offset_commit_unknown_group_with_generation_illegal_generation(h):
    assert offset_commit(h, "nope", "m", 3) == [E.ILLEGAL_GENERATION]


def test_offset_commit_illegal_generation_and_unknown_member(h):
    ids = h.form("A")
    assert offset_commit(h, "g", ids["A"], 2, "A") == [E.ILLEGAL_GENERATION]
    assert offset_commit(h, "g", "x", 1) == [E.UNKNOWN_MEMBER_ID]
    assert offset_commit(h, "g", "", -1) == [E.UNKNOWN_MEMBER_ID]  # not Empty: an outsider may not commit


def test_offset_commit_completing_rebalance_in_progress(h):
    ra, _rb = h.join(iid="A"), h.join(iid="B")
    h.advance(2 * DELAY)
    assert offset_commit(h, "g", ra.response.member_id, 1, "A") == [E.REBALANCE_IN_PROGRESS]


def test_offset_fetch_unknown_partition_minus_one(h):
    assert offset_fetch(h, "nope", topics=(("t", [3]),)) == {("t", 3): -1}


def test_offset_delete_subscribed_topic_refused(h):
    sub = wire.ConsumerProtocolSubscription(topics=["t"]).encode(0)
    h.form("A", protocols=(("range", b"\x00\x00" + sub),))
    offset_commit(h, "g", h.group().leader_id, 1, "A")
    req = wire.OffsetDeleteRequest(group_id="g", topics=[wire.OffsetDeleteRequestTopic(
        name="t", partitions=[wire.OffsetDeleteRequestPartition(partition_index=0)])])
    resp = h.c.handle(req, 0)
    assert resp.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC


def test_offset_delete_empty_group_removes_offsets(h):
    offset_commit(h, "s", "", -1)
    req = wire.OffsetDeleteRequest(group_id="s", topics=[wire.OffsetDeleteRequestTopic(
        name="t", partitions=[wire.OffsetDeleteRequestPartition(partition_index=0)])])
    assert h.c.handle(req, 0).topics[0].partitions[0].error_code == E.NONE
    assert offset_fetch(h, "s") == {("t", 0): -1}


def test_describe_groups_unknown_is_dead(h):
    resp = h.c.handle(wire.DescribeGroupsRequest(groups=["nope"]), 5)
    assert resp.groups[0].group_state == "Dead" and resp.groups[0].error_code == E.NONE


def test_describe_groups_stable_has_metadata_and_assignments(h):
    h.form("A", "B")
    resp = h.c.handle(wire.DescribeGroupsRequest(groups=["g"]), 5)
    grp = resp.groups[0]
    assert (grp.group_state, grp.protocol_type, grp.protocol_data) == ("Stable", "consumer", "range")
    assert {m.group_instance_id: m.member_assignment for m in grp.members} == {"A": b"a-A", "B": b"a-B"}


def test_list_groups_state_filter(h):
    h.form("A")
    h.join(iid="X", gid="other")
    resp = h.c.handle(wire.ListGroupsRequest(states_filter=["stable"]), 4)
    assert [g.group_id for g in resp.groups] == ["g"]
    resp = h.c.handle(wire.ListGroupsRequest(states_filter=[]), 4)
    assert sorted(g.group_id for g in resp.groups) == ["g", "other"]


def test_delete_groups_non_empty_and_not_found(h):
    h.form("A")
    offset_commit(h, "empty", "", -1)
    resp = h.c.handle(wire.DeleteGroupsRequest(groups_names=["g", "empty", "nope"]), 2)
    assert [r.error_code for r in resp.results] == [E.NON_EMPTY_GROUP, E.NONE, E.GROUP_ID_NOT_FOUND]
    assert "empty" not in h.c.groups


# ---- a group that moved away (Dead): every classic API says so ---------------------------------------

def dead_group(h):
    ids = h.form("A", "B")
    g = h.group()
    g.unload()
    return g, ids


def test_known_member_dead_group_coordinator_not_available(h):
    g, ids = dead_group(h)
    assert h.join(ids["A"], "A").response.error_code == E.COORDINATOR_NOT_AVAILABLE


def test_sync_dead_group_coordinator_not_available(h):
    g, ids = dead_group(h)
    assert h.sync(ids["A"], 1, "A").response.error_code == E.COORDINATOR_NOT_AVAILABLE


def test_heartbeat_dead_group_coordinator_not_available(h):
    g, ids = dead_group(h)
    assert h.heartbeat(ids["A"], 1, "A") == E.COORDINATOR_NOT_AVAILABLE


def test_leave_dead_group_top_level_coordinator_not_available(h):
    g, ids = dead_group(h)
    assert h.leave((ids["A"], "A")).error_code == E.COORDINATOR_NOT_AVAILABLE


def test_unload_answers_parked_requests_not_coordinator(h):
    ids = h.form("A", "B")
    parked = h.join(ids["A"], "A")
    h.group().unload()
    assert parked.response.error_code == E.NOT_COORDINATOR


def test_offset_commit_and_fetch_v10_by_topic_id(h):
    # OffsetCommit/OffsetFetch v10 name topics by id: resolved through the topic catalogue.
    t = h.c.topics.create("orders", 3)
    ids = h.form("A")
    req = wire.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=1, member_id=ids["A"], group_instance_id="A",
        topics=[wire.OffsetCommitRequestTopic(topic_id=t.topic_id, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=2, committed_offset=77, committed_metadata=None)]),
            wire.OffsetCommitRequestTopic(topic_id=b"\x01" * 16, partitions=[
                wire.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    resp = h.c.handle(req, 10)
    assert [p.error_code for tp in resp.topics for p in tp.partitions] == [E.NONE, E.UNKNOWN_TOPIC_ID]
    fetch = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="g", topics=None)])
    got = h.c.handle(fetch, 10).groups[0].topics
    assert [(tp.name, tp.topic_id, [(p.partition_index, p.committed_offset) for p in tp.partitions])
            for tp in got] == [("orders", t.topic_id, [(2, 77)])]
    # and the answer encodes at v10 (topic ids, no names)
    assert wire.OffsetFetchResponse.decode(wire.OffsetFetchResponse(groups=[
        wire.OffsetFetchResponseGroup(group_id="g", topics=got)]).encode(10), 10).groups[0].topics[0].topic_id == t.topic_id
