"""What the tests do again and again: run a transform in process or the CLI in a process of its own, and
read an output back (its manifest, its rows, its files). The fixtures are conftest.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT, SAMPLE_DATA  # noqa: F401 - ROOT is the tests' as much as SAMPLE

SAMPLE = SAMPLE_DATA
PRERELEASE = Path(sys.prefix) / "prerelease-tokenizers"  # the Makefile installs the pinned pre-release here


def run_transform(inputs, tokenizer, output, workers=1, pool="auto", **overrides):
    """Library-level transform with test-friendly defaults; returns the Summary."""
    from objcli.recipe import config_from_values
    from objcli.transform import transform

    if overrides.pop("pack", False):  # the old flag, as the CLI maps it
        from objcli.objectives import REGISTRY

        objective = REGISTRY.named(overrides.get("objective", "clm"))
        layout = {"layout": overrides["layout"]} if "layout" in overrides else {}
        overrides["packing"] = objective.legacy_pack(objective.options_type(**layout))
    values = {"inputs": [str(i) for i in inputs], "tokenizer": str(tokenizer), "output": str(output), **overrides}
    return transform(config_from_values(values), workers=workers, overwrite=True, pool=pool)


def run_tokenize(inputs, tokenizer, output, kind="documents", workers=1, **overrides):
    """Library-level ``objcli tokenize`` (a store of ``kind``: documents, conversations, pairs, a splitter's
    name) with the same defaults as ``run_transform``; returns the Summary."""
    from objcli.recipe import config_from_values
    from objcli.transform import tokenize

    values = {"inputs": [str(i) for i in inputs], "tokenizer": str(tokenizer), "output": str(output), **overrides}
    return tokenize(config_from_values(values), kind, workers=workers, overwrite=True)


def cli(args, **kwargs):
    """``objcli ARGS`` in this process, through Click's test runner (``input=`` for standard input): the
    result's ``exit_code`` and ``output``. ``run_cli`` runs it in a process of its own."""
    from click.testing import CliRunner

    from objcli.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


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


def as_a_terminal_starts_it() -> None:
    """``preexec_fn`` for a command a test stops with a signal: SIGINT and SIGHUP at their defaults, as a
    terminal starts a command. A child inherits an ignored signal, and a test run started in the
    background (``cmd &`` in a script, ``nohup``) ignores SIGINT (and SIGHUP), so the command would too."""
    import signal

    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


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


def shard_files(folder) -> dict[str, bytes]:
    """The files the manifest lists, by name (not the manifest, nor side files that name the run's inputs,
    as the hf state file's fingerprint does)."""
    listed = {name for shard in manifest_json(folder)["shards"] for name in shard["files"]}
    return {k: v for k, v in folder_bytes(folder).items() if k in listed}


def text_formats() -> list[str]:
    """The registry's formats a run from text writes (a plan is made over a token store only: its own
    tests, tests/reading/, run it from one)."""
    from objcli.formats import FORMATS

    return [name for name, f in FORMATS.items() if not f.packs_positions]


TEXT_FORMATS = text_formats()


def token_format_detected(path, requested: str = "auto", ids_key: str = "input_ids") -> str | None:
    """The token format the one door finds for ``path`` (inputs/input_kinds.detect), None for another kind."""
    from objcli.inputs.input_kinds import detect
    from objcli.inputs.pieces import InputKind

    found = detect(str(path), requested, ids_key)
    return found.format if found.kind is InputKind.TOKENS else None
