"""The classic group protocol and the offset APIs."""

from .dsl import Struct, array, data, f, header, request, response, struct  # noqa: F401

JOIN_GROUP_REQUEST = request(11, "JoinGroup", "0-9", "6+", [
    f("group_id", "string"),
    f("session_timeout_ms", "int32"),
    f("rebalance_timeout_ms", "int32", "1+", default=-1, ign=True),
    f("member_id", "string"),
    f("group_instance_id", "string", "5+", null="5+", default=None),
    f("protocol_type", "string"),
    array("protocols", "JoinGroupRequestProtocol", "0+", [
        f("name", "string"),
        f("metadata", "bytes"),
    ]),
    f("reason", "string", "8+", null="8+", default=None, ign=True),
])

JOIN_GROUP_RESPONSE = response(11, "JoinGroup", "0-9", "6+", [
    f("throttle_time_ms", "int32", "2+", ign=True),
    f("error_code", "int16"),
    f("generation_id", "int32", default=-1),
    f("protocol_type", "string", "7+", null="7+", default=None, ign=True),
    f("protocol_name", "string", null="7+"),
    f("leader", "string"),
    f("skip_assignment", "bool", "9+", default=False),
    f("member_id", "string"),
    array("members", "JoinGroupResponseMember", "0+", [
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", null="5+", default=None, ign=True),
        f("metadata", "bytes"),
    ]),
])

SYNC_GROUP_REQUEST = request(14, "SyncGroup", "0-5", "4+", [
    f("group_id", "string"),
    f("generation_id", "int32"),
    f("member_id", "string"),
    f("group_instance_id", "string", "3+", null="3+", default=None),
    f("protocol_type", "string", "5+", null="5+", default=None, ign=True),
    f("protocol_name", "string", "5+", null="5+", default=None, ign=True),
    array("assignments", "SyncGroupRequestAssignment", "0+", [
        f("member_id", "string"),
        f("assignment", "bytes"),
    ]),
])

SYNC_GROUP_RESPONSE = response(14, "SyncGroup", "0-5", "4+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16"),
    f("protocol_type", "string", "5+", null="5+", default=None, ign=True),
    f("protocol_name", "string", "5+", null="5+", default=None, ign=True),
    f("assignment", "bytes"),
])

HEARTBEAT_REQUEST = request(12, "Heartbeat", "0-4", "4+", [
    f("group_id", "string"),
    f("generation_id", "int32"),
    f("member_id", "string"),
    f("group_instance_id", "string", "3+", null="3+", default=None),
])

HEARTBEAT_RESPONSE = response(12, "Heartbeat", "0-4", "4+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16"),
])

LEAVE_GROUP_REQUEST = request(13, "LeaveGroup", "0-5", "4+", [
    f("group_id", "string"),
    f("member_id", "string", "0-2"),
    array("members", "MemberIdentity", "3+", [
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", null="3+", default=None),
        f("reason", "string", "5+", null="5+", default=None, ign=True),
    ]),
])

LEAVE_GROUP_RESPONSE = response(13, "LeaveGroup", "0-5", "4+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16"),
    array("members", "MemberResponse", "3+", [
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", null="3+"),
        f("error_code", "int16", "3+"),
    ]),
])

DESCRIBE_GROUPS_REQUEST = request(15, "DescribeGroups", "0-6", "5+", [
    f("groups", "[]string"),
    f("include_authorized_operations", "bool", "3+"),
])

DESCRIBE_GROUPS_RESPONSE = response(15, "DescribeGroups", "0-6", "5+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    array("groups", "DescribedGroup", "0+", [
        f("error_code", "int16"),
        f("error_message", "string", "6+", null="6+", default=None),
        f("group_id", "string"),
        f("group_state", "string"),
        f("protocol_type", "string"),
        f("protocol_data", "string"),
        array("members", "DescribedGroupMember", "0+", [
            f("member_id", "string"),
            f("group_instance_id", "string", "4+", null="4+", default=None, ign=True),
            f("client_id", "string"),
            f("client_host", "string"),
            f("member_metadata", "bytes"),
            f("member_assignment", "bytes"),
        ]),
        f("authorized_operations", "int32", "3+", default=-2147483648),
    ]),
])

LIST_GROUPS_REQUEST = request(16, "ListGroups", "0-5", "3+", [
    f("states_filter", "[]string", "4+"),
    f("types_filter", "[]string", "5+"),
])

LIST_GROUPS_RESPONSE = response(16, "ListGroups", "0-5", "3+", [
    f("throttle_time_ms", "int32", "1+", ign=True),
    f("error_code", "int16"),
    array("groups", "ListedGroup", "0+", [
        f("group_id", "string"),
        f("protocol_type", "string"),
        f("group_state", "string", "4+", ign=True),
        f("group_type", "string", "5+", ign=True),
    ]),
])

DELETE_GROUPS_REQUEST = request(42, "DeleteGroups", "0-2", "2+", [
    f("groups_names", "[]string"),
])

DELETE_GROUPS_RESPONSE = response(42, "DeleteGroups", "0-2", "2+", [
    f("throttle_time_ms", "int32"),
    array("results", "DeletableGroupResult", "0+", [
        f("group_id", "string"),
        f("error_code", "int16"),
    ]),
])

OFFSET_COMMIT_REQUEST = request(8, "OffsetCommit", "0-10", "8+", [
    f("group_id", "string"),
    f("generation_id_or_member_epoch", "int32", "1+", default=-1, ign=True),
    f("member_id", "string", "1+", ign=True),
    f("group_instance_id", "string", "7+", null="7+", default=None),
    f("retention_time_ms", "int64", "2-4", default=-1, ign=True),
    array("topics", "OffsetCommitRequestTopic", "0+", [
        f("name", "string", "0-9", ign=True),
        f("topic_id", "uuid", "10+", ign=True),
        array("partitions", "OffsetCommitRequestPartition", "0+", [
            f("partition_index", "int32"),
            f("committed_offset", "int64"),
            f("committed_leader_epoch", "int32", "6+", default=-1, ign=True),
            f("commit_timestamp", "int64", "1", default=-1),
            f("committed_metadata", "string", null="0+"),
        ]),
    ]),
])

OFFSET_COMMIT_RESPONSE = response(8, "OffsetCommit", "0-10", "8+", [
    f("throttle_time_ms", "int32", "3+", ign=True),
    array("topics", "OffsetCommitResponseTopic", "0+", [
        f("name", "string", "0-9", ign=True),
        f("topic_id", "uuid", "10+", ign=True),
        array("partitions", "OffsetCommitResponsePartition", "0+", [
            f("partition_index", "int32"),
            f("error_code", "int16"),
        ]),
    ]),
])

OFFSET_FETCH_REQUEST = request(9, "OffsetFetch", "0-10", "6+", [
    f("group_id", "string", "0-7"),
    array("topics", "OffsetFetchRequestTopic", "0-7", [
        f("name", "string", "0-7"),
        f("partition_indexes", "[]int32", "0-7"),
    ], null="2-7"),
    array("groups", "OffsetFetchRequestGroup", "8+", [
        f("group_id", "string", "8+"),
        f("member_id", "string", "9+", null="9+", default=None, ign=True),
        f("member_epoch", "int32", "9+", default=-1, ign=True),
        array("topics", "OffsetFetchRequestTopics", "8+", [
            f("name", "string", "8-9", ign=True),
            f("topic_id", "uuid", "10+", ign=True),
            f("partition_indexes", "[]int32", "8+"),
        ], null="8+"),
    ]),
    f("require_stable", "bool", "7+", default=False),
])

OFFSET_FETCH_RESPONSE = response(9, "OffsetFetch", "0-10", "6+", [
    f("throttle_time_ms", "int32", "3+", ign=True),
    array("topics", "OffsetFetchResponseTopic", "0-7", [
        f("name", "string", "0-7"),
        array("partitions", "OffsetFetchResponsePartition", "0-7", [
            f("partition_index", "int32", "0-7"),
            f("committed_offset", "int64", "0-7"),
            f("committed_leader_epoch", "int32", "5-7", default=-1, ign=True),
            f("metadata", "string", "0-7", null="0-7"),
            f("error_code", "int16", "0-7"),
        ]),
    ]),
    f("error_code", "int16", "2-7", default=0, ign=True),
    array("groups", "OffsetFetchResponseGroup", "8+", [
        f("group_id", "string", "8+"),
        array("topics", "OffsetFetchResponseTopics", "8+", [
            f("name", "string", "8-9", ign=True),
            f("topic_id", "uuid", "10+", ign=True),
            array("partitions", "OffsetFetchResponsePartitions", "8+", [
                f("partition_index", "int32", "8+"),
                f("committed_offset", "int64", "8+"),
                f("committed_leader_epoch", "int32", "8+", default=-1, ign=True),
                f("metadata", "string", "8+", null="8+"),
                f("error_code", "int16", "8+"),
            ]),
        ]),
        f("error_code", "int16", "8+", default=0),
    ]),
])

OFFSET_DELETE_REQUEST = request(47, "OffsetDelete", "0", "none", [
    f("group_id", "string"),
    array("topics", "OffsetDeleteRequestTopic", "0+", [
        f("name", "string"),
        array("partitions", "OffsetDeleteRequestPartition", "0+", [
            f("partition_index", "int32"),
        ]),
    ]),
])

OFFSET_DELETE_RESPONSE = response(47, "OffsetDelete", "0", "none", [
    f("error_code", "int16"),
    f("throttle_time_ms", "int32", ign=True),
    array("topics", "OffsetDeleteResponseTopic", "0+", [
        f("name", "string"),
        array("partitions", "OffsetDeleteResponsePartition", "0+", [
            f("partition_index", "int32"),
            f("error_code", "int16"),
        ]),
    ]),
])

