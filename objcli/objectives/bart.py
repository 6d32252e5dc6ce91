"""BART noising (fairseq ``DenoisingDataset`` semantics, REFERENCE §9; kernels in kernels/bart.py).

Documents are split into sentences (as for nsp) and cut into examples of whole sentences of at
most ``--seq-len`` − 2 tokens (a longer sentence is cut). Each example is noised in fairseq's order,
sentence permutation -> span masking -> insertion -> rotation, and written as ``input_ids`` = BOS +
noised + EOS and ``labels`` = BOS + original + EOS (rows of varying length).

Options carry fairseq's names. ``--preset`` fills the ones not given: ``bart-large`` (default, the
reported BART-large recipe: mask 0.3, mask-random 0.1, Poisson λ 3.5, replace-length 1, permute
1.0, rotate 0, insert 0), ``mbart`` (mask 0.35), or ``fairseq`` (fairseq's own defaults: only
rotation 0.5, with token masking settings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.bart import insert_noise, mask_spans, permute_sentences, place_spans, poisson_spans, rotate
from ..kernels.pairs import document_steps
from ..kernels.ragged import add_boundary_tokens, gather_ranges, lengths_to_offsets, split_long_items
from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import sentences_option
from .supply import Provides, Reads

BART_LARGE = dict(
    mask_ratio=0.3,
    mask_random=0.1,
    poisson_lambda=3.5,
    replace_length=1,
    mask_length="span-poisson",
    permute_sentences=1.0,
    rotate=0.0,
    insert=0.0,
)
PRESETS: dict[str, dict] = {
    "bart-large": BART_LARGE,
    "mbart": {**BART_LARGE, "mask_ratio": 0.35},  # mBART: bart-large's, masking 35 %
    "fairseq": dict(
        mask_ratio=0.0,
        mask_random=0.0,
        poisson_lambda=3.0,
        replace_length=-1,
        mask_length="subword",
        permute_sentences=0.0,
        rotate=0.5,
        insert=0.0,
    ),
}
MASK_LENGTHS = ("span-poisson", "word", "subword")


@dataclass(frozen=True)
class BartOptions(Options):
    bart_preset: str = option(
        "bart-large",
        "Fills the bart options not given with that setup's own defaults.",
        choices=tuple(PRESETS),
        aliases=("--preset",),
    )
    mask_ratio: float | None = option(
        None, "Fraction of words masked (fairseq --mask).", minimum=0, maximum=1, aliases=("--mask",)
    )
    mask_random: float | None = option(None, "Masked spans that become random tokens.", minimum=0, maximum=1)
    insert: float | None = option(None, "Fraction of tokens inserted as noise.", minimum=0)
    permute_sentences: float | None = option(None, "Fraction of sentences permuted.", minimum=0, maximum=1)
    rotate: float | None = option(None, "Probability of rotating an example.", minimum=0, maximum=1)
    poisson_lambda: float | None = option(
        None, "Mean span length in words (span-poisson).", minimum=0, maximum=float("inf"), exclusive=True
    )
    replace_length: int | None = option(
        None, "1: a span becomes one <mask>; 0: deleted; -1: every token masked.", choices=(-1, 0, 1)
    )
    mask_length: str | None = option(None, "Span unit.", choices=MASK_LENGTHS)
    sentences: str = sentences_option()

    def __post_init__(self):
        if self.bart_preset in PRESETS:
            for name, value in PRESETS[self.bart_preset].items():
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        super().__post_init__()


@register("bart")
class Bart(Objective):
    options_type = BartOptions
    provenance = "documents"  # an example is sentences of one document: its span, that document
    took_pack = True
    default_eos = False
    plans_rows = True  # spans, permutations and rotations drawn over lengths; tokens moved
    plan_reads_ids = True  # word spans start at a word's first piece: its value (DocumentBatch.ids_of)

    @classmethod
    def reads(cls, options) -> Reads:
        return Reads(Provides.SENTENCES, options.sentences)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        if context.seq_len < 4:
            raise ObjcliError(f"--seq-len {context.seq_len}: must be at least 4 for BOS text EOS")
        self.bos_id = tokenizer.resolve("bos")
        self.eos_id = tokenizer.resolve("eos")
        self.mask_id = tokenizer.resolve("mask", "<mask>")
        self.pad_id = tokenizer.resolve("pad") if context.pads_rows else None
        self.word_start = np.zeros(tokenizer.total_vocab_size, dtype=bool)
        self.word_start[: tokenizer.vocab_size] = tokenizer.word_start_mask()
        self.random_pool = tokenizer.ordinary_ids()
        self.vocab_size = tokenizer.total_vocab_size

    @classmethod
    def packers(cls, options) -> tuple[str, ...]:
        return ("none", "trim-and-pack")

    def example_columns(self) -> list[ColumnSpec]:
        top = self.vocab_size - 1
        return [
            ColumnSpec("input_ids", "ragged", 0, top, "BOS + noised text + EOS"),
            ColumnSpec("labels", "ragged", 0, top, "BOS + original text + EOS", role="labels", family="labels"),
        ]

    def partition_examples(self, partition_index: int):
        return _BartPartition(self, partition_index)


class _BartPartition(PartitionExamples):
    def __init__(self, objective: Bart, partition: int):
        super().__init__(objective, partition)

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        o, opts = self.o, self.o.options
        tokens, sentence_offsets, counts = batch.sentence_tokens(opts.sentences)
        # Sentences longer than an example are cut; pieces keep their document.
        budget = o.context.seq_len - 2
        sentence_offsets, source = split_long_items(sentence_offsets, budget)
        document_of_sentence = np.repeat(np.arange(len(counts)), counts)[source]
        pieces_per_document = np.bincount(document_of_sentence, minlength=len(counts))
        document_sentences = lengths_to_offsets(pieces_per_document)
        example_sentences = self._examples(sentence_offsets, document_sentences, budget)
        if len(example_sentences) < 2:
            self.counters["skipped:no_text"] += len(counts)
            return None
        self.counters["skipped:no_text"] += int(np.sum(pieces_per_document == 0))
        key = batch.first_document
        rng = {step: self.rng(key, step) for step in ("permute", "spans", "place", "random", "insert", "rotate")}
        example_offsets = sentence_offsets[example_sentences]
        original = tokens[example_offsets[0] : example_offsets[-1]]
        self.ids_of = batch.ids_of  # a plan run's positions made ids where a word's first piece is asked for
        noised, offsets = self._noised(original, sentence_offsets, example_sentences, rng)
        inputs, input_offsets = add_boundary_tokens(noised, offsets, o.bos_id, o.eos_id)
        labels, label_offsets = add_boundary_tokens(original, example_offsets - example_offsets[0], o.bos_id, o.eos_id)
        examples = len(example_sentences) - 1
        first_example = np.ones(examples, dtype=np.int64)
        example_document = document_of_sentence[example_sentences[:-1]]
        first_example[1:] = example_document[1:] != example_document[:-1]
        input_lengths, label_lengths = np.diff(input_offsets), np.diff(label_offsets)
        return RowBatch(
            {
                "input_ids": Ragged(inputs, input_offsets),
                "labels": Ragged(labels, label_offsets),
                DOCUMENT: example_document.astype(np.int64),  # each example's document (--provenance)
            },
            tokens=input_lengths + label_lengths,
            padding=np.zeros(examples, dtype=np.int64),
            documents=first_example,
        )

    def _noised(self, original, sentence_offsets, example_sentences, rng) -> tuple[np.ndarray, np.ndarray]:
        """The examples' tokens under BART's noise, in its order: sentence permutation, span masking,
        insertion, rotation."""
        o, opts = self.o, self.o.options
        example_offsets = sentence_offsets[example_sentences]
        offsets = example_offsets - example_offsets[0]
        noised = original
        if opts.permute_sentences > 0:
            starts, lengths = permute_sentences(
                sentence_offsets[example_sentences[0] :] - example_offsets[0],
                example_sentences - example_sentences[0],
                opts.permute_sentences,
                rng["permute"],
            )
            noised = gather_ranges(original, starts, lengths)
        if opts.mask_ratio > 0:
            noised, offsets = self._mask(noised, offsets, rng)
        if opts.insert > 0:
            noised, offsets = insert_noise(
                noised, offsets, opts.insert, o.mask_id, opts.mask_random, o.random_pool, rng["insert"]
            )
        if opts.rotate > 0:
            noised, rotated = rotate(noised, offsets, opts.rotate, rng["rotate"])
            self.counters["rotated"] += int(rotated.sum())
        return noised, offsets

    def _examples(self, sentence_offsets, document_sentences, budget) -> np.ndarray:
        """Sentence boundaries of examples: whole sentences up to ``budget`` tokens, per document."""
        starts, stops = document_sentences[:-1], document_sentences[1:]
        boundaries = [starts[stops > starts]]
        for _, active, position in document_steps(starts, stops):
            # The longest run of whole sentences that fits the budget (at least one sentence).
            end = np.searchsorted(sentence_offsets, sentence_offsets[position[active]] + budget, side="right") - 1
            end = np.clip(end, position[active] + 1, stops[active])
            boundaries.append(end)
            position[active] = end
        return np.unique(np.concatenate(boundaries))

    def _mask(self, tokens, offsets, rng):
        o, opts = self.o, self.o.options
        subword = opts.mask_length == "subword"
        word_start = np.ones(len(tokens), dtype=bool) if subword else o.word_start[self.ids_of(tokens)]
        word_start[offsets[:-1][np.diff(offsets) > 0]] = True  # an example always starts a word
        words = (
            np.add.reduceat(word_start.astype(np.int64), offsets[:-1])
            if len(tokens)
            else np.zeros(len(offsets) - 1, np.int64)
        )
        words = np.where(np.diff(offsets) > 0, words, 0)
        budgets = np.ceil(words * opts.mask_ratio).astype(np.int64)
        if opts.mask_length == "span-poisson":
            lengths, example = poisson_spans(budgets, opts.poisson_lambda, rng["spans"])
        else:
            example = np.repeat(np.arange(len(budgets)), budgets)
            lengths = np.ones(len(example), dtype=np.int64)
        start_word = place_spans(lengths, example, words, rng["place"])
        random_span = rng["random"].random(len(lengths)) < opts.mask_random
        replacement = np.where(
            random_span, o.random_pool[rng["random"].integers(len(o.random_pool), size=len(lengths))], o.mask_id
        )
        token_random = None
        if opts.replace_length == -1:  # a random span gets a random token at every position
            token_random = o.random_pool[rng["random"].integers(len(o.random_pool), size=len(tokens))]
        self.counters["masked_words"] += int(lengths.sum())
        self.counters["mask_spans"] += int(np.sum(lengths > 0))
        self.counters["mask_inserts"] += int(np.sum(lengths == 0))
        return mask_spans(
            tokens,
            offsets,
            word_start,
            lengths,
            example,
            start_word,
            replacement.astype(tokens.dtype),
            opts.replace_length,
            random_span,
            token_random,
        )
