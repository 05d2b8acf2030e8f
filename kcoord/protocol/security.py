"""Authentication: the SASL exchange (SaslHandshake, SaslAuthenticate) and the SCRAM credential admin APIs of
KIP-554 (DescribeUserScramCredentials, AlterUserScramCredentials), as Kafka defines them."""

from .dsl import array, f, request, response

SASL_HANDSHAKE_REQUEST = request(17, "SaslHandshake", "0-1", "none", [
    f("mechanism", "string"),
])

SASL_HANDSHAKE_RESPONSE = response(17, "SaslHandshake", "0-1", "none", [
    f("error_code", "int16"),
    f("mechanisms", "[]string"),
])

SASL_AUTHENTICATE_REQUEST = request(36, "SaslAuthenticate", "0-2", "2+", [
    f("auth_bytes", "bytes"),
])

SASL_AUTHENTICATE_RESPONSE = response(36, "SaslAuthenticate", "0-2", "2+", [
    f("error_code", "int16"),
    f("error_message", "string", null="0+"),
    f("auth_bytes", "bytes"),
    f("session_lifetime_ms", "int64", "1+", default=0, ign=True),
])

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = request(50, "DescribeUserScramCredentials", "0", "0+", [
    array("users", "UserName", "0+", [
        f("name", "string"),
    ], null="0+"),
])

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = response(50, "DescribeUserScramCredentials", "0", "0+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+"),
    array("results", "DescribeUserScramCredentialsResult", "0+", [
        f("user", "string"),
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
        array("credential_infos", "CredentialInfo", "0+", [
            f("mechanism", "int8"),
            f("iterations", "int32"),
        ]),
    ]),
])

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = request(51, "AlterUserScramCredentials", "0", "0+", [
    array("deletions", "ScramCredentialDeletion", "0+", [
        f("name", "string"),
        f("mechanism", "int8"),
    ]),
    array("upsertions", "ScramCredentialUpsertion", "0+", [
        f("name", "string"),
        f("mechanism", "int8"),
        f("iterations", "int32"),
        f("salt", "bytes"),
        f("salted_password", "bytes"),
    ]),
])

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = response(51, "AlterUserScramCredentials", "0", "0+", [
    f("throttle_time_ms", "int32"),
    array("results", "AlterUserScramCredentialsResult", "0+", [
        f("user", "string"),
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
    ]),
])

# ---- authorization: the ACL admin APIs, at the versions Kafka 4.x serves (KIP-896 removed v0) --------------------

_ACL_FILTER = [
    f("resource_type_filter", "int8"),
    f("resource_name_filter", "string", null="0+"),
    f("pattern_type_filter", "int8", "1+", default=3),
    f("principal_filter", "string", null="0+"),
    f("host_filter", "string", null="0+"),
    f("operation", "int8"),
    f("permission_type", "int8"),
]

DESCRIBE_ACLS_REQUEST = request(29, "DescribeAcls", "1-3", "2+", _ACL_FILTER)

DESCRIBE_ACLS_RESPONSE = response(29, "DescribeAcls", "1-3", "2+", [
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", null="0+"),
    array("resources", "DescribeAclsResource", "0+", [
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("pattern_type", "int8", "1+", default=3),
        array("acls", "AclDescription", "0+", [
            f("principal", "string"),
            f("host", "string"),
            f("operation", "int8"),
            f("permission_type", "int8"),
        ]),
    ]),
])

CREATE_ACLS_REQUEST = request(30, "CreateAcls", "1-3", "2+", [
    array("creations", "AclCreation", "0+", [
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("resource_pattern_type", "int8", "1+", default=3),
        f("principal", "string"),
        f("host", "string"),
        f("operation", "int8"),
        f("permission_type", "int8"),
    ]),
])

CREATE_ACLS_RESPONSE = response(30, "CreateAcls", "1-3", "2+", [
    f("throttle_time_ms", "int32"),
    array("results", "AclCreationResult", "0+", [
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
    ]),
])

DELETE_ACLS_REQUEST = request(31, "DeleteAcls", "1-3", "2+", [
    array("filters", "DeleteAclsFilter", "0+", _ACL_FILTER),
])

DELETE_ACLS_RESPONSE = response(31, "DeleteAcls", "1-3", "2+", [
    f("throttle_time_ms", "int32"),
    array("filter_results", "DeleteAclsFilterResult", "0+", [
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
        array("matching_acls", "DeleteAclsMatchingAcl", "0+", [
            f("error_code", "int16"),
            f("error_message", "string", null="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("pattern_type", "int8", "1+", default=3),
            f("principal", "string"),
            f("host", "string"),
            f("operation", "int8"),
            f("permission_type", "int8"),
        ]),
    ]),
])
