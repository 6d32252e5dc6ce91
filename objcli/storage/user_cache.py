"""What objcli keeps between runs in the user's cache folder (``$XDG_CACHE_HOME/objcli``, default
``~/.cache/objcli``): quicktok's data files, the parity probe's verdicts (``tokenizers/verdicts.py``),
the tokenizer.json files the stable library has read (``tokenizers/library_reads.py``), the notices
said once, local copies of objects (``storage/copies.py``), token inputs' digests.
A cache that cannot be read or written only means deciding again."""

from __future__ import annotations

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


def write_quietly(path: Path, text: str) -> None:
    """A cache entry; a cache that cannot be written only means deciding again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass
