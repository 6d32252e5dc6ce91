"""Progress a person can plan around: under a pseudo-terminal every long command shows its phase,
a percentage and the time left, rising to 100 %; ``OBJCLI_PROGRESS=lines`` gives the same facts as
lines in a log; piped, nothing (the README's executed blocks and the golden table cover that)."""

import json
import os
import pty
import re
import subprocess
import sys

import pytest
from runs import SAMPLE, run_transform

PERCENT = re.compile(r"(\d+)%")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 20 MB of distinct documents (the sample prose, numbered): a run of a second or two."""
    folder = tmp_path_factory.mktemp("progress")
    lines = (SAMPLE / "prose.jsonl").read_text().splitlines()
    with open(folder / "big.jsonl", "w") as f:
        for copy in range(16):
            for line in lines:
                record = json.loads(line)
                f.write(json.dumps({"text": f"{record['text']} ({copy})"}) + "\n")
    return folder / "big.jsonl"


def on_a_terminal(*args, env=None) -> str:
    """stderr of ``objcli ARGS`` run with stderr on a pseudo-terminal, carriage returns as lines."""
    parent, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "objcli", *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=child,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )
    os.close(child)
    output = b""
    while True:
        try:
            chunk = os.read(parent, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(parent)
    assert process.wait() == 0, output.decode(errors="replace")[-2000:]
    return output.decode(errors="replace").replace("\r", "\n")


def _check_rises_to_full(text: str, phase: str) -> None:
    shown = [line for line in text.splitlines() if line.startswith(phase) and "%" in line]
    percents = [int(PERCENT.search(line).group(1)) for line in shown]
    assert percents and percents == sorted(percents) and percents[-1] == 100, shown
    assert any(re.search(r"<\d+:\d\d", line) for line in shown), shown  # tqdm's time left


@pytest.fixture(scope="module")
def output(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("progress-out") / "o"
    text = on_a_terminal(
        "transform",
        corpus,
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        out,
        "--partition-size",
        "1MiB",
        "--seq-len",
        "512",
        "--shard-size",
        "400",
    )
    return out, text


def test_transform_shows_bytes_of_input_against_the_total(output):
    _, text = output
    _check_rises_to_full(text, "transform")
    assert "tokens/s" in text and "objcli: done" in text


@pytest.mark.parametrize("command", ["verify", "stats", "reshard", "merge"])
def test_commands_over_shards_show_how_far_they_are(command, output, tmp_path):
    out, _ = output
    args = {
        "verify": [out],
        "stats": [out],
        "reshard": [out, "--shard-size", "300", "-o", tmp_path / "r"],
        "merge": [out, "-o", tmp_path / "m"],
    }[command]
    _check_rises_to_full(on_a_terminal(command, *args), command)


def test_a_resumed_run_starts_from_what_is_done(corpus, tmp_path):
    out = tmp_path / "o"
    args = [
        "transform",
        corpus,
        "-t",
        SAMPLE / "tokenizer.model",
        "-o",
        out,
        "--partition-size",
        "1MiB",
        "--workers",
        "1",
    ]
    killed = subprocess.run(
        [sys.executable, "-m", "objcli", *map(str, args)],
        capture_output=True,
        env={**os.environ, "OBJCLI_CRASH_AT": "partition-start:8"},
    )
    assert killed.returncode != 0
    text = on_a_terminal(*args)
    first = [
        int(PERCENT.search(line).group(1)) for line in text.splitlines() if line.startswith("transform") and "%" in line
    ]
    assert first and first[0] >= 20, first  # seven partitions of seventeen were kept
    assert "7 of 17 partitions kept" in text


@pytest.mark.parametrize("command", ["transform", "tokenize"])
def test_progress_lines_for_logs(command, corpus, tmp_path):
    """Lines for a log, named by the command that runs (issue 83: tokenize's said "transform")."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            command,
            str(corpus),
            "-t",
            str(SAMPLE / "tokenizer.model"),
            "-o",
            str(tmp_path / "o"),
            "--partition-size",
            "1MiB",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OBJCLI_PROGRESS": "0.2"},
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"objcli {command}: ") and "%" in line]
    percents = [int(PERCENT.search(line).group(1)) for line in lines]
    assert len(lines) >= 2 and percents == sorted(percents) and percents[-1] == 100
    assert all(" left" in line for line in lines)
    quiet = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            str(corpus),
            "-t",
            str(SAMPLE / "tokenizer.model"),
            "-o",
            str(tmp_path / "q"),
            "-q",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OBJCLI_PROGRESS": "0.2"},
    )
    assert "objcli transform: " not in quiet.stderr  # --quiet wins


@pytest.mark.heavy
def test_the_dask_executor_counts_what_its_workers_finished(corpus, tmp_path):
    pytest.importorskip("distributed")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "objcli",
            "transform",
            str(corpus),
            "-t",
            str(SAMPLE / "tokenizer.model"),
            "-o",
            str(tmp_path / "o"),
            "--partition-size",
            "2MiB",
            "--executor",
            "dask",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OBJCLI_PROGRESS": "0.01"},
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("objcli transform: ")]
    percents = [int(PERCENT.search(line).group(1)) for line in lines]
    assert percents and percents == sorted(percents) and percents[-1] == 100, lines


@pytest.mark.parametrize("command", ["transform", "verify"])
def test_a_closed_standard_error_leaves_the_status_the_runs(command, tmp_path):
    """``2>&-`` with OBJCLI_PROGRESS=lines: Python has no sys.stderr; a good run still exits 0."""
    import shlex

    small = tmp_path / "p.jsonl"
    small.write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:40]))
    transform = [sys.executable, "-m", "objcli", "transform", str(small), "-t", str(SAMPLE / "tokenizer.model"),
                 "--seq-len", "64", "-o", str(tmp_path / "o")]  # fmt: skip
    if command == "verify":
        assert subprocess.run(transform, capture_output=True).returncode == 0
        args = [sys.executable, "-m", "objcli", "verify", str(tmp_path / "o")]
    else:
        args = transform
    closed = subprocess.run(
        ["sh", "-c", " ".join(map(shlex.quote, args)) + " 2>&-"],
        env={**os.environ, "OBJCLI_PROGRESS": "lines"},
        stdout=subprocess.PIPE,
    )
    assert closed.returncode == 0
    assert subprocess.run([sys.executable, "-m", "objcli", "verify", str(tmp_path / "o")]).returncode == 0


def test_an_unknown_progress_setting_is_one_line(tmp_path):
    shown = subprocess.run(
        [sys.executable, "-m", "objcli", "verify", str(tmp_path)],
        env={**os.environ, "OBJCLI_PROGRESS": "abc"},
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 1 and shown.stderr.count("\n") == 1 and "OBJCLI_PROGRESS='abc'" in shown.stderr
    assert "lines" in shown.stderr and "Traceback" not in shown.stderr


def test_rows_to_a_closed_standard_output_are_refused(tmp_path):
    """``-o - >&-``: the rows would go nowhere (Python gives no sys.stdout, objcli puts /dev/null there): one
    line and status 1, never a run that says it streamed them; to /dev/null itself, as asked, it runs."""
    import shlex

    small = tmp_path / "p.jsonl"
    small.write_text("".join((SAMPLE / "prose.jsonl").read_text().splitlines(keepends=True)[:40]))
    args = [sys.executable, "-m", "objcli", "transform", str(small), "-t", str(SAMPLE / "tokenizer.model"),
            "--seq-len", "64", "-o", "-"]  # fmt: skip
    closed = subprocess.run(["sh", "-c", " ".join(map(shlex.quote, args)) + " >&-"], capture_output=False,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert closed.returncode == 1 and closed.stderr.strip().splitlines() == [
        "Error: -o -: standard output is closed, so the rows would go nowhere; give an output folder"
    ]
    assert subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def test_a_command_that_shows_refuses_a_closed_standard_output(tmp_path):
    """``objcli inspect OUT >&-`` would show nothing and exit 0: one line and status 1, as ``ls >&-`` fails;
    verify, whose answer is its status, still runs."""
    import shlex

    out = tmp_path / "o"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", out, seq_len=64)
    for command, status in (("inspect", 1), ("stats", 1), ("verify", 0)):
        args = [sys.executable, "-m", "objcli", command, str(out)]
        closed = subprocess.run(["sh", "-c", " ".join(map(shlex.quote, args)) + " >&-"], stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        assert closed.returncode == status, (command, closed.stderr)
        if status:
            assert (
                closed.stderr.strip()
                == f"Error: {command}: standard output is closed, so nothing would be shown; run it with output open"
            )
