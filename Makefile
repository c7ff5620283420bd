# privtab — the README's two set-up commands are `make demo` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Bytecode is written (__pycache__/, ignored by git) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): otherwise every pytest worker rewrites all 250 test modules'
# asserts again (≈ 7 s each) and every privtab subprocess of the tests compiles the package
# from source (≈ 0.4 s each) — on every run.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-all test-extras lint typecheck docs bench bench-peers mutation clean browsers

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

$(VENV)/.stamp-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $@

## make demo: run the main job on built-in synthetic data
demo: $(VENV)/.stamp-base
	$(BIN)/privtab demo

lint: $(VENV)/.stamp-dev
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

typecheck: $(VENV)/.stamp-dev
	$(BIN)/mypy

## make docs: the documentation site (mkdocs.yml: docs/*.md, the API reference from the
## docstrings) built into site/ with --strict — any warning (a broken link or anchor, a
## docstring mkdocstrings cannot read) fails the build
docs: $(VENV)/.stamp-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

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

## make test-extras: each optional extra alone is enough — a fresh venv per extra with only
## that extra and pytest (pip's cache is reused), then the tests that need it, run against
## the installed (non-editable) package: spark → the core Spark-vs-polars equivalence tests
## of SafeTab-P and TopDown (and no pandas >= 3 warning from pyspark); bench → the
## dp_accounting cross-check
EXTRAS_VENV ?= .venv-extra
test-extras:
	rm -rf $(EXTRAS_VENV)-spark $(EXTRAS_VENV)-bench
	$(PYTHON) -m venv $(EXTRAS_VENV)-spark
	$(EXTRAS_VENV)-spark/bin/python -m pip install --quiet '.[spark]' pytest
	$(EXTRAS_VENV)-spark/bin/python -W error::FutureWarning -c \
	  "import pyspark.sql.pandas.utils as u; u.require_minimum_pandas_version(); u.require_minimum_pyarrow_version()"
	$(EXTRAS_VENV)-spark/bin/python -m pytest -q -p no:cacheprovider \
	  tests/tabulate/test_spark_engine.py -k "test_exact_equivalence and txt"
	$(EXTRAS_VENV)-spark/bin/python -m pytest -q -p no:cacheprovider --runslow \
	  tests/topdown/test_spark.py -k "local_spark"
	$(PYTHON) -m venv $(EXTRAS_VENV)-bench
	$(EXTRAS_VENV)-bench/bin/python -m pip install --quiet '.[bench]' pytest
	$(EXTRAS_VENV)-bench/bin/python -c "import opendp, dp_accounting"
	$(EXTRAS_VENV)-bench/bin/python -m pytest -q -p no:cacheprovider \
	  tests/accounting/test_pld.py -k dp_accounting
	rm -rf $(EXTRAS_VENV)-spark $(EXTRAS_VENV)-bench

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

## make mutation: plant each known privacy bug in a scratch copy; the tests must catch every one
mutation: $(VENV)/.stamp-dev
	$(BIN)/python tools/mutation.py

clean:
	rm -rf $(VENV) $(PEERS) .mypy_cache .pytest_cache .ruff_cache site
