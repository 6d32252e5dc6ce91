"""``trim-and-pack``: SeqIO's ``trim_and_pack`` for examples whose inputs and labels have lengths
of their own (encoder-decoder prefix LM, BART, UL2).

Each example is trimmed to ``row_length`` per column and several are placed in one row,
best-fit-decreasing on the longer of the two parts, within each batch of examples. Inputs and
labels get their own segment ids and positions:

    input_ids        [a0 a1 a2 b0 b1 <pad>]     segment_ids        [1 1 1 2 2 0]
    labels           [x0 x1 y0 y1 y2 -100]      label_segment_ids  [1 1 2 2 2 0]

so example 1 is (a0 a1 a2 -> x0 x1) and example 2 is (b0 b1 -> y0 y1 y2); the trainer masks
attention to stay within a segment, cross-attention included. Per-example values become
per-segment columns (one value per input segment).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels import IGNORE, PADDING_DOC
from ..kernels.bestfit import best_fit_decreasing
from ..kernels.packing import segments_and_positions
from ..kernels.ragged import gather_ranges, lengths_to_offsets, range_indices
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import PackSettings, per_example_names, per_segment_columns, register, segment_values


def _ragged(column) -> Ragged:
    if isinstance(column, Ragged):
        return column
    rows, length = column.shape
    return Ragged(column.reshape(-1), lengths_to_offsets(np.full(rows, length, dtype=np.int64)))


def _place(column: Ragged, lengths, row, offset, rows, row_length, fill):
    values = np.full(rows * row_length, fill, dtype=np.int32)
    examples = np.full(rows * row_length, PADDING_DOC, dtype=np.int64)
    destination = range_indices(row * row_length + offset, lengths)
    values[destination] = gather_ranges(column.values, column.offsets[:-1], lengths)
    examples[destination] = np.repeat(np.arange(len(lengths)), lengths)
    segment_ids, positions = segments_and_positions(examples.reshape(rows, row_length))
    return values.reshape(rows, row_length), segment_ids, positions


def _offsets_in_rows(row: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Within a row, examples are laid end to end in placement order: each one's offset."""
    order = np.lexsort((np.arange(len(row)), row))
    offset = np.empty(len(row), dtype=np.int64)
    ends = np.cumsum(lengths[order])
    row_start = np.searchsorted(row[order], row[order], side="left")
    offset[order] = ends - lengths[order] - np.where(row_start > 0, ends[row_start - 1], 0)
    return offset


@register("trim-and-pack")
class TrimAndPack:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return True  # what no example fills

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.tag_names = per_example_names(settings)
        self.counters: Counter = Counter()

    def columns(self) -> list[ColumnSpec]:
        row_length = self.settings.row_length
        inputs, labels = self.settings.spec("input_ids"), self.settings.spec("labels")
        # Inputs and targets each fill rows of --seq-len; the segment and position columns take their family's
        # length where the run's columns are made (run/stages.run_columns: rows.with_family_lengths).
        return [
            ColumnSpec("input_ids", "fixed", 0, inputs.max_value, "packed encoder inputs", length=row_length),
            ColumnSpec(
                "segment_ids", "fixed", 0, row_length, "example of each input token, 0 = padding", role="segment_ids"
            ),
            ColumnSpec(
                POSITION_IDS, "fixed", 0, row_length - 1, "position within the example's inputs", role="positions"
            ),
            ColumnSpec(
                "labels",
                "fixed",
                IGNORE,
                labels.max_value,
                "packed targets, -100 = padding",
                role="labels",
                family="labels",
                length=row_length,
            ),
            ColumnSpec(
                "label_segment_ids",
                "fixed",
                0,
                row_length,
                "example of each target token, 0 = padding",
                role="segment_ids",
                family="labels",
            ),
            ColumnSpec(
                "label_positions",
                "fixed",
                0,
                row_length - 1,
                "position within the example's targets",
                role="positions",
                family="labels",
            ),
        ] + per_segment_columns(self.settings)

    def process(self, examples: RowBatch | None) -> RowBatch | None:
        if examples is None:
            return None
        row_length, pad_id = self.settings.row_length, self.settings.pad_id
        inputs, labels = _ragged(examples.columns["input_ids"]), _ragged(examples.columns["labels"])
        input_lengths = np.minimum(np.diff(inputs.offsets), row_length)
        label_lengths = np.minimum(np.diff(labels.offsets), row_length)
        self.counters["tokens_trimmed"] += int(np.diff(inputs.offsets).sum() - input_lengths.sum())
        self.counters["tokens_trimmed"] += int(np.diff(labels.offsets).sum() - label_lengths.sum())
        row, _, count = best_fit_decreasing(np.maximum(input_lengths, label_lengths), row_length)
        input_offset, label_offset = _offsets_in_rows(row, input_lengths), _offsets_in_rows(row, label_lengths)
        input_ids, segment_ids, positions = _place(inputs, input_lengths, row, input_offset, count, row_length, pad_id)
        label_values, label_segments, label_positions = _place(
            labels, label_lengths, row, label_offset, count, row_length, IGNORE
        )
        documents = np.bincount(row, weights=examples.documents, minlength=count).astype(np.int64)
        used = (segment_ids > 0).sum(axis=1) + (label_segments > 0).sum(axis=1)
        columns = {
            "input_ids": input_ids,
            "segment_ids": segment_ids,
            POSITION_IDS: positions,
            "labels": label_values,
            "label_segment_ids": label_segments,
            "label_positions": label_positions,
        }
        for name in self.tag_names:
            token_tags = np.zeros(count * row_length, dtype=np.int32)
            destination = range_indices(row * row_length + input_offset, input_lengths)
            token_tags[destination] = np.repeat(examples.columns[name], input_lengths)
            columns[name] = segment_values(segment_ids, token_tags)
        return RowBatch(columns, tokens=used, padding=2 * row_length - used, documents=documents)

    def finish(self) -> RowBatch | None:
        return None
