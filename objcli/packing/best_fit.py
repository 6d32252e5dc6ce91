"""``best-fit``: best-fit-decreasing packing (REFERENCE §2) within windows of about ``window`` tokens.

Only examples longer than a row are split (into row-sized pieces); pieces are placed longest first
into the open row with the least room that still fits; the rest of a row is padding. Every token
is placed. Every aligned column of the examples (``labels`` beside ``input_ids``) is placed with
its tokens; per-example values become per-segment columns.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels import PADDING_DOC
from ..kernels.bestfit import best_fit_decreasing
from ..kernels.packing import cumulative_bounds, segments_and_positions
from ..kernels.ragged import distinct_sorted, lengths_to_offsets, range_indices, split_long_items
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import (
    CU_SEQLENS,
    CU_SEQLENS_PADDED,
    PackSettings,
    count_empty,
    joined_lists,
    list_columns,
    packed_columns,
    per_example_names,
    register,
    segment_values,
    sequence_bound_columns,
    token_columns,
)


@register("best-fit")
class BestFitPacker:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return True  # what no example fills

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.row_length = settings.row_length
        self.aligned = token_columns(settings)
        self.lists = [c.name for c in list_columns(settings)]
        self.tag_names = per_example_names(settings)
        self.counters: Counter = Counter()
        self.pending: list[RowBatch] = []
        self.pending_tokens = 0
        self.examples_seen = 0

    def columns(self) -> list[ColumnSpec]:
        return packed_columns(self.settings, "fixed") + sequence_bound_columns(self.settings)

    def process(self, examples: RowBatch | None) -> RowBatch | None:
        if examples is None:
            return None
        self.pending.append(examples)
        self.pending_tokens += len(examples.columns["input_ids"].values)
        return self._pack() if self.pending_tokens >= self.settings.window else None

    def finish(self) -> RowBatch | None:
        return self._pack() if self.pending else None

    def _gather(self):
        """The pending examples as one batch: (lengths, aligned values, per-example values,
        documents starting in each example, example ids)."""
        pending, self.pending, self.pending_tokens = self.pending, [], 0
        lengths = np.concatenate([np.diff(p.columns["input_ids"].offsets) for p in pending])
        values = {c.name: np.concatenate([p.columns[c.name].values for p in pending]) for c in self.aligned}
        tags = {name: np.concatenate([p.columns[name] for p in pending]) for name in self.tag_names + self.lists}
        documents = np.concatenate([p.documents for p in pending])
        example_ids = self.examples_seen + np.arange(len(lengths), dtype=np.int64)
        self.examples_seen += len(lengths)
        return lengths, values, tags, documents, example_ids

    def _pack(self) -> RowBatch | None:
        row_length, padding = self.row_length, self.settings.sequence_padding
        lengths, values, tags, example_documents, example_ids = self._gather()
        count_empty(lengths, self.counters)
        offsets = lengths_to_offsets(lengths)
        chunk_offsets, source = split_long_items(offsets, padding.limit if padding else row_length)
        chunk_lengths = np.diff(chunk_offsets)
        keep = chunk_lengths > 0
        chunk_starts, chunk_lengths, source = chunk_offsets[:-1][keep], chunk_lengths[keep], source[keep]
        if not len(chunk_lengths):
            return None
        first_chunk = np.ones(len(source), dtype=bool)
        first_chunk[1:] = source[1:] != source[:-1]
        self.counters["documents_split"] += len(distinct_sorted(source[~first_chunk]))  # examples cut in pieces
        slot_lengths = padding.padded(chunk_lengths) if padding else chunk_lengths  # places each piece takes
        row, offset, rows = best_fit_decreasing(slot_lengths, row_length)
        # A row's pieces lie end to end from its start, padding after them: with the pieces taken in
        # row-major order, one boolean mask places them, and one index gathers every column.
        order = np.argsort(row * row_length + offset, kind="stable")
        placed = _Placed(row[order], chunk_lengths[order], slot_lengths[order], rows, row_length)
        taken = range_indices(chunk_starts[order], placed.lengths)
        columns = {}
        for spec in self.aligned:
            columns[spec.name] = placed.column(
                values[spec.name][taken],
                spec.fill_value(self.settings.pad_id),
                spec.fill_value(padding.pad_id) if padding else None,
            )
        owners = source[order]
        segment_ids, positions = segments_and_positions(placed.column(example_ids[owners], PADDING_DOC, per_slot=True))
        columns["segment_ids"], columns[POSITION_IDS] = segment_ids, positions
        for name in self.tag_names:
            columns[name] = segment_values(segment_ids, placed.column(tags[name][owners], 0, per_slot=True))
        if self.lists:
            cut = (np.bincount(source)[source] > 1)[order]  # pieces of an example longer than a row
            columns.update(joined_lists(self.settings, tags, owners, placed.row, placed.starts(), rows, cut))
        if padding:
            columns[CU_SEQLENS], columns[CU_SEQLENS_PADDED] = placed.sequence_bounds()
        padding_count = row_length - placed.real_per_row
        starts = first_chunk  # documents are counted in the row holding an example's first piece
        documents = np.bincount(row[starts], weights=example_documents[source[starts]], minlength=rows).astype(np.int64)
        return RowBatch(columns, tokens=row_length - padding_count, padding=padding_count, documents=documents)


class _Placed:
    """Pieces placed in rows, in row-major order: each takes ``slots[i]`` places (its tokens, then with
    --pad-to-multiple its sequence's padding) from where the one before it ends; the row's rest is padding."""

    def __init__(self, row: np.ndarray, lengths: np.ndarray, slots: np.ndarray, rows: int, row_length: int):
        self.row, self.lengths, self.slots, self.rows, self.row_length = row, lengths, slots, rows, row_length
        self.filled = np.bincount(row, weights=slots, minlength=rows).astype(np.int64)
        self.real_per_row = np.bincount(row, weights=lengths, minlength=rows).astype(np.int64)
        self.occupied = np.arange(row_length) < self.filled[:, None]
        padded = not np.array_equal(slots, lengths)
        self.real = range_indices(np.zeros(len(slots), np.int64), slots) < np.repeat(lengths, slots) if padded else None

    def column(self, values: np.ndarray, fill: int, inside: int | None = None, per_slot=False) -> np.ndarray:
        """A (rows, row_length) column: ``values`` (every piece's tokens, or with ``per_slot`` one value a
        piece, repeated over its places), ``inside`` on a sequence's own padding, ``fill`` after the pieces."""
        out = np.full((self.rows, self.row_length), fill, dtype=values.dtype)
        if per_slot:
            out[self.occupied] = np.repeat(values, self.slots)
        elif self.real is None:
            out[self.occupied] = values
        else:
            flat = np.full(len(self.real), inside, dtype=values.dtype)
            flat[self.real] = values
            out[self.occupied] = flat
        return out

    def starts(self) -> np.ndarray:
        """Where each piece starts in its row."""
        begins = np.cumsum(self.slots) - self.slots
        return begins - begins[np.searchsorted(self.row, self.row)]

    def sequence_bounds(self) -> tuple[Ragged, Ragged]:
        """``cu_seqlens`` (the sequences' real lengths summed) and ``cu_seqlens_padded`` (their places), each
        row's trailing padding one sequence more, real length 0 (Megatron-Bridge's collate, for THD)."""
        tail = self.filled < self.row_length
        real_tail = np.where(tail, self.real_per_row, -1)
        padded_tail = np.where(tail, self.row_length, -1)
        real = cumulative_bounds(self.row, self.lengths, self.rows, real_tail)
        padded = cumulative_bounds(self.row, self.slots, self.rows, padded_tail)
        return Ragged(*real), Ragged(*padded)
