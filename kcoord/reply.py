"""A response that may not be ready yet (compiled: see kcoord._core._reply.Reply)."""

from ._core._reply import Reply

__all__ = ["Reply"]
