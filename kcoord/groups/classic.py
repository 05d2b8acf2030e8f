"""Classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, with KIP-345 static membership, KIP-394
member ids, KIP-800 reasons and KIP-814 SkipAssignment, following Apache Kafka's group coordinator case by
case (GroupMetadataManager's classicGroupJoin, classicGroupSync, classicGroupHeartbeat and classicGroupLeave, and
ClassicGroup): the same decisions, in the same error order, with the same timers.

Handlers return a Reply: answered at once, or parked until the join phase completes (JoinGroup) or the leader's
assignment is stored (SyncGroup). Timers live in the coordinator's one deadline heap (kcoord.timers): the join and
sync timers are the group's, the members' are MemberTimers of kinds "session" (heartbeat, and a new member's join)
and "pending" (KIP-394). The group stages its own record, a GroupMetadataKey/Value (kcoord.records), where a
response acknowledges state, and replays it on load.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, cast

from .. import errors as E
from .. import records as R
from .. import wire
from .._core._members import ClassicMember, MemberTable
from ..assignors import AssignmentError, decode_subscription
from ..config import CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
from ..events import ADMIN_REMOVAL_REASON, join_reason
from ..reply import Reply
from .base import GroupBase, GroupContext, MemberTimers


class State(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


DEAD, EMPTY, PREPARING = State.DEAD, State.EMPTY, State.PREPARING_REBALANCE
COMPLETING = State.COMPLETING_REBALANCE

# Kafka's ClassicGroupState: the states each state may be entered from.
VALID_PREVIOUS = {
    State.EMPTY: {State.PREPARING_REBALANCE},
    State.PREPARING_REBALANCE: {State.STABLE, State.COMPLETING_REBALANCE, State.EMPTY},
    State.COMPLETING_REBALANCE: {State.PREPARING_REBALANCE},
    State.STABLE: {State.COMPLETING_REBALANCE},
    State.DEAD: set(State),
}


@dataclass(frozen=True)
class RebalanceEvent:
    """One entry of a group's bounded rebalance history (KIP-800 reasons included)."""

    time_ms: int
    generation: int  # the generation the group had when the event happened
    trigger: str  # join, leave, admin-removal, session-timeout, sync-timeout, join-timeout, ...
    member_id: str
    group_instance_id: str | None
    reason: str


_ENTROPY: list[Any] = [b"", 0]  # (a pool of random bytes, the offset of its next unused 16)


def random_uuid() -> str:
    """A version-4 UUID string, as Kafka's member ids carry (random bytes drawn from os.urandom in bulk)."""
    pool, i = _ENTROPY
    if i >= len(pool):
        pool, i = os.urandom(8192), 0
        _ENTROPY[0] = pool
    _ENTROPY[1] = i + 16
    h = pool[i:i + 16].hex()
    # the version (4) and variant (10xx) nibbles of RFC 4122, as UUID.randomUUID() sets them
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


SESSION, PENDING = "session", "pending"  # the kinds of member timers


class ClassicGroup(GroupBase):
    GROUP_TYPE: ClassVar[str] = "classic"
    RECORD_TYPES: ClassVar[tuple[int, ...]] = (R.GROUP_METADATA,)

    def __init__(self, group_id: str, ctx: GroupContext) -> None:
        super().__init__(group_id, ctx)
        timers = ctx.timers
        self.state = State.EMPTY
        self.previous_state = State.EMPTY
        # Kafka's currentStateTimestamp: wall-clock ms of the latest state change (a new group's: its creation), kept
        # in the GroupMetadataValue; an Empty group's offsets expire offsets.retention.minutes after it. None: a
        # record written without one (-1), whose offsets then expire from their own commit timestamps.
        self.state_timestamp: int | None = timers.clock.wall_ms()
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members = MemberTable()
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.last_member_added_ms = 0
        self._now = timers.clock.now_ms
        self.join_timer = timers.new()
        self.sync_timer = timers.new()
        self.member_timers = MemberTimers(timers, self.on_member_timer)
        # Made at the first entry: an empty deque takes 760 bytes, and most groups never record one (a simple
        # consumer's, or 100,000 made by junk commits)
        self.history: deque[RebalanceEvent] | tuple[()] = ()
        self.last_change: tuple[str, str] | None = None  # (trigger, reason) of the latest history entry
        self.rebalance_start_ms = 0
        # Each member's bytes in the group's record with its largest protocol metadata and no assignment, and their
        # sum: what a JoinGroup is checked against (message.max.bytes) without a pass over the members.
        self.member_bytes: dict[str, int] = {}
        self.members_size = 0

    # ---- small queries -------------------------------------------------------------------------------

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[State.PREPARING_REBALANCE]

    def transition(self, to: State) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise AssertionError(f"group {self.group_id}: {self.state} -> {to} is not a valid transition")
        self.previous_state, self.state = self.state, to
        self.state_timestamp = self.timers.clock.wall_ms()

    def rebalance_timeout_ms(self) -> int:
        """How long the join and sync phases wait: the largest rebalance timeout a member declared, as in Kafka,
        but at most group.max.rebalance.timeout.ms (kcoord's own bound: Kafka would wait up to 2^31-1 ms on one
        member that heartbeats and never rejoins). Each member's declared value is kept and reported as sent."""
        return min(max((m.rebalance_timeout_ms for m in self.members.members.values()), default=0),
                   self.config.group_max_rebalance_timeout_ms)

    def all_joined(self) -> bool:
        return len(self.members) == self.members.num_awaiting_join and not self.members.pending

    def supports_protocols(self, protocol_type: str, protocols: list) -> bool:
        if self.state is EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.members.supports(protocol_type, self.protocol_type, protocols)

    def record(self, trigger: str, member_id: str = "", instance_id: str | None = None, reason: str = "") -> None:
        """Add to the bounded rebalance history: what triggered or changed a rebalance, with the client's
        KIP-800 reason. Joins that merely take part in a rebalance already under way are not recorded
        unless they carry a reason (Kafka only logs these; the history is for what an operator asks)."""
        history = self.history
        if isinstance(history, tuple):
            history = self.history = deque(maxlen=self.config.group_rebalance_history_size)
        history.append(RebalanceEvent(self.timers.clock.wall_ms(), self.generation, trigger, member_id, instance_id,
                                      reason))
        self.last_change = (trigger, reason)
        self.events.member_event("classic", self.group_id, self.generation, trigger, member_id, instance_id, reason)

    def select_protocol(self) -> str:
        members = list(self.members.members.values())
        candidates = [p.name for p in members[0].protocols
                      if self.members.protocol_support.get(p.name, 0) == len(members)]
        votes = {name: 0 for name in candidates}
        for m in members:
            for p in m.protocols:
                if p.name in votes:
                    votes[p.name] += 1
                    break
        return max(candidates, key=lambda n: votes[n])  # ties go to the first member's preference

    # ---- membership ------------------------------------------------------------------------------------

    def new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{random_uuid()}"

    def add_member(self, m: ClassicMember, reply: Reply | None) -> None:
        if not self.members.members:
            self.protocol_type = m.protocol_type
        self.count_member(m)
        m.join_reply = reply
        m.timer = self.member_timers.key(m.member_id, SESSION)  # cached for the heartbeat's deadline move
        self.members.add(m)
        if self.leader_id is None:
            self.leader_id = m.member_id

    def remove_member(self, member_id: str) -> ClassicMember:
        m = self.members.remove(member_id)
        self.members_size -= self.member_bytes.pop(member_id, 0)
        self.pending_sync.discard(member_id)
        self.member_timers.release(member_id, SESSION)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members.members), None)
        return m

    def arm_heartbeat(self, m: ClassicMember, timeout_ms: int | None = None) -> None:
        self.timers.arm(m.timer, m.session_timeout_ms if timeout_ms is None else timeout_ms)

    def add_pending(self, member_id: str, session_timeout_ms: int) -> None:
        self.members.pending[member_id] = self.member_timers.arm(member_id, PENDING, session_timeout_ms)

    def drop_pending(self, member_id: str) -> None:
        del self.members.pending[member_id]
        self.member_timers.release(member_id, PENDING)

    # ---- the size of the group's record (message.max.bytes) -------------------------------------------------

    def count_member(self, m: ClassicMember) -> None:
        meta = 0
        for p in m.protocols:
            if len(p.metadata) > meta:
                meta = len(p.metadata)
        size = R.group_member_size(m.member_id, m.group_instance_id, m.client_id, m.client_host, meta, 0)
        self.members_size += size - self.member_bytes.get(m.member_id, 0)
        self.member_bytes[m.member_id] = size

    def too_large(self, req, member_id: str, client_id: str, client_host: str, replacing: str | None) -> bool:
        """Whether the group's record would pass message.max.bytes with this JoinGroup's member in it (in place of
        `replacing`): each member counted with its largest protocol metadata (the group selects one only when the
        join phase completes), the leader as it is now or this member, assignments not at all (they come with the
        leader's SyncGroup, checked there). A member whose bytes do not grow is let in. Kafka finds out when it
        writes the record at the SyncGroup and fails everyone's (UNKNOWN_SERVER_ERROR, then rebalances); kcoord
        refuses the member at its JoinGroup, keeping nothing of it."""
        meta, name = 0, ""
        for p in req.protocols:
            if len(p.metadata) > meta:
                meta = len(p.metadata)
            if len(p.name) > len(name):
                name = p.name
        size = R.group_member_size(member_id, req.group_instance_id, client_id, client_host, meta, 0)
        before = self.member_bytes.get(replacing, 0) if replacing is not None else 0
        if size <= before:
            return False  # a member that does not grow is never refused (a store loaded under a lower bound)
        total = self.members_size - before + size
        return total + R.group_record_size(self.group_id, req.protocol_type, name,
                                           self.leader_id or member_id) > self.config.message_max_bytes

    def record_too_large(self, assignments: dict[str, bytes]) -> bool:
        """Whether the group's record, with these assignments and the selected protocol's metadata, would pass
        message.max.bytes (Kafka: MESSAGE_TOO_LARGE from the log, at the SyncGroup)."""
        name = self.protocol_name
        size = R.group_record_size(self.group_id, self.protocol_type, name, self.leader_id)
        for m in self.members.members.values():
            size += R.group_member_size(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                        len(m.metadata_for(name) or b""), len(assignments.get(m.member_id, b"")))
        return size > self.config.message_max_bytes

    # ---- responses -------------------------------------------------------------------------------------

    def fail_parked(self, m: ClassicMember, error: int, member_id: str | None = None) -> None:
        """Answer the member's parked JoinGroup and SyncGroup, if any, with `error`."""
        if m.join_reply is not None:
            r = self.members.set_join_reply(m, None)
            r.resolve(self.join_response(r.version, error, m.member_id if member_id is None else member_id))
        if m.sync_reply is not None:
            m.sync_reply, r = None, m.sync_reply
            r.resolve(self.sync_response(error))

    def join_response(self, version: int, error: int, member_id: str = "", *, generation: int = -1,
                      leader: str | None = "", members: list | None = None, skip: bool = False,
                      with_protocol: bool = False) -> wire.JoinGroupResponse:
        name = self.protocol_name if with_protocol else None
        if version < 7 and name is None:
            name = ""  # a null protocol name only exists from v7
        return wire.JoinGroupResponse(
            error_code=error, generation_id=generation, member_id=member_id,
            leader=cast(str, leader),  # None only before a group's first leader, when no answer names it
            protocol_type=self.protocol_type if with_protocol else None, protocol_name=name,
            members=members or [], skip_assignment=skip)

    def member_list(self) -> list[wire.JoinGroupResponseMember]:
        return [wire.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                             # the group's protocol is one every member supports
                                             metadata=m.metadata_for(self.protocol_name))  # type: ignore[arg-type]
                for m in self.members.members.values()]

    def current_join_response(self, version: int, m: ClassicMember) -> wire.JoinGroupResponse:
        is_leader = m.member_id == self.leader_id
        return self.join_response(version, E.NONE, m.member_id, generation=self.generation, leader=self.leader_id,
                                  members=self.member_list() if is_leader else [], with_protocol=True)

    def sync_response(self, error: int, assignment: bytes = b"") -> wire.SyncGroupResponse:
        ok = error == E.NONE
        return wire.SyncGroupResponse(error_code=error, assignment=assignment,
                                      protocol_type=self.protocol_type if ok else None,
                                      protocol_name=self.protocol_name if ok else None)

    # ---- JoinGroup -------------------------------------------------------------------------------------

    def join(self, req: wire.JoinGroupRequest, version: int, client_id: str, client_host: str) -> Reply:
        reply = Reply(version=version)
        member_id = req.member_id
        # Capacity first (Kafka's acceptJoiningMember).
        if not self.accepts(member_id):
            if member_id in self.members:
                self.remove_and_rebalance(member_id, "group.max.size reached", "max-size")
            reply.resolve(self.join_response(version, E.GROUP_MAX_SIZE_REACHED))
            return reply
        if member_id == "":
            self.join_new_member(req, version, client_id, client_host, reply)
        else:
            self.join_existing_member(req, version, client_id, client_host, reply)
        return reply

    def accepts(self, member_id: str) -> bool:
        limit = self.config.group_max_size
        if self.state in (State.EMPTY, State.DEAD):
            return True
        if self.state == State.PREPARING_REBALANCE:
            m = self.members.get(member_id)
            return (m is not None and m.awaiting_join) or self.members.num_awaiting_join < limit
        return member_id in self.members or len(self.members) < limit

    def join_new_member(self, req, version, client_id, client_host, reply: Reply) -> None:
        if self.state == State.DEAD:
            return reply.resolve(self.join_response(version, E.COORDINATOR_NOT_AVAILABLE))
        if not self.supports_protocols(req.protocol_type, req.protocols):
            return reply.resolve(self.join_response(version, E.INCONSISTENT_GROUP_PROTOCOL))
        iid = req.group_instance_id
        new_id = self.new_member_id(client_id, iid)
        old_id = self.members.static_member_id(iid) if iid is not None else None
        old = self.members.get(old_id) if old_id is not None else None  # a static member back: its client stays
        if self.too_large(req, new_id, old.client_id if old else client_id, old.client_host if old else client_host,
                          old_id):
            return reply.resolve(self.join_response(version, E.UNKNOWN_SERVER_ERROR))
        if iid is None:
            if version >= 4:  # KIP-394: hand out the id, the member joins again with it
                self.add_pending(new_id, req.session_timeout_ms)
                return reply.resolve(self.join_response(version, E.MEMBER_ID_REQUIRED, new_id))
            return self.add_member_and_rebalance(req, version, new_id, client_id, client_host, reply)
        if old_id is None:
            return self.add_member_and_rebalance(req, version, new_id, client_id, client_host, reply)
        self.replace_static_member(req, version, iid, old_id, new_id, reply)

    def add_member_and_rebalance(self, req, version, member_id, client_id, client_host, reply: Reply) -> None:
        m = ClassicMember(member_id, req.group_instance_id, client_id, client_host, req.session_timeout_ms,
                          rebalance_timeout(req, version), req.protocol_type,
                          req.protocols)
        m.is_new = True
        state = self.state
        if state is PREPARING and self.previous_state is EMPTY:
            self.new_member_added = True
            self.last_member_added_ms = self._now()
        self.add_member(m, reply)
        # New members cannot heartbeat until they have joined; their parked join expires after 5 minutes.
        self.timers.arm(m.timer, CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS)
        if state is PREPARING:
            if req.reason:
                self.record("join", member_id, req.group_instance_id, join_reason(req.reason))
            self.maybe_complete_join_phase()
        else:
            self.record("join", member_id, req.group_instance_id, join_reason(req.reason))
            self.maybe_prepare_rebalance_or_complete_join()

    def replace_static_member(self, req, version, iid, old_id, new_id, reply: Reply) -> None:
        old = self.members.members[old_id]
        current_leader = self.leader_id
        # The old member's parked requests are fenced.
        self.fail_parked(old, E.FENCED_INSTANCE_ID)
        m = ClassicMember(new_id, iid, old.client_id, old.client_host, req.session_timeout_ms,
                          rebalance_timeout(req, version), req.protocol_type,
                          req.protocols)
        m.assignment = old.assignment
        m.timer = old.timer
        self.member_timers.rename(old_id, new_id, (SESSION,))
        self.members.rename(old_id, m)
        self.members_size -= self.member_bytes.pop(old_id, 0)
        self.count_member(m)
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.arm_heartbeat(m)
        self.record("static-rejoin", new_id, iid, join_reason(req.reason))
        if self.state == State.STABLE:
            if self.select_protocol() == self.protocol_name:
                # KIP-345: no rebalance. The group's metadata (with the new member id) is written first.
                self.stage_metadata()
                if version >= 9:  # KIP-814: the rejoining leader learns it leads, and skips the assignment
                    is_leader = self.leader_id == new_id
                    reply.resolve(self.join_response(
                        version, E.NONE, new_id, generation=self.generation, leader=self.leader_id,
                        members=self.member_list() if is_leader else [], skip=is_leader, with_protocol=True))
                else:
                    reply.resolve(self.join_response(version, E.NONE, new_id, generation=self.generation,
                                                     leader=current_leader, with_protocol=True))
                return
            self.members.set_join_reply(m, reply)
            self.maybe_prepare_rebalance_or_complete_join("static member rejoined with other protocols")
        elif self.state == State.COMPLETING_REBALANCE:
            # The leader may already hold the old id in its assignment: rebalance (KAFKA-9801).
            self.members.set_join_reply(m, reply)
            self.prepare_rebalance(f"static member {iid} replaced during CompletingRebalance")
        else:  # PreparingRebalance
            self.members.set_join_reply(m, reply)
            self.maybe_complete_join_phase()

    def join_existing_member(self, req, version, client_id, client_host, reply: Reply) -> None:
        member_id = req.member_id
        if self.state == State.DEAD:
            return reply.resolve(self.join_response(version, E.COORDINATOR_NOT_AVAILABLE, member_id))
        if not self.supports_protocols(req.protocol_type, req.protocols):
            return reply.resolve(self.join_response(version, E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in self.members.pending:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException here: a pending (dynamic) id presented with an instance id.
                return reply.resolve(self.join_response(version, E.UNKNOWN_SERVER_ERROR, member_id))
            if self.too_large(req, member_id, client_id, client_host, None):
                self.drop_pending(member_id)  # nothing of it is kept
                self.maybe_complete_join_phase()
                return reply.resolve(self.join_response(version, E.UNKNOWN_SERVER_ERROR, member_id))
            # The second JoinGroup of KIP-394: the pending id becomes a real member.
            self.drop_pending(member_id)
            return self.add_member_and_rebalance(req, version, member_id, client_id, client_host, reply)
        error = self.members.validate(member_id, req.group_instance_id)
        if error:
            return reply.resolve(self.join_response(version, error, member_id))
        m = self.members.members[member_id]
        protocols = req.protocols
        if self.too_large(req, member_id, m.client_id, m.client_host, member_id):
            return reply.resolve(self.join_response(version, E.UNKNOWN_SERVER_ERROR, member_id))  # it keeps its own
        if self.state == State.PREPARING_REBALANCE:
            self.update_member(m, req, version, protocols, reply)
            if req.reason:
                self.record("join", member_id, m.group_instance_id, join_reason(req.reason))
            self.maybe_prepare_rebalance_or_complete_join()
        elif self.state == State.COMPLETING_REBALANCE:
            if m.same_protocols(protocols):
                reply.resolve(self.current_join_response(version, m))
            else:
                self.update_member(m, req, version, protocols, reply)
                self.record("join", member_id, m.group_instance_id,
                            f"updated protocols during CompletingRebalance; client reason: {join_reason(req.reason)}")
                self.maybe_prepare_rebalance_or_complete_join()
        elif self.state == State.STABLE:
            if member_id == self.leader_id or not m.same_protocols(protocols):
                self.update_member(m, req, version, protocols, reply)
                why = "leader re-joining group" if member_id == self.leader_id else "updated protocols"
                self.record("join", member_id, m.group_instance_id, f"{why}; client reason: {join_reason(req.reason)}")
                self.maybe_prepare_rebalance_or_complete_join()
            else:
                reply.resolve(self.join_response(version, E.NONE, member_id, generation=self.generation,
                                                 leader=self.leader_id, with_protocol=True))
        else:  # Empty
            reply.resolve(self.join_response(version, E.UNKNOWN_MEMBER_ID, member_id))

    def update_member(self, m: ClassicMember, req, version, protocols, reply: Reply) -> None:
        self.members.set_protocols(m, protocols)
        self.count_member(m)
        m.rebalance_timeout_ms = rebalance_timeout(req, version)
        m.session_timeout_ms = req.session_timeout_ms
        superseded = self.members.set_join_reply(m, reply)
        if superseded is not None:
            # Kafka drops a superseded parked join on the floor; we answer it so nothing waits forever.
            superseded.resolve(self.join_response(superseded.version, E.REBALANCE_IN_PROGRESS, m.member_id))

    # ---- join phase ------------------------------------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(self, reason: str = "") -> None:
        if self.can_rebalance():
            self.prepare_rebalance(reason)
        else:
            self.maybe_complete_join_phase()

    def prepare_rebalance(self, reason: str = "") -> None:
        if self.state == State.COMPLETING_REBALANCE:
            self.reset_assignments_with_error(E.REBALANCE_IN_PROGRESS)
        self.timers.cancel(self.sync_timer)
        self.pending_sync.clear()
        initial = self.state == State.EMPTY
        self.transition(State.PREPARING_REBALANCE)
        # The trigger is the change just recorded (a join, leave, expiry, ...); `reason` is what Kafka logs.
        trigger, why = self.last_change or ("other", "")
        self.last_change = None
        self.rebalance_start_ms = self._now()
        self.events.rebalance_started("classic", self.group_id, self.generation, len(self.members), trigger,
                                      why or reason)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(self.rebalance_timeout_ms() - delay, 0)
            if self.config.group_initial_rebalance_extension == "kafka":
                self.timers.arm(self.join_timer, delay, lambda _: self.on_initial_delay(delay, remaining))
            else:
                cap = self._now() + delay + remaining
                self.timers.arm(self.join_timer, delay, lambda _: self.on_initial_quiet(delay, cap))
        elif self.all_joined():
            self.complete_join()
        else:
            self.timers.arm(self.join_timer, self.rebalance_timeout_ms(), self.on_join_timeout)

    def on_initial_delay(self, delay: int, remaining: int) -> None:
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timers.arm(self.join_timer, new_delay, lambda _: self.on_initial_delay(new_delay, new_remaining))
        else:
            self.complete_join()

    def on_initial_quiet(self, delay: int, cap: int) -> None:
        """`last-join`: the initial rebalance completes `delay` after the last new member joined, by `cap` at most."""
        if self.new_member_added:
            self.new_member_added = False
            wait = min(self.last_member_added_ms + delay, cap) - self._now()
            if wait > 0:
                self.timers.arm(self.join_timer, wait, lambda _: self.on_initial_quiet(delay, cap))
                return
        self.complete_join()

    def on_join_timeout(self, _key: int = -1) -> None:
        self.complete_join()

    def maybe_complete_join_phase(self) -> None:
        if self.state is PREPARING and self.previous_state is not EMPTY and self.all_joined():
            self.timers.cancel(self.join_timer)
            self.complete_join()

    def complete_join(self) -> None:
        if self.state != State.PREPARING_REBALANCE:
            return
        for m in list(self.members.members.values()):
            if not m.awaiting_join and not m.is_static:
                self.remove_member(m.member_id)
                self.record("join-timeout", m.member_id, None, "did not rejoin within the rebalance timeout")
        if self.members.members and not self.elect_joined_leader():
            # Only static members that have not rejoined are left: wait for them (or their session timeout), at
            # least the shortest session there is: a rebalance timeout of 0 would re-arm at once, without end.
            wait = max(self.rebalance_timeout_ms(), self.config.group_min_session_timeout_ms)
            self.timers.arm(self.join_timer, wait, self.on_join_timeout)
            return
        self.generation += 1
        if self.members.members:
            self.protocol_name = self.select_protocol()
            self.transition(State.COMPLETING_REBALANCE)
            self.events.join_completed(self.group_id, self.generation, len(self.members), self.leader_id)
        else:
            self.protocol_name = None
            self.transition(State.EMPTY)
            self.stage_metadata()
            self.events.rebalance_completed("classic", self.group_id, self.generation, 0,
                                            (self._now() - self.rebalance_start_ms) / 1000, "Empty")
            return
        leader_members = self.member_list()
        for m in list(self.members.members.values()):
            r = self.members.set_join_reply(m, None)
            if r is not None:
                r.resolve(self.join_response(
                    r.version, E.NONE, m.member_id, generation=self.generation,
                    leader=self.leader_id, members=leader_members if m.member_id == self.leader_id else [],
                    with_protocol=True))
            self.arm_heartbeat(m)
            m.is_new = False
            self.pending_sync.add(m.member_id)
        generation = self.generation
        self.timers.arm(self.sync_timer, self.rebalance_timeout_ms(), lambda _: self.on_sync_timeout(generation))

    def elect_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.members[self.leader_id]
        if leader.awaiting_join:
            return True
        for m in self.members.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def reset_assignments_with_error(self, error: int) -> None:
        for m in self.members.members.values():
            m.assignment = b""
            if m.sync_reply is not None:
                m.sync_reply, r = None, m.sync_reply
                r.resolve(self.sync_response(error))

    def on_sync_timeout(self, generation: int) -> None:
        if generation != self.generation or self.state not in (State.COMPLETING_REBALANCE, State.STABLE):
            return
        if self.pending_sync:
            missing = sorted(self.pending_sync)
            for member_id in missing:
                m = self.remove_member(member_id)
                self.record("sync-timeout", member_id, m.group_instance_id, "no SyncGroup within the rebalance timeout")
            self.prepare_rebalance(f"removing {missing} on pending sync request expiration")

    # ---- timers for members ----------------------------------------------------------------------------

    def on_member_timer(self, member_id: str, kind: str) -> None:
        if kind == PENDING:
            self.on_pending_expired(member_id)
        else:
            self.on_heartbeat_expired(member_id)

    def on_pending_expired(self, member_id: str) -> None:
        if member_id in self.members.pending:
            self.drop_pending(member_id)
            self.maybe_complete_join_phase()

    def on_heartbeat_expired(self, member_id: str) -> None:
        m = self.members.get(member_id)
        if m is None:
            return
        if not m.is_new and (m.awaiting_join or m.awaiting_sync):
            return  # members waiting on a rebalance satisfy their heartbeat
        self.record("session-timeout", member_id, m.group_instance_id, "session timeout expired")
        self.remove_and_rebalance(member_id, "expired heartbeat", None)

    def remove_and_rebalance(self, member_id: str, reason: str, trigger: str | None) -> None:
        m = self.members.members[member_id]
        if trigger is not None:
            self.record(trigger, member_id, m.group_instance_id, reason)
        self.fail_parked(m, E.UNKNOWN_MEMBER_ID)
        self.remove_member(member_id)
        if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(reason)
        elif self.state == State.PREPARING_REBALANCE:
            self.maybe_complete_join_phase()

    # ---- SyncGroup -------------------------------------------------------------------------------------

    def sync(self, req: wire.SyncGroupRequest, version: int) -> Reply:
        reply = Reply(version=version)
        if self.state == State.EMPTY:
            return self._done(reply, self.sync_response(E.UNKNOWN_MEMBER_ID))
        if self.state == State.DEAD:
            return self._done(reply, self.sync_response(E.COORDINATOR_NOT_AVAILABLE))
        error = self.members.validate(req.member_id, req.group_instance_id)
        if error:
            return self._done(reply, self.sync_response(error))
        if req.generation_id != self.generation:
            return self._done(reply, self.sync_response(E.ILLEGAL_GENERATION))
        if (inconsistent(req.protocol_type, self.protocol_type)
                or inconsistent(req.protocol_name, self.protocol_name)):
            return self._done(reply, self.sync_response(E.INCONSISTENT_GROUP_PROTOCOL))
        if self.state == State.PREPARING_REBALANCE:
            return self._done(reply, self.sync_response(E.REBALANCE_IN_PROGRESS))
        m = self.members.members[req.member_id]
        self.pending_sync.discard(m.member_id)
        if self.state == State.STABLE:
            return self._done(reply, self.sync_response(E.NONE, m.assignment))
        # CompletingRebalance: park; the leader's assignment completes everyone.
        if m.sync_reply is not None:
            m.sync_reply.resolve(self.sync_response(E.REBALANCE_IN_PROGRESS))
        m.sync_reply = reply
        if m.member_id == self.leader_id:
            given = {a.member_id: a.assignment for a in req.assignments}
            if self.record_too_large(given):
                # Kafka's record write fails (MESSAGE_TOO_LARGE): every SyncGroup waiting is answered
                # UNKNOWN_SERVER_ERROR (appendGroupMetadataErrorToResponseError) and the group rebalances
                self.reset_assignments_with_error(E.UNKNOWN_SERVER_ERROR)
                self.maybe_prepare_rebalance_or_complete_join("the group's record would pass message.max.bytes")
                return reply
            for member in self.members.members.values():
                member.assignment = given.get(member.member_id, b"")
            self.stage_metadata()  # the assignment is stored before anyone is told
            for member in self.members.members.values():
                if member.sync_reply is not None:
                    member.sync_reply, r = None, member.sync_reply
                    r.resolve(self.sync_response(E.NONE, member.assignment))
                    self.arm_heartbeat(member)
            self.transition(State.STABLE)
            self.events.rebalance_completed("classic", self.group_id, self.generation, len(self.members),
                                            (self._now() - self.rebalance_start_ms) / 1000)
        return reply

    @staticmethod
    def _done(reply: Reply, response) -> Reply:
        reply.resolve(response)
        return reply

    # ---- Heartbeat -------------------------------------------------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> int:
        """The hot path: a member lookup and a deadline move, in Kafka's error order."""
        state = self.state
        if state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self.members.validate(member_id, instance_id)
        if error:
            return error
        if generation != self.generation:
            return E.ILLEGAL_GENERATION
        if state is EMPTY:
            return E.UNKNOWN_MEMBER_ID
        m = self.members.members[member_id]
        self.timers.arm(m.timer, m.session_timeout_ms)
        if state is PREPARING:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ---- LeaveGroup ------------------------------------------------------------------------------------

    def leave(self, members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[int]]:
        """members: (member id, instance id, reason). Returns (top-level error, per-member errors)."""
        if self.state == State.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(members)
        results = []
        left = []
        for member_id, iid, reason in members:
            if member_id == "":
                # KIP-345 admin removal by instance id.
                mapped = self.members.static_member_id(iid) if iid is not None else None
                if mapped is None:
                    results.append(E.UNKNOWN_MEMBER_ID)
                    continue
                self.record("admin-removal", mapped, iid, reason or ADMIN_REMOVAL_REASON)
                self._remove_leaving(mapped)
                left.append(mapped)
            elif member_id in self.members.pending:
                self.drop_pending(member_id)
                self.record("leave", member_id, iid, join_reason(reason))
                left.append(member_id)
            else:
                error = self.members.validate(member_id, iid)
                if error:
                    results.append(error)
                    continue
                m = self.members.members[member_id]
                self.record("leave", member_id, m.group_instance_id, join_reason(reason))
                self._remove_leaving(member_id)
                left.append(member_id)
            results.append(E.NONE)
        if left:
            if self.state in (State.STABLE, State.COMPLETING_REBALANCE):
                self.maybe_prepare_rebalance_or_complete_join(f"explicit LeaveGroup request for {left} members")
            elif self.state == State.PREPARING_REBALANCE:
                self.maybe_complete_join_phase()
        return E.NONE, results

    def _remove_leaving(self, member_id: str) -> None:
        m = self.members.members[member_id]
        self.fail_parked(m, E.UNKNOWN_MEMBER_ID)
        self.remove_member(member_id)

    # ---- what the router, the offsets and the store ask of any group (kcoord.groups.base.Group) ------------

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_dead(self) -> bool:
        return self.state is DEAD

    def is_empty(self) -> bool:
        return self.state is EMPTY

    def listed(self) -> wire.ListGroupsResponseListedGroup:
        return wire.ListGroupsResponseListedGroup(group_id=self.group_id, protocol_type=self.protocol_type or "",
                                                  group_state=self.state.value, group_type=self.GROUP_TYPE)

    def described(self, version: int) -> wire.DescribeGroupsResponseDescribedGroup:
        stable = self.state == State.STABLE
        return wire.DescribeGroupsResponseDescribedGroup(
            error_code=E.NONE, group_id=self.group_id, group_state=self.state.value,
            protocol_type=self.protocol_type or "", protocol_data=(self.protocol_name or "") if stable else "",
            members=[wire.DescribeGroupsResponseDescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=(m.metadata_for(self.protocol_name) or b"") if stable else b"",
                member_assignment=m.assignment if stable else b"") for m in self.members])

    def describe_extension(self) -> dict:
        """What `kcoord describe` shows beyond DescribeGroups: the generation, the leader, the protocol and the KIP-800
        rebalance history (the coordinator sends it to a request that asks, `Coordinator._with_extension`)."""
        return {
            "generation": self.generation,
            "leader": self.leader_id,
            "protocol": self.protocol_name,
            "history": [{"time_ms": e.time_ms, "generation": e.generation, "trigger": e.trigger,
                         "member_id": e.member_id, "group_instance_id": e.group_instance_id, "reason": e.reason}
                        for e in self.history],
        }

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int = 0) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit (asked once a commit, by the offsets' hot path too)."""
        state = self.state
        if state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and state is EMPTY:
            return E.NONE  # an admin or a simple consumer
        if generation >= 0 or member_id or instance_id is not None:
            error = self.members.validate(member_id, instance_id)
            if error:
                return error
            if generation != self.generation:
                return E.ILLEGAL_GENERATION
        elif state is not EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if state is COMPLETING:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return E.NONE  # a classic group lets anyone read its offsets (Kafka's ClassicGroup.validateOffsetFetch)

    def validate_offset_delete(self) -> int:
        return E.GROUP_ID_NOT_FOUND if self.state is DEAD else E.NONE

    def validate_delete(self) -> int:
        if self.state is DEAD:
            return E.GROUP_ID_NOT_FOUND
        return E.NONE if self.state is EMPTY else E.NON_EMPTY_GROUP

    def subscribed_topics(self) -> set[str]:
        """Topics the members of a "consumer" group subscribe to, read from their JoinGroup metadata (none while
        the group is Empty)."""
        if self.state is EMPTY or self.protocol_type != "consumer" or self.protocol_name is None:
            return set()
        topics: set[str] = set()
        for m in self.members:
            try:  # newer versions than we know are read as the newest we know (Kafka does the same)
                topics.update(decode_subscription(m.metadata_for(self.protocol_name) or b"").topics)
            except AssignmentError:
                continue
        return topics

    def offset_expiration(self) -> tuple[int | None, set[str]] | None:
        """Kafka's ClassicGroup.offsetExpirationCondition with isSubscribedToTopic: a simple consumer's group (no
        protocol type) expires each offset from its commit; an Empty group every offset from the time it became
        Empty; a Stable "consumer" group whose subscriptions all read the offsets of the topics its members do not
        subscribe to, from their commits; any other group none."""
        if self.protocol_type is None:
            return None, set()
        if self.state is EMPTY:
            return self.state_timestamp, set()
        if self.state is not State.STABLE or self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members:
            try:  # Kafka: a subscription it cannot read leaves it unaware of the topics, so nothing expires
                topics.update(decode_subscription(m.metadata_for(self.protocol_name) or b"").topics)
            except AssignmentError:
                return None
        return None, topics

    def removable(self, now_ms: int, retention_ms: int) -> bool:
        """Kafka's maybeDeleteGroup: an Empty group goes once its offsets have."""
        return self.state is EMPTY

    # ---- records ---------------------------------------------------------------------------------------

    def metadata_value(self) -> wire.GroupMetadataValue:
        protocol = self.protocol_name
        members = [wire.GroupMetadataValueMemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=(m.metadata_for(protocol) or b"") if protocol is not None else b"",
            assignment=m.assignment) for m in self.members]
        return wire.GroupMetadataValue(protocol_type=self.protocol_type or "", generation=self.generation,
                                       protocol=protocol, leader=self.leader_id if members else None,
                                       current_state_timestamp=-1 if self.state_timestamp is None
                                       else self.state_timestamp, members=members)

    def stage_metadata(self) -> None:
        """Stage the group's GroupMetadataValue: durable before the response that acknowledges it leaves."""
        store = self.store
        if store.persistent:
            store.stage(R.group_key(self.group_id), R.group_value(self.metadata_value()))

    def record_keys(self) -> Iterable[bytes]:
        return (R.group_key(self.group_id),)

    def replay(self, record: R.Record) -> None:
        """Load the group from its stored GroupMetadataValue: Stable with its members, or Empty. Each member keeps
        only the selected protocol's metadata, as Kafka's loaded members do, and gets a full session timeout from
        now to come back."""
        value = record.value
        self.generation = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        ts = value.current_state_timestamp
        self.state_timestamp = ts if ts >= 0 else None  # as Kafka's replay: -1 (or an old value version) is none
        for mm in value.members:
            protocols = [wire.JoinGroupRequestProtocol(name=value.protocol, metadata=mm.subscription)]
            m = ClassicMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host, mm.session_timeout,
                              mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout,
                              self.protocol_type or "", protocols)
            m.assignment = mm.assignment
            self.add_member(m, None)
            self.arm_heartbeat(m)
        if value.members:
            self.leader_id = value.leader
            self.previous_state, self.state = State.EMPTY, State.STABLE

    def on_loaded(self) -> None:
        """A group loaded above group.max.size rebalances (Kafka's onLoaded)."""
        if len(self.members) > self.config.group_max_size:
            self.prepare_rebalance(f"loaded with {len(self.members)} members, above group.max.size")

    def unload(self) -> None:
        """The group moves away (or is deleted): parked requests get NOT_COORDINATOR, timers go."""
        for m in list(self.members.members.values()):
            self.fail_parked(m, E.NOT_COORDINATOR)
        self.member_timers.clear()
        self.timers.release(self.join_timer)
        self.timers.release(self.sync_timer)
        self.previous_state, self.state = self.state, State.DEAD


def inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current


def rebalance_timeout(req: wire.JoinGroupRequest, version: int) -> int:
    # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
    return req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
