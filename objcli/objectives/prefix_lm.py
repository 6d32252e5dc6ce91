"""Prefix LM (REFERENCE §6): split each chunk of ``--seq-len`` tokens at k uniform in [1, L - 1].

``--layout decoder`` (default): one row ``prefix + target`` of exactly ``--seq-len`` tokens,
``labels`` = -100 on the prefix and the tokens after it (the model shifts them), and
``prefix_lengths`` = k. Build the attention mask as: bidirectional among positions ``< k``,
causal from position k on. (SeqIO extends the bidirectional region one position past the
prefix; objcli does not: position k, the first target token, sees only what precedes it.)

``--layout encdec``: ``input_ids`` = prefix + EOS, ``labels`` = rest + EOS (rows of varying
length, each at most ``--seq-len`` + 1). With ``--pack`` these examples are trimmed and packed as
SeqIO's trim-and-pack does (see ``trim_pack``).

``--layout decoder --pack``: one example per document instead of per chunk of the stream, so no
example spans two documents (as SeqIO's prefix LM on packed data). Documents longer than a row
are split into row-sized pieces; pieces are packed best-fit-decreasing (as ``clm --packing
best-fit``) with ``segment_ids`` and ``positions``; each segment of n tokens is split at k uniform
in [1, n - 1] (a one-token segment is all prefix, counted as ``segments_without_target``), its
``labels`` are -100 on its prefix, and ``prefix_lengths`` lists k for every segment of the row.

Documents are joined with EOS (``--no-eos`` for nothing) before chunking. The tail of a partition
shorter than ``--seq-len`` is dropped, or with ``--final-chunk pad`` split at its own length
(decoder rows are padded with the pad token and -100 labels).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.prefix import IGNORE, decoder_labels, draw_split_points, split_encoder_decoder
from ..kernels.ragged import lengths_to_offsets
from ..rng import derive_rng
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, register
from .clm import make_packer
from .span_corruption import FINAL_CHUNKS
from .stream import TokenStream
from .trim_pack import packed_columns, trim_and_pack

LAYOUTS = ("decoder", "encdec")
PACK_WINDOW = 4_000_000  # tokens gathered before packing, as clm --pack-window's default


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ObjcliError(f"--layout {layout}: choose one of {', '.join(LAYOUTS)}")


@dataclass(frozen=True)
class PrefixLmOptions:
    layout: str = "decoder"
    final_chunk: str = "drop"
    pack: bool = False

    def __post_init__(self):
        check_layout(self.layout)
        if self.final_chunk not in FINAL_CHUNKS:
            raise ObjcliError(f"--final-chunk {self.final_chunk}: choose one of {', '.join(FINAL_CHUNKS)}")


@register("prefix-lm")
class PrefixLM:
    options_type = PrefixLmOptions
    default_eos = True

    def __init__(self, config, tokenizer):
        self.config = config
        self.options: PrefixLmOptions = config.objective_options
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if config.bos else None
        self.join_eos = self.eos_id if config.eos else None
        needs_pad = (self.options.final_chunk == "pad" and self.options.layout == "decoder") or self.options.pack
        self.pad_id = tokenizer.resolve("pad") if needs_pad else None
        self.vocab_size = tokenizer.total_vocab_size

    def columns(self) -> list[ColumnSpec]:
        top, seq_len = self.vocab_size - 1, self.config.seq_len
        if self.options.pack and self.options.layout == "decoder":
            return [
                ColumnSpec("input_ids", "fixed", 0, top, "documents packed best-fit, padded"),
                ColumnSpec("labels", "fixed", IGNORE, top, "-100 on each segment's prefix and on padding, else the token"),
                ColumnSpec("segment_ids", "fixed", 0, seq_len, "1-based document segment per row, 0 = padding"),
                ColumnSpec("positions", "fixed", 0, seq_len - 1, "position within the segment"),
                ColumnSpec("prefix_lengths", "ragged", 1, seq_len, "per segment: bidirectional attention over its positions < k"),
            ]
        if self.options.pack:
            return packed_columns(top, seq_len)
        if self.options.layout == "encdec":
            return [
                ColumnSpec("input_ids", "ragged", 0, top, "prefix + EOS"),
                ColumnSpec("labels", "ragged", 0, top, "rest + EOS"),
            ]
        return [
            ColumnSpec("input_ids", "fixed", 0, top, "prefix + target"),
            ColumnSpec("labels", "fixed", IGNORE, top, "-100 on the prefix and padding, else the token"),
            ColumnSpec("prefix_lengths", "scalar", 1, seq_len - 1, "bidirectional attention over positions < k"),
        ]

    def partition_transform(self, partition_index: int):
        if self.options.pack and self.options.layout == "decoder":
            return _PackedDocuments(self, partition_index)
        return _PrefixLmPartition(self, partition_index)


class _PackedDocuments:
    """``--layout decoder --pack``: documents packed best-fit, then each segment split."""

    def __init__(self, objective: PrefixLM, partition: int):
        self.o = objective
        self.partition = partition
        self.packer = make_packer("best-fit", objective.config.seq_len, objective.join_bos, objective.join_eos,
                                  objective.pad_id, PACK_WINDOW)
        self.counters: Counter = self.packer.counters
        self.rows_done = 0

    def process(self, batch: DocumentBatch) -> RowBatch | None:
        return self._split(self.packer.process(batch))

    def finish(self) -> RowBatch | None:
        return self._split(self.packer.finish())

    def _split(self, rows: RowBatch | None) -> RowBatch | None:
        if rows is None:
            return None
        ids, segments, positions = (rows.columns[c] for c in ("input_ids", "segment_ids", "positions"))
        valid = segments.ravel() > 0
        starts = valid & (positions.ravel() == 0)
        segment = np.cumsum(starts) - 1  # index of each token's segment, in row order
        lengths = np.bincount(segment[valid], minlength=int(starts.sum()))
        rng = derive_rng(self.o.config.seed, self.partition, self.rows_done, "prefix-lm/split")
        self.rows_done += rows.num_rows
        split = rng.integers(1, np.maximum(lengths, 2))  # uniform in [1, n - 1]; n = 1: all prefix
        self.counters["segments_without_target"] += int(np.sum(lengths == 1))
        target = valid & (positions.ravel() >= split[np.maximum(segment, 0)])
        labels = np.where(target, ids.ravel(), IGNORE).astype(np.int32).reshape(ids.shape)
        per_row = starts.reshape(ids.shape).sum(axis=1)
        columns = {**rows.columns, "labels": labels, "prefix_lengths": Ragged(split.astype(np.int32), lengths_to_offsets(per_row))}
        return RowBatch(columns, rows.tokens, rows.padding, rows.documents)


class _PrefixLmPartition:
    def __init__(self, objective: PrefixLM, partition: int):
        self.o = objective
        self.partition = partition
        self.counters: Counter = Counter()
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)

    def _rows(self, tokens: np.ndarray, documents: np.ndarray, first_example: int, pad_to: int) -> RowBatch:
        rows, length = tokens.shape
        rng = derive_rng(self.o.config.seed, self.partition, first_example, "prefix-lm/split")
        split = draw_split_points(rng, rows, length)
        if self.o.options.layout == "encdec":
            in_values, in_offsets, label_values, label_offsets = split_encoder_decoder(tokens, split, self.o.eos_id)
            return RowBatch(
                {"input_ids": Ragged(in_values, in_offsets), "labels": Ragged(label_values, label_offsets)},
                tokens=np.full(rows, length + 2, dtype=np.int64),
                padding=np.zeros(rows, dtype=np.int64),
                documents=documents,
            )
        labels = decoder_labels(tokens, split)
        pad = pad_to - length
        if pad:
            tokens = np.pad(tokens, ((0, 0), (0, pad)), constant_values=self.o.pad_id)
            labels = np.pad(labels, ((0, 0), (0, pad)), constant_values=IGNORE)
        return RowBatch(
            {"input_ids": tokens, "labels": labels, "prefix_lengths": split.astype(np.int32)},
            tokens=np.full(rows, length, dtype=np.int64),
            padding=np.full(rows, pad, dtype=np.int64),
            documents=documents,
        )

    def _packed(self, rows: RowBatch | None) -> RowBatch | None:
        if not self.o.options.pack:
            return rows
        return trim_and_pack(rows, self.o.config.seq_len, self.o.pad_id, self.counters)

    def process(self, batch: DocumentBatch) -> RowBatch | None:
        return self._packed(self._process(batch))

    def finish(self) -> RowBatch | None:
        return self._packed(self._finish())

    def _process(self, batch: DocumentBatch) -> RowBatch | None:
        self.stream.extend(batch)
        seq_len = self.o.config.seq_len
        rows = len(self.stream) // seq_len
        if rows == 0:
            return None
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(rows, seq_len)
        return self._rows(tokens, documents, first_example, seq_len)

    def _finish(self) -> RowBatch | None:
        length = len(self.stream)
        if length == 0:
            return None
        if self.o.options.final_chunk == "drop" or length < 2:
            self.stream.drop_rest()
            return None
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(1, length)
        self.counters["final_chunks_padded"] += 1
        pad_to = self.o.config.seq_len if self.o.options.layout == "decoder" else length
        return self._rows(tokens, documents, first_example, pad_to)
