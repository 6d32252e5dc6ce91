"""T5 span corruption (REFERENCE §5): ``input_ids`` and ``labels`` of exact, planned lengths.

Documents are concatenated (with nothing between them by default, as T5 does; ``--eos`` puts
EOS between them) and cut into chunks of the planned raw length T, so every row has inputs of
exactly ``--seq-len`` and labels of exactly the planned targets length: 512 / 0.15 / 3 gives
T = 568 and 114 labels. Sentinels come from the model (``<extra_id_N>``) or are appended past
the vocabulary, ``<extra_id_0>`` highest. The tail of a partition shorter than T is dropped, or
with ``--final-chunk pad`` corrupted at its own length and padded (inputs with the pad token,
labels with -100).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.prefix import IGNORE
from ..kernels.spans import corrupt_spans, plan_example, random_spans, span_counts
from ..rng import derive_rng
from ..rows import ColumnSpec, RowBatch
from .base import DocumentBatch, register
from .stream import TokenStream

FINAL_CHUNKS = ("drop", "pad")


def check_density(noise_density: float, mean_span: float) -> None:
    if not 0 < noise_density < 1:
        raise ObjcliError(f"--noise-density {noise_density}: must be between 0 and 1 (exclusive)")
    if mean_span < 1:
        raise ObjcliError(f"--mean-span {mean_span}: must be at least 1")


def plan_or_fail(inputs_length: int, noise_density: float, mean_span: float, what: str = "--seq-len") -> tuple[int, int]:
    plan = plan_example(inputs_length, noise_density, mean_span)
    if plan is None or plan[0] < 2 or inputs_length < 3:
        raise ObjcliError(
            f"{what} {inputs_length}: no chunk length gives inputs of exactly that length at noise density "
            f"{noise_density} and mean span {mean_span}; choose a larger {what} (at least 3)"
        )
    return plan


@dataclass(frozen=True)
class SpanCorruptionOptions:
    noise_density: float = 0.15
    mean_span: float = 3.0
    final_chunk: str = "drop"
    extra_ids: int | None = None  # None: 100, or as many as a row needs if that is more

    def __post_init__(self):
        check_density(self.noise_density, self.mean_span)
        if self.final_chunk not in FINAL_CHUNKS:
            raise ObjcliError(f"--final-chunk {self.final_chunk}: choose one of {', '.join(FINAL_CHUNKS)}")
        if self.extra_ids is not None and self.extra_ids < 1:
            raise ObjcliError(f"--extra-ids {self.extra_ids}: must be at least 1")


@register("span-corruption", "t5")
class SpanCorruption:
    options_type = SpanCorruptionOptions
    default_eos = False  # T5 concatenates documents without a separator

    def __init__(self, config, tokenizer):
        self.config = config
        self.options: SpanCorruptionOptions = config.objective_options
        o = self.options
        self.raw_length, self.targets_length = plan_or_fail(config.seq_len, o.noise_density, o.mean_span)
        self.eos_id = tokenizer.resolve("eos")
        self.join_bos = tokenizer.resolve("bos") if config.bos else None
        self.join_eos = self.eos_id if config.eos else None
        self.pad_id = tokenizer.resolve("pad") if o.final_chunk == "pad" else None
        _, num_spans = span_counts(self.raw_length, o.noise_density, o.mean_span)
        self.sentinels = np.array(tokenizer.resolve_sentinels(num_spans, o.extra_ids), dtype=np.int32)
        self.vocab_size = tokenizer.total_vocab_size

    def columns(self) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        return [
            ColumnSpec("input_ids", "fixed", 0, top, f"corrupted inputs, {self.config.seq_len} tokens"),
            ColumnSpec("labels", "fixed", IGNORE, top, f"targets, {self.targets_length} tokens; -100 = padding"),
        ]

    def partition_transform(self, partition_index: int):
        return _SpanCorruptionPartition(self, partition_index)


class _SpanCorruptionPartition:
    def __init__(self, objective: SpanCorruption, partition: int):
        self.o = objective
        self.partition = partition
        self.counters: Counter = Counter()
        self.stream = TokenStream(objective.join_bos, objective.join_eos, self.counters)

    def _corrupt(self, tokens: np.ndarray, first_example: int):
        o = self.o
        seed = o.config.seed
        rows, length = tokens.shape
        nonnoise, noise = random_spans(
            rows,
            length,
            o.options.noise_density,
            o.options.mean_span,
            derive_rng(seed, self.partition, first_example, "span-corruption/noise"),
            derive_rng(seed, self.partition, first_example, "span-corruption/nonnoise"),
        )
        return corrupt_spans(tokens, nonnoise, noise, o.sentinels, o.eos_id)

    def process(self, batch: DocumentBatch) -> RowBatch | None:
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
        input_pad = self.o.config.seq_len - inputs.shape[1]
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
