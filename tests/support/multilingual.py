"""A multilingual test corpus built from what this machine ships, the same on every run.

- CPython's ``test/cjkencodings/*-utf8.txt`` (Chinese, Japanese, Korean in many encodings' ranges);
- the glibc locale sources (``/usr/share/i18n/locales``: every script's month and day names, escapes);
- CPython's own source files, among them ``_pydecimal.py`` (229,202 characters: past
  ``LONG_TEXT_CHARS``, so it is encoded in pieces);
- random Unicode with a fixed seed: assigned code points from blocks of every plane, whitespace runs,
  combining marks, digits and punctuation runs, and the special-token texts spelled out.
"""

from __future__ import annotations

import random
import sysconfig
import unicodedata
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])
LOCALES = Path("/usr/share/i18n/locales")
SPECIAL_TEXTS = ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "</s>", "<s>", "<pad>"]
ALPHABETS = [
    (0x20, 0x7E),
    (0xA0, 0x24F),
    (0x300, 0x36F),
    (0x370, 0x3FF),
    (0x400, 0x4FF),
    (0x590, 0x5FF),
    (0x600, 0x6FF),
    (0x900, 0x97F),
    (0xE00, 0xE7F),
    (0x1100, 0x11FF),
    (0x2000, 0x206F),
    (0x2190, 0x22FF),
    (0x3000, 0x30FF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0xFF00, 0xFFEF),
    (0x1F300, 0x1F64F),
    (0x1D400, 0x1D7FF),
    (0x20000, 0x2A6DF),
]
WHITESPACE = [" ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0", "\u3000", "   \n\n   "]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def random_unicode(rng: random.Random, length: int) -> str:
    out = []
    while len(out) < length:
        roll = rng.random()
        if roll < 0.15:
            out.append(rng.choice(WHITESPACE))
        elif roll < 0.18:
            out.append(rng.choice(SPECIAL_TEXTS))
        elif roll < 0.25:
            out.append(str(rng.randrange(10 ** rng.randrange(1, 8))))
        else:
            low, high = rng.choice(ALPHABETS)
            chars = (chr(rng.randint(low, high)) for _ in range(rng.randint(1, 12)))
            # Assigned code points only: engines built on different Unicode versions class newer ones apart.
            out.append("".join(c for c in chars if unicodedata.category(c) != "Cn"))
    return "".join(out)


def documents(random_count: int = 400, source_count: int = 30, most: int = 30_000) -> list[str]:
    """Every document of the corpus, in a fixed order."""
    docs = []
    for path in sorted((STDLIB / "test" / "cjkencodings").glob("*-utf8.txt")):
        text = _read(path)
        if text:
            docs += [text[:most], *text.split("\n\n")]
    if LOCALES.is_dir():
        docs += [t[:most] for p in sorted(LOCALES.iterdir())[::12] if (t := _read(p))]
    sources = sorted(STDLIB.glob("*.py"))
    docs += [t[:most] for p in sources[:: max(1, len(sources) // source_count)] if (t := _read(p))]
    if (decimal := _read(STDLIB / "_pydecimal.py")) is not None:
        docs.append(decimal)
    rng = random.Random(20261123)
    docs += [random_unicode(rng, rng.choice([5, 50, 500, 3000])) for _ in range(random_count)]
    return [d for d in docs if d]
