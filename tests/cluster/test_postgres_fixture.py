"""The suite's PostgreSQL (tests/support/postgres.py, the `postgres_server` and `pg_dsn` fixtures) is a real, durable
server: it answers, keeps each test's database apart, and keeps committed rows across a restart and across a crash."""

from __future__ import annotations

import pytest

psycopg = pytest.importorskip("psycopg")


def test_the_server_answers_with_durable_commits(postgres_server, pg_dsn) -> None:
    with psycopg.connect(pg_dsn, connect_timeout=10) as conn:
        assert conn.execute("SHOW fsync").fetchone() == ("on",)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert conn.execute("SELECT current_database()").fetchone()[0] == pg_dsn.rsplit("/", 1)[1]
    assert pg_dsn.startswith(f"postgresql://kcoord@127.0.0.1:{postgres_server.port}/")


@pytest.fixture
def other_dsn(postgres_server):
    name = "t_other_database"
    yield postgres_server.create_database(name)
    postgres_server.drop_database(name)


def test_each_test_gets_a_database_of_its_own(pg_dsn, other_dsn) -> None:
    assert pg_dsn != other_dsn
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(other_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == (None,)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == ("only_here",)


def _commit_row(dsn: str, value: str) -> None:
    with psycopg.connect(dsn) as conn:  # the block commits on leaving
        conn.execute("CREATE TABLE IF NOT EXISTS kept (v text)")
        conn.execute("INSERT INTO kept VALUES (%s)", (value,))


def _rows(dsn: str) -> list[str]:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return [v for (v,) in conn.execute("SELECT v FROM kept ORDER BY v")]


def test_a_committed_row_survives_a_restart(postgres_server, pg_dsn) -> None:
    _commit_row(pg_dsn, "before restart")
    held = psycopg.connect(pg_dsn, autocommit=True)
    try:
        postgres_server.restart()
        with pytest.raises(psycopg.OperationalError):  # the restart really ended the server's sessions
            held.execute("SELECT 1")
    finally:
        held.close()
    assert _rows(pg_dsn) == ["before restart"]
    _commit_row(pg_dsn, "after restart")
    assert _rows(pg_dsn) == ["after restart", "before restart"]


def test_a_committed_row_survives_a_crash(postgres_server, pg_dsn) -> None:
    _commit_row(pg_dsn, "before crash")
    held = psycopg.connect(pg_dsn, autocommit=True)  # a backend is running when the server is killed
    logged = postgres_server.log.stat().st_size
    try:
        postgres_server.kill()
        assert not postgres_server.running
        postgres_server.start()
    finally:
        held.close()
    assert _rows(pg_dsn) == ["before crash"]
    # It was a crash, not a clean shutdown: the server replayed its WAL on the way up.
    with open(postgres_server.log, "rb") as log:
        log.seek(logged)
        assert b"automatic recovery in progress" in log.read()
