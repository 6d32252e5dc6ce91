"""Prefix LM (REFERENCE §6): split each chunk of ``--seq-len`` tokens at k uniform in [1, L - 1].

``--layout decoder`` (default): one row ``prefix + target`` of exactly ``--seq-len`` tokens,
``labels`` = -100 on the prefix and the tokens after it (the model shifts them), and
``prefix_lengths`` = k. Build the attention mask as: bidirectional among positions ``< k``,
causal from position k on. (SeqIO extends the bidirectional region one position past the
prefix; objcli does not: position k, the first target token, sees only what precedes it.)

``--layout encdec``: ``input_ids`` = prefix + EOS, ``labels`` = rest + EOS (rows of varying
length, each at most ``--seq-len`` + 1). With ``--packing trim-and-pack`` these examples are packed as
SeqIO's trim-and-pack does (``objcli/packing/trim_and_pack.py``).

``--layout decoder --packing best-fit``: one example per document instead of per chunk of the stream, so no
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

from dataclasses import dataclass

import numpy as np

from ..kernels import IGNORE
from ..kernels.prefix import decoder_labels, draw_split_points, split_encoder_decoder
from ..kernels.ragged import lengths_to_offsets
from ..options import Options
from ..rows import POSITION_IDS, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register
from .common import final_chunk_option, layout_option
from .stream import TokenStream


@dataclass(frozen=True)
class PrefixLmOptions(Options):
    layout: str = layout_option("decoder")
    final_chunk: str = final_chunk_option()


@register("prefix-lm")
class PrefixLM(Objective):
    options_type = PrefixLmOptions
    took_pack = True
    row_step = True  # --layout decoder --packing best-fit: each packed segment split after the packer
    plans_rows = True  # splits drawn from lengths, tokens moved

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if context.bos else None
        self.join_eos = self.eos_id if context.eos else None
        decoder = self.options.layout == "decoder"
        needs_pad = (self.options.final_chunk == "pad" and decoder) or context.pads_rows
        self.pad_id = tokenizer.resolve("pad") if needs_pad else None
        self.vocab_size = tokenizer.total_vocab_size
        # --layout decoder --packing best-fit: one example per document, split after packing.
        self.examples_are_documents = decoder and context.packed

    provenance = "stream"  # the token stream's chunks; documents packed best-fit: see provenance_kind

    def provenance_kind(self) -> str | None:
        return "tokens" if self.examples_are_documents else "stream"

    @classmethod
    def keeps_remainder(cls, packing: str, options) -> str | None:
        return "--final-chunk pad"  # the objective chunks the stream itself, whatever the packer

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("none", "best-fit") if options.layout == "decoder" else ("none", "trim-and-pack")

    def example_columns(self) -> list[ColumnSpec]:
        top, seq_len = self.vocab_size - 1, self.context.seq_len
        if self.examples_are_documents:
            return [ColumnSpec("input_ids", "ragged", 0, top, "documents packed best-fit, padded")]
        if self.options.layout == "encdec":
            return [
                ColumnSpec("input_ids", "ragged", 0, top, "prefix + EOS"),
                ColumnSpec("labels", "ragged", 0, top, "rest + EOS", role="labels", family="labels"),
            ]
        return [
            ColumnSpec("input_ids", "fixed", 0, top, "prefix + target", length=seq_len),
            ColumnSpec("labels", "fixed", IGNORE, top, "-100 on the prefix and padding, else the token", role="labels"),
            ColumnSpec(
                "prefix_lengths",
                "scalar",
                1,
                seq_len - 1,
                "bidirectional attention over positions < k",
                role="prefix_length",
            ),
        ]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        if not self.examples_are_documents:
            return packed
        top, seq_len = self.vocab_size - 1, self.context.seq_len
        labels = ColumnSpec(
            "labels",
            "fixed",
            IGNORE,
            top,
            "-100 on each segment's prefix and on padding, else the token",
            role="labels",
        )
        prefixes = ColumnSpec(
            "prefix_lengths",
            "ragged",
            1,
            seq_len,
            "per segment: bidirectional attention over its positions < k",
            role="prefix_length",
        )
        return [packed[0], labels, *packed[1:], prefixes]

    def partition_examples(self, partition_index: int):
        if self.examples_are_documents:
            return _PackedDocuments(self, partition_index)
        return _PrefixLmPartition(self, partition_index)


class _PackedDocuments(PartitionExamples):
    """``--layout decoder --packing best-fit``: documents packed best-fit, then each segment split."""

    def __init__(self, objective: PrefixLM, partition: int):
        super().__init__(objective, partition)

    def examples(self, batch: DocumentBatch) -> RowBatch:
        return document_examples(batch, self.o.join_bos, self.o.join_eos)

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        if rows is None:
            return None
        ids, segments, positions = (rows.columns[c] for c in ("input_ids", "segment_ids", POSITION_IDS))
        valid = segments.ravel() > 0
        starts = valid & (positions.ravel() == 0)
        segment = np.cumsum(starts) - 1  # index of each token's segment, in row order
        lengths = np.bincount(segment[valid], minlength=int(starts.sum()))
        rng = self.rng(self.rows_done, "split")
        self.rows_done += rows.num_rows
        split = rng.integers(1, np.maximum(lengths, 2))  # uniform in [1, n - 1]; n = 1: all prefix
        self.counters["segments_without_target"] += int(np.sum(lengths == 1))
        target = valid & (positions.ravel() >= split[np.maximum(segment, 0)])
        labels = np.where(target, ids.ravel(), IGNORE).astype(np.int32).reshape(ids.shape)
        per_row = starts.reshape(ids.shape).sum(axis=1)
        columns = {
            **rows.columns,
            "labels": labels,
            "prefix_lengths": Ragged(split.astype(np.int32), lengths_to_offsets(per_row)),
        }
        return RowBatch(columns, rows.tokens, rows.padding, rows.documents)


class _PrefixLmPartition(PartitionExamples):
    def __init__(self, objective: PrefixLM, partition: int):
        super().__init__(objective, partition)
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)

    def _rows(self, tokens: np.ndarray, documents: np.ndarray, first_example: int, pad_to: int) -> RowBatch:
        rows, length = tokens.shape
        rng = self.rng(first_example, "split")
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

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        self.stream.extend(batch)
        seq_len = self.o.context.seq_len
        rows = len(self.stream) // seq_len
        if rows == 0:
            return None
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(rows, seq_len)
        return self._rows(tokens, documents, first_example, seq_len)

    def finish(self) -> RowBatch | None:
        length = len(self.stream)
        if length == 0:
            return None
        if self.o.options.final_chunk == "drop" or length < 2:
            self.stream.drop_rest()
            return None
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(1, length)
        self.counters["final_chunks_padded"] += 1
        pad_to = self.o.context.seq_len if self.o.options.layout == "decoder" else length
        return self._rows(tokens, documents, first_example, pad_to)
