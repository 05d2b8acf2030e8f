"""The broker APIs real consumers need around the group protocol (what librdkafka, the Java client, kafka-python
and aiokafka ask a broker for before and beside their group requests).

kcoord is the only broker of its cluster and the leader of every partition; it stores no records, so Fetch
answers empty (held for the client's max_wait_ms, as a broker with nothing to send does), ListOffsets answers
0 for a log's start and end and -1 (no record) for a timestamp, as Kafka does for an empty log, and Produce is
advertised (librdkafka requires it) but refused with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import errors as E
from . import wire
from .coordinator import Coordinator
from .reply import Reply
from .topics import PartitionLimitError, TopicCatalogue, TopicError, validate_name

MAX_FETCH_WAIT_MS = 30_000
NO_RECORDS = "kcoord is a group coordinator and stores no records"
LOG_BOUNDS = (-2, -1, -4)  # ListOffsets: EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP


class Broker:
    def __init__(self, coordinator: Coordinator, topics: TopicCatalogue, *, node_id: int, host: str, port: int,
                 cluster_id: str = "kcoord", later: Callable[[float, Callable[[], None]], object] | None = None,
                 served: Callable[[], set[int]] | None = None, key_map=None) -> None:
        self.coordinator = coordinator
        self.topics = topics
        self.node_id = node_id
        self.host = host
        self.port = port
        self.cluster_id = cluster_id
        self.later = later  # (delay seconds, fn): how a held Fetch is answered later (the event loop's)
        self.served = served
        self.key_map = key_map  # kcoord.server.PrivateKeys when the connect API keys are moved, else None
        self.cluster: Any = None  # kcoord.cluster.Cluster when nodes share a PostgreSQL store: who coordinates what
        # The advertised address of each listener by name, and the listener of the request being handled (set by the
        # connection before each request): Metadata and FindCoordinator answer with that listener's address.
        self.addresses: dict[str, tuple[str, int]] = {}
        self.listener: str | None = None
        self.handlers = {wire.ApiVersionsRequest.API_KEY: self.api_versions, wire.MetadataRequest.API_KEY: self.metadata,
                         wire.FindCoordinatorRequest.API_KEY: self.find_coordinator,
                         wire.ListOffsetsRequest.API_KEY: self.list_offsets, wire.FetchRequest.API_KEY: self.fetch,
                         wire.ProduceRequest.API_KEY: self.produce, wire.CreateTopicsRequest.API_KEY: self.create_topics,
                         wire.CreatePartitionsRequest.API_KEY: self.create_partitions,
                         wire.DeleteTopicsRequest.API_KEY: self.delete_topics}

    # ---- ApiVersions -----------------------------------------------------------------------------

    def advertised(self) -> list[wire.ApiVersionsResponseApiVersion]:
        keys = self.served() if self.served is not None else set(self.handlers)
        moved = self.key_map.advertised if self.key_map is not None else int
        return [wire.ApiVersionsResponseApiVersion(api_key=moved(k), min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(wire.API_VERSIONS.items()) if k in keys]

    def api_versions(self, req, version, client_id="", client_host=""):
        return wire.ApiVersionsResponse(error_code=E.NONE, api_keys=self.advertised())

    def unsupported_api_versions(self) -> wire.ApiVersionsResponse:
        return wire.ApiVersionsResponse(error_code=E.UNSUPPORTED_VERSION, api_keys=self.advertised())

    # ---- Metadata --------------------------------------------------------------------------------

    def partitions(self, n: int, nodes: list[int]) -> list[wire.MetadataResponsePartition]:
        """A topic's partitions, led by the nodes in turn (every node answers Fetch alike: nothing is stored)."""
        return [wire.MetadataResponsePartition(error_code=E.NONE, partition_index=p, leader_id=(lead := nodes[p % len(nodes)]),
                                               leader_epoch=0, replica_nodes=[lead], isr_nodes=[lead], offline_replicas=[])
                for p in range(n)]

    def address(self) -> tuple[str, int]:
        """This node's address as the listener of the request in hand advertises it."""
        return self.addresses.get(self.listener, (self.host, self.port))  # type: ignore[arg-type]

    def brokers(self) -> list[wire.MetadataResponseBroker]:
        if self.cluster is None:
            host, port = self.address()
            return [wire.MetadataResponseBroker(node_id=self.node_id, host=host, port=port)]
        out = []
        for n in self.cluster.brokers():  # each node at its address on this request's listener (none: left out)
            address = n.address(self.listener)
            if address is not None:
                out.append(wire.MetadataResponseBroker(node_id=n.node_id, host=address[0], port=address[1]))
        return out

    def metadata(self, req: wire.MetadataRequest, version, client_id="", client_host=""):
        cat = self.topics
        wanted: list[tuple[str | None, bytes | None]]
        if req.topics is None or (version == 0 and not req.topics):
            wanted = [(t.name, None) for t in cat.by_name.values()]
        else:
            wanted = list(dict.fromkeys((t.name, t.topic_id) for t in req.topics))  # each once, as Kafka answers
        allow_create = version < 4 or req.allow_auto_topic_creation
        out = []
        brokers = self.brokers()
        nodes = [b.node_id for b in brokers]
        for name, topic_id in wanted:
            t = cat.get(name) if name is not None else cat.by_id.get(topic_id) if topic_id is not None else None
            if t is None and name is not None and allow_create and cat.auto_create:
                try:
                    t = cat.create(name, cat.default_partitions)
                except TopicError as e:
                    code = E.INVALID_PARTITIONS if isinstance(e, PartitionLimitError) else E.INVALID_TOPIC_EXCEPTION
                    out.append(wire.MetadataResponseTopic(error_code=code, name=name))
                    continue
            if t is None:
                code = E.UNKNOWN_TOPIC_OR_PARTITION if name is not None else E.UNKNOWN_TOPIC_ID
                if name is None and version < 12:
                    name = ""  # a null name is an answer from v12 only
                out.append(wire.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id or wire.ZERO_UUID))
                continue
            out.append(wire.MetadataResponseTopic(error_code=E.NONE, name=t.name, topic_id=t.topic_id,
                                                  is_internal=False, partitions=self.partitions(t.partitions, nodes)))
        return wire.MetadataResponse(brokers=brokers, cluster_id=self.cluster_id, controller_id=nodes[0], topics=out)

    # ---- FindCoordinator -------------------------------------------------------------------------

    def find_coordinator(self, req: wire.FindCoordinatorRequest, version, client_id="", client_host=""):
        # Key type 0 is a group: this node owns every group, or in a cluster the node holding the group's
        # partition does. Transactions (1) are not coordinated here.
        def answer(key_type: int, key: str) -> tuple[int, str | None, int, str, int]:
            if key_type != 0:
                return E.COORDINATOR_NOT_AVAILABLE, "kcoord coordinates groups only", -1, "", -1
            if self.cluster is None:
                return E.NONE, None, self.node_id, *self.address()
            node = self.cluster.coordinator(key)
            address = node.address(self.listener) if node is not None else None
            if address is None:
                return E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
            return E.NONE, None, node.node_id, *address

        if version <= 3:
            err, msg, node_id, host, port = answer(req.key_type, req.key)
            return wire.FindCoordinatorResponse(error_code=err, error_message=msg, node_id=node_id, host=host, port=port)
        coords = []
        for key in req.coordinator_keys:
            err, msg, node_id, host, port = answer(req.key_type, key)
            coords.append(wire.FindCoordinatorResponseCoordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=err, error_message=msg))
        return wire.FindCoordinatorResponse(coordinators=coords)

    # ---- ListOffsets / Fetch / Produce -----------------------------------------------------------

    def list_offsets(self, req: wire.ListOffsetsRequest, version, client_id="", client_host=""):
        topics = []
        for t in req.topics:
            known = t.name in self.topics
            count = self.topics.get(t.name).partitions if known else 0  # type: ignore[union-attr]  # (known: it is)
            parts = []
            for p in t.partitions:
                err = E.NONE if known and 0 <= p.partition_index < count else E.UNKNOWN_TOPIC_OR_PARTITION
                ok = err == E.NONE
                # Every log is empty: its start and end (earliest -2, latest -1, earliest local -4) are 0, and no
                # record answers a timestamp (or -3, the largest timestamp; -5, the last tiered offset), for which
                # Kafka answers offset -1 and timestamp -1 (a Java consumer's offsetsForTimes refuses offset 0
                # with timestamp -1: "Invalid negative timestamp").
                found = ok and version >= 1 and p.timestamp in LOG_BOUNDS
                parts.append(wire.ListOffsetsResponseListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=err,
                    old_style_offsets=[0] if version == 0 and ok else [], timestamp=-1,
                    offset=0 if found else -1,  # v0 carries old_style_offsets only
                    leader_epoch=0 if found and version >= 4 else -1))
            topics.append(wire.ListOffsetsResponseListOffsetsTopicResponse(name=t.name, partitions=parts))
        return wire.ListOffsetsResponse(topics=topics)

    def fetch(self, req: wire.FetchRequest, version, client_id="", client_host=""):
        by_id = version >= 13
        responses = []
        for t in req.topics:
            topic = self.topics.by_id.get(t.topic_id) if by_id else self.topics.get(t.topic)
            parts = []
            for p in t.partitions:
                if topic is None:
                    err = E.UNKNOWN_TOPIC_ID if by_id else E.UNKNOWN_TOPIC_OR_PARTITION
                elif not 0 <= p.partition < topic.partitions:
                    err = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    err = E.NONE
                # Nothing is ever stored: the log ends where the consumer is, so it neither resets nor spins.
                end = max(p.fetch_offset, 0)
                parts.append(wire.FetchResponsePartitionData(
                    partition_index=p.partition, error_code=err, high_watermark=end, last_stable_offset=end,
                    log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1, records=b""))
            responses.append(wire.FetchResponseFetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                                                      partitions=parts))
        response = wire.FetchResponse(error_code=E.NONE, session_id=0, responses=responses)
        wait = min(max(req.max_wait_ms, 0), MAX_FETCH_WAIT_MS)
        if wait == 0 or self.later is None:
            return response
        reply = Reply(version=version)

        def answer() -> None:
            if not reply.done:
                reply.resolve(response)

        self.later(wait / 1000, answer)
        return reply

    def produce(self, req: wire.ProduceRequest, version, client_id="", client_host=""):
        if req.acks == 0:
            return None  # acks=0: Kafka sends no response at all
        return wire.ProduceResponse(responses=[wire.ProduceResponseTopicProduceResponse(
            name=t.name, partition_responses=[wire.ProduceResponsePartitionProduceResponse(
                index=p.index, error_code=E.INVALID_REQUEST, base_offset=-1, error_message=NO_RECORDS)
                for p in t.partition_data]) for t in req.topic_data])

    # ---- CreateTopics ----------------------------------------------------------------------------

    def create_topics(self, req: wire.CreateTopicsRequest, version, client_id="", client_host=""):
        results = []
        for t in req.topics:
            n = t.num_partitions if t.num_partitions != -1 else self.topics.default_partitions
            err, msg, tid = E.NONE, None, wire.ZERO_UUID
            if t.name in self.topics:
                err, msg = E.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
            elif n < 1:
                err, msg = E.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            else:
                try:
                    if req.validate_only:
                        validate_name(t.name)
                        self.topics.check_partitions(t.name, n, 0)
                    else:
                        tid = self.topics.create(t.name, n).topic_id
                except PartitionLimitError as e:
                    err, msg = E.INVALID_PARTITIONS, str(e)
                except TopicError as e:
                    err, msg = E.INVALID_TOPIC_EXCEPTION, str(e)
            results.append(wire.CreateTopicsResponseCreatableTopicResult(
                name=t.name, topic_id=tid, error_code=err, error_message=msg,
                num_partitions=n if err == E.NONE else -1, replication_factor=1 if err == E.NONE else -1,
                configs=[] if err == E.NONE else None))
        return wire.CreateTopicsResponse(topics=results)

    # ---- CreatePartitions ------------------------------------------------------------------------

    def create_partitions(self, req: wire.CreatePartitionsRequest, version, client_id="", client_host=""):
        """Grow topics: consumer group leaders see the new count in Metadata and rebalance."""
        results = []
        for t in req.topics:
            topic = self.topics.get(t.name)
            err, msg = E.NONE, None
            if topic is None:
                err, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist."
            elif t.count <= topic.partitions:
                err, msg = E.INVALID_PARTITIONS, (f"Topic currently has {topic.partitions} partitions, which is higher "
                                                f"than or equal to the requested {t.count}.")
            elif t.assignments is not None and len(t.assignments) != t.count - topic.partitions:
                err, msg = E.INVALID_REQUEST, "one replica assignment per new partition is expected"
            else:
                try:
                    if req.validate_only:
                        self.topics.check_partitions(t.name, t.count, topic.partitions)
                    else:
                        self.topics.grow(t.name, t.count)
                except PartitionLimitError as e:
                    err, msg = E.INVALID_PARTITIONS, str(e)
            results.append(wire.CreatePartitionsResponseCreatePartitionsTopicResult(
                name=t.name, error_code=err, error_message=msg))
        return wire.CreatePartitionsResponse(results=results)

    # ---- DeleteTopics ----------------------------------------------------------------------------

    def delete_topics(self, req: wire.DeleteTopicsRequest, version, client_id="", client_host=""):
        """Delete topics by name (v0-5) or by name or id (v6). Each group's committed offsets of a deleted topic go
        with it, as in Kafka; consumer groups see the topic gone at their next heartbeat and revoke it."""
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, wire.ZERO_UUID) for name in req.topic_names]
        results = []
        for name, topic_id in wanted:
            t = self.topics.get(name) if name is not None else self.topics.by_id.get(topic_id)
            if t is not None and name is not None and topic_id != wire.ZERO_UUID and t.topic_id != topic_id:
                t = None  # both given and they disagree
            if t is None:
                code = E.UNKNOWN_TOPIC_OR_PARTITION if name is not None else E.UNKNOWN_TOPIC_ID
                results.append(wire.DeleteTopicsResponseDeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=code,
                    error_message="This server does not host this topic ID." if name is None else
                    "This server does not host this topic-partition."))
                continue
            self.topics.delete(t.name)
            self.coordinator.offsets.forget_topic(t.name)
            results.append(wire.DeleteTopicsResponseDeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=E.NONE, error_message=None))
        return wire.DeleteTopicsResponse(responses=results)
