"""Bytes embedded in the group protocol (protocol type "consumer") and the coordinator records the store writes."""

from .dsl import Struct, array, data, f, header, request, response, struct  # noqa: F401

CONSUMER_PROTOCOL_SUBSCRIPTION = data("ConsumerProtocolSubscription", "0-3", "none", [
    f("topics", "[]string"),
    f("user_data", "bytes", null="0+", default=None),
    array("owned_partitions", "TopicPartition", "1+", [
        f("topic", "string", "1+"),
        f("partitions", "[]int32", "1+"),
    ], ign=True),
    f("generation_id", "int32", "2+", default=-1, ign=True),
    f("rack_id", "string", "3+", null="3+", default=None, ign=True),
])

CONSUMER_PROTOCOL_ASSIGNMENT = data("ConsumerProtocolAssignment", "0-3", "none", [
    array("assigned_partitions", "TopicPartition", "0+", [
        f("topic", "string"),
        f("partitions", "[]int32"),
    ]),
    f("user_data", "bytes", null="0+", default=None),
])

GROUP_METADATA_KEY = data("GroupMetadataKey", "2", "none", [
    f("group", "string", "2"),
])

MEMBER_METADATA = Struct("MemberMetadata", (
    f("member_id", "string"),
    f("group_instance_id", "string", "3+", null="3+", default=None, ign=True),
    f("client_id", "string"),
    f("client_host", "string"),
    f("rebalance_timeout", "int32", "1+", default=-1, ign=True),
    f("session_timeout", "int32"),
    f("subscription", "bytes"),
    f("assignment", "bytes"),
))

GROUP_METADATA_VALUE = data("GroupMetadataValue", "0-4", "4+", [
    f("protocol_type", "string"),
    f("generation", "int32"),
    f("protocol", "string", null="0+"),
    f("leader", "string", null="0+"),
    f("current_state_timestamp", "int64", "2+", default=-1, ign=True),
    array("members", MEMBER_METADATA, "0+"),
])

OFFSET_COMMIT_KEY = data("OffsetCommitKey", "0-1", "none", [
    f("group", "string", "0-1"),
    f("topic", "string", "0-1"),
    f("partition", "int32", "0-1"),
])

OFFSET_COMMIT_VALUE = data("OffsetCommitValue", "0-4", "4+", [
    f("offset", "int64"),
    f("leader_epoch", "int32", "3+", default=-1, ign=True),
    f("metadata", "string"),
    f("commit_timestamp", "int64"),
    f("expire_timestamp", "int64", "1", default=-1, ign=True),
])

CONSUMER_GROUP_METADATA_KEY = data("ConsumerGroupMetadataKey", "3", "none", [
    f("group_id", "string", "3"),
])

CONSUMER_GROUP_METADATA_VALUE = data("ConsumerGroupMetadataValue", "0", "0+", [
    f("epoch", "int32"),
])

CONSUMER_GROUP_PARTITION_METADATA_KEY = data("ConsumerGroupPartitionMetadataKey", "4", "none", [
    f("group_id", "string", "4"),
])

CONSUMER_GROUP_PARTITION_METADATA_VALUE = data("ConsumerGroupPartitionMetadataValue", "0", "0+", [
    array("topics", "TopicMetadata", "0+", [
        f("topic_id", "uuid"),
        f("topic_name", "string"),
        f("num_partitions", "int32"),
        array("partition_metadata", "PartitionMetadata", "0+", [
            f("partition", "int32"),
            f("racks", "[]string"),
        ]),
    ]),
])

CONSUMER_GROUP_MEMBER_METADATA_KEY = data("ConsumerGroupMemberMetadataKey", "5", "none", [
    f("group_id", "string", "5"),
    f("member_id", "string", "5"),
])

CONSUMER_GROUP_MEMBER_METADATA_VALUE = data("ConsumerGroupMemberMetadataValue", "0", "0+", [
    f("instance_id", "string", null="0+"),
    f("rack_id", "string", null="0+"),
    f("client_id", "string"),
    f("client_host", "string"),
    f("subscribed_topic_names", "[]string"),
    f("subscribed_topic_regex", "string", null="0+"),
    f("rebalance_timeout_ms", "int32", default=-1),
    f("server_assignor", "string", null="0+"),
    struct("classic_member_metadata", "ClassicMemberMetadata", "0+", [
        f("session_timeout_ms", "int32"),
        array("supported_protocols", "ClassicProtocol", "0+", [
            f("name", "string"),
            f("metadata", "bytes"),
        ]),
    ], null="0+", default=None, tag=0, tagged="0+"),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = data("ConsumerGroupTargetAssignmentMetadataKey", "6", "none", [
    f("group_id", "string", "6"),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = data("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", [
    f("assignment_epoch", "int32"),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = data("ConsumerGroupTargetAssignmentMemberKey", "7", "none", [
    f("group_id", "string", "7"),
    f("member_id", "string", "7"),
])

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = data("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
    array("topic_partitions", "TopicPartition", "0+", [
        f("topic_id", "uuid"),
        f("partitions", "[]int32"),
    ]),
])

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = data("ConsumerGroupCurrentMemberAssignmentKey", "8", "none", [
    f("group_id", "string", "8"),
    f("member_id", "string", "8"),
])

TOPIC_PARTITIONS = Struct("TopicPartitions", (
    f("topic_id", "uuid"),
    f("partitions", "[]int32"),
))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = data("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
    f("member_epoch", "int32"),
    f("previous_member_epoch", "int32"),
    f("state", "int8"),
    array("assigned_partitions", TOPIC_PARTITIONS, "0+"),
    array("partitions_pending_revocation", TOPIC_PARTITIONS, "0+"),
])

