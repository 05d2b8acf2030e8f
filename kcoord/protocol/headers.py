"""Request and response headers (KIP-482 added the flexible v2/v1 forms)."""

from .dsl import Struct, array, data, f, header, request, response, struct  # noqa: F401

REQUEST_HEADER = header("RequestHeader", "0-2", "2+", [
    f("request_api_key", "int16"),
    f("request_api_version", "int16"),
    f("correlation_id", "int32"),
    f("client_id", "string", "1+", null="1+", ign=True, flex="none"),
])

RESPONSE_HEADER = header("ResponseHeader", "0-1", "1+", [
    f("correlation_id", "int32"),
])

