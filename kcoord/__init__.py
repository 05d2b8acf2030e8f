"""kcoord: a Kafka-compatible group coordinator with a compiled hot path."""

__version__ = "0.1.0"
