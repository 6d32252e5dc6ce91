"""Causal language modelling (REFERENCE §2).

``--packing concat``: documents joined with EOS (BOS optional) and cut into rows of ``seq_len``;
the last partial row of each partition is dropped or padded (``--remainder``). Rows never carry
tokens across partitions, so partitions stay independent and output does not depend on workers.

``--packing none``: one document per row (rows of varying length, e.g. for Megatron-LM, which
packs itself); documents longer than ``seq_len`` are cut into rows of at most ``seq_len``.

Labels are not stored: for causal LM they are ``input_ids`` and the model shifts them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.bestfit import best_fit_decreasing
from ..kernels.packing import PADDING_DOC, pack_concat, segments_and_positions
from ..kernels.ragged import (
    add_boundary_tokens,
    gather_ranges,
    item_index,
    lengths_to_offsets,
    range_indices,
    split_long_items,
)
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, register

PACKINGS = ("concat", "best-fit", "none")
REMAINDERS = ("drop", "pad")


@dataclass(frozen=True)
class ClmOptions:
    packing: str = "concat"
    remainder: str = "drop"
    pack_window: int = 4_000_000  # best-fit: tokens gathered before packing (bounds memory)

    def __post_init__(self):
        if self.packing not in PACKINGS:
            raise ObjcliError(f"--packing {self.packing}: choose one of {', '.join(PACKINGS)}")
        if self.pack_window < 1:
            raise ObjcliError(f"--pack-window {self.pack_window}: must be at least 1 token")
        if self.remainder not in REMAINDERS:
            raise ObjcliError(f"--remainder {self.remainder}: choose one of {', '.join(REMAINDERS)}")


@register("clm", "causal")
class CausalLM:
    options_type = ClmOptions
    default_eos = True

    def __init__(self, config, tokenizer):
        self.config = config
        self.options: ClmOptions = config.objective_options
        self.bos_id = tokenizer.resolve("bos") if config.bos else None
        self.eos_id = tokenizer.resolve("eos") if config.eos else None
        needs_pad = self.options.packing == "best-fit" or (self.options.packing == "concat" and self.options.remainder == "pad")
        self.pad_id = tokenizer.resolve("pad") if needs_pad else None
        self.vocab_size = tokenizer.total_vocab_size

    def columns(self) -> list[ColumnSpec]:
        kind = "ragged" if self.options.packing == "none" else "fixed"
        seq_len = self.config.seq_len
        return [
            ColumnSpec("input_ids", kind, 0, self.vocab_size - 1, "token ids"),
            ColumnSpec("segment_ids", kind, 0, seq_len, "1-based document segment per row, 0 = padding"),
            ColumnSpec("positions", kind, 0, seq_len - 1, "position within the segment"),
        ]

    def partition_transform(self, partition_index: int):
        return make_packer(self.options.packing, self.config.seq_len, self.bos_id, self.eos_id, self.pad_id,
                           self.options.pack_window)


def make_packer(packing: str, seq_len: int, bos_id, eos_id, pad_id, pack_window: int):
    if packing == "concat":
        return _ConcatPacker(seq_len, bos_id, eos_id, pad_id)
    if packing == "best-fit":
        return _BestFitPacker(seq_len, bos_id, eos_id, pad_id, pack_window)
    return _OneDocumentPerRow(seq_len, bos_id, eos_id)


def segment_values(segment_ids: np.ndarray, token_values: np.ndarray) -> Ragged:
    """Per row, the value at the first token of each segment: a ragged column, one entry per segment."""
    rows, seq_len = segment_ids.shape
    first = np.zeros(segment_ids.shape, dtype=bool)
    first[:, 0] = segment_ids[:, 0] > 0
    first[:, 1:] = (segment_ids[:, 1:] != segment_ids[:, :-1]) & (segment_ids[:, 1:] > 0)
    values = token_values.reshape(rows, seq_len)[first]
    return Ragged(values.astype(np.int32), lengths_to_offsets(first.sum(axis=1)))


def _with_boundaries(batch: DocumentBatch, bos_id, eos_id) -> tuple[np.ndarray, np.ndarray]:
    return add_boundary_tokens(batch.tokens, batch.offsets, bos_id, eos_id)


class _ConcatPacker:
    def __init__(self, seq_len: int, bos_id, eos_id, pad_id):
        self.seq_len, self.bos_id, self.eos_id, self.pad_id = seq_len, bos_id, eos_id, pad_id
        self.counters: Counter = Counter()
        self.carry_tokens = np.zeros(0, dtype=np.int32)
        self.carry_docs = np.zeros(0, dtype=np.int64)
        self.carry_first = np.zeros(0, dtype=bool)
        self.carry_tags = np.zeros(0, dtype=np.int32)
        self.tagged = False
        self.last_split_doc = PADDING_DOC

    def process(self, batch: DocumentBatch, tags: np.ndarray | None = None) -> RowBatch | None:
        """Pack a batch; ``tags`` (one small int per document) come out per row and segment as
        the ragged column ``segment_tags``."""
        tokens, offsets = _with_boundaries(batch, self.bos_id, self.eos_id)
        docs = batch.first_document + item_index(offsets)
        self.tagged = tags is not None
        token_tags = np.repeat(tags.astype(np.int32), np.diff(offsets)) if tags is not None else np.zeros(len(tokens), np.int32)
        first = np.zeros(len(tokens), dtype=bool)
        first[offsets[:-1][np.diff(offsets) > 0]] = True
        empty = int(np.sum(np.diff(offsets) == 0))
        if empty:  # only possible with neither BOS nor EOS: a document with no tokens
            self.counters["skipped:no_tokens"] += empty
        stream = np.concatenate([self.carry_tokens, tokens])
        stream_docs = np.concatenate([self.carry_docs, docs])
        stream_first = np.concatenate([self.carry_first, first])
        stream_tags = np.concatenate([self.carry_tags, token_tags])
        return self._emit(stream, stream_docs, stream_first, stream_tags, pad=False)

    def finish(self) -> RowBatch | None:
        if self.pad_id is None:
            dropped = len(self.carry_tokens)
            self.counters["tokens_dropped"] += dropped
            self.counters["skipped:remainder_dropped"] += int(self.carry_first.sum())
            return None
        return self._emit(self.carry_tokens, self.carry_docs, self.carry_first, self.carry_tags, pad=True)

    def _emit(self, stream, stream_docs, stream_first, stream_tags, pad: bool) -> RowBatch | None:
        packed = pack_concat(
            stream, stream_docs, stream_first, self.seq_len, self.pad_id if pad else None
        )
        self.carry_tokens = stream[packed.consumed :]
        self.carry_docs = stream_docs[packed.consumed :]
        self.carry_first = stream_first[packed.consumed :]
        self.carry_tags = stream_tags[packed.consumed :]
        rows = len(packed.input_ids)
        if rows == 0:
            return None
        self._count_split_documents(packed.input_ids, stream_docs, stream_first, rows)
        padding = np.sum(packed.segment_ids == 0, axis=1)
        columns = {"input_ids": packed.input_ids, "segment_ids": packed.segment_ids, "positions": packed.positions}
        if self.tagged:
            columns["segment_tags"] = segment_values(packed.segment_ids, stream_tags[: rows * self.seq_len])
        return RowBatch(columns, tokens=self.seq_len - padding, padding=padding, documents=packed.documents_started)

    def _count_split_documents(self, input_ids, stream_docs, stream_first, rows) -> None:
        """A document is split when a row starts in its middle; count each document once."""
        row_starts = np.arange(rows, dtype=np.int64) * self.seq_len
        continued = ~stream_first[row_starts] & (stream_docs[row_starts] != PADDING_DOC)
        split_docs = np.unique(stream_docs[row_starts[continued]])
        split_docs = split_docs[split_docs != self.last_split_doc]
        if len(split_docs):
            self.last_split_doc = int(split_docs[-1])
        self.counters["documents_split"] += len(split_docs)


class _BestFitPacker:
    """Best-fit-decreasing packing within windows of about ``window`` tokens (REFERENCE §2): only
    documents longer than a row are split; every token is placed; the rest of a row is padding."""

    def __init__(self, seq_len: int, bos_id, eos_id, pad_id: int, window: int):
        self.seq_len, self.bos_id, self.eos_id, self.pad_id, self.window = seq_len, bos_id, eos_id, pad_id, window
        self.counters: Counter = Counter()
        self.pending: list[tuple[np.ndarray, np.ndarray, int, np.ndarray | None]] = []
        self.pending_tokens = 0

    def process(self, batch: DocumentBatch, tags: np.ndarray | None = None) -> RowBatch | None:
        tokens, offsets = _with_boundaries(batch, self.bos_id, self.eos_id)
        self.pending.append((tokens, offsets, batch.first_document, tags))
        self.pending_tokens += len(tokens)
        return self._pack() if self.pending_tokens >= self.window else None

    def finish(self) -> RowBatch | None:
        return self._pack() if self.pending else None

    def _pack(self) -> RowBatch | None:
        seq_len = self.seq_len
        tokens = np.concatenate([p[0] for p in self.pending])
        lengths = np.concatenate([np.diff(p[1]) for p in self.pending])
        doc_ids = np.concatenate([p[2] + np.arange(len(p[1]) - 1) for p in self.pending])
        tagged = self.pending[0][3] is not None
        tags = np.concatenate([p[3] for p in self.pending]) if tagged else None
        self.pending, self.pending_tokens = [], 0
        empty = lengths == 0
        if empty.any():  # only possible with neither BOS nor EOS
            self.counters["skipped:no_tokens"] += int(empty.sum())
        chunk_offsets, source = split_long_items(lengths_to_offsets(lengths), seq_len)
        chunk_lengths = np.diff(chunk_offsets)
        keep = chunk_lengths > 0
        chunk_starts, chunk_lengths, source = chunk_offsets[:-1][keep], chunk_lengths[keep], source[keep]
        if not len(chunk_lengths):
            return None
        first_chunk = np.ones(len(source), dtype=bool)
        first_chunk[1:] = source[1:] != source[:-1]
        self.counters["documents_split"] += len(np.unique(source[~first_chunk]))  # documents cut in pieces
        row, offset, rows = best_fit_decreasing(chunk_lengths, seq_len)
        destination = range_indices(row * seq_len + offset, chunk_lengths)
        input_ids = np.full(rows * seq_len, self.pad_id, dtype=tokens.dtype)
        docs = np.full(rows * seq_len, PADDING_DOC, dtype=np.int64)
        input_ids[destination] = gather_ranges(tokens, chunk_starts, chunk_lengths)
        docs[destination] = np.repeat(doc_ids[source], chunk_lengths)
        segment_ids, positions = segments_and_positions(docs.reshape(rows, seq_len))
        padding = np.sum(segment_ids == 0, axis=1)
        columns = {"input_ids": input_ids.reshape(rows, seq_len), "segment_ids": segment_ids, "positions": positions}
        if tagged:
            token_tags = np.zeros(rows * seq_len, dtype=np.int32)
            token_tags[destination] = np.repeat(tags[source], chunk_lengths)
            columns["segment_tags"] = segment_values(segment_ids, token_tags)
        documents = np.bincount(row[first_chunk], minlength=rows)
        return RowBatch(columns, tokens=seq_len - padding, padding=padding, documents=documents)


class _OneDocumentPerRow:
    def __init__(self, seq_len: int, bos_id, eos_id):
        self.seq_len, self.bos_id, self.eos_id = seq_len, bos_id, eos_id
        self.counters: Counter = Counter()

    def process(self, batch: DocumentBatch) -> RowBatch | None:
        tokens, offsets = _with_boundaries(batch, self.bos_id, self.eos_id)
        lengths = np.diff(offsets)
        if np.any(lengths == 0):  # only possible with neither BOS nor EOS
            self.counters["skipped:no_tokens"] += int(np.sum(lengths == 0))
            keep = lengths > 0
            offsets = lengths_to_offsets(lengths[keep])
        row_offsets, source = split_long_items(offsets, self.seq_len)
        row_lengths = np.diff(row_offsets)
        first_piece = np.ones(len(source), dtype=bool)
        first_piece[1:] = source[1:] != source[:-1]
        self.counters["documents_split"] += int(np.sum(np.bincount(source) > 1)) if len(source) else 0
        if len(row_lengths) == 0:
            return None
        positions = (
            np.arange(len(tokens), dtype=np.int64) - np.repeat(row_offsets[:-1], row_lengths)
        ).astype(np.int32)
        return RowBatch(
            columns={
                "input_ids": Ragged(tokens, row_offsets),
                "segment_ids": Ragged(np.ones(len(tokens), dtype=np.int32), row_offsets),
                "positions": Ragged(positions, row_offsets),
            },
            tokens=row_lengths,
            padding=np.zeros(len(row_lengths), dtype=np.int64),
            documents=first_piece.astype(np.int64),
        )

    def finish(self) -> RowBatch | None:
        return None
