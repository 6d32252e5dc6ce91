"""T5 span corruption (REFERENCE §5): ``input_ids`` and ``labels`` of exact, computed lengths.

Documents are concatenated (with nothing between them by default, as T5 does; ``--eos`` puts
EOS between them) and cut into chunks of the computed raw length T, so every row has inputs of
exactly ``--seq-len`` and labels of exactly the computed targets length: 512 / 0.15 / 3 gives
T = 568 and 114 labels. Sentinels come from the model (``<extra_id_N>``) or are appended past
the vocabulary, ``<extra_id_0>`` highest. The tail of a partition shorter than T is dropped, or
with ``--final-chunk pad`` corrupted at its own length and padded (inputs with the pad token,
labels with -100).

The corruption is the row step: the objective cuts the raw chunks (``input_ids`` of T tokens, the last
maybe shorter), and ``rows`` draws each batch's spans keyed to the rows before it, so a plan keeps the
chunks alone (a run or two a row) and its reader draws the same spans (``formats/row_plan.py``). A row's
counts are known from its raw length before any draw (``chunk_counts``), so a plan run cuts the chunks from
the documents' lengths alone, as concat's windows (``packing/concat.ConcatPlanner``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import IGNORE
from ..kernels.example_runs import ExampleRuns
from ..kernels.spans import corrupt_spans, example_lengths, random_spans, span_counts
from ..options import Options, option
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import extra_ids_option, final_chunk_option, raw_lengths_or_fail
from .stream import TokenStream


@dataclass(frozen=True)
class SpanCorruptionOptions(Options):
    noise_density: float = option(0.15, "Fraction of tokens corrupted.", minimum=0, maximum=1, exclusive=True)
    mean_span: float = option(3.0, "Mean noise span length.", minimum=1)
    final_chunk: str = final_chunk_option()
    extra_ids: int | None = extra_ids_option()


@register("span-corruption", "t5")
class SpanCorruption(Objective):
    options_type = SpanCorruptionOptions
    default_eos = False  # T5 concatenates documents without a separator
    row_step = True  # the spans, drawn over each packed batch of raw chunks
    plans_rows = True  # chunks cut from lengths; the spans drawn on read
    plans_lengths = "chunks"  # a plan cuts the raw chunks from the documents' lengths (chunk_counts, keeps_tail)
    provenance = "stream"  # examples cut from the token stream (stream.py)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        o = self.options
        self.raw_length, self.targets_length = raw_lengths_or_fail(context.seq_len, o.noise_density, o.mean_span)
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if context.bos else None
        self.join_eos = self.eos_id if context.eos else None
        self.pad_id = tokenizer.resolve("pad") if o.final_chunk == "pad" else None
        _, num_spans = span_counts(self.raw_length, o.noise_density, o.mean_span)
        self.sentinels = np.array(tokenizer.resolve_sentinels(num_spans, o.extra_ids), dtype=np.int32)
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def keeps_remainder(cls, packing: str, options) -> str | None:
        return "--final-chunk pad"  # the objective chunks the stream itself, whatever the packer

    def example_columns(self) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        return [ColumnSpec("input_ids", "ragged", 0, top, f"raw chunks of {self.raw_length} tokens, to corrupt")]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        seq_len = self.context.seq_len
        inputs = ColumnSpec("input_ids", "fixed", 0, top, f"corrupted inputs, {seq_len} tokens", length=seq_len)
        labels = ColumnSpec(
            "labels",
            "fixed",
            IGNORE,
            top,
            f"targets, {self.targets_length} tokens; -100 = padding",
            role="labels",
            family="labels",
            length=self.targets_length,
        )
        return [inputs, labels, *(c for c in packed if c.name != "input_ids")]

    def partition_examples(self, partition_index: int):
        return _SpanCorruptionPartition(self, partition_index)

    def chunk_counts(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each raw chunk's row's (tokens, padding), from its length alone (``example_lengths``)."""
        o = self.options
        values, inverse = np.unique(lengths, return_inverse=True)  # one length, but a last chunk's
        table = np.array([example_lengths(int(n), o.noise_density, o.mean_span) for n in values], np.int64)
        inputs, labels = table.reshape(-1, 2)[inverse].T
        return inputs + labels, self.context.seq_len - inputs + self.targets_length - labels

    def keeps_tail(self, length: int) -> bool:
        """Whether a partition's last chunk, ``length`` tokens (fewer than a row's), is a row (--final-chunk pad)."""
        return self.pad_id is not None and length >= 2


class _SpanCorruptionPartition(PartitionExamples):
    def __init__(self, objective: SpanCorruption, partition: int):
        super().__init__(objective, partition)
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)

    def _corrupt(self, tokens: np.ndarray, first_example: int):
        o = self.o
        rows, length = tokens.shape
        nonnoise, noise = random_spans(
            rows,
            length,
            o.options.noise_density,
            o.options.mean_span,
            self.rng(first_example, "noise"),
            self.rng(first_example, "nonnoise"),
        )
        return corrupt_spans(tokens, nonnoise, noise, o.sentinels, o.eos_id)

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        self.stream.extend(batch)
        rows = len(self.stream) // self.o.raw_length
        if rows == 0:
            return None
        tokens, documents = self.stream.take_rows(rows, self.o.raw_length)
        return self._chunks(tokens, documents)

    def finish(self) -> RowBatch | None:
        length = len(self.stream)
        if length == 0:
            return None
        if not self.o.keeps_tail(length):
            self.stream.drop_rest()
            return None
        tokens, documents = self.stream.take_rows(1, length)
        self.counters["final_chunks_padded"] += 1
        return self._chunks(tokens, documents)

    def _chunks(self, tokens: np.ndarray, documents: np.ndarray) -> RowBatch:
        """Raw chunks of equal length as rows to corrupt, with the counts their corrupted rows will have."""
        rows, length = tokens.shape
        counts = self.o.chunk_counts(np.full(rows, length, np.int64))
        chunks = Ragged(tokens.ravel(), np.arange(rows + 1, dtype=np.int64) * length)
        return RowBatch({"input_ids": chunks}, *counts, documents=documents)

    def example_runs(self, batch: DocumentBatch) -> ExampleRuns | None:
        """The documents as runs, joined as the stream joins them (nothing between them by default)."""
        return ExampleRuns.of_documents(batch.texts.firsts, np.diff(batch.offsets), self.o.join_bos, self.o.join_eos)

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        """The row step: each row's spans drawn (keyed to the rows before the batch), a short final chunk's
        row padded (inputs with the pad token, labels with -100)."""
        if rows is None:
            return None
        key = self.rows_done
        self.rows_done += rows.num_rows
        chunks = rows.columns["input_ids"]
        lengths = np.diff(chunks.offsets)
        if len(set(lengths.tolist())) > 1:
            raise ValueError("its rows of raw chunks are not of one length (edited?)")
        inputs, labels = self._corrupt(chunks.values.reshape(rows.num_rows, -1), key)
        seq_len, targets = self.o.context.seq_len, self.o.targets_length
        if inputs.shape[1] < seq_len or labels.shape[1] < targets:  # the final chunk, padded
            inputs = np.pad(inputs, ((0, 0), (0, seq_len - inputs.shape[1])), constant_values=self.o.pad_id)
            labels = np.pad(labels, ((0, 0), (0, targets - labels.shape[1])), constant_values=IGNORE)
        columns = {**rows.columns, "input_ids": inputs, "labels": labels}
        return RowBatch(columns, rows.tokens, rows.padding, rows.documents)
