"""The suite's fixtures (its helpers are tests/support/: runs.py, reference.py, …)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))  # the helpers: runs.py, reference.py, …

from runs import SAMPLE  # noqa: E402 - found through the path just set


def pytest_configure(config):
    """The suite starts objcli in hundreds of processes (the CLI, pool workers, forkservers). Where the
    environment says PYTHONDONTWRITEBYTECODE, each compiled objcli's modules from source again (about
    0.3 s of CPU a process); the tests' processes keep objcli's bytecode in `__pycache__` (ignored by
    git), as Python does by default. Set here, before pytest-xdist starts its workers.

    objcli's cache (probe verdicts, copies of objects from the tests' S3 endpoint) goes to a folder of the
    suite's own, shared by its processes and kept between runs, never the user's ~/.cache."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    import tempfile

    os.environ["XDG_CACHE_HOME"] = os.path.join(tempfile.gettempdir(), f"objcli-tests-cache-{os.getuid()}")


@pytest.fixture(scope="session")
def sample_tokenizer() -> str:
    return str(SAMPLE / "tokenizer.model")


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> Path:
    """A folder with a slice of the real sample corpus: prose JSONL, code JSONL, plain text."""
    from golden import corpus_slice

    return corpus_slice(tmp_path_factory.mktemp("corpus"), 120, 4, 40_000)
