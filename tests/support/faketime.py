"""One process's wall clock, shifted at runtime: libfaketime (PyPI `libfaketime`, a test-only dependency, GPLv2,
LD_PRELOAD'ed into that process only, never linked or shipped) reads an offset from a file of ours at every clock
call, so the fault harness can step a node's wall clock as an NTP step would while the node runs, and show that its
leases do not depend on it.

Only the wall clock moves (CLOCK_REALTIME: time.time(), datetime.now()); CLOCK_MONOTONIC stays true
(FAKETIME_DONT_FAKE_MONOTONIC=1), as it does on a real machine whose clock is stepped. Linux only.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SONAME = "libfaketime.so.1"
PACKAGE = "libfaketime"  # PyPI libfaketime 3.0.1 (pyproject's test extra): ships a prebuilt .so under vendor/
TIMESTAMP_FILE = "faketime.timestamp"


def library() -> Path:
    """The libfaketime shared library of the installed `libfaketime` package, found without importing it (its
    import pulls dateutil and pytz); RuntimeError naming what is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the Python package {PACKAGE!r} (PyPI libfaketime==3.0.1, pyproject's test extra) "
                           "is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "vendor" / "libfaketime" / "src" / SONAME
    if not path.is_file():
        raise RuntimeError(f"{SONAME} is missing from the installed {PACKAGE!r} package: no {path}")
    return path


def offset_text(seconds: float) -> str:
    """libfaketime's relative form of an offset: "+0s", "-3600s", "+1.500000s" (fixed point: libfaketime reads it
    with atof and scales it by any of the letters m, h, d, y it finds, so no exponent and no other letter)."""
    if seconds == int(seconds):
        return f"{int(seconds):+d}s"
    return f"{seconds:+.6f}s"


class WallClock:
    """The wall clock of one subprocess: start it with env() added to its environment, then shift() it at will.

    The offset is absolute (shift(-3600) then shift(+7200) leaves the clock two hours ahead of true time, not one)
    and takes effect at the process's next clock call: FAKETIME_NO_CACHE=1 makes libfaketime read the file at every
    call. The file is replaced atomically (a temporary file renamed over it), so the process never reads half of
    one: a missing or empty file would make libfaketime fall back to ~/.faketimerc or to the true time."""

    def __init__(self, workdir: Path) -> None:
        self.path = Path(workdir) / TIMESTAMP_FILE
        self.offset = 0.0
        self._write()

    def env(self) -> dict[str, str]:
        """What to add to the subprocess's environment (an LD_PRELOAD already in os.environ is kept, after ours)."""
        preload = str(library())
        if os.environ.get("LD_PRELOAD"):
            preload = f"{preload}:{os.environ['LD_PRELOAD']}"
        return {
            "LD_PRELOAD": preload,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def shift(self, seconds: float) -> None:
        """From now on the process's wall clock is `seconds` off true time (negative: behind)."""
        self.offset = float(seconds)
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(offset_text(self.offset) + "\n")
        os.replace(tmp, self.path)

    def __repr__(self) -> str:
        return f"WallClock({self.path}, offset {self.offset:+g}s)"
