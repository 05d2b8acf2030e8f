"""Plausible requests: for every API and version the server serves, a body a real client could send.

`body(api_key, version, p)` builds the request message of `api_key` at `version` from kcoord's own message classes,
with values taken from `p` (the group, the member and epoch a client learned from earlier responses, the topics the
server knows). Each API's values are written once, version-free; `build` keeps only the fields the version carries
(so every body encodes at its version). The fuzz harness mutates these bodies, and make_seeds.py writes them into
the seed corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord import wire
from kcoord.assignors import encode_assignment, encode_subscription
from kcoord.protocol import MESSAGES
from kcoord.protocol.dsl import Struct
from kcoord.protocol.generate import class_name

REQUESTS = {m.api_key: m for m in MESSAGES if m.kind == "request"}

# How a fuzz input names an API: a key byte and a version byte. Key bytes below 0x80 index KEYS, in the order the
# APIs were added: a new API goes at the end, so the inputs in the corpus keep their meaning. Key bytes from 0x80
# name what a real client may also send and no one serves (the ApiVersions fallback, a closed connection).
# Version bytes below 0x80 are versions (taken modulo the served range when outside it); from 0x80 on they are
# the raw version (byte - 0x80), served or not.
KEYS: tuple[int, ...] = (18, 3, 10, 2, 1, 0, 19, 37, 11, 14, 12, 13, 15, 16, 42, 8, 9, 47, 68, 69, 1000, 1001, 1002,
                         1003)
KEYS += tuple(sorted(set(wire.API_VERSIONS) - set(KEYS)))
UNSERVED: tuple[tuple[int, int], ...] = ((18, 5), (18, 127), (12, 5), (1, 3), (0, 2), (999, 0), (-1, 0), (7, 0),
                                         (1004, 0), (1000, 1), (2000, 0), (2003, 0), (0x7FFF, 0))
# Every (API key, version) the codec decodes: the seed corpus has a request for each.
PAIRS: tuple[tuple[int, int], ...] = tuple((k, v) for k in KEYS if k in wire.API_VERSIONS
                                           for v in range(wire.API_VERSIONS[k][0], wire.API_VERSIONS[k][1] + 1))


def select(kb: int, vb: int) -> tuple[int, int]:
    """The (API key, version) a key byte and a version byte name."""
    if kb >= 0x80:
        return UNSERVED[(kb - 0x80) % len(UNSERVED)]
    key = KEYS[kb % len(KEYS)]
    if vb >= 0x80:
        return key, vb - 0x80
    lo, hi = wire.API_VERSIONS.get(key, (0, 0))
    return key, vb if lo <= vb <= hi else lo + vb % (hi - lo + 1)


def selector(key: int, version: int) -> tuple[int, int]:
    """The key and version bytes that name a served (API key, version)."""
    return KEYS.index(key), version


def served(key: int, version: int) -> bool:
    lo, hi = wire.API_VERSIONS.get(key, (0, -1))
    return lo <= version <= hi


@dataclass
class Params:
    group: str = "g"
    member: str = ""  # "" for a classic or consumer join; a connect worker and a KIP-848 v1 client name themselves
    fresh: str = "w1"  # the id a client that names itself picks when `member` is ""
    epoch: int = 0  # classic generation, or consumer/connect member epoch
    group_epoch: int = 0  # connect: the epoch a Prepare answered (Install echoes it)
    instance: str | None = None
    topics: tuple[tuple[str, bytes, int], ...] = (("t", bytes(16), 4),)  # (name, id, partitions) the server knows
    members: tuple[str, ...] = ()  # members of the group the client has seen (a classic leader assigns to them)
    owned: tuple[tuple[bytes, tuple[int, ...]], ...] = ()  # what a consumer member was assigned (it reports it back)
    flags: int = 0  # per-API variations (acks=0, max_wait 0, all topics, validate only, regex, ...)

    def flag(self, bit: int) -> bool:
        return bool(self.flags >> bit & 1)


def build(msg, st: Struct, v: int, spec: dict):
    """The message or struct `st` at version `v` from `spec` (field name -> value; nested structs as dicts): fields
    the version does not carry, and nulls where it allows none, are left at their defaults."""
    cls = getattr(wire, class_name(msg, st))
    kwargs = {}
    for fld in st.fields:
        if fld.name not in spec or not fld.present(v):
            continue
        value = spec[fld.name]
        if value is None:
            if fld.is_nullable(v):
                kwargs[fld.name] = None
            continue
        if fld.struct is not None:
            value = [build(msg, fld.struct, v, x) for x in value] if fld.is_array else build(msg, fld.struct, v, value)
        kwargs[fld.name] = value
    return cls(**kwargs)


def body(api_key: int, version: int, p: Params | None = None):
    """A request an API has no plausible values for yet (SPECS) holds its defaults."""
    p = p or Params()
    msg = REQUESTS.get(api_key)
    if msg is None:  # the compiled codec is newer than kcoord.protocol (a build in progress)
        return wire.REQUEST_TYPES[api_key]()
    spec = SPECS.get(api_key)
    return build(msg, msg.root, version, spec(p) if spec is not None else {})


def encoded(api_key: int, version: int, p: Params | None = None) -> bytes:
    return body(api_key, version, p).encode(version)


# ---- one version-free spec per API ------------------------------------------------------------------------------

def _topics(p: Params) -> list[tuple[str, bytes, int]]:
    ts = list(p.topics[:2] if p.flag(2) else p.topics[:1])
    if p.flag(1):
        ts.append(("fuzz-new", bytes(range(16)), 1))  # a topic the server does not know (auto-created or refused)
    return ts


def _member(p: Params) -> str:
    return p.member or p.fresh


def api_versions(p: Params) -> dict:
    return {"client_software_name": "kcoord-fuzz", "client_software_version": "1.0"}


def metadata(p: Params) -> dict:
    topics = None if p.flag(0) else [{"name": n, "topic_id": tid} for n, tid, _ in _topics(p)]
    return {"topics": topics, "allow_auto_topic_creation": True, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": p.flag(3)}


def find_coordinator(p: Params) -> dict:
    return {"key": p.group, "key_type": 1 if p.flag(0) else 0, "coordinator_keys": [p.group, "h"][:1 + p.flag(2)]}


def list_offsets(p: Params) -> dict:
    return {"replica_id": -1, "isolation_level": p.flag(0), "timeout_ms": 1000, "topics": [
        {"name": n, "partitions": [{"partition_index": i, "current_leader_epoch": -1, "timestamp": -1 - p.flag(3),
                                    "max_num_offsets": 1} for i in (0, parts)]}
        for n, _, parts in _topics(p)]}


def fetch(p: Params) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0 if p.flag(0) else 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": n, "topic_id": tid, "partitions": [
                {"partition": i, "current_leader_epoch": -1, "fetch_offset": 42 * i, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1048576} for i in (0, parts)]}
                for n, tid, parts in _topics(p)],
            "forgotten_topics_data": [{"topic": n, "topic_id": tid, "partitions": [1]}
                                      for n, tid, _ in _topics(p)[:p.flag(3)]]}


def produce(p: Params) -> dict:
    return {"transactional_id": None, "acks": 0 if p.flag(0) else -1, "timeout_ms": 1500, "topic_data": [
        {"name": n, "topic_id": tid, "partition_data": [{"index": 0, "records": b""}]} for n, tid, _ in _topics(p)]}


def create_topics(p: Params) -> dict:
    return {"timeout_ms": 1000, "validate_only": p.flag(0), "topics": [
        {"name": "fuzz-created" if not p.flag(1) else p.topics[0][0], "num_partitions": -1 if p.flag(3) else 3,
         "replication_factor": -1, "assignments": [],
         "configs": [{"name": "cleanup.policy", "value": "compact"}]}]}


def create_partitions(p: Params) -> dict:
    name, _, parts = p.topics[0]
    return {"timeout_ms": 1000, "validate_only": p.flag(0), "topics": [
        {"name": name, "count": parts + 1 + p.flag(2), "assignments": [{"broker_ids": [0]}] if p.flag(3) else None}]}


def join_group(p: Params) -> dict:
    names = [n for n, _, _ in p.topics]
    sub = encode_subscription(names[:1 + p.flag(2)], version=3 if p.flag(3) else 0)
    protocols = [{"name": "range", "metadata": sub}]
    if p.flag(0):
        protocols.insert(0, {"name": "roundrobin", "metadata": sub})
    return {"group_id": p.group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000, "member_id": p.member,
            "group_instance_id": p.instance, "protocol_type": "consumer", "protocols": protocols, "reason": "fuzz"}


def sync_group(p: Params) -> dict:
    names = [n for n, _, _ in p.topics]
    members = list(dict.fromkeys([p.member, *p.members])) if p.member else list(p.members)
    assignments = [] if p.flag(0) else [
        {"member_id": m, "assignment": encode_assignment({names[0]: [i]} if names else {})}
        for i, m in enumerate(members)]
    return {"group_id": p.group, "generation_id": p.epoch, "member_id": p.member, "group_instance_id": p.instance,
            "protocol_type": "consumer", "protocol_name": "roundrobin" if p.flag(1) else "range",
            "assignments": assignments}


def heartbeat(p: Params) -> dict:
    return {"group_id": p.group, "generation_id": p.epoch, "member_id": p.member, "group_instance_id": p.instance}


def leave_group(p: Params) -> dict:
    members = [{"member_id": p.member, "group_instance_id": p.instance, "reason": "fuzz leaves"}]
    if p.flag(2):
        members.append({"member_id": "", "group_instance_id": "i2", "reason": None})
    return {"group_id": p.group, "member_id": p.member, "members": members}


def describe_groups(p: Params) -> dict:
    return {"groups": [p.group, "h"][:1 + p.flag(2)], "include_authorized_operations": p.flag(0)}


def list_groups(p: Params) -> dict:
    return {"states_filter": ["Stable", "Empty"] if p.flag(0) else [],
            "types_filter": ["classic", "consumer"] if p.flag(1) else []}


def delete_groups(p: Params) -> dict:
    return {"groups_names": [p.group, "h"][:1 + p.flag(2)]}


def offset_commit(p: Params) -> dict:
    return {"group_id": p.group, "generation_id_or_member_epoch": -1 if p.flag(0) else p.epoch,
            "member_id": "" if p.flag(0) else p.member, "group_instance_id": p.instance, "retention_time_ms": -1,
            "topics": [{"name": n, "topic_id": tid, "partitions": [
                {"partition_index": i, "committed_offset": 100 + i, "committed_leader_epoch": -1,
                 "commit_timestamp": -1, "committed_metadata": "x" * 40 if p.flag(3) else "fuzz"}
                for i in range(min(parts, 2))]} for n, tid, parts in _topics(p)]}


def offset_fetch(p: Params) -> dict:
    topics = None if p.flag(0) else [{"name": n, "topic_id": tid, "partition_indexes": [0, 1]}
                                     for n, tid, _ in _topics(p)]
    return {"group_id": p.group, "topics": topics, "require_stable": p.flag(3), "groups": [
        {"group_id": p.group, "member_id": p.member or None, "member_epoch": p.epoch if p.member else -1,
         "topics": topics}]}


def offset_delete(p: Params) -> dict:
    return {"group_id": p.group, "topics": [{"name": n, "partitions": [{"partition_index": 0}]}
                                            for n, _, _ in _topics(p)]}


def consumer_group_heartbeat(p: Params) -> dict:
    joining = not p.member
    spec = {"group_id": p.group, "member_id": p.member or (p.fresh if p.flag(1) else ""),
            "member_epoch": 0 if joining else p.epoch, "instance_id": p.instance, "rack_id": None,
            "rebalance_timeout_ms": 30_000 if joining else -1, "server_assignor": "range" if p.flag(0) else None,
            "subscribed_topic_names": [n for n, _, _ in _topics(p)] if joining or p.flag(2) else None,
            "subscribed_topic_regex": "t|u.*" if p.flag(3) else None,
            "topic_partitions": [] if joining else [{"topic_id": t, "partitions": list(ps)} for t, ps in p.owned]}
    if not joining and not p.owned and not p.flag(2):
        spec["topic_partitions"] = None  # null: unchanged since the last heartbeat
    return spec


def consumer_group_describe(p: Params) -> dict:
    return {"group_ids": [p.group, "h"][:1 + p.flag(2)], "include_authorized_operations": p.flag(0)}


def _units(p: Params, connectors: list[str]) -> dict:
    return {"connectors": connectors,
            "tasks": [{"connector": c, "task_ids": list(range(1 + p.flag(3)))} for c in connectors]}


def connect_heartbeat(p: Params) -> dict:
    joining = not p.member
    return {"group_id": p.group, "member_id": _member(p), "member_epoch": 0 if joining else p.epoch,
            "instance_id": p.instance, "rebalance_timeout_ms": 60_000 if joining or p.flag(0) else -1,
            "server_assignor": None,
            "client_assignors": [{"name": "ica", "minimum_version": 1, "maximum_version": 2, "reason": 0,
                                  "version": 2, "metadata": b"m"}] if joining or p.flag(0) else None,
            "connectors_and_tasks": _units(p, [] if joining or not p.flag(2) else ["c0"])}


def delete_topics(p: Params) -> dict:
    ts = _topics(p)[1:] if p.flag(0) else [("fuzz-created", bytes(16), 1)]
    return {"topics": [{"name": n, "topic_id": tid} for n, tid, _ in ts], "topic_names": [n for n, _, _ in ts],
            "timeout_ms": 1000}


def connect_prepare(p: Params) -> dict:
    return {"group_id": p.group, "member_id": _member(p), "member_epoch": p.epoch}


def connect_install(p: Params) -> dict:
    members = list(dict.fromkeys([_member(p), *p.members]))
    return {"group_id": p.group, "member_id": _member(p), "member_epoch": p.epoch, "group_epoch": p.group_epoch,
            "error": 0, "assignment_delay_ms": 1000 if p.flag(0) else 0, "assignor_state": b"state",
            "members": [{"member_id": m, "connectors_and_tasks": _units(p, [f"c{i}"] if i or not p.flag(1) else
                                                                        ["c0", "c0"]),
                         "version": 2, "metadata": b""} for i, m in enumerate(members)]}


def connect_describe(p: Params) -> dict:
    return {"group_ids": [p.group], "include_authorized_operations": False}


def _acl_filter(p: Params) -> dict:
    """A filter of every ACL on the group (ANY operation and permission; the flag: any pattern of any name)."""
    return {"resource_type_filter": 3, "resource_name_filter": None if p.flag(0) else p.group,
            "pattern_type_filter": 1 if p.flag(0) else 3, "principal_filter": None, "host_filter": None,
            "operation": 1, "permission_type": 1}


def describe_acls(p: Params) -> dict:
    return _acl_filter(p)


def create_acls(p: Params) -> dict:
    return {"creations": [{"resource_type": 3, "resource_name": p.group, "resource_pattern_type": 4 if p.flag(0) else 3,
                           "principal": "User:fuzz", "host": "*", "operation": 3, "permission_type": 3}]}


def delete_acls(p: Params) -> dict:
    return {"filters": [_acl_filter(p)]}


SPECS = {  # by API key (DeleteTopics, 20, when the codec has it)
    18: api_versions, 3: metadata, 10: find_coordinator, 2: list_offsets, 1: fetch, 0: produce, 19: create_topics,
    20: delete_topics, 37: create_partitions, 11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group,
    15: describe_groups, 16: list_groups, 42: delete_groups, 8: offset_commit, 9: offset_fetch, 47: offset_delete,
    68: consumer_group_heartbeat, 69: consumer_group_describe, 1000: connect_heartbeat, 1001: connect_prepare,
    1002: connect_install, 1003: connect_describe, 29: describe_acls, 30: create_acls, 31: delete_acls,
}
