"""Connect groups: kcoord's own messages and records (no Kafka schema exists; docs/connect-protocol.md, whose
decisions D1-D21 the comments here cite).

Every message here is kcoord's, not Kafka's: the schema conformance test checks that none of them shares a name or
an API key with a Kafka message. API keys are a private block (default 1000-1003, configurable with
`group.connect.api.key.base`, never below 1000), advertised in ApiVersions only when connect groups are enabled.
Record types 1001-1006 sit beside kcoord's topic record (1000), far above Kafka's (which stop at 24).

Units of work travel as one struct, ConnectorsAndTasks: connector names, and tasks grouped by connector. Records
carry units as integer ids into the group's unit table (ConnectGroupUnits, append-only), so a large target is a
few int32 arrays rather than a hundred thousand strings.
"""

from .dsl import Struct, array, data, f, request, response, struct

CONNECT_API_KEY_BASE = 1000
CONNECT_RECORD_BASE = 1001

CONNECTORS_AND_TASKS = Struct("ConnectorsAndTasks", (
    f("connectors", "[]string"),
    array("tasks", "ConnectorTasks", "0+", [
        f("connector", "string"),
        f("task_ids", "[]int32"),
    ]),
))

ASSIGNOR = Struct("Assignor", (
    f("name", "string"),
    f("minimum_version", "int16"),
    f("maximum_version", "int16"),
    f("reason", "int8"),
    f("version", "int16"),
    f("metadata", "bytes"),
))

CONNECT_GROUP_HEARTBEAT_REQUEST = request(CONNECT_API_KEY_BASE, "ConnectGroupHeartbeat", "0", "0+", [
    f("group_id", "string"),
    f("member_id", "string"),  # client-generated, non-empty on every request (D3)
    f("member_epoch", "int32"),  # 0 join, -1 leave, -2 static member leaving for now
    f("instance_id", "string", null="0+", default=None),
    f("rebalance_timeout_ms", "int32", default=-1),
    f("server_assignor", "string", null="0+", default=None),  # refused: connect groups assign client-side (D6)
    array("client_assignors", ASSIGNOR, "0+", null="0+", default=None),  # null: unchanged
    struct("connectors_and_tasks", CONNECTORS_AND_TASKS, "0+", null="0+", default=None),  # null: unchanged
])

CONNECT_GROUP_HEARTBEAT_RESPONSE = response(CONNECT_API_KEY_BASE, "ConnectGroupHeartbeat", "0", "0+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+", default=None),
    f("member_id", "string", null="0+", default=None),
    f("member_epoch", "int32"),
    f("heartbeat_interval_ms", "int32"),
    f("should_compute_assignment", "bool"),  # the seed's COMPUTE_ASSIGNMENT, as a field (D2)
    f("assignor_version", "int16", default=-1),  # the negotiated version V (D9)
    struct("assignment", "Assignment", "0+", [
        f("error", "int8"),
        struct("connectors_and_tasks", CONNECTORS_AND_TASKS, "0+"),
        f("version", "int16"),
        f("metadata", "bytes"),
    ], null="0+", default=None),
])

CONNECT_GROUP_PREPARE_ASSIGNMENT_REQUEST = request(CONNECT_API_KEY_BASE + 1, "ConnectGroupPrepareAssignment", "0",
                                                   "0+", [
    f("group_id", "string"),
    f("member_id", "string"),
    f("member_epoch", "int32"),
])

CONNECT_GROUP_PREPARE_ASSIGNMENT_RESPONSE = response(CONNECT_API_KEY_BASE + 1, "ConnectGroupPrepareAssignment", "0",
                                                     "0+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+", default=None),
    f("group_epoch", "int32"),
    f("assignor_name", "string"),
    f("assignor_version", "int16"),
    f("assignor_state", "bytes", null="0+", default=None),  # what the last Install left for the next computation
    f("delay_remaining_ms", "int32", default=-1),  # the scheduled delay the last Install armed, if it still runs
    array("members", "Member", "0+", [
        f("member_id", "string"),
        f("member_epoch", "int32"),
        f("instance_id", "string", null="0+", default=None),
        f("minimum_version", "int16"),
        f("maximum_version", "int16"),
        f("reason", "int8"),
        f("metadata", "bytes"),  # the member's own assignor metadata, encoded at the negotiated version
        struct("target", CONNECTORS_AND_TASKS, "0+"),  # its target: what the next computation starts from
        f("target_version", "int16"),
        f("target_metadata", "bytes"),
    ]),
    # Members fenced or gone since the last Install, with the target each held: their units are "lost" (Connect's
    # scheduled rebalance delay decides when they move).
    array("departed_members", "DepartedMember", "0+", [
        f("member_id", "string"),
        f("instance_id", "string", null="0+", default=None),
        struct("target", CONNECTORS_AND_TASKS, "0+"),
    ]),
])

CONNECT_GROUP_INSTALL_ASSIGNMENT_REQUEST = request(CONNECT_API_KEY_BASE + 2, "ConnectGroupInstallAssignment", "0",
                                                   "0+", [
    f("group_id", "string"),
    f("member_id", "string"),
    f("member_epoch", "int32"),
    f("group_epoch", "int32"),  # the group epoch the computation started from (Prepare's)
    f("error", "int8"),  # 0, or 1 CONFIG_MISMATCH: the computing worker's config is behind (D12)
    f("assignment_delay_ms", "int32", default=0),  # > 0: compute again after this long (D10)
    f("assignor_state", "bytes", null="0+", default=None),
    array("members", "Member", "0+", [
        f("member_id", "string"),
        struct("connectors_and_tasks", CONNECTORS_AND_TASKS, "0+"),
        f("version", "int16"),
        f("metadata", "bytes"),
    ]),
])

CONNECT_GROUP_INSTALL_ASSIGNMENT_RESPONSE = response(CONNECT_API_KEY_BASE + 2, "ConnectGroupInstallAssignment", "0",
                                                     "0+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+", default=None),
])

CONNECT_GROUP_DESCRIBE_REQUEST = request(CONNECT_API_KEY_BASE + 3, "ConnectGroupDescribe", "0", "0+", [
    f("group_ids", "[]string"),
    f("include_authorized_operations", "bool"),
])

CONNECT_GROUP_DESCRIBE_RESPONSE = response(CONNECT_API_KEY_BASE + 3, "ConnectGroupDescribe", "0", "0+", [
    f("throttle_time_ms", "int32"),
    array("groups", "DescribedGroup", "0+", [
        f("error_code", "int16"),
        f("error_message", "string", null="0+", default=None),
        f("group_id", "string"),
        f("group_state", "string"),
        f("group_epoch", "int32"),
        f("assignment_epoch", "int32"),
        f("assignor_name", "string", null="0+", default=None),
        f("assignor_version", "int16", default=-1),
        f("computing_member_id", "string", null="0+", default=None),
        f("compute_remaining_ms", "int32", default=-1),  # the computing worker's lease
        f("delay_remaining_ms", "int32", default=-1),  # the scheduled rebalance delay
        array("members", "Member", "0+", [
            f("member_id", "string"),
            f("instance_id", "string", null="0+", default=None),
            f("member_epoch", "int32"),
            f("state", "string"),
            f("client_id", "string"),
            f("client_host", "string"),
            f("minimum_version", "int16"),
            f("maximum_version", "int16"),
            struct("assignment", CONNECTORS_AND_TASKS, "0+"),
            struct("target_assignment", CONNECTORS_AND_TASKS, "0+"),
            struct("pending_revocation", CONNECTORS_AND_TASKS, "0+"),
        ]),
        array("history", "Rebalance", "0+", [  # KIP-800 reasons for each group epoch bump, newest last
            f("group_epoch", "int32"),
            f("timestamp_ms", "int64"),
            f("reason", "string"),
        ]),
        f("authorized_operations", "int32", default=-2147483648),
    ]),
])

# ---- records: keys are an int16 record type (1001-1006) then a version 0 struct; values are version 0 --------

CONNECT_GROUP_METADATA_KEY = data("ConnectGroupMetadataKey", "0", "none", [f("group_id", "string")])

CONNECT_GROUP_METADATA_VALUE = data("ConnectGroupMetadataValue", "0", "0+", [
    f("epoch", "int32"),
    f("assignor_state", "bytes", null="0+", default=None),
    f("delay_deadline_ms", "int64", default=-1),  # wall clock; -1: no scheduled delay
    array("departed_members", "DepartedMember", "0+", [
        f("member_id", "string"),
        f("instance_id", "string", null="0+", default=None),
        f("units", "[]int32"),
    ]),
])

# The unit table, append-only (written when it grows): unit id i is connector connectors[units_connector[i]], task
# units_task[i] of it (-1: the connector itself).
CONNECT_GROUP_UNITS_KEY = data("ConnectGroupUnitsKey", "0", "none", [f("group_id", "string")])

CONNECT_GROUP_UNITS_VALUE = data("ConnectGroupUnitsValue", "0", "0+", [
    f("connectors", "[]string"),
    f("units_connector", "[]int32"),
    f("units_task", "[]int32"),
])

CONNECT_GROUP_MEMBER_METADATA_KEY = data("ConnectGroupMemberMetadataKey", "0", "none", [
    f("group_id", "string"),
    f("member_id", "string"),
])

CONNECT_GROUP_MEMBER_METADATA_VALUE = data("ConnectGroupMemberMetadataValue", "0", "0+", [
    f("instance_id", "string", null="0+"),
    f("client_id", "string"),
    f("client_host", "string"),
    f("rebalance_timeout_ms", "int32"),
    f("joined", "int64"),  # order of arrival: the longest-standing member decides ties
    array("client_assignors", ASSIGNOR, "0+"),
])

CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = data("ConnectGroupTargetAssignmentMetadataKey", "0", "none", [
    f("group_id", "string"),
])

CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = data("ConnectGroupTargetAssignmentMetadataValue", "0", "0+", [
    f("assignment_epoch", "int32"),
    f("assignor_name", "string", null="0+"),
    f("assignor_version", "int16"),
])

CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = data("ConnectGroupTargetAssignmentMemberKey", "0", "none", [
    f("group_id", "string"),
    f("member_id", "string"),
])

CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = data("ConnectGroupTargetAssignmentMemberValue", "0", "0+", [
    f("units", "[]int32"),
    f("version", "int16"),
    f("metadata", "bytes"),
])

CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = data("ConnectGroupCurrentMemberAssignmentKey", "0", "none", [
    f("group_id", "string"),
    f("member_id", "string"),
])

CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = data("ConnectGroupCurrentMemberAssignmentValue", "0", "0+", [
    f("member_epoch", "int32"),
    f("previous_member_epoch", "int32"),
    f("state", "int8"),
    f("assigned", "[]int32"),
    f("pending_revocation", "[]int32"),
])
