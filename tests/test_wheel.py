"""kcoord as users get it: the manylinux wheel (tests/support/wheelhouse.py) installed into a fresh venv, and the fast
part of the suite run against that install, from a copy of tests/ outside this checkout, so nothing can come from the source
tree (a package missing from the wheel, a file only the tree has, an extension not built into it fails here). The
[tool.cibuildwheel] configuration is checked too: a selector that stopped matching fails.

Run as a script, this file is the wheel's own check (cibuildwheel's test-command runs it in a copy of tests/ beside
each wheel it built): it checks that kcoord is the installed one, then runs WHEEL_SUBSET with pytest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# The fast subset run against the installed wheel (here and in cibuildwheel): the compiled codec against every
# message and version and against kafka-python's and kio's bytes, framing, the three group types' logic on a
# manual clock, the store (SQLite records, replay, `python -m kcoord.cli store`), and the compiled timers. About
# 40 s; the rest of the suite (servers, real clients, Spark, fuzzing) stays on the source tree.
WHEEL_SUBSET = (
    "wire/test_codec_roundtrip.py",
    "wire/test_codec_golden.py",
    "wire/test_framing.py",
    "unit/test_classic.py",
    "unit/test_consumer.py",
    "unit/test_connect.py",
    "unit/test_store.py",
    "server/test_store_cli.py",
    "unit/test_timers.py",
    "unit/test_timers_core.py",
)
# What the subset imports besides kcoord: these packages of the test extra, at its pins, go into the fresh venv.
SUBSET_REQUIRES = ("pytest", "hypothesis", "kafka-python", "kio")

# The release wheels [tool.cibuildwheel] selects on Linux: CPython 3.11-3.13, manylinux, x86-64 and aarch64.
LINUX_IDENTIFIERS = {f"cp{v}-manylinux_{arch}" for v in (311, 312, 313) for arch in ("x86_64", "aarch64")}

TIMEOUT = 1800  # a hung install or run ends the test; not a speed check


def extra_pins(names: tuple[str, ...]) -> list[str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    found = [r for r in extra if re.split(r"[<>=!~;\[ ]", r)[0].lower() in names]
    assert len(found) == len(names), f"{names} should all be in the test extra, found {found}"
    return found


def clean_env(venv: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP") and not k.startswith("CIBW_")}
    env["KCOORD_SCHEMAS"] = os.environ.get("KCOORD_SCHEMAS", str(ROOT.parent / "shared" / "kafka-schemas"))
    if venv is not None:
        env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
        env["VIRTUAL_ENV"] = str(venv)
    return env


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel and the subset's test packages, nothing from this checkout."""
    from .support.wheelhouse import kcoord_wheel

    wheel = kcoord_wheel()
    assert re.search(r"[-.]manylinux_\d+_\d+_(x86_64|aarch64)\.whl$", wheel.name), wheel.name
    where = tmp_path_factory.mktemp("wheel") / "venv"
    made = run([sys.executable, "-m", "venv", str(where)], cwd=where.parent, env=clean_env())
    assert made.returncode == 0, made.stderr
    installed = run([str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     str(wheel), *extra_pins(SUBSET_REQUIRES)], cwd=where.parent, env=clean_env(where))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return where


def where_kcoord(python: Path, cwd: Path, env: dict[str, str]) -> dict[str, str]:
    probe = ("import json, sysconfig, kcoord, kcoord._core._wire as w; print(json.dumps({'kcoord': kcoord.__file__, "
             "'wire': w.__file__, 'platlib': sysconfig.get_paths()['platlib'], 'purelib': sysconfig.get_paths()"
             "['purelib']}))")
    done = run([str(python), "-c", probe], cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_kcoord_comes_from_the_venvs_site_packages(venv, tmp_path) -> None:
    found = where_kcoord(venv / "bin" / "python", tmp_path, clean_env(venv))
    site = Path(found["platlib"]).resolve()
    assert site.is_relative_to(venv.resolve())
    for name in ("kcoord", "wire"):
        assert Path(found[name]).resolve().is_relative_to(site), found
        assert not Path(found[name]).resolve().is_relative_to(ROOT), found
    assert found["wire"].endswith(".so")


def test_the_wheel_carries_the_type_information(venv, tmp_path) -> None:
    # PEP 561: py.typed at the package root (kcoord's annotations) and in kcoord._core, beside every compiled
    # module's stub, so users' type checkers read the installed kcoord as the suite's checker reads the tree.
    site = Path(where_kcoord(venv / "bin" / "python", tmp_path, clean_env(venv))["kcoord"]).parent
    stubs = sorted(p.name for p in (ROOT / "kcoord" / "_core").glob("*.pyi"))
    assert stubs and sorted(p.name for p in (site / "_core").glob("*.pyi")) == stubs
    assert (site / "py.typed").is_file() and (site / "_core" / "py.typed").is_file()


def test_the_console_script_runs_from_the_wheel(venv, tmp_path) -> None:
    script = venv / "bin" / "kcoord"
    assert script.exists(), "the wheel installs no `kcoord` console script"
    done = run([str(script), "apis", "--json"], cwd=tmp_path, env=clean_env(venv))
    assert done.returncode == 0, done.stderr
    apis = {a["name"]: a for a in json.loads(done.stdout)}
    assert apis["JoinGroup"]["api_key"] == 11 and apis["ConsumerGroupHeartbeat"]["api_key"] == 68


def test_the_fast_subset_passes_against_the_installed_wheel(venv, tmp_path) -> None:
    # The same run as cibuildwheel's test-command: this file, as a script, in a copy of tests/ beside pyproject.toml
    # (for pytest's settings) and nothing else of the checkout.
    copy = tmp_path / "suite"
    shutil.copytree(HERE, copy / "tests", ignore=shutil.ignore_patterns("__pycache__", "fuzz", "*.pyc"))
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    done = run([str(venv / "bin" / "python"), "tests/test_wheel.py"], cwd=copy, env=clean_env(venv))
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-8000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("kcoord from ")]
    assert Path(line.removeprefix("kcoord from ")).resolve().is_relative_to(venv.resolve()), line
    assert re.search(r"^\d+ passed", done.stdout.splitlines()[-1]), report[-2000:]
    assert " failed" not in done.stdout.splitlines()[-1]


def test_cibuildwheel_selects_the_intended_wheels() -> None:
    if shutil.which("cibuildwheel", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("cibuildwheel is a test dependency (pyproject's test extra): `make test` installs it")
    done = run([sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", "linux"],
               cwd=ROOT, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == LINUX_IDENTIFIERS


def main() -> int:
    """Run the subset against the installed kcoord; refuse one importable from beside the tests."""
    import kcoord

    source = Path(kcoord.__file__).resolve()
    sites = {Path(sysconfig.get_paths()[k]).resolve() for k in ("platlib", "purelib")}
    print(f"kcoord from {source}", flush=True)
    if not any(source.is_relative_to(s) for s in sites) or source.is_relative_to(HERE.parent):
        print(f"kcoord is not the installed one: {source} is outside {sites}", file=sys.stderr)
        return 3
    code = pytest.main(["-p", "no:cacheprovider", "-q", "-m", "not slow", f"--rootdir={HERE.parent}",
                        *(str(HERE / name) for name in WHEEL_SUBSET)])
    if Path(sys.modules["kcoord"].__file__).resolve() != source:
        print("kcoord was imported again from elsewhere during the run", file=sys.stderr)
        return 3
    return int(code)


if __name__ == "__main__":
    if Path(sys.path[0]).resolve() == HERE:
        del sys.path[0]  # the script's own directory: its helpers are imported as the `tests` package
    sys.exit(main())
