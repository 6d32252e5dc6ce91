"""Prefix LM (REFERENCE §6): split each chunk of ``--seq-len`` tokens at k uniform in [1, L - 1].

``--layout decoder`` (default): one row ``prefix + target`` of exactly ``--seq-len`` tokens,
``labels`` = -100 on the prefix and the tokens after it (the model shifts them), and
``prefix_lengths`` = k. Build the attention mask as: bidirectional among positions ``< k``,
causal from position k on. (SeqIO extends the bidirectional region one position past the
prefix; objcli does not: position k, the first target token, sees only what precedes it.)

``--layout encdec``: ``input_ids`` = prefix + EOS, ``labels`` = rest + EOS (rows of varying
length, each at most ``--seq-len`` + 1).

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
from ..rng import derive_rng
from ..rows import ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, register
from .span_corruption import FINAL_CHUNKS
from .stream import TokenStream
from .trim_pack import packed_columns, trim_and_pack

LAYOUTS = ("decoder", "encdec")


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
        if self.pack and self.layout != "encdec":
            raise ObjcliError("--pack packs examples of varying length: use it with --layout encdec")
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
        return _PrefixLmPartition(self, partition_index)


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
