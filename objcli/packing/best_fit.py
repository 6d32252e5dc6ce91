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
from ..kernels.packing import segments_and_positions
from ..kernels.ragged import distinct_sorted, lengths_to_offsets, range_indices, split_long_items
from ..rows import POSITION_IDS, ColumnSpec, RowBatch
from .base import PackSettings, count_empty, packed_columns, per_example_names, segment_values


class BestFitPacker:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return True  # what no example fills

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.row_length = settings.row_length
        self.aligned = [c for c in settings.columns if c.kind != "scalar"]
        self.tag_names = per_example_names(settings)
        self.counters: Counter = Counter()
        self.pending: list[RowBatch] = []
        self.pending_tokens = 0
        self.examples_seen = 0

    def columns(self) -> list[ColumnSpec]:
        return packed_columns(self.settings, "fixed")

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
        tags = {name: np.concatenate([p.columns[name] for p in pending]) for name in self.tag_names}
        documents = np.concatenate([p.documents for p in pending])
        example_ids = self.examples_seen + np.arange(len(lengths), dtype=np.int64)
        self.examples_seen += len(lengths)
        return lengths, values, tags, documents, example_ids

    def _pack(self) -> RowBatch | None:
        row_length = self.row_length
        lengths, values, tags, example_documents, example_ids = self._gather()
        count_empty(lengths, self.counters)
        offsets = lengths_to_offsets(lengths)
        chunk_offsets, source = split_long_items(offsets, row_length)
        chunk_lengths = np.diff(chunk_offsets)
        keep = chunk_lengths > 0
        chunk_starts, chunk_lengths, source = chunk_offsets[:-1][keep], chunk_lengths[keep], source[keep]
        if not len(chunk_lengths):
            return None
        first_chunk = np.ones(len(source), dtype=bool)
        first_chunk[1:] = source[1:] != source[:-1]
        self.counters["documents_split"] += len(distinct_sorted(source[~first_chunk]))  # examples cut in pieces
        row, offset, rows = best_fit_decreasing(chunk_lengths, row_length)
        # A row's pieces lie end to end from its start, padding after them: with the pieces taken in
        # row-major order, one boolean mask places them, and one index gathers every column.
        order = np.argsort(row * row_length + offset, kind="stable")
        piece_lengths, owners = chunk_lengths[order], source[order]
        taken = range_indices(chunk_starts[order], piece_lengths)
        occupied = np.arange(row_length) < np.bincount(row, weights=chunk_lengths, minlength=rows)[:, None]
        columns = {}
        for spec in self.aligned:
            placed = np.full((rows, row_length), spec.fill_value(self.settings.pad_id), dtype=values[spec.name].dtype)
            placed[occupied] = values[spec.name][taken]
            columns[spec.name] = placed
        docs = np.full((rows, row_length), PADDING_DOC, dtype=np.int64)
        docs[occupied] = np.repeat(example_ids[owners], piece_lengths)
        segment_ids, positions = segments_and_positions(docs)
        columns["segment_ids"], columns[POSITION_IDS] = segment_ids, positions
        for name, per_example in tags.items():
            token_tags = np.zeros((rows, row_length), dtype=np.int32)
            token_tags[occupied] = np.repeat(per_example[owners], piece_lengths)
            columns[name] = segment_values(segment_ids, token_tags)
        padding = np.sum(segment_ids == 0, axis=1)
        starts = first_chunk  # documents are counted in the row holding an example's first piece
        documents = np.bincount(row[starts], weights=example_documents[source[starts]], minlength=rows).astype(np.int64)
        return RowBatch(columns, tokens=row_length - padding, padding=padding, documents=documents)
