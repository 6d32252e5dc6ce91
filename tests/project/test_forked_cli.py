"""The suite's ``run_cli`` forks objcli from a server that has imported it (tests/support/forked_cli.py):
what a test sees must be what a fresh ``python -m objcli`` gives, or every test that uses it checks
something else than the command users run."""

import os
import re
import subprocess
import sys

import pytest
from forked_cli import SERVER, run_objcli
from runs import SAMPLE

CASES = {
    "help": (["transform", "--help"], {}, None),
    "bad input": (["transform", "missing.jsonl", "-t", str(SAMPLE / "tokenizer.model"), "-o", "out"], {}, None),
    "bad option": (["transform", "--seq-len", "x"], {}, None),
    "environment": (["verify", "."], {"OBJCLI_PROGRESS": "abc"}, None),
    "standard input": (
        ["transform", "-", "-t", str(SAMPLE / "tokenizer.model"), "--seq-len", "8", "-o", "out", "-q"],
        {},
        '{"text": "Standard input is read to its end."}\n' * 20,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_forked_command_is_what_a_fresh_process_gives(case, tmp_path):
    args, extra, stdin = CASES[case]
    env = {**os.environ, **extra}
    (tmp_path / "fresh").mkdir()
    (tmp_path / "forked").mkdir()
    fresh = subprocess.run(
        [sys.executable, "-m", "objcli", *args], capture_output=True, text=True, env=env, cwd=tmp_path / "fresh",
        input=stdin, timeout=600,
    )  # fmt: skip
    forked = run_objcli(args, env, 600, cwd=tmp_path / "forked", input=stdin)
    assert SERVER.process is not None and SERVER.process.poll() is None  # it was forked, not run afresh
    assert (forked.returncode, forked.stdout, _untimed(forked.stderr.replace("forked", "fresh"))) == (
        fresh.returncode,
        fresh.stdout,
        _untimed(fresh.stderr),
    )
    fresh_files = sorted(p.relative_to(tmp_path / "fresh") for p in (tmp_path / "fresh").rglob("*"))
    assert fresh_files == sorted(p.relative_to(tmp_path / "forked") for p in (tmp_path / "forked").rglob("*"))


def _untimed(summary: str) -> str:
    """A summary without its timing (``in 0.1s (0.0 MB/s, 3,246 tokens/s)``), which no two runs share."""
    return re.sub(r" in [0-9.]+s \([^)]*\)", " in …", summary)


def test_an_environment_that_changes_imports_runs_a_fresh_interpreter(tmp_path):
    """PYTHONPATH decides which packages a process imports: the server's are already imported."""
    (tmp_path / "packages" / "objcli").mkdir(parents=True)
    (tmp_path / "packages" / "objcli" / "__main__.py").write_text("print('the other objcli')\n")
    (tmp_path / "packages" / "objcli" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "packages")}
    done = run_objcli(["--help"], env, 600, cwd=tmp_path)
    assert done.stdout == "the other objcli\n"
