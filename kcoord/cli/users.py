"""`kcoord users`: the SCRAM credentials of a running server (KIP-554's admin APIs, as kafka-configs.sh
--alter --add-config 'SCRAM-SHA-512=[...]' --entity-type users uses them), or of a stopped server's data directory
(the first administrator, before the first start, as `kafka-storage format --add-scram`).

    kcoord users add NAME [--mechanism SCRAM-SHA-512|SCRAM-SHA-256] [--iterations N] [--password-file F]
                          [--bootstrap HOST:PORT | --data-dir DIR] [--json]
    kcoord users list [--json]
    kcoord users delete NAME [--mechanism M] [--json]

The password is read from --password-file, or typed at a prompt (twice; not echoed) when stdin is a terminal, or
read as the first line of stdin when it is not (a pipe): never from the command line, where every user of the
machine could read it. As Kafka's admin client, the CLI derives the SaltedPassword with a random salt and sends
that (AlterUserScramCredentials); the server keeps only the salt, StoredKey, ServerKey and iterations.

Registered by kcoord.cli's build_parser (`add_users_parser`), which passes in its helpers (CliError, connect, the
--bootstrap type), so this module imports nothing of the CLI above it.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import secrets
import sys
from collections.abc import Callable
from typing import Any

from .. import errors as E
from .. import records as R
from .. import wire
from ..client import Client, KafkaError
from ..config import PG_SCHEMES
from ..security.credentials import MAX_NAME_BYTES
from ..security.scram import MAX_ITERATIONS, MECHANISM_NAMES, MECHANISMS, MIN_ITERATIONS, credential, salted_password
from ..store import GroupStore, SqliteRecords, StoreError
from ..tables import printable, table

DEFAULT_MECHANISM = "SCRAM-SHA-512"
DEFAULT_ITERATIONS = 4096  # Kafka's ConfigCommand.DefaultScramIterations and kafka-storage's default
SALT_BYTES = 32
MAX_PASSWORD_FILE = 64 * 1024  # a password file larger than this is not a password file
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
API_VERSION = 0  # both APIs exist only as v0


def mechanism_name(text: str) -> str:
    """--mechanism: SCRAM-SHA-256 or SCRAM-SHA-512, in any case."""
    name = text.strip().upper()
    if name not in MECHANISMS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a SCRAM mechanism (one of {', '.join(MECHANISMS)})")
    return name


def iterations(text: str) -> int:
    """--iterations: Kafka's bounds for both mechanisms, 4096..16384."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not MIN_ITERATIONS <= n <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of iterations within "
                                         f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
    return n


def user_name(text: str) -> str:
    """NAME: a user name, not empty (Kafka: "Username must not be empty")."""
    if not text:
        raise argparse.ArgumentTypeError("a user name must not be empty")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # bytes of the command line that are not UTF-8
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not UTF-8 text") from None
    if size > MAX_NAME_BYTES:
        raise argparse.ArgumentTypeError(f"a user name of {size} bytes: at most {MAX_NAME_BYTES}")
    return text


class UsersCommands:
    def __init__(self, error: type[Exception], connect: Callable[[str], Client]) -> None:
        self.error = error  # cli.CliError: (message, exit code)
        self.connect = connect

    # ---- the password ----------------------------------------------------------------------------------

    def password(self, args) -> str:
        """From --password-file (its first line, without the line end), else typed twice at a prompt on the
        terminal, else the first line of stdin (a pipe). Never echoed, never in a message."""
        if args.password_file is not None:
            try:
                with open(args.password_file, "rb") as fh:
                    data = fh.read(MAX_PASSWORD_FILE + 1)
            except OSError as e:
                raise self.error(f"--password-file {args.password_file}: {e.strerror}", 2) from None
            if len(data) > MAX_PASSWORD_FILE:
                raise self.error(f"--password-file {args.password_file}: larger than {MAX_PASSWORD_FILE} bytes, "
                                 "not a password file", 2)
            return self._checked(data, f"--password-file {args.password_file}")
        if sys.stdin is not None and sys.stdin.isatty():
            try:
                first = getpass.getpass(f"Password for {printable(args.name)}: ")
                again = getpass.getpass("Again: ")
            except EOFError:
                raise self.error("no password typed", 2) from None
            if first != again:
                raise self.error("the two passwords typed differ", 2)
            return self._checked(first.encode("utf-8", "surrogateescape"), "the password typed")
        data = sys.stdin.buffer.readline(MAX_PASSWORD_FILE + 1) if sys.stdin is not None else b""
        return self._checked(data, "stdin")

    def _checked(self, data: bytes, where: str) -> str:
        line, _, rest = data.partition(b"\n")
        if rest.strip(b"\r\n"):
            raise self.error(f"{where}: holds more than one line; a password is one line", 2)
        line = line.removesuffix(b"\r")
        if not line:
            raise self.error(f"{where}: the password is empty", 2)
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"{where}: the password is not UTF-8 text", 2) from None

    # ---- commands --------------------------------------------------------------------------------------

    def add(self, args) -> int:
        mech = args.mechanism
        mtype = MECHANISMS[mech]
        if args.data_dir is not None and args.bootstrap is not None:
            raise self.error("--data-dir and --bootstrap: give one (a stopped server's data directory, or a running "
                             "server)", 2)
        if args.data_dir is not None:
            self._check_data_dir(args.data_dir)
        password = self.password(args)
        salt = secrets.token_bytes(SALT_BYTES)
        created = False
        if args.data_dir is not None:
            created = self._add_offline(args.data_dir, args.name, mtype, password, salt, args.iterations)
            where = args.data_dir
        else:
            salted = salted_password(mtype, password, salt, args.iterations)
            upsertion = wire.AlterUserScramCredentialsRequestScramCredentialUpsertion(
                name=args.name, mechanism=mtype, iterations=args.iterations, salt=salt, salted_password=salted)
            self._alter(args, wire.AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
            where = args.bootstrap or DEFAULT_BOOTSTRAP
        if args.json:
            print(json.dumps({"user": args.name, "mechanism": mech, "iterations": args.iterations,
                              "where": where, "store_created": created}, indent=2))
        else:
            print(f"set the {mech} credential of user {printable(args.name)} ({args.iterations} iterations)"
                  + (f" in {printable(where)}" if args.data_dir is not None else "")
                  + (" (a new store: the directory held none)" if created else ""))
        return 0

    def _check_data_dir(self, data_dir: str) -> None:
        if data_dir.startswith(PG_SCHEMES):
            raise self.error("--data-dir: takes a data directory; add users to a cluster on PostgreSQL through a "
                             "running node (--bootstrap)", 2)
        if os.path.exists(data_dir) and not os.path.isdir(data_dir):
            raise self.error(f"--data-dir {data_dir}: not a directory", 2)

    def _add_offline(self, data_dir: str, user: str, mtype: int, password: str, salt: bytes, n: int) -> bool:
        """Write the credential straight into the SQLite store (made if the directory holds none: True). The
        store's directory lock refuses while a server has it open."""
        cred = credential(mtype, password, salt, n)
        quiet = logging.getLogger("kcoord.store")
        level, quiet.level = quiet.level, logging.ERROR  # a new store is said on stdout, not as the server's warning
        try:
            records = SqliteRecords(data_dir)
        except StoreError as e:
            raise self.error(f"--data-dir {data_dir}: {e}") from None
        finally:
            quiet.level = level
        store = GroupStore(records)
        try:
            store.stage(R.scram_credential_key(user, mtype),
                        R.scram_credential_value(cred.salt, cred.stored_key, cred.server_key, cred.iterations))
            store.commit()
        except StoreError as e:
            raise self.error(f"--data-dir {data_dir}: {e}") from None
        finally:
            store.close()
        return records.created

    def _request(self, args, req):
        bootstrap = args.bootstrap or DEFAULT_BOOTSTRAP
        try:
            with self.connect(bootstrap) as c:
                return c.request(req, API_VERSION)
        except (KafkaError, OSError) as e:
            raise self.error(f"{bootstrap}: {getattr(e, 'strerror', None) or e}") from None

    def _alter(self, args, req) -> list:
        r = self._request(args, req)
        problems = [f"user {res.user!r}: {E.name(res.error_code)}" + (f": {res.error_message}"
                                                                        if res.error_message else "")
                    for res in r.results if res.error_code]
        if problems:
            raise self.error("; ".join(problems))
        return r.results

    def describe(self, args, names: list[str] | None):
        r = self._request(args, wire.DescribeUserScramCredentialsRequest(
            users=None if names is None else [wire.DescribeUserScramCredentialsRequestUserName(name=n)
                                              for n in names]))
        if r.error_code:
            raise self.error(f"{E.name(r.error_code)}" + (f": {r.error_message}" if r.error_message else ""))
        return r.results

    def list(self, args) -> int:
        rows = sorted((res.user, MECHANISM_NAMES.get(ci.mechanism, str(ci.mechanism)), ci.iterations)
                      for res in self.describe(args, None) if not res.error_code for ci in res.credential_infos)
        if args.json:
            print(json.dumps({"users": [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows]},
                             indent=2))
        else:
            print(table(["USER", "MECHANISM", "ITERATIONS"], [list(r) for r in rows]) if rows else "(no users)")
        return 0

    def delete(self, args) -> int:
        if args.mechanism is not None:
            mechs = [args.mechanism]
        else:  # every mechanism the user has: one request each (Kafka refuses a user twice in one request)
            (res,) = self.describe(args, [args.name])
            if res.error_code:
                raise self.error(f"user {args.name!r}: {E.name(res.error_code)}"
                                 + (f": {res.error_message}" if res.error_message else ""))
            mechs = [MECHANISM_NAMES[ci.mechanism] for ci in res.credential_infos if ci.mechanism in MECHANISM_NAMES]
        for mech in mechs:
            self._alter(args, wire.AlterUserScramCredentialsRequest(deletions=[
                wire.AlterUserScramCredentialsRequestScramCredentialDeletion(name=args.name,
                                                                            mechanism=MECHANISMS[mech])],
                upsertions=[]))
        if args.json:
            print(json.dumps({"user": args.name, "deleted": mechs}, indent=2))
        else:
            print(f"deleted the {' and '.join(mechs)} credential{'s' if len(mechs) > 1 else ''} of user "
                  f"{printable(args.name)}")
        return 0


def add_users_parser(sub: Any, *, error: type[Exception], connect: Callable[[str], Client],
                     bootstrap_type: Callable[[str], str], command_config_help: str = "") -> None:
    """Registers `kcoord users add/list/delete`."""
    cmds = UsersCommands(error, connect)
    us = sub.add_parser("users", help="SCRAM users: add, list, delete (KIP-554's admin APIs; add also offline "
                                      "into a stopped server's --data-dir)").add_subparsers(dest="users_command",
                                                                                           required=True,
                                                                                           metavar="{add,list,delete}")

    def cmd(name: str, help: str, func) -> argparse.ArgumentParser:
        p = us.add_parser(name, help=help)
        p.add_argument("--bootstrap", type=bootstrap_type, metavar="HOST:PORT",
                       help="a kcoord server, or several separated by commas (tried in turn) "
                            f"(default: {DEFAULT_BOOTSTRAP})")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("--command-config", metavar="FILE", help=command_config_help)
        p.set_defaults(func=func)
        return p

    ad = cmd("add", "add a user's SCRAM credential, or replace it (the password from --password-file, a prompt, "
                    "or stdin; never the command line)", cmds.add)
    ad.add_argument("name", type=user_name, metavar="NAME")
    ad.add_argument("--mechanism", type=mechanism_name, default=DEFAULT_MECHANISM,
                    help=f"{' or '.join(MECHANISMS)} (default: {DEFAULT_MECHANISM})")
    ad.add_argument("--iterations", type=iterations, default=DEFAULT_ITERATIONS,
                    help=f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
    ad.add_argument("--password-file", metavar="FILE", help="read the password from the first line of FILE")
    ad.add_argument("--data-dir", metavar="DIR",
                    help="write into the store of a stopped server (made if DIR holds none): a first administrator "
                         "before the first start, as kafka-storage format --add-scram")
    cmd("list", "list the users and their mechanisms and iterations (never salts or keys)", cmds.list)
    de = cmd("delete", "delete a user's SCRAM credential (every mechanism it has, or --mechanism's)", cmds.delete)
    de.add_argument("name", type=user_name, metavar="NAME")
    de.add_argument("--mechanism", type=mechanism_name, help=f"only this one: {' or '.join(MECHANISMS)}")
