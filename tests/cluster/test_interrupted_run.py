"""A run of the suite stopped by Ctrl-C or SIGTERM ends within seconds and leaves nothing behind: not the private
PostgreSQL (its processes and directory), not a `kcoord serve` child (issue 34)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..support.postgres import _alive as alive

ROOT = Path(__file__).resolve().parents[2]
STOP_WITHIN_S = 30.0  # a bound on waiting, not a speed target: the run ends in a few seconds


def _sigint_at_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_stopped_run_leaves_no_postgres_and_no_server(postgres_server, tmp_path, how) -> None:
    report = tmp_path / "report"
    # Its own session (as a terminal's foreground job is its own process group): Ctrl-C reaches the whole group
    # SIGINT at its default in the run, as in a terminal's foreground job: a process started with it ignored (a
    # background job of a non-interactive shell, or whatever this worker inherited) passes SIG_IGN on, and Python
    # then never turns a Ctrl-C into KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "tests/support/interrupted_run.py"], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "KCOORD_INTERRUPTED_REPORT": str(report)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_sigint_at_default)
    try:
        deadline = time.monotonic() + 120
        while not report.exists() or not report.read_text().endswith("\n"):
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "the run never reached its test"
            time.sleep(0.1)
        pg, server, base = report.read_text().split()
        pg, server = int(pg), int(server)
        assert alive(pg) and alive(server) and Path(base).is_dir()
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)  # to pytest alone, as a service manager or CI runner stops it
        else:
            os.killpg(proc.pid, signal.SIGINT)  # to the whole foreground group, as a terminal's Ctrl-C
        try:
            proc.wait(STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the run did not end within {STOP_WITHIN_S:g} s of {how} (this worker's SIGINT handler: "
                        f"{signal.getsignal(signal.SIGINT)!r}); its output:\n"
                        f"{proc.stdout.read().decode(errors='replace')[-6000:]}")
        out = proc.stdout.read().decode()
        deadline = time.monotonic() + 10
        while (alive(pg) or alive(server)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pg), f"PostgreSQL ({pg}) outlived the run:\n{out}"
        assert not alive(server), f"kcoord serve ({server}) outlived the run:\n{out}"
        assert not Path(base).exists(), f"PostgreSQL's directory {base} outlived the run"
        assert "Traceback" not in out.split("KeyboardInterrupt")[0] or "KeyboardInterrupt" in out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
