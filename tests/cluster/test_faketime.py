"""The fault harness's wall-clock shifter (tests/support/faketime.py): a process started with WallClock.env() reads
true time until shift(), then runs that many seconds off true time (an absolute offset), its wall clock still
ticking, while its monotonic clock stays the system's; kcoord's command line runs under the preload."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ..support import faketime
from ..support.faketime import WallClock, library, offset_text
from ..support.servers import ROOT

# Answers each line on stdin with "time.time() time.monotonic()".
CLOCKS = ("import sys, time\n"
          "for _ in sys.stdin:\n"
          "    print(time.time(), time.monotonic(), flush=True)\n")
CLOSE = 1.0  # seconds: how far apart two readings of one clock, in two processes, may be taken


class Child:
    def __init__(self, clock: WallClock) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CLOCKS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **clock.env()})

    def read(self) -> tuple[float, float, float, float]:
        """(the child's time.time(), its time.monotonic(), ours, ours) read around one request."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the child ended: {self.proc.wait(10)}, {self.proc.stderr.read() if self.proc.stderr else ''}"
        wall, mono = map(float, line.split())
        return wall, mono, time.time(), time.monotonic()

    def close(self) -> str:
        """Ends the child (EOF on its stdin); its stderr."""
        try:
            _, err = self.proc.communicate(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        assert self.proc.returncode == 0, err
        return err


def test_the_library_is_the_installed_packages() -> None:
    path = library()
    assert path.name == "libfaketime.so.1" and path.is_file()
    assert path.read_bytes()[:4] == b"\x7fELF"


def test_a_missing_package_is_named(monkeypatch) -> None:
    monkeypatch.setattr(faketime, "PACKAGE", "libfaketime_not_installed")
    with pytest.raises(RuntimeError, match="libfaketime_not_installed"):
        library()


def test_the_timestamp_file_holds_the_absolute_offset(tmp_path) -> None:
    clock = WallClock(tmp_path)
    assert clock.offset == 0.0 and clock.path.read_text() == "+0s\n"
    clock.shift(-3600)
    assert clock.offset == -3600.0 and clock.path.read_text() == "-3600s\n"
    clock.shift(7200)
    assert clock.offset == 7200.0 and clock.path.read_text() == "+7200s\n"
    clock.shift(-1.5)
    assert clock.path.read_text() == "-1.500000s\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [clock.path.name]  # no temporary file left behind
    assert [offset_text(s) for s in (0, 0.25, -86400, 1e9)] == ["+0s", "+0.250000s", "-86400s", "+1000000000s"]
    env = clock.env()
    assert env["LD_PRELOAD"].split(":")[0] == str(library())
    assert env["FAKETIME_TIMESTAMP_FILE"] == str(clock.path)
    assert env["FAKETIME_NO_CACHE"] == "1" and env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"


def test_a_shift_moves_the_wall_clock_and_not_the_monotonic_one(tmp_path) -> None:
    clock = WallClock(tmp_path)
    child = Child(clock)
    try:
        readings = []
        for offset in (None, -3600, 7200, 0):
            if offset is not None:
                clock.shift(offset)
            for _ in range(2):
                wall, mono, true_wall, true_mono = child.read()
                assert abs(wall - (true_wall + (offset or 0))) < CLOSE, (offset, wall, true_wall)
                assert abs(mono - true_mono) < CLOSE, (offset, mono, true_mono)  # the system's monotonic clock
                readings.append((wall, mono))
                time.sleep(0.2)
        # the monotonic clock never jumps back, and the shifted wall clock ticks on (it is not frozen at the shift)
        monos = [m for _, m in readings]
        assert monos == sorted(monos)
        for i in range(0, len(readings), 2):  # two readings at one offset: the wall clock moved as the monotonic did
            (w0, m0), (w1, m1) = readings[i], readings[i + 1]
            assert w1 > w0 and abs((w1 - w0) - (m1 - m0)) < 0.1, (i, readings)
    finally:
        err = child.close()
    assert err == ""  # libfaketime said nothing


@pytest.mark.parametrize("args", [("--version",), ("apis", "--json")])
def test_kcoords_command_line_runs_under_the_preload(tmp_path, args) -> None:
    clock = WallClock(tmp_path)
    clock.shift(-3600)
    plain = subprocess.run([sys.executable, "-m", "kcoord.cli", *args], capture_output=True, text=True, timeout=60,
                           cwd=ROOT, check=False)
    shifted = subprocess.run([sys.executable, "-m", "kcoord.cli", *args], capture_output=True, text=True,
                             timeout=60, cwd=ROOT, env={**os.environ, **clock.env()}, check=False)
    assert (shifted.returncode, shifted.stderr) == (0, ""), shifted.stderr
    assert shifted.stdout == plain.stdout and plain.returncode == 0
