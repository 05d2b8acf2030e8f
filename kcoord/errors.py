"""Kafka error codes kcoord answers with, named as Kafka names them."""

NONE = 0
UNKNOWN_SERVER_ERROR = -1
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
