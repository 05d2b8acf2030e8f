from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = Path(os.environ.get("KCOORD_SCHEMAS", ROOT.parent / "shared" / "kafka-schemas"))

# "ci" runs the full counts the issues ask for; "dev" is the same (set KCOORD_HYPOTHESIS=quick to shrink).
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("quick", deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("KCOORD_HYPOTHESIS", "default"))


# ---- a run stopped by Ctrl-C or SIGTERM ends within seconds and leaves nothing behind ---------------------------

def _interrupted(signum, frame) -> None:
    """SIGTERM as Ctrl-C: pytest unwinds, so every fixture's teardown runs (the private PostgreSQL stops and its
    directory goes, servers stop). The default SIGTERM would end the process there and leave them running."""
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupted)


def reap_children(grace: float = 5.0) -> list[int]:
    """Stop every process this one started and has not waited for (a server or a client peer a test left behind,
    or whose test was interrupted): SIGTERM, then SIGKILL after `grace` seconds. The pids it found."""
    from .support.postgres import _children

    found = _children(os.getpid())
    for pid in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    alive = list(found)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _running(p)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in found:
        _running(pid)  # reap it, so no zombie is left either
    return found


def _running(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:  # not ours to wait for (already reaped): is it still there?
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


@pytest.fixture(scope="session", autouse=True)
def _no_child_outlives_the_run():
    """The last teardown of the session: whatever subprocess is still running is stopped."""
    yield
    reap_children()


@pytest.fixture(scope="session")
def schemas_dir() -> Path:
    if not (SCHEMAS / "JoinGroupRequest.json").exists():
        pytest.fail(f"the official Kafka schemas are missing at {SCHEMAS} (set KCOORD_SCHEMAS)")
    return SCHEMAS


def _without(reason: str) -> None:
    """Skip for want of `reason`; in CI (KCOORD_CI) fail instead, so nothing is skipped there unseen."""
    if os.environ.get("KCOORD_CI"):
        pytest.fail(f"CI needs it: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server (Debian's binaries; .ci/run installs them), started once per session."""
    from .support.postgres import Postgres, find_binaries

    if find_binaries() is None:
        _without("PostgreSQL's binaries (initdb, pg_ctl, postgres) are not installed (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _without("psycopg is not installed (pip install -e '.[test]')")
    server = Postgres()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_dsn(postgres_server):
    """A fresh database of its own on the session's PostgreSQL server, as a libpq URL; dropped afterwards."""
    import uuid

    name = f"t_{uuid.uuid4().hex[:16]}"
    yield postgres_server.create_database(name)
    if not postgres_server.running:  # the test stopped or crashed the server: the tests after it need it
        postgres_server.start()
    postgres_server.drop_database(name)


@pytest.fixture(params=["asyncio", "uvloop"])
def fresh_server(request):
    """`kcoord serve` of the test's own under each event loop, with a 500 ms initial rebalance delay: the window in
    which a second member's join must arrive for both to share a generation (wait_parked makes the first one's
    join arrive first)."""
    from .support import servers

    proc, port = servers.start("group.initial.rebalance.delay.ms=500", loop=request.param)
    yield port
    assert servers.stop(proc) == 0
