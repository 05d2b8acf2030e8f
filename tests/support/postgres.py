"""A private PostgreSQL server for the tests: Debian's PostgreSQL binaries, `initdb` into a temporary directory,
started on a free loopback port with durable commits (fsync on). Never a mock.

PostgreSQL refuses to run as root; the suite runs as root on CI machines, so there the server's programs run as the
`postgres` system user (created by Debian's package) through `runuser`, and its directory is given to that user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_USER = "kcoord"  # the superuser initdb creates; connections are trusted, so no password
SYSTEM_USER = "postgres"  # who runs the server when the suite runs as root
PROGRAMS = ("initdb", "pg_ctl", "postgres")
SETTINGS = ("-c fsync=on -c synchronous_commit=on -c max_connections=200 -c shared_buffers=64MB")


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.parent.name)) or (0,)


def find_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres: Debian's newest /usr/lib/postgresql/N/bin, else PATH's."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=_version, reverse=True)
    for pg_ctl in found:
        if all(os.access(pg_ctl.parent / p, os.X_OK) for p in PROGRAMS):
            return pg_ctl.parent
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        bindir = Path(on_path).resolve().parent
        if all(os.access(bindir / p, os.X_OK) for p in PROGRAMS):
            return bindir
    return None


class Postgres:
    """One PostgreSQL server in its own temporary directory (data, socket, log), on one loopback port for life."""

    def __init__(self, bindir: Path | None = None) -> None:
        found = bindir or find_binaries()
        if found is None:
            raise RuntimeError("PostgreSQL's binaries (initdb, pg_ctl, postgres) are not installed")
        self.bindir = found
        self.port = free_port()
        self.owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self.owner = pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                raise RuntimeError(f"running as root, PostgreSQL needs the {SYSTEM_USER!r} system user "
                                   "(Debian's postgresql package creates it)") from None
        # mkdtemp makes the directory 0700; the server's user must get in (and, as root, owns it).
        self.base = Path(tempfile.mkdtemp(prefix="kcoord-pg-"))
        self.base.chmod(0o755)
        self.data = self.base / "data"
        self.sockets = self.base / "sockets"
        self.sockets.mkdir(mode=0o755)
        self.log = self.base / "postgres.log"
        self.log.touch()
        if self.owner is not None:
            for p in (self.base, self.sockets, self.log):
                os.chown(p, self.owner.pw_uid, self.owner.pw_gid)
        self.initialized = False

    # -- running the server's programs ---------------------------------------------------------------------------

    def _run(self, program: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / program), *args]
        if self.owner is not None:
            cmd = ["runuser", "-u", self.owner.pw_name, "--", *cmd]
        # cwd: the server's user may not be allowed into the suite's working directory (root's home).
        env = {**os.environ, "LC_ALL": "C", "PGTZ": "UTC"}
        return subprocess.run(cmd, cwd=self.base, env=env, capture_output=True, text=True, timeout=timeout)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError as e:
            return f"(no server log: {e})"

    def _check(self, done: subprocess.CompletedProcess, what: str) -> None:
        if done.returncode != 0:
            raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                               f"--- server log {self.log} ---\n{self.log_tail()}")

    # -- life cycle ----------------------------------------------------------------------------------------------

    def start(self) -> Postgres:
        if not self.initialized:
            self._check(self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", PG_USER, "-E", "UTF8",
                                  "--locale=C", "--no-sync"), "initdb")
            self.initialized = True
        self._remove_stale_locks()
        options = f"-p {self.port} -k {self.sockets} -h 127.0.0.1 {SETTINGS}"
        self._check(self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log),
                              "-o", options, "start"), f"starting PostgreSQL on 127.0.0.1:{self.port}")
        return self

    def _remove_stale_locks(self) -> None:
        """Remove the lock files (postmaster.pid, the socket's .lock) of a killed server whose process is a zombie.

        PostgreSQL removes a lock file whose PID is gone, but a zombie's PID still answers kill(pid, 0). The
        postmaster pg_ctl starts outlives pg_ctl and is adopted by PID 1; where PID 1 reaps no orphans (some
        container and microVM inits), a killed postmaster stays a zombie and would block every later start."""
        for lock in (self.data / "postmaster.pid", *self.sockets.glob(".s.PGSQL.*.lock")):
            try:
                pid = int(lock.read_text().split("\n", 1)[0])
            except (OSError, ValueError):
                continue
            if not _alive(pid):
                lock.unlink(missing_ok=True)

    def stop(self, mode: str = "fast") -> None:
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"pg_ctl stop mode {mode!r}")
        self._check(self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-m", mode, "stop"),
                    f"stopping PostgreSQL ({mode})")

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid (the first line of postmaster.pid), or None when it is not running."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    @property
    def running(self) -> bool:
        return self.postmaster_pid() is not None

    def kill(self, timeout: float = 30.0) -> None:
        """Crash the server: SIGKILL to the postmaster and to every process it forked (each backend runs in a
        session of its own, so no process group holds them all), then wait until they are gone. postmaster.pid
        and the unflushed state stay behind, as after a power cut; the next start() recovers from the WAL."""
        pid = self.postmaster_pid()
        if pid is None:
            raise RuntimeError("PostgreSQL is not running")
        os.kill(pid, signal.SIGSTOP)  # stopped, the postmaster forks no backend between the listing and the kill
        doomed = [pid, *_children(pid)]
        for p in doomed:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while any(_alive(p) for p in doomed):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL (pid {pid}) still running {timeout} s after SIGKILL")
            time.sleep(0.01)

    def close(self) -> None:
        try:
            if self.running:
                self.stop("immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    # -- clients -------------------------------------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name`; returns its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE `name`, disconnecting whoever is still connected to it."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def __enter__(self) -> Postgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (killed, not yet reaped by its new parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc; elsewhere none are found)."""
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out
