"""What objcli keeps between runs in the user's cache folder (``$XDG_CACHE_HOME/objcli``, default
``~/.cache/objcli``): quicktok's data files, the parity probe's verdicts, the notices said once.
A cache that cannot be read or written only means deciding again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def cache_folder(name: str) -> Path:
    """``$XDG_CACHE_HOME/objcli/NAME`` (default ``~/.cache``): what objcli keeps between runs. As the
    XDG spec says, an empty or relative ``XDG_CACHE_HOME`` is ignored: a cache in whatever folder the
    command runs from would be read as inputs by a later run there."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home folder known: a folder of the user's own under the temp folder
            import tempfile

            base = os.path.join(tempfile.gettempdir(), f"objcli-cache-{os.getuid()}")
    return Path(base) / "objcli" / name


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


def write_quietly(path: Path, text: str) -> None:
    """A cache entry; a cache that cannot be written only means deciding again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass
