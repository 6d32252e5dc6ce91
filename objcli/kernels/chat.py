"""Character spans of conversations to token ranges, and where to truncate them (pure NumPy).

Tokens carry the character span of the text they came from (``starts``/``ends``), and spans are
given, in one coordinate for the whole batch: positions in the batch's texts joined end to end
(``chat_encode``), so one search over all tokens finds every span's tokens. A span of characters
``[a, b)`` covers the tokens from the one holding character ``a`` to the one holding character
``b - 1``, as ``transformers`` maps ``{% generation %}`` spans with ``char_to_token``: the first
token whose span holds the character; a span whose first character is in no token ends the
conversation's spans (later spans are dropped); a span whose last character is in no token (or
in the conversation's first token) runs to the end of the conversation.
"""

from __future__ import annotations

import numpy as np


def _token_holding(chars, owners, starts, ends, offsets) -> tuple[np.ndarray, np.ndarray]:
    """For each character (of conversation ``owners``): the first token whose span holds it, and
    whether there is one. Exact when token ends never decrease (checked by the caller)."""
    index = np.searchsorted(ends, chars, side="right")  # the first token ending after the character
    inside = (index < offsets[owners + 1]) & (index >= offsets[owners])
    safe = np.minimum(index, max(len(starts) - 1, 0))
    found = inside & (starts[safe] <= chars) if len(starts) else inside
    return index, found


def _ascending(values: np.ndarray) -> bool:
    return bool(np.all(values[1:] >= values[:-1]))


def _slow_token_holding(chars, owners, starts, ends, offsets):
    index = np.zeros(len(chars), dtype=np.int64)
    found = np.zeros(len(chars), dtype=bool)
    for k, (c, d) in enumerate(zip(chars.tolist(), owners.tolist())):
        for t in range(offsets[d], offsets[d + 1]):
            if starts[t] <= c < ends[t]:
                index[k], found[k] = t, True
                break
    return index, found


def overlapping_tokens(starts, ends, offsets, span_owner, span_start, span_end):
    """Token ranges ``[first, last]`` of the tokens that overlap each character span (a span
    found in the text, not a template's marker), and which spans have any."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    owner = np.asarray(span_owner, np.int64)
    a, b = np.asarray(span_start, np.int64), np.asarray(span_end, np.int64)
    if not (_ascending(ends) and _ascending(starts)):
        first, last = np.zeros(len(a), np.int64), np.full(len(a), -1, np.int64)
        for k, (d, x, y) in enumerate(zip(owner.tolist(), a.tolist(), b.tolist())):
            hits = [t for t in range(offsets[d], offsets[d + 1]) if starts[t] < y and ends[t] > x]
            if hits:
                first[k], last[k] = hits[0], hits[-1]
        return first, last, (last >= first) & (b > a)
    first = np.searchsorted(ends, a, side="right")  # the first token ending after a
    last = np.searchsorted(starts, b, side="left") - 1  # the last token starting before b
    inside = (first >= offsets[owner]) & (last < offsets[owner + 1]) & (first <= last)
    return first, last, inside & (b > a)


def span_tokens(starts, ends, offsets, span_owner, span_start, span_end):
    """Token ranges ``[first, last]`` (inclusive) of ``{% generation %}`` spans, exactly as
    ``transformers`` maps them, and which spans count.

    ``span_owner`` is each span's conversation (ascending, spans in text order within one).
    Returns (first, last, kept): spans after one whose start is in no token are not kept, nor
    spans that cover no token."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    owner = np.asarray(span_owner, np.int64)
    a, b = np.asarray(span_start, np.int64), np.asarray(span_end, np.int64)
    search = _token_holding if _ascending(ends) else _slow_token_holding
    first, first_found = search(a, owner, starts, ends, offsets)
    last, last_found = search(b - 1, owner, starts, ends, offsets)
    # transformers runs a span to the end where its last token is None *or 0* (``if end_token``).
    last = np.where(last_found & (last != offsets[owner]), last, offsets[owner + 1] - 1)
    # transformers stops at the first span whose start maps to no token (truncated text).
    missing = (~first_found).astype(np.int64)
    before = np.cumsum(missing) - missing
    conversation_start = np.searchsorted(owner, owner, side="left")
    missing_before = before - before[conversation_start] if len(owner) else before
    kept = first_found & (missing_before == 0) & (last >= first)  # an empty span marks nothing, unless it runs on
    return first, last, kept


def truncation_ends(lengths, span_owner, span_last, kept, limit: int) -> np.ndarray:
    """Per conversation: the end (exclusive) of its last kept span that fits in ``limit`` tokens,
    ``lengths`` where the conversation fits whole, 0 where none of its spans fits."""
    lengths = np.asarray(lengths, np.int64)
    cut = np.zeros(len(lengths), dtype=np.int64)
    fits = kept & (span_last + 1 <= limit)
    np.maximum.at(cut, np.asarray(span_owner, np.int64)[fits], span_last[fits] + 1)
    return np.where(lengths <= limit, lengths, cut)


def mark_ranges(total: int, first, last) -> np.ndarray:
    """A boolean mask of ``total`` tokens, true on every range ``[first, last]``."""
    change = np.zeros(total + 1, dtype=np.int64)
    np.add.at(change, first, 1)
    np.add.at(change, np.asarray(last) + 1, -1)
    return np.cumsum(change[:-1]) > 0


def last_per_owner(owner, kept) -> np.ndarray:
    """Of the kept spans, only the last of each conversation."""
    owner = np.asarray(owner)
    positions = np.flatnonzero(kept)
    result = np.zeros(len(owner), dtype=bool)
    if len(positions):
        is_last = np.ones(len(positions), dtype=bool)
        is_last[:-1] = owner[positions[1:]] != owner[positions[:-1]]
        result[positions[is_last]] = True
    return result


def common_prefix_lengths(tokens: np.ndarray, a_starts, a_lengths, b_starts, b_lengths) -> np.ndarray:
    """For each i, how many leading tokens ``tokens[a_starts[i]:][:a_lengths[i]]`` and the same of b share
    (TRL's ``common_prefix_length``, over a whole batch at once)."""
    n = np.minimum(a_lengths, b_lengths).astype(np.int64)
    total = int(n.sum())
    owner = np.repeat(np.arange(len(n), dtype=np.int64), n)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    differ = tokens[np.repeat(a_starts, n) + within] != tokens[np.repeat(b_starts, n) + within]
    found, first = np.unique(owner[differ], return_index=True)  # owner is sorted: the first difference
    result = n.copy()
    result[found] = within[differ][first]
    return result
