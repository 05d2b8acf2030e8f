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
