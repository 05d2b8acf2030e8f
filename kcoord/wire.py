"""The Kafka wire codec: every message class kcoord speaks, frame splitting and header handling.

Message classes are named as Kafka names them (JoinGroupRequest, JoinGroupRequestProtocol, ...). Each has
`decode(buf, version)`, `decode_from(buf, version, offset)`, `encode(version)` and `encode_into(buf, version)`;
uuids are 16-byte `bytes`. All of it is compiled (kcoord._core._wire); this module is its public face.
"""

from ._core._wire import *  # noqa: F401,F403
from ._core._wire import (  # noqa: F401
    API_VERSIONS,
    DEFAULT_MAX_FRAME_SIZE,
    HEARTBEAT_CHANGES_MEMBER,
    HEARTBEAT_HAS_INSTANCE_ID,
    HEARTBEAT_HAS_TOPIC_PARTITIONS,
    MESSAGE_TYPES,
    REQUEST_TYPES,
    RESPONSE_TYPES,
    STRUCT_TYPES,
    DecodeError,
    EncodeError,
    FrameError,
    FrameReader,
    Message,
    UnsupportedVersionError,
    WriteBuffer,
    consumer_heartbeat_shape,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    is_supported,
    peek_request,
    request_header_version,
    response_header_version,
)
from .protocol.dsl import ZERO_UUID  # noqa: F401  (the null topic id; one definition, beside the messages)
