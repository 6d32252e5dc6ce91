"""Docs that cannot go stale: every console block of the README and the manual that starts with
``objcli`` or ``make`` is run here on sample_data with its output compared (seconds and MB/s
masked), or marked ``<!-- not run: reason -->``; the option reference is the code's; every page is
reachable from the README and printed by ``objcli help``."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runs import ROOT, SAMPLE, cli

from objcli.docs import TOPICS, options_reference, page

PAGES = [ROOT / "README.md", *sorted((ROOT / "objcli" / "docs").glob("*.md"))]
COMMAND = re.compile(r"^\$?\s*(\.venv/bin/)?(objcli|make)\b")
VOLATILE = [(re.compile(r"\b\d+(\.\d+)?s\b"), "<s>"), (re.compile(r"[\d.,]+ (MB|tokens)/s"), r"<\1/s>")]


def blocks(path: Path):
    """(line, language, body lines, the line before the fence) of every fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield i + 1, lines[i][3:].strip(), lines[i + 1 : j], lines[i - 1] if i else ""
            i = j + 1
        else:
            i += 1


def runnable(language: str, body: list[str]) -> bool:
    return language == "console" and bool(body) and body[0].startswith("$ ")


def command_blocks():
    for path in PAGES:
        for line, language, body, before in blocks(path):
            first = next((b for b in body if b.strip()), "")
            if COMMAND.match(first) or runnable(language, body):
                yield pytest.param(path, line, language, body, before, id=f"{path.name}:{line}")


def test_every_command_block_is_run_or_says_why_not():
    unmarked = []
    for path, line, language, body, before in (p.values for p in command_blocks()):
        reason = re.fullmatch(r"<!-- not run: (.+) -->", before.strip())
        recipe = re.fullmatch(r"<!-- recipe: [\w-]+ -->", before.strip())  # run by tests/formats/test_trainers.py
        if not runnable(language, body) and not (reason and len(reason.group(1)) > 10) and not recipe:
            unmarked.append(f"{path.relative_to(ROOT)}:{line}")
    assert not unmarked, "blocks neither run nor marked '<!-- not run: reason -->': " + ", ".join(unmarked)


def _masked(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text.rstrip("\n")


def _commands(body: list[str]):
    """(command, expected output) for each ``$ `` line of a console block."""
    steps = []
    for line in body:
        if line.startswith("$ "):
            steps.append([line[2:], []])
        else:
            steps[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in steps]


RUNNABLE = [p for p in command_blocks() if runnable(p.values[2], p.values[3])]


@pytest.mark.parametrize("path, line, language, body, before", RUNNABLE)
def test_console_blocks_print_what_the_page_shows(path, line, language, body, before, tmp_path):
    (tmp_path / "sample_data").symlink_to(SAMPLE)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "132"}
    for command, expected in _commands(body):
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command + " 2>&1"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert _masked(result.stdout) == _masked(expected), f"{path.name}:{line}: {command}"


def test_the_option_reference_is_generated_from_the_code():
    written = (ROOT / "objcli" / "docs" / "options.md").read_text(encoding="utf-8")
    assert written == options_reference(), "objcli/docs/options.md is stale: run python -m objcli.docs"


def test_every_page_is_linked_from_the_readme_and_printed_by_help():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    on_disk = {p.stem for p in (ROOT / "objcli" / "docs").glob("*.md")}
    assert on_disk == set(TOPICS)
    listing = cli(["help"]).output
    for topic in TOPICS:
        assert f"(objcli/docs/{topic}.md)" in readme and topic in listing
        assert cli(["help", topic]).output == page(topic)
    result = cli(["help", "objectivs"])
    assert result.exit_code == 1 and "did you mean 'objectives'" in result.output


def test_links_between_pages_resolve():
    broken = []
    for path in PAGES:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", path.read_text(encoding="utf-8")):
            if not (path.parent / target).resolve().is_file():
                broken.append(f"{path.name} -> {target}")
    assert not broken
