"""Build of kcoord's compiled core. One Cython directive policy for every extension, declared here.

KCOORD_DEBUG=1 turns bounds checks, wraparound and line tracing back on and builds without optimisation.
"""

import os
import sys

import numpy
from Cython.Build import cythonize
from Cython.Compiler import Options
from setuptools import Extension, setup

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


EXTENSIONS = [
    ext("kcoord._core._wire", ["src/_core/wire/_wire.pyx"]),
    ext("kcoord._core._members", ["src/_core/members/_members.pyx"]),
    ext("kcoord._core._reply", ["src/_core/reply/_reply.pyx"]),
    ext("kcoord._core._stats", ["src/_core/stats/_stats.pyx"]),
    ext("kcoord._core._assign", ["src/_core/assign/_assign.pyx"], numpy_api=True),
]

setup(
    # The C of the five extensions compiles two at a time: _wire's alone takes most of a build, the rest beside it.
    options={"build_ext": {"parallel": 2}},
    ext_modules=cythonize(
        EXTENSIONS,
        compiler_directives=DIRECTIVES,
        include_path=["src/_core", "src/_core/wire"],
        nthreads=0 if sys.platform == "win32" else 2,
        build_dir="build/cython",
    ),
)
