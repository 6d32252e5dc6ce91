"""A held-out corpus built from this machine's own text, as issue 42 measured on: man pages, package
documentation and Python sources, none of it repeated (the bench corpus repeats the sample, so an
engine's caches see every word again and again), one document per file, each taken from the kind
with the least text so far (equal shares while each lasts), so each JSONL file holds a mix.
Machines without man pages or /usr/share/doc get Python sources alone (the bench says which kinds
it found)."""

from __future__ import annotations

import gzip
import json
import sysconfig
from pathlib import Path

MAN, DOC = Path("/usr/share/man"), Path("/usr/share/doc")
SKIP_SUFFIXES = {".png", ".jpg", ".gif", ".svg", ".pdf", ".ico", ".woff", ".ttf", ".deb", ".zip", ".bz2", ".xz"}


def _texts(paths):
    """The UTF-8 text of each file (gunzipped where .gz); binary and empty files left out."""
    for path in paths:
        if path.suffix in SKIP_SUFFIXES or not path.is_file() or path.is_symlink():
            continue
        try:
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue
        if text.strip() and "\x00" not in text:
            yield text


def kinds() -> dict[str, list[Path]]:
    """Each kind's files, in path order."""
    found = {
        "man pages": sorted(MAN.rglob("*.gz")) if MAN.is_dir() else [],
        "package docs": sorted(p for p in DOC.rglob("*") if "copyright" not in p.name) if DOC.is_dir() else [],
        "Python sources": sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
        + sorted(Path(sysconfig.get_paths()["purelib"]).rglob("*.py")),
    }
    return {name: paths for name, paths in found.items() if paths}


def held_out_corpus(folder: Path, megabytes: int = 200, files: int = 8) -> tuple[list[Path], str]:
    """(the JSONL files, a line saying what they hold), built once into ``folder``."""
    paths = [folder / f"held-out-{i:02d}.jsonl" for i in range(files)]
    about = folder / "ABOUT"
    if all(p.exists() for p in paths) and about.exists():
        return paths, about.read_text()
    streams = {name: _texts(found) for name, found in kinds().items()}
    texts, sizes, size = [], dict.fromkeys(streams, 0), 0
    while size < megabytes * 10**6 and streams:
        name = min(streams, key=sizes.get)  # the kind with the least text so far: equal shares
        text = next(streams[name], None)
        if text is None:
            del streams[name]
            continue
        texts.append(text)
        sizes[name] += len(text)
        size += len(text)
    folder.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(paths):
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::files]))
    lengths = sorted(map(len, texts))
    line = (
        f"{size / 1e6:.0f} MB, {len(texts):,} documents (median {lengths[len(lengths) // 2]:,} characters): "
        + ", ".join(f"{name} {chars / 1e6:.0f} MB" for name, chars in sizes.items())
    )
    about.write_text(line)
    return paths, line
