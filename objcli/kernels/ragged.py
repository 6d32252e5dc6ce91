"""Ragged batches: one flat token array plus int64 offsets.

``offsets`` has ``n + 1`` entries and ``tokens[offsets[i]:offsets[i + 1]]`` is item ``i``.
This is Arrow's list layout, so batches move to and from Arrow without copies.
"""

from __future__ import annotations

import numpy as np


def lengths_to_offsets(lengths: np.ndarray) -> np.ndarray:
    """``[3, 0, 2]`` -> ``[0, 3, 3, 5]`` (int64)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def item_index(offsets: np.ndarray) -> np.ndarray:
    """For every token, the index of the item it belongs to: offsets [0, 2, 5] -> [0, 0, 1, 1, 1]."""
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def add_boundary_tokens(
    tokens: np.ndarray, offsets: np.ndarray, bos_id: int | None, eos_id: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Put ``bos_id`` before and ``eos_id`` after every item (either may be None).

    tokens [5, 6, 7], offsets [0, 2, 3], bos None, eos 2 -> tokens [5, 6, 2, 7, 2], offsets [0, 3, 5].
    """
    lengths = np.diff(offsets)
    extra = int(bos_id is not None) + int(eos_id is not None)
    new_offsets = lengths_to_offsets(lengths + extra)
    out = np.empty(len(tokens) + extra * len(lengths), dtype=tokens.dtype)
    # A boolean mask places the body tokens: much faster than a scatter with computed indices.
    body = np.ones(len(out), dtype=bool)
    if bos_id is not None:
        body[new_offsets[:-1]] = False
    if eos_id is not None:
        body[new_offsets[1:] - 1] = False
    out[body] = tokens
    if bos_id is not None:
        out[new_offsets[:-1]] = bos_id
    if eos_id is not None:
        out[new_offsets[1:] - 1] = eos_id
    return out, new_offsets


def split_long_items(offsets: np.ndarray, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Cut items longer than ``max_length`` into consecutive pieces of at most ``max_length``.

    The token array is unchanged; returns the new offsets and, per new item, the index of the
    item it came from. offsets [0, 5, 6], max 2 -> offsets [0, 2, 4, 5, 6], source [0, 0, 0, 1].
    """
    lengths = np.diff(offsets)
    pieces = np.maximum(1, -(-lengths // max_length))
    source = np.repeat(np.arange(len(lengths), dtype=np.int64), pieces)
    piece_rank = np.arange(len(source), dtype=np.int64) - np.repeat(lengths_to_offsets(pieces)[:-1], pieces)
    starts = offsets[:-1][source] + piece_rank * max_length
    new_offsets = np.empty(len(source) + 1, dtype=np.int64)
    new_offsets[:-1] = starts
    new_offsets[-1] = offsets[-1]
    # Pieces are contiguous, so each piece ends where the next one starts; an empty item keeps
    # one empty piece.
    return new_offsets, source


def range_indices(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i], starts[i] + 1, …, starts[i] + lengths[i] - 1`` for every i, in order.

    starts [2, 0], lengths [2, 1] -> [2, 3, 0]. The index advances by one within a range and jumps
    at each range start, so the whole array is one cumulative sum of a mostly-ones array.
    """
    present = lengths > 0
    starts, lengths = np.asarray(starts)[present], np.asarray(lengths)[present]
    if not len(lengths):
        return np.zeros(0, dtype=np.int64)
    offsets = lengths_to_offsets(lengths)
    step = np.ones(int(offsets[-1]), dtype=np.int64)
    step[0] = starts[0]
    step[offsets[1:-1]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(step)


def gather_ranges(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenate ``source[starts[i] : starts[i] + lengths[i]]`` for every i, without a loop.

    source [10, 11, 12, 13], starts [2, 0], lengths [2, 1] -> [12, 13, 10].
    """
    return source[range_indices(starts, lengths)]


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of a non-decreasing array, in order: ``np.unique`` without its sort (and
    without the ``numpy.ma`` it imports on first use, 30 ms of a run's first partition)."""
    if len(values) < 2:
        return values.copy()
    keep = np.empty(len(values), bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
