"""A response that may not be ready yet (compiled: see kcoord._core._members.Reply)."""

from ._core._members import Reply

__all__ = ["Reply"]
