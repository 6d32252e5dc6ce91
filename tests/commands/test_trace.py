"""``objcli trace`` prints a row's origin only where it can be trusted: the provenance file the manifest
recorded, and the input file the run read (where it was, as it was then)."""

import json
import os
import shutil

import pytest
from runs import SAMPLE, run_cli

SPM = SAMPLE / "tokenizer.model"


@pytest.fixture
def traced(tmp_path):
    """An output of two shards with provenance, written from a relative input path in ``run/``."""
    run = tmp_path / "run"
    run.mkdir()
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:40]
    (run / "p.jsonl").write_text("".join(lines))
    done = run_cli(
        "transform", "p.jsonl", "-t", SPM, "--seq-len", "64", "--provenance", "--shard-size", "200", "-o", "out", "-q",
        cwd=run,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run


def _first_segment_text(run, row: int) -> tuple[dict, str]:
    span = json.loads(run_cli("trace", run / "out", row, "--json").stdout)[0]
    text = json.loads((run / "p.jsonl").read_text().splitlines()[span["record"]])["text"]
    return span, text[slice(*span["chars"])]


def test_a_source_edited_since_the_run_is_said_not_printed_as_its_origin(traced):
    span, original = _first_segment_text(traced, 3)
    assert original in run_cli("trace", traced / "out", "3").stdout
    lines = (traced / "p.jsonl").read_text().splitlines(keepends=True)
    (traced / "p.jsonl").write_text(json.dumps({"text": "an inserted record " * 40}) + "\n" + "".join(lines))
    shown = run_cli("trace", traced / "out", "3")
    assert shown.returncode == 0 and "changed since the run" in shown.stdout, shown.stdout
    assert "an inserted record" not in shown.stdout and original not in shown.stdout


def test_trace_from_another_folder_reads_the_file_the_run_read(traced, tmp_path):
    span, original = _first_segment_text(traced, 5)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "p.jsonl").write_text(json.dumps({"text": "another file of the same name " * 40}) + "\n" * 3)
    shown = run_cli("trace", traced / "out", "5", cwd=elsewhere)
    assert shown.returncode == 0 and original in shown.stdout and "another file" not in shown.stdout
    os.rename(traced / "p.jsonl", traced / "moved.jsonl")
    gone = run_cli("trace", traced / "out", "5", cwd=elsewhere)
    assert "is gone since the run" in gone.stdout and "another file" not in gone.stdout


def test_provenance_files_swapped_between_shards_are_refused(traced):
    out = traced / "out"
    first, second = sorted(out.glob("*.provenance"))[:2]
    shutil.move(first, out / "swap")
    shutil.move(second, first)
    shutil.move(out / "swap", second)
    shown = run_cli("trace", out, "0")
    assert shown.returncode == 1 and shown.stderr.count("\n") == 1 and "does not match" in shown.stderr
    assert first.name in shown.stderr and "objcli verify" in shown.stderr
