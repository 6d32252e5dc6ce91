"""T5 span corruption (REFERENCE §5): ``input_ids`` and ``labels`` of exact, computed lengths.

Documents are concatenated (with nothing between them by default, as T5 does; ``--eos`` puts
EOS between them) and cut into chunks of the computed raw length T, so every row has inputs of
exactly ``--seq-len`` and labels of exactly the computed targets length: 512 / 0.15 / 3 gives
T = 568 and 114 labels. Sentinels come from the model (``<extra_id_N>``) or are appended past
the vocabulary, ``<extra_id_0>`` highest. The tail of a partition shorter than T is dropped, or
with ``--final-chunk pad`` corrupted at its own length and padded (inputs with the pad token,
labels with -100).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import IGNORE
from ..kernels.spans import corrupt_spans, random_spans, span_counts
from ..options import Options, option
from ..rows import ColumnSpec, RowBatch
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
    plans_rows = True  # spans drawn from lengths; tokens moved, sentinels put between them
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
        return [
            ColumnSpec(
                "input_ids",
                "fixed",
                0,
                top,
                f"corrupted inputs, {self.context.seq_len} tokens",
                length=self.context.seq_len,
            ),
            ColumnSpec(
                "labels",
                "fixed",
                IGNORE,
                top,
                f"targets, {self.targets_length} tokens; -100 = padding",
                role="labels",
                family="labels",
                length=self.targets_length,
            ),
        ]

    def partition_examples(self, partition_index: int):
        return _SpanCorruptionPartition(self, partition_index)


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
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(rows, self.o.raw_length)
        inputs, labels = self._corrupt(tokens, first_example)
        return RowBatch(
            {"input_ids": inputs, "labels": labels},
            tokens=np.full(rows, inputs.shape[1] + labels.shape[1], dtype=np.int64),
            padding=np.zeros(rows, dtype=np.int64),
            documents=documents,
        )

    def finish(self) -> RowBatch | None:
        length = len(self.stream)
        if length == 0:
            return None
        if self.o.pad_id is None or length < 2:
            self.stream.drop_rest()
            return None
        first_example = self.stream.examples_taken
        tokens, documents = self.stream.take_rows(1, length)
        inputs, labels = self._corrupt(tokens, first_example)
        input_pad = self.o.context.seq_len - inputs.shape[1]
        label_pad = self.o.targets_length - labels.shape[1]
        inputs = np.pad(inputs, ((0, 0), (0, input_pad)), constant_values=self.o.pad_id)
        labels = np.pad(labels, ((0, 0), (0, label_pad)), constant_values=IGNORE)
        self.counters["final_chunks_padded"] += 1
        return RowBatch(
            {"input_ids": inputs, "labels": labels},
            tokens=np.array([inputs.shape[1] + labels.shape[1] - input_pad - label_pad]),
            padding=np.array([input_pad + label_pad]),
            documents=documents,
        )
