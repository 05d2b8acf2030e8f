"""The kcoord command line, run as users run it: `kcoord` as a subprocess (`kcoord`), or `kcoord.cli.main` in-process
with pytest's capsys (`run`, `ok`, `refused`), and the checks every failure is held to: one stderr line, no
traceback, the exit status, the names it must give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.cli import main
from kcoord.client import Client

from .servers import ROOT

# The command-line server tests' groups (test_cli_paths, test_admin_cli_hostile): timers and topic.
LONG_MS = 600_000  # no session or rebalance timer of the module's groups runs out while the module runs
TOPIC, PARTITIONS = "orders", 4


def kcoord(*args: str, timeout: float = 60, env: dict[str, str] | None = None,
           cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    """`kcoord ARGS` as a subprocess (`python -m kcoord.cli`) from the checkout's root or `cwd`; never raises on a
    failed command."""
    return subprocess.run([sys.executable, "-m", "kcoord.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or ROOT, check=False)


def one_line(r: subprocess.CompletedProcess, code: int, *names: str) -> str:
    """The single stderr line of a failed command, checked to name each of `names`."""
    assert r.returncode == code, f"exit {r.returncode}, not {code}:\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"stderr is not one line:\n{r.stderr}"
    for name in names:
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"
    return lines[0]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`kcoord ARGV` in-process: (exit status, stdout, stderr); an argparse mistake's SystemExit gives its status."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def the_line(err: str, command: str, *names: str) -> str:
    """The one stderr line of a failure, `kcoord COMMAND: ...`, naming each of `names`."""
    lines = err.splitlines()
    assert len(lines) == 1, f"stderr is not one line:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith(f"kcoord {command}: "), lines[0]
    for name in names:
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"
    return lines[0]


def refused(capsys: pytest.CaptureFixture[str], code: int, *argv: str, names: tuple[str, ...] = ()) -> str:
    """A command that fails as a whole: exit `code`, nothing on stdout, one stderr line naming `names`."""
    rc, out, err = run(capsys, *argv)
    assert rc == code, f"exit {rc}, not {code}:\n{out}\n{err}"
    assert out == "", out
    return the_line(err, command_of(argv), *names)


def command_of(argv: tuple[str, ...] | list[str]) -> str:
    """The COMMAND of `kcoord COMMAND: ...`: the subcommand, with `store`'s own subcommand."""
    if argv[0] == "store" and len(argv) > 1 and not argv[1].startswith("-"):
        return f"store {argv[1]}"
    return argv[0]


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`kcoord ARGV` in-process that succeeds: exit 0, nothing on stderr; its stdout."""
    rc, out, err = run(capsys, *argv)
    assert (rc, err) == (0, ""), f"exit {rc}:\n{out}\n{err}"
    return out


# ---- groups for the CLI to show (the server tests of the command line) --------------------------------------

def admin_commit(c: Client, group: str, offsets: dict[int, int], topic: str = TOPIC) -> None:
    """An admin's OffsetCommit (generation -1, no member): creates an Empty classic group holding the offsets."""
    r = c.request(wire.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[wire.OffsetCommitRequestTopic(name=topic, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                              committed_metadata="") for p, o in offsets.items()])]), 7)
    assert all(p.error_code == E.NONE for t in r.topics for p in t.partitions), r
