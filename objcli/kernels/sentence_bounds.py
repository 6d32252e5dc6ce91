"""The prose sentence splitter of ``objectives/sentences.py`` compiled with numba (``nogil``, cached
on disk): one pass over a text's code points, the same cuts as its regular expression.

The regular expression, read as a scan from the left (its matches cannot overlap: each starts at a
``.``, ``!``, ``?`` or line break, and what a match consumes after that is closing quotes or
whitespace):

- a line break, horizontal whitespace (`` \\t\\r\\f\\v``) and another line break end a piece after
  the second break;
- ``!`` or ``?``, closers (``"')]``), then whitespace and an optional opener (``"'([``) before
  ``A-Z`` or ``0-9``, end a piece after the closers;
- ``.`` the same, unless the run of letters and dots right before it is one letter or one of the
  abbreviations (ASCII case-insensitive), as the look-behinds say.

"Letter" and "whitespace" are decided per code point by the same regular expression classes the
pure path uses (``[^\\W\\d_]`` and ``\\s``), once per distinct code point a process meets, so the
two paths agree on every character. Pieces are then stripped of whitespace; empty ones dropped.
Without numba (or with ``OBJCLI_PURE_PYTHON=1``), the regular expression runs instead: the same
sentences, tested against each other.
"""

from __future__ import annotations

import re

import numpy as np
from numba import njit

KNOWN, LETTER_BIT, SPACE_BIT = 1, 2, 4


class CodePointClasses:
    """A byte of flags per code point (known, letter, whitespace), filled as code points are met."""

    def __init__(self, letter: str, space: str = r"\s"):
        self.letter, self.space = re.compile(letter), re.compile(space)
        self.table = np.zeros(0x110000, np.uint8)
        self._classify(np.arange(128))

    def _classify(self, points: np.ndarray) -> None:
        for point in points.tolist():
            char = chr(point)
            self.table[point] = (
                KNOWN | (LETTER_BIT if self.letter.match(char) else 0) | (SPACE_BIT if self.space.match(char) else 0)
            )

    def cover(self, points: np.ndarray) -> None:
        high = points[points >= 128] if points.dtype != np.uint8 else points[:0]
        if len(high):
            distinct = np.unique(high)
            self._classify(distinct[(self.table[distinct] & KNOWN) == 0])


def abbreviation_table(words: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(words, width) lower-case code points padded with 0, and each word's length."""
    width = max(map(len, words))
    table = np.zeros((len(words), width), np.uint32)
    for k, word in enumerate(words):
        table[k, : len(word)] = [ord(c) for c in word]
    return table, np.array([len(w) for w in words], np.int64)


@njit(nogil=True, cache=True)
def _is_abbreviation(c, start, stop, classes, words, lengths):
    n = stop - start
    if n == 1:
        return (classes[c[start]] & LETTER_BIT) != 0
    for k in range(words.shape[0]):
        if lengths[k] != n:
            continue
        j = 0
        while j < n:
            point = np.uint32(c[start + j])
            if 65 <= point <= 90:
                point += 32
            if point != words[k, j]:
                break
            j += 1
        if j == n:
            return True
    return False


@njit(nogil=True, cache=True)
def _after_closers(c, k, n):  # closers: " ' ) ]
    while k < n and (c[k] == 34 or c[k] == 39 or c[k] == 41 or c[k] == 93):
        k += 1
    return k


@njit(nogil=True, cache=True)
def _sentence_follows(c, k, n, classes):
    """Whitespace, an optional opener (" ' ( [), then A-Z or 0-9, from ``k`` on."""
    if k >= n or (classes[c[k]] & SPACE_BIT) == 0:
        return False
    while k < n and (classes[c[k]] & SPACE_BIT) != 0:
        k += 1
    if k < n and (c[k] == 34 or c[k] == 39 or c[k] == 40 or c[k] == 91):
        k += 1
    return k < n and ((65 <= c[k] <= 90) or (48 <= c[k] <= 57))


@njit(nogil=True, cache=True)
def _paragraph_break_end(c, i, n):
    """After ``\\n[ \\t\\r\\f\\v]*\\n`` starting at ``i``, or -1."""
    j = i + 1
    while j < n and (c[j] == 32 or c[j] == 9 or c[j] == 13 or c[j] == 12 or c[j] == 11):
        j += 1
    return j + 1 if j < n and c[j] == 10 else -1


@njit(nogil=True, cache=True)
def _candidates(c):
    """Positions of ``.``, ``!``, ``?`` and line breaks, collected without a branch per character
    (a branch mispredicted at every space cost more than the whole scan)."""
    found = np.empty(len(c) + 1, np.int64)
    count = 0
    for i in range(len(c)):
        point = c[i]
        found[count] = i
        count += (point == 46) | (point == 10) | (point == 33) | (point == 63)
    return found[:count]


@njit(nogil=True, cache=True)
def _ends(c, classes, words, lengths):
    """Where each match of the sentence boundary ends, left to right (a match starts at a
    candidate that the previous match did not consume)."""
    n = len(c)
    candidates = _candidates(c)
    ends = np.empty(len(candidates), np.int64)
    count, scanned = 0, 0
    for i in candidates:
        if i < scanned:
            continue
        point = c[i]
        end = -1
        if point == 10:
            end = _paragraph_break_end(c, i, n)
        else:
            k = _after_closers(c, i + 1, n)
            if _sentence_follows(c, k, n, classes):
                end = k
                if point == 46:
                    s = i
                    while s > 0 and (c[s - 1] == 46 or (classes[c[s - 1]] & LETTER_BIT) != 0):
                        s -= 1
                    if s < i and _is_abbreviation(c, s, i, classes, words, lengths):
                        end = -1
        if end >= 0:
            ends[count] = end
            count += 1
            scanned = end
    return ends[:count]


@njit(nogil=True, cache=True)
def stripped_pieces(c, classes, words, lengths):
    """[start, stop) of every non-empty stripped piece between boundaries."""
    ends = _ends(c, classes, words, lengths)
    n = len(c)
    starts = np.empty(len(ends) + 1, np.int64)
    stops = np.empty(len(ends) + 1, np.int64)
    kept, start = 0, 0
    for p in range(len(ends) + 1):
        stop = ends[p] if p < len(ends) else n
        a, b = start, stop
        while a < b and (classes[c[a]] & SPACE_BIT) != 0:
            a += 1
        while b > a and (classes[c[b - 1]] & SPACE_BIT) != 0:
            b -= 1
        if b > a:
            starts[kept], stops[kept] = a, b
            kept += 1
        start = stop
    return starts[:kept], stops[:kept]


def code_points(text: str) -> np.ndarray:
    """The text's code points: its bytes when it is ASCII (no copy to make wider), else UTF-32."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), np.uint32)
