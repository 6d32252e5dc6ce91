"""The parity probe's verdicts, kept in the user's cache (``storage/user_cache.py``) between runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..storage.user_cache import cache_folder, write_quietly


def _verdict_path(tokenizer, engine) -> tuple[Path, dict]:
    from .. import __version__

    key = {"objcli": __version__, "tokenizer": tokenizer.sha256, "engine": engine.name, "version": engine.version}
    digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:32]
    return cache_folder("probe-verdicts") / f"{digest}.json", key


def kept_verdict(tokenizer, engine) -> str | None:
    """The parity probe's verdict on this tokenizer's files (their sha256), this engine and version and
    this objcli version, if a run found it before (only passes are kept); anything else that differs
    and the probe runs again. Saves loading the independent reference and encoding the probe (a 128k
    ``tokenizer.json``'s readable reference takes most of a second to build)."""
    path, key = _verdict_path(tokenizer, engine)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key or not isinstance(kept.get("verdict"), str):
        return None
    return kept["verdict"]


def keep_verdict(tokenizer, engine, verdict: str) -> None:
    path, key = _verdict_path(tokenizer, engine)
    write_quietly(path, json.dumps({"key": key, "verdict": verdict}) + "\n")
