"""A response that may not be ready yet (compiled: see kcoord._core._reply.Reply), and one whose long last part may
be made off the event loop (Deferred)."""

from collections.abc import Callable
from typing import Any

from ._core._reply import Reply

__all__ = ["Deferred", "Reply", "release", "then"]


class Deferred:
    """A response whose making is long but needs nothing of the coordinator's state any more: `finish()` returns it
    (for one OffsetCommit of 2,000,000 partitions, the error of each). The server calls it on its worker thread for a
    request it decoded there (server.OFFLOAD_ABOVE), inline for the rest; `finish` touches only what the handler
    gave it, so it may run beside the loop."""

    __slots__ = ("finish", "dispose")

    def __init__(self, finish: Callable[[], Any], dispose: Callable[[], None] | None = None) -> None:
        self.finish = finish
        # called once the response is encoded: empties what the request and response hold, so their many small
        # objects are freed where this runs (the worker) and not by the loop when the last reference goes
        self.dispose = dispose

    def __repr__(self) -> str:
        return f"Deferred({self.finish!r})"


def release(items: list) -> None:
    """Empty a long list a slice at a time (for a Deferred's dispose): each slice's objects are freed between two
    bytecodes, where the interpreter may hand the GIL to the loop, whereas dropping a list of two million objects
    at once frees them all in one C call (about 30 ms with the GIL held)."""
    while items:
        del items[-16384:]


def then(response, fn: Callable[[Any], Any]):
    """`fn` applied to the response a handler gave, now or when it is ready (a parked Reply, a Deferred): how a
    gate in front of a handler amends its answer (kcoord.security.gates, kcoord.security.topic_gates)."""
    if type(response) is Reply:
        if response.done:
            return Reply(then(response.response, fn), response.version)
        out = Reply(None, response.version)
        response.on_done(lambda r: out.resolve(then(r, fn)))
        return out
    if isinstance(response, Deferred):
        finish = response.finish
        return Deferred(lambda: fn(finish()), response.dispose)
    return fn(response)
