"""SCRAM credentials (issue 31): KIP-554's admin APIs (DescribeUserScramCredentials, AlterUserScramCredentials)
with the semantics of Kafka's controller (ScramControlManager.alterCredentials) and metadata image
(ScramImage.describe), case by case against a real `kcoord serve`; the credential records through a restart,
`kcoord store check` and `compact`; `kcoord users` add/list/delete end to end (the password from a file, from stdin
and typed at a terminal prompt), online and offline (`--data-dir`, the first administrator before the first start);
every CLI mistake one line; no password nor SaltedPassword in any log or output; confluent-kafka's AdminClient as
the interop peer."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import records as R
from kcoord import wire
from kcoord.client import Client
from kcoord.coordinator import Coordinator
from kcoord.security.credentials import Credentials
from kcoord.security.scram import credential, salted_password
from kcoord.store import GroupStore, SqliteRecords

from ..support.cli import one_line
from ..support.servers import ROOT, Server, free_port, serve

SHA256, SHA512 = 1, 2
# RFC 7677's example (user / pencil): what the server must derive from the SaltedPassword it is sent
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_STORED_KEY = base64.b64decode("WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=")
RFC_SERVER_KEY = base64.b64decode("wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=")
PASSWORD = "pencil-Sekr3t-\u00e9\u6f22"  # a password no log may contain (nor its SaltedPassword)
SECRETS: list[bytes] = []  # every password and SaltedPassword the tests send, looked for in every log and output


def remember(password: str, *salted: bytes) -> None:
    """Look for `password` and each SaltedPassword as they would show: raw, in a JSON log line (escaped), as hex,
    base64 or a Python repr."""
    forms = [password] if password else []
    for s in salted:
        if s:
            forms += [s.hex(), base64.b64encode(s).decode(), repr(s), s.decode("latin-1")]
    for text in forms:
        SECRETS.extend({text.encode("utf-8", "surrogateescape"), json.dumps(text)[1:-1].encode()})


# ---- a server and its clients -------------------------------------------------------------------------------

def start(data_dir: Path, log: Path) -> Server:
    return serve(free_port(), log, "--data-dir", str(data_dir), "--log-level", "DEBUG", "--log-format", "json")


def stop(srv: Server) -> None:
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    where = tmp_path_factory.mktemp("scram")
    srv = start(where / "data", where / "server.log")
    yield srv
    stop(srv)
    assert_no_secrets(srv.log.read_bytes(), "the server log")


def assert_no_secrets(data: bytes, what: str) -> None:
    for s in SECRETS:
        assert s not in data, f"{what} holds a password or SaltedPassword ({s[:8]!r}...)"


def upsertion(name: str, mechanism: int = SHA512, iterations: int = 4096, password: str = PASSWORD,
              salt: bytes = b"salt-0123456789", salted: bytes | None = None):
    if salted is None:
        salted = salted_password(mechanism, password, salt, iterations) if mechanism in (1, 2) else b"x" * 32
    remember(password, salted)
    return wire.AlterUserScramCredentialsRequestScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def deletion(name: str, mechanism: int = SHA512):
    return wire.AlterUserScramCredentialsRequestScramCredentialDeletion(name=name, mechanism=mechanism)


def alter(srv: Server, deletions=(), upsertions=()) -> dict[str, tuple[int, str | None]]:
    """user -> (error code, message); the response holds one result per user."""
    with Client(srv.bootstrap) as c:
        r = c.request(wire.AlterUserScramCredentialsRequest(deletions=list(deletions), upsertions=list(upsertions)),
                      0)
    users = [x.user for x in r.results]
    assert len(users) == len(set(users)), f"a user answered twice: {users}"
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe_raw(srv: Server, users: list[str] | None):
    with Client(srv.bootstrap) as c:
        return c.request(wire.DescribeUserScramCredentialsRequest(
            users=None if users is None else [wire.DescribeUserScramCredentialsRequestUserName(name=u)
                                              for u in users]), 0)


def describe(srv: Server, users: list[str] | None = None) -> dict[str, object]:
    """user -> {mechanism: iterations}, or (error code, message) for a refused one."""
    r = describe_raw(srv, users)
    assert r.error_code == 0, r
    return {x.user: {ci.mechanism: ci.iterations for ci in x.credential_infos} if not x.error_code
            else (x.error_code, x.error_message) for x in r.results}


_n = iter(range(1_000_000))


def new_user(what: str) -> str:
    return f"{what}-{next(_n)}"


# ---- AlterUserScramCredentials, case by case ------------------------------------------------------------------

def test_an_upsertion_is_described_with_its_mechanism_and_iterations_only(server) -> None:
    u = new_user("alice")
    assert alter(server, upsertions=[upsertion(u, SHA512, 8192)]) == {u: (0, None)}
    assert describe(server, [u]) == {u: {SHA512: 8192}}
    v = new_user("bob")
    assert alter(server, upsertions=[upsertion(v, SHA256)]) == {v: (0, None)}
    assert alter(server, upsertions=[upsertion(v, SHA512, 5000)]) == {v: (0, None)}  # a second mechanism
    assert describe(server, [v]) == {v: {SHA256: 4096, SHA512: 5000}}
    assert alter(server, upsertions=[upsertion(v, SHA512, 6000)]) == {v: (0, None)}  # replaced
    assert describe(server, [v]) == {v: {SHA256: 4096, SHA512: 6000}}


REFUSALS = {  # the request's upsertion/deletion -> Kafka's error and message (ScramControlManager)
    "empty name": (lambda u: ([], [upsertion("")]), "", E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    "empty name deleted": (lambda u: ([deletion("")], []), "", E.UNACCEPTABLE_CREDENTIAL,
                           "Username must not be empty"),
    "mechanism 0": (lambda u: ([], [upsertion(u, 0)]), None, E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    "mechanism 3": (lambda u: ([], [upsertion(u, 3)]), None, E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    "mechanism -1 deleted": (lambda u: ([deletion(u, -1)], []), None, E.UNSUPPORTED_SASL_MECHANISM,
                             "Unknown SCRAM mechanism"),
    "4095 iterations": (lambda u: ([], [upsertion(u, SHA256, 4095)]), None, E.UNACCEPTABLE_CREDENTIAL,
                        "Too few iterations"),
    "16385 iterations": (lambda u: ([], [upsertion(u, SHA512, 16385)]), None, E.UNACCEPTABLE_CREDENTIAL,
                         "Too many iterations"),
    "negative iterations": (lambda u: ([], [upsertion(u, SHA512, -1, salted=b"x" * 64)]), None,
                            E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    "deleting a missing one": (lambda u: ([deletion(u)], []), None, E.RESOURCE_NOT_FOUND,
                               "Attempt to delete a user credential that does not exist"),
    "upserted twice": (lambda u: ([], [upsertion(u), upsertion(u)]), None, E.DUPLICATE_RESOURCE,
                       "A user credential cannot be altered twice in the same request"),
    "two mechanisms at once": (lambda u: ([], [upsertion(u, SHA256), upsertion(u, SHA512)]), None,
                               E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
    # an empty SaltedPassword: Kafka's HMAC key (SecretKeySpec) refuses it; UNKNOWN_SERVER_ERROR, no message
    "empty salted password": (lambda u: ([], [upsertion(u, salted=b"")]), None, E.UNKNOWN_SERVER_ERROR, None),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_each_refusal_is_kafkas_and_changes_nothing(server, case) -> None:
    make, name, code, message = REFUSALS[case]
    u = new_user("refused") if name is None else name
    before = describe(server)
    dels, ups = make(u)
    assert alter(server, dels, ups) == {u: (code, message)}
    assert describe(server) == before


def test_a_user_deleted_and_upserted_in_one_request_is_a_duplicate_and_keeps_its_credential(server) -> None:
    u = new_user("dup")
    assert alter(server, upsertions=[upsertion(u, SHA256)]) == {u: (0, None)}
    got = alter(server, [deletion(u, SHA256)], [upsertion(u, SHA512)])
    assert got == {u: (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    got = alter(server, [deletion(u, SHA256), deletion(u, SHA512)])
    assert got == {u: (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    assert describe(server, [u]) == {u: {SHA256: 4096}}


def test_a_users_first_error_stands_over_a_later_mention(server) -> None:
    """Kafka's maps: once a user has an error, its later mentions are passed over (not DUPLICATE_RESOURCE)."""
    u = new_user("first")
    got = alter(server, [deletion(u)], [upsertion(u), upsertion(u)])
    assert got == {u: (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    got = alter(server, upsertions=[upsertion(u, SHA512, 100), upsertion(u)])
    assert got == {u: (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")}
    assert describe(server, [u]) == {u: (E.RESOURCE_NOT_FOUND,
                                         f"Attempt to describe a user credential that does not exist: {u}")}


def test_deletions_then_upsertions_valid_ones_applied_beside_refused_ones(server) -> None:
    a, b, c, d = (new_user(x) for x in "abcd")
    assert alter(server, upsertions=[upsertion(a), upsertion(b, SHA256)]) == {a: (0, None), b: (0, None)}
    got = alter(server, [deletion(a), deletion(c)], [upsertion(d, SHA256, 10000), upsertion(b, 7)])
    assert got == {a: (0, None), d: (0, None),
                   c: (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
                   b: (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}
    assert describe(server, [a, b, d]) == {
        a: (E.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {a}"),
        b: {SHA256: 4096}, d: {SHA256: 10000}}
    assert alter(server, [deletion(b, SHA512)]) == {
        b: (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}  # the other mechanism
    assert alter(server, [deletion(b, SHA256)]) == {b: (0, None)}
    assert b not in describe(server)


# ---- DescribeUserScramCredentials ------------------------------------------------------------------------------

def test_describe_null_or_empty_is_every_user_duplicates_and_missing_ones_are_refused(server) -> None:
    u, v = new_user("every"), new_user("every")
    alter(server, upsertions=[upsertion(u), upsertion(v, SHA256)])
    everyone = describe(server, None)
    assert everyone == describe(server, [])
    assert everyone[u] == {SHA512: 4096} and everyone[v] == {SHA256: 4096}
    assert all(isinstance(x, dict) for x in everyone.values())  # only users that have a credential
    missing = new_user("missing")
    r = describe_raw(server, [u, missing, u, v, u])
    assert r.error_code == 0 and r.error_message is None
    assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
        (u, E.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                  f"{u}"),
        (missing, E.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {missing}"),
        (v, 0, None)]
    assert r.results[0].credential_infos == [] and r.results[1].credential_infos == []


def test_salts_and_keys_never_leave_the_server(server) -> None:
    salt = b"a-salt-to-look-for-0123"
    u = new_user("secret")
    up = upsertion(u, SHA256, 4096, salt=salt)
    stored = credential(SHA256, PASSWORD, salt, 4096)
    alter(server, upsertions=[up])
    with Client(server.bootstrap) as c:  # the raw response bytes
        c.send(50, 0, wire.DescribeUserScramCredentialsRequest(users=None))
        size = int.from_bytes(c._exact(4), "big")
        raw = c._exact(size)
    for secret in (salt, up.salted_password, stored.stored_key, stored.server_key):
        assert secret not in raw


# ---- a full store ------------------------------------------------------------------------------------------

def test_while_the_store_cannot_write_an_alteration_is_refused_and_changes_nothing() -> None:
    coord = Coordinator()
    refuse = coord.write_refusals(E.COORDINATOR_NOT_AVAILABLE)[51]
    r = refuse(wire.AlterUserScramCredentialsRequest(deletions=[deletion("b")], upsertions=[upsertion("a")]), 0)
    assert [(x.user, x.error_code) for x in r.results] == [("a", E.COORDINATOR_NOT_AVAILABLE),
                                                           ("b", E.COORDINATOR_NOT_AVAILABLE)]
    assert len(coord.credentials) == 0


# ---- records: the server derives Kafka's keys, and they survive a restart, check and compact ----------------

def stored_credentials(data_dir: Path) -> dict[tuple[str, int], R.ScramCredentialRecord]:
    store = GroupStore(SqliteRecords(str(data_dir), create=False))
    try:
        return {rec.key: rec.value for rec in map(lambda kv: R.decode(*kv), store.scan()) if rec.kind == "scram"}
    finally:
        store.close()


def test_records_survive_a_restart_check_and_compact(tmp_path) -> None:
    data = tmp_path / "data"
    srv = start(data, tmp_path / "server.log")
    try:
        up = upsertion("user", SHA256, 4096, "pencil", RFC_SALT)  # RFC 7677's example
        assert alter(srv, upsertions=[up, upsertion("other", SHA512, 12000)]) == {"user": (0, None),
                                                                                    "other": (0, None)}
        assert alter(srv, upsertions=[upsertion("gone", SHA256)]) == {"gone": (0, None)}
        assert alter(srv, [deletion("gone", SHA256)]) == {"gone": (0, None)}
        before = describe(srv)
    finally:
        stop(srv)
    recs = stored_credentials(data)
    assert set(recs) == {("user", SHA256), ("other", SHA512)}
    rfc = recs[("user", SHA256)]
    assert (rfc.salt, rfc.stored_key, rfc.server_key, rfc.iterations) == (RFC_SALT, RFC_STORED_KEY, RFC_SERVER_KEY,
                                                                           4096)
    assert "hidden" in repr(rfc) and RFC_STORED_KEY.hex() not in repr(rfc)
    check = subprocess.run([sys.executable, "-m", "kcoord.cli", "store", "check", str(data), "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert check.returncode == 0 and json.loads(check.stdout)["ok"], check.stdout + check.stderr
    compact = subprocess.run([sys.executable, "-m", "kcoord.cli", "store", "compact", str(data)],
                             capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert compact.returncode == 0, compact.stderr
    assert stored_credentials(data) == recs
    srv = start(data, tmp_path / "server.log")
    try:
        assert describe(srv) == before == {"user": {SHA256: 4096}, "other": {SHA512: 12000}}
    finally:
        stop(srv)
    assert_no_secrets((tmp_path / "server.log").read_bytes(), "the server log")


def test_a_damaged_credential_record_is_named_on_load() -> None:
    key = R.scram_credential_key("u", SHA256)
    good = R.scram_credential_value(b"s", b"k" * 32, b"v" * 32, 4096)
    assert R.decode(key, good).value.user == "u"
    for bad_key, bad_value in ((key, good[:-1]), (key, good + b"x"), (key[:-1] + b"\x07", good),
                               (key + b"x", good), (key, b"\x00\x01" + good[2:])):
        with pytest.raises(R.RecordError, match=key[:4].hex()):
            R.decode(bad_key, bad_value)


# ---- kcoord users ------------------------------------------------------------------------------------------------

def users(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "kcoord.cli", "users", *args], capture_output=True, timeout=timeout,
                       cwd=ROOT, check=False, input=None if stdin is None else stdin.encode(),
                       stdin=subprocess.DEVNULL if stdin is None else None)
    assert_no_secrets(r.stdout + r.stderr, f"`kcoord users {' '.join(args)}`")
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0 and not r.stderr, f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def listed(srv: Server) -> dict[str, dict[str, int]]:
    out = json.loads(ok(users("list", "--json", "--bootstrap", srv.bootstrap)))
    found: dict[str, dict[str, int]] = {}
    for row in out["users"]:
        found.setdefault(row["user"], {})[row["mechanism"]] = row["iterations"]
    return found


def password_file(tmp_path: Path, text: str) -> str:
    remember(text.strip("\n"))
    p = tmp_path / f"pw-{next(_n)}"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_users_add_list_delete_with_a_password_file(server, tmp_path) -> None:
    u = new_user("cli")
    pw = password_file(tmp_path, PASSWORD + "\n")
    out = ok(users("add", u, "--password-file", pw, "--bootstrap", server.bootstrap))
    assert u in out and "SCRAM-SHA-512" in out and "4096" in out
    ok(users("add", u, "--password-file", pw, "--mechanism", "scram-sha-256", "--iterations", "8192",
             "--bootstrap", server.bootstrap))
    assert listed(server)[u] == {"SCRAM-SHA-512": 4096, "SCRAM-SHA-256": 8192}
    assert describe(server, [u]) == {u: {SHA512: 4096, SHA256: 8192}}
    text = ok(users("list", "--bootstrap", server.bootstrap))
    assert text.splitlines()[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert [u, "SCRAM-SHA-256", "8192"] in [line.split() for line in text.splitlines()]
    ok(users("delete", u, "--mechanism", "SCRAM-SHA-256", "--bootstrap", server.bootstrap))
    assert listed(server)[u] == {"SCRAM-SHA-512": 4096}
    ok(users("add", u, "--password-file", pw, "--mechanism", "SCRAM-SHA-256", "--bootstrap", server.bootstrap))
    out = json.loads(ok(users("delete", u, "--json", "--bootstrap", server.bootstrap)))  # every mechanism
    assert out == {"user": u, "deleted": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
    assert u not in listed(server)


def test_the_credential_set_by_the_cli_is_the_passwords(tmp_path) -> None:
    """What `kcoord users add` sends is the SaltedPassword of the password read: the stored keys are the
    password's with the stored salt (checked offline, where the record can be read)."""
    pw = password_file(tmp_path, PASSWORD + "\r\n")  # a Windows line end is not part of the password
    ok(users("add", "admin", "--password-file", pw, "--mechanism", "SCRAM-SHA-256", "--iterations", "4100",
             "--data-dir", str(tmp_path / "data")))
    rec = stored_credentials(tmp_path / "data")[("admin", SHA256)]
    assert len(rec.salt) >= 16
    want = credential(SHA256, PASSWORD, rec.salt, 4100)
    assert (rec.stored_key, rec.server_key, rec.iterations) == (want.stored_key, want.server_key, 4100)


def test_users_add_reads_stdin_when_it_is_not_a_terminal(server) -> None:
    u = new_user("stdin")
    remember("from-a-pipe")
    ok(users("add", u, "--bootstrap", server.bootstrap, stdin="from-a-pipe\n"))
    assert listed(server)[u] == {"SCRAM-SHA-512": 4096}


def run_on_a_terminal(args: list[str], answers: list[str], timeout: float = 30) -> tuple[int, str]:
    """`kcoord ARGS` with a pseudo-terminal as its controlling terminal (getpass reads /dev/tty), answering each
    prompt in turn; (exit status, everything the terminal showed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout, stderr and /dev/tty are the terminal
        try:
            os.chdir(ROOT)
            os.execv(sys.executable, [sys.executable, "-m", "kcoord.cli", *args])
        finally:
            os._exit(127)
    shown = b""
    deadline = time.monotonic() + timeout
    pending = list(answers)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
                if pending and shown.endswith(b": "):  # a prompt (not the line end echoed after an answer)
                    os.write(fd, pending.pop(0).encode() + b"\n")
        else:  # still waiting on the terminal: show what it showed
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_users_add_prompts_twice_on_a_terminal_without_echo(server) -> None:
    u = new_user("tty")
    typed = "typed-at-the-prompt"
    remember(typed)
    code, shown = run_on_a_terminal(["users", "add", u, "--bootstrap", server.bootstrap], [typed, typed])
    assert code == 0, shown
    assert f"Password for {u}:" in shown and "Again:" in shown
    assert typed not in shown  # not echoed
    assert listed(server)[u] == {"SCRAM-SHA-512": 4096}
    code, shown = run_on_a_terminal(["users", "add", u, "--bootstrap", server.bootstrap], [typed, typed + "x"])
    assert code == 2 and "the two passwords typed differ" in shown, shown


def users_in_process(monkeypatch, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`kcoord users ARGS` run by the CLI's own main in this process (a subprocess start each would take most of a
    second), stdin a pipe holding `stdin`; its exit status, stdout and stderr."""
    from kcoord.cli import main

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["users", *args])
        except SystemExit as e:  # argparse's own mistakes
            code = e.code
    assert_no_secrets((out.getvalue() + err.getvalue()).encode(), f"`kcoord users {' '.join(args)}`")
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_users_mistakes_are_one_line_and_non_zero(server, tmp_path, monkeypatch) -> None:
    pw = password_file(tmp_path, PASSWORD)
    b = ["--bootstrap", server.bootstrap]
    cases = [
        (("add", "x", "--iterations", "100", "--password-file", pw, *b), 2, ["--iterations", "100"]),
        (("add", "x", "--iterations", "lots", "--password-file", pw, *b), 2, ["--iterations", "lots"]),
        (("add", "x", "--iterations", "16385", "--password-file", pw, *b), 2, ["--iterations", "16385"]),
        (("add", "x", "--mechanism", "SCRAM-SHA-1", "--password-file", pw, *b), 2, ["SCRAM-SHA-1"]),
        (("add", "", "--password-file", pw, *b), 2, ["empty"]),
        (("add", "x" * 40_000, "--password-file", pw, *b), 2, ["40000 bytes"]),
        (("add", "x", "--password-file", str(tmp_path / "none"), *b), 2, ["--password-file", "none"]),
        (("add", "x", "--password-file", password_file(tmp_path, ""), *b), 2, ["empty"]),
        (("add", "x", "--password-file", password_file(tmp_path, "a\nb\n"), *b), 2, ["one line"]),
        (("add", "x", "--password-file", str(tmp_path)), 2, ["--password-file", str(tmp_path)]),  # a directory
        (("add", "x", *b), 2, ["stdin", "empty"]),
        (("add", "x", "--password-file", pw, "--data-dir", str(tmp_path / "d"), *b), 2,
         ["--data-dir", "--bootstrap"]),
        (("add", "x", "--password-file", pw, "--data-dir", pw), 2, ["--data-dir", "not a directory"]),
        (("add", "x", "--password-file", pw, "--data-dir", "postgresql://u@h/db"), 2, ["--data-dir", "PostgreSQL"]),
        (("add", "x", "--password-file", pw, "--bootstrap", "nowhere"), 2, ["nowhere"]),
        (("add", "x", "--password-file", pw, "--bootstrap", f"127.0.0.1:{free_port()}"), 1, ["cannot connect"]),
        (("list", "--bootstrap", f"127.0.0.1:{free_port()}"), 1, ["cannot connect"]),
        (("delete", "nobody-here", *b), 1, ["nobody-here", "RESOURCE_NOT_FOUND"]),
        (("delete", "nobody-here", "--mechanism", "SCRAM-SHA-256", *b), 1,
         ["nobody-here", "RESOURCE_NOT_FOUND", "does not exist"]),
        (("delete", "x", "--mechanism", "MD5", *b), 2, ["MD5"]),
        (("frobnicate",), 2, ["frobnicate"]),
        ((), 2, ["kcoord users"]),
    ]
    for args, code, names in cases:
        r = users_in_process(monkeypatch, *args)
        line = one_line(r, code, *names)
        assert line.startswith("kcoord users"), line
        assert r.stdout == "", r.stdout
    assert not (tmp_path / "d").exists()
    # and as the real process: a password on the command line is not an option
    one_line(users("add", "x", "--password", "hunter2", *b), 2, "--password")


# ---- the first administrator, offline -------------------------------------------------------------------------

def test_offline_add_is_served_after_start_and_refused_while_a_server_holds_the_store(tmp_path) -> None:
    data = tmp_path / "data"
    pw = password_file(tmp_path, PASSWORD + "\n")
    out = ok(users("add", "admin", "--password-file", pw, "--data-dir", str(data)))  # no store yet: made
    assert "admin" in out and str(data) in out
    srv = start(data, tmp_path / "server.log")
    try:
        assert describe(srv) == {"admin": {SHA512: 4096}}
        assert listed(srv) == {"admin": {"SCRAM-SHA-512": 4096}}
        r = users("add", "second", "--password-file", pw, "--data-dir", str(data))
        one_line(r, 1, str(data), "in use")
        assert describe(srv) == {"admin": {SHA512: 4096}}
    finally:
        stop(srv)
    ok(users("add", "second", "--password-file", pw, "--data-dir", str(data), "--mechanism", "SCRAM-SHA-256"))
    srv = start(data, tmp_path / "server.log")
    try:
        assert describe(srv) == {"admin": {SHA512: 4096}, "second": {SHA256: 4096}}
    finally:
        stop(srv)
    assert_no_secrets((tmp_path / "server.log").read_bytes(), "the server log")


# ---- confluent-kafka's AdminClient ------------------------------------------------------------------------------

def test_confluent_admin_client_alters_and_describes(server) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    u, v = new_user("confluent"), new_user("confluent")
    salt = b"confluent-salt"
    remember(PASSWORD, salted_password(SHA512, PASSWORD, salt, 10000))
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000),
                                     PASSWORD.encode(), salt),
        UserScramCredentialUpsertion(v, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     PASSWORD.encode())])
    for f in futures.values():
        f.result(timeout=30)
    assert describe(server, [u, v]) == {u: {SHA512: 10000}, v: {SHA256: 4096}}
    assert listed(server)[u] == {"SCRAM-SHA-512": 10000}  # what it set, the CLI lists

    got = admin.describe_user_scram_credentials([u, v])
    desc = {user: f.result(timeout=30) for user, f in got.items()}
    assert [(i.mechanism, i.iterations) for i in desc[u].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 10000)]
    assert [(i.mechanism, i.iterations) for i in desc[v].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]
    everyone = admin.describe_user_scram_credentials().result(timeout=30)
    assert {u, v} <= set(everyone)

    missing = new_user("missing")
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials([missing])[missing].result(timeout=30)
    assert e.value.args[0].code() == E.RESOURCE_NOT_FOUND and missing in e.value.args[0].str()
    with pytest.raises(KafkaException) as e:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            missing, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")])[missing].result(timeout=30)
    assert e.value.args[0].code() == E.UNACCEPTABLE_CREDENTIAL and "Too few iterations" in e.value.args[0].str()

    w = new_user("by-cli")  # what the CLI set, AdminClient describes and deletes
    remember("cli-password")
    ok(users("add", w, "--bootstrap", server.bootstrap, stdin="cli-password\n"))
    assert [(i.mechanism, i.iterations) for i in admin.describe_user_scram_credentials([w])[w].result(
        timeout=30).scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(w, ScramMechanism.SCRAM_SHA_512)])[w].result(
        timeout=30)
    assert w not in listed(server)


# ---- in-process: the table and its records ------------------------------------------------------------------

def test_lookup_and_replay_in_process() -> None:
    from kcoord.store import MemoryRecords

    store = GroupStore(MemoryRecords())
    coord = Coordinator(store=store)
    coord.handle(wire.AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        upsertion("user", SHA256, 4096, "pencil", RFC_SALT)]), 0)
    cred = coord.credentials.lookup("user", SHA256)
    assert (cred.salt, cred.stored_key, cred.server_key) == (RFC_SALT, RFC_STORED_KEY, RFC_SERVER_KEY)
    assert coord.credentials.lookup("user", "SCRAM-SHA-256") == cred
    assert coord.credentials.lookup("user", SHA512) is None and coord.credentials.lookup("nobody", SHA256) is None
    again = Coordinator(store=store)
    again.load()
    assert again.credentials.lookup("user", SHA256) == cred
    fresh = Credentials(store)
    fresh.refresh(store.scan())
    assert fresh.by_user == again.credentials.by_user


# ---- a cluster on PostgreSQL: every node serves every user ------------------------------------------------------

def test_credentials_set_at_one_node_are_served_by_the_others_and_kept(pg_dsn, tmp_path) -> None:
    """Credential records are the cluster's (partition GLOBAL, as the topics), read again by every node when the
    database's version moves; a node started later loads them."""
    from ..support.cluster_nodes import FAST, KCluster, wait_until

    with KCluster(pg_dsn, tmp_path, nodes=2, args=FAST) as cl:
        one, two = (Server(cl.node(i).proc, cl.node(i).port, cl.node(i).log) for i in (1, 2))
        one.bootstrap, two.bootstrap = cl.node(1).bootstrap, cl.node(2).bootstrap
        users_ = [new_user("pg") for _ in range(5)]  # user names hash to several coordinator partitions
        assert alter(one, upsertions=[upsertion(u, SHA256) for u in users_]) == {u: (0, None) for u in users_}
        wait_until(lambda: describe(two) == {u: {SHA256: 4096} for u in users_}, 10,
                   "node 2 serves the users set at node 1")
        assert alter(two, [deletion(users_[0], SHA256)]) == {users_[0]: (0, None)}
        wait_until(lambda: users_[0] not in describe(one), 10, "node 1 no longer serves the user deleted at node 2")
        cl.node(2).stop()
        cl.node(2).start()
        assert describe(two) == {u: {SHA256: 4096} for u in users_[1:]}


def test_the_first_administrator_added_offline_logs_in_over_sasl(tmp_path) -> None:
    """`kcoord users add --data-dir` before the first start, then a server whose client listener authenticates:
    confluent-kafka's AdminClient logs in as that user (SCRAM-SHA-512, and PLAIN against the same credential) and
    describes the users."""
    from confluent_kafka.admin import AdminClient

    data = tmp_path / "data"
    remember("first-admin-password")
    ok(users("add", "admin", "--data-dir", str(data), stdin="first-admin-password\n"))
    internal, external = free_port(), free_port()
    srv = serve(internal, tmp_path / "server.log", "--data-dir", str(data), "--log-level", "DEBUG",
                "--set", f"listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
                "--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512")
    try:
        for mechanism in ("SCRAM-SHA-512", "PLAIN"):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{external}", "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": mechanism, "sasl.username": "admin",
                                 "sasl.password": "first-admin-password"})
            infos = admin.describe_user_scram_credentials(["admin"])["admin"].result(timeout=30)
            assert [(i.mechanism.name, i.iterations) for i in infos.scram_credential_infos] == [("SCRAM_SHA_512", 4096)]
    finally:
        stop(srv)
    log = (tmp_path / "server.log").read_text()
    assert all(f"User:admin on listener EXTERNAL with {m}" in log for m in ("SCRAM-SHA-512", "PLAIN")), log
    assert_no_secrets(log.encode(), "the server log")
