# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test test-extras test-all bench lint clean

$(VENV)/.installed-core: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[datasets]'
	touch $@

# The tests run the stable `tokenizers` (the reference) and, in processes of their own with this
# folder first on PYTHONPATH, the pre-release that objcli[fast] pins (both are called `tokenizers`).
PRERELEASE_TOKENIZERS := tokenizers==1.0.0rc3

# The released packed-SFT readers, as wheels whose source the tests run (tests/support/released_readers.py):
# the packages need CUDA builds to import, so they are downloaded, never installed.
RELEASED_READERS := megatron-bridge==0.3.1 nemo-toolkit==2.4.0

# PyTorch's CPU build first (the train extra's range then installs nothing more; a plain `torch`
# would bring a CUDA build of several GB).
TORCH := torch==2.13.0

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-core
	$(PIP) install -q '$(TORCH)'
	$(PIP) install -q -e '.[test,bench,dask,train]'
	$(PIP) install -q --no-deps --upgrade --target $(VENV)/prerelease-tokenizers '$(PRERELEASE_TOKENIZERS)'
	$(PIP) download -q --no-deps -d $(VENV)/released-readers $(RELEASED_READERS)
	touch $@

demo: $(VENV)/.installed-core
	$(BIN)/objcli transform sample_data/ --tokenizer sample_data/tokenizer.model --text-unit paragraph \
		--objective clm --seq-len 512 -o demo_out/ --overwrite
	$(BIN)/objcli inspect demo_out/ --rows 1

# -n auto: one test process per core (pytest-xdist); every test has its own folders, ports and caches.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n auto --dist worksteal

# A fresh virtual environment per extra (core + that extra alone, as a user installs it) runs its feature.
test-extras: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n auto --dist worksteal -m slow tests/project/test_extras.py tests/project/test_lowest_versions.py tests/formats/test_trainers.py \
		tests/formats/test_megatron_builder.py tests/tokenizers/test_whole_texts.py
	$(BIN)/python -m pytest -n auto --dist worksteal -m heavy

test-all: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n auto --dist worksteal -m ''

bench: $(VENV)/.installed-test
	$(BIN)/python tests/benchmarks/benchmarks.py

lint: $(VENV)/.installed-test
	$(BIN)/ruff check objcli tests
	$(BIN)/ruff format --check objcli tests

clean:
	rm -rf $(VENV) demo_out bench_data bench_out .pytest_cache .hypothesis build objcli.egg-info
