"""KIP-848: the consumer group protocol."""

from .dsl import Struct, array, data, f, header, request, response, struct  # noqa: F401

CONSUMER_GROUP_HEARTBEAT_REQUEST = request(68, "ConsumerGroupHeartbeat", "0-1", "0+", [
    f("group_id", "string"),
    f("member_id", "string"),
    f("member_epoch", "int32"),
    f("instance_id", "string", null="0+", default=None),
    f("rack_id", "string", null="0+", default=None),
    f("rebalance_timeout_ms", "int32", default=-1),
    f("subscribed_topic_names", "[]string", null="0+", default=None),
    f("subscribed_topic_regex", "string", "1+", null="1+", default=None),
    f("server_assignor", "string", null="0+", default=None),
    array("topic_partitions", "TopicPartitions", "0+", [
        f("topic_id", "uuid"),
        f("partitions", "[]int32"),
    ], null="0+", default=None),
])

HEARTBEAT_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    f("topic_id", "uuid"),
    f("partitions", "[]int32"),
))

CONSUMER_GROUP_HEARTBEAT_RESPONSE = response(68, "ConsumerGroupHeartbeat", "0-1", "0+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+", default=None),
    f("member_id", "string", null="0+", default=None),
    f("member_epoch", "int32"),
    f("heartbeat_interval_ms", "int32"),
    struct("assignment", "Assignment", "0+", [
        array("topic_partitions", HEARTBEAT_TOPIC_PARTITIONS, "0+"),
    ], null="0+", default=None),
])

# v1 (Kafka 4.0, KIP-1099 / KAFKA-17750): the request is unchanged; each member of the response gains MemberType.
CONSUMER_GROUP_DESCRIBE_REQUEST = request(69, "ConsumerGroupDescribe", "0-1", "0+", [
    f("group_ids", "[]string"),
    f("include_authorized_operations", "bool"),
])

DESCRIBE_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    f("topic_id", "uuid"),
    f("topic_name", "string"),
    f("partitions", "[]int32"),
))

ASSIGNMENT = Struct("Assignment", (
    array("topic_partitions", DESCRIBE_TOPIC_PARTITIONS, "0+"),
))

CONSUMER_GROUP_DESCRIBE_RESPONSE = response(69, "ConsumerGroupDescribe", "0-1", "0+", [
    f("throttle_time_ms", "int32"),
    array("groups", "DescribedGroup", "0+", [
        f("error_code", "int16"),
        f("error_message", "string", null="0+", default=None),
        f("group_id", "string"),
        f("group_state", "string"),
        f("group_epoch", "int32"),
        f("assignment_epoch", "int32"),
        f("assignor_name", "string"),
        array("members", "Member", "0+", [
            f("member_id", "string"),
            f("instance_id", "string", null="0+", default=None),
            f("rack_id", "string", null="0+", default=None),
            f("member_epoch", "int32"),
            f("client_id", "string"),
            f("client_host", "string"),
            f("subscribed_topic_names", "[]string"),
            f("subscribed_topic_regex", "string", null="0+", default=None),
            struct("assignment", ASSIGNMENT, "0+"),
            struct("target_assignment", ASSIGNMENT, "0+"),
            # -1 unknown, 0 a classic-protocol member, 1 a consumer-protocol member. Ignorable: Kafka sets it on
            # every member whatever the version asked, so v0 must drop it rather than refuse to encode.
            f("member_type", "int8", "1+", default=-1, ign=True),
        ]),
        f("authorized_operations", "int32", default=-2147483648),
    ]),
])

