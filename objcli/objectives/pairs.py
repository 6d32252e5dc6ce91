"""Sentence-pair objectives: NSP (BERT), SOP (ALBERT) and ELECTRA's pretraining data (REFERENCE §3-4).

Documents are split into sentences (``--sentences prose`` or ``lines``, see objcli/sentences.py),
every sentence of a batch is tokenized in one call, and pairs are built per document:

- **nsp**: as Google BERT's ``create_instances_from_document``. A target length per document
  (``--seq-len`` − 3, or with ``--short-seq-prob`` 0.1 uniform in [2, seq_len − 3]); sentences are
  gathered into a chunk until it reaches the target; A = the first k sentences (k uniform in
  [1, n − 1]); with probability 0.5, or always for a one-sentence chunk, B comes from a *different
  random document* at a random sentence (``next_sentence_label`` 1) and the unused sentences are
  put back; otherwise B is the rest of the chunk (label 0). Negatives come from the other documents
  of the same batch (a deterministic slice of the same input partition, about ``--batch-size`` of
  text), so they never depend on worker count or read order.
- **sop**: the same chunks; A and B are consecutive, swapped with probability 0.5
  (``sentence_order_label`` 1 = swapped); a one-sentence chunk is cut at a random token.
- **electra**: ELECTRA's ``ExampleBuilder`` exactly: chunks of a target length (``--seq-len``, or with
  probability 0.05 uniform in [5, seq_len]); sentence by sentence, A takes one while A is empty or
  stays under (this example's target − 3) // 2 tokens, or (while B is empty) the crossing one with
  probability 0.5, and B the others, so a short sentence may join A after B has started; with
  probability 0.1 everything goes to A (a one-segment example). A is cut to seq_len − 2 tokens, B to
  what is left. Then masked as ELECTRA's generator input (``pretrain_helpers.mask``): ``max_predictions =
  int((p + 0.005) · seq_len)``, round(n · p) positions drawn *with replacement* among the ordinary tokens
  (``--electra-draws exact``: exactly the budget, distinct), each 85 % ``[MASK]``, else unchanged.

Rows: ``[CLS] A [SEP] B [SEP]`` padded to ``--seq-len``, ``token_type_ids`` (0 for [CLS], A and the
first [SEP]; 1 for B and the last [SEP]) and ``attention_mask``. The longer side is truncated one token
at a time, at the front or back at random (BERT); ELECTRA truncates from the back. ``--mlm`` adds BERT
masking (``labels``) to nsp/sop rows; masks are drawn in a row step, so a plan's rows are masked on read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels import IGNORE
from ..kernels.compiled import compiled
from ..kernels.pairs import (
    Pairs,
    assemble_rows,
    bert_pairs,
    chunk_end,
    document_steps,
    electra_first_segment,
    from_ranges,
)
from ..kernels.ragged import gather_ranges, lengths_to_offsets
from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import check_probabilities, mask_prob_option, sentences_option
from .masker import Masker, MaskingOptions, with_copies
from .supply import Provides, Reads


@dataclass(frozen=True)
class PairOptions(MaskingOptions):
    sentences: str = sentences_option()
    short_seq_prob: float = option(0.1, "Probability of a shorter target length.", minimum=0, maximum=1)
    mlm: bool = option(False, "Also apply BERT masking (labels), as BERT pretraining does.")


ELECTRA_DRAWS = ("with-replacement", "exact")


@dataclass(frozen=True)
class ElectraOptions(Options):
    mask_prob: float = mask_prob_option()
    sentences: str = sentences_option()
    electra_draws: str = option(
        "with-replacement",
        "Generator masking positions: drawn with replacement as ELECTRA's "
        "code does (a few fewer distinct), or exactly round(n*p) distinct.",
        choices=ELECTRA_DRAWS,
    )

    def __post_init__(self):
        super().__post_init__()
        check_probabilities(self.mask_prob, 0.85, 0.0)


def electra_pairs(tokens, cumulative, document_sentences, rng, seq_len) -> tuple[Pairs, np.ndarray]:
    """ELECTRA's ``ExampleBuilder``: chunks of each example's own target length, A and B from its
    sentences (``electra_first_segment``), A cut to ``seq_len - 2`` and B to what is left. A may take
    a sentence after B has started, so the chunk's sentences are regathered, A's then B's, into a token
    array of their own, where both are ranges again."""
    starts, stops = document_sentences[:-1], document_sentences[1:]
    steps = []
    for step, active, position in document_steps(starts, stops):
        p, stop = position[active], stops[active]
        count = len(active)
        target = np.where(
            rng["target"].random(count) < 0.05, rng["target"].integers(5, max(seq_len, 5) + 1, count), seq_len
        )
        end = chunk_end(cumulative, p, target, stop)
        # 10 %: one segment, as classification tasks have; else (this example's target - 3) // 2.
        first_target = np.where(rng["split"].random(count) < 0.1, 100_000, (target - 3) // 2)
        sentences = end - p
        width = int(sentences.max())
        index = np.minimum(p[:, None] + np.arange(width), len(cumulative) - 2)
        lengths = np.where(np.arange(width) < sentences[:, None], cumulative[index + 1] - cumulative[index], 0)
        in_first = _first_segment(lengths, sentences, first_target, rng["split"].random((count, width)))
        steps.append((step, active, index, lengths, in_first, sentences))
        position[active] = end
    return _regather(tokens, cumulative, steps, seq_len)


def _first_segment(lengths, counts, first_target, coins) -> np.ndarray:
    """``electra_first_segment``, compiled where numba is (``kernels/electra_walk.py``)."""
    walk = compiled("electra_walk")
    return (walk.first_segment if walk else electra_first_segment)(lengths, counts, first_target, coins)


def warm_electra_walk() -> None:
    """Compile ELECTRA's walk, or load it from numba's cache, once (a fork server does it for its workers)."""
    _first_segment(np.ones((1, 2), np.int64), np.full(1, 2, np.int64), np.full(1, 5, np.int64), np.zeros((1, 2)))


def _regather(tokens, cumulative, steps, seq_len) -> tuple[Pairs, np.ndarray]:
    """Each chunk's A sentences then its B sentences, back to back in a new token array."""
    ranges, pieces, base = [], [], 0
    for step, active, index, lengths, in_first, sentences in steps:
        real = np.arange(lengths.shape[1]) < sentences[:, None]
        chunk, column = np.nonzero(real)
        order = np.lexsort((column, ~in_first[chunk, column], chunk))  # per chunk: A's in order, then B's
        chunk, column = chunk[order], column[order]
        sizes = lengths[chunk, column]
        pieces.append(gather_ranges(tokens, cumulative[index[chunk, column]], sizes))
        a_length = np.where(in_first, lengths, 0).sum(axis=1)
        chunk_start = base + np.concatenate([[0], np.cumsum(lengths.sum(axis=1))[:-1]])
        base += int(lengths.sum())
        a_kept = np.minimum(a_length, seq_len - 2)
        b_kept = np.minimum(lengths.sum(axis=1) - a_length, np.maximum(0, seq_len - a_kept - 3))
        ranges.append(
            {
                "document": active,
                "a_start": chunk_start,
                "a_end": chunk_start + a_kept,
                "b_start": chunk_start + a_length,
                "b_end": chunk_start + a_length + b_kept,
                "label": np.zeros(len(active), dtype=np.int64),
                "step": np.full(len(active), step),
            }
        )
    regathered = np.concatenate(pieces) if pieces else tokens[:0]
    return from_ranges(ranges), regathered


MASK_KEY = "__mask_key"  # per row, hidden: its batch's first document, what the batch's masks are keyed to


class _PairObjective(Objective):
    """What nsp, sop and electra share: special tokens, columns, the partition transform."""

    default_eos = False  # sentences are joined by [SEP], not EOS
    # Masking (--mlm, electra) is a row step: a plan's rows are masked on read, over their ids, keyed as the
    # run keys them (the batch's first document rides with the rows), so the tokens chosen are the same.
    row_step = True
    row_step_reads = (MASK_KEY,)
    plans_rows = True
    label_column: str | None = None
    # --provenance: an example's spans are the whole documents its sentences come from (A's; B's
    # where it is another, NSP's random B), as the pairs' sentences are stripped, truncated, swapped.
    provenance = "documents"
    b_from_other_documents = False  # whether B may come from another document (NSP)

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.SENTENCES, options.sentences)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        if context.seq_len < 5:
            raise ObjcliError(f"--seq-len {context.seq_len}: [CLS] A [SEP] B [SEP] needs at least 5 tokens")
        self.cls_id = tokenizer.resolve("cls", "[CLS]")
        self.sep_id = tokenizer.resolve("sep", "[SEP]")
        self.pad_id = tokenizer.resolve("pad")
        self.masker = self._masker(tokenizer)
        if self.masker:
            self.masker.finalize(tokenizer)
        self.vocab_size = tokenizer.total_vocab_size

    def _masker(self, tokenizer) -> Masker | None:
        return None

    def plan_refusal(self) -> str | None:
        """Pairs are cut from sentences' lengths and keyed draws, and masked on read: a plan stands for them,
        but for a masker's copies (each a row of its own)."""
        if self.masker is not None and self.masker.options.dupe_factor > 1:
            return f"--dupe-factor {self.masker.options.dupe_factor} writes each row's copies as rows of their own"
        return None

    def example_columns(self) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        columns = [
            ColumnSpec("input_ids", "fixed", 0, top, "[CLS] A [SEP] B [SEP], padded", length=self.context.seq_len),
            ColumnSpec("token_type_ids", "fixed", 0, 1, "0 for [CLS] A [SEP], 1 for B [SEP]", role="token_type_ids"),
            ColumnSpec("attention_mask", "fixed", 0, 1, "1 for tokens, 0 for padding", role="attention_mask"),
        ]
        if self.label_column:
            columns.append(ColumnSpec(self.label_column, "scalar", 0, 1, self.label_doc, role="example_label"))
        if self.masker:
            columns.append(ColumnSpec(MASK_KEY, "scalar", 0, 2**62, "the batch's first document", role="data"))
        return columns

    def columns(self, packed: list[ColumnSpec]) -> list[ColumnSpec]:
        if not self.masker:
            return packed
        top = self.vocab_size - 1
        labels = ColumnSpec("labels", "fixed", IGNORE, top, "original id where selected, -100 elsewhere", role="labels")
        return [packed[0], labels, *packed[1:]]

    def partition_examples(self, partition_index: int):
        return _PairPartition(self, partition_index)


class _PairPartition(PartitionExamples):
    def __init__(self, objective: _PairObjective, partition: int):
        super().__init__(objective, partition)

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        o = self.o
        tokens, cumulative, counts = batch.sentence_tokens(o.options.sentences)
        document_sentences = np.concatenate([[0], np.cumsum(counts)])
        key = batch.first_document
        rng = {step: self.rng(key, step) for step in ("target", "split", "coin", "document", "truncate")}
        pairs, tokens = o.make_pairs(tokens, cumulative, document_sentences, rng, self.counters)
        useful = (pairs.a_end > pairs.a_start) & ((pairs.b_end > pairs.b_start) | (o.name == "electra"))
        self.counters["chunks_without_pair"] += int(np.sum(~useful))
        pairs = Pairs(
            *(getattr(pairs, f)[useful] for f in ("document", "a_start", "a_end", "b_start", "b_end", "label"))
        )
        with_pairs = np.zeros(len(counts), dtype=bool)
        with_pairs[pairs.document] = True
        self.counters["skipped:no_pair"] += int(np.sum(~with_pairs))
        if not len(pairs.document):
            return None
        seq_len = o.context.seq_len
        input_ids, token_type_ids, attention_mask = assemble_rows(tokens, pairs, seq_len, o.cls_id, o.sep_id, o.pad_id)
        first_of_document = np.ones(len(pairs.document), dtype=np.int64)
        first_of_document[1:] = pairs.document[1:] != pairs.document[:-1]
        real = attention_mask.sum(axis=1).astype(np.int64)
        columns = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
        columns[DOCUMENT] = _example_documents(pairs, cumulative, document_sentences, o.b_from_other_documents)
        if o.label_column:
            columns[o.label_column] = pairs.label.astype(np.int32)
            self.counters[f"{o.label_column}=1"] += int(pairs.label.sum())
        if o.masker:
            columns[MASK_KEY] = np.full(len(real), key, np.int64)
        return RowBatch(columns, tokens=real, padding=seq_len - real, documents=first_of_document)

    def rows(self, rows: RowBatch | None) -> RowBatch | None:
        """--mlm's and electra's masks over the rows' ids (``dupe_factor`` copies), keyed to the batch's first
        document, as when they were drawn as the examples were made."""
        o = self.o
        if rows is None or not o.masker or not rows.num_rows:
            return rows
        key = int(rows.columns[MASK_KEY][0])
        input_ids, valid = rows.columns["input_ids"], rows.columns["attention_mask"] > 0

        def masked(copy):
            ids, labels = o.masker.mask(input_ids, valid, rows.tokens, self.partition, key, copy)
            self.counters["tokens_selected"] += int(np.sum(labels != IGNORE))
            return {"input_ids": ids, "labels": labels}

        return with_copies(rows, o.masker, self.partition, key, masked)


def _example_documents(pairs: Pairs, cumulative, document_sentences, b_elsewhere: bool) -> Ragged:
    """Each example's documents in the batch: A's, then B's where it is another one (``b_elsewhere``:
    B's first token's sentence tells its document)."""
    a = pairs.document.astype(np.int64)
    b = a
    if b_elsewhere:
        sentence = np.searchsorted(cumulative, pairs.b_start, "right") - 1
        b = np.searchsorted(document_sentences, sentence, "right") - 1
    two = (b != a) & (pairs.b_end > pairs.b_start)
    offsets = lengths_to_offsets(1 + two.astype(np.int64))
    values = np.empty(int(offsets[-1]), np.int64)
    values[offsets[:-1]] = a
    values[offsets[:-1][two] + 1] = b[two]
    return Ragged(values, offsets)


@register("nsp")
class NextSentencePrediction(_PairObjective):
    options_type = PairOptions
    b_from_other_documents = True  # a random B (next_sentence_label 1) is another document's

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        self.supervision = "labels" if self.options.mlm else "example-labels"

    label_column = "next_sentence_label"
    label_doc = "0 = B follows A, 1 = B is from another document"

    def _masker(self, tokenizer):
        return Masker(tokenizer, self.options, self.context.seed, self.name) if self.options.mlm else None

    def make_pairs(self, tokens, cumulative, document_sentences, rng, counters) -> tuple[Pairs, np.ndarray]:
        return bert_pairs(
            cumulative, document_sentences, rng, self.context.seq_len, self.options.short_seq_prob, False, counters
        ), tokens


@register("sop")
class SentenceOrderPrediction(NextSentencePrediction):
    b_from_other_documents = False  # A and B are consecutive sentences of one document
    label_column = "sentence_order_label"
    label_doc = "0 = A then B as written, 1 = swapped"

    def make_pairs(self, tokens, cumulative, document_sentences, rng, counters) -> tuple[Pairs, np.ndarray]:
        return bert_pairs(
            cumulative, document_sentences, rng, self.context.seq_len, self.options.short_seq_prob, True, counters
        ), tokens


@register("electra")
class Electra(_PairObjective):
    options_type = ElectraOptions
    supervision = "all-tokens"  # the discriminator takes loss on every token

    @classmethod
    def compiled_kernels(cls, options) -> tuple[str, ...]:
        return (*super().compiled_kernels(options), "electra")  # the first-segment walk

    def _masker(self, tokenizer):
        p = self.options.mask_prob
        options = MaskingOptions(
            mask_prob=p,
            mask_replace=0.85,
            random_replace=0.0,
            count="exact",
            max_predictions=max(1, int((p + 0.005) * self.context.seq_len)),
        )
        draws = self.options.electra_draws == "with-replacement"
        return Masker(tokenizer, options, self.context.seed, self.name, with_replacement=draws)

    def make_pairs(self, tokens, cumulative, document_sentences, rng, counters) -> tuple[Pairs, np.ndarray]:
        return electra_pairs(tokens, cumulative, document_sentences, rng, self.context.seq_len)
