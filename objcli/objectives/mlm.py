"""BERT masked LM, whole-word masking (REFERENCE §3), done once, offline.

Documents (joined with EOS) are packed by the run's packer, ``concat`` (default: cut into rows)
or ``best-fit`` (rows of whole documents, only those longer than a row split, the rest of a row
padding), with ``segment_ids`` and ``positions``; then each packed row is masked (the row step):
``input_ids`` holds the masked row, ``labels`` the original id where a token was selected and -100
elsewhere. Special tokens (control pieces of the model and every allocated special) are never
selected; random replacements are drawn from ordinary tokens only. ``--dupe-factor K`` writes K
differently-masked copies of each row, copy after copy within each batch of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import IGNORE
from ..rows import ColumnSpec, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register
from .masker import Masker, MaskingOptions, with_copies


@dataclass(frozen=True)
class MlmOptions(MaskingOptions):
    """The masking options; packing is the run's (``--packing``)."""


def labels_column(top: int) -> ColumnSpec:
    return ColumnSpec("labels", "fixed", IGNORE, top, "original id where selected, -100 elsewhere", role="labels")


@register("mlm")
class MaskedLM(Objective):
    options_type = MlmOptions
    provenance = "tokens"  # examples are the documents (document_examples)
    examples_are_documents = True
    row_step = True  # masking, after the packer
    plans_rows = True
    plans_lengths = True

    def plan_refusal(self) -> str | None:
        if self.options.dupe_factor > 1:  # a plan holds each packed row once; its copies are rows of their own
            return f"--dupe-factor {self.options.dupe_factor} writes each row's copies as rows of their own"
        return None

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.resolve_document_tokens(tokenizer)
        self.masker = Masker(tokenizer, self.options, context.seed, "mlm")
        self.masker.finalize(tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("concat", "best-fit")  # masking works on rows of one length

    def example_columns(self) -> list[ColumnSpec]:
        return [ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "masked token ids")]

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        return [packed[0], labels_column(self.vocab_size - 1), *packed[1:]]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _MlmPartition(self, partition_index)


class _MlmPartition(PartitionExamples):
    def __init__(self, objective: MaskedLM, partition: int):
        super().__init__(objective, partition)

    def examples(self, batch: DocumentBatch) -> RowBatch:
        return document_examples(batch, self.o.bos_id, self.o.eos_id)

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        if rows is None:
            return None
        key = self.rows_done
        self.rows_done += rows.num_rows
        input_ids = rows.columns["input_ids"]
        valid = rows.columns["segment_ids"] > 0

        def masked(copy):
            ids, labels = self.o.masker.mask(input_ids, valid, rows.tokens, self.partition, key, copy)
            self.counters["tokens_selected"] += int(np.sum(labels != IGNORE))
            return {"input_ids": ids, "labels": labels}

        return with_copies(rows, self.o.masker, self.partition, key, masked)
