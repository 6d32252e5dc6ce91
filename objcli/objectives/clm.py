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
from ..kernels.packing import PADDING_DOC, pack_concat
from ..kernels.ragged import add_boundary_tokens, item_index, lengths_to_offsets, split_long_items
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, register

PACKINGS = ("concat", "none")
REMAINDERS = ("drop", "pad")


@dataclass(frozen=True)
class ClmOptions:
    packing: str = "concat"
    remainder: str = "drop"

    def __post_init__(self):
        if self.packing not in PACKINGS:
            raise ObjcliError(f"--packing {self.packing}: choose one of {', '.join(PACKINGS)}")
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
        needs_pad = self.options.packing == "concat" and self.options.remainder == "pad"
        self.pad_id = tokenizer.resolve("pad") if needs_pad else None
        self.vocab_size = tokenizer.total_vocab_size

    def columns(self) -> list[ColumnSpec]:
        kind = "fixed" if self.options.packing == "concat" else "ragged"
        seq_len = self.config.seq_len
        return [
            ColumnSpec("input_ids", kind, 0, self.vocab_size - 1, "token ids"),
            ColumnSpec("segment_ids", kind, 0, seq_len, "1-based document segment per row, 0 = padding"),
            ColumnSpec("positions", kind, 0, seq_len - 1, "position within the segment"),
        ]

    def partition_transform(self, partition_index: int):
        if self.options.packing == "concat":
            return _ConcatPacker(self.config.seq_len, self.bos_id, self.eos_id, self.pad_id)
        return _OneDocumentPerRow(self.config.seq_len, self.bos_id, self.eos_id)


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
