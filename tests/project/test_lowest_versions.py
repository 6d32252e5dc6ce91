"""The core install and ``[hf]`` at the lowest versions pyproject.toml allows: every ``name>=X`` of
their dependencies installed as ``name==X.*`` in a fresh virtual environment, objcli's wheel beside them. The
floors are promises to users, and nothing else tests them: sentencepiece 0.2.1 could not encode
(``return_type`` came in 0.2.2) and msgspec before 0.23 raises a different error for invalid UTF-8
than 0.23 does, while every other test ran on the newest versions.

Slow (a virtual environment, from the package index or pip's cache): ``make test-extras`` and
``.ci/run`` run it."""

from __future__ import annotations

import re

import pytest
from runs import SAMPLE, folder_bytes, run_cli
from test_extras import (  # noqa: F401 - wheel: a fixture
    PYPROJECT,
    check_hf,
    make_venv,
    manifest,
    objcli,
    one_error_line,
    wheel,
)

pytestmark = pytest.mark.slow


def lowest_pins(extra: str | None = None) -> list[str]:
    """Each core dependency (and the extra's) in its floor's release series (``numpy>=1.26`` ->
    ``numpy==1.26.*``: floors name a series, and ``regex==2023.10`` would name no release); one
    without a floor as it is."""
    pins = []
    project = PYPROJECT["project"]
    for requirement in project["dependencies"] + (project["optional-dependencies"][extra] if extra else []):
        floor = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)>=([^,;]+)", requirement.replace(" ", ""))
        pins.append(f"{floor[1]}=={floor[2]}.*" if floor else requirement)
    return pins


def test_the_floors_are_read_from_pyproject():
    pins = lowest_pins("hf")
    assert len(pins) == len(PYPROJECT["project"]["dependencies"]) + len(
        PYPROJECT["project"]["optional-dependencies"]["hf"]
    )
    assert "numpy==1.26.*" in pins and "tokenizers==0.20.*" in pins and all("==" in p for p in pins)


def shards(folder) -> dict[str, bytes]:
    return {name: data for name, data in folder_bytes(folder).items() if name.startswith("part-")}


def test_the_core_and_hf_at_their_lowest_versions_write_the_same_shards(wheel, tmp_path):  # noqa: F811 - the fixture
    bin_folder = make_venv(tmp_path / "venv", wheel, "hf", first=lowest_pins("hf"))
    check_hf(bin_folder, tmp_path)  # the extra most runs use: a tokenizer.json through the stable library

    # The same shards as the newest versions write (Arrow files carry no writer's version).
    args = ["transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--objective", "mlm", "-q"]
    lowest = objcli(bin_folder, *args, "-o", tmp_path / "lowest")
    newest = run_cli(*args, "-o", tmp_path / "newest")
    assert lowest.returncode == 0 and newest.returncode == 0, lowest.stderr + newest.stderr
    assert shards(tmp_path / "lowest") == shards(tmp_path / "newest")

    # Bad records are counted by the same reasons, a damaged manifest is the same one line.
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "good one"}\n{"text": broken\n{"text": "bad \xff utf8"}\n{"text": "good two"}\n')
    tokenizer, rows = ["-t", SAMPLE / "tokenizer.model"], ["--seq-len", "16", "--remainder", "pad"]
    read = objcli(bin_folder, "transform", bad, *tokenizer, *rows, "-o", tmp_path / "bad-out", "-q")
    assert read.returncode == 0, read.stderr
    assert manifest(tmp_path / "bad-out")["totals"]["skipped_by_reason"] == {"bad_json": 1, "invalid_utf8": 1}
    damaged = tmp_path / "lowest" / "manifest.json"
    damaged.write_bytes(damaged.read_bytes().replace(b'"objective"', b'"obj\xffective"', 1))
    assert "manifest.json: not valid JSON" in one_error_line(objcli(bin_folder, "inspect", tmp_path / "lowest"))
