"""Causal language modelling (REFERENCE §2): documents with BOS/EOS as configured, packed by the
run's packer: ``concat`` (default: joined and cut into rows of ``seq_len``), ``best-fit`` (only
over-long documents split) or ``none`` (one document per row, e.g. for Megatron-LM, which packs
itself).

Labels are not stored: for causal LM they are ``input_ids`` and the model shifts them.
"""

from __future__ import annotations

import numpy as np

from ..kernels.example_runs import ExampleRuns
from ..options import NoOptions
from ..rows import ColumnSpec
from .base import DocumentBatch, Objective, PartitionExamples, document_examples, register


@register("clm", "causal")
class CausalLM(Objective):
    options_type = NoOptions  # packing is the run's (--packing), not the objective's
    provenance = "tokens"  # examples are the documents (document_examples)
    examples_are_documents = True
    supervision = "next-token"
    next_token_rows = True
    plans_rows = True  # documents joined, cut and packed: tokens moved, never read
    plans_lengths = True

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.resolve_document_tokens(tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("concat", "best-fit", "none")

    def example_columns(self) -> list[ColumnSpec]:
        return [ColumnSpec("input_ids", "ragged", 0, self.vocab_size - 1, "token ids")]

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _Documents(self.bos_id, self.eos_id)


class _Documents(PartitionExamples):
    def __init__(self, bos_id, eos_id):
        super().__init__()
        self.bos_id, self.eos_id = bos_id, eos_id

    def examples(self, batch: DocumentBatch):
        return document_examples(batch, self.bos_id, self.eos_id)

    def example_runs(self, batch: DocumentBatch) -> ExampleRuns:
        return ExampleRuns.of_documents(batch.texts.firsts, np.diff(batch.offsets), self.bos_id, self.eos_id)
