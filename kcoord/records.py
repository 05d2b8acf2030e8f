"""Coordinator records: the key and value bytes Kafka writes to `__consumer_offsets`, and kcoord's own topic record.

A key is an int16 record type followed by the key struct; a value is an int16 version followed by the value struct.
The record type ids are the versions the generated key classes declare (GroupMetadataKey is version 2,
ConsumerGroupMetadataKey version 3, ...), so they are read from `wire`, never written out again here. kcoord adds
one record of its own, the topic catalogue (a Kafka cluster keeps topics in its metadata log, which kcoord does not
have); its type id (1000) is outside Kafka's range.

This module imports the codec only: the store checks records with it, and each group type builds and replays its
own records with it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import wire
from .security.authorizer import Acl, acl_problem

# Record type ids (the key's int16 "version"), as Kafka's coordinator records number them.
OFFSET_COMMIT_V0 = wire.OffsetCommitKey.MIN_VERSION  # 0: written by very old brokers, still read
OFFSET_COMMIT = wire.OffsetCommitKey.MAX_VERSION  # 1
GROUP_METADATA = wire.GroupMetadataKey.MIN_VERSION  # 2: a classic group
CONSUMER_GROUP_METADATA = wire.ConsumerGroupMetadataKey.MIN_VERSION  # 3
CONSUMER_GROUP_PARTITION_METADATA = wire.ConsumerGroupPartitionMetadataKey.MIN_VERSION  # 4
CONSUMER_GROUP_MEMBER_METADATA = wire.ConsumerGroupMemberMetadataKey.MIN_VERSION  # 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = wire.ConsumerGroupTargetAssignmentMetadataKey.MIN_VERSION  # 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = wire.ConsumerGroupTargetAssignmentMemberKey.MIN_VERSION  # 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = wire.ConsumerGroupCurrentMemberAssignmentKey.MIN_VERSION  # 8
KCOORD_TOPIC = 1000
# Connect groups (kcoord's own group type, kcoord.protocol.connect): a private block beside the topic record.
CONNECT_GROUP_METADATA = 1001
CONNECT_GROUP_MEMBER_METADATA = 1002
CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA = 1003
CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER = 1004
CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT = 1005
CONNECT_GROUP_UNITS = 1006
# Authentication (issue 31): a SCRAM credential, the KRaft UserScramCredentialRecord's fields (a Kafka cluster keeps
# them in its metadata log); a block of its own after the connect group's.
KCOORD_SCRAM_CREDENTIAL = 1100
# Authorization (issue 32): one ACL, the KRaft AccessControlEntryRecord's fields, the whole ACL in the key
KCOORD_ACL = 1101

GROUP_METADATA_VALUE_VERSION = 3  # what Kafka writes for classic groups
OFFSET_COMMIT_VALUE_VERSION = 3  # leader epoch, no expire timestamp (KIP-211)

_I16 = struct.Struct(">h")
_TOPIC_VALUE = struct.Struct(">h16si")
_SCRAM_KEY_NAME = struct.Struct(">hH")  # record type, user name length
_SCRAM_VALUE = struct.Struct(">hIHHi")  # version, salt, stored key and server key lengths, iterations
_ACL_KEY = struct.Struct(">hbbbbHHH")  # record type, resource type, pattern, operation, permission, 3 lengths
ACL_VALUE = b"\x00\x00"  # version 0, nothing more: the key is the ACL
SCRAM_MECHANISM_TYPES = (1, 2)  # SCRAM-SHA-256, SCRAM-SHA-512 (kcoord.security.scram.MECHANISMS)


class RecordError(ValueError):
    """A stored record that cannot be read; the message names the record by its key."""


def record_type(key: bytes) -> int:
    return _I16.unpack_from(key)[0]


def utf8_len(text: str) -> int:
    """The UTF-8 bytes of `text` as a record holds it, without encoding an ASCII string."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


# ---- classic groups -------------------------------------------------------------------------------------------

def group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA) + wire.GroupMetadataKey(group=group_id).encode(GROUP_METADATA)


def group_value(value: wire.GroupMetadataValue) -> bytes:
    return _I16.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


# The bytes of a classic group's record (GroupMetadataKey, GroupMetadataValue v3) past its strings and byte
# arrays: the key's record type and group id length; the value's version, protocol type, protocol and leader
# lengths, generation, state timestamp and member count; and per member its four string lengths, two timeouts and
# two byte-array lengths. kcoord.groups.classic compares the sum with message.max.bytes.
GROUP_RECORD_FIXED = (2 + 2) + (2 + 2 + 4 + 2 + 2 + 8 + 4)
GROUP_MEMBER_FIXED = 2 + 2 + 2 + 2 + 4 + 4 + 4 + 4


def group_record_size(group_id: str, protocol_type: str | None, protocol: str | None, leader: str | None) -> int:
    """A classic group's record bytes but its members' (group_member_size each)."""
    return GROUP_RECORD_FIXED + utf8_len(group_id + (protocol_type or "") + (protocol or "") + (leader or ""))


def group_member_size(member_id: str, instance_id: str | None, client_id: str, client_host: str,
                      subscription: int, assignment: int) -> int:
    """One member's bytes in a classic group's record, with `subscription` and `assignment` bytes."""
    return (GROUP_MEMBER_FIXED + utf8_len(member_id + (instance_id or "") + client_id + client_host) + subscription
            + assignment)


def group_metadata_problem(value: wire.GroupMetadataValue) -> str | None:
    """What makes a stored GroupMetadataValue unusable, or None."""
    ids = [m.member_id for m in value.members]
    if len(set(ids)) != len(ids):
        return "a member id appears twice"
    iids = [m.group_instance_id for m in value.members if m.group_instance_id is not None]
    if len(set(iids)) != len(iids):
        return "an instance id appears twice"
    if value.generation < 0:
        return f"negative generation {value.generation}"
    if value.members and value.leader not in ids:
        return f"leader {value.leader!r} is not a member"
    if value.members and value.protocol is None:
        return "members but no protocol"
    return None


# ---- offsets --------------------------------------------------------------------------------------------------

# The bytes of an OffsetCommitKey v1 record's key past its strings: the record type, the group's and the topic's
# int16 lengths, the partition; and of its OffsetCommitValue v3 past the metadata: the version, offset, leader
# epoch, the metadata's int16 length, commit timestamp. A record is OFFSET_RECORD_FIXED + the UTF-8 bytes of group
# id, topic and metadata (kcoord.offsets compares the sum over a commit with message.max.bytes).
OFFSET_KEY_FIXED = 2 + 2 + 2 + 4
OFFSET_VALUE_FIXED = 2 + 8 + 4 + 2 + 8
OFFSET_RECORD_FIXED = OFFSET_KEY_FIXED + OFFSET_VALUE_FIXED


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT) + wire.OffsetCommitKey(
        group=group_id, topic=topic, partition=partition).encode(OFFSET_COMMIT)


def offset_value(offset: int, leader_epoch: int, metadata: str | None, timestamp_ms: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_VALUE_VERSION) + wire.OffsetCommitValue(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
        commit_timestamp=timestamp_ms).encode(OFFSET_COMMIT_VALUE_VERSION)


# ---- consumer groups (KIP-848): keys are not flexible, values are version 0 and flexible ---------------------

CONSUMER_VALUE_VERSION = 0


def _key(rtype: int, cls, schema_version: int | None = None, **fields) -> bytes:
    """The record type, then the key struct (Kafka's keys are written at the version that is their type; kcoord's
    own connect keys at version 0)."""
    return _I16.pack(rtype) + cls(**fields).encode(rtype if schema_version is None else schema_version)


def _value(value) -> bytes:
    return _I16.pack(CONSUMER_VALUE_VERSION) + value.encode(CONSUMER_VALUE_VERSION)


def consumer_group_key(group_id: str) -> bytes:
    return _key(CONSUMER_GROUP_METADATA, wire.ConsumerGroupMetadataKey, group_id=group_id)


def consumer_partition_metadata_key(group_id: str) -> bytes:
    return _key(CONSUMER_GROUP_PARTITION_METADATA, wire.ConsumerGroupPartitionMetadataKey, group_id=group_id)


def consumer_member_key(group_id: str, member_id: str) -> bytes:
    return _key(CONSUMER_GROUP_MEMBER_METADATA, wire.ConsumerGroupMemberMetadataKey, group_id=group_id,
                member_id=member_id)


def consumer_target_metadata_key(group_id: str) -> bytes:
    return _key(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, wire.ConsumerGroupTargetAssignmentMetadataKey,
                group_id=group_id)


def consumer_target_member_key(group_id: str, member_id: str) -> bytes:
    return _key(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, wire.ConsumerGroupTargetAssignmentMemberKey,
                group_id=group_id, member_id=member_id)


def consumer_current_assignment_key(group_id: str, member_id: str) -> bytes:
    return _key(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, wire.ConsumerGroupCurrentMemberAssignmentKey,
                group_id=group_id, member_id=member_id)


consumer_group_value = consumer_partition_metadata_value = consumer_member_value = _value
consumer_target_metadata_value = consumer_target_member_value = consumer_current_assignment_value = _value

# record type -> (key class, value class) for the consumer group records
# (key class, value class) by record type: wire message classes, each with its own fields (hence Any)
CONSUMER_RECORDS: dict[int, tuple[Any, Any]] = {
    CONSUMER_GROUP_METADATA: (wire.ConsumerGroupMetadataKey, wire.ConsumerGroupMetadataValue),
    CONSUMER_GROUP_PARTITION_METADATA: (wire.ConsumerGroupPartitionMetadataKey,
                                        wire.ConsumerGroupPartitionMetadataValue),
    CONSUMER_GROUP_MEMBER_METADATA: (wire.ConsumerGroupMemberMetadataKey, wire.ConsumerGroupMemberMetadataValue),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (wire.ConsumerGroupTargetAssignmentMetadataKey,
                                                wire.ConsumerGroupTargetAssignmentMetadataValue),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (wire.ConsumerGroupTargetAssignmentMemberKey,
                                              wire.ConsumerGroupTargetAssignmentMemberValue),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (wire.ConsumerGroupCurrentMemberAssignmentKey,
                                               wire.ConsumerGroupCurrentMemberAssignmentValue),
}



class ModernRecordKeys(NamedTuple):
    """A modern group type's record keys (kcoord.groups.modern.ModernGroup.KEYS), each a function of the group id
    (and the member id)."""

    group: Callable[[str], bytes]  # the group epoch
    units: Callable[[str], bytes]  # what the units are: a consumer group's topics, a connect group's unit table
    member: Callable[[str, str], bytes]  # a member's metadata
    target_metadata: Callable[[str], bytes]  # the assignment epoch
    target_member: Callable[[str, str], bytes]  # a member's target
    current_assignment: Callable[[str, str], bytes]  # a member's epochs, state, assigned and pending units


CONSUMER_KEYS = ModernRecordKeys(consumer_group_key, consumer_partition_metadata_key, consumer_member_key,
                                 consumer_target_metadata_key, consumer_target_member_key,
                                 consumer_current_assignment_key)

# One member's record (key and value) in a consumer or connect group, for message.max.bytes: the values are
# flexible, so a string's, bytes' or array's length is an unsigned varint of length + 1 (0 for null); the sizes
# below are exact but for the tagged-field counts and the classic struct's size, counted at their most (5 bytes).


def _uvarint_len(n: int) -> int:
    return 1 if n < 0x80 else 2 if n < 0x4000 else 3 if n < 0x200000 else 4 if n < 0x10000000 else 5


def _compact(text: str | None) -> int:
    """A compact (nullable) string's bytes."""
    if text is None:
        return 1
    n = utf8_len(text)
    return _uvarint_len(n + 1) + n


def consumer_member_size(group_id: str, member_id: str, instance_id: str | None, rack_id: str | None, client_id: str,
                         client_host: str, topics: list[str], regex: str | None, assignor: str | None,
                         classic: list[tuple[str, bytes]] | None) -> int:
    """At least the bytes of a ConsumerGroupMemberMetadataKey/Value with these fields (`classic`: a classic
    member's protocols, as (name, metadata)), and at most 10 more."""
    n = 2 + 2 + utf8_len(group_id) + 2 + utf8_len(member_id) + 2 + 4 + 5  # key; version, timeout, tag count
    n += _compact(instance_id) + _compact(rack_id) + _compact(client_id) + _compact(client_host)
    n += _compact(regex) + _compact(assignor) + _uvarint_len(len(topics) + 1) + sum(map(_compact, topics))
    if classic is not None:  # tag, size, session timeout, protocols' count, the struct's tag count
        n += 1 + 5 + 4 + _uvarint_len(len(classic) + 1) + 1
        for name, meta in classic:
            n += _compact(name) + _uvarint_len(len(meta) + 1) + len(meta) + 1
    return n


def connect_member_size(group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                        assignors: list[tuple[str, bytes]]) -> int:
    """The bytes of a ConnectGroupMemberMetadataKey/Value with these fields (`assignors`: (name, metadata) of
    each client assignor), give or take the tag count."""
    n = 2 + 2 + utf8_len(group_id) + 2 + utf8_len(member_id) + 2 + 4 + 8 + 5  # key; version, timeout, joined, tags
    n += _compact(instance_id) + _compact(client_id) + _compact(client_host) + _uvarint_len(len(assignors) + 1)
    for name, meta in assignors:
        n += _compact(name) + 2 + 2 + 1 + 2 + _uvarint_len(len(meta) + 1) + len(meta) + 1
    return n


# ---- connect groups: keys and values are version 0 structs after the int16 record type / value version ------

def connect_group_key(group_id: str) -> bytes:
    return _key(CONNECT_GROUP_METADATA, wire.ConnectGroupMetadataKey, 0, group_id=group_id)


def connect_units_key(group_id: str) -> bytes:
    return _key(CONNECT_GROUP_UNITS, wire.ConnectGroupUnitsKey, 0, group_id=group_id)


def connect_member_key(group_id: str, member_id: str) -> bytes:
    return _key(CONNECT_GROUP_MEMBER_METADATA, wire.ConnectGroupMemberMetadataKey, 0, group_id=group_id,
                member_id=member_id)


def connect_target_metadata_key(group_id: str) -> bytes:
    return _key(CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA, wire.ConnectGroupTargetAssignmentMetadataKey, 0,
                group_id=group_id)


def connect_target_member_key(group_id: str, member_id: str) -> bytes:
    return _key(CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER, wire.ConnectGroupTargetAssignmentMemberKey, 0,
                group_id=group_id, member_id=member_id)


def connect_current_assignment_key(group_id: str, member_id: str) -> bytes:
    return _key(CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT, wire.ConnectGroupCurrentMemberAssignmentKey, 0,
                group_id=group_id, member_id=member_id)


connect_value = _value  # version 0, as the consumer group values

CONNECT_RECORDS: dict[int, tuple[Any, Any]] = {
    CONNECT_GROUP_METADATA: (wire.ConnectGroupMetadataKey, wire.ConnectGroupMetadataValue),
    CONNECT_GROUP_UNITS: (wire.ConnectGroupUnitsKey, wire.ConnectGroupUnitsValue),
    CONNECT_GROUP_MEMBER_METADATA: (wire.ConnectGroupMemberMetadataKey, wire.ConnectGroupMemberMetadataValue),
    CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA: (wire.ConnectGroupTargetAssignmentMetadataKey,
                                               wire.ConnectGroupTargetAssignmentMetadataValue),
    CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER: (wire.ConnectGroupTargetAssignmentMemberKey,
                                             wire.ConnectGroupTargetAssignmentMemberValue),
    CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT: (wire.ConnectGroupCurrentMemberAssignmentKey,
                                              wire.ConnectGroupCurrentMemberAssignmentValue),
}

CONNECT_KEYS = ModernRecordKeys(connect_group_key, connect_units_key, connect_member_key, connect_target_metadata_key,
                                connect_target_member_key, connect_current_assignment_key)

# ---- kcoord's topic catalogue ---------------------------------------------------------------------------------

def topic_key(name: str) -> bytes:
    return _I16.pack(KCOORD_TOPIC) + name.encode()


def topic_value(topic_id: bytes, partitions: int) -> bytes:
    return _TOPIC_VALUE.pack(0, topic_id, partitions)


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: bytes
    partitions: int


# ---- SCRAM credentials: key = type, user name (uint16 length, UTF-8), mechanism (int8); value = version 0, the
# lengths of salt (uint32), StoredKey and ServerKey (uint16), iterations (int32), then the three byte strings -----

def scram_credential_key(user: str, mechanism: int) -> bytes:
    name = user.encode()
    return _SCRAM_KEY_NAME.pack(KCOORD_SCRAM_CREDENTIAL, len(name)) + name + struct.pack(">b", mechanism)


def scram_credential_value(salt: bytes, stored_key: bytes, server_key: bytes, iterations: int) -> bytes:
    return (_SCRAM_VALUE.pack(0, len(salt), len(stored_key), len(server_key), iterations) + salt + stored_key
            + server_key)


@dataclass(frozen=True)
class ScramCredentialRecord:
    user: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the salt or the keys, in a log or a message (Kafka: "[hidden]")
        return f"ScramCredentialRecord(user={self.user!r}, mechanism={self.mechanism}, salt=[hidden], " \
               f"stored_key=[hidden], server_key=[hidden], iterations={self.iterations})"


def _scram_credential(key: bytes, value: bytes) -> ScramCredentialRecord:
    _, n = _SCRAM_KEY_NAME.unpack_from(key)
    if len(key) != _SCRAM_KEY_NAME.size + n + 1:
        raise ValueError(f"bad SCRAM credential key ({len(key)} bytes for a {n}-byte name)")
    user = key[_SCRAM_KEY_NAME.size:_SCRAM_KEY_NAME.size + n].decode()
    mechanism = struct.unpack_from(">b", key, len(key) - 1)[0]
    version, ls, lk, lv, iterations = _SCRAM_VALUE.unpack_from(value)
    if version != 0:
        raise ValueError(f"unknown SCRAM credential value version {version}")
    if len(value) != _SCRAM_VALUE.size + ls + lk + lv:
        raise ValueError(f"bad SCRAM credential value ({len(value)} bytes)")
    if not user or mechanism not in SCRAM_MECHANISM_TYPES or not lk or not lv:
        raise ValueError(f"bad SCRAM credential (user {user!r}, mechanism {mechanism})")
    at = _SCRAM_VALUE.size
    return ScramCredentialRecord(user, mechanism, value[at:at + ls], value[at + ls:at + ls + lk],
                                 value[at + ls + lk:], iterations)


# ---- ACLs: key = type, resource type, pattern type, operation, permission (int8 each), the lengths (uint16) of the
# resource name, principal and host, then the three (UTF-8); value = version 0 ----------------------------------------

def acl_key(acl: Acl) -> bytes:
    name, principal, host = acl.name.encode(), acl.principal.encode(), acl.host.encode()
    return _ACL_KEY.pack(KCOORD_ACL, acl.resource_type, acl.pattern, acl.operation, acl.permission, len(name),
                         len(principal), len(host)) + name + principal + host


def _acl(key: bytes, value: bytes) -> Acl:
    _, rtype, pattern, op, perm, ln, lp, lh = _ACL_KEY.unpack_from(key)
    at = _ACL_KEY.size
    if len(key) != at + ln + lp + lh:
        raise ValueError(f"bad ACL key ({len(key)} bytes for lengths {ln}, {lp}, {lh})")
    if value != ACL_VALUE:
        raise ValueError(f"bad ACL value {value[:16].hex()}")
    acl = Acl(rtype, key[at:at + ln].decode(), pattern, key[at + ln:at + ln + lp].decode(),
              key[at + ln + lp:].decode(), op, perm)
    issue = acl_problem(acl)
    if issue:
        raise ValueError(f"bad ACL: {issue}")
    return acl


# ---- decoding -------------------------------------------------------------------------------------------------

@dataclass
class Record:
    """One decoded record: its type id, the group it belongs to (None for a topic), the key and value."""

    type: int
    group: str | None
    key: Any  # the record type's key and value (a wire.*Key and wire.*Value, TopicRecord, ...): chosen by `type`
    value: Any

    @property
    def kind(self) -> str:
        """"group", "offset", "topic", "scram", ... (KINDS)."""
        return KINDS[self.type]


KINDS = {OFFSET_COMMIT_V0: "offset", OFFSET_COMMIT: "offset", GROUP_METADATA: "group", KCOORD_TOPIC: "topic",
         CONSUMER_GROUP_METADATA: "group", CONSUMER_GROUP_MEMBER_METADATA: "member",
         CONSUMER_GROUP_PARTITION_METADATA: "consumer", CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "consumer",
         CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "consumer", CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "consumer",
         CONNECT_GROUP_METADATA: "group", CONNECT_GROUP_MEMBER_METADATA: "member", CONNECT_GROUP_UNITS: "connect",
         CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA: "connect", CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER: "connect",
         CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT: "connect", KCOORD_SCRAM_CREDENTIAL: "scram", KCOORD_ACL: "acl"}


def tally(rec: Record) -> tuple[int, int]:
    """(groups, members) a record stands for, for load and check counts."""
    if rec.type == GROUP_METADATA:
        return 1, len(rec.value.members)
    if rec.type in (CONSUMER_GROUP_METADATA, CONNECT_GROUP_METADATA):
        return 1, 0
    if rec.type in (CONSUMER_GROUP_MEMBER_METADATA, CONNECT_GROUP_MEMBER_METADATA):
        return 0, 1
    return 0, 0


def decode(key: bytes, value: bytes) -> Record:
    """Decode a stored key and value; a RecordError says which record is wrong and how."""
    try:
        rtype = record_type(key)
        if rtype == GROUP_METADATA:
            gk = wire.GroupMetadataKey.decode(memoryview(key)[2:], rtype)
            gv = wire.GroupMetadataValue.decode(memoryview(value)[2:], _value_version(value, 4))
            return Record(rtype, gk.group, gk, gv)
        if rtype in (OFFSET_COMMIT_V0, OFFSET_COMMIT):
            ok = wire.OffsetCommitKey.decode(memoryview(key)[2:], rtype)
            ov = wire.OffsetCommitValue.decode(memoryview(value)[2:], _value_version(value, 4))
            return Record(rtype, ok.group, ok, ov)
        if rtype in CONSUMER_RECORDS:
            key_cls, value_cls = CONSUMER_RECORDS[rtype]
            k = key_cls.decode(memoryview(key)[2:], rtype)
            v = value_cls.decode(memoryview(value)[2:], _value_version(value, 0))
            return Record(rtype, k.group_id, k, v)
        if rtype in CONNECT_RECORDS:
            key_cls, value_cls = CONNECT_RECORDS[rtype]
            k = key_cls.decode(memoryview(key)[2:], 0)
            v = value_cls.decode(memoryview(value)[2:], _value_version(value, 0))
            return Record(rtype, k.group_id, k, v)
        if rtype == KCOORD_TOPIC:
            version, topic_id, partitions = _TOPIC_VALUE.unpack(value)
            name = key[2:].decode()
            if version != 0 or partitions < 1 or not name:
                raise ValueError(f"bad topic value (version {version}, {partitions} partitions)")
            return Record(rtype, None, name, TopicRecord(name, topic_id, partitions))
        if rtype == KCOORD_ACL:
            acl = _acl(key, value)
            return Record(rtype, None, acl, acl)
        if rtype == KCOORD_SCRAM_CREDENTIAL:
            cred = _scram_credential(key, value)
            return Record(rtype, None, (cred.user, cred.mechanism), cred)
        raise ValueError(f"unknown record type {rtype}")
    except (wire.DecodeError, ValueError, struct.error, UnicodeDecodeError) as e:
        raise RecordError(f"record with key {key[:64].hex()} cannot be read: {e}") from None


def problem(rec: Record) -> str | None:
    """What makes a decoded record inconsistent on its own (beyond its bytes), or None."""
    if rec.type == GROUP_METADATA:
        issue = group_metadata_problem(rec.value)
        return f"group {rec.group!r}: {issue}" if issue else None
    return None


def _value_version(value: bytes, highest: int) -> int:
    version = _I16.unpack_from(value)[0]
    if not 0 <= version <= highest:
        raise ValueError(f"unknown value version {version}")
    return version
