"""atheris entry point: coverage-guided fuzzing of the frame decoder and the request handlers.

    python -m tests.fuzz.fuzz_requests [libFuzzer flags] CORPUS_DIR...      (from the repository root)

kcoord's Python modules (server, broker, coordinator, groups, offsets, store, ...) and the harness are imported
under `atheris.instrument_imports()`, so libFuzzer sees their branches and keeps the inputs that reach new ones.
The compiled core (kcoord._core: the wire codec and FrameReader, the member tables, the assignors) is Cython
built without coverage instrumentation: atheris instruments Python bytecode only, so the fuzzer drives the codec
blind (through the structured inputs of the harness, and libFuzzer's byte-level mutations) and learns only from
the Python that runs on its results. See harness.py for the input format and the invariants.

tests/wire/test_fuzz.py runs this for a time budget on a copy of corpus/fuzz_requests/; `make fuzz` runs it longer
and merges what it found into the corpus.
"""

import sys

import atheris

with atheris.instrument_imports(include=["kcoord", "tests.fuzz"]):
    from tests.fuzz.harness import TestOneInput


def main() -> None:
    # libFuzzer runs -merge=1 (and -jobs, -fork) in child processes, by handing its own command line to the shell:
    # this module, not a file it could execute, is what the children must run.
    argv = [f"{sys.executable} -m tests.fuzz.fuzz_requests", *sys.argv[1:]]
    atheris.Setup(argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
