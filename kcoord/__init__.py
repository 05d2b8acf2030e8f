"""kcoord: a Kafka-compatible group coordinator with a compiled hot path.

    from kcoord import Coordinator, GroupConfig, wire, assignors
"""

from . import assignors, wire
from .config import GroupConfig
from .coordinator import Coordinator

__version__ = "0.1.0"
__all__ = ["Coordinator", "GroupConfig", "assignors", "wire"]
