"""Contrastive pairs (SimCLR-style representation learning on text): an anchor view and a positive
view of the same document per row, and optionally K negatives from other documents.

The text is first cut into *units* of at most ``--seq-len`` tokens (room left for BOS/EOS):

- ``crop`` (Contriever, Izacard et al. 2021): units are the documents' pieces of ``--seq-len``
  tokens; anchor and positive are two independent random crops of a unit, each of ``int(n · ratio)``
  tokens with ratio uniform in [``--min-crop``, ``--max-crop``] (0.1, 0.5), so they may overlap;
- ``ict`` (Inverse Cloze Task, Lee et al. 2019): units are blocks of whole sentences up to
  ``--seq-len`` tokens; the anchor is one sentence of a block, the positive the block, from which that
  sentence is cut out with probability 0.9 (``--ict-keep 0.1``);
- ``adjacent``: units are windows of ``--window-sentences`` consecutive sentences; anchor = window i,
  positive = window i + 1 of the same document;
- ``dropout`` (SimCSE, unsupervised): the positive is the unit itself (the encoder's dropout is the
  augmentation).

``--augment delete:0.1,swap:0.1,crop:0.9`` applies token-level augmentations to every view
independently (kernels/contrastive.py). ``--pairs-per-document P`` makes P pairs per unit with
distinct anchors (crop, ict) or P anchor windows per ``--seq-len`` of a document (adjacent), so long
documents give more. ``--negatives K`` adds ``negative_1_ids`` … ``negative_K_ids``: units of other
documents of the same batch (never the anchor's own), viewed as positives are (a crop for crop).
Every draw is keyed to the data position. Rows hold ragged views, or with ``--views padded`` views
padded to ``--seq-len`` with a mask column each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ObjcliError
from ..kernels.contrastive import augment, crop, gather_views, other_documents
from ..kernels.ragged import add_boundary_tokens, split_long_items
from ..options import Options, option
from ..rows import DOCUMENT, ColumnSpec, Ragged, RowBatch
from .base import DocumentBatch, Objective, PartitionExamples, register
from .common import sentences_option
from .contrastive_views import PAIR_BUILDERS, Units, blocks, capped, single_views, windows
from .supply import Provides, Reads

PAIR_KINDS = ("crop", "ict", "adjacent", "dropout")
VIEW_LAYOUTS = ("ragged", "padded")
AUGMENTATIONS = ("delete", "swap", "crop")
APPLIES_TO = {
    "min_crop": ("crop",),
    "max_crop": ("crop",),
    "ict_keep": ("ict",),
    "window_sentences": ("adjacent",),
    "sentences": ("ict", "adjacent"),
}


@dataclass(frozen=True)
class ContrastiveOptions(Options):
    pairs: str = option(
        "crop", "How a pair is built: crop (Contriever), ict, adjacent, dropout (SimCSE).", choices=PAIR_KINDS
    )
    min_crop: float = option(0.1, "[crop] Shortest crop, a fraction of the unit.", minimum=0, maximum=1, exclusive=True)
    max_crop: float = option(0.5, "[crop] Longest crop, a fraction of the unit.", minimum=0, maximum=1)
    ict_keep: float = option(
        0.1, "[ict] Probability that the anchor sentence stays in the passage.", minimum=0, maximum=1
    )
    window_sentences: int = option(2, "[adjacent] Sentences per window.", minimum=1, maximum=10_000)
    sentences: str = sentences_option()
    augment: str = option("", "Token augmentations of every view, e.g. delete:0.1,swap:0.1,crop:0.9.")
    negatives: int = option(0, "Negatives per pair, from other documents of the same batch.", minimum=0, maximum=64)
    pairs_per_document: int = option(
        1, "Pairs per unit of --seq-len tokens, with distinct anchors.", minimum=1, maximum=1000
    )
    views: str = option(
        "ragged", "Views of their own lengths, or padded to --seq-len with a mask each.", choices=VIEW_LAYOUTS
    )

    def __post_init__(self):
        super().__post_init__()
        defaults = ContrastiveOptions.__dataclass_fields__
        for name, kinds in APPLIES_TO.items():
            if self.pairs not in kinds and getattr(self, name) != defaults[name].default:
                flag = "--" + name.replace("_", "-")
                raise ObjcliError(f"{flag} applies to --pairs {' or '.join(kinds)}, not {self.pairs}")
        if self.min_crop > self.max_crop:
            raise ObjcliError(f"--min-crop {self.min_crop:g} is above --max-crop {self.max_crop:g}")
        if self.pairs == "dropout" and self.pairs_per_document > 1:
            raise ObjcliError("--pairs-per-document: dropout pairs a unit with itself, one pair per unit")
        parse_augment(self.augment)


def parse_augment(spec: str) -> dict[str, float]:
    """``delete:0.1,swap:0.1,crop:0.9`` -> {"delete": 0.1, "swap": 0.1, "crop": 0.9} (checked)."""
    found = {"delete": 0.0, "swap": 0.0, "crop": 1.0}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition(":")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if name not in AUGMENTATIONS or not 0 <= number <= 1 or (name == "crop" and number == 0):
            raise ObjcliError(
                f"--augment {spec}: '{part}' is not one of delete:P, swap:P, crop:R with P in [0, 1] and R in (0, 1]"
            )
        found[name] = number
    return found


@register("contrastive")
class Contrastive(Objective):
    options_type = ContrastiveOptions
    default_eos = False
    supervision = "pairs"
    plans_rows = True  # views cut, dropped and swapped by keyed draws over lengths: tokens moved, never read
    # --provenance: a row's spans are the whole documents its views are cut from (crops, sentences)
    provenance = "documents"

    @classmethod
    def reads(cls, options) -> Reads:
        if options.pairs in ("ict", "adjacent"):  # units are sentences
            return Reads(Provides.SENTENCES, options.sentences)
        return super().reads(options)

    def __init__(self, context, tokenizer):
        super().__init__(context, tokenizer)
        o = self.options
        self.bos_id = tokenizer.resolve("bos") if context.bos else None
        self.eos_id = tokenizer.resolve("eos") if context.eos else None
        self.pad_id = tokenizer.resolve("pad") if o.views == "padded" else None
        self.room = context.seq_len - (self.bos_id is not None) - (self.eos_id is not None)
        if self.room < 2:
            raise ObjcliError(f"--seq-len {context.seq_len}: too short for a view")
        self.augmentation = parse_augment(o.augment)
        self.vocab_size = tokenizer.total_vocab_size

    @property
    def view_names(self) -> list[str]:
        return ["anchor", "positive", *(f"negative_{k}" for k in range(1, self.options.negatives + 1))]

    def example_columns(self) -> list[ColumnSpec]:
        kind = "fixed" if self.options.views == "padded" else "ragged"
        length = self.context.seq_len if kind == "fixed" else 0  # padded views: --seq-len each
        columns = [
            ColumnSpec(f"{v}_ids", kind, 0, self.vocab_size - 1, f"{v} view", family=f"{v}_ids", length=length)
            for v in self.view_names
        ]
        if kind == "fixed":
            columns += [
                ColumnSpec(
                    f"{v}_mask",
                    kind,
                    0,
                    1,
                    f"1 on the {v} view's tokens",
                    role="attention_mask",
                    family=f"{v}_ids",
                    length=length,
                )
                for v in self.view_names
            ]
        return columns

    def partition_examples(self, partition_index: int) -> PartitionExamples:
        return _ContrastivePartition(self, partition_index)


class _ContrastivePartition(PartitionExamples):
    def __init__(self, objective: Contrastive, partition: int):
        super().__init__(objective, partition)

    def examples(self, batch: DocumentBatch) -> RowBatch | None:
        o, key = self.o.options, batch.first_document
        units = self._units(batch)
        documents = len(batch.texts)
        anchors, positives, pair_units = PAIR_BUILDERS[o.pairs](self, units, key)
        views = {"anchor": anchors, "positive": positives}
        pair_documents = units.documents[pair_units]
        if o.negatives:
            picked = other_documents(
                pair_documents, units.documents, self.rng(key, "negatives").random((len(pair_units), o.negatives))
            )
            has_all = np.all(picked >= 0, axis=1)
            self.counters["pairs_without_negatives"] += int(np.sum(~has_all))
            views, pair_units, pair_documents, picked = (
                {k: v[has_all] for k, v in views.items()},
                pair_units[has_all],
                pair_documents[has_all],
                picked[has_all],
            )
            for k in range(o.negatives):
                views[f"negative_{k + 1}"] = self._negative_view(units, picked[:, k], key, k)
        with_pair = np.zeros(documents, dtype=bool)
        with_pair[pair_documents] = True
        self.counters["skipped:no_pair"] += int(np.sum(~with_pair))
        self.counters["pairs"] += len(pair_units)
        if not len(pair_units):
            return None
        rows = self._rows(units.tokens, views, pair_documents, key)
        # --provenance: the anchor's and positive's document, then each negative's
        negatives = units.documents[picked] if o.negatives else np.zeros((len(pair_units), 0), np.int64)
        row_documents = np.concatenate([pair_documents[:, None], negatives], axis=1).astype(np.int64)
        rows.columns[DOCUMENT] = Ragged(row_documents.ravel(), np.arange(len(pair_units) + 1) * (1 + o.negatives))
        return rows

    def _units(self, batch: DocumentBatch) -> Units:
        o, room = self.o.options, self.o.room
        if not self.o.tokenizes_itself:
            offsets, source = split_long_items(batch.offsets, room)
            lengths = np.diff(offsets)
            keep = lengths > 0
            return Units(batch.tokens, offsets[:-1][keep], lengths[keep], source[keep])
        tokens, cumulative, counts = batch.sentence_tokens(o.sentences)
        document_sentences = np.concatenate([[0], np.cumsum(counts)])
        if o.pairs == "adjacent":
            return windows(tokens, cumulative, document_sentences, o.window_sentences)
        return blocks(tokens, cumulative, document_sentences, room)

    def _negative_view(self, units: Units, picked: np.ndarray, key: int, k: int) -> np.ndarray:
        starts, lengths = units.starts[picked], units.lengths[picked]
        if self.o.options.pairs == "crop":
            rng = self.rng(key, f"negative{k}/crop")
            starts, lengths = crop(
                starts,
                lengths,
                rng.random(len(picked)),
                rng.random(len(picked)),
                self.o.options.min_crop,
                self.o.options.max_crop,
            )
        return capped(single_views(starts, lengths), self.o.room)

    def _rows(self, tokens: np.ndarray, views: dict[str, np.ndarray], pair_documents: np.ndarray, key: int) -> RowBatch:
        o, a = self.o, self.o.augmentation
        columns, total = {}, np.zeros(len(pair_documents), dtype=np.int64)
        for name, view in views.items():
            values, offsets = gather_views(tokens, view)
            if a["delete"] or a["swap"] or a["crop"] < 1:
                rng = self.rng(key, f"augment/{name}")
                draws = {
                    "crop_start": rng.random(len(view)),
                    "delete": rng.random(len(values)),
                    "swap": rng.random(len(values)),
                }
                values, offsets = augment(values, offsets, draws, a["delete"], a["swap"], a["crop"])
            values, offsets = add_boundary_tokens(values, offsets, o.bos_id, o.eos_id)
            columns[f"{name}_ids"] = Ragged(values, offsets)
            if o.options.views == "padded":
                columns[f"{name}_mask"] = Ragged(np.ones(len(values), dtype=np.int32), offsets)
            total += np.diff(offsets)
        first = np.ones(len(pair_documents), dtype=np.int64)
        first[1:] = pair_documents[1:] != pair_documents[:-1]
        padding = len(views) * o.context.seq_len - total if o.options.views == "padded" else np.zeros_like(total)
        return RowBatch(columns, tokens=total, padding=padding, documents=first)
