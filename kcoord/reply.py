"""A response that may not be ready yet: JoinGroup waits for the join phase, SyncGroup for the leader."""

from __future__ import annotations

from typing import Any, Callable


class Reply:
    """`version` is the request's API version: a parked reply is built for it when it is answered."""

    __slots__ = ("response", "done", "version", "_callbacks")

    def __init__(self, response: Any = None, version: int = 0) -> None:
        self.response = response
        self.version = version
        self.done = response is not None
        self._callbacks: list[Callable[[Any], None]] | None = None

    def resolve(self, response: Any) -> None:
        if self.done:
            raise RuntimeError("a reply is answered exactly once")
        self.response = response
        self.done = True
        callbacks, self._callbacks = self._callbacks, None
        for cb in callbacks or ():
            cb(response)

    def on_done(self, cb: Callable[[Any], None]) -> None:
        if self.done:
            cb(self.response)
        elif self._callbacks is None:
            self._callbacks = [cb]
        else:
            self._callbacks.append(cb)

    def __repr__(self) -> str:
        return f"Reply({self.response!r})" if self.done else "Reply(<parked>)"
