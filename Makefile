# privtab — the README's two set-up commands are `make demo` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test test-all lint typecheck bench mutation clean browsers

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
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

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

## make bench: the benchmarks (peers installed from the `bench` extra)
bench: $(VENV)/.stamp-dev
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/privtab bench all

## make mutation: plant each known privacy bug in a scratch copy; the tests must catch every one
mutation: $(VENV)/.stamp-dev
	$(BIN)/python tools/mutation.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
