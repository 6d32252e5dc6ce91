"""The package copied as a joiner's checkout would be, for the tests that follow architecture.md's recipes:
the new module written into the copy, objcli run from it (first on the path, from its own folder), and the
modules that differ from the package's (what the recipe made a joiner edit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runs import ROOT


def copy_package(folder: Path) -> Path:
    """``folder/objcli``, a copy of the package without bytecode; returns ``folder``."""
    shutil.copytree(ROOT / "objcli", folder / "objcli", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run_in(folder: Path, *args, env=None) -> subprocess.CompletedProcess:
    """``python ARGS`` with the copy in ``folder`` imported as objcli (never the checkout's)."""
    env = {**os.environ, "PYTHONPATH": str(folder), **(env or {})}
    return subprocess.run([sys.executable, *map(str, args)], cwd=folder, env=env, capture_output=True, text=True)


def edited_modules(folder: Path) -> list[str]:
    """The copy's modules that differ from the package's (added, changed or removed), relative to objcli/."""
    before, after = ROOT / "objcli", folder / "objcli"
    names = {p.relative_to(before) for p in before.rglob("*.py")} | {p.relative_to(after) for p in after.rglob("*.py")}
    return sorted(
        str(n) for n in names if not (before / n).is_file() or (before / n).read_bytes() != (after / n).read_bytes()
    )
