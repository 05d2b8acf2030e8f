"""Rebuild equals live (issue 34): a group changes its memory and writes records, and a restart rebuilds it from
the records alone; the two paths must agree. `check_rebuild` replays the records written so far into a fresh
coordinator and compares a canonical snapshot of every group with the live one, naming each differing field.

A snapshot is a plain, order-independent value (dicts keyed by member id, sorted lists) of what the group's records
carry, of any group type: its type and state, epochs or generation, protocol, leader, members with their persisted
fields, assignments (partitions by topic name, connect units by name), the static-member map, and the group's
committed offsets. What is left out is what the records do not carry on purpose, each with its reason below: a
timer's deadline and a parked reply are transient (a loaded group re-arms every timer from the load, as Kafka's
onLoaded does, and no request survives a restart), and caches are derived from the persisted fields.
"""

from __future__ import annotations

import gc

from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.groups.classic import ClassicGroup
from kcoord.groups.connect import ConnectGroup
from kcoord.groups.consumer import ConsumerGroup
from kcoord.store import Records

from .harness import rebuild

# A classic group between generations: Kafka writes a classic group's GroupMetadataValue only when a generation is
# settled (the leader's SyncGroup: GroupMetadataManager.classicGroupSyncToLeader, kcoord classic.py `sync`; the join
# phase ending with no member: completeClassicGroupJoin; a static member's replacement in Stable), so while it
# rebalances its record is still the last settled generation's, and a restart loads that one (Stable, or Empty), as
# Kafka does. Such a group is compared only once it settles again.
TRANSIENT = "between generations"


def between_generations(g) -> bool:
    return type(g) is ClassicGroup and g.state.value in ("PreparingRebalance", "CompletingRebalance")


def _classic(g: ClassicGroup) -> dict:
    state = g.state.value
    if between_generations(g):
        return {"type": "classic", TRANSIENT: state}
    protocol = g.protocol_name
    t = g.members
    # Left out of each member: its other protocols' metadata (the record keeps the selected protocol's only, as
    # Kafka's: GroupMetadataValue.MemberMetadata.subscription, classic.py `metadata_value`), its parked JoinGroup and
    # SyncGroup replies (`join_reply`, `sync_reply`: transient), `is_new` and the heartbeat timer key (timers are
    # re-armed on load: classic.py `replay` arms a full session), `awaiting_join`/`awaiting_sync` (derived from the
    # parked replies). KIP-394 pending member ids (MemberTable.pending) are not members and are never written.
    members = {mid: {"instance_id": m.group_instance_id, "client_id": m.client_id, "client_host": m.client_host,
                     "session_timeout_ms": m.session_timeout_ms, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "subscription": (m.metadata_for(protocol) or b"") if protocol is not None else b"",
                     "assignment": m.assignment}
               for mid, m in t.members.items()}
    snap = {"type": "classic", "state": state, "generation": g.generation, "protocol_type": g.protocol_type,
            "protocol": protocol, "leader": g.leader_id, "members": members, "static": dict(t.static_members)}
    # The state timestamp (GroupMetadataValue.CurrentStateTimestamp) is read only for an Empty group (the base of
    # its offsets' expiry, classic.py `offset_expiration`), and only an Empty group's record is written after its
    # last transition: the leader's SyncGroup writes the record before the group turns Stable (as Kafka's
    # classicGroupSyncToLeader does), so a Stable group's stored timestamp is its CompletingRebalance one. A group
    # never written (generation 0) gets its timestamp when it is made, live or at load (Kafka's
    # getOrMaybeCreatePersistedClassicGroup on an offset record).
    if state == "Empty" and g.generation > 0:
        snap["state_timestamp"] = g.state_timestamp
    # Left out of the group: the rebalance history and last change (describe only, kept in memory as Kafka's
    # is not), `new_member_added`/`last_member_added_ms`/`rebalance_start_ms` and `pending_sync` (a rebalance's
    # bookkeeping: none is in progress here), the join and sync timers, and `member_bytes`/`members_size` (a
    # running total derived from the members, checked by test_classic_model).
    return snap


def _partition_labels(g: ConsumerGroup) -> list[str]:
    """A name for each topic of the group's topic space: its name, and its id too where two share a name (a
    topic deleted and made again). Global partition ids are not compared: the space numbers topics in the order
    the group met them live, and in name order when loaded (consumer.py `on_loaded`)."""
    names, ids = g.space.names, g.space.topic_ids
    return [n if names.count(n) == 1 else f"{n}@{ids[i].hex()}" for i, n in enumerate(names)]


def _partitions(g: ConsumerGroup, labels: list[str], ids) -> dict[str, list[int]]:
    """Partition ids as {topic: sorted partitions} (ids are sorted, so each topic's run is)."""
    return {labels[t]: ps for t, ps in g.space.split(ids)}


def _consumer(g: ConsumerGroup) -> dict:
    labels = _partition_labels(g)
    members = {}
    for mid, m in g.members.items():
        c = m.classic
        members[mid] = {
            "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "subscribed": sorted(m.subscribed), "regex": m.regex,
            "rebalance_timeout_ms": m.rebalance_timeout_ms, "server_assignor": m.server_assignor,
            "classic": None if c is None else {
                "session_timeout_ms": c.session_timeout_ms,
                "protocols": [(p.name, bytes(p.metadata)) for p in c.supported_protocols]},
            "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch, "state": m.state,
            "assigned": _partitions(g, labels, m.assigned), "pending": _partitions(g, labels, m.pending),
            "target": _partitions(g, labels, g.target.get(mid))}
        # Left out: `topic_names`, `topics`, `topics_key` (what it consumes: its names and its regex's matches in
        # the catalogue, resolved again on load), `session_key` and `rebalance_armed_epoch` (timers, re-armed on
        # load: consumer.py `on_loaded`), `quiet_response`/`quiet_epoch` (a cached answer).
    # Left out of the group: the topic space's numbering (see _partition_labels), `subscribers`, `regexes`,
    # `regex_users` (derived from the members), `catalogue_version` (set to -1 on load so the next heartbeat compares
    # the catalogue with the stored metadata), `change` (the reason of the next bump: an event, not state).
    return {"type": "consumer", "state": g.state_name, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "metadata": sorted((name, tid.hex(), n) for name, (tid, n) in g.metadata.items()),
            "members": members, "static": dict(g.static), "other_targets": _other_targets(g, labels)}


def _other_targets(g: ConsumerGroup, labels: list[str]) -> dict[str, dict[str, list[int]]]:
    """Target rows of ids that are not members (none expected), the empty ones left out. An empty target row and
    no row are the same to a group (TargetAssignment.get's default, `rows_for`'s empty row), and kcoord writes a
    member's target record only when the target changes, no row counting as empty (consumer.py `compute_target`,
    `csr_changed`), so a member whose first target is empty has a row live and none once loaded. (Kafka's
    TargetAssignmentBuilder writes a record for every member that had no target, even an empty one: a difference
    in the records written, not in the state.)"""
    return {mid: _partitions(g, labels, g.target[mid]) for mid in g.target
            if mid not in g.members and len(g.target[mid])}


def _connect(g: ConnectGroup) -> dict:
    u = g.units
    # The unit table by name ("connector", "connector/task") in id order: ids are persisted (ConnectGroupUnits).
    table = [u.connectors[c] if task < 0 else f"{u.connectors[c]}/{task}"
             for c, task in zip(u.unit_conn, u.unit_task, strict=True)]

    def _units(_g, ids) -> list[str]:
        return sorted(table[i] for i in ids.tolist())

    members = {mid: {
        "instance_id": m.instance_id, "client_id": m.client_id, "client_host": m.client_host,
        "rebalance_timeout_ms": m.rebalance_timeout_ms, "joined": m.joined, "assignors": list(m.assignors),
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch, "state": m.state,
        "assigned": _units(g, m.assigned), "pending": _units(g, m.pending), "target": _units(g, g.target.get(mid))}
        for mid, m in g.members.items()}
    # Left out of each member: `session_key`, `rebalance_armed_epoch` (timers, re-armed on load: connect.py
    # `on_loaded`), `quiet_response`/`quiet_epoch` (a cached answer), `delivered` (what the worker was last sent,
    # taken on load to be its target when it is at the assignment epoch: a worker told again learns nothing new).
    # Left out of the group: the compute lease (`computing`, `prepared`, `last_computing`, `mismatches`,
    # `excluded`: a worker is chosen again on load, connect.py `owe_computation`, as after a lease runs out),
    # `empty_since_ms` (since the load when loaded: connect.py's __init__), `joins` (the arrival counter: only
    # its order among present members matters, and each member's `joined` is compared), the rebalance history
    # (describe only), `_negotiated` (a cache), the delay timer (re-armed from `delay_deadline_ms`).
    return {"type": "connect", "state": g.state_name, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor_name,
            "assignor_version": g.assignor_version, "assignor_state": g.assignor_state,
            "delay_deadline_ms": g.delay_deadline_ms, "units": table,
            "departed": {mid: (iid, _units(g, ids)) for mid, (iid, ids) in g.departed.items()},
            "members": members, "static": dict(g.static),
            "other_targets": {mid: _units(g, g.target[mid]) for mid in g.target  # as for consumer groups
                              if mid not in g.members and len(g.target[mid])},
            "target_meta": {mid: (v, bytes(meta)) for mid, (v, meta) in g.target_meta.items()}}


SNAPSHOTS = {ClassicGroup: _classic, ConsumerGroup: _consumer, ConnectGroup: _connect}


def snapshot(c: Coordinator, group_id: str) -> dict | None:
    """The canonical snapshot of one group and its committed offsets (offsets belong to the group id, whatever
    the group's type: kcoord.offsets); None when there is neither."""
    g = c.groups.get(group_id)
    offsets = sorted(c.offsets.committed(group_id).items())
    if g is None:
        return {"offsets": offsets} if offsets else None
    snap = SNAPSHOTS[type(g)](g)
    if offsets:
        snap["offsets"] = offsets
    return snap


_PRISTINE: dict[type, dict] = {}


def pristine(cls: type) -> dict:
    """The snapshot of a group of this type as it is made, before anything happens to it. Such a group has nothing
    to write and is not in the records: Kafka makes it again on demand (getOrMaybeCreateClassicGroup, and its
    consumer-group counterpart), so it stands for no group at all."""
    if cls not in _PRISTINE:
        c = Coordinator(GroupConfig(group_coordinator_rebalance_protocols="classic,consumer,connect"))
        _PRISTINE[cls] = SNAPSHOTS[cls](c.new_group(cls, "pristine"))
    return _PRISTINE[cls]


def snapshots(c: Coordinator) -> dict[str, dict]:
    """Every group's snapshot by group id, a group that holds nothing (`pristine`) left out."""
    out = {}
    for gid in {*c.groups, *c.offsets.by_group}:
        snap = snapshot(c, gid)
        g = c.groups.get(gid)
        if snap is not None and (g is None or snap != pristine(type(g))):
            out[gid] = snap
    return out


_last: tuple[object, int, dict[str, dict]] | None = None  # (records, their commit count, rebuilt snapshots)


def rebuilt_snapshots(live: Coordinator, records: Records) -> dict[str, dict]:
    """The snapshots of a rebuild from `records`; the previous call's when nothing was written since (a rebuild
    from the same records is the same: a snapshot holds no timer and no time of the load)."""
    global _last
    commits = getattr(records, "commits", None)
    if _last is not None and _last[0] is records and commits is not None and _last[1] == commits:
        return _last[2]
    # The collector waits while the rebuilt coordinator lives, and then collects it young: a collection in the
    # middle of a rebuild would move its half-made objects (cycles: a group and its timers) to the old generations,
    # and the full collections they bring cost more than the rebuild itself (2/3 of the time of a check).
    enabled = gc.isenabled()
    gc.disable()
    try:
        snaps = snapshots(rebuild(live, records))
    finally:
        if enabled:
            gc.enable()
            gc.collect(0)
    _last = (records, commits, snaps) if commits is not None else None
    return snaps


def differences(live, rebuilt, path: str = "") -> list[str]:
    """Each field where two snapshots differ, as "path: live X, rebuilt Y"."""
    if isinstance(live, dict) and isinstance(rebuilt, dict):
        out = []
        for k in sorted({*live, *rebuilt}, key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in rebuilt:
                out.append(f"{sub}: live {live[k]!r}, not in the rebuilt group")
            elif k not in live:
                out.append(f"{sub}: rebuilt {rebuilt[k]!r}, not in the live group")
            else:
                out.extend(differences(live[k], rebuilt[k], sub))
        return out
    return [] if live == rebuilt else [f"{path}: live {live!r}, rebuilt {rebuilt!r}"]


def check_rebuild(live: Coordinator, records: Records, where: str = "") -> int:
    """Rebuild from `records` (what `live` has written so far) and compare every group with its live self; an
    AssertionError names each differing field. A classic group between generations is skipped (TRANSIENT), and
    when every live group is, nothing is rebuilt (a caller checking every few steps tries again at the next step).
    Returns how many groups were compared."""
    if live.groups and all(between_generations(g) for g in live.groups.values()):
        return 0
    mine = snapshots(live)
    theirs = rebuilt_snapshots(live, records)
    problems = []
    compared = 0
    for gid in sorted({*mine, *theirs}):
        a, b = mine.get(gid), theirs.get(gid)
        if a is not None and TRANSIENT in a:
            continue
        compared += 1
        if a != b:
            problems.extend(f"group {gid!r}: {d}" for d in differences(a or {}, b or {}))
    if problems:
        raise AssertionError(f"rebuilt from the records differs from live{' at ' + where if where else ''}:\n  "
                             + "\n  ".join(problems))
    return compared
