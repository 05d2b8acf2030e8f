"""kcoord: a Kafka-compatible group coordinator with a compiled hot path.

    from kcoord import Coordinator, GroupConfig, wire, assignors

The names load on first use, so `python -m kcoord.protocol.generate` (which writes the compiled codec's source)
runs on a checkout that has not been built yet.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Coordinator", "GroupConfig", "assignors", "wire"]

_LAZY = {"Coordinator": ("kcoord.coordinator", "Coordinator"), "GroupConfig": ("kcoord.config", "GroupConfig"),
         "assignors": ("kcoord.assignors", None), "wire": ("kcoord.wire", None)}

if TYPE_CHECKING:
    from . import assignors, wire
    from .config import GroupConfig
    from .coordinator import Coordinator


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'kcoord' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value
