"""Peak memory does not grow with the size of a file or of one document (measured with wait4's
rusage of the one child process: a memory figure, not a wall-clock one)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import SAMPLE_DATA

SAMPLE = SAMPLE_DATA


def peak_rss_mib(*args) -> tuple[float, str]:
    """Run ``objcli transform`` in one process (--workers 1) and return its peak RSS and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "objcli", "transform", *map(str, args), "--workers", "1", "-q"],
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, stderr
    return usage.ru_maxrss / 1024, stderr  # Linux reports kilobytes


def corpus_file(path: Path, megabytes: int) -> Path:
    lines = (SAMPLE / "prose.jsonl").read_bytes()
    with open(path, "wb") as f:
        for _ in range(-(-megabytes * 10**6 // len(lines))):
            f.write(lines)
    return path


def _rss_for(tmp_path: Path, sizes: tuple[int, int]) -> list[float]:
    peaks = []
    for megabytes in sizes:
        data = corpus_file(tmp_path / f"corpus-{megabytes}.jsonl", megabytes)
        peak, _ = peak_rss_mib(
            data,
            "-t",
            SAMPLE / "tokenizer.model",
            "-o",
            tmp_path / f"out-{megabytes}",
            "--seq-len",
            "2048",
            "--partition-size",
            "4MiB",
            "--batch-size",
            "1MiB",
        )
        peaks.append(peak)
        data.unlink()
    return peaks


def test_peak_rss_does_not_grow_with_file_size(tmp_path):
    small, large = _rss_for(tmp_path, (3, 24))  # one file, 8x larger
    assert large < small * 1.15 + 16, (small, large)


@pytest.mark.slow
def test_peak_rss_on_a_file_of_hundreds_of_megabytes(tmp_path):
    small, large = _rss_for(tmp_path, (4, 400))
    assert large < small * 1.15 + 16, (small, large)


@pytest.mark.heavy
def test_a_huge_document_is_cut_and_streams_through(tmp_path):
    words = (SAMPLE / "reference.txt").read_text(encoding="utf-8").encode("ascii", "ignore").decode().split()
    text = " ".join(words * (30_000_000 // (len(" ".join(words)) + 1) + 1))  # one ~30 MB document
    data = tmp_path / "huge.jsonl"
    data.write_text(json.dumps({"text": "A small one first."}) + "\n" + json.dumps({"text": text}) + "\n")
    common = ["-t", SAMPLE / "tokenizer.model", "--seq-len", "2048", "--max-document-chars", "1000000"]
    peak, _ = peak_rss_mib(data, *common, "-o", tmp_path / "out")
    baseline, _ = peak_rss_mib(SAMPLE / "prose.jsonl", *common, "-o", tmp_path / "baseline")
    # The record itself is held twice (its bytes, then its text); nothing else grows with it.
    assert peak < baseline + 3 * len(text) / 2**20, (baseline, peak)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    totals = manifest["totals"]
    pieces = -(-len(text) // 1_000_000)
    assert totals["long_documents_cut"] == 1
    assert pieces <= totals["documents_read"] - 1 <= pieces + 1  # cuts fall before spaces, so a piece may be short
    assert totals["documents_read"] == totals["documents_written"] + totals["documents_skipped"]
