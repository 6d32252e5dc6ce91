"""The trainer recipes of ``objcli/docs/formats.md``, as the page shows them: each is a shell block
(the objcli command that makes the shards) and a Python block (a complete script), both marked
``<!-- recipe: NAME -->``. The tests run them unchanged, in a folder of their own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from paths import ROOT
from paths import SAMPLE_DATA as SAMPLE

PAGE = ROOT / "objcli" / "docs" / "formats.md"
_BLOCK = re.compile(r"<!-- recipe: ([\w-]+) -->\n```(shell|python)\n(.*?)```", re.S)


def recipe_names() -> list[str]:
    return sorted({name for name, _, _ in _BLOCK.findall(PAGE.read_text())})


def recipe(name: str) -> tuple[list[list[str]], str]:
    """The recipe's objcli commands (each as its arguments, ``objcli`` left out) and its script."""
    blocks = [(language, body) for found, language, body in _BLOCK.findall(PAGE.read_text()) if found == name]
    assert [language for language, _ in blocks] == ["shell", "python"], f"recipe {name}: {blocks}"
    commands = [shlex.split(line)[1:] for line in blocks[0][1].splitlines() if line.startswith("objcli ")]
    return commands, blocks[1][1]


def recipe_folder(folder: Path) -> Path:
    """A folder to run a recipe in: sample_data beside it, as in the repository."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sample_data").symlink_to(SAMPLE)
    return folder
