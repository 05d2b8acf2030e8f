"""Every code example in README.md runs as written.

Each fenced ```python block runs in its own interpreter (a fresh namespace), from an empty directory. A block that
talks to a server says so in the comment before it, `<!-- run-with: kcoord serve ARGS -->`: the test starts that
server on a free port and points the block's 127.0.0.1:9092 at it; a block whose comment is
`<!-- run-with-postgres: URL -->` gets a fresh database of the suite's PostgreSQL (tests/support/postgres.py) for URL,
and a port free on every loopback address for its 9092. A ```sh block runs under bash, with the `kcoord`
of this interpreter on PATH, unless the comment before it is `<!-- not-run: REASON -->`; every `kcoord` command line
in the README, run or not, must still parse. Nothing is skipped silently: every block is run or carries a not-run
marker, and every marker stands before a block.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kcoord.cli import build_parser

from ..support.servers import free_port, serve

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(not-run|run-with-postgres|run-with):\s*(.*?)\s*-->", re.S)
RUNNABLE = ("python", "sh")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    not_run: str | None  # the reason, when marked not-run
    run_with: str | None  # `kcoord serve ...`, when the block needs a server
    postgres: str | None = None  # the PostgreSQL URL the block names, when it needs a database

    @property
    def id(self) -> str:
        return f"{self.lang}-line-{self.line}"


def readme_blocks(text: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(text):
        last = text[:m.start()].removesuffix("\n").rsplit("\n", 1)[-1].strip()  # the line right above the fence
        marker = MARKER.fullmatch(last)
        kind, arg = (marker.group(1), marker.group(2)) if marker else (None, None)
        out.append(Block(lang=m.group(1), code=m.group(2), line=text.count("\n", 0, m.start()) + 1,
                         not_run=arg if kind == "not-run" else None, run_with=arg if kind == "run-with" else None,
                         postgres=arg if kind == "run-with-postgres" else None))
    return out


BLOCKS = readme_blocks(README.read_text())
RUN = [b for b in BLOCKS if b.not_run is None]


def test_nothing_is_skipped_silently() -> None:
    text = README.read_text()
    markers = MARKER.findall(text)
    marked = [b for b in BLOCKS if b.not_run is not None or b.run_with is not None or b.postgres is not None]
    assert len(markers) == len(marked), "a not-run/run-with marker that does not stand right before a fenced block"
    excluded = [b for b in BLOCKS if b.not_run is not None]
    assert len(excluded) == sum(1 for kind, _ in markers if kind == "not-run")
    assert all(b.not_run.strip() for b in excluded), "a not-run marker without its reason"
    unrunnable = [b.id for b in RUN if b.lang not in RUNNABLE]
    assert not unrunnable, f"blocks neither run nor marked not-run: {unrunnable}"
    assert len(RUN) + len(excluded) == len(BLOCKS)
    assert sum(b.lang == "python" for b in RUN) >= 5  # the README's Python examples are all run


def test_the_block_reader_sees_markers_and_unmarked_blocks() -> None:
    # The reader itself can fail: a marker two lines above a block does not count for it.
    text = ("a\n<!-- not-run: needs a cluster -->\n```sh\nkcoord serve\n```\n\n<!-- not-run: x -->\n\n"
            "```python\nprint(1)\n```\n<!-- run-with: kcoord serve --set a=b -->\n```python\nprint(2)\n```\n")
    blocks = readme_blocks(text)
    assert [(b.lang, b.line, b.not_run, b.run_with) for b in blocks] == [
        ("sh", 3, "needs a cluster", None), ("python", 9, None, None), ("python", 13, None, "kcoord serve --set a=b")]
    assert len(MARKER.findall(text)) == 3 != sum(b.not_run is not None or b.run_with is not None for b in blocks)


def _port_free_on_every_loopback(hosts: int = 3) -> int:
    while True:
        port = free_port()
        try:
            for n in range(2, hosts + 1):
                with socket.socket() as s:
                    s.bind((f"127.0.0.{n}", port))
            return port
        except OSError:
            continue


def _server_for(block: Block, tmp_path: Path):
    argv = shlex.split(block.run_with)
    assert argv[:2] == ["kcoord", "serve"], f"{block.id}: run-with must be a `kcoord serve` command"
    return serve(free_port(), tmp_path / "server.log", *argv[2:])


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=[pytest.mark.spark] if "spark" in b.code else [])
                                   for b in RUN])
def test_readme_example_runs(block: Block, tmp_path: Path, request) -> None:
    code = block.code
    server = _server_for(block, tmp_path) if block.run_with else None
    if block.postgres is not None:
        assert block.postgres in code, f"{block.id}: run-with-postgres, but the block names no {block.postgres}"
        code = code.replace(block.postgres, request.getfixturevalue("pg_dsn"))
        code = code.replace("9092", str(_port_free_on_every_loopback()))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    try:
        if server is not None:
            assert "127.0.0.1:9092" in code, f"{block.id}: run-with, but the block names no 127.0.0.1:9092"
            code = code.replace("127.0.0.1:9092", server.bootstrap)
        if block.lang == "python":
            script = tmp_path / "example.py"
            script.write_text(code)
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", code]
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, f"README {block.id} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    finally:
        if server is not None:
            server.proc.terminate()
            assert server.proc.wait(timeout=30) == 0, server.log_tail()


def command_lines() -> list[tuple[Block, str]]:
    out = []
    for b in BLOCKS:
        if b.lang == "sh":
            out += [(b, line.strip()) for line in b.code.splitlines() if line.strip().startswith("kcoord ")]
    return out


def parses(line: str) -> bool:
    argv = shlex.split(line, comments=True)
    for i, word in enumerate(argv):  # a shell redirection ends the command's own arguments
        if word.startswith((">", "<", "|", "&", ";")):
            argv = argv[:i]
            break
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit:
        return False
    return True


def test_every_readme_command_line_parses(capsys) -> None:
    lines = command_lines()
    assert len(lines) >= 10
    bad = [f"README line {b.line}: {line}" for b, line in lines if not parses(line)]
    assert not bad, "\n".join(bad) + "\n" + capsys.readouterr().err
    # the check can fail: a flag kcoord does not have, or a value it refuses
    assert not parses("kcoord topics --create events:6 --shrink orders:2")
    assert not parses("kcoord groups --state Sleeping")


# "A consumer to copy": consumers a reader can paste while `make run` serves, each run above (test_readme_example_runs)
# against the server its marker names, which must serve what `make run` serves.
MAKEFILE = ROOT / "Makefile"


def make_run_serve_args() -> list[str]:
    """The `kcoord serve` arguments `make run` passes by default (the Makefile's SERVE_ARGS)."""
    (line,) = re.findall(r"^SERVE_ARGS \?= (.*)$", MAKEFILE.read_text(), re.M)
    return shlex.split(line)


def _topics(argv: list[str]) -> list[str]:
    return [b for a, b in zip(argv, argv[1:]) if a == "--topic"]


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_make_run_serves_the_topic_the_readme_consumers_read() -> None:
    text = README.read_text()
    topics = _topics(make_run_serve_args())
    assert topics == ["demo:3"], f"make run's SERVE_ARGS serve {topics}, the README says demo (3 partitions)"
    consumers = readme_blocks(section(text, "A consumer to copy"))
    runs = [b for b in consumers if b.lang == "python"]
    assert runs and all(b.run_with is not None for b in runs), "every consumer example runs against a server"
    for b in runs:
        assert _topics(shlex.split(b.run_with)) == topics, f"{b.id}: not the server `make run` starts"
        assert '"demo"' in b.code
    code = "\n".join(b.code for b in runs)
    assert "KafkaConsumer(" in code and "confluent_kafka import Consumer" in code
    assert 'consume("classic")' in code and 'consume("consumer")' in code  # both group protocols, each run
    # The section stands right after the two commands, before anything else.
    assert text.index("\n## The two commands\n") < text.index("\n## A consumer to copy\n") \
        < text.index("\n## Installing from a wheel\n")


def test_kcoord_serve_runs_under_uvloop_as_the_suite_does(tmp_path: Path) -> None:
    # uvloop is a dependency of kcoord itself wherever it is built (not Windows), so what `make run` and an installed
    # kcoord serve is the loop the suite tests (tests/server/test_server.py runs the server under both loops).
    import tomllib

    from packaging.requirements import Requirement

    deps = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    uvloops = [r for r in deps if r.name == "uvloop"]
    assert len(uvloops) == 1 and uvloops[0].marker is not None, "uvloop is not a dependency of kcoord"
    uvloop = uvloops[0]
    assert [uvloop.marker.evaluate({"sys_platform": p}) for p in ("linux", "darwin", "win32")] == [True, True, False]
    # `make run`'s server, its data dir here: the loop it runs is uvloop's (its compiled loop module is loaded).
    argv = make_run_serve_args()
    argv[argv.index("--data-dir") + 1] = str(tmp_path / "data")
    server = serve(free_port(), tmp_path / "server.log", *argv)
    try:
        maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
        assert re.search(r"/uvloop/loop\.[^/]*\.so$", maps, re.M), "kcoord serve runs without uvloop"
    finally:
        server.proc.terminate()
        assert server.proc.wait(timeout=30) == 0, server.log_tail()


def test_a_second_build_compiles_nothing(tmp_path: Path) -> None:
    # The README: `make test` after `make run` reuses the first build. Both install kcoord with pip's build hook,
    # which builds into a fresh directory each time; setup.py takes the extensions already compiled in
    # kcoord/_core/ as up to date. A build here with a compiler that always fails must still give every extension.
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    env.pop("KCOORD_DEBUG", None)
    proc = subprocess.run([sys.executable, "setup.py", "--quiet", "build_ext", "--build-lib", str(tmp_path / "lib"),
                           "--build-temp", str(tmp_path / "temp")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, ("setup.py compiled again (is kcoord/_core/ older than its sources? `make test` "
                                  f"builds first):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    built = sorted(p.name for p in (tmp_path / "lib" / "kcoord" / "_core").iterdir())
    in_place = sorted(p.name for p in (ROOT / "kcoord" / "_core").glob("*.so"))
    assert built == in_place and len(built) == len(list((ROOT / "src" / "_core").glob("*/_*.pyx")))
