"""``concat``: documents joined into one stream per partition and cut into rows of ``row_length``.

With ``overlap`` 1 (``--row-tokens seq-len+1``) consecutive rows share one token, as Megatron-LM's
windows of ``row_length + 1`` do: row r holds the stream's tokens ``[r * (L - 1), r * (L - 1) + L)``.

The last partial row of a partition is dropped (counted as ``tokens_dropped``, and documents
wholly in it as skipped ``remainder_dropped``) or, with a pad token, padded. Rows never carry
tokens across partitions, so partitions stay independent and output does not depend on workers.

``ConcatPlanner`` is the same policy from the documents' lengths alone: what ``--format plan`` writes for an
objective whose examples are the documents with BOS/EOS around them (clm, mlm, mtp), with no array a token.
The stream is pieces (a BOS, a document's stored tokens, an EOS); row r is the stream's window
``[r * stride, r * stride + row_length)``, so each row's runs are the pieces it cuts, its segments start at
the row and at each document's first piece in it, and its positions count from each segment's start: the
packer's rows and counters, tested byte for byte against it through the plan's reader
(``tests/reading/test_plan_parity.py``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..kernels.example_runs import ExampleRuns
from ..kernels.packing import pack_concat, stream_rows
from ..kernels.ragged import distinct_sorted
from ..rows import POSITION_IDS, ColumnSpec, RowBatch
from .base import (
    PackSettings,
    PlannedRows,
    count_empty,
    packed_columns,
    per_example_names,
    register,
    segment_values,
)


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


class ConcatPlanner:
    """A partition's planned rows: its batches of documents fed (``feed``), then every row made in one pass at
    ``finish`` (a batch's work is a few array calls over a few hundred documents, most of a plan's cost). With
    ``notes_batches`` (an objective whose row step keys its draws to each batch's first row), the rows carry the
    batches the packer writes them in (``PlannedRows.batches``), each as many rows as the batch finished."""

    def __init__(self, row_length: int, overlap: int, notes_batches: bool = True, chunks=None):
        self.row_length, self.overlap = row_length, overlap
        self.notes_batches = notes_batches
        # Raw chunks for an objective's row step (span corruption's, ``--packing none``): rows of input_ids
        # alone, counted as the step's rows (``chunks.chunk_counts``), the last shorter where it keeps it.
        self.chunks = chunks
        self.stride = row_length - overlap
        self.counters: Counter = Counter()
        self.waiting: list[ExampleRuns] = []  # every batch's examples, until the end
        self.fed = 0  # tokens fed, and the rows finished after each batch that finished any (notes_batches)
        self.batch_ends: list[int] = []
        self.last_split = -1  # the last document counted split
        self.pieces = tuple(np.zeros(0, t) for t in (np.int64, np.int64, np.int64, np.int64, bool, np.int64))
        self.stream = 0  # tokens in the stream

    def feed(self, examples: ExampleRuns | None) -> PlannedRows | None:
        """A batch's examples (documents with BOS/EOS: ``ExampleRuns.of_documents``), joined and their rows made
        once at ``finish``; with ``notes_batches``, the rows the batch finishes noted (a batch of the row step's,
        as the packer writes it)."""
        if examples is None:
            return None
        self.waiting.append(examples)
        if self.notes_batches:
            self.fed += int(examples.lengths.sum())
            rows = max(self.fed - self.overlap, 0) // self.stride
            if rows > (self.batch_ends[-1] if self.batch_ends else 0):
                self.batch_ends.append(rows)
        return None

    def finish(self) -> PlannedRows | None:
        """Every row, in one pass, and what no row holds: dropped and counted, as ``ConcatPacker.finish`` counts
        it (a chunk objective's short last chunk a row where it keeps it)."""
        if self.waiting:
            self._join(ExampleRuns.concat(self.waiting))
            self.waiting = []
        rows = max(self.stream - self.overlap, 0) // self.stride
        left = self.stream - rows * self.stride
        tail = self.chunks is not None and left > 0 and self.chunks.keeps_tail(left)
        planned = self._rows(rows + 1, left) if tail else self._rows(rows) if rows else None
        if planned is not None and self.notes_batches:  # the batches the row step keys its draws to
            planned.batches = np.diff([0, *self.batch_ends, *([rows + 1] if tail else [])]).astype(np.int64)
        if self.chunks is not None and (not left or tail):
            self.counters["final_chunks_padded"] += int(tail)
            return planned
        shared = self.overlap if rows and left else 0
        self.counters["tokens_dropped"] += left - shared
        starts, lengths, _, _, firsts, _ = self.pieces
        consumed = rows * self.stride
        self.counters["skipped:remainder_dropped"] += int(np.sum(firsts & (starts >= consumed) & (lengths > 0)))
        return planned

    def _join(self, examples: ExampleRuns) -> None:
        """The partition's stream as pieces: stream start, length, first value, step, whether it starts its
        document, the document's ordinal in the partition."""
        self.counters["skipped:no_tokens"] += int(np.sum(examples.lengths == 0))
        example, values, steps, lengths = examples.columns["input_ids"]  # the stream's pieces: no run is empty
        firsts = np.ones(len(example), dtype=bool)  # an example's first piece
        firsts[1:] = example[1:] != example[:-1]
        starts = np.cumsum(lengths) - lengths
        self.pieces = (starts, lengths.astype(np.int64), values, steps.astype(np.int64), firsts, example)
        self.stream = int(lengths.sum())

    def _rows(self, rows: int, last_length: int = 0) -> PlannedRows:
        starts, lengths, values, steps, firsts, documents_of = self.pieces
        ends = starts + lengths
        row_start = np.arange(rows, dtype=np.int64) * self.stride
        row_lengths = np.full(len(row_start), self.row_length, np.int64)
        row_lengths[-1] = last_length or self.row_length
        row_end = row_start + row_lengths
        lo = np.searchsorted(ends, row_start, side="right")  # the first piece ending past the row's start
        hi = np.searchsorted(starts, row_end, side="left")  # one past the last piece starting in the row
        per_row = hi - lo
        row = np.repeat(np.arange(len(row_start)), per_row)
        piece = np.arange(int(per_row.sum())) - np.repeat(np.cumsum(per_row) - per_row, per_row) + lo[row]
        cut_lo = np.maximum(starts[piece], row_start[row])
        cut_hi = np.minimum(ends[piece], row_end[row])
        run_length = cut_hi - cut_lo
        run_value = values[piece] + steps[piece] * (cut_lo - starts[piece])
        run_offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64)
        starting = firsts[piece] & (cut_lo == starts[piece])  # a document's first token, in this row
        head = run_offsets[:-1][per_row > 0]  # each row's first run
        # Segments: at each row's first run, and where a document starts in the row.
        opens = starting.copy()
        opens[head] = True
        segment_runs = self._segments(opens, run_length, row, len(row_start))
        self._count_split(documents_of[piece[head]][~starting[head]])
        within = cut_lo - row_start[row] < (self.stride if self.overlap else self.row_length)
        documents = np.bincount(row[starting & within], minlength=len(row_start)).astype(np.int64)
        ids = (run_value, (steps[piece] * (run_length > 1)).astype(np.int8), run_length.astype(np.int32), per_row)
        count = len(row_start)
        if self.chunks is not None:
            return PlannedRows({"input_ids": ids}, *self.chunks.chunk_counts(row_lengths), documents, count)
        return PlannedRows(
            {"input_ids": ids, **segment_runs},
            np.full(count, self.row_length, np.int64),
            np.zeros(count, np.int64),
            documents,
            int(opens.sum()),
        )

    @staticmethod
    def _segments(opens: np.ndarray, run_length: np.ndarray, row: np.ndarray, rows: int):
        """segment_ids (1, 2, … a row, each a run) and position_ids (0, 1, … from each segment's start)."""
        segment_of_run = np.cumsum(opens) - 1
        lengths = np.bincount(segment_of_run, weights=run_length, minlength=int(opens.sum())).astype(np.int64)
        segment_row = row[opens]
        per_row = np.bincount(segment_row, minlength=rows).astype(np.int64)
        numbers = np.arange(len(lengths)) - np.repeat(np.cumsum(per_row) - per_row, per_row) + 1
        ones = (lengths > 1).astype(np.int8)
        return {
            "segment_ids": (
                numbers.astype(np.int64),
                np.zeros(len(lengths), np.int8),
                lengths.astype(np.int32),
                per_row,
            ),
            "position_ids": (np.zeros(len(lengths), np.int64), ones, lengths.astype(np.int32), per_row),
        }

    def _count_split(self, split: np.ndarray) -> None:
        """Documents a row starts inside of, each once (by ordinal, as ``ConcatPacker`` counts them): rows come in
        stream order, so ``split`` does not decrease."""
        docs = distinct_sorted(split)
        docs = docs[docs != self.last_split]
        if len(docs):
            self.last_split = int(docs[-1])
        self.counters["documents_split"] += len(docs)
