"""``verify``'s check of rows written with ``--pad-to-multiple N``: in rows with segment ids, ``cu_seqlens_padded``
is where each segment starts (the row's trailing padding one more, its end last), every sequence's places a
multiple of N, ``cu_seqlens`` its real lengths summed (never more than its places, 0 for the trailing padding),
and every label past a sequence's real tokens -100; in NVIDIA's packed rows (``seq_start_id``), every sequence
N tokens a multiple plus the one the reader shifts."""

from __future__ import annotations

import numpy as np

from ..formats import Column
from ..kernels import IGNORE
from ..kernels.ragged import lengths_to_offsets


def _segment_bounds(segments: Column) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, 0 then where each segment (or the trailing padding) ends: (values, offsets, the segment id
    of each span)."""
    seg, rows = segments.values, len(segments.lengths)
    row_of = np.repeat(np.arange(rows), segments.lengths)
    start = np.ones(len(seg), dtype=bool)
    start[1:] = (seg[1:] != seg[:-1]) | (row_of[1:] != row_of[:-1])
    first = np.flatnonzero(start)
    per_row = np.bincount(row_of[first], minlength=rows)
    offsets = lengths_to_offsets(per_row + 1)
    values = np.zeros(int(offsets[-1]), dtype=np.int64)
    rank = np.arange(len(first)) - lengths_to_offsets(per_row)[:-1][row_of[first]]
    values[offsets[:-1][row_of[first]] + rank] = first - segments.offsets[row_of[first]]
    values[offsets[1:] - 1] = segments.lengths
    return values, offsets, seg[first]


def check_sequence_padding(multiple: int, segments: Column, real: Column, padded: Column, labels: Column | None):
    bounds, offsets, span_segment = _segment_bounds(segments)
    if not (np.array_equal(padded.offsets, offsets) and np.array_equal(padded.values, bounds)):
        return ["cu_seqlens_padded is not where each segment starts in its row (and the row's end)"]
    inside = np.ones(len(bounds), dtype=bool)
    inside[offsets[:-1]] = False  # an entry that closes a span (not a row's leading 0)
    places, kept = np.diff(bounds)[inside[1:]], span_segment > 0
    if np.any(places[kept] % multiple):
        return [f"a packed sequence does not take a multiple of {multiple} places (--pad-to-multiple)"]
    if not np.array_equal(real.offsets, offsets) or np.any(real.values[offsets[:-1]] != 0):
        return ["cu_seqlens does not hold one bound per sequence from 0"]
    lengths = np.diff(real.values)[inside[1:]]
    if np.any(lengths < 0) or np.any(lengths > places) or np.any(lengths[~kept] != 0):
        return ["cu_seqlens gives a sequence more tokens than its places (or the trailing padding any)"]
    if labels is not None and np.any(labels.values[_past_real(places, lengths)] != IGNORE):
        return ["labels are not -100 on a sequence's padding"]
    return []


def _past_real(places: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per token of the rows, whether it lies past its span's real tokens."""
    within = np.arange(int(places.sum())) - np.repeat(lengths_to_offsets(places)[:-1], places)
    return within >= np.repeat(lengths, places)


def check_padded_sequences(multiple: int, tokens: Column, starts: Column) -> list[str]:
    """NVIDIA's packed rows: each sequence of n tokens gives n - 1 inputs, a multiple of ``multiple``."""
    rows = np.repeat(np.arange(len(starts.lengths)), starts.lengths)
    ends = np.append(starts.values[1:], 0)
    last = np.append(rows[1:] != rows[:-1], True)
    ends[last] = tokens.lengths[rows[last]]
    if np.any((ends - starts.values - 1) % multiple):
        return [f"a packed sequence's inputs are not a multiple of {multiple} (--pad-to-multiple)"]
    return []
