"""kcoord's own message definitions against Apache Kafka's official JSON schemas, field by field.

Every definition is compared, version by version, with `../shared/kafka-schemas` (Kafka at 4.0.0-SNAPSHOT):
field names, types (struct names included), presence, nullability, defaults, tags and compact encoding, plus
the message's API key, valid and flexible versions, and each field's ignorable flag. Versions that Kafka added
later (DescribeGroups v6, OffsetCommit/OffsetFetch v10, Metadata v13, and Produce, which the shared set lacks)
are checked the same way against Kafka's own JSON files as bundled by kafka-python 3.0.12. ConsumerGroupDescribe v1
(Kafka 4.0), which neither set has, is checked against the shared v0 schema with Kafka's v1 change applied to it
(LATER below: the change as apache/kafka#17958 describes it, the field's place as franz-go's definition has it).

kcoord's own messages (connect groups, kcoord.protocol.KCOORD_OWN) have no Kafka schema: they are checked instead
to share neither a name nor an API key with any Kafka message (test_kcoord_own_messages_collide_with_nothing).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kcoord.protocol import BY_NAME, KCOORD_OWN, MESSAGES
from kcoord.protocol.dsl import INT_TYPES, Field, Message, Versions

MISSING = object()

# The list; each must be defined, and covered by the comparison below.
CLAIMED = {
    "RequestHeader", "ResponseHeader",
    *(f"{api}{kind}" for api in (
        "ApiVersions", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
        "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetCommit", "OffsetFetch", "OffsetDelete",
        "ListOffsets", "Fetch", "Produce", "CreateTopics", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
        "SaslHandshake", "SaslAuthenticate", "DescribeUserScramCredentials", "AlterUserScramCredentials",
        "DescribeAcls", "CreateAcls", "DeleteAcls",
    ) for kind in ("Request", "Response")),
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
    "GroupMetadataKey", "GroupMetadataValue", "OffsetCommitKey", "OffsetCommitValue",
    *(f"ConsumerGroup{r}{kv}" for r in ("Metadata", "PartitionMetadata", "MemberMetadata",
                                         "TargetAssignmentMetadata", "TargetAssignmentMember",
                                         "CurrentMemberAssignment") for kv in ("Key", "Value")),
}
# Versions the project deliberately does not implement (Fetch v0-3 use the pre-KIP-98 message format).
NOT_IMPLEMENTED_BELOW = {"FetchRequest": 4, "FetchResponse": 4}


def load(path: Path) -> dict:
    return json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def kafka_python_schemas() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.origin, "kafka-python (a test dependency) is not installed"
    return Path(spec.origin).parent / "protocol" / "schemas" / "resources"


def their_default(ftype: str, raw):
    if raw is MISSING:
        return MISSING
    if raw == "null" or raw is None:
        return None
    t = ftype
    if t in INT_TYPES:
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if t == "bool":
        return raw in ("true", True)
    if t == "float64":
        return float(raw)
    return raw


def their_fields_at(fields: list[dict], v: int, flexible: bool, common: dict[str, dict]) -> list[tuple]:
    out = []
    for f in fields:
        if v not in Versions.parse(f["versions"]):
            continue
        t = f["type"]
        base = t[2:] if t.startswith("[]") else t
        sub = f.get("fields")
        if sub is None and base in common:
            sub = common[base]["fields"]
        tagged = "tag" in f and v in Versions.parse(f.get("taggedVersions", "none"))
        fv = f.get("flexibleVersions")
        compact = flexible if fv is None else v in Versions.parse(fv)
        out.append((
            snake(f["name"]), t,
            v in Versions.parse(f.get("nullableVersions", "none")),
            int(f["tag"]) if tagged else None,
            their_default(base, f.get("default", MISSING)),
            compact,
            their_fields_at(sub, v, flexible, common) if sub is not None else None,
        ))
    return out


def our_fields_at(fields: tuple[Field, ...], v: int, flexible: bool) -> list[tuple]:
    out = []
    for f in fields:
        if not f.present(v):
            continue
        compact = flexible if f.flexible is None else v in f.flexible
        out.append((
            f.name, f.type, f.is_nullable(v), f.tag if f.is_tagged(v) else None,
            f.default if f.has_explicit_default else MISSING,
            compact,
            our_fields_at(f.struct.fields, v, flexible) if f.struct is not None else None,
        ))
    return out


def their_ignorable(fields: list[dict], common: dict, prefix="") -> dict[str, bool]:
    out = {}
    for f in fields:
        key = prefix + snake(f["name"])
        out[key] = bool(f.get("ignorable", False))
        t = f["type"]
        base = t[2:] if t.startswith("[]") else t
        sub = f.get("fields") or (common[base]["fields"] if base in common else None)
        if sub:
            out.update(their_ignorable(sub, common, key + "."))
    return out


def our_ignorable(fields: tuple[Field, ...], prefix="") -> dict[str, bool]:
    out = {}
    for f in fields:
        key = prefix + f.name
        out[key] = f.ignorable
        if f.struct is not None:
            out.update(our_ignorable(f.struct.fields, key + "."))
    return out


def _describe_v1(schema: dict, member_type: bool) -> dict:
    out = json.loads(json.dumps(schema))
    out["validVersions"] = "0-1"
    if member_type:
        groups = next(f for f in out["fields"] if f["name"] == "Groups")
        members = next(f for f in groups["fields"] if f["name"] == "Members")
        members["fields"].append({"name": "MemberType", "type": "int8", "versions": "1+", "default": "-1",
                                  "ignorable": True})
    return out


# Later versions neither schema set has: (label, the shared schema -> Kafka's schema at that version).
# ConsumerGroupDescribe v1 (KAFKA-17750, apache/kafka#17958, KIP-1099): both messages go to "0-1"; each member of
# the response gains MemberType int8, default -1, after TargetAssignment. Ignorable: Kafka's
# ConsumerGroupMember.asConsumerGroupDescribeMember sets it whatever version was asked, and v0 clients
# (librdkafka) are answered, so the v0 encoding must drop it.
LATER = {
    "ConsumerGroupDescribeRequest": ("kafka 4.0 (KAFKA-17750) from shared v0", lambda s: _describe_v1(s, False)),
    "ConsumerGroupDescribeResponse": ("kafka 4.0 (KAFKA-17750) from shared v0", lambda s: _describe_v1(s, True)),
}


def sources(msg: Message, shared: Path) -> list[tuple[str, dict]]:
    found = []
    for label, root in (("shared", shared), ("kafka 4.x via kafka-python", kafka_python_schemas())):
        p = root / f"{msg.name}.json"
        if p.exists():
            found.append((label, load(p)))
    if msg.name in LATER:
        label, later = LATER[msg.name]
        found.append((label, later(load(shared / f"{msg.name}.json"))))
    return found


def compare(msg: Message, label: str, schema: dict, versions: range) -> None:
    common = {c["name"]: c for c in schema.get("commonStructs", [])}
    flex = Versions.parse(schema["flexibleVersions"])
    for v in versions:
        theirs = their_fields_at(schema["fields"], v, v in flex, common)
        ours = our_fields_at(msg.fields, v, msg.is_flexible(v))
        assert ours == theirs, f"{msg.name} v{v} differs from {label}"
        assert msg.is_flexible(v) == (v in flex), f"{msg.name} v{v}: flexible differs from {label}"


KAFKA_MESSAGES = [m for m in MESSAGES if m.name not in KCOORD_OWN]
OWN_MESSAGES = [m for m in MESSAGES if m.name in KCOORD_OWN]
# Kafka's API keys beyond the schema copies: trunk reaches 92 (DeleteShareGroupOffsets) and a KIP-1312 PR claims 94
# (docs/connect-protocol.md D1); anything below 1000 is left to Kafka.
KAFKA_KEY_RANGE = range(0, 1000)


def test_kcoord_own_messages_collide_with_nothing(schemas_dir: Path) -> None:
    assert {m.name for m in OWN_MESSAGES} == set(KCOORD_OWN) and len(OWN_MESSAGES) >= 20
    kafka_names, kafka_keys = set(), set()
    for root in (schemas_dir, kafka_python_schemas()):
        for p in root.glob("*.json"):
            schema = load(p)
            kafka_names.add(schema["name"])
            if "apiKey" in schema:
                kafka_keys.add(schema["apiKey"])
    assert kafka_keys and max(kafka_keys) < 1000
    for msg in OWN_MESSAGES:
        assert msg.name not in kafka_names, f"{msg.name} is a Kafka message name"
        if msg.kind in ("request", "response"):
            assert msg.api_key not in kafka_keys and msg.api_key not in KAFKA_KEY_RANGE, msg.name
    # and the comparison below does not skip any message that is Kafka's
    assert not [m for m in KAFKA_MESSAGES if m.name.startswith("Connect")]


@pytest.mark.parametrize("msg", KAFKA_MESSAGES, ids=[m.name for m in KAFKA_MESSAGES])
def test_definition_matches_kafka_schema(msg: Message, schemas_dir: Path) -> None:
    found = sources(msg, schemas_dir)
    assert found, f"no official schema for {msg.name}"
    covered: set[int] = set()
    for label, schema in found:
        assert schema["name"] == msg.name
        kind = schema["type"]
        assert msg.kind == kind, f"{msg.name}: kind {msg.kind} vs {kind}"
        if msg.kind in ("request", "response"):
            assert msg.api_key == schema["apiKey"]
        valid = Versions.parse(schema["validVersions"])
        lo = max(valid.lo, msg.valid.lo)
        hi = min(valid.hi, msg.valid.hi)
        if label == "shared":
            assert msg.valid.lo == max(valid.lo, NOT_IMPLEMENTED_BELOW.get(msg.name, 0)), msg.name
            assert msg.valid.hi >= valid.hi, f"{msg.name}: shared schema has versions up to {valid.hi}"
        compare(msg, label, schema, range(lo, hi + 1))
        covered.update(range(lo, hi + 1))
    assert covered == set(msg.versions), f"{msg.name}: versions {set(msg.versions) - covered} unchecked"
    # ignorable is a property of the definition as of our newest version (Kafka made some fields ignorable
    # as it moved on): compare with the oldest source that already has that version.
    label, newest = min((s for s in found if Versions.parse(s[1]["validVersions"]).hi >= msg.valid.hi),
                        key=lambda s: Versions.parse(s[1]["validVersions"]).hi)
    common = {c["name"]: c for c in newest.get("commonStructs", [])}
    assert our_ignorable(msg.fields) == their_ignorable(newest["fields"], common), f"{msg.name} vs {label}"


def test_every_claimed_message_is_defined() -> None:
    assert CLAIMED <= set(BY_NAME), sorted(CLAIMED - set(BY_NAME))


def test_kafka_4_versions_are_defined() -> None:
    assert BY_NAME["DescribeGroupsRequest"].valid.hi == 6
    assert BY_NAME["OffsetCommitRequest"].valid.hi == 10
    assert BY_NAME["OffsetFetchRequest"].valid.hi == 10
    assert BY_NAME["MetadataResponse"].valid.hi == 13
    assert BY_NAME["ConsumerGroupDescribeResponse"].valid.hi == 1


def test_comparison_catches_a_wrong_definition(schemas_dir: Path) -> None:
    # The comparison itself must be able to fail: a definition with one nullability changed is caught.
    import dataclasses

    msg = BY_NAME["JoinGroupRequest"]
    fields = list(msg.fields)
    i = next(i for i, f in enumerate(fields) if f.name == "group_instance_id")
    fields[i] = dataclasses.replace(fields[i], nullable=Versions.parse("none"))
    broken = dataclasses.replace(msg, fields=tuple(fields))
    schema = load(schemas_dir / "JoinGroupRequest.json")
    with pytest.raises(AssertionError, match="v5 differs"):
        compare(broken, "shared", schema, range(0, 10))
