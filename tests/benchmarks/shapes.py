"""Corpora of the shapes users bring (issue 62), made from files every Linux machine has, none of
them the sample corpus repeated, each 60-200 MB of JSON lines so that start-up does not decide a ratio:

- ``long``: books and repositories: man pages, package documentation and Python sources joined per
  folder into documents of 200,000 characters to 8 million (a package's docs, a library's sources);
- ``dense``: base64 of the machine's binaries, one document per file, no line breaks;
- ``tiny``: one line each (20-200 characters) of the same text: a document per line, ~1.5 million;
- ``cjk``: Chinese, Japanese and Korean man pages (text with no spaces between words), where the
  machine has them: only a few MB exist, so each page is repeated (said in the ABOUT line).

``held_out.py`` is the fourth shape the bench already had: whole files, mostly short, a few long."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from held_out import MAN, _texts, kinds

SHAPES = ("long", "dense", "tiny", "cjk")
CJK_MAN = ("ja", "ko", "zh_CN", "zh_TW")


def _long_texts(megabytes: int):
    """Files joined per folder (a package's docs, a library's sources, a man section's pages) into
    documents of 200 K-8 M characters; a folder's text beyond 8 M starts another document."""
    budget = megabytes * 10**6
    for paths in kinds().values():
        by_folder: dict[Path, list[Path]] = {}
        for path in paths:
            by_folder.setdefault(path.parent, []).append(path)
        for folder_paths in by_folder.values():
            document: list[str] = []
            size = 0
            for text in _texts(folder_paths):
                document.append(text)
                size += len(text)
                if size >= 8_000_000:
                    yield "\n\n".join(document)
                    budget -= size
                    document, size = [], 0
            if size >= 200_000:
                yield "\n\n".join(document)
                budget -= size
            if budget <= 0:
                return


def _dense_texts(megabytes: int):
    budget = megabytes * 10**6
    for folder in (Path("/usr/bin"), Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib")):
        for path in sorted(folder.glob("*")) if folder.is_dir() else []:
            if not path.is_file() or path.is_symlink() or path.stat().st_size < 4096:
                continue
            text = base64.b64encode(path.read_bytes()[:4_000_000]).decode("ascii")
            yield text
            budget -= len(text)
            if budget <= 0:
                return


def _tiny_texts(megabytes: int):
    budget = megabytes * 10**6
    for paths in kinds().values():
        for text in _texts(paths):
            for line in text.splitlines():
                line = line.strip()
                if 20 <= len(line) <= 200:
                    yield line
                    budget -= len(line)
                    if budget <= 0:
                        return


def _cjk_texts(megabytes: int):
    pages = [t for lang in CJK_MAN if (MAN / lang).is_dir() for t in _texts(sorted((MAN / lang).rglob("*.gz")))]
    size = sum(map(len, pages))
    if size == 0:
        return
    for _ in range(-(-megabytes * 10**6 // size)):
        yield from pages


BUILDERS = {"long": _long_texts, "dense": _dense_texts, "tiny": _tiny_texts, "cjk": _cjk_texts}


def shape_corpus(folder: Path, shape: str, megabytes: int = 100, files: int = 8) -> tuple[list[Path], str]:
    """(the JSONL files, a line saying what they hold), built once into ``folder/shape``; no files
    where the machine has no such text."""
    out = folder / shape
    paths = [out / f"{shape}-{i:02d}.jsonl" for i in range(files)]
    about = out / "ABOUT"
    if all(p.exists() for p in paths) and about.exists():
        return paths, about.read_text()
    texts = list(BUILDERS[shape](megabytes))
    if not texts:
        return [], f"{shape}: this machine has no such text"
    out.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(paths):
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::files]))
    lengths = sorted(map(len, texts))
    size = sum(lengths)
    repeated = " (the machine's few MB of such pages, repeated)" if shape == "cjk" else ""
    line = (
        f"{shape}: {size / 1e6:.0f} MB, {len(texts):,} documents (median {lengths[len(lengths) // 2]:,} characters, "
        f"longest {lengths[-1]:,}){repeated}"
    )
    about.write_text(line)
    return paths, line
