"""Run by tests/cluster/test_interrupted_run.py in a pytest of its own, which is then stopped by a signal: a test
holding the suite's private PostgreSQL (a database of it) and a `kcoord serve` child, that waits to be interrupted. Not
collected by the suite itself (its name does not start with test_)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .servers import free_port, serve


def test_waits_holding_postgres_and_a_server(pg_dsn, postgres_server, tmp_path) -> None:
    srv = serve(free_port(), tmp_path / "server.log")
    report = Path(os.environ["KCOORD_INTERRUPTED_REPORT"])
    report.write_text(f"{postgres_server.postmaster_pid()} {srv.proc.pid} {postgres_server.base}\n")
    time.sleep(600)
