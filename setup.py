"""Build of kcoord's compiled core. One Cython directive policy for every extension, declared here.

KCOORD_DEBUG=1 turns bounds checks, wraparound and line tracing back on and builds without optimisation.

Nothing is compiled twice: the generated C (build/cython/) is rewritten only when its Cython sources are newer, and
an extension already compiled in place (kcoord/_core/, where an editable install leaves it) is reused while it is
newer than its C and this file. So `make test` after `make run` only installs the extras, and an edited .pyx
recompiles its own extension alone. A change of the directives or flags (KCOORD_DEBUG) regenerates and recompiles
everything. The C of the generated codec (_wire) takes most of a build.
"""

import os
import sys
import warnings

import numpy
from Cython.Build import cythonize
from Cython.Compiler import Options
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.modified import newer_group
from setuptools.warnings import InformationOnly

# setuptools' notice at the end of every editable install (`make run`, `make test`) is information, not a problem:
# it says to mind folders named like the package in the working directory.
warnings.filterwarnings("ignore", r"Editable installation\.", InformationOnly)

# Cython warnings fail the build, as aiohttp does.
Options.warning_errors = True

DEBUG = os.environ.get("KCOORD_DEBUG", "") not in ("", "0")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
    "linetrace": DEBUG,
}
MACROS = [("CYTHON_TRACE_NOGIL", "1")] if DEBUG else []
CFLAGS = ["-Wall", "-Wno-unused-function", "-Wno-unreachable-code"]
CFLAGS += ["-O0", "-g"] if DEBUG else ["-O2", "-g0"]


def ext(name, sources, numpy_api=False):
    # numpy_api: the extension reads arrays through numpy's C API (numpy is a build requirement already)
    return Extension(
        name,
        sources,
        include_dirs=["src/_core", "src/_core/wire"] + ([numpy.get_include()] if numpy_api else []),
        define_macros=MACROS + ([("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] if numpy_api else []),
        extra_compile_args=CFLAGS,
    )


class BuildExt(build_ext):
    """setuptools' build_ext, which takes an extension it already compiled in place as up to date.

    An editable install (pip install -e) compiles into a fresh temporary directory each time and then copies each
    extension into kcoord/_core/; setuptools' own staleness check looks only in that temporary directory.

    The C compiles two extensions at a time, the biggest first: _wire's alone takes most of a build, and the other
    five compile beside it on the second core."""

    def initialize_options(self):
        super().initialize_options()
        # Here rather than in setup(options=...): pip's editable build sets its commands up again without those
        # options, and compiled one extension after the other.
        self.parallel = 2

    def build_extensions(self):
        self.extensions.sort(key=lambda e: -sum(os.path.getsize(s) for s in e.sources if os.path.exists(s)))
        super().build_extensions()

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        in_place = self.get_ext_filename(self.get_ext_fullname(ext.name))  # relative to this directory
        if not self.force and os.path.exists(in_place) and os.path.abspath(in_place) != os.path.abspath(target) \
                and not newer_group([*ext.sources, *ext.depends, os.path.abspath(__file__)], in_place):
            self.mkpath(os.path.dirname(target))
            self.copy_file(in_place, target)  # keeps its time, so it stays up to date
            return
        super().build_extension(ext)


FLAGS_RECORD = os.path.join("build", "cython", "flags.txt")


def flags_changed(path=FLAGS_RECORD):
    """Whether the directives and flags differ from those the C in build/cython/ was generated with (recording them).
    Cython judges its output by file times alone, so a KCOORD_DEBUG build would otherwise keep the other's C."""
    text = repr((sorted(DIRECTIVES.items()), MACROS, CFLAGS)) + "\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return True


EXTENSIONS = [
    ext("kcoord._core._wire", ["src/_core/wire/_wire.pyx"]),
    ext("kcoord._core._members", ["src/_core/members/_members.pyx"]),
    ext("kcoord._core._reply", ["src/_core/reply/_reply.pyx"]),
    ext("kcoord._core._stats", ["src/_core/stats/_stats.pyx"]),
    ext("kcoord._core._offsets", ["src/_core/offsets/_offsets.pyx"]),
    ext("kcoord._core._assign", ["src/_core/assign/_assign.pyx"], numpy_api=True),
]

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        EXTENSIONS,
        compiler_directives=DIRECTIVES,
        force=flags_changed(),
        include_path=["src/_core", "src/_core/wire"],
        nthreads=0 if sys.platform == "win32" else 2,
        build_dir="build/cython",
    ),
)
