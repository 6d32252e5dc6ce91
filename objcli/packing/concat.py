"""``concat``: documents joined into one stream per partition and cut into rows of ``row_length``.

With ``overlap`` 1 (``--row-tokens seq-len+1``) consecutive rows share one token, as Megatron-LM's
windows of ``row_length + 1`` do: row r holds the stream's tokens ``[r * (L - 1), r * (L - 1) + L)``.

The last partial row of a partition is dropped (counted as ``tokens_dropped``, and documents
wholly in it as skipped ``remainder_dropped``) or, with a pad token, padded. Rows never carry
tokens across partitions, so partitions stay independent and output does not depend on workers.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels.packing import pack_concat, stream_rows
from ..kernels.ragged import distinct_sorted
from ..rows import POSITION_IDS, ColumnSpec, RowBatch
from .base import PackSettings, count_empty, packed_columns, per_example_names, register, segment_values


@register("concat")
class ConcatPacker:
    @staticmethod
    def pads_rows(remainder: str) -> bool:
        """Whether rows get padding, so the objective must name a pad token (``--remainder``: drop or pad)."""
        return remainder == "pad"  # only the partial last row

    def __init__(self, settings: PackSettings):
        self.settings = settings
        self.row_length, self.pad_id, self.overlap = settings.row_length, settings.pad_id, settings.overlap
        self.stride = self.row_length - self.overlap
        self.rows_made = 0
        self.tag_names = per_example_names(settings)
        # Token columns beside input_ids (the provenance's token places): carried with the stream.
        self.aligned = [c.name for c in settings.columns if c.kind != "scalar" and c.name != "input_ids"]
        self.counters: Counter = Counter()
        self.carry_tokens = np.zeros(0, dtype=np.int32)
        self.carry_first = np.zeros(0, dtype=bool)  # each document's first token
        self.carry_tags = {name: np.zeros(0, dtype=np.int32) for name in self.tag_names}
        self.carry_aligned = {name: np.zeros(0, dtype=np.int32) for name in self.aligned}
        self.firsts_consumed = 0  # documents that started before the carry (their ordinals come first)
        self.last_split_doc = -1

    def columns(self) -> list[ColumnSpec]:
        return packed_columns(self.settings, "fixed")

    def process(self, examples: RowBatch | None) -> RowBatch | None:
        if examples is None:
            return None
        ids = examples.columns["input_ids"]
        tokens, offsets = ids.values, ids.offsets
        lengths = np.diff(offsets)
        first = np.zeros(len(tokens), dtype=bool)
        first[offsets[:-1][lengths > 0]] = True
        count_empty(lengths, self.counters)
        self.carry_tokens = np.concatenate([self.carry_tokens, tokens])
        self.carry_first = np.concatenate([self.carry_first, first])
        for name in self.tag_names:
            token_tags = np.repeat(examples.columns[name].astype(np.int32), lengths)
            self.carry_tags[name] = np.concatenate([self.carry_tags[name], token_tags])
        for name in self.aligned:
            self.carry_aligned[name] = np.concatenate([self.carry_aligned[name], examples.columns[name].values])
        return self._emit(pad=False)

    def finish(self) -> RowBatch | None:
        rows = None if self.pad_id is None else self._emit(pad=True)
        # What is left was never written, but for a token shared with the last row.
        shared = self.overlap if self.rows_made and len(self.carry_tokens) else 0
        self.counters["tokens_dropped"] += len(self.carry_tokens) - shared
        self.counters["skipped:remainder_dropped"] += int(self.carry_first.sum())
        return rows

    def _emit(self, pad: bool) -> RowBatch | None:
        stream, stream_first = self.carry_tokens, self.carry_first
        packed = pack_concat(stream, stream_first, self.row_length, self.pad_id if pad else None, self.overlap)
        rest = packed.consumed
        self.carry_tokens, self.carry_first = stream[rest:], stream_first[rest:]
        stream_tags, stream_aligned = self.carry_tags, self.carry_aligned
        self.carry_tags = {name: tags[rest:] for name, tags in stream_tags.items()}
        self.carry_aligned = {name: values[rest:] for name, values in stream_aligned.items()}
        rows = len(packed.input_ids)
        if rows == 0:
            return None
        self.rows_made += rows
        self._count_split_documents(stream_first, rows)
        self.firsts_consumed += int(np.count_nonzero(stream_first[:rest]))
        # Only a padded last row has padding (a pass over every token otherwise).
        padding = np.sum(packed.segment_ids == 0, axis=1) if pad else np.zeros(rows, np.int64)
        columns = {"input_ids": packed.input_ids, "segment_ids": packed.segment_ids, POSITION_IDS: packed.positions}
        for name, tags in stream_tags.items():
            columns[name] = segment_values(packed.segment_ids, stream_rows(tags, rows, self.row_length, self.stride))
        for name, values in stream_aligned.items():
            columns[name] = stream_rows(values, rows, self.row_length, self.stride)
        return RowBatch(columns, tokens=self.row_length - padding, padding=padding, documents=packed.documents_started)

    def _count_split_documents(self, stream_first, rows) -> None:
        """A document is split when a row starts in its middle; count each document once. A
        document is known by its ordinal: the firsts up to a row's start, counted from the
        partition's beginning."""
        row_starts = np.arange(rows, dtype=np.int64) * self.stride
        firsts = np.flatnonzero(stream_first[: row_starts[-1] + 1])
        ordinals = self.firsts_consumed + np.searchsorted(firsts, row_starts, side="right") - 1
        split_docs = distinct_sorted(ordinals[~stream_first[row_starts]])  # ordinals never decrease
        split_docs = split_docs[split_docs != self.last_split_doc]
        if len(split_docs):
            self.last_split_doc = int(split_docs[-1])
        self.counters["documents_split"] += len(split_docs)
