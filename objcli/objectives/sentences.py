"""Sentence splitting for sentence-level objectives (NSP, SOP, ELECTRA, BART, contrastive).

``prose``: paragraphs (blank-line separated) are split after ``.``, ``!`` or ``?`` (plus closing
quotes or brackets) when whitespace and then an upper-case letter, digit, quote or opening bracket
follow, except after common abbreviations (``e.g.``, ``Dr.``, ``No.`` …) and single-letter
initials (``J. Smith``). The word before a ``.`` is its run of letters and dots; a letter is a
word character other than a digit or ``_`` (``[^\\W\\d_]``). Line breaks inside a paragraph are kept
in the sentence; sentences are stripped of surrounding whitespace.
``lines``: every non-blank line is a sentence (for code and line-structured text).

A whole batch is split at once: its texts are joined around a sentinel and one pass cuts the
joined text, which costs a tenth of splitting text by text. The pass is compiled
(``kernels/sentence_bounds.py``, numba, without the GIL) where numba is installed
(``objcli[fast]``), else one regular expression (abbreviations are look-behinds, so no Python runs
per candidate); both give the same sentences (tests/objectives/test_sentences.py). ``OBJCLI_PURE_PYTHON=1``
chooses the regular expression.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from ..kernels.compiled import compiled

ABBREVIATIONS = (
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "cf",
    "fig",
    "figs",
    "no",
    "nos",
    "vol",
    "pp",
    "ed",
    "eds",
    "al",
    "approx",
    "dept",
    "inc",
    "ltd",
    "co",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "sec",
    "ch",
    "eq",
)
SPLITTERS = ("prose", "lines")
LETTER = r"[^\W\d_]"
# Texts of a batch are joined around a line of their own holding this; a batch whose text holds
# it already is split text by text.
SENTINEL = "\x00"
SEPARATORS = {"prose": f"\n\n{SENTINEL}\n\n", "lines": f"\n{SENTINEL}\n"}


def _word_is(alternatives: list[str]) -> str:
    """A look-behind for 'the word before this '.' is one of these' (all of one width)."""
    return rf"(?<!(?<!{LETTER})(?<!\.)(?:{'|'.join(alternatives)})\.)"


def _abbreviation_lookbehinds() -> str:
    """Negative look-behinds, one per width (Python's look-behinds are fixed width): the '.'
    after is no sentence end when the word before it is an abbreviation (any case) or one letter."""
    by_width: dict[int, list[str]] = {1: [LETTER]}
    for word in ABBREVIATIONS:
        pattern = "".join(re.escape(c) if c == "." else f"[{c}{c.upper()}]" for c in word)
        by_width.setdefault(len(word), []).append(pattern)
    return "".join(_word_is(alternatives) for _, alternatives in sorted(by_width.items()))


CLOSERS = r"""["')\]]*"""
SENTENCE_FOLLOWS = rf"""(?={CLOSERS}\s+["'(\[]?[A-Z0-9])"""
# A sentence ends after its terminator and closers, or at a paragraph break; the pieces between
# are stripped. Every alternative starts with a literal character, so the engine scans for those
# four characters, and the look-behinds run only at a dot that a new sentence seems to follow.
BOUNDARY = re.compile(
    rf"\.{SENTENCE_FOLLOWS}{_abbreviation_lookbehinds()}{CLOSERS}"
    rf"|!{CLOSERS}{SENTENCE_FOLLOWS}|\?{CLOSERS}{SENTENCE_FOLLOWS}"
    r"|\n[ \t\r\f\v]*\n"
)


def _prose_pieces_pure(text: str) -> list[str]:
    ends = [match.end() for match in BOUNDARY.finditer(text)]
    starts = [0, *ends]
    ends.append(len(text))
    return list(filter(None, map(str.strip, map(text.__getitem__, map(slice, starts, ends)))))


@cache
def _compiled_splitter():
    """The compiled pass and what it needs, or None (no numba, or ``OBJCLI_PURE_PYTHON=1``)."""
    sentence_bounds = compiled("sentence_bounds")
    if sentence_bounds is None:
        return None
    return sentence_bounds, sentence_bounds.CodePointClasses(LETTER), sentence_bounds.abbreviation_table(ABBREVIATIONS)


def warm_splitter() -> None:
    """Compile the splitter, or load it from numba's cache, for ASCII and wider texts: 0.2-2 s once
    (a fork server does it for its workers)."""
    split_batch(["Both kinds of text. One ASCII", "one wider. \u00c9t\u00e9"], "prose")


def _prose_pieces(text: str) -> list[str]:
    splitter = _compiled_splitter()
    if splitter is None:
        return _prose_pieces_pure(text)
    kernel, classes, (words, lengths) = splitter
    points = kernel.code_points(text)
    classes.cover(points)
    starts, stops = kernel.stripped_pieces(points, classes.table, words, lengths)
    return list(map(text.__getitem__, map(slice, starts.tolist(), stops.tolist())))


def _line_pieces(text: str) -> list[str]:
    return list(filter(str.strip, text.split("\n")))


PIECES = {"prose": _prose_pieces, "lines": _line_pieces}


def split_batch(texts: list[str], mode: str) -> tuple[list[str], np.ndarray]:
    """The sentences of every text in order, and how many each text has."""
    pieces = PIECES[mode]
    joined = SEPARATORS[mode].join(texts)
    if not texts or joined.count(SENTINEL) != len(texts) - 1:  # rare: a text holds the sentinel
        per_text = [pieces(text) for text in texts]
        counts = np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))
        return [s for sentences in per_text for s in sentences], counts
    found = pieces(joined)  # the sentinel is always a piece of its own: blank lines surround it
    marks = [i for i, piece in enumerate(found) if piece == SENTINEL]
    ends = np.array(marks + [len(found)], dtype=np.int64)
    counts = ends - np.concatenate([[0], ends[:-1] + 1])
    return [piece for piece in found if piece != SENTINEL], counts
