"""Authorization of the broker's topic APIs (Metadata, ListOffsets, Fetch, Produce, CreateTopics, DeleteTopics,
CreatePartitions), as Kafka's KafkaApis and ControllerApis check each one; the group APIs' gates are in
kcoord.security.gates, whose `Gates.table()` takes these from `topic_table`.

Each gate is `(handler, req, version, client_id, client_host) -> response`: it hands the handler the part of the
request the principal may make and puts the refused part back where Kafka puts it. A refusal that makes an error
is logged and counted by `Gates.allowed`; what Kafka filters silently (Metadata of all topics listing only what
the caller may describe; the CLUSTER checks that, when they fail, fall back to a per-topic check) is not. Nothing
is revealed of a topic the caller may not describe: it is refused before anything looks for it, so a denied
existing topic and a denied missing one are answered alike.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from .. import errors as E
from .. import wire
from ..events import REQUEST_PRINCIPAL
from ..reply import then
from .authorizer import (
    ALTER,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    TOPIC,
    WRITE,
)
from .tls import ANONYMOUS

TRANSACTIONAL_ID = 5
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INT32_MIN = -(2**31)
ZERO_UUID = wire.ZERO_UUID
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft's log: CreateTopics refuses it before any check
TOPIC_DENIED = "Topic authorization failed."  # Errors.java's default message (ApiError(TOPIC_AUTHORIZATION_FAILED))
TRANSACTIONAL_ID_DENIED = "Transactional Id authorization failed."
TRANSACTIONAL_BIT = 0x10  # a record batch's attributes: the batch is part of a transaction


def principal() -> str:
    """The principal of the request being handled (the server sets it around each one)."""
    return REQUEST_PRINCIPAL[0] or ANONYMOUS


def peer_address(client_host: str) -> str:
    """The host an ACL names: the peer's address (the server's client_host is "/address", as Kafka logs it)."""
    return client_host[1:] if client_host.startswith("/") else client_host


def topic_table(gates: Any) -> dict[int, Callable]:
    """The topic APIs' gates by API key, deciding with `gates` (a kcoord.security.gates.Gates: `allowed`,
    `cluster`, `topic_names`, `name_of`, `authorizer`, `topics`)."""
    t = TopicGates(gates)
    w = wire
    return {
        w.MetadataRequest.API_KEY: t.metadata,
        w.ListOffsetsRequest.API_KEY: t.list_offsets,
        w.FetchRequest.API_KEY: t.fetch,
        w.ProduceRequest.API_KEY: t.produce,
        w.CreateTopicsRequest.API_KEY: t.create_topics,
        w.DeleteTopicsRequest.API_KEY: t.delete_topics,
        w.CreatePartitionsRequest.API_KEY: t.create_partitions,
    }


class TopicGates:
    def __init__(self, gates: Any) -> None:
        self.gates = gates

    # ---- Metadata: TOPIC DESCRIBE per topic, CREATE to auto-create, the authorized-operations fields --------------

    def metadata(self, handler, req, version, client_id, client_host):
        g = self.gates
        host = peer_address(client_host)
        who = principal()
        bitfield = g.authorizer.operations_bitfield
        topic_ops = version >= 8 and req.include_topic_authorized_operations
        cluster_ops: int | None = None
        if 8 <= version <= 10 and req.include_cluster_authorized_operations:
            cluster_ops = (bitfield(who, host, CLUSTER, CLUSTER_NAME) if g.cluster("Metadata", DESCRIBE, host)
                           else 0)
        no_create: list = []  # describable, missing, and may not be created: 29 with topic id 0
        no_describe: list = []  # 29, decided before anything looks for the topic
        every = req.topics is None or (version == 0 and not req.topics)
        if not every:
            cat = g.topics
            creating = (version < 4 or req.allow_auto_topic_creation) and cat.auto_create
            may_create: bool | None = None  # CLUSTER CREATE, checked once when first needed
            wanted: dict = {}
            for t in req.topics:  # each once, as the handler answers
                wanted.setdefault((t.name, t.topic_id), t)
            kept = []
            for t in wanted.values():
                name = t.name
                if name is None:  # by topic id: an unknown id is the handler's (100)
                    name = g.name_of(t.topic_id)
                    if name is not None and not g.allowed("Metadata", DESCRIBE, TOPIC, name, host):
                        # the id echoed, the name null (v12+; "" before, where the name may not be null)
                        no_describe.append(_metadata_denied(None if version >= 12 else "", t.topic_id))
                        continue
                elif not g.allowed("Metadata", DESCRIBE, TOPIC, name, host):
                    no_describe.append(_metadata_denied(name, ZERO_UUID))
                    continue
                elif creating and name not in cat:
                    if may_create is None:
                        may_create = g.cluster("Metadata", CREATE, host, audit=False)
                    if not may_create and not g.allowed("Metadata", CREATE, TOPIC, name, host):
                        no_create.append(_metadata_denied(name, ZERO_UUID))
                        continue
                kept.append(t)
            req.topics = kept
            if not kept:
                version = max(version, 1)  # no topic left: at v0 an empty list would ask for every topic

        def finish(resp):
            if every:  # those the caller may not describe are left out, silently
                resp.topics = [t for t in resp.topics
                               if g.allowed("Metadata", DESCRIBE, TOPIC, t.name, host, audit=False)]
            unknown = [t for t in resp.topics if t.error_code == E.UNKNOWN_TOPIC_ID]
            found = [t for t in resp.topics if t.error_code != E.UNKNOWN_TOPIC_ID]
            if topic_ops:
                for t in found:
                    t.topic_authorized_operations = bitfield(who, host, TOPIC, t.name)
            resp.topics = [*unknown, *found, *no_create, *no_describe]  # KafkaApis' order
            if cluster_ops is not None:
                resp.cluster_authorized_operations = cluster_ops
            return resp
        return then(handler(req, version, client_id, client_host), finish)

    # ---- ListOffsets: TOPIC DESCRIBE ----------------------------------------------------------------------------

    def list_offsets(self, handler, req, version, client_id, client_host):
        denied = self.gates.topic_names("ListOffsets", DESCRIBE, [t.name for t in req.topics], peer_address(client_host))
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = [wire.ListOffsetsResponseListOffsetsTopicResponse(name=t.name, partitions=[
            wire.ListOffsetsResponseListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED, old_style_offsets=[],
                timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions])
            for t in req.topics if t.name in denied]
        req.topics = [t for t in req.topics if t.name not in denied]
        if not req.topics:
            return wire.ListOffsetsResponse(topics=refused)

        def merge(resp):
            resp.topics = [*resp.topics, *refused]  # after the authorized ones, as KafkaApis
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- Fetch: TOPIC READ for a consumer, CLUSTER CLUSTER_ACTION for a follower ----------------------------------

    def fetch(self, handler, req, version, client_id, client_host):
        g = self.gates
        host = peer_address(client_host)
        by_id = version >= 13
        replica = req.replica_state.replica_id if version >= 15 else req.replica_id
        if replica >= 0:  # a follower's fetch
            if g.cluster("Fetch", CLUSTER_ACTION, host):
                return handler(req, version, client_id, client_host)
            return wire.FetchResponse(error_code=E.NONE, session_id=0, responses=_fetch_denied(req.topics))
        names = [g.name_of(t.topic_id) if by_id else t.topic for t in req.topics]
        denied = g.topic_names("Fetch", READ, [n for n in names if n is not None], host)
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = _fetch_denied([t for t, n in zip(req.topics, names) if n in denied])
        req.topics = [t for t, n in zip(req.topics, names) if n not in denied]
        if not req.topics:  # nothing to wait for: answered at once, as KafkaApis does
            return wire.FetchResponse(error_code=E.NONE, session_id=0, responses=refused)

        def merge(resp):
            resp.responses = [*resp.responses, *refused]  # the erroneous partitions come last in KafkaApis
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- Produce: TRANSACTIONAL_ID WRITE for transactional records, TOPIC WRITE -------------------------------

    def produce(self, handler, req, version, client_id, client_host):
        g = self.gates
        host = peer_address(client_host)
        if _transactional(req) and (req.transactional_id is None or not g.allowed(
                "Produce", WRITE, TRANSACTIONAL_ID, req.transactional_id, host)):
            if req.acks == 0:
                return None  # ProduceRequest.getErrorResponse: no response for acks=0
            return wire.ProduceResponse(responses=[
                _produce_topic(t, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_DENIED)
                for t in req.topic_data])
        denied = g.topic_names("Produce", WRITE, [t.name for t in req.topic_data], host)
        if not denied:
            return handler(req, version, client_id, client_host)
        refused = [_produce_topic(t, E.TOPIC_AUTHORIZATION_FAILED, None) for t in req.topic_data if t.name in denied]
        req.topic_data = [t for t in req.topic_data if t.name not in denied]
        if req.acks == 0:
            return handler(req, version, client_id, client_host) if req.topic_data else None
        if not req.topic_data:
            return wire.ProduceResponse(responses=refused)

        def merge(resp):
            resp.responses = [*resp.responses, *refused]
            return resp
        return then(handler(req, version, client_id, client_host), merge)

    # ---- CreateTopics: CLUSTER CREATE, or else TOPIC CREATE per name; DESCRIBE_CONFIGS to see the configs ---------

    def create_topics(self, handler, req, version, client_id, client_host):
        g = self.gates
        host = peer_address(client_host)
        counts = Counter(t.name for t in req.topics)
        names = list(counts)
        duplicates = [n for n in names if counts[n] > 1]
        internal = [n for n in names if n == CLUSTER_METADATA_TOPIC and counts[n] == 1]
        single = [n for n in names if counts[n] == 1 and n != CLUSTER_METADATA_TOPIC]
        if g.cluster("CreateTopics", CREATE, host, audit=False):
            denied: list[str] = []
        else:
            refused = g.topic_names("CreateTopics", CREATE, single, host)
            denied = [n for n in single if n in refused]
        allowed = set(single) - set(denied)
        configs = {n for n in allowed if g.allowed("CreateTopics", DESCRIBE_CONFIGS, TOPIC, n, host, audit=False)}
        answers = [*(_created(n, E.INVALID_REQUEST, "Duplicate topic name.") for n in duplicates),
                   *(_created(n, E.INVALID_REQUEST, f"Creation of internal topic {n} is prohibited.")
                     for n in internal),
                   *(_created(n, E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.") for n in denied)]
        req.topics = [t for t in req.topics if t.name in allowed]

        def merge(resp):
            for r in resp.topics:
                if r.error_code == E.NONE and r.name not in configs:  # created, but its configs are not shown
                    r.topic_config_error_code = E.TOPIC_AUTHORIZATION_FAILED
                    r.num_partitions, r.replication_factor, r.configs = -1, -1, []
            resp.topics = [*resp.topics, *answers]  # after the handled ones, as ControllerApis.createTopics
            return resp
        if not req.topics:
            return merge(wire.CreateTopicsResponse(topics=[]))
        return then(handler(req, version, client_id, client_host), merge)

    # ---- DeleteTopics: CLUSTER DELETE, or else TOPIC DESCRIBE and DELETE; the results shuffled ------------------

    def delete_topics(self, handler, req, version, client_id, client_host):
        g = self.gates
        host = peer_address(client_host)
        entries = ([(t.name, t.topic_id, t) for t in req.topics] if version >= 6
                   else [(n, ZERO_UUID, n) for n in req.topic_names])
        answers = []

        def answer(name, topic_id, code, message):
            answers.append(wire.DeleteTopicsResponseDeletableTopicResult(name=name, topic_id=topic_id,
                                                                         error_code=code, error_message=message))
        by_name: Counter = Counter(n for n, i, _ in entries if n is not None and i == ZERO_UUID)
        by_id: Counter = Counter(i for n, i, _ in entries if n is None and i != ZERO_UUID)
        for name, tid, _ in entries:
            if name is None and tid == ZERO_UUID:
                answer(None, ZERO_UUID, E.INVALID_REQUEST, "Neither topic name nor id were specified.")
            elif name is not None and tid != ZERO_UUID:
                answer(name, tid, E.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        for name in (n for n, c in by_name.items() if c > 1):
            answer(name, ZERO_UUID, E.INVALID_REQUEST, "Duplicate topic name.")
        for tid in (i for i, c in by_id.items() if c > 1):
            answer(None, tid, E.INVALID_REQUEST, "Duplicate topic id.")
        everything = g.cluster("DeleteTopics", DELETE, host, audit=False)
        kept = []
        for name, tid, item in entries:
            if (name is None) == (tid == ZERO_UUID) or (by_name[name] if name is not None else by_id[tid]) > 1:
                continue  # answered above
            if name is None:  # by id: an unknown id is the handler's (100)
                known = g.name_of(tid)
                if known is None or everything:
                    kept.append(item)
                    continue
                describable = g.allowed("DeleteTopics", DESCRIBE, TOPIC, known, host)
                if not g.allowed("DeleteTopics", DELETE, TOPIC, known, host):
                    answer(known if describable else None, tid, E.TOPIC_AUTHORIZATION_FAILED, TOPIC_DENIED)
                    continue
                kept.append(item)
                continue
            if not everything:
                describable = g.allowed("DeleteTopics", DESCRIBE, TOPIC, name, host)
                deletable = g.allowed("DeleteTopics", DELETE, TOPIC, name, host)
                if not describable or (not deletable and name in g.topics):  # (a missing topic: the handler's 3)
                    answer(name, ZERO_UUID, E.TOPIC_AUTHORIZATION_FAILED, TOPIC_DENIED)
                    continue
            kept.append(item)
        if version >= 6:
            req.topics = kept
        else:
            req.topic_names = kept

        def merge(resp):
            results = [*resp.responses, *answers]
            random.shuffle(results)  # as ControllerApis: absent and refused topics are not told apart by position
            resp.responses = results
            return resp
        if not kept:
            return merge(wire.DeleteTopicsResponse(responses=[]))
        return then(handler(req, version, client_id, client_host), merge)

    # ---- CreatePartitions: TOPIC ALTER ----------------------------------------------------------------------------

    def create_partitions(self, handler, req, version, client_id, client_host):
        counts = Counter(t.name for t in req.topics)
        duplicates = [n for n, c in counts.items() if c > 1]
        single = [n for n, c in counts.items() if c == 1]
        refused = self.gates.topic_names("CreatePartitions", ALTER, single, peer_address(client_host))
        answers = [*(wire.CreatePartitionsResponseCreatePartitionsTopicResult(
            name=n, error_code=E.INVALID_REQUEST, error_message="Duplicate topic name.") for n in duplicates),
            *(wire.CreatePartitionsResponseCreatePartitionsTopicResult(
                name=n, error_code=E.TOPIC_AUTHORIZATION_FAILED, error_message=None) for n in single if n in refused)]
        if not answers:
            return handler(req, version, client_id, client_host)
        req.topics = [t for t in req.topics if counts[t.name] == 1 and t.name not in refused]

        def merge(resp):
            resp.results = [*answers, *resp.results]  # ControllerApis lists the refused first
            return resp
        if not req.topics:
            return merge(wire.CreatePartitionsResponse(results=[]))
        return then(handler(req, version, client_id, client_host), merge)


# ---- answers ------------------------------------------------------------------------------------------------------

def _metadata_denied(name: str | None, topic_id: bytes):
    return wire.MetadataResponseTopic(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id,
                                      is_internal=False, partitions=[])


def _fetch_denied(topics) -> list:
    return [wire.FetchResponseFetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
        wire.FetchResponsePartitionData(
            partition_index=p.partition, error_code=E.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1,
            last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[], preferred_read_replica=-1,
            records=b"") for p in t.partitions]) for t in topics]


def _produce_topic(t, code: int, message: str | None):
    return wire.ProduceResponseTopicProduceResponse(name=t.name, partition_responses=[
        wire.ProduceResponsePartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                                     log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                                                     error_message=message)
        for p in t.partition_data])


def _created(name: str, code: int, message: str):
    return wire.CreateTopicsResponseCreatableTopicResult(name=name, topic_id=ZERO_UUID, error_code=code,
                                                         error_message=message, num_partitions=-1,
                                                         replication_factor=-1, configs=[])


def _transactional(req) -> bool:
    """Whether the first record batch of any partition is transactional (RequestUtils.hasTransactionalRecords)."""
    for t in req.topic_data:
        for p in t.partition_data:
            records = p.records
            # a v2 batch: base offset 8, length 4, leader epoch 4, magic 1, crc 4, then the attributes (int16)
            if records is not None and len(records) >= 23 and records[16] >= 2 and records[22] & TRANSACTIONAL_BIT:
                return True
    return False
