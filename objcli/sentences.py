"""Sentence splitting for sentence-pair objectives (NSP, SOP, ELECTRA).

``prose``: paragraphs (blank-line separated) are split after ``.``, ``!`` or ``?`` (plus closing
quotes or brackets) when whitespace and then an upper-case letter, digit, quote or opening bracket
follow, except after common abbreviations (``e.g.``, ``Dr.``, ``No.`` …) and single-letter
initials (``J. Smith``). Line breaks inside a paragraph are kept in the sentence.
``lines``: every non-blank line is a sentence (for code and line-structured text).
"""

from __future__ import annotations

import re

ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "fig", "figs",
    "no", "nos", "vol", "pp", "ed", "eds", "al", "approx", "dept", "inc", "ltd", "co", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "sec", "ch", "eq",
}
PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
CANDIDATE = re.compile(r"""[.!?]["')\]]*(?=\s+["'(\[]?[A-Z0-9])""")
SPLITTERS = ("prose", "lines")


def _is_abbreviation(text: str, end: int) -> bool:
    """Whether the '.' at ``end`` closes an abbreviation or an initial."""
    if text[end] != ".":
        return False
    start = end
    while start > 0 and (text[start - 1].isalpha() or text[start - 1] == "."):
        start -= 1
    word = text[start:end].lower()
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def split_prose(text: str) -> list[str]:
    sentences = []
    for paragraph in PARAGRAPH.split(text):
        start = 0
        for match in CANDIDATE.finditer(paragraph):
            if _is_abbreviation(paragraph, match.start()):
                continue
            sentence = paragraph[start : match.end()].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        rest = paragraph[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def split_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def split_sentences(text: str, mode: str) -> list[str]:
    return split_prose(text) if mode == "prose" else split_lines(text)
