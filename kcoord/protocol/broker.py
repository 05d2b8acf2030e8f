"""Broker APIs a consumer needs around the group protocol: version negotiation, metadata, offsets, fetch."""

from .dsl import Struct, array, data, f, header, request, response, struct  # noqa: F401

API_VERSIONS_REQUEST = request(18, "ApiVersions", "0-4", "3+", [
    f("client_software_name", "string", "3+", ign=True),
    f("client_software_version", "string", "3+", ign=True),
])

API_VERSIONS_RESPONSE = response(18, "ApiVersions", "0-4", "3+", [
    f("error_code", "int16"),
    array("api_keys", "ApiVersion", "0+", [
        f("api_key", "int16"),
        f("min_version", "int16"),
        f("max_version", "int16"),
    ]),
    f("throttle_time_ms", "int32", "1+", ign=True),
    array("supported_features", "SupportedFeatureKey", "3+", [
        f("name", "string", "3+"),
        f("min_version", "int16", "3+"),
        f("max_version", "int16", "3+"),
    ], ign=True, tag=0, tagged="3+"),
    f("finalized_features_epoch", "int64", "3+", default=-1, ign=True, tag=1, tagged="3+"),
    array("finalized_features", "FinalizedFeatureKey", "3+", [
        f("name", "string", "3+"),
        f("max_version_level", "int16", "3+"),
        f("min_version_level", "int16", "3+"),
    ], ign=True, tag=2, tagged="3+"),
    f("zk_migration_ready", "bool", "3+", default=False, ign=True, tag=3, tagged="3+"),
])

METADATA_REQUEST = request(3, "Metadata", "0-13", "9+", [
    array("topics", "MetadataRequestTopic", "0+", [
        f("topic_id", "uuid", "10+", ign=True),
        f("name", "string", null="10+"),
    ], null="1+"),
    f("allow_auto_topic_creation", "bool", "4+", default=True),
    f("include_cluster_authorized_operations", "bool", "8-10"),
    f("include_topic_authorized_operations", "bool", "8+"),
])

METADATA_RESPONSE = response(3, "Metadata", "0-13", "9+", [
    f("throttle_time_ms", "int32", "3+", ign=True),
    array("brokers", "MetadataResponseBroker", "0+", [
        f("node_id", "int32"),
        f("host", "string"),
        f("port", "int32"),
        f("rack", "string", "1+", null="1+", default=None, ign=True),
    ]),
    f("cluster_id", "string", "2+", null="2+", default=None, ign=True),
    f("controller_id", "int32", "1+", default=-1, ign=True),
    array("topics", "MetadataResponseTopic", "0+", [
        f("error_code", "int16"),
        f("name", "string", null="12+"),
        f("topic_id", "uuid", "10+", ign=True),
        f("is_internal", "bool", "1+", default=False, ign=True),
        array("partitions", "MetadataResponsePartition", "0+", [
            f("error_code", "int16"),
            f("partition_index", "int32"),
            f("leader_id", "int32"),
            f("leader_epoch", "int32", "7+", default=-1, ign=True),
            f("replica_nodes", "[]int32"),
            f("isr_nodes", "[]int32"),
            f("offline_replicas", "[]int32", "5+", ign=True),
        ]),
        f("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ]),
    f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),    f("error_code", "int16", "13+", ign=True),
])

FIND_COORDINATOR_REQUEST = request(10, "FindCoordinator", "0-6", "3+", [
    f("key", "string", "0-3"),
    f("key_type", "int8", "1+", default=0),
    f("coordinator_keys", "[]string", "4+"),
])

FIND_COORDINATOR_RESPONSE = response(10, "FindCoordinator", "0-6", "3+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16", "0-3"),
    f("error_message", "string", "1-3", null="1-3", ign=True),
    f("node_id", "int32", "0-3"),
    f("host", "string", "0-3"),
    f("port", "int32", "0-3"),
    array("coordinators", "Coordinator", "4+", [
        f("key", "string", "4+"),
        f("node_id", "int32", "4+"),
        f("host", "string", "4+"),
        f("port", "int32", "4+"),
        f("error_code", "int16", "4+"),
        f("error_message", "string", "4+", null="4+", ign=True),
    ]),
])

LIST_OFFSETS_REQUEST = request(2, "ListOffsets", "0-10", "6+", [
    f("replica_id", "int32"),
    f("isolation_level", "int8", "2+"),
    array("topics", "ListOffsetsTopic", "0+", [
        f("name", "string"),
        array("partitions", "ListOffsetsPartition", "0+", [
            f("partition_index", "int32"),
            f("current_leader_epoch", "int32", "4+", default=-1, ign=True),
            f("timestamp", "int64"),
            f("max_num_offsets", "int32", "0", default=1),
        ]),
    ]),
    f("timeout_ms", "int32", "10+", ign=True),
])

LIST_OFFSETS_RESPONSE = response(2, "ListOffsets", "0-10", "6+", [
    f("throttle_time_ms", "int32", "2+", ign=True),
    array("topics", "ListOffsetsTopicResponse", "0+", [
        f("name", "string"),
        array("partitions", "ListOffsetsPartitionResponse", "0+", [
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("old_style_offsets", "[]int64", "0"),
            f("timestamp", "int64", "1+", default=-1),
            f("offset", "int64", "1+", default=-1),
            f("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
])

FETCH_REQUEST = request(1, "Fetch", "4-17", "12+", [
    f("cluster_id", "string", "12+", null="12+", default=None, ign=True, tag=0, tagged="12+"),
    f("replica_id", "int32", "0-14", default=-1),
    struct("replica_state", "ReplicaState", "15+", [
        f("replica_id", "int32", "15+", default=-1),
        f("replica_epoch", "int64", "15+", default=-1),
    ], tag=1, tagged="15+"),
    f("max_wait_ms", "int32"),
    f("min_bytes", "int32"),
    f("max_bytes", "int32", "3+", default=2147483647, ign=True),
    f("isolation_level", "int8", "4+", default=0, ign=True),
    f("session_id", "int32", "7+", default=0, ign=True),
    f("session_epoch", "int32", "7+", default=-1, ign=True),
    array("topics", "FetchTopic", "0+", [
        f("topic", "string", "0-12", ign=True),
        f("topic_id", "uuid", "13+", ign=True),
        array("partitions", "FetchPartition", "0+", [
            f("partition", "int32"),
            f("current_leader_epoch", "int32", "9+", default=-1, ign=True),
            f("fetch_offset", "int64"),
            f("last_fetched_epoch", "int32", "12+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1, ign=True),
            f("partition_max_bytes", "int32"),
            f("replica_directory_id", "uuid", "17+", ign=True, tag=0, tagged="17+"),
        ]),
    ]),
    array("forgotten_topics_data", "ForgottenTopic", "7+", [
        f("topic", "string", "7-12", ign=True),
        f("topic_id", "uuid", "13+", ign=True),
        f("partitions", "[]int32", "7+"),
    ]),
    f("rack_id", "string", "11+", default='', ign=True),
])

FETCH_RESPONSE = response(1, "Fetch", "4-17", "12+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16", "7+", ign=True),
    f("session_id", "int32", "7+", default=0),
    array("responses", "FetchableTopicResponse", "0+", [
        f("topic", "string", "0-12", ign=True),
        f("topic_id", "uuid", "13+", ign=True),
        array("partitions", "PartitionData", "0+", [
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("high_watermark", "int64"),
            f("last_stable_offset", "int64", "4+", default=-1, ign=True),
            f("log_start_offset", "int64", "5+", default=-1, ign=True),
            struct("diverging_epoch", "EpochEndOffset", "12+", [
                f("epoch", "int32", "12+", default=-1),
                f("end_offset", "int64", "12+", default=-1),
            ], tag=0, tagged="12+"),
            struct("current_leader", "LeaderIdAndEpoch", "12+", [
                f("leader_id", "int32", "12+", default=-1),
                f("leader_epoch", "int32", "12+", default=-1),
            ], tag=1, tagged="12+"),
            struct("snapshot_id", "SnapshotId", "12+", [
                f("end_offset", "int64", default=-1),
                f("epoch", "int32", default=-1),
            ], tag=2, tagged="12+"),
            array("aborted_transactions", "AbortedTransaction", "4+", [
                f("producer_id", "int64", "4+"),
                f("first_offset", "int64", "4+"),
            ], null="4+", ign=True),
            f("preferred_read_replica", "int32", "11+", default=-1),
            f("records", "records", null="0+"),
        ]),
    ]),
    array("node_endpoints", "NodeEndpoint", "16+", [
        f("node_id", "int32", "16+"),
        f("host", "string", "16+"),
        f("port", "int32", "16+"),
        f("rack", "string", "16+", null="16+", default=None),
    ], tag=0, tagged="16+"),
])

PRODUCE_REQUEST = request(0, "Produce", "3-11", "9+", [
    f("transactional_id", "string", "3+", null="3+", default=None),
    f("acks", "int16"),
    f("timeout_ms", "int32"),
    array("topic_data", "TopicProduceData", "0+", [
        f("name", "string", "0-12", ign=True),
        f("topic_id", "uuid", "13+", ign=True),
        array("partition_data", "PartitionProduceData", "0+", [
            f("index", "int32"),
            f("records", "records", null="0+"),
        ]),
    ]),
])

PRODUCE_RESPONSE = response(0, "Produce", "3-11", "9+", [
    array("responses", "TopicProduceResponse", "0+", [
        f("name", "string", "0-12", ign=True),
        f("topic_id", "uuid", "13+", ign=True),
        array("partition_responses", "PartitionProduceResponse", "0+", [
            f("index", "int32"),
            f("error_code", "int16"),
            f("base_offset", "int64"),
            f("log_append_time_ms", "int64", "2+", default=-1, ign=True),
            f("log_start_offset", "int64", "5+", default=-1, ign=True),
            array("record_errors", "BatchIndexAndErrorMessage", "8+", [
                f("batch_index", "int32", "8+"),
                f("batch_index_error_message", "string", "8+", null="8+", default=None),
            ], ign=True),
            f("error_message", "string", "8+", null="8+", default=None, ign=True),
            struct("current_leader", "LeaderIdAndEpoch", "10+", [
                f("leader_id", "int32", "10+", default=-1),
                f("leader_epoch", "int32", "10+", default=-1),
            ], tag=0, tagged="10+"),
        ]),
    ]),
    f("throttle_time_ms", "int32", "1+", default=0, ign=True),
    array("node_endpoints", "NodeEndpoint", "10+", [
        f("node_id", "int32", "10+"),
        f("host", "string", "10+"),
        f("port", "int32", "10+"),
        f("rack", "string", "10+", null="10+", default=None),
    ], tag=0, tagged="10+"),
])

CREATE_TOPICS_REQUEST = request(19, "CreateTopics", "0-7", "5+", [
    array("topics", "CreatableTopic", "0+", [
        f("name", "string"),
        f("num_partitions", "int32"),
        f("replication_factor", "int16"),
        array("assignments", "CreatableReplicaAssignment", "0+", [
            f("partition_index", "int32"),
            f("broker_ids", "[]int32"),
        ]),
        array("configs", "CreatableTopicConfig", "0+", [
            f("name", "string"),
            f("value", "string", null="0+"),
        ]),
    ]),
    f("timeout_ms", "int32", default=60000),
    f("validate_only", "bool", "1+", default=False),
])

CREATE_TOPICS_RESPONSE = response(19, "CreateTopics", "0-7", "5+", [
    f("throttle_time_ms", "int32", "2+", ign=True),
    array("topics", "CreatableTopicResult", "0+", [
        f("name", "string"),
        f("topic_id", "uuid", "7+", ign=True),
        f("error_code", "int16"),
        f("error_message", "string", "1+", null="0+", ign=True),
        f("topic_config_error_code", "int16", "5+", ign=True, tag=0, tagged="5+"),
        f("num_partitions", "int32", "5+", default=-1, ign=True),
        f("replication_factor", "int16", "5+", default=-1, ign=True),
        array("configs", "CreatableTopicConfigs", "5+", [
            f("name", "string", "5+"),
            f("value", "string", "5+", null="5+"),
            f("read_only", "bool", "5+"),
            f("config_source", "int8", "5+", default=-1, ign=True),
            f("is_sensitive", "bool", "5+"),
        ], null="5+", ign=True),
    ]),
])


# Deletes topics (Kafka's admin deleteTopics); not in the shared schema set, checked against Kafka's JSON as
# bundled by kafka-python. Versions 1-6, as Kafka 4 serves them (v0 is gone there too).
DELETE_TOPICS_REQUEST = request(20, "DeleteTopics", "1-6", "4+", [
    array("topics", "DeleteTopicState", "6+", [
        f("name", "string", "6+", null="6+", default=None),
        f("topic_id", "uuid", "6+"),
    ]),
    f("topic_names", "[]string", "1-5", ign=True),
    f("timeout_ms", "int32"),
])

DELETE_TOPICS_RESPONSE = response(20, "DeleteTopics", "1-6", "4+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    array("responses", "DeletableTopicResult", "0+", [
        f("name", "string", null="6+"),
        f("topic_id", "uuid", "6+", ign=True),
        f("error_code", "int16"),
        f("error_message", "string", "5+", null="5+", ign=True, default=None),
    ]),
])


# Grows a topic's partition count (Kafka's admin createPartitions); not in the shared schema set, checked
# against Kafka's JSON as bundled by kafka-python.
CREATE_PARTITIONS_REQUEST = request(37, "CreatePartitions", "0-3", "2+", [
    array("topics", "CreatePartitionsTopic", "0+", [
        f("name", "string"),
        f("count", "int32"),
        array("assignments", "CreatePartitionsAssignment", "0+", [
            f("broker_ids", "[]int32"),
        ], null="0+"),
    ]),
    f("timeout_ms", "int32"),
    f("validate_only", "bool"),
])

CREATE_PARTITIONS_RESPONSE = response(37, "CreatePartitions", "0-3", "2+", [
    f("throttle_time_ms", "int32"),
    array("results", "CreatePartitionsTopicResult", "0+", [
        f("name", "string"),
        f("error_code", "int16"),
        f("error_message", "string", null="0+", default=None),
    ]),
])
