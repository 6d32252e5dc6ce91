"""The sha256 of a tokenized input's files (``token_inputs/``): they enter the run key, so a rerun
over an edited file is another run whatever its size and time say, and the manifest's inputs, which
``verify`` checks where the files are. A text input is known by its size and time; a token file is
what every objective of a sweep is derived from, and a file rewritten in site with the same size
(a re-tokenized shard) must not pass for the one the run read.

Hashing costs under a second of CPU a GB (0.6-0.8 s here), once per machine: each file's digest is kept in the user's
cache under its real path, size, inode, and modification and change times (no tool sets a change
time back: a file rewritten with its old size and time is hashed again), so the transforms of a
sweep over one input hash it once. Files are hashed side by side (hashlib lets go of the GIL)."""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor

from ...storage.files import file_sha256
from ...storage.user_cache import cache_folder, write_quietly
from . import input_files, readable_path


def token_input_digests(path: str, fmt: str) -> dict[str, str]:
    """``{name: sha256}`` of the input's files, each named relative to the input's folder (an input
    in object storage: its local copy's)."""
    path = readable_path(path, fmt)
    files = input_files(path, fmt)
    folder = path if os.path.isdir(path) else os.path.dirname(files[0])
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(_kept_sha256, files))
    return {os.path.relpath(name, folder): digest for name, digest in zip(files, digests)}


_KNOWN: dict[str, str] = {}  # this process's digests (the run key and the manifest both ask)


def _kept_sha256(path: str) -> str:
    stat = os.stat(path)
    key = [os.path.realpath(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]
    if repr(key) in _KNOWN:
        return _KNOWN[repr(key)]
    kept = cache_folder("input-sha256") / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.json"
    try:
        entry = json.loads(kept.read_text(encoding="utf-8"))
        if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("sha256"), str):
            _KNOWN[repr(key)] = entry["sha256"]
            return entry["sha256"]
    except (OSError, ValueError):
        pass
    digest = _KNOWN[repr(key)] = file_sha256(path)
    write_quietly(kept, json.dumps({"key": key, "sha256": digest}) + "\n")
    return digest


def changed_token_inputs(inputs: list[dict]) -> list[str]:
    """For ``verify``: each recorded token input file that is here and holds other bytes now (a
    file not here, the output moved to another machine, is not checked): the one identity check
    (``storage/identity.check_identity``) over the input's files."""
    from ...storage.identity import check_identity

    recorded = {}
    for entry in inputs:
        digests, where = entry.get("sha256"), entry.get("resolved")
        if not isinstance(digests, dict) or not isinstance(where, str):
            continue
        folder = where if os.path.isdir(where) else os.path.dirname(where)
        for name, digest in digests.items():
            recorded[f"input {entry.get('path')}: {name}'s file"] = {
                "path": os.path.join(folder, name),
                "sha256": digest,
            }
    return check_identity(recorded)
