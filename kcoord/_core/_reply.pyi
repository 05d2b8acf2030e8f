"""Type stubs for kcoord._core._reply (a response that may not be ready yet)."""

from typing import Any

class Reply:
    response: Any
    done: bool
    version: int
    def __init__(self, response: Any = None, version: int = 0) -> None: ...
    def resolve(self, response: Any) -> None: ...
    def on_done(self, cb: Any) -> None: ...
