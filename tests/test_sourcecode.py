"""The tree keeps its shape: imports point down the layers, the codec generator runs before any build, and the
linter passes. Run as ordinary tests, so CI keeps the tree clean (as asyncpg's tests/test__sourcecode.py does).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kcoord"

# kcoord's layers, top first: a module may import only modules of layers below its own. The data path runs
# cli -> server -> coordinator -> offsets / groups/* -> {store, records, timers, assignors, _core} -> wire.
# A new module must be placed here; a new group type sits beside groups.classic (and imports groups.base).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kcoord",),  # the package face: re-exports, loaded on first use
    ("kcoord.cli.__main__",),  # python -m kcoord.cli
    ("kcoord.cli",),
    ("kcoord.cli.plan", "kcoord.cli.admin", "kcoord.cli.users",
     "kcoord.cli.acls"),  # `kcoord plan`; `offsets`, `delete`; `users`; `acls`
    ("kcoord.client.worker",),  # the connect worker client: a client of the server, above the codec and its assignor
    ("kcoord.server",),
    ("kcoord.security.gates",),  # every served API's authorization, in front of its handler
    ("kcoord.security.topic_gates",),  # the topic APIs' authorization (Gates.table takes it)
    ("kcoord.metrics",),  # the Prometheus endpoint: reads the server, the coordinator and the store
    ("kcoord.cluster",),  # a node of a cluster on PostgreSQL: leases, and which node serves which group
    ("kcoord.broker",),
    ("kcoord.coordinator",),
    ("kcoord.groups.migration",),  # converts a group of one type into the other: above both
    ("kcoord.offsets", "kcoord.groups.classic", "kcoord.groups.consumer", "kcoord.groups.connect",
     "kcoord.security.credentials", "kcoord.security.acls"),  # SCRAM credentials, ACLs and their admin APIs
    ("kcoord.groups.modern",),  # ModernGroup, the abstract base of the consumer and connect types
    ("kcoord.groups", "kcoord.groups.base"),
    ("kcoord.pgstore",),  # the PostgreSQL backend of the store interface, fenced by lease epochs
    ("kcoord.store",),
    ("kcoord.config",),  # the group's and the server's settings (GroupConfig, ServerConfig) and their bounds
    ("kcoord.records", "kcoord.topics", "kcoord.timers", "kcoord.client", "kcoord.spark",
     "kcoord.tables", "kcoord.events", "kcoord.gcpolicy", "kcoord.listeners"),
    ("kcoord.kafka_configs",),  # the names of Kafka's broker settings (read by kcoord.config): data, no imports
    ("kcoord.assignors", "kcoord.client.worker_assignor"),
    ("kcoord.security.sasl",),  # one connection's SASL state (the server does the I/O)
    ("kcoord.security.plain",),  # SASL/PLAIN checked against the SCRAM credentials; new_mechanism
    ("kcoord.security", "kcoord.security.scram"),  # SCRAM credentials and exchange, SaslFailure: no I/O
    ("kcoord.security.handshakes",),  # TLS handshakes held to a budget per loop turn
    ("kcoord.security.tls",),  # TLS contexts, PEM stores, certificate principals: the standard library only
    ("kcoord.security.authorizer",),  # Kafka's ACL model and decision: no imports
    ("kcoord.wire", "kcoord.errors", "kcoord.reply"),
    ("kcoord.protocol", "kcoord._core"),  # the message definitions and the compiled core: import nothing above
)
PACKAGES = ("kcoord.protocol", "kcoord._core")  # one unit each: imports inside them are their own business


def unit(module: str) -> str:
    for p in PACKAGES:
        if module == p or module.startswith(p + "."):
            return p
    return module


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Every kcoord module `module` imports, wherever the import stands (functions and TYPE_CHECKING included)."""
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "kcoord")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "kcoord":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known or unit(sub) != sub else target)
    return out


def layer_of(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit(module) in layer:
            return i
    raise KeyError(module)


def test_every_module_has_a_layer() -> None:
    missing = []
    for module in modules():
        try:
            layer_of(module)
        except KeyError:
            missing.append(module)
    assert not missing, f"place these modules in LAYERS: {missing}"


def test_imports_point_down_the_layers() -> None:
    known = set(modules())
    wrong = []
    for module, path in modules().items():
        mine = layer_of(module)
        for target in sorted(imports(module, path, known)):
            if unit(target) == unit(module):
                continue
            if layer_of(target) <= mine:
                wrong.append(f"{module} (layer {mine}) imports {target} (layer {layer_of(target)})")
    assert not wrong, "imports running up or across the layers:\n" + "\n".join(wrong)


def test_the_layer_check_sees_an_upward_import(tmp_path) -> None:
    # The check itself can fail: the store importing the coordinator (what it did before the groups seam).
    path = tmp_path / "store.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .coordinator import Coordinator\n"
                    "def f():\n    from .groups import classic\n")
    found = imports("kcoord.store", path, set(modules()))
    assert found == {"kcoord.coordinator", "kcoord.groups.classic"}
    assert all(layer_of(t) < layer_of("kcoord.store") for t in found)


# ---- the map: ARCHITECTURE.md and the README's "Layout" name every module as the tree has it ----------------------

PATH_NAMED = re.compile(r"`((?:kcoord|src)/[^`<>*\s]*)`")  # a path in backquotes (not a pattern like <type>.py)


def package_paths() -> list[str]:
    """Every module of the package by its path: each kcoord/**/*.py, and each compiled kcoord._core module by its
    source (src/_core/<dir>/_<name>.pyx)."""
    compiled = sorted((ROOT / "src" / "_core").glob("*/_*.pyx"))
    return [p.relative_to(ROOT).as_posix() for p in [*sorted(PACKAGE.rglob("*.py")), *compiled]]


def readme_layout() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Layout\n")
    end = text.find("\n## ", start + 1)
    return text[start:end] if end > 0 else text[start:]


MAPS = {"ARCHITECTURE.md": lambda: (ROOT / "ARCHITECTURE.md").read_text(), "README.md's Layout": readme_layout}


def unnamed(text: str, paths: list[str]) -> list[str]:
    return [p for p in paths if f"`{p}`" not in text]


@pytest.mark.parametrize("name", MAPS)
def test_the_map_names_every_module_and_no_path_that_is_gone(name: str) -> None:
    text = MAPS[name]()
    missing = unnamed(text, package_paths())
    assert not missing, f"{name} names no line for these modules (by path, in backquotes): {missing}"
    gone = [p for p in PATH_NAMED.findall(text) if not (ROOT / p).exists()]
    assert not gone, f"{name} names paths that do not exist: {gone}"


def test_the_map_check_sees_a_module_without_a_line() -> None:
    paths = [*package_paths(), "kcoord/groups/share.py"]
    assert unnamed(MAPS["ARCHITECTURE.md"](), paths) == unnamed(readme_layout(), paths) == ["kcoord/groups/share.py"]


def test_the_code_cites_no_document_outside_the_repo() -> None:
    """A document the package, the compiled core's sources, the tests or the benches name (a `*.md` path) is a file
    of the repo."""
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benches").rglob("*.py"),
               *(p for p in (ROOT / "src").rglob("*") if p.suffix in (".pyx", ".pxi", ".pxd", ".h"))]
    outside = sorted({f"{p.relative_to(ROOT)}: {doc}" for p in sources
                      for doc in re.findall(r"[\w./-]+\.md\b", p.read_text()) if not (ROOT / doc).is_file()})
    assert not outside, "documents cited that are not in the repo:\n" + "\n".join(outside)


def architecture_layers() -> list[tuple[str, ...]]:
    """The modules column of ARCHITECTURE.md's table of layers, row by row, as module names."""
    rows = []
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`kcoord/"):
            paths = re.findall(r"`([^`]+)`", cells[1])
            rows.append(tuple(module_name(ROOT / p) if p.endswith(".py") else p.strip("/").replace("/", ".")
                              for p in paths))
    return rows


def test_the_architecture_table_has_the_layers_of_layers() -> None:
    assert [sorted(row) for row in architecture_layers()] == [sorted(layer) for layer in LAYERS]


def test_the_codec_generator_runs_on_a_checkout_that_was_never_built(tmp_path) -> None:
    """`python -m kcoord.protocol.generate` needs no compiled module: it writes their sources."""
    for name in ("kcoord", "src"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    assert not list(tmp_path.rglob("*.so"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    # -S: no site-packages, so neither the editable install nor any built kcoord can be found.
    probe = subprocess.run([sys.executable, "-S", "-c", "import kcoord._core._wire"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "kcoord._core._wire" in probe.stderr
    check = subprocess.run([sys.executable, "-S", "-m", "kcoord.protocol.generate", "--check"], cwd=tmp_path,
                           env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    pxi = tmp_path / "src" / "_core" / "wire" / "generated.pxi"
    pxi.write_text(pxi.read_text() + "# edited by hand\n")
    stale = subprocess.run([sys.executable, "-S", "-m", "kcoord.protocol.generate", "--check"], cwd=tmp_path,
                           env=env, capture_output=True, text=True)
    assert stale.returncode == 1
    write = subprocess.run([sys.executable, "-S", "-m", "kcoord.protocol.generate"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert write.returncode == 0 and pxi.read_text() == (ROOT / "src/_core/wire/generated.pxi").read_text()


def test_ruff_passes() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.fail("ruff is a test dependency (pyproject's test extra): `make test` installs it")
    done = subprocess.run([ruff, "check", "--no-cache", "kcoord", "tests", "benches"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_passes() -> None:
    """The type checker holds the package to its annotations ([tool.mypy] in pyproject.toml: kcoord/, Python 3.11).
    Its cache (.mypy_cache/, git-ignored) makes a run on an unchanged tree take seconds."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    if mypy is None:
        pytest.fail("mypy is a test dependency (pyproject's test extra): `make test` installs it")
    done = subprocess.run([mypy, "--python-executable", sys.executable, "--config-file", "pyproject.toml"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cython_lint_passes() -> None:
    """cython-lint on the compiled core's sources ([tool.cython-lint] in pyproject.toml)."""
    bin_dir = Path(sys.executable).parent
    lint = shutil.which("cython-lint", path=str(bin_dir))
    if lint is None:
        pytest.fail("cython-lint is a test dependency (pyproject's test extra): `make test` installs it")
    # cython-lint runs pycodestyle (its dependency, installed beside it) by name.
    env = {**os.environ, "PATH": str(bin_dir) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([lint, "src/_core"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# The compiled modules' hand-written stubs (kcoord/_core/*.pyi) are the contract the type checker holds the Python
# layer to: every name the layer takes from a compiled module must be declared in its stub, or the checker would read
# it as missing (or, with the name left out of a star import, not see it at all).
CORE = PACKAGE / "_core"


def stub_names(stub: Path) -> set[str]:
    """The names a .pyi declares at its top level (an import is a name only in its re-exporting `import x as x` form)."""
    names: set[str] = set()
    for node in ast.parse(stub.read_text(), str(stub)).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname for a in node.names if a.asname == a.name.rpartition(".")[2])
    return names


def import_target(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def wire_own_names() -> set[str]:
    """What kcoord.wire defines itself (everything else it has, it takes from kcoord._core._wire)."""
    path = PACKAGE / "wire.py"
    own: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ImportFrom) and import_target("kcoord.wire", path, node) != "kcoord._core._wire":
            own.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            own.update(a.asname or a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            own.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            own.update(t.id for t in targets if isinstance(t, ast.Name))
    return own


def compiled_names_used() -> dict[str, dict[str, str]]:
    """Every name the Python layer takes from a compiled module: {"_members": {"ClassicMember": "where", ...}}.

    Read by AST: `from ._core._members import X`, `from ._core import _assign` then `_assign.X`, and the compiled
    codec's names through its face, kcoord.wire (`from . import wire` then `wire.X`, `from .wire import X`).
    """
    wire_own = wire_own_names()
    used: dict[str, dict[str, str]] = {p.stem: {} for p in CORE.glob("_*.pyi")}

    def note(core: str, name: str, where: str) -> None:
        if core == "_wire" and name in wire_own:
            return
        used.setdefault(core, {}).setdefault(name, where)

    for module, path in modules().items():
        if unit(module) == "kcoord._core":
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}  # a local name -> the compiled module it stands for
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom):
                target = import_target(module, path, node)
                if target.startswith("kcoord._core.") or target == "kcoord.wire":
                    core = "_wire" if target == "kcoord.wire" else target.split(".")[2]
                    for a in node.names:
                        if a.name != "*" and module != "kcoord.wire":
                            note(core, a.name, where)
                        elif a.name != "*":
                            used.setdefault(core, {}).setdefault(a.name, where)
                elif target in ("kcoord._core", "kcoord"):
                    for a in node.names:
                        if target == "kcoord._core" or a.name == "wire":
                            aliases[a.asname or a.name] = "_wire" if a.name == "wire" else a.name
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("kcoord._core.") and a.asname:
                        aliases[a.asname] = a.name.split(".")[2]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                note(aliases[node.value.id], node.attr, f"{path.relative_to(ROOT)}:{node.lineno}")
    return used


def missing_from_stubs(used: dict[str, dict[str, str]], stubs: dict[str, set[str]]) -> list[str]:
    return [f"{where}: {name} is not in kcoord/_core/{core}.pyi"
            for core, names in sorted(used.items()) for name, where in sorted(names.items())
            if name not in stubs.get(core, set())]


def test_the_compiled_modules_stubs_declare_every_name_the_python_layer_uses() -> None:
    used = compiled_names_used()
    stubs = {p.stem: stub_names(p) for p in CORE.glob("_*.pyi")}
    assert set(used) == set(stubs), f"a compiled module without a stub, or a stub without its module: {sorted(used)}"
    assert all(used.values()), f"the walk found no name of some compiled module: { {c: len(n) for c, n in used.items()} }"
    missing = missing_from_stubs(used, stubs)
    assert not missing, "declare these in the stubs:\n" + "\n".join(missing)


def test_the_stub_check_sees_a_missing_name() -> None:
    used = compiled_names_used()
    stubs = {p.stem: stub_names(p) for p in CORE.glob("_*.pyi")}
    assert {"ClassicMember", "TimersCore"} <= set(used["_members"]) and "JoinGroupRequest" in used["_wire"]
    stubs["_members"].discard("TimersCore")
    stubs["_wire"].discard("JoinGroupRequest")
    assert [m.rpartition(": ")[2] for m in missing_from_stubs(used, stubs)] == [
        "TimersCore is not in kcoord/_core/_members.pyi", "JoinGroupRequest is not in kcoord/_core/_wire.pyi"]


# ---- the tests' own layout (ARCHITECTURE.md, "Tests") ----------------------------------------------------------

TESTS = ROOT / "tests"
TEST_FOLDERS = ("unit", "wire", "server", "interop", "cluster")  # by how a test runs
AT_THE_ROOT = ("test_sourcecode.py", "test_wheel.py")  # the tree's and the wheel's checks, of no one module
# What a unit test (in-process, no socket, no process) may not import: the modules that open sockets or start
# processes, the helpers that start servers, clients or PostgreSQL, and the real clients.
NOT_IN_UNITS = ("socket", "ssl", "subprocess", "asyncio", "multiprocessing", "psycopg", "confluent_kafka", "aiokafka",
                "pyspark", "tests.support.servers", "tests.support.postgres", "tests.support.cluster_nodes",
                "tests.support.secured", "tests.support.interop_member", "tests.support.interop_consumer",
                "tests.support.wheelhouse", "tests.support.cli", "tests.support.metrics", "tests.support.interop",
                "tests.support.spark_estate", "tests.support.pgproxy")


def imported_modules(path: Path, package: tuple[str, ...]) -> set[str]:
    """Every module `path` (a module of `package`) imports, relative imports resolved, and each `from X import n`
    also as X.n (n may be a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def unit_violations(paths: list[Path]) -> list[str]:
    return [f"{p.name} imports {m}" for p in paths for m in sorted(imported_modules(p, ("tests", "unit")))
            if any(m == bad or m.startswith(bad + ".") for bad in NOT_IN_UNITS)]


def test_every_test_file_is_in_the_folder_of_how_it_runs() -> None:
    stray = []
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(TESTS).parts
        if parts[0] in ("support", "fuzz", "fixtures") or parts == ("conftest.py",) or parts == ("__init__.py",):
            continue
        if len(parts) == 1:
            ok = parts[0] in AT_THE_ROOT
        else:
            ok = len(parts) == 2 and parts[0] in TEST_FOLDERS and (parts[1].startswith("test_")
                                                                   or parts[1] == "__init__.py")
        if not ok:
            stray.append("/".join(parts))
    assert not stray, f"a test file belongs in tests/{{{','.join(TEST_FOLDERS)}}}/, a helper in tests/support/: {stray}"
    assert all((TESTS / d / "__init__.py").is_file() for d in (*TEST_FOLDERS, "support"))


# The one test file another may import: test_settings_server checks that every group setting it serves is covered,
# and the registry of what covers a group setting is test_settings_group's own data (COVERED), not a helper.
TEST_FILE_IMPORTS_ALLOWED = {("server/test_settings_server.py", "tests.server.test_settings_group")}


def imports_of_test_files(paths: list[Path]) -> list[str]:
    """Imports of another test file, of any folder or of the same one: what tests share is a helper, and helpers
    live in tests/support (the one exception: TEST_FILE_IMPORTS_ALLOWED)."""
    out = []
    for p in paths:
        folder = p.parent.name
        for m in sorted(imported_modules(p, ("tests", folder))):
            parts = m.split(".")
            if len(parts) >= 3 and parts[0] == "tests" and parts[1] in TEST_FOLDERS and parts[2].startswith("test_") \
                    and (f"{folder}/{p.name}", ".".join(parts[:3])) not in TEST_FILE_IMPORTS_ALLOWED:
                out.append(f"{folder}/{p.name} imports {'.'.join(parts[:3])}")
    return sorted(set(out))


def test_no_test_file_imports_another_test_file(tmp_path) -> None:
    files = sorted(f for d in TEST_FOLDERS for f in (TESTS / d).glob("test_*.py"))
    problems = imports_of_test_files(files)
    assert not problems, "move what these share into tests/support/:\n" + "\n".join(problems)
    # and the check sees one of another folder and one of the same folder, and lets the allowed one through
    (tmp_path / "server").mkdir()
    bad = tmp_path / "server" / "test_bad.py"
    bad.write_text("from ..unit.test_offsets import commit\nfrom .test_metrics import scrape\n"
                   "from ..support.harness import codes\n")
    assert imports_of_test_files([bad]) == ["server/test_bad.py imports tests.server.test_metrics",
                                        "server/test_bad.py imports tests.unit.test_offsets"]
    allowed = tmp_path / "server" / "test_settings_server.py"
    allowed.write_text("def f():\n    from .test_settings_group import COVERED\n")
    assert imports_of_test_files([allowed]) == []


def test_unit_tests_open_no_socket_and_start_no_process() -> None:
    units = sorted((TESTS / "unit").glob("test_*.py"))
    assert len(units) >= 10
    problems = unit_violations(units)
    assert not problems, "move these to tests/server, tests/interop or tests/cluster:\n" + "\n".join(problems)


def test_the_unit_check_sees_a_socket_and_a_server(tmp_path) -> None:
    bad = tmp_path / "test_bad.py"
    bad.write_text("import socket\nfrom ..support.servers import serve\nfrom ..support.harness import ClassicHarness\n")
    assert unit_violations([bad]) == ["test_bad.py imports socket", "test_bad.py imports tests.support.servers",
                                      "test_bad.py imports tests.support.servers.serve"]
