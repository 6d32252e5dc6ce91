"""Where a long text may be cut without changing its tokens: the pieces a tokenizer encodes one by
one when a text is too long for its engine to take whole (``Tokenizer.encode``), and the cuts of
``--max-document-chars``. A byte-level BPE cuts at the start of a piece of its split pattern; a
SentencePiece model before a space (``cut_point``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# Cutting at a split pattern: the scan reads this far past the window, so that the pieces inside it are
# the whole text's; a cut is checked on this many characters before it (the tests shrink both).
CUT_LOOKAHEAD_CHARS = 4096
CUT_CHECK_CHARS = 2048
CUT_TAIL_CHARS = 65_536  # --max-document-chars: how much of a window's end is scanned for its last cut


class TextCutter:
    """The cutting half of a ``Tokenizer`` (base.py), which each kind of tokenizer specializes."""

    cut_pattern = None  # byte-level BPE: the file's first split pattern (compiled), where it is exact
    # A window with no boundary: the rest is encoded whole (exact), or, where one input's memory grows
    # faster than its length (SentencePiece's lattice on unspaced text), cut at the limit.
    whole_without_boundary = True

    def cut_point(self, window: str) -> int:
        """Where to cut ``window`` (an index > 0) so that encoding the two sides separately gives
        the tokens of encoding them together; 0 when there is no such place."""
        return 0

    def boundary(self, text: str, start: int, limit: int, scan_from: int | None = None) -> int:
        """The last place in ``text[start : start + limit]`` (as an offset > 0 from ``start``) where
        the tokens of ``text[start:]`` split; 0 when there is none. With a split pattern: the start
        of a piece it matches there (``start`` itself is one) such that the text before it, alone,
        splits into the same pieces: a lookahead at the end (``\\s+(?!\\S)``) or an end anchor
        (``\\s++$``) would otherwise see the cut as the text's end.

        One scan of the window by the regular expression's own loop (``findall``: no Python loop per
        piece), the pieces' starts from their lengths; each candidate is checked on the last
        ``CUT_CHECK_CHARS`` before it, which a piece of the scan from ``start`` begins (the pieces
        before are read where the cut is not in sight)."""
        pattern = self.cut_pattern
        if pattern is None:
            return self.cut_point(text[start : start + limit])
        origin = start if scan_from is None else max(start, scan_from)
        end = min(len(text), start + limit + CUT_LOOKAHEAD_CHARS)
        found = pattern.findall(text, origin, end) if not pattern.groups else None
        lengths = np.fromiter(map(len, found or ()), dtype=np.int64, count=len(found or ()))
        if found is None or int(lengths.sum()) != end - origin:  # groups, or characters no piece holds
            return self._boundary_by_matches(text, start, limit)
        starts = origin - start + np.cumsum(lengths) - lengths  # from start
        last = int(np.searchsorted(starts, limit, side="right")) - 1  # the last piece starting in the window
        for k in range(last, max(0, last - 16), -1):  # the last places first
            cut = int(starts[k])
            if cut <= 0 or (k == 0 and origin > start):  # the window's start; an unaligned scan's first piece
                break
            # The pieces of the last CUT_CHECK_CHARS, and at least the two before the cut (a lookahead
            # of the one before reads the cut); never an unaligned scan's first piece (part of one).
            j = min(int(np.searchsorted(starts, cut - CUT_CHECK_CHARS, side="left")), k - 2)
            j = max(j, int(origin > start))
            if not (j < k - 1 or j == 0):
                continue
            first = start + int(starts[j])
            if (
                pattern.findall(text, first, start + cut) == found[j:k]
                and _pieces_to(pattern, text, first, start + cut) == found[j:k]
            ):
                return cut
        return 0

    def _boundary_by_matches(self, text: str, start: int, limit: int) -> int:
        """``boundary`` for a pattern whose pieces leave characters out or that has groups: match by
        match (slower, rare)."""
        spans = []
        for match in self.cut_pattern.finditer(text, start):
            if match.start() - start > limit:
                break
            spans.append(match.span())
        for k in range(len(spans) - 1, max(0, len(spans) - 17), -1):  # the last places first
            cut = spans[k][0]
            if [m.span() for m in self.cut_pattern.finditer(text, start, cut)] == spans[:k]:
                return cut - start
        return 0

    def split_text(self, text: str, limit: int) -> list[str]:
        return list(self.iter_pieces(text, limit))

    def exact_pieces(self, text: str, limit: int) -> Iterator[str]:
        """``text`` in pieces whose tokens, joined, are the whole text's: cut at ``boundary``s,
        mostly ``limit`` characters or fewer; where a window has none, see ``whole_without_boundary``."""
        start = 0
        while len(text) - start > limit:
            cut = self.boundary(text, start, limit) or (0 if self.whole_without_boundary else limit)
            if cut <= 0:
                break
            yield text[start : start + cut]
            start += cut
        yield text[start:]

    def iter_pieces(self, text: str, limit: int) -> Iterator[str]:
        """``text`` in pieces of at most ``limit`` characters (``--max-document-chars``), cut at
        ``boundary``s, or where a window has none at the limit, which may change the tokens there.
        The scan reads the window's last ``CUT_TAIL_CHARS`` only (a split pattern's pieces fall in
        step within a few characters of wherever a scan starts): a cut of a 10-million-character
        document reads 64 K characters, not 10 million."""
        start = 0
        while len(text) - start > limit:
            cut = self.boundary(text, start, limit, start + limit - CUT_TAIL_CHARS) or limit
            yield text[start : start + cut]
            start += cut
        yield text[start:]


def _pieces_to(pattern, text: str, first: int, cut: int) -> list[str] | None:
    """The pieces of ``text`` from ``first`` up to ``cut`` as the scan to the text's true end makes
    them (the window's scan ends early: a piece running past its end, a long run of blank lines, is
    read short there); None when no piece starts at ``cut``. The few pieces before a cut, one by one."""
    pieces = []
    for match in pattern.finditer(text, first):
        if match.start() >= cut:
            return pieces if match.start() == cut else None
        pieces.append(match.group())
    return None
