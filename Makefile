# privtab — the README's two set-up commands are `make demo` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test test-all lint typecheck bench bench-peers clean browsers

# the peer libraries of the benchmarks: OpenDP and dp_accounting in the project's venv (the
# `bench` extra); Tumult Analytics in its own venv (it pins numpy < 2 and pandas < 2), under
# $(PEERS) — `privtab bench safetab` finds it there (docs/benchmarks.md, "Rerunning")
PEERS ?= .bench-peers
TUMULT_VERSION ?= 0.21.0

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.stamp-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.stamp-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.stamp-base

## make demo: run the main job on built-in synthetic data
demo: $(VENV)/.stamp-base
	$(BIN)/privtab demo

lint: $(VENV)/.stamp-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(VENV)/.stamp-dev
	$(BIN)/mypy

## make browsers: headless Chromium (Debian package) for the HTML report rendering tests
browsers:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make browsers: installing Debian's chromium for the HTML report tests"; \
	  apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 \
	  || (apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends chromium >/dev/null 2>&1) \
	  || echo "make browsers: could not install chromium; the HTML rendering tests will be skipped"; \
	else \
	  echo "make browsers: chromium not found and not root with apt-get; the HTML rendering tests will be skipped"; \
	fi

## make test: lint, type-check (strict on src/) and the test suite (slow tests excluded)
test: browsers lint typecheck
	$(BIN)/python -m pytest -n auto $(PYTEST_ARGS)

## make test-all: everything, including the slow statistical and scale tests
test-all: browsers lint typecheck
	$(BIN)/python -m pytest -n auto --runslow $(PYTEST_ARGS)

## make bench-peers: the peer libraries of the benchmarks (Tumult needs Java 17 to run)
bench-peers: $(VENV)/.stamp-dev
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	test -x $(PEERS)/tumult/bin/python || $(PYTHON) -m venv $(PEERS)/tumult
	$(PEERS)/tumult/bin/python -m pip install --quiet 'tmlt.analytics==$(TUMULT_VERSION)'
	$(PEERS)/tumult/bin/python -c "import tmlt.analytics; print('Tumult Analytics ready in $(PEERS)/tumult')"

## make bench: the light benchmarks with their peers (`privtab bench list`; heavy ones by name)
bench: bench-peers
	$(BIN)/privtab bench all

clean:
	rm -rf $(VENV) $(PEERS) .mypy_cache .pytest_cache .ruff_cache
