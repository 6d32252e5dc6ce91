"""Packing a token stream into fixed-length rows.

Glossary, for a row of length 6 holding the end of document 7, all of document 8 and padding:

    input_ids    [a3, a4, b0, b1, b2, <pad>]
    segment_ids  [ 1,  1,  2,  2,  2,  0]     1-based per row; 0 marks padding
    positions    [ 0,  1,  0,  1,  2,  0]     restart at 0 for every segment of the row

A document cut at a row boundary continues as segment 1 of the next row, with positions
restarting at 0 there (as Megatron-LM's ``reset_position_ids`` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import PADDING_DOC
from .ragged import lengths_to_offsets


@dataclass(frozen=True)
class PackedRows:
    input_ids: np.ndarray  # (rows, seq_len)
    segment_ids: np.ndarray  # (rows, seq_len) int32, 0 = padding
    positions: np.ndarray  # (rows, seq_len) int32
    documents_started: np.ndarray  # (rows,) documents whose first token is in the row
    consumed: int  # stream tokens placed in these rows; the rest is the caller's remainder


def segments_and_positions(doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segment ids and positions for a (rows, seq_len) array of per-token document ids.

    Padding is marked by ``PADDING_DOC`` and gets segment 0 and position 0.
    """
    starts = np.empty(doc_ids.shape, dtype=bool)
    np.not_equal(doc_ids[:, 1:], doc_ids[:, :-1], out=starts[:, 1:])
    has_padding = len(doc_ids) > 0 and bool(np.any(doc_ids[:, -1] == PADDING_DOC))  # padding only ever ends a row
    return segments_from_starts(starts, doc_ids == PADDING_DOC if has_padding else None)


def segments_from_starts(starts: np.ndarray, padding: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Segment ids and positions from a (rows, seq_len) boolean array marking where documents
    start (read only: every row starts a segment whatever it says); ``padding`` marks padding, if any.

    A row holds a few segments, so both come from the segments' starts by ``np.repeat`` (each
    segment's number, and its first token's index) in two passes over the tokens: 2.6x the cumulative
    sum and running maximum along the rows they replace."""
    rows, seq_len = starts.shape
    marked = starts.copy() if padding is None else starts & ~padding
    marked[:, :1] = True  # every row starts a segment (padding only ever ends one)
    first = np.flatnonzero(marked)  # row-major: each segment's first token, flat (sorted: no union to sort)
    lengths = np.diff(first, append=rows * seq_len)
    row_first = np.searchsorted(first, (first // seq_len) * seq_len)  # the row's first segment
    index = np.int32 if rows * seq_len < 2**31 else np.int64
    segment_ids = np.repeat((np.arange(1, len(first) + 1) - row_first).astype(np.int32), lengths)
    positions = np.arange(rows * seq_len, dtype=index)
    positions -= np.repeat(first.astype(index), lengths)
    segment_ids, positions = segment_ids.reshape(rows, seq_len), positions.astype(np.int32, copy=False)
    positions = positions.reshape(rows, seq_len)
    if padding is not None:
        segment_ids[padding] = 0
        positions[padding] = 0
    return segment_ids, positions


def pack_concat(
    tokens: np.ndarray,
    first_token: np.ndarray,
    seq_len: int,
    pad_id: int | None = None,
    overlap: int = 0,
) -> PackedRows:
    """Cut a stream of documents (already joined with EOS) into rows of ``seq_len``.

    ``first_token`` flags each document's first token: segments are read from it, so no
    per-token array of document ids is ever built. Only full rows are made, unless ``pad_id`` is
    given: then the tail becomes one last row padded with ``pad_id``. With ``overlap`` 1,
    consecutive rows share a token (the last of one row is the first of the next), as
    Megatron-LM's ``seq_len + 1`` windows do, so every token but the stream's first is a next-token
    label exactly once; the shared token stays unconsumed.
    """
    stride = seq_len - overlap
    num_full = max(len(tokens) - overlap, 0) // stride
    tail = len(tokens) - num_full * stride
    padded = pad_id is not None and tail > overlap
    if padded:
        pad = seq_len - tail
        tokens = np.concatenate([tokens, np.full(pad, pad_id, dtype=tokens.dtype)])
        first_token = np.concatenate([first_token, np.zeros(pad, dtype=bool)])
    num_rows = num_full + padded
    # Row r is the stream's tokens [r * stride, r * stride + seq_len): a strided view, one copy.
    row_starts = stream_rows(first_token, num_rows, seq_len, stride)
    # A document is counted in the row holding its first token outside the shared one.
    documents_started = row_starts[:, : stride if overlap else seq_len].sum(axis=1)
    padding = None
    if padded:
        padding = np.zeros(row_starts.shape, dtype=bool)
        padding[-1, tail:] = True
    segment_ids, positions = segments_from_starts(row_starts, padding)
    return PackedRows(
        input_ids=stream_rows(tokens, num_rows, seq_len, stride),
        segment_ids=segment_ids,
        positions=positions,
        documents_started=documents_started,
        consumed=num_full * stride + (tail if padded else 0),
    )


def stream_rows(values: np.ndarray, rows: int, seq_len: int, stride: int) -> np.ndarray:
    """(rows, seq_len): row r is ``values[r * stride : r * stride + seq_len]``."""
    if rows == 0:
        return values[:0].reshape(0, seq_len)
    needed = (rows - 1) * stride + seq_len
    if len(values) < needed:  # a padded last row: zeros where the stream ran out
        values = np.concatenate([values, np.zeros(needed - len(values), dtype=values.dtype)])
    if stride == seq_len:
        return values[: rows * seq_len].reshape(rows, seq_len)
    windows = np.lib.stride_tricks.sliding_window_view
    return np.ascontiguousarray(windows(values[:needed], seq_len)[::stride])


def segment_starts(segment_ids: np.ndarray) -> np.ndarray:
    """(rows, seq_len) booleans: the first token of each segment (padding, segment 0, starts none)."""
    first = np.zeros(segment_ids.shape, dtype=bool)
    first[:, 0] = segment_ids[:, 0] > 0
    first[:, 1:] = (segment_ids[:, 1:] != segment_ids[:, :-1]) & (segment_ids[:, 1:] > 0)
    return first


def first_of_segments(segment_ids: np.ndarray, token_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the value at the first token of each segment: (values as int32, row offsets)."""
    rows, seq_len = segment_ids.shape
    first = segment_starts(segment_ids)
    values = token_values.reshape(rows, seq_len)[first]
    return values.astype(np.int32), lengths_to_offsets(first.sum(axis=1))


def cumulative_bounds(
    row: np.ndarray, lengths: np.ndarray, rows: int, tail: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, 0 then the running sum of its sequences' ``lengths`` (``row``: each sequence's row, in
    row order), then ``tail[r]`` where it is not negative: Transformer Engine's ``cu_seqlens`` as
    Megatron-Bridge's collate gives them (the row's trailing padding one more sequence). (values as
    int32, row offsets).

    row [0, 0, 1], lengths [3, 2, 4], rows 2, tail [-1, 6] -> values [0, 3, 5, 0, 4, 6], offsets [0, 3, 6]."""
    counts = np.bincount(row, minlength=rows)
    has_tail = tail >= 0
    offsets = lengths_to_offsets(counts + 1 + has_tail)
    values = np.zeros(int(offsets[-1]), dtype=np.int64)
    running = np.cumsum(lengths)
    before_row = np.concatenate([[0], running])[lengths_to_offsets(counts)[:-1]]  # sums before each row's first
    rank = np.arange(len(row)) - lengths_to_offsets(counts)[:-1][row]
    values[offsets[:-1][row] + 1 + rank] = running - before_row[row]
    values[offsets[1:][has_tail] - 1] = tail[has_tail]
    return values.astype(np.int32), offsets
