"""Local staging folders of runs writing to object storage: named by the run's pid, so a run that was
killed (its pid gone) leaves a folder the next run removes."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

STAGING_PREFIX = "objcli-staging-"  # then the pid of the run that owns the folder


def remove_dead_staging() -> None:
    """Staging folders of runs on this machine that were killed (their pid is gone), which their own
    ``close`` never removed; a live run's folder, or one of another naming, is left alone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{STAGING_PREFIX}*"):
        pid = folder.name[len(STAGING_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


def process_alive(pid) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def share_tokenizer(path: str, work) -> str:
    """Upload a local tokenizer (a file, or a folder's ``tokenizer.json``) into the work prefix, for
    workers that share no folder with this machine; returns its URL."""
    source = Path(path)
    if source.is_dir():
        source = source / "tokenizer.json"
    return work.upload(source, f"tokenizer.{source.name}")
