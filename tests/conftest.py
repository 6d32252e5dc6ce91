import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))  # the tests' helpers: reference.py, paths.py, chat_data.py, …

SAMPLE = ROOT / "sample_data"


PRERELEASE = Path(sys.prefix) / "prerelease-tokenizers"  # the Makefile installs the pinned pre-release here


def pytest_configure(config):
    """The suite starts objcli in hundreds of processes (the CLI, pool workers, forkservers). Where the
    environment says PYTHONDONTWRITEBYTECODE, each compiled objcli's modules from source again (about
    0.3 s of CPU a process); the tests' processes keep objcli's bytecode in `__pycache__` (ignored by
    git), as Python does by default. Set here, before pytest-xdist starts its workers."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


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


def run_transform(inputs, tokenizer, output, workers=1, pool="auto", **overrides):
    """Library-level transform with test-friendly defaults; returns the Summary."""
    from objcli.recipe import config_from_values
    from objcli.transform import transform

    if overrides.pop("pack", False):  # the old flag, as the CLI maps it
        from objcli.objectives import REGISTRY

        objective = REGISTRY.get(overrides.get("objective", "clm"))
        layout = {"layout": overrides["layout"]} if "layout" in overrides else {}
        overrides["packing"] = objective.legacy_pack(objective.options_type(**layout))
    values = {"inputs": [str(i) for i in inputs], "tokenizer": str(tokenizer), "output": str(output), **overrides}
    return transform(config_from_values(values), workers=workers, overwrite=True, pool=pool)


def read_output(folder):
    """(manifest, every shard of an Arrow output concatenated as a dict of Python lists)."""
    import pyarrow as pa

    folder = Path(folder)
    manifest = manifest_json(folder)
    tables = [pa.ipc.open_stream(pa.memory_map(str(folder / s["files"][0]))).read_all() for s in manifest["shards"]]
    return manifest, pa.concat_tables(tables).to_pydict()


def run_cli(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    """``objcli ARGS`` in a process of its own (for crashes, rlimits, other folders); text output.
    The process is forked from one that has imported objcli already (``forked_cli.py``)."""
    from forked_cli import run_objcli

    return run_objcli([str(a) for a in args], {**os.environ, **(env or {})}, 600, **kwargs)


def folder_bytes(folder) -> dict[str, bytes]:
    """Every file of an output folder (shards and manifest), by name."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}


def manifest_json(folder) -> dict:
    """A finished output's manifest as the JSON a user reads (objcli itself reads it through its schema)."""
    import json

    return json.loads((Path(folder) / "manifest.json").read_text())


def without_warnings(stderr: str) -> str:
    """What a run printed besides its warnings (``objcli: warning: …``): the summary or the error."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("objcli: warning: "))


def prerelease_env() -> dict:
    """The environment of a process that imports the pinned tokenizers pre-release (objcli[fast])."""
    if not (PRERELEASE / "tokenizers").is_dir():
        pytest.skip("the pre-release is not installed beside the stable release (make test installs it)")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(PRERELEASE), os.environ.get("PYTHONPATH", "")])}
