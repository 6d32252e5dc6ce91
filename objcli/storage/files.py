"""Small file helpers shared by the output folder, the manifest and the readers of a finished run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .faults import crash_point


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json_atomically(path: Path, data: dict) -> None:
    temp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    try:
        with open(temp, "w", encoding="utf-8") as f:
            half = len(text) // 2
            f.write(text[:half])
            f.flush()
            crash_point(path.name)  # the resume tests kill a run halfway through writing this file
            f.write(text[half:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise
