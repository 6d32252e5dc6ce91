# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test test-all bench lint clean

$(VENV)/.installed-core: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-core
	$(PIP) install -q -e '.[test,bench,dask]'
	touch $@

demo: $(VENV)/.installed-core
	$(BIN)/objcli transform sample_data/ --tokenizer sample_data/tokenizer.model --text-unit paragraph \
		--objective clm --seq-len 512 -o demo_out/ --overwrite
	$(BIN)/objcli inspect demo_out/ --rows 1

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

test-all: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m ''

bench: $(VENV)/.installed-test
	$(BIN)/python tests/benchmarks.py

lint: $(VENV)/.installed-test
	$(BIN)/ruff check objcli tests

clean:
	rm -rf $(VENV) demo_out bench_data bench_out .pytest_cache .hypothesis
