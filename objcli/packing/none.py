"""``none``: one example per row, for trainers that pack themselves (Megatron-LM, Hugging Face's
``DataCollatorWithFlattening``) or objectives whose examples already fill a row.

Documents longer than ``row_length`` are cut into rows of at most ``row_length`` (each piece its own
row, counted in ``documents_split``); rows keep their own lengths, with ``segment_ids`` (all 1)
and ``positions``. Finished examples (input/label pairs) pass through; a column the objective
declares ``fixed`` is padded to ``row_length`` (the pad token, or -100 for labels).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels.ragged import lengths_to_offsets, split_long_items
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import PackSettings, count_empty, joined_lists, list_columns, packed_columns, per_example_names, register


@register("none")
class OneExamplePerRow:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return False  # a short example pads only what the objective itself pads

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.counters: Counter = Counter()

    def columns(self) -> list[ColumnSpec]:
        if not self.settings.documents:
            return list(self.settings.columns)
        return packed_columns(self.settings, "ragged")

    def process(self, examples: RowBatch | None) -> RowBatch | None:
        if examples is None:
            return None
        return self._documents(examples) if self.settings.documents else self._padded(examples)

    def finish(self) -> RowBatch | None:
        return None

    def _padded(self, examples: RowBatch) -> RowBatch:
        row_length, columns = self.settings.row_length, dict(examples.columns)
        for spec in self.settings.columns:
            column = columns[spec.name]
            if spec.kind == "fixed" and isinstance(column, Ragged):
                lengths = np.diff(column.offsets)
                rows = np.full((len(lengths), row_length), spec.fill_value(self.settings.pad_id), dtype=np.int32)
                rows[np.arange(row_length)[None, :] < lengths[:, None]] = column.values
                columns[spec.name] = rows
        return RowBatch(columns, examples.tokens, examples.padding, examples.documents)

    def _documents(self, examples: RowBatch) -> RowBatch | None:
        ids = examples.columns["input_ids"]
        lengths = np.diff(ids.offsets)
        count_empty(lengths, self.counters)
        keep = lengths > 0
        offsets = lengths_to_offsets(lengths[keep])
        kept = np.flatnonzero(keep)
        if self.settings.row_length is None:  # whole documents: a row each, never cut
            row_offsets, source = offsets, np.arange(len(offsets) - 1, dtype=np.int64)
        else:
            row_offsets, source = split_long_items(offsets, self.settings.row_length)
        row_lengths = np.diff(row_offsets)
        first_piece = np.ones(len(source), dtype=bool)
        first_piece[1:] = source[1:] != source[:-1]
        self.counters["documents_split"] += int(np.sum(np.bincount(source) > 1)) if len(source) else 0
        if len(row_lengths) == 0:
            return None
        total = int(row_offsets[-1])
        columns, lists = {}, list_columns(self.settings)
        for spec in self.settings.columns:
            column = examples.columns[spec.name]
            if spec.kind == "scalar" or spec in lists:
                continue
            columns[spec.name] = Ragged(column.values, row_offsets)  # aligned: empty examples hold no values
        if lists:
            pieces, cut = len(source), np.bincount(source)[source] > 1  # a row a piece, each from its start
            per_example = {c.name: examples.columns[c.name][kept] for c in lists}
            columns.update(
                joined_lists(self.settings, per_example, source, np.arange(pieces), np.zeros(pieces), pieces, cut)
            )
        positions = (np.arange(total, dtype=np.int64) - np.repeat(row_offsets[:-1], row_lengths)).astype(np.int32)
        columns["segment_ids"] = Ragged(np.ones(total, dtype=np.int32), row_offsets)
        columns[POSITION_IDS] = Ragged(positions, row_offsets)
        for name in per_example_names(self.settings):
            one_per_row = lengths_to_offsets(np.ones(len(source), dtype=np.int64))
            columns[name] = Ragged(examples.columns[name][kept][source].astype(np.int32), one_per_row)
        documents = first_piece.astype(np.int64) * examples.documents[kept][source]
        return RowBatch(
            columns, tokens=row_lengths, padding=np.zeros(len(row_lengths), dtype=np.int64), documents=documents
        )
