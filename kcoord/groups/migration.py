"""Online migration of a live group between the classic and the consumer protocol (KIP-848), as Kafka 4.x does it.

* Upgrade (`validate_upgrade`, `upgrade`): the first consumer-protocol member joining a non-empty classic group
  converts it (Kafka's GroupMetadataManager.validateOnlineUpgrade and ConsumerGroup.fromClassicGroup): the group
  epoch and the assignment epoch are the classic generation; each classic member becomes a STABLE member at that
  epoch keeping its last SyncGroup assignment as both its current and its target assignment; its session
  timeout and protocols are kept as its ClassicMemberMetadata; parked JoinGroup/SyncGroup requests are answered
  REBALANCE_IN_PROGRESS. The joining member is then processed as any join, whose bump starts the first
  incremental rebalance.
* Downgrade (`downgrade`): when the last consumer-protocol member leaves or is fenced (or is replaced by a classic
  static member), the classic members left form a Stable classic group at generation = group epoch, each with its
  target assignment written in its own subscription's version (Kafka's ClassicGroup.fromConsumerGroup); a rebalance
  follows when a member left.

Both write the whole record set ahead of the response that causes them: the old group's tombstones, then the new
group's records, in Kafka's order. The coordinator swaps the group object (`Coordinator.convert`).
"""

from __future__ import annotations

from .. import errors as E
from .. import records as R
from .. import wire
from .._core._members import ClassicMember
from ..assignors import AssignmentError, decode_assignment, decode_subscription, encode_assignment
from ..config import GroupConfig
from .classic import ClassicGroup, State
from .consumer import (
    CONSUMER_PROTOCOL_TYPE,
    SESSION,
    STABLE,
    ConsumerGroup,
    ConsumerMember,
    subscription_version,
)

# The client-side assignors whose assignment the server-side ones can take over (Kafka's check against custom
# assignors before an upgrade): Kafka's Java names, which librdkafka, kafka-python and aiokafka share.
KNOWN_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


def _metadata(g: ClassicGroup, m: ClassicMember) -> bytes:
    """The subscription the member sent for the group's protocol (its first one before a protocol is chosen)."""
    chosen = m.metadata_for(g.protocol_name) if g.protocol_name is not None else None
    return chosen if chosen is not None else m.protocols[0].metadata


def validate_upgrade(g: ClassicGroup, config: GroupConfig) -> str | None:
    """Why the classic group cannot become a consumer group now (GROUP_ID_NOT_FOUND with this message), or None."""
    why = f"Cannot upgrade classic group {g.group_id} to consumer group because"
    if not config.upgrade_enabled():
        return f"{why} the online upgrade is disabled."
    if g.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return f"{why} the group does not use the consumer embedded protocol."
    if len(g.members) > config.group_consumer_max_size:
        return f"{why} the group size exceeds the consumer group maximum size."
    if g.protocol_name is not None and g.protocol_name not in KNOWN_ASSIGNORS:
        return (f"{why} an unsupported custom assignor is in use ({g.protocol_name}). Please refer to the "
                "documentation or switch to a default assignor before re-attempting the upgrade.")
    claimed: dict[tuple[str, int], str] = {}
    for m in g.members.members.values():
        try:
            decode_subscription(_metadata(g, m))
            parts = decode_assignment(m.assignment).partitions if m.assignment else {}
        except AssignmentError:
            return f"{why} the embedded consumer protocol of member {m.member_id} is malformed."
        for topic, ps in parts.items():
            for p in set(ps):
                other = claimed.setdefault((topic, p), m.member_id)
                if other != m.member_id:
                    return f"{why} members {other} and {m.member_id} are both assigned {topic}-{p}."
    return None


def upgrade(g: ClassicGroup, cg: ConsumerGroup) -> None:
    """Fill the new, empty consumer group `cg` from the classic group `g` (validated), staging its records in
    Kafka's order after the classic group's tombstone (ConsumerGroup.createConsumerGroupRecords)."""
    for parked in list(g.members.members.values()):
        g.fail_parked(parked, E.REBALANCE_IN_PROGRESS)
    store = cg.store
    if store.persistent:
        for key in g.record_keys():
            store.stage(key, None)
    epoch = g.generation
    cg.group_epoch = cg.assignment_epoch = epoch
    assignments: dict[str, dict[str, list[int]]] = {}
    for old in g.members.members.values():
        sub = decode_subscription(_metadata(g, old))
        m = ConsumerMember(old.member_id)
        m.instance_id, m.rack_id = old.group_instance_id, sub.rack_id
        m.client_id, m.client_host = old.client_id, old.client_host
        m.subscribed = tuple(sorted(set(sub.topics)))
        m.rebalance_timeout_ms = old.rebalance_timeout_ms
        m.classic = wire.ConsumerGroupMemberMetadataValueClassicMemberMetadata(
            session_timeout_ms=old.session_timeout_ms, supported_protocols=[
                wire.ConsumerGroupMemberMetadataValueClassicProtocol(name=p.name, metadata=p.metadata)
                for p in old.protocols])
        m.state, m.member_epoch, m.previous_member_epoch = STABLE, epoch, epoch
        cg.members[m.member_id] = m
        if m.instance_id is not None:
            cg.static[m.instance_id] = m.member_id
        m.session_key = cg.member_timers.key(m.member_id, SESSION)
        cg._consume(m, cg._effective(m))
        assignments[m.member_id] = decode_assignment(old.assignment).partitions if old.assignment else {}
    names = set(cg.subscribers)
    for parts in assignments.values():
        names.update(parts)
    cg.space.refresh(cg.catalogue, sorted(names))
    cg.catalogue_version = -1  # the partition metadata is written at the next heartbeat's bump
    for m in cg.members.values():
        cg._set_topics(m)
        m.assigned = cg.space.from_names(assignments[m.member_id])
        cg._hold(m)
    cg.target.load({m.member_id: m.assigned for m in cg.members.values()})
    if store.persistent:
        for m in cg.members.values():
            cg.stage_member_metadata(m)
        store.stage(R.consumer_group_key(cg.group_id),
                    R.consumer_group_value(wire.ConsumerGroupMetadataValue(epoch=epoch)))
        for m in cg.members.values():
            cg.stage_target_member(m.member_id, m.assigned)
        store.stage(R.consumer_target_metadata_key(cg.group_id), R.consumer_target_metadata_value(
            wire.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)))
        for m in cg.members.values():
            cg.stage_current_assignment(m)
    for m in cg.members.values():
        cg.arm_session(m)


def downgrade(cg: ConsumerGroup, g: ClassicGroup, member_left: bool) -> None:
    """Fill the new, empty classic group `g` from the consumer group `cg`, whose members all speak the classic
    protocol: Stable at generation = group epoch, each member's assignment its target; the consumer group's
    tombstones, then the GroupMetadata record; a rebalance if a member left."""
    store = g.store
    if store.persistent:
        for key in cg.record_keys():
            store.stage(key, None)
    g.generation = cg.group_epoch
    for m in cg.members.values():
        protocols = [wire.JoinGroupRequestProtocol(name=p.name, metadata=p.metadata)
                     for p in m.classic.supported_protocols]
        cm = ClassicMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                           m.rebalance_timeout_ms, CONSUMER_PROTOCOL_TYPE, protocols)
        cm.assignment = encode_assignment(cg.space.by_name(cg.target.get(m.member_id)),
                                          version=subscription_version(protocols[0].metadata))
        g.add_member(cm, None)
    g.protocol_type = CONSUMER_PROTOCOL_TYPE
    g.protocol_name = g.select_protocol()
    g.previous_state, g.state = g.state, State.STABLE
    g.stage_metadata()
    for cm in g.members.members.values():
        g.arm_heartbeat(cm)
    if member_left:
        g.prepare_rebalance("the last consumer-protocol member left: the group went back to the classic protocol")
