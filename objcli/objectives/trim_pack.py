"""Trim-and-pack for encoder-decoder examples (as SeqIO's ``trim_and_pack``), behind ``--pack``.

Examples of varying length (``input_ids`` and ``labels`` both ragged) are trimmed to ``seq_len``
and several are placed in one row, best-fit-decreasing on the longer of the two parts, within each
batch of examples. Inputs and labels get their own segment ids and positions:

    input_ids        [a0 a1 a2 b0 b1 <pad>]     segment_ids        [1 1 1 2 2 0]
    labels           [x0 x1 y0 y1 y2 -100]      label_segment_ids  [1 1 2 2 2 0]

so example 1 is (a0 a1 a2 -> x0 x1) and example 2 is (b0 b1 -> y0 y1 y2); the trainer masks attention
to stay within a segment, cross-attention included.
"""

from __future__ import annotations

import numpy as np

from ..kernels.bestfit import best_fit_decreasing
from ..kernels.packing import PADDING_DOC, segments_and_positions
from ..kernels.prefix import IGNORE
from ..kernels.ragged import gather_ranges, range_indices
from ..rows import ColumnSpec, Ragged, RowBatch


def packed_columns(top: int, seq_len: int) -> list[ColumnSpec]:
    return [
        ColumnSpec("input_ids", "fixed", 0, top, "packed encoder inputs"),
        ColumnSpec("segment_ids", "fixed", 0, seq_len, "example of each input token, 0 = padding"),
        ColumnSpec("positions", "fixed", 0, seq_len - 1, "position within the example's inputs"),
        ColumnSpec("labels", "fixed", IGNORE, top, "packed targets, -100 = padding"),
        ColumnSpec("label_segment_ids", "fixed", 0, seq_len, "example of each target token, 0 = padding"),
        ColumnSpec("label_positions", "fixed", 0, seq_len - 1, "position within the example's targets"),
    ]


def _place(column: Ragged, lengths, row, offset, rows, seq_len, fill):
    values = np.full(rows * seq_len, fill, dtype=np.int32)
    examples = np.full(rows * seq_len, PADDING_DOC, dtype=np.int64)
    destination = range_indices(row * seq_len + offset, lengths)
    values[destination] = gather_ranges(column.values, column.offsets[:-1], lengths)
    examples[destination] = np.repeat(np.arange(len(lengths)), lengths)
    segment_ids, positions = segments_and_positions(examples.reshape(rows, seq_len))
    return values.reshape(rows, seq_len), segment_ids, positions


def trim_and_pack(rows: RowBatch | None, seq_len: int, pad_id: int, counters) -> RowBatch | None:
    if rows is None:
        return None
    inputs, labels = rows.columns["input_ids"], rows.columns["labels"]
    input_lengths = np.minimum(np.diff(inputs.offsets), seq_len)
    label_lengths = np.minimum(np.diff(labels.offsets), seq_len)
    counters["tokens_trimmed"] += int(np.diff(inputs.offsets).sum() - input_lengths.sum())
    counters["tokens_trimmed"] += int(np.diff(labels.offsets).sum() - label_lengths.sum())
    row, _, count = best_fit_decreasing(np.maximum(input_lengths, label_lengths), seq_len)
    # Within a row, inputs and labels are each laid end to end in placement order.
    order = np.lexsort((np.arange(len(row)), row))
    input_offset = np.empty(len(row), dtype=np.int64)
    label_offset = np.empty(len(row), dtype=np.int64)
    for lengths, offset in ((input_lengths, input_offset), (label_lengths, label_offset)):
        ends = np.cumsum(lengths[order])
        row_start = np.searchsorted(row[order], row[order], side="left")
        before = ends - lengths[order]
        offset[order] = before - np.where(row_start > 0, ends[row_start - 1], 0)
    input_ids, segment_ids, positions = _place(inputs, input_lengths, row, input_offset, count, seq_len, pad_id)
    label_values, label_segments, label_positions = _place(labels, label_lengths, row, label_offset, count, seq_len, IGNORE)
    documents = np.bincount(row, weights=rows.documents, minlength=count).astype(np.int64)
    used = (segment_ids > 0).sum(axis=1) + (label_segments > 0).sum(axis=1)
    return RowBatch(
        {"input_ids": input_ids, "segment_ids": segment_ids, "positions": positions, "labels": label_values,
         "label_segment_ids": label_segments, "label_positions": label_positions},
        tokens=used, padding=2 * seq_len - used, documents=documents,
    )
